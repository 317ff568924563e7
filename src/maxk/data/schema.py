"""The problem schema every dataset is converted to (the contract read by every other stage).

A problem record is a JSON object with exactly these keys:

``id`` (str, required)
    Unique within a dataset, prefixed by its source, e.g. ``"humaneval/0"``, ``"suite/stdio-00017"``.
``source`` (str, required)
    Where it came from: ``humaneval``, ``suite``, ``codecontests``, ``livecodebench``, ...
``prompt`` (str, required, non-empty)
    The task statement shown to the model (no system prompt or instruction; see ``maxk.data.prompts``).
``difficulty`` (int or null, required)
    The source's own difficulty (CodeContests' ``difficulty`` field, the suite's level 1-5, ...).
``tests`` (object, required), one of
    ``{"format": "stdio", "cases": [{"input": str, "output": str}, ...]}`` - stdin -> expected stdout,
    compared token-wise on whitespace; or
    ``{"format": "call", "entry_point": str, "setup": str, "cases": [str, ...]}`` - each case is the
    source of one assert statement (or one loop of asserts) calling the function by ``entry_point``;
    ``setup`` is trusted code run before the cases (imports, helpers, constants).
``reference`` (str or null, optional)
    A known-correct solution (a whole program for stdio, a module defining ``entry_point`` for call).
``time_limit`` (number > 0 or null, optional)
    Per-case time limit in seconds from the source, if it states one.
``meta`` (object, optional)
    Anything else worth keeping (source row index, contest id, public/private test counts, ...).

``Problem`` (with ``StdioTests``/``CallTests``) is the record's static type, for every boundary that
passes records; ``validate_problem`` checks one record; errors are ``SchemaError`` naming the file,
row id and field.
Records written to ``results/data`` must have at least one case (``require_cases=True``); loaders
may produce records without cases, which the ``no_tests`` filter then drops and counts.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Iterable
from typing import Any, Literal, TypedDict


class StdioCase(TypedDict):
    input: str
    output: str


class StdioTests(TypedDict):
    format: Literal["stdio"]
    cases: list[StdioCase]


class CallTests(TypedDict):
    format: Literal["call"]
    entry_point: str
    setup: str
    cases: list[str]


class _RequiredFields(TypedDict):
    id: str
    source: str
    prompt: str
    difficulty: int | None
    tests: StdioTests | CallTests


class Problem(_RequiredFields, total=False):
    """A problem record (the static type of what ``validate_problem`` checks at run time)."""

    reference: str | None
    time_limit: float | None
    meta: dict[str, Any]


REQUIRED_KEYS = tuple(_RequiredFields.__annotations__)
OPTIONAL_KEYS = tuple(k for k in Problem.__annotations__ if k not in REQUIRED_KEYS)
ALL_KEYS = frozenset(REQUIRED_KEYS + OPTIONAL_KEYS)
TEST_FORMATS = ("stdio", "call")


class SchemaError(ValueError):
    """A record violates the problem schema; the message names file, row id and field."""

    def __init__(self, message: str, *, file: str | None = None, row: Any = None, field: str | None = None):
        self.file, self.row, self.field = file, row, field
        where = []
        if file is not None:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row!r}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


def _is_identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _failer(record: Any, file: str | None, row: Any):
    """``fail(msg, field)`` -> a ``SchemaError`` naming ``file``, the record's id (else ``row``) and field."""

    def fail(msg: str, field: str | None) -> SchemaError:
        rid = record.get("id") if isinstance(record, dict) and isinstance(record.get("id"), str) else row
        return SchemaError(msg, file=file, row=rid, field=field)

    return fail


def _validate_time_limit(tl: Any, fail) -> None:
    if tl is not None and (
        isinstance(tl, bool) or not isinstance(tl, int | float) or not math.isfinite(tl) or tl <= 0
    ):
        raise fail(f"must be a positive number of seconds or null, got {tl!r}", "time_limit")


