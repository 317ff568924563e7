"""Estimator lab: exact max@k and its gradient, and the bias pattern the lab must show."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from maxk.analysis.lab import (
    OFFPOLICY_ADVANTAGES,
    Setting,
    _ensemble,
    _grad_estimates,
    _update_direction,
    enumerate_max_at_k,
    exact_gradient,
    exact_max_at_k,
    offpolicy_advantage_table,
    run_offpolicy,
    run_onpolicy,
)
from maxk.objectives import compute_advantages

CONT = Setting("continuous", (0.0, 0.25, 0.5, 0.8, 1.0), (1.0, 0.5, 0.0, -0.5, -1.0))
TIES = Setting("ties", (0.0, 0.0, 0.5, 1.0, 1.0), (1.0, 0.5, 0.0, -0.5, -1.0))
#: late training: the top rewards are likely, most groups have no max@k signal (all at the top)
SOLVED = Setting("solved", (0.0, 0.0, 0.5, 1.0, 1.0), (-1.0, -0.5, 0.0, 0.5, 1.0))


@pytest.mark.parametrize("setting", [CONT, TIES])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_closed_form_max_at_k_matches_enumeration(setting, k):
    theta = torch.tensor(setting.logits, dtype=torch.float64)
    pi = torch.softmax(theta, -1).tolist()
    assert float(exact_max_at_k(theta, setting.rewards, k)) == pytest.approx(
        enumerate_max_at_k(pi, setting.rewards, k), abs=1e-12
    )


def test_gradient_matches_finite_differences():
    _, grad = exact_gradient(TIES.logits, TIES.rewards, 3)
    eps = 1e-6
    for j in range(len(TIES.logits)):
        up = list(TIES.logits)
        up[j] += eps
        down = list(TIES.logits)
        down[j] -= eps
        fd = (exact_gradient(up, TIES.rewards, 3)[0] - exact_gradient(down, TIES.rewards, 3)[0]) / (2 * eps)
        assert grad[j] == pytest.approx(fd, abs=1e-7)


def test_multiset_ensemble_is_a_distribution():
    pi = torch.softmax(torch.tensor(CONT.logits, dtype=torch.float64), -1)
    y, prob, exact = _ensemble(pi, 6, groups=10, seed=0, max_multisets=10_000)
    assert exact and y.shape == (210, 6)  # C(5 + 6 - 1, 6)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    y_mc, prob_mc, exact_mc = _ensemble(pi, 6, groups=10, seed=0, max_multisets=100)
    assert not exact_mc and y_mc.shape == (10, 6) and prob_mc.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("setting", [CONT, TIES])
def test_onpolicy_bias_ordering(setting):
    df = run_onpolicy(setting, [8], [2, 4], groups=10, seed=0).set_index(["k", "estimator"])
    for k in (2, 4):
        # the unnormalised max@k transform and LOO-1 are exactly unbiased (exact expectations)
        assert df.loc[(k, "bon_raw"), "relative_bias"] < 1e-9
        assert df.loc[(k, "bon_loo1"), "relative_bias"] < 1e-9
        # BoN-max (mean / second baselines) and GRPO are biased in direction
        for est in ("bon_max_mean", "bon_max_second", "grpo"):
            assert df.loc[(k, est), "direction_bias"] > 0.01, est
        assert df.loc[(k, "bon_mean"), "direction_bias"] == pytest.approx(
            df.loc[(k, "offpolicy_bon"), "direction_bias"]
        )
        for est in ("offpolicy_bon_exact", "offpolicy_bon_onstd", "offpolicy_bon_exact_onstd"):
            assert df.loc[(k, est), "direction_bias"] == pytest.approx(
                df.loc[(k, "bon_mean"), "direction_bias"]
            )
        # the group-mean baseline shrinks the exact gradient by k/n without turning it
        assert df.loc[(k, "bon_mean_centered"), "direction_bias"] < 1e-6
        assert df.loc[(k, "bon_mean_centered"), "relative_bias"] == pytest.approx(k / 8, abs=1e-9)
        assert df.loc[(k, "bon_subset_std"), "direction_bias"] > 1e-3
    assert df["exact_expectation"].all()


def _errors(df, form: str, deltas: str = "random") -> dict:
    sub = df[(df["gradient"] == form) & (df["deltas"] == deltas)]
    return {e: g.set_index("distance")["relative_bias"] for e, g in sub.groupby("estimator")}


def test_offpolicy_first_order_error_grows_quadratically():
    distances = [0.0, 0.05, 0.1, 0.2, 0.4]
    df = run_offpolicy(CONT, 6, 3, distances, groups=10, seed=0)
    err = _errors(df, "score")
    assert (err["exact_is"] < 1e-9).all()
    assert (err["exact_own"] < 1e-9).all()  # the closed form is the enumerated exact estimator
    first, zeroth = err["first_order"], err["zeroth_order"]
    assert first[0.0] < 1e-9 and zeroth[0.0] < 1e-9
    assert np.all(np.diff(first.to_numpy()) > 0)  # grows with the distance
    assert all(first[d] < zeroth[d] for d in distances[1:])
    assert 3.0 < first[0.1] / first[0.05] < 5.0  # O(d^2)
    assert 1.5 < zeroth[0.1] / zeroth[0.05] < 2.5  # O(d)


@pytest.mark.parametrize("setting", [CONT, TIES])
def test_surrogate_gradient_counts_the_own_ratio_twice_unless_left_out(setting):
    """Inside the PPO surrogate (rho_i * A_i), only the own-ratio-free exact weights are unbiased;
    the paper's first-order weights and the exact weights with the own ratio are biased at first order."""
    distances = [0.0, 0.05, 0.1, 0.2]
    df = run_offpolicy(setting, 6, 3, distances, groups=10, seed=0)
    assert df["exact_expectation"].all()
    err = _errors(df, "surrogate")
    assert (err["exact_no_own"] < 1e-9).all()
    for est in ("exact_own", "first_order", "zeroth_order"):
        assert err[est][0.0] < 1e-9
        assert 1.5 < err[est][0.1] / err[est][0.05] < 2.5, est  # O(d)
        assert err[est][0.05] > 1e-4, est
    score = _errors(df, "score")
    assert (score["exact_no_own"][0.05:] > 1e-4).all()  # without the own ratio, the score form is biased


