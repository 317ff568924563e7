"""Paired comparison of trained runs against a reference model, for probes and variants by hand.

``maxk analyze compare RUN ...`` reads one seed's ``results/seed{seed}/metrics/{run}/{dataset}.parquet``
(per-problem pass@k and max@k, ``maxk analyze metrics``) and ``.../metrics/train/{run}.csv`` (training
curves) and
prints, per run and metric, the mean, the effect ``run - reference`` and its paired percentile
bootstrap interval over problems (the problems resampled together, as in the claims stage,
``maxk.analysis.stats``), and the held-out curve's per-problem rise (``heldout/problem_rewards``, first
to last point) with its interval. It is the instrument check (``maxk.analysis.claims``) for any run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from maxk.analysis.claims import heldout_curve, heldout_endpoints
from maxk.analysis.config import BOOTSTRAP
from maxk.analysis.stats import paired_interval
from maxk.seeds import derive_seed


def default_metrics(frame: pd.DataFrame) -> list[str]:
    """max@1, pass@1, and pass@K and max@K at the largest K the metrics frame holds."""
    ks = sorted(int(c.split("@")[1]) for c in frame.columns if c.startswith("pass@"))
    if not ks:
        raise ValueError("the metrics frame has no pass@k column")
    return list(dict.fromkeys(["max@1", "pass@1", f"pass@{ks[-1]}", f"max@{ks[-1]}"]))


def _paired(reference: pd.DataFrame, frame: pd.DataFrame, run: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(reference, run)`` indexed and sorted by ``problem_id``; ``ValueError`` naming the run and the
    count of problems not in both where they cover other problems (a paired comparison)."""
    ref = reference.set_index("problem_id").sort_index()
    cur = frame.set_index("problem_id").sort_index()
    if not cur.index.equals(ref.index):
        missing = len(ref.index.symmetric_difference(cur.index))
        raise ValueError(f"{run}: its problems differ from the reference's ({missing} not in both)")
    return ref, cur


def compare_runs(
    reference: pd.DataFrame,
    runs: Mapping[str, pd.DataFrame],
    metrics: Sequence[str],
    *,
    seed: int,
    resamples: int = 10_000,
    confidence: float = BOOTSTRAP.confidence,
) -> pd.DataFrame:
    """One row per (run, metric): ``run, metric, value, reference, effect, ci_low, ci_high, n_problems,
    sd`` (``sd``: the standard deviation of the per-problem differences, which sets the interval's width).

    Frames are per-problem metrics indexed by ``problem_id`` column; every run must hold the reference's
    problems (a paired comparison), else ``ValueError`` names the run and the missing count.
    """
    rows = []
    for run, frame in runs.items():
        ref, cur = _paired(reference, frame, run)
        for m in metrics:
            if m not in cur or m not in ref:
                raise ValueError(f"{run}: no column {m!r} in both metrics frames")
            d = cur[m].to_numpy() - ref[m].to_numpy()
            effect, low, high = paired_interval(
                d, seed=derive_seed(seed, "compare", run, m), resamples=resamples, confidence=confidence
            )
            rows.append(
                {"run": run, "metric": m, "value": float(cur[m].mean()), "reference": float(ref[m].mean()),
                 "effect": effect, "ci_low": low, "ci_high": high, "n_problems": len(ref),
                 "sd": float(d.std(ddof=1)) if d.size > 1 else float("nan")}
            )  # fmt: skip
    return pd.DataFrame(rows)


def pool_runs(
    per_seed: Sequence[tuple[pd.DataFrame, Mapping[str, pd.DataFrame]]],
    metrics: Sequence[str],
    *,
    confidence: float = BOOTSTRAP.confidence,
) -> pd.DataFrame:
    """Each run's effect ``run - reference`` pooled over several seeds: ``per_seed`` holds, seed by seed,
    ``(reference, {run: frame})`` as ``compare_runs`` takes them. One row per (run, metric): ``run,
    metric, effect, ci_low, ci_high, seeds``, the mean over seeds of each seed's mean difference with its
    random-effects t interval (``maxk.analysis.stats.random_effects_interval``), the spread between seeds
    of a metric pooled over the runs (``seed_spread``)."""
    from maxk.analysis.stats import random_effects_interval, seed_spread

    runs = list(dict.fromkeys(r for _, frames in per_seed for r in frames))
    diffs = {}
    for run in runs:
        pairs = [_paired(reference, frames[run], run) for reference, frames in per_seed if run in frames]
        for m in metrics:
            diffs[(run, m)] = [cur[m].to_numpy() - ref[m].to_numpy() for ref, cur in pairs]
    spreads = {m: seed_spread(v for (_, metric), v in diffs.items() if metric == m) for m in metrics}
    rows = []
    for (run, m), values in diffs.items():
        pooled = random_effects_interval(values, confidence=confidence, spread=spreads[m])
        rows.append({"run": run, "metric": m, "effect": pooled.effect, "ci_low": pooled.low,
                     "ci_high": pooled.high, "seeds": pooled.seeds})  # fmt: skip
    return pd.DataFrame(rows)


