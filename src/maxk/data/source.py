"""What every source loader shares: its result type, its error, and the checksum of the inputs it read.

``build`` (the pipeline: sources -> filters -> splits) and ``hub`` (the Hugging Face loaders) both
import this module and not each other's internals.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DataError", "SourceResult", "sha256_file"]


class DataError(ValueError):
    """A dataset cannot be built as configured (zero rows, bad config, bad input)."""


@dataclass
class SourceResult:
    """What a source loader returns: records (maybe without tests), the inputs it read, notes."""

    records: list[dict[str, Any]]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks), recorded in the data manifests."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
