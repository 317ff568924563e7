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

Beyond the paper (issue 15; each docstring gives its formula and source):

=======================  ====================================================================
``offpolicy_bon_exact``  the exact off-policy max@k transform (``offpolicy_bon_rewards_exact``),
                         own ratio left out by default, then z-score
``bon_subset_std``       max@k transform standardised by the spread of the subset maxima: the
                         analytic Pass@k-Training advantage (Chen et al. 2025) on 0/1 rewards
``bon_mean_centered``    max@k transform minus its group mean, no std (Dr. GRPO-style ablation)
=======================  ====================================================================

Off-policy variants that add no signal where there is none (issue 38): the off-policy transform
centred by its group mean but scaled by the spread of the ON-POLICY transform, and 0 in a group whose
on-policy transform is flat (``_onstd_advantages``):

=============================  ==============================================================
``offpolicy_bon_onstd``        ``offpolicy_bon`` with the on-policy spread (first-order transform)
``offpolicy_bon_exact_onstd``  ``offpolicy_bon_exact`` with the on-policy spread (exact transform,
                               own ratio left out by default)
=============================  ==============================================================

All closed forms are derived in sorted order. Sort each group ascending (ties broken by a stable
sort; any consistent order gives the same numbers, see ``bon_rewards``), compute with prefix and
suffix sums, then scatter back. Cost: O(n log n) per group, batched over groups.

Binomial ratios ``C(a, b) / C(n, k)`` are computed in float64 from log-gamma and cast to the input
dtype, so they are finite for any n (no overflow) and exactly 0 where the binomial is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from scipy.special import gammaln

from maxk.estimators import NEEDS, OBJECTIVES, REWARD_KINDS, EstimatorNeeds, declare, needs

__all__ = [
    "ESTIMATORS",
    "GRPO_STD_EPS",
    "OBJECTIVES",
    "REWARD_KINDS",
    "EstimatorSpec",
    "bon_loo1_advantages",
    "bon_max_mean_advantages",
    "bon_max_second_advantages",
    "bon_mean_advantages",
    "bon_mean_centered_advantages",
    "bon_rewards",
    "bon_subset_std_advantages",
    "compute_advantages",
    "estimator",
    "grpo_advantages",
    "maxk_flat",
    "needs_k",
    "offpolicy_bon_advantages",
    "offpolicy_bon_exact_advantages",
    "offpolicy_bon_exact_onstd_advantages",
    "offpolicy_bon_onstd_advantages",
    "offpolicy_bon_rewards",
    "offpolicy_bon_rewards_exact",
    "register",
    "uses_deltas",
    "zscore",
]

#: TRL 1.16 GRPOTrainer divides by ``std + 1e-4`` (grpo_trainer.py, ``advantages / (std_rewards + 1e-4)``).
GRPO_STD_EPS = 1e-4

