"""`maxk analyze side-by-side`: two results trees' verdicts, per seed and pooled, with what flips."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from maxk.analysis.side_by_side import claim_rows, learning_rows, read_tree, render, verdict_kind
from maxk.cli import main

NT = "not testable: {} did not raise max@1 (the paper's own effect, +0.084, is above the 0.023 it detects)"


def claims(verdicts: dict[str, str], effect: float = 0.01) -> pd.DataFrame:
    return pd.DataFrame(
        [{"id": c, "effect": effect, "ci_low": effect - 0.01, "ci_high": effect + 0.01, "verdict": v}
         for c, v in verdicts.items()],
        columns=["id", "effect", "ci_low", "ci_high", "verdict"],
    )  # fmt: skip


def learning(learned: dict[str, bool]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"run": r, "objective": "max@1", "test_effect": 0.02 * ok, "test_ci_low": 0.02 * ok - 0.01,
             "test_ci_high": 0.03, "learned": ok}
            for r, ok in learned.items()
        ]
    )  # fmt: skip


def tree(
    root: Path,
    seeds: dict[int, tuple[dict, dict, dict]],
    pooled: dict[str, str] | None = None,
    pooled_yardstick: dict[str, str] | None = None,
) -> Path:
    """A results/ directory: per seed (claims' verdicts, runs' learned flags, yardstick verdicts)."""
    for seed, (c, lrn, y) in seeds.items():
        d = root / f"seed{seed}" / "claims"
        d.mkdir(parents=True)
        claims(c).to_csv(d / "claims.csv", index=False)
        learning(lrn).to_csv(d / "learning.csv", index=False)
        claims(y, -0.02).to_csv(d / "yardstick.csv", index=False)
    if pooled is not None:
        (root / "claims").mkdir()
        claims(pooled).to_csv(root / "claims" / "across_seeds.csv", index=False)
        claims(pooled_yardstick or {}).to_csv(root / "claims" / "across_seeds_yardstick.csv", index=False)
    return root


@pytest.fixture
def two_trees(tmp_path: Path) -> tuple[Path, Path]:
    """Tree b differs from a in: c1's verdict on seed 2 (holds -> does not hold), c1's pooled verdict,
    r2's learned flag on seed 1, y1's verdict on seed 1; c2 names another run as not learned on seed 1
    (the same kind of verdict: no flip)."""
    no = "does not hold"
    a = tree(
        tmp_path / "a" / "results",
        {1: ({"c1": "holds", "c2": NT.format("grpo_continuous")}, {"r1": True, "r2": True}, {"y1": no}),
         2: ({"c1": "holds", "c2": no}, {"r1": True, "r2": False}, {"y1": no})},
        pooled={"c1": "holds", "c2": "read on one seed"},
        pooled_yardstick={"y1": no},
    )  # fmt: skip
    b = tree(
        tmp_path / "b" / "results",
        {1: ({"c1": "holds", "c2": NT.format("grpo_e1_ppo1")}, {"r1": True, "r2": False}, {"y1": "holds"}),
         2: ({"c1": no, "c2": no}, {"r1": True, "r2": False}, {"y1": no})},
        pooled={"c1": no, "c2": "read on one seed"},
        pooled_yardstick={"y1": no},
    )  # fmt: skip
    return a, b


def test_verdicts_are_compared_by_kind() -> None:
    assert verdict_kind(NT.format("x")) == verdict_kind(NT.format("y")) == "not testable"
    assert verdict_kind("holds") == "holds" and verdict_kind("does not hold") == "does not hold"
    assert verdict_kind("instrument not working") == "instrument not working"
    pooled = "instrument not working pooled over seeds 2, 1234 (max@1, run - base {} [-0.014, +0.043])"
    kinds = {verdict_kind(pooled.format(effect)) for effect in ("+0.014", "+0.021")}
    assert kinds == {"instrument not working"}
    assert verdict_kind("read on one seed") == "read on one seed" and verdict_kind("not read") == "not read"
    assert verdict_kind(float("nan")) == verdict_kind("") == verdict_kind(None) == "absent"


def test_flips_are_exactly_the_verdicts_that_changed_kind(two_trees: tuple[Path, Path]) -> None:
    trees = [read_tree(p) for p in two_trees]
    rows = {r["id"]: r["flips"] for r in claim_rows(trees)}
    assert rows == {"c1": ["seed 2", "pooled"], "c2": []}
    yard = {r["id"]: r["flips"] for r in claim_rows(trees, yardstick=True)}
    assert yard == {"y1": ["seed 1"]}
    runs = {r["run"]: r["flips"] for r in learning_rows(trees)}
    assert runs == {"r1": [], "r2": ["seed 1"]}


def test_the_report_counts_the_flips_and_shows_every_tree(two_trees: tuple[Path, Path]) -> None:
    text = render([read_tree(p) for p in two_trees], ["as is", "other kernels"])
    assert "- pooled verdicts, paper's claims: 1 of 2 the same (flips: `c1`)" in text
    assert "- pooled verdicts, yardstick claims: 1 of 1 the same" in text
    learned = "runs that learned their objective"
    seed1 = f"- seed 1: {learned}: 1 of 2 the same (flips: `r2`); claims: 2 of 2 the same; yardstick claims: "
    assert seed1 + "0 of 1 the same (flips: `y1`)" in text
    assert f"- seed 2: {learned}: 2 of 2 the same; claims: 1 of 2 the same (flips: `c1`); yardstick" in text
    seeds = " | ".join(f"seed {s}: {t}" for s in (1, 2) for t in ("as is", "other kernels"))
    assert f"| claim | {seeds} | pooled: as is | pooled: other kernels | flips |" in text
    held = "**holds** +0.010 [+0.000, +0.020]"
    assert (
        f"| `c1` | {held} | {held} | {held} | does not hold +0.010 [+0.000, +0.020] | {held} | does not"
        in text
    )
    assert "| `r2` | max@1 | **+0.020 [+0.010, +0.030]** | +0.000 [-0.010, +0.030] |" in text


def test_each_tree_s_counts_are_tallied_by_verdict_kind(two_trees: tuple[Path, Path]) -> None:
    from maxk.analysis.side_by_side import tally

    trees = [read_tree(p) for p in two_trees]
    claims, runs = claim_rows(trees), learning_rows(trees)
    assert [tally(claims, "seed 1", t) for t in (0, 1)] == ["1 holds, 1 not testable"] * 2
    assert [tally(claims, "seed 2", t) for t in (0, 1)] == ["1 holds, 1 does not hold", "2 does not hold"]
    assert [tally(claims, "pooled", t) for t in (0, 1)] == ["1 holds, 1 read on one seed",
                                                           "1 does not hold, 1 read on one seed"]  # fmt: skip
    assert [tally(runs, "seed 1", t) for t in (0, 1)] == ["2 of 2", "1 of 2"]
    text = render(trees, ["as is", "other kernels"])
    assert "| the paper's claims, seed 2 | 1 holds, 1 does not hold | 2 does not hold | differ |" in text
    assert "| yardstick claims, pooled | 1 does not hold | 1 does not hold |  |" in text


def test_only_the_shared_seeds_are_compared(tmp_path: Path) -> None:
    same = ({"c1": "holds"}, {"r1": True}, {})
    a = read_tree(tree(tmp_path / "a", {1: same, 2: same}))
    b = read_tree(tree(tmp_path / "b", {2: same, 3: same}))
    text = render([a, b], ["a", "b"])
    assert "- seeds compared: 2 (a also has seed(s) [1]; b also has seed(s) [3])" in text
    assert "seed 1:" not in text.split("## What each run learned")[1] and "pooled" not in text
    c = read_tree(tree(tmp_path / "c", {4: same}))
    with pytest.raises(ValueError, match="share no seed"):
        render([a, c], ["a", "c"])


def test_cli_writes_the_report_and_names_bad_input(two_trees, tmp_path: Path, capsys) -> None:
    a, b = map(str, two_trees)
    out = tmp_path / "report" / "side_by_side.md"
    out.parent.mkdir()
    assert main(["analyze", "side-by-side", a, b, "--label", "x", "--label", "y", "--md", str(out)]) == 0
    assert "# Verdicts side by side: x, y" in out.read_text()
    assert main(["analyze", "side-by-side", a, b]) == 0  # default labels: the trees' parent directories
    assert "# Verdicts side by side: a, b" in capsys.readouterr().out
    assert main(["analyze", "side-by-side", a]) == 1
    assert "give two or more RESULTS" in capsys.readouterr().err
    assert main(["analyze", "side-by-side", a, b, "--label", "x"]) == 1
    assert "2 RESULTS but 1 --label" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", "side-by-side", a, str(empty)]) == 1
    assert f"{empty}: no seed*/claims/claims.csv" in capsys.readouterr().err
    bad = tree(tmp_path / "bad", {1: ({"c1": "holds"}, {"r1": True}, {})})
    (bad / "seed1" / "claims" / "learning.csv").write_bytes(b'\x00\xff not csv "')
    assert main(["analyze", "side-by-side", a, str(bad)]) == 1
    assert "learning.csv: cannot read learning.csv" in capsys.readouterr().err


def test_each_run_is_also_compared_pooled_over_the_shared_seeds(tmp_path: Path) -> None:
    """With two shared seeds, each tree's learning.csv and differences.csv, and an across-seed report's
    interval settings: each run's test-set effect pooled over the seeds, as the across-seed report reads
    it (learning_across_seeds, the same settings), and a flip where it is above zero in one tree only."""
    import json

    import numpy as np

    from maxk.analysis.across_seeds import differences_frame, learning_across_seeds
    from maxk.analysis.side_by_side import pooling_of

    rng = np.random.default_rng(3)
    ids = pd.Index([f"p{i}" for i in range(80)], name="problem_id")
    roots, diffs = [], {}
    for name, shift in (("a", 0.03), ("b", -0.01)):  # r1 learns pooled in a, not in b; r2 learns in both
        root = tree(tmp_path / name / "results", {s: ({"c1": "holds"}, {"r1": True, "r2": True}, {})
                                                   for s in (1, 2)}, pooled={"c1": "holds"})  # fmt: skip
        for s in (1, 2):
            series = {f"learned:test:{run}": pd.Series(rng.normal(m, 0.05, ids.size), index=ids)
                      for run, m in (("r1", shift), ("r2", 0.03))}  # fmt: skip
            diffs[(name, s)] = differences_frame(series)
            diffs[(name, s)].to_csv(root / f"seed{s}" / "claims" / "differences.csv", index=False)
        # replicates [2, 1]: the order the across-seed report lists its seeds in
        record = {"config": {"bootstrap": {"resamples": 300, "confidence": 0.95}},
                  "seeds": {"seed": 5, "replicates": [2, 1]}}  # fmt: skip
        (root / "claims" / "across_seeds.csv.provenance.json").write_text(json.dumps(record))
        roots.append(root)
    trees = [read_tree(r) for r in roots]
    assert pooling_of(trees) == {"confidence": 0.95}
    rows = {r["run"]: r for r in learning_rows(trees)}
    assert rows["r1"]["flips"] == ["pooled"] and rows["r2"]["flips"] == []
    learning = {s: trees[1].learning[s] for s in (2, 1)}
    want = learning_across_seeds(learning, {s: diffs[("b", s)] for s in (2, 1)}, confidence=0.95)
    p = next(r for r in want if r["run"] == "r1")["pooled"]["test"]
    assert rows["r1"]["cells"][-1] == f"{p['effect']:+.3f} [{p['ci_low']:+.3f}, {p['ci_high']:+.3f}]"
    assert rows["r1"]["cells"][-2].startswith("**")  # above zero in a: bold
    text = render(trees, ["a", "b"])
    assert "- runs that learned their objective, pooled over the seeds: 1 of 2 the same (flips: `r1`)" in text
    assert "| pooled: a | pooled: b | flips |" in text
    (roots[1] / "seed2" / "claims" / "differences.csv").unlink()  # a tree without a seed's differences
    assert pooling_of([read_tree(r) for r in roots]) is None


def test_the_instrument_and_the_runs_spread_are_read_per_tree_over_the_shared_seeds(tmp_path: Path) -> None:
    """Each shared seed's own instrument check (its claims.csv), and with two shared seeds the instrument
    pooled (pooled_instrument, as the across-seed report reads it, over the shared seeds only) and the
    runs' spread between them (learning_spreads): rows of "Counts per tree", "differ" where they do."""
    import json
    import math

    import numpy as np

    from maxk.analysis.across_seeds import differences_frame, learning_spreads, pooled_instrument
    from maxk.analysis.claims import NOT_WORKING
    from maxk.analysis.side_by_side import instrument_rows

    rng = np.random.default_rng(4)
    ids = pd.Index([f"p{i}" for i in range(80)], name="problem_id")
    roots, diffs = [], {}
    for name, shifts in (("a", (0.04, 0.04)), ("b", (0.0, 0.06))):  # b's seeds spread, a's agree
        verdicts = {1: {"c1": "holds"}, 2: {"c1": NOT_WORKING if name == "b" else "holds"}}
        root = tree(tmp_path / name / "results", {s: (verdicts[s], {"r1": True}, {}) for s in (1, 2)},
                    pooled={"c1": "holds"})  # fmt: skip
        for s, shift in zip((1, 2), shifts, strict=True):
            series = {key: pd.Series(rng.normal(shift, 0.05, ids.size), index=ids)
                      for key in ("learned:test:r1", "learned:test:r2", "instrument")}  # fmt: skip
            diffs[(name, s)] = differences_frame(series)
            diffs[(name, s)].to_csv(root / f"seed{s}" / "claims" / "differences.csv", index=False)
        record = {"config": {"bootstrap": {"confidence": 0.95}}}
        (root / "claims" / "across_seeds.csv.provenance.json").write_text(json.dumps(record))
        roots.append(root)
    readings = instrument_rows([read_tree(r) for r in roots])
    rows = {r[0]: r[1:] for r, _ in readings}
    compared = {r[0]: k for r, k in readings}  # the verdicts are compared, the spreads only shown
    assert compared["instrument, seed 2"] == ["works", "not working"]
    assert compared["the runs' spread between seeds, test"] is None
    assert rows["instrument, seed 1"] == ["works", "works"]
    assert rows["instrument, seed 2"] == ["works", "not working"]
    b = {s: diffs[("b", s)] for s in (1, 2)}
    spreads = learning_spreads(b)
    (p,) = pooled_instrument(b, {1: True, 2: False}, confidence=0.95, spreads=spreads)
    state = "works" if p["ok"] else "not working"
    cell = f"{p['effect']:+.3f} [{p['ci_low']:+.3f}, {p['ci_high']:+.3f}]: {state}"
    assert rows[f"instrument pooled, {p['what']}"][1] == cell
    sd = math.sqrt(spreads["test"].tau2)
    assert sd > 0.02 and rows["the runs' spread between seeds, test"][1] == f"sd {sd:.3f} (2 df)"
    assert rows["the runs' spread between seeds, heldout"] == ["n/a", "n/a"]  # no held-out values
    text = render([read_tree(r) for r in roots], ["a", "b"])
    assert "| instrument, seed 2 | works | not working | differ |" in text


