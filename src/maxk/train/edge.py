"""RL prompts at the base model's edge of competence (``train.prompt_filter``; rule ``rl_prompts``).

Our choice, not the paper's. The paper trains on every CodeContests training problem; its base model
(Qwen2.5-Coder-7B-Instruct) solves some samples of many of them. A tiny model solves none or all of
most problems, and a group whose completions all score the same teaches GRPO nothing (its advantages
are all zero), so most of a miniature's RL budget would be spent on groups without signal. This step
asks the base model ``samples`` times per problem (at the runs' temperature and length) and keeps the
problems where the number of fully solved samples lies in ``[min_solved, max_solved]`` (default:
some but not all). With ``spread_k`` set, a problem is kept only where the base's samples also carry a
max@k signal at that k: their max@k transform (``maxk.objectives.bon_rewards``, on the continuous
rewards) is not constant, i.e. the top ``samples - spread_k + 1`` rewards do not all tie
(``maxk.objectives.maxk_flat``). The solved-count filter suits k = 1 (a binary group with some but not
all solved has GRPO signal); for a max@k objective a group with ``samples - k + 1`` or more full solves
is flat, and one with no full solve can still rank partial solutions. It runs once, shared by every run;
the manifest beside the output records every examined problem's count (and, with ``spread_k``, whether
it had that signal), so the choice can be audited.

Problems are examined in file order, a seeded subset when ``max_problems`` is set; each problem's samples
are seeded from ``(seed, "edge", problem id)`` (``maxk.train.sampling``).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

__all__ = ["build_edge_prompts", "edge_bounds", "select_edge", "spread_k"]


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


def spread_k(spec: dict[str, Any]) -> int | None:
    """The ``spread_k`` of a ``train.prompt_filter`` entry (None: no max@k-signal condition); ValueError
    outside ``[1, samples]``."""
    k = spec.get("spread_k")
    if k is None:
        return None
    if isinstance(k, bool) or int(k) != k or not 1 <= int(k) <= int(spec["samples"]):
        raise ValueError(f"train.prompt_filter: need 1 <= spread_k ({k!r}) <= samples ({spec['samples']})")
    return int(k)


def select_edge(
    problems: list[dict[str, Any]],
    solved: list[int],
    lo: int,
    hi: int,
    signal: list[bool] | None = None,
) -> list[dict[str, Any]]:
    """The problems whose count of fully solved samples is in ``[lo, hi]`` (and, with ``signal``, whose
    entry is true), in their order."""
    if len(problems) != len(solved) or (signal is not None and len(signal) != len(problems)):
        n_signal = "" if signal is None else f", {len(signal)} signal flags"
        raise ValueError(f"{len(problems)} problems but {len(solved)} counts{n_signal}")
    flags = [True] * len(problems) if signal is None else signal
    return [p for p, c, ok in zip(problems, solved, flags, strict=True) if lo <= c <= hi and ok]


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
    k = spread_k(spec)
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
    signal = None
    if k is not None:
        from maxk.objectives import maxk_flat

        flat = maxk_flat(torch.tensor(res.rewards, dtype=torch.float64), k) if problems else torch.zeros(0)
        signal = [not bool(f) for f in flat]
    kept = select_edge(problems, counts, lo, hi, signal)
    histogram = dict(sorted(Counter(counts).items()))
    if not kept:
        with_signal = "" if signal is None else f" and {sum(signal)} with max@{k} signal"
        raise ValueError(
            f"train.prompt_filter kept no problem of {data}: solved-sample counts {histogram} "
            f"(count: problems), none in [{lo}, {hi}]{with_signal}"
        )
    keep = {id(p) for p in kept}
    kept_rewards = [r for r, p in zip(res.rewards, problems, strict=True) if id(p) in keep]
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
        **(
            {}
            if signal is None
            else {
                "with_signal": sum(signal),
                "signal": {p["id"]: ok for p, ok in zip(problems, signal, strict=True)},
            }
        ),
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_dataset(out, kept, manifest)
    with_signal = "" if signal is None else f" with max@{k} signal ({sum(signal)} of them)"
    print(
        f"edge of competence: kept {len(kept)} of {len(problems)} problems "
        f"(solved-sample counts {histogram}, kept [{lo}, {hi}]{with_signal})",
        flush=True,
    )
    return manifest
