"""``maxk base``: the embedded base model, built from scratch to PARTIAL competence.

Steps (all sizes in ``config['base_model']``):

1. a byte-level BPE tokenizer trained with ``tokenizers`` on the train split's statements and reference
   solutions, with a ChatML chat template (``maxk.train.tiny``);
2. a small random ``Qwen2ForCausalLM``;
3. supervised fine-tuning with TRL's ``SFTTrainer`` on (prompt = ``build_prompt(problem, tokenizer)``,
   completion = the reference in a ```python fence), loss on the completion only;
4. a competence check on the test split: ``samples`` completions per problem at temperature 1, scored in
   the sandbox with the same ``build_prompt``/``extract_program`` as generation; pass@k for k = 1, 2, 4, ...,
   n, the mean reward and a few completions go into ``manifest.json`` and the log (aim: 0.05 <= pass@1 <=
   0.5 and pass@256 >= 2 pass@1, so RL has something to trade between exploitation and exploration).

The directory is an ordinary HF model directory (``AutoModelForCausalLM``/``AutoTokenizer``), published
whole (built beside the target, then renamed).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from maxk.io import read_jsonl, write_json

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


def sample_and_score(
    model: Any,
    tokenizer: Any,
    problems: list[dict[str, Any]],
    *,
    samples: int,
    max_new_tokens: int,
    batch_size: int,
    scorer: Any,
    prompt_cfg: dict[str, Any] | None,
    seed: int,
    keep_examples: int = 0,
) -> dict[str, Any]:
    """Sample ``samples`` completions per problem at temperature 1 (top-p 1, no top-k) and score them.

    The prompt and program come from the same ``build_prompt`` / ``extract_program`` as generation and
    training use. Returns ``{"rewards": [problems, samples] fraction of tests passed, "passed": same shape,
    1.0 when every test passes, "examples": the first ``keep_examples`` completions of each problem with
    their rewards, "generate_s"/"score_s": time spent in each}`` (examples go into the log so a failing
    check can be read, not just counted).
    """
    import torch

    from maxk.data.prompts import build_prompt
    from maxk.generate.extract import extract_program

    torch.manual_seed(seed)
    model.eval()
    rewards: list[list[float]] = []
    passed: list[list[float]] = []
    examples: list[dict[str, Any]] = []
    gen_s = score_s = 0.0
    for problem in problems:
        t0 = time.perf_counter()
        prompt = build_prompt(problem, tokenizer, config=prompt_cfg)
        enc = tokenizer(prompt, return_tensors="pt")
        texts: list[str] = []
        while len(texts) < samples:
            m = min(batch_size, samples - len(texts))
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=m,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        t1 = time.perf_counter()
        scores = scorer.score([(problem, extract_program(t, problem)) for t in texts])
        gen_s, score_s = gen_s + t1 - t0, score_s + time.perf_counter() - t1
        rewards.append([float(s.reward) for s in scores])
        passed.append([float(s.total > 0 and s.passed == s.total) for s in scores])
        examples.extend(
            {"problem_id": problem["id"], "reward": rewards[-1][i], "completion": texts[i]}
            for i in range(min(keep_examples, len(texts)))
        )
    return {
        "rewards": rewards,
        "passed": passed,
        "examples": examples,
        "generate_s": gen_s,
        "score_s": score_s,
    }


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


def build_base_model(
    config: dict[str, Any], *, train_data: str, test_data: str, out: str, scorer: Any = None
) -> dict[str, Any]:
    """Build, fine-tune, check and publish the base model; returns the manifest written beside it."""
    import random

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from maxk.config import job_config
    from maxk.data.prompts import build_prompt
    from maxk.provenance import write_provenance
    from maxk.train.tiny import init_model, save, train_tokenizer

    config = job_config(config, ("base_model",))  # every key left out at its default
    bm, seed, prompt_cfg = config["base_model"], int(config["seed"]), config["prompt"]
    torch.set_num_threads(max(1, int(bm["threads"] or os.cpu_count() or 1)))
    train = [row for _, row in read_jsonl(train_data) if row.get("reference")]
    sft = bm["sft"]
    if sft["max_examples"] and sft["max_examples"] < len(train):
        train = random.Random(seed).sample(train, sft["max_examples"])
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    tok = train_tokenizer(_tokenizer_texts(train, prompt_cfg), **bm["tokenizer"])
    model = init_model(tok, seed=seed, **bm["model"])
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
    args = SFTConfig(
        output_dir=str(work / "sft"),
        num_train_epochs=sft["epochs"],
        max_steps=sft["max_steps"] or -1,
        learning_rate=sft["learning_rate"],
        lr_scheduler_type="cosine",
        warmup_steps=sft["warmup_steps"],
        weight_decay=sft["weight_decay"],
        per_device_train_batch_size=sft["batch_size"],
        max_length=sft["max_length"],
        completion_only_loss=True,
        packing=False,
        seed=seed,
        data_seed=seed,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        gradient_checkpointing=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    result = trainer.train()
    timings["sft_s"] = time.perf_counter() - t0
    shutil.rmtree(work / "sft", ignore_errors=True)
    model = trainer.model
    logs = [h for h in trainer.state.log_history if "loss" in h]
    last = logs[-1] if logs else {}
    last_log = {k: last[k] for k in ("loss", "mean_token_accuracy", "epoch") if k in last}
    save(model, tok, work)

    t0 = time.perf_counter()
    ev = bm["eval"]
    test = [row for _, row in read_jsonl(test_data)]
    test = random.Random(seed + 1).sample(test, min(ev["problems"], len(test)))
    with contextlib.ExitStack() as stack:
        if scorer is None:
            from maxk.sandbox import Scorer

            scorer = stack.enter_context(Scorer(**config["sandbox"]))
        check = sample_and_score(
            model,
            tok,
            test,
            samples=ev["samples"],
            max_new_tokens=ev["max_new_tokens"],
            batch_size=ev["batch_size"],
            scorer=scorer,
            prompt_cfg=prompt_cfg,
            seed=seed,
            keep_examples=ev["log_examples"],
        )
    timings["eval_s"] = time.perf_counter() - t0
    timings["eval_generate_s"], timings["eval_score_s"] = check["generate_s"], check["score_s"]

    manifest = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tok),
        "sft_examples": len(train),
        "sft_steps": result.global_step,
        "sft_mean_loss": result.training_loss,
        "sft_last_log": last_log,
        "eval": {"dataset": ev.get("dataset"), **competence(check["rewards"], check["passed"])},
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
    }
    for ex in check["examples"]:
        print(f"--- {ex['problem_id']} reward={ex['reward']:.2f}\n{ex['completion']}", flush=True)
    print("competence:", json.dumps(manifest["eval"]), flush=True)
    write_json(work / "manifest.json", manifest)
    write_provenance(
        work, config={k: config.get(k) for k in ("seed", "base_model", "prompt")}, seeds={"seed": seed}
    )
    if final.exists():
        shutil.rmtree(final)
    os.replace(work, final)
    return manifest
