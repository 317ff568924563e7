"""The claims stage: each paper claim tested on per-problem values (maxk.analysis.claims)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import scores_frame, synthetic_rewards
from scipy.stats import wilcoxon

from maxk.analysis.claims import (
    CLAIMS,
    INSTRUMENT_PARTS,
    LARGE,
    NOT_WORKING,
    BestOf,
    Claim,
    MeanOf,
    claim_inputs,
    evaluate_claims,
    heldout_curve,
    heldout_endpoints,
    instrument_check,
    render_claims_markdown,
)
from maxk.analysis.paper_results import paper_lookup
from maxk.analysis.per_problem import compute_metrics, reward_matrix, write_metrics
from maxk.cli import main
from maxk.config import with_defaults

RUNS = sorted({r for c in CLAIMS for r in c.runs()})
ISSUE_IDS = {
    "grpo_raises_pass_at_1",
    "grpo_lowers_pass_at_large_k",
    "grpo_lowers_entropy",
    "binary_reward_below_base",
    "continuous_beats_binary",
    "offpolicy_bon_best_max_at_large_k",
    "bon_mean_beats_bon_loo1",
    "inference_aware_raise_max_at_1",
    "more_epochs_raise_max_at_1",
    "rl_lowers_max_at_large_k",
}


def cfg(**claims):
    """The claims stage's part of the analysis section, as the rule passes it (defaults filled in)."""
    return with_defaults(
        "analysis",
        {
            "models": {r: r for r in RUNS},
            "claims": {"dataset": "ds", "large_k": 128, "paper_dataset": None, **claims},
            "significance": {"alpha": 0.05, "zero_method": "wilcox"},
            "bootstrap": {"resamples": 400, "confidence": 0.95},
        },
    )


def metrics_of(p=48, n=16, levels=None, seed=0):
    """Metrics frames of every run on dataset ``ds``; ``levels[run]`` shifts a run's rewards."""
    levels = levels or {}
    return {
        (run, "ds"): compute_metrics(
            reward_matrix(scores_frame(synthetic_rewards(p, n, levels.get(run, 0.0), seed + i), "ds"))
        )
        for i, run in enumerate(RUNS)
    }


def entropy_of(metrics, shift=0.0):
    ids = next(iter(metrics.values()))["problem_id"]
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 1.5, len(ids))
    return {
        (run, "ds"): pd.Series(base - (shift if run == "grpo_continuous" else 0.0), index=ids).sort_index()
        for run in RUNS
    }


def test_every_claim_of_the_issue_is_defined_once():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert set(ids) >= ISSUE_IDS


def test_effect_interval_and_test_match_their_definitions():
    metrics = metrics_of(levels={"grpo_continuous": 0.3})
    differences: dict = {}
    frame = evaluate_claims(cfg(), metrics, entropy_of(metrics, 0.2), seed=1, differences=differences)
    frame = frame.set_index("id")
    row = frame.loc["grpo_raises_pass_at_1"]
    a = metrics[("grpo_continuous", "ds")]["pass@1"].to_numpy()
    b = metrics[("base", "ds")]["pass@1"].to_numpy()
    assert row["effect"] == pytest.approx((a - b).mean())
    # each tested claim's per-problem differences (what the across-seed table resamples) make its effect
    assert set(differences) == set(frame.index[frame["effect"].notna()])
    for cid, d in differences.items():
        assert d.mean() == pytest.approx(frame.loc[cid, "effect"]) and d.index.is_unique
    by_problem = metrics[("grpo_continuous", "ds")].set_index("problem_id")["pass@1"]
    base = metrics[("base", "ds")].set_index("problem_id")["pass@1"]
    assert differences["grpo_raises_pass_at_1"].to_dict() == pytest.approx((by_problem - base).to_dict())
    assert row["a_value"] == pytest.approx(a.mean()) and row["b_value"] == pytest.approx(b.mean())
    assert row["ci_low"] < row["effect"] < row["ci_high"]
    assert row["pvalue"] == pytest.approx(wilcoxon(a, b, alternative="greater").pvalue)
    assert row["pvalue_holm"] >= row["pvalue"]
    assert row["holds"] and row["direction"] and row["n_problems"] == 48
    # the opposite claim (base > GRPO at large k, here k = n = 16) goes the wrong way: never holds
    large = frame.loc["grpo_lowers_pass_at_large_k"]
    assert (large["k"], large["k_requested"]) == (16, 128)
    assert not large["direction"] and not large["holds"]
    # entropy: GRPO's is lower by 0.2 on every problem
    ent = frame.loc["grpo_lowers_entropy"]
    assert ent["effect"] == pytest.approx(0.2) and ent["holds"] and math.isnan(ent["k"])


