"""Advantage estimators for GRPO: a registry of small, pure torch functions.

Every estimator maps a ``[groups, n]`` reward tensor (one group = the n completions of one prompt)
to advantages of the same shape, in the ORIGINAL order of the completions, on the input's device
and dtype. Registered names (section 4.3 and appendix A of the paper):

=================  ==========================================================================
``grpo``           z-score within the group, exactly as TRL's GRPOTrainer (eq. 5)
``bon_max_mean``   BoN-max with mean baseline (appendix A)
``bon_max_second`` BoN-max with second-best baseline (appendix A)
``bon_loo1``       unbiased max@k transform minus its leave-one-out baseline (appendix A)
``bon_mean``       unbiased max@k transform (eq. 9), then z-score (appendix A)
``offpolicy_bon``  first-order off-policy max@k transform (section 3.3, appendix E), then z-score
=================  ==========================================================================

All closed forms are derived in sorted order. Sort each group ascending (ties broken by a stable
sort; any consistent order gives the same numbers, see ``bon_rewards``), compute with prefix and
suffix sums, then scatter back. Cost: O(n log n) per group, batched over groups.

Binomial ratios ``C(a, b) / C(n, k)`` are computed in float64 from log-gamma and cast to the input
dtype, so they are finite for any n (no overflow) and exactly 0 where the binomial is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch
from scipy.special import gammaln

__all__ = [
    "ADVANTAGES",
    "GRPO_STD_EPS",
    "bon_loo1_advantages",
    "bon_max_mean_advantages",
    "bon_max_second_advantages",
    "bon_mean_advantages",
    "bon_rewards",
    "compute_advantages",
    "grpo_advantages",
    "needs_k",
    "offpolicy_bon_advantages",
    "offpolicy_bon_rewards",
    "register",
    "zscore",
]

#: TRL 1.16 GRPOTrainer divides by ``std + 1e-4`` (grpo_trainer.py, ``advantages / (std_rewards + 1e-4)``).
GRPO_STD_EPS = 1e-4

Estimator = Callable[..., torch.Tensor]
ADVANTAGES: dict[str, Estimator] = {}
_NEEDS_K: set[str] = set()


def register(name: str, *, needs_k: bool = False) -> Callable[[Estimator], Estimator]:
    """Decorator adding an estimator to ``ADVANTAGES`` under ``name``."""

    def deco(fn: Estimator) -> Estimator:
        if name in ADVANTAGES:
            raise ValueError(f"advantage estimator {name!r} registered twice")
        ADVANTAGES[name] = fn
        if needs_k:
            _NEEDS_K.add(name)
        return fn

    return deco


def needs_k(method: str) -> bool:
    """Whether ``method`` uses the subset size k."""
    return method in _NEEDS_K


# --------------------------------------------------------------------------------------------
# helpers


def _check_rewards(rewards: torch.Tensor) -> torch.Tensor:
    if not isinstance(rewards, torch.Tensor):
        raise TypeError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if rewards.ndim != 2:
        raise ValueError(f"rewards must have shape [groups, n], got {tuple(rewards.shape)}")
    if not rewards.is_floating_point():
        raise TypeError(f"rewards must be floating point, got {rewards.dtype}")
    return rewards


def _check_k(n: int, k: int, *, minimum: int = 1) -> int:
    if isinstance(k, bool) or int(k) != k:
        raise ValueError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k < minimum:
        raise ValueError(f"k must be >= {minimum}, got k={k}")
    if k > n:
        raise ValueError(f"k must be <= n (completions per group), got k={k} > n={n}")
    return k


@lru_cache(maxsize=1024)
def _binom_ratio_np(n: int, k: int, shift: int) -> np.ndarray:
    """``C(j - 1 - shift, k - 1 - shift) / C(n, k)`` for sorted positions j = 1..n (float64).

    shift 0: max@k weights ``C(j-1, k-1)/C(n,k)``; shift 1: ``C(j-2, k-2)/C(n,k)``;
    shift 2: ``C(j-3, k-3)/C(n,k)``. Zero wherever the binomial is zero (bottom < 0 or top < bottom).
    """
    j = np.arange(1, n + 1, dtype=np.float64)
    top = j - 1 - shift
    bot = float(k - 1 - shift)
    out = np.zeros(n, dtype=np.float64)
    if bot < 0:
        return out
    ok = top >= bot
    log_c = gammaln(top[ok] + 1) - gammaln(bot + 1) - gammaln(top[ok] - bot + 1)
    log_den = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    out[ok] = np.exp(log_c - log_den)
    return out


def _coef(n: int, k: int, shift: int, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(_binom_ratio_np(n, k, shift), dtype=like.dtype, device=like.device)


def _suffix_sum_exclusive(x: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = sum_{j > i} x[..., j]`` along the last dim."""
    total = x.sum(dim=-1, keepdim=True)
    return total - torch.cumsum(x, dim=-1)


