# tabrepro workflow: fetch -> prepare -> split -> train (dataset x model x fold) -> tables.
#
#   snakemake --cores 2 all                          quick profile (the default in params.yaml)
#   snakemake --cores 2 --config profile=paper all   every dataset and model of both papers
#   snakemake --cores 1 results/npt/breast_cancer/xgboost/fold3/metrics.json   one job
#
# Rules are thin calls of the `tabrepro` CLI; the logic lives in the package (src/tabrepro).

from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "params.yaml"
validate(config, "workflow/schemas/params.schema.yaml")

include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        all_tables(),
