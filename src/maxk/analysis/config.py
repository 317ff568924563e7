"""The analysis stage's settings, typed from ``workflow/schemas/analysis.schema.yaml``
(``maxk.config.config_section``): the defaults its functions take are these, not literals of their own."""

from __future__ import annotations

from maxk.config import config_section


@config_section("analysis.bootstrap")
class BootstrapSettings:
    """Bootstrap confidence intervals: problems resampled with replacement, seeded by ``seed``."""

    resamples: int
    confidence: float


#: the schema's bootstrap defaults (1,000 resamples, 95 % intervals)
BOOTSTRAP = BootstrapSettings()
