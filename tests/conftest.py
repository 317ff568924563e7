"""Shared fixtures: reward vectors with ties, for every n <= 8."""

from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def reward_cases(n: int, seed: int = 0) -> list[tuple[str, list[float]]]:
    """Continuous rewards with ties, continuous without, binary, all equal, a single maximum."""
    rng = np.random.default_rng(1000 * n + seed)
    grid = rng.integers(0, 5, size=n) / 4.0  # values in {0, .25, .5, .75, 1}: many ties
    cont = rng.random(n)
    binary = rng.integers(0, 2, size=n).astype(float)
    equal = np.full(n, 0.5)
    single = np.zeros(n)
    single[rng.integers(n)] = 1.0
    return [
        ("ties", grid.tolist()),
        ("continuous", cont.tolist()),
        ("binary", binary.tolist()),
        ("equal", equal.tolist()),
        ("single", single.tolist()),
    ]
