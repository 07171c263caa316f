# BiSHop's feature-sparsity curves (Fig. 4.1 right): per dataset x model x fold, retrain the main
# run's selected configuration on fewer and fewer features; then average into one plot. The
# profile's params.yaml `feature_sparsity` entry says what runs (none without one; `sparsity_targets`
# in common.smk).


rule feature_sparsity:
    input:
        unpack(sparsity_main_run),
    output:
        LAYOUT.sparsity_result,
    log:
        LAYOUT.sparsity_log,
    wildcard_constraints:
        paper=r"[^/]+",
        dataset=r"[^/]+",
        model=r"[^/]+",
        fold=r"\d+",
    threads: SIZER.threads("feature_sparsity")
    resources:
        mem_mb=SIZER.mem_mb("feature_sparsity"),
        runtime=SIZER.runtime("feature_sparsity"),
        gpu=gpus,
    params:
        digest=lambda wildcards: SPARSITY.digest(PARAMS.seed) if SPARSITY else "",
    shell:
        "{CLI} sparsity {wildcards.paper} {wildcards.dataset} {wildcards.model}"
        " --fold {wildcards.fold} --metrics {input.metrics} --output {output}"
        " --threads {threads} > {log} 2>&1"


rule feature_sparsity_plot:
    input:
        sparsity_results,
    output:
        png=LAYOUT.sparsity_curves_png,
        csv=LAYOUT.sparsity_curves_csv,
        summary=LAYOUT.sparsity_summary,
    log:
        LAYOUT.sparsity_plot_log,
    threads: SIZER.threads("feature_sparsity_plot")
    resources:
        mem_mb=SIZER.mem_mb("feature_sparsity_plot"),
        runtime=SIZER.runtime("feature_sparsity_plot"),
    shell:
        "{CLI} sparsity-plot {wildcards.paper} > {log} 2>&1"
