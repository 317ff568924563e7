"""Numerics, not speed: how far each ATen kernel path's float32 SFT drifts from exact arithmetic.

    python benchmarks/numerics_kernel_paths.py [--data results/data/suite_sft.jsonl.gz] [--steps 40]
        [--paths default avx2 avx512] [--threads 2] [--seed 1234]

Another instruction set builds another base model (``maxk.train.base.torch_numerics``): ATen picks its
vectorised kernels by ``ATEN_CPU_CAPABILITY``, and SFT amplifies the last bits. This script asks whether
one path is *less accurate* than another, or only *different*. Each path runs in its own interpreter
(the variable is read once, at import), from the same fresh model (the embedded base's tokenizer and
sizes, ``base_model``, seeded), on the same batches of the SFT split (``base_model.sft.batch_size``
examples, loss on the completion only), with AdamW at ``base_model.sft.learning_rate`` (constant: a
diagnostic, not the base's schedule), twice: in float32 and in float64, the loss computed in the same
dtype. Float64 is the reference: its rounding is 2^-29 of float32's, so two paths' float64 runs agree to
far below anything printed, and each float32 run's distance from its float64 twin is that path's error.

Prints, per path: the first step's loss and gradient error (relative norm against float64), and after
each logged step the weights' relative distance from the float64 trajectory; then each pair of paths'
float32 weights against each other. A path whose error is of the same size as the others' is as
accurate; a path that drifts from exact arithmetic faster would be a defect of its kernels. Paths the
CPU lacks are skipped (ATen falls back to the best it has, which would repeat another path).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LOG_EVERY = 10
#: ATen's x86 kernel paths, lowest first
PATHS = ("default", "avx2", "avx512")


def batches(data: str, seed: int, steps: int, size: int, tok, prompt_cfg, max_length: int):
    """``steps`` batches of ``size`` SFT examples (seeded order): ``(input_ids, labels, attention)``."""
    import random

    import torch

    from maxk.data.prompts import build_prompt
    from maxk.io import read_jsonl
    from maxk.train.base import sft_completion

    rows = [r for _, r in read_jsonl(data) if r.get("reference")]
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        ids, labels = [], []
        for p in rng.sample(rows, size):
            prompt = tok(build_prompt(p, tok, config=prompt_cfg), add_special_tokens=False)["input_ids"]
            done = tok(sft_completion(p["reference"]), add_special_tokens=False)["input_ids"]
            done = [*done, tok.eos_token_id]
            ids.append((prompt + done)[:max_length])
            labels.append(([-100] * len(prompt) + done)[:max_length])
        width = max(map(len, ids))
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        out.append(
            (
                torch.tensor([x + [pad] * (width - len(x)) for x in ids]),
                torch.tensor([y + [-100] * (width - len(y)) for y in labels]),
                torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids]),
            )
        )
    return out


def logged_steps(steps: int) -> list[int]:
    """The steps whose weights are compared: every ``LOG_EVERY``-th, and the last."""
    return [s for s in range(1, steps + 1) if s % LOG_EVERY == 0 or s == steps]


def loss_of(model, batch):
    """Mean next-token cross-entropy over the completion tokens, in the model's dtype."""
    import torch.nn.functional as F

    ids, labels, attention = batch
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def base_settings(seed: int):
    """The embedded config's ``(config, base_model settings)`` at ``seed``."""
    from maxk.config import job_config, load_config
    from maxk.train.config import BaseModelConfig

    config = job_config({**load_config(), "seed": seed}, ("base_model",))
    return config, BaseModelConfig.from_config(config["base_model"])


def initial_model(data: str, seed: int, directory: Path) -> None:
    """The fresh model every path starts from, saved once (initialisation draws random numbers with
    vectorised kernels too, so each path would otherwise start from other weights)."""
    from maxk.io import read_jsonl
    from maxk.tiny import init_model, save, train_tokenizer
    from maxk.train.base import _tokenizer_texts

    config, bm = base_settings(seed)
    train = [r for _, r in read_jsonl(data) if r.get("reference")]
    tok = train_tokenizer(_tokenizer_texts(train, config["prompt"]), vocab_size=bm.tokenizer.vocab_size)
    save(init_model(tok, seed=seed, **(bm.model or {})), tok, directory)


