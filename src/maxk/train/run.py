"""One named GRPO run (``maxk train``): problems -> prompts -> MaxKGRPOTrainer with sandbox rewards.

Outputs: a standard HF model directory (published whole, never half-written), a metrics CSV (one row per
optimizer step: reward, advantage statistics, |delta| per PPO iteration, KL, clip fraction, step time
split into generation / reward / update) and provenance beside both. Checkpoints live OUTSIDE the
declared outputs, in ``{checkpoints}/{run}-{hash}/`` (Snakemake deletes declared outputs before a
job), so a killed job resumes from its last checkpoint when rerun with the same config, seed, base
model and RL prompts (the hash covers all four: ``maxk.train.launch.input_fingerprint``) and the same
process layout (``maxk.train.launch.launch_signature``: a DeepSpeed checkpoint is not a plain one).
A run with no checkpoint of its own starts from the end of a run of fewer epochs and otherwise the same
training, where one has been recorded (``maxk.train.prefix``), and records its own end for a longer run.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from maxk.io import atomic_open, read_jsonl
from maxk.sandbox.judge import is_solved
from maxk.train.launch import (
    check_run,
    grpo_kwargs,
    input_fingerprint,
    launch_signature,
    run_config,
    run_hash,
    tracker_env,
)
from maxk.train.prefix import publish, trajectory_key, whole_epochs

#: Metrics CSV columns first in this order (then any other logged key, sorted).
METRIC_COLUMNS = (
    "step",
    "epoch",
    "ppo_iteration",
    "loss",
    "reward",
    "reward_std",
    "advantage/mean",
    "advantage/std",
    "advantage/abs_mean",
    "advantage/frac_zero",
    "delta/abs_mean",
    "delta/abs_mean_iter0",
    "delta/abs_mean_iter1",
    "delta/abs_mean_iter2",
    "delta/clamped_frac",
    *(f"delta/{stat}_iter{i}" for i in range(3) for stat in ("abs_q50", "abs_q90", "clamped_frac")),
    "kl",
    "clip_ratio/region_mean",
    "entropy",
    "completions/mean_length",
    "step_time",
    "time/generation_s",
    "time/reward_s",
    "time/update_s",
    "learning_rate",
    "grad_norm",
    "heldout/reward",
    "heldout/pass@1",
    "heldout/entropy",
    "own/reward",
    "own/pass@1",
    "own/entropy",
)

#: the measurements merged into their step's row (``maxk.train.heldout``: held-out pool, own prompts)
_MEASURED = ("heldout/reward", "own/reward")


class SandboxReward:
    """TRL reward function: extract each completion's program, score all of them in one parallel call.

    ``scorer.score(pairs)`` (``maxk.sandbox.Scorer``) runs the programs in the sandbox pool with per-test
    timeouts, so one slow program never blocks the batch beyond its limit. ``kind``: ``continuous``
    (fraction of tests passed) or ``binary`` (1 only if all tests pass).
    """

    __name__ = "sandbox"

    def __init__(
        self, problems: dict[str, dict[str, Any]], scorer: Any, kind: str, extract: Callable
    ) -> None:
        if kind not in ("continuous", "binary"):
            raise ValueError(f"reward kind must be continuous or binary, got {kind!r}")
        self.problems, self.scorer, self.kind, self.extract = problems, scorer, kind, extract

    def __call__(self, completions: Sequence[Any], problem_id: Sequence[str], **_: Any) -> list[float]:
        pairs = []
        for completion, pid in zip(completions, problem_id, strict=True):
            text = completion if isinstance(completion, str) else completion[-1]["content"]
            problem = self.problems[pid]
            pairs.append((problem, self.extract(text, problem)))
        scores = self.scorer.score(pairs)
        if self.kind == "continuous":
            return [float(s.reward) for s in scores]
        return [float(is_solved(s.passed, s.total)) for s in scores]


def load_problems(path: str | os.PathLike[str], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """Problems of ``path``; with ``limit``, a seeded random subset of that size (order kept)."""
    import random

    rows = [row for _, row in read_jsonl(path)]
    if limit is not None and limit < len(rows):
        keep = sorted(random.Random(seed).sample(range(len(rows)), limit))
        rows = [rows[i] for i in keep]
    return rows


def write_trained_on(model_dir: str | os.PathLike[str], data: str, problems: list[dict[str, Any]]) -> Path:
    """``model_dir/trained_on.json``: ``[{"dataset", "id"}, ...]``, one entry per problem the model was
    trained on, ``dataset`` the name of the file they came from (``results/data/NAME.jsonl.gz``). The
    contamination audit (``maxk analyze contamination``) checks them against every evaluation set."""
    from maxk.io import write_json
    from maxk.paths import TRAINED_ON, dataset_name

    name = dataset_name(str(data))
    path = Path(model_dir) / TRAINED_ON
    write_json(path, [{"dataset": name, "id": p["id"]} for p in problems])
    return path


def write_metrics_csv(path: str | os.PathLike[str], log_history: list[dict[str, Any]]) -> int:
    """One row per optimizer step from TRL's ``log_history`` (held-out points merged into their step's
    row; the one before training is step 0); adds ``time/update_s``. Returns row count."""
    by_step: dict[int, dict[str, Any]] = {}
    for entry in log_history:
        if "loss" in entry:
            row = by_step.setdefault(int(entry["step"]), {})
            row.update(entry)
            gen, rew = row.get("time/generation_s") or 0.0, row.get("time/reward_s") or 0.0
            if row.get("step_time") is not None:
                row["time/update_s"] = max(0.0, row["step_time"] - gen - rew)
        elif any(key in entry for key in _MEASURED):  # maxk.train.heldout: merged into its step's row
            by_step.setdefault(int(entry["step"]), {}).update(entry)
        # anything else: the final train_runtime summary
    rows = [by_step[step] for step in sorted(by_step)]
    extra = sorted({k for r in rows for k in r} - set(METRIC_COLUMNS))
    columns = list(METRIC_COLUMNS) + extra
    with atomic_open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def train_run(
    *,
    run: str,
    config: dict[str, Any],
    model: str,
    data: str,
    out: str,
    metrics: str,
    checkpoints: str,
    heldout_data: str | None = None,
    scorer: Any = None,
    trackers: str | None = None,
) -> dict[str, Any]:
    """Train one run. ``config``: ``{"seed", "train", "run", "prompt", "sandbox"}`` (subset of the config).

    ``heldout_data``: the held-out curve's pool (``train.heldout.dataset``); None: ``data``'s problems
    outside the run's prompts. ``scorer``: an object with ``score(pairs)``; None opens a
    ``maxk.sandbox.Scorer`` for the run. The model directory gets ``trained_on.json``: every problem
    the run trained on (``write_trained_on``). Returns a summary (steps, timings).
    """
    from datasets import Dataset
    from transformers import AutoTokenizer

    from maxk.config import job_config
    from maxk.data.prompts import build_prompt
    from maxk.generate.extract import extract_program
    from maxk.provenance import write_provenance
    from maxk.train.grpo import MaxKGRPOConfig, MaxKGRPOTrainer
    from maxk.train.native_attention import kernel_for

    config = job_config(config, ("train",))  # every key left out at its default
    seed = int(config["seed"])
    effective = run_config(config["train"], config["run"])
    check_run(run, effective)
    start_from = {"seed": seed, "model": input_fingerprint(model), "data": input_fingerprint(data),
                  "launch": launch_signature(os.environ)}  # fmt: skip
    ckpt_dir = Path(checkpoints) / f"{run}-{run_hash({**effective, **start_from})}"
    problems = load_problems(data, effective.get("max_prompts"), seed)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.padding_side = "left"
    prompts = [build_prompt(p, tokenizer, config=config["prompt"]) for p in problems]
    dataset = Dataset.from_dict({"prompt": prompts, "problem_id": [p["id"] for p in problems]})
    use_cpu = not _cuda_available()
    if trackers is not None:  # live curves under this directory (read when the trainer is built)
        os.environ.update(tracker_env(effective["report_to"], trackers, run))
    kwargs = grpo_kwargs(effective, output_dir=str(ckpt_dir), seed=seed, use_cpu=use_cpu, run_name=run)
    args = MaxKGRPOConfig(**kwargs)

    with contextlib.ExitStack() as stack:
        if scorer is None:  # our own pool for this run, closed however the run ends
            from maxk.sandbox import Scorer, check_training_isolation

            scorer = stack.enter_context(Scorer(**config["sandbox"]))
            allow = config["sandbox"]["isolation"]["allow_exposed_training"]
            check_training_isolation(scorer.layers, bool(allow))
        sandbox = _sandbox_record(scorer)
        reward = SandboxReward({p["id"]: p for p in problems}, scorer, args.reward_kind, extract_program)
        trainer = MaxKGRPOTrainer(
            model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer
        )
        start_cache, curves = None, []
        if effective["heldout"]:
            pool = heldout_data or data
            start_cache = _start_cache(checkpoints, model, [pool, data], config["sandbox"], use_cpu)
            curves = _heldout_curves(
                effective, pool, problems, tokenizer, scorer, trainer, seed, config["prompt"], start_cache
            )
            for callback in curves:
                trainer.add_callback(callback)
        last = _last_checkpoint(ckpt_dir)
        key = trajectory_key(
            effective, {**start_from, "prompt": config["prompt"], "sandbox": config["sandbox"]}
        )
        adopted = None
        if last is None and key is not None:  # the first epochs from a shorter run's end (maxk.train.prefix)
            adopted = _adopt_prefix(trainer, run, checkpoints, key, effective, ckpt_dir, curves)
            last = _last_checkpoint(ckpt_dir)
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=last)
        wall = time.perf_counter() - start

    summary = {
        "run": run,
        "steps": trainer.state.global_step,
        "resumed_from": last,
        "train_wall_s": wall,
        "sandbox": sandbox,
        "train_kernel": kernel_for(trainer.model),  # the shared-prompt passes' attention (C or torch's)
        **{k: round(v, 3) for k, v in trainer.time_totals.items()},
    }
    if start_cache is not None:  # each start point measured here or read from the run that measured it
        summary["start_measurements"] = dict(sorted(start_cache.read.items()))
    if adopted is not None:
        summary["started_from_run"] = {k: adopted[k] for k in ("run", "epochs", "steps", "source")}
    final = Path(out)
    tmp = final.with_name(f".tmp-{final.name}")
    if trainer.accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))  # every rank: gathers sharded weights where needed; rank 0 writes
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(tmp)
        write_trained_on(tmp, data, problems)
        write_provenance(tmp, config=config, seeds={"seed": seed}, effective=effective, summary=summary)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)  # the model directory appears whole or not at all
        write_metrics_csv(metrics, trainer.state.log_history)
        write_provenance(metrics, config=config, seeds={"seed": seed}, summary=summary)
        final_checkpoint, steps = _last_checkpoint(ckpt_dir), trainer.state.global_step
        if key is not None and final_checkpoint and final_checkpoint.endswith(f"-{steps}"):
            publish(checkpoints, key, run=run, epochs=whole_epochs(effective), steps=steps,
                    checkpoint=final_checkpoint, log_history=trainer.state.log_history,
                    heldout=effective["heldout"])  # fmt: skip
    return summary


def _last_checkpoint(ckpt_dir: Path) -> str | None:
    """The run's latest checkpoint under ``ckpt_dir`` (transformers' ``checkpoint-N``), or None."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None


