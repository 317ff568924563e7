"""A run that passes through another run's end: the first epochs of a longer run, trained once.

Two runs of one seed whose settings differ only in ``num_train_epochs`` (whole numbers) and in what
they measure on the side (``train.heldout``: the held-out curve and the own prompts, which never touch
the weights) train the same first epochs byte for byte: the same prompts in the same order (each
epoch's order a function of (seed, epoch): ``maxk.train.grpo.EpochRepeatSampler``), the same rollouts
(seeded from (seed, step, prompt)), the same updates, provided no step depends on how long the run is
(the learning-rate schedule ``constant`` or ``constant_with_warmup``, a constant ``bon_k``, no
``max_steps``). The paper's table 4 has two such pairs, ``grpo_e1_ppo1`` / ``grpo_e4_ppo1`` and
``grpo_continuous`` / ``grpo_e4_ppo3`` (one and four epochs).

So the shorter run, when it ends, publishes its final checkpoint (``publish``: a record under
``{checkpoints}/prefixes/{key}/``, ``key`` = ``trajectory_key``), and the longer run, when it has no
checkpoint of its own, starts from it (``adopt``) and trains only the epochs after it: the same
weights, metrics and curves as training from the base (``tests/train/test_train_prefix.py`` checks all
three). Its held-out curve keeps the shorter run's points where the two curves are the same curve;
where they are not, this run's curve must have no point before the shorter run's end but its start,
which the caller measures on the base (``maxk.train.run``); otherwise nothing is adopted. Without a
record (the shorter run has not finished, or ``work/`` was removed) the run trains from the base:
the same result, slower.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "LENGTH_FREE_SCHEDULES",
    "NOT_TRAJECTORY",
    "adopt",
    "prefix_run",
    "publish",
    "remaining_epochs",
    "trajectory",
    "trajectory_key",
    "whole_epochs",
]

#: settings that do not make the weights: how long the run is, what it measures beside its training,
#: where and how often it saves a checkpoint, where it reports
NOT_TRAJECTORY = ("num_train_epochs", "heldout", "save_steps", "checkpoints", "report_to")
#: the record's format: a record of another format (or none: written before the metrics CSV kept the rows of
#: the steps its held-out curve measured at, 2026-11-30) is never adopted
FORMAT = 2
#: learning-rate schedules (transformers' names) whose value at a step does not depend on the run's length
LENGTH_FREE_SCHEDULES = ("constant", "constant_with_warmup")


def whole_epochs(effective: Mapping[str, Any]) -> int | None:
    """``num_train_epochs`` as an int when it is a whole number of at least 1, else None."""
    epochs = float(effective.get("num_train_epochs") or 0)
    return int(epochs) if epochs >= 1 and epochs.is_integer() else None


def trajectory(effective: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings that make a run's weights at every step (``effective`` less ``NOT_TRAJECTORY``), or
    None where a step depends on the run's length: ``max_steps`` set, a fractional epoch count, a
    learning-rate schedule outside ``LENGTH_FREE_SCHEDULES``, a ``bon_k`` schedule that moves."""
    if effective.get("max_steps") or whole_epochs(effective) is None:
        return None
    if effective.get("lr_scheduler_type", "constant") not in LENGTH_FREE_SCHEDULES:
        return None
    schedule = effective.get("bon_k_schedule")
    if schedule and schedule.get("kind", "constant") != "constant":
        return None
    return {key: value for key, value in effective.items() if key not in NOT_TRAJECTORY}


def trajectory_key(effective: Mapping[str, Any], start: Mapping[str, Any]) -> str | None:
    """Name of the trajectory of a run (``trajectory``) from ``start`` (seed, base model, prompts,
    process layout: ``maxk.train.run``'s ``start_from``); None where the run has none."""
    from maxk.train.launch import run_hash

    settings = trajectory(effective)
    return None if settings is None else run_hash({**settings, **start})


def prefix_run(effective: Mapping[str, Mapping[str, Any]], run: str) -> str | None:
    """Of the runs ``effective`` (name -> effective settings, one seed, one prompt file each: the caller
    checks), the one whose end ``run`` passes through: the same trajectory, the most whole epochs fewer
    than ``run``'s (ties: the first name); None where there is none."""
    mine = trajectory(effective[run])
    if mine is None:
        return None
    epochs = whole_epochs(effective[run])
    best: tuple[int, str] | None = None
    for name in sorted(effective):
        other = effective[name]
        theirs = whole_epochs(other)
        if name == run or theirs is None or theirs >= epochs or trajectory(other) != mine:
            continue
        if best is None or theirs > best[0]:
            best = (theirs, name)
    return None if best is None else best[1]


