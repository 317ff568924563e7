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
paired interval, ``maxk.analysis.claims``); ``heldout/problem_max@{k}`` (k = 2, 4, ... up to
``samples``) and ``heldout/problem_pass@1`` hold each problem's unbiased max@k and pass@1 the same
way, so every run's own objective (max@k at its ``bon_k``, max@n, pass@1) can be read on the pool
(``maxk.analysis.learning``).

The same callback with ``prefix="own"`` and ``every=None`` measures a seeded sample of the run's OWN
training prompts before the first step and after the last (``train.heldout.own_prompts``): the run
minus its start on the prompts it trains on, which tells an optimisation failure (no rise there
either) from a generalisation failure (a rise there, none on unseen problems).

**The start, measured once.** Before the first step every run of a seed measures the same model (the
base) on the same problems with the same seeds: the same numbers (the decode loop's samples depend on
the model, the prompts and the seeds, not on the run). With ``start_cache`` (``StartCache``) the point
is kept in a file named by everything it depends on (the model's bytes, the problems, prompts and
sampling settings, the sandbox settings, maxk's measuring code, the torch and transformers versions,
the CPU kernel path and the thread count) and read, not measured again, by the next run that needs
it: about 8 s of each run's start on the embedded scale. A point read says so in the log and in the
run's provenance (``start_measurements``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from maxk.seeds import derive_seed

__all__ = [
    "OWN",
    "PROBLEM_REWARDS",
    "HeldoutCurve",
    "StartCache",
    "heldout_problems",
    "measuring_code_digest",
    "own_problems",
    "problem_column",
]

#: the modules whose code makes a measurement's numbers (``measuring_code_digest``)
MEASURING_MODULES = ("maxk.generate.decode", "maxk.generate.extract", "maxk.train.sampling",
                     "maxk.train.heldout", "maxk.metrics", "maxk.seeds", "maxk.sandbox")  # fmt: skip

PROBLEM_REWARDS = "heldout/problem_rewards"  # metrics CSV column: per-problem mean rewards, space-separated
#: the prefix of the own-training-prompts measurement's columns (``own/reward``, ``own/problem_rewards``, ...)
OWN = "own"


def problem_column(prefix: str, metric: str) -> str:
    """The metrics CSV column of per-problem values of ``metric`` (``rewards``: the mean reward, or
    ``max@k``, ``pass@1``) measured under ``prefix`` (``heldout`` or ``own``)."""
    return f"{prefix}/problem_{metric}"


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


def own_problems(problems: list[dict[str, Any]], count: int, seed: int) -> list[dict]:
    """``count`` of the run's own training ``problems`` (all of them when fewer), a seeded choice in order."""
    import random

    if count >= len(problems):
        return list(problems)
    keep = sorted(random.Random(derive_seed(seed, "own_prompts")).sample(range(len(problems)), count))
    return [problems[i] for i in keep]


def measuring_code_digest() -> str:
    """sha256 over the source of ``MEASURING_MODULES`` (a package: every ``.py`` file under it), in
    name order: another version of the code that measures never reads a point this one wrote."""
    import importlib

    digest = hashlib.sha256()
    for name in MEASURING_MODULES:
        module = importlib.import_module(name)
        origin = Path(module.__file__ or "")
        files = sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
        for f in files:
            digest.update(f"{name}:{f.name}\0".encode() + f.read_bytes())
    return digest.hexdigest()


@dataclass
class StartCache:
    """Where the start points are kept (``directory``) and what every point depends on beyond its
    curve's own settings (``identity``: the model's bytes, the sandbox settings, the code, versions,
    kernel path, threads; ``maxk.train.run`` builds it)."""

    directory: Path
    identity: dict[str, Any]
    read: dict[str, str] = field(default_factory=dict)  # prefix -> "measured" or the file read

    def path(self, curve: dict[str, Any]) -> Path:
        blob = json.dumps({"identity": self.identity, "curve": curve}, sort_keys=True, default=str)
        return self.directory / f"{hashlib.sha256(blob.encode()).hexdigest()}.json"

    def load(self, path: Path) -> dict[str, Any] | None:
        """The point kept at ``path``, or None (absent, or not a point: measured again)."""
        try:
            point = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return point if isinstance(point, dict) and point.get("step") == 0 else None

    def keep(self, path: Path, point: dict[str, Any]) -> None:
        """Write ``point`` whole or not at all (two runs may write the same point at once)."""
        from maxk.io import write_json

        write_json(path, point)


