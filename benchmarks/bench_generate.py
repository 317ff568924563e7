"""Benchmark: the transformers backend (n samples per problem in one batched ``generate`` call) vs a
naive loop calling ``generate`` once per sample, in the same process on the same model.

    python benchmarks/bench_generate.py [--model results/models/base] [--problems 50] [--n 256]
        [--max-new-tokens 96] [--naive-problems 1] [--naive-samples 32] [--threads 1]

Without ``--model`` (or when the path does not exist) a random Qwen2 with the embedded base model's
sizes (``--hidden-size 128 --layers 3 --vocab 1000``) is built in a temp dir; a random model rarely
samples the stop token, so every sample runs to ``--max-new-tokens`` (the worst case).
Both paths compute the same per-sample statistics (sum of log-probs, exact mean entropy): the naive
loop gets them from ``output_scores``. Prints samples/s and tokens/s of each and the ratio.
Timings on a shared machine vary with the load of other processes: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def naive_loop(backend, prompt: str, num_samples: int, max_new_tokens: int, seed: int) -> tuple[int, int]:
    """One ``generate`` call per sample (KV cache on, no batching): the baseline."""
    import torch

    ids = torch.tensor([backend.encode(prompt)])
    torch.manual_seed(seed)
    tokens = 0
    for _ in range(num_samples):
        out = backend.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=max_new_tokens,
            eos_token_id=backend.stop_token_ids,
            pad_token_id=backend.pad_token_id,
            output_scores=True,
            return_dict_in_generate=True,
        )
        gen = out.sequences[0, ids.shape[1] :]
        logp = torch.log_softmax(torch.stack(out.scores)[:, 0].float(), -1)
        _ = logp.gather(1, gen[:, None]).sum()  # sum of sampled-token log-probs
        _ = -(logp.exp() * logp).sum(-1).mean()  # mean entropy
        tokens += int(gen.numel())
    return num_samples, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/models/base")
    ap.add_argument("--problems", type=int, default=50)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--naive-problems", type=int, default=1)
    ap.add_argument("--naive-samples", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--hidden-size", type=int, default=128, help="random model (default: embedded base sizes)"
    )
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=1000)
    args = ap.parse_args()

    from maxk.generate.backends import SamplingParams
    from maxk.generate.hf import TransformersBackend

    tmp = None
    model = Path(args.model)
    if not model.exists():
        from maxk.generate.testing import build_tiny_model

        tmp = tempfile.TemporaryDirectory()
        model = build_tiny_model(
            tmp.name, hidden_size=args.hidden_size, num_layers=args.layers, vocab_size=args.vocab
        )
        print(
            f"model: random Qwen2 hidden={args.hidden_size} layers={args.layers} vocab<={args.vocab} "
            f"({args.model} not found)"
        )
    else:
        print(f"model: {model}")
    backend = TransformersBackend(model, threads=args.threads, max_batch_size=args.n)
    statements = [
        f"Problem {i}: read {i + 2} integers from standard input and print their sum, their maximum and "
        f"the number of distinct values, one per line."
        for i in range(args.problems)
    ]
    prompts = [
        backend.tokenizer.apply_chat_template(
            [{"role": "user", "content": s}], tokenize=False, add_generation_prompt=True
        )
        for s in statements
    ]
    params = SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens)
    backend.generate(prompts[:1], [0], SamplingParams(n=8, max_new_tokens=4))  # warm-up

    t0 = time.perf_counter()
    results = backend.generate(prompts, list(range(args.problems)), params)
    batched_s = time.perf_counter() - t0
    b_samples = sum(len(r) for r in results)
    b_tokens = sum(s.num_tokens for r in results for s in r)

    t0 = time.perf_counter()
    n_samples = n_tokens = 0
    for i in range(args.naive_problems):
        s, t = naive_loop(backend, prompts[i], args.naive_samples, args.max_new_tokens, seed=i)
        n_samples += s
        n_tokens += t
    naive_s = time.perf_counter() - t0

    b_rate, n_rate = b_samples / batched_s, n_samples / naive_s
    print(
        f"batched: {b_samples} samples ({args.problems} problems x {args.n}), {b_tokens} tokens in "
        f"{batched_s:.1f}s: {b_rate:.1f} samples/s, {b_tokens / batched_s:.0f} tokens/s"
    )
    print(
        f"naive:   {n_samples} samples ({args.naive_problems} problems x {args.naive_samples}), {n_tokens} "
        f"tokens in {naive_s:.1f}s: {n_rate:.1f} samples/s, {n_tokens / naive_s:.0f} tokens/s"
    )
    tok_ratio = (b_tokens / batched_s) / (n_tokens / naive_s)
    print(f"speed-up (samples/s): {b_rate / n_rate:.1f}x; tokens/s: {tok_ratio:.1f}x")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
