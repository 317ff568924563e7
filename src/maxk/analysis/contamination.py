"""Contamination audit: did any model train on a problem of a set it is evaluated on?

Each model directory records what it was trained on (``results/seed{seed}/models/{model}/trained_on.json``, a
JSON list of ``{"dataset": name, "id": problem_id}``: the SFT examples of ``base``, the RL prompts of a
run). For every model and every audited dataset, a training problem overlaps the audited set when

- ``overlap_id``: its ``id`` is an id of the audited set (ids are only meaningful within a source,
  hence the two content checks below);
- ``overlap_statement``: its statement equals one of the set's after ``normalise_statement``
  (lowercase, whitespace collapsed, punctuation and whitespace at both ends stripped);
- ``overlap_reference``: its reference program equals one of the set's after ``normalise_reference``
  (the entry point renamed to ``f`` as ``maxk.data.suite``'s dedup does, all whitespace removed);
  problems without a reference are never matched this way;
- ``overlap_behaviour``: it computes what one of the set's problems computes (``meta.behaviour``, the
  suite's key of a task's results on fixed probe inputs, ``maxk.data.suite.behaviour``: the same task in
  the other format, looped over test cases, or with a step that changes nothing); problems without one
  (every set but the suite's) are never matched this way;

and ``overlap`` counts each training problem once if it overlaps in any of the four ways. For each
run (not ``base``), ``sft_overlap`` counts its training problems that overlap (same four ways)
``base``'s training problems, when ``base`` is audited too: informational, not a failure.

Pure functions over parsed inputs, plus two small readers (``load_trained_on``, ``data_files``);
errors are ``ContaminationError`` naming the file, the row and the field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxk.data.identity import normalise_reference, normalise_statement, task_key

__all__ = [
    "BASE",
    "COLUMNS",
    "DATA_DIGEST",
    "DATA_SUFFIXES",
    "ContaminationError",
    "Match",
    "OverlapRow",
    "ProblemKey",
    "SetIndex",
    "audit",
    "check_datasets",
    "check_digest",
    "data_files",
    "dataset_name",
    "index_set",
    "load_trained_on",
    "match",
    "model_name",
    "normalise_reference",
    "normalise_statement",
    "offenders",
    "order_models",
    "parse_trained_on",
    "problem_keys",
    "render_markdown",
    "training_keys",
    "verdict",
]

#: The SFT model: listed first, and the reference of every run's ``sft_overlap``.
BASE = "base"
#: Dataset file suffixes; a dataset's name is its file name without one of them.
DATA_SUFFIXES = (".jsonl.gz", ".jsonl", ".parquet")
#: Columns of the CSV, in order.
COLUMNS = (
    "model",
    "trained_on_datasets",
    "trained",
    "audited",
    "audited_size",
    "overlap_id",
    "overlap_statement",
    "overlap_reference",
    "overlap_behaviour",
    "overlap",
    "example_ids",
    "sft_overlap",
)


class ContaminationError(ValueError):
    """An input of the audit is malformed or inconsistent; the message names file, row and field."""


# --------------------------------------------------------------------------- names and inputs
def dataset_name(path: str | Path) -> str:
    """The dataset name of a data file: its file name without ``.jsonl.gz``, ``.jsonl`` or ``.parquet``."""
    name = Path(path).name
    for suffix in DATA_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    raise ContaminationError(
        f"{path}: not a dataset file (expected a name ending in {', '.join(DATA_SUFFIXES)})"
    )


def model_name(path: str | Path) -> str:
    """The model a ``trained_on.json`` belongs to: the name of the directory holding it."""
    name = Path(path).absolute().parent.name
    if not name:
        raise ContaminationError(f"{path}: cannot tell the model (no directory above the file)")
    return name


def data_files(paths: Iterable[str | Path]) -> dict[str, Path]:
    """``{dataset name: path}`` of the data files given; two files with one name are an error."""
    out: dict[str, Path] = {}
    for p in paths:
        name = dataset_name(p)
        if name in out:
            raise ContaminationError(f"two data files for dataset {name!r}: {out[name]} and {p}")
        out[name] = Path(p)
    return out


def parse_trained_on(obj: Any, file: str) -> list[tuple[str, str]]:
    """The ``(dataset, id)`` pairs of a parsed ``trained_on.json``, in file order, repeats removed.

    Rows are named by their 0-based index in the list. Keys other than ``dataset`` and ``id`` are
    ignored.
    """
    if not isinstance(obj, list):
        raise ContaminationError(
            f'{file}: expected a JSON list of {{"dataset": ..., "id": ...}} objects, got {type(obj).__name__}'
        )
    out: dict[tuple[str, str], None] = {}
    for i, row in enumerate(obj):
        if not isinstance(row, dict):
            raise ContaminationError(
                f"{file}: row {i}: expected an object with 'dataset' and 'id', got {type(row).__name__}"
            )
        for field in ("dataset", "id"):
            if field not in row:
                raise ContaminationError(f"{file}: row {i}, field {field!r}: missing")
            if not isinstance(row[field], str) or not row[field]:
                raise ContaminationError(
                    f"{file}: row {i}, field {field!r}: must be a non-empty string, got {row[field]!r}"
                )
        out[(row["dataset"], row["id"])] = None
    return list(out)


def load_trained_on(path: str | Path) -> list[tuple[str, str]]:
    """Read and validate one ``trained_on.json`` (see ``parse_trained_on``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except FileNotFoundError:
        raise ContaminationError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise ContaminationError(f"{path}: not valid JSON ({exc})") from None
    return parse_trained_on(obj, str(path))


#: beside a ``trained_on.json`` made elsewhere (a shipped base): ``{dataset: {"records_sha256": ...}}``,
#: the content digest (``maxk.data.build.records_sha256``) of each dataset its ids refer to
DATA_DIGEST = "data_digest.json"


def check_digest(trained_on: str | Path, digest_of: Callable[[str], str | None]) -> None:
    """Raise unless every dataset digest recorded beside ``trained_on`` (``DATA_DIGEST``, when there is
    one) equals ``digest_of(dataset)``, the digest of the file the audit reads for it (None: no file): a
    model trained elsewhere names its problems by id, and ids mean the same problems only in the same
    data."""
    record = Path(trained_on).with_name(DATA_DIGEST)
    if not record.is_file():
        return
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
        wanted = {str(d): str(v["records_sha256"]) for d, v in recorded.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ContaminationError(
            f"{record}: not a mapping of dataset -> {{records_sha256: ...}} ({exc})"
        ) from None
    for dataset, want in wanted.items():
        got = digest_of(dataset)
        if got is None:
            raise ContaminationError(
                f"{record}: dataset {dataset!r}, field 'records_sha256': no --data file for it"
            )
        if got != want:
            raise ContaminationError(
                f"{record}: dataset {dataset!r}, field 'records_sha256': {want[:12]}, but the data read here "
                f"has {got[:12]}: {Path(trained_on).parent} was trained on other data than this config "
                "makes (its ids name other problems); rebuild it (base_model.build: true) or restore the "
                "data config it was built with"
            )


def check_datasets(pairs: Sequence[tuple[str, str]], available: Iterable[str], file: str) -> None:
    """Raise unless every dataset named in ``pairs`` (read from ``file``) is among ``available``."""
    known = set(available)
    for i, (dataset, _) in enumerate(pairs):
        if dataset not in known:
            raise ContaminationError(
                f"{file}: row {i}, field 'dataset': dataset {dataset!r} is not among the data files given "
                f"(--data: {', '.join(sorted(known)) or 'none'})"
            )


@dataclass(frozen=True)
class ProblemKey:
    """What a problem is matched by: its dataset and id, normalised statement and reference, and its
    behaviour key (``meta.behaviour``; None where the source records none)."""

    dataset: str
    id: str
    statement: str
    reference: str | None
    behaviour: str | None = None


def problem_keys(dataset: str, problems: Iterable[Mapping[str, Any]]) -> dict[str, ProblemKey]:
    """``{id: ProblemKey}`` of a dataset's problems (as ``maxk.data.build.read_problems`` returns them)."""
    return {
        p["id"]: ProblemKey(
            dataset=dataset,
            id=p["id"],
            statement=normalise_statement(p.get("prompt") or ""),
            reference=normalise_reference(p.get("reference"), p.get("tests")),
            behaviour=task_key(p),
        )
        for p in problems
    }


def training_keys(
    pairs: Sequence[tuple[str, str]], keys: Mapping[str, Mapping[str, ProblemKey]], file: str
) -> list[ProblemKey]:
    """The keys of the problems ``file`` lists; an id missing from its dataset is an error."""
    check_datasets(pairs, keys, file)
    out = []
    for i, (dataset, pid) in enumerate(pairs):
        key = keys[dataset].get(pid)
        if key is None:
            raise ContaminationError(
                f"{file}: row {i}, field 'id': {pid!r} is not a problem of dataset {dataset!r}"
            )
        out.append(key)
    return out


# --------------------------------------------------------------------------- matching
@dataclass(frozen=True)
class SetIndex:
    """A set of problems looked up by id, normalised statement, normalised reference and behaviour
    (-> an id)."""

    ids: frozenset[str]
    statements: Mapping[str, str]
    references: Mapping[str, str]
    behaviours: Mapping[str, str] = dataclasses.field(default_factory=dict)


def index_set(keys: Iterable[ProblemKey]) -> SetIndex:
    """Index ``keys``; empty statements, missing references and behaviours are left out (they match
    nothing)."""
    ids: set[str] = set()
    statements: dict[str, str] = {}
    references: dict[str, str] = {}
    behaviours: dict[str, str] = {}
    for k in keys:
        ids.add(k.id)
        if k.statement:
            statements.setdefault(k.statement, k.id)
        if k.reference:
            references.setdefault(k.reference, k.id)
        if k.behaviour:
            behaviours.setdefault(k.behaviour, k.id)
    return SetIndex(frozenset(ids), statements, references, behaviours)


@dataclass(frozen=True)
class Match:
    """How one problem matches a set: by which of the four keys, and the id it matched (id first)."""

    by_id: bool
    by_statement: bool
    by_reference: bool
    other: str | None
    by_behaviour: bool = False

    @property
    def any(self) -> bool:
        return self.by_id or self.by_statement or self.by_reference or self.by_behaviour


def match(key: ProblemKey, index: SetIndex) -> Match:
    """Match one problem against an indexed set."""
    by_id = key.id in index.ids
    stmt = index.statements.get(key.statement)
    ref = index.references.get(key.reference) if key.reference is not None else None
    act = index.behaviours.get(key.behaviour) if key.behaviour is not None else None
    other = key.id if by_id else stmt or ref or act
    return Match(by_id, stmt is not None, ref is not None, other, act is not None)


# --------------------------------------------------------------------------- the audit
@dataclass(frozen=True)
class OverlapRow:
    """One (model, audited set) row of the audit (``COLUMNS``)."""

    model: str
    trained_on_datasets: str
    trained: int
    audited: str
    audited_size: int
    overlap_id: int
    overlap_statement: int
    overlap_reference: int
    overlap_behaviour: int
    overlap: int
    example_ids: str
    sft_overlap: int | None

    def as_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in COLUMNS}


def order_models(models: Iterable[str]) -> list[str]:
    """Models sorted by name, ``base`` first."""
    return sorted(set(models), key=lambda m: (m != BASE, m))


def _example(key: ProblemKey, m: Match) -> str:
    return key.id if m.other in (None, key.id) else f"{key.id} (= {m.other})"


def audit(
    trained: Mapping[str, Sequence[ProblemKey]],
    audited: Mapping[str, Sequence[ProblemKey]],
    *,
    examples: int = 3,
) -> list[OverlapRow]:
    """One row per model (``order_models``) and audited set (in ``audited``'s order).

    ``trained``: each model's training problems; ``audited``: each audited set's problems.
    ``example_ids`` lists up to ``examples`` overlapping training ids, in (dataset, id) order, each
    followed by ``(= other)`` when it matched an audited problem with another id.
    """
    indexes = {name: index_set(keys) for name, keys in audited.items()}
    base = index_set(trained[BASE]) if BASE in trained else None
    rows = []
    for model in order_models(trained):
        keys = sorted(set(trained[model]), key=lambda k: (k.dataset, k.id))
        sft = None if base is None or model == BASE else sum(match(k, base).any for k in keys)
        datasets = ",".join(sorted({k.dataset for k in keys}))
        for name, index in indexes.items():
            found = [(k, m) for k in keys if (m := match(k, index)).any]
            rows.append(
                OverlapRow(
                    model=model,
                    trained_on_datasets=datasets,
                    trained=len(keys),
                    audited=name,
                    audited_size=len(index.ids),
                    overlap_id=sum(m.by_id for _, m in found),
                    overlap_statement=sum(m.by_statement for _, m in found),
                    overlap_reference=sum(m.by_reference for _, m in found),
                    overlap_behaviour=sum(m.by_behaviour for _, m in found),
                    overlap=len(found),
                    example_ids="; ".join(_example(k, m) for k, m in found[:examples]),
                    sft_overlap=sft,
                )
            )
    return rows


def offenders(rows: Iterable[OverlapRow]) -> list[tuple[str, str, int]]:
    """``(model, audited set, overlap)`` of every row with overlap, in row order."""
    return [(r.model, r.audited, r.overlap) for r in rows if r.overlap > 0]


def verdict(rows: Sequence[OverlapRow]) -> str:
    """One line: no overlap anywhere, or the offending (model, audited set) pairs with their counts."""
    bad = offenders(rows)
    if not bad:
        return "Verdict: 0 overlap between training and every audited set."
    pairs = ", ".join(f"{m} on {a} ({n})" for m, a, n in bad)
    return f"Verdict: training overlaps an audited set in {len(bad)} pair(s): {pairs}."


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value).replace("|", r"\|")


def render_markdown(rows: Sequence[OverlapRow]) -> str:
    """A heading, the table of ``rows`` and the verdict line."""
    lines = [
        "# Contamination audit",
        "",
        "Training problems (`trained_on.json`) found in each audited set, by id, normalised statement, "
        "normalised reference program or behaviour (the suite's task key) (`overlap`: by any of the four; "
        "`sft_overlap`: a run's "
        "training problems that were also `base`'s).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|"
        + "|".join(
            "---" if c in ("model", "trained_on_datasets", "audited", "example_ids") else "---:"
            for c in COLUMNS
        )
        + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in r.as_dict().values()) + " |" for r in rows]
    lines += ["", verdict(rows), ""]
    return "\n".join(lines)
