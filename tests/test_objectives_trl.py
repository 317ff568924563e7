"""``grpo`` reproduces TRL's own advantages: run the real GRPOTrainer on a tiny model with known rewards."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from maxk.objectives import compute_advantages
from maxk.tiny import build_tiny

pytest.importorskip("trl")


def test_grpo_matches_trl_advantages(tmp_path: Path) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    corpus = ["def add(a, b):\n    return a + b\n", "n = int(input())\nprint(n * 2)\n"] * 20
    model_dir = build_tiny(tmp_path / "model", corpus)
    num_generations, prompts = 4, ["a", "b", "c"]
    # Rewards with ties, an all-equal group (std 0: TRL's epsilon matters) and a single winner.
    preset = torch.tensor(
        [[0.0, 0.5, 0.5, 1.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 1.0, 0.0]], dtype=torch.float32
    )

    def reward(prompts: list[str], completions: list[str], **_: object) -> list[float]:
        assert len(completions) == preset.numel()
        return preset.flatten().tolist()

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=len(prompts) * num_generations,
        num_generations=num_generations,
        max_completion_length=4,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        loss_type="grpo",
        beta=0.0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            reward_funcs=reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=AutoTokenizer.from_pretrained(model_dir),
        )
        # TRL repeats each prompt num_generations times, consecutively (RepeatSampler).
        inputs = [{"prompt": p} for p in prompts for _ in range(num_generations)]
        out = trainer._generate_and_score_completions(inputs)
    ours = compute_advantages("grpo", preset).flatten()
    torch.testing.assert_close(out["advantages"].float(), ours, rtol=1e-6, atol=1e-6)
    assert torch.count_nonzero(ours) > 0  # the comparison is not vacuous
