"""Per-problem metrics from scores: pivoting, pass@k correctness rule, ragged n."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from maxk.analysis.per_problem import compute_metrics, k_grid, reward_matrix


def _scores(rows):
    return pd.DataFrame(rows, columns=["problem_id", "sample_index", "reward"])


def test_hand_computed_values_and_shuffled_rows():
    # problem a: rewards 0, 0.5, 1, 1 (n = 4); problem b: 0.2, 0.999, 0.4, 0.0 (no reward == 1).
    rows = [("a", i, r) for i, r in enumerate([0.0, 0.5, 1.0, 1.0])]
    rows += [("b", i, r) for i, r in enumerate([0.2, 0.999, 0.4, 0.0])]
    df = _scores(rows).sample(frac=1.0, random_state=3)
    mat = reward_matrix(df)
    assert list(mat.problem_ids) == ["a", "b"]
    np.testing.assert_allclose(mat.rewards[1], [0.2, 0.999, 0.4, 0.0])
    m = compute_metrics(mat).set_index("problem_id")
    assert list(m.columns) == ["n", "pass@1", "pass@2", "pass@4", "max@1", "max@2", "max@4"]
    # max@2 of a: weights C(i-1,1)/C(4,2) = [0,1,2,3]/6 on sorted [0, .5, 1, 1] -> 5.5/6
    assert m.loc["a", "max@1"] == pytest.approx(0.625)
    assert m.loc["a", "max@2"] == pytest.approx(5.5 / 6)
    assert m.loc["a", "max@4"] == pytest.approx(1.0)
    # pass@k: 2 of 4 correct; pass@2 = 1 - C(2,2)/C(4,2) = 5/6
    assert m.loc["a", "pass@1"] == pytest.approx(0.5)
    assert m.loc["a", "pass@2"] == pytest.approx(5 / 6)
    # 0.999 is not a pass: only reward == 1 counts
    assert m.loc["b", "pass@4"] == 0.0
    assert m.loc["b", "max@4"] == pytest.approx(0.999)


def test_k_grid_respects_n_and_config():
    assert k_grid(6) == [1, 2, 4]
    assert k_grid(300, [1, 128, 256, 512]) == [1, 128, 256]


def test_ragged_error_names_file_and_problem():
    rows = [("a", i, 0.5) for i in range(4)] + [("b", i, 0.5) for i in range(3)]
    with pytest.raises(ValueError, match=r"scores\.parquet.*problem_id='b' has 3 samples"):
        reward_matrix(_scores(rows), source="scores.parquet")


def test_ragged_truncate_keeps_first_samples():
    rows = [("a", i, float(i == 3)) for i in range(4)] + [("b", i, 0.25 * i) for i in range(3)]
    mat = reward_matrix(_scores(rows), ragged="truncate")
    assert mat.n == 3 and mat.dropped_samples == 1
    np.testing.assert_allclose(mat.rewards, [[0, 0, 0], [0, 0.25, 0.5]])
    assert "truncated" in mat.notes[0]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([("a", 0, 0.5), ("a", 0, 0.7)], "duplicate sample_index=0"),
        ([("a", 0, 0.5), ("a", 1, 1.5)], r"problem_id='a' sample_index=1: field 'reward'"),
        ([("a", 0, float("nan"))], "field 'reward'"),
    ],
)
def test_bad_rows_are_named(rows, match):
    with pytest.raises(ValueError, match=match):
        reward_matrix(_scores(rows))


@pytest.mark.parametrize("stride", [1, 3, 1000])
def test_gapped_and_sparse_sample_indices_give_the_same_matrix(stride):
    rng = np.random.default_rng(0)
    rewards = rng.random((5, 6))
    rows = [(f"p{p}", s * stride, rewards[p, s]) for p in range(5) for s in range(6)]
    df = _scores(rows).sample(frac=1.0, random_state=1)
    np.testing.assert_array_equal(reward_matrix(df).rewards, rewards)
    ragged = df[~((df.problem_id == "p2") & (df.sample_index == 0))]
    mat = reward_matrix(ragged, ragged="truncate")
    np.testing.assert_array_equal(mat.rewards[2], rewards[2, 1:])
    np.testing.assert_array_equal(mat.rewards[0], rewards[0, :5])
    with pytest.raises(ValueError, match="duplicate sample_index"):
        reward_matrix(pd.concat([df, df.iloc[:1]]))