def _prefix_sum_exclusive(x: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = sum_{j < i} x[..., j]`` along the last dim."""
    return torch.cumsum(x, dim=-1) - x


def _sorted(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sort(rewards, dim=-1, stable=True)


def _unsort(values_sorted: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values_sorted)
    return out.scatter_(-1, order, values_sorted)


def zscore(values: torch.Tensor, eps: float = GRPO_STD_EPS) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` per group, std Bessel-corrected, as TRL's GRPOTrainer (eq. 5).

    A group of one completion has an undefined std in TRL (NaN advantages, which TRL then sets to 0);
    here it gets 0 directly.
    """
    values = _check_rewards(values)
    if values.shape[-1] < 2:
        return torch.zeros_like(values)
    mean = values.mean(dim=-1, keepdim=True)
    std = values.std(dim=-1, keepdim=True, unbiased=True)
    return (values - mean) / (std + eps)


# --------------------------------------------------------------------------------------------
# raw transforms


def bon_rewards(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """On-policy max@k reward transform (eq. 9; section 3.2, appendix D).

    ``r~_i = (1 / C(n, k)) * sum_{I ∋ i, |I| = k} max(r_I)``. In ascending sorted order,
    ``r~_i = [C(i-1, k-1) r_i + sum_{j > i} C(j-2, k-2) r_j] / C(n, k)``
    (``w_ii`` and ``w_ij`` of eq. 8). Ties: the identity ``max(r_I) = r of I's highest-ranked
    member`` holds for any total order consistent with the values, so the result is exact (and equal
    for tied completions) whichever way ties are broken.
    Properties: ``sum_i r~_i = k * max@k``; with k = 1, ``r~_i = r_i / n``.
    """
    rewards = _check_rewards(rewards)
    n = rewards.shape[-1]
    k = _check_k(n, k)
    r, order = _sorted(rewards)
    a = _coef(n, k, 0, r)  # C(i-1, k-1) / C(n, k)
    b = _coef(n, k, 1, r)  # C(j-2, k-2) / C(n, k)
    out = a * r + _suffix_sum_exclusive(b * r)
    return _unsort(out, order)


def offpolicy_bon_rewards(rewards: torch.Tensor, deltas: torch.Tensor, k: int) -> torch.Tensor:
    """First-order off-policy max@k transform (section 3.3, appendix E).

    With importance ratios ``rho_i = 1 + delta_i``, the exact estimator weighs each k-subset by
    ``prod_{l in I} rho_l``; to first order in delta that is ``1 + sum_{l in I} delta_l``:

    ``r'_i = (1 / C(n, k)) * sum_{I ∋ i, |I| = k} (1 + sum_{l in I} delta_l) * max(r_I)
           = (1 / C(n, k)) * [w'_ii r_i + sum_{j > i} w'_ij r_j]`` (sorted ascending), with

    ``w'_ii = C(i-1, k-1) (1 + delta_i) + C(i-2, k-2) D_i``,
    ``w'_ij = C(j-2, k-2) (1 + delta_i + delta_j) + C(j-3, k-3) (D_j - delta_i)`` for j > i,
    ``D_j = sum_{l < j} delta_l``.

    Expanding the sum over j > i gives four suffix sums, so the cost is O(n) after sorting
    (the paper's Listing 3 builds n x n weights and broadcasts them wrongly over groups).
    With all deltas 0 this equals ``bon_rewards``. ``deltas`` are used as given (clamp before).
    """
    rewards = _check_rewards(rewards)
    if not isinstance(deltas, torch.Tensor) or deltas.shape != rewards.shape:
        got = tuple(deltas.shape) if isinstance(deltas, torch.Tensor) else type(deltas).__name__
        raise ValueError(f"deltas must be a tensor of shape {tuple(rewards.shape)}, got {got}")
    n = rewards.shape[-1]
    k = _check_k(n, k)
    r, order = _sorted(rewards)
    d = torch.gather(deltas.to(r.dtype), -1, order)
    big_d = _prefix_sum_exclusive(d)  # D_j = sum_{l<j} delta_l
    a = _coef(n, k, 0, r)
    b = _coef(n, k, 1, r)
    c = _coef(n, k, 2, r)
    diag = (a * (1 + d) + b * big_d) * r
    br = b * r
    cr = c * r
    off = (
        _suffix_sum_exclusive(br * (1 + d))  # sum_j C(j-2,k-2)(1+delta_j) r_j
        + d * _suffix_sum_exclusive(br)  # delta_i sum_j C(j-2,k-2) r_j
        + _suffix_sum_exclusive(cr * big_d)  # sum_j C(j-3,k-3) D_j r_j
        - d * _suffix_sum_exclusive(cr)  # - delta_i sum_j C(j-3,k-3) r_j
    )
    return _unsort(diag + off, order)


def _leave_one_out_max_at_k(rewards_sorted: torch.Tensor, k: int) -> torch.Tensor:
    """``max@k`` over the other n-1 completions, for each sorted position p (O(n)).

    Removing position p shifts the later ones down: with weights ``c_m = C(m-1, k-1)/C(n-1, k)``
    over the reduced list, ``LOO_p = sum_{m < p} c_m r_m + sum_{m >= p} c_m r_{m+1}`` (1-based).
    """
    n = rewards_sorted.shape[-1]
    c = _coef(n - 1, k, 0, rewards_sorted)  # length n-1
    r = rewards_sorted
    head = torch.cumsum(c * r[..., :-1], dim=-1)  # head[q] = sum_{m<=q} c_m r_m (0-based)
    tail_terms = c * r[..., 1:]  # c_m r_{m+1}
    tail = torch.flip(torch.cumsum(torch.flip(tail_terms, [-1]), -1), [-1])  # sum_{m>=q}
    zeros = torch.zeros_like(r[..., :1])
    before = torch.cat([zeros, head], dim=-1)  # sum_{m<p}
    after = torch.cat([tail, zeros], dim=-1)  # sum_{m>=p}
    return before + after


# --------------------------------------------------------------------------------------------
# registered estimators


@register("grpo")
def grpo_advantages(rewards: torch.Tensor, **_: object) -> torch.Tensor:
    """GRPO (eq. 5): ``A_i = (r_i - mean(r)) / (std(r) + 1e-4)``, std Bessel-corrected as in TRL."""
    return zscore(rewards)


@register("bon_max_mean")
def bon_max_mean_advantages(rewards: torch.Tensor, **_: object) -> torch.Tensor:
    """BoN-max-mean (appendix A; Chow et al.): ``A_i = r_i - mean(r)`` if ``r_i = max(r)``, else 0.

    Every completion tied at the maximum gets the advantage.
    """
    rewards = _check_rewards(rewards)
    top = rewards.max(dim=-1, keepdim=True).values
    adv = rewards - rewards.mean(dim=-1, keepdim=True)
    return torch.where(rewards == top, adv, torch.zeros_like(adv))


@register("bon_max_second")
def bon_max_second_advantages(rewards: torch.Tensor, **_: object) -> torch.Tensor:
    """BoN-max-second (appendix A): ``A_i = r_i - max{r_j : r_j != max(r)}`` if ``r_i = max(r)``.

    Others get 0; ties at the maximum all get the advantage; a group with no second-best value
    (all rewards equal) gets 0 everywhere.
    """
    rewards = _check_rewards(rewards)
    top = rewards.max(dim=-1, keepdim=True).values
    is_top = rewards == top
    below = torch.where(is_top, torch.full_like(rewards, -math.inf), rewards)
    second = below.max(dim=-1, keepdim=True).values
    has_second = torch.isfinite(second)
    adv = torch.where(has_second, rewards - second, torch.zeros_like(rewards))
    return torch.where(is_top, adv, torch.zeros_like(adv))


@register("bon_loo1", needs_k=True)
def bon_loo1_advantages(rewards: torch.Tensor, *, k: int, **_: object) -> torch.Tensor:
    """BoN LOO-1 (appendix A; Walder & Karkhanis): the max@k transform minus a leave-one-out baseline.

    ``A_i = (1 / C(n, k)) * sum_{I ∋ i, |I| = k} [max(r_I) - max(r_{I \\ i})]
          = r~_i - (k / n) * max@(k-1)(r_{-i})``,
    because the subsets ``I \\ i`` are exactly the (k-1)-subsets of the other n-1 completions, each
    counted once, and ``C(n-1, k-1) / C(n, k) = k / n``. Needs k >= 2.
    """
    rewards = _check_rewards(rewards)
    n = rewards.shape[-1]
    k = _check_k(n, k, minimum=2)
    r, order = _sorted(rewards)
    transformed = torch.gather(bon_rewards(rewards, k), -1, order)
    baseline = (k / n) * _leave_one_out_max_at_k(r, k - 1)
    return _unsort(transformed - baseline, order)


@register("bon_mean", needs_k=True)
def bon_mean_advantages(rewards: torch.Tensor, *, k: int, **_: object) -> torch.Tensor:
    """BoN mean (appendix A): z-score (as GRPO) of the max@k transform ``bon_rewards(r, k)``."""
    return zscore(bon_rewards(rewards, k))


@register("offpolicy_bon", needs_k=True)
def offpolicy_bon_advantages(
    rewards: torch.Tensor,
    *,
    k: int,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
    **_: object,
) -> torch.Tensor:
    """Off-policy BoN (ours; section 3.3, appendix E): z-score of ``offpolicy_bon_rewards``.

    ``deltas = rho - 1`` per completion (sequence-level importance ratio minus one), clamped to
    ``[-delta_clamp, delta_clamp]`` when given; None means on-policy (all zero), which equals
    ``bon_mean``.
    """
    rewards = _check_rewards(rewards)
    if deltas is None:
        deltas = torch.zeros_like(rewards)
    if delta_clamp is not None:
        if delta_clamp < 0:
            raise ValueError(f"delta_clamp must be >= 0, got {delta_clamp}")
        deltas = deltas.clamp(min=-delta_clamp, max=delta_clamp)
    return zscore(offpolicy_bon_rewards(rewards, deltas, k))


def compute_advantages(
    method: str,
    rewards: torch.Tensor,
    *,
    k: int | None = None,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
) -> torch.Tensor:
    """Advantages of ``method`` (a name in ``ADVANTAGES``) for ``[groups, n]`` rewards.

    ``k`` is required by the BoN transforms (``bon_loo1``, ``bon_mean``, ``offpolicy_bon``);
    ``deltas``/``delta_clamp`` are used by ``offpolicy_bon`` only.
    """
    try:
        fn = ADVANTAGES[method]
    except KeyError:
        known = ", ".join(sorted(ADVANTAGES))
        raise ValueError(f"unknown advantage method {method!r}; known: {known}") from None
    if needs_k(method) and k is None:
        raise ValueError(f"advantage method {method!r} needs k")
    if deltas is not None and method != "offpolicy_bon":
        raise ValueError(f"deltas are only used by 'offpolicy_bon', not {method!r}")
    kwargs: dict[str, object] = {"k": k}
    if method == "offpolicy_bon":
        kwargs.update(deltas=deltas, delta_clamp=delta_clamp)
    return fn(rewards, **kwargs)
