"""Unbiased estimators of pass@k and max@k from n samples per problem (appendix C of the paper).

With ``n`` samples of one problem, an estimator averages a statistic over all ``C(n, k)``
k-subsets of the samples; these closed forms give that average without enumerating subsets:

- pass@k (Chen et al. 2021):  ``1 - C(n-c, k) / C(n, k)`` with ``c`` correct samples;
- max@k (appendix C):          ``sum_{i=k}^{n} C(i-1, k-1) / C(n, k) * r_(i)`` where
  ``r_(1) <= ... <= r_(n)`` are the rewards sorted ascending, since ``C(i-1, k-1)`` subsets have
  their maximum at sorted position ``i``.

The weights ``w_i(n, k) = C(i-1, k-1) / C(n, k)`` are computed by the exact recurrence
``w_n = k / n``, ``w_{i-1} = w_i * (i-k) / (i-1)`` (products of numbers in (0, 1]), so they
never overflow for any ``n`` and underflow gracefully to 0 instead of producing NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "check_k",
    "max_at_k",
    "max_at_k_batch",
    "max_at_k_weights",
    "pass_at_k",
    "pass_at_k_batch",
    "pass_at_k_from_counts",
    "powers_of_two",
]


def check_k(n: int, k: int) -> None:
    """Raise ``ValueError`` unless ``1 <= k <= n``."""
    if isinstance(k, bool) or int(k) != k:
        raise ValueError(f"k must be an integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    if k > n:
        raise ValueError(f"k must be <= n (the number of samples), got k={k} > n={n}")


@lru_cache(maxsize=4096)
def _weights(n: int, k: int) -> NDArray[np.float64]:
    w = np.zeros(n, dtype=np.float64)
    w[n - 1] = k / n
    # w_{i-1} = w_i * (i - k) / (i - 1) for i = n .. k+1  (1-based); zero below position k.
    i = np.arange(n, k, -1, dtype=np.float64)
    if i.size:
        ratios = (i - k) / (i - 1)
        w[k - 1 : n - 1] = (k / n) * np.cumprod(ratios)[::-1]
    w.setflags(write=False)
    return w


def max_at_k_weights(n: int, k: int) -> NDArray[np.float64]:
    """Weights ``C(i-1, k-1) / C(n, k)`` for sorted positions ``i = 1..n`` (read-only array).

    They sum to 1; ``max@k = weights @ sorted_ascending(rewards)``.
    """
    check_k(n, k)
    return _weights(int(n), int(k))


def max_at_k(rewards: Sequence[float] | ArrayLike, k: int) -> float:
    """Unbiased max@k of one problem's rewards (appendix C).

    ``max@k = (1 / C(n, k)) * sum_{i=k}^{n} C(i-1, k-1) * r_(i)``, ``r`` sorted ascending.
    ``max@1`` is the mean reward, ``max@n`` the maximum.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"rewards must be 1-D, got shape {r.shape}")
    check_k(r.size, k)
    return float(max_at_k_weights(r.size, k) @ np.sort(r))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021; appendix C): ``1 - C(n-c, k) / C(n, k)``.

    Evaluated as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``, which is exact in the same sense and
    cannot overflow.
    """
    check_k(n, k)
    if not 0 <= c <= n:
        raise ValueError(f"c must be in [0, n], got c={c}, n={n}")
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - k / i))


def _as_matrix(rewards: ArrayLike) -> NDArray[np.float64]:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"expected a [problems, n] matrix, got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards contain NaN or infinite values")
    return r


def _check_ks(n: int, ks: Sequence[int]) -> list[int]:
    ks = [int(k) for k in ks]
    if not ks:
        raise ValueError("ks must not be empty")
    for k in ks:
        check_k(n, k)
    return ks


def max_at_k_batch(rewards: ArrayLike, ks: Sequence[int]) -> NDArray[np.float64]:
    """max@k for every row of a ``[problems, n]`` reward matrix and every k: ``[problems, len(ks)]``.

    One sort per row and one matrix product: ``sort(R) @ W.T`` with ``W[j] = max_at_k_weights(n, ks[j])``.
    """
    r = _as_matrix(rewards)
    ks = _check_ks(r.shape[1], ks)
    weights = np.stack([_weights(r.shape[1], k) for k in ks])  # [len(ks), n]
    return np.sort(r, axis=1) @ weights.T


def pass_at_k_batch(correct: ArrayLike, ks: Sequence[int]) -> NDArray[np.float64]:
    """pass@k for every row of a ``[problems, n]`` 0/1 (or boolean) matrix: ``[problems, len(ks)]``."""
    c = np.asarray(correct)
    if c.ndim != 2:
        raise ValueError(f"expected a [problems, n] matrix, got shape {c.shape}")
    if c.dtype != bool and not np.isin(c, (0, 1)).all():
        raise ValueError("pass@k needs 0/1 correctness values")
    return pass_at_k_from_counts(c.sum(axis=1), c.shape[1], ks)


def pass_at_k_from_counts(counts: ArrayLike, n: int, ks: Sequence[int]) -> NDArray[np.float64]:
    """pass@k for per-problem correct counts ``c`` out of ``n``: ``[problems, len(ks)]``.

    ``pass@k(c) = sum of the top c max@k weights`` (the k-subsets whose maximum is a correct
    sample), read from a cumulative table, so the cost is O(n * len(ks) + problems * len(ks)).
    """
    c = np.asarray(counts)
    if c.ndim != 1:
        raise ValueError(f"counts must be 1-D, got shape {c.shape}")
    if c.size and (c.min() < 0 or c.max() > n):
        raise ValueError(f"counts must lie in [0, n={n}]")
    ks = _check_ks(n, ks)
    # tail[j, c] = sum of the c largest-position weights for ks[j]; tail[:, 0] = 0.
    tail = np.zeros((len(ks), n + 1), dtype=np.float64)
    for j, k in enumerate(ks):
        tail[j, 1:] = np.cumsum(_weights(n, k)[::-1])
    out = np.minimum(tail[:, c.astype(np.int64)].T, 1.0)
    return np.ascontiguousarray(out)


def powers_of_two(n: int) -> list[int]:
    """``[1, 2, 4, ..., 2**m]`` with ``2**m <= n``: the paper's k grid for n samples."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return [1 << e for e in range(n.bit_length()) if (1 << e) <= n]
