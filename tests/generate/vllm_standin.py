"""A faithful stand-in for the parts of vLLM the adapter touches (no GPU, no vllm install).

Mirrors vllm.outputs.RequestOutput / CompletionOutput and vllm.logprobs.Logprob field for field
(vLLM 0.2x): each generated position carries ``{token_id: Logprob(logprob, rank, decoded_token)}``
holding the top-``logprobs`` tokens plus the sampled token; ``cumulative_logprob`` is the sum of the
sampled tokens' log-probs; ``finish_reason`` is "stop" (a stop token, which is included in
``token_ids`` but not in ``text``) or "length". The fake model draws each position's distribution from
a seeded softmax over a small vocabulary, so tests know the exact entropy.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

VOCAB = 40
EOS = 0


def _load_objects():
    """vLLM's output and parameter classes, from the rehearsal's stand-in package (one definition),
    loaded under another name: a module called ``vllm`` in this process would make TRL take it for vLLM."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "rehearsal" / "stand_ins" / "vllm" / "__init__.py"
    spec = importlib.util.spec_from_file_location("maxk_rehearsal_vllm", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_objects = _load_objects()
Logprob = _objects.Logprob
CompletionOutput = _objects.CompletionOutput
RequestOutput = _objects.RequestOutput
SamplingParams = _objects.SamplingParams


class FakeTokenizer:
    """One token per whitespace-separated word (ids 1..VOCAB-1 by hash), like a real tokenizer's call."""

    eos_token_id = EOS
    bos_token = None

    def get_vocab(self):
        return {"<|im_end|>": EOS, **{f"t{i}": i for i in range(1, VOCAB)}}

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1 + sum(map(ord, w)) % (VOCAB - 1) for w in text.split()]}


@dataclass
class ModelConfig:
    max_model_len: int


@dataclass
class LLMEngine:
    model_config: ModelConfig


#: the stand-in model's own context length (vLLM takes it from the model config when max_model_len is None)
MODEL_MAX_LEN = 2048


def position_logprobs(rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(scale=2.0, size=VOCAB)
    logits[EOS] -= 1.0
    return logits - np.logaddexp.reduce(logits)


class FakeLLM:
    """Records its constructor kwargs and every ``generate`` call; shuffles completion order like
    vLLM may (the adapter must sort by ``index``)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.llm_engine = LLMEngine(ModelConfig(kwargs.get("max_model_len") or MODEL_MAX_LEN))
        self.tokenizer = FakeTokenizer()
        self.calls: list[tuple[list[str], list[SamplingParams]]] = []
        self.exact_entropies: dict[tuple[int, int], list[float]] = {}

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tokenizer

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((list(prompts), list(sampling_params)))
        outs = []
        limit = self.llm_engine.model_config.max_model_len
        prompt_ids = [self.tokenizer(p)["input_ids"] for p in prompts]
        for ids in prompt_ids:  # as vLLM: a prompt over the limit fails the whole call
            if len(ids) > limit:
                raise ValueError(
                    f"The decoder prompt (length {len(ids)}) is longer than the maximum model length "
                    f"of {limit}."
                )
        for r, (prompt, sp) in enumerate(zip(prompts, sampling_params, strict=True)):
            completions = []
            # as vLLM: generation also stops (finish_reason "length") when the sequence fills the model
            budget = min(sp.max_tokens, limit - len(prompt_ids[r]))
            for j in range(sp.n):
                rng = np.random.default_rng([sp.seed, j])
                ids, positions, ents = [], [], []
                finish = "length"
                for _ in range(budget):
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
                        logprobs=_objects.FlatLogprobs.of(positions) if sp.flat_logprobs else positions,
                        finish_reason=finish,
                        stop_reason=None,
                    )
                )
            completions.reverse()
            outs.append(RequestOutput(str(r), prompt, prompt_ids[r], None, completions, True))
        return outs
