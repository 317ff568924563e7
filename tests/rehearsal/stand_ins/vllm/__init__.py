"""Stand-in for the parts of vLLM that ``maxk.generate.vllm`` uses, importable as ``vllm`` by the
paper-config rehearsal's generation jobs (tests/rehearsal/rehearse.py puts this folder on PYTHONPATH).

Strict where vLLM is strict (the releases the ``gpu`` extra admits, 0.27-0.30):
- ``LLM(...)`` and ``SamplingParams(...)`` accept exactly the keywords every admitted release accepts
  (``_signatures.py``, read from their wheels) and raise ``TypeError`` for any other, as vLLM does (a
  misspelled engine option fails here, not on the cluster); a sampling field vLLM accepts but this
  stand-in does not model raises ``NotImplementedError`` rather than being ignored;
- ``SamplingParams`` checks vLLM's bounds on the fields it models (``n`` >= 1, ``temperature`` finite in
  [0, 2], ``top_p`` in (0, 1], ``top_k`` >= -1, ``max_tokens`` >= 1, ``logprobs`` >= 0 or -1);
- ``max_model_len`` above the model's ``max_position_embeddings`` is refused at construction;
  ``None`` takes the model's own;
- a prompt longer than ``max_model_len`` fails the whole ``generate`` call; one that fits stops its
  completions when the sequence fills the model (``finish_reason="length"``);
- ``logprobs`` above the engine's ``max_logprobs`` is refused; ``n`` completions per request, seeded by
  the request's ``seed`` (the same seed gives the same completions);
- ``CompletionOutput`` / ``Logprob`` / ``FlatLogprobs`` field for field: the sampled token is always in a
  position's log-probs with the top ``logprobs`` (a list of mappings, or flat lists with
  ``flat_logprobs=True``); a stop token ends ``token_ids`` but not ``text``.

The "model" draws each token from a seeded softmax over the real tokenizer's vocabulary, so the
completions are junk text in the right encoding: enough to drive every downstream stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._signatures import ENGINE_ARGS, SAMPLING_PARAMS

__version__ = "0.0.0+maxk-rehearsal"


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FlatLogprobs:
    """vLLM's ``FlatLogprobs`` (``SamplingParams(flat_logprobs=True)``): every position's log-probs in
    flat lists, position ``i`` at ``[start_indices[i], end_indices[i])``; indexing gives the position's
    ``{token_id: Logprob}`` as the list format would."""

    start_indices: list[int] = field(default_factory=list)
    end_indices: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)
    decoded_tokens: list[str | None] = field(default_factory=list)

    def append(self, position: dict[int, Logprob] | None) -> None:
        self.start_indices.append(len(self.logprobs))
        for token_id, lp in (position or {}).items():
            self.token_ids.append(token_id)
            self.logprobs.append(lp.logprob)
            self.ranks.append(lp.rank)
            self.decoded_tokens.append(lp.decoded_token)
        self.end_indices.append(len(self.logprobs))

    def __len__(self) -> int:
        return len(self.start_indices)

    def __getitem__(self, i: int) -> dict[int, Logprob]:
        a, b = self.start_indices[i], self.end_indices[i]
        cols = (self.token_ids, self.logprobs, self.ranks, self.decoded_tokens)
        rows = zip(*(c[a:b] for c in cols), strict=True)
        return {t: Logprob(lp, r, d) for t, lp, r, d in rows}

    @classmethod
    def of(cls, positions: list[dict[int, Logprob]]) -> FlatLogprobs:
        flat = cls()
        for position in positions:
            flat.append(position)
        return flat


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


# The fields the stand-in models, at vLLM's defaults.
_MODELLED = {
    "n": 1, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": 16, "seed": None,
    "logprobs": None, "stop_token_ids": None, "skip_special_tokens": True, "flat_logprobs": False,
}  # fmt: skip


class SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        for name in kwargs:
            if name not in SAMPLING_PARAMS:
                raise TypeError(f"Unexpected keyword argument '{name}'")  # msgspec's own message
            if name not in _MODELLED:
                raise NotImplementedError(
                    f"SamplingParams({name}=...): vLLM accepts it; the rehearsal stand-in does not model it "
                    "(tests/rehearsal/stand_ins/vllm)"
                )
        for name, value in {**_MODELLED, **kwargs}.items():
            setattr(self, name, value)
        self._verify()

    def _verify(self) -> None:  # vLLM's SamplingParams._verify_args, for the modelled fields
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if not math.isfinite(self.temperature) or not 0 <= self.temperature <= 2:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.logprobs is not None and self.logprobs != -1 and self.logprobs < 0:
            raise ValueError(f"logprobs must be non-negative or -1, got {self.logprobs}.")


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

        for name in engine_args:  # LLM's **kwargs become EngineArgs(**kwargs), a dataclass
            if name not in ENGINE_ARGS:
                raise TypeError(f"EngineArgs.__init__() got an unexpected keyword argument '{name}'")

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
                    logprobs=None if sp.logprobs is None else FlatLogprobs.of(positions) if sp.flat_logprobs
                    else positions, finish_reason=finish,
                    stop_reason=toks[-1] if finish == "stop" else None,
                ))  # fmt: skip
            outs.append(RequestOutput(str(r), prompt, ids, None, completions[::-1], True))  # any order
        return outs