@pytest.mark.parametrize("setting", [CONT, TIES])
def test_correlated_deltas_follow_the_previous_update(setting):
    """The correlated shift is the (expected) iteration-1 update of bon_mean: along grad max@k up to
    bon_mean's direction bias, and its deltas correlate with the advantages of that update (random: not)."""
    pi_old = torch.softmax(torch.tensor(setting.logits, dtype=torch.float64), -1)
    y, prob, _ = _ensemble(pi_old, 8, groups=10, seed=0, max_multisets=10_000)
    rewards = torch.tensor(setting.rewards, dtype=torch.float64)[y]
    u = _update_direction("correlated", setting, y, prob, rewards, 4, pi_old, 0)
    g1 = prob @ _grad_estimates(y, compute_advantages("bon_mean", rewards, k=4), pi_old).numpy()
    np.testing.assert_allclose(u, g1 / np.linalg.norm(g1), atol=1e-12)
    _, grad = exact_gradient(setting.logits, setting.rewards, 4)
    assert u @ grad / np.linalg.norm(grad) > 0.95
    random = _update_direction("random", setting, y, prob, rewards, 4, pi_old, 0)
    assert abs(np.linalg.norm(random) - 1) < 1e-12 and abs(random.sum()) < 1e-12
    assert abs(random @ u) < 0.9
    # the samples the last update favoured (bon_mean's advantages) are the ones whose ratio rose
    advantages = compute_advantages("bon_mean", rewards, k=4).numpy().ravel()
    for direction, low, high in ((u, 0.5, 1.0), (random, -0.3, 0.3)):
        theta_1 = torch.tensor(setting.logits, dtype=torch.float64) + 0.1 * torch.tensor(direction)
        deltas = (torch.softmax(theta_1, -1)[y] / pi_old[y] - 1).numpy().ravel()
        w = np.repeat(prob, 8)
        cov = np.cov(np.stack([advantages, deltas]), aweights=w)
        assert low < cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]) < high
    with pytest.raises(ValueError, match="delta kind"):
        _update_direction("sideways", setting, y, prob, rewards, 4, pi_old, 0)