def test_equal_runs_hold_nothing_and_holm_adjusts_across_claims():
    metrics = metrics_of(seed=0)
    frame = evaluate_claims(cfg(), metrics, entropy_of(metrics), seed=1)
    assert not frame["holds"].any()
    tested = frame.dropna(subset=["pvalue"])
    assert (tested["pvalue_holm"] >= tested["pvalue"] - 1e-12).all()
    # entropy is identical for both runs: the test is undefined and says so
    ent = frame.set_index("id").loc["grpo_lowers_entropy"]
    assert ent["effect"] == 0 and "zero" in ent["note"] and not ent["holds"]


def test_best_of_and_mean_of_sides():
    metrics = metrics_of(levels={"bon_mean": 0.25, "bon_loo1": -0.2})
    claims = [
        Claim("best", "", "", "offpolicy_bon", BestOf(("base", "bon_loo1", "bon_mean")), "max", 1),
        Claim("mean", "", "", MeanOf(("bon_mean", "bon_loo1")), "base", "max", 1),
    ]
    frame = evaluate_claims(cfg(), metrics, seed=0, claims=claims).set_index("id")
    assert frame.loc["best", "b"].startswith("bon_mean (best of")
    col = lambda r: metrics[(r, "ds")]["max@1"].to_numpy()  # noqa: E731
    assert frame.loc["best", "b_value"] == pytest.approx(col("bon_mean").mean())
    assert frame.loc["mean", "a_value"] == pytest.approx(((col("bon_mean") + col("bon_loo1")) / 2).mean())


def test_detectable_effect_shrinks_with_more_problems():
    small = evaluate_claims(cfg(), metrics_of(p=24), seed=0).set_index("id")["detectable_effect"]
    big = evaluate_claims(cfg(), metrics_of(p=192), seed=0).set_index("id")["detectable_effect"]
    ratio = (big / small).dropna()
    assert len(ratio) >= 8 and ratio.between(0.2, 0.8).all()  # ~ sqrt(24 / 192) = 0.35


def test_unconfigured_runs_are_reported_untested():
    c = cfg()
    c["models"] = {"base": "Base", "grpo_continuous": "GRPO"}
    metrics, samples = claim_inputs(c)
    assert metrics == [("base", "ds"), ("grpo_continuous", "ds")] and samples == metrics
    m = metrics_of()
    frame = evaluate_claims(c, m, entropy_of(m, 0.1), seed=0).set_index("id")
    assert frame.loc["bon_mean_beats_bon_loo1", "note"].startswith("not tested")
    assert not frame.loc["bon_mean_beats_bon_loo1", "holds"]
    assert frame["pvalue"].notna().sum() == 3


def test_runs_on_different_problems_are_an_error():
    metrics = metrics_of()
    metrics[("base", "ds")] = metrics[("base", "ds")].iloc[1:]
    with pytest.raises(ValueError, match=r"base.*other problems"):
        evaluate_claims(cfg(), metrics, entropy_of(metrics_of()), seed=0)


def test_paper_values_stand_beside_ours_under_the_paper_config():
    metrics = metrics_of(n=256, p=8)
    frame = evaluate_claims(
        cfg(paper_dataset="CC"), metrics, entropy_of(metrics), seed=0, paper_lookup=paper_lookup
    ).set_index("id")
    off = frame.loc["offpolicy_bon_best_max_at_large_k"]
    assert (off["k"], off["paper_a"], off["paper_b"], off["paper_table"]) == (128, 0.718, 0.710, "table2")
    assert frame.loc["grpo_raises_pass_at_1", ["paper_a", "paper_b"]].tolist() == [0.257, 0.211]
    assert frame.loc["rl_lowers_max_at_large_k", "paper_b"] == pytest.approx(
        (0.688 + 0.696 + 0.701 + 0.703) / 4
    )
    assert pd.isna(frame.loc["grpo_lowers_entropy", "paper_a"])
    assert frame.loc["grpo_raises_pass_at_1", "paper_effect"] == pytest.approx(0.257 - 0.211)
    md = render_claims_markdown(frame.reset_index())
    assert "paper a" in md and "0.718" in md and "paper effect" in md


