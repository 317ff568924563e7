"""Seeds as a DAG dimension, planned by Snakemake itself: N seeds plan N times every seed-dependent job,
the jobs made once once, and one across-seed job (dry runs of both scales, from one seed to three)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
#: the rules whose jobs do not depend on the seed (made once whatever `replicates` holds)
ONCE = {"data_build", "analysis_lab", "environment", "all"}


def _job_stats(*args: str) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", *args],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    table = (res.stdout + res.stderr).split("Job stats:")[1].split("total")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, flags=re.M)}


@pytest.mark.parametrize("scale", [[], ["--configfile", "config/paper.yaml"]], ids=["embedded", "paper"])
def test_three_seeds_plan_three_times_the_seed_jobs_and_no_more(scale):
    """Three times every seed job but the `analysis.checks` pairs' (the first seed's only)."""
    from maxk.config import load_config
    from maxk.workflow.targets import metrics_files

    one = _job_stats(*scale, "--config", "replicates=[1234]")
    three = _job_stats(*scale, "--config", "replicates=[1234,2,3]", "replicate_outputs=all")
    config = load_config(ROOT / (scale[1] if scale else "config/config.yaml"))
    checks = metrics_files(config["analysis"].get("checks") or [], 1234)
    alone = _job_stats(*scale, *checks, "--config", "replicates=[1234]") if checks else {}
    per_check = {rule: n for rule, n in alone.items() if rule not in ONCE}  # jobs only the checks need
    assert bool(per_check) == bool(checks)
    assert "analysis_across_seeds" not in one and three.pop("analysis_across_seeds") == 1
    assert set(one) == set(three) and set(one) >= ONCE
    for rule, count in one.items():
        assert three[rule] == (count if rule in ONCE else 3 * count - 2 * per_check.get(rule, 0)), rule


def test_pooled_replicates_sample_the_call_set_on_the_first_seed_only():
    """The embedded default (``replicate_outputs: pooled``): seeds 2 and 3 train every run and sample
    and score the claims' dataset, but no paper-layout table, figure or ``suite_call`` sample."""
    plan = _job_stats("--config", "replicates=[1234,2,3]")
    full = _job_stats("--config", "replicates=[1234,2,3]", "replicate_outputs=all")
    assert plan["train"] == full["train"] and plan["generate_shard"] < full["generate_shard"]
    assert plan["analysis_claims"] == 3 and full["analysis_table"] == 3 * plan["analysis_table"]
