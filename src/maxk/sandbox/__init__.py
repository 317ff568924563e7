"""Sandboxed scoring of untrusted programs: ``score_programs`` and the long-lived ``Scorer`` pool.

See ``README.md`` in this package for the design, the isolation layers and which layer stops which
attack. Modules: ``scorer`` (the pool), ``judge`` (verdicts), ``levels`` (what each isolation level
requires and leaves exposed), ``wire`` (framing, statuses, the value codec), and, on the worker's
side, ``_worker`` (the fork server) and ``isolation`` (the isolation primitives, one function per
layer). Verdicts are always decided in the trusted (calling) process.
"""

from maxk.sandbox.judge import VERDICTS, Score, outputs_match
from maxk.sandbox.levels import (
    LEVEL_ORDER,
    LEVELS,
    THREATS,
    SandboxError,
    check_training_isolation,
    exposed_threats,
    exposure_fixes,
    exposures,
    isolation_level,
    uid_note,
)
from maxk.sandbox.scorer import Limits, Scorer, close_shared_scorers, score_programs, shared_scorer

__all__ = [
    "LEVELS",
    "LEVEL_ORDER",
    "THREATS",
    "VERDICTS",
    "Limits",
    "SandboxError",
    "Score",
    "Scorer",
    "check_training_isolation",
    "close_shared_scorers",
    "exposed_threats",
    "exposure_fixes",
    "exposures",
    "isolation_level",
    "outputs_match",
    "score_programs",
    "shared_scorer",
    "uid_note",
]
