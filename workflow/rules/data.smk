# Data: download and verify, parse into a canonical table, cut the paper's fixed splits.


# A download that fails is recorded in fetch_status.json (with the error) instead of failing the
# run; once every fetch has been tried, the checkpoint `availability` lets the input functions in
# common.smk leave the unobtainable datasets' jobs out.
rule fetch:
    output:
        LAYOUT.fetch_status,
    log:
        LAYOUT.fetch_log,
    threads: SIZER.threads("fetch")
    resources:
        mem_mb=SIZER.mem_mb("fetch"),
        runtime=SIZER.runtime("fetch"),
    shell:
        "{CLI} fetch {wildcards.source:q} --record > {log:q} 2>&1"


checkpoint availability:
    input:
        fetch_statuses,
    output:
        AVAILABILITY,
    log:
        LAYOUT.availability_log,
    threads: SIZER.threads("availability")
    resources:
        mem_mb=SIZER.mem_mb("availability"),
        runtime=SIZER.runtime("availability"),
    shell:
        "printf '%s\\n' {input:q} > {output:q} 2> {log:q}"


rule prepare:
    input:
        lambda w: embedded_or_raw(w.source),
    output:
        table=LAYOUT.processed_table,
        schema=LAYOUT.processed_schema,
    log:
        LAYOUT.prepare_log,
    threads: SIZER.threads("prepare")
    resources:
        mem_mb=SIZER.mem_mb("prepare"),
        runtime=SIZER.runtime("prepare"),
    shell:
        "{CLI} prepare {wildcards.source:q} > {log:q} 2>&1"


rule split:
    input:
        processed_table,
    output:
        LAYOUT.split_manifest,
    log:
        LAYOUT.split_log,
    threads: SIZER.threads("split")
    resources:
        mem_mb=SIZER.mem_mb("split"),
        runtime=SIZER.runtime("split"),
    params:
        digest=lambda wildcards: PARAMS.split_digest(wildcards.paper, wildcards.dataset),
    shell:
        "{CLI} split {wildcards.paper:q} {wildcards.dataset:q} > {log:q} 2>&1"
