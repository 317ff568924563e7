"""Data stage: every benchmark in one problem schema (``maxk.data.schema``), plus the embedded suite.

``load(name, **options) -> list[dict]`` returns problem records:

- a raw source by name, with its loader's options: ``load("humaneval")`` (all 164, offline, with
  ``reference``), ``load("suite", family="stdio"|"call"|"mixed:0.2", n=..., seed=...)``,
  ``load("codecontests", path=...)``, ``load("livecodebench", ...)``, ... (see ``maxk.data.hub``).
  Raw sources are validated but not filtered (records may have zero cases).
- a dataset name of the config (``suite_train``, ``suite_test``, ``suite_call``, ``humaneval``, or the
  paper config's ``codecontests_train`` ...): built in memory exactly as ``maxk data build`` writes it
  (filters, split, test cap). ``config=`` (a dict or a YAML path) picks the config; default is the
  repository's ``config/config.yaml``, or the built-in copy of its data sections.
- ``path=`` reads an already built file instead (``results/data/{name}.jsonl.gz``).

A name that is both (``humaneval``) resolves to the source unless ``config=`` is given.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from maxk.data.build import SOURCES, DataError, build_dataset, load_source, read_problems
from maxk.data.schema import SchemaError, validate_problem

__all__ = ["DEFAULT_DATA_CONFIG", "DataError", "SchemaError", "default_config", "load", "read_problems",
           "validate_problem"]  # fmt: skip

#: Built-in copy of the default config's data sections (used when config/config.yaml is not found).
DEFAULT_DATA_CONFIG: dict[str, Any] = {
    "datasets": {
        "suite_train": {"pool": "suite", "part": "train"},
        "suite_test": {"pool": "suite", "part": "test", "formats": ["stdio"]},
        "suite_call": {"pool": "suite", "part": "test", "formats": ["call"]},
        "humaneval": {"pool": "humaneval"},
    },
    "data": {
        "tokenizer": None,
        "pools": {
            "suite": {
                "source": "suite",
                "options": {"family": "mixed:0.25", "n": 4000, "seed": 1234, "num_tests": 8},
                "max_difficulty": 5,
                "max_prompt_tokens": 1024,
                "max_tests": None,
                "split": {"seed": 1234, "sizes": {"train": 0.9, "test": 0.1}, "stratify": "format"},
                "expected": {"filtered": 4000, "train": 3600, "test": 400},
            },
            "humaneval": {
                "source": "humaneval",
                "options": {},
                "max_difficulty": None,
                "max_prompt_tokens": None,
                "max_tests": None,
                "split": None,
                "expected": {"filtered": 164},
            },
        },
    },
}


def _repo_config_path() -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "config" / "config.yaml"
        if cand.is_file() and (parent / "Snakefile").is_file():
            return cand
    return None


def default_config() -> dict[str, Any]:
    """The repository's config/config.yaml if found, else ``DEFAULT_DATA_CONFIG``."""
    path = _repo_config_path()
    if path is not None:
        import yaml

        with open(path, encoding="utf-8") as fh:
            cfg = yaml.safe_load(fh) or {}
        if "datasets" in cfg and "data" in cfg:
            return cfg
    return copy.deepcopy(DEFAULT_DATA_CONFIG)


def _as_config(config: dict[str, Any] | str | Path | None) -> dict[str, Any]:
    if config is None:
        return default_config()
    if isinstance(config, str | Path):
        import yaml

        with open(config, encoding="utf-8") as fh:
            return yaml.safe_load(fh) or {}
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
