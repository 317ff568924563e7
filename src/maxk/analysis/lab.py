"""The estimator lab: bias and variance of each advantage estimator's policy gradient, measured
against the exact gradient of max@k on a toy categorical policy.

Toy problem. One prompt, K outcomes with known rewards ``r`` (a "continuous" setting with distinct
rewards and a "ties" setting with repeated ones), policy ``pi = softmax(theta)``. For k i.i.d.
draws, ``P(max <= r_(j)) = F_j^k`` with ``F_j`` the policy mass of the j lowest-reward outcomes
(sorted), so ``max@k(theta) = sum_j r_(j) (F_j^k - F_{j-1}^k)`` exactly (ties included: tied
positions telescope); its gradient w.r.t. the logits comes from autograd in float64. A test checks
it against exhaustive enumeration of the K^k tuples.

Estimators. Draw M independent groups of n outcomes ``y_1..y_n ~ pi``; an estimator maps the group's
rewards to weights ``A_i`` and its policy-gradient estimate is ``g = sum_i A_i grad log pi(y_i)``,
with ``grad_theta log pi(y) = onehot(y) - pi`` for a softmax. We use
``maxk.objectives.compute_advantages`` for every registered estimator (the paper's six: grpo,
bon_max_mean, bon_max_second, bon_loo1, bon_mean, offpolicy_bon; and the newer bon_subset_std,
bon_mean_centered, offpolicy_bon_exact, offpolicy_bon_onstd, offpolicy_bon_exact_onstd; the off-policy
ones equal bon_mean on-policy) plus the unnormalised on-policy transform ``bon_rewards``
(eq. 9, ``bon_raw``), which is unbiased for ``grad max@k`` exactly (not just in direction).
z-scored estimators have an arbitrary scale, so we report scale-free numbers:

- ``direction_bias = sin(angle(E[g], grad max@k))`` = ``min_c ||c E[g] - grad|| / ||grad||``, and
  ``cosine``, the cosine of that angle (the sine cannot tell a reversed gradient from a right one);
- ``relative_bias = ||E[g] - grad|| / ||grad||`` (meaningful for the unnormalised ``bon_raw``,
  ``bon_loo1`` and the off-policy transforms);
- ``noise_to_signal = trace Cov[g] / ||E[g]||^2`` (variance of one group's estimate);
- ``mc_se``: Monte Carlo standard error of ``E[g]`` relative to ``||grad||`` (the noise floor of
  the bias numbers).

Off-policy. Samples come from ``pi_old = softmax(theta_old)``; the gradient is wanted at
``pi_theta = softmax(theta_old + d u)`` (u a unit direction, d the distance), with
``deltas = rho - 1``, ``rho = pi_theta(y) / pi_old(y)``. Two directions (column ``deltas``):

- ``random``: u a fixed random unit direction (deltas unrelated to the rewards);
- ``correlated``: u the direction of the previous PPO update, which is how deltas look at PPO
  iterations 2 and 3 (``_update_direction``).

Compared to ``grad max@k(theta)``:
``zeroth_order`` (the on-policy transform, ignoring the shift), ``first_order``
(``offpolicy_bon_rewards``, section 3.3), ``exact_own`` and ``exact_no_own``
(``offpolicy_bon_rewards_exact`` with and without each sample's own ratio in its subset weights) and,
for small n, ``exact_is`` (the exact importance-weighted subset sum of eq. (10), enumerated: the check
of ``exact_own``). Each in two gradient forms (column ``gradient``):

- ``score``: ``g = sum_i w_i grad log pi_theta(y_i)``, the weights used as the whole coefficient;
- ``surrogate``: ``g = sum_i rho_i w_i grad log pi_theta(y_i)``, the gradient of a PPO-style surrogate
  ``sum_i rho_i A_i`` with ``A_i = w_i`` (inside the clip range), which is how GRPO uses advantages.

The advantage estimators that use the deltas (``OFFPOLICY_ADVANTAGES``: the paper's
``offpolicy_bon``, ``offpolicy_bon_exact`` and their ``_onstd`` variants, and ``bon_mean``, which
ignores the deltas) in the score form only (inside the surrogate each A_i is multiplied by
``rho_i = 1 + O(d)``; the surrogate rows are the raw transforms'), with three more columns:
``flat_mass``, the share of the advantage mass ``E[sum_i |A_i|]`` on groups without max@k signal
(every k-subset has the same maximum: ``bon_rewards`` is constant and ``bon_mean`` gives 0),
``flat_grad``, ``|E[g 1_flat]| / |E[g]|``, the share of the expected gradient they contribute, and
``flat_along_shift``, the cosine of that contribution with u (for the raw transforms these include
the uncentred, baseline-like mass of those groups; every row has them).

Expected: score form, exact_own ~ 0, zeroth order O(d), first order O(d^2); surrogate form,
exact_no_own ~ 0, while exact_own and first_order count rho_i twice and are O(d); flat_mass and
flat_grad 0 for ``bon_mean`` and the ``_onstd`` variants, not for the paper's z-scored versions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from maxk.analysis.config import EXACT_IS_MAX_SUBSETS, MAX_MULTISETS
from maxk.paths import LAB_FIGURES

__all__ = [
    "ESTIMATORS",
    "Setting",
    "enumerate_max_at_k",
    "exact_gradient",
    "exact_max_at_k",
    "offpolicy_advantage_table",
    "run_lab",
    "run_offpolicy",
    "run_onpolicy",
]

#: The registered estimators plus the unnormalised on-policy transform.
ESTIMATORS = (
    "grpo",
    "bon_max_mean",
    "bon_max_second",
    "bon_loo1",
    "bon_mean",
    "offpolicy_bon",
    "bon_subset_std",
    "bon_mean_centered",
    "offpolicy_bon_exact",
    "offpolicy_bon_onstd",
    "offpolicy_bon_exact_onstd",
    "bon_raw",
)
#: Equal to ``bon_mean`` on-policy (deltas 0): kept in the CSV, not drawn twice.
_ONPOLICY_DUPLICATES = (
    "offpolicy_bon",
    "offpolicy_bon_exact",
    "offpolicy_bon_onstd",
    "offpolicy_bon_exact_onstd",
)
#: Off-policy transforms compared in the lab, in drawing order.
OFFPOLICY_TRANSFORMS = ("zeroth_order", "first_order", "exact_own", "exact_no_own")
#: Advantage estimators of the off-policy lab (score form): ignoring the deltas, the paper's z-scored
#: off-policy BoN, exact, and both scaled by the on-policy spread (issue 38).
OFFPOLICY_ADVANTAGES = (
    "bon_mean",
    "offpolicy_bon",
    "offpolicy_bon_onstd",
    "offpolicy_bon_exact",
    "offpolicy_bon_exact_onstd",
)
#: The off-policy directions (column ``deltas``).
DELTA_KINDS = ("random", "correlated")


@dataclass(frozen=True)
class Setting:
    name: str
    rewards: tuple[float, ...]
    logits: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.rewards) != len(self.logits) or len(self.rewards) < 2:
            raise ValueError(f"lab setting {self.name!r}: rewards and logits need the same length >= 2")


def exact_max_at_k(logits, rewards, k: int):
    """Differentiable ``E[max of k i.i.d. rewards]`` under ``softmax(logits)`` (torch scalar)."""
    import torch

    pi = torch.softmax(logits, dim=-1)
    r = torch.as_tensor(rewards, dtype=logits.dtype)
    order = torch.argsort(r, stable=True)
    p = pi[order]
    cdf = torch.cumsum(p, dim=-1)
    prev = cdf - p
    return (r[order] * (cdf.clamp(max=1.0) ** k - prev.clamp(min=0.0) ** k)).sum()


def exact_gradient(logits: Sequence[float], rewards: Sequence[float], k: int) -> tuple[float, np.ndarray]:
    """``(max@k, grad_logits max@k)`` in float64."""
    import torch

    theta = torch.tensor(list(logits), dtype=torch.float64, requires_grad=True)
    value = exact_max_at_k(theta, rewards, k)
    (grad,) = torch.autograd.grad(value, theta)
    return float(value.detach()), grad.numpy()


def enumerate_max_at_k(pi: Sequence[float], rewards: Sequence[float], k: int) -> float:
    """``E[max of k draws]`` by summing over all K^k tuples (reference for tests; small K, k only)."""
    total = 0.0
    for tup in itertools.product(range(len(pi)), repeat=k):
        total += math.prod(pi[i] for i in tup) * max(rewards[i] for i in tup)
    return total


def _grad_estimates(y, weights, pi):
    """``g[m] = sum_i weights[m, i] (onehot(y[m, i]) - pi)`` for every group m: ``[M, K]``."""
    import torch

    m, _ = y.shape
    g = torch.zeros(m, pi.shape[0], dtype=torch.float64)
    g.scatter_add_(1, y, weights)
    return g - weights.sum(dim=1, keepdim=True) * pi[None, :]


def _summarise(g: np.ndarray, prob: np.ndarray, true: np.ndarray, exact: bool) -> dict[str, float]:
    """Bias/variance numbers of estimates ``g[M, K]`` with probabilities ``prob[M]`` (sum 1)."""
    mean = prob @ g
    tn = float(np.linalg.norm(true))
    mn = float(np.linalg.norm(mean))
    cos = float(mean @ true / (mn * tn)) if mn > 1e-300 and tn > 0 else math.nan
    trace_cov = float(prob @ ((g - mean) ** 2).sum(axis=1))
    # Monte Carlo standard error of E[g] (expected norm of its error) relative to |grad|; 0 if exact.
    se = 0.0 if exact else math.sqrt(trace_cov / g.shape[0])
    return {
        "cosine": cos,
        "direction_bias": math.sqrt(max(0.0, 1.0 - cos * cos)) if not math.isnan(cos) else math.nan,
        "relative_bias": float(np.linalg.norm(mean - true)) / tn if tn > 0 else math.nan,
        "noise_to_signal": trace_cov / (mn * mn) if mn > 1e-300 else math.nan,
        "mc_se": se / tn if tn > 0 else math.nan,
        "direction_se": se / mn if mn > 1e-300 else math.nan,
        "grad_norm": tn,
        "exact_expectation": exact,
    }


def _ensemble(pi, n: int, *, groups: int, seed: int, max_multisets: int):
    """Groups ``y[M, n]`` with probabilities ``prob[M]`` and whether the expectation is exact.

    Every estimator here is permutation-equivariant, so the exact expectation over the ``K^n``
    ordered groups equals a sum over the ``C(K+n-1, n)`` multisets weighted by their multinomial
    probabilities. When that count is at most ``max_multisets`` we enumerate (bias and variance
    exact, no Monte Carlo noise); otherwise we draw ``groups`` i.i.d. groups (Monte Carlo).
    """
    import torch

    k_out = pi.shape[0]
    if math.comb(k_out + n - 1, n) <= max_multisets:
        y = torch.tensor(list(itertools.combinations_with_replacement(range(k_out), n)), dtype=torch.long)
        counts = torch.zeros(y.shape[0], k_out, dtype=torch.float64)
        counts.scatter_add_(1, y, torch.ones(y.shape, dtype=torch.float64))
        logp = (
            math.lgamma(n + 1)
            - torch.lgamma(counts + 1).sum(dim=1)
            + (counts * torch.log(pi)[None, :]).sum(dim=1)
        )
        return y, torch.exp(logp).numpy(), True
    gen = torch.Generator().manual_seed(int(seed) % (2**63))
    y = torch.multinomial(pi, groups * n, replacement=True, generator=gen).reshape(groups, n)
    return y, np.full(groups, 1.0 / groups), False


def run_onpolicy(
    setting: Setting,
    ns: Sequence[int],
    ks: Sequence[int],
    *,
    groups: int,
    seed: int,
    max_multisets: int = MAX_MULTISETS,
    estimators: Sequence[str] = ESTIMATORS,
) -> pd.DataFrame:
    """Bias/variance of every estimator for every (n, k <= n), on-policy."""
    import torch

    from maxk.objectives import bon_rewards, compute_advantages, needs_k
    from maxk.seeds import derive_seed

    theta = torch.tensor(setting.logits, dtype=torch.float64)
    pi = torch.softmax(theta, dim=-1)
    r_table = torch.tensor(setting.rewards, dtype=torch.float64)
    rows = []
    for n in ns:
        y, prob, exact = _ensemble(
            pi, n, groups=groups, seed=derive_seed(seed, "lab", setting.name, n), max_multisets=max_multisets
        )
        rewards = r_table[y]
        for k in ks:
            if k > n:
                continue
            value, true = exact_gradient(setting.logits, setting.rewards, k)
            for est in estimators:
                if est == "bon_raw":
                    w = bon_rewards(rewards, k)
                elif est == "bon_loo1" and k < 2:
                    continue
                else:
                    w = compute_advantages(est, rewards, k=k if needs_k(est) else None)
                g = _grad_estimates(y, w, pi).numpy()
                rows.append(
                    {"setting": setting.name, "n": n, "k": k, "estimator": est, "max_at_k": value}
                    | _summarise(g, prob, true, exact)
                )
    return pd.DataFrame(rows)


def _exact_is_weights(rewards, rho, k: int):
    """Exact importance-weighted subset weights ``(1/C(n,k)) sum_{I ∋ i} prod rho_I max r_I``."""
    import torch

    n = rewards.shape[1]
    subsets = list(itertools.combinations(range(n), k))
    idx = torch.tensor(subsets, dtype=torch.long)  # [C, k]
    member = torch.zeros(len(subsets), n, dtype=torch.float64)
    member.scatter_(1, idx, 1.0)
    mx = rewards[:, idx].max(dim=-1).values  # [M, C]
    w = rho[:, idx].prod(dim=-1)  # [M, C]
    return (w * mx) @ member / math.comb(n, k)


def _update_direction(kind: str, setting: Setting, y, prob, rewards, k: int, pi_old, seed: int) -> np.ndarray:
    """The unit logit direction u of the off-policy shift ``theta_old + d u`` (zero if there is none).

    ``random``: a fixed random direction (mean removed: a logit shift along 1 changes nothing).

    ``correlated``: the previous PPO update's direction, ``u = E[g_1] / |E[g_1]|`` with
    ``g_1 = sum_i A_i grad log pi_old(y_i)`` and ``A = bon_mean`` at ``theta_old``. Derivation: GRPO with
    ``num_iterations`` PPO iterations (the paper: 3) draws one batch from ``pi_old`` and updates on it
    3 times. At iteration 1, rho = 1, so every off-policy estimator is ``bon_mean`` and the update is
    ``theta_1 = theta_old + eta G_1``, G_1 the batch's gradient; with many groups of the prompt in the
    batch (the toy has one prompt) ``G_1 -> E[g_1]``, and we take a step of length d along it. At
    iteration 2, on the same samples, ``delta_i = pi_1(y_i) / pi_old(y_i) - 1 ~ d <onehot(y_i) - pi_old,
    u>``: positive exactly for the outcomes the last step raised. Iteration 3 adds a step along
    iteration 2's gradient, which points close to u wherever the estimator's direction bias is small,
    so it is this construction at distance ~2d (the sweep over d covers it). In an LLM a sample's delta
    also has an own term ``eta A_i |grad log pi(y_i)|^2`` (completions are distinct; here outcomes are
    shared by all groups, so it is the 1/batch part of ``E[g_1]``); in a group without max@k signal
    ``A_i = 0`` at iteration 1 and that term vanishes: its deltas are the shared part modelled here.
    """
    if kind == "random":
        from maxk.seeds import derive_seed

        u = np.random.default_rng(derive_seed(seed, "lab-direction", setting.name)).standard_normal(
            len(setting.logits)
        )
        u -= u.mean()
    elif kind == "correlated":
        from maxk.objectives import compute_advantages

        u = prob @ _grad_estimates(y, compute_advantages("bon_mean", rewards, k=k), pi_old).numpy()
    else:
        raise ValueError(f"unknown delta kind {kind!r}; known: {DELTA_KINDS}")
    norm = float(np.linalg.norm(u))
    return u / norm if norm > 1e-300 else np.zeros_like(u)


def _flat_shares(
    w: np.ndarray, g: np.ndarray, prob: np.ndarray, flat: np.ndarray, u: np.ndarray
) -> dict[str, float]:
    """What the ``flat`` groups (no max@k signal) get: ``flat_mass``, the share of ``E[sum_i |w_i|]``;
    ``flat_grad``, ``|E[g 1_flat]| / |E[g]|``, their share of the expected gradient; ``flat_along_shift``,
    the cosine of ``E[g 1_flat]`` with the shift direction u (under correlated deltas, > 0: they push
    further the way the previous update went). NaN where a denominator is 0."""
    mass = prob * np.abs(w).sum(axis=1)
    total = float(mass.sum())
    mean = float(np.linalg.norm(prob @ g))
    flat_vec = (prob * flat) @ g
    flat_mean = float(np.linalg.norm(flat_vec))
    u_norm = float(np.linalg.norm(u))
    visible = flat_mean > 1e-9 * mean and u_norm > 0  # not the round-off of a zero contribution
    along = float(flat_vec @ u) / (flat_mean * u_norm) if visible else math.nan
    return {
        "flat_mass": float(mass[flat].sum()) / total if total > 0 else math.nan,
        "flat_grad": flat_mean / mean if mean > 1e-300 else math.nan,
        "flat_along_shift": along,
    }


def run_offpolicy(
    setting: Setting,
    n: int,
    k: int,
    distances: Sequence[float],
    *,
    groups: int,
    seed: int,
    max_multisets: int = MAX_MULTISETS,
    exact_is_max_subsets: int = EXACT_IS_MAX_SUBSETS,
    delta_kinds: Sequence[str] = DELTA_KINDS,
) -> pd.DataFrame:
    """Error of the off-policy estimators at ``theta_old + d u`` as the distance d grows, for u random
    and along the previous update (``delta_kinds``, see ``_update_direction``)."""
    import torch

    from maxk.objectives import (
        bon_rewards,
        compute_advantages,
        maxk_flat,  # the estimators' own test of "no max@k signal", so the lab counts the same groups
        offpolicy_bon_rewards,
        offpolicy_bon_rewards_exact,
    )
    from maxk.seeds import derive_seed

    theta_old = torch.tensor(setting.logits, dtype=torch.float64)
    pi_old = torch.softmax(theta_old, dim=-1)
    y, prob, exact = _ensemble(
        pi_old,
        n,
        groups=groups,
        seed=derive_seed(seed, "lab-off", setting.name, n),
        max_multisets=max_multisets,
    )
    rewards = torch.tensor(setting.rewards, dtype=torch.float64)[y]
    flat = maxk_flat(rewards, k).numpy()  # every k-subset has the same maximum
    rows = []
    for kind in delta_kinds:
        u = _update_direction(kind, setting, y, prob, rewards, k, pi_old, seed)
        for d in distances:
            theta = theta_old + float(d) * torch.tensor(u)
            pi = torch.softmax(theta, dim=-1)
            rho = pi[y] / pi_old[y]
            deltas = rho - 1.0
            _, true = exact_gradient(theta.tolist(), setting.rewards, k)
            weights = {
                "zeroth_order": bon_rewards(rewards, k),
                "first_order": offpolicy_bon_rewards(rewards, deltas, k),
                "exact_own": offpolicy_bon_rewards_exact(rewards, deltas, k, own_ratio=True),
                "exact_no_own": offpolicy_bon_rewards_exact(rewards, deltas, k, own_ratio=False),
            }
            if math.comb(n, k) <= exact_is_max_subsets:
                weights["exact_is"] = _exact_is_weights(rewards, rho, k)
            for est in OFFPOLICY_ADVANTAGES:
                on_policy = est == "bon_mean"
                weights[est] = compute_advantages(est, rewards, k=k, deltas=None if on_policy else deltas)
            forms = [("score", est, w) for est, w in weights.items()]
            forms += [("surrogate", est, rho * weights[est]) for est in OFFPOLICY_TRANSFORMS]
            for form, est, w in forms:
                g = _grad_estimates(y, w, pi).numpy()
                rows.append(
                    {
                        "setting": setting.name,
                        "n": n,
                        "k": k,
                        "deltas": kind,
                        "distance": float(d),
                        "gradient": form,
                        "estimator": est,
                        "max_delta": float(deltas.abs().max()),
                    }
                    | _summarise(g, prob, true, exact)
                    | _flat_shares(w.numpy(), g, prob, flat, u)
                )
    return pd.DataFrame(rows)


def offpolicy_advantage_table(off: pd.DataFrame) -> pd.DataFrame:
    """The advantage estimators' rows of an off-policy table (``OFFPOLICY_ADVANTAGES``), one line per
    (setting, deltas, distance, estimator): the cosine and direction bias against ``grad max@k`` and
    the flat-group shares. What the off-policy figure's second row draws."""
    cols = ["cosine", "direction_bias", "flat_mass", "flat_grad", "flat_along_shift", "max_delta"]
    sub = off[(off["gradient"] == "score") & off["estimator"].isin(OFFPOLICY_ADVANTAGES)]
    if "deltas" not in sub:
        sub = sub.assign(deltas="random")
    order = sub["estimator"].map({e: i for i, e in enumerate(OFFPOLICY_ADVANTAGES)})
    sub = sub.assign(_order=order).sort_values(["setting", "deltas", "distance", "_order"], kind="stable")
    return sub.set_index(["setting", "deltas", "distance", "estimator"])[cols]