def test_instrument_works_when_rl_raises_its_objective_and_the_curve_rises():
    up = metrics_of(levels={"grpo_continuous": 0.2})
    curve = [(0, 0.30), (16, 0.33), (32, 0.35)]
    check = instrument_check(cfg(), up, seed=0, curve=curve)
    obj = check["objective"]
    assert check["works"] and obj["ok"] and obj["ci_low"] > 0 and check["curve"]["ok"]
    assert obj["effect"] == pytest.approx(obj["a_value"] - obj["b_value"])
    d = (up[("grpo_continuous", "ds")]["max@1"] - up[("base", "ds")]["max@1"]).to_numpy()
    assert obj["effect"] == pytest.approx(d.mean()) and obj["n_problems"] == len(d)
    frame = evaluate_claims(cfg(), up, entropy_of(up), seed=0, instrument_works=True)
    assert set(frame["verdict"]) <= {"holds", "does not hold"}
    # a curve that falls, or an objective whose interval covers zero, each stop the instrument
    falling = instrument_check(cfg(), up, seed=0, curve=[(0, 0.35), (32, 0.30)])
    assert not falling["works"] and "does not rise" in falling["reason"]
    flat = instrument_check(cfg(), metrics_of(), seed=0, curve=curve)
    assert not flat["objective"]["ok"] and not flat["works"] and "not above zero" in flat["reason"]
    missing = instrument_check(cfg(), {k: v for k, v in up.items() if k[0] != "base"}, seed=0)
    assert not missing["works"] and "no metrics" in missing["reason"]


def test_claims_read_instrument_not_working_when_it_fails():
    metrics = metrics_of(levels={"grpo_continuous": 0.3})
    frame = evaluate_claims(cfg(), metrics, entropy_of(metrics), seed=0, instrument_works=False)
    tested = frame[frame["effect"].notna()]
    assert len(tested) and set(tested["verdict"]) == {NOT_WORKING}
    check = instrument_check(cfg(), metrics_of(), seed=0, curve=[(0, 0.3), (8, 0.2)])
    block = {
        "items": [{"name": "pass_at_1", "value": 0.05, "band": [0.1, 0.35], "pass": False}],
        "passes": False,
    }
    md = render_claims_markdown(frame, instrument={**check, "calibration": block})
    assert md.index("INSTRUMENT NOT WORKING") < md.index("## The paper's claims") < md.index("| `")
    assert "MISSES ITS OPERATING POINT" in md and "DOES NOT RISE" in md
    assert md.count(NOT_WORKING) >= len(tested)


def test_heldout_rise_needs_a_paired_interval_above_zero_when_problems_are_known():
    """With each held-out problem's reward at both ends, the curve rises only when the paired
    bootstrap interval of last - first is above zero: a mean that ends higher by noise does not."""
    up = metrics_of(levels={"grpo_continuous": 0.2})
    curve = [(0, 0.30), (32, 0.31)]
    rng = np.random.default_rng(0)
    first = rng.uniform(0, 1, 64)
    lifted = instrument_check(cfg(), up, seed=0, curve=curve, endpoints=(first, first + 0.05))
    assert lifted["works"] and lifted["curve"]["ok"] and lifted["curve"]["ci_low"] > 0
    assert lifted["curve"]["effect"] == pytest.approx(0.05) and lifted["curve"]["n_problems"] == 64
    noise = first + rng.normal(0.01, 0.3, 64)
    noisy = instrument_check(cfg(), up, seed=0, curve=curve, endpoints=(first, noise))
    assert not noisy["works"] and noisy["curve"]["ci_low"] < 0 < noisy["curve"]["ci_high"]
    assert "interval of the rise" in noisy["reason"]
    md = render_claims_markdown(
        evaluate_claims(cfg(), up, entropy_of(up), seed=0, instrument_works=False), instrument=noisy
    )
    assert "paired bootstrap over 64 problems): DOES NOT RISE" in md


def test_instrument_check_hands_its_per_problem_values_to_the_across_seed_report():
    """``differences``: the max@1 differences by problem id and the held-out rises by position, the
    same values whose means the check reports (what `maxk analyze across-seeds` pools)."""
    up = metrics_of(levels={"grpo_continuous": 0.2})
    first = np.random.default_rng(1).uniform(0, 1, 16)
    last = first + np.linspace(-0.1, 0.2, 16)
    out: dict = {}
    check = instrument_check(cfg(), up, seed=0, curve=[(0, 0.3), (8, 0.4)], endpoints=(first, last),
                             differences=out)  # fmt: skip
    assert set(out) == set(INSTRUMENT_PARTS)
    d = (
        up[("grpo_continuous", "ds")].set_index("problem_id")["max@1"]
        - up[("base", "ds")].set_index("problem_id")["max@1"]
    )
    pd.testing.assert_series_equal(out["instrument"], d.sort_index(), check_names=False)
    assert out["instrument"].mean() == pytest.approx(check["objective"]["effect"])
    assert out["instrument_heldout"].to_numpy() == pytest.approx(last - first)
    assert list(out["instrument_heldout"].index[:3]) == ["0", "1", "2"]
    none: dict = {}
    instrument_check(cfg(), up, seed=0, differences=none)  # no endpoints: no held-out values
    assert set(none) == {"instrument"}


