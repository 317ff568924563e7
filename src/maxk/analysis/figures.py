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
from typing import Any

import numpy as np
import pandas as pd

from maxk.analysis.config import BOOTSTRAP, DECIMALS
from maxk.analysis.per_problem import parse_metric_column
from maxk.analysis.stats import bootstrap_ci, bootstrap_counts
from maxk.seeds import derive_seed

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


#: the figure formats written, with the metadata that would make a file differ run to run removed
FIGURE_METADATA = {"pdf": {"CreationDate": None, "ModDate": None}, "png": {"Software": None}}


def save_figure(fig, paths: Sequence[str | Path]) -> list[Path]:
    """Save ``fig`` to each of ``paths`` (the format is the suffix: .pdf or .png) atomically, without
    timestamps; the paths are the caller's (a rule's outputs), none is derived here."""
    from maxk.io import atomic_path

    out = []
    for path in map(Path, paths):
        ext = path.suffix.lstrip(".")
        if ext not in FIGURE_METADATA:
            raise ValueError(f"{path}: a figure is written as {' or '.join(FIGURE_METADATA)}")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, metadata=FIGURE_METADATA[ext], dpi=150, bbox_inches="tight")
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
    paths: Sequence[str | Path],
    *,
    title: str = "",
    seed: int = 0,
    resamples: int = BOOTSTRAP.resamples,
    confidence: float = BOOTSTRAP.confidence,
) -> list[Path]:
    """metric@k against k (log-2 axis) for each model, with bootstrap bands over problems, written to
    ``paths``. The bands' resampling is seeded by ``seed`` and the first path without its suffix."""
    plt = setup_matplotlib()
    stem = Path(paths[0]).with_suffix("")
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
    written = save_figure(fig, paths)
    plt.close(fig)
    return written


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


#: Columns of the entropy estimates table (``entropy_estimates``), in order.
ESTIMATE_COLUMNS: tuple[str, ...] = (
    "model", "sampled_kind", "samples", "tokens_matched", "nll_disagreement", "problems", "entropy_full",
    "entropy_sampled", "nll_sampled", "gap_sampled", "gap_sampled_low", "gap_sampled_high", "gap_nll",
    "gap_nll_low", "gap_nll_high",
)  # fmt: skip


def entropy_estimates(
    rescored: Mapping[str, pd.DataFrame], *, seed: int, resamples: int, confidence: float
) -> pd.DataFrame:
    """One row per model: the three entropy estimates on its re-scored subsample (``maxk.generate.rescore``)
    and their gaps, each a mean over problems with a paired bootstrap interval over problems.

    Only samples whose re-tokenised length matches the sampled one count; ``nll_disagreement`` is their
    mean |re-scored - sampled| per-token NLL (numerics of the two engines, or a re-tokenisation of the same
    length; the stop position's id is a guess, see ``maxk.generate.rescore``). Per problem: the mean over its
    samples of ``entropy_full`` (exact, full vocabulary), ``entropy_sampled`` (the samples file's value:
    vLLM's top-k lower bound, or the exact value with transformers) and ``nll_sampled`` (mean negative
    log-likelihood, figure 2's estimate at paper scale). ``gap_sampled`` = full - sampled (>= 0 for a
    top-k bound, ~0 for exact), ``gap_nll`` = nll - full (a Monte-Carlo estimate's error, mean ~0).
    """
    from maxk.analysis.stats import paired_interval

    rows = []
    for model, df in rescored.items():
        ok = df[df["tokens_match"].astype(bool)]
        kinds = sorted(set(df["entropy_kind"]))
        per = ok.groupby("problem_id", sort=True)[["entropy_full", "entropy_sampled", "nll_sampled"]].mean()
        row: dict[str, Any] = {
            "model": model,
            "sampled_kind": "/".join(kinds) if kinds else "none",
            "samples": len(df),
            "tokens_matched": len(ok),
            "nll_disagreement": float((ok["nll_rescored"] - ok["nll_sampled"]).abs().mean())
            if len(ok)
            else float("nan"),
            "problems": len(per),
            "entropy_full": float(per["entropy_full"].mean()) if len(per) else float("nan"),
            "entropy_sampled": float(per["entropy_sampled"].mean()) if len(per) else float("nan"),
            "nll_sampled": float(per["nll_sampled"].mean()) if len(per) else float("nan"),
        }
        for name, diff in (
            ("gap_sampled", per["entropy_full"] - per["entropy_sampled"]),
            ("gap_nll", per["nll_sampled"] - per["entropy_full"]),
        ):
            d = diff.dropna().to_numpy()
            mean, low, high = (
                paired_interval(d, seed=derive_seed(seed, "entropy", model, name), resamples=resamples,
                                confidence=confidence)
                if len(d) else (float("nan"),) * 3
            )  # fmt: skip
            row.update({name: mean, f"{name}_low": low, f"{name}_high": high})
        rows.append(row)
    return pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))