def test_a_flip_shows_each_tree_s_p_value_holm_adjusted_where_the_claim_has_one(tmp_path: Path) -> None:
    def with_p(root: Path, verdict: str, p: float, holm: float | None) -> Path:
        path = tree(root, {1: ({"c1": verdict, "c2": "holds"}, {"r1": True}, {"y1": "holds"})},
                    pooled={"c1": verdict, "c2": "holds"})  # fmt: skip
        for csv in (path / "seed1" / "claims" / "claims.csv", path / "claims" / "across_seeds.csv"):
            frame = pd.read_csv(csv)
            frame["pvalue"], frame["pvalue_holm"] = p, holm
            frame.to_csv(csv, index=False)
        return path

    a = with_p(tmp_path / "a" / "results", "does not hold", 0.0118, 0.0592)
    b = with_p(tmp_path / "b" / "results", "holds", 0.0080, 0.0400)
    rows = {r["id"]: r for r in claim_rows([read_tree(a), read_tree(b)])}
    assert rows["c1"]["flips"] == ["seed 1", "pooled"] and rows["c2"]["flips"] == []
    assert rows["c1"]["tested_p"] == {
        "seed 1": " (p Holm 0.059 / 0.040)",
        "pooled": " (p Holm 0.059 / 0.040)",
    }
    text = render([read_tree(a), read_tree(b)], ["x", "y"])
    assert "| seed 1 (p Holm 0.059 / 0.040), pooled (p Holm 0.059 / 0.040) |" in text
    assert "- pooled verdicts, paper's claims: 1 of 2 the same (flips: `c1`)" in text
    c = with_p(tmp_path / "c" / "results", "holds", 0.0080, None)  # no Holm column: the raw p
    rows = {r["id"]: r for r in claim_rows([read_tree(a), read_tree(c)])}
    assert rows["c1"]["tested_p"]["pooled"] == " (p Holm 0.059 / n/a)"
    d = with_p(tmp_path / "d" / "results", "does not hold", 0.02, None)
    rows = {r["id"]: r for r in claim_rows([read_tree(c), read_tree(d)])}
    assert rows["c1"]["tested_p"]["pooled"] == " (p 0.008 / 0.020)"
    # a flip of a claim no tree tested (a verdict without a p-value) shows none
    e = tree(tmp_path / "e" / "results", {1: ({"c1": "holds"}, {"r1": True}, {"y1": "holds"})})
    f = tree(tmp_path / "f" / "results", {1: ({"c1": "not read"}, {"r1": True}, {"y1": "holds"})})
    plain = [read_tree(e), read_tree(f)]
    assert claim_rows(plain)[0]["tested_p"] == {"seed 1": ""}
