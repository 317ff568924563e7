"""Where every file of a run lives, defined once (the rules, the targets and the tests read it here).

All paths are relative to the working directory of the workflow (``snakemake --directory`` moves it)::

    results/data/{dataset}.jsonl.gz            problems (+ .manifest.json)
    results/data/{dataset}.edge.jsonl.gz       the RL prompts at the base's edge of competence
    results/models/base                        the embedded base model (when the workflow builds it)
    results/models/{run}                       a trained run; results/metrics/train/{run}.csv its curves
    results/models/{model}/trained_on.json     every problem the model saw in training
    results/samples/{model}/{dataset}.parquet  samples (+ .manifest.json; shards in {dataset}/shard{i})
    results/scores/{model}/{dataset}.parquet   per-sample rewards and verdicts
    results/metrics/{model}/{dataset}.parquet  per-problem pass@k / max@k
    results/entropy/{model}/{dataset}.parquet  figure 2's models re-scored on a subsample (exact entropy)
    results/{tables,stats,figures,claims,lab}/ the analysis outputs (table, significance, figure, ...)
    results/contamination/contamination.{csv,md}  training problems found in evaluation sets
    results/logs/..., results/benchmarks/...   one log and one timing per job

``{model}`` is ``base`` or a training run's name. Pure functions, no third-party imports.
"""

from __future__ import annotations

import os
from typing import Any

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
BASE = "base"
#: The file inside every trained model directory listing the problems it was trained on.
TRAINED_ON = "trained_on.json"


def data(dataset: str, ext: str = ".jsonl.gz") -> str:
    """A dataset's problems (``ext`` ``.manifest.json`` for its manifest)."""
    return f"{RESULTS}/data/{dataset}{ext}"


def dataset_name(path: str) -> str:
    """The dataset name of a data file: the inverse of ``data`` (``results/data/NAME.jsonl.gz``)."""
    name = os.path.basename(path)
    for suffix in (".jsonl.gz", ".jsonl", ".parquet"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def edge_prompts(dataset: str, ext: str = ".jsonl.gz") -> str:
    """The problems of ``dataset`` at the base model's edge of competence (``train.prompt_filter``),
    shared by every run (``ext`` ``.manifest.json`` for the per-problem counts)."""
    return data(f"{dataset}.edge", ext)


def train_prompts(config: dict[str, Any]) -> str:
    """The file every run draws its RL prompts from: the edge-filtered ``train.dataset`` when
    ``train.prompt_filter`` is set, else ``train.dataset`` itself."""
    train = config["train"]
    return edge_prompts(train["dataset"]) if train.get("prompt_filter") else data(train["dataset"])


def trained_on(model: str) -> str:
    """What ``model`` was trained on: ``[{"dataset", "id"}, ...]`` beside its weights."""
    return f"{model_dir(model)}/{TRAINED_ON}"


def contamination(ext: str) -> str:
    """The contamination audit (``ext`` ``csv`` or ``md``)."""
    return f"{RESULTS}/contamination/contamination.{ext}"


def model_dir(model: str) -> str:
    """The directory the workflow writes ``model`` (``base`` or a run) to."""
    return f"{RESULTS}/models/{model}"


def train_metrics(run: str) -> str:
    return f"{RESULTS}/metrics/train/{run}.csv"


def samples(model: str, dataset: str, ext: str = ".parquet") -> str:
    return f"{RESULTS}/samples/{model}/{dataset}{ext}"


def shard(model: str, dataset: str, index: int | str, ext: str = ".parquet") -> str:
    return f"{RESULTS}/samples/{model}/{dataset}/shard{index}{ext}"


def scores(model: str, dataset: str) -> str:
    return f"{RESULTS}/scores/{model}/{dataset}.parquet"


def metrics(model: str, dataset: str) -> str:
    return f"{RESULTS}/metrics/{model}/{dataset}.parquet"


def entropy_rescored(model: str, dataset: str, ext: str = ".parquet") -> str:
    """A fixed subsample of (model, dataset)'s samples re-scored with transformers: the exact
    full-vocabulary entropy beside the samples' own estimate (``ext`` ``.manifest.json`` for its manifest)."""
    return f"{RESULTS}/entropy/{model}/{dataset}{ext}"


def table(name: str, ext: str) -> str:
    """Table ``name`` of ``analysis.tables`` or of the full tables (``ext`` ``tex``, ``md`` or ``csv``)."""
    return f"{RESULTS}/tables/{name}.{ext}"


def significance(ext: str) -> str:
    """The Wilcoxon tests of every table that asks (``ext`` ``csv`` or ``json``)."""
    return f"{RESULTS}/stats/significance.{ext}"


def figure(name: str, ext: str) -> str:
    """A figure (``ext`` ``pdf`` or ``png``): ``passk_curve`` (figure 1), ``entropy`` (figure 2) or
    ``maxk_{dataset}`` (max@k curves)."""
    return f"{RESULTS}/figures/{name}.{ext}"


def entropy_estimates(ext: str) -> str:
    """The entropy estimates of figure 2's models side by side, with their gaps (``ext`` ``csv`` or
    ``md``); written by the figure's job as ``{figure stem}_estimates.{ext}``."""
    return figure("entropy_estimates", ext)


def claims(ext: str) -> str:
    """The claims of the paper tested on this run (``ext`` ``csv`` or ``md``)."""
    return f"{RESULTS}/claims/claims.{ext}"


def environment() -> str:
    """The run's environment record (packages, platform, config hash)."""
    return f"{RESULTS}/provenance/environment.json"


#: the estimator lab's tables (``{name}.csv``) and figures (``{name}.pdf``/``.png``)
LAB_TABLES = ("onpolicy", "offpolicy")
LAB_FIGURES = ("onpolicy", "offpolicy", "offpolicy_surrogate")


def lab(name: str) -> str:
    """An output of the estimator lab (``onpolicy.csv``, ``offpolicy.png``, ...)."""
    return f"{RESULTS}/lab/{name}"


def pair_of(path: str) -> tuple[str, str]:
    """``(model, dataset)`` of a per-pair file (samples, scores or metrics): the inverse of
    ``samples`` / ``scores`` / ``metrics`` (``.../{model}/{dataset}.parquet``)."""
    head, name = os.path.split(os.path.normpath(path))
    return os.path.basename(head), name.removesuffix(".parquet")


def model_path(config: dict[str, Any], model: str) -> str:
    """Weights of ``model``: a run's directory; for ``base``, ``results/models/base`` when the workflow
    builds it (``base_model.build``), else ``base_model.path`` (a hub id or a local directory)."""
    if model != BASE:
        return model_dir(model)
    base = config["base_model"]
    return model_dir(BASE) if base["build"] else base["path"]


def model_inputs(config: dict[str, Any], model: str) -> list[str]:
    """The model directory as a rule input when the workflow makes it (never a hub id)."""
    return [model_path(config, model)] if model != BASE or config["base_model"]["build"] else []


def model_revision_arg(config: dict[str, Any], model: str) -> str:
    """`` --revision <sha>`` (with its leading space) for the base model when ``base_model.revision``
    pins one, else '': the rules append it to the model argument."""
    base = config["base_model"]
    if model == BASE and not base["build"] and base.get("revision"):
        return f" --revision {base['revision']}"
    return ""


def shard_paths(config: dict[str, Any], model: str, dataset: str, ext: str = ".parquet") -> list[str]:
    """The shard files of (model, dataset), in shard order."""
    return [shard(model, dataset, i, ext) for i in range(config["generate"]["num_shards"])]