def test_both_delta_kinds_and_the_random_rows_unchanged():
    df = run_offpolicy(CONT, 6, 3, [0.0, 0.1], groups=10, seed=0)
    assert set(df["deltas"]) == {"random", "correlated"}
    rnd = run_offpolicy(CONT, 6, 3, [0.0, 0.1], groups=10, seed=0, delta_kinds=("random",))
    cols = ["estimator", "gradient", "distance", "relative_bias"]
    pd.testing.assert_frame_equal(df[df["deltas"] == "random"][cols].reset_index(drop=True), rnd[cols])
    at = df.set_index(["deltas", "distance", "gradient", "estimator"])["relative_bias"]
    assert at[("random", 0.0, "score", "first_order")] == at[("correlated", 0.0, "score", "first_order")]
    assert (
        abs(at[("random", 0.1, "score", "first_order")] - at[("correlated", 0.1, "score", "first_order")])
        > 1e-6
    )
    # the transforms' error pattern holds for correlated deltas too: exact ~0, first order below zeroth
    err = _errors(df, "score", "correlated")
    assert (err["exact_own"] < 1e-9).all() and (err["exact_is"] < 1e-9).all()
    assert err["first_order"][0.1] < err["zeroth_order"][0.1]
    assert (_errors(df, "surrogate", "correlated")["exact_no_own"] < 1e-9).all()


@pytest.mark.parametrize("setting", [TIES, SOLVED])
def test_onstd_variants_put_nothing_on_flat_groups(setting):
    """Groups whose top n-k+1 rewards tie: the paper's z-scored off-policy versions give them advantage
    mass and gradient under either kind of deltas; bon_mean and the _onstd variants give them none."""
    distances = [0.0, 0.05, 0.2]
    df = run_offpolicy(setting, 8, 4, distances, groups=10, seed=0)
    assert df["exact_expectation"].all()
    tab = offpolicy_advantage_table(df)
    assert list(tab.index.get_level_values("estimator")[:5]) == list(OFFPOLICY_ADVANTAGES)
    assert len(tab) == 2 * len(distances) * len(OFFPOLICY_ADVANTAGES)
    for kind in ("random", "correlated"):
        at0 = tab.loc[(setting.name, kind, 0.0)]
        np.testing.assert_allclose(at0["cosine"], at0.loc["bon_mean", "cosine"], atol=1e-9)  # on-policy
        for d in distances[1:]:
            at = tab.loc[(setting.name, kind, d)]
            for est in ("offpolicy_bon_onstd", "offpolicy_bon_exact_onstd"):
                assert at.loc[est, "flat_mass"] == 0 and at.loc[est, "flat_grad"] == 0, (kind, d, est)
            assert at.loc["bon_mean", "flat_mass"] < 1e-9  # its 0 / (0 + eps) carries round-off
            for est in ("offpolicy_bon", "offpolicy_bon_exact"):
                assert at.loc[est, "flat_mass"] > 0.005, (kind, d, est)
                assert at.loc[est, "flat_grad"] > 1e-3, (kind, d, est)
            assert at.loc["offpolicy_bon_onstd", "cosine"] != pytest.approx(at.loc["bon_mean", "cosine"])


def test_paper_versions_push_flat_groups_along_the_previous_update():
    """Late training (most groups flat), correlated deltas: the paper's first-order version pushes the
    flat groups further the way the last update went (zscore(delta)), the exact one with the own ratio
    left out pushes them back; most of the advantage mass sits there. The _onstd variants add nothing."""
    df = run_offpolicy(SOLVED, 8, 4, [0.05, 0.2], groups=10, seed=0, delta_kinds=("correlated",))
    tab = offpolicy_advantage_table(df).loc[("solved", "correlated")]
    for d in (0.05, 0.2):
        at = tab.loc[d]
        assert at.loc["offpolicy_bon", "flat_along_shift"] > 0.9
        assert at.loc["offpolicy_bon_exact", "flat_along_shift"] < -0.9
        assert at.loc["offpolicy_bon", "flat_mass"] > 0.5 and at.loc["offpolicy_bon_exact", "flat_mass"] > 0.5
        assert np.isnan(at.loc["offpolicy_bon_onstd", "flat_along_shift"])
        # the first-order _onstd variant keeps closer to grad max@k than the paper's version here
        assert at.loc["offpolicy_bon_onstd", "cosine"] > at.loc["offpolicy_bon", "cosine"]
