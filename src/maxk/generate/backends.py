"""The interface every generation backend implements, and the per-sample record it returns.

A backend turns already-built prompt strings into ``n`` samples each. Log-probabilities and entropies
refer to the *sampling distribution* (the model's next-token distribution after temperature and top-p),
i.e. the distribution the tokens were actually drawn from; at the paper's temperature 1.0 / top-p 1.0
this equals the model's own distribution. Every token counted in ``num_tokens`` (including the stop
token, when one was sampled) contributes to ``sum_logprob`` and ``mean_entropy``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from maxk.generate.config import DEFAULT as _DEFAULT  # the schema's (the paper's: T 1, top-p 1, 256 tokens)

#: Allowed values of ``Sample.entropy_kind``: exact (from the full logits), approx (from top
#: log-probs only), none (not available). Never mix kinds within one file.
ENTROPY_KINDS: tuple[str, ...] = ("exact", "approx", "none")
FINISH_REASONS: tuple[str, ...] = ("stop", "length")


@dataclass(frozen=True)
class SamplingParams:
    """What to sample: ``n`` completions per prompt, at most ``max_new_tokens`` tokens each."""

    n: int
    temperature: float = _DEFAULT.temperature
    top_p: float = _DEFAULT.top_p
    max_new_tokens: int = _DEFAULT.max_new_tokens

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0 (greedy decoding is not sampling), got {self.temperature}"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class Sample:
    """One completion. ``token_ids`` are the sampled ids (stop token included); not written to Parquet."""

    completion: str
    num_tokens: int
    finish_reason: str
    sum_logprob: float
    mean_entropy: float | None
    entropy_kind: str
    token_ids: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {FINISH_REASONS}, got {self.finish_reason!r}")
        if self.entropy_kind not in ENTROPY_KINDS:
            raise ValueError(f"entropy_kind must be one of {ENTROPY_KINDS}, got {self.entropy_kind!r}")
        if (self.entropy_kind == "none") != (self.mean_entropy is None):
            raise ValueError("mean_entropy must be None exactly when entropy_kind is 'none'")
        if self.mean_entropy is not None and not math.isfinite(self.mean_entropy):
            raise ValueError(f"mean_entropy must be finite, got {self.mean_entropy}")


class Backend(Protocol):
    """A sampler. ``generate`` returns, for each prompt, exactly ``params.n`` samples in index order.

    ``seeds[i]`` seeds prompt ``i`` alone, so a prompt's samples do not depend on which other prompts
    share the call (up to the backend's numerical determinism on the same hardware).
    """

    name: str
    entropy_kind: str
    prompts_per_call: int  # prompts handed to one ``generate`` call by the job runner
    tokenizer: Any  # the model's tokenizer (the prompt builder applies its chat template)
    max_model_len: int | None  # most tokens one sequence (prompt + completion) may hold; None = unknown

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int], params: SamplingParams
    ) -> list[list[Sample]]: ...

    def describe(self) -> dict[str, Any]:
        """Backend settings for the manifest (name, dtype, device, parallelism, ...)."""
        ...


def prompt_token_ids(tokenizer: Any, prompt: str) -> list[int]:
    """Prompt ids as vLLM tokenises a plain string prompt: special tokens are added unless the prompt
    already starts with the BOS text (a chat-templated prompt)."""
    bos = getattr(tokenizer, "bos_token", None)
    add = not (bos and prompt.startswith(bos))
    return list(tokenizer(prompt, add_special_tokens=add)["input_ids"])


class PromptTooLongError(ValueError):
    """A prompt leaves less than ``max_new_tokens`` of the model's length limit (see check_prompt_room)."""


def check_prompt_room(
    ids: Sequence[str],
    prompt_tokens: Sequence[int],
    max_new_tokens: int,
    max_model_len: int | None,
    *,
    where: str = "",
) -> None:
    """Fail before any generation unless every prompt leaves room for ``max_new_tokens``.

    A prompt over the model's length limit fails a whole vLLM call; one that fits with less room than
    ``max_new_tokens`` has its completions cut short without an error, biasing pass@k and max@k down.
    The message names every offending problem (the first ten) and both ways out."""
    if max_model_len is None:
        return
    room = max_model_len - max_new_tokens
    over = [(pid, n) for pid, n in zip(ids, prompt_tokens, strict=True) if n > room]
    if not over:
        return
    shown = ", ".join(f"{pid} ({n} tokens)" for pid, n in over[:10]) + (" ..." if len(over) > 10 else "")
    raise PromptTooLongError(
        f"{where}{len(over)} of {len(ids)} prompts leave fewer than max_new_tokens = {max_new_tokens} "
        f"tokens of the model length {max_model_len} (longest prompt allowed: {room} tokens): {shown}. "
        "Raise generate.vllm.max_model_len, or filter the pool with data.pools.<pool>.max_prompt_tokens."
    )


def resolve_stop_token_ids(
    tokenizer: Any, generation_eos: Any = None, extra: Sequence[str] = ()
) -> list[int]:
    """All token ids that end a completion: the tokenizer's EOS, the generation config's EOS ids
    (Qwen lists both ``<|im_end|>`` and ``<|endoftext|>``) and the ids of ``extra`` token strings
    present in the vocabulary (e.g. the chat end token). Sorted, unique."""
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    if generation_eos is not None:
        ids.update(
            int(i) for i in (generation_eos if isinstance(generation_eos, list | tuple) else [generation_eos])
        )
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    for token in extra:
        if token in vocab:
            ids.add(int(vocab[token]))
    if not ids:
        raise ValueError("no stop token: the tokenizer has no EOS and no stop token is in its vocabulary")
    return sorted(ids)
