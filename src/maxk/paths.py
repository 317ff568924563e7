"""Where every file of a run lives, defined once (the rules, the targets and the tests read it here).

All paths are relative to the working directory of the workflow (``snakemake --directory`` moves it).
What does not depend on the seed is made once; everything a seed changes (the base model's training,
the RL runs, sampling, and so every score, metric, table and claim) lives under one directory per seed
of ``replicates`` (``{seed}``)::

    results/data/{dataset}.jsonl.gz            problems (+ .manifest.json)
    results/lab/, results/provenance/          the estimator lab (toy simulations); the environment
    results/claims/across_seeds.{csv,md}       every claim across the seeds (more than one seed)
    results/figures/across_seeds_*.{pdf,png}   curves with across-seed bands; the claims' intervals
    results/seed{seed}/                        one seed's run:
        data/{dataset}.edge.jsonl.gz           the RL prompts at the base's edge of competence
        models/base                            the embedded base model (when the workflow builds it);
                                               metrics/train/base.csv its SFT curve
        models/{run}                           a trained run; metrics/train/{run}.csv its curves
        models/{model}/trained_on.json         every problem the model saw in training
        samples/{model}/{dataset}.parquet      samples (+ .manifest.json; shards in {dataset}/shard{i})
        scores/{model}/{dataset}.parquet       per-sample rewards and verdicts
        metrics/{model}/{dataset}.parquet      per-problem pass@k / max@k
        entropy/{model}/{dataset}.parquet      figure 2's models re-scored on a subsample (exact entropy)
        {tables,stats,figures,claims}/         the analysis outputs (table, significance, figure, claims)
        contamination/contamination.{csv,md}   training problems found in evaluation sets
        logs/..., benchmarks/...               one log and one timing per job of the seed
    results/logs/..., results/benchmarks/...   one log and one timing per job made once

``{model}`` is ``base`` or a training run's name; ``seed`` is an int or the wildcard ``"{seed}"``.
Pure functions, no third-party imports.
"""

from __future__ import annotations

import os
from typing import Any

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
BASE = "base"
#: The base model sampled at another temperature (the yardstick, ``analysis.claims.yardstick_temperatures``)
#: is the model ``base_T{t}``: the base's weights, its own samples.
TEMPERED = "base_T"
#: The file inside every trained model directory listing the problems it was trained on.
TRAINED_ON = "trained_on.json"
#: Verdicts the `score` jobs share (``maxk score --cache``, ``maxk.sandbox.shared_cache``): outside
#: results/, like the checkpoints under work/; deleting it only costs the time it saves.
SCORE_CACHE = "work/score_cache"

Seed = int | str


def seed_dir(seed: Seed) -> str:
    """The directory of one seed's run (``seed``: an int, or ``"{seed}"`` for a rule's wildcard)."""
    return f"{RESULTS}/seed{seed}"


def seed_of(path: str) -> int:
    """The seed of a file under ``seed_dir``: the inverse of ``seed_dir`` for any path below it."""
    for part in os.path.normpath(path).split(os.sep):
        if part.startswith("seed") and part[4:].isdigit():
            return int(part[4:])
    raise ValueError(f"{path}: not under a results/seed<N>/ directory")


def logs(seed: Seed) -> str:
    """One seed's job logs (the jobs made once log to ``LOGS``)."""
    return f"{seed_dir(seed)}/logs"


def benchmarks(seed: Seed) -> str:
    """One seed's job timings (the jobs made once time to ``BENCH``)."""
    return f"{seed_dir(seed)}/benchmarks"


def data(dataset: str, ext: str = ".jsonl.gz") -> str:
    """A dataset's problems (``ext`` ``.manifest.json`` for its manifest); the same for every seed."""
    return f"{RESULTS}/data/{dataset}{ext}"


