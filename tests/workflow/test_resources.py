"""Retried jobs ask for more memory and time, up to the caps; GPU rules do not grow without them."""

from __future__ import annotations

from pathlib import Path

import yaml

from maxk.workflow.resources import UNBOUNDED, retry_resources

ROOT = Path(__file__).resolve().parents[2]


def _asks(res, attempts=(1, 2, 3)):
    out = retry_resources(res)
    return [(out["mem_mb"](None, a), out["runtime"](None, a)) for a in attempts], out


def test_cpu_rules_grow_with_each_attempt():
    asks, out = _asks({"threads": 4, "mem_mb": 1000, "runtime": 30, "slurm_partition": "cpu"})
    assert asks == [(1000, 30), (2000, 60), (3000, 90)]
    assert "gpu" not in out and "threads" not in out and out["slurm_partition"] == "cpu"
    assert "nodes" not in out


def test_gpu_rules_grow_only_up_to_the_caps_the_user_sets():
    asks, out = _asks({"mem_mb": 900000, "runtime": 1440, "gpu": 8})
    assert asks == [(900000, 1440)] * 3 and out["gpu"] == 8  # no caps: no growth
    assert out["nodes"] == 1  # one accelerate launch reaches only its own node's GPUs
    asks, _ = _asks({"mem_mb": 900000, "runtime": 1440, "gpu": 8, "max_runtime": 2880, "max_mem_mb": 1000000})
    assert asks == [(900000, 1440), (1000000, 2880), (1000000, 2880)]
    asks, _ = _asks({"mem_mb": 10, "runtime": 10, "max_runtime": 15})
    assert asks == [(10, 10), (20, 15), (30, 15)]


def test_paper_training_retry_stays_schedulable():
    """It used to ask for 1.8-2.7 TB and 48-72 h on a retry."""
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["resources"]
    for rule in ("train", "generate_shard"):
        entry = {**paper["default"], **paper[rule]}
        asks, _ = _asks(entry)
        assert max(m for m, _ in asks) <= entry.get("max_mem_mb", entry["mem_mb"]) < UNBOUNDED
        assert max(t for _, t in asks) <= entry.get("max_runtime", entry["runtime"]) <= 2 * entry["runtime"]


def test_base_model_job_uses_the_threads_snakemake_grants_it(tmp_path: Path) -> None:
    """`--cores 1` must reach `maxk base` (it set torch's threads from its own config key before, so two
    pipelines side by side ran 4 threads on 2 cores, 7x slower)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    args = ["-n", "-p", "--forceall", "--cores", "1", "--configfile", str(ROOT / "config" / "config.yaml")]
    args += ["--directory", str(tmp_path), "results/seed1234/models/base"]
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), *args],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    command = next(line for line in (res.stdout + res.stderr).splitlines() if "maxk base " in line)
    assert "--threads 1 " in command
