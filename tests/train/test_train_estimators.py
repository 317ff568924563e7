"""A short training run per advantage estimator (tiny random Qwen2, synthetic trusted reward)."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import make_trainer

from maxk.docs import undocumented
from maxk.objectives import ESTIMATORS
from maxk.train.logged import GRPO_KEYS


@pytest.mark.parametrize("method", sorted(ESTIMATORS))
def test_short_training_per_estimator(tiny_model_dir, tmp_path, method):
    trainer = make_trainer(tiny_model_dir, tmp_path, method, max_steps=3, max_completion_length=6)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    after = list(trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    logs = [row for row in trainer.state.log_history if "loss" in row]
    assert len(logs) == 3 and all(math.isfinite(row["loss"]) for row in logs)
    assert [row["ppo_iteration"] for row in logs] == [0.0, 1.0, 2.0]
    assert "advantage/mean" in logs[0] and "time/reward_s" in logs[0]
    # every key logged is a documented metrics column (maxk.train.logged, docs/outputs.md)
    assert undocumented(sorted({key for row in logs for key in row}), GRPO_KEYS) == []
    if ESTIMATORS[method].uses_deltas:  # offpolicy_bon, offpolicy_bon_exact and their _onstd variants
        assert logs[0]["delta/abs_mean_iter0"] == pytest.approx(0.0, abs=1e-6)
        assert logs[2]["delta/abs_mean_iter2"] > 0
