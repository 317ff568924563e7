"""What a run produces, and the exact inputs of each analysis job, from the config.

``final_targets(config)`` is every final output the config declares (``rule all`` requests it through
``get_final_output()`` in ``workflow/rules/common.smk``): for each seed of ``replicates``, that seed's
tables, figures and claims; once, the data, the lab and the environment record; with more than one
seed, the across-seed claims and figures. Requesting a seed's tables, figures and claims pulls in,
through their inputs, exactly the (model, dataset) pairs they need: training, generation and scoring
of those pairs of that seed and no others.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from maxk import paths as P
from maxk.analysis.claims import claim_inputs
from maxk.analysis.learning import yardstick_models
from maxk.analysis.tables import table_specs

Pairs = list[tuple[str, str]]

LAB_OUTPUTS = (*(f"{t}.csv" for t in P.LAB_TABLES), *(f"{f}.png" for f in P.LAB_FIGURES))


def table_pairs(analysis: Mapping, table: str) -> Pairs:
    """(model, dataset) pairs whose metrics table ``table`` reads."""
    return {s.name: s for s in table_specs(analysis)}[table].pairs


def significance_pairs(analysis: Mapping) -> Pairs:
    """(model, dataset) pairs of every table with ``significance: true``."""
    return sorted({pair for s in table_specs(analysis) if s.significance for pair in s.pairs})


def figure_pairs(analysis: Mapping, figure: str, dataset: str | None = None) -> Pairs:
    """(model, dataset) pairs of figure ``passk``, ``entropy`` (its samples) or ``maxk_curves`` (of
    ``dataset``); none when the config declares no such figure."""
    spec = (analysis.get("figures") or {}).get(figure)
    if not spec:
        return []
    return [(m, dataset or spec["dataset"]) for m in spec["models"]]


def rescore_pairs(analysis: Mapping) -> Pairs:
    """(model, dataset) pairs of figure 2 re-scored for the exact entropy (``figures.entropy.rescore``);
    none when the figure is absent or ``rescore.problems`` is 0."""
    spec = (analysis.get("figures") or {}).get("entropy")
    if not spec or not (spec.get("rescore") or {}).get("problems"):
        return []
    return figure_pairs(analysis, "entropy")


def rescored_files(pairs: Pairs, seed: P.Seed) -> list[str]:
    return [P.entropy_rescored(seed, m, d) for m, d in pairs]


def curve_datasets(analysis: Mapping) -> list[str]:
    """The datasets with a max@k curves figure (every dataset of the tables unless listed)."""
    curves = (analysis.get("figures") or {}).get("maxk_curves")
    if not curves:
        return []
    return list(curves.get("datasets") or analysis["datasets"])


def claims_pairs(config: Mapping) -> tuple[Pairs, Pairs]:
    """``(metrics pairs, samples pairs)`` the claims job reads (both empty without a claims section):
    the claims', the instrument check's and every run's against the base (the learning table)."""
    analysis = config["analysis"]
    return claim_inputs({**analysis, "runs": config["runs"]}) if "claims" in analysis else ([], [])


def metrics_files(pairs: Pairs, seed: P.Seed) -> list[str]:
    return [P.metrics(seed, m, d) for m, d in pairs]


def samples_files(pairs: Pairs, seed: P.Seed) -> list[str]:
    return [P.samples(seed, m, d) for m, d in pairs]


def run_curves(config: Mapping, seed: P.Seed) -> list[str]:
    """The training curves the claims job of ``seed`` reads, when the config has a claims section: every
    trained run that ``analysis.models`` compares (the learning table; the instrument check's run,
    ``analysis.claims.instrument_run``, among them), sorted."""
    analysis = config["analysis"]
    if not analysis.get("claims"):
        return []
    return [
        P.train_metrics(seed, run) for run in sorted(config["runs"]) if run in (analysis.get("models") or {})
    ]


def local_base_record(config: Mapping) -> Path | None:
    """The ``trained_on.json`` of a base model the workflow does not build but reads from a local
    directory (``base_model.build: false`` with ``path`` a directory holding one, as the embedded
    default's shipped ``models/base``); None when the workflow builds the base, or when ``path`` is a
    hub id or a directory without the record (nothing to audit: the audit covers what it can read)."""
    base = config["base_model"]
    if base["build"]:
        return None
    record = Path(base["path"]) / P.TRAINED_ON
    return record if record.is_file() else None


def base_trained_on_datasets(config: Mapping) -> list[str]:
    """The datasets the base model trained on, as the audit needs their files: the SFT dataset when the
    workflow builds the base; those its ``trained_on.json`` names when it is a local directory (read
    here; a record that does not parse is left to the audit job to report); none otherwise."""
    if config["base_model"]["build"]:
        return [config["base_model"]["sft"]["dataset"]]
    record = local_base_record(config)
    if record is None:
        return []
    try:
        rows = json.loads(record.read_text(encoding="utf-8"))
        return list(dict.fromkeys(str(r["dataset"]) for r in rows))
    except (ValueError, TypeError, KeyError):
        return []


def trained_models(config: Mapping) -> list[str]:
    """The models whose ``trained_on.json`` the audit reads: ``base`` when the workflow builds it or
    reads it from a local directory with that record (``local_base_record``), then every run (sorted).
    Their directories: ``maxk.paths.model_path``."""
    audited = config["base_model"]["build"] or local_base_record(config) is not None
    return ([P.BASE] if audited else []) + sorted(config["runs"])


