"""Benchmark: every metric, table and significance test of the paper's analysis at paper scale.

Synthetic scores for 11 runs x 5 datasets x 3,000 problems x 256 samples (the paper config's
runs, datasets and tables), then:

1. per-problem pass@k / max@k (k = 1..256) for all 55 (run, dataset) pairs, from scores tables
   (pivot + batched estimators), as ``maxk analyze metrics`` does;
2. every table of ``config/paper.yaml`` (tables 1-4 and the 10 full tables) with bootstrap CIs, and
   the Wilcoxon tests + Holm correction, rendered to LaTeX / Markdown / CSV in memory.

The baseline is a per-problem Python loop calling the scalar estimators (``maxk.metrics.max_at_k``
and ``pass_at_k`` for each problem and k), timed on a subset of the problems and scaled
linearly to the full size. Score generation is not timed.

    PYTHONPATH=src python benchmarks/bench_analysis.py            # full size
    PYTHONPATH=src python benchmarks/bench_analysis.py --problems 300   # quick
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from maxk.analysis.per_problem import compute_metrics, reward_matrix
from maxk.analysis.tables import build_table, render_csv, render_latex, render_markdown, table_specs
from maxk.metrics import max_at_k, pass_at_k, powers_of_two

ROOT = Path(__file__).resolve().parents[1]


def synthetic_scores(problems: int, n: int, level: float, seed: int) -> pd.DataFrame:
    """Rewards in {0, 1/10, ..., 1} (fraction of 10 tests), rows shuffled as a scorer might write them."""
    rng = np.random.default_rng(seed)
    ability = np.clip(rng.beta(1.2, 2.5, size=(problems, 1)) + level, 0, 1)
    passed = rng.binomial(10, np.broadcast_to(ability, (problems, n)))
    ids = np.array([f"bench/{i:05d}" for i in range(problems)], dtype=object)
    frame = pd.DataFrame(
        {
            "problem_id": np.repeat(ids, n),
            "sample_index": np.tile(np.arange(n), problems),
            "reward": (passed / 10.0).ravel(),
        }
    )
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def loop_metrics(scores: pd.DataFrame, ks: list[int]) -> np.ndarray:
    """Baseline: group the scores by problem, then one scalar estimator call per problem and k."""
    rows = []
    for _, group in scores.groupby("problem_id", sort=True):
        r = group.sort_values("sample_index")["reward"].to_numpy()
        c = int((r == 1.0).sum())
        rows.append([pass_at_k(len(r), c, k) for k in ks] + [max_at_k(r, k) for k in ks])
    return np.array(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--baseline-problems", type=int, default=200, help="problems timed in the loop baseline")
    args = ap.parse_args()

    from maxk.config import load_config

    cfg = load_config(ROOT / "config" / "paper.yaml")["analysis"]
    models, datasets = list(cfg["models"]), list(cfg["datasets"])
    ks = powers_of_two(args.samples)
    print(
        f"{len(models)} runs x {len(datasets)} datasets x {args.problems} problems x {args.samples} samples"
    )

    frames: dict[tuple[str, str], pd.DataFrame] = {}
    t_metrics = 0.0
    first: tuple[pd.DataFrame, float] | None = None
    for m_i, model in enumerate(models):
        for d_i, dataset in enumerate(datasets):
            scores = synthetic_scores(args.problems, args.samples, 0.03 * m_i - 0.1, seed=1000 * m_i + d_i)
            t0 = time.perf_counter()
            mat = reward_matrix(scores, source=f"{model}/{dataset}")
            frames[(model, dataset)] = compute_metrics(mat, cfg["ks"])
            dt = time.perf_counter() - t0
            t_metrics += dt
            if first is None:
                first = (scores, dt)
    print(f"metrics: {t_metrics:.2f} s for {len(frames)} (run, dataset) pairs")

    t0 = time.perf_counter()
    specs = table_specs(cfg)
    sig = cfg["significance"]
    n_tests = 0
    for spec in specs:
        res = build_table(
            spec,
            frames,
            seed=1234,
            resamples=cfg["bootstrap"]["resamples"],
            confidence=cfg["bootstrap"]["confidence"],
            alternative=sig["alternative"],
            zero_method=sig["zero_method"],
            alpha=sig["alpha"],
            star_correction=sig["star"],
        )
        n_tests += len(res.tests)
        render_latex(res, cfg["models"], cfg["datasets"])
        render_markdown(res, cfg["models"], cfg["datasets"])
        render_csv(res, cfg["models"])
    t_tables = time.perf_counter() - t0
    print(
        f"tables: {t_tables:.2f} s for {len(specs)} tables ({cfg['bootstrap']['resamples']} bootstrap "
        f"resamples per cell, {n_tests} Wilcoxon tests + Holm)"
    )
    total = t_metrics + t_tables
    print(f"total: {total:.2f} s (goal: < 60 s on 2 cores)")

    assert first is not None
    scores, t_pair = first
    ids = np.sort(scores["problem_id"].unique())[: args.baseline_problems]
    sub = scores[scores["problem_id"].isin(ids)]
    t0 = time.perf_counter()
    ref = loop_metrics(sub, ks)
    t_loop = time.perf_counter() - t0
    fast = frames[(models[0], datasets[0])].iloc[: len(ids), 2:].to_numpy(dtype=float)
    np.testing.assert_allclose(fast, ref, atol=1e-9)  # the loop gives the same numbers
    loop_pair = t_loop * args.problems / len(ids)
    print(
        f"baseline per-problem loop (groupby + scalar estimators): {t_loop:.2f} s for {len(ids)} problems "
        f"-> ~{loop_pair:.1f} s per (run, dataset) pair, ~{loop_pair * len(frames):.0f} s for all metrics "
        f"(extrapolated); vectorised: {t_pair:.3f} s for the same pair; ratio = {loop_pair / t_pair:.0f}x"
    )


if __name__ == "__main__":
    main()
