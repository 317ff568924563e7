"""Significance and bootstrap: scipy reference values, Holm, seeded CIs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from maxk.analysis.stats import bootstrap_ci, bootstrap_counts, holm, wilcoxon_best_vs_second

# scipy.stats.wilcoxon documentation example (differences in height of cross- vs self-fertilised
# plants, Fisher / Darwin): exact two-sided p = 0.04125976562499978, one-sided 0.020629882812499997.
DARWIN = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]


def test_wilcoxon_matches_known_scipy_case():
    zeros = np.zeros(len(DARWIN))
    greater = wilcoxon_best_vs_second(DARWIN, zeros, alternative="greater")
    two = wilcoxon_best_vs_second(DARWIN, zeros, alternative="two-sided")
    assert greater.pvalue == pytest.approx(0.020629882812499997, rel=1e-12)
    assert two.pvalue == pytest.approx(0.04125976562499978, rel=1e-12)
    assert two.statistic == 24.0


def test_wilcoxon_all_ties_is_undefined_not_significant():
    res = wilcoxon_best_vs_second([0.5, 0.2], [0.5, 0.2])
    assert math.isnan(res.pvalue) and "zero" in res.note


def test_wilcoxon_rejects_unknown_options():
    with pytest.raises(ValueError, match="alternative"):
        wilcoxon_best_vs_second([1.0], [0.0], alternative="bigger")
    with pytest.raises(ValueError, match="zero_method"):
        wilcoxon_best_vs_second([1.0], [0.0], zero_method="drop")


def test_holm_hand_computed():
    # sorted 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1 -> max(0.06, 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = holm([0.2, float("nan"), 0.9])
    assert out[0] == pytest.approx(0.4) and math.isnan(out[1]) and out[2] == pytest.approx(0.9)
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = np.random.default_rng(0).random((200, 3))
    c1 = bootstrap_counts(200, 500, seed=7)
    c2 = bootstrap_counts(200, 500, seed=7)
    np.testing.assert_array_equal(c1, c2)
    assert (c1.sum(axis=1) == 200).all()
    low, high = bootstrap_ci(values, c1, 0.95)
    mean = values.mean(axis=0)
    assert (low < mean).all() and (mean < high).all()
    # the half-width is close to 1.96 * sd / sqrt(P) for a mean of uniforms (sd = 0.2887)
    assert np.allclose((high - low) / 2, 1.96 * 0.2887 / math.sqrt(200), rtol=0.25)
