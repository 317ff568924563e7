"""Step-time split (generation / reward / update) of one GRPO run with the embedded config; prints the
reward share of the step time (target < 1/3) as the ratio.

    python benchmarks/bench_train.py [--model models/base]
       [--data results/data/suite_rl.jsonl.gz]
                                     [--method offpolicy_bon] [--steps 6]

Uses maxk.sandbox.Scorer when it is importable (real rewards); otherwise a trusted non-executing stand-in
(said so in the output). Without ``--model``, the base the embedded default samples (``models/base``);
where the model's path does not exist, a tiny random Qwen2 is built in a temp dir.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from roofline import default_model  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


class StandInScorer:
    """No execution: reward = fraction of the reference's lines present in the program."""

    def score(self, pairs):
        out = []
        for problem, program in pairs:
            ref = [ln for ln in (problem.get("reference") or "").splitlines() if ln.strip()]
            hit = sum(ln in program for ln in ref)
            out.append(SimpleNamespace(passed=hit, total=max(1, len(ref)), reward=hit / max(1, len(ref))))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="the base model (default: the config's, models/base)")
    ap.add_argument("--data", default=str(ROOT / "results/data/suite_rl.jsonl.gz"))
    ap.add_argument("--method", default="offpolicy_bon")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    if a.model is None:
        a.model = default_model()

    import pandas as pd

    from maxk.config import load_config
    from maxk.train.run import train_run

    cfg = load_config(ROOT / "config/config.yaml")
    tmp = Path(tempfile.mkdtemp(prefix="bench-train-"))
    model = a.model
    if not Path(model).is_dir():
        from maxk.tiny import build_tiny

        texts = [f"x = int(input())\nprint(x + {i})\n" for i in range(300)]
        model = str(build_tiny(tmp / "tiny", texts))
        print(f"(no base model at {a.model}: using a tiny random Qwen2)")
    try:
        from maxk.sandbox import Scorer

        scorer_cm, label = Scorer(**(cfg.get("sandbox") or {}).get("limits", {})), "sandbox"
    except ImportError:
        scorer_cm, label = None, "stand-in (no execution; maxk.sandbox not available)"
    # save_steps: never reached (no checkpoint), and a multiple of num_iterations as check_run requires
    config = {"seed": cfg["seed"], "train": {**cfg["train"], "max_steps": a.steps, "save_steps": 3 * 10**6},
              "run": {"method": a.method}, "prompt": cfg.get("prompt")}  # fmt: skip
    scorer = scorer_cm.__enter__() if scorer_cm else StandInScorer()
    try:
        t0 = time.perf_counter()
        paths = {"out": str(tmp / "out"), "metrics": str(tmp / "m.csv"), "checkpoints": str(tmp / "ck")}
        summary = train_run(run="bench", config=config, model=model, data=a.data, scorer=scorer, **paths)
        wall = time.perf_counter() - t0
    finally:
        if scorer_cm:
            scorer_cm.__exit__(None, None, None)
    m = pd.read_csv(tmp / "m.csv")
    step = m["step_time"].sum()
    gen, rew = m["time/generation_s"].fillna(0).sum(), m["time/reward_s"].fillna(0).sum()
    upd = step - gen - rew
    print(f"run: method={a.method} steps={summary['steps']} reward scorer: {label}")
    print(f"wall {wall:.1f}s (incl. model load); sum of step times {step:.2f}s")
    for name, v in (("generation", gen), ("reward", rew), ("update", upd)):
        print(f"  {name:<10} {v:7.2f}s  {v / step:6.1%}")
    print(f"reward / step time ratio: {rew / step:.3f} (target < 0.333)")


if __name__ == "__main__":
    main()
