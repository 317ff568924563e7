"""When two problems are the same problem: their statements or their reference programs match after
normalisation (and, for the embedded suite, their task key ``meta.behaviour``: ``maxk.data.suite``).
The data stage drops a pool's problems that another pool already has (``data.pools.<pool>.exclude_pools``);
the contamination audit (``maxk.analysis.contamination``) flags a training problem that an audited set has.
Both use these two functions and the suite's key, so a pool the data stage calls new is one the audit
calls unseen.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

__all__ = ["normalise_reference", "normalise_statement", "task_key"]

_STRIP = string.punctuation + string.whitespace


def normalise_statement(text: str) -> str:
    """Lowercase, collapse every whitespace run to one space, strip punctuation/whitespace at both ends."""
    return " ".join(text.lower().split()).strip(_STRIP)


def task_key(problem: Mapping[str, Any]) -> str | None:
    """The embedded suite's key of what a problem computes (``meta.behaviour``,
    ``maxk.data.suite.behaviour``); None for a source that records none."""
    return (problem.get("meta") or {}).get("behaviour") or None


def normalise_reference(reference: str | None, tests: Any = None) -> str | None:
    """The reference program as the suite's dedup keys it, whitespace-insensitive; None without one.

    The entry point (``tests["entry_point"]``, else ``"solve"``) is replaced by ``f`` everywhere, as in
    ``maxk.data.suite.generate_suite``, then all whitespace is removed.
    """
    if reference is None:
        return None
    entry = (tests.get("entry_point") if isinstance(tests, Mapping) else None) or "solve"
    return "".join(reference.replace(entry, "f").split()) or None
