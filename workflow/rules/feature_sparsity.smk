# BiSHop's feature-sparsity curves (Fig. 4.1 right): per dataset x model x fold, retrain the main
# run's selected configuration on fewer and fewer features; then average into one plot. The
# profile's params.yaml `feature_sparsity` entry says what runs (none without one).

from tabrepro.feature_sparsity import (curve_files, plan_jobs, result_path,
                                                sparsity_settings)

SPARSITY = sparsity_settings(PARAMS)
SPARSITY_JOBS = plan_jobs(PARAMS, SPARSITY)


def sparsity_targets():
    """The averaged curves of the active profile (empty if it runs none)."""
    if SPARSITY is None:
        return []
    files = curve_files(PARAMS, SPARSITY.paper)
    return [str(files["png"]), str(files["csv"])]


def sparsity_main_run(wildcards):
    job = Job(wildcards.paper, wildcards.dataset, wildcards.model, int(wildcards.fold))
    source = PARAMS.source_of(job.paper, job.dataset)
    return {
        "metrics": str(LAYOUT.job_metrics.path(job)),
        "table": str(LAYOUT.processed_table.path(source=source)),
        "splits": str(LAYOUT.split_manifest.path(paper=job.paper, dataset=job.dataset)),
    }


rule feature_sparsity:
    input:
        unpack(sparsity_main_run),
    output:
        LAYOUT.sparsity_result,
    params:
        digest=lambda wildcards: SPARSITY.digest(PARAMS.seed) if SPARSITY else "",
    log:
        LAYOUT.sparsity_log,
    wildcard_constraints:
        paper=r"[^/]+",
        dataset=r"[^/]+",
        model=r"[^/]+",
        fold=r"\d+",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 720 * attempt,
        gpu=gpus,
    shell:
        "{CLI} sparsity {wildcards.paper} {wildcards.dataset} {wildcards.model}"
        " --fold {wildcards.fold} --metrics {input.metrics} --output {output}"
        " --threads {threads} > {log} 2>&1"


def sparsity_results(wildcards=None):
    """The curve jobs whose dataset could be obtained (a partial run plots what it has)."""
    return [str(result_path(PARAMS, job)) for job in SPARSITY_JOBS if obtainable(job.paper, job.dataset)]


rule feature_sparsity_plot:
    input:
        sparsity_results,
    output:
        png=LAYOUT.sparsity_curves_png,
        csv=LAYOUT.sparsity_curves_csv,
        summary=LAYOUT.sparsity_summary,
    log:
        LAYOUT.sparsity_plot_log,
    shell:
        "{CLI} sparsity-plot {wildcards.paper} > {log} 2>&1"
