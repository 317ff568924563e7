"""Per-rule Slurm/local resources from the config's ``resources`` section (used by common.smk).

Memory and runtime grow with each retry (``retries`` in the profile: attempt 1, 2, 3), because a job
that died of either is most likely to succeed with more. The growth stops at the rule's caps
``max_mem_mb`` / ``max_runtime``. A GPU rule without caps does not grow: a retry of an 8-GPU training
job asking for 2-3x a node's memory or a partition's time limit is never scheduled, and only the user
knows the partition's limits. A CPU rule without caps grows freely.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: growth of a CPU rule without caps: unbounded in practice.
UNBOUNDED = 10**9


def grows(base: int, cap: int) -> Callable[..., int]:
    """A resource callable for Snakemake: ``base`` times the attempt, never above ``cap``."""
    return lambda wildcards, attempt: min(int(base) * int(attempt), int(cap))


def retry_resources(res: dict[str, Any]) -> dict[str, Any]:
    """``resources:`` of a rule from its merged config entry (threads dropped; mem_mb and runtime as
    callables of the attempt; gpu only when > 0, with ``nodes`` = 1; other keys, such as
    slurm_partition, as they are).

    A GPU job runs on one node (``--nodes=1``): its ranks are started by one ``accelerate launch`` (or one
    vLLM engine) inside the job's single ``srun`` step, which reaches only its own node's GPUs; without
    the pin Slurm may grant 8 GPUs as 4 + 4 on two nodes and half the ranks would find none."""
    res = dict(res)
    res.pop("threads", None)
    gpu = int(res.pop("gpu", 0) or 0)
    mem, runtime = int(res.pop("mem_mb", 2000)), int(res.pop("runtime", 30))
    out: dict[str, Any] = {
        "mem_mb": grows(mem, res.pop("max_mem_mb", mem if gpu else UNBOUNDED)),
        "runtime": grows(runtime, res.pop("max_runtime", runtime if gpu else UNBOUNDED)),
    }
    if gpu:
        out["gpu"] = gpu
        out["nodes"] = 1
    out.update(res)
    return out


def generate_resources(config: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """``base`` (rule ``generate_shard``'s merged config entry) with one GPU per tensor-parallel rank
    when the backend is vLLM."""
    res = {"threads": 1, **base}
    gen = config["generate"]
    if gen["backend"] == "vllm":
        res["gpu"] = max(int(res.get("gpu", 0) or 0), gen["vllm"]["tensor_parallel_size"])
    return res


def run_settings(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each run's effective training settings (``maxk.train.launch.run_config``), by name."""
    from maxk.train.launch import run_config

    return {run: run_config(config["train"], spec) for run, spec in config["runs"].items()}


def prefix_of(config: dict[str, Any], run: str) -> str | None:
    """The run whose end run ``run``'s training job starts from (``maxk.train.prefix.prefix_run``: the
    same trajectory, fewer whole epochs), so the job waits for it; None where none."""
    from maxk.train.prefix import prefix_run

    return prefix_run(run_settings(config), run)


def train_priority(config: dict[str, Any], run: str) -> int:
    """Snakemake ``priority:`` of run ``run``'s training job: the passes over its prompts of the longest
    chain of training jobs it starts, ``ceil(epochs * (1 + num_iterations))`` for the epochs its own job
    trains (those after the run it starts from, ``prefix_of``: ``maxk.train.prefix.remaining_epochs``),
    plus the highest priority of the runs that start from its end. Among the jobs ready at once
    Snakemake starts the higher first, so the longest runs (and the runs they wait for) start first and
    no long run is left alone at the end of the run with a core idle beside it
    (longest-processing-time-first). Scheduling only: no output changes."""
    return _chain_passes(run_settings(config), run)


def _chain_passes(effective: dict[str, dict[str, Any]], run: str) -> int:
    """``train_priority`` on the runs' effective settings (``run_settings``), computed once."""
    from maxk.train.prefix import prefix_run, remaining_epochs

    own = math.ceil(remaining_epochs(effective, run) * (1 + int(effective[run]["num_iterations"])))
    after = [_chain_passes(effective, other) for other in effective if prefix_run(effective, other) == run]
    return own + max(after, default=0)


def prompts_priority(config: dict[str, Any], filter_suffix: str, threads: int = 1) -> int:
    """Snakemake ``priority:`` of the ``rl_prompts`` job whose ``{filter}`` wildcard is ``filter_suffix``
    (empty: the shared file; ``-KEY``: a run's own filter) and which computes with ``threads`` threads:
    above any set of training jobs that could run on those threads in its place, ``threads`` times the
    highest ``train_priority`` of the runs that read its file, plus one (0 where none does).

    Snakemake does not pass a job's priority to the jobs it waits on, so without a priority of its own a
    seed's prompts waited behind every ready generation and scoring job, and its training with them (in
    a three-seed run of the default seed 3's prompts were built 42 minutes in); and its MILP scheduler
    sums the priorities of the jobs it starts together, so a two-thread job with one training job's
    priority lost to any two training jobs (seen: seed 1234's runs started before seeds 2's and 3's
    prompts, on which all their runs wait)."""
    from maxk import paths as P

    mine = P.edge_prompts_pattern("0", config["train"]["dataset"]).format(filter=filter_suffix)
    readers = [run for run in config["runs"] if P.train_prompts(config, "0", run) == mine]
    return int(threads) * max(train_priority(config, run) for run in readers) + 1 if readers else 0
