"""Several results trees' verdicts side by side: does a verdict survive other bytes?

The same config run twice, on another CPU type or under another ATen kernel path
(``ATEN_CPU_CAPABILITY=default snakemake --cores all``), builds other weights; a verdict stands only if
it does not move with them (docs/design.md). This module reads what each tree's pipeline wrote, and
lines up, for every seed the trees share:

- each run's reading of its own objective on the test set (``claims/learning.csv``: ``test_effect``,
  its interval, ``learned``);
- each claim's verdict (``claims/claims.csv``) and the yardstick claims (``claims/yardstick.csv``);
- where the trees have them, the pooled verdicts across seeds (``results/claims/across_seeds.csv`` and
  ``across_seeds_yardstick.csv``).

A row *flips* when its verdict (or a run's ``learned``) is not the same in every tree; effects always
differ a little and are shown, not compared. Verdicts are compared by kind (``VERDICT_KINDS``): a "not
testable" claim names the run that did not learn, which may differ between trees without the verdict
changing kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from maxk.analysis.across_seeds import NOT_READ, ONE_SEED
from maxk.analysis.claims import NOT_TESTABLE, NOT_WORKING
from maxk.analysis.learning import fmt_interval

__all__ = ["Tree", "claim_rows", "learning_rows", "read_tree", "render", "verdict_kind"]

#: the kinds a verdict is compared by, as the claims' and the across-seed report's verdicts begin
VERDICT_KINDS = ("holds", "does not hold", NOT_TESTABLE, NOT_WORKING, NOT_READ, ONE_SEED)


@dataclass
class Tree:
    """One results tree's readings (``results/``), keyed by seed."""

    path: Path
    claims: dict[int, pd.DataFrame] = field(default_factory=dict)
    yardstick: dict[int, pd.DataFrame] = field(default_factory=dict)
    learning: dict[int, pd.DataFrame] = field(default_factory=dict)
    pooled: pd.DataFrame | None = None
    pooled_yardstick: pd.DataFrame | None = None


