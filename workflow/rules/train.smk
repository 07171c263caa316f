# One job per paper x dataset x model x fold: tune on validation, score once on test.


rule train:
    input:
        table=processed_table,
        splits=f"{DATA}/splits/{{paper}}/{{dataset}}/splits.json",
    output:
        f"{RESULTS}/{{paper}}/{{dataset}}/{{model}}/fold{{fold}}/metrics.json",
    params:
        # Reruns the job when any parameter its result depends on changes (and only then).
        digest=job_digest,
    log:
        f"{LOGS}/train/{{paper}}/{{dataset}}/{{model}}/fold{{fold}}.log",
    wildcard_constraints:
        fold=r"\d+",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "{CLI} train {wildcards.paper} {wildcards.dataset} {wildcards.model} {wildcards.fold}"
        " --threads {threads} --output {output} > {log} 2>&1"
