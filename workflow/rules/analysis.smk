# NPT's analysis experiments (Kossen et al. 2021, §4 and App. B). Corruption, deletion and
# attention read one fold's trained NPT (weights.pt + selected_config in metrics.json); lookup
# trains its own small NPT on a special training set. Sizes come from params.yaml `analysis:`
# (per profile); `analysis_targets` (common.smk) lists the files the profile asks for (datasets that
# could be obtained).


rule analyse_fold:
    input:
        unpack(trained_npt),
    output:
        LAYOUT.analysis_fold_result,
    log:
        LAYOUT.analysis_fold_log,
    wildcard_constraints:
        experiment="|".join(FOLD_EXPERIMENTS),
        dataset=r"[^/]+",
        fold=r"\d+",
    threads: SIZER.threads("analyse_fold")
    resources:
        mem_mb=SIZER.mem_mb("analyse_fold"),
        runtime=SIZER.runtime("analyse_fold"),
    params:
        paper=ANALYSIS_PAPER,
        digest=analysis_digest,
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "{CLI} analyse {params.paper:q} {wildcards.dataset:q} {wildcards.experiment:q}"
        " --fold {wildcards.fold:q} --metrics {input.metrics:q} --weights {input.weights:q}"
        " --output-dir {params.outdir:q} --threads {threads} > {log:q} 2>&1"


rule analyse_lookup:
    input:
        lambda wildcards: lookup_input_files(PARAMS, wildcards.dataset),
    output:
        LAYOUT.analysis_lookup_result,
    log:
        LAYOUT.analysis_lookup_log,
    wildcard_constraints:
        dataset=r"[^/]+",
    # One thread (not params.yaml's): the lookup NPT is tiny, and a second thread made its steps
    # ~9x slower on CPU.
    threads: 1
    resources:
        mem_mb=SIZER.mem_mb("analyse_lookup"),
        runtime=SIZER.runtime("analyse_lookup"),
    params:
        paper=ANALYSIS_PAPER,
        digest=analysis_digest,
        outdir=lambda wildcards, output: os.path.dirname(output[0]),
    shell:
        "{CLI} analyse {params.paper:q} {wildcards.dataset:q} lookup"
        " --output-dir {params.outdir:q} --threads {threads} > {log:q} 2>&1"