def render_pooled(
    table: pd.DataFrame, labels: Sequence[str], confidence: float = BOOTSTRAP.confidence
) -> str:
    """Markdown: one row per run, a cell ``effect [low, high]`` per metric, pooled over ``labels``."""
    metrics = list(dict.fromkeys(table["metric"]))
    level = f"{confidence:.0%}"
    head = ["run", *(f"{m}: run - reference, pooled [{level} random-effects CI]" for m in metrics), "seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run, rows in table.groupby("run", sort=False):
        by = rows.set_index("metric")
        cells = [f"{by.at[m, 'effect']:+.3f} [{by.at[m, 'ci_low']:+.3f}, {by.at[m, 'ci_high']:+.3f}]"
                 for m in metrics]  # fmt: skip
        lines.append("| " + " | ".join([str(run), *cells, str(int(rows["seeds"].iloc[0]))]) + " |")
    lines += ["", f"pooled over {', '.join(labels)}: the mean of each seed's mean difference, the interval "
              "a random-effects t interval (the spread between seeds pooled over the runs, each seed's "
              "problem noise)"]  # fmt: skip
    return "\n".join(lines) + "\n"


def heldout_rise(
    train_metrics: pd.DataFrame,
    *,
    seed: int,
    resamples: int = 10_000,
    confidence: float = BOOTSTRAP.confidence,
) -> dict | None:
    """The held-out curve of one run's metrics CSV: ``{steps, first, last}`` and, where the CSV keeps
    per-problem rewards, ``effect, ci_low, ci_high, n_problems`` of last - first; None without a curve."""
    curve = heldout_curve(train_metrics)
    if not curve:
        return None
    out: dict = {"steps": int(train_metrics["step"].max()), "first": curve[0][1], "last": curve[-1][1]}
    ends = heldout_endpoints(train_metrics)
    if ends is not None:
        effect, low, high = paired_interval(
            ends[1] - ends[0], seed=derive_seed(seed, "compare", "heldout"), resamples=resamples,
            confidence=confidence,
        )  # fmt: skip
        out.update(effect=effect, ci_low=low, ci_high=high, n_problems=len(ends[0]))
    return out


def render_comparison(
    table: pd.DataFrame,
    curves: Mapping[str, dict | None],
    confidence: float = BOOTSTRAP.confidence,
    *,
    sd: bool = False,
) -> str:
    """Markdown: one row per run, a cell ``value (effect [low, high])`` per metric (with ``sd``, ``; sd
    s`` after the interval: the differences' standard deviation), then the held-out rise."""
    metrics = list(dict.fromkeys(table["metric"]))
    level = f"{confidence:.0%}"
    head = [
        "run",
        *(f"{m}: value (run - reference [{level} CI])" for m in metrics),
        "held-out first -> last (rise)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run, rows in table.groupby("run", sort=False):
        by = rows.set_index("metric")
        spread = {m: f"; sd {by.at[m, 'sd']:.3f}" if sd else "" for m in metrics}
        cells = [f"{by.at[m, 'value']:.3f} ({by.at[m, 'effect']:+.3f} [{by.at[m, 'ci_low']:+.3f}, "
                 f"{by.at[m, 'ci_high']:+.3f}]{spread[m]})" for m in metrics]  # fmt: skip
        c = curves.get(str(run))
        if c is None:
            cells.append("no curve")
        else:
            rise = f" ({c['effect']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}])" if "effect" in c else ""
            cells.append(f"{c['first']:.3f} -> {c['last']:.3f}{rise}, {c['steps']} steps")
        lines.append("| " + " | ".join([str(run), *cells]) + " |")
    ref = table.groupby("metric", sort=False)["reference"].first()
    n = int(table["n_problems"].iloc[0]) if len(table) else 0
    lines.append("")
    lines.append(f"reference, {n} problems: " + ", ".join(f"{m} {ref[m]:.3f}" for m in metrics))
    return "\n".join(lines) + "\n"
