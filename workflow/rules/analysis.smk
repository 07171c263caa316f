# NPT's analysis experiments (Kossen et al. 2021, §4 and App. B). Corruption, deletion and
# attention read one fold's trained NPT (weights.pt + selected_config in metrics.json); lookup
# trains its own small NPT on a special training set. Sizes come from params.yaml `analysis:`
# (per profile); `analysis_targets` lists the files the profile asks for (datasets that could be obtained).

from tabrepro.analysis.runner import active_settings, lookup_input_files
from tabrepro.analysis.settings import FOLD_EXPERIMENTS, experiment_digest

ANALYSIS = active_settings(PARAMS)
ANALYSIS_PAPER = (ANALYSIS or active_settings(PARAMS, required=True)).paper


def analysis_targets(wildcards=None):
    """Every analysis result file of the active profile whose dataset could be obtained."""
    from tabrepro.analysis.runner import plan_fold_jobs, result_path
    from tabrepro.analysis.settings import SYNTHETIC

    if ANALYSIS is None:
        return []
    targets = [str(result_path(PARAMS, experiment, dataset, fold))
               for experiment, dataset, fold in plan_fold_jobs(PARAMS, ANALYSIS)
               if obtainable(ANALYSIS_PAPER, dataset)]
    lookup = ANALYSIS.lookup.dataset
    if "lookup" in ANALYSIS.experiments and (lookup == SYNTHETIC or obtainable(ANALYSIS_PAPER, lookup)):
        targets.append(str(result_path(PARAMS, "lookup", lookup)))
    return targets


def analysis_digest(wildcards):
    """Reruns an experiment when its settings (or the root seed) change."""
    settings = ANALYSIS or active_settings(PARAMS, required=True)
    experiment = getattr(wildcards, "experiment", "lookup")
    return experiment_digest(settings, experiment, PARAMS.seed)


def trained_npt(wildcards):
    job = Job(ANALYSIS_PAPER, wildcards.dataset, "npt", int(wildcards.fold))
    source = PARAMS.source_of(ANALYSIS_PAPER, wildcards.dataset)
    return {
        "metrics": str(LAYOUT.job_metrics.path(job)),
        "weights": str(LAYOUT.job_weights.path(job)),
        "table": str(LAYOUT.processed_table.path(source=source)),
        "splits": str(LAYOUT.split_manifest.path(paper=ANALYSIS_PAPER, dataset=wildcards.dataset)),
    }


rule analyse_fold:
    input:
        unpack(trained_npt),
    output:
        LAYOUT.analysis_fold_result,
    params:
        paper=ANALYSIS_PAPER,
        digest=analysis_digest,
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
    log:
        LAYOUT.analysis_fold_log,
    wildcard_constraints:
        experiment="|".join(FOLD_EXPERIMENTS),
        dataset=r"[^/]+",
        fold=r"\d+",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "{CLI} analyse {params.paper} {wildcards.dataset} {wildcards.experiment}"
        " --fold {wildcards.fold} --metrics {input.metrics} --weights {input.weights}"
        " --output-dir {params.outdir} --threads {threads} > {log} 2>&1"


rule analyse_lookup:
    input:
        lambda wildcards: lookup_input_files(PARAMS, wildcards.dataset),
    output:
        LAYOUT.analysis_lookup_result,
    params:
        paper=ANALYSIS_PAPER,
        digest=analysis_digest,
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
    log:
        LAYOUT.analysis_lookup_log,
    wildcard_constraints:
        dataset=r"[^/]+",
    # One thread: the lookup NPT is tiny, and a second thread made its steps ~9x slower on CPU.
    threads: 1
    resources:
        mem_mb=4000,
        runtime=480,
    shell:
        "{CLI} analyse {params.paper} {wildcards.dataset} lookup"
        " --output-dir {params.outdir} --threads {threads} > {log} 2>&1"