def test_heldout_endpoints_read_the_first_and_last_point_of_a_training_csv():
    frame = pd.DataFrame(
        {
            "step": [4, 0, 2, 3],
            "heldout/reward": [0.5, 0.3, 0.4, None],
            "heldout/problem_rewards": ["0.5 0.5", "0.25 0.35", "0.3 0.5", None],
        }
    )
    first, last = heldout_endpoints(frame)
    assert first.tolist() == [0.25, 0.35] and last.tolist() == [0.5, 0.5]
    assert heldout_endpoints(frame.drop(columns="heldout/problem_rewards")) is None
    with pytest.raises(ValueError, match="2 problems at the first point but 1 at the last"):
        heldout_endpoints(frame.assign(**{"heldout/problem_rewards": ["0.5", "0.25 0.35", "0.3 0.5", None]}))


def test_heldout_curve_reads_the_points_of_a_training_csv():
    frame = pd.DataFrame({"step": [2, 0, 1, 3], "heldout/reward": [0.4, 0.3, None, 0.5]})
    assert heldout_curve(frame) == [(0, 0.3), (2, 0.4), (3, 0.5)]
    assert heldout_curve(pd.DataFrame({"step": [1]})) == []


def test_cli_writes_csv_and_markdown(tmp_path, capsys):
    metrics = metrics_of(levels={"grpo_continuous": 0.3})
    for (run, ds), frame in metrics.items():
        write_metrics(tmp_path / "metrics" / run / f"{ds}.parquet", frame)
    rng = np.random.default_rng(0)
    ids = metrics[("base", "ds")]["problem_id"]
    for run in ("base", "grpo_continuous"):
        ent = rng.uniform(0.2, 1.0, len(ids) * 4)
        samples = pd.DataFrame(
            {
                "problem_id": np.repeat(ids, 4),
                "mean_entropy": ent - (0.15 if run == "grpo_continuous" else 0),
                "entropy_kind": "exact",
                "sum_logprob": -ent * 10,
                "num_tokens": 10,
            }
        )
        (tmp_path / "samples" / run).mkdir(parents=True)
        samples.to_parquet(tmp_path / "samples" / run / "ds.parquet")
    out = tmp_path / "claims"
    argv = ["analyze", "claims", "--config-json", json.dumps(cfg()), "--seed", "3"]
    metrics_files = sorted(str(p) for p in (tmp_path / "metrics").glob("*/*.parquet"))
    argv += ["--metrics", *metrics_files, "--samples", *map(str, (tmp_path / "samples").glob("*/*.parquet"))]
    outputs = ["--csv", str(out / "claims.csv"), "--md", str(out / "claims.md")]
    assert main([*argv, *outputs, "--differences", str(out / "differences.csv")]) == 0
    frame = pd.read_csv(out / "claims.csv")
    diffs = pd.read_csv(out / "differences.csv")
    assert list(diffs.columns) == ["claim", "problem_id", "difference"]
    means = diffs.groupby("claim")["difference"].mean().to_dict()
    assert set(INSTRUMENT_PARTS) & set(means) == {"instrument"}  # this test's curve has no endpoints
    means.pop("instrument")
    effects = frame.dropna(subset=["effect"]).set_index("id")["effect"].to_dict()
    assert means == pytest.approx(effects, abs=1e-6)
    assert set(frame["id"]) >= ISSUE_IDS
    assert frame.set_index("id").loc["grpo_raises_pass_at_1", "holds"]
    assert (out / "claims.md").read_text().count("\n| `") == len(CLAIMS)
    assert "claims hold" in capsys.readouterr().out
    # a missing metrics file is named
    (tmp_path / "metrics" / "bon_loo1" / "ds.parquet").unlink()
    assert main([*argv, *outputs]) != 0
    assert "bon_loo1/ds.parquet: metrics file not found" in capsys.readouterr().err
    # a pair no file is given for is named, with the flag that gives it
    argv.remove(str(tmp_path / "metrics" / "bon_loo1" / "ds.parquet"))
    assert main([*argv, *outputs]) != 0
    assert "no metrics file given for bon_loo1/ds: pass --metrics" in capsys.readouterr().err


