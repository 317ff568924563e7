"""What each run learned (maxk.analysis.learning) and the claims read only where their runs learned."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import scores_frame, synthetic_rewards

from maxk.analysis.claims import CLAIMS, NOT_TESTABLE, NOT_WORKING, evaluate_claims, render_claims_markdown
from maxk.analysis.learning import (
    gates,
    learning_table,
    own_objective,
    regime,
    render_learning,
)
from maxk.analysis.per_problem import compute_metrics, reward_matrix
from maxk.analysis.stats import detectable_effect, paired_interval
from maxk.config import with_defaults
from maxk.objectives import ESTIMATORS, OBJECTIVES, register
from maxk.seeds import derive_seed

RUNS = sorted({r for c in CLAIMS for r in c.runs()} - {"base"})


def settings(method: str, **kw) -> dict:
    return {"method": method, "reward_kind": "continuous", "bon_k": 4, "num_generations": 8,
            "num_iterations": 3, "delta_clamp": 0.2, **kw}  # fmt: skip


SETTINGS = {
    **{r: settings("grpo") for r in RUNS if r.startswith("grpo")},
    "grpo_binary": settings("grpo", reward_kind="binary"),
    **{r: settings(r) for r in ("bon_max_mean", "bon_max_second", "bon_loo1", "bon_mean", "offpolicy_bon")},
}


def cfg(**claims) -> dict:
    section = with_defaults(
        "analysis",
        {
            "models": {r: r for r in ["base", *RUNS]},
            "claims": {"dataset": "ds", "large_k": 128, "paper_dataset": None, **claims},
            "significance": {"alpha": 0.05, "zero_method": "wilcox"},
            "bootstrap": {"resamples": 400, "confidence": 0.95},
        },
    )
    return {**section, "runs": SETTINGS}


def metrics_of(levels: dict, p: int = 60, n: int = 16) -> dict:
    """Every run's and the base's metrics on ``ds``: the same problems and noise, ``levels[run]`` added."""
    out = {}
    for run in ["base", *RUNS]:
        rewards = synthetic_rewards(p, n, 0.0, 0)
        rewards = np.clip(rewards + levels.get(run, 0.0), 0, 1)
        out[(run, "ds")] = compute_metrics(reward_matrix(scores_frame(rewards, "ds")))
    return out


def curve(
    first: np.ndarray, last: np.ndarray, column: str, regime_rows: list[dict] | None = None
) -> pd.DataFrame:
    """A training-metrics frame with two held-out points (steps 0 and 8) of per-problem ``column``."""
    rows = [
        {"step": 0, "heldout/reward": first.mean(), f"heldout/problem_{column}": " ".join(map(str, first))},
        {"step": 8, "heldout/reward": last.mean(), f"heldout/problem_{column}": " ".join(map(str, last))},
    ]
    return pd.DataFrame(rows + (regime_rows or []))  # fmt: skip


def test_each_estimator_names_the_objective_it_trains():
    assert own_objective(settings("grpo")) == ("max", 1)
    assert own_objective(settings("grpo", reward_kind="binary")) == ("pass", 1)
    assert own_objective(settings("bon_mean", bon_k=4)) == ("max", 4)
    assert own_objective(settings("offpolicy_bon", bon_k=2)) == ("max", 2)
    assert own_objective(settings("bon_max_mean", num_generations=16)) == ("max", 16)
    assert own_objective(settings("bon_max_second")) == ("max", 8)
    assert {spec.objective for spec in ESTIMATORS.values()} <= set(OBJECTIVES)
    with pytest.raises(ValueError, match="objective must be one of"):
        register("bad_objective_estimator", objective="max@2")(lambda r, **_: r)
    assert "bad_objective_estimator" not in ESTIMATORS


def test_a_run_learned_where_its_own_objective_rises_on_the_test_set():
    metrics = metrics_of({"bon_mean": 0.2, "grpo_continuous": 0.1})
    differences: dict = {}
    table = learning_table(cfg(), metrics, {}, seed=3, differences=differences).set_index("run")
    row = table.loc["bon_mean"]
    assert row["objective"] == "max@4" and row["learned"] and pd.isna(row["gate"])
    d = metrics[("bon_mean", "ds")]["max@4"].to_numpy() - metrics[("base", "ds")]["max@4"].to_numpy()
    want = paired_interval(
        d, seed=derive_seed(3, "learning", "test:bon_mean"), resamples=400, confidence=0.95
    )
    assert (row["test_effect"], row["test_ci_low"], row["test_ci_high"]) == pytest.approx(want)
    assert differences["learned:test:bon_mean"].to_numpy() == pytest.approx(d)
    # beside the effect, the smallest effect its interval finds with the claims' power (0.8)
    assert row["test_detectable"] == pytest.approx(detectable_effect(d, alpha=0.025, power=0.8))
    assert 0 < row["test_detectable"] < 2 * (row["test_ci_high"] - row["test_ci_low"])
    # a run equal to the base did not learn: a claim on it cannot be read, and says why
    flat = table.loc["bon_loo1"]
    assert not flat["learned"] and flat["gate"] == "bon_loo1 did not raise max@4"
    assert (
        table.loc["bon_max_mean", "objective"] == "max@8"
        and table.loc["grpo_binary", "objective"] == "pass@1"
    )
    # no training curves: the held-out and own-prompt parts are not measured, and say so
    text = "\n".join(render_learning(table.reset_index(), 3, confidence=0.95, power=0.8))
    assert pd.isna(row["heldout_effect"]) and "not measured" in text
    cell = f"({row['test_before']:.3f} -> {row['test_after']:.3f}; detectable {row['test_detectable']:.3f})"
    assert cell in text
    assert "with 80% power at this size" in text


def test_heldout_and_own_prompt_parts_read_the_run_s_own_objective():
    rng = np.random.default_rng(0)
    first, last = rng.uniform(0, 0.5, 30), rng.uniform(0.2, 0.9, 30)
    frames = {"bon_mean": curve(first, last, "max@4"), "grpo_continuous": curve(last, first, "rewards")}
    own = curve(first, last + 0.05, "max@4").rename(columns=lambda c: c.replace("heldout/", "own/"))
    frames["bon_mean"] = pd.concat([frames["bon_mean"], own], ignore_index=True)
    table = learning_table(cfg(), metrics_of({}), frames, seed=0).set_index("run")
    assert table.loc["bon_mean", "heldout_effect"] == pytest.approx((last - first).mean())
    assert table.loc["bon_mean", "own_effect"] == pytest.approx((last + 0.05 - first).mean())
    assert table.loc["bon_mean", "heldout_ci_low"] > 0 and table.loc["bon_mean", "heldout_n"] == 30
    # GRPO's objective is max@1, the mean reward: read from the per-problem rewards column
    assert table.loc["grpo_continuous", "heldout_effect"] == pytest.approx((first - last).mean())
    # a column of another k is not this run's objective: not read
    assert pd.isna(table.loc["bon_max_mean", "heldout_effect"])


def test_the_off_policy_regime_is_read_at_the_last_ppo_iteration():
    limits = {"max_clamped_frac": 0.05, "max_median_abs_delta": 0.05}
    points = [(1, 0, 0.0, 0.0), (2, 1, 0.01, 0.02), (3, 2, 0.2, 0.1), (6, 2, 0.1, 0.06)]
    rows = [
        {"step": s, f"delta/clamped_frac_iter{i}": c, f"delta/abs_q50_iter{i}": m} for s, i, c, m in points
    ]
    out = regime(pd.DataFrame(rows), limits)
    assert out["iteration"] == 2 and out["clamped_frac"] == pytest.approx(0.15)
    assert out["median_abs_delta"] == pytest.approx(0.08) and out["ok"] is False
    inside = regime(pd.DataFrame(rows[:2]), limits)
    assert inside["iteration"] == 1 and inside["ok"] is True
    # metrics that predate the quantiles: the regime is not measured, never assumed
    old = pd.DataFrame([{"step": 1, "delta/clamped_frac_iter2": 0.0}])
    assert regime(old, limits)["ok"] is None and regime(None, limits)["ok"] is None


def test_a_claim_is_read_only_where_every_run_it_compares_learned():
    metrics = metrics_of({r: 0.15 for r in RUNS} | {"offpolicy_bon": 0.0, "grpo_binary": -0.1})
    regime_rows = [{"step": 3, "delta/clamped_frac_iter2": 0.43, "delta/abs_q50_iter2": 0.2}]
    frames = {"offpolicy_bon": pd.DataFrame(regime_rows)}
    table = learning_table(cfg(), metrics, frames, seed=0)
    gate = gates(table)
    assert gate["offpolicy_bon"] == "offpolicy_bon did not raise max@4" and gate["bon_mean"] is None
    assert gate["grpo_binary"] == "grpo_binary did not raise pass@1"
    plain = evaluate_claims(cfg(), metrics, seed=0).set_index("id")
    frame = evaluate_claims(cfg(), metrics, seed=0, gates=gate).set_index("id")
    blocked = frame.loc["offpolicy_bon_best_max_at_large_k"]
    assert blocked["verdict"] == f"{NOT_TESTABLE}: offpolicy_bon did not raise max@4"
    assert pd.isna(blocked["pvalue_holm"]) and not blocked["holds"]
    assert blocked["effect"] == pytest.approx(plain.loc["offpolicy_bon_best_max_at_large_k", "effect"])
    assert frame.loc["inference_aware_raise_max_at_1", "verdict"].startswith(NOT_TESTABLE)
    # a claim on runs that learned is tested as without gates (a smaller Holm family: p no larger)
    read = frame.loc["grpo_raises_pass_at_1"]
    assert read["verdict"] == plain.loc["grpo_raises_pass_at_1", "verdict"] == "holds"
    assert read["pvalue_holm"] <= plain.loc["grpo_raises_pass_at_1", "pvalue_holm"]
    # the binary-reward claims are about that run failing: they do not require it to learn
    assert frame.loc["binary_reward_below_base", "verdict"] == "holds"
    assert not frame.loc["continuous_beats_binary", "verdict"].startswith(NOT_TESTABLE)
    # the instrument still gates everything
    broken = evaluate_claims(cfg(), metrics, seed=0, gates=gate, instrument_works=False)
    assert set(broken["verdict"].dropna()) <= {NOT_WORKING, "not tested"}


def test_an_off_policy_run_outside_its_regime_makes_its_claims_not_testable():
    metrics = metrics_of({r: 0.15 for r in RUNS})
    rows = [{"step": 3, "delta/clamped_frac_iter2": 0.43, "delta/abs_q50_iter2": 0.2}]
    table = learning_table(cfg(), metrics, {"offpolicy_bon": pd.DataFrame(rows)}, seed=0).set_index("run")
    row = table.loc["offpolicy_bon"]
    assert row["learned"] and row["off_policy"] and row["regime_ok"] is not None and not row["regime_ok"]
    assert row["gate"].startswith("offpolicy_bon is outside the first-order regime (43% of deltas clamped")
    # an off-policy method at one PPO iteration never leaves the policy it sampled from: no regime to check
    one = {**cfg(), "runs": {**SETTINGS, "offpolicy_bon": settings("offpolicy_bon", num_iterations=1)}}
    assert gates(learning_table(one, metrics, {}, seed=0))["offpolicy_bon"] is None
    # unmeasured regime of an off-policy run: not readable either
    assert (
        "regime was not measured"
        in learning_table(cfg(), metrics, {}, seed=0).set_index("run").loc["offpolicy_bon", "gate"]
    )


def test_claims_md_opens_with_the_instrument_then_what_each_run_learned():
    metrics = metrics_of({r: 0.15 for r in RUNS} | {"offpolicy_bon": 0.0})
    table = learning_table(cfg(), metrics, {}, seed=0)
    frame = evaluate_claims(cfg(), metrics, seed=0, gates=gates(table))
    instrument = {
        "works": True,
        "reason": "",
        "objective": None,
        "curve": None,
        "calibration": None,
        "run": "x",
    }
    md = render_claims_markdown(
        frame, 3, instrument=instrument, learning=render_learning(table, 3, confidence=0.95, power=0.8)
    )
    assert (
        md.index("## Instrument check")
        < md.index("## What each run learned")
        < md.index("## The paper's claims")
    )
    assert "| `offpolicy_bon` | max@4 |" in md and "offpolicy_bon did not raise max@4 |" in md
    assert f"{NOT_TESTABLE}: offpolicy_bon did not raise max@4" in md


def test_the_claims_job_writes_the_learning_table_from_every_run_s_curves(tmp_path):
    from maxk.analysis.per_problem import write_metrics
    from maxk.cli import main

    metrics = metrics_of({r: 0.15 for r in RUNS})
    files = []
    for (run, ds), frame in metrics.items():
        path = tmp_path / "metrics" / run / f"{ds}.parquet"
        path.parent.mkdir(parents=True)
        write_metrics(path, frame)
        files.append(str(path))
    rng = np.random.default_rng(1)
    first = rng.uniform(0, 0.5, 20)
    curves = tmp_path / "train"
    curves.mkdir()
    curve(first, first + 0.1, "max@4").to_csv(curves / "bon_mean.csv", index=False)
    config = cfg()  # without continuous GRPO: its entropy claim would need samples, not what this tests
    config["models"].pop("grpo_continuous")
    argv = ["analyze", "claims", "--config-json", json.dumps(config), "--seed", "3", "--metrics", *files,
            "--samples", "--train-metrics", str(curves / "bon_mean.csv"), "--csv", str(tmp_path / "c.csv"),
            "--md", str(tmp_path / "c.md"), "--learning", str(tmp_path / "learning.csv")]  # fmt: skip
    assert main(argv) == 0
    learning = pd.read_csv(tmp_path / "learning.csv").set_index("run")
    assert set(learning.index) == set(RUNS) - {"grpo_continuous"}
    assert learning.loc["bon_mean", "heldout_effect"] == pytest.approx(0.1)
    assert pd.isna(learning.loc["bon_loo1", "heldout_effect"])
    assert "## What each run learned" in (tmp_path / "c.md").read_text()


def test_the_claims_slice_carries_each_run_s_objective_settings():
    """The claims job reads each run's settings as its training job runs them (train merged with the
    run), so a change of a run's bon_k reruns the claims."""
    from maxk.workflow.slices import analysis_claims

    train = {"bon_k": 4, "num_generations": 8, "num_iterations": 3, "delta_clamp": 0.2, "heldout": None}
    runs = {"a": {"method": "bon_mean", "bon_k": 2}, "b": {"method": "grpo", "reward_kind": "binary"}}
    got = analysis_claims({"train": train, "runs": runs, "analysis": {"claims": {"dataset": "ds"}}})
    assert got["claims"] == {"dataset": "ds"}
    assert got["runs"]["a"] == {"method": "bon_mean", "reward_kind": "continuous", "bon_k": 2,
                                "num_generations": 8, "num_iterations": 3, "delta_clamp": 0.2}  # fmt: skip
    assert got["runs"]["b"]["reward_kind"] == "binary" and got["runs"]["b"]["bon_k"] == 4