def remaining_epochs(effective: Mapping[str, Mapping[str, Any]], run: str) -> float:
    """The epochs ``run``'s job trains: its own less those of the run it passes through (``prefix_run``)."""
    prefix = prefix_run(effective, run)
    own = float(effective[run]["num_train_epochs"])
    return own - (float(effective[prefix]["num_train_epochs"]) if prefix else 0.0)


def _record_dir(root: str | os.PathLike[str], key: str) -> Path:
    return Path(root) / "prefixes" / key


def publish(
    root: str | os.PathLike[str],
    key: str,
    *,
    run: str,
    epochs: int,
    steps: int,
    checkpoint: str | os.PathLike[str],
    log_history: list[dict[str, Any]],
    heldout: Mapping[str, Any] | None,
) -> Path:
    """Record that run ``run`` of trajectory ``key`` ended after ``epochs`` epochs, ``steps`` steps, at
    ``checkpoint`` (its final checkpoint; ``log_history``, the run's whole log) and measured with
    ``heldout`` (its ``train.heldout``). Written whole or not at all; returns the record's path."""
    from maxk.io import write_json

    path = _record_dir(root, key) / f"epochs-{epochs}.json"
    write_json(path, {"format": FORMAT, "run": run, "epochs": epochs, "steps": int(steps),
                      "checkpoint": str(Path(checkpoint).resolve()), "heldout": heldout,
                      "log_history": log_history})  # fmt: skip
    return path


def _curve(heldout: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The held-out curve's own settings (``own_prompts`` measured apart)."""
    return None if not heldout else {k: v for k, v in heldout.items() if k != "own_prompts"}


def kept_measurements(
    log_history: list[dict[str, Any]],
    steps: int,
    heldout: Mapping[str, Any] | None,
    prefix_heldout: Mapping[str, Any] | None,
) -> list[dict[str, Any]] | None:
    """The shorter run's measurement entries this run would have logged itself up to ``steps`` (its
    end): its held-out points where both curves are the same curve (less an end point off this curve's
    cadence); none where this run's curve has no point in ``(0, steps]`` (its start is measured again);
    None where this run's curve would have points there that the shorter run did not measure. Own
    prompts are measured at the start and the end only: none is kept."""
    curve, theirs = _curve(heldout), _curve(prefix_heldout)
    if curve is None:
        return []
    every = int(curve["every"])
    if curve == theirs:
        return [e for e in log_history if "heldout/reward" in e
                and (int(e["step"]) < steps or steps % every == 0)]  # fmt: skip
    return [] if every > steps else None


def adopt(
    root: str | os.PathLike[str],
    key: str,
    *,
    epochs: int,
    heldout: Mapping[str, Any] | None,
    checkpoint_dir: str | os.PathLike[str],
    save_steps: int,
    measure_starts: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> dict[str, Any] | None:
    """Start this run (``epochs`` epochs of trajectory ``key``, measuring with ``heldout``, saving every
    ``save_steps``) from the end of the longest shorter run published for ``key``: its final checkpoint
    linked (or copied) into ``checkpoint_dir`` as ``checkpoint-STEPS``, its ``trainer_state.json``
    holding the shorter run's training log, the measurements this run keeps (``kept_measurements``) and
    what ``measure_starts(log)`` returns for them (the starts the log lacks, measured on the base). The
    checkpoint appears whole, its starts in it, or not at all. Returns the record (``"checkpoint"`` the
    adopted copy, ``"source"`` the shorter run's), or None where nothing can be adopted."""
    records = []
    for path in sorted(_record_dir(root, key).glob("epochs-*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        saved = Path(record.get("checkpoint", "")) / "trainer_state.json"
        if record.get("format") == FORMAT and int(record.get("epochs", 0)) < epochs and saved.is_file():
            records.append(record)
    for record in sorted(records, key=lambda r: -int(r["epochs"])):
        steps = int(record["steps"])
        kept = kept_measurements(record["log_history"], steps, heldout, record.get("heldout"))
        if kept is None:
            continue
        log = kept + [e for e in record["log_history"] if "loss" in e]  # its steps (not its summary)
        if measure_starts is not None:
            log = measure_starts(log) + log
        target = Path(checkpoint_dir) / f"checkpoint-{steps}"
        tmp = target.with_name(f".tmp-{target.name}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(record["checkpoint"], tmp, copy_function=_link_or_copy)
        state_path = tmp / "trainer_state.json"
        state = json.loads(state_path.read_text(encoding="utf-8"))
        state["log_history"] = log
        state["save_steps"] = int(save_steps)  # the shorter run's would stay in force (the Trainer keeps it)
        state_path.unlink()  # a link to the shorter run's file: replaced, never written through
        state_path.write_text(json.dumps(state, indent=2), encoding="utf-8")
        os.replace(tmp, target)
        return {**record, "checkpoint": str(target), "source": record["checkpoint"]}
    return None


def _link_or_copy(src: str, dst: str) -> str:
    """A hard link (no bytes copied; checkpoints are never written after they are saved), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst
