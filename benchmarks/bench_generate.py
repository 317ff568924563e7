"""Benchmark: maxk's decode loop (``maxk.generate.decode``) against ``model.generate`` and the roofline.

    python benchmarks/bench_generate.py [--model models/base] [--problems 32] [--n N]
        [--max-new-tokens M] [--max-batch-size B] [--threads 1] [--baseline-problems 4]
        [--problems-file results/data/suite_test.jsonl.gz] [--against REV [--repeats 5]]
        [--kernel auto|native|torch]

Both paths are the transformers backend (same prompts, seeds, sampling and per-sample statistics:
sum of log-probs, exact mean entropy), once with ``decoder="auto"`` (the default: maxk's loop) and once
with ``decoder="generate"`` (batched ``model.generate`` with a static cache, the previous default), in
the same process on the same model. ``--n``, ``--max-new-tokens`` and ``--max-batch-size`` default to
the embedded config's (``generate.n``, ``generate.max_new_tokens``, ``generate.transformers``), so the
loop runs the pipeline's shapes. The roofline is measured in the same run too: the matrix products of
one decode step (every linear layer of the model at the rows of the loop's first step: whole prompts'
samples up to ``--max-batch-size`` rows, as the pipeline batches them) timed alone, on the same
threads, gives the FLOP/s this CPU reaches at the model's shapes; the decode loop's FLOP/s is
tokens/s x FLOP per token (2 x the linear layers' weights + 4 x layers x hidden x mean context for
attention). Prints tokens/s of each path, the speed-up, and the fraction of the roofline.

``--kernel`` picks the decode loop's step (``$MAXK_DECODE_KERNEL``, ``maxk.generate.native``): ``auto``
(the default: the C step where it builds), ``native`` or ``torch``; the first line says which ran.

``--profile`` also runs the decode loop once under torch's profiler and prints where its time goes, by
kind of operation (the model's linear products, attention's batched products, softmax, the token draws,
copies and indexing, elementwise arithmetic, the rest): the linear products are the part the roofline
measures, so their share of the loop's time bounds what a faster rest can bring.

``--against REV`` also times the decode loop of git revision REV (its ``src/maxk/generate/decode.py``,
loaded from git, and where today's loop runs the C step and REV has one, its ``native.py`` and C file,
built apart) against today's on the same model, prompts and seeds, the two interleaved, and says how many
samples came out identical, and how many of those bit for bit in their sums of log-probs and entropies:
the check that a speed change kept the samples.

Without ``--model``, the base the embedded default samples (``base_model.path``: ``models/base``);
where the model's path does not exist, a random Qwen2 with the embedded base model's sizes is built in a
temp dir; a random model rarely samples the stop token, so every sample runs to
``--max-new-tokens``. Timings on a shared machine vary with the load of other processes: compare
ratios measured in one run, not absolutes across runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from roofline import ROOT, default_model, roofline_line


def matmul_roofline(model, rows: int, seconds: float = 2.0) -> float:
    """FLOP/s of one decode step's matrix products (every linear layer at ``rows`` rows), best of repeats."""
    import torch

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = [torch.randn(rows, w.shape[1]) for w in weights]
    flops = sum(2 * rows * w.shape[0] * w.shape[1] for w in weights)
    best = float("inf")
    end = time.perf_counter() + seconds
    with torch.no_grad():
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            for _ in range(20):
                for x, w in zip(xs, weights, strict=True):
                    torch.nn.functional.linear(x, w)
            best = min(best, (time.perf_counter() - t0) / 20)
    return flops / best


def flop_per_token(model, mean_context: float) -> float:
    """2 x weights of the linear layers (lm_head included) + attention scores and values over the context."""
    import torch

    cfg = model.config
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 2 * linear + 4 * cfg.num_hidden_layers * cfg.hidden_size * mean_context


def run(backend, prompts, params) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    results = backend.generate(prompts, list(range(len(prompts))), params)
    seconds = time.perf_counter() - t0
    return seconds, sum(len(r) for r in results), sum(s.num_tokens for r in results for s in r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="the base model (default: the config's, models/base)")
    ap.add_argument(
        "--problems-file", default=str(ROOT / "results/data/suite_test.jsonl.gz"), help="prompts, if present"
    )
    from maxk.config import load_config

    gen = load_config()["generate"]  # the embedded default's shapes
    ap.add_argument("--problems", type=int, default=32, help="problems through maxk's decode loop")
    ap.add_argument("--baseline-problems", type=int, default=4, help="problems through model.generate")
    ap.add_argument("--n", type=int, default=gen["n"], help="samples per problem (default: generate.n)")
    ap.add_argument("--max-new-tokens", type=int, default=gen["max_new_tokens"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--max-batch-size",
        type=int,
        default=gen["transformers"]["max_batch_size"],
        help="rows per call of the decode loop (default: generate.transformers.max_batch_size)",
    )
    ap.add_argument(
        "--hidden-size", type=int, default=128, help="random model (default: embedded base sizes)"
    )
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also time the decode loop of git revision REV (its maxk/generate/decode.py) against today's "
        "on the same prompts, seeds and model, interleaved, best of --repeats; prints the ratio and how "
        "many samples are identical",
    )
    ap.add_argument("--repeats", type=int, default=5, help="rounds of the --against comparison")
    ap.add_argument(
        "--profile", action="store_true", help="also print the decode loop's time by kind of operation"
    )
    ap.add_argument(
        "--kernel",
        choices=("auto", "native", "torch"),
        default=None,
        help="the decode step: C where it builds (auto, the default), C or an error (native), torch's",
    )
    args = ap.parse_args()
    if args.model is None:
        args.model = default_model()
    if args.kernel is not None:
        import os

        from maxk.generate.native import KERNEL_ENV

        os.environ[KERNEL_ENV] = args.kernel

    import torch

    from maxk.generate.backends import SamplingParams
    from maxk.generate.hf import TransformersBackend

    torch.set_num_threads(args.threads)
    tmp = None
    model = Path(args.model)
    if not model.exists():
        from maxk.generate.testing import build_tiny_model

        tmp = tempfile.TemporaryDirectory()
        model = build_tiny_model(
            tmp.name, hidden_size=args.hidden_size, num_layers=args.layers, vocab_size=args.vocab
        )
        print(f"model: random Qwen2 hidden={args.hidden_size} layers={args.layers} ({args.model} not found)")
    else:
        print(f"model: {model}")
    fast = TransformersBackend(model, threads=args.threads, max_batch_size=args.max_batch_size)
    slow = TransformersBackend(model, threads=args.threads, max_batch_size=args.n, decoder="generate")
    if fast.decoder is None:
        raise SystemExit(f"{model} is not a Qwen2-family model: maxk's decode loop does not apply")
    print(f"decode step: {fast.decoder.kernel}")
    count = max(args.problems, args.baseline_problems)
    if Path(args.problems_file).exists():  # the embedded test problems, prompted as the pipeline does
        from maxk.data.prompts import build_prompt
        from maxk.io import read_jsonl

        rows = [row for _, row in read_jsonl(args.problems_file)][:count]
        prompts = [build_prompt(row, fast.tokenizer) for row in rows]
        print(f"prompts: the first {len(prompts)} problems of {args.problems_file}")
    else:
        statements = [
            f"Problem {i}: read {i + 2} integers from standard input and print their sum, their maximum "
            f"and the number of distinct values, one per line."
            for i in range(count)
        ]
        prompts = [
            fast.tokenizer.apply_chat_template(
                [{"role": "user", "content": s}], tokenize=False, add_generation_prompt=True
            )
            for s in statements
        ]
        print(f"prompts: {count} synthetic statements ({args.problems_file} not found)")
    params = SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens)
    for backend in (fast, slow):  # warm-up
        backend.generate(prompts[:1], [0], SamplingParams(n=8, max_new_tokens=4))

    f_s, f_samples, f_tokens = run(fast, prompts[: args.problems], params)
    s_s, s_samples, s_tokens = run(slow, prompts[: args.baseline_problems], params)
    # the rows of one decode step as the pipeline runs it: whole prompts' samples up to max_batch_size
    per_call = max(1, fast.max_batch_size // args.n) * args.n
    step_rows = min(per_call, args.problems * args.n)
    roof = matmul_roofline(fast.model, step_rows)
    prompt_len = sum(len(fast.encode(p)) for p in prompts[: args.problems]) / args.problems
    mean_new = f_tokens / f_samples
    context = prompt_len + mean_new / 2
    flop = flop_per_token(fast.model, context)
    achieved = f_tokens / f_s * flop
    print(
        f"decode loop:    {f_samples} samples, {f_tokens} tokens in {f_s:.1f}s: {f_tokens / f_s:.0f} tokens/s"
    )
    print(
        f"model.generate: {s_samples} samples, {s_tokens} tokens in {s_s:.1f}s: {s_tokens / s_s:.0f} tokens/s"
    )
    print(f"speed-up (tokens/s): {(f_tokens / f_s) / (s_tokens / s_s):.1f}x")
    print(
        f"roofline: matrix products of one step at {step_rows} rows: {roof / 1e9:.1f} GFLOP/s on "
        f"{args.threads} thread(s); {flop / 1e6:.2f} MFLOP per token (mean context {context:.0f})"
    )
    print(f"decode loop: {achieved / 1e9:.1f} GFLOP/s = {achieved / roof:.0%} of the roofline")
    shape = f"{args.n} samples x {step_rows // args.n} problems per step, {args.threads} thread(s)"
    roofline_line("sampling (decode loop)", shape, achieved, roof)
    if args.profile:
        profile(fast, prompts[: args.problems], params, achieved / roof)
    if args.against:
        against(args, fast, prompts[: args.problems])
    if tmp is not None:
        tmp.cleanup()


#: torch operators by kind, for ``--profile`` (the rest: "other")
KINDS = {
    "linear products": ("aten::mm", "aten::addmm"),
    "attention products": ("aten::bmm",),
    "softmax": ("aten::_softmax",),
    "token draws": ("aten::cumsum", "aten::_log_softmax", "aten::exp", "aten::searchsorted", "aten::sort",
                    "aten::gather", "aten::isin", "aten::argmax"),
    "copies and indexing": ("aten::copy_", "aten::index_select", "aten::index_copy_", "aten::cat",
                            "aten::index", "aten::index_put_", "aten::fill_", "aten::zero_"),
    "elementwise": ("aten::mul", "aten::add", "aten::pow", "aten::rsqrt", "aten::silu", "aten::neg",
                    "aten::mean", "aten::sum", "aten::div", "aten::div_", "aten::sub", "aten::cos",
                    "aten::sin", "aten::where", "aten::masked_fill", "aten::clamp_"),
}  # fmt: skip


def profile(backend, prompts, params, share: float, target: float = 0.4) -> None:
    """The decode loop's self CPU time by kind of operation (``KINDS``), one run under torch's profiler,
    and what it implies for the loop's ``share`` of the roofline: the loop's time T holds the linear
    products' L, which already run near the roofline at its own shapes; the rest, T - L, is what a
    faster loop must cut. The share scales as 1 / T, so ``target`` needs T' = T x share / target, and the
    rest must shrink by (T - L) / (T' - L); where T' <= L the products alone would not be fast enough. The
    profiler's own cost per operation adds to the many small ones of the rest: an upper bound."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    if backend.decoder.kernel != "torch":
        print("profile: the C decode step is one call that torch's profiler does not see (--kernel torch)")
        return
    kind_of = {op: kind for kind, ops in KINDS.items() for op in ops}
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        backend.generate(prompts, list(range(len(prompts))), params)
    by_kind: dict[str, float] = {}
    for event in prof.key_averages():
        kind = kind_of.get(event.key, "other")
        by_kind[kind] = by_kind.get(kind, 0.0) + event.self_cpu_time_total / 1e6
    total = sum(by_kind.values())
    print(f"decode loop under the profiler ({total:.1f} s of self CPU time, the prefill included):")
    for kind, seconds in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:20s} {seconds:6.2f} s  {seconds / total:4.0%}")
    linear = by_kind.get("linear products", 0.0) / total
    needed = share / target  # T' / T
    if needed > linear:
        cut = f"the rest ({1 - linear:.0%} of the time) {(1 - linear) / (needed - linear):.1f}x faster"
    else:
        cut = "faster linear products too: the rest free would not be enough"
    print(f"the linear products are {linear:.0%} of the loop's time: {target:.0%} of the roofline (today "
          f"{share:.0%}) needs {cut}")  # fmt: skip


def _source_at(rev: str, path: str) -> str | None:
    """The text of ``path`` at git revision ``rev``, or None where it has no such file."""
    import subprocess

    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _module_from(source: str, name: str, origin: str, file: Path | None = None):
    import importlib.util

    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    if file is not None:
        module.__file__ = str(file)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, origin, "exec"), module.__dict__)  # our own code, from git
    return module


def decode_module_at(rev: str):
    """``maxk/generate/decode.py`` as it was at git revision ``rev``, imported as a module of its own."""
    path = "src/maxk/generate/decode.py"
    source = _source_at(rev, path)
    if source is None:
        raise SystemExit(f"{rev} has no {path}")
    tag = rev.replace("-", "_").replace("~", "_").replace("^", "_")
    return _module_from(source, f"decode_at_{tag}", f"{rev}:{path}")


def native_module_at(rev: str, decode):
    """``maxk/generate/native.py`` at ``rev`` on top of that revision's ``decode`` module, building that
    revision's C file (into its own temp dir), or None where ``rev`` has no C step."""
    source = _source_at(rev, "src/maxk/generate/native.py")
    c_source = _source_at(rev, "src/maxk/generate/kernels/decode_step.c")
    if source is None or c_source is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="maxk-bench-"))  # its __file__, beside its kernels/ folder
    (folder / "kernels").mkdir()
    (folder / "kernels" / "decode_step.c").write_text(c_source)
    for header in ("vec.h", "blas.h"):  # that revision's shared headers, found before today's (maxk.ckernels)
        text = _source_at(rev, f"src/maxk/kernels/{header}")
        if text is not None:
            (folder / "kernels" / header).write_text(text)
    saved = sys.modules.get("maxk.generate.decode")
    sys.modules["maxk.generate.decode"] = decode  # its `from maxk.generate.decode import ...`
    try:
        tag = rev.replace("-", "_").replace("~", "_").replace("^", "_")
        path = "src/maxk/generate/native.py"
        return _module_from(source, f"native_at_{tag}", f"{rev}:{path}", folder / "native.py")
    finally:
        sys.modules["maxk.generate.decode"] = saved


def against(args, backend, prompts) -> None:
    """Today's decode loop (with the step ``--kernel`` picks) against revision ``args.against``'s: same
    model, prompt ids, seeds and calls (``max_batch_size // n`` prompts each), the two interleaved over
    ``args.repeats`` rounds."""

    old = decode_module_at(args.against)
    if backend.decoder.kernel == "native":  # the C step against the C step of that revision, if it has one
        native = native_module_at(args.against, old)
        make_old = old.QwenDecoder if native is None else native.NativeDecoder
    else:
        make_old = old.QwenDecoder
    ids = [backend.encode(p) for p in prompts]
    stops = [backend.tokenizer.eos_token_id]
    per_call = max(1, args.max_batch_size // args.n)
    best, samples = {}, {}
    for _ in range(args.repeats):
        for name, decoder in ((args.against, make_old(backend.model)), ("today", backend.decoder)):
            t0, out = time.perf_counter(), []
            for start in range(0, len(ids), per_call):
                chunk = ids[start : start + per_call]
                seeds = list(range(start, start + len(chunk)))
                res = decoder.sample(
                    chunk, args.n, max_new_tokens=args.max_new_tokens, stop_token_ids=stops, seeds=seeds
                )
                out += list(zip(res.token_ids, res.stopped, res.sum_logprob, res.sum_entropy, strict=True))
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
            samples[name] = out
    pairs = list(zip(samples[args.against], samples["today"], strict=True))
    same = sum(a[0] == b[0] for a, b in pairs)
    exact = sum(a == b for a, b in pairs)  # tokens, stop, sums of log-probs and entropies, bit for bit
    old_kernel = getattr(make_old, "kernel", "torch")
    print(
        f"decode loop at {args.against} ({old_kernel} step): {best[args.against]:.2f}s, today "
        f"({backend.decoder.kernel} step): {best['today']:.2f}s (best of {args.repeats}): "
        f"{best[args.against] / best['today']:.2f}x; identical samples {same} of {len(pairs)} ({exact} "
        "with bit-identical log-prob and entropy sums)"
    )


if __name__ == "__main__":
    main()
