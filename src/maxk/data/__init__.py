"""Data stage: every benchmark in one problem schema (``maxk.data.schema``), plus the embedded suite.

``load(name, **options) -> list[dict]`` returns problem records:

- a raw source by name, with its loader's options: ``load("humaneval")`` (all 164, offline, with
  ``reference``), ``load("suite", family="stdio"|"call"|"mixed:0.2", n=..., seed=...)``,
  ``load("codecontests", path=...)``, ``load("livecodebench", ...)``, ... (see ``maxk.data.hub``).
  Raw sources are validated but not filtered (records may have zero cases).
- a dataset name of the config (``suite_sft``, ``suite_rl``, ``suite_test``, ``suite_call``,
  ``humaneval``, or the paper config's ``codecontests_train`` ...): built in memory exactly as
  ``maxk data build`` writes it (filters, split, test cap). ``config=`` (a dict or a YAML path)
  picks the config; default is the repository's ``config/config.yaml``.
- ``path=`` reads an already built file instead (``results/data/{name}.jsonl.gz``).

A name that is both (``humaneval``) resolves to the source unless ``config=`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from maxk.data.build import SOURCES, DataError, build_dataset, load_source, read_problems
from maxk.data.schema import SchemaError, validate_problem

__all__ = ["DataError", "SchemaError", "default_config", "load", "read_problems",
           "validate_problem"]  # fmt: skip


def default_config() -> dict[str, Any]:
    """The repository's ``config/config.yaml``, validated, with every default filled in."""
    from maxk.config import load_config

    return load_config()


def _as_config(config: dict[str, Any] | str | Path | None) -> dict[str, Any]:
    if config is None:
        return default_config()
    if isinstance(config, str | Path):
        from maxk.config import load_config

        return load_config(config)
    return config


def load(name: str, **options: Any) -> list[dict[str, Any]]:
    """Problem records of source or dataset ``name`` (see module docstring)."""
    if "path" in options and name not in SOURCES:
        return read_problems(options["path"])
    if name in SOURCES and "config" not in options:
        return load_source(name, options).records
    config = _as_config(options.pop("config", None))
    if options:
        raise DataError(f"dataset {name!r}: unexpected option(s) {sorted(options)} (only config=, path=)")
    records, _ = build_dataset(name, config)
    return records