def child(a: argparse.Namespace) -> None:
    """One path: float32 and float64 trajectories from the model in ``a.init``, saved to ``a.out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, bm = base_settings(a.seed)
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.init)
    data = batches(a.data, a.seed, a.steps, bm.sft.batch_size, tok, config["prompt"], bm.sft.max_length)
    result: dict = {}
    weights: dict = {}
    logged = set(logged_steps(a.steps))
    for dtype in (torch.float32, torch.float64):
        model = AutoModelForCausalLM.from_pretrained(a.init, dtype=torch.float32).to(dtype)
        model.config._attn_implementation = "sdpa"
        opt = torch.optim.AdamW(model.parameters(), lr=bm.sft.learning_rate, weight_decay=bm.sft.weight_decay)
        snaps = []
        for step, batch in enumerate(data, start=1):
            opt.zero_grad()
            loss = loss_of(model, batch)
            loss.backward()
            if step == 1:
                result[f"grad1_{dtype}"] = torch.cat([p.grad.flatten().double() for p in model.parameters()])
                result[f"loss1_{dtype}"] = loss.item()
            opt.step()
            if step in logged:
                snaps.append(torch.cat([p.detach().flatten().double() for p in model.parameters()]))
        weights[str(dtype)] = torch.stack(snaps)
    result["weights"] = weights
    torch.save(result, a.out)


def rel(x, y) -> float:
    return float((x - y).norm() / y.norm())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "results/data/suite_sft.jsonl.gz"), help="the SFT split")
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps per trajectory")
    ap.add_argument("--paths", nargs="+", default=list(PATHS), help="ATEN_CPU_CAPABILITY values")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the base job's: 2)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", help=argparse.SUPPRESS)  # the child's output file
    ap.add_argument("--init", help=argparse.SUPPRESS)  # the child's initial model
    a = ap.parse_args()
    if a.out:
        return child(a)

    import torch

    best = torch.backends.cpu.get_cpu_capability().lower()
    paths = [p for p in a.paths if best not in PATHS or PATHS.index(p) <= PATHS.index(best)]
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp) / "init"
        initial_model(a.data, a.seed, init)
        for path in paths:
            out = Path(tmp) / f"{path}.pt"
            cmd = [sys.executable, __file__, "--data", a.data, "--steps", str(a.steps), "--threads",
                   str(a.threads), "--seed", str(a.seed), "--out", str(out), "--init", str(init)]  # fmt: skip
            subprocess.run(cmd, check=True, env={**os.environ, "ATEN_CPU_CAPABILITY": path})
            runs[path] = torch.load(out)
    f32, f64 = str(torch.float32), str(torch.float64)
    ref = runs[paths[0]]["weights"][f64]
    steps = logged_steps(a.steps)
    print(f"CPU's best path: {best}; {a.steps} AdamW steps, SFT split, seed {a.seed}, {a.threads} threads")
    print("float64 runs of every path against the first path's: " + ", ".join(
        f"{p} {rel(r['weights'][f64][-1], ref[-1]):.1e}" for p, r in runs.items()))  # fmt: skip
    head = f"{'path':8} {'step-1 loss err':>15} {'step-1 grad err':>15}"
    print(f"{head}  weights' distance from float64 at steps " + " ".join(map(str, steps)))
    for p, r in runs.items():
        loss_err = abs(r[f"loss1_{f32}"] - r[f"loss1_{f64}"])
        grad_err = rel(r[f"grad1_{f32}"], r[f"grad1_{f64}"])
        drift = [rel(r["weights"][f32][i], r["weights"][f64][i]) for i in range(len(steps))]
        print(f"{p:8} {loss_err:15.2e} {grad_err:15.2e}  " + " ".join(f"{d:.1e}" for d in drift))
    names = list(runs)
    for i, p in enumerate(names):
        for q in names[i + 1 :]:
            d = [rel(runs[p]["weights"][f32][j], runs[q]["weights"][f32][j]) for j in range(len(steps))]
            print(f"float32 {p} against {q}: " + " ".join(f"{x:.1e}" for x in d))
    final = {p: rel(r["weights"][f32][-1], r["weights"][f64][-1]) for p, r in runs.items()}
    print("NUMERICS " + json.dumps(final))


if __name__ == "__main__":
    main()