def settings_from_config(cfg: Mapping) -> list[Setting]:
    return [Setting(name, tuple(s["rewards"]), tuple(s["logits"])) for name, s in cfg["settings"].items()]


def run_lab(cfg: Mapping, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole lab from an ``analysis.lab`` config section: (on-policy table, off-policy table)."""
    on, off = [], []
    for s in settings_from_config(cfg):
        on.append(
            run_onpolicy(
                s,
                cfg["n"],
                cfg["k"],
                groups=cfg["groups"],
                seed=seed,
                max_multisets=cfg["max_multisets"],
            )
        )
        op = cfg["offpolicy"]
        off.append(
            run_offpolicy(
                s,
                op["n"],
                op["k"],
                op["distances"],
                groups=cfg["groups"],
                seed=seed,
                max_multisets=cfg["max_multisets"],
                exact_is_max_subsets=op["exact_is_max_subsets"],
            )
        )
    return pd.concat(on, ignore_index=True), pd.concat(off, ignore_index=True)


def plot_lab(
    on: pd.DataFrame, off: pd.DataFrame, outputs: Mapping[str, Sequence[str]], *, plot_k: int, plot_n: int
) -> list:
    """Figures, each to its paths in ``outputs`` (keys ``maxk.paths.LAB_FIGURES``): on-policy bias and
    noise vs n (k fixed) and bias vs k (n fixed); off-policy error vs d, once with the weights as the
    whole coefficient (``offpolicy``) and once inside the PPO surrogate (``offpolicy_surrogate``)."""
    import seaborn as sns

    from maxk.analysis.figures import save_figure, setup_matplotlib

    plt = setup_matplotlib()
    if set(outputs) != set(LAB_FIGURES):
        raise ValueError(f"plot_lab: outputs for {sorted(outputs)}, expected {list(LAB_FIGURES)}")
    paths = []
    settings = list(dict.fromkeys(on["setting"]))
    hue_order = [e for e in ESTIMATORS if e in set(on["estimator"]) and e not in _ONPOLICY_DUPLICATES]
    on = on[on["estimator"].isin(hue_order)]

    fig, axes = plt.subplots(len(settings), 3, figsize=(12, 3.2 * len(settings)), squeeze=False)
    for i, s in enumerate(settings):
        sub = on[on["setting"] == s]
        a = sub[sub["k"] == plot_k]
        b = sub[sub["n"] == plot_n]
        for ax, data, x, y, ylab in (
            (axes[i][0], a, "n", "direction_bias", f"direction bias, sin∠ (k={plot_k})"),
            (axes[i][1], a, "n", "noise_to_signal", f"trace Cov / |E g|² (k={plot_k})"),
            (axes[i][2], b, "k", "direction_bias", f"direction bias, sin∠ (n={plot_n})"),
        ):
            sns.lineplot(
                data=data,
                x=x,
                y=y,
                hue="estimator",
                hue_order=hue_order,
                style="estimator",
                markers=True,
                dashes=False,
                ax=ax,
                legend=(ax is axes[0][2]),
            )
            ax.set_xscale("log", base=2)
            if y == "noise_to_signal":
                ax.set_yscale("log")
            ax.set_ylabel(ylab)
            ax.set_title(f"{s} rewards")
        floor = a[(a["estimator"] == "bon_raw") & (a["mc_se"] > 0)][["n", "mc_se"]]
        if len(floor):
            axes[i][0].plot(floor["n"], floor["mc_se"], color="grey", linestyle=":", label="MC noise floor")
    if axes[0][2].get_legend() is not None:
        sns.move_legend(axes[0][2], "upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    fig.tight_layout()
    paths += save_figure(fig, outputs["onpolicy"])
    plt.close(fig)

    if "gradient" not in off:  # an off-policy table from before the gradient forms: score form only
        off = off.assign(gradient="score")
    if "deltas" not in off:  # ... and from before the correlated deltas: random only
        off = off.assign(deltas="random")
    for form, stem, title in (
        ("score", "offpolicy", "g = Σ w_i ∇log π(y_i)"),
        ("surrogate", "offpolicy_surrogate", "PPO surrogate: g = Σ ρ_i w_i ∇log π(y_i)"),
    ):
        fig = _plot_offpolicy(plt, off[off["gradient"] == form], settings, title)
        paths += save_figure(fig, outputs[stem])
        plt.close(fig)
    return paths


def _plot_offpolicy(plt, off: pd.DataFrame, settings: list[str], title: str):
    """Relative error of E[g] against the exact gradient vs the off-policy distance, one panel per setting
    (random deltas); where the frame has the advantage estimators (score form), a second row: their
    cosine to the exact gradient under random (dashed) and correlated (solid) deltas."""
    import seaborn as sns

    adv = off[off["estimator"].isin(OFFPOLICY_ADVANTAGES) & (off["distance"] > 0)]
    n_rows = 2 if len(adv) else 1
    fig, axes = plt.subplots(
        n_rows, len(settings), figsize=(4.5 * len(settings), 3.6 * n_rows), squeeze=False
    )
    order = [e for e in (*OFFPOLICY_TRANSFORMS, "exact_is") if e in set(off["estimator"])]
    for i, s in enumerate(settings):
        sub = off[(off["setting"] == s) & (off["distance"] > 0) & (off["deltas"] == "random")]
        raw = sub[sub["estimator"].isin(order)].copy()
        # exact expectations reach ~1e-15 (round-off); draw them at a visible floor instead.
        raw["relative_bias"] = raw["relative_bias"].clip(lower=1e-6)
        ax = axes[0][i]
        sns.lineplot(
            data=raw,
            x="distance",
            y="relative_bias",
            hue="estimator",
            hue_order=order,
            style="estimator",
            markers=True,
            dashes=False,
            ax=ax,
            legend=(i == len(settings) - 1),
        )
        se = raw[raw["estimator"] == "first_order"]
        if (se["mc_se"] > 0).any():
            ax.plot(se["distance"], se["mc_se"], color="grey", linestyle=":", label="MC noise floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("off-policy distance d (logit shift norm)")
        ax.set_ylabel("|E g − ∇max@k| / |∇max@k|  (floor 1e-6)")
        first = off[off["setting"] == s].iloc[0]
        ax.set_title(f"{s} rewards, n={int(first['n'])}, k={int(first['k'])}, random deltas")
        if n_rows == 2:
            ax = axes[1][i]
            a = adv[adv["setting"] == s]
            sns.lineplot(
                data=a,
                x="distance",
                y="cosine",
                hue="estimator",
                hue_order=[e for e in OFFPOLICY_ADVANTAGES if e in set(a["estimator"])],
                style="deltas",
                style_order=[d for d in ("correlated", "random") if d in set(a["deltas"])],
                markers=True,
                ax=ax,
                legend=(i == len(settings) - 1),
            )
            ax.set_xscale("log")
            ax.set_ylim(-1.05, 1.05)
            ax.set_xlabel("off-policy distance d (logit shift norm)")
            ax.set_ylabel("cos∠(E g, ∇max@k), advantages A_i")
            ax.set_title(f"{s} rewards: advantage estimators")
    for row in range(n_rows):
        if axes[row][-1].get_legend() is not None:
            sns.move_legend(axes[row][-1], "upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