Estimator = Callable[..., torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class EstimatorSpec(EstimatorNeeds):
    """An advantage estimator: its needs (``maxk.estimators.EstimatorNeeds``, declared there without
    torch so that planning can read them) and ``fn``, the function that computes its advantages
    (keyword only: ``register`` builds it)."""

    fn: Estimator


#: name -> its spec, in registration order.
ESTIMATORS: dict[str, EstimatorSpec] = {}


def register(name: str, **constraints: Any) -> Callable[[Estimator], Estimator]:
    """Decorator binding an estimator function to ``name`` in ``ESTIMATORS``. Its needs are
    ``maxk.estimators.NEEDS[name]``, declared there (every built-in, and any estimator a config may
    name: planning reads the needs there without importing this module). A test's throwaway estimator
    may pass them here instead (``min_k``, ``uses_deltas``, ``reward_kinds``, ``objective``), which
    declares them; an undeclared name without constraints is declared with the defaults (GRPO's)."""

    def deco(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} registered twice")
        if name in NEEDS and constraints:
            raise ValueError(f"{name!r} is declared in maxk.estimators; register it without constraints")
        spec = NEEDS[name] if name in NEEDS else declare(name, **constraints)
        ESTIMATORS[name] = EstimatorSpec(**{f.name: getattr(spec, f.name) for f in fields(spec)}, fn=fn)
        return fn

    return deco


def estimator(method: str) -> EstimatorSpec:
    """The spec of ``method``; ValueError naming the known ones otherwise (``maxk.estimators.needs``:
    every declared estimator is registered here)."""
    needs(method)
    return ESTIMATORS[method]


def needs_k(method: str) -> bool:
    """Whether ``method`` uses the subset size k."""
    return estimator(method).needs_k


def uses_deltas(method: str) -> bool:
    """Whether ``method`` is off-policy: its advantages depend on the importance ratios (deltas)."""
    return estimator(method).uses_deltas


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


def zscore(
    values: torch.Tensor, eps: float = GRPO_STD_EPS, *, spread_of: torch.Tensor | None = None
) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` per group, std Bessel-corrected, as TRL's GRPOTrainer (eq. 5).

    ``spread_of`` (same shape): divide by the std of these values instead of ``values``' own (the
    ``_onstd`` estimators centre the off-policy transform but scale it by the on-policy one's spread).
    A group of one completion has an undefined std in TRL (NaN advantages, which TRL then sets to 0);
    here it gets 0 directly.
    """
    values = _check_rewards(values)
    spread_of = values if spread_of is None else _check_rewards(spread_of)
    if spread_of.shape != values.shape:
        raise ValueError(f"spread_of must have shape {tuple(values.shape)}, got {tuple(spread_of.shape)}")
    if values.shape[-1] < 2:
        return torch.zeros_like(values)
    mean = values.mean(dim=-1, keepdim=True)
    std = spread_of.std(dim=-1, keepdim=True, unbiased=True)
    return (values - mean) / (std + eps)


def _flat(rewards_sorted: torch.Tensor, k: int) -> torch.Tensor:
    """``[groups, 1]``: every k-subset of the group has the same maximum, ``r_(k) = r_(n)`` in ascending
    order. Exactly where the max@k transform ``bon_rewards`` is constant (no max@k signal): if
    ``r_(k) = r_(n)`` every subset's maximum is ``r_(n)``, so each ``r~_i = (k/n) r_(n)``; otherwise
    swapping the lowest and the top completion maps the subsets holding the lowest one onto those
    holding the top one, never lowering the maximum and raising it for ``{1..k}`` (``r_(k) < r_(n)``),
    so ``r~_(n) > r~_(1)``."""
    return rewards_sorted[..., k - 1 : k] == rewards_sorted[..., -1:]


def maxk_flat(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """``[groups]`` bool: each group's max@k transform (``bon_rewards``) is constant, i.e. the group
    carries no max@k signal: its top ``n - k + 1`` rewards tie (``_flat``, on the rewards in any order).
    ``rewards``: ``[groups, n]`` floating point; ``1 <= k <= n``."""
    rewards = _check_rewards(rewards)
    k = _check_k(rewards.shape[-1], k)
    return _flat(_sorted(rewards)[0], k)[..., 0]


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
    deltas = _check_deltas(deltas, rewards)
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


def _check_deltas(deltas: object, rewards: torch.Tensor) -> torch.Tensor:
    if not isinstance(deltas, torch.Tensor) or deltas.shape != rewards.shape:
        got = tuple(deltas.shape) if isinstance(deltas, torch.Tensor) else type(deltas).__name__
        raise ValueError(f"deltas must be a tensor of shape {tuple(rewards.shape)}, got {got}")
    return deltas


@lru_cache(maxsize=32)
def _hypergeometric_np(n: int, k: int) -> np.ndarray:
    """``W[p, s] = C(p, s) C(n-1-p, k-1-s) / C(n, k)`` for sorted positions p = 0..n-1, s = 0..k-1.

    For each p the row sums to ``C(n-1, k-1) / C(n, k) = k / n`` (Vandermonde); computed in float64
    from log-gamma, exactly 0 where a binomial is 0.
    """
    p = np.arange(n, dtype=np.float64)[:, None]
    s = np.arange(k, dtype=np.float64)[None, :]
    t = k - 1 - s
    ok = (s <= p) & (t <= n - 1 - p)
    pp, ss, tt = np.broadcast_arrays(p, s, t)
    log_w = (
        gammaln(pp + 1) - gammaln(ss + 1) - gammaln(np.maximum(pp - ss, 0) + 1)
        + gammaln(n - pp) - gammaln(tt + 1) - gammaln(np.maximum(n - 1 - pp - tt, 0) + 1)
        - (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))
    )  # fmt: skip
    return np.where(ok, np.exp(np.where(ok, log_w, 0.0)), 0.0)


def offpolicy_bon_rewards_exact(
    rewards: torch.Tensor, deltas: torch.Tensor, k: int, *, own_ratio: bool = True
) -> torch.Tensor:
    """Exact off-policy max@k transform in O(n k) per group, no enumeration (issue 15; eq. 10 of the paper).

    With ratios ``rho_l = 1 + delta_l`` (must be > 0), the exact importance-weighted coefficient of
    ``grad log pi(y_i)`` is

        ``c_i = (1 / C(n, k)) * sum_{I ∋ i, |I| = k} prod_{l in I} rho_l * max(r_I)``   (own_ratio=True)

    and, with ``own_ratio=False``, the same sum with ``rho_i`` left out of the product. A PPO-style
    surrogate ``rho_i A_i`` already carries sample i's own ratio, so ``A_i = c_i / rho_i`` (own_ratio
    False) makes the surrogate's gradient the exact off-policy max@k gradient; the paper's form
    (first order of ``own_ratio=True``, ``offpolicy_bon_rewards``) counts ``rho_i`` twice.

    Derivation (ours). Sort ascending (ties in a fixed order: ``max(r_I)`` is the reward of I's
    highest-ranked member, whichever consistent order is used). ``F = sum_I prod_I rho * max r_I =
    sum_m r_m rho_m e_{k-1}(rho_{<m})`` is multilinear in rho and ``c_i = rho_i dF/drho_i / C(n,k)``
    (own) or ``dF/drho_i / C(n,k)`` (not own). With ``e`` the elementary symmetric polynomials,

        ``dF/drho_i = r_i e_{k-1}(rho_{<i}) + sum_{j>i} r_j rho_j e_{k-2}(rho_{<j} minus i)``
        ``          = sum_{s=0}^{k-1} e_s(rho_{<i}) B_{k-2-s}(i)``,
        ``B_u(i) = sum_{j>i} r_j rho_j e_u(rho_{i<l<j})``

    (Vandermonde split of the positions below j into those below and above i; ``B_{-1}(i) = r_i``).
    The prefix polynomials come from a forward recursion over positions and the ``B`` from a backward
    one (reverse-mode differentiation of F). Normalised, every quantity is a mean over subsets:
    ``a_s = e_s / C(count, s)`` obeys the convex recursion ``a_s <- ((m+1-s) a_s + s rho a_{s-1}) /
    (m+1)``, and ``dF/drho_i / C(n,k) = sum_s W[i, s] a_s(i) b_{k-1-s}(i)`` with hypergeometric weights
    ``W`` (``_hypergeometric_np``). The ratios are divided by their group mean first and the factor
    ``mean^(k-1)`` is put back at the end, so nothing overflows unless the true value does.
    Computed in float64 (cast back to the input dtype); with all deltas 0 it equals ``bon_rewards``.
    """
    rewards = _check_rewards(rewards)
    deltas = _check_deltas(deltas, rewards)
    n = rewards.shape[-1]
    k = _check_k(n, k)
    r64 = rewards.double()
    r, order = _sorted(r64)
    rho = 1.0 + torch.gather(deltas.to(r64), -1, order)
    if not torch.all(torch.isfinite(rho)) or torch.any(rho <= 0):
        raise ValueError("deltas must be finite and > -1 (importance ratios rho = 1 + delta > 0)")
    # the forward pass keeps [groups, n, k] float64 values: a few groups at a time bound the memory
    chunk = max(1, _EXACT_CHUNK_ELEMENTS // (n * k))
    parts = [
        _exact_sorted(r[i : i + chunk], rho[i : i + chunk], k, own_ratio) for i in range(0, len(r), chunk)
    ]
    out = torch.cat(parts) if parts else torch.empty_like(r)
    return _unsort(out, order).to(rewards.dtype)


#: elements of the forward pass held at once by ``offpolicy_bon_rewards_exact`` (128 MiB of float64)
_EXACT_CHUNK_ELEMENTS = 1 << 24


def _exact_sorted(r: torch.Tensor, rho: torch.Tensor, k: int, own_ratio: bool) -> torch.Tensor:
    """``offpolicy_bon_rewards_exact`` on ascending rewards ``r`` with their ratios ``rho`` (float64)."""
    n = r.shape[-1]
    mean_rho = rho.mean(dim=-1, keepdim=True)
    rho = rho / mean_rho
    s_idx = torch.arange(k, dtype=r.dtype, device=r.device)
    # forward: prefix[:, p, s] = mean over s-subsets of rho[:, :p] of their product
    a = torch.zeros(r.shape[0], k, dtype=r.dtype, device=r.device)
    a[:, 0] = 1.0
    prefix = torch.empty(r.shape[0], n, k, dtype=r.dtype, device=r.device)
    for p in range(n):
        prefix[:, p] = a
        m1 = p + 1  # elements after adding position p
        shifted = torch.nn.functional.pad(a[:, :-1], (1, 0))
        a = ((m1 - s_idx).clamp(min=0) * a + s_idx * rho[:, p : p + 1] * shifted) / m1
    # backward: q[:, v] = B_{v-1}(p) / C(n-1-p, v) (v >= 1), q[:, 0] = r_p; contracted on the fly
    w = torch.as_tensor(_hypergeometric_np(n, k), dtype=r.dtype, device=r.device)
    q = torch.zeros(r.shape[0], k, dtype=r.dtype, device=r.device)
    grad = torch.empty_like(r)
    for p in range(n - 1, -1, -1):
        q[:, 0] = r[:, p]
        grad[:, p] = (w[p] * prefix[:, p] * torch.flip(q, [-1])).sum(-1)
        big_l = n - 1 - p  # suffix length of q; adding position p makes it big_l + 1
        shifted = torch.nn.functional.pad(q[:, :-1], (1, 0))
        q = ((big_l + 1 - s_idx).clamp(min=0) * q + s_idx * rho[:, p : p + 1] * shifted) / (big_l + 1)
    out = grad * torch.exp((k - 1) * torch.log(mean_rho))
    if own_ratio:
        out = out * rho * mean_rho
    return out


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

    Every completion tied at the maximum gets the advantage. No advantage is ever negative: on 0/1
    rewards this is ``max(r_i - mean(r), 0)``, the mean-centred (Dr. GRPO) advantage without its
    negative half, so the update only raises the group's best completion.
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


@register("bon_loo1")
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


@register("bon_mean")
def bon_mean_advantages(rewards: torch.Tensor, *, k: int, **_: object) -> torch.Tensor:
    """BoN mean (appendix A): z-score (as GRPO) of the max@k transform ``bon_rewards(r, k)``."""
    return zscore(bon_rewards(rewards, k))


def _clamped(rewards: torch.Tensor, deltas: torch.Tensor | None, delta_clamp: float | None) -> torch.Tensor:
    """The deltas to use: zeros when None (on-policy), else clamped to ``[-delta_clamp, delta_clamp]``."""
    if deltas is None:
        return torch.zeros_like(rewards)
    if delta_clamp is not None:
        if delta_clamp < 0:
            raise ValueError(f"delta_clamp must be >= 0, got {delta_clamp}")
        deltas = deltas.clamp(min=-delta_clamp, max=delta_clamp)
    return deltas


@register("offpolicy_bon")
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
    return zscore(offpolicy_bon_rewards(rewards, _clamped(rewards, deltas, delta_clamp), k))


@register("offpolicy_bon_exact")
def offpolicy_bon_exact_advantages(
    rewards: torch.Tensor,
    *,
    k: int,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
    own_ratio: bool = False,
    **_: object,
) -> torch.Tensor:
    """Exact off-policy BoN (issue 15): z-score of ``offpolicy_bon_rewards_exact(r, delta, k, own_ratio)``.

    ``c_i = (1 / C(n,k)) sum_{I ∋ i} prod_{l in I, l != i} rho_l max(r_I)`` by default
    (``own_ratio=False``): inside the PPO surrogate ``rho_i A_i`` this gives the exact off-policy
    max@k gradient; ``own_ratio=True`` keeps ``rho_i`` in the product as the paper's section 3.3 does.
    Deltas are clamped and recomputed at every PPO iteration exactly as for ``offpolicy_bon``; with
    deltas None (on-policy) it equals ``bon_mean``.
    """
    rewards = _check_rewards(rewards)
    d = _clamped(rewards, deltas, delta_clamp)
    return zscore(offpolicy_bon_rewards_exact(rewards, d, k, own_ratio=own_ratio))


def _onstd_advantages(rewards: torch.Tensor, transformed: torch.Tensor, k: int) -> torch.Tensor:
    """``A_i = (c_i - mean_j c_j) / (std_j(r~_j) + eps)`` with ``c`` an off-policy transform and
    ``r~ = bon_rewards(r, k)`` the on-policy one of the same group; exactly 0 in a group whose
    ``r~`` is constant (``_flat``). See ``offpolicy_bon_onstd_advantages`` for the derivation."""
    n = rewards.shape[-1]
    k = _check_k(n, k)
    adv = zscore(transformed, spread_of=bon_rewards(rewards, k))
    flat = _flat(_sorted(rewards)[0], k)
    return torch.where(flat, torch.zeros_like(adv), adv)


@register("offpolicy_bon_onstd")
def offpolicy_bon_onstd_advantages(
    rewards: torch.Tensor,
    *,
    k: int,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
    **_: object,
) -> torch.Tensor:
    """``offpolicy_bon`` scaled by the ON-POLICY transform's spread (ours, issue 38):

        ``A_i = (r'_i - mean_j r'_j) / (std_j(r~_j) + eps)``, and ``A_i = 0`` where ``r~`` is constant,

    ``r' = offpolicy_bon_rewards(r, delta, k)`` (section 3.3, appendix E), ``r~ = bon_rewards(r, k)``
    (eq. 9), std Bessel-corrected and ``eps = GRPO_STD_EPS`` as in ``zscore``.

    Derivation. ``r' = r~ + D`` with ``D`` the importance correction, linear in delta
    (``D_i = (1/C(n,k)) sum_{I ∋ i} (sum_{l in I} delta_l) max r_I``). ``bon_mean`` divides
    ``r~ - mean`` by ``std(r~)``, a per-group scale set by the rewards (GRPO's normalisation). The
    paper's ``offpolicy_bon`` z-scores ``r'`` instead, so its scale depends on the deltas too: in a
    group whose top ``n-k+1`` rewards tie ``r~`` is constant, ``std(r') = std(D) = O(delta)`` and
    ``zscore(r') = zscore(D)``, unit-size advantages with no reward signal (pushing up whatever the
    previous PPO iteration raised). Keeping the on-policy scale gives
    ``A = bon_mean + (D - mean D) / (std(r~) + eps)``: the correction keeps its first-order size relative
    to the reward signal (as in ``r'`` itself), is exactly linear in delta, and moves ``A`` the way
    the paper's transform moves (``dA_i/d delta_i = (1 - k/n) r~_i / (std(r~) + eps)``, since
    ``sum_l dr'_l/d delta_i = k r~_i``). Where ``r~`` is constant the group has no max@k signal and
    ``bon_mean`` gives 0; dividing ``D`` by ``eps`` would blow it up, so it gets exactly 0. With deltas
    None or 0 it equals ``bon_mean``. Deltas are clamped exactly as for ``offpolicy_bon``.
    Caveat: where ``std(r~)`` is small but not 0 (nearly flat groups) ``D / std(r~)`` is not bounded
    by bon_mean's unit scale; there the delta term dominates ``r'`` itself (the estimator lab,
    ``maxk.analysis.lab``, measures the effect on the gradient).
    """
    rewards = _check_rewards(rewards)
    transformed = offpolicy_bon_rewards(rewards, _clamped(rewards, deltas, delta_clamp), k)
    return _onstd_advantages(rewards, transformed, k)


@register("offpolicy_bon_exact_onstd")
def offpolicy_bon_exact_onstd_advantages(
    rewards: torch.Tensor,
    *,
    k: int,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
    own_ratio: bool = False,
    **_: object,
) -> torch.Tensor:
    """``offpolicy_bon_exact`` scaled by the ON-POLICY transform's spread (ours, issue 38):

        ``A_i = (c_i - mean_j c_j) / (std_j(r~_j) + eps)``, and ``A_i = 0`` where ``r~`` is constant,

    ``c = offpolicy_bon_rewards_exact(r, delta, k, own_ratio)`` (issue 15; eq. 10 of the paper, own
    ratio left out by default as in ``offpolicy_bon_exact``), ``r~ = bon_rewards(r, k)``, std
    Bessel-corrected plus ``GRPO_STD_EPS``. Same derivation as ``offpolicy_bon_onstd_advantages`` with
    ``c = r~ + D``, ``D`` now the exact (not linear) importance correction: z-scoring ``c`` turns a
    flat group's ``D`` into unit-size advantages; scaling by ``std(r~)`` keeps ``D`` at its size relative
    to the reward signal, and a flat group gets exactly 0. With deltas None or 0 (either own_ratio)
    it equals ``bon_mean``.
    """
    rewards = _check_rewards(rewards)
    d = _clamped(rewards, deltas, delta_clamp)
    transformed = offpolicy_bon_rewards_exact(rewards, d, k, own_ratio=own_ratio)
    return _onstd_advantages(rewards, transformed, k)


@register("bon_subset_std")
def bon_subset_std_advantages(rewards: torch.Tensor, *, k: int, **_: object) -> torch.Tensor:
    """max@k transform standardised by the subset maxima's spread (issue 15).

    ``A_i = ((n / k) r~_i - max@k) / std_I(max r_I)``, ``r~ = bon_rewards(r, k)``, the std over all
    k-subsets I (population): ``Var = sum_m w_m r_m^2 - max@k^2`` with the max@k weights
    ``w_m = C(m-1, k-1) / C(n, k)`` in ascending order. 0 where that std is 0, i.e. where every
    subset has the same maximum (``r_(k) = r_(n)`` sorted). ``(n/k) r~_i`` is the mean of
    ``max(r_I)`` over the subsets containing i, so ``A_i`` is the standardised value of "i's subsets"
    against all subsets. On 0/1 rewards this is exactly the analytic Pass@k Training advantage of
    Chen et al. (2025, arXiv 2508.10751): ``(1 - mean) / std`` for a correct sample and
    ``(1 - mean - C(n_neg - 1, k - 1) / C(n - 1, k - 1)) / std`` for a wrong one, with
    ``mean = 1 - C(n_neg, k) / C(n, k)`` and ``std = sqrt(mean (1 - mean))``. O(n log n).
    """
    rewards = _check_rewards(rewards)
    n = rewards.shape[-1]
    k = _check_k(n, k)
    r, _ = _sorted(rewards)
    w = _coef(n, k, 0, r)
    mean = (w * r).sum(dim=-1, keepdim=True)
    std = (w * (r - mean) ** 2).sum(dim=-1, keepdim=True).clamp(min=0).sqrt()
    constant = _flat(r, k)
    adv = ((n / k) * bon_rewards(rewards, k) - mean) / torch.where(constant, torch.ones_like(std), std)
    return torch.where(constant, torch.zeros_like(adv), adv)


@register("bon_mean_centered")
def bon_mean_centered_advantages(rewards: torch.Tensor, *, k: int, **_: object) -> torch.Tensor:
    """``A_i = r~_i - mean_j r~_j`` with ``r~ = bon_rewards(r, k)``: ``bon_mean`` without the division
    by the std (issue 15; the Dr. GRPO-style ablation of Liu et al. 2025, arXiv 2503.20783, between
    ``bon_mean`` and ``bon_loo1``). Since ``sum_i r~_i = k max@k``, the baseline is ``(k/n) max@k``, the
    unbiased max@k estimate scaled by k/n; its score-function term has expectation ``(k/n) grad max@k``,
    so ``E[sum_i A_i grad log pi(y_i)] = (1 - k/n) grad max@k`` exactly: no direction bias (the lab
    checks this)."""
    t = bon_rewards(rewards, k)
    return t - t.mean(dim=-1, keepdim=True)


def compute_advantages(
    method: str,
    rewards: torch.Tensor,
    *,
    k: int | None = None,
    deltas: torch.Tensor | None = None,
    delta_clamp: float | None = None,
    own_ratio: bool = False,
) -> torch.Tensor:
    """Advantages of ``method`` (a name in ``ESTIMATORS``) for ``[groups, n]`` rewards.

    ``k`` is required by the BoN transforms (``needs_k``); ``deltas``/``delta_clamp`` are used by the
    off-policy ones (``uses_deltas``), ``own_ratio`` by ``offpolicy_bon_exact`` and
    ``offpolicy_bon_exact_onstd`` only (the others take it and ignore it).
    """
    spec = estimator(method)
    if spec.needs_k and k is None:
        raise ValueError(f"advantage method {method!r} needs k")
    if deltas is not None and not spec.uses_deltas:
        off = ", ".join(repr(m) for m, e in ESTIMATORS.items() if e.uses_deltas)
        raise ValueError(f"deltas are only used by the off-policy methods ({off}), not {method!r}")
    kwargs: dict[str, object] = {"k": k}
    if spec.uses_deltas:
        kwargs.update(deltas=deltas, delta_clamp=delta_clamp, own_ratio=own_ratio)
    return spec.fn(rewards, **kwargs)


def _check_every_declared_estimator_is_bound() -> None:
    if unbound := [name for name in NEEDS if name not in ESTIMATORS]:
        raise ImportError(f"maxk.estimators declares estimators with no function here: {unbound}")


_check_every_declared_estimator_is_bound()
