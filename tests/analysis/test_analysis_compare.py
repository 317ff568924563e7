"""``maxk analyze compare``: paired intervals of runs against the base model, and the held-out rise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import scores_frame, synthetic_rewards

from maxk.analysis.compare import compare_runs, default_metrics, heldout_rise
from maxk.analysis.per_problem import compute_metrics, reward_matrix
from maxk.analysis.stats import paired_interval
from maxk.cli import main


def metrics(level: float, seed: int, p: int = 30, n: int = 8) -> pd.DataFrame:
    return compute_metrics(reward_matrix(scores_frame(synthetic_rewards(p, n, level, seed), "ds")))


def test_paired_interval_is_the_mean_difference_with_a_percentile_interval_of_resampled_problems():
    a = np.array([0.5, 0.7, 0.9, 0.2])
    b = np.array([0.4, 0.7, 0.6, 0.3])
    effect, low, high = paired_interval(a - b, seed=1, resamples=4000, confidence=0.95)
    assert effect == pytest.approx(0.075)
    d = a - b
    assert d.min() <= low < effect < high <= d.max()
    # pairing matters: a constant shift has a zero-width interval however spread the problems are
    effect, low, high = paired_interval((a + 0.1) - a, seed=1, resamples=500, confidence=0.95)
    assert effect == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)


def test_compare_runs_finds_a_better_run_and_not_the_reference_itself():
    base, better = metrics(0.0, seed=1), metrics(0.3, seed=2)
    table = compare_runs(
        base, {"better": better, "same": base}, default_metrics(base), seed=0, resamples=2000
    )
    assert list(table["metric"].unique()) == ["max@1", "pass@1", "pass@8", "max@8"]
    by = table.set_index(["run", "metric"])
    row = by.loc[("better", "max@1")]
    assert row["effect"] == pytest.approx(better["max@1"].mean() - base["max@1"].mean())
    assert row["ci_low"] > 0 and row["n_problems"] == 30
    same = by.loc[("same", "max@1")]
    assert same["effect"] == 0 and same["ci_low"] == 0 and same["ci_high"] == 0


def test_compare_runs_refuses_runs_on_other_problems_and_unknown_metrics():
    base = metrics(0.0, seed=1)
    with pytest.raises(
        ValueError, match="short: its problems differ from the reference's \\(1 not in both\\)"
    ):
        compare_runs(base, {"short": base.iloc[1:]}, ["max@1"], seed=0)
    with pytest.raises(ValueError, match="no column 'max@999'"):
        compare_runs(base, {"x": base}, ["max@999"], seed=0)


def test_heldout_rise_pairs_the_first_and_last_point_per_problem():
    csv = pd.DataFrame(
        {
            "step": [0, 8, 16],
            "heldout/reward": [0.3, 0.35, 0.5],
            "heldout/problem_rewards": ["0.2 0.4", "0.3 0.4", "0.4 0.6"],
        }
    )
    rise = heldout_rise(csv, seed=0, resamples=1000)
    assert rise["steps"] == 16 and (rise["first"], rise["last"]) == (0.3, 0.5)
    assert rise["effect"] == pytest.approx(0.2) and rise["ci_low"] == pytest.approx(0.2)
    assert "effect" not in heldout_rise(csv.drop(columns="heldout/problem_rewards"), seed=0)
    assert heldout_rise(csv.drop(columns=["heldout/reward", "heldout/problem_rewards"]), seed=0) is None


def test_cli_prints_one_row_per_run_and_names_a_missing_file(tmp_path, capsys):
    for run, level, seed in (("base", 0.0, 1), ("rl", 0.3, 2)):
        path = tmp_path / "metrics" / run / "ds.parquet"
        path.parent.mkdir(parents=True)
        metrics(level, seed).to_parquet(path)
    (tmp_path / "metrics" / "train").mkdir()
    pd.DataFrame({"step": [0, 4], "heldout/reward": [0.25, 0.5]}).to_csv(tmp_path / "metrics/train/rl.csv")
    argv = ["analyze", "compare", "--results", str(tmp_path), "--dataset", "ds", "--resamples", "500"]
    assert main([*argv, "rl"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| rl |"))
    assert "0.250 -> 0.500, 4 steps" in row and row.count("[") == 4
    assert "reference, 30 problems: max@1" in out
    assert main([*argv, "--metric", "pass@1", "rl"]) == 0
    assert "pass@1: value" in capsys.readouterr().out and "; sd" not in out
    assert main([*argv, "--metric", "pass@1", "--sd", "rl"]) == 0  # the differences' sd after the interval
    base = pd.read_parquet(tmp_path / "metrics/base/ds.parquet").set_index("problem_id").sort_index()
    rl = pd.read_parquet(tmp_path / "metrics/rl/ds.parquet").set_index("problem_id").sort_index()
    assert f"; sd {(rl['pass@1'] - base['pass@1']).std(ddof=1):.3f})" in capsys.readouterr().out
    assert main([*argv, "missing"]) != 0
    assert "metrics/missing/ds.parquet: no metrics of missing on ds" in capsys.readouterr().err


def test_several_seeds_give_each_seed_s_table_then_the_random_effects_pooled_effect(tmp_path, capsys):
    """--results repeated: each seed's table as with one, then each effect pooled over the seeds
    (random_effects_interval over the seeds' per-problem differences; one run: its own spread)."""
    from maxk.analysis.compare import pool_runs
    from maxk.analysis.stats import random_effects_interval

    frames = {}
    for s in (4, 9):
        for run, level in (("base", 0.0), ("rl", 0.2)):
            frames[(s, run)] = metrics(level, seed=10 * s + len(run))
            path = tmp_path / f"seed{s}" / "metrics" / run / "ds.parquet"
            path.parent.mkdir(parents=True)
            frames[(s, run)].to_parquet(path)
    argv = ["analyze", "compare", "rl", "--dataset", "ds", "--resamples", "400", "--metric", "max@1"]
    assert main([*argv, "--results", str(tmp_path / "seed9"), "--results", str(tmp_path / "seed4")]) == 0
    out = capsys.readouterr().out
    assert f"## {tmp_path / 'seed9'}" in out and f"## {tmp_path / 'seed4'}" in out and "## pooled" in out
    diffs = [frames[(s, "rl")]["max@1"].to_numpy() - frames[(s, "base")]["max@1"].to_numpy() for s in (9, 4)]
    want = random_effects_interval(diffs, confidence=0.95)
    assert f"| rl | {want.effect:+.3f} [{want.low:+.3f}, {want.high:+.3f}] | 2 |" in out
    table = pool_runs([(frames[(s, "base")], {"rl": frames[(s, "rl")]}) for s in (9, 4)], ["max@1"])
    assert table.loc[0, "effect"] == pytest.approx(np.mean([d.mean() for d in diffs]))


def test_pooled_runs_share_each_metric_s_spread_between_seeds():
    """pool_runs: one family per metric, over the runs; a run whose seeds disagree sets the spread its
    neighbour's interval uses on that metric, and not on another metric."""
    from maxk.analysis.compare import pool_runs
    from maxk.analysis.stats import random_effects_interval, seed_spread

    per_seed, diffs = [], {}
    for s, far in ((1, 0.0), (2, 0.4), (3, 0.1)):
        base = metrics(0.2, seed=s)
        runs = {"steady": metrics(0.3, seed=10 + s), "wild": metrics(0.2 + far, seed=20 + s)}
        per_seed.append((base, runs))
        for run, frame in runs.items():
            for m in ("pass@1", "max@1"):
                diffs.setdefault((run, m), []).append(frame[m].to_numpy() - base[m].to_numpy())
    table = pool_runs(per_seed, ["pass@1", "max@1"]).set_index(["run", "metric"])
    for m in ("pass@1", "max@1"):
        spread = seed_spread(diffs[(r, m)] for r in ("steady", "wild"))
        want = random_effects_interval(diffs[("steady", m)], confidence=0.95, spread=spread)
        got = table.loc[("steady", m)]
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((want.low, want.high)) and got["seeds"] == 3
    alone = random_effects_interval(diffs[("steady", "pass@1")], confidence=0.95)
    assert table.loc[("steady", "pass@1"), "ci_low"] != pytest.approx(alone.low)
