"""Statistics for the tables: bootstrap CIs, Wilcoxon best-vs-second, Holm correction.

- ``bootstrap_counts``: one matrix of resampling counts ``[B, P]`` (problems drawn with replacement),
  seeded; reusing the same matrix for every cell of a dataset makes the CIs paired across methods.
- ``bootstrap_ci``: percentile intervals of the mean per-problem value, vectorised as one matrix
  product ``counts @ values / P`` (no Python loop over resamples).
- ``wilcoxon_best_vs_second``: the paper's section 4.5 test (scipy's signed-rank test on paired
  per-problem values of the best and the second-best method).
- ``holm``: Holm-Bonferroni step-down adjusted p-values (across datasets).
- ``random_effects_interval``: an effect pooled across seeds (independent training runs): the mean of
  the seeds' means, its variance the between-seed spread (``seed_spread``: pooled over a family of
  effects) plus each seed's problem noise, a t interval (runs vary more than problems within a run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from maxk.analysis.config import BOOTSTRAP, SIGNIFICANCE

__all__ = [
    "ALTERNATIVES",
    "ZERO_METHODS",
    "Pooled",
    "SeedSpread",
    "WilcoxonResult",
    "bootstrap_ci",
    "bootstrap_counts",
    "detectable_effect",
    "holm",
    "random_effects_interval",
    "seed_spread",
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


@dataclass(frozen=True)
class SeedSpread:
    """The between-seed variance of a family of effects, pooled over its members (``seed_spread``):
    ``tau2`` (tau squared, at least 0) with ``df`` degrees of freedom (the sum over the members of their
    seeds minus one; 0: no member has two seeds), from ``members`` effects of two seeds or more."""

    tau2: float
    df: int
    members: int = 0


@dataclass(frozen=True)
class Pooled:
    """An effect pooled over seeds (``random_effects_interval``): the mean over seeds of each seed's mean
    difference (``effect``), its standard error ``se`` with ``df`` degrees of freedom (``inf``: the
    normal), the interval ``[low, high]``, the one-sided p-value of "effect <= 0" and the seeds pooled."""

    effect: float
    low: float
    high: float
    se: float
    df: float
    pvalue: float
    seeds: int

    def detectable(self, *, alpha: float, power: float) -> float:
        """The smallest true effect a one-sided test at level ``alpha`` finds with probability ``power`` at
        this standard error: ``(t_df(1 - alpha) + t_df(power)) * se``."""
        from scipy.stats import t

        return float((t.ppf(1 - alpha, self.df) + t.ppf(power, self.df)) * self.se)

    def seeds_for(
        self, effect: float, *, alpha: float, power: float, members: int = 1, most: int = 100
    ) -> int | None:
        """The fewest seeds on which a true ``effect`` is found with probability ``power`` by the one-sided
        test at ``alpha``, each seed as variable as these (``se^2 * seeds`` held) and the degrees of freedom
        growing as ``members * (S - 1)`` (``members``: the effects of the family whose spread is pooled;
        1: the effect alone). None for an effect at or below zero, from one seed (whose spread between
        seeds is unknown), or above ``most`` seeds."""
        from scipy.stats import t

        if not effect > 0 or self.seeds < 2:
            return None
        per_seed = self.se**2 * self.seeds
        for seeds in range(2, most + 1):
            df = members * (seeds - 1)
            if (t.ppf(1 - alpha, df) + t.ppf(power, df)) * math.sqrt(per_seed / seeds) <= effect:
                return seeds
        return None


def _seed_moments(per_seed: Sequence[ArrayLike]) -> tuple[np.ndarray, float]:
    """Each seed's mean difference, and the mean over seeds of each mean's problem-level variance
    ``var(d_s) / n_s`` (0 for a seed of one problem)."""
    arrays = [np.asarray(d, dtype=np.float64) for d in per_seed]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError("a pooled effect needs at least one seed, each with a 1-d array of differences")
    means = np.array([a.mean() for a in arrays])
    within = float(np.mean([a.var(ddof=1) / a.size if a.size > 1 else 0.0 for a in arrays]))
    return means, within


def _own_tau2(means: np.ndarray, within: float) -> float:
    """One effect's between-seed variance by the method of moments, ``var(m_s) - mean_s var(d_s)/n_s``
    (may be negative: the estimate is unbiased; 0 with one seed)."""
    return float(np.var(means, ddof=1) - within) if means.size > 1 else 0.0


def seed_spread(effects: Iterable[Sequence[ArrayLike]]) -> SeedSpread:
    """The between-seed variance tau^2 shared by a family of effects (each ``per_seed`` like
    ``random_effects_interval``'s), pooled over them: ``tau2 = max(0, sum_e (S_e - 1) tau2_e / df)``,
    ``df = sum_e (S_e - 1)``, ``tau2_e`` each effect's method-of-moments estimate (``_own_tau2``,
    DerSimonian & Laird 1986 without weights: the seeds of one effect are measured on the same problems).
    Members with one seed add nothing; a member with a value that is not finite makes the family's spread
    NaN (unknown, not zero). Pooling assumes the members share one spread between seeds: the miniature's
    runs do within what their sampling allows (docs/experiments.md, "Few seeds, read honestly"); where
    they do not, the widest member reads a null effect above zero more often than nominal (about 7 % at
    the most unequal spreads measured, ``benchmarks/pooled_interval_rates.py``)."""
    total, df, members = 0.0, 0, 0
    for per_seed in effects:
        means, within = _seed_moments(per_seed)
        if means.size > 1:
            total += (means.size - 1) * _own_tau2(means, within)
            df += means.size - 1
            members += 1
    if not math.isfinite(total):
        return SeedSpread(tau2=math.nan, df=df, members=members)
    return SeedSpread(tau2=max(0.0, total / df) if df else 0.0, df=df, members=members)


def random_effects_interval(
    per_seed: Sequence[ArrayLike], *, confidence: float, spread: SeedSpread | None = None
) -> Pooled:
    """An effect measured on several seeds (``per_seed[s]``: seed s's paired per-problem differences),
    pooled as a random-effects mean: each seed's mean difference ``m_s = mean(d_s)`` is the effect plus a
    seed deviation of variance tau^2 plus problem noise of variance ``w_s = var(d_s) / n_s``, so

        effect = mean_s m_s,   se^2 = (tau^2 + mean_s w_s) / S,   interval effect +- t_df(1 - tail) se,

    with ``tau^2 = max(tau2_own, spread.tau2)``: the larger of the effect's own method-of-moments estimate
    and its family's pooled one (``seed_spread``), with the family's ``df`` (on one seed, the family's
    alone); without a family (or one whose members never had two seeds) the effect's own estimate,
    clipped at 0, with ``S - 1``, and one seed alone, its problem-level normal interval (which knows
    nothing of the spread between seeds). The p-value is one-sided, ``P(T_df >= effect / se)``; NaN with
    a value or a family spread that is not finite.

    Why not resample seeds: with few seeds a bootstrap over seeds cannot see their spread (its variance
    is ``(S - 1) / S`` of the plug-in one, and it has no t quantile). At the miniature's own spread
    (between-seed sd about 0.017, a seed's standard error about 0.005), the two-level bootstrap (seeds,
    then problems) read a null effect above zero 26-29 % of the time on one seed, 14 % on two, 9-12 % on
        three, 3.5-5 % on eight (nominally 2.5 %). With a family, this interval reads it at or below the
    nominal rate on any number of seeds when the family shares its spread, and about 7 % for the widest
    member where the family's spreads differ as much as the 12 runs' measured ones (0.009-0.032), at the
    power of a t-test on the seeds with the family's degrees of freedom (``benchmarks/
    pooled_interval_rates.py``; ``tests/analysis/test_analysis_stats.py`` checks the rates loosely).
    Sources: DerSimonian & Laird (1986) for tau^2; Hartung & Knapp (2001) for the t quantile; Henderson
    et al. (2018) and Agarwal et al. (2021) for seeds as the unit of an RL result.
    """
    from scipy.stats import t

    means, within = _seed_moments(per_seed)
    seeds = int(means.size)
    if spread is not None and spread.df > 0:  # one seed: the family's spread alone (its own is unknown)
        own = _own_tau2(means, within)
        tau2 = math.nan if math.isnan(own) or math.isnan(spread.tau2) else max(own, spread.tau2)
        df = float(spread.df)
    elif seeds == 1:
        tau2, df = 0.0, math.inf
    else:
        tau2, df = max(_own_tau2(means, within), 0.0), float(seeds - 1)
    effect = float(means.mean())
    se = math.sqrt(max(tau2 + within, 0.0) / seeds) if math.isfinite(tau2 + within) else math.nan
    half = float(t.ppf(1 - (1.0 - confidence) / 2.0, df)) * se
    if math.isnan(effect) or math.isnan(se):
        pvalue = math.nan
    else:
        pvalue = float(t.sf(effect / se, df)) if se > 0 else (0.0 if effect > 0 else 1.0)
    return Pooled(effect=effect, low=effect - half, high=effect + half, se=se, df=df, pvalue=pvalue,
                  seeds=seeds)  # fmt: skip


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
