"""A faithful stand-in for the parts of vLLM the adapter touches (no GPU, no vllm install).

Mirrors vllm.outputs.RequestOutput / CompletionOutput and vllm.logprobs.Logprob field for field
(vLLM 0.2x): each generated position carries ``{token_id: Logprob(logprob, rank, decoded_token)}``
holding the top-``logprobs`` tokens plus the sampled token; ``cumulative_logprob`` is the sum of the
sampled tokens' log-probs; ``finish_reason`` is "stop" (a stop token, which is included in
``token_ids`` but not in ``text``) or "length". The fake model draws each position's distribution from
a seeded softmax over a small vocabulary, so tests know the exact entropy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

VOCAB = 40
EOS = 0


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


class FakeTokenizer:
    eos_token_id = EOS

    def get_vocab(self):
        return {"<|im_end|>": EOS, **{f"t{i}": i for i in range(1, VOCAB)}}


def position_logprobs(rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(scale=2.0, size=VOCAB)
    logits[EOS] -= 1.0
    return logits - np.logaddexp.reduce(logits)


class FakeLLM:
    """Records its constructor kwargs and every ``generate`` call; shuffles completion order like
    vLLM may (the adapter must sort by ``index``)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[list[str], list[SamplingParams]]] = []
        self.exact_entropies: dict[tuple[int, int], list[float]] = {}

    def get_tokenizer(self) -> FakeTokenizer:
        return FakeTokenizer()

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((list(prompts), list(sampling_params)))
        outs = []
        for r, (prompt, sp) in enumerate(zip(prompts, sampling_params, strict=True)):
            completions = []
            for j in range(sp.n):
                rng = np.random.default_rng([sp.seed, j])
                ids, positions, ents = [], [], []
                finish = "length"
                for _ in range(sp.max_tokens):
                    lp = position_logprobs(rng)
                    p = np.exp(lp)
                    ents.append(float(-(p * lp).sum()))
                    tok = int(rng.choice(VOCAB, p=p))
                    order = np.argsort(-lp)
                    rank = {int(t): k + 1 for k, t in enumerate(order)}
                    pos = {int(t): Logprob(float(lp[t]), rank[int(t)], f"t{t}") for t in order[: sp.logprobs]}
                    pos[tok] = Logprob(float(lp[tok]), rank[tok], f"t{tok}")
                    ids.append(tok)
                    positions.append(pos)
                    if tok in (sp.stop_token_ids or []):
                        finish = "stop"
                        break
                self.exact_entropies[(sp.seed, j)] = ents
                text = "".join(f"t{t} " for t in ids if t != EOS)
                cum = float(sum(pos[t].logprob for pos, t in zip(positions, ids, strict=True)))
                completions.append(
                    CompletionOutput(
                        index=j,
                        text=text,
                        token_ids=ids,
                        cumulative_logprob=cum,
                        logprobs=positions,
                        finish_reason=finish,
                        stop_reason=None,
                    )
                )
            completions.reverse()
            outs.append(RequestOutput(str(r), prompt, [1, 2, 3], None, completions, True))
        return outs
