"""Statistics for the tables: bootstrap CIs, Wilcoxon best-vs-second, Holm correction.

- ``bootstrap_counts``: one matrix of resampling counts ``[B, P]`` (problems drawn with replacement),
  seeded; reusing the same matrix for every cell of a dataset makes the CIs paired across methods.
- ``bootstrap_ci``: percentile intervals of the mean per-problem value, vectorised as one matrix
  product ``counts @ values / P`` (no Python loop over resamples).
- ``wilcoxon_best_vs_second``: the paper's section 4.5 test (scipy's signed-rank test on paired
  per-problem values of the best and the second-best method).
- ``holm``: Holm-Bonferroni step-down adjusted p-values (across datasets).
- ``two_level_interval``: an effect pooled across seeds (independent training runs), its interval from
  resampling seeds, then problems within each seed (runs vary more than problems within a run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from maxk.analysis.config import BOOTSTRAP, SIGNIFICANCE

__all__ = [
    "ALTERNATIVES",
    "ZERO_METHODS",
    "WilcoxonResult",
    "bootstrap_ci",
    "bootstrap_counts",
    "detectable_effect",
    "holm",
    "two_level_draws",
    "two_level_interval",
    "wilcoxon_best_vs_second",
]

ALTERNATIVES = ("greater", "two-sided", "less")
ZERO_METHODS = ("wilcox", "pratt", "zsplit")


@lru_cache(maxsize=8)
def bootstrap_counts(n_problems: int, resamples: int, seed: int) -> NDArray[np.float64]:
    """``[resamples, n_problems]`` multiplicities of a with-replacement resample of the problems.

    Cached (read-only result): every table over the same dataset reuses the same resamples.
    """
    if n_problems < 1 or resamples < 1:
        raise ValueError("bootstrap needs at least one problem and one resample")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_problems, size=(resamples, n_problems))
    flat = idx + (np.arange(resamples)[:, None] * n_problems)
    counts = np.bincount(flat.ravel(), minlength=resamples * n_problems)
    out = counts.reshape(resamples, n_problems).astype(np.float64)
    out.setflags(write=False)
    return out


def bootstrap_ci(
    values: ArrayLike, counts: NDArray[np.float64], confidence: float = BOOTSTRAP.confidence
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile CI of the mean over problems for each column of ``values`` ``[P]`` or ``[P, C]``.

    Returns ``(low, high)`` with the shape of one row of ``values``.
    """
    v = np.asarray(values, dtype=np.float64)
    squeeze = v.ndim == 1
    if squeeze:
        v = v[:, None]
    if counts.shape[1] != v.shape[0]:
        raise ValueError(f"counts are for {counts.shape[1]} problems, values for {v.shape[0]}")
    means = counts @ v / v.shape[0]  # [B, C]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return (low[0], high[0]) if squeeze else (low, high)


def paired_interval(
    d: ArrayLike, *, seed: int, resamples: int, confidence: float
) -> tuple[float, float, float]:
    """``(mean, low, high)`` of paired differences ``d`` (one per problem): their mean and its percentile
    bootstrap interval, the problems resampled with ``bootstrap_counts(len(d), resamples, seed)``."""
    d = np.asarray(d, dtype=np.float64)
    low, high = bootstrap_ci(d, bootstrap_counts(len(d), resamples, seed), confidence)
    return float(d.mean()), float(low), float(high)


def detectable_effect(d: ArrayLike, *, alpha: float, power: float) -> float:
    """The smallest true mean of paired differences ``d`` that a one-sided test at level ``alpha`` finds
    with probability ``power``, from their observed standard deviation (normal approximation):
    ``(z(1 - alpha) + z(power)) * sd(d) / sqrt(P)`` (NaN with fewer than two differences). For a
    two-sided interval at confidence c, ``alpha = (1 - c) / 2``: the effect whose interval excludes zero
    with probability ``power``."""
    from scipy.stats import norm

    d = np.asarray(d, dtype=np.float64)
    if d.size < 2:
        return math.nan
    return float((norm.ppf(1 - alpha) + norm.ppf(power)) * np.std(d, ddof=1) / math.sqrt(d.size))


