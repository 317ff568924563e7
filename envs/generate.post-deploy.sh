#!/usr/bin/env bash
# Snakemake (--sdm conda) runs this inside the new environment, from a copy in .snakemake/conda/: no path
# relative to this file reaches the project, so it is named by the absolute path the Snakefile exports.
set -euo pipefail
python -m pip install --no-input -e "${MAXK_WORKFLOW_DIR:?exported by the Snakefile}"
