"""Literal enumerations over all k-subsets: the ground truth every closed form is tested against.

Deliberately naive (itertools.combinations and Python floats/Fractions), sharing no code with maxk.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np


def subsets(n: int, k: int) -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(n), k))


def max_at_k(r: Sequence[float], k: int) -> float:
    subs = subsets(len(r), k)
    return sum(max(r[j] for j in s) for s in subs) / len(subs)


def pass_at_k(correct: Sequence[int], k: int) -> float:
    subs = subsets(len(correct), k)
    return sum(1.0 for s in subs if any(correct[j] for j in s)) / len(subs)


def bon_rewards(r: Sequence[float], k: int) -> list[float]:
    """(1/C(n,k)) * sum over k-subsets I containing i of max(r_I)."""
    n = len(r)
    subs = subsets(n, k)
    return [sum(max(r[j] for j in s) for s in subs if i in s) / len(subs) for i in range(n)]


def offpolicy_first_order(r: Sequence[float], d: Sequence[float], k: int) -> list[float]:
    """(1/C(n,k)) * sum_{I ∋ i} (1 + sum_{l in I} d_l) * max(r_I)."""
    n = len(r)
    subs = subsets(n, k)
    return [
        sum((1 + sum(d[m] for m in s)) * max(r[j] for j in s) for s in subs if i in s) / len(subs)
        for i in range(n)
    ]


def offpolicy_exact(r: Sequence[float], d: Sequence[float], k: int) -> list[float]:
    """(1/C(n,k)) * sum_{I ∋ i} prod_{l in I} (1 + d_l) * max(r_I): the exact importance weighting."""
    n = len(r)
    subs = subsets(n, k)
    return [
        sum(math.prod(1 + d[m] for m in s) * max(r[j] for j in s) for s in subs if i in s) / len(subs)
        for i in range(n)
    ]


def offpolicy_exact_no_own(r: Sequence[float], d: Sequence[float], k: int) -> list[float]:
    """(1/C(n,k)) * sum_{I ∋ i} prod_{l in I, l != i} (1 + d_l) * max(r_I): own ratio left out."""
    n = len(r)
    subs = subsets(n, k)
    return [
        sum(math.prod(1 + d[m] for m in s if m != i) * max(r[j] for j in s) for s in subs if i in s)
        / len(subs)
        for i in range(n)
    ]


def subset_std_advantage(r: Sequence[float], k: int) -> list[float]:
    """(mean of max(r_I) over the k-subsets containing i - mean over all) / population std over all."""
    n = len(r)
    maxima = {s: max(r[j] for j in s) for s in subsets(n, k)}
    mean = sum(maxima.values()) / len(maxima)
    std = math.sqrt(sum((v - mean) ** 2 for v in maxima.values()) / len(maxima))
    if std < 1e-12:
        return [0.0] * n
    out = []
    for i in range(n):
        mine = [v for s, v in maxima.items() if i in s]
        out.append((sum(mine) / len(mine) - mean) / std)
    return out


def pass_at_k_training(correct: Sequence[int], k: int) -> list[float]:
    """The analytic Pass@k Training advantage of Chen et al. (2025, arXiv 2508.10751), as published:
    mean = 1 - C(N_neg, k)/C(N, k), std = sqrt(mean (1 - mean)); positive: (1 - mean)/std; negative:
    (1 - mean - C(N_neg - 1, k - 1)/C(N - 1, k - 1))/std."""
    n, neg = len(correct), sum(1 for c in correct if not c)
    mean = 1 - math.comb(neg, k) / math.comb(n, k)
    std = math.sqrt(mean * (1 - mean))
    if std == 0:
        return [0.0] * n
    pos_adv = (1 - mean) / std
    neg_adv = (1 - mean - math.comb(neg - 1, k - 1) / math.comb(n - 1, k - 1)) / std if neg else 0.0
    return [pos_adv if c else neg_adv for c in correct]


def loo1(r: Sequence[float], k: int) -> list[float]:
    """(1/C(n,k)) * sum_{I ∋ i} [max(r_I) - max(r_{I \\ i})]."""
    n = len(r)
    subs = subsets(n, k)
    return [
        sum(max(r[j] for j in s) - max(r[j] for j in s if j != i) for s in subs if i in s) / len(subs)
        for i in range(n)
    ]


def bon_max_mean(r: Sequence[float]) -> list[float]:
    top, mean = max(r), sum(r) / len(r)
    return [x - mean if x == top else 0.0 for x in r]


def bon_max_second(r: Sequence[float]) -> list[float]:
    top = max(r)
    rest = [x for x in r if x != top]
    if not rest:
        return [0.0] * len(r)
    second = max(rest)
    return [x - second if x == top else 0.0 for x in r]


def zscore(x: Sequence[float], eps: float = 1e-4) -> list[float]:
    """Bessel-corrected z-score with TRL's epsilon, written out by hand."""
    n = len(x)
    mean = sum(x) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    return [(v - mean) / (std + eps) for v in x]


def reward_cases(n: int, seed: int = 0) -> list[tuple[str, list[float]]]:
    """Continuous rewards with ties, continuous without, binary, all equal, a single maximum."""
    rng = np.random.default_rng(1000 * n + seed)
    grid = rng.integers(0, 5, size=n) / 4.0  # values in {0, .25, .5, .75, 1}: many ties
    cont = rng.random(n)
    binary = rng.integers(0, 2, size=n).astype(float)
    equal = np.full(n, 0.5)
    single = np.zeros(n)
    single[rng.integers(n)] = 1.0
    return [
        ("ties", grid.tolist()),
        ("continuous", cont.tolist()),
        ("binary", binary.tolist()),
        ("equal", equal.tolist()),
        ("single", single.tolist()),
    ]
