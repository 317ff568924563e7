"""maxk.objectives against literal enumeration of all k-subsets, plus properties (hypothesis)."""

from __future__ import annotations

import bruteforce as bf
import numpy as np
import pytest
import torch
from bruteforce import reward_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from maxk.metrics import max_at_k
from maxk.objectives import (
    ESTIMATORS,
    bon_rewards,
    compute_advantages,
    needs_k,
    offpolicy_bon_rewards,
    offpolicy_bon_rewards_exact,
    uses_deltas,
    zscore,
)

NK = [(n, k) for n in range(1, 9) for k in range(1, n + 1)]
TOL = 1e-9


def t64(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def cases(n: int) -> list[list[float]]:
    return [r for _, r in reward_cases(n)] + [r for _, r in reward_cases(n, seed=5)]


def assert_close(got: torch.Tensor, want: list[list[float]], tol: float = TOL) -> None:
    np.testing.assert_allclose(got.numpy(), np.array(want), atol=tol, rtol=0)


PAPER = {"grpo", "bon_max_mean", "bon_max_second", "bon_loo1", "bon_mean", "offpolicy_bon"}
BEYOND = {
    "offpolicy_bon_exact",
    "bon_subset_std",
    "bon_mean_centered",
    "offpolicy_bon_onstd",
    "offpolicy_bon_exact_onstd",
}
OFF_POLICY = {"offpolicy_bon", "offpolicy_bon_exact", "offpolicy_bon_onstd", "offpolicy_bon_exact_onstd"}


def test_registry_has_the_paper_six_and_the_new_methods() -> None:
    assert set(ESTIMATORS) == PAPER | BEYOND
    assert {m for m in ESTIMATORS if needs_k(m)} == {"bon_loo1", "bon_mean"} | OFF_POLICY | BEYOND
    assert {m for m in ESTIMATORS if uses_deltas(m)} == OFF_POLICY


def deltas_for(n: int, k: int, rows: int, scale: float = 0.5) -> list[list[float]]:
    """Deltas uniform in [-scale, scale]: far beyond first order at 0.5."""
    return np.random.default_rng(n * 100 + k).uniform(-scale, scale, size=(rows, n)).tolist()


@pytest.mark.parametrize("own_ratio", [True, False])
@pytest.mark.parametrize(("n", "k"), NK)
def test_exact_offpolicy_transform_matches_enumeration(n: int, k: int, own_ratio: bool) -> None:
    rows = cases(n)
    deltas = deltas_for(n, k, len(rows))
    brute = bf.offpolicy_exact if own_ratio else bf.offpolicy_exact_no_own
    got = offpolicy_bon_rewards_exact(t64(rows), t64(deltas), k, own_ratio=own_ratio)
    assert_close(got, [brute(r, d, k) for r, d in zip(rows, deltas, strict=True)])


@pytest.mark.parametrize(("n", "k"), [(n, k) for n, k in NK if n >= 2])
def test_new_on_policy_methods_match_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    got = compute_advantages("bon_subset_std", t64(rows), k=k)
    assert_close(got, [bf.subset_std_advantage(r, k) for r in rows], tol=1e-8)
    centered = [[v - sum(t) / n for v in t] for t in (bf.bon_rewards(r, k) for r in rows)]
    assert_close(compute_advantages("bon_mean_centered", t64(rows), k=k), centered)
    # the exact off-policy estimator on-policy (no deltas) is bon_mean, for either own-ratio choice
    for own in (True, False):
        on = compute_advantages("offpolicy_bon_exact", t64(rows), k=k, own_ratio=own)
        torch.testing.assert_close(on, compute_advantages("bon_mean", t64(rows), k=k), rtol=0, atol=1e-9)


@pytest.mark.parametrize(("n", "k"), [(n, k) for n in range(1, 11) for k in range(1, n + 1)])
def test_bon_subset_std_is_chen_et_al_pass_at_k_training_on_binary_rewards(n: int, k: int) -> None:
    rng = np.random.default_rng(7 * n + k)
    rows = [rng.integers(0, 2, size=n).tolist() for _ in range(6)] + [[0] * n, [1] * n]
    got = compute_advantages("bon_subset_std", t64([[float(c) for c in r] for r in rows]), k=k)
    assert_close(got, [bf.pass_at_k_training(r, k) for r in rows], tol=1e-9)


@pytest.mark.parametrize("own_ratio", [True, False])
def test_exact_offpolicy_with_zero_deltas_is_bon_rewards(own_ratio: bool) -> None:
    r = torch.rand(4, 64, dtype=torch.float64)
    zero = torch.zeros_like(r)
    for k in (1, 2, 17, 64):
        got = offpolicy_bon_rewards_exact(r, zero, k, own_ratio=own_ratio)
        torch.testing.assert_close(got, bon_rewards(r, k), rtol=1e-12, atol=1e-15)


def test_exact_offpolicy_at_scale_float32_matches_float64() -> None:
    """n = 256, k = 128 over 512 groups (the issue's size; seconds, no enumeration), and the limits."""
    gen = torch.Generator().manual_seed(3)
    r = torch.rand(512, 256, generator=gen, dtype=torch.float64)
    d = (torch.rand(512, 256, generator=gen, dtype=torch.float64) - 0.5) * 0.4
    for own in (True, False):
        full = offpolicy_bon_rewards_exact(r, d, 128, own_ratio=own)
        single = offpolicy_bon_rewards_exact(r.float(), d.float(), 128, own_ratio=own)
        assert single.dtype == torch.float32 and torch.all(torch.isfinite(single))
        torch.testing.assert_close(single.double(), full, rtol=1e-3, atol=1e-6 * float(full.abs().max()))
    big_r = torch.rand(2, 1024, generator=gen, dtype=torch.float64)
    big_d = (torch.rand(2, 1024, generator=gen, dtype=torch.float64) - 0.5) * 0.4
    for k in (1, 2, 512, 1023, 1024):
        out = offpolicy_bon_rewards_exact(big_r.float(), big_d.float(), k, own_ratio=False)
        assert torch.all(torch.isfinite(out)), k


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_exact_minus_first_order_is_second_order(k: int) -> None:
    """The first-order transform is the first-order expansion of the exact one (own ratio kept)."""
    n = 6
    r = t64([[0.1, 0.5, 0.5, 0.9, 0.3, 1.0]])
    u = t64([np.random.default_rng(k).uniform(-1, 1, n).tolist()])

    def gap(scale: float) -> float:
        exact = offpolicy_bon_rewards_exact(r, scale * u, k, own_ratio=True)
        return float((exact - offpolicy_bon_rewards(r, scale * u, k)).abs().max())

    g1, g2 = gap(0.02), gap(0.01)
    if k == 1:
        assert g1 < 1e-14
    else:
        assert 3.5 < g1 / g2 < 4.5, (g1, g2)


def test_own_ratio_is_the_only_difference() -> None:
    """own_ratio=True is own_ratio=False times rho_i, element by element."""
    gen = torch.Generator().manual_seed(1)
    r = torch.rand(3, 9, generator=gen, dtype=torch.float64)
    d = (torch.rand(3, 9, generator=gen, dtype=torch.float64) - 0.5) * 0.8
    own = offpolicy_bon_rewards_exact(r, d, 4, own_ratio=True)
    other = offpolicy_bon_rewards_exact(r, d, 4, own_ratio=False)
    torch.testing.assert_close(own, other * (1 + d), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("n", "k"), NK)
def test_bon_rewards_match_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    assert_close(bon_rewards(t64(rows), k), [bf.bon_rewards(r, k) for r in rows])


@pytest.mark.parametrize(("n", "k"), NK)
def test_offpolicy_transform_matches_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    rng = np.random.default_rng(n * 10 + k)
    deltas = rng.normal(0, 0.3, size=(len(rows), n)).tolist()
    got = offpolicy_bon_rewards(t64(rows), t64(deltas), k)
    assert_close(got, [bf.offpolicy_first_order(r, d, k) for r, d in zip(rows, deltas, strict=True)])


@pytest.mark.parametrize(("n", "k"), [(n, k) for n, k in NK if k >= 2])
def test_loo1_matches_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    assert_close(compute_advantages("bon_loo1", t64(rows), k=k), [bf.loo1(r, k) for r in rows])


@pytest.mark.parametrize("n", range(2, 9))
def test_bon_max_baselines_match_definition(n: int) -> None:
    rows = cases(n)
    assert_close(compute_advantages("bon_max_mean", t64(rows)), [bf.bon_max_mean(r) for r in rows])
    assert_close(compute_advantages("bon_max_second", t64(rows)), [bf.bon_max_second(r) for r in rows])


def test_bon_max_second_ties_and_no_second_value() -> None:
    got = compute_advantages("bon_max_second", t64([[0.2, 1.0, 1.0, 0.5], [0.3, 0.3, 0.3, 0.3]]))
    assert_close(got, [[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0]])
    got = compute_advantages("bon_max_mean", t64([[0.0, 1.0, 1.0, 0.0]]))
    assert_close(got, [[0.0, 0.5, 0.5, 0.0]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=16), st.floats(0.0, 1.0))
def test_bon_max_mean_is_the_positive_half_of_the_centred_reward(r: list[float], partial: float) -> None:
    """On 0/1 rewards BoN-max mean is ``max(r_i - mean(r), 0)``: the mean-centred (Dr. GRPO) advantage
    with its negative half cut off, so it never pushes a failure down. On graded rewards it is at most
    that (only the top value gets its margin); never negative in any group (docs/experiments.md reads
    what this does to max@n)."""
    rows = t64([r])
    got = compute_advantages("bon_max_mean", rows)[0].numpy()
    centred = np.array(r) - np.mean(r)
    np.testing.assert_allclose(got, np.maximum(centred, 0.0), atol=1e-12, rtol=0)
    graded = t64([[*r[:-1], partial]])
    got = compute_advantages("bon_max_mean", graded)[0].numpy()
    centred = graded[0].numpy() - graded[0].numpy().mean()
    assert (got >= 0).all()
    assert (got <= np.maximum(centred, 0.0) + 1e-12).all()


@pytest.mark.parametrize(("n", "k"), [(n, k) for n, k in NK if n >= 2])
def test_zscored_methods_match_enumeration(n: int, k: int) -> None:
    rows = cases(n)
    assert_close(compute_advantages("grpo", t64(rows)), [bf.zscore(r) for r in rows])
    bon_z = [bf.zscore(bf.bon_rewards(r, k)) for r in rows]
    assert_close(compute_advantages("bon_mean", t64(rows), k=k), bon_z, tol=1e-7)
    # off-policy with zero deltas is bon_mean exactly
    zero = compute_advantages(
        "offpolicy_bon", t64(rows), k=k, deltas=torch.zeros(len(rows), n, dtype=torch.float64)
    )
    torch.testing.assert_close(zero, compute_advantages("bon_mean", t64(rows), k=k), rtol=0, atol=1e-12)


def test_offpolicy_clamps_deltas() -> None:
    r = t64([[0.1, 0.9, 0.4, 0.7]])
    d = t64([[5.0, -5.0, 0.1, 0.0]])
    clamped = t64([[0.2, -0.2, 0.1, 0.0]])
    got = compute_advantages("offpolicy_bon", r, k=2, deltas=d, delta_clamp=0.2)
    want = zscore(offpolicy_bon_rewards(r, clamped, 2))
    torch.testing.assert_close(got, want)
    assert not torch.allclose(got, compute_advantages("offpolicy_bon", r, k=2, deltas=d))


@pytest.mark.parametrize("method", sorted(ESTIMATORS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_original_order_dtype_and_batching(method: str, dtype: torch.dtype) -> None:
    """Permuting completions permutes advantages; groups are independent; dtype is kept."""
    gen = torch.Generator().manual_seed(0)
    rewards = (torch.randint(0, 5, (6, 8), generator=gen) / 4).to(dtype)
    kw: dict[str, object] = {"k": 3} if needs_k(method) else {}
    if uses_deltas(method):
        kw["deltas"] = (torch.randn(6, 8, generator=gen) * 0.1).to(dtype)
    out = compute_advantages(method, rewards, **kw)
    assert out.dtype == dtype and out.shape == rewards.shape and torch.all(torch.isfinite(out))
    perm = torch.randperm(8, generator=gen)
    kw_p = dict(kw)
    if "deltas" in kw:
        kw_p["deltas"] = kw["deltas"][:, perm]  # type: ignore[index]
    permuted = compute_advantages(method, rewards[:, perm], **kw_p)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(permuted, out[:, perm], rtol=0, atol=tol)
    kw_one = dict(kw)
    if "deltas" in kw:
        kw_one["deltas"] = kw["deltas"][2:3]  # type: ignore[index]
    one = compute_advantages(method, rewards[2:3], **kw_one)
    torch.testing.assert_close(one, out[2:3], rtol=0, atol=tol)


def test_large_groups_are_finite() -> None:
    r = torch.rand(3, 1024, dtype=torch.float64)
    for k in (1, 2, 64, 512, 1024):
        methods = ("bon_mean", "offpolicy_bon", "bon_subset_std", "bon_mean_centered")
        for method in methods + (("bon_loo1",) if k >= 2 else ()):
            assert torch.all(torch.isfinite(compute_advantages(method, r, k=k))), (method, k)
        sums = bon_rewards(r, k).sum(dim=1).numpy()
        want = np.array([k * max_at_k(row, k) for row in r.numpy()])
        np.testing.assert_allclose(sums, want, rtol=1e-11)


def test_errors_are_clear() -> None:
    r = torch.rand(2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="unknown advantage method 'grpoo'"):
        compute_advantages("grpoo", r)
    with pytest.raises(ValueError, match="needs k"):
        compute_advantages("bon_mean", r)
    with pytest.raises(ValueError, match="k must be >= 2"):
        compute_advantages("bon_loo1", r, k=1)
    with pytest.raises(ValueError, match="k must be <= n"):
        compute_advantages("bon_mean", r, k=5)
    with pytest.raises(ValueError, match="shape"):
        bon_rewards(torch.rand(4, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="deltas must be"):
        offpolicy_bon_rewards(r, torch.zeros(2, 3), 2)
    with pytest.raises(ValueError, match="only used by the off-policy methods"):
        compute_advantages("bon_mean", r, k=2, deltas=torch.zeros_like(r))
    with pytest.raises(ValueError, match="> -1"):
        offpolicy_bon_rewards_exact(r, torch.full_like(r, -1.0), 2)
    with pytest.raises(TypeError, match="floating point"):
        bon_rewards(torch.ones(2, 4, dtype=torch.int64), 2)


group_st = st.integers(1, 10).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0]), min_size=n, max_size=n),
        st.integers(1, n),
    )
)


