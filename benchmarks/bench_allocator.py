"""glibc's allocator settings for a local run's jobs (``maxk.workflow.allocator``) against glibc's
defaults: one generation job at the pipeline's shapes, run as Snakemake runs it (a fresh interpreter,
``maxk generate``), alternately under each, in the same process.

    python benchmarks/bench_allocator.py [--model models/base] [--problems 48] [--n 32] [--repeats 3]

The model is the embedded default's shipped base; the problems, the synthetic suite's (stdio, seed 0).
glibc reads the settings when a process starts, so each job is a subprocess, its environment either
without the allocator's variables (glibc's defaults) or with them. Prints each setting's median wall,
CPU (user + system) and minor page faults per job, the ratio of the defaults' wall to the settings',
and whether both wrote the same rows (an allocator must not change a sample).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from maxk.hf_hub import go_offline  # noqa: E402

go_offline()


def children() -> tuple[float, float, int]:
    """The finished children's user and system CPU seconds and minor page faults, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime, usage.ru_minflt


def job_args(work: Path, model: Path, problems: int, n: int, max_new_tokens: int) -> list[str]:
    """A problem file in ``work`` and the ``maxk generate`` arguments of one job on it (output last):
    ``bench_job_start.generate_job`` on the embedded default's settings."""
    from bench_job_start import generate_job

    from maxk.config import load_config
    from maxk.data.suite import generate_suite
    from maxk.io import write_jsonl

    write_jsonl(work / "problems.jsonl.gz", generate_suite("stdio", problems, 0))
    config = load_config(ROOT / "config" / "config.yaml")
    return generate_job(config, model, work / "problems.jsonl.gz", problems, n, max_new_tokens)


def main(argv: list[str] | None = None) -> int:
    from maxk.workflow.allocator import ALLOCATOR_ENV

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "base")
    ap.add_argument("--problems", type=int, default=48)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    defaults = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_ENV}
    envs = {"glibc defaults": defaults, "maxk.workflow.allocator": {**defaults, **ALLOCATOR_ENV}}
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in envs}
    with tempfile.TemporaryDirectory(prefix="bench-allocator-") as tmp:
        work = Path(tmp)
        job = job_args(work, args.model, args.problems, args.n, args.max_new_tokens)
        for i in range(args.repeats):
            for j, (name, env) in enumerate(envs.items()):  # alternate, so drift hits both alike
                before, start = children(), time.perf_counter()
                out = work / f"{j}-{i}.parquet"
                subprocess.run([sys.executable, "-m", "maxk", *job, str(out)], env=env, check=True,
                               capture_output=True)  # fmt: skip
                after = children()
                cpu = (after[0] - before[0]) + (after[1] - before[1])
                runs[name].append((time.perf_counter() - start, cpu, after[2] - before[2]))
        import pandas as pd

        first = pd.read_parquet(work / "0-0.parquet")
        same = all(first.equals(pd.read_parquet(f)) for f in sorted(work.glob("*.parquet")))
    med = {name: [statistics.median(r[k] for r in rs) for k in range(3)] for name, rs in runs.items()}
    size = f"{args.problems} problems x {args.n} samples, {args.max_new_tokens} new tokens at most"
    print(f"one generation job ({size}, {args.model}), median of {args.repeats}:")
    for name, (wall, cpu, faults) in med.items():
        print(f"  {name:24s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  minor page faults {int(faults):,}")
    base, tuned = med["glibc defaults"][0], med["maxk.workflow.allocator"][0]
    print(
        f"ratio (glibc defaults / maxk's settings, wall): {base / tuned:.2f}x; "
        f"every output the same rows: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
