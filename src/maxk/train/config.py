"""The training stage's config, typed: frozen dataclasses of ``workflow/schemas/train.schema.yaml`` and
of one entry of ``runs.schema.yaml`` (``maxk.config.config_section``: fields, defaults and help from
the schema). ``MaxKGRPOConfig`` (``maxk.train.grpo``) takes its defaults from these.
"""

from __future__ import annotations

from typing import Any

from maxk.config import config_section, defaults_of


@config_section("train.vllm")
class TrainVLLMSettings:
    """Generation inside training through TRL's vLLM integration (GPU only)."""

    enabled: bool
    mode: str
    gpu_memory_utilization: float
    importance_sampling_correction: bool
    enable_sleep_mode: bool


@config_section("train.launch")
class LaunchSettings:
    """Multi-GPU launch (``accelerate launch`` with DeepSpeed ZeRO), when the train rule has GPUs."""

    accelerate_config: str
    main_process_port: int | None


@config_section("train")
class TrainConfig:
    """GRPO hyperparameters shared by every run; names follow TRL's ``GRPOConfig``."""

    dataset: str
    max_prompts: int | None
    prompt_filter: dict[str, Any] | None
    max_steps: int | None
    save_steps: int
    checkpoints: str
    report_to: str
    num_generations: int
    temperature: float
    top_p: float
    max_completion_length: int
    learning_rate: float
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    lr_scheduler_type: str
    warmup_steps: int
    max_grad_norm: float
    beta: float
    use_bias_correction_kl: bool
    epsilon: float
    num_iterations: int
    num_train_epochs: float
    loss_type: str
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    bon_k: int
    delta_clamp: float
    own_ratio: bool
    bon_k_schedule: dict[str, Any] | None
    gradient_checkpointing: bool | None
    bf16: bool | None
    model_dtype: str
    heldout: dict[str, Any] | None
    rollout_decoder: str
    vllm: TrainVLLMSettings
    launch: LaunchSettings


@config_section("runs.*")
class RunSpec:
    """One named run: its estimator, its reward, and what it overrides of ``train``."""

    method: str
    reward_kind: str
    num_train_epochs: float | None
    num_iterations: int | None
    learning_rate: float | None
    bon_k: int | None
    bon_k_schedule: dict[str, Any] | None
    own_ratio: bool | None
    num_generations: int | None
    per_device_train_batch_size: int | None
    prompt_filter: dict[str, Any] | None
    max_prompts: int | None
    heldout: dict[str, Any] | None
    description: str | None


#: the schema's defaults of ``train`` and of a run (keys without one left out)
TRAIN_DEFAULTS = defaults_of(TrainConfig)
RUN_DEFAULTS = defaults_of(RunSpec)


@config_section("base_model.tokenizer")
class TokenizerSettings:
    """The embedded base model's tokenizer (byte-level BPE trained on the SFT split)."""

    vocab_size: int | None
    min_frequency: int | None


@config_section("base_model.sft")
class SFTSettings:
    """Supervised fine-tuning of the embedded base model on reference solutions."""

    dataset: str | None
    epochs: float | None
    max_steps: int | None
    learning_rate: float | None
    warmup_steps: int
    weight_decay: float
    batch_size: int | None
    micro_batch_size: int | None
    max_length: int | None
    max_examples: int | None


@config_section("base_model.eval")
class EvalSettings:
    """The base model's competence check (pass@1, pass@samples; the calibration block's samples)."""

    dataset: str | None
    problems: int | None
    samples: int | None
    max_new_tokens: int | None
    batch_size: int
    log_examples: int


@config_section("base_model")
class BaseModelConfig:
    """The base model: built by ``maxk base`` (embedded) or a hub id at a revision (paper)."""

    build: bool
    path: str | None
    revision: str | None
    threads: int | None
    tokenizer: TokenizerSettings | None
    model: dict[str, int] | None
    sft: SFTSettings | None
    eval: EvalSettings | None
    calibration: dict[str, Any] | None
