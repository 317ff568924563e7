"""`maxk analyze learning RUN...`: the claims job's per-run table for named runs of one seed's results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from maxk.cli import main


def _tree(root: Path, seed: int) -> Path:
    """results/seed{seed}/metrics/{base,grpo_e4_ppo1}/suite_test.parquet: 40 problems, the run higher."""
    rng = np.random.default_rng(seed)
    res = root / "results" / f"seed{seed}"
    for model, shift in (("base", 0.0), ("grpo_e4_ppo1", 0.05)):
        values = np.clip(rng.uniform(0.1, 0.8, 40) + shift, 0, 1)
        path = res / "metrics" / model / "suite_test.parquet"
        path.parent.mkdir(parents=True)
        pd.DataFrame({"problem_id": [f"p{i:02d}" for i in range(40)], "max@1": values,
                      "pass@1": values / 2}).to_parquet(path)  # fmt: skip
    return res


def test_a_named_run_is_read_as_the_claims_job_reads_it(tmp_path: Path, capsys) -> None:
    from maxk.analysis.learning import claims_config, learning_table
    from maxk.analysis.paper_results import paper_lookup
    from maxk.config import load_config

    res = _tree(tmp_path, 7)
    out = tmp_path / "learning.csv"
    assert main(["analyze", "learning", "grpo_e4_ppo1", "--results", str(res), "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| `grpo_e4_ppo1` | max@1 | **+0." in text and "held-out pool: last - first" in text
    # the same table as learning_table on the default config's run settings, bootstrap seeded by the seed: 7
    cfg = claims_config(load_config())
    cfg = {**cfg, "models": {"base": "base", "grpo_e4_ppo1": "grpo_e4_ppo1"},
           "runs": {"grpo_e4_ppo1": cfg["runs"]["grpo_e4_ppo1"]},
           "claims": {**cfg["claims"], "yardstick_temperatures": []}}  # fmt: skip
    metrics = {(m, "suite_test"): pd.read_parquet(res / "metrics" / m / "suite_test.parquet")
               for m in ("base", "grpo_e4_ppo1")}  # fmt: skip
    want = learning_table(cfg, metrics, {}, seed=7, paper_lookup=paper_lookup)
    written = tmp_path / "want.csv"
    want.to_csv(written, index=False, float_format="%.6g")  # as the claims job writes learning.csv
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(written))
    other = learning_table(cfg, metrics, {}, seed=8, paper_lookup=paper_lookup)
    assert other.loc[0, "test_ci_low"] != want.loc[0, "test_ci_low"]  # the seed is read from the path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no_such_run"], "['no_such_run']: no such run in config/config.yaml"),
        (["grpo_e1_ppo1"], "no suite_test metrics of ['grpo_e1_ppo1']"),
    ],
)
def test_bad_input_is_named(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    res = _tree(tmp_path, 7)
    assert main(["analyze", "learning", *argv, "--results", str(res)]) == 1
    assert message in capsys.readouterr().err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert main(["analyze", "learning", "grpo_e4_ppo1", "--results", str(elsewhere)]) == 1
    assert "not under a results/seed<N>/ directory" in capsys.readouterr().err
