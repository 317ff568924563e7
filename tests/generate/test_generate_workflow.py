"""The generation rules in the DAG: paper config (hub model, 8 shards, vLLM GPUs) and the default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from maxk import paths as P

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )  # fmt: skip


def test_paper_dag_shards_merge_and_gpus():
    res = _dry_run(P.samples(1234, "base", "codecontests_test"), "--configfile", "config/paper.yaml")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "generate_shard        8" in out and "merge_samples         1" in out
    assert "--model-path Qwen/Qwen2.5-Coder-7B-Instruct" in out
    assert "gpu=1" in out
    # the prompt section's '{entry_point}' must reach the job verbatim (not as a wildcard)
    assert "{entry_point}" in out
    assert f"maxk generate merge --output {P.samples(1234, 'base', 'codecontests_test')}" in out


def test_default_dag_reads_the_shipped_base_and_trains_run_models_first():
    res = _dry_run(P.samples(1234, "base", "suite_test"), P.samples(1234, "grpo_continuous", "humaneval"))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for rule in ("train", "generate_shard"):
        assert f"rule {rule}:" in out, rule
    assert "rule base_model:" not in out  # the default reads models/base; it builds none
    # one shard (the default): the shard job writes the final file, no merge job
    assert "rule merge_samples:" not in out
    assert "--shard 0 --num-shards 1" in out and f"--output {P.samples(1234, 'base', 'suite_test')}" in out
    assert "--model-path models/base --model-name base" in out
    assert "--model-path results/seed1234/models/grpo_continuous --model-name grpo_continuous" in out
    assert "gpu=" not in out  # transformers backend on CPU: no GPU requested (a gpu resource only when > 0)
