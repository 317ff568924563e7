"""Figures: metric@k curves with bootstrap bands (figure 1, max@k per dataset) and figure 2.

All figures are written as PDF (for the paper) and PNG (for the HTML report) with the Agg backend
and fixed settings so reruns give identical bytes: ``svg.hashsalt`` fixed, PDF ``CreationDate``
removed, PNG written without a ``Software`` tag, and bootstrap bands from seeded resamples.

Figure 2 (generation entropy before/after GRPO) uses, per problem, the mean over samples of the
mean per-token entropy when *every* sample of *every* plotted model has ``entropy_kind == "exact"``;
otherwise it uses the mean per-token negative log-likelihood ``-sum_logprob / num_tokens`` for
all of them (a Monte Carlo estimate of the entropy), and the axis label says which. The two are
never mixed in one figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from maxk.analysis.per_problem import parse_metric_column
from maxk.analysis.stats import bootstrap_ci, bootstrap_counts, derive_seed

__all__ = [
    "curve_figure",
    "entropy_figure",
    "entropy_per_problem",
    "entropy_values",
    "save_figure",
    "setup_matplotlib",
]

METRIC_NAMES = {"pass": "pass@k", "max": "max@k"}


def setup_matplotlib():
    """Agg backend, deterministic rcParams, seaborn theme; returns ``matplotlib.pyplot``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(context="paper", style="whitegrid", palette="colorblind")
    matplotlib.rcParams["svg.hashsalt"] = "maxk"
    matplotlib.rcParams["pdf.compression"] = 6
    matplotlib.rcParams["path.simplify"] = True
    return plt


def save_figure(fig, stem: str | Path) -> list[Path]:
    """Save ``fig`` as ``<stem>.pdf`` and ``<stem>.png`` atomically, without timestamps."""
    from maxk.io import atomic_path

    stem = Path(stem)
    out = []
    for ext, meta in (("pdf", {"CreationDate": None, "ModDate": None}), ("png", {"Software": None})):
        path = stem.with_suffix(f".{ext}")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, metadata=meta, dpi=150, bbox_inches="tight")
        out.append(path)
    return out


def _curve(frame: pd.DataFrame, metric: str, counts: np.ndarray, confidence: float):
    cols = sorted(
        ((p[1], c) for c in frame.columns if (p := parse_metric_column(c)) is not None and p[0] == metric),
    )
    ks = np.array([k for k, _ in cols])
    values = frame[[c for _, c in cols]].to_numpy(dtype=np.float64)
    low, high = bootstrap_ci(values, counts, confidence)
    return ks, values.mean(axis=0), low, high


def curve_figure(
    frames: Mapping[str, pd.DataFrame],
    labels: Mapping[str, str],
    metric: str,
    stem: str | Path,
    *,
    title: str = "",
    seed: int = 0,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> list[Path]:
    """metric@k against k (log-2 axis) for each model, with bootstrap bands over problems."""
    plt = setup_matplotlib()
    n_problems = {len(f) for f in frames.values()}
    if len(n_problems) != 1:
        raise ValueError(f"curve {stem}: models have different numbers of problems {sorted(n_problems)}")
    counts = bootstrap_counts(n_problems.pop(), resamples, derive_seed(seed, "curve", str(stem)))
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for model, frame in frames.items():
        f = frame.sort_values("problem_id", kind="stable")
        ks, mean, low, high = _curve(f, metric, counts, confidence)
        (line,) = ax.plot(ks, mean, marker="o", markersize=3, label=labels.get(model, model))
        ax.fill_between(ks, low, high, alpha=0.2, color=line.get_color(), linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel(METRIC_NAMES.get(metric, metric))
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize="small")
    paths = save_figure(fig, stem)
    plt.close(fig)
    return paths


def entropy_per_problem(samples: Mapping[str, pd.DataFrame]) -> tuple[str, dict[str, pd.Series]]:
    """Per-problem generation entropy (a Series indexed by sorted ``problem_id``) and the kind used.

    "exact": mean over samples of ``mean_entropy``; used only if all rows of all models are exact.
    "nll": mean over samples of ``-sum_logprob / num_tokens`` (samples with 0 tokens skipped).
    """
    exact = all(
        (df["entropy_kind"] == "exact").all() and df["mean_entropy"].notna().all() for df in samples.values()
    )
    out: dict[str, pd.Series] = {}
    for model, df in samples.items():
        if exact:
            per_sample = df["mean_entropy"].astype(float)
            frame = df.assign(_v=per_sample)
        else:
            tokens = df["num_tokens"].astype(float)
            frame = df.assign(_v=-df["sum_logprob"].astype(float) / tokens.where(tokens > 0))
        out[model] = frame.groupby("problem_id", sort=True)["_v"].mean().dropna()
    return ("exact" if exact else "nll"), out


def entropy_values(samples: Mapping[str, pd.DataFrame]) -> tuple[str, dict[str, np.ndarray]]:
    """``entropy_per_problem`` as plain arrays (the figure needs no problem ids)."""
    kind, per_problem = entropy_per_problem(samples)
    return kind, {m: v.to_numpy() for m, v in per_problem.items()}


def entropy_figure(
    samples: Mapping[str, pd.DataFrame],
    labels: Mapping[str, str],
    stem: str | Path,
    *,
    title: str = "",
) -> tuple[str, list[Path]]:
    """Figure 2: distribution over problems of generation entropy, one histogram per model."""
    import seaborn as sns

    plt = setup_matplotlib()
    kind, values = entropy_values(samples)
    rows = [pd.DataFrame({"value": v, "model": labels.get(m, m)}) for m, v in values.items() if len(v)]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame({"value": [], "model": []})
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    if len(data):
        sns.histplot(
            data=data,
            x="value",
            hue="model",
            stat="density",
            common_norm=False,
            element="step",
            bins=30,
            ax=ax,
        )
    ax.set_xlabel(
        "mean per-token entropy (nats)"
        if kind == "exact"
        else "mean per-token negative log-likelihood (nats; entropy estimate)"
    )
    ax.set_ylabel("density over problems")
    if title:
        ax.set_title(title)
    paths = save_figure(fig, stem)
    plt.close(fig)
    return kind, paths


def available_ks(frame: pd.DataFrame, metric: str) -> Sequence[int]:
    return sorted(p[1] for c in frame.columns if (p := parse_metric_column(c)) is not None and p[0] == metric)