def contamination_data(config: Mapping, seed: P.Seed) -> list[str]:
    """The dataset files the audit of ``seed``'s models reads: what they trained on (the base's SFT
    examples, the seed's RL prompts, a run's own edge file where it has one) and every audited set, each
    once, in that order."""
    files = [P.data(d) for d in base_trained_on_datasets(config)]
    files.append(P.train_prompts(config, seed))
    files += [P.train_prompts(config, seed, run) for run in sorted(config["runs"])]  # runs' own filters
    files += [P.data(d) for d in config["analysis"]["contamination"]["audit"]]
    return list(dict.fromkeys(files))


def claim_targets(analysis: Mapping, seed: P.Seed) -> list[str]:
    """The claim files of ``seed`` (csv, md, and the yardstick's where configured): none without a
    claims section."""
    if "claims" not in analysis:
        return []
    return [P.claims(seed, "csv"), P.claims(seed, "md")] + (
        [P.yardstick(seed)] if yardstick_models(analysis) else []
    )


def analysis_targets(analysis: Mapping, seed: P.Seed, *, checks: bool = True) -> list[str]:
    """Every table (tex/md/csv), the significance file, every figure and claim file the section
    declares for ``seed``, and, with ``checks``, the metrics of the ``checks`` pairs (scored outside the
    tables)."""
    out: list[str] = []
    for spec in table_specs(analysis):
        out += [P.table(seed, spec.name, ext) for ext in ("tex", "md", "csv")]
    out.append(P.significance(seed, "csv"))
    figures = analysis.get("figures") or {}
    if "passk" in figures:
        out += [P.figure(seed, "passk_curve", ext) for ext in ("pdf", "png")]
    if "entropy" in figures:
        out += [P.figure(seed, "entropy", ext) for ext in ("pdf", "png")]
        if rescore_pairs(analysis):
            out += [P.entropy_estimates(seed, ext) for ext in ("csv", "md")]
    for d in curve_datasets(analysis):
        out += [P.figure(seed, f"maxk_{d}", ext) for ext in ("pdf", "png")]
    out += claim_targets(analysis, seed)
    if checks:
        out += metrics_files([(m, d) for m, d in analysis.get("checks") or []], seed)
    return out


def seed_targets(config: Mapping, seed: P.Seed) -> list[str]:
    """Every final output of one seed's run: each run's model and training curves, the analysis
    outputs, and the contamination audit. The ``checks`` pairs on the first seed of ``replicates`` only:
    no table, figure or claim reads them, so another seed's would repeat the check at another sampling
    seed (on the shipped base, the same model). With ``replicate_outputs: pooled``, a seed after the
    first makes only what the pooled reading reads (its claims and yardstick files, whose inputs are
    the runs, samples and scores they compare) besides its runs and audit: no paper-layout table,
    figure or significance file, and no dataset that only those read."""
    out: list[str] = []
    for run in sorted(config["runs"]):
        out += [P.train_metrics(seed, run), P.model_dir(seed, run)]
    first = str(seed) == str(config["replicates"][0])
    if first or config["replicate_outputs"] == "all":
        out += analysis_targets(config["analysis"], seed, checks=first)
    else:
        out += claim_targets(config["analysis"], seed)
    if config["analysis"]["contamination"]["audit"]:
        out += [P.contamination(seed, ext) for ext in ("csv", "md")]
    return out


def across_seed_targets(config: Mapping) -> list[str]:
    """The across-seed claims table and figures: with more than one seed in ``replicates`` and a
    claims section, else none (one seed's claims are its own ``claims.md``)."""
    if len(config["replicates"]) < 2 or "claims" not in config["analysis"]:
        return []
    out = [P.across_seeds(ext) for ext in ("csv", "md")]
    out += [P.across_seeds_yardstick()] if has_yardstick(config) else []
    return out + [P.across_seeds_figure(n, ext) for n in P.ACROSS_SEED_FIGURES for ext in ("pdf", "png")]


def across_seed_inputs(config: Mapping) -> dict[str, list[str]]:
    """What the across-seed job reads, seed by seed in ``replicates`` order: each seed's claims table
    and per-problem claim differences, its learning table and yardstick claims (where configured), and
    the metrics of its max@k curves' dataset."""
    seeds = config["replicates"]
    return {
        "claims": [P.claims(s, "csv") for s in seeds],
        "differences": [P.claim_differences(s) for s in seeds],
        "learning": [P.learning(s) for s in seeds],
        "yardstick": [P.yardstick(s) for s in seeds] if has_yardstick(config) else [],
        "metrics": [f for s in seeds for f in metrics_files(across_seed_curve_pairs(config["analysis"]), s)],
    }


def has_yardstick(config: Mapping) -> bool:
    """Whether the claims job writes the yardstick claims (``analysis.claims.yardstick_temperatures``)."""
    return bool(yardstick_models(config["analysis"]))


def across_seed_curve_pairs(analysis: Mapping) -> Pairs:
    """The (model, dataset) pairs of the across-seed curves: every compared model on the claims'
    dataset."""
    return [(m, analysis["claims"]["dataset"]) for m in analysis.get("models") or {}]


def final_targets(config: Mapping) -> list[str]:
    """Every final output of the run, in a deterministic order: each dataset and its manifest, each
    seed's outputs (``seed_targets``) in ``replicates`` order, the across-seed outputs, the lab's
    outputs, and the environment record."""
    out = [P.data(d, ext) for d in sorted(config["datasets"]) for ext in (".jsonl.gz", ".manifest.json")]
    for seed in config["replicates"]:
        out += seed_targets(config, seed)
    out += across_seed_targets(config)
    out += [P.lab(name) for name in LAB_OUTPUTS]
    out.append(P.environment())
    return out
