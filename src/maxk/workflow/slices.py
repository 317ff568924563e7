"""The part of the config each job depends on, defined once per rule.

A rule passes its slice to its command as ``--config-json`` through ``params:``, so Snakemake reruns
the job when, and only when, that part changes: editing the analysis section does not retrain a model.
Each command reads back exactly the shape its slice has here. ``config`` is the validated config
(``maxk.config.validate_config``: every default filled in), so nothing here has a fallback of its own.

    rule               slice
    data_build         the dataset's entry, its pool, the data section's other keys, prompt
    base_model         seed, base_model, prompt, sandbox
    rl_prompts         seed, train's dataset / prompt_filter (or a run's, by its key) / sampling keys,
                       prompt, sandbox
    train              seed, train, the run's entry, prompt, sandbox   (checked: maxk.train.launch.check_run)
    generate_shard     seed, generate, prompt   (a tempered base's: its own generate.temperature)
    score              the sandbox section
    analysis_metrics   analysis.ks, analysis.ragged
    analysis_*         analysis without lab and claims   (tables, significance, figures)
    analysis_claims    analysis.claims, models, significance, bootstrap, decimals, and each run's
                       objective settings (``maxk.analysis.learning.learning_settings``)
    analysis_across_seeds  the same, for the claims across the seeds
    analysis_lab       analysis.lab
    environment        all of it but `warm_start` (the provenance record hashes the config)

A rule of one seed's run passes its ``seed`` wildcard (``config_json(..., seed=wc.seed)``): its
slice's ``seed`` is that replicate's, so each seed's jobs rerun on their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Config = dict[str, Any]


def data_build(config: Config, dataset: str) -> Config:
    from maxk.data.build import dataset_config

    entry, pool_name, pool = dataset_config(dataset, config)
    data = {k: v for k, v in config["data"].items() if k != "pools"}
    # and the pools it excludes: their problems are loaded to be left out (maxk.data.build.exclusion_index)
    pools = config["data"]["pools"]
    data["pools"] = {pool_name: pool, **{p: pools[p] for p in pool.get("exclude_pools") or [] if p in pools}}
    return {"datasets": {dataset: entry}, "data": data, "prompt": config["prompt"]}


def base_model(config: Config, _: str | None = None) -> Config:
    return {k: config[k] for k in ("seed", "base_model", "prompt", "sandbox")}


#: The train keys the RL prompt filter reads (a change of another train key does not rerun it).
RL_PROMPT_KEYS = ("dataset", "prompt_filter", "max_completion_length", "temperature", "top_p")


def rl_prompts(config: Config, key: str | None = None) -> Config:
    """The RL prompt filter's slice: ``train.prompt_filter``'s, or with ``key`` (``maxk.paths.filter_key``)
    the run filter of that key in its place (rule rl_prompts_filter)."""
    from maxk.paths import run_prompt_filters

    train = {k: config["train"][k] for k in RL_PROMPT_KEYS}
    if key:
        filters = run_prompt_filters(config)
        if key not in filters:
            raise ValueError(f"no run's prompt_filter has the key {key!r} (keys: {sorted(filters)})")
        train["prompt_filter"] = filters[key]
    return {"seed": config["seed"], "train": train, "prompt": config["prompt"], "sandbox": config["sandbox"]}


def run_entry(config: Config, run: str) -> Config:
    """``runs.<run>`` as its job runs it: the instrument check's run (``analysis.claims.instrument_run``)
    takes the scale's ``analysis.claims.instrument_heldout`` as its ``heldout`` override (a scale's
    choice of how precisely to measure the instrument; the experiment's run matrix stays one file)."""
    entry = config["runs"][run]
    claims = (config.get("analysis") or {}).get("claims") or {}
    if claims.get("instrument_heldout") and claims.get("instrument_run") == run:
        entry = {**entry, "heldout": {**(entry.get("heldout") or {}), **claims["instrument_heldout"]}}
    return entry


def train(config: Config, run: str) -> Config:
    """Planning fails here, naming the run, when its settings are inconsistent (``check_run``)."""
    from maxk.train.launch import check_run, run_config

    entry = run_entry(config, run)
    check_run(run, run_config(config["train"], entry))
    return {
        "seed": config["seed"],
        "train": config["train"],
        "run": entry,
        "prompt": config["prompt"],
        "sandbox": config["sandbox"],
    }


def generate(config: Config, model: str | None = None) -> Config:
    """The generation slice of ``model``: a tempered base (``maxk.paths.tempered``, the yardstick)
    samples at its own temperature; every other model at ``generate.temperature``."""
    from maxk.paths import temperature_of

    part = {k: config[k] for k in ("seed", "generate", "prompt")}
    temperature = temperature_of(model) if model else None
    if temperature is not None:
        part["generate"] = {**part["generate"], "temperature": temperature}
    return part


def score(config: Config, _: str | None = None) -> Config:
    return config["sandbox"]


def analysis_metrics(config: Config, _: str | None = None) -> Config:
    return {k: config["analysis"][k] for k in ("ks", "ragged")}


def analysis(config: Config, _: str | None = None) -> Config:
    return {k: v for k, v in config["analysis"].items() if k not in ("lab", "claims")}


def analysis_claims(config: Config, _: str | None = None) -> Config:
    """The claims' analysis slice (``maxk.analysis.learning.claims_config``: with each run's settings)."""
    from maxk.analysis.learning import claims_config

    return claims_config(config)


def analysis_lab(config: Config, _: str | None = None) -> Config:
    return {"lab": config["analysis"]["lab"]}


def environment(config: Config, _: str | None = None) -> Config:
    """The whole config but how its jobs start (``warm_start``: the same bytes either way, checked by
    ``tests/workflow/test_workflow_e2e.py``), so switching it reruns nothing."""
    return {k: v for k, v in config.items() if k != "warm_start"}


#: rule name -> its slice. The tables, significance and figure rules share ``analysis``.
SLICES: dict[str, Callable[[Config, Any], Config]] = {
    "data_build": data_build,
    "base_model": base_model,
    "rl_prompts": rl_prompts,
    "train": train,
    "generate_shard": generate,
    "entropy_rescore": generate,  # the model, prompts and sampling settings generation used
    "score": score,
    "analysis_metrics": analysis_metrics,
    "analysis_table": analysis,
    "analysis_stats": analysis,
    "analysis_figure_passk": analysis,
    "analysis_figure_entropy": analysis,
    "analysis_figure_maxk": analysis,
    "analysis_claims": analysis_claims,
    "analysis_across_seeds": analysis_claims,  # the claims' settings, pooled over the seeds
    "analysis_lab": analysis_lab,
    "environment": environment,
}


def config_json(config: Config, rule: str, name: str | None = None, seed: int | str | None = None) -> str:
    """Rule ``rule``'s slice (of dataset or run ``name`` where it has one) as canonical JSON; a
    slice with a ``seed`` takes the seed of the job's ``seed`` wildcard (one of ``replicates``)."""
    part = SLICES[rule](config, name)
    if seed is not None and "seed" in part:
        part = {**part, "seed": int(seed)}
    return json.dumps(part, sort_keys=True)
