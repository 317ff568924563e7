"""The generate stage's config, typed: one frozen dataclass per section of
``workflow/schemas/generate.schema.yaml``, whose fields, defaults and help text the schema defines
(``maxk.config.config_section``). Built once by the CLI from the slice its rule passes
(``GenerateConfig.from_config(config["generate"])``) and handed unchanged to the library functions.
"""

from __future__ import annotations

from maxk.config import config_section


@config_section("generate.transformers")
class TransformersSettings:
    """The transformers backend (CPU or a small GPU; exact per-token entropy)."""

    max_batch_size: int
    dtype: str
    device: str


@config_section("generate.vllm")
class VLLMSettings:
    """The vLLM backend (GPUs; entropy approximate from the top log-probs)."""

    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_model_len: int | None
    dtype: str
    entropy_top_logprobs: int
    logprobs_mode: str
    enforce_eager: bool
    prompts_per_call: int


@config_section("generate")
class GenerateConfig:
    """Sampling of ``n`` completions per problem (``maxk generate``)."""

    backend: str
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    max_problems: int | None
    num_shards: int
    common_random_numbers: bool
    keep_shards: bool
    stop_tokens: list[str]
    transformers: TransformersSettings
    vllm: VLLMSettings


#: the schema's defaults, typed: the keyword defaults of the stage's functions and backends
DEFAULT = GenerateConfig()
