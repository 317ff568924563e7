"""From config to trainer arguments and to the shell command of one training job (no heavy imports).

``grpo_kwargs`` maps the ``train`` config section plus one entry of ``runs`` to the keyword arguments of
``MaxKGRPOConfig``; ``launch_prefix`` gives what precedes ``train ...`` in the Snakemake rule: ``maxk``
on a CPU, ``accelerate launch --config_file <deepspeed yaml> --num_processes <gpus> -m maxk`` on GPUs.
Both are pure functions, tested offline.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

#: ``train`` keys passed to ``MaxKGRPOConfig`` unchanged (same name, same meaning as in TRL).
PASSTHROUGH = (
    "num_generations",
    "temperature",
    "top_p",
    "max_completion_length",
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "lr_scheduler_type",
    "warmup_steps",
    "max_grad_norm",
    "beta",
    "use_bias_correction_kl",
    "epsilon",
    "num_iterations",
    "num_train_epochs",
    "loss_type",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "bon_k",
    "delta_clamp",
    "own_ratio",
    "gradient_checkpointing",
    "bf16",
    "rollout_decoder",
)
#: per-run keys that override ``train`` (table 4 varies epochs and PPO iterations; the estimators' k,
#: its schedule, the own-ratio choice and the step size may differ between runs too: an off-policy run
#: must stay near the policy it sampled from; so may the group size n, which is BoN-max's k, with the
#: micro-batch that holds whole groups). A run's ``heldout`` is merged into ``train.heldout`` key
#: by key instead (``run_config``).
RUN_OVERRIDES = (
    "num_train_epochs", "num_iterations", "learning_rate", "bon_k", "bon_k_schedule", "own_ratio",
    "num_generations", "per_device_train_batch_size", "prompt_filter", "max_prompts",
)  # fmt: skip
#: the overrides whose null is a value (no filter, every problem), set by a run that names them
NULLABLE_OVERRIDES = ("prompt_filter", "max_prompts")


def run_config(train: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The effective hyperparameters of one run: ``train`` with the run's overrides applied (the run's
    keys it leaves out at their ``runs`` schema defaults)."""
    run = _run_entry(run)
    merged = dict(train)
    for key in RUN_OVERRIDES:
        if run.get(key) is not None or (key in NULLABLE_OVERRIDES and key in run):
            merged[key] = run[key]
    if run.get("heldout"):
        if not train.get("heldout"):
            raise ValueError("a run's heldout override needs train.heldout (the held-out curve is off)")
        merged["heldout"] = {**train["heldout"], **run["heldout"]}
    merged["advantage_method"] = run["method"]
    merged["reward_kind"] = run["reward_kind"]
    return merged


def _run_entry(run: Mapping[str, Any]) -> dict[str, Any]:
    """A ``runs`` entry checked against its schema, the keys it leaves out at their defaults: a fresh copy.
    The check is remembered per entry (its JSON): the Snakefile asks for every run's settings while it
    builds each training job's DAG node (``maxk.workflow.resources.run_settings``), some 900 checks in
    the default's dry run. Remembered, the default's dry run takes 3.6 s of CPU instead of 4.0 (the paper
    config's 3.8 instead of 4.6; medians of 3), in every Snakemake process: a run, a dry run, each
    cluster job's two."""
    try:
        key = json.dumps(run)
    except (TypeError, ValueError):  # not JSON (a value YAML could type otherwise): checked afresh
        return _checked_entry(dict(run))
    return copy.deepcopy(_checked_entry_of(key))


@functools.cache
def _checked_entry_of(key: str) -> dict[str, Any]:
    return _checked_entry(json.loads(key))


def _checked_entry(run: dict[str, Any]) -> dict[str, Any]:
    from maxk.config import with_defaults

    return with_defaults("runs", {"run": run})["run"]


