"""Shared synthetic per-problem metric frames for the analysis tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from maxk.analysis.per_problem import compute_metrics, reward_matrix


def scores_frame(rewards: np.ndarray, prefix: str = "p") -> pd.DataFrame:
    """A scores table from a ``[problems, n]`` reward matrix."""
    p, n = rewards.shape
    return pd.DataFrame(
        {
            "problem_id": np.repeat([f"{prefix}/{i:03d}" for i in range(p)], n),
            "sample_index": np.tile(np.arange(n), p),
            "reward": rewards.ravel(),
            "passed": (rewards.ravel() * 10).round().astype(int),
            "total": 10,
        }
    )


def synthetic_rewards(p: int, n: int, level: float, seed: int) -> np.ndarray:
    """Rewards in {0, 0.1, ..., 1} with mean rising with ``level``."""
    rng = np.random.default_rng(seed)
    ability = np.clip(rng.beta(2, 3, size=(p, 1)) + level, 0, 1)
    return np.round(np.clip(ability + rng.normal(0, 0.25, size=(p, n)), 0, 1), 1)


@pytest.fixture(scope="session")
def frames():
    """Metrics of three models on two datasets (40 problems, n = 16): strong > mid > weak."""
    out = {}
    for d_i, dataset in enumerate(["ds_a", "ds_b"]):
        for m_i, (model, level) in enumerate([("weak", -0.2), ("mid", 0.0), ("strong", 0.25)]):
            r = synthetic_rewards(40, 16, level, seed=100 * d_i + m_i)
            out[(model, dataset)] = compute_metrics(reward_matrix(scores_frame(r, dataset)))
    return out


LABELS = {"weak": "Weak_model", "mid": "Mid & co", "strong": "Strong"}
DATASETS = {"ds_a": {"label": "Data A", "short": "A"}, "ds_b": {"label": "Data B", "short": "B"}}
