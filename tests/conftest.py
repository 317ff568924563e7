"""Environment for the whole suite: never reach the Hugging Face hub; OpenMP threads that sleep while they
wait; no sandbox pool outlives its test; the longest files first, so that the parallel workers
(pytest-xdist, ``-n`` in pyproject.toml) start them at once instead of meeting them last."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# OpenMP threads (torch's CPU backend, libgomp) that wait at a barrier sleep instead of spinning. The
# suite runs more processes than cores on purpose (pytest_xdist_auto_num_workers, end-to-end runs at
# --cores 2 beside them), and a spinning thread burns the time slice its team-mate needs: the GPU-check
# rehearsal, with two busy loops beside it, took 136 s of wall and 132 s of CPU spinning, 85 s and 54 s
# sleeping. The wait policy changes no result (docs/experiment-log.md, thirty-fourth session). Set here,
# before any test imports torch (libgomp reads it once, when loaded), and inherited by every subprocess.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(autouse=True)
def _close_shared_sandbox_pools():
    """``score_programs`` keeps a process-wide pool alive until exit; a test must not leave one behind
    (the workflow tests count sandbox workers still running after a kill)."""
    yield
    scorer = sys.modules.get("maxk.sandbox.scorer")
    if scorer is not None:
        scorer.close_shared_scorers()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject.toml): one worker more than the usable cores. The suite is CPU-bound but for
    its waits (Slurm status polls, kills and resumes, sandbox wall-clock limits, subprocesses starting), in
    which one worker per core leaves a core idle; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still overrides it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 1


#: The files that take longest on 2 idle cores (pytest's --durations), longest first. Under
#: ``--dist loadfile --no-loadscope-reorder`` each worker takes the next file in this order, so the
#: longest start together, one per worker, and the rest of the suite fills in beside them; a file
#: missing here only runs later.
LONGEST_FIRST = (
    "tests/rehearsal/test_rehearsal.py",  # every paper job locally, then one per cluster rule via Slurm
    "tests/workflow/test_workflow_e2e.py",  # two end-to-end runs of the small scale
    "tests/workflow/test_slurm.py",
    "tests/test_gpu_check.py",
    "tests/sandbox/test_sandbox_humaneval.py",
    "tests/test_project.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.path.relative_to(root).as_posix(), len(rank))

    items.sort(key=key)  # stable: the order within a file, and of the files not listed, is kept
