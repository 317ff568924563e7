"""The generation rules in the DAG: paper config (hub model, 8 shards, vLLM GPUs) and the default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )  # fmt: skip


def test_paper_dag_shards_merge_and_gpus():
    res = _dry_run("results/samples/base/codecontests_test.parquet", "--configfile", "config/paper.yaml")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "generate_shard        8" in out and "merge_samples         1" in out
    assert "--model-path Qwen/Qwen2.5-Coder-7B-Instruct" in out
    assert "gpu=1" in out
    # the prompt section's '{entry_point}' must reach the job verbatim (not as a wildcard)
    assert "{entry_point}" in out
    assert "maxk generate merge --output results/samples/base/codecontests_test.parquet" in out


def test_default_dag_resolves_run_models_to_results_models():
    res = _dry_run("results/samples/myrun/suite_test.parquet")
    out = res.stdout + res.stderr
    # no rule builds results/models/myrun in this branch: the DAG must ask for exactly that input
    assert "results/models/myrun" in out, out
