# Data: download and verify, parse into a canonical table, cut the paper's fixed splits.


rule fetch:
    output:
        f"{DATA}/raw/{{source}}/fetched.txt",
    log:
        f"{LOGS}/fetch/{{source}}.log",
    resources:
        runtime=120,
    shell:
        "{CLI} fetch {wildcards.source} > {output} 2> {log}"


rule prepare:
    input:
        lambda w: embedded_or_raw(w.source),
    output:
        table=f"{DATA}/processed/{{source}}/table.parquet",
        schema=f"{DATA}/processed/{{source}}/schema.json",
    log:
        f"{LOGS}/prepare/{{source}}.log",
    shell:
        "{CLI} prepare {wildcards.source} > {log} 2>&1"


rule split:
    input:
        processed_table,
    output:
        f"{DATA}/splits/{{paper}}/{{dataset}}/splits.json",
    params:
        digest=lambda wildcards: PARAMS.split_digest(wildcards.paper, wildcards.dataset),
    log:
        f"{LOGS}/split/{{paper}}/{{dataset}}.log",
    shell:
        "{CLI} split {wildcards.paper} {wildcards.dataset} > {log} 2>&1"