def test_large_k_is_the_paper_s_128_when_samples_allow():
    metrics = metrics_of(n=256, p=6)
    frame = evaluate_claims(cfg(), metrics, seed=0).set_index("id")
    for cid in ("grpo_lowers_pass_at_large_k", "bon_mean_beats_bon_loo1", "rl_lowers_max_at_large_k"):
        assert frame.loc[cid, "k"] == 128
    assert LARGE == "large"


def test_the_instrument_run_is_a_setting():
    """analysis.claims.instrument_run picks the run checked (default: continuous GRPO); its pair and the
    base's are inputs of the claims job, and the check reads that run, not continuous GRPO."""
    from maxk.workflow.targets import run_curves

    assert cfg()["claims"]["instrument_run"] == "grpo_continuous"
    other = cfg(instrument_run="grpo_e4_ppo1")
    metrics = metrics_of(levels={"grpo_e4_ppo1": 0.2})  # only the four-epoch run learns
    assert not instrument_check(cfg(), metrics, seed=0)["works"]
    check = instrument_check(other, metrics, seed=0)
    assert check["works"] and check["run"] == check["objective"]["run"] == "grpo_e4_ppo1"
    assert ("grpo_e4_ppo1", "ds") in claim_inputs(other)[0] and ("base", "ds") in claim_inputs(other)[0]
    # the claims job reads every compared run's curves (the learning table), the instrument run's among them
    config = {"analysis": other, "runs": {"grpo_e4_ppo1": {}, "grpo_continuous": {}, "unlisted": {}}}
    curves = [f"results/seed1234/metrics/train/{r}.csv" for r in ("grpo_continuous", "grpo_e4_ppo1")]
    assert run_curves(config, 1234) == curves
    assert run_curves({**config, "analysis": {**other, "claims": None}}, 1234) == []


def test_roles_let_a_config_s_runs_play_the_paper_s():
    """analysis.claims.roles: the claims read the run that plays each role (a probe design's), on both
    sides, in MeanOf / BestOf and in readable_if; ids stay and the paper's values follow the role."""
    from maxk.analysis.claims import ROLES, paper_claims, with_roles

    roles = {"bon_loo1": "k2_bon_loo1_e4", "grpo_continuous": "grpo_lr"}
    renamed = {c.id: c for c in with_roles(CLAIMS, roles)}
    assert [c.id for c in with_roles(CLAIMS, roles)] == [c.id for c in CLAIMS]
    assert renamed["bon_mean_beats_bon_loo1"].b == "k2_bon_loo1_e4"
    assert "k2_bon_loo1_e4" in renamed["inference_aware_raise_max_at_1"].a.runs
    assert "bon_loo1" not in renamed["offpolicy_bon_best_max_at_large_k"].b.runs
    assert renamed["continuous_beats_binary"].readable_if == ("grpo_lr",)
    assert paper_claims(cfg()) == CLAIMS and "bon_loo1" in ROLES and "base" not in ROLES
    with pytest.raises(ValueError, match=r"\['bon_lo1'\] name no run of the paper's claims"):
        with_roles(CLAIMS, {"bon_lo1": "k2_bon_loo1_e4"})
    # evaluated: the role's run is read (not the run of the paper's name), the paper's value is the role's
    metrics = metrics_of(n=256, p=8, levels={"bon_loo1": -0.3})
    metrics[("k2_bon_loo1_e4", "ds")] = metrics[("bon_mean", "ds")]
    config = cfg(paper_dataset="CC", roles={"bon_loo1": "k2_bon_loo1_e4"})
    config["models"]["k2_bon_loo1_e4"] = "BoN LOO-1 at k 2"
    pairs, _ = claim_inputs(config)
    assert ("k2_bon_loo1_e4", "ds") in pairs and ("bon_loo1", "ds") not in pairs
    frame = evaluate_claims(config, metrics, entropy_of(metrics), seed=0, paper_lookup=paper_lookup)
    row = frame.set_index("id").loc["bon_mean_beats_bon_loo1"]
    assert row["b"] == "k2_bon_loo1_e4" and row["effect"] == 0.0  # the same frames: not bon_loo1's -0.3
    plain = evaluate_claims(
        cfg(paper_dataset="CC"), metrics, entropy_of(metrics), seed=0, paper_lookup=paper_lookup
    )
    assert row["paper_b"] == plain.set_index("id").loc["bon_mean_beats_bon_loo1", "paper_b"] is not None
