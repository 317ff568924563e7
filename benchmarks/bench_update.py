"""The policy update (forward + backward of the GRPO loss on one micro-batch) with each group's prompt
computed once (``maxk.train.shared_prompt``, MaxKGRPOTrainer's 6th override) against TRL's unshared
computation, in the same process; prints each mode's time and its ratio (unshared / mode), and the
update's share of its roofline.

    python benchmarks/bench_update.py [--model models/base]
        [--data results/data/suite_rl.jsonl.gz] [--method grpo] [--repeats 7] [--threads 1]
        [--runs 2 4 8] [--groups 8]

Modes: TRL's computation; the shared prompt with pass 2 in 1 length run (as wide as the micro-batch's
longest completion) and in each of ``--runs`` runs (``maxk.train.shared_prompt.RUNS`` is the default), all
with the attention ``$MAXK_TRAIN_KERNEL`` picks (``maxk.train.native_attention``: C or torch's SDPA) and the
default LM head (``maxk.train.shared_prompt.HEAD``); at the default runs with the other head (TRL's fused
kernel or ``head_logps``), with torch's attention and TRL's head (the update before the C
kernels), and with that SDPA given the key/value heads as they are (``enable_gqa``, transformers'
``TRANSFORMERS_SDPA_FORCE_GQA``) instead of repeated to the query heads. Embedded shape: 8
groups x 8 completions per micro-batch (``train.per_device_train_batch_size``), the prompts of 8 suite
problems built with ``maxk.data.prompts.build_prompt``, completions of 16 to
``train.max_completion_length`` (96) random tokens. The model is the base the embedded default samples
(``models/base``) unless ``--model`` names another; where its path does not exist, a random Qwen2 of the
embedded base's sizes (``base_model.model``) with a tokenizer trained as ``maxk base`` trains it (on the
SFT split's prompts and references). Also times the no-grad log-prob pass of the same micro-batch (what
the old-policy and reference passes cost per micro-batch).

Roofline: every linear layer's forward product and its two backward products at the micro-batch's
rows x completion width, timed alone on the same threads; the update's useful FLOP (each prompt once,
completion tokens without their padding, attention over the mean context) per second is printed as a
share of it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from roofline import default_model, linear_flop_per_token, roofline_line, training_roofline  # noqa: E402

from maxk.hf_hub import go_offline  # noqa: E402

go_offline()

#: transformers' switch for passing SDPA the key/value heads as they are (``enable_gqa``) where it would
#: repeat them to the query heads (on a CPU whenever there is an attention mask)
GQA_ENV = "TRANSFORMERS_SDPA_FORCE_GQA"


def build_model(cfg: dict, directory: Path) -> str:
    """A random Qwen2 of ``base_model.model``'s sizes and a tokenizer trained like ``maxk base``'s."""
    from maxk.data.prompts import build_messages
    from maxk.io import read_jsonl
    from maxk.tiny import init_model, save, train_tokenizer
    from maxk.train.base import sft_completion

    bm = cfg["base_model"]
    sft = ROOT / f"results/data/{bm['sft']['dataset']}.jsonl.gz"
    texts = []
    for _, p in read_jsonl(sft):
        texts.extend(m["content"] for m in build_messages(p, cfg.get("prompt")))
        texts.append(sft_completion(p["reference"]))
    tok = train_tokenizer(texts, **bm["tokenizer"])
    return str(save(init_model(tok, seed=cfg["seed"], **bm["model"]), tok, directory))


def micro_batch(tokenizer, problems, cfg, n: int, max_len: int, seed: int):
    """One micro-batch of whole groups as TRL's loss reads it (prompts left-padded, completions
    right-padded with the pad token, ``completion_mask`` 0 after each completion's end)."""
    import torch

    from maxk.data.prompts import build_prompt

    rng = random.Random(seed)
    prompts = [build_prompt(p, tokenizer, config=cfg.get("prompt")) for p in problems]
    enc = tokenizer(prompts, add_special_tokens=False, padding=True, return_tensors="pt")
    rows = len(problems) * n
    lengths = [rng.randint(16, max_len) for _ in range(rows)]
    lengths[rng.randrange(rows)] = max_len  # TRL pads to the longest completion
    special = set(tokenizer.all_special_ids)
    vocab = [t for t in range(len(tokenizer)) if t not in special]
    completion_ids = torch.full((rows, max_len), tokenizer.pad_token_id)
    completion_mask = torch.zeros(rows, max_len, dtype=torch.long)
    for r, length in enumerate(lengths):
        completion_ids[r, :length] = torch.tensor(rng.choices(vocab, k=length))
        completion_mask[r, :length] = 1
    gen = torch.Generator().manual_seed(seed)
    return {
        "prompt_ids": enc["input_ids"].repeat_interleave(n, 0),
        "prompt_mask": enc["attention_mask"].repeat_interleave(n, 0),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.randn(rows, generator=gen),
        "rewards": torch.rand(rows, generator=gen),
        "group_ids": torch.arange(rows) // n,
        "num_items_in_batch": completion_mask.sum(),
    }