def check_run(run: str, effective: dict[str, Any]) -> None:
    """Reject settings a run cannot honour. A checkpoint must fall between generation batches: TRL
    regenerates every ``num_iterations`` optimizer steps (``steps_per_generation`` = gradient
    accumulation), so a ``save_steps`` that is not a multiple of it resumes into a partly used batch,
    which then gets extra PPO iterations. Where the run's group size and estimator are given: the
    micro-batch must hold whole groups, and the estimator's k must be one it takes at that group size,
    so that planning fails here, naming the run, and not when its job starts."""
    n, batch = effective.get("num_generations"), effective.get("per_device_train_batch_size")
    if n is not None and batch is not None and int(batch) % int(n):
        raise ValueError(
            f"run {run!r}: per_device_train_batch_size = {batch} is not a multiple of "
            f"num_generations = {n}; every micro-batch must hold whole groups"
        )
    if n is not None and effective.get("advantage_method"):
        from maxk.estimators import needs  # not maxk.objectives: planning need not import torch

        try:
            needs(effective["advantage_method"]).check(
                k=effective.get("bon_k"), n=int(n), reward_kind=effective["reward_kind"]
            )
        except ValueError as err:
            raise ValueError(f"run {run!r}: {err}") from None
    save, iters = effective["save_steps"], int(effective["num_iterations"])
    if save and int(save) % iters:
        nearest = iters * max(1, round(int(save) / iters))
        raise ValueError(
            f"run {run!r}: train.save_steps = {save} is not a multiple of num_iterations = {iters}; "
            f"a resumed run would replay a partly used generation batch (use e.g. {nearest})"
        )


def run_hash(effective: dict[str, Any]) -> str:
    """Short hash of a run's effective config: checkpoints of another config are never resumed."""
    return hashlib.sha256(json.dumps(effective, sort_keys=True, default=str).encode()).hexdigest()[:10]