def render_entropy_estimates(
    table: pd.DataFrame, labels: Mapping[str, str], *, confidence: float, decimals: int = DECIMALS
) -> str:
    """Markdown for ``entropy_estimates``: one row per model, gaps with their intervals."""

    def f(x: float) -> str:
        return "-" if x != x else f"{x:.{decimals}f}"

    def gap(r: Any, name: str) -> str:
        return (
            "-"
            if r[name] != r[name]
            else f"{r[name]:+.{decimals}f} [{r[name + '_low']:+.{decimals}f}, "
            f"{r[name + '_high']:+.{decimals}f}]"
        )

    lines = [
        "| Model | sampled entropy | samples (tokens matched) | NLL disagreement | full-vocabulary entropy "
        "| sampled entropy | NLL estimate | full - sampled [CI] | NLL - full [CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        lines.append(
            f"| {labels.get(r['model'], r['model'])} | {r['sampled_kind']} "
            f"| {r['samples']} ({r['tokens_matched']}) | {f(r['nll_disagreement'])} "
            f"| {f(r['entropy_full'])} | {f(r['entropy_sampled'])} | {f(r['nll_sampled'])} "
            f"| {gap(r, 'gap_sampled')} | {gap(r, 'gap_nll')} |"
        )
    note = (
        "\nMean per-token entropy (nats) on a fixed subsample, re-scored with transformers "
        "(`maxk generate rescore`): *full-vocabulary* is exact; *sampled* is the samples file's value "
        "(`approx`: vLLM's top-k lower bound; `exact`: the transformers backend's own); *NLL* is the sampled "
        "tokens' mean negative log-likelihood, which figure 2 and the entropy claim read when entropies "
        f"are not exact. Gaps: mean over problems, paired {confidence:.0%} bootstrap interval over "
        "problems. Only samples whose re-tokenised length equals the sampled one count.\n"
    )
    return "\n".join(lines) + "\n" + note


def entropy_values(samples: Mapping[str, pd.DataFrame]) -> tuple[str, dict[str, np.ndarray]]:
    """``entropy_per_problem`` as plain arrays (the figure needs no problem ids)."""
    kind, per_problem = entropy_per_problem(samples)
    return kind, {m: v.to_numpy() for m, v in per_problem.items()}


def entropy_figure(
    samples: Mapping[str, pd.DataFrame],
    labels: Mapping[str, str],
    paths: Sequence[str | Path],
    *,
    title: str = "",
) -> tuple[str, list[Path]]:
    """Figure 2: distribution over problems of generation entropy, one histogram per model, written
    to ``paths``."""
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
    written = save_figure(fig, paths)
    plt.close(fig)
    return kind, written


def available_ks(frame: pd.DataFrame, metric: str) -> Sequence[int]:
    return sorted(p[1] for c in frame.columns if (p := parse_metric_column(c)) is not None and p[0] == metric)
