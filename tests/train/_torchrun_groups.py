"""Run under ``torchrun --nproc_per_node 2`` by test_train_groups.py: train a few steps on CPU (gloo) and
write, per rank, whether every micro-batch held whole groups."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
from test_train_groups import check_whole_groups, record_micro_batches
from train_helpers import make_trainer

model_dir, out = sys.argv[1], Path(sys.argv[2])
trainer = make_trainer(
    model_dir,
    out / "run",
    "offpolicy_bon",
    prompts=8,
    per_device_train_batch_size=4,
    num_iterations=3,
    max_steps=3,
    max_completion_length=4,
)
seen = record_micro_batches(trainer)
trainer.train()
check_whole_groups(seen, trainer.num_generations)
rank = trainer.accelerator.process_index
report = {
    "micro_batches": len(seen),
    "whole_groups": True,
    "group_ids": sorted({int(g) for s in seen for g in s[0]}),
}
(out / f"rank{rank}.json").write_text(json.dumps(report))
if dist.is_initialized():
    dist.destroy_process_group()
