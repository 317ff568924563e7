"""Sample a Qwen2-family model on problems and score every sample in the sandbox: one function shared
by the base model's competence check (``maxk.train.base``), the RL prompt filter (``maxk.train.edge``)
and the held-out learning curve (``maxk.train.heldout``).

Completions come from ``maxk.generate.decode.QwenDecoder`` (each prompt prefilled once, its samples
sharing that cache), seeded per problem from ``(seed, tag, problem id)``: a problem's samples do not
depend on which other problems are drawn with it, and two calls with the same seed differ only by the
model. Programs are extracted with ``maxk.generate.extract.extract_program`` and scored by the caller's
``scorer`` (``maxk.sandbox.Scorer``), as generation and scoring do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from maxk.sandbox.judge import is_solved
from maxk.seeds import derive_seed
from maxk.train.config import TRAIN_DEFAULTS as _TRAIN  # train.temperature, train.top_p

__all__ = ["ScoredSamples", "prompt_token_ids", "sample_scored"]


@dataclass
class ScoredSamples:
    """``[problems][samples]`` rewards (fraction of tests passed), solved flags (1.0 = every test
    passed) and mean per-token entropies, in the order of the problems given; ``texts`` likewise."""

    rewards: list[list[float]]
    passed: list[list[float]]
    entropy: list[list[float]]
    texts: list[list[str]]


def prompt_token_ids(problems: list[dict[str, Any]], tokenizer: Any, prompt_cfg: dict[str, Any] | None):
    """Each problem's prompt (``maxk.data.prompts.build_prompt``) as token ids."""
    from maxk.data.prompts import build_prompt

    return [
        tokenizer(build_prompt(p, tokenizer, config=prompt_cfg), add_special_tokens=False)["input_ids"]
        for p in problems
    ]


def sample_scored(
    model: Any,
    tokenizer: Any,
    problems: list[dict[str, Any]],
    *,
    scorer: Any,
    samples: int,
    max_new_tokens: int,
    seed: int,
    tag: str,
    temperature: float = _TRAIN["temperature"],
    top_p: float = _TRAIN["top_p"],
    prompt_cfg: dict[str, Any] | None = None,
    prompt_ids: list[list[int]] | None = None,
    stop_token_ids: list[int] | None = None,
    extract: Any = None,
    max_rows: int = 1024,
) -> ScoredSamples:
    """``samples`` completions of every problem, scored (see the module docstring).

    ``prompt_ids`` (precomputed prompts) default to ``prompt_token_ids(problems, tokenizer,
    prompt_cfg)``; ``stop_token_ids`` to the tokenizer's eos; ``extract(text, problem)`` to
    ``extract_program``. Problems are decoded in chunks of at most
    ``max_rows`` sequences (bounded memory); the seeds do not depend on the chunking.
    """
    from maxk.generate.extract import extract_program
    from maxk.generate.native import new_decoder

    extract = extract or extract_program
    if prompt_ids is None:
        prompt_ids = prompt_token_ids(problems, tokenizer, prompt_cfg)
    stops = list(stop_token_ids) if stop_token_ids is not None else [tokenizer.eos_token_id]
    while hasattr(model, "module"):  # DDP / accelerate wrappers
        model = model.module
    decoder = new_decoder(model)
    out = ScoredSamples([], [], [], [])
    per_chunk = max(1, max_rows // samples)
    for start in range(0, len(problems), per_chunk):
        chunk = problems[start : start + per_chunk]
        res = decoder.sample(
            prompt_ids[start : start + per_chunk],
            samples,
            max_new_tokens=max_new_tokens,
            stop_token_ids=stops,
            seeds=[derive_seed(seed, tag, p["id"]) for p in chunk],
            temperature=temperature,
            top_p=top_p,
        )
        texts = res.texts(tokenizer)
        pairs = [(chunk[i // samples], extract(t, chunk[i // samples])) for i, t in enumerate(texts)]
        scores = scorer.score(pairs)
        ent = [e / max(len(t), 1) for e, t in zip(res.sum_entropy, res.token_ids, strict=True)]
        for j in range(len(chunk)):
            rows = slice(j * samples, (j + 1) * samples)
            out.rewards.append([float(s.reward) for s in scores[rows]])
            out.passed.append([float(is_solved(s.passed, s.total)) for s in scores[rows]])
            out.entropy.append([float(e) for e in ent[rows]])
            out.texts.append(texts[rows])
    return out
