"""A learning curve on held-out problems, measured during training (``train.heldout``).

The raw training reward cannot show learning: each step sees other prompts, of other difficulty.
This callback measures the live policy on one fixed set of problems the run never trains on (the
pool ``train.heldout.dataset``, a split part of its own that no model trains on; without one, the
rows of the training dataset outside the run's ``max_prompts`` subset), before the first step and
every ``every`` optimizer steps: ``samples`` completions per problem from maxk's decode loop
(``maxk.train.sampling``, the same seeds at every measurement, so
two points differ by the policy alone), scored in the run's sandbox. Each point is an entry
``step, heldout/reward, heldout/pass@1, heldout/entropy, heldout/problem_rewards`` of the trainer's
``log_history`` (so it is saved in checkpoints and survives a resume), merged into that step's row of
the run's metrics CSV. ``heldout/problem_rewards`` holds each problem's mean reward, space-separated in
the fixed problem order, so two points can be compared problem by problem (the instrument check's
paired interval, ``maxk.analysis.claims``).
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from maxk.seeds import derive_seed

__all__ = ["PROBLEM_REWARDS", "HeldoutCurve", "heldout_problems"]

PROBLEM_REWARDS = "heldout/problem_rewards"  # metrics CSV column: per-problem mean rewards, space-separated


def heldout_problems(rows: list[dict[str, Any]], train_ids: set[str], count: int, seed: int) -> list[dict]:
    """``count`` problems of ``rows`` outside ``train_ids``, a seeded choice in file order."""
    import random

    pool = [r for r in rows if r["id"] not in train_ids]
    if len(pool) < count:
        raise ValueError(
            f"train.heldout.problems={count} but only {len(pool)} problems of the held-out pool are "
            "outside the run's training prompts: lower heldout.problems (or max_prompts), give "
            "heldout.dataset a larger split part, or set heldout: null"
        )
    keep = sorted(random.Random(derive_seed(seed, "heldout")).sample(range(len(pool)), count))
    return [pool[i] for i in keep]


class HeldoutCurve(TrainerCallback):
    """Measure ``problems`` before training and every ``every`` steps (see the module docstring)."""

    def __init__(
        self,
        problems: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        *,
        scorer: Any,
        extract: Any,
        tokenizer: Any,
        samples: int,
        every: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop_token_ids: list[int],
        seed: int,
        forward: Any = None,
    ) -> None:
        if every < 1 or samples < 1:
            raise ValueError(f"heldout every and samples must be >= 1, got {every} and {samples}")
        self.problems, self.prompt_ids = problems, prompt_ids
        self.scorer, self.extract, self.tokenizer = scorer, extract, tokenizer
        self.samples, self.every = samples, every
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.stop_token_ids, self.seed = stop_token_ids, seed
        self.model: Any = None
        # called with each point's numbers (step and per-problem rewards left out): the live trackers
        self.forward = forward

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.model = model
        if not any("heldout/reward" in e for e in state.log_history):
            self._record(state, self.measure(0))

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0 or state.global_step == state.max_steps:
            self._record(state, self.measure(state.global_step))

    def _record(self, state, point: dict) -> None:
        state.log_history.append(point)
        if self.forward is not None:
            self.forward({k: v for k, v in point.items() if k not in ("step", PROBLEM_REWARDS)})

    def measure(self, step: int) -> dict[str, float]:
        from maxk.train.sampling import sample_scored

        res = sample_scored(
            self.model,
            self.tokenizer,
            self.problems,
            scorer=self.scorer,
            samples=self.samples,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            tag="heldout",
            temperature=self.temperature,
            top_p=self.top_p,
            prompt_ids=self.prompt_ids,
            stop_token_ids=self.stop_token_ids,
            extract=self.extract,
        )
        n = len(self.problems) * self.samples
        row: dict[str, Any] = {
            "step": step,
            "heldout/reward": sum(map(sum, res.rewards)) / n,
            "heldout/pass@1": sum(map(sum, res.passed)) / n,
            "heldout/entropy": sum(map(sum, res.entropy)) / n,
        }
        print(f"held-out at step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items() if k != "step"))
        # each problem's mean reward, in the fixed problem order: a paired interval between two points
        row[PROBLEM_REWARDS] = " ".join(f"{sum(r) / len(r):.6g}" for r in res.rewards)
        return row
