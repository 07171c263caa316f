# The static HTML report of the whole run: the reproduction scorecard first, then every table with
# the paper's numbers, figures, compute cost, NPT's analysis experiments and provenance
# (tabrepro.reporting.html). One page plus PNGs.


rule report_html:
    input:
        tables=all_tables(),
        scorecard=f"{RESULTS}/scorecard/summary.json",
        results=all_results,
        analysis=analysis_targets,
        sparsity=sparsity_targets(),
    output:
        f"{RESULTS}/report/index.html",
    params:
        outdir=f"{RESULTS}/report",
    log:
        f"{LOGS}/report/html.log",
    shell:
        "{CLI} report --output-dir {params.outdir} > {log} 2>&1"
