"""Per-problem pass@k and max@k from a scores table (scores Parquet -> metrics Parquet).

A scores table has one row per (problem_id, sample_index) with ``reward`` in [0, 1]. We pivot it to
a ``[problems, n]`` reward matrix (problems in sorted id order, samples in sample_index order) and
apply the batched unbiased estimators of ``maxk.metrics``:

- max@k uses the continuous reward;
- pass@k counts a sample as correct only when ``reward == 1`` exactly (all tests passed).

Ragged n (some problem has fewer samples than others) is handled by ``ragged``:

- ``"error"`` (default): refuse, naming the file, the problem id and its count;
- ``"truncate"``: keep the first ``n_min`` samples (by sample_index) of every problem. The samples
  are i.i.d., so this stays unbiased; it only wastes the extra samples. The number of dropped
  samples is recorded in the metrics file's metadata.

The k grid is ``powers_of_two(n)`` restricted to the requested ks (k <= n always).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from maxk.analysis.config import RAGGED
from maxk.metrics import max_at_k_batch, pass_at_k_from_counts, powers_of_two

__all__ = [
    "RAGGED_MODES",
    "RewardMatrix",
    "compute_metrics",
    "metric_column",
    "parse_metric_column",
    "read_metrics",
    "reward_matrix",
    "write_metrics",
]

RAGGED_MODES = ("error", "truncate")
METRIC_INPUT_COLUMNS = ("problem_id", "sample_index", "reward")


@dataclass
class RewardMatrix:
    """Rewards of one (model, dataset): ``rewards[p, s]`` for problem ``problem_ids[p]``."""

    problem_ids: NDArray[np.object_]
    rewards: NDArray[np.float64]
    dropped_samples: int = 0
    source: str = "<memory>"
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.rewards.shape[1])


def metric_column(metric: str, k: int) -> str:
    """Column name of a per-problem metric, e.g. ``max@128``."""
    return f"{metric}@{int(k)}"


def parse_metric_column(name: str) -> tuple[str, int] | None:
    """Inverse of ``metric_column``; None for other columns."""
    metric, sep, k = name.partition("@")
    if not sep or metric not in ("pass", "max") or not k.isdigit():
        return None
    return metric, int(k)


def reward_matrix(scores: pd.DataFrame, *, ragged: str = RAGGED, source: str = "<memory>") -> RewardMatrix:
    """Pivot a scores table into a ``[problems, n]`` matrix (see module docstring for ``ragged``).

    Errors name ``source``, the offending problem id and the field.
    """
    if ragged not in RAGGED_MODES:
        raise ValueError(f"ragged must be one of {RAGGED_MODES}, got {ragged!r}")
    missing = [c for c in METRIC_INPUT_COLUMNS if c not in scores.columns]
    if missing:
        raise ValueError(f"{source}: missing column(s) {missing}; scores need {list(METRIC_INPUT_COLUMNS)}")
    if len(scores) == 0:
        raise ValueError(f"{source}: no rows")
    reward = scores["reward"].to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(reward) | (reward < 0) | (reward > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = scores.iloc[i]
        raise ValueError(
            f"{source}: problem_id={row['problem_id']!r} sample_index={row['sample_index']}: "
            f"field 'reward' must be a finite number in [0, 1], got {reward[i]!r}"
        )
    codes, uniques = pd.factorize(scores["problem_id"], sort=True)
    sample = scores["sample_index"].to_numpy()
    if not np.issubdtype(sample.dtype, np.integer) or (sample.size and sample.min() < 0):
        raise ValueError(f"{source}: field 'sample_index' must hold non-negative integers")
    n_prob = len(uniques)
    width = int(sample.max()) + 1
    counts = np.bincount(codes, minlength=n_prob)
    if width <= 4 * int(counts.max()) + 16:
        # Dense grid [problems, max sample_index + 1]: O(rows), no sort.
        key = codes.astype(np.int64) * width + sample
        occupancy = np.bincount(key, minlength=n_prob * width)
        if occupancy.max() > 1:
            i = int(np.argmax(occupancy))
            raise ValueError(
                f"{source}: problem_id={uniques[i // width]!r}: duplicate sample_index={i % width}"
            )
        grid = np.empty(n_prob * width)
        grid[key] = reward
        present = (occupancy > 0).reshape(n_prob, width)
        grid = grid.reshape(n_prob, width)
    else:
        # Sparse sample indices: sort rows by (problem, sample) instead.
        order = np.lexsort((sample, codes))
        codes_s, sample_s = codes[order], sample[order]
        dup = (codes_s[1:] == codes_s[:-1]) & (sample_s[1:] == sample_s[:-1])
        if dup.any():
            i = int(np.flatnonzero(dup)[0])
            raise ValueError(
                f"{source}: problem_id={uniques[codes_s[i]]!r}: duplicate sample_index={sample_s[i]}"
            )
        width = int(counts.max())
        rank = np.arange(len(order)) - np.repeat(np.cumsum(counts) - counts, counts)
        grid = np.full((n_prob, width), np.nan)
        grid[codes_s, rank] = reward[order]
        present = np.zeros((n_prob, width), dtype=bool)
        present[codes_s, rank] = True
    n_min, n_max = int(counts.min()), int(counts.max())
    dropped = 0
    notes: list[str] = []
    if n_min == n_max:
        mat = grid if present.all() else grid[present].reshape(n_prob, n_min)
    elif ragged == "error":
        p = int(np.argmin(counts))
        raise ValueError(
            f"{source}: ragged samples: problem_id={uniques[p]!r} has {n_min} samples but others have "
            f"up to {n_max} (field 'sample_index'); set analysis.ragged: truncate to use the first "
            f"{n_min} samples of every problem"
        )
    else:
        keep = present & (np.cumsum(present, axis=1) <= n_min)
        mat = grid[keep].reshape(n_prob, n_min)
        dropped = int(counts.sum() - n_min * n_prob)
        notes.append(f"ragged n ({n_min}..{n_max}): truncated to the first {n_min} samples per problem")
    return RewardMatrix(
        problem_ids=np.asarray(uniques, dtype=object),
        rewards=np.ascontiguousarray(mat),
        dropped_samples=dropped,
        source=source,
        notes=notes,
    )


def k_grid(n: int, ks: Sequence[int] | None = None) -> list[int]:
    """The ks to compute for n samples: ``powers_of_two(n)`` intersected with ``ks`` (if given)."""
    grid = powers_of_two(n)
    if ks is None:
        return grid
    return [k for k in grid if k in set(int(k) for k in ks)] or [1]


def compute_metrics(mat: RewardMatrix, ks: Sequence[int] | None = None) -> pd.DataFrame:
    """Per-problem table: ``problem_id``, ``n``, ``pass@k`` and ``max@k`` for every k of the grid."""
    grid = k_grid(mat.n, ks)
    maxk = max_at_k_batch(mat.rewards, grid)
    correct = (mat.rewards == 1.0).sum(axis=1)  # solved (maxk.sandbox.judge.is_solved): reward exactly 1
    passk = pass_at_k_from_counts(correct, mat.n, grid)
    data: dict[str, object] = {
        "problem_id": mat.problem_ids.astype(str),
        "n": np.full(len(mat.problem_ids), mat.n),
    }
    for j, k in enumerate(grid):
        data[metric_column("pass", k)] = passk[:, j]
    for j, k in enumerate(grid):
        data[metric_column("max", k)] = maxk[:, j]
    return pd.DataFrame(data)


def write_metrics(path: str | Path, frame: pd.DataFrame, *, meta: dict | None = None) -> None:
    """Atomically write a per-problem metrics Parquet (with ``meta`` JSON in the schema metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from maxk.io import atomic_path

    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({b"maxk": json.dumps(meta or {}, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_metrics(path: str | Path) -> pd.DataFrame:
    """Read a metrics Parquet written by ``write_metrics``."""
    return pd.read_parquet(path)
