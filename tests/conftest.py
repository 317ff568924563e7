"""Environment for the whole suite: never reach the Hugging Face hub; no sandbox pool outlives its test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _close_shared_sandbox_pools():
    """``score_programs`` keeps a process-wide pool alive until exit; a test must not leave one behind
    (the workflow tests count sandbox workers still running after a kill)."""
    yield
    scorer = sys.modules.get("maxk.sandbox.scorer")
    if scorer is not None:
        scorer.close_shared_scorers()
