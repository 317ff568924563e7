"""Paths and targets of the analysis rules, from the ``analysis`` config section.

Kept out of ``workflow/rules/analysis.smk`` (Snakemake's linter wants no functions beside rules)
and importable without heavy dependencies.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from maxk.analysis.claims import claim_inputs
from maxk.analysis.tables import table_specs

__all__ = [
    "claims_inputs",
    "curve_datasets",
    "metrics_paths",
    "significance_pairs",
    "table_pairs",
    "targets",
    "up2",
]


def table_pairs(cfg: Mapping, name: str) -> list[tuple[str, str]]:
    """(model, dataset) pairs whose metrics table ``name`` reads."""
    spec = {s.name: s for s in table_specs(cfg)}[name]
    return [(m, d) for m in spec.rows for d in spec.datasets]


def significance_pairs(cfg: Mapping) -> list[tuple[str, str]]:
    """(model, dataset) pairs of every table with ``significance: true``."""
    return sorted({(m, d) for s in table_specs(cfg) if s.significance for m in s.rows for d in s.datasets})


def metrics_paths(results: str, pairs: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{results}/metrics/{m}/{d}.parquet" for m, d in pairs]


def claims_inputs(cfg: Mapping, results: str) -> dict[str, list[str]]:
    """``{"metrics": [...], "samples": [...]}``: the files the claims stage reads (empty without claims)."""
    if "claims" not in cfg:
        return {"metrics": [], "samples": []}
    metric_pairs, sample_pairs = claim_inputs(cfg)
    return {
        "metrics": metrics_paths(results, metric_pairs),
        "samples": [f"{results}/samples/{m}/{d}.parquet" for m, d in sample_pairs],
    }


def curve_datasets(cfg: Mapping) -> list[str]:
    curves = (cfg.get("figures") or {}).get("maxk_curves")
    if not curves:
        return []
    return list(curves.get("datasets") or cfg["datasets"])


def up2(paths: Sequence[str], default: str) -> str:
    """Directory two levels above the first path (``{dir}/{model}/{dataset}.parquet`` -> ``{dir}``)."""
    return os.path.dirname(os.path.dirname(paths[0])) if len(paths) else default


def targets(cfg: Mapping, results: str) -> list[str]:
    """Every table (tex/md/csv), the significance file, every figure and claim file the config declares,
    and the metrics of the ``checks`` pairs (scored outside the tables)."""
    out: list[str] = []
    for spec in table_specs(cfg):
        out += [f"{results}/tables/{spec.name}.{ext}" for ext in ("tex", "md", "csv")]
    out.append(f"{results}/stats/significance.csv")
    figs = cfg.get("figures") or {}
    if "passk" in figs:
        out += [f"{results}/figures/passk_curve.{ext}" for ext in ("pdf", "png")]
    if "entropy" in figs:
        out += [f"{results}/figures/entropy.{ext}" for ext in ("pdf", "png")]
    for d in curve_datasets(cfg):
        out += [f"{results}/figures/maxk_{d}.{ext}" for ext in ("pdf", "png")]
    if "claims" in cfg:
        out += [f"{results}/claims/claims.{ext}" for ext in ("csv", "md")]
    out += metrics_paths(results, [tuple(pair) for pair in cfg.get("checks") or []])
    return out
