# The static HTML report of the whole run: every table with the paper's numbers, figures, compute
# cost, NPT's analysis experiments and provenance (tabrepro.reporting.html). One page plus PNGs.

from tabrepro.analysis.runner import plan_targets as _analysis_plan


rule report_html:
    input:
        tables=all_tables(),
        results=[path for paper in SELECTED_PAPERS for path in paper_results(paper)],
        analysis=_analysis_plan(PARAMS),
        sparsity=sparsity_targets(),
    output:
        f"{RESULTS}/report/index.html",
    params:
        outdir=f"{RESULTS}/report",
    log:
        f"{LOGS}/report/html.log",
    shell:
        "{CLI} report --output-dir {params.outdir} > {log} 2>&1"
