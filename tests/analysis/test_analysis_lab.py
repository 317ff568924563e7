"""Estimator lab: exact max@k and its gradient, and the bias pattern the lab must show."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from maxk.analysis.lab import (
    Setting,
    _ensemble,
    enumerate_max_at_k,
    exact_gradient,
    exact_max_at_k,
    run_offpolicy,
    run_onpolicy,
)

CONT = Setting("continuous", (0.0, 0.25, 0.5, 0.8, 1.0), (1.0, 0.5, 0.0, -0.5, -1.0))
TIES = Setting("ties", (0.0, 0.0, 0.5, 1.0, 1.0), (1.0, 0.5, 0.0, -0.5, -1.0))


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
        assert df.loc[(k, "offpolicy_bon_exact"), "direction_bias"] == pytest.approx(
            df.loc[(k, "bon_mean"), "direction_bias"]
        )
        # the group-mean baseline shrinks the exact gradient by k/n without turning it
        assert df.loc[(k, "bon_mean_centered"), "direction_bias"] < 1e-6
        assert df.loc[(k, "bon_mean_centered"), "relative_bias"] == pytest.approx(k / 8, abs=1e-9)
        assert df.loc[(k, "bon_subset_std"), "direction_bias"] > 1e-3
    assert df["exact_expectation"].all()


def _errors(df, form: str) -> dict:
    sub = df[df["gradient"] == form]
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
