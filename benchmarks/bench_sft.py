"""The base model's SFT step (``maxk base``, TRL's SFTTrainer) at several micro-batch sizes of one
optimizer batch, against the roofline of its own matrix products, in the same process.

    python benchmarks/bench_sft.py [--data results/data/suite_sft.jsonl.gz] [--steps 12]
        [--micro 16 8 4] [--threads T]

Each mode trains the same fresh model (the embedded base's tokenizer, trained on the whole split, and
sizes, ``base_model``; the base job's numerics, ``maxk.train.base.torch_numerics``) for
``--steps`` optimizer steps of ``base_model.sft.batch_size`` examples from the same seed, the batch
split into micro-batches of ``--micro`` examples (``gradient_accumulation_steps`` = batch / micro; each
micro-batch padded to its own longest example). The gradient is the same sum over the batch's
completion tokens in every mode (transformers normalises by the tokens of the whole optimizer batch), so
the modes differ only in float rounding: the bench prints the largest parameter difference after the
last step against the first mode. Per mode: the median step time (the first step left out), the
useful FLOP (forward + backward of every linear layer and attention over each example's own tokens, no
padding) per second, and its share of the roofline: every linear layer's forward and two backward
products at the rows of one micro-batch of the config's (``base_model.sft.micro_batch_size``), timed
alone on the same threads.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from roofline import linear_flop_per_token, roofline_line, training_roofline  # noqa: E402

from maxk.hf_hub import go_offline  # noqa: E402

go_offline()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "results/data/suite_sft.jsonl.gz"), help="the SFT split")
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per mode")
    ap.add_argument(
        "--micro", type=int, nargs="+", default=[16, 8, 4], help="micro-batch sizes (the first: the baseline)"
    )
    ap.add_argument("--threads", type=int, help="torch threads (default: resources.base_model.threads)")
    a = ap.parse_args()
    if a.threads is None:
        from maxk.config import load_config

        a.threads = load_config(ROOT / "config/config.yaml")["resources"]["base_model"]["threads"]
    if not Path(a.data).exists():
        raise SystemExit(f"{a.data} not found: build it with `snakemake --cores all {Path(a.data).name}`")

    from maxk.train.base import torch_numerics

    with torch_numerics(a.threads):  # the base job's threads and deterministic algorithms
        run(a)


def run(a: argparse.Namespace) -> None:
    """Train each mode and print its step time and roofline share (see the module docstring)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from maxk.config import job_config, load_config
    from maxk.data.prompts import build_prompt
    from maxk.io import read_jsonl
    from maxk.tiny import init_model, train_tokenizer
    from maxk.train.base import _tokenizer_texts, sft_arguments, sft_completion
    from maxk.train.config import SFTSettings

    cfg = load_config(ROOT / "config/config.yaml")
    bm = job_config({"seed": cfg["seed"], "base_model": dict(cfg["base_model"])}, ("base_model",))[
        "base_model"
    ]
    sft, seed = bm["sft"], cfg["seed"]
    settings = SFTSettings.from_config(sft)
    batch = sft["batch_size"]
    if any(batch % m for m in a.micro):
        raise SystemExit(f"every --micro must divide base_model.sft.batch_size ({batch}), got {a.micro}")
    every = [row for _, row in read_jsonl(a.data) if row.get("reference")]
    tok = train_tokenizer(
        _tokenizer_texts(every, cfg["prompt"]), **bm["tokenizer"]
    )  # as `maxk base` trains it
    train = every[: batch * a.steps]
    prompts = [build_prompt(p, tok, config=cfg["prompt"]) for p in train]
    completions = [sft_completion(p["reference"]) for p in train]
    data = Dataset.from_dict({"prompt": prompts, "completion": completions})
    tokens = sum(len(tok(p + c)["input_ids"]) for p, c in zip(prompts, completions, strict=True)) / len(train)

    class StepTimes(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.start = 0.0

        def on_step_begin(self, args, state, control, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.start)

    results, first = {}, None
    tmp = tempfile.mkdtemp(prefix="bench-sft-")
    for micro in a.micro:
        model = init_model(tok, seed=seed, **bm["model"])
        sft_cfg = dataclasses.replace(settings, max_steps=a.steps, micro_batch_size=micro)
        args = SFTConfig(
            **sft_arguments(sft_cfg, seed, f"{tmp}/{micro}", cuda=False) | {"logging_steps": a.steps}
        )
        timer = StepTimes()
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=data, processing_class=tok, callbacks=[timer]
        )
        trainer.train()
        params = {k: p.detach().clone() for k, p in trainer.model.named_parameters()}
        if first is None:
            first = params
        diff = max((params[k] - v).abs().max().item() for k, v in first.items())
        results[micro] = (statistics.median(timer.times[1:]), diff)

    model = init_model(tok, seed=seed, **bm["model"])
    flop = batch * tokens * 3 * (linear_flop_per_token(model.config) + 4 * bm["model"]["num_hidden_layers"]
                                 * bm["model"]["hidden_size"] * tokens / 2)  # fmt: skip
    configured = settings.micro_batch_size or batch
    rows = int(configured * tokens)  # one micro-batch of the config's, at the mean length
    roof = training_roofline(model, rows)
    print(
        f"SFT batch {batch} examples, mean {tokens:.0f} tokens; threads {a.threads}; {a.steps} steps per mode"
    )
    print(f"roofline: linear layers' forward + backward products at {rows} rows (a micro-batch of "
          f"{configured}, base_model.sft.micro_batch_size): {roof / 1e9:.1f} GFLOP/s")  # fmt: skip
    base = results[a.micro[0]][0]
    for micro, (step, diff) in results.items():
        mark = " (config)" if micro == configured else ""
        print(
            f"  micro-batch {micro:3d} x {batch // micro:2d}: {step:6.3f} s/step  {base / step:5.2f}x  "
            f"{flop / step / 1e9:6.1f} GFLOP/s = {flop / step / roof:4.0%} of the roofline  "
            f"max |param diff| {diff:.1e}{mark}"
        )
    if configured in results:
        shape = f"{batch} examples in micro-batches of {configured}, {a.threads} thread(s)"
        roofline_line("base model SFT step", shape, flop / results[configured][0], roof)


if __name__ == "__main__":
    main()
