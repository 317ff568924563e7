"""Host memory of one vLLM generation call's log-probs: one ``{token: Logprob}`` mapping per position
(vLLM's default) against ``FlatLogprobs`` (``SamplingParams(flat_logprobs=True)``, what
``maxk.generate.vllm`` asks for), built with the rehearsal stand-in's classes (field for field vLLM's),
and the adapter's time to read each.

    python benchmarks/bench_vllm_logprobs.py [--prompts 1] [--n 256] [--tokens 256] [--top 20]
                                             [--prompts-per-call 64]

Builds the outputs of ``--prompts`` prompts x ``--n`` samples x ``--tokens`` positions x (``--top`` + 1:
the sampled token when outside the top) entries under tracemalloc, reads them with
``convert_completion``, and scales the bytes to ``--prompts-per-call`` prompts (the paper config's
``generate.vllm.prompts_per_call``); prints both and the ratio. ``decoded_token`` is None in both
formats (vLLM may fill it with a string per entry, which costs the same in both).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def stand_in():
    folder = ROOT / "tests" / "rehearsal" / "stand_ins" / "vllm"
    spec = importlib.util.spec_from_file_location("bench_vllm_stand_in", folder / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def build(v, args, flat: bool) -> list:
    """The completions of ``args.prompts`` prompts, with deterministic log-probs."""
    import random

    rng = random.Random(0)
    outs = []
    for j in range(args.prompts * args.n):
        positions, tokens = [], []
        for _ in range(args.tokens):
            top = rng.sample(range(150_000), args.top + 1)
            pos = {t: v.Logprob(-0.1 * (r + 1), r + 1, None) for r, t in enumerate(top[: args.top])}
            sampled = top[0] if rng.random() < 0.8 else top[-1]  # sometimes outside the top
            pos.setdefault(sampled, v.Logprob(-5.0, args.top + 7, None))
            positions.append(pos)
            tokens.append(sampled)
        logprobs = v.FlatLogprobs.of(positions) if flat else positions
        outs.append(v.CompletionOutput(j, "", tokens, None, logprobs, "length"))
    return outs


def measure(v, args, flat: bool) -> tuple[int, float]:
    from maxk.generate.vllm import convert_completion

    gc.collect()
    tracemalloc.start()
    outs = build(v, args, flat)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = time.perf_counter()
    for o in outs:
        convert_completion(o, entropy_top_logprobs=args.top)
    return held, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--prompts-per-call", type=int, default=64)
    args = ap.parse_args()
    v = stand_in()
    scale = args.prompts_per_call / args.prompts
    entries = args.prompts * args.n * args.tokens
    shape = f"{args.prompts} prompt(s) x {args.n} samples x {args.tokens} tokens x top {args.top}"
    print(f"{shape}: {entries:,} positions")
    results = {}
    for flat in (False, True):
        held, seconds = measure(v, args, flat)
        results[flat] = held
        name = "FlatLogprobs" if flat else "mapping per position"
        print(f"{name:>22}: {held / 2**20:8.1f} MiB held ({held * scale / 2**30:6.2f} GiB per call of "
              f"{args.prompts_per_call} prompts), read in {seconds:.2f} s")  # fmt: skip
    print(f"memory ratio (mapping / flat): {results[False] / results[True]:.2f}x")


if __name__ == "__main__":
    main()
