"""End to end through ``maxk analyze``: scores -> metrics -> tables/stats/figures, and the lab."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import scores_frame, synthetic_rewards

from maxk.cli import main

CFG = {
    "ks": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "ragged": "error",
    "bootstrap": {"resamples": 100, "confidence": 0.95},
    "significance": {"alternative": "greater", "zero_method": "wilcox", "alpha": 0.05, "star": "holm"},
    "models": {"base": "Base model", "grpo": "GRPO", "ours": "Ours"},
    "datasets": {"d1": {"label": "Data one", "short": "D1"}, "d2": {"label": "Data two", "short": "D2"}},
    "tables": {
        "main": {
            "rows": ["base", "grpo", "ours"],
            "datasets": ["d1", "d2"],
            "metrics": ["max"],
            "ks": [128],
            "color": False,
            "significance": True,
        },
    },
    "full_tables": {
        "rows": ["base", "grpo", "ours"],
        "metrics": ["pass", "max"],
        "ks": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    },
    "figures": {
        "passk": {"dataset": "d1", "models": ["base", "grpo"], "metric": "pass"},
        "entropy": {"dataset": "d1", "models": ["base", "grpo"]},
        "maxk_curves": {"models": ["base", "grpo", "ours"]},
    },
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    cfg = json.dumps(CFG)
    for m_i, (model, level) in enumerate([("base", 0.0), ("grpo", 0.1), ("ours", 0.3)]):
        for d_i, dataset in enumerate(["d1", "d2"]):
            rewards = synthetic_rewards(30, 8, level, seed=10 * m_i + d_i)
            path = root / "scores" / model / f"{dataset}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            scores_frame(rewards, dataset).to_parquet(path)
            out = root / "metrics" / model / f"{dataset}.parquet"
            assert (
                main(
                    ["analyze", "metrics", "--config-json", cfg, "--scores", str(path), "--output", str(out)]
                )
                == 0
            )
            rng = np.random.default_rng(m_i)
            samples = pd.DataFrame(
                {
                    "problem_id": np.repeat([f"{dataset}/{i:03d}" for i in range(30)], 8),
                    "mean_entropy": rng.gamma(2.0, 0.3 / (1 + m_i), 240),
                    "entropy_kind": "exact",
                    "sum_logprob": -rng.gamma(2.0, 20.0, 240),
                    "num_tokens": rng.integers(10, 100, 240),
                }
            )
            spath = root / "samples" / model / f"{dataset}.parquet"
            spath.parent.mkdir(parents=True, exist_ok=True)
            samples.to_parquet(spath)
    return root


def METRICS(root):
    """Every metrics file under ``root``, as a shell glob names them (files no table reads included)."""
    return sorted(str(p) for p in (root / "metrics").glob("*/*.parquet"))


def SAMPLES(root):
    return sorted(str(p) for p in (root / "samples").glob("*/*.parquet"))


def _tables(workdir, cfg, table):
    """`maxk analyze tables` for one table, its three files named as the rule names them."""
    out = [str(workdir / "tables" / f"{table}.{ext}") for ext in ("tex", "md", "csv")]
    return ["analyze", "tables", "--config-json", cfg, "--seed", "3", "--metrics", *METRICS(workdir),
            "--table", table, "--tex", out[0], "--md", out[1], "--csv", out[2]]  # fmt: skip


def test_tables_and_stats(workdir):
    cfg = json.dumps(CFG)
    for t in ("main", "full_pass_d1", "full_max_d1", "full_pass_d2", "full_max_d2"):
        assert main(_tables(workdir, cfg, t)) == 0
    names = {p.name for p in (workdir / "tables").iterdir()}
    for t in ("main", "full_pass_d1", "full_max_d1", "full_pass_d2", "full_max_d2"):
        assert {f"{t}.tex", f"{t}.md", f"{t}.csv"} <= names
    main_tex = (workdir / "tables" / "main.tex").read_text()
    assert r"\textbf{" in main_tex and "max@8 shown instead" in main_tex  # n = 8: k = 128 clamped
    full = pd.read_csv(workdir / "tables" / "full_max_d1.csv")
    assert sorted(set(full["k"])) == [1, 2, 4, 8]
    # rerun: identical bytes (seeded bootstrap)
    before = (workdir / "tables" / "main.csv").read_bytes()
    assert main(_tables(workdir, cfg, "main")) == 0
    assert (workdir / "tables" / "main.csv").read_bytes() == before
    out = workdir / "stats" / "significance.csv"
    assert (
        main(
            [
                "analyze",
                "stats",
                "--config-json",
                cfg,
                "--metrics",
                *METRICS(workdir),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    stats = pd.read_csv(out)
    assert list(stats["dataset"]) == ["d1", "d2"] and set(stats["best"]) == {"ours"}
    assert (stats["pvalue_holm"] >= stats["pvalue"]).all()
    assert out.with_suffix(".json").exists()


def test_figures_are_reproducible(workdir):
    cfg = json.dumps(CFG)
    common = ["--config-json", cfg, "--seed", "1"]
    runs = [
        ["analyze", "figure", "passk", *common, "--metrics", *METRICS(workdir), "--output"],
        ["analyze", "figure", "maxk", *common, "--metrics", *METRICS(workdir), "--dataset", "d2", "--output"],
        ["analyze", "figure", "entropy", *common, "--samples", *SAMPLES(workdir), "--output"],
    ]
    for i, run in enumerate(runs):
        stem = workdir / "figures" / f"f{i}"
        files = [str(stem.with_suffix(s)) for s in (".pdf", ".png")]
        assert main([*run, *files]) == 0
        first = [stem.with_suffix(s).read_bytes() for s in (".pdf", ".png")]
        assert main([*run, *files]) == 0
        assert [stem.with_suffix(s).read_bytes() for s in (".pdf", ".png")] == first
        assert b"CreationDate" not in first[0]
    prov = json.loads((workdir / "figures" / "f2.pdf.provenance.json").read_text())
    assert prov["entropy_kind"] == "exact"


def test_entropy_falls_back_to_nll_without_mixing():
    from maxk.analysis.figures import entropy_values

    a = pd.DataFrame(
        {
            "problem_id": ["p", "p"],
            "mean_entropy": [0.5, 0.7],
            "entropy_kind": "exact",
            "sum_logprob": [-10.0, -30.0],
            "num_tokens": [10, 10],
        }
    )
    b = a.assign(entropy_kind=["exact", "approx"], mean_entropy=[0.5, None])
    kind, vals = entropy_values({"base": a, "grpo": b})
    assert kind == "nll"
    assert vals["base"] == pytest.approx([2.0]) and vals["grpo"] == pytest.approx([2.0])
    kind, vals = entropy_values({"base": a})
    assert kind == "exact" and vals["base"] == pytest.approx([0.6])


def test_user_errors(workdir, tmp_path, capsys):
    cfg = json.dumps(CFG)
    assert (
        main(
            [
                "analyze",
                "metrics",
                "--config-json",
                cfg,
                "--scores",
                str(tmp_path / "nope.parquet"),
                "--output",
                str(tmp_path / "m.parquet"),
            ]
        )
        == 1
    )
    ragged = scores_frame(np.ones((3, 4))).iloc[:-1]
    ragged.to_parquet(tmp_path / "ragged.parquet")
    assert (
        main(
            [
                "analyze",
                "metrics",
                "--config-json",
                cfg,
                "--scores",
                str(tmp_path / "ragged.parquet"),
                "--output",
                str(tmp_path / "m.parquet"),
            ]
        )
        == 1
    )
    assert "ragged.parquet: ragged samples: problem_id='p/002'" in capsys.readouterr().err
    assert (
        main(
            [
                "analyze",
                "tables",
                "--config-json",
                cfg,
                "--metrics",
                *METRICS(workdir),
                "--table",
                "nosuch",
                "--tex",
                str(tmp_path / "t.tex"),
                "--md",
                str(tmp_path / "t.md"),
                "--csv",
                str(tmp_path / "t.csv"),
            ]
        )
        == 1
    )


def test_lab_cli(tmp_path):
    lab = {
        "groups": 100,
        "max_multisets": 1000,
        "n": [2, 4],
        "k": [1, 2],
        "plot_k": 2,
        "plot_n": 4,
        "settings": {"c": {"rewards": [0.0, 0.5, 1.0], "logits": [0.5, 0.0, -0.5]}},
        "offpolicy": {"n": 4, "k": 2, "distances": [0.0, 0.1, 0.2]},
    }
    figures = []
    for name in ("onpolicy", "offpolicy", "offpolicy_surrogate"):
        flag = f"--{name.replace('_', '-')}-figure"
        figures += [flag, str(tmp_path / f"{name}.pdf"), str(tmp_path / f"{name}.png")]
    tables = ["--onpolicy", str(tmp_path / "onpolicy.csv"), "--offpolicy", str(tmp_path / "offpolicy.csv")]
    assert main(["analyze", "lab", "--config-json", json.dumps({"lab": lab}), *tables, *figures]) == 0
    for name in (
        "onpolicy.csv",
        "offpolicy.csv",
        "onpolicy.pdf",
        "onpolicy.png",
        "offpolicy.pdf",
        "offpolicy.png",
        "offpolicy_surrogate.pdf",
        "offpolicy_surrogate.png",
    ):
        assert (tmp_path / name).stat().st_size > 0
    on = pd.read_csv(tmp_path / "onpolicy.csv")
    assert set(on["estimator"]) >= {
        "grpo",
        "bon_max_mean",
        "bon_max_second",
        "bon_loo1",
        "bon_mean",
        "offpolicy_bon",
        "bon_subset_std",
        "bon_mean_centered",
        "offpolicy_bon_exact",
    }
    off = pd.read_csv(tmp_path / "offpolicy.csv")
    assert set(off["gradient"]) == {"score", "surrogate"}
    assert set(off.loc[off["gradient"] == "surrogate", "estimator"]) == {
        "zeroth_order",
        "first_order",
        "exact_own",
        "exact_no_own",
    }