def validate_problem(
    record: Any, *, file: str | None = None, row: Any = None, require_cases: bool = True
) -> Problem:
    """Check ``record`` against the schema and return it unchanged; raise ``SchemaError`` otherwise.

    ``row`` is how to name the record in errors when it has no usable ``id`` (e.g. a line number).
    """
    fail = _failer(record, file, row)
    if not isinstance(record, dict):
        raise fail(f"expected an object, got {type(record).__name__}", None)
    for key in REQUIRED_KEYS:
        if key not in record:
            raise fail("missing required field", key)
    unknown = sorted(set(record) - ALL_KEYS)
    if unknown:
        raise fail(f"unknown field(s) {unknown}; allowed: {sorted(ALL_KEYS)}", unknown[0])
    if not isinstance(record["id"], str) or not record["id"]:
        raise fail("must be a non-empty string", "id")
    if not isinstance(record["source"], str) or not record["source"]:
        raise fail("must be a non-empty string", "source")
    if not isinstance(record["prompt"], str) or not record["prompt"].strip():
        raise fail("must be a non-empty string", "prompt")
    diff = record["difficulty"]
    if diff is not None and (isinstance(diff, bool) or not isinstance(diff, int)):
        raise fail(f"must be an integer or null, got {diff!r}", "difficulty")
    _validate_tests(record["tests"], fail, require_cases)
    ref = record.get("reference")
    if ref is not None and not isinstance(ref, str):
        raise fail("must be a string or null", "reference")
    _validate_time_limit(record.get("time_limit"), fail)
    if "meta" in record and not isinstance(record["meta"], dict):
        raise fail("must be an object", "meta")
    return record


def validate_scorable(record: Any, *, file: str | None = None, row: Any = None) -> Problem:
    """Check the part of a record the sandbox judges by (``id``, ``tests``, ``time_limit``), with the same
    rules and messages as ``validate_problem``; the rest (prompt, source, ...) is not needed to score."""
    fail = _failer(record, file, row)
    if not isinstance(record, dict):
        raise fail(f"expected an object, got {type(record).__name__}", None)
    if not isinstance(record.get("id"), str) or not record["id"]:
        raise fail("must be a non-empty string", "id")
    if "tests" not in record:
        raise fail("missing required field", "tests")
    _validate_tests(record["tests"], fail, require_cases=False)
    _validate_time_limit(record.get("time_limit"), fail)
    return record


def _validate_tests(tests: Any, fail, require_cases: bool) -> None:
    if not isinstance(tests, dict):
        raise fail("must be an object with a 'format'", "tests")
    fmt = tests.get("format")
    if fmt not in TEST_FORMATS:
        raise fail(f"unknown test format {fmt!r}; expected one of {list(TEST_FORMATS)}", "tests.format")
    cases = tests.get("cases")
    if not isinstance(cases, list):
        raise fail("must be a list", "tests.cases")
    if require_cases and not cases:
        raise fail("no test cases", "tests.cases")
    if fmt == "stdio":
        extra = sorted(set(tests) - {"format", "cases"})
        if extra:
            raise fail(f"unknown key(s) {extra} for format 'stdio'", f"tests.{extra[0]}")
        for i, case in enumerate(cases):
            if not isinstance(case, dict) or set(case) != {"input", "output"}:
                raise fail("must be an object with exactly 'input' and 'output'", f"tests.cases[{i}]")
            for key in ("input", "output"):
                if not isinstance(case[key], str):
                    raise fail("must be a string", f"tests.cases[{i}].{key}")
    else:
        extra = sorted(set(tests) - {"format", "cases", "entry_point", "setup"})
        if extra:
            raise fail(f"unknown key(s) {extra} for format 'call'", f"tests.{extra[0]}")
        if not _is_identifier(tests.get("entry_point")):
            raise fail("must be a Python identifier", "tests.entry_point")
        if not isinstance(tests.get("setup"), str):
            raise fail("must be a string (may be empty)", "tests.setup")
        for i, case in enumerate(cases):
            if not isinstance(case, str) or not case.strip():
                raise fail("must be a non-empty string (an assert statement)", f"tests.cases[{i}]")


def validate_dataset(
    records: Iterable[Any], *, file: str | None = None, require_cases: bool = True
) -> list[Problem]:
    """Validate every record and the uniqueness of ids; return them as a list."""
    out: list[Problem] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        validate_problem(rec, file=file, row=i, require_cases=require_cases)
        if rec["id"] in seen:
            raise SchemaError("duplicate id", file=file, row=rec["id"], field="id")
        seen.add(rec["id"])
        out.append(rec)
    return out


def num_cases(record: dict[str, Any]) -> int:
    return len(record["tests"]["cases"])
