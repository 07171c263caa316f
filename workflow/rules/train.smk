# Training. In-job models (the CPU baselines) tune every configuration inside one job per
# paper x dataset x model x fold, or inside one train_folds job for all the profile's folds of a
# dataset (params.yaml `folds_in_one_job`). Per-configuration models (NPT, BiSHop) run their configurations
# in train_batch jobs (params.yaml `configs_per_job` each, default one), each configuration
# resumable from a state file that is not a declared output, then a selection job picks the
# configuration on validation and scores it once on test. Threads, memory and run time come from
# params.yaml `resources` (training jobs sized by the compute plan) and grow with each retry.


# What every training job writes beside its log: metrics.json (last) and the test rows as scored.
FOLD_OUTPUTS = (LAYOUT.job_metrics, LAYOUT.job_test_predictions)


rule train:
    input:
        table=processed_table,
        splits=LAYOUT.split_manifest,
    output:
        metrics=LAYOUT.job_metrics,
        predictions=LAYOUT.job_test_predictions,
    log:
        LAYOUT.train_log,
    wildcard_constraints:
        model=one_of(IN_JOB_MODELS),
        fold=r"\d+",
    threads: SIZER.threads("train")
    resources:
        mem_mb=SIZER.mem_mb("train"),
        runtime=SIZER.runtime("train"),
        gpu=gpus,
    params:
        # Reruns the job when any parameter its result depends on changes (and only then).
        digest=job_digest,
    shell:
        "{CLI} train {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q} {wildcards.fold:q}"
        " --threads {threads} --output {output.metrics:q} > {log:q} 2>&1"


# One rule per paper x dataset whose folds train together: its outputs are the folds' own
# metrics.json and test predictions, so targets, tables and reruns name a fold's file as before (asking for one fold
# runs the dataset's job). It takes precedence over `train` for the models it covers.
for _group in FOLD_GROUPS:

    rule:
        name:
            f"train_folds_{_group.paper}_{_group.dataset}"
        input:
            table=processed_table,
            splits=LAYOUT.split_manifest,
        output:
            [fold_pattern(pattern, fold) for pattern in FOLD_OUTPUTS for fold in _group.folds],
        log:
            LAYOUT.train_folds_log,
        wildcard_constraints:
            paper=one_of([_group.paper]),
            dataset=one_of([_group.dataset]),
            model=one_of(_group.models),
        # Started before other ready jobs: on a few local cores a run ends sooner when its
        # longest CPU jobs do not start last (make run: TabNet's ten folds, ~3 minutes).
        priority: 1
        threads: SIZER.threads("train_folds")
        resources:
            mem_mb=SIZER.mem_mb("train_folds"),
            runtime=SIZER.runtime("train_folds"),
            gpu=gpus,
        params:
            digest=folds_digest,
        shell:
            "{CLI} train-folds {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q}"
            " --threads {threads} > {log:q} 2>&1"

    workflow.ruleorder(f"train_folds_{_group.paper}_{_group.dataset}", "train")


rule train_batch:
    input:
        table=processed_table,
        splits=LAYOUT.split_manifest,
    output:
        LAYOUT.config_batch,
    log:
        LAYOUT.config_batch_log,
    wildcard_constraints:
        model=one_of(PER_CONFIG_MODELS),
        fold=r"\d+",
        batch=r"\d+",
    threads: SIZER.threads("train_batch")
    resources:
        mem_mb=SIZER.mem_mb("train_batch"),
        runtime=SIZER.runtime("train_batch"),
        gpu=gpus,
    params:
        digest=job_digest,
    shell:
        # Snakemake clears the log before each attempt; a resumed attempt logs "resumed from step N".
        "{CLI} train-batch {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q} {wildcards.fold:q}"
        " {wildcards.batch:q} --threads {threads} --output {output:q} >> {log:q} 2>&1"


rule select_config:
    input:
        config_batches,
    output:
        metrics=LAYOUT.job_metrics,
        weights=LAYOUT.job_weights,
        predictions=LAYOUT.job_test_predictions,
    log:
        LAYOUT.select_log,
    wildcard_constraints:
        model=one_of(PER_CONFIG_MODELS),
        fold=r"\d+",
    threads: SIZER.threads("select_config")
    resources:
        mem_mb=SIZER.mem_mb("select_config"),
        runtime=SIZER.runtime("select_config"),
        # Cheap bookkeeping, unless the protocol retrains the winner with further seeds (repeats).
        gpu=lambda wildcards: gpus(wildcards) if retrains(wildcards) else 0,
    params:
        digest=job_digest,
    shell:
        "{CLI} select {wildcards.paper:q} {wildcards.dataset:q} {wildcards.model:q} {wildcards.fold:q}"
        " --threads {threads} --output {output.metrics:q} >> {log:q} 2>&1"
