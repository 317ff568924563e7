"""What a run produces, and the exact inputs of each analysis job, from the config.

``final_targets(config)`` is every final output the config declares (``rule all`` requests it through
``get_final_output()`` in ``workflow/rules/common.smk``). Requesting the tables, figures and claims
pulls in, through their inputs, exactly the (model, dataset) pairs they need: training, generation and
scoring of those pairs and no others.
"""

from __future__ import annotations

from collections.abc import Mapping

from maxk import paths as P
from maxk.analysis.claims import claim_inputs
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


def rescored_files(pairs: Pairs) -> list[str]:
    return [P.entropy_rescored(m, d) for m, d in pairs]


def curve_datasets(analysis: Mapping) -> list[str]:
    """The datasets with a max@k curves figure (every dataset of the tables unless listed)."""
    curves = (analysis.get("figures") or {}).get("maxk_curves")
    if not curves:
        return []
    return list(curves.get("datasets") or analysis["datasets"])


def claims_pairs(analysis: Mapping) -> tuple[Pairs, Pairs]:
    """``(metrics pairs, samples pairs)`` the claims read (both empty without a claims section)."""
    return claim_inputs(analysis) if "claims" in analysis else ([], [])


def metrics_files(pairs: Pairs) -> list[str]:
    return [P.metrics(m, d) for m, d in pairs]


def samples_files(pairs: Pairs) -> list[str]:
    return [P.samples(m, d) for m, d in pairs]


def instrument_curve(config: Mapping) -> list[str]:
    """The training curves of the instrument check's run (``analysis.claims.instrument_run``), when the
    config trains it and has a claims section."""
    claims = config["analysis"].get("claims")
    if not claims or claims["instrument_run"] not in config["runs"]:
        return []
    return [P.train_metrics(claims["instrument_run"])]


def trained_models(config: Mapping) -> list[str]:
    """The models the workflow trains, each with a ``trained_on.json``: ``base`` when it builds it,
    then every run (sorted)."""
    return ([P.BASE] if config["base_model"]["build"] else []) + sorted(config["runs"])


def contamination_data(config: Mapping) -> list[str]:
    """The dataset files the contamination audit reads: what the models trained on (the SFT examples,
    the RL prompts) and every audited set, each once, in that order."""
    files = [P.data(config["base_model"]["sft"]["dataset"])] if config["base_model"]["build"] else []
    files.append(P.train_prompts(config))
    files += [P.data(d) for d in config["analysis"]["contamination"]["audit"]]
    return list(dict.fromkeys(files))


def analysis_targets(analysis: Mapping) -> list[str]:
    """Every table (tex/md/csv), the significance file, every figure and claim file the section
    declares, the metrics of the ``checks`` pairs (scored outside the tables), and the lab's outputs."""
    out: list[str] = []
    for spec in table_specs(analysis):
        out += [P.table(spec.name, ext) for ext in ("tex", "md", "csv")]
    out.append(P.significance("csv"))
    figures = analysis.get("figures") or {}
    if "passk" in figures:
        out += [P.figure("passk_curve", ext) for ext in ("pdf", "png")]
    if "entropy" in figures:
        out += [P.figure("entropy", ext) for ext in ("pdf", "png")]
        if rescore_pairs(analysis):
            out += [P.entropy_estimates(ext) for ext in ("csv", "md")]
    for d in curve_datasets(analysis):
        out += [P.figure(f"maxk_{d}", ext) for ext in ("pdf", "png")]
    if "claims" in analysis:
        out += [P.claims(ext) for ext in ("csv", "md")]
    out += metrics_files([(m, d) for m, d in analysis.get("checks") or []])
    out += [P.lab(name) for name in LAB_OUTPUTS]
    return out


def final_targets(config: Mapping) -> list[str]:
    """Every final output of the run, in a deterministic order: each dataset and its manifest, each
    run's model and training curves, the analysis outputs, and the environment record."""
    out = [P.data(d, ext) for d in sorted(config["datasets"]) for ext in (".jsonl.gz", ".manifest.json")]
    for run in sorted(config["runs"]):
        out += [P.train_metrics(run), P.model_dir(run)]
    out += analysis_targets(config["analysis"])
    if config["analysis"]["contamination"]["audit"]:
        out += [P.contamination(ext) for ext in ("csv", "md")]
    out.append(P.environment())
    return out
