"""Group integrity: every micro-batch holds whole groups (1 process, and 2 processes under torchrun)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from guard import HANG_GUARD_S
from train_helpers import make_trainer

HERE = Path(__file__).parent


def record_micro_batches(trainer):
    """Wrap _compute_loss to record (group_ids, prompt_ids) of every micro-batch."""
    seen = []
    real = trainer._compute_loss

    def spy(model, inputs):
        seen.append((inputs["group_ids"].clone(), inputs["prompt_ids"].clone()))
        return real(model, inputs)

    trainer._compute_loss = spy
    return seen


def check_whole_groups(seen, n):
    """Every micro-batch: each group n times, and all rows of a group share the prompt."""
    for gid, prompt_ids in seen:
        _, counts = torch.unique(gid, return_counts=True)
        assert (counts == n).all(), counts
        for g in gid.unique():
            rows = prompt_ids[gid == g]
            assert (rows == rows[:1]).all()


def prompts_split(seen, n):
    """Whether any micro-batch holds a prompt a number of times other than n (TRL's row shuffle)."""
    for _, prompt_ids in seen:
        _, counts = torch.unique(prompt_ids, dim=0, return_counts=True)
        if (counts != n).any():
            return True
    return False


def test_micro_batches_hold_whole_groups(tiny_model_dir, tmp_path):
    # 4 groups per generation, 2 groups per micro-batch, 2 micro-batches, 2 PPO iterations
    trainer = make_trainer(
        tiny_model_dir,
        tmp_path,
        "offpolicy_bon",
        prompts=8,
        per_device_train_batch_size=8,
        num_iterations=2,
        max_steps=4,
        max_completion_length=4,
    )
    seen = record_micro_batches(trainer)
    trainer.train()
    assert len(seen) == 8
    check_whole_groups(seen, 4)


def test_stock_trl_would_scatter_groups(tiny_model_dir, tmp_path):
    """The check above can fail: TRL's row shuffle splits a prompt's completions across micro-batches."""
    from trl import GRPOTrainer

    trainer = make_trainer(
        tiny_model_dir,
        tmp_path,
        "grpo",
        prompts=8,
        per_device_train_batch_size=8,
        num_iterations=1,
        max_steps=3,
        max_completion_length=4,
    )
    seen = record_micro_batches(trainer)
    trainer._prepare_inputs = GRPOTrainer._prepare_inputs.__get__(trainer)
    trainer.train()
    assert prompts_split(seen, 4)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_whole_groups_under_two_processes(tiny_model_dir, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(_free_port()),
        str(HERE / "_torchrun_groups.py"),
        tiny_model_dir,
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rep in reports:
        assert rep["micro_batches"] == 6 and rep["whole_groups"] is True
    # ranks hold disjoint groups of the same global generation batch
    assert not set(reports[0]["group_ids"]) & set(reports[1]["group_ids"])
