"""The analysis stage's config, typed from ``workflow/schemas/analysis.schema.yaml``
(``maxk.config.config_section``): the defaults the analysis functions take are these
(``BOOTSTRAP``, ``SIGNIFICANCE``, ``ANALYSIS``), never literals of their own."""

from __future__ import annotations

from typing import Any

from maxk.config import config_section, defaults_of


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


@config_section("analysis.lab.offpolicy")
class OffpolicySettings:
    """The estimator lab's off-policy sweep (sample from pi_old, gradient at pi_old's logits + d u)."""

    n: int
    k: int
    distances: list[float]
    exact_is_max_subsets: int


@config_section("analysis.lab")
class LabSettings:
    """The estimator lab: bias and variance of the advantage estimators on toy policies."""

    groups: int
    max_multisets: int
    n: list[int]
    k: list[int]
    plot_k: int
    plot_n: int
    settings: dict[str, Any]
    offpolicy: OffpolicySettings


#: the schema's defaults: 1,000 resamples and 95 % intervals; the one-sided Wilcoxon test at 0.05
BOOTSTRAP = BootstrapSettings()
SIGNIFICANCE = SignificanceSettings()
#: the analysis section's scalar defaults (``decimals``, ``ragged``)
DECIMALS: int = defaults_of(AnalysisConfig)["decimals"]
RAGGED: str = defaults_of(AnalysisConfig)["ragged"]
#: the lab's size defaults (exact enumeration budgets)
MAX_MULTISETS: int = defaults_of(LabSettings)["max_multisets"]
EXACT_IS_MAX_SUBSETS: int = defaults_of(OffpolicySettings)["exact_is_max_subsets"]
