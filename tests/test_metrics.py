"""maxk.metrics against literal enumeration of all k-subsets, plus properties (hypothesis)."""

from __future__ import annotations

import math
from fractions import Fraction

import bruteforce as bf
import numpy as np
import pytest
from bruteforce import reward_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from maxk.metrics import (
    max_at_k,
    max_at_k_batch,
    max_at_k_weights,
    pass_at_k,
    pass_at_k_batch,
    pass_at_k_from_counts,
    powers_of_two,
)

NK = [(n, k) for n in range(1, 9) for k in range(1, n + 1)]


@pytest.mark.parametrize(("n", "k"), NK)
@pytest.mark.parametrize("seed", [0, 1])
def test_max_at_k_matches_enumeration(n: int, k: int, seed: int) -> None:
    for name, r in reward_cases(n, seed):
        assert max_at_k(r, k) == pytest.approx(bf.max_at_k(r, k), abs=1e-12), name


@pytest.mark.parametrize(("n", "k"), NK)
def test_pass_at_k_matches_enumeration(n: int, k: int) -> None:
    for c in range(n + 1):
        correct = [1] * c + [0] * (n - c)
        assert pass_at_k(n, c, k) == pytest.approx(bf.pass_at_k(correct, k), abs=1e-12)


@pytest.mark.parametrize(("n", "k"), NK)
def test_batch_forms_match_enumeration(n: int, k: int) -> None:
    rows = [r for _, r in reward_cases(n)] + [r for _, r in reward_cases(n, seed=7)]
    mat = np.array(rows)
    ks = list(range(1, n + 1))
    got = max_at_k_batch(mat, ks)
    assert got.shape == (len(rows), n)
    want = np.array([[bf.max_at_k(r, kk) for kk in ks] for r in rows])
    np.testing.assert_allclose(got, want, atol=1e-12)
    binary = (mat >= 0.5).astype(int)
    got_pass = pass_at_k_batch(binary, ks)
    want_pass = np.array([[bf.pass_at_k(list(row), kk) for kk in ks] for row in binary])
    np.testing.assert_allclose(got_pass, want_pass, atol=1e-12)


def exact_weights(n: int, k: int) -> list[Fraction]:
    return [Fraction(math.comb(i - 1, k - 1), math.comb(n, k)) for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("n", "k"), [(1024, 1), (1024, 2), (1024, 37), (1024, 512), (1024, 1000), (1024, 1024)]
)
def test_weights_exact_for_large_n(n: int, k: int) -> None:
    got = max_at_k_weights(n, k)
    want = np.array([float(w) for w in exact_weights(n, k)])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    assert got.sum() == pytest.approx(1.0, abs=1e-9)


def test_large_n_every_k_is_finite() -> None:
    rng = np.random.default_rng(3)
    r = rng.random((4, 1024))
    r[0] = 0.0
    r[1] = (rng.random(1024) < 0.001).astype(float)
    ks = list(range(1, 1025))
    out = max_at_k_batch(r, ks)
    assert np.all(np.isfinite(out))
    assert np.all(out >= -1e-12) and np.all(out <= 1 + 1e-12)
    assert np.all(np.diff(out, axis=1) >= -1e-12)  # monotone in k
    p = pass_at_k_from_counts(np.array([0, 1, 512, 1024]), 1024, ks)
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p[0], 0.0)
    np.testing.assert_allclose(p[3], 1.0)
    # c = 1: pass@k = k / n exactly
    np.testing.assert_allclose(p[1], np.array(ks) / 1024, rtol=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(1000, 1, 1), (1000, 999, 2), (256, 30, 128), (1024, 10, 1000)])
def test_pass_at_k_exact_large(n: int, c: int, k: int) -> None:
    want = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(want), rel=1e-9, abs=1e-12)
    assert pass_at_k_from_counts(np.array([c]), n, [k])[0, 0] == pytest.approx(
        float(want), rel=1e-9, abs=1e-12
    )


@pytest.mark.parametrize("bad_k", [0, -1, 9])
def test_bad_k_is_a_clear_error(bad_k: int) -> None:
    with pytest.raises(ValueError, match="k must be"):
        max_at_k([0.1] * 8, bad_k)
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k(8, 2, bad_k)
    with pytest.raises(ValueError, match="k must be"):
        max_at_k_batch(np.zeros((2, 8)), [1, bad_k])


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="NaN"):
        max_at_k_batch(np.array([[0.1, np.nan]]), [1])
    with pytest.raises(ValueError, match="0/1"):
        pass_at_k_batch(np.array([[0.5, 1.0]]), [1])
    with pytest.raises(ValueError, match="c must be"):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError, match="integer"):
        max_at_k([0.1, 0.2], 1.5)  # type: ignore[arg-type]


def test_powers_of_two() -> None:
    assert powers_of_two(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert powers_of_two(100) == [1, 2, 4, 8, 16, 32, 64]
    assert powers_of_two(1) == [1]


rewards_st = st.lists(
    st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(0, 1, allow_nan=False)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(rewards_st)
def test_max_at_1_is_mean_and_max_at_n_is_max(r: list[float]) -> None:
    assert max_at_k(r, 1) == pytest.approx(float(np.mean(r)), abs=1e-12)
    assert max_at_k(r, len(r)) == pytest.approx(max(r), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(rewards_st)
def test_monotone_in_k(r: list[float]) -> None:
    vals = max_at_k_batch(np.array([r]), list(range(1, len(r) + 1)))[0]
    assert np.all(np.diff(vals) >= -1e-12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 1), min_size=1, max_size=40), st.data())
def test_pass_at_k_equals_max_at_k_on_binary(correct: list[int], data: st.DataObject) -> None:
    n = len(correct)
    k = data.draw(st.integers(1, n))
    want = pass_at_k(n, sum(correct), k)
    assert max_at_k([float(c) for c in correct], k) == pytest.approx(want, abs=1e-12)
    assert pass_at_k_batch(np.array([correct]), [k])[0, 0] == pytest.approx(want, abs=1e-12)