def _adopt_prefix(trainer: Any, run: str, checkpoints: str, key: str, effective: dict, ckpt_dir: Path,
                  curves: list) -> dict[str, Any] | None:  # fmt: skip
    """Start from the end of a shorter run of trajectory ``key`` where one was recorded
    (``maxk.train.prefix.adopt``), on the main process, the others waiting; the starts of ``curves``
    that its log lacks measured on the base first (the trainer has not loaded the checkpoint yet).
    Not with several processes where a start must be measured (each process measures its own in a run
    from the base, on its device): that run trains from the base."""
    from maxk.train.prefix import adopt

    adopted = None
    if trainer.accelerator.is_main_process:

        def measure_starts(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
            missing = [c for c in curves if not any(f"{c.prefix}/reward" in entry for entry in log)]
            if missing and trainer.accelerator.num_processes > 1:
                raise _NotHere("a curve's start must be measured on every process")
            for curve in missing:
                curve.model = trainer.model
            return [curve.start() for curve in missing]

        try:
            adopted = adopt(checkpoints, key, epochs=whole_epochs(effective), heldout=effective["heldout"],
                            checkpoint_dir=ckpt_dir, save_steps=effective["save_steps"],
                            measure_starts=measure_starts)  # fmt: skip
        except _NotHere as err:
            print(f"{run}: trains from the base ({err})")
        if adopted is not None:
            print(f"{run}: starts from {adopted['run']}'s end ({adopted['epochs']} epochs, "
                  f"{adopted['steps']} steps): {adopted['source']}")  # fmt: skip
    trainer.accelerator.wait_for_everyone()
    return adopted


class _NotHere(Exception):
    """A shorter run's end that this run may not start from here (``_adopt_prefix``)."""


def _start_cache(checkpoints: str, model: str, data: list[str], sandbox: dict, use_cpu: bool):
    """Where this run's start points are kept and read (``maxk.train.heldout.StartCache``), under the
    checkpoint root: for a model in a local directory on the CPU (a hub id or a GPU: None, measured
    by each run). Its identity: the model directory's files (``maxk.generate.run.model_fingerprint``,
    as a sample's manifest records them), every byte of the data files, the sandbox
    settings, maxk's measuring code, the torch and transformers versions, the kernel path, the threads."""
    import torch
    import transformers

    from maxk.data.source import sha256_file
    from maxk.generate.run import model_fingerprint
    from maxk.train.heldout import StartCache, measuring_code_digest

    if not use_cpu or not Path(model).is_dir():
        return None
    identity = {
        "model": model_fingerprint(model)["sha256"],  # the files' bytes, not where they lie
        "data": [sha256_file(d) for d in dict.fromkeys(data)],
        "sandbox": sandbox,
        "code": measuring_code_digest(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "kernel_path": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    return StartCache(Path(checkpoints) / "start-measurements", identity)


def _heldout_curves(
    effective, data, problems, tokenizer, scorer, trainer, seed, prompt_cfg, start_cache=None
):
    """The ``train.heldout`` learning curve of this run and, with ``own_prompts``, the measurement of
    its own training prompts before and after (``maxk.train.heldout``); their start points through
    ``start_cache`` (None: measured)."""
    from maxk.data.prompts import build_prompt
    from maxk.generate.extract import extract_program
    from maxk.train.heldout import OWN, HeldoutCurve, heldout_problems, own_problems

    cfg = effective["heldout"]
    rows = [row for _, row in read_jsonl(data)]
    measured = [(heldout_problems(rows, {p["id"] for p in problems}, int(cfg["problems"]), seed),
                 int(cfg["every"]), "heldout", int(cfg["samples"]))]  # fmt: skip
    own = cfg.get("own_prompts")
    if own:
        measured.append((own_problems(problems, int(own["problems"]), seed), None, OWN, int(own["samples"])))
    curves = []
    for chosen, every, prefix, samples in measured:
        prompt_ids = [
            tokenizer(build_prompt(p, tokenizer, config=prompt_cfg), add_special_tokens=False)["input_ids"]
            for p in chosen
        ]
        curves.append(HeldoutCurve(
            chosen,
            prompt_ids,
            scorer=scorer,
            extract=extract_program,
            tokenizer=tokenizer,
            samples=samples,
            every=every,
            max_new_tokens=int(effective["max_completion_length"]),
            temperature=float(effective["temperature"]),
            top_p=float(effective["top_p"]),
            stop_token_ids=list(trainer.eos_token_ids),
            seed=seed,
            # each point also reaches the live trackers (not trainer.log: TRL's log flushes its metrics)
            forward=lambda logs: _forward_to_trackers(trainer, logs),
            prefix=prefix,
            start_cache=start_cache,
        ))  # fmt: skip
    return curves


def _forward_to_trackers(trainer: Any, logs: dict[str, Any]) -> None:
    """Hand a measurement to the trainer's callbacks' ``on_log`` (the live trackers) without touching the
    step's own logging: transformers' ``CallbackHandler.on_log`` clears ``control.should_log``, so a point
    measured at a step's end (``on_step_end``, before the trainer logs the step) used to drop that step's
    row of the metrics CSV (TRL then averaged its numbers into the next row; the last step's were lost)."""
    should_log = trainer.control.should_log
    trainer.callback_handler.on_log(trainer.args, trainer.state, trainer.control, logs)
    trainer.control.should_log = should_log


def _sandbox_record(scorer: Any) -> dict[str, Any]:
    """Under which isolation the run's rewards were computed: the level, who ran the programs, and
    what stayed exposed (``maxk.sandbox.exposed_threats``: empty unless training was opted in). A
    scorer that is no sandbox (a test's or a benchmark's) is named instead."""
    from maxk.sandbox import exposed_threats

    layers = getattr(scorer, "layers", None)
    if layers is None:
        return {"scorer": type(scorer).__name__}
    return {"level": scorer.level, "uid": layers.get("drop_uid"), "exposed": exposed_threats(layers)}


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
