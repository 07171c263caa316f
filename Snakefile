# tabrepro workflow: fetch -> prepare -> split -> train (dataset x model x fold) -> tables, the
# reproduction scorecard, NPT's analysis experiments, BiSHop's feature-sparsity curves -> one HTML
# report (results/report/index.html). A dataset that cannot be downloaded is recorded and left out.
#
#   snakemake --cores 2 all                             quick profile (the default in params.yaml)
#   snakemake --cores 2 --config profile=paper -- all   every dataset and model of both papers
#   snakemake --cores 1 results/npt/breast_cancer/xgboost/fold3/metrics.json   one job
#
# Rules are thin calls of the `tabrepro` CLI; the logic lives in the package (src/tabrepro).

import sys

from snakemake.utils import min_version

from tabrepro.config import ParamsError, read_params_file

min_version("9.0")

# Read once before `configfile:` because Snakemake's own message for a YAML syntax error names no
# line; this one does, as `tabrepro validate` does.
try:
    read_params_file("params.yaml")
except ParamsError as error:
    print(f"tabrepro: error: {error}", file=sys.stderr)
    sys.exit(2)


# params.yaml is checked against src/tabrepro/data/params.schema.yaml (and its cross-references)
# by tabrepro.config when common.smk loads it: a bad key stops the workflow with one line naming it.
configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/feature_sparsity.smk"
include: "workflow/rules/scorecard.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        all_tables(),
        LAYOUT.scorecard_summary,
        LAYOUT.report_index,


rule tables:  # the papers' tables only (DVC's `tables` stage)
    input:
        all_tables(),
