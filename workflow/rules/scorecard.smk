# The reproduction scorecard: every cell of the profile's tables judged against the paper's value
# (consistent / differs / undetermined / not run, with the reason). It reads the tables' inputs and
# the fetch records, so datasets that could not be downloaded are listed with their error.


rule scorecard:
    input:
        tables=all_tables(),
        results=all_results,
        fetched=fetch_statuses,
    output:
        md=LAYOUT.scorecard_markdown,
        csv=LAYOUT.scorecard_csv,
        summary=LAYOUT.scorecard_summary,
    log:
        LAYOUT.scorecard_log,
    threads: SIZER.threads("scorecard")
    resources:
        mem_mb=SIZER.mem_mb("scorecard"),
        runtime=SIZER.runtime("scorecard"),
    shell:
        "{CLI} scorecard > {log:q} 2>&1"
