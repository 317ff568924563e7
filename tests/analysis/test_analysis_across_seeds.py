"""The claims across seeds (maxk.analysis.across_seeds, `maxk analyze across-seeds`)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from maxk import paths as P
from maxk.analysis.across_seeds import (
    across_seeds,
    curve_bands,
    differences_frame,
    pooled_instrument,
    render_across_seeds,
    series_of,
)
from maxk.analysis.claims import NOT_TESTABLE, NOT_WORKING
from maxk.analysis.stats import random_effects_interval, seed_spread

ROOT = Path(__file__).resolve().parents[2]
KW = {"confidence": 0.95, "alpha": 0.05, "power": 0.8}


def _seed(rng, shift: float, *, works: bool = True, holds=("c1",), n: int = 40, gate: str | None = None):
    """One seed's claims.csv and differences.csv: claim c1 with mean ``shift`` (``gate``: not testable
    there, for that reason), c2 untested."""
    d = rng.normal(shift, 0.1, size=n)
    verdict = NOT_WORKING if not works else ("holds" if "c1" in holds else "does not hold")
    claims = pd.DataFrame(
        [
            {"id": "c1", "statement": "a beats b", "metric": "max", "effect": d.mean(),
             "ci_low": d.mean() - 0.03, "ci_high": d.mean() + 0.03, "paper_effect": 0.05,
             "verdict": f"{NOT_TESTABLE}: {gate}" if gate else verdict},
            {"id": "c2", "statement": "untested", "metric": "pass", "effect": math.nan, "ci_low": math.nan,
             "ci_high": math.nan, "paper_effect": math.nan, "verdict": "not tested"},
        ]
    )  # fmt: skip
    ids = pd.Index([f"p{i:03d}" for i in range(n)], name="problem_id")
    return claims, differences_frame({"c1": pd.Series(d, index=ids)}), d


def test_pooled_effect_is_the_mean_of_the_working_seeds_with_the_random_effects_interval():
    rng = np.random.default_rng(0)
    (c1, d1, a1), (c2, d2, a2) = _seed(rng, 0.05), _seed(rng, 0.01, holds=())
    c3, d3, _ = _seed(rng, -0.2, works=False)
    c4, d4, _ = _seed(rng, 0.3, gate="bon_mean did not raise max@4")
    frame = across_seeds({1: c1, 2: c2, 3: c3, 4: c4}, {1: d1, 2: d2, 3: d3, 4: d4}, **KW)
    row = frame.set_index("id").loc["c1"]
    assert row["pooled_seeds"] == 2 and row["tested_in"] == 2 and row["holds_in"] == 1
    # seed 3's instrument and seed 4's run that did not learn: listed, not pooled, not counted as read
    assert row["effect"] == pytest.approx((a1.mean() + a2.mean()) / 2)
    # the claims' family is c1 alone (the only claim pooled on two seeds): its own spread, one df
    want = random_effects_interval([a1, a2], confidence=0.95, spread=seed_spread([[a1, a2]]))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((want.low, want.high)) and want.df == 1
    assert row["pvalue"] == pytest.approx(want.pvalue)
    assert row["detectable_effect"] > 0 and row["n_problems"] == "40,40"
    assert row["verdict_3"] == NOT_WORKING and row["effect_2"] == pytest.approx(a2.mean())
    untested = frame.set_index("id").loc["c2"]
    assert untested["tested_in"] == 0 and untested["pooled_seeds"] == 0 and math.isnan(untested["effect"])
    text = render_across_seeds(frame, 3, confidence=0.95, power=0.8)
    assert "seed 3 NOT WORKING" in text and "(3 of 4)" in text
    assert "| `c1` | **" in text and "(n/w)" in text and "(n/t)" in text and "1 of 2" in text
    assert "not tested" in text


def _with_instrument(diffs: pd.DataFrame, objective: np.ndarray, rise: np.ndarray | None) -> pd.DataFrame:
    parts = {"instrument": pd.Series(objective, index=[f"p{i:03d}" for i in range(objective.size)])}
    if rise is not None:
        parts["instrument_heldout"] = pd.Series(rise, index=[str(i) for i in range(rise.size)])
    return pd.concat([diffs, differences_frame(parts)], ignore_index=True)


def test_the_instrument_is_pooled_over_every_seed_working_or_not():
    """Unlike the claims, the instrument's two parts pool every seed (a failing seed is part of the
    answer to "does RL raise its objective on unseen problems"), with the random-effects interval (no
    run's per-problem values here: its own spread); a seed whose differences.csv has no held-out rise
    adds nothing to that part."""
    rng = np.random.default_rng(5)
    seeds = {1: (0.03, True), 2: (0.002, False), 3: (0.02, True)}
    claims, diffs, objective, rise = {}, {}, {}, {}
    for s, (shift, works) in seeds.items():
        c, d, _ = _seed(rng, 0.01, works=works)
        objective[s] = rng.normal(shift, 0.08, 60)
        rise[s] = rng.normal(shift, 0.1, 30) if s != 3 else None
        claims[s], diffs[s] = c, _with_instrument(d, objective[s], rise[s])
    frame = across_seeds(claims, diffs, **KW)
    assert frame.set_index("id").loc["c1", "pooled_seeds"] == 2  # the claims still pool working seeds
    parts = {p["part"]: p for p in frame.attrs["instrument"]}
    obj, held = parts["instrument"], parts["instrument_heldout"]
    assert obj["seeds"] == [1, 2, 3] and obj["works_in"] == 2 and held["seeds"] == [1, 2]
    assert obj["effect"] == pytest.approx(np.mean([objective[s].mean() for s in seeds]))
    want = random_effects_interval(list(objective.values()), confidence=0.95)
    assert (obj["ci_low"], obj["ci_high"]) == pytest.approx((want.low, want.high))
    assert obj["ok"] == (want.low > 0)
    assert held["effect"] == pytest.approx((rise[1].mean() + rise[2].mean()) / 2)
    text = render_across_seeds(frame, 3, confidence=0.95, power=0.8)
    assert "instrument, max@1, run - base, mean over all 3 seed(s) that record it (working or not): " in text
    assert "per-seed check passes on 2 of 3 seed(s)" in text and "held-out rise" in text
    assert obj["effect"] > 0 and f"; detectable with 80% power: {obj['detectable']:.3f}" in text
    # no runs' values: the effect alone is its family
    assert obj["seeds_for"] == want.seeds_for(want.effect, alpha=0.025, power=0.8)
    assert f"the gain measured needs {obj['seeds_for']} seeds" in text
    assert text.index("instrument, max@1") < text.index("| claim |")
    # files written before the instrument's rows: no pooled line, the claims as before
    old = across_seeds(claims, {s: d[d["claim"] == "c1"] for s, d in diffs.items()}, **KW)
    assert old.attrs["instrument"] == [] and "mean over all" not in render_across_seeds(
        old, 3, confidence=0.95, power=0.8
    )
    # a part at zero on every seed is not above zero
    flat = pooled_instrument({s: _with_instrument(diffs[s].iloc[:0], np.zeros(20), None) for s in (1, 2)},
                             {1: True, 2: True}, confidence=0.95)  # fmt: skip
    assert len(flat) == 1 and flat[0]["effect"] == 0 and not flat[0]["ok"]


def test_the_seed_level_widens_the_interval_when_seeds_disagree():
    """The same problems-level noise, seeds that agree or disagree: only the seed level tells them apart."""
    rng = np.random.default_rng(1)
    agree = [rng.normal(0.02, 0.1, 60) for _ in range(4)]
    disagree = [a - a.mean() + m for a, m in zip(agree, (-0.1, 0.0, 0.05, 0.13), strict=True)]
    width = {}
    for name, arrays in (("agree", agree), ("disagree", disagree)):
        width[name] = random_effects_interval(arrays, confidence=0.95).se
    assert width["disagree"] > 2 * width["agree"]


def test_inconsistent_inputs_fail_naming_the_seed():
    rng = np.random.default_rng(2)
    (c1, d1, _), (c2, d2, _) = _seed(rng, 0.0), _seed(rng, 0.0)
    with pytest.raises(ValueError, match="differences of seeds"):
        across_seeds({1: c1, 2: c2}, {1: d1}, **KW)
    with pytest.raises(ValueError, match=r"seed 2: claims\.csv has no claim 'c2'"):
        across_seeds({1: c1, 2: c2[c2["id"] == "c1"]}, {1: d1, 2: d2}, **KW)


def test_the_instrument_shares_the_spread_of_the_runs_family():
    """With the runs' per-problem values recorded, the instrument's run - base part takes the spread of
    the runs' test-set effects (their seeds disagree widely here), its held-out rise that of the runs'
    held-out rises (they agree); the seeds its gain needs grow the family's degrees of freedom by its
    members."""
    from maxk.analysis.across_seeds import learning_spreads

    rng = np.random.default_rng(8)
    ids = [f"p{i:03d}" for i in range(80)]
    claims, diffs, runs = {}, {}, {"test": {}, "heldout": {}}
    for s, (shift, spread) in {1: (0.03, 0.06), 2: (0.01, -0.05), 3: (0.02, 0.0)}.items():
        c, d, _ = _seed(rng, 0.01)
        series = {"instrument": pd.Series(rng.normal(shift, 0.05, 80), index=ids),
                  "instrument_heldout": pd.Series(rng.normal(shift, 0.05, 80), index=ids)}  # fmt: skip
        for run in ("r1", "r2", "r3"):
            series[f"learned:test:{run}"] = pd.Series(rng.normal(spread, 0.05, 80), index=ids)
            series[f"learned:heldout:{run}"] = pd.Series(rng.normal(0.0, 0.05, 80), index=ids)
            for part in runs:
                runs[part].setdefault(run, []).append(series[f"learned:{part}:{run}"].to_numpy())
        claims[s], diffs[s] = c, pd.concat([d, differences_frame(series)], ignore_index=True)
    spreads = learning_spreads(diffs)
    assert spreads["test"] == seed_spread(runs["test"].values()) and spreads["test"].members == 3
    assert spreads["heldout"] == seed_spread(runs["heldout"].values())
    assert spreads["test"].tau2 > 10 * spreads["heldout"].tau2  # the parts are separate families
    parts = {p["part"]: p for p in across_seeds(claims, diffs, **KW).attrs["instrument"]}
    for part, family in (("instrument", "test"), ("instrument_heldout", "heldout")):
        values = [f.loc[f["claim"] == part, "difference"].to_numpy() for f in diffs.values()]
        want = random_effects_interval(values, confidence=0.95, spread=spreads[family])
        assert (parts[part]["ci_low"], parts[part]["ci_high"]) == pytest.approx((want.low, want.high))
        need = want.seeds_for(want.effect, alpha=0.025, power=0.8, members=3)
        assert parts[part]["seeds_for"] == need
    wide = parts["instrument"]
    alone = random_effects_interval([diffs[s].loc[diffs[s]["claim"] == "instrument", "difference"].to_numpy()
                                     for s in diffs], confidence=0.95)  # fmt: skip
    assert wide["ci_high"] - wide["ci_low"] != pytest.approx(alone.high - alone.low)


def test_curve_bands_average_the_seeds():
    frames = {s: {"base": pd.DataFrame({"pass@1": [0.0, 1.0, float(s)], "max@1": [0.5] * 3})} for s in (0, 1)}
    bands = curve_bands(frames, ["pass@1", "max@1"], confidence=0.95)
    by = bands.set_index("column")
    assert by.loc["pass@1", "mean"] == pytest.approx((1 / 3 + 2 / 3) / 2) and by.loc["max@1", "low"] == 0.5
    assert set(bands["seeds"]) == {2}
    # a column's spread is pooled over the models: the second model's seeds disagree, and set the first's
    rl = {s: pd.DataFrame({"pass@1": [0.0, 1.0, 0.5 + s / 2], "max@1": [0.5] * 3}) for s in (0, 1)}
    wide = {s: {"base": frames[s]["base"], "rl": rl[s]} for s in (0, 1)}
    both = curve_bands(wide, ["pass@1", "max@1"], confidence=0.95).set_index(["model", "column"])
    column = {m: [wide[s][m]["pass@1"].to_numpy() for s in (0, 1)] for m in ("base", "rl")}
    want = random_effects_interval(column["base"], confidence=0.95, spread=seed_spread(column.values()))
    assert (both.loc[("base", "pass@1"), "low"], both.loc[("base", "pass@1"), "high"]) == pytest.approx(
        (want.low, want.high)
    )
    assert want.high - want.low != pytest.approx(by.loc["pass@1", "high"] - by.loc["pass@1", "low"])
    assert both.loc[("base", "max@1"), "low"] == 0.5  # another column's spread is its own


def test_the_command_writes_every_output(tmp_path):
    rng = np.random.default_rng(4)
    claims, diffs, metrics = [], [], []
    for seed in (11, 12):
        c, d, _ = _seed(rng, 0.04)
        paths = (tmp_path / P.claims(seed, "csv"), tmp_path / P.claim_differences(seed),
                 tmp_path / P.metrics(seed, "base", "suite_test"))  # fmt: skip
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
        c.to_csv(paths[0], index=False)
        d.to_csv(paths[1], index=False)
        pd.DataFrame({"problem_id": ["a", "b"], "pass@1": [0.1, 0.3], "pass@2": [0.2, 0.5],
                      "max@1": [0.3, 0.4], "max@2": [0.4, 0.6]}).to_parquet(paths[2])  # fmt: skip
        claims.append(str(paths[0]))
        diffs.append(str(paths[1]))
        metrics.append(str(paths[2]))
    cfg = (
        '{"claims": {"dataset": "suite_test", "power": 0.8}, "significance": {"alpha": 0.05}, '
        '"bootstrap": {"resamples": 100, "confidence": 0.95}, "decimals": 3, "models": {"base": "Base"}}'
    )
    out = {k: str(tmp_path / P.across_seeds(k)) for k in ("csv", "md")}
    figs = [str(tmp_path / P.across_seeds_figure(n, "png")) for n in P.ACROSS_SEED_FIGURES]
    cmd = [sys.executable, "-m", "maxk", "analyze", "across-seeds", "--config-json", cfg, "--seed", "1",
           "--claims", *claims, "--differences", *diffs, "--metrics", *metrics, "--csv", out["csv"],
           "--md", out["md"], "--curves-figure", figs[0], "--claims-figure", figs[1]]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "seed 11 works; seed 12 works" in Path(out["md"]).read_text()
    assert all(Path(f).stat().st_size > 1000 for f in figs)
    table = pd.read_csv(out["csv"])
    assert list(table["id"]) == ["c1", "c2"] and table.loc[0, "pooled_seeds"] == 2
    # a file outside results/seed<N>/ cannot say its seed: a clear error, no output
    bad = cmd.copy()
    bad[bad.index("--claims") + 1] = str(tmp_path / "claims.csv")
    res = subprocess.run(bad, capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode != 0 and "--claims" in res.stderr and "not under a results/seed" in res.stderr


def test_what_each_run_learned_is_listed_per_seed_and_pooled_over_seeds():
    """Each seed's learning.csv row (test-set effect, regime) and each part pooled with the random-effects
    interval over the seeds that measured it (their per-problem values in differences.csv; the family
    of the test part is this one run)."""
    from maxk.analysis.across_seeds import (
        learning_across_seeds,
        learning_spreads,
        render_learning_across_seeds,
    )

    rng = np.random.default_rng(2)
    learning, differences, tests = {}, {}, []
    for s, shift in ((1, 0.05), (2, -0.02)):
        d = rng.normal(shift, 0.05, size=30)
        tests.append(d)
        learning[s] = pd.DataFrame([
            {"run": "offpolicy_bon", "objective": "max@4", "test_effect": d.mean(),
             "test_ci_low": d.mean() - 0.01, "test_ci_high": d.mean() + 0.01, "off_policy": True,
             "clamped_frac": 0.4 if s == 2 else 0.01, "regime_ok": s == 1, "paper_effect": 0.027},
        ])  # fmt: skip
        ids = pd.Index([f"p{i}" for i in range(30)], name="problem_id")
        differences[s] = differences_frame({"learned:test:offpolicy_bon": pd.Series(d, index=ids)})
    rows = learning_across_seeds(learning, differences, confidence=0.95)
    (row,) = rows
    assert row["run"] == "offpolicy_bon" and row["objective"] == "max@4" and set(row["seeds"]) == {1, 2}
    want = random_effects_interval(tests, confidence=0.95, spread=seed_spread([tests]))
    pooled = row["pooled"]["test"]
    got = (pooled["effect"], pooled["ci_low"], pooled["ci_high"])
    assert got == pytest.approx((want.effect, want.low, want.high))
    assert pooled["seeds"] == 2 and "heldout" not in row["pooled"] and math.isnan(pooled["detectable"])
    (row,) = learning_across_seeds(learning, differences, confidence=0.95, power=0.8)
    # at the interval's one-sided level and the claims' power: (t_1(0.975) + t_1(0.8)) * se
    assert row["pooled"]["test"]["detectable"] == pytest.approx(want.detectable(alpha=0.025, power=0.8))
    assert "; detectable " in "\n".join(render_learning_across_seeds([row], [1, 2], 3))
    text = "\n".join(render_learning_across_seeds(rows, [1, 2], 3))
    assert "## What each run learned, across seeds" in text and "(2 seeds)" in text
    assert "1: in (1% clamped); 2: out (40% clamped)" in text and "| not measured |" in text
    assert "| paper: run - base |" in text and "| +0.027 |" in text  # the paper's own effect beside ours
    learning[2].loc[0, "paper_effect"] = learning[1].loc[0, "paper_effect"] = np.nan  # not reported
    rows = learning_across_seeds(learning, differences, confidence=0.95)
    assert "paper: run - base" not in "\n".join(render_learning_across_seeds(rows, [1, 2], 3))
    # the runs' spread between seeds, stated per part (the test part's: this one run's, 1 df)
    spreads = learning_spreads(differences)
    text = "\n".join(render_learning_across_seeds(rows, [1, 2], 3, spreads))
    sd = f"{math.sqrt(seed_spread([tests]).tau2):.3f}"
    assert sd != "0.000" and f"over the runs: test: sd {sd} (1 degrees of freedom); heldout: not " in text


def test_the_pooled_verdict_is_a_holm_adjusted_random_effects_t_test_on_two_seeds_or_more():
    """holds: pooled effect > 0 and the one-sided random-effects t-test's p (the spread between seeds
    pooled over the claims read on two seeds), Holm-adjusted over those claims, below alpha; a claim read
    on one seed or none gets no pooled test."""
    from maxk.analysis.across_seeds import MIN_POOLED_SEEDS, NOT_READ, ONE_SEED
    from maxk.analysis.stats import holm

    rng = np.random.default_rng(5)
    ids = pd.Index([f"p{i:03d}" for i in range(50)], name="problem_id")
    shifts = {"up": 0.12, "down": -0.04, "flat": 0.002}
    claims, differences, per_seed = {}, {}, {c: [] for c in shifts}
    for s in (1, 2):
        rows, series = [], {}
        for cid, shift in shifts.items():
            d = rng.normal(shift, 0.1, size=ids.size)
            per_seed[cid].append(d)
            series[cid] = pd.Series(d, index=ids)
            rows.append({"id": cid, "statement": cid, "metric": "max", "effect": d.mean(), "ci_low": 0.0,
                         "ci_high": 0.0, "paper_effect": math.nan, "verdict": "does not hold"})  # fmt: skip
        one = rng.normal(0.1, 0.1, size=ids.size)  # read on seed 1 only: seed 2 could not read it
        if s == 1:
            series["one"] = pd.Series(one, index=ids)
        verdict = "holds" if s == 1 else f"{NOT_TESTABLE}: bon_mean did not raise max@4"
        rows.append({"id": "one", "statement": "one", "metric": "max", "effect": one.mean(), "ci_low": 0.0,
                     "ci_high": 0.0, "paper_effect": math.nan, "verdict": verdict})  # fmt: skip
        rows.append({"id": "none", "statement": "none", "metric": "max", "effect": math.nan,
                     "ci_low": math.nan, "ci_high": math.nan, "paper_effect": math.nan,
                     "verdict": "not tested"})  # fmt: skip
        claims[s], differences[s] = pd.DataFrame(rows), differences_frame(series)
    frame = across_seeds(claims, differences, **KW).set_index("id")
    assert MIN_POOLED_SEEDS == 2
    pooled = ["up", "down", "flat"]
    want, spread = [], seed_spread(per_seed[c] for c in pooled)
    assert frame.attrs["spread"] == spread and spread.df == 3
    for cid in pooled:
        want.append(random_effects_interval(per_seed[cid], confidence=0.95, spread=spread).pvalue)
        assert frame.loc[cid, "pvalue"] == pytest.approx(want[-1])
    assert list(frame.loc[pooled, "pvalue_holm"]) == pytest.approx(holm(want))  # m = 3: the pooled claims
    assert frame.loc["up", "verdict"] == "holds" and frame.loc["down", "verdict"] == "does not hold"
    assert frame.loc["flat", "verdict"] == "does not hold"
    # a claim read on fewer than two seeds says why each other seed is not pooled
    why = f"seed 2: {NOT_TESTABLE}: bon_mean did not raise max@4"
    assert frame.loc["one", "verdict"] == f"{ONE_SEED}: {why}" and math.isnan(frame.loc["one", "pvalue_holm"])
    assert frame.loc["one", "not_pooled"] == why and frame.loc["up", "not_pooled"] == ""
    none = "seed 1: no effect (not tested); seed 2: no effect (not tested)"
    assert frame.loc["none", "verdict"] == f"{NOT_READ}: {none}"
    text = render_across_seeds(frame.reset_index(), 3, confidence=0.95, power=0.8)
    assert "| pooled verdict |" in text and "| **holds** |" in text and f"| {ONE_SEED}: seed 2: " in text


def _gate_seed(
    rng,
    shifts: dict[str, float],
    *,
    n: int = 60,
    works: bool = True,
    regime_ok: bool = True,
    instrument: float | None = None,
):
    """One seed of the pooled gate's tests: claim ``e4_vs_e1`` (gating on runs ``e4`` and ``e1``),
    claim ``off_vs_base`` (gating on the off-policy run ``off``) and ``free`` (gating on none), each
    with a per-problem difference of mean 0.05; each run's test-set effect of mean ``shifts[run]`` exactly
    (its learning.csv row: learned where its interval, mean -+ 2 se, is above zero). ``instrument``: the
    mean of the instrument check's two parts' per-problem values (None: the seed's files record none)."""
    ids = pd.Index([f"p{i:03d}" for i in range(n)], name="problem_id")
    learned, rows, series = {}, [], {}
    if instrument is not None:
        series["instrument"] = pd.Series(rng.normal(instrument, 0.05, size=n), index=ids)
        series["instrument_heldout"] = pd.Series(rng.normal(instrument, 0.05, size=n), index=ids)
    for run, shift in shifts.items():
        z = rng.normal(size=n)
        d = shift + 0.05 * (z - z.mean()) / z.std(ddof=1)  # mean shift and sd 0.05 exactly
        se = d.std(ddof=1) / np.sqrt(n)
        learned[run] = d.mean() - 2 * se > 0
        series[f"learned:test:{run}"] = pd.Series(d, index=ids)
        rows.append({"run": run, "objective": "max@1", "test_effect": d.mean(),
                     "test_ci_low": d.mean() - 2 * se, "test_ci_high": d.mean() + 2 * se,
                     "learned": learned[run], "off_policy": run == "off",
                     "regime_ok": regime_ok if run == "off" else math.nan})  # fmt: skip
    claims = []
    for cid, runs in (("e4_vs_e1", ("e4", "e1")), ("off_vs_base", ("off",)), ("free", ())):
        d = rng.normal(0.05, 0.1, size=n)
        series[cid] = pd.Series(d, index=ids)
        blocked = [f"{r} did not raise max@1" for r in runs if not learned[r]]
        if not regime_ok and "off" in runs and learned["off"]:
            blocked.append("off is outside the first-order regime")
        verdict = (NOT_WORKING if not works else f"{NOT_TESTABLE}: " + "; ".join(blocked) if blocked
                   else "holds")  # fmt: skip
        claims.append({"id": cid, "statement": cid, "metric": "max", "effect": d.mean(), "ci_low": 0.0,
                       "ci_high": 0.1, "paper_effect": math.nan, "verdict": verdict})  # fmt: skip
    return pd.DataFrame(claims), differences_frame(series), pd.DataFrame(rows)


GATED = {"e4_vs_e1": ("e4", "e1"), "off_vs_base": ("off", "base"), "free": ()}  # base: no trained run


def test_the_learning_gate_is_read_pooled_over_the_seeds_a_claim_pools():
    """A run that learned on one seed and fell short of its interval on the other, but learned pooled:
    its claims pool both seeds and are read. A run that learned on no seed and not pooled: its claims
    are "not testable", name the run and its pooled interval, and leave the Holm family."""
    from maxk.analysis.across_seeds import learning_across_seeds, learning_spreads, pooled_gate
    from maxk.analysis.stats import holm

    rng = np.random.default_rng(11)
    # e1: se 0.005 a seed, learned on seed 1 (0.016 > 2 se), not on seed 2 (0.009 < 2 se); the runs'
    # spread pooled is 0 (their seeds agree within the problem noise): 0.0125 > t_3(0.975) * 0.0035
    c1, d1, l1 = _gate_seed(rng, {"e4": 0.03, "e1": 0.016, "off": 0.0}, n=100)
    c2, d2, l2 = _gate_seed(rng, {"e4": 0.03, "e1": 0.009, "off": 0.0}, n=100)
    assert bool(l1.set_index("run").loc["e1", "learned"]) and not l2.set_index("run").loc["e1", "learned"]
    assert str(c2.set_index("id").loc["e4_vs_e1", "verdict"]).startswith(NOT_TESTABLE)
    claims, diffs, learning = {1: c1, 2: c2}, {1: d1, 2: d2}, {1: l1, 2: l2}
    frame = across_seeds(claims, diffs, **KW, learning=learning, gated=GATED).set_index("id")
    # seed 2 is pooled although e1 missed its own interval there: the gate is read pooled
    assert frame.loc["e4_vs_e1", "pooled_seeds"] == 2 and frame.loc["e4_vs_e1", "pooled_on"] == "1,2"
    assert frame.loc["e4_vs_e1", "tested_in"] == 1  # read on its own on seed 1 only
    assert frame.loc["e4_vs_e1", "gate"] in ("", None) or pd.isna(frame.loc["e4_vs_e1", "gate"])
    assert frame.loc["e4_vs_e1", "verdict"] in ("holds", "does not hold")
    # `off` learned nowhere: not testable pooled, named with its pooled interval
    verdict = frame.loc["off_vs_base", "verdict"]
    assert verdict.startswith(f"{NOT_TESTABLE}: off did not raise max@1 pooled over seeds 1, 2 (")
    assert math.isnan(frame.loc["off_vs_base", "pvalue_holm"])
    # the gate's interval is the per-run pooled interval of the learning section (same seeds, same family)
    rows = learning_across_seeds(learning, diffs, confidence=0.95)
    off = next(r for r in rows if r["run"] == "off")["pooled"]["test"]
    assert f"[{off['ci_low']:+.3f}, {off['ci_high']:+.3f}]" in verdict and off["ci_low"] <= 0
    rows = learning_across_seeds(learning, diffs, confidence=0.95, power=0.8)
    off = next(r for r in rows if r["run"] == "off")["pooled"]["test"]
    assert verdict.endswith(f"; detectable {off['detectable']:.3f})")  # what the pooled gate can see
    spread = learning_spreads(diffs)["test"]  # the runs' family: e4, e1, off, one degree of freedom each
    assert spread.df == 3
    assert pooled_gate("e1", [1, 2], {s: f.set_index("run") for s, f in learning.items()}, diffs,
                       confidence=0.95, spread=spread) is None  # fmt: skip
    assert (
        pooled_gate(
            "e1", [1, 2], {s: f.set_index("run") for s, f in learning.items()}, diffs, confidence=0.95
        )
        is not None
    )  # two seeds alone: the t-test on one df cannot read it
    # the Holm family holds the claims read pooled: e4_vs_e1 and free, not off_vs_base
    # (the claims' spread pools all three: off_vs_base's values are measured, only its verdict is gated)
    read = ["e4_vs_e1", "free"]
    per = {c: [d.loc[d["claim"] == c, "difference"].to_numpy() for d in (d1, d2)] for c in GATED}
    spread = seed_spread(per.values())
    p = [random_effects_interval(per[cid], confidence=0.95, spread=spread).pvalue for cid in read]
    assert list(frame.loc[read, "pvalue_holm"]) == pytest.approx(holm(p))
    # each claim's smallest detectable effect is at the level of that family: alpha / 2 (two claims read,
    # the third gated out), not alpha / 3 (every claim with an effect on the first seed)
    for cid in GATED:
        pooled = random_effects_interval(per[cid], confidence=0.95, spread=spread)
        want = pooled.detectable(alpha=KW["alpha"] / len(read), power=KW["power"])
        assert frame.loc[cid, "detectable_effect"] == pytest.approx(want)
        assert want < pooled.detectable(alpha=KW["alpha"] / len(GATED), power=KW["power"])
    # without the learning tables: the per-seed rule, seed 2 is not pooled for e4_vs_e1
    old = across_seeds(claims, diffs, **KW).set_index("id")
    assert old.loc["e4_vs_e1", "pooled_seeds"] == 1
    assert old.loc["e4_vs_e1", "verdict"] == "read on one seed: seed 2: not testable: e1 did not raise max@1"
    text = render_across_seeds(
        across_seeds(claims, diffs, **KW, learning=learning, gated=GATED),
        3,
        confidence=0.95,
        power=0.8,
    )
    assert "off did not raise max@1 pooled over seeds 1, 2" in text and "learning gate, pooled" in text


def test_a_seed_is_pooled_only_where_its_instrument_works_and_every_gated_run_is_in_its_regime():
    rng = np.random.default_rng(12)
    shifts = {"e4": 0.04, "e1": 0.04, "off": 0.04}
    c1, d1, l1 = _gate_seed(rng, shifts)
    c2, d2, l2 = _gate_seed(rng, shifts, regime_ok=False)  # `off` out of its regime on seed 2
    c3, d3, l3 = _gate_seed(rng, shifts, works=False)  # seed 3's instrument does not work
    frame = across_seeds({1: c1, 2: c2, 3: c3}, {1: d1, 2: d2, 3: d3}, **KW,
                         learning={1: l1, 2: l2, 3: l3}, gated=GATED).set_index("id")  # fmt: skip
    assert frame.loc["e4_vs_e1", "pooled_on"] == "1,2" and frame.loc["free", "pooled_on"] == "1,2"
    assert frame.loc["off_vs_base", "pooled_on"] == "1"
    assert frame.loc["off_vs_base", "verdict"].startswith("read on one seed: seed 2: off out of its off-")
    assert frame.loc["off_vs_base", "verdict"].endswith(f"; seed 3: {NOT_WORKING}")
    l2["learned"] = l2["learned"].astype(object)
    l2.loc[l2["run"] == "e1", "learned"] = math.nan  # e1 not measured on seed 2: not pooled there
    frame = across_seeds({1: c1, 2: c2}, {1: d1, 2: d2}, **KW, learning={1: l1, 2: l2},
                         gated=GATED).set_index("id")  # fmt: skip
    assert frame.loc["e4_vs_e1", "pooled_on"] == "1" and frame.loc["free", "pooled_on"] == "1,2"
    assert frame.loc["e4_vs_e1", "not_pooled"] == "seed 2: e1's objective not measured"
    with pytest.raises(ValueError, match="go together"):
        across_seeds({1: c1, 2: c2}, {1: d1, 2: d2}, **KW, learning={1: l1, 2: l2})
    with pytest.raises(ValueError, match="learning of seeds"):
        across_seeds({1: c1, 2: c2}, {1: d1, 2: d2}, **KW, learning={1: l1}, gated=GATED)


def test_across_seeds_the_instrument_gates_pooled_and_every_seed_is_pooled_where_it_works():
    """Seed 3's own instrument check failed, but pooled over the three seeds the instrument works: seed 3
    is pooled like the others (dropping it would select the seeds where RL gained more). Where the pooled
    instrument does not work, every gated claim says so, with its pooled effect still shown."""
    rng = np.random.default_rng(13)
    shifts = {"e4": 0.04, "e1": 0.04, "off": 0.04}
    seeds = {1: {}, 2: {"regime_ok": False}, 3: {"works": False}}
    made = {s: _gate_seed(rng, shifts, instrument=0.03, **kw) for s, kw in seeds.items()}
    claims, diffs, learning = ({s: m[i] for s, m in made.items()} for i in range(3))
    frame = across_seeds(claims, diffs, **KW, learning=learning, gated=GATED)
    assert frame.attrs["works"] == {1: True, 2: True, 3: False} and frame.attrs["instrument_blocked"] is None
    rows = frame.set_index("id")
    assert rows.loc["e4_vs_e1", "pooled_on"] == "1,2,3" and rows.loc["free", "pooled_on"] == "1,2,3"
    assert rows.loc["off_vs_base", "pooled_on"] == "1,3"  # seed 2: `off` out of its regime
    assert set(rows["verdict"]) <= {"holds", "does not hold"}
    text = render_across_seeds(frame, 3, confidence=0.95, power=0.8)
    assert (
        "seed 3 NOT WORKING" in text
        and "the instrument works, so each claim is pooled over every seed" in text
    )

    # the same seeds where RL did not raise its objective: no gated claim is read pooled
    made = {s: _gate_seed(rng, shifts, instrument=-0.03, **kw) for s, kw in seeds.items()}
    claims, diffs, learning = ({s: m[i] for s, m in made.items()} for i in range(3))
    frame = across_seeds(claims, diffs, **KW, learning=learning, gated=GATED)
    blocked = frame.attrs["instrument_blocked"]
    assert blocked.startswith(f"{NOT_WORKING} pooled over seeds 1, 2, 3 (max@1, run - base -0.0")
    rows = frame.set_index("id")
    assert (rows["verdict"] == blocked).all() and rows["pvalue_holm"].isna().all()
    assert rows.loc["e4_vs_e1", "pooled_seeds"] == 3 and np.isfinite(rows.loc["e4_vs_e1", "effect"])
    assert "the instrument does not work: the claims it gates are not read" in render_across_seeds(
        frame, 3, confidence=0.95, power=0.8
    )
    # without the learning tables (no gate read), each seed's own verdict decides, as before, and says so
    old = across_seeds(claims, diffs, **KW)
    assert old.set_index("id").loc["free", "pooled_on"] == "1,2" and old.attrs["instrument_blocked"] is None
    assert "pooled over the seeds whose instrument works" in render_across_seeds(
        old, 3, confidence=0.95, power=0.8
    )

    # a seed whose files record no instrument values (older files) is not taken on the others' word: the
    # per-seed rule, so seed 3 (its own check failed) stays out though seeds 1 and 2's pooled check works
    made = {s: _gate_seed(rng, shifts, instrument=0.03 if s < 3 else None, **kw) for s, kw in seeds.items()}
    claims, diffs, learning = ({s: m[i] for s, m in made.items()} for i in range(3))
    mixed = across_seeds(claims, diffs, **KW, learning=learning, gated=GATED)
    assert not mixed.attrs["instrument_pooled"] and mixed.set_index("id").loc["free", "pooled_on"] == "1,2"
    # one seed: its own check, as before
    alone = across_seeds({3: claims[3]}, {3: diffs[3]}, **KW, learning={3: learning[3]}, gated=GATED)
    assert not alone.attrs["instrument_pooled"] and (alone["pooled_seeds"] == 0).all()


def test_a_claim_not_shown_to_hold_is_undecided_where_the_pool_could_have_missed_the_paper_s_effect():
    """Not holding is evidence against the paper's claim only where the pool would have found the
    paper's own effect: where its smallest detectable effect is above the paper's, the verdict says so
    ("undecided") instead of "does not hold"; a claim that holds, one the pool can judge, and one the
    paper gives no effect for keep their verdicts."""
    from maxk.analysis.across_seeds import UNDECIDED

    rng = np.random.default_rng(21)
    ids = pd.Index([f"p{i:03d}" for i in range(60)], name="problem_id")
    specs = {"up": (0.10, 0.001), "small": (0.0, 0.001), "large": (0.0, 0.5), "none": (0.0, math.nan)}
    claims, differences = {}, {}
    for s in (1, 2):
        rows, series = [], {}
        for cid, (shift, paper) in specs.items():
            d = rng.normal(shift, 0.1, size=ids.size)
            series[cid] = pd.Series(d, index=ids)
            rows.append({"id": cid, "statement": cid, "metric": "max", "effect": d.mean(), "ci_low": 0.0,
                         "ci_high": 0.0, "paper_effect": paper, "verdict": "does not hold"})  # fmt: skip
        claims[s], differences[s] = pd.DataFrame(rows), differences_frame(series)
    frame = across_seeds(claims, differences, **KW).set_index("id")
    assert frame.loc["up", "verdict"] == "holds"
    small = frame.loc["small"]
    assert small["detectable_effect"] > 0.001
    assert small["verdict"] == (
        f"{UNDECIDED}: not shown to hold, but the pool detects {small['detectable_effect']:.3f} with the "
        "claims' power and the paper's effect is +0.001 (finding it needs more than 100 seeds like these, or "
        "more problems)"
    )
    # a paper effect within reach of more seeds: the verdict names how many (Pooled.seeds_for)
    for s in (1, 2):
        claims[s].loc[claims[s]["id"] == "small", "paper_effect"] = 0.03
    small = across_seeds(claims, differences, **KW).set_index("id").loc["small"]
    spread = seed_spread([series_of(differences[s], c) for s in (1, 2)] for c in specs)
    pooled = random_effects_interval([series_of(differences[s], "small") for s in (1, 2)], confidence=0.95,
                                     spread=spread)  # fmt: skip
    seeds = pooled.seeds_for(0.03, alpha=0.05 / 4, power=0.8, members=spread.members)
    assert small["detectable_effect"] > 0.03 and 2 < seeds <= 100
    assert small["verdict"].endswith(f"is +0.030 (finding it needs about {seeds} seeds like these)")
    assert frame.loc["large", "detectable_effect"] < 0.5 and frame.loc["large", "verdict"] == "does not hold"
    assert frame.loc["none", "verdict"] == "does not hold"
    from maxk.analysis.side_by_side import verdict_kind

    assert verdict_kind(small["verdict"]) == UNDECIDED
