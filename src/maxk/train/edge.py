"""RL prompts at the base model's edge of competence (``train.prompt_filter``; rule ``rl_prompts``).

Our choice, not the paper's. The paper trains on every CodeContests training problem; its base model
(Qwen2.5-Coder-7B-Instruct) solves some samples of many of them. A tiny model solves none or all of
most problems, and a group whose completions all score the same teaches GRPO nothing (its advantages
are all zero), so most of a miniature's RL budget would be spent on groups without signal. This step
asks the base model ``samples`` times per problem (at the runs' temperature and length) and keeps the
problems where the number of fully solved samples lies in ``[min_solved, max_solved]`` (default:
some but not all). It runs once, shared by every run; the manifest beside the output records every
examined problem's count, so the choice can be audited.

Problems are examined in file order, a seeded subset when ``max_problems`` is set; each problem's samples
are seeded from ``(seed, "edge", problem id)`` (``maxk.train.sampling``).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

__all__ = ["build_edge_prompts", "edge_bounds", "select_edge"]


def edge_bounds(spec: dict[str, Any]) -> tuple[int, int]:
    """``(min_solved, max_solved)`` of a ``train.prompt_filter`` entry (``max_solved`` null: samples - 1);
    ValueError when the interval is empty or beyond the samples drawn."""
    samples, lo = int(spec["samples"]), int(spec.get("min_solved", 1))
    hi = spec.get("max_solved")
    hi = samples - 1 if hi is None else int(hi)
    if not 0 <= lo <= hi <= samples:
        raise ValueError(
            f"train.prompt_filter: need 0 <= min_solved ({lo}) <= max_solved ({hi}) <= samples ({samples})"
        )
    return lo, hi


def select_edge(problems: list[dict[str, Any]], solved: list[int], lo: int, hi: int) -> list[dict[str, Any]]:
    """The problems whose count of fully solved samples is in ``[lo, hi]``, in their order."""
    if len(problems) != len(solved):
        raise ValueError(f"{len(problems)} problems but {len(solved)} counts")
    return [p for p, c in zip(problems, solved, strict=True) if lo <= c <= hi]


def _mean(rows: list[list[float]]) -> float:
    """The mean of every value of ``[problems][samples]`` rows (0 when there are none)."""
    return round(sum(map(sum, rows)) / max(1, sum(map(len, rows))), 4)


def build_edge_prompts(
    config: dict[str, Any], *, model: str, data: str, out: str, scorer: Any = None
) -> dict[str, Any]:
    """Sample the base ``model`` on ``data``'s problems, write the kept ones to ``out`` (+ manifest).

    ``config``: ``{"seed", "train", "prompt", "sandbox"}``; the filter is ``train.prompt_filter``.
    Returns the manifest. Raises ValueError when no problem is kept (naming the counts seen).
    """
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from maxk.config import job_config
    from maxk.data.build import read_problems, write_dataset
    from maxk.train.sampling import sample_scored

    config = job_config(config, ("train",))
    train, seed = config["train"], int(config["seed"])
    spec = train["prompt_filter"]
    if not spec:
        raise ValueError("train.prompt_filter is null: there is nothing to filter")
    lo, hi = edge_bounds(spec)
    problems = read_problems(data)
    if spec.get("max_problems") and spec["max_problems"] < len(problems):
        keep = sorted(random.Random(seed).sample(range(len(problems)), spec["max_problems"]))
        problems = [problems[i] for i in keep]
    tokenizer = AutoTokenizer.from_pretrained(model)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if scorer is None:
            from maxk.sandbox import Scorer

            scorer = stack.enter_context(Scorer(**config["sandbox"]))
        res = sample_scored(
            policy,
            tokenizer,
            problems,
            scorer=scorer,
            samples=int(spec["samples"]),
            max_new_tokens=int(train["max_completion_length"]),
            seed=seed,
            tag="edge",
            temperature=float(train["temperature"]),
            top_p=float(train["top_p"]),
            prompt_cfg=config["prompt"],
        )
    counts = [int(sum(p)) for p in res.passed]
    kept = select_edge(problems, counts, lo, hi)
    histogram = dict(sorted(Counter(counts).items()))
    if not kept:
        raise ValueError(
            f"train.prompt_filter kept no problem of {data}: solved-sample counts {histogram} "
            f"(count: problems), none in [{lo}, {hi}]"
        )
    kept_rewards = [r for r, c in zip(res.rewards, counts, strict=True) if lo <= c <= hi]
    manifest = {
        "dataset": out,
        "source": data,
        "model": model,
        "filter": {**spec, "min_solved": lo, "max_solved": hi},
        "examined": len(problems),
        "count": len(kept),
        "solved_histogram": {str(k): v for k, v in histogram.items()},
        "mean_reward_examined": _mean(res.rewards),
        "mean_reward_kept": _mean(kept_rewards),
        "solved": {p["id"]: c for p, c in zip(problems, counts, strict=True)},
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_dataset(out, kept, manifest)
    print(
        f"edge of competence: kept {len(kept)} of {len(problems)} problems "
        f"(solved-sample counts {histogram}, kept [{lo}, {hi}])",
        flush=True,
    )
    return manifest
