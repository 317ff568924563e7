"""The ``_onstd`` off-policy estimators (issue 38): the off-policy max@k transform centred by its group
mean, scaled by the spread of the ON-POLICY transform, 0 in a group without max@k signal. Checked
against literal enumeration over all k-subsets (``bruteforce``), plus properties (hypothesis)."""

from __future__ import annotations

import dataclasses
import math

import bruteforce as bf
import numpy as np
import pytest
import torch
from bruteforce import reward_cases
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from maxk.objectives import (
    ESTIMATORS,
    GRPO_STD_EPS,
    bon_rewards,
    compute_advantages,
    estimator,
    maxk_flat,
    offpolicy_bon_rewards,
    offpolicy_bon_rewards_exact,
    zscore,
)

ONSTD = {"offpolicy_bon_onstd": "offpolicy_bon", "offpolicy_bon_exact_onstd": "offpolicy_bon_exact"}
NK = [(n, k) for n in range(2, 9) for k in range(1, n + 1)]


def t64(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def cases(n: int) -> list[list[float]]:
    return [r for _, r in reward_cases(n)] + [r for _, r in reward_cases(n, seed=7)]


def brute_flat(r: list[float], k: int) -> bool:
    """Every k-subset has the same maximum (enumerated)."""
    return len({max(r[j] for j in s) for s in bf.subsets(len(r), k)}) == 1


def brute_onstd(r: list[float], c: list[float], k: int) -> list[float]:
    """(c_i - mean c) / (Bessel std of the enumerated on-policy transform + 1e-4); 0 if flat. By hand."""
    n = len(r)
    if brute_flat(r, k):
        return [0.0] * n
    t = bf.bon_rewards(r, k)
    t_mean = sum(t) / n
    std = math.sqrt(sum((v - t_mean) ** 2 for v in t) / (n - 1))
    c_mean = sum(c) / n
    return [(v - c_mean) / (std + 1e-4) for v in c]


def run(method: str, rows, k: int, deltas=None, **kw) -> np.ndarray:
    d = None if deltas is None else t64(deltas)
    return compute_advantages(method, t64(rows), k=k, deltas=d, **kw).numpy()


def test_registered_like_their_parents() -> None:
    for name, parent in ONSTD.items():
        spec, base = estimator(name), estimator(parent)
        for field in dataclasses.fields(spec):
            if field.name not in ("name", "fn"):
                assert getattr(spec, field.name) == getattr(base, field.name), (name, field.name)
        assert (spec.min_k, spec.uses_deltas) == (1, True)
    assert set(ONSTD) <= set(ESTIMATORS)


@pytest.mark.parametrize(("n", "k"), NK)
def test_first_order_onstd_matches_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    deltas = np.random.default_rng(n * 10 + k).normal(0, 0.3, size=(len(rows), n)).tolist()
    want = [brute_onstd(r, bf.offpolicy_first_order(r, d, k), k) for r, d in zip(rows, deltas, strict=True)]
    np.testing.assert_allclose(run("offpolicy_bon_onstd", rows, k, deltas), want, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("own_ratio", [False, True])
@pytest.mark.parametrize(("n", "k"), NK)
def test_exact_onstd_matches_enumeration(n: int, k: int, own_ratio: bool) -> None:
    rows = cases(n)
    deltas = np.random.default_rng(n * 10 + k + 1).uniform(-0.5, 0.5, size=(len(rows), n)).tolist()
    exact = bf.offpolicy_exact if own_ratio else bf.offpolicy_exact_no_own
    want = [brute_onstd(r, exact(r, d, k), k) for r, d in zip(rows, deltas, strict=True)]
    got = run("offpolicy_bon_exact_onstd", rows, k, deltas, own_ratio=own_ratio)
    np.testing.assert_allclose(got, want, atol=1e-9, rtol=1e-9)


def test_own_ratio_and_clamp_are_passed_through() -> None:
    r = [[0.1, 0.9, 0.4, 0.7, 0.9, 0.0]]
    d = [[0.5, -0.5, 0.1, 0.0, 0.3, -0.1]]
    clamped = [[0.2, -0.2, 0.1, 0.0, 0.2, -0.1]]
    for name in ONSTD:
        got = run(name, r, 3, d, delta_clamp=0.2)
        np.testing.assert_allclose(got, run(name, r, 3, clamped), rtol=0, atol=1e-12)
        assert not np.allclose(got, run(name, r, 3, d))
    no_own = run("offpolicy_bon_exact_onstd", r, 3, d)
    np.testing.assert_allclose(no_own, run("offpolicy_bon_exact_onstd", r, 3, d, own_ratio=False), atol=0)
    own = run("offpolicy_bon_exact_onstd", r, 3, d, own_ratio=True)
    np.testing.assert_allclose(own, [brute_onstd(r[0], bf.offpolicy_exact(r[0], d[0], 3), 3)], atol=1e-9)
    assert np.abs(own - no_own).max() > 0.1


@pytest.mark.parametrize(("n", "k"), NK)
def test_zero_deltas_equal_bon_mean(n: int, k: int) -> None:
    """Equal up to round-off in groups with signal (the off-policy transform at delta 0 sums in another
    order); exactly 0 in flat groups, where bon_mean's 0 / (0 + eps) carries the round-off (~1e-12)."""
    rows = cases(n)
    bon_mean = run("bon_mean", rows, k)
    flat = np.array([brute_flat(r, k) for r in rows])
    assert flat.any() and (k == n or not flat.all())  # both kinds (k = n: every group is flat)
    zero = np.zeros((len(rows), n)).tolist()
    got = [run(name, rows, k) for name in ONSTD] + [run(name, rows, k, zero) for name in ONSTD]
    got.append(run("offpolicy_bon_exact_onstd", rows, k, zero, own_ratio=True))
    for g in got:
        np.testing.assert_allclose(g[~flat], bon_mean[~flat], rtol=0, atol=1e-12)
        assert np.all(g[flat] == 0.0)
    np.testing.assert_allclose(bon_mean[flat], 0.0, atol=1e-9)


def test_the_issue_example_flat_group() -> None:
    """All samples fully correct: the paper's off-policy BoN returns zscore(delta) (issue 38's numbers);
    the _onstd variants return exactly 0, like bon_mean."""
    r = [[1.0] * 8]
    d = [[0.2, -0.2, 0.05, -0.1, 0.15, -0.2, 0.2, 0.0]]
    paper = run("offpolicy_bon", r, 4, d)
    np.testing.assert_allclose(paper, [[1.12, -1.27, 0.22, -0.67, 0.82, -1.27, 1.12, -0.07]], atol=0.01)
    np.testing.assert_allclose(paper, zscore(t64(d)).numpy(), rtol=5e-3)  # up to eps vs a small std
    for name in ONSTD:
        assert np.all(run(name, r, 4, d) == 0.0), name
    assert np.all(run("offpolicy_bon_exact_onstd", r, 4, d, own_ratio=True) == 0.0)
    np.testing.assert_allclose(run("bon_mean", r, 4), 0.0, atol=1e-9)


@st.composite
def flat_groups(draw):
    """A group whose top n-k+1 rewards tie (every k-subset has the same maximum), shuffled, with
    arbitrary deltas (ratios in (0.1, 3))."""
    n = draw(st.integers(1, 10))
    k = draw(st.integers(1, n))
    top = draw(st.sampled_from([0.0, 0.3, 1.0]))
    low = draw(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3]), min_size=k - 1, max_size=k - 1))
    r = [min(x, top) for x in low] + [top] * (n - k + 1)
    perm = draw(st.permutations(range(n)))
    deltas = draw(st.lists(st.floats(-0.9, 2.0), min_size=n, max_size=n))
    return [r[p] for p in perm], deltas, k


