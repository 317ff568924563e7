"""Helpers for the training tests: a tiny random Qwen2 + tokenizer built on the fly (no hub), synthetic
prompts and a trusted synthetic reward (no program is executed here)."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", category=FutureWarning)

SYNTH_TEXT = [
    f"def f{i}(x):\n    return x * {i} + {i % 7}\nprint(f{i}(int(input())))\n" for i in range(200)
] + ["Write a function that adds two numbers. Read n and print n squared."] * 20


def times_problem(i: int) -> dict:
    """A one-test stdio problem "print x times i" with its reference (trusted: written here)."""
    return {
        "id": f"suite/stdio-{i:05d}",
        "source": "suite",
        "prompt": f"Read an integer x. Replace x with x times {i}. Print x.",
        "difficulty": 1,
        "tests": {"format": "stdio", "cases": [{"input": "2\n", "output": f"{2 * i}\n"}]},
        "reference": f"x = int(input())\nx = x * {i}\nprint(x)\n",
    }


def synthetic_prompts(count: int) -> list[str]:
    return [f"Task {i}: print the number {i * 7 % 10}." for i in range(count)]


def digit_reward(completions, **_):
    """Fraction of digit characters in each completion (continuous, trusted, deterministic)."""
    out = []
    for c in completions:
        text = c if isinstance(c, str) else c[-1]["content"]
        out.append(sum(ch.isdigit() for ch in text) / max(1, len(text)))
    return out


def make_trainer(model_dir, output_dir, method="grpo", *, prompts=4, **overrides):
    """A MaxKGRPOTrainer on synthetic prompts; defaults: n=4, 2 micro-batches of 1 group, 3 PPO iterations."""
    from datasets import Dataset

    from maxk.train.grpo import MaxKGRPOConfig, MaxKGRPOTrainer

    kwargs = dict(
        output_dir=str(output_dir),
        advantage_method=method,
        bon_k=2,
        delta_clamp=0.5,
        num_generations=4,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_completion_length=8,
        num_iterations=3,
        beta=0.01,
        epsilon=0.2,
        loss_type="grpo",
        use_bias_correction_kl=False,
        learning_rate=1e-3,
        max_steps=3,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_dropout=True,
        seed=0,
        dataloader_num_workers=0,
    )
    kwargs.update(overrides)
    args = MaxKGRPOConfig(**kwargs)
    data = Dataset.from_dict({"prompt": synthetic_prompts(prompts)})
    return MaxKGRPOTrainer(model=model_dir, reward_funcs=digit_reward, args=args, train_dataset=data)
