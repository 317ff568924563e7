"""A pipeline job's start-up against its work: one generation job (``maxk generate``) run as Snakemake runs
it, a fresh interpreter, against the same command forked from an interpreter that already imported its
modules, in the same process.

    python benchmarks/bench_job_start.py [--repeats 3] [--problems 3] [--n 16] [--max-new-tokens 32]

The job is the end-to-end test's scale (a random Qwen2 of its base model's sizes, built here by
``maxk.tiny``; a few problems of the synthetic suite): its sampling takes under a second,
so what a fresh start costs is nearly all of it. The warm mode imports torch, transformers' Qwen2 and
maxk's generation once, then forks one child per job that calls ``maxk.cli.main`` with the job's
arguments (standard output and error to /dev/null). A third mode is the pipeline's own (config key
``warm_start``): ``maxk`` run as a job runs it, handing the job to a ``maxk job-server``
(``maxk.workflow.jobserver``), which forks it; its CPU column is the client's alone (the server's child is
not this process's). Prints each mode's median wall and CPU time per job,
the ratio, the parent's one-off import time, and whether every output holds the same rows as the first
cold run's (a fork must not change a sample).
"""

from __future__ import annotations

import argparse
import json
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


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stage(work: Path, problems: int, n: int, max_new_tokens: int) -> list[str]:
    """A tiny model and a problem file in ``work``; returns the job's ``maxk generate`` arguments (the
    output path last)."""
    from maxk.config import load_config
    from maxk.data.suite import generate_suite
    from maxk.io import write_jsonl
    from maxk.tiny import init_model, save, train_tokenizer

    rows = generate_suite("stdio", max(problems, 8), 0)
    write_jsonl(work / "problems.jsonl.gz", rows)
    # the end-to-end test's base model sizes, on the embedded default (tests/workflow/config_small.yaml)
    config = load_config(ROOT / "config" / "config.yaml", ROOT / "tests" / "workflow" / "config_small.yaml")
    base = config["base_model"]
    tok = train_tokenizer([r["prompt"] for r in rows] * 4, vocab_size=base["tokenizer"]["vocab_size"])
    save(init_model(tok, seed=0, **base["model"]), tok, work / "model")
    return generate_job(config, work / "model", work / "problems.jsonl.gz", problems, n, max_new_tokens)


def generate_job(
    config: dict, model: Path, problems_file: Path, problems: int, n: int, max_new_tokens: int
) -> list[str]:
    """The ``maxk`` arguments of one generation job as the pipeline runs it (one shard, one thread, the
    base model's name) on ``config``'s generation and prompt settings at these sizes; the output path last."""
    gen = {**config["generate"], "n": n, "max_new_tokens": max_new_tokens, "max_problems": problems}
    job = {"generate": gen, "prompt": config["prompt"], "seed": config["seed"]}
    return ["generate", "--model-path", str(model), "--model-name", "base",
            "--problems", str(problems_file), "--dataset", "suite_test", "--shard", "0",
            "--num-shards", "1", "--threads", "1", "--gpus", "0", "--config-json", json.dumps(job),
            "--output"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--problems", type=int, default=3)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--stage", type=Path, help=argparse.SUPPRESS)  # internal: stage here, print the job
    args = ap.parse_args(argv)
    if args.stage:
        print(json.dumps(stage(args.stage, args.problems, args.n, args.max_new_tokens)))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-job-start-") as tmp:
        work = Path(tmp)
        # staged in another process: this one must import nothing heavy before its warm mode is timed
        sizes = ["--problems", str(args.problems), "--n", str(args.n)]
        sizes += ["--max-new-tokens", str(args.max_new_tokens)]
        staged = subprocess.run([sys.executable, __file__, "--stage", str(work), *sizes],
                                check=True, capture_output=True, text=True)  # fmt: skip
        job = json.loads(staged.stdout.strip().splitlines()[-1])
        cold = []
        for i in range(args.repeats):
            cpu, start = children_cpu(), time.perf_counter()
            out = work / f"cold{i}.parquet"
            subprocess.run([sys.executable, "-m", "maxk", *job, str(out)], check=True, capture_output=True)
            cold.append((time.perf_counter() - start, children_cpu() - cpu))
        start, cpu = time.perf_counter(), time.process_time()
        import pandas as pd
        import torch  # noqa: F401
        import transformers.models.qwen2.modeling_qwen2  # noqa: F401
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

        import maxk.cli
        import maxk.generate.cli
        import maxk.generate.decode
        import maxk.generate.hf
        import maxk.generate.run
        import maxk.gpu
        import maxk.hf_hub

        parent = (time.perf_counter() - start, time.process_time() - cpu)
        warm = []
        for i in range(args.repeats):
            cpu, start = children_cpu(), time.perf_counter()
            pid = os.fork()
            if pid == 0:  # the job: maxk's own entry point on the job's arguments
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os._exit(maxk.cli.main([*job, str(work / f"warm{i}.parquet")]))
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"the forked job {i} failed (exit {os.waitstatus_to_exitcode(status)})")
            warm.append((time.perf_counter() - start, children_cpu() - cpu))
        # the pipeline's own path: `maxk` as a job's command, forked by the job server (warm_start)
        from maxk.workflow import jobserver

        jobserver.start(str(work))
        try:
            if not jobserver._wait_until_up(jobserver._started.socket):  # type: ignore[union-attr]
                raise SystemExit("the job server did not come up")
            served = []
            for i in range(args.repeats):
                cpu, start = children_cpu(), time.perf_counter()
                cmd = [sys.executable, "-m", "maxk", *job, str(work / f"served{i}.parquet")]
                subprocess.run(cmd, check=True, capture_output=True)
                served.append((time.perf_counter() - start, children_cpu() - cpu))
        finally:
            jobserver.stop()
        first = pd.read_parquet(work / "cold0.parquet")
        others = [f"cold{i}" for i in range(1, args.repeats)] + [f"warm{i}" for i in range(args.repeats)]
        others += [f"served{i}" for i in range(args.repeats)]
        same = all(first.equals(pd.read_parquet(work / f"{name}.parquet")) for name in others)
    med = {mode: tuple(statistics.median(x[j] for x in runs) for j in (0, 1))
           for mode, runs in (("cold", cold), ("warm", warm), ("served", served))}  # fmt: skip
    size = f"{args.problems} problems x {args.n} samples, {args.max_new_tokens} new tokens at most"
    print(f"one generation job ({size}), median of {args.repeats}, wall / CPU s per job:")
    print(f"  fresh interpreter (as Snakemake runs it): {med['cold'][0]:.2f} / {med['cold'][1]:.2f}")
    print(f"  forked from a warm one:                   {med['warm'][0]:.2f} / {med['warm'][1]:.2f}")
    print(f"  through the job server (its client's CPU): {med['served'][0]:.2f} / {med['served'][1]:.2f}")
    print(f"  the warm parent's imports, once:          {parent[0]:.2f} / {parent[1]:.2f}")
    print(
        f"ratio (fresh / forked, wall): {med['cold'][0] / med['warm'][0]:.1f}x; "
        f"fresh / through the job server: {med['cold'][0] / med['served'][0]:.1f}x; "
        f"every output holds the first fresh run's rows: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