class HeldoutCurve(TrainerCallback):
    """Measure ``problems`` before training and every ``every`` steps, and after the last (see the
    module docstring); ``every=None``: before the first step and after the last only. ``prefix`` names
    the metrics (``heldout``; ``own`` for the run's own prompts)."""

    def __init__(
        self,
        problems: list[dict[str, Any]],
        prompt_ids: list[list[int]],
        *,
        scorer: Any,
        extract: Any,
        tokenizer: Any,
        samples: int,
        every: int | None,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop_token_ids: list[int],
        seed: int,
        forward: Any = None,
        prefix: str = "heldout",
        start_cache: StartCache | None = None,
    ) -> None:
        if (every is not None and every < 1) or samples < 1:
            raise ValueError(f"heldout every and samples must be >= 1, got {every} and {samples}")
        self.prefix = prefix
        self.problems, self.prompt_ids = problems, prompt_ids
        self.scorer, self.extract, self.tokenizer = scorer, extract, tokenizer
        self.samples, self.every = samples, every
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.stop_token_ids, self.seed = stop_token_ids, seed
        self.model: Any = None
        # called with each point's numbers (step and per-problem rewards left out): the live trackers
        self.forward = forward
        self.start_cache = start_cache

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.model = model
        if not any(f"{self.prefix}/reward" in e for e in state.log_history):
            if state.global_step > 0:  # the weights are a checkpoint's: a start measured now would be wrong
                raise RuntimeError(
                    f"resuming at step {state.global_step}, the checkpoint's log has no {self.prefix} "
                    "point before the first step; remove the run's checkpoints (train.checkpoints) "
                    "to train it anew"
                )
            self._record(state, self.start())

    def start(self) -> dict[str, Any]:
        """The point before the first step: read from ``start_cache`` where a run measured it, else
        measured (and kept there)."""
        if self.start_cache is None:
            return self.measure(0)
        path = self.start_cache.path(self.settings())
        point = self.start_cache.load(path)
        if point is not None:
            print(f"{self.prefix} at step 0: read from {path} (measured by an earlier run of this model)")
            self.start_cache.read[self.prefix] = str(path)
            return point
        point = self.measure(0)
        self.start_cache.keep(path, point)
        self.start_cache.read[self.prefix] = "measured"
        return point

    def settings(self) -> dict[str, Any]:
        """What this curve's points depend on beyond the model (``StartCache.path``)."""
        prompts = hashlib.sha256(json.dumps(self.prompt_ids).encode()).hexdigest()
        return {"prefix": self.prefix, "problems": [p["id"] for p in self.problems], "prompt_ids": prompts,
                "samples": self.samples, "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature, "top_p": self.top_p,
                "stop_token_ids": list(self.stop_token_ids), "seed": self.seed}  # fmt: skip

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step == state.max_steps or (self.every is not None and step % self.every == 0):
            self._record(state, self.measure(step))

    def _record(self, state, point: dict) -> None:
        state.log_history.append(point)
        if self.forward is not None:
            per_problem = f"{self.prefix}/problem_"
            self.forward({k: v for k, v in point.items() if k != "step" and not k.startswith(per_problem)})

    def measure(self, step: int) -> dict[str, float]:
        from maxk.metrics import max_at_k_batch, powers_of_two
        from maxk.train.sampling import sample_scored

        res = sample_scored(
            self.model,
            self.tokenizer,
            self.problems,
            scorer=self.scorer,
            samples=self.samples,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            tag=self.prefix,
            temperature=self.temperature,
            top_p=self.top_p,
            prompt_ids=self.prompt_ids,
            stop_token_ids=self.stop_token_ids,
            extract=self.extract,
        )
        n, pre = len(self.problems) * self.samples, self.prefix
        row: dict[str, Any] = {
            "step": step,
            f"{pre}/reward": sum(map(sum, res.rewards)) / n,
            f"{pre}/pass@1": sum(map(sum, res.passed)) / n,
            f"{pre}/entropy": sum(map(sum, res.entropy)) / n,
        }
        print(f"{pre} at step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items() if k != "step"))
        # each problem's values in the fixed problem order: a paired interval between two points
        ks = [k for k in powers_of_two(self.samples) if k > 1]
        per_problem = {"rewards": [sum(r) / len(r) for r in res.rewards],
                       "pass@1": [sum(p) / len(p) for p in res.passed]}  # fmt: skip
        if ks:
            table = max_at_k_batch([list(r) for r in res.rewards], ks)
            per_problem.update({f"max@{k}": table[:, j].tolist() for j, k in enumerate(ks)})
        for metric, values in per_problem.items():
            row[problem_column(pre, metric)] = " ".join(f"{v:.6g}" for v in values)
        return row
