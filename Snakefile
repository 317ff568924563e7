# maxk: one DAG from raw data to the paper's tables and figures.
#   laptop (embedded default):  snakemake --cores all
#   paper scale on Slurm:       snakemake --configfile config/paper.yaml --profile profiles/slurm
# The stages live in workflow/rules/*.smk; each appends its final outputs to ALL_TARGETS.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/analysis.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
