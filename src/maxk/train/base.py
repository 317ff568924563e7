"""``maxk base``: the embedded base model, built from scratch to PARTIAL competence.

Steps (all sizes in ``config['base_model']``):

1. a byte-level BPE tokenizer trained with ``tokenizers`` on the SFT examples' statements and reference
   solutions, with a ChatML chat template (``maxk.tiny``);
2. a small random ``Qwen2ForCausalLM``;
3. supervised fine-tuning with TRL's ``SFTTrainer`` on (prompt = ``build_prompt(problem, tokenizer)``,
   completion = the reference in a ```python fence), loss on the completion only; every example is
   listed in ``trained_on.json`` (the contamination audit reads it);
4. a competence check on the test split: ``samples`` completions per problem at temperature 1
   (``maxk.train.sampling``: maxk's decode loop, the pipeline's prompt and extractor), scored in the
   sandbox; pass@k for k = 1, 2, 4, ..., n, the mean reward and a few completions go into
   ``manifest.json`` and the log;
5. with ``base_model.calibration``, the operating-point check (``calibration``): the same problems at a
   lower temperature and the call-format set, each item of the block pass/fail against its band.

The directory is an ordinary HF model directory (``AutoModelForCausalLM``/``AutoTokenizer``), published
whole (built beside the target, then renamed). The SFT curve (one row per logged step) goes to ``metrics``
(the workflow: ``results/seed{S}/metrics/train/base.csv``, beside the RL runs' curves).

The torch thread count is part of the result (``torch_numerics``): it is ``base_model.threads``, which the
workflow sets from ``resources.base_model.threads``, never from the cores Snakemake grants the job.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from maxk.io import atomic_open, read_jsonl, write_json

FENCE = "```python\n{code}```"


def sft_completion(reference: str) -> str:
    """The SFT target for a reference solution (TRL appends the eos token)."""
    return FENCE.format(code=reference if reference.endswith("\n") else reference + "\n")


def _tokenizer_texts(problems: list[dict[str, Any]], prompt_cfg: dict[str, Any] | None) -> list[str]:
    from maxk.data.prompts import build_messages

    texts = []
    for p in problems:
        texts.extend(m["content"] for m in build_messages(p, prompt_cfg))
        texts.append(sft_completion(p["reference"]))
    return texts


def competence(rewards: list[list[float]], passed: list[list[float]]) -> dict[str, Any]:
    """Summary of a ``[problems, n]`` check: pass@k (unbiased, Chen et al.) for k = 1, 2, 4, ..., n, the
    mean reward (fraction of tests passed) and ``pass@n / pass@1``. Every number is computed from the ``n``
    samples drawn, none extrapolated (pass@n is the fraction of problems solved at least once)."""
    import numpy as np

    from maxk.metrics import pass_at_k_batch, powers_of_two

    n = len(passed[0])
    ks = powers_of_two(n)
    if ks[-1] != n:
        ks.append(n)
    pk = pass_at_k_batch(np.asarray(passed, dtype=np.float64), ks).mean(axis=0)
    out: dict[str, Any] = {f"pass@{k}": round(float(v), 4) for k, v in zip(ks, pk, strict=True)}
    out["mean_reward"] = round(float(np.mean(rewards)), 4)
    out["ratio_pass@n_pass@1"] = round(float(pk[-1] / pk[0]), 2) if pk[0] > 0 else None
    out.update(samples=n, problems=len(passed))
    return out


@contextlib.contextmanager
def torch_numerics(threads: int) -> Iterator[dict[str, Any]]:
    """torch's numerics for one build, restored on exit: ``threads`` intra-op threads and deterministic
    algorithms. Yields what the build ran with (``manifest.json`` records it).

    Same data, config, seed, thread count and CPU type: the same weights, curve and every score
    downstream. What changes them, measured on the end-to-end test's base (tests/workflow/
    config_small.yaml; a 2-core Xeon with AVX-512, torch 2.13 CPU, MKL 2024.2, oneDNN 3.12):

    - the thread count: 1 and 2 threads give other weights, each the same bytes when rebuilt (a matmul's
      reduction is split by thread, and SFT amplifies the last bits: on the default's seed 1234, pass@1
      0.150 at one thread and 0.217 at two, config/README.md). So it is a config value, never the cores
      Snakemake grants: ``--cores 1`` only makes the job slower;
    - the CPU type: ATen's vectorised kernels are chosen by instruction set (``ATEN_CPU_CAPABILITY`` =
      ``default``, ``avx2`` and ``avx512`` gave three different weights; unset = ``avx512`` here) and so is
      MKL's GEMM (``MKL_CBWR=AVX2`` and ``MKL_CBWR=COMPATIBLE`` each gave other weights); oneDNN is not
      on this path (``DNNL_MAX_CPU_ISA=AVX2``: the same bytes). Neither is pinned: a pin changes the
      results of every machine above the pinned level (the documented ones included), ``avx2`` would
      fault on a CPU without AVX2 and means nothing on Arm, and no second CPU type was at hand to show
      that a pin makes two types agree. ``ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 snakemake ...`` tries
      it (jobs inherit the environment; the manifest records both);
    - not deterministic algorithms: CPU kernels are deterministic at a fixed thread count already (the
      same bytes with ``torch.use_deterministic_algorithms`` on and off, at 1 and at 2 threads); the
      switch is on so that a kernel without a deterministic version (CUDA's, where a GPU builds the
      base) says so in the log. Its companion ``torch.utils.deterministic.fill_uninitialized_memory``
      is off: it fills every new tensor with NaN (a guard against reading memory never written, which
      no result here does), and TRL's chunked log-prob head allocates large buffers at every step, so
      it doubled the SFT's time (``benchmarks/bench_sft.py``: 0.79 against 0.36 s per step).
    """
    import torch

    before = (
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    torch.set_num_threads(int(threads))
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield {
            "threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **{k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR") if os.environ.get(k)},
        }
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1], warn_only=before[2])
        torch.utils.deterministic.fill_uninitialized_memory = before[3]


#: the first columns of the SFT curve; every other key TRL logs follows, sorted
CURVE_COLUMNS = ("step", "epoch", "loss", "mean_token_accuracy", "learning_rate", "grad_norm")


def write_sft_curve(path: str | os.PathLike[str], log_history: list[dict[str, Any]]) -> int:
    """The SFT curve from the trainer's ``log_history``: one row per logged step (the first, then every
    ``logging_steps``), the final summary left out. Returns the row count."""
    rows = [entry for entry in log_history if "loss" in entry]
    extra = sorted({k for r in rows for k in r} - set(CURVE_COLUMNS))
    with atomic_open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[*CURVE_COLUMNS, *extra], restval="")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def _report_calibration(block: dict[str, Any]) -> None:
    """Print every calibration item; a loud warning (the run goes on) when one misses its band."""
    import sys

    for item in block["items"]:
        print(f"calibration {item['name']}: {item['value']} band {item['band']} "
              f"{'ok' if item['pass'] else 'MISSED'}", flush=True)  # fmt: skip
    if not block["passes"]:
        missed = ", ".join(i["name"] for i in block["items"] if not i["pass"])
        bar = "!" * 78
        msg = f"the base model misses its operating point ({missed}); the run goes on, and the claims say so"
        print(f"{bar}\nWARNING (maxk base): {msg}\n{bar}", file=sys.stderr, flush=True)


def calibration(
    check: dict[str, Any],
    sharpened: dict[str, Any] | None,
    call: dict[str, Any] | None,
    bands: dict[str, Any],
) -> dict[str, Any]:
    """The operating-point check of the base model: one item per band of ``base_model.calibration``.

    ``check``: ``competence()`` of the main check (evaluation set, temperature 1, n samples);
    ``sharpened``: of the same problems at the lower temperature; ``call``: of the call-format set.
    Items: ``pass_at_1`` and ``mean_reward`` inside their ``[low, high]`` bands, ``pass@n >=
    large_k_ratio * pass@1`` (there is something for large k to lose), ``call_pass_at_1 >=`` its
    minimum, and ``pass@1`` at the lower temperature above temperature 1 by ``sharpen_gain`` (there
    is something to sharpen). Returns ``{"items": [{name, value, band, pass}], "passes": all pass}``;
    an item whose check was not run is left out.
    """
    n = check["samples"]
    p1, pn = check["pass@1"], check[f"pass@{n}"]
    items = [
        ("pass_at_1", p1, bands["pass_at_1"], bands["pass_at_1"][0] <= p1 <= bands["pass_at_1"][1]),
        (f"pass_at_{n}_over_pass_at_1", round(pn / p1, 3) if p1 else None, [bands["large_k_ratio"], None],
         p1 > 0 and pn >= bands["large_k_ratio"] * p1),
        ("mean_reward", check["mean_reward"], bands["mean_reward"],
         bands["mean_reward"][0] <= check["mean_reward"] <= bands["mean_reward"][1]),
    ]  # fmt: skip
    if call is not None:
        v = call["pass@1"]
        items.append(("call_pass_at_1", v, [bands["call_pass_at_1"], None], v >= bands["call_pass_at_1"]))
    if sharpened is not None:
        gain, low = round(sharpened["pass@1"] - p1, 4), bands["sharpen_gain"]
        items.append(("sharpen_gain_pass_at_1", gain, [low, None], gain >= low))
    rows = [{"name": k, "value": v, "band": b, "pass": bool(ok)} for k, v, b, ok in items]
    return {"items": rows, "passes": all(r["pass"] for r in rows)}


def build_base_model(
    config: dict[str, Any],
    *,
    train_data: str,
    test_data: str,
    out: str,
    call_data: str | None = None,
    metrics: str | None = None,
    scorer: Any = None,
) -> dict[str, Any]:
    """Build, fine-tune, check and publish the base model; returns the manifest written beside it.

    ``train_data``: the SFT examples (every one is listed in ``trained_on.json``); ``test_data``: the
    competence check's problems; ``call_data``: the call-format set of the calibration block (None:
    that item is left out); ``metrics``: the SFT curve's CSV (None: not written). Runs with
    ``base_model.threads`` torch threads (``torch_numerics``)."""
    from maxk.config import job_config
    from maxk.train.config import BaseModelConfig

    config = job_config(config, ("base_model",))  # every key left out at its default
    bm = BaseModelConfig.from_config(config["base_model"])
    with torch_numerics(bm.threads) as numerics:
        return _build(config, bm, numerics, train_data, test_data, out, call_data, metrics, scorer)


def sft_arguments(sft: Any, seed: int, output_dir: str, *, cuda: bool) -> dict[str, Any]:
    """TRL ``SFTConfig`` arguments of the base model's fine-tuning (``base_model.sft``, typed): fp32,
    no tracker, the curve logged every 10 steps from the first; each step ``batch_size`` examples in
    micro-batches of ``micro_batch_size`` whose gradients accumulate (``benchmarks/bench_sft.py``)."""
    micro = sft.micro_batch_size or sft.batch_size
    if sft.batch_size % micro:
        raise ValueError(
            f"base_model.sft.micro_batch_size={micro} must divide base_model.sft.batch_size={sft.batch_size}"
        )
    return {
        "output_dir": output_dir,
        "num_train_epochs": sft.epochs,
        "max_steps": sft.max_steps or -1,
        "learning_rate": sft.learning_rate,
        "lr_scheduler_type": "cosine",
        "warmup_steps": sft.warmup_steps,
        "weight_decay": sft.weight_decay,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": sft.batch_size // micro,
        "max_length": sft.max_length,
        "completion_only_loss": True,
        "packing": False,
        "seed": seed,
        "data_seed": seed,
        "logging_steps": 10,
        "logging_first_step": True,  # the curve's first point: step 1's loss
        "save_strategy": "no",
        "report_to": "none",  # the curve goes to ``metrics`` (write_sft_curve), no tracker
        "use_cpu": not cuda,
        "bf16": False,  # TRL's default is bf16, emulated (and 10x slower) on a CPU without native bf16
        "gradient_checkpointing": False,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }


def _build(
    config: dict[str, Any],
    bm: Any,
    numerics: dict[str, Any],
    train_data: str,
    test_data: str,
    out: str,
    call_data: str | None,
    metrics: str | None,
    scorer: Any,
) -> dict[str, Any]:
    import random

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from maxk.data.prompts import build_prompt
    from maxk.paths import dataset_name
    from maxk.provenance import write_provenance
    from maxk.tiny import init_model, save, train_tokenizer
    from maxk.train.run import write_trained_on
    from maxk.train.sampling import sample_scored

    seed, prompt_cfg = int(config["seed"]), config["prompt"]
    sft = bm.sft
    sft_arguments(sft, seed, "-", cuda=False)  # a micro-batch that does not divide the batch: fail now
    train = [row for _, row in read_jsonl(train_data) if row.get("reference")]
    if sft.max_examples and sft.max_examples < len(train):
        train = random.Random(seed).sample(train, sft.max_examples)
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    sizes = dataclasses.asdict(bm.tokenizer) if bm.tokenizer else {}
    sizes = {k: v for k, v in sizes.items() if v is not None}  # the rest: train_tokenizer's
    tok = train_tokenizer(_tokenizer_texts(train, prompt_cfg), **sizes)
    model = init_model(tok, seed=seed, **(bm.model or {}))
    timings["build_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    data = Dataset.from_dict(
        {
            "prompt": [build_prompt(p, tok, config=prompt_cfg) for p in train],
            "completion": [sft_completion(p["reference"]) for p in train],
        }
    )
    final = Path(out)
    work = final.with_name(f".tmp-{final.name}")
    shutil.rmtree(work, ignore_errors=True)
    args = SFTConfig(**sft_arguments(sft, seed, str(work / "sft"), cuda=torch.cuda.is_available()))
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    result = trainer.train()
    timings["sft_s"] = time.perf_counter() - t0
    shutil.rmtree(work / "sft", ignore_errors=True)
    model = trainer.model
    if metrics:
        write_sft_curve(metrics, trainer.state.log_history)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    last = logs[-1] if logs else {}
    last_log = {k: last[k] for k in ("loss", "mean_token_accuracy", "epoch") if k in last}
    save(model, tok, work)

    t0 = time.perf_counter()
    ev = bm.eval
    test = [row for _, row in read_jsonl(test_data)]
    test = random.Random(seed + 1).sample(test, min(ev.problems, len(test)))
    with contextlib.ExitStack() as stack:
        if scorer is None:
            from maxk.sandbox import Scorer

            scorer = stack.enter_context(Scorer(**config["sandbox"]))
        draw = {
            "scorer": scorer,
            "max_new_tokens": ev.max_new_tokens,
            "seed": seed,
            "prompt_cfg": prompt_cfg,
            "max_rows": ev.batch_size,
        }
        t1 = time.perf_counter()
        check = sample_scored(model, tok, test, samples=ev.samples, tag="base-eval", **draw)
        timings["eval_main_s"] = time.perf_counter() - t1
        cal = bm.calibration
        sharpened = call = None
        if cal:
            n, temp = cal["extra_samples"], cal["sharpen_temperature"]
            sharp = sample_scored(model, tok, test, samples=n, tag="base-sharpen", temperature=temp, **draw)
            sharpened = competence(sharp.rewards, sharp.passed)
            if call_data:
                calls = [row for _, row in read_jsonl(call_data)]
                calls = random.Random(seed + 2).sample(calls, min(ev.problems, len(calls)))
                called = sample_scored(model, tok, calls, samples=n, tag="base-call", **draw)
                call = competence(called.rewards, called.passed)
    timings["eval_s"] = time.perf_counter() - t0

    manifest = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tok),
        "sft_examples": len(train),
        "sft_steps": result.global_step,
        "sft_mean_loss": result.training_loss,
        "sft_last_log": last_log,
        "eval": {"dataset": ev.dataset, **competence(check.rewards, check.passed)},
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
        "torch": numerics,
    }
    if cal:
        manifest["eval_sharpened"] = {"temperature": cal["sharpen_temperature"], **sharpened}
        if call is not None:
            manifest["eval_call"] = {"dataset": dataset_name(str(call_data)), **call}
        manifest["calibration"] = calibration(manifest["eval"], sharpened, call, cal["bands"])
    for problem, rewards, texts in zip(test, check.rewards, check.texts, strict=True):
        for reward, text in list(zip(rewards, texts, strict=True))[: ev.log_examples]:
            print(f"--- {problem['id']} reward={reward:.2f}\n{text}", flush=True)
    print("competence:", json.dumps(manifest["eval"]), flush=True)
    if cal:
        _report_calibration(manifest["calibration"])
    write_json(work / "manifest.json", manifest)
    write_trained_on(work, train_data, train)
    write_provenance(
        work, config={k: config.get(k) for k in ("seed", "base_model", "prompt")}, seeds={"seed": seed}
    )
    if final.exists():
        shutil.rmtree(final)
    os.replace(work, final)
    return manifest