def two_level_interval(
    per_seed: Sequence[ArrayLike], *, seed: int, resamples: int, confidence: float
) -> tuple[float, float, float]:
    """``(mean, low, high)`` of an effect measured on several seeds: ``per_seed[s]`` holds seed s's paired
    per-problem differences. ``mean`` is the mean over seeds of each seed's mean difference; the interval
    is the percentile interval of that statistic under a two-level bootstrap: draw the seeds with
    replacement, then, independently for each draw, the problems of that seed with replacement.

    The seed level carries the variation between training runs (Henderson et al. 2018; Agarwal et al.
    2021 resample runs), the problem level the evaluation noise within a run; an interval over problems
    alone, pooled across seeds, ignores the first and is too narrow when runs disagree. With few seeds
    the percentile bootstrap over seeds undercovers (3 seeds cannot show much of their spread): read the
    per-seed effects beside it. Simulated (tests/analysis/test_analysis_stats.py: run sd 0.03, problem
    sd 0.1, 60 problems, nominal 95 %): 92.5 % coverage with 10 seeds, 83.5 % with 3; the problems-only
    interval 55.5 %. At the miniature's own spread (runs' effects differ between seeds by an sd of about
    0.017, a seed's standard error about 0.005), a null effect's interval lies above zero (nominally
    2.5 %) 26-29 % of the time with one seed, 14 % with two, 9-12 % with three, 3.5-5 % with eight
    (``test_two_level_interval_reads_a_null_effect_above_zero_too_often_with_few_seeds``). One seed: the
    problem-level interval of that seed.
    """
    arrays = [np.asarray(d, dtype=np.float64) for d in per_seed]
    stats = two_level_draws(arrays, seed=seed, resamples=resamples)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(np.mean([a.mean() for a in arrays])), float(low), float(high)


def two_level_draws(per_seed: Sequence[ArrayLike], *, seed: int, resamples: int) -> np.ndarray:
    """The ``resamples`` bootstrap replicates of the mean over seeds of each seed's mean difference, under
    the two-level bootstrap of ``two_level_interval`` (its interval is their percentiles; their standard
    deviation is the effect's standard error, for the smallest detectable effect)."""
    arrays = [np.asarray(d, dtype=np.float64) for d in per_seed]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError("two_level_interval needs at least one seed, each with a 1-d array of differences")
    n_seeds = len(arrays)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    # each seed's problem-level resample means [seeds, slots]: one independent resample per (resample,
    # draw) slot, so a seed drawn twice in one resample gets two different problem resamples
    slots = resamples * n_seeds
    means = np.stack([a[rng.integers(0, a.size, size=(slots, a.size))].mean(axis=1) for a in arrays])
    return means[draws, np.arange(slots).reshape(resamples, n_seeds)].mean(axis=1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaN entries are kept as NaN and not counted)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out.tolist()
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


@dataclass(frozen=True)
class WilcoxonResult:
    """Outcome of best-vs-second for one column. ``pvalue`` is NaN when the test is undefined."""

    best: int
    second: int
    statistic: float
    pvalue: float
    note: str = ""


def wilcoxon_best_vs_second(
    best: ArrayLike,
    second: ArrayLike,
    *,
    alternative: str = SIGNIFICANCE.alternative,
    zero_method: str = SIGNIFICANCE.zero_method,
    best_index: int = 0,
    second_index: int = 1,
) -> WilcoxonResult:
    """scipy's Wilcoxon signed-rank test on paired per-problem values ``best - second``.

    ``alternative="greater"`` tests whether the best method's per-problem values are
    stochastically larger (section 4.5). If all differences are zero the test is undefined and the
    p-value is NaN (note says why).
    """
    from scipy.stats import wilcoxon

    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    if zero_method not in ZERO_METHODS:
        raise ValueError(f"zero_method must be one of {ZERO_METHODS}, got {zero_method!r}")
    x = np.asarray(best, dtype=np.float64)
    y = np.asarray(second, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples must be 1-D and equal length, got {x.shape} and {y.shape}")
    d = x - y
    if x.size == 0 or np.all(d == 0):
        return WilcoxonResult(best_index, second_index, math.nan, math.nan, "all differences are zero")
    res = wilcoxon(x, y, alternative=alternative, zero_method=zero_method)
    return WilcoxonResult(best_index, second_index, float(res.statistic), float(res.pvalue))
