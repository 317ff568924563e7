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


def _expected_inputs(res: Path) -> tuple[dict, dict, dict]:
    """(the claims config, its one-run config for grpo_e4_ppo1 without the yardstick, the base's and the
    run's suite_test metrics under ``res``): what the command is expected to hand to learning_table."""
    from maxk.analysis.learning import claims_config
    from maxk.config import load_config

    cfg = claims_config(load_config())
    one = {**cfg, "models": {"base": "base", "grpo_e4_ppo1": "grpo_e4_ppo1"},
           "runs": {"grpo_e4_ppo1": cfg["runs"]["grpo_e4_ppo1"]},
           "claims": {**cfg["claims"], "yardstick_temperatures": []}}  # fmt: skip
    metrics = {(m, "suite_test"): pd.read_parquet(res / "metrics" / m / "suite_test.parquet")
               for m in ("base", "grpo_e4_ppo1")}  # fmt: skip
    return cfg, one, metrics


def test_a_named_run_is_read_as_the_claims_job_reads_it(tmp_path: Path, capsys) -> None:
    from maxk.analysis.learning import learning_table
    from maxk.analysis.paper_results import paper_lookup

    res = _tree(tmp_path, 7)
    out = tmp_path / "learning.csv"
    assert main(["analyze", "learning", "grpo_e4_ppo1", "--results", str(res), "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| `grpo_e4_ppo1` | max@1 | **+0." in text and "held-out pool: last - first" in text
    # the same table as learning_table on the default config's run settings, bootstrap seeded by the seed: 7
    _, cfg, metrics = _expected_inputs(res)
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


def _train_csv(res: Path, run: str, seed: int) -> None:
    """A run's training CSV with a held-out measurement of 20 problems at two points (first and last)."""
    rng = np.random.default_rng(seed)
    first, last = rng.uniform(0.2, 0.6, 20), rng.uniform(0.25, 0.65, 20)
    rows = [{"step": step, "heldout/reward": v.mean(), "heldout/problem_rewards": " ".join(map(str, v))}
            for step, v in ((0, first), (8, last))]  # fmt: skip
    (res / "metrics" / "train").mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(res / "metrics" / "train" / f"{run}.csv", index=False)


def _add_run(res: Path, run: str, seed: int, shift: float) -> None:
    """A run's suite_test metrics (the base's problems, shifted, with noise) and training CSV."""
    rng = np.random.default_rng(seed)
    base = pd.read_parquet(res / "metrics" / "base" / "suite_test.parquet")
    path = res / "metrics" / run / "suite_test.parquet"
    path.parent.mkdir(parents=True)
    values = np.clip(base["max@1"].to_numpy() + shift + rng.normal(0, 0.05, len(base)), 0, 1)
    base.assign(**{"max@1": values, "pass@1": values / 2}).to_parquet(path)
    _train_csv(res, run, seed)


def _two_seeds(tmp_path: Path) -> dict[int, Path]:
    """Seeds 7 and 8 (``_tree``): base and grpo_e4_ppo1 on both, grpo_e1_ppo1 on seed 7 only; each run
    with a training CSV."""
    trees = {s: _tree(tmp_path, s) for s in (7, 8)}
    for s, res in trees.items():
        _train_csv(res, "grpo_e4_ppo1", s)
    _add_run(trees[7], "grpo_e1_ppo1", 17, 0.03)
    return trees


def _expected(trees: dict[int, Path], runs: tuple[str, ...]) -> tuple[list, dict, dict]:
    """``learning_across_seeds``'s rows (with the claims' confidence and power), the seeds' learning
    tables and differences, computed from the files as the claims job computes them."""
    from maxk.analysis.across_seeds import differences_frame, learning_across_seeds
    from maxk.analysis.learning import claims_config, learning_table
    from maxk.analysis.paper_results import paper_lookup
    from maxk.config import load_config

    cfg = claims_config(load_config())
    learning, differences = {}, {}
    for s, res in trees.items():
        here = [r for r in runs if (res / "metrics" / r / "suite_test.parquet").exists()]
        metrics = {(m, "suite_test"): pd.read_parquet(res / "metrics" / m / "suite_test.parquet")
                   for m in ("base", *here)}  # fmt: skip
        train = {r: pd.read_csv(res / "metrics" / "train" / f"{r}.csv") for r in here}
        c = {**cfg, "models": {m: m for m in ("base", *runs)}, "runs": {r: cfg["runs"][r] for r in runs},
             "claims": {**cfg["claims"], "yardstick_temperatures": []}}  # fmt: skip
        found: dict = {}
        learning[s] = learning_table(c, metrics, train, seed=s, differences=found, paper_lookup=paper_lookup)
        differences[s] = differences_frame(found)
    confidence, power = float(cfg["bootstrap"]["confidence"]), float(cfg["claims"]["power"])
    rows = learning_across_seeds(learning, differences, confidence=confidence, power=power)
    return rows, learning, differences


def _row(text: str, run: str) -> list[str]:
    """The cells of ``run``'s table row."""
    (line,) = [x for x in text.splitlines() if x.startswith(f"| `{run}` |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_two_seeds_give_the_across_seed_section(tmp_path: Path, capsys) -> None:
    from maxk.analysis.across_seeds import learning_spreads, render_learning_across_seeds
    from maxk.analysis.learning import fmt_interval

    trees = _two_seeds(tmp_path)
    runs = ("grpo_e4_ppo1", "grpo_e1_ppo1")
    argv = ["analyze", "learning", *runs, "--results", str(trees[7]), "--results", str(trees[8])]
    out = tmp_path / "both.csv"
    assert main([*argv, "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    rows, learning, differences = _expected(trees, runs)
    # exactly the across-seed report's section on the same inputs, the runs' spread line included
    section = "\n".join(render_learning_across_seeds(rows, [7, 8], 3, learning_spreads(differences)))
    assert (
        text.startswith(section + "\n") and "The runs' spread between seeds, pooled over the runs: " in text
    )
    head = text.splitlines()[2]
    assert "| seed 7: test set | seed 8: test set | pooled: test | pooled: heldout | pooled: own |" in head
    (e4,) = [r for r in rows if r["run"] == "grpo_e4_ppo1"]
    cells = _row(text, "grpo_e4_ppo1")
    for i, s in enumerate((7, 8)):
        t = learning[s].set_index("run").loc["grpo_e4_ppo1"]
        cell = fmt_interval(t["test_effect"], t["test_ci_low"], t["test_ci_high"], 3)
        assert cells[2 + i] == (f"**{cell}**" if t["test_ci_low"] > 0 else cell)
    for i, part in enumerate(("test", "heldout", "own")):
        p = e4["pooled"].get(part)
        if p is None:
            assert cells[4 + i] == "not measured"
        else:
            assert fmt_interval(p["effect"], p["ci_low"], p["ci_high"], 3) in cells[4 + i]
            assert f"({p['seeds']} seeds; detectable " in cells[4 + i]
    assert e4["pooled"]["test"]["seeds"] == 2 and e4["pooled"]["heldout"]["seeds"] == 2
    # one line per run: on how many of the seeds that measured it its test-set interval is above zero
    k = sum(bool(learning[s].set_index("run").loc["grpo_e4_ppo1", "test_ci_low"] > 0) for s in (7, 8))
    assert f"- `grpo_e4_ppo1` (max@1, test set): above zero on {k} of 2 seeds" in text
    # --csv: every seed's rows, the seed first
    written = pd.read_csv(out)
    assert list(written.columns[:2]) == ["seed", "run"] and sorted(set(written["seed"])) == [7, 8]
    assert len(written) == 4


def test_a_run_missing_on_one_seed_is_not_measured_there(tmp_path: Path, capsys) -> None:
    trees = _two_seeds(tmp_path)
    argv = ["analyze", "learning", "grpo_e1_ppo1", "grpo_e4_ppo1"]
    assert main([*argv, "--results", str(trees[7]), "--results", str(trees[8])]) == 0
    text = capsys.readouterr().out
    rows, _, _ = _expected(trees, ("grpo_e1_ppo1", "grpo_e4_ppo1"))
    (e1,) = [r for r in rows if r["run"] == "grpo_e1_ppo1"]
    cells = _row(text, "grpo_e1_ppo1")
    assert cells[2] != "not measured" and cells[3] == "not measured"  # seed 7 measured it, seed 8 did not
    assert e1["pooled"]["test"]["seeds"] == 1 and "(1 seeds; " in cells[4]
    assert "- `grpo_e1_ppo1` (max@1, test set): above zero on " in text
    assert " of 1 seed" in text and "not measured on seed 8" in text


def test_one_seed_prints_as_before(tmp_path: Path, capsys) -> None:
    """One --results (repeated or not: the option appends) prints the one-seed table, nothing across
    seeds."""
    from maxk.analysis.learning import learning_table, render_learning
    from maxk.analysis.paper_results import paper_lookup

    res = _tree(tmp_path, 7)
    assert main(["analyze", "learning", "grpo_e4_ppo1", "--results", str(res)]) == 0
    text = capsys.readouterr().out
    cfg, c, metrics = _expected_inputs(res)
    table = learning_table(c, metrics, {}, seed=7, paper_lookup=paper_lookup)
    lines = render_learning(table, int(cfg["decimals"]), confidence=float(cfg["bootstrap"]["confidence"]),
                            power=float(cfg["claims"]["power"]),
                            paper_dataset=cfg["claims"].get("paper_dataset"))  # fmt: skip
    assert text == "\n".join(lines) + "\n"
    assert "across seeds" not in text and "above zero on" not in text


@pytest.mark.parametrize("bad", ["no_base", "no_seed", "absent", "corrupt", "twice", "nowhere"])
def test_a_bad_path_among_several_is_named(tmp_path: Path, capsys, bad: str) -> None:
    trees = _two_seeds(tmp_path)
    other, runs = trees[8], ["grpo_e4_ppo1"]
    base = other / "metrics" / "base" / "suite_test.parquet"
    if bad == "no_base":
        base.unlink()
        named = f"{base}: not found: seed 8 has no base metrics"
    elif bad == "no_seed":
        other = tmp_path / "elsewhere"
        other.mkdir()
        named = f"{other.resolve()}: not under a results/seed<N>/ directory"
    elif bad == "absent":
        other = tmp_path / "results" / "seed9"
        named = f"--results {other}: no such directory"
    elif bad == "corrupt":
        base.write_text("not parquet")
        named = f"{base}: cannot be read"
    elif bad == "twice":
        other = trees[7] / "metrics" / ".."
        named = f"--results: two directories of seed 7: {trees[7]} and {other}"
    else:
        runs = ["grpo_e4_ppo3"]
        named = "no suite_test metrics of ['grpo_e4_ppo3'] under any --results"
    argv = ["analyze", "learning", *runs, "--results", str(trees[7]), "--results", str(other)]
    assert main(argv) == 1
    assert named in capsys.readouterr().err
