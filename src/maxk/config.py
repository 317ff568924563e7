"""The pipeline's config: one schema, and every default in it.

``workflow/schemas/config.schema.yaml`` (with one file per section beside it) is the single place
where a config key is declared, typed and, where it has one, given its default. The Snakefile applies
it with ``validate_config`` (below), as does code that reads a config file without Snakemake
(``load_config``: ``maxk.data.load``, tests, benchmarks), so both see the same complete config.
Config files hold only what differs from the defaults. (``snakemake.utils.validate`` is not used: it
fills in the defaults of the top-level file only, not of the section files its ``$ref``s reach.)

Exceptions: the ``sandbox`` section's defaults are ``maxk.sandbox.Limits``'s (the sandbox is also a
library, used without any config), and ``seed`` has none (every config names its own).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

_ROOT = Path(__file__).resolve().parents[2]
SCHEMA = _ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = _ROOT / "config" / "config.yaml"


class ConfigError(ValueError):
    """A config that does not match the schema; the message names the file and the key."""


def _load_yaml(path: Path) -> Any:
    # libyaml's loader where PyYAML has it: every Snakemake process (two per cluster job) reads the
    # schemas, and the pure-Python loader costs a quarter of a second there
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


@functools.cache
def _validator() -> Any:
    """A Draft 2020-12 validator that fills in defaults (built once per process)."""
    from jsonschema import Draft202012Validator, validators
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    if not SCHEMA.is_file():
        raise ConfigError(f"config schema not found at {SCHEMA} (maxk runs from a clone of the repository)")
    schema = _load_yaml(SCHEMA)
    schema["$id"] = SCHEMA.as_uri()

    def retrieve(uri: str) -> Resource:
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        contents = _load_yaml(Path(url2pathname(urlparse(uri).path)))
        # Without its own "$schema", a section's schema is validated by this (default-filling)
        # validator class; with it, jsonschema picks the plain class for that draft and the section's
        # defaults are silently skipped (as snakemake.utils.validate skips them).
        contents.pop("$schema", None)
        return Resource.from_contents(contents, default_specification=DRAFT202012)

    registry = Registry(retrieve=retrieve).with_resource(SCHEMA.as_uri(), Resource.from_contents(schema))
    properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator: Any, props: dict, instance: Any, sub: dict) -> Any:
        if isinstance(instance, dict):
            for name, prop in props.items():
                if "default" in prop:
                    instance.setdefault(name, copy.deepcopy(prop["default"]))
        yield from properties(validator, props, instance, sub)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    return cls(schema, registry=registry)


def validate_config(config: dict[str, Any], *, file: str | Path | None = None) -> dict[str, Any]:
    """Check ``config`` against the schema and fill in every default, in place; return it."""
    from jsonschema import ValidationError

    try:
        _validator().validate(config)
    except ValidationError as exc:
        key = ".".join(str(p) for p in exc.absolute_path) or "(top level)"
        where = f"{file}: " if file is not None else ""
        raise ConfigError(f"{where}config key {key}: {exc.message}") from None
    return config


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """The config file at ``path`` (default: the repository's ``config/config.yaml``), validated and
    with every default filled in, as the Snakefile sees it."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    config = _load_yaml(path) or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys")
    return validate_config(config, file=path)


def with_defaults(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value``, a part of config section ``section`` (as a rule hands it to its command), with the
    defaults of every key it leaves out filled in, in place. Keys it has are checked; keys the section
    requires may be absent (the rule passed only what its job needs)."""
    from jsonschema import ValidationError

    for error in _validator().iter_errors({"seed": 0, section: value}):
        if error.validator != "required":
            key = ".".join(str(p) for p in error.absolute_path)
            raise ConfigError(f"config key {key}: {error.message}") from ValidationError(error.message)
    return value


def job_config(config: dict[str, Any], sections: tuple[str, ...]) -> dict[str, Any]:
    """A job's config (the sections a rule hands its command) with ``with_defaults`` applied to each
    of ``sections`` present, and an absent ``prompt`` or ``sandbox`` section at its defaults; in place."""
    for section in (*sections, "prompt", "sandbox"):
        if section in config or section in ("prompt", "sandbox"):
            config[section] = with_defaults(section, config.get(section) or {})
    return config


def section_defaults(section: str) -> dict[str, Any]:
    """The defaults of one config section with no key set (e.g. ``section_defaults("prompt")``)."""
    return copy.deepcopy(_section_defaults(section))


@functools.cache
def _section_defaults(section: str) -> dict[str, Any]:
    return validate_config({"seed": 0, section: {}})[section]
