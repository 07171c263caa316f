# Aggregate every selected job's metrics into the paper's tables (Markdown, LaTeX, CSV).

for _paper in SELECTED_PAPERS:

    rule:
        name:
            f"tables_{_paper}"
        input:
            lambda w, paper=_paper: paper_results(paper),
        output:
            expand(
                LAYOUT.table,
                paper=_paper,
                table=list(PARAMS.paper(_paper)["tables"]),
                ext=["md", "tex", "csv"],
            ),
        log:
            str(LAYOUT.tables_log.path(paper=_paper)),
        threads: SIZER.threads("tables")
        resources:
            mem_mb=SIZER.mem_mb("tables"),
            runtime=SIZER.runtime("tables"),
        params:
            paper=_paper,
        shell:
            "{CLI} tables {params.paper:q} > {log:q} 2>&1"