@settings(max_examples=200, deadline=None)
@given(group_st)
def test_bon_rewards_sum_to_k_times_max_at_k(case: tuple[list[float], int]) -> None:
    r, k = case
    got = bon_rewards(t64([r]), k)[0]
    assert float(got.sum()) == pytest.approx(k * max_at_k(r, k), abs=1e-9)
    if k == 1:  # r~_i = r_i / n
        np.testing.assert_allclose(got.numpy(), np.array(r) / len(r), atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(group_st, st.integers(0, 2**32 - 1))
def test_offpolicy_error_is_second_order(case: tuple[list[float], int], seed: int) -> None:
    """first-order transform minus the exact importance-weighted sum is O(delta^2)."""
    r, k = case
    r = [x + 0.1 for x in r]  # strictly positive rewards and deltas: no cancellation in the gap
    n = len(r)
    u = np.random.default_rng(seed).uniform(0.5, 1.0, n)

    def gap(scale: float) -> float:
        d = (scale * u).tolist()
        first = offpolicy_bon_rewards(t64([r]), t64([d]), k)[0].numpy()
        return float(np.abs(first - np.array(bf.offpolicy_exact(r, d, k))).max())

    g1, g2 = gap(0.02), gap(0.01)
    if k == 1:  # one factor per subset: the first order is exact
        assert g1 < 1e-12 and g2 < 1e-12
    else:
        assert 3.5 < g1 / g2 < 4.5, (g1, g2)


@settings(max_examples=150, deadline=None)
@given(group_st, st.integers(0, 2**32 - 1), st.booleans())
def test_exact_offpolicy_properties(case: tuple[list[float], int], seed: int, own_ratio: bool) -> None:
    """Enumeration on random groups; a common factor c on every ratio scales the weights by c^k (own
    ratio kept) or c^(k-1) (left out); and sum_i c_i = k * the importance-weighted max@k (own kept)."""
    r, k = case
    n = len(r)
    rng = np.random.default_rng(seed)
    d = rng.uniform(-0.6, 0.6, n).tolist()
    got = offpolicy_bon_rewards_exact(t64([r]), t64([d]), k, own_ratio=own_ratio)[0]
    brute = bf.offpolicy_exact if own_ratio else bf.offpolicy_exact_no_own
    np.testing.assert_allclose(got.numpy(), brute(r, d, k), atol=1e-9, rtol=1e-9)
    c = float(rng.uniform(0.5, 2.0))
    scaled_d = [(1 + x) * c - 1 for x in d]
    scaled = offpolicy_bon_rewards_exact(t64([r]), t64([scaled_d]), k, own_ratio=own_ratio)[0]
    power = k if own_ratio else k - 1
    np.testing.assert_allclose(scaled.numpy(), got.numpy() * c**power, rtol=1e-9, atol=1e-12)
    if own_ratio:
        subs = bf.subsets(n, k)
        weighted = sum(np.prod([1 + d[m] for m in s]) * max(r[m] for m in s) for s in subs) / len(subs)
        assert float(got.sum()) == pytest.approx(k * weighted, rel=1e-9, abs=1e-12)


def test_exact_offpolicy_in_chunks_of_groups_is_the_same(monkeypatch) -> None:
    """The forward pass holds [groups, n, k] values; groups are processed a few at a time."""
    import maxk.objectives as obj

    gen = torch.Generator().manual_seed(5)
    r = torch.rand(7, 12, generator=gen, dtype=torch.float64)
    d = (torch.rand(7, 12, generator=gen, dtype=torch.float64) - 0.5) * 0.6
    whole = offpolicy_bon_rewards_exact(r, d, 5, own_ratio=False)
    monkeypatch.setattr(obj, "_EXACT_CHUNK_ELEMENTS", 2 * 12 * 5)  # two groups per chunk
    torch.testing.assert_close(offpolicy_bon_rewards_exact(r, d, 5, own_ratio=False), whole, rtol=0, atol=0)
    assert offpolicy_bon_rewards_exact(r[:0], d[:0], 5).shape == (0, 12)
