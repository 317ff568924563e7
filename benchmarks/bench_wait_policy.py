"""OpenMP's wait policy for torch's CPU threads: libgomp's default (a thread waiting at a barrier spins
for a while before it sleeps) against ``OMP_WAIT_POLICY=PASSIVE`` (it sleeps at once), for a torch
process of two threads, alone and with busy processes beside it, in the same process.

    python benchmarks/bench_wait_policy.py [--model models/base] [--threads 2] [--busy 0 2]
        [--steps 20] [--repeats 3]

The workload is the forward and backward pass of the shipped base (``models/base``) on a micro-batch of
8 x 8 rows of 160 random tokens, ``--steps`` times, at ``--threads`` torch threads: many short parallel
regions, as every training and base job of the embedded scale has. libgomp reads the policy once, when
it is loaded, so each run is a fresh interpreter, its environment with or without the variable. With
``B`` busy processes beside it (a loop each, what the test suite's other workers and their jobs are to
it), the machine has more runnable threads than cores: a spinning thread then burns the time slice its
team-mate needs. Prints, per load, each policy's median wall and CPU (user + system) seconds, the
default's over PASSIVE's, and whether both computed the same bytes (a wait policy must not change a
result). tests/conftest.py sets PASSIVE for the suite, which runs more processes than cores on purpose.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_job_start import children_cpu

ROOT = Path(__file__).resolve().parents[1]


def workload(model_path: str, threads: int, steps: int) -> str:
    """Forward + backward ``steps`` times; the SHA-256 of the last gradients (the result to compare)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    ids = torch.randint(0, model.config.vocab_size, (64, 160))
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.grad.numpy().tobytes())
    return digest.hexdigest()[:16]


def timed(policy: str | None, args: argparse.Namespace) -> tuple[float, float, str]:
    """One fresh interpreter running the workload under ``policy`` (None: the variable unset): wall and
    CPU seconds, and the digest it printed."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    cmd = [sys.executable, __file__, "--work", "--model", str(args.model), "--threads", str(args.threads),
           "--steps", str(args.steps)]  # fmt: skip
    cpu, t0 = children_cpu(), time.perf_counter()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.split()[-1]
    return time.perf_counter() - t0, children_cpu() - cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "base")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the measured process")
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="busy processes beside it, per load")
    ap.add_argument("--steps", type=int, default=20, help="forward + backward passes per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per policy and load, interleaved")
    ap.add_argument("--work", action="store_true", help=argparse.SUPPRESS)  # the measured subprocess
    args = ap.parse_args()
    if args.work:
        print(workload(str(args.model), args.threads, args.steps))
        return
    print(f"model {args.model}, {args.threads} torch threads, {args.steps} forward + backward passes a run, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    policies = {"default": None, "PASSIVE": "PASSIVE"}
    for busy in args.busy:
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            runs: dict[str, list[tuple[float, float, str]]] = {name: [] for name in policies}
            for _ in range(args.repeats):
                for name, policy in policies.items():
                    runs[name].append(timed(policy, args))
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
        med = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
               for name, rs in runs.items()}  # fmt: skip
        same = len({r[2] for rs in runs.values() for r in rs}) == 1
        for name, (wall, cpu) in med.items():
            line = f"wall {wall:6.1f} s, CPU {cpu:6.1f} s (median, {args.repeats} runs)"
            print(f"{busy} busy beside: {name:8s} {line}")
        wall_ratio, cpu_ratio = (med["default"][i] / med["PASSIVE"][i] for i in (0, 1))
        print(f"{busy} busy beside: default / PASSIVE: wall {wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x; "
              f"same gradients in every run: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