@settings(max_examples=200, deadline=None)
@given(flat_groups(), st.booleans())
def test_flat_groups_get_exactly_zero_whatever_the_deltas(case, own_ratio: bool) -> None:
    r, d, k = case
    assert brute_flat(r, k)
    assert np.all(run("offpolicy_bon_onstd", [r], k, [d]) == 0.0)
    assert np.all(run("offpolicy_bon_exact_onstd", [r], k, [d], own_ratio=own_ratio) == 0.0)
    # ... where the paper's z-scored transform is unit-size noise whenever its delta term varies
    first = offpolicy_bon_rewards(t64([r]), t64([d]), k)[0].numpy()
    if len(r) >= 2 and first.std(ddof=1) > 100 * GRPO_STD_EPS:
        paper = run("offpolicy_bon", [r], k, [d])[0]
        assert np.std(paper, ddof=1) > 0.99


group_st = st.integers(2, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0]), min_size=n, max_size=n),
        st.integers(1, n),
        st.lists(st.floats(-0.3, 0.3), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(group_st, st.floats(0.01, 1.0))
def test_first_order_correction_is_linear_in_delta_and_not_rescaled(case, scale: float) -> None:
    """A(delta) = bon_mean + centred(r'(delta) - r~) / (std(r~) + eps): exactly affine in delta, so the
    correction shrinks with the deltas (the z-scored paper version keeps its size in a flat group)."""
    r, k, d = case
    assume(not brute_flat(r, k))
    base = run("bon_mean", [r], k)[0]
    full = run("offpolicy_bon_onstd", [r], k, [d])[0]
    part = run("offpolicy_bon_onstd", [r], k, [[scale * x for x in d]])[0]
    np.testing.assert_allclose(part - base, scale * (full - base), atol=1e-9)
    t = bon_rewards(t64([r]), k)[0].numpy()
    corr = offpolicy_bon_rewards(t64([r]), t64([d]), k)[0].numpy() - t
    want = (corr - corr.mean()) / (t.std(ddof=1) + GRPO_STD_EPS)
    np.testing.assert_allclose(full - base, want, atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(group_st, st.integers(0, 10**6))
def test_moves_with_its_own_delta_like_the_paper_transform(case, seed: int) -> None:
    """dA_i/d delta_i = (1 - k/n) r~_i / (std(r~) + eps) > 0 (first order, and the exact transform
    with its own ratio at delta = 0); without the own ratio, c_i does not depend on delta_i and
    dA_i/d delta_i = -(k-1)/n r~_i / (std(r~) + eps). Would fail for an estimator ignoring the deltas."""
    r, k, d = case
    assume(not brute_flat(r, k))
    n = len(r)
    i = int(np.random.default_rng(seed).integers(n))
    t = bon_rewards(t64([r]), k)[0].numpy()
    s = t.std(ddof=1) + GRPO_STD_EPS
    h = 1e-5
    bump = [x + (h if j == i else 0.0) for j, x in enumerate(d)]
    first = (run("offpolicy_bon_onstd", [r], k, [bump]) - run("offpolicy_bon_onstd", [r], k, [d]))[0, i] / h
    assert first == pytest.approx((1 - k / n) * t[i] / s, rel=1e-5, abs=1e-6)
    zero, e_i = [0.0] * n, [h if j == i else 0.0 for j in range(n)]
    for own, want in ((True, (1 - k / n) * t[i] / s), (False, -(k - 1) / n * t[i] / s)):
        up = run("offpolicy_bon_exact_onstd", [r], k, [e_i], own_ratio=own)
        down = run("offpolicy_bon_exact_onstd", [r], k, [[-x for x in e_i]], own_ratio=own)
        got = (up - down)[0, i] / (2 * h)
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), own
        at_zero = run("offpolicy_bon_exact_onstd", [r], k, [zero], own_ratio=own)
        np.testing.assert_allclose(at_zero, run("bon_mean", [r], k), atol=1e-12)


def test_deltas_change_a_group_with_signal() -> None:
    r = [[0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.5, 0.2]]
    d = [[0.1, -0.1, 0.05, 0.1, -0.1, 0.0, 0.02, -0.05]]
    base = run("bon_mean", r, 4)
    for name in ONSTD:
        assert np.abs(run(name, r, 4, d) - base).max() > 0.05, name


def test_exact_onstd_is_the_exact_transform_not_the_first_order_one() -> None:
    r = [[0.0, 0.25, 0.5, 1.0, 0.9, 0.75]]
    d = [[0.4, -0.4, 0.3, 0.2, -0.3, 0.1]]
    c = offpolicy_bon_rewards_exact(t64(r), t64(d), 3, own_ratio=True)[0].numpy()
    got = run("offpolicy_bon_exact_onstd", r, 3, d, own_ratio=True)[0]
    np.testing.assert_allclose(got, brute_onstd(r[0], c.tolist(), 3), atol=1e-9)
    assert np.abs(got - run("offpolicy_bon_onstd", r, 3, d)[0]).max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_groups_finite_and_flat_rows_zero(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(3)
    r = torch.rand(4, 256, generator=gen, dtype=torch.float64).to(dtype)
    r[1] = 1.0  # flat
    d = ((torch.rand(4, 256, generator=gen, dtype=torch.float64) - 0.5) * 0.4).to(dtype)
    for name in ONSTD:
        for k in (1, 16, 256):
            out = compute_advantages(name, r, k=k, deltas=d)
            assert out.dtype == dtype and torch.all(torch.isfinite(out)), (name, k)
            assert torch.all(out[1] == 0), (name, k)


def test_zscore_spread_of_checks_shape() -> None:
    x = torch.rand(2, 4, dtype=torch.float64)
    torch.testing.assert_close(zscore(x, spread_of=x), zscore(x), rtol=0, atol=0)
    with pytest.raises(ValueError, match="spread_of"):
        zscore(x, spread_of=torch.rand(2, 3, dtype=torch.float64))


@pytest.mark.parametrize("n,k", NK)
def test_maxk_flat_is_enumerated_flatness_and_a_constant_transform(n: int, k: int) -> None:
    """``maxk_flat`` (the prompt filter's test of no max@k signal) against every k-subset's maximum, and
    against the transform it stands for: ``bon_rewards`` is constant exactly where it says so."""
    rows = cases(n)
    flat = maxk_flat(t64(rows), k).numpy()
    assert flat.tolist() == [brute_flat(r, k) for r in rows]
    transformed = bon_rewards(t64(rows), k).numpy()
    assert np.array_equal(np.ptp(transformed, axis=-1) < 1e-12, flat)
    assert k < n or flat.all()  # k = n: one subset, always flat


@settings(max_examples=200, deadline=None)
@given(flat_groups())
def test_maxk_flat_finds_every_flat_group_in_any_order(case) -> None:
    r, _, k = case
    assert bool(maxk_flat(t64([r]), k)[0])
    if len(set(r)) > 1 and k > 1:  # lowering a top reward below the rest gives the group a signal
        i = int(np.argmax(r))
        other = [x if j != i else min(r) - 1.0 for j, x in enumerate(r)]
        assert bool(maxk_flat(t64([other]), k)[0]) == brute_flat(other, k)
