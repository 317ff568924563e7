"""Helpers for ``workflow/rules/generate.smk`` (kept here so the rule file holds only rules).

Pure functions of the config dict; no torch. ``model`` is ``base`` or a training run name.
"""

from __future__ import annotations

import json
from typing import Any

RESULTS = "results"


def model_path(config: dict[str, Any], model: str) -> str:
    """Weights of ``model``. ``base`` follows the training stage's ``base_model`` section: the
    directory ``results/models/base`` when the workflow builds it (``build: true``), else
    ``base_model.path`` (a hub id or a local directory). A run name is ``results/models/{run}``."""
    if model == "base":
        base = config["base_model"]
        return f"{RESULTS}/models/base" if base.get("build") else base["path"]
    return f"{RESULTS}/models/{model}"


def model_revision_arg(config: dict[str, Any], model: str) -> str:
    """`` --revision <sha>`` (with its leading space) for the base model when ``base_model.revision``
    pins one, else '': the rules append it to the model argument."""
    base = config["base_model"]
    if model == "base" and not base.get("build") and base.get("revision"):
        return f" --revision {base['revision']}"
    return ""


def model_inputs(config: dict[str, Any], model: str) -> list[str]:
    """The model directory as a rule input when the workflow builds it (never a hub id)."""
    path = model_path(config, model)
    return [path] if path.startswith(f"{RESULTS}/") else []


def job_config_json(config: dict[str, Any]) -> str:
    """What a generation job depends on (seed, the generate and prompt sections) as canonical JSON,
    for ``params:``: editing another section does not rerun generation."""
    subset = {"seed": config["seed"], "generate": config["generate"], "prompt": config["prompt"]}
    return json.dumps(subset, sort_keys=True)


def shard_resources(config: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """``base`` (``rule_resources("generate_shard")``) with one GPU per tensor-parallel rank for vLLM."""
    res = {"threads": 1, "mem_mb": 2000, "runtime": 30, "gpu": 0}
    res.update(base)
    gen = config["generate"]
    if gen["backend"] == "vllm":
        res["gpu"] = max(res["gpu"], gen["vllm"]["tensor_parallel_size"])
    return res


def shard_paths(config: dict[str, Any], model: str, dataset: str, suffix: str = ".parquet") -> list[str]:
    """The shard files of (model, dataset), in shard order."""
    n = config["generate"]["num_shards"]
    return [f"{RESULTS}/samples/{model}/{dataset}/shard{i}{suffix}" for i in range(n)]
