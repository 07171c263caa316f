# The static HTML report of the whole run: the reproduction scorecard first, then every table with
# the paper's numbers, figures, compute cost, NPT's analysis experiments and provenance
# (tabrepro.reporting.html). One page plus PNGs.


rule report_html:
    input:
        tables=all_tables(),
        scorecard=LAYOUT.scorecard_summary,
        results=all_results,
        analysis=analysis_targets,
        sparsity=sparsity_targets(),
    output:
        LAYOUT.report_index,
    log:
        LAYOUT.report_log,
    threads: SIZER.threads("report_html")
    resources:
        mem_mb=SIZER.mem_mb("report_html"),
        runtime=SIZER.runtime("report_html"),
    params:
        outdir=str(LAYOUT.report_dir),
    shell:
        "{CLI} report --output-dir {params.outdir:q} > {log:q} 2>&1"
