# maxk: one DAG from raw data to the paper's tables and figures.
#   laptop (embedded default):  snakemake --cores all
#   paper scale on Slurm:       snakemake --profile slurm   (the profile names config/paper.yaml)
# The stages live in workflow/rules/*.smk; paths, final targets and each job's config slice live in
# the package (src/maxk/workflow/), shared by the rules and the tests.
import os

from snakemake.utils import min_version

from maxk.config import compose, validate_config
from maxk.workflow import allocator, jobserver

min_version("9.0")


# The embedded default applies only when no --configfile is given: Snakemake would otherwise merge
# the given file INTO the default, leaking the default's datasets into e.g. the paper config. An
# overlay on the default names both: --configfile config/config.yaml my.yaml.
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


# The scale files (merged by Snakemake, --config values last) laid over the experiment file they name
# (config/experiment.yaml: runs, tables, figures, claims); then every key checked, and every default
# filled in, from workflow/schemas/ (maxk.config): a typo fails here, before any job, naming the key.
validate_config(compose(config, root=workflow.basedir))


# envs/*.post-deploy.sh install this project into each conda environment (--sdm conda) by this path.
os.environ.update(MAXK_WORKFLOW_DIR=workflow.basedir)


report: "workflow/report/workflow.rst"


# A local run's jobs keep the memory they free for reuse (glibc's settings, where the user set none; read by
# each process at its start, so set before the job server and every job): maxk.workflow.allocator.
if workflow.local_exec and not jobserver.gpu_present():
    allocator.apply(os.environ)


# Warm job starts (config key warm_start): a local run's jobs fork from one interpreter that has imported
# what they import (maxk.workflow.jobserver; its log beside the jobs'). A cluster's jobs start cold.
onstart:
    if config["warm_start"] and workflow.local_exec:
        os.makedirs(P.LOGS, exist_ok=True)
        jobserver.start(os.getcwd(), log=os.path.join(P.LOGS, "job_server.log"))


onsuccess:
    jobserver.stop()


onerror:
    jobserver.stop()


include: "workflow/rules/common.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/score.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
