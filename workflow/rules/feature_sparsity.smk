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
        "{CLI} sparsity {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q}"
        " --fold {wildcards.fold:q} --metrics {input.metrics:q} --output {output:q}"
        " --threads {threads} > {log:q} 2>&1"


# The folds of the models that params.yaml `folds_in_one_job` lists run one after another in one
# job per paper x dataset x model (their outputs are the folds' own files), as in train.smk.
for _group in SPARSITY_GROUPS:

    rule:
        name:
            f"feature_sparsity_folds_{_group.paper}_{_group.dataset}"
        input:
            unpack(lambda wildcards, group=_group: sparsity_main_runs(wildcards, group.folds)),
        output:
            [fold_pattern(LAYOUT.sparsity_result, fold) for fold in _group.folds],
        log:
            LAYOUT.sparsity_folds_log,
        wildcard_constraints:
            paper=one_of([_group.paper]),
            dataset=one_of([_group.dataset]),
            model=one_of(_group.models),
        threads: SIZER.threads("feature_sparsity")
        resources:
            mem_mb=SIZER.mem_mb("feature_sparsity"),
            runtime=SIZER.runtime("feature_sparsity"),
            gpu=gpus,
        params:
            digest=lambda wildcards: SPARSITY.digest(PARAMS.seed),
            folds=" ".join(map(str, _group.folds)),
        shell:
            "{CLI} sparsity {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q}"
            " --fold {params.folds} --threads {threads} > {log:q} 2>&1"

    workflow.ruleorder(f"feature_sparsity_folds_{_group.paper}_{_group.dataset}", "feature_sparsity")


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
        "{CLI} sparsity-plot {wildcards.paper:q} > {log:q} 2>&1"