def test_a_run_that_did_not_raise_its_objective_says_whether_the_paper_s_effect_was_visible():
    """Beside "did not raise": the paper's own effect against the smallest the test set detects, from
    the same table row; below it, a reproduction of the paper would likely read "did not raise" too."""
    metrics = metrics_of({})
    for run in ("bon_mean", "bon_loo1", "bon_max_mean"):  # noisy, unrelated to the base: did not learn
        noisy = np.clip(synthetic_rewards(60, 16, 0.0, 7) - 0.05, 0, 1)
        metrics[(run, "ds")] = compute_metrics(reward_matrix(scores_frame(noisy, "ds")))
    paper = {"base": 0.5, "bon_mean": 0.9, "bon_loo1": 0.501}  # bon_max_mean: not in the paper here

    def lookup(run: str, dataset: str, metric: str, k: int):
        return ("tableX", paper[run]) if run in paper and dataset == "CC" else None

    table = learning_table(cfg(paper_dataset="CC"), metrics, {}, seed=0, paper_lookup=lookup)
    table = table.set_index("run")
    assert not table.loc[["bon_mean", "bon_loo1", "bon_max_mean"], "learned"].any()
    for run, side, effect in (("bon_mean", "above", "+0.400"), ("bon_loo1", "below", "+0.001")):
        detectable = table.loc[run, "test_detectable"]
        assert 0.001 < detectable < 0.4
        assert table.loc[run, "gate"] == (
            f"{run} did not raise max@4 (the paper's own effect, {effect}, is {side} the "
            f"{detectable:.3f} this test set detects)"
        )
    assert table.loc["bon_max_mean", "gate"] == "bon_max_mean did not raise max@8"  # nothing to set beside
    blocked = evaluate_claims(cfg(paper_dataset="CC"), metrics, seed=0, gates=gates(table.reset_index()))
    verdict = blocked.set_index("id").loc["bon_mean_beats_bon_loo1", "verdict"]
    assert verdict.startswith(f"{NOT_TESTABLE}: bon_mean did not raise max@4 (the paper's own effect")


