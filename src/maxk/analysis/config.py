"""The analysis stage's config, typed from ``workflow/schemas/analysis.schema.yaml``
(``maxk.config.config_section``): the defaults the analysis functions take are these
(``BOOTSTRAP``, ``SIGNIFICANCE``, ``ANALYSIS``), never literals of their own."""

from __future__ import annotations

from typing import Any

from maxk.config import config_section


@config_section("analysis.bootstrap")
class BootstrapSettings:
    """Bootstrap confidence intervals: problems resampled with replacement, seeded by ``seed``."""

    resamples: int
    confidence: float


@config_section("analysis.significance")
class SignificanceSettings:
    """The Wilcoxon signed-rank test of best vs second best per column (the paper's section 4.5)."""

    alternative: str
    zero_method: str
    alpha: float
    star: str


@config_section("analysis")
class AnalysisConfig:
    """Per-problem metrics, tables, significance, figures, claims, contamination audit and the lab."""

    ks: list[int]
    ragged: str
    decimals: int
    bootstrap: BootstrapSettings
    significance: SignificanceSettings
    models: dict[str, str]
    datasets: dict[str, Any]
    table_datasets: list[str] | None
    tables: dict[str, Any] | None
    full_tables: dict[str, Any] | None
    figures: dict[str, Any] | None
    checks: list[list[str]] | None
    contamination: dict[str, Any] | None
    claims: dict[str, Any] | None
    lab: dict[str, Any]


#: the schema's defaults: 1,000 resamples and 95 % intervals; the one-sided Wilcoxon test at 0.05
BOOTSTRAP = BootstrapSettings()
SIGNIFICANCE = SignificanceSettings()
#: the analysis section's scalar defaults (``decimals``, ``ragged``)
DECIMALS: int = AnalysisConfig.__dataclass_fields__["decimals"].default
RAGGED: str = AnalysisConfig.__dataclass_fields__["ragged"].default