def dataset_name(path: str) -> str:
    """The dataset name of a data file: the inverse of ``data`` (``results/data/NAME.jsonl.gz``)."""
    name = os.path.basename(path)
    for suffix in (".jsonl.gz", ".jsonl", ".parquet"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def edge_prompts(seed: Seed, dataset: str, ext: str = ".jsonl.gz", key: str = "") -> str:
    """The problems of ``dataset`` at the edge of competence of the seed's base model: ``key`` empty,
    by ``train.prompt_filter``, the file of every run that sets no filter of its own; else by the run
    filter whose ``filter_key`` it is (``ext`` ``.manifest.json`` for the per-problem counts)."""
    return f"{seed_dir(seed)}/data/{dataset}.edge{'-' + key if key else ''}{ext}"


def edge_prompts_pattern(seed: Seed, dataset: str, ext: str = ".jsonl.gz") -> str:
    """``edge_prompts`` as rule rl_prompts' output pattern: its ``{filter}`` wildcard is empty (the shared
    file) or ``-KEY`` (a run's own filter)."""
    return f"{seed_dir(seed)}/data/{dataset}.edge{{filter}}{ext}"


def filter_key(prompt_filter: dict[str, Any]) -> str:
    """A run's own prompt filter as a file-name key: the first 8 hex digits of the SHA-256 of its
    canonical JSON (the filter with its defaults filled in, as the validated config holds it)."""
    import hashlib
    import json

    text = json.dumps(prompt_filter, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def run_prompt_filters(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{filter_key: filter}`` of every run whose ``prompt_filter`` differs from ``train.prompt_filter``
    (each filter once): the edge files besides the shared one."""
    shared = config["train"].get("prompt_filter")
    used = [_run_filter(config, run) for run in config["runs"]]
    return {filter_key(f): f for f in used if f and f != shared}


def _run_filter(config: dict[str, Any], run: str | None) -> dict[str, Any] | None:
    """The prompt filter ``run`` trains behind: its own where it names one (null: none), else the
    shared ``train.prompt_filter``."""
    entry = (config["runs"][run] or {}) if run is not None else {}
    return entry["prompt_filter"] if "prompt_filter" in entry else config["train"].get("prompt_filter")


def train_prompts(config: dict[str, Any], seed: Seed, run: str | None = None) -> str:
    """The file ``run`` of ``seed`` (None: a run with no filter of its own) draws its RL prompts from:
    ``train.dataset`` edge-filtered by the run's own ``prompt_filter`` (a file of its own,
    ``filter_key``) or else by ``train.prompt_filter`` (the shared file); a run whose filter is null
    (its own, or the shared one), ``train.dataset`` itself."""
    train, used = config["train"], _run_filter(config, run)
    if not used:
        return data(train["dataset"])
    key = "" if used == train.get("prompt_filter") else filter_key(used)
    return edge_prompts(seed, train["dataset"], key=key)


def model_dir(seed: Seed, model: str) -> str:
    """The directory the workflow writes ``model`` (``base`` or a run) of ``seed`` to."""
    return f"{seed_dir(seed)}/models/{model}"


def trained_on(seed: Seed, model: str) -> str:
    """What ``model`` was trained on: ``[{"dataset", "id"}, ...]`` beside its weights."""
    return f"{model_dir(seed, model)}/{TRAINED_ON}"


def contamination(seed: Seed, ext: str) -> str:
    """The contamination audit of a seed's models (``ext`` ``csv`` or ``md``)."""
    return f"{seed_dir(seed)}/contamination/contamination.{ext}"


def train_metrics(seed: Seed, run: str) -> str:
    return f"{seed_dir(seed)}/metrics/train/{run}.csv"


def base_curve(seed: Seed) -> str:
    """The embedded base model's SFT curve (one row per logged step), beside the runs' curves."""
    return train_metrics(seed, BASE)


def samples(seed: Seed, model: str, dataset: str, ext: str = ".parquet") -> str:
    return f"{seed_dir(seed)}/samples/{model}/{dataset}{ext}"


def shard(seed: Seed, model: str, dataset: str, index: int | str, ext: str = ".parquet") -> str:
    return f"{seed_dir(seed)}/samples/{model}/{dataset}/shard{index}{ext}"


def scores(seed: Seed, model: str, dataset: str) -> str:
    return f"{seed_dir(seed)}/scores/{model}/{dataset}.parquet"


def metrics(seed: Seed, model: str, dataset: str) -> str:
    return f"{seed_dir(seed)}/metrics/{model}/{dataset}.parquet"


def entropy_rescored(seed: Seed, model: str, dataset: str, ext: str = ".parquet") -> str:
    """A fixed subsample of (model, dataset)'s samples re-scored with transformers: the exact
    full-vocabulary entropy beside the samples' own estimate (``ext`` ``.manifest.json`` for its manifest)."""
    return f"{seed_dir(seed)}/entropy/{model}/{dataset}{ext}"


def table(seed: Seed, name: str, ext: str) -> str:
    """Table ``name`` of ``analysis.tables`` or of the full tables (``ext`` ``tex``, ``md`` or ``csv``)."""
    return f"{seed_dir(seed)}/tables/{name}.{ext}"


def significance(seed: Seed, ext: str) -> str:
    """The Wilcoxon tests of every table that asks (``ext`` ``csv`` or ``json``)."""
    return f"{seed_dir(seed)}/stats/significance.{ext}"


def figure(seed: Seed, name: str, ext: str) -> str:
    """A figure (``ext`` ``pdf`` or ``png``): ``passk_curve`` (figure 1), ``entropy`` (figure 2) or
    ``maxk_{dataset}`` (max@k curves)."""
    return f"{seed_dir(seed)}/figures/{name}.{ext}"


def entropy_estimates(seed: Seed, ext: str) -> str:
    """The entropy estimates of figure 2's models side by side, with their gaps (``ext`` ``csv`` or
    ``md``); written by the figure's job as ``{figure stem}_estimates.{ext}``."""
    return figure(seed, "entropy_estimates", ext)


def claims(seed: Seed, ext: str) -> str:
    """The claims of the paper tested on one seed's run (``ext`` ``csv`` or ``md``)."""
    return f"{seed_dir(seed)}/claims/claims.{ext}"


def yardstick(seed: Seed) -> str:
    """Each run against the base at its best temperature, at the run's own objective (one claim per
    run, its own Holm family: ``maxk.analysis.claims.yardstick_claims``), columns as ``claims.csv``."""
    return f"{seed_dir(seed)}/claims/yardstick.csv"


def learning(seed: Seed) -> str:
    """What each run of one seed learned: its own objective on the test set, the held-out pool and its
    own training prompts, and the off-policy regime (``maxk.analysis.learning``)."""
    return f"{seed_dir(seed)}/claims/learning.csv"


def claim_differences(seed: Seed) -> str:
    """Each series' per-problem differences on one seed, long (``claim``, ``problem_id``,
    ``difference``; docs/outputs.md): what the across-seed table pools and resamples."""
    return f"{seed_dir(seed)}/claims/differences.csv"


def across_seeds(ext: str) -> str:
    """Every claim across the seeds of ``replicates`` (``ext`` ``csv`` or ``md``)."""
    return f"{RESULTS}/claims/across_seeds.{ext}"


def across_seeds_yardstick() -> str:
    """The yardstick claims (``yardstick``) across the seeds of ``replicates`` (and ``across_seeds.md``)."""
    return f"{RESULTS}/claims/across_seeds_yardstick.csv"


#: the across-seed figures: each method's curves with across-seed bands; the claims' intervals
ACROSS_SEED_FIGURES = ("curves", "claims")


def across_seeds_figure(name: str, ext: str) -> str:
    """An across-seed figure (``name`` of ``ACROSS_SEED_FIGURES``; ``ext`` ``pdf`` or ``png``)."""
    return f"{RESULTS}/figures/across_seeds_{name}.{ext}"


def environment() -> str:
    """The run's environment record (packages, platform, config hash)."""
    return f"{RESULTS}/provenance/environment.json"


#: the estimator lab's tables (``{name}.csv``) and figures (``{name}.pdf``/``.png``)
LAB_TABLES = ("onpolicy", "offpolicy")
LAB_FIGURES = ("onpolicy", "offpolicy", "offpolicy_surrogate")


def lab(name: str) -> str:
    """An output of the estimator lab (``onpolicy.csv``, ``offpolicy.png``, ...): toy simulations,
    made once with the config's ``seed``."""
    return f"{RESULTS}/lab/{name}"


def pair_of(path: str) -> tuple[str, str]:
    """``(model, dataset)`` of a per-pair file (samples, scores or metrics): the inverse of
    ``samples`` / ``scores`` / ``metrics`` (``.../{model}/{dataset}.parquet``)."""
    head, name = os.path.split(os.path.normpath(path))
    return os.path.basename(head), name.removesuffix(".parquet")


def tempered(temperature: float) -> str:
    """The model name of the base sampled at ``temperature`` (``base_T0.85``)."""
    return f"{TEMPERED}{float(temperature):g}"


def temperature_of(model: str) -> float | None:
    """The temperature of a ``tempered`` model name (None for any other model)."""
    if not model.startswith(TEMPERED):
        return None
    try:
        return float(model[len(TEMPERED) :])
    except ValueError:
        return None


def weights_of(model: str) -> str:
    """The model whose weights ``model`` samples: ``base`` for a tempered base, else itself."""
    return BASE if temperature_of(model) is not None else model


def model_path(config: dict[str, Any], seed: Seed, model: str) -> str:
    """Weights of ``model`` of ``seed``: a run's directory; for ``base`` (and a tempered base), the
    seed's ``models/base`` when the workflow builds it (``base_model.build``), else ``base_model.path``
    (a hub id or a local directory, the same for every seed)."""
    model = weights_of(model)
    if model != BASE:
        return model_dir(seed, model)
    base = config["base_model"]
    return model_dir(seed, BASE) if base["build"] else base["path"]


def model_inputs(config: dict[str, Any], seed: Seed, model: str) -> list[str]:
    """The model directory as a rule input when the workflow makes it, or when the base is a local
    directory it reads (a shipped base: replacing it reruns what read it); never a hub id."""
    model = weights_of(model)
    path = model_path(config, seed, model)
    local = model != BASE or config["base_model"]["build"] or os.path.isdir(path)
    return [path] if local else []


def model_revision_arg(config: dict[str, Any], model: str) -> str:
    """`` --revision <sha>`` (with its leading space) for the base model when ``base_model.revision``
    pins one, else '': the rules append it to the model argument."""
    base = config["base_model"]
    if weights_of(model) == BASE and not base["build"] and base.get("revision"):
        return f" --revision {base['revision']}"
    return ""


def shard_paths(
    config: dict[str, Any], seed: Seed, model: str, dataset: str, ext: str = ".parquet"
) -> list[str]:
    """The shard files of (model, dataset) of ``seed``, in shard order."""
    return [shard(seed, model, dataset, i, ext) for i in range(config["generate"]["num_shards"])]