def test_the_paper_s_own_effect_stands_beside_each_run_s():
    """The paper's run minus its base at the run's own objective on CodeContests (its full max@k table,
    tab:full_cc_max: base max@4 0.485, max@8 0.544; BoN mean max@4 0.522, LOO-1 0.480, BoN-max mean
    max@8 0.562); a run the paper does not name is read by its estimator; GRPO at max@1 from table 3/4."""
    from maxk.analysis.paper_results import paper_lookup

    c = cfg(paper_dataset="CC")
    c["models"].update(probe_mean_k2="a probe", beyond="beyond the paper")
    extra = {"probe_mean_k2": settings("bon_mean", bon_k=2), "beyond": settings("bon_subset_std")}
    c["runs"] = {**SETTINGS, **extra}
    table = learning_table(c, metrics_of({}), {}, seed=0, paper_lookup=paper_lookup).set_index("run")
    assert table.loc["bon_mean", "paper_effect"] == pytest.approx(0.522 - 0.485)
    assert table.loc["bon_loo1", "paper_effect"] == pytest.approx(0.480 - 0.485)
    assert table.loc["bon_max_mean", "paper_effect"] == pytest.approx(0.562 - 0.544)
    assert table.loc["bon_mean", "paper_table"] == "table6"
    assert table.loc["probe_mean_k2", "paper_effect"] == pytest.approx(0.465 - 0.411)  # BoN mean's max@2
    assert table.loc["grpo_e4_ppo1", "paper_effect"] == pytest.approx(
        paper_lookup("grpo_e4_ppo1", "CC", "max", 1)[1] - paper_lookup("base", "CC", "max", 1)[1]
    )
    assert pd.isna(table.loc["beyond", "paper_effect"])  # an estimator the paper does not run
    text = "\n".join(render_learning(table.reset_index(), 3, confidence=0.95, power=0.8, paper_dataset="CC"))
    assert "| paper (CC): run - base |" in text and "+0.037 (0.485 -> 0.522)" in text
    assert "| `beyond` | max@4 |" in text and "| not reported |" in text
    # no paper dataset: no column, and nothing looked up
    plain = learning_table(cfg(), metrics_of({}), {}, seed=0, paper_lookup=paper_lookup)
    assert plain["paper_effect"].isna().all()
    assert "paper (" not in "\n".join(render_learning(plain, 3, confidence=0.95, power=0.8))
