#!/usr/bin/env python3
"""FAKE_SLURM_CHECK for the stand-in sbatch: GPU rules must ask for GPUs on the GPU partition,
CPU rules must not ask for GPUs. Reads the submission record (JSON) on stdin; exit 1 rejects it."""

import json
import sys

GPU_RULES = {"train", "generate_shard", "entropy_rescore"}
rec = json.load(sys.stdin)
opts, rule = rec["opts"], rec["rule"]
gpus = opts.get("gpus") or opts.get("gres")
problems = []
if rule in GPU_RULES:
    if not gpus:
        problems.append(f"GPU rule {rule} submitted without --gpus/--gres")
    if opts.get("p") != "gpu":
        problems.append(f"GPU rule {rule} submitted to partition {opts.get('p')!r}, not 'gpu'")
    if "gpus" in opts and "gres" in opts:
        problems.append(f"{rule}: both --gpus and --gres")
    if opts.get("nodes") != "1":
        problems.append(f"GPU rule {rule} not pinned to one node (--nodes={opts.get('nodes')})")
elif gpus:
    problems.append(f"CPU rule {rule} asked for GPUs ({gpus})")
if opts.get("A") != "my_account":
    problems.append(f"{rule}: account {opts.get('A')!r}")
if problems:
    print("; ".join(problems))
    sys.exit(1)
