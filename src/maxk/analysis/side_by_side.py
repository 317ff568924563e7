"""Several results trees' verdicts side by side: does a verdict survive other bytes?

The same config run twice, on another CPU type or under another ATen kernel path
(``ATEN_CPU_CAPABILITY=default snakemake --cores all``), builds other weights; a verdict stands only if
it does not move with them (docs/design.md). This module reads what each tree's pipeline wrote, and
lines up, for every seed the trees share:

- each run's reading of its own objective on the test set (``claims/learning.csv``: ``test_effect``,
  its interval, ``learned``);
- each claim's verdict (``claims/claims.csv``) and the yardstick claims (``claims/yardstick.csv``);
- where the trees have them, the pooled verdicts across seeds (``results/claims/across_seeds.csv`` and
  ``across_seeds_yardstick.csv``);
- with two shared seeds or more, each run's test-set effect pooled over them (``learning_across_seeds``
  on each tree's ``learning.csv`` and ``differences.csv``, with the interval settings of a tree's
  across-seed report, its ``across_seeds.csv.provenance.json``): the pooled learning gate the claims
  across seeds are read through (``maxk.analysis.across_seeds``), its runs' spread between seeds pooled
  over the shared seeds only (a tree's own report pools all of its seeds);
- the instrument check: each shared seed's own, and with two shared seeds or more, pooled over them
  (``pooled_instrument``), with the runs' spread between them per part (``learning_spreads``).

A row *flips* when its verdict (or a run's ``learned``) is not the same in every tree; effects always
differ a little and are shown, not compared. Verdicts are compared by kind (``VERDICT_KINDS``): a "not
testable" claim names the run that did not learn, which may differ between trees without the verdict
changing kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from maxk.analysis.across_seeds import (
    NOT_READ,
    ONE_SEED,
    UNDECIDED,
    learning_across_seeds,
    learning_spreads,
    pooled_instrument,
    seed_instrument_works,
)
from maxk.analysis.claims import NOT_TESTABLE, NOT_WORKING
from maxk.analysis.learning import PARTS, fmt_interval

__all__ = [
    "Tree",
    "claim_rows",
    "instrument_rows",
    "learning_rows",
    "pooling_of",
    "read_tree",
    "render",
    "verdict_kind",
]

#: the kinds a verdict is compared by, as the claims' and the across-seed report's verdicts begin
VERDICT_KINDS = ("holds", "does not hold", UNDECIDED, NOT_TESTABLE, NOT_WORKING, NOT_READ, ONE_SEED)


@dataclass
class Tree:
    """One results tree's readings (``results/``), keyed by seed."""

    path: Path
    claims: dict[int, pd.DataFrame] = field(default_factory=dict)
    yardstick: dict[int, pd.DataFrame] = field(default_factory=dict)
    learning: dict[int, pd.DataFrame] = field(default_factory=dict)
    differences: dict[int, pd.DataFrame] = field(default_factory=dict)
    pooled: pd.DataFrame | None = None
    pooled_yardstick: pd.DataFrame | None = None
    #: the across-seed report's interval settings (``confidence``), if it has one
    pooling: dict | None = None


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
        if (claims.parent / "differences.csv").is_file():
            frame = _read(claims.parent / "differences.csv", "differences.csv")
            tree.differences[seed] = frame.astype({"problem_id": str})
    if not tree.claims:
        raise ValueError(f"{results}: no seed*/claims/claims.csv (the results/ directory of a finished run?)")
    across = results / "claims"
    if (across / "across_seeds.csv").is_file():
        tree.pooled = _read(across / "across_seeds.csv", "the across-seed claims")
    if (across / "across_seeds_yardstick.csv").is_file():
        tree.pooled_yardstick = _read(across / "across_seeds_yardstick.csv", "the across-seed yardstick")
    provenance = across / "across_seeds.csv.provenance.json"
    if provenance.is_file():
        try:
            record = json.loads(provenance.read_text())
            boot = record["config"]["bootstrap"]
            tree.pooling = {"confidence": float(boot["confidence"])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{provenance}: cannot read the interval settings: {exc!r}") from exc
    return tree


def verdict_kind(verdict: object) -> str:
    """A verdict's kind (``VERDICT_KINDS``); a missing one is "absent". Its reason is dropped: after a
    colon, in parentheses, or the pooled instrument's "instrument not working pooled over seeds ..."."""
    if not isinstance(verdict, str) or not verdict:
        return "absent"
    for kind in VERDICT_KINDS:
        if verdict == kind or verdict.startswith((kind + ":", kind + " (", kind + " pooled over seeds")):
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
    tree pooled; ``flips``: the columns (``seed {s}`` or ``pooled``) whose verdict kinds differ, and
    ``tested_p`` each flip's p-values (``_tested_p``)."""
    seeds = shared_seeds(trees)
    per_seed = [[_by_id((t.yardstick if yardstick else t.claims).get(s)) for s in seeds] for t in trees]
    pooled_frames = [t.pooled_yardstick if yardstick else t.pooled for t in trees]
    pooled = [_by_id(f) for f in pooled_frames] if all(f is not None for f in pooled_frames) else None
    rows = []
    for claim in _keys_in_order(per_seed):
        row: dict = {"id": claim, "cells": [], "flips": [], "kinds": {}, "tested_p": {}}
        columns = [
            (f"seed {s}", [per_seed[t][j].get(claim) for t in range(len(trees))]) for j, s in enumerate(seeds)
        ]
        if pooled is not None:
            columns.append(("pooled", [p.get(claim) for p in pooled]))
        for name, readings in columns:
            kinds, cells = zip(*(_cell(r, decimals) for r in readings), strict=True)
            row["cells"] += cells
            row["kinds"][name] = kinds
            if len(set(kinds)) > 1:
                row["flips"].append(name)
                row["tested_p"][name] = _tested_p(readings)
        rows.append(row)
    return rows


def _tested_p(readings: Sequence[pd.Series | None]) -> str:
    """Each tree's p-value of the test behind a verdict (Holm-adjusted where the claim has one), as
    `` (p Holm 0.059 / 0.040)``: a flip whose p-values straddle the level is a claim at the threshold,
    not a change of direction; empty where no tree tested the claim."""
    holm = any(r is not None and pd.notna(r.get("pvalue_holm")) for r in readings)
    key = "pvalue_holm" if holm else "pvalue"
    values = [None if r is None else r.get(key) for r in readings]
    if all(v is None or pd.isna(v) for v in values):
        return ""
    text = " / ".join("n/a" if v is None or pd.isna(v) else f"{float(v):.3f}" for v in values)
    return f" (p{' Holm' if holm else ''} {text})"


def pooling_of(trees: Sequence[Tree]) -> dict | None:
    """The interval settings the pooled learning is read with: the first tree's across-seed report's
    that has one; None where there are fewer than two shared seeds, no tree has a report, or a tree
    lacks a shared seed's learning or differences."""
    seeds = shared_seeds(trees)
    pooling = next((t.pooling for t in trees if t.pooling is not None), None)
    if len(seeds) < 2 or pooling is None:
        return None
    if not all(s in t.learning and s in t.differences for t in trees for s in seeds):
        return None
    return pooling


def _pooled_learning(tree: Tree, seeds: Sequence[int], pooling: dict) -> dict[str, dict]:
    """``{run: its test-set part pooled over seeds}`` (``learning_across_seeds``; the random-effects
    interval does not depend on the seeds' order)."""
    seeds = sorted(seeds)
    learning = {s: tree.learning[s] for s in seeds}
    rows = learning_across_seeds(learning, {s: tree.differences[s] for s in seeds}, **pooling)
    return {r["run"]: r["pooled"]["test"] for r in rows if "test" in r["pooled"]}


def learning_rows(trees: Sequence[Tree], *, decimals: int = 3) -> list[dict]:
    """One row per run: ``run``, ``objective``, a cell per (seed, tree): the run's test-set effect on
    its own objective, bold where it learned, then, where ``pooling_of`` gives settings, a cell per tree
    pooled over the shared seeds (bold: above zero); ``flips``: the seeds (and ``pooled``) where
    ``learned`` differs."""
    seeds = shared_seeds(trees)
    tables = [[_by_id(t.learning.get(s), "run") for s in seeds] for t in trees]
    pooling = pooling_of(trees)
    pooled = [_pooled_learning(t, seeds, pooling) for t in trees] if pooling else None
    rows = []
    for run in _keys_in_order(tables):
        row: dict = {"run": run, "objective": "", "cells": [], "flips": [], "learned": {}}
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
            row["learned"][f"seed {seed}"] = learned
            if len(set(learned)) > 1:
                row["flips"].append(f"seed {seed}")
        if pooled is not None:
            above = []
            for per_tree in pooled:
                p = per_tree.get(run)
                if p is None:
                    row["cells"].append("absent")
                    above.append(None)
                    continue
                text = fmt_interval(p["effect"], p["ci_low"], p["ci_high"], decimals)
                row["cells"].append(f"**{text}**" if p["ci_low"] > 0 else text)
                above.append(bool(p["ci_low"] > 0))
            row["learned"]["pooled"] = above
            if len(set(above)) > 1:
                row["flips"].append("pooled")
        rows.append(row)
    return rows


def instrument_rows(trees: Sequence[Tree], *, decimals: int = 3) -> list[tuple[list[str], list[str] | None]]:
    """The instrument check and the runs' spread between seeds, one reading per row and a cell per tree:
    each shared seed's own check (its ``claims.csv``: works or not working), then, where ``pooling_of``
    gives settings, each part of the instrument pooled over the shared seeds (``pooled_instrument``, its
    interval and whether it is above zero) and the runs' spread between them (``learning_spreads``: sd
    and degrees of freedom per part), all over the shared seeds only. Each row comes with what is
    compared between the trees: the verdicts (works or not working), or None for the spreads (numbers,
    shown and not compared)."""
    seeds = shared_seeds(trees)
    works = [{s: seed_instrument_works(t.claims[s]) for s in seeds} for t in trees]
    rows: list[tuple[list[str], list[str] | None]] = []
    for s in seeds:
        states = ["works" if w[s] else "not working" for w in works]
        rows.append(([f"instrument, seed {s}", *states], states))
    pooling = pooling_of(trees)
    if pooling is None:
        return rows
    per_tree = []
    for t, tree_works in zip(trees, works, strict=True):
        diffs = {s: t.differences[s] for s in seeds}
        spreads = learning_spreads(diffs)
        parts = pooled_instrument(diffs, tree_works, confidence=pooling["confidence"], spreads=spreads)
        per_tree.append((parts, spreads))
    whats = list(dict.fromkeys(p["what"] for parts, _ in per_tree for p in parts))
    for what in whats:
        cells, states = [], []
        for parts, _ in per_tree:
            p = next((q for q in parts if q["what"] == what), None)
            states.append("absent" if p is None else "works" if p["ok"] else "not working")
            text = "" if p is None else f"{fmt_interval(p['effect'], p['ci_low'], p['ci_high'], decimals)}: "
            cells.append(text + states[-1])
        rows.append(([f"instrument pooled, {what}", *cells], states))
    for part in PARTS:
        cells = []
        for _, spreads in per_tree:
            spread = spreads.get(part)
            if spread is None or not spread.df:
                cells.append("n/a")
            else:
                cells.append(f"sd {math.sqrt(spread.tau2):.{decimals}f} ({spread.df} df)")
        rows.append(([f"the runs' spread between seeds, {part}", *cells], None))
    return rows


def tally(rows: Sequence[dict], column: str, tree: int) -> str:
    """One tree's count of a column (``seed {s}`` or ``pooled``): for claims (``claim_rows``), each
    verdict kind's count ("1 holds, 6 not testable"); for runs (``learning_rows``), "k of n" learned."""
    if rows and "learned" in rows[0]:
        flags = [r["learned"][column][tree] for r in rows if column in r["learned"]]
        return f"{sum(f is True for f in flags)} of {len(flags)}" if flags else ""
    kinds = [r["kinds"][column][tree] for r in rows if column in r["kinds"]]
    order = [*VERDICT_KINDS, *sorted(set(kinds) - set(VERDICT_KINDS))]
    return ", ".join(f"{kinds.count(k)} {k}" for k in order if kinds.count(k))


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
    runs_pooled = pooling_of(trees) is not None  # learning_rows pooled each run over the seeds
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
    if runs_pooled:
        out += [f"- runs that learned their objective, pooled over the seeds: {count(runs, 'pooled')}"]
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
    per_seed = [f"seed {s}" for s in seeds]
    read = (["pooled"] if pooled else []) + per_seed
    counts = []
    for what, rows, cols in (
        ("runs that learned their objective", runs, (["pooled"] if runs_pooled else []) + per_seed),
        ("the paper's claims", claims, read),
        ("yardstick claims", yard, read),
    ):
        for col in cols if rows else []:
            cells = [tally(rows, col, t) for t in range(len(trees))]
            counts.append([f"{what}, {col}", *cells, "" if len(set(cells)) == 1 else "differ"])
    readings = instrument_rows(trees, decimals=decimals)
    counts = [[*r, "" if k is None or len(set(k)) == 1 else "differ"] for r, k in readings] + counts
    out += ["", "## Counts per tree", ""]
    out += _table(["reading"], list(labels), counts)
    out += ["", "## What each run learned (its own objective on the test set, run - base; bold: learned)", ""]
    out += _table(
        ["run", "objective"],
        columns + ([f"pooled: {lab}" for lab in labels] if runs_pooled else []),
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
            [
                [f"`{r['id']}`", *r["cells"], ", ".join(f + r["tested_p"][f] for f in r["flips"])]
                for r in rows
            ],
        )
    out += [
        "",
        "A verdict is compared by its kind (holds, does not hold, not testable, instrument not working, not "
        "read, read on one seed); effects always move a little with the bytes and are shown, not compared. "
        "A flip is a finding to act on: more seeds, more power, or a claim the miniature cannot decide; "
        "beside it, each tree's p-value of the claim's test (Holm-adjusted where the claim has one): "
        "p-values on both sides of the level mark a claim at the threshold.",
        "",
    ]
    return "\n".join(out)
