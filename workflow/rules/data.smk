# Data: download and verify, parse into a canonical table, cut the paper's fixed splits.


# A download that fails is recorded in fetch_status.json (with the error) instead of failing the
# run; once every fetch has been tried, the checkpoint `availability` lets the input functions in
# common.smk leave the unobtainable datasets' jobs out.
rule fetch:
    output:
        LAYOUT.fetch_status,
    log:
        LAYOUT.fetch_log,
    resources:
        runtime=120,
    shell:
        "{CLI} fetch {wildcards.source} --record > {log} 2>&1"


checkpoint availability:
    input:
        fetch_statuses,
    output:
        AVAILABILITY,
    log:
        LAYOUT.availability_log,
    shell:
        "printf '%s\\n' {input} > {output} 2> {log}"


rule prepare:
    input:
        lambda w: embedded_or_raw(w.source),
    output:
        table=LAYOUT.processed_table,
        schema=LAYOUT.processed_schema,
    log:
        LAYOUT.prepare_log,
    shell:
        "{CLI} prepare {wildcards.source} > {log} 2>&1"


rule split:
    input:
        processed_table,
    output:
        LAYOUT.split_manifest,
    log:
        LAYOUT.split_log,
    params:
        digest=lambda wildcards: PARAMS.split_digest(wildcards.paper, wildcards.dataset),
    shell:
        "{CLI} split {wildcards.paper} {wildcards.dataset} > {log} 2>&1"
