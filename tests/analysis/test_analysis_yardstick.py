"""The yardstick (beyond the paper): each run against the base at its best temperature, at the run's own
objective (maxk.analysis.claims.yardstick_claims, the learning table's tempered columns, the workflow's
tempered base models)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from test_analysis_learning import RUNS, SETTINGS, cfg, metrics_of

from maxk import paths as P
from maxk.analysis.claims import CLAIMS, BestOf, evaluate_claims, yardstick_claims
from maxk.analysis.learning import learning_table, own_objective, yardstick_models
from maxk.analysis.per_problem import metric_column, write_metrics
from maxk.analysis.stats import holm
from maxk.cli import main

TEMPERED = ("base_T0.7", "base_T0.85")


def yardstick_metrics(levels: dict) -> dict:
    """``metrics_of`` with the tempered base models too (``levels`` shifts any model's rewards)."""
    out = metrics_of(levels)
    for model in TEMPERED:
        out[(model, "ds")] = metrics_of({"base": levels.get(model, 0.0)})[("base", "ds")]
    return out


def test_one_claim_per_run_against_the_base_at_each_temperature_at_the_run_s_objective():
    config = cfg(yardstick_temperatures=[0.7, 0.85])
    assert yardstick_models(config) == TEMPERED
    claims = {c.id: c for c in yardstick_claims(config)}
    assert set(claims) == {f"{run}_beats_tempered_base" for run in RUNS}
    for run in RUNS:
        claim = claims[f"{run}_beats_tempered_base"]
        assert claim.a == run and claim.b == BestOf(("base", *TEMPERED))  # temperature 1 is a candidate
        assert (claim.metric, claim.k) == own_objective(SETTINGS[run])
        assert claim.readable_if == ()  # no learning gate: a run that did not learn does not beat it
    assert (
        claims["bon_mean_beats_tempered_base"].k == 4
        and claims["grpo_binary_beats_tempered_base"].metric == "pass"
    )
    assert yardstick_claims(cfg()) == () and yardstick_models(cfg()) == ()


def test_the_base_s_best_temperature_is_the_reference_and_the_family_has_its_own_holm():
    """b is the base or tempered base with the highest mean at the claim's own objective; the family is
    Holm-adjusted on its own, and the paper's claims read the same with the yardstick as without it."""
    config = cfg(yardstick_temperatures=[0.7, 0.85])
    levels = {"base_T0.7": -0.05, "base_T0.85": 0.06, "grpo_e4_ppo1": 0.2, "bon_mean": 0.03}
    metrics = yardstick_metrics(levels)
    frame = evaluate_claims(config, metrics, seed=5, claims=yardstick_claims(config)).set_index("id")
    for run in ("grpo_e4_ppo1", "bon_mean"):
        row = frame.loc[f"{run}_beats_tempered_base"]
        column = metric_column(*own_objective(SETTINGS[run]))
        means = {m: float(metrics[(m, "ds")][column].mean()) for m in ("base", *TEMPERED)}
        best = max(means, key=means.get)
        assert best == "base_T0.85" and row["b"].startswith(
            "base_T0.85 (best of base, base_T0.7, base_T0.85)"
        )
        assert row["b_value"] == pytest.approx(means[best])
        assert row["a_value"] == pytest.approx(float(metrics[(run, "ds")][column].mean()))
        assert row["effect"] == pytest.approx(row["a_value"] - row["b_value"])
    assert frame.loc["grpo_e4_ppo1_beats_tempered_base", "verdict"] == "holds"
    assert frame.loc["bon_mean_beats_tempered_base", "verdict"] == "does not hold"
    tested = frame.dropna(subset=["pvalue"])
    assert list(tested["pvalue_holm"]) == pytest.approx(holm(list(tested["pvalue"])))
    paper = evaluate_claims(config, metrics, seed=5).drop(columns="note")
    assert paper.equals(evaluate_claims(cfg(), metrics, seed=5).drop(columns="note"))
    assert len(paper) == len(CLAIMS)


def test_the_per_run_table_names_the_base_s_best_temperature_and_the_run_against_it():
    config = cfg(yardstick_temperatures=[0.7, 0.85])
    metrics = yardstick_metrics({"base_T0.7": 0.08, "base_T0.85": 0.04, "grpo_e4_ppo1": 0.1})
    table = learning_table(config, metrics, {}, seed=1).set_index("run")
    row = table.loc["grpo_e4_ppo1"]
    value = float(metrics[("base_T0.7", "ds")]["max@1"].mean())
    assert row["tempered_model"] == "base_T0.7" and row["tempered_value"] == pytest.approx(value)
    assert row["tempered_effect"] == pytest.approx(row["test_after"] - value)
    assert table["tempered_model"].notna().all()
    plain = learning_table(cfg(), metrics, {}, seed=1)
    assert plain["tempered_model"].isna().all() and plain["tempered_effect"].isna().all()
    # a tempered base without metrics leaves the column empty instead of choosing among the rest
    del metrics[("base_T0.85", "ds")]
    assert learning_table(config, metrics, {}, seed=1)["tempered_model"].isna().all()


def test_the_claims_job_writes_the_yardstick_and_the_across_seed_job_pools_it(tmp_path):
    config = cfg(yardstick_temperatures=[0.7, 0.85], instrument_run="grpo_e4_ppo1")
    config["models"].pop("grpo_continuous")  # its entropy claim needs samples, not what this tests
    outputs = {}
    for seed, shift in ((11, 0.1), (12, 0.07)):
        metrics = yardstick_metrics({"base_T0.85": 0.02, "grpo_e4_ppo1": shift})
        files = []
        for (model, ds), frame in metrics.items():
            path = tmp_path / P.metrics(seed, model, ds)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_metrics(path, frame)
            files.append(str(path))
        out = {k: tmp_path / P.seed_dir(seed) / "claims" / f"{k}" for k in
               ("claims.csv", "claims.md", "differences.csv", "yardstick.csv")}  # fmt: skip
        argv = ["analyze", "claims", "--config-json", json.dumps(config), "--seed", str(seed), "--metrics",
                *files, "--samples", "--csv", str(out["claims.csv"]), "--md", str(out["claims.md"]),
                "--differences", str(out["differences.csv"])]  # fmt: skip
        assert main([*argv, "--yardstick", str(out["yardstick.csv"])]) == 0
        yardstick = pd.read_csv(out["yardstick.csv"]).set_index("id")
        assert set(yardstick.index) == {f"{r}_beats_tempered_base" for r in config["models"] if r != "base"}
        assert not pd.read_csv(out["claims.csv"])["id"].str.endswith("_beats_tempered_base").any()
        text = out["claims.md"].read_text()
        assert "## Beyond the paper: each run against the base re-tempered" in text
        assert "grpo_e4_ppo1_beats_tempered_base" in text and text.index(
            "## The paper's claims"
        ) < text.index("## Beyond the paper")
        diffs = pd.read_csv(out["differences.csv"])
        mean = diffs[diffs["claim"] == "grpo_e4_ppo1_beats_tempered_base"]["difference"].mean()
        assert mean == pytest.approx(yardstick.loc["grpo_e4_ppo1_beats_tempered_base", "effect"], abs=1e-6)
        outputs[seed] = out
    # without yardstick temperatures there is nothing to write: said, not an empty file
    plain = {**config, "claims": {**config["claims"], "yardstick_temperatures": []}}
    argv[argv.index("--config-json") + 1] = json.dumps(plain)
    assert main([*argv, "--yardstick", str(tmp_path / "y.csv")]) != 0 and not (tmp_path / "y.csv").exists()
    across = tmp_path / P.across_seeds_yardstick()
    cmd = [sys.executable, "-m", "maxk", "analyze", "across-seeds", "--config-json", json.dumps(config),
           "--seed", "1", "--claims", *(str(o["claims.csv"]) for o in outputs.values()),
           "--differences", *(str(o["differences.csv"]) for o in outputs.values()),
           "--yardstick", *(str(o["yardstick.csv"]) for o in outputs.values()),
           "--yardstick-csv", str(across),
           "--metrics", str(tmp_path / P.metrics(11, "base", "ds")), "--csv", str(tmp_path / "a.csv"),
           "--md", str(tmp_path / "a.md"), "--curves-figure", str(tmp_path / "c.png"),
           "--claims-figure", str(tmp_path / "k.png")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pooled = pd.read_csv(across).set_index("id").loc["grpo_e4_ppo1_beats_tempered_base"]
    effects = [
        pd.read_csv(o["yardstick.csv"]).set_index("id").loc[pooled.name, "effect"] for o in outputs.values()
    ]
    assert pooled["pooled_seeds"] == 2 and pooled["effect"] == pytest.approx(np.mean(effects), abs=1e-5)
    assert (
        "## Beyond the paper: each run against the base re-tempered, across seeds"
        in (tmp_path / "a.md").read_text()
    )
    # the paper's claims across seeds are the same family as without the yardstick
    assert "beats_tempered_base" not in (tmp_path / "a.csv").read_text()


def test_a_tempered_base_is_the_base_s_weights_sampled_at_its_own_temperature():
    from maxk.config import load_config
    from maxk.workflow import slices

    config = load_config()
    assert P.tempered(0.85) == "base_T0.85" and P.temperature_of("base_T0.85") == 0.85
    assert P.temperature_of("base") is None and P.temperature_of("base_Tx") is None
    assert P.weights_of("base_T0.7") == "base" and P.weights_of("bon_mean") == "bon_mean"
    # the default's shipped base, and a base built per seed: the tempered base reads the same weights
    shipped = config["base_model"]["path"]
    assert P.model_path(config, 3, "base_T0.7") == P.model_path(config, 3, "base") == shipped
    built = {**config, "base_model": {**config["base_model"], "build": True}}
    assert P.model_path(built, 3, "base_T0.7") == P.model_path(built, 3, "base") == P.model_dir(3, "base")
    assert P.model_inputs(built, 3, "base_T0.7") == [P.model_dir(3, "base")]
    tempered = json.loads(slices.config_json(config, "generate_shard", "base_T0.7", seed=3))
    plain = json.loads(slices.config_json(config, "generate_shard", "base", seed=3))
    assert tempered["generate"]["temperature"] == 0.7 and plain["generate"] == config["generate"]
    assert {**tempered["generate"], "temperature": plain["generate"]["temperature"]} == plain["generate"]
    # a run's slice is the plain one: adding the yardstick reruns no existing generation job
    assert slices.config_json(config, "generate_shard", "bon_mean", seed=3) == json.dumps(
        plain, sort_keys=True
    )
