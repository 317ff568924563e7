"""Sandboxed scoring of untrusted programs: ``score_programs`` and the long-lived ``Scorer`` pool.

See ``README.md`` in this package for the design, the isolation layers and which layer stops which
attack. Verdicts are always decided in the trusted (calling) process.
"""

from maxk.sandbox.scorer import (
    LEVEL_ORDER,
    LEVELS,
    VERDICTS,
    Limits,
    SandboxError,
    Score,
    Scorer,
    check_training_isolation,
    close_shared_scorers,
    exposures,
    isolation_level,
    outputs_match,
    score_programs,
    shared_scorer,
)

__all__ = [
    "LEVELS",
    "LEVEL_ORDER",
    "VERDICTS",
    "Limits",
    "SandboxError",
    "Score",
    "Scorer",
    "check_training_isolation",
    "close_shared_scorers",
    "exposures",
    "isolation_level",
    "outputs_match",
    "score_programs",
    "shared_scorer",
]
