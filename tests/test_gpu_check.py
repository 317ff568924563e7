"""``benchmarks/gpu_check.py`` (the GPU check of ``../shared/gpu-check.md``) rehearsed on the CPU with
``--tiny``: the script a lent GPU runs must not first break on its own code, which costs device time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from guard import HANG_GUARD_S

from maxk.data.suite import generate_suite
from maxk.io import write_jsonl

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_rehearsal_trains_every_estimator_checks_generation_and_the_launch(tmp_path):
    problems = generate_suite("stdio", 40, 0)
    data, test = tmp_path / "suite_rl.jsonl.gz", tmp_path / "suite_test.jsonl.gz"
    write_jsonl(data, problems[:32])
    write_jsonl(test, problems[32:])
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "benchmarks/gpu_check.py"), "--out", str(out), "--data", str(data)]
    cmd += ["--test", str(test), "--tiny", "--varied-rewards", "--launch"]
    # the script's training budget (300 s by default: a GPU machine's time is lent) is a hang guard here:
    # a loaded machine spent the default on the tiny runs and skipped the last estimator
    cmd += ["--train-budget", str(HANG_GUARD_S)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((out / "gpu_check.json").read_text())

    assert record["rewards"].startswith("VariedScorer")
    train = record["train"]
    off_policy = ("offpolicy_bon", "offpolicy_bon_exact", "offpolicy_bon_onstd", "offpolicy_bon_exact_onstd")
    assert set(train) == {
        "grpo_continuous", "grpo_binary", "bon_max_mean", "bon_max_second", "bon_loo1", "bon_mean",
        "bon_subset_std", "bon_mean_centered", *off_policy,
    }  # fmt: skip
    for run, r in train.items():
        assert r["status"] == "ok", (run, r.get("trace"))
        assert r["all_finite"] and r["rows_match_steps"], run
    for run in off_policy:  # 3 PPO iterations: one batch, three updates
        assert train[run]["steps"] == 4 and len(train[run]["delta_iters"]) == 3
    assert train["grpo_continuous"]["last"]["grad_norm"] > 0  # varied rewards reach the gradient
    gen = record["generate"]
    assert gen["deterministic"] is True
    assert gen["sum_logprob_rel_err_max"] < 1e-4 and gen["mean_entropy_rel_err_max"] < 1e-4  # float32
    assert gen["decode_loop"]["samples"] == 4 * gen["samples_per_problem"]
    launched = record["launch"]  # the train rule's command on a CPU: `maxk train` (no accelerate)
    assert set(launched) == {"maxk_train"}
    job = launched["maxk_train"]
    assert job["rc"] == 0, job["log_tail"]
    assert job["steps"] == 2 and job["all_finite"] and job["model_saved"]


def test_gpu_check_names_a_missing_data_file_and_the_command_that_builds_it(tmp_path):
    """Before any model is built: the default --data and --test are built by `maxk data build`, which the
    message gives; nothing is written."""
    script, out = str(ROOT / "benchmarks/gpu_check.py"), tmp_path / "out"
    missing = tmp_path / "suite_rl.jsonl.gz"
    proc = subprocess.run([sys.executable, script, "--out", str(out), "--data", str(missing)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"--data {missing}: no such file" in proc.stderr
    assert "maxk data build --name suite_rl && maxk data build --name suite_test" in proc.stderr
    assert not out.exists()
    write_jsonl(missing, generate_suite("stdio", 2, 0))
    absent = tmp_path / "nothing.jsonl.gz"
    cmd = [sys.executable, script, "--out", str(out), "--data", str(missing), "--test", str(absent)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2 and f"--test {absent}: no such file" in proc.stderr, proc.stderr[-2000:]
    assert not out.exists()
