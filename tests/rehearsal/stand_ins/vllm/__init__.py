"""Stand-in for the parts of vLLM that ``maxk.generate.vllm`` uses, importable as ``vllm`` by the
paper-config rehearsal's generation jobs (tests/rehearsal/rehearse.py puts this folder on PYTHONPATH).

Strict where vLLM is strict (vLLM 0.1x/0.2x ``LLM`` and ``SamplingParams``):
- ``max_model_len`` above the model's ``max_position_embeddings`` is refused at construction;
  ``None`` takes the model's own;
- a prompt longer than ``max_model_len`` fails the whole ``generate`` call; one that fits stops its
  completions when the sequence fills the model (``finish_reason="length"``);
- ``logprobs`` above the engine's ``max_logprobs`` is refused; ``n`` completions per request, seeded by
  the request's ``seed`` (the same seed gives the same completions);
- ``CompletionOutput`` / ``Logprob`` field for field: the sampled token is always in a position's
  log-probs with the top ``logprobs``; a stop token ends ``token_ids`` but not ``text``.

The "model" draws each token from a seeded softmax over the real tokenizer's vocabulary, so the
completions are junk text in the right encoding: enough to drive every downstream stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__version__ = "0.0.0+maxk-rehearsal"


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int] | None
    prompt_logprobs: Any
    outputs: list[CompletionOutput]
    finished: bool
    extra: dict = field(default_factory=dict)


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int | None = 16
    seed: int | None = None
    logprobs: int | None = None
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")


@dataclass
class _ModelConfig:
    max_model_len: int


@dataclass
class _Engine:
    model_config: _ModelConfig


class LLM:
    def __init__(self, model: str, *, revision: str | None = None, seed: int = 0, max_logprobs: int = 20,
                 max_model_len: int | None = None, **engine_args: Any) -> None:  # fmt: skip
        from transformers import AutoConfig, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model, revision=revision)
        derived = int(AutoConfig.from_pretrained(model, revision=revision).max_position_embeddings)
        if max_model_len is not None and max_model_len > derived:
            raise ValueError(
                f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
                f"(max_position_embeddings={derived} or model_max_length=None in model's config.json)."
            )
        self.llm_engine = _Engine(_ModelConfig(max_model_len or derived))
        self.max_logprobs = int(max_logprobs)
        self.seed = seed
        self.engine_args = engine_args
        self.vocab = len(self.tokenizer)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def _position(self, rng: np.random.Generator, stop: list[int]) -> np.ndarray:
        logits = rng.normal(scale=2.0, size=self.vocab)
        logits[stop] += 3.0  # completions end after a few dozen tokens
        return logits - np.logaddexp.reduce(logits)

    def generate(
        self, prompts: Any, sampling_params: Any = None, use_tqdm: bool = True
    ) -> list[RequestOutput]:
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        limit = self.llm_engine.model_config.max_model_len
        prompt_ids = []
        for prompt in prompts:
            ids = self.tokenizer(prompt)["input_ids"]
            if len(ids) > limit:
                raise ValueError(
                    f"The decoder prompt (length {len(ids)}) is longer than the maximum model length "
                    f"of {limit}. Make sure that `max_model_len` is no smaller than the number of text "
                    "tokens."
                )
            prompt_ids.append(ids)
        outs = []
        for r, (prompt, ids, sp) in enumerate(zip(prompts, prompt_ids, params, strict=True)):
            if sp.logprobs is not None and sp.logprobs > self.max_logprobs:
                raise ValueError(
                    f"Requested sample logprobs of {sp.logprobs}, which is greater than max allowed: "
                    f"{self.max_logprobs}"
                )
            stop = list(sp.stop_token_ids or []) or [self.tokenizer.eos_token_id]
            budget = min(sp.max_tokens or limit, limit - len(ids))
            completions = []
            for j in range(sp.n):
                rng = np.random.default_rng([sp.seed if sp.seed is not None else self.seed, j])
                toks, positions, finish = [], [], "length"
                for _ in range(budget):
                    lp = self._position(rng, stop)
                    tok = int(rng.choice(self.vocab, p=np.exp(lp) / np.exp(lp).sum()))
                    order = np.argsort(-lp)
                    k = sp.logprobs or 0
                    pos = {int(t): Logprob(float(lp[t]), i + 1, None) for i, t in enumerate(order[:k])}
                    pos.setdefault(tok, Logprob(float(lp[tok]), int(np.where(order == tok)[0][0]) + 1, None))
                    toks.append(tok)
                    positions.append(pos)
                    if tok in stop:
                        finish = "stop"
                        break
                text_ids = toks[:-1] if finish == "stop" else toks
                text = self.tokenizer.decode(text_ids, skip_special_tokens=sp.skip_special_tokens)
                cumulative = float(sum(p[t].logprob for p, t in zip(positions, toks, strict=True)))
                completions.append(CompletionOutput(
                    index=j, text=text, token_ids=toks, cumulative_logprob=cumulative,
                    logprobs=positions if sp.logprobs is not None else None, finish_reason=finish,
                    stop_reason=toks[-1] if finish == "stop" else None,
                ))  # fmt: skip
            outs.append(RequestOutput(str(r), prompt, ids, None, completions[::-1], True))  # any order
        return outs