def _read(path: Path, what: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as exc:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{path}: cannot read {what}: {exc}") from exc


def read_tree(results: Path) -> Tree:
    """Every seed's ``claims/`` under ``results`` (``seed{seed}/claims/claims.csv`` and beside it) and
    the across-seed report when present. A tree without any seed's claims is an error naming it."""
    results = Path(results)
    tree = Tree(results)
    for claims in sorted(results.glob("seed*/claims/claims.csv")):
        name = claims.parents[1].name
        if not name[len("seed") :].isdigit():
            continue
        seed = int(name[len("seed") :])
        tree.claims[seed] = _read(claims, "a seed's claims")
        for attr, file in (("yardstick", "yardstick.csv"), ("learning", "learning.csv")):
            if (claims.parent / file).is_file():
                getattr(tree, attr)[seed] = _read(claims.parent / file, file)
    if not tree.claims:
        raise ValueError(f"{results}: no seed*/claims/claims.csv (the results/ directory of a finished run?)")
    across = results / "claims"
    if (across / "across_seeds.csv").is_file():
        tree.pooled = _read(across / "across_seeds.csv", "the across-seed claims")
    if (across / "across_seeds_yardstick.csv").is_file():
        tree.pooled_yardstick = _read(across / "across_seeds_yardstick.csv", "the across-seed yardstick")
    return tree


def verdict_kind(verdict: object) -> str:
    """A verdict's kind (``VERDICT_KINDS``); a missing one is "absent"."""
    if not isinstance(verdict, str) or not verdict:
        return "absent"
    for kind in VERDICT_KINDS:
        if verdict == kind or verdict.startswith(kind + ":") or verdict.startswith(kind + " ("):
            return kind
    return verdict


def _cell(row: pd.Series | None, decimals: int) -> tuple[str, str]:
    """(the verdict's kind, a table cell: the kind and the effect with its interval)."""
    if row is None:
        return "absent", "absent"
    kind = verdict_kind(row.get("verdict"))
    effect = row.get("effect")
    if pd.isna(effect):
        return kind, kind
    text = fmt_interval(effect, row.get("ci_low"), row.get("ci_high"), decimals)
    return kind, f"**{kind}** {text}" if kind == "holds" else f"{kind} {text}"


def _by_id(frame: pd.DataFrame | None, key: str = "id") -> dict[str, pd.Series]:
    return {} if frame is None else {str(r[key]): r for _, r in frame.iterrows()}


def _keys_in_order(tables: Sequence[Sequence[dict[str, pd.Series]]]) -> list[str]:
    """Every key of the trees' per-seed tables, in the order they first appear (tree, then seed)."""
    return list(dict.fromkeys(key for per_tree in tables for table in per_tree for key in table))


def shared_seeds(trees: Sequence[Tree]) -> list[int]:
    """The seeds every tree has claims for, in increasing order."""
    seeds = set(trees[0].claims)
    for tree in trees[1:]:
        seeds &= set(tree.claims)
    return sorted(seeds)


def claim_rows(trees: Sequence[Tree], *, yardstick: bool = False, decimals: int = 3) -> list[dict]:
    """One row per claim: ``id``, a cell per (seed, tree) and, where every tree has a pooled report, per
    tree pooled; ``flips``: the columns (``seed {s}`` or ``pooled``) whose verdict kinds differ."""
    seeds = shared_seeds(trees)
    per_seed = [[_by_id((t.yardstick if yardstick else t.claims).get(s)) for s in seeds] for t in trees]
    pooled_frames = [t.pooled_yardstick if yardstick else t.pooled for t in trees]
    pooled = [_by_id(f) for f in pooled_frames] if all(f is not None for f in pooled_frames) else None
    rows = []
    for claim in _keys_in_order(per_seed):
        row: dict = {"id": claim, "cells": [], "flips": []}
        columns = [
            (f"seed {s}", [per_seed[t][j].get(claim) for t in range(len(trees))]) for j, s in enumerate(seeds)
        ]
        if pooled is not None:
            columns.append(("pooled", [p.get(claim) for p in pooled]))
        for name, readings in columns:
            kinds, cells = zip(*(_cell(r, decimals) for r in readings), strict=True)
            row["cells"] += cells
            if len(set(kinds)) > 1:
                row["flips"].append(name)
        rows.append(row)
    return rows


def learning_rows(trees: Sequence[Tree], *, decimals: int = 3) -> list[dict]:
    """One row per run: ``run``, ``objective``, a cell per (seed, tree): the run's test-set effect on
    its own objective, bold where it learned; ``flips``: the seeds where ``learned`` differs."""
    seeds = shared_seeds(trees)
    tables = [[_by_id(t.learning.get(s), "run") for s in seeds] for t in trees]
    rows = []
    for run in _keys_in_order(tables):
        row: dict = {"run": run, "objective": "", "cells": [], "flips": []}
        for j, seed in enumerate(seeds):
            learned = []
            for t in range(len(trees)):
                r = tables[t][j].get(run)
                if r is None:
                    row["cells"].append("absent")
                    learned.append(None)
                    continue
                row["objective"] = row["objective"] or str(r.get("objective", ""))
                flag = str(r.get("learned")).lower() == "true"
                text = fmt_interval(
                    r.get("test_effect"), r.get("test_ci_low"), r.get("test_ci_high"), decimals
                )
                row["cells"].append(f"**{text}**" if flag else text)
                learned.append(flag)
            if len(set(learned)) > 1:
                row["flips"].append(f"seed {seed}")
        rows.append(row)
    return rows


def _table(first: Sequence[str], columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    header = [*first, *columns, "flips"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render(trees: Sequence[Tree], labels: Sequence[str], *, decimals: int = 3) -> str:
    """The Markdown report: a summary of what flips, then the runs, the claims and the yardstick."""
    if len(trees) != len(labels) or len(trees) < 2:
        raise ValueError("side by side needs two or more trees, one label each")
    seeds = shared_seeds(trees)
    if not seeds:
        raise ValueError(
            "the trees share no seed: "
            + "; ".join(f"{lab}: {sorted(t.claims)}" for lab, t in zip(labels, trees, strict=True))
        )
    pooled = all(t.pooled is not None for t in trees)
    columns = [f"seed {s}: {lab}" for s in seeds for lab in labels]
    pooled_columns = [f"pooled: {lab}" for lab in labels] if pooled else []
    runs = learning_rows(trees, decimals=decimals)
    claims = claim_rows(trees, decimals=decimals)
    yard = claim_rows(trees, yardstick=True, decimals=decimals)

    def count(rows: list[dict], column: str) -> str:
        flipped = [r.get("id", r.get("run")) for r in rows if column in r["flips"]]
        return f"{len(rows) - len(flipped)} of {len(rows)} the same" + (
            f" (flips: {', '.join(f'`{f}`' for f in flipped)})" if flipped else ""
        )

    out = [f"# Verdicts side by side: {', '.join(labels)}", ""]
    out += [f"- {lab}: `{t.path}`" for lab, t in zip(labels, trees, strict=True)]
    only = [
        f"{lab} also has seed(s) {sorted(set(t.claims) - set(seeds))}"
        for lab, t in zip(labels, trees, strict=True)
        if set(t.claims) - set(seeds)
    ]
    out += [f"- seeds compared: {', '.join(map(str, seeds))}" + (f" ({'; '.join(only)})" if only else "")]
    out += ["", "## Summary", ""]
    if pooled:
        out += [f"- pooled verdicts, paper's claims: {count(claims, 'pooled')}"]
        if yard:
            out += [f"- pooled verdicts, yardstick claims: {count(yard, 'pooled')}"]
    for s in seeds:
        out += [
            f"- seed {s}: runs that learned their objective: {count(runs, f'seed {s}')}; "
            f"claims: {count(claims, f'seed {s}')}"
            + (f"; yardstick claims: {count(yard, f'seed {s}')}" if yard else "")
        ]
    out += ["", "## What each run learned (its own objective on the test set, run - base; bold: learned)", ""]
    out += _table(
        ["run", "objective"],
        columns,
        [[f"`{r['run']}`", r["objective"], *r["cells"], ", ".join(r["flips"])] for r in runs],
    )
    for title, rows in (
        ("The paper's claims", claims),
        ("Beyond the paper: each run against the base re-tempered", yard),
    ):
        if not rows:
            continue
        out += ["", f"## {title} (verdict, effect [interval]; flips: where the verdicts differ)", ""]
        out += _table(
            ["claim"],
            columns + pooled_columns,
            [[f"`{r['id']}`", *r["cells"], ", ".join(r["flips"])] for r in rows],
        )
    out += [
        "",
        "A verdict is compared by its kind (holds, does not hold, not testable, instrument not working, not "
        "read, read on one seed); effects always move a little with the bytes and are shown, not compared. "
        "A flip is a finding to act on: more seeds, more power, or a claim the miniature cannot decide.",
        "",
    ]
    return "\n".join(out)
