"""The pipeline's config: one schema, and every default in it.

``workflow/schemas/config.schema.yaml`` (with one file per section beside it) is the single place
where a config key is declared, typed and, where it has one, given its default. The Snakefile applies
it with ``validate_config`` (below), as does code that reads a config file without Snakemake
(``load_config``: ``maxk.data.load``, tests, benchmarks), so both see the same complete config.
Config files hold only what differs from the defaults. (``snakemake.utils.validate`` is not used: it
fills in the defaults of the top-level file only, not of the section files its ``$ref``s reach.)

A config is composed of files (``compose``): the experiment (``config/experiment.yaml``: the run
matrix, tables, figures and claims), then the scale files given (the embedded ``config/config.yaml``,
``config/paper.yaml``, a user's overlay), each updating the one before recursively (mappings merge,
any other value replaces), then ``--config`` values. A scale names its experiment by the top-level key
``experiment``; the experiment is chosen there, not merged, so a scale with a smaller run matrix (the
test config) names a smaller experiment rather than deleting runs. Order and examples:
config/README.md#composition.

Exceptions: the ``sandbox`` section's defaults are ``maxk.sandbox.Limits``'s (the sandbox is also a
library, used without any config), and ``seed`` has none (every config names its own).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

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

    @functools.cache  # a validator evolved from this one (one section) starts from this registry again
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


EXPERIMENT_KEYS = ("runs", "analysis")  # what an experiment file may define


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``update``, in place, as Snakemake merges config files: a mapping merges
    into a mapping key by key, recursively; any other value (a list, a scalar, null) replaces."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def compose(config: dict[str, Any], *, root: str | Path = _ROOT) -> dict[str, Any]:
    """``config`` (the scale files as merged, ``--config`` values included) laid over the experiment
    file its ``experiment`` key names (relative to ``root``, the repository), in place; return it.
    Without that key, ``config`` is returned as it is (it defines its runs and analysis itself).

    A scale's ``run_settings`` are laid over its experiment's runs (``lay_over``)."""
    name = config.get("experiment")
    if name is None:
        return config
    composed = lay_over(load_experiment(Path(root) / name), config)
    config.clear()
    config.update(composed)
    return config


def load_experiment(path: Path) -> dict[str, Any]:
    """The experiment file at ``path``: a mapping of ``EXPERIMENT_KEYS`` only."""
    if not path.is_file():
        raise ConfigError(f"config key experiment: {path} not found")
    experiment = _load_yaml(path) or {}
    if not isinstance(experiment, dict):
        raise ConfigError(f"{path}: an experiment file must be a mapping of keys")
    extra = sorted(set(experiment) - set(EXPERIMENT_KEYS))
    if extra:
        raise ConfigError(
            f"{path}: an experiment defines only {', '.join(EXPERIMENT_KEYS)}; {', '.join(extra)} belong to "
            "a scale file (config/README.md#composition)"
        )
    return experiment


def lay_over(experiment: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
    """A new config: ``experiment`` updated by ``scale`` (``merge``); neither is changed.

    The scale's ``run_settings`` (its settings for runs the experiment defines: ``{run: {key: value}}``)
    are merged into those runs first, beneath the scale's own ``runs``, and are not kept; settings for a
    run the experiment does not define are dropped (a reduced experiment, as the end-to-end tests',
    drops runs and with them their settings)."""
    out = merge({}, experiment)
    scale = dict(scale)
    runs = out.get("runs") or {}
    for run, values in (scale.pop("run_settings", None) or {}).items():
        if run in runs:
            merge(runs[run], values or {})
    return merge(out, scale)


def _fill_compared_datasets(config: dict[str, Any]) -> None:
    """A table, the full tables and the max@k curves without ``datasets`` compare on
    ``analysis.table_datasets`` (itself by default every dataset of ``analysis.datasets``)."""
    analysis = config.get("analysis")
    if not analysis:
        return
    default = analysis.get("table_datasets") or list(analysis.get("datasets") or {})
    specs = [*(analysis.get("tables") or {}).values(), analysis.get("full_tables")]
    specs.append((analysis.get("figures") or {}).get("maxk_curves"))
    for spec in specs:
        if spec is not None and "datasets" not in spec:
            spec["datasets"] = list(default)


@functools.cache
def _top_level_booleans() -> frozenset[str]:
    """The top-level keys the schema types boolean (read once per process)."""
    props = _load_yaml(SCHEMA).get("properties", {})
    return frozenset(key for key, prop in props.items() if prop.get("type") == "boolean")


def _from_command_line(config: dict[str, Any]) -> None:
    """The schema's types for what Snakemake hands over as strings from ``--config``: the items of
    ``replicates=[1234,2,3]``, and a top-level boolean's ``true``/``false`` in any case, as YAML reads
    them (Snakemake reads only ``True``/``False``)."""
    reps = config.get("replicates")
    if isinstance(reps, list):
        config["replicates"] = [int(r) if isinstance(r, str) and r.strip().isdigit() else r for r in reps]
    for key in _top_level_booleans() & set(config):
        if isinstance(config[key], str):
            config[key] = {"true": True, "false": False}.get(config[key].strip().lower(), config[key])


def validate_config(config: dict[str, Any], *, file: str | Path | None = None) -> dict[str, Any]:
    """Check ``config`` (composed: ``compose``) against the schema and fill in every default, in
    place; return it."""
    from jsonschema import ValidationError

    _from_command_line(config)
    try:
        _validator().validate(config)
    except ValidationError as exc:
        key = ".".join(str(p) for p in exc.absolute_path) or "(top level)"
        where = f"{file}: " if file is not None else ""
        hint = ""
        if exc.validator == "required" and len(exc.absolute_path) == 2 and exc.absolute_path[0] == "runs":
            hint = f" (a scale file sets runs.{exc.absolute_path[1]}, which its experiment does not define)"
        raise ConfigError(f"{where}config key {key}: {exc.message}{hint}") from None
    _fill_compared_datasets(config)
    if config.get("replicates") is None:  # the schema's null: the one seed
        config["replicates"] = [config["seed"]]
    return config


def load_config(*paths: str | Path) -> dict[str, Any]:
    """The config files at ``paths`` (default: the repository's ``config/config.yaml``), merged in
    order, composed with their experiment, validated and with every default filled in: the config
    the Snakefile sees for ``snakemake --configfile PATH...``."""
    config: dict[str, Any] = {}
    for path in (Path(p) for p in paths or (DEFAULT_CONFIG,)):
        part = _load_yaml(path) or {}
        if not isinstance(part, dict):
            raise ConfigError(f"{path}: a config file must be a mapping of keys")
        merge(config, part)
    files = ", ".join(str(p) for p in paths or (DEFAULT_CONFIG,))
    return validate_config(compose(config), file=files)


def with_defaults(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value``, a part of config section ``section`` (as a rule hands it to its command), with the
    defaults of every key it leaves out filled in, in place. Keys it has are checked; keys the section
    requires may be absent (the rule passed only what its job needs)."""
    from jsonschema import ValidationError

    for error in _section_validator(section).iter_errors(value):
        if error.validator != "required":
            key = ".".join(str(p) for p in (section, *error.absolute_path))
            raise ConfigError(f"config key {key}: {error.message}") from ValidationError(error.message)
    return value


@functools.cache
def _section_validator(section: str) -> Any:
    """``_validator`` on one section's schema alone: the whole config's schema would also fill in and
    check every other section that has defaults (a third of a second per call, paid by every process
    that imports a typed section)."""
    return _validator().evolve(schema={"$ref": (SCHEMA.parent / f"{section}.schema.yaml").as_uri()})


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


# --- one typed config per stage: a frozen dataclass per schema section --------------------------------

T = TypeVar("T")


@functools.cache
def _schema_at(path: str) -> dict[str, Any]:
    """The schema of config section ``path`` ("generate", or nested: "generate.vllm")."""
    section, *rest = path.split(".")
    schema = _load_yaml(SCHEMA.parent / f"{section}.schema.yaml")
    for key in rest:  # "*": an entry of a map of named entries (a run of `runs`)
        schema = schema["additionalProperties"] if key == "*" else schema["properties"][key]
    return schema


def _defaults_at(path: str) -> dict[str, Any]:
    """The defaults of section ``path`` as ``validate_config`` fills them in (nested ones included)."""
    section, *rest = path.split(".")
    keys = ["entry" if key == "*" else key for key in rest]  # "*": one named entry of a map
    value: dict[str, Any] = {}
    node = value
    for key in keys:  # the path's objects present, so that defaults are filled in at every level
        node = node.setdefault(key, {})
    value = with_defaults(section, value)
    for key in keys:
        value = value.get(key) or {}
    return value


def _help(path: str, prop: dict[str, Any]) -> str:
    """A property's description, or that of the definition its ``$ref`` names (``#/$defs/x``, or
    ``other.schema.yaml#/$defs/x``)."""
    if "description" in prop or "$ref" not in prop:
        return prop.get("description", "")
    file, _, pointer = prop["$ref"].partition("#/$defs/")
    owner = _load_yaml(SCHEMA.parent / file) if file else _schema_at(path.split(".")[0])
    return owner["$defs"][pointer].get("description", "")


def config_section(path: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: ``cls`` becomes the frozen, keyword-only dataclass of config section ``path``
    ("generate", "generate.vllm"; "runs.*" is one entry of a map of named entries).

    Its annotated fields must be exactly the schema's properties (else ``TypeError`` at import, naming
    them); each field's default and ``metadata["help"]`` come from the schema, the one source (TRL's
    ``GRPOConfig`` is the model: a field, its default, its help); a key that is neither required nor
    defaulted is None when absent. A field annotated with another such class is that nested section.
    ``cls.from_config(value)`` checks ``value`` (the slice a rule passes) against the schema, fills in
    every default, and builds the nested sections."""

    def wrap(cls: type[T]) -> type[T]:
        schema = _schema_at(path)
        props, required = schema.get("properties", {}), set(schema.get("required", ()))
        names = list(inspect.get_annotations(cls))
        if set(names) != set(props):
            raise TypeError(
                f"{cls.__name__} (config section {path}): fields not in the schema "
                f"{sorted(set(names) - set(props))}, schema keys without a field "
                f"{sorted(set(props) - set(names))}"
            )
        defaults = _defaults_at(path)
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        sections = {name: _section_class(hints[name]) for name in names}
        for name in names:
            meta = {"help": _help(path, props[name]), "key": f"{path}.{name}"}
            nested = sections[name]
            if nested is not None and name in defaults:  # the schema's default object, typed
                built = functools.partial(nested.from_config, defaults[name])
                made = dataclasses.field(default_factory=built, metadata=meta)
            elif name in required:
                made = dataclasses.field(metadata=meta)
            elif name not in defaults:  # optional without a default: None when absent
                made = dataclasses.field(default=None, metadata=meta)
            elif isinstance(defaults[name], dict | list):
                fresh = functools.partial(copy.deepcopy, defaults[name])
                made = dataclasses.field(default_factory=fresh, metadata=meta)
            else:
                made = dataclasses.field(default=defaults[name], metadata=meta)
            setattr(cls, name, made)
        out = dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        out.__config_section__ = path  # type: ignore[attr-defined]
        out.__config_nested__ = {n: c for n, c in sections.items() if c}  # type: ignore[attr-defined]
        out.from_config = classmethod(_from_config)  # type: ignore[attr-defined]
        return out

    return wrap


def _section_class(hint: Any) -> type | None:
    """The ``config_section`` class a field's type names (``X`` or ``X | None``), else None."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    args = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    return args[0] if len(args) == 1 and hasattr(args[0], "__config_section__") else None


def _from_config(cls: type[T], value: Mapping[str, Any]) -> T:
    section, *rest = cls.__config_section__.split(".")  # type: ignore[attr-defined]
    if not rest:  # a whole section: checked, defaults filled in (nested sections come filled)
        value = with_defaults(section, copy.deepcopy(dict(value)))
    elif rest == ["*"]:  # one named entry (a run): checked as the section's entry
        value = with_defaults(section, {"entry": copy.deepcopy(dict(value))})["entry"]
    nested = cls.__config_nested__  # type: ignore[attr-defined]
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in value:
            item = value[f.name]
            typed = f.name in nested and item is not None
            kwargs[f.name] = nested[f.name].from_config(item) if typed else item
    return cls(**kwargs)


def defaults_of(cls: type) -> dict[str, Any]:
    """The defaults of a ``config_section`` class's fields that have one (fresh copies)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out