def input_fingerprint(path: str) -> str:
    """What a run starts from, for its checkpoint directory's hash: a file's sha256; a directory's
    path with every file's name, size and modification time (a rebuilt model differs; its weights are
    not read); anything else (a hub id) as given. A checkpoint of another base model, another RL
    prompt file or another seed is then never resumed."""
    from pathlib import Path

    p = Path(path)
    digest = hashlib.sha256()
    if p.is_file():
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    if p.is_dir():
        digest.update(str(p.resolve()).encode())
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            st = f.stat()
            digest.update(f"{f.relative_to(p)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()
    return str(path)


def launch_signature(env: Mapping[str, str]) -> dict[str, Any]:
    """How the job's processes are laid out, from what ``accelerate launch`` puts in their environment:
    the number of processes (``WORLD_SIZE``) and the DeepSpeed ZeRO stage (None without DeepSpeed).

    A checkpoint's optimizer state is saved in this layout (DeepSpeed writes its own partitioned
    files, which a plain checkpoint lacks), so it is part of the checkpoint directory's hash: on a GPU,
    a ZeRO-2 job handed the checkpoint of a plain ``maxk train`` job of the same run stopped with
    transformers' "Can't find a valid checkpoint" (``benchmarks/gpu_check.py --launch``, issue 25)."""
    deepspeed = env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") or "0"
    return {"processes": int(env.get("WORLD_SIZE") or 1), "zero_stage": int(stage) if deepspeed else None}


def grpo_kwargs(
    effective: dict[str, Any], *, output_dir: str, seed: int, use_cpu: bool, run_name: str | None = None
) -> dict[str, Any]:
    """Keyword arguments of ``MaxKGRPOConfig`` for one run (``effective`` from ``run_config``)."""
    kw: dict[str, Any] = {key: effective[key] for key in PASSTHROUGH if effective.get(key) is not None}
    schedule = effective.get("bon_k_schedule")
    if schedule:  # {kind, final, at} -> MaxKGRPOConfig's flat fields
        kw.update(bon_k_schedule=schedule["kind"], bon_k_final=schedule.get("final"))
        if schedule.get("at") is not None:
            kw["bon_k_switch"] = schedule["at"]
    kw.update(
        advantage_method=effective["advantage_method"],
        reward_kind=effective["reward_kind"],
        output_dir=output_dir,
        seed=seed,
        data_seed=seed,
        max_steps=effective["max_steps"] or -1,
        optim="adamw_torch",  # with weight_decay 0 this is Adam, as in the paper
        save_strategy="steps",
        save_steps=effective["save_steps"],
        save_total_limit=1,
        logging_steps=1,
        report_to=effective["report_to"],
        run_name=run_name,
        project="maxk",  # trackio's project (wandb's: tracker_env)
        trackio_static_space_id=False,  # local only: never a Space on the hub
        disable_dropout=True,
        use_cpu=use_cpu,
        # TRL loads the policy (and the reference, beta > 0) in float32 unless told: 30 GB per copy at 7B
        model_init_kwargs={"dtype": "float32" if use_cpu else effective["model_dtype"]},
        dataloader_num_workers=0,
        log_completions=False,
        scale_rewards="group",  # irrelevant: advantages come from maxk.objectives
    )
    if use_cpu:
        kw.update(bf16=False, gradient_checkpointing=False)
    vllm = effective["vllm"]
    if vllm["enabled"] and not use_cpu:
        kw.update(
            use_vllm=True,
            vllm_mode=vllm["mode"],
            vllm_gpu_memory_utilization=vllm["gpu_memory_utilization"],
            vllm_importance_sampling_correction=vllm["importance_sampling_correction"],
            vllm_enable_sleep_mode=vllm["enable_sleep_mode"],
        )
    return kw


def launch_prefix(launch: dict[str, Any], gpus: int, basedir: str | None = None, threads: int = 1) -> str:
    """Command prefix of a training job: ``maxk`` (CPU) or ``accelerate launch ... -m maxk`` (GPUs).

    A relative ``accelerate_config`` is relative to ``basedir`` (the workflow's folder), so the job
    finds it whatever its working directory (``snakemake --directory``).

    The job's ``threads`` are shared among its ``gpus`` processes (``--num_cpu_threads_per_process``).
    Without it, accelerate gives every process the job's OMP_NUM_THREADS, which Snakemake sets to all
    of the job's threads: 8 ranks x 64 threads on a 64-core node."""
    if gpus <= 0:
        return "maxk"
    config_file = launch["accelerate_config"]
    if basedir and not os.path.isabs(config_file):
        config_file = os.path.join(basedir, config_file)
    parts = [
        "accelerate",
        "launch",
        "--config_file",
        config_file,
        "--num_processes",
        str(gpus),
        "--num_cpu_threads_per_process",
        str(max(1, threads // gpus)),
    ]
    if launch.get("main_process_port"):
        parts += ["--main_process_port", str(launch["main_process_port"])]
    parts += ["-m", "maxk"]
    return shlex.join(parts)


def tracker_env(report_to: str, directory: str, run: str) -> dict[str, str]:
    """Environment that puts a run's live curves under ``directory`` offline: TensorBoard event files in
    ``{directory}/tensorboard/{run}``; trackio's database in ``{directory}/trackio``; wandb's offline runs
    in ``{directory}/wandb`` (``WANDB_MODE=offline`` unless the caller set a mode)."""
    if report_to == "tensorboard":
        return {"TENSORBOARD_LOGGING_DIR": os.path.join(directory, "tensorboard", run)}
    if report_to == "trackio":
        return {"TRACKIO_DIR": os.path.join(directory, "trackio")}
    if report_to == "wandb":
        mode = os.environ.get("WANDB_MODE", "offline")
        return {"WANDB_DIR": os.path.join(directory, "wandb"), "WANDB_MODE": mode, "WANDB_PROJECT": "maxk"}
    return {}