def logp_pass(trainer, model, batch):
    """The no-grad per-token log-probs of ``batch``'s completions (as the old/ref passes compute them)."""
    import torch

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    with torch.no_grad():
        return trainer._get_per_token_logps_and_entropies(model, ids, mask, batch["completion_ids"].shape[1])[
            0
        ]


def update(trainer, batch) -> tuple[float, dict]:
    """Seconds of one forward + backward of the loss, and the parameter gradients it left."""
    model = trainer.model
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    trainer._compute_loss(model, batch).backward()
    seconds = time.perf_counter() - start
    return seconds, {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}


def update_flop(cfg, batch, n: int) -> float:
    """FLOP of one update's useful work: forward + backward (3 x 2 x the linear layers' weights per
    token) over each group's prompt once and every completion token (not its padding), plus attention
    (3 x 4 x layers x hidden x mean context per token)."""
    h, layers = cfg.hidden_size, cfg.num_hidden_layers
    prompt = int(batch["prompt_mask"].sum()) // n
    completion = int(batch["completion_mask"].sum())
    context = prompt / (batch["prompt_ids"].shape[0] // n) + completion / batch["completion_ids"].shape[0] / 2
    tokens = prompt + completion
    return 3 * tokens * (linear_flop_per_token(cfg) + 4 * layers * h * context)


def timed(fn, *args) -> float:
    """Seconds one call of ``fn(*args)`` takes."""
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="the base model (default: the config's, models/base)")
    ap.add_argument("--data", default=str(ROOT / "results/data/suite_rl.jsonl.gz"))
    ap.add_argument("--method", default="grpo")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the embedded train job: 1)")
    ap.add_argument("--runs", type=int, nargs="+", default=[2, 4, 8], help="pass 2's length runs to time")
    ap.add_argument(
        "--groups",
        type=int,
        default=None,
        help="groups per micro-batch (default: the config's per_device_train_batch_size / n)",
    )
    a = ap.parse_args()
    if a.groups is not None and a.groups < 1:
        ap.error(f"--groups must be at least 1, got {a.groups}")
    if a.model is None:
        a.model = default_model()

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    import maxk.train.shared_prompt as sp
    from maxk.config import job_config, load_config
    from maxk.io import read_jsonl
    from maxk.train import native_attention
    from maxk.train.grpo import MaxKGRPOConfig, MaxKGRPOTrainer
    from maxk.train.launch import grpo_kwargs, run_config

    torch.set_num_threads(a.threads)
    cfg = load_config(ROOT / "config/config.yaml")
    tmp = Path(tempfile.mkdtemp(prefix="bench-update-"))
    model_dir = a.model
    if not Path(model_dir).is_dir():
        t0 = time.perf_counter()
        model_dir = build_model(cfg, tmp / "base")
        took = time.perf_counter() - t0
        print(f"(no base model at {a.model}: random Qwen2 of the embedded sizes, {took:.0f}s)")
    train = job_config({"seed": cfg["seed"], "train": dict(cfg["train"])}, ("train",))["train"]
    effective = run_config({**train, "max_steps": 1}, {"method": a.method})
    kw = grpo_kwargs(effective, output_dir=str(tmp / "out"), seed=cfg["seed"], use_cpu=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    trainer = MaxKGRPOTrainer(
        model=model_dir,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=MaxKGRPOConfig(**kw),
        train_dataset=Dataset.from_dict({"prompt": ["x"]}),
        processing_class=tokenizer,
    )
    n, rows = trainer.num_generations, trainer.args.per_device_train_batch_size
    if a.groups is not None:
        rows = a.groups * n
    problems = [row for _, row in read_jsonl(a.data)]
    problems = random.Random(cfg["seed"]).sample(problems, rows // n)
    batch = micro_batch(tokenizer, problems, cfg, n, trainer.max_completion_length, cfg["seed"])
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    batch["old_per_token_logps"] = logp_pass(trainer, trainer.model, batch)
    if trainer.ref_model is not None:
        batch["ref_per_token_logps"] = logp_pass(trainer, trainer.ref_model, batch)

    share = trainer._can_share_prompts
    default_runs, default_head = sp.RUNS, sp.HEAD
    kernel = native_attention.kernel_for(trainer.model)
    resolved = default_head if default_head != "auto" else "plain" if kernel == "native" else "fused"
    # mode -> (predicate, pass 2's length runs, its LM head, GQA inside SDPA, $MAXK_TRAIN_KERNEL): TRL's
    # computation, then the shared prompt at 1 run (one pass 2 as wide as the micro-batch's longest
    # completion) and at each of --runs, at the default runs with each other head, with torch's attention
    # and TRL's head, and that with the key/value heads passed to SDPA as they are (transformers'
    # TRANSFORMERS_SDPA_FORCE_GQA; else it repeats them to the query heads on a CPU)
    modes = {"unshared (TRL)": (lambda *args, **kw: False, 1, default_head, False, kernel)}
    modes |= {
        f"shared, {r} run{'s' * (r > 1)}": (share, r, default_head, False, kernel)
        for r in sorted({1, *a.runs})
    }
    for other in ("fused", "plain"):
        if other != resolved:
            modes[f"shared, {default_runs} runs, {other} head"] = (share, default_runs, other, False, kernel)
    if kernel == "native":
        modes[f"shared, {default_runs} runs, torch attention"] = (
            share,
            default_runs,
            "fused",
            False,
            "torch",
        )
    modes[f"shared, {default_runs} runs, GQA in SDPA"] = (share, default_runs, "fused", True, "torch")
    force_gqa, chosen = os.environ.get(GQA_ENV), os.environ.get(native_attention.KERNEL_ENV)
    times = {m: [] for m in modes}
    nograd = {m: [] for m in modes}
    grads = {}
    for rep in range(a.repeats + 1):  # the first round warms up; modes interleaved against drift
        for mode, (predicate, runs, head, gqa, kern) in modes.items():
            trainer._can_share_prompts, sp.RUNS, sp.HEAD = predicate, runs, head
            os.environ[GQA_ENV] = "1" if gqa else "0"
            os.environ[native_attention.KERNEL_ENV] = kern
            seconds, grads[mode] = update(trainer, batch)
            fwd = timed(logp_pass, trainer, trainer.model, batch)
            if rep:
                times[mode].append(seconds)
                nograd[mode].append(fwd)
    trainer._can_share_prompts, sp.RUNS, sp.HEAD = share, default_runs, default_head
    for name, value in ((GQA_ENV, force_gqa), (native_attention.KERNEL_ENV, chosen)):
        if value is None:
            os.environ.pop(name)
        else:
            os.environ[name] = value
    trl = grads.pop("unshared (TRL)")
    diff = max((got[k] - g).abs().max().item() for got in grads.values() for k, g in trl.items())

    prompt_tokens = int(batch["prompt_mask"].sum()) // n
    print(
        f"micro-batch: {rows // n} groups x {n} completions; prompt width {batch['prompt_ids'].shape[1]} "
        f"(mean prompt {prompt_tokens / (rows // n):.0f} tokens), completion width "
        f"{batch['completion_ids'].shape[1]} (mean {batch['completion_mask'].sum().item() / rows:.0f})"
    )
    print(f"model: {sum(p.numel() for p in trainer.model.parameters()):,} parameters; method {a.method}; "
          f"threads {a.threads}; median of {a.repeats}; attention {kernel}, head {resolved}")  # fmt: skip
    print(f"max |grad difference| shared vs unshared: {diff:.2e}")
    base, nb = statistics.median(times["unshared (TRL)"]), statistics.median(nograd["unshared (TRL)"])
    print(f"  {'':30s} {'update (fwd+bwd)':>22s} {'no-grad log-probs':>22s}   (ratio: TRL / mode)")
    default_mode = next(
        m
        for m in modes
        if modes[m][1:] == (default_runs, default_head, False, kernel) and m != "unshared (TRL)"
    )
    for mode in modes:
        up, ng = statistics.median(times[mode]), statistics.median(nograd[mode])
        mark = " (default)" if mode == default_mode else ""
        print(f"  {mode:30s} {up:9.3f}s  {base / up:5.2f}x    {ng:9.3f}s  {nb / ng:5.2f}x{mark}")
    flop = update_flop(trainer.model.config, batch, n)
    up = statistics.median(times[default_mode])
    width = batch["completion_ids"].shape[1]
    call_rows = -(-rows // default_runs) * width  # one length run of pass 2 at the full width
    roof = training_roofline(trainer.model, call_rows)
    print(
        f"roofline: the update's matrix products (forward and both backward products of every linear "
        f"layer at one length run's {-(-rows // default_runs)} x {width} rows): {roof / 1e9:.1f} GFLOP/s "
        f"on {a.threads} thread(s)"
    )
    print(
        f"update (default): {flop / 1e9:.2f} GFLOP of useful work (completion tokens and each prompt once) "
        f"in {up:.3f}s = {flop / up / 1e9:.1f} GFLOP/s = {flop / up / roof:.0%} of the roofline"
    )
    shape = (
        f"{rows // n} groups x {n} completions, 1 thread"
        if a.threads == 1
        else f"{rows} rows, {a.threads} threads"
    )
    roofline_line("policy update (forward + backward)", shape, flop / up, roof)
    # MaxKGRPOTrainer's 5th override: at PPO > 1 the old log-probs come from iteration 1's forward pass
    iters, ng = trainer.num_iterations, statistics.median(nograd[default_mode])
    if iters > 1:
        ref = ng if trainer.beta else 0.0
        trl_passes, ours = ng + ref + iters * up, ref + iters * up
        print(
            f"per micro-batch of a generation batch at {iters} PPO iterations: TRL's old-policy pass"
            f"{' + reference pass' if ref else ''} + {iters} updates {trl_passes:.3f}s; the old log-probs "
            f"from iteration 1 ({'reference pass + ' if ref else ''}{iters} updates) {ours:.3f}s: "
            f"{trl_passes / ours:.2f}x"
        )


if __name__ == "__main__":
    main()
