"""Loaders for the paper's benchmarks: hub id (``datasets.load_dataset``) or local Parquet/JSON(L) files.

Every loader takes ``hub_id``/``split``/``revision`` *or* ``paths`` (a list of local files; clusters
often have no hub access from compute nodes) and returns a ``SourceResult``: problem records (records a
problem cannot be used for keep zero cases and a ``meta.no_tests_reason``, so the ``no_tests`` filter
counts them with reasons), the inputs read (path + sha256, or hub id + revision + fingerprint) and notes.

Field names and encodings follow the real datasets:

- ``deepmind/code_contests``: ``name, description, public_tests/private_tests/generated_tests
  {input: [str], output: [str]}, difficulty (int enum), solutions {language: [int], solution: [str]},
  cf_contest_id, cf_index, time_limit {seconds, nanos}, input_file, output_file``.
- ``livecodebench/code_generation_lite`` raw JSONL (``test.jsonl``, ``test2.jsonl`` ... ``test6.jsonl``;
  ``release_vN`` = the first N files): ``question_title, question_content, platform, question_id,
  contest_id, contest_date, starter_code, difficulty ("easy"|"medium"|"hard"), public_test_cases (JSON),
  private_test_cases (JSON, or base64(zlib(pickle(JSON string)))), metadata (JSON, ``func_name``)``.
  Tests are ``{input, output, testtype: "stdin"|"functional"}``; functional tests call a method of
  ``class Solution`` with one JSON value per input line. The pickle is read with an unpickler that
  refuses every global, so only plain data can come out of it.
- ``livebench/coding``: ``question_id, task, turns [str], question_title, public_test_cases,
  private_test_cases (LiveCodeBench encoding), original_json (metadata with func_name), partial_solution``.
- ``open-r1/codeforces``: ``id, contest_id, index, title, description, input_format, output_format,
  interaction_format, note, examples [{input, output}], official_tests [{input, output}],
  official_tests_complete, input_mode, generated_checker, time_limit, rating``.
- ``google-research-datasets/mbpp``: ``task_id, text, code, test_list [assert str], test_setup_code``.
- CURE's ``Gen-Verse/*``: ``question, test_input [str], test_output [str], example_input,
  example_output, test_time_limit``.
"""

from __future__ import annotations

import ast
import base64
import gzip
import io
import json
import pickle
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from maxk.data.source import DataError, SourceResult, sha256_file

Row = tuple[str, Any, dict[str, Any]]  # (file or hub id, row index, row)


# --------------------------------------------------------------------------- reading
def _read_local(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield i, row
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"file {path}: not valid JSON ({exc.msg})") from exc
        for i, row in enumerate(rows):
            yield i, row
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno - 1, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"file {path}: row {lineno - 1} (line {lineno}): not valid JSON ({exc.msg})"
            ) from exc


def read_rows(
    *, hub_id: str | None = None, split: str = "test", revision: str | None = None,
    paths: Iterable[str] | None = None, name: str | None = None, data_files: list[str] | None = None,
    filename: str | None = None,
) -> tuple[list[Row], list[dict[str, Any]]]:  # fmt: skip
    """Rows from local files (``paths``), one file of a hub repository (``hub_id`` + ``filename`` at
    ``revision``, through the hub cache) or a hub dataset; plus the manifest's ``inputs`` entries."""
    rows: list[Row] = []
    inputs: list[dict[str, Any]] = []
    if hub_id and filename and not paths:
        from maxk.hf_hub import dataset_file

        try:
            local = dataset_file(hub_id, filename, revision)
        except FileNotFoundError as exc:
            raise DataError(str(exc)) from None
        rows, inputs = read_rows(paths=[local])
        inputs = [{"hub": hub_id, "file": filename, "revision": revision, "sha256": inputs[0]["sha256"]}]
        return [(f"{hub_id}@{revision or 'main'}:{filename}", i, row) for _, i, row in rows], inputs
    if paths:
        for p in paths:
            path = Path(p)
            if not path.is_file():
                raise DataError(f"file {path}: not found")
            for i, row in _read_local(path):
                if not isinstance(row, dict):
                    raise DataError(f"file {path}: row {i}: expected an object, got {type(row).__name__}")
                rows.append((str(path), i, row))
            inputs.append({"path": str(path), "sha256": sha256_file(path)})
        return rows, inputs
    if not hub_id:
        raise DataError("give either 'paths' (local files) or 'hub_id' in the pool's options")
    import datasets

    if data_files:
        ds = datasets.load_dataset("json", data_files=data_files, split="train", revision=None)
    else:
        ds = datasets.load_dataset(hub_id, name, split=split, revision=revision)
    for i, row in enumerate(ds):
        rows.append((hub_id, i, dict(row)))
    cache = [c.get("filename") for c in getattr(ds, "cache_files", []) if c.get("filename")]
    inputs.append({"hub": hub_id, "config": name, "split": split, "revision": revision,
                   "data_files": data_files,
                   "fingerprint": getattr(ds, "_fingerprint", None),
                   "sha256": {Path(c).name: sha256_file(c) for c in cache}})  # fmt: skip
    return rows, inputs


def _need(where: str, idx: Any, row: dict[str, Any], key: str, types: type | tuple[type, ...] = str) -> Any:
    if key not in row or row[key] is None:
        raise DataError(f"file {where}: row {idx}: missing field {key!r}")
    if not isinstance(row[key], types):
        raise DataError(f"file {where}: row {idx}: field {key!r} has type {type(row[key]).__name__}")
    return row[key]


def _record(rid: str, source: str, prompt: str, difficulty: int | None, tests: dict[str, Any], *,
            reference: str | None = None, time_limit: float | None = None, meta: dict[str, Any] | None = None,
            no_tests_reason: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta = dict(meta or {})
    if no_tests_reason:
        meta["no_tests_reason"] = no_tests_reason
        tests = {**tests, "cases": []}
    rec = {"id": rid, "source": source, "prompt": prompt, "difficulty": difficulty, "tests": tests,
           "reference": reference, "time_limit": time_limit, "meta": meta}  # fmt: skip
    return rec


def _stdio_cases(
    inputs: list[Any], outputs: list[Any], where: str, idx: Any, field: str
) -> list[dict[str, str]]:
    if len(inputs) != len(outputs):
        raise DataError(
            f"file {where}: row {idx}: field {field!r}: {len(inputs)} inputs but {len(outputs)} outputs"
        )
    cases, seen = [], set()
    for i, (inp, out) in enumerate(zip(inputs, outputs, strict=True)):
        if not isinstance(inp, str) or not isinstance(out, str):
            raise DataError(f"file {where}: row {idx}: field {field!r}[{i}]: input/output must be strings")
        if (inp, out) in seen:
            continue
        seen.add((inp, out))
        cases.append({"input": inp, "output": out})
    return cases


def _unique_ids(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for r in records:
        n = counts.get(r["id"], 0)
        counts[r["id"]] = n + 1
        if n:
            r["id"] = f"{r['id']}#{n}"
    return records


# --------------------------------------------------------------------------- CodeContests
CC_PYTHON3 = 3  # solutions.language enum: 0 unknown, 1 python2, 2 c++, 3 python3, 4 java


def load_codecontests(
    hub_id: str = "deepmind/code_contests", split: str = "train", revision: str | None = None,
    paths: list[str] | None = None, test_sets: list[str] = ("public", "private", "generated"),
) -> SourceResult:  # fmt: skip
    rows, inputs = read_rows(hub_id=hub_id, split=split, revision=revision, paths=paths)
    out = []
    for where, idx, row in rows:
        name = _need(where, idx, row, "name")
        desc = _need(where, idx, row, "description")
        ins: list[Any] = []
        outs: list[Any] = []
        counts = {}
        for ts in test_sets:
            t = row.get(f"{ts}_tests") or {"input": [], "output": []}
            if not isinstance(t, dict) or "input" not in t or "output" not in t:
                raise DataError(f"file {where}: row {idx}: field '{ts}_tests' must have 'input' and 'output'")
            ins += list(t["input"])
            outs += list(t["output"])
            counts[ts] = len(t["input"])
        cases = _stdio_cases(ins, outs, where, idx, "tests")
        tl = row.get("time_limit") or {}
        seconds = (tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9 if isinstance(tl, dict) else 0
        sols = row.get("solutions") or {"language": [], "solution": []}
        ref = next((s for lang, s in zip(sols.get("language", []), sols.get("solution", []), strict=False)
                    if lang == CC_PYTHON3), None)  # fmt: skip
        reason = None
        if row.get("input_file") or row.get("output_file"):
            reason = "reads or writes files instead of stdin/stdout"
        elif not cases:
            reason = "no tests"
        out.append(_record(
            f"codecontests/{name.split('.')[0].strip() or idx}", "codecontests", desc,
            int(row["difficulty"]) if row.get("difficulty") is not None else None,
            {"format": "stdio", "cases": cases}, reference=ref, time_limit=seconds or None,
            meta={"name": name, "row": idx, "cf_contest_id": row.get("cf_contest_id"),
                  "cf_index": row.get("cf_index"), "tests_per_set": counts},
            no_tests_reason=reason,
        ))  # fmt: skip
    return SourceResult(_unique_ids(out), inputs)


# --------------------------------------------------------------------------- LiveCodeBench / LiveBench
class _DataOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused (no code can run)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing global {module}.{name} in encoded test cases")


def decode_lcb_tests(value: Any) -> list[dict[str, Any]]:
    """LiveCodeBench test cases: a JSON list, or base64(zlib(pickle(JSON string)))."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    raw = zlib.decompress(base64.b64decode(value.encode("utf-8")))
    obj = _DataOnlyUnpickler(io.BytesIO(raw)).load()
    return json.loads(obj) if isinstance(obj, str | bytes) else obj


def _py_literal(value: Any) -> str:
    return repr(value)


def _row_lcb_tests(row: dict[str, Any], where: str, qid: str) -> list[dict[str, Any]]:
    """Public then private test cases of a LiveCodeBench-format row (LiveCodeBench, LiveBench)."""
    tests: list[dict[str, Any]] = []
    for field in ("public_test_cases", "private_test_cases"):
        try:
            tests += decode_lcb_tests(row.get(field) or "[]")
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
            raise DataError(f"file {where}: row {qid}: field {field!r}: cannot decode ({exc})") from exc
    return tests


#: LiveCodeBench's grader turns a tuple result into a list before comparing (lcb_runner
#: testing_util.grade_call_based); the cases do the same, in the trusted judge.
LCB_CALL_SETUP = "def _lcb_result(value):\n    return list(value) if isinstance(value, tuple) else value\n"


def lcb_tests(
    tests: list[dict[str, Any]], func_name: str | None, where: str, idx: Any
) -> tuple[dict[str, Any], str | None]:
    """Our ``tests`` from LiveCodeBench cases; (tests, reason it is unusable or None)."""
    kinds = {t.get("testtype") for t in tests}
    if not tests:
        return {"format": "stdio", "cases": []}, "no tests"
    if kinds == {"stdin"}:
        ins, outs = [t["input"] for t in tests], [t["output"] for t in tests]
        return {"format": "stdio", "cases": _stdio_cases(ins, outs, where, idx, "test_cases")}, None
    if kinds == {"functional"}:
        if not func_name:
            return {"format": "stdio", "cases": []}, "functional tests without metadata.func_name"
        cases = []
        for t in tests:
            try:
                args = [json.loads(line) for line in t["input"].split("\n") if line.strip()]
                expected = json.loads(t["output"])
            except (json.JSONDecodeError, KeyError, AttributeError):
                return {"format": "stdio", "cases": []}, "functional test not valid JSON"
            call = f"{func_name}({', '.join(_py_literal(a) for a in args)})"
            cases.append(f"assert _lcb_result({call}) == {_py_literal(expected)}")
        return {"format": "call", "entry_point": func_name, "setup": LCB_CALL_SETUP, "cases": cases}, None
    return {"format": "stdio", "cases": []}, f"unknown or mixed test types {sorted(map(str, kinds))}"


LCB_FILES = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")
LCB_DIFFICULTY = {"easy": 1, "medium": 2, "hard": 3}


def lcb_files(version: str) -> list[str]:
    """``release_vN`` -> the first N raw files; ``vN`` -> only the N-th (problems new in that release)."""
    m = re.fullmatch(r"(release_)?v(\d+)", version)
    if not m or not 1 <= int(m.group(2)) <= len(LCB_FILES):
        raise DataError(f"livecodebench: unknown version {version!r}; expected release_v1..v6 or v1..v6")
    n = int(m.group(2))
    return list(LCB_FILES[:n]) if m.group(1) else [LCB_FILES[n - 1]]


def _lcb_prompt(content: str, starter: str) -> str:
    if starter and starter.strip():
        return f"{content.rstrip()}\n\nUse this starter code:\n```python\n{starter.rstrip()}\n```"
    return content


def load_livecodebench(
    hub_id: str = "livecodebench/code_generation_lite", version: str = "release_v6",
    revision: str | None = None, paths: list[str] | None = None,
    start_date: str | None = None, end_date: str | None = None,
) -> SourceResult:  # fmt: skip
    files = None
    if not paths:
        rev = revision or "main"
        files = [f"hf://datasets/{hub_id}@{rev}/{f}" for f in lcb_files(version)]
    rows, inputs = read_rows(hub_id=hub_id, paths=paths, data_files=files)
    out = []
    for where, idx, row in rows:
        qid = str(_need(where, idx, row, "question_id", (str, int)))
        content = _need(where, idx, row, "question_content")
        date = str(row.get("contest_date") or "")
        if (start_date and date[:10] < start_date) or (end_date and date[:10] > end_date):
            continue
        meta_raw = row.get("metadata") or "{}"
        try:
            metadata = json.loads(meta_raw) if isinstance(meta_raw, str) else dict(meta_raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"file {where}: row {qid}: field 'metadata': not valid JSON") from exc
        t, reason = lcb_tests(_row_lcb_tests(row, where, qid), metadata.get("func_name"), where, qid)
        starter = row.get("starter_code") or ""
        meta = {"platform": row.get("platform"), "contest_id": row.get("contest_id"), "contest_date": date,
                "difficulty_label": row.get("difficulty"), "title": row.get("question_title")}  # fmt: skip
        if t["format"] == "call":
            meta.update({"call_style": "class_method", "class_name": "Solution", "starter_code": starter})
        out.append(_record(f"livecodebench/{qid}", "livecodebench", _lcb_prompt(content, starter),
                           LCB_DIFFICULTY.get(str(row.get("difficulty")).lower()), t, meta=meta,
                           no_tests_reason=reason))  # fmt: skip
    return SourceResult(_unique_ids(out), inputs, {"version": version, "files": files or list(paths or [])})


def livebench_date(value: Any) -> str:
    """A LiveBench date as 'YYYY-MM-DD' ('' for none): the hub stores timestamps (older revisions:
    strings, '' meaning "not removed"); LiveBench compares them as such strings."""
    import datetime as dt

    if value is None or value == "":
        return ""
    if isinstance(value, dt.datetime | dt.date):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d")
    return str(value)[:10]


def load_livebench(
    hub_id: str = "livebench/coding", split: str = "test", revision: str | None = None,
    paths: list[str] | None = None, release: str | None = None,
) -> SourceResult:  # fmt: skip
    """LiveBench's coding questions as of LiveBench release ``release`` ('YYYY-MM-DD'; default: the
    latest ``livebench_release_date`` in the data): a question removed on or before it is kept with no
    tests and the reason, so the ``no_tests`` filter counts it (LiveBench keeps a question when its
    ``livebench_removal_date`` is empty or later than the release). ``partial_solution`` stays in
    ``meta``: for completion tasks the scored program starts with it (``maxk.data.prompts``), as
    LiveBench's grader prepends it to an answer that does not already start with it."""
    rows, inputs = read_rows(hub_id=hub_id, split=split, revision=revision, paths=paths)
    as_of = release or max((livebench_date(r.get("livebench_release_date")) for _, _, r in rows), default="")
    out = []
    for where, idx, row in rows:
        qid = str(_need(where, idx, row, "question_id", (str, int)))
        turns = _need(where, idx, row, "turns", list)
        if not turns or not isinstance(turns[0], str):
            raise DataError(f"file {where}: row {qid}: field 'turns': expected a non-empty list of strings")
        orig = row.get("original_json") or {}
        if isinstance(orig, str):
            orig = json.loads(orig) if orig.strip() else {}
        meta_raw = orig.get("metadata") or "{}"
        metadata = json.loads(meta_raw) if isinstance(meta_raw, str) else dict(meta_raw)
        t, reason = lcb_tests(_row_lcb_tests(row, where, qid), metadata.get("func_name"), where, qid)
        removed = livebench_date(row.get("livebench_removal_date"))
        if removed and removed <= as_of:
            reason = f"removed from LiveBench on {removed} (release {as_of})"
        meta = {"task": row.get("task"), "title": row.get("question_title"),
                "partial_solution": row.get("partial_solution"),
                "livebench_removal_date": removed or None}  # fmt: skip
        if t["format"] == "call":
            meta.update({"call_style": "class_method", "class_name": "Solution"})
        out.append(
            _record(f"livebench/{qid}", "livebench", turns[0], None, t, meta=meta, no_tests_reason=reason)
        )
    return SourceResult(_unique_ids(out), inputs)


# --------------------------------------------------------------------------- CodeForces
def normalise_statement(text: str) -> str:
    """Lower-case, strip LaTeX dollars and all non-alphanumerics: equal statements hash equal."""
    return re.sub(r"[^a-z0-9]+", "", text.replace("$", "").lower())


#: characters of the normalised legend that identify a problem across sources
LEGEND_CHARS = 200


def legend_key(text: str) -> str:
    """The first ``LEGEND_CHARS`` letters and digits of a statement's legend (the text before its
    Input section), LaTeX commands and markup removed: open-r1's LaTeX ``description`` and CodeContests'
    plain-text ``description`` (legend, then Input/Output/Examples inline) give the same key for the
    same problem more often than whole statements do. Best effort: a reworded legend is missed."""
    legend = re.split(r"\n\s*-*\s*Input\s*-*\s*\n", text, maxsplit=1)[0]
    legend = re.sub(r"\\[A-Za-z]+", "", legend)
    return normalise_statement(legend)[:LEGEND_CHARS]


def cf_keys(row: dict[str, Any]) -> set[tuple[str, str]]:
    """(contest id, index) of an open-r1 row under its own id and each of its ``aliases``
    (``"contest/index"``: the Div. 1 / Div. 2 mirrors of one problem)."""
    keys = {(str(row.get("contest_id")), str(row.get("index")))}
    for alias in [row.get("id"), *(row.get("aliases") or [])]:
        if isinstance(alias, str) and "/" in alias:
            contest, index = alias.split("/", 1)
            keys.add((contest, index))
    return keys


def _cf_statement(row: dict[str, Any]) -> str:
    parts = [row.get("description") or ""]
    if row.get("input_format"):
        parts.append(f"Input\n{row['input_format']}")
    if row.get("output_format"):
        parts.append(f"Output\n{row['output_format']}")
    for i, ex in enumerate(row.get("examples") or []):
        parts.append(f"Example {i + 1}\nInput\n{ex['input']}\nOutput\n{ex['output']}")
    if row.get("note"):
        parts.append(f"Note\n{row['note']}")
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def load_codeforces(
    hub_id: str = "open-r1/codeforces", split: str = "test", revision: str | None = None,
    paths: list[str] | None = None, dedupe_against: dict[str, Any] | list[dict[str, Any]] | None = None,
) -> SourceResult:  # fmt: skip
    """CodeForces problems (test split), minus those also in CodeContests (``dedupe_against``: the
    options of a ``codecontests`` source, or a list of them: give every split, train, valid and test).
    A problem is a duplicate when its contest id + index, or one of its ``aliases`` (mirror contests),
    is a CodeContests problem's ``cf_contest_id`` + ``cf_index``, or else when its legend matches one
    (``legend_key``, best effort). The counts of each are in the notes."""
    rows, inputs = read_rows(hub_id=hub_id, split=split, revision=revision, paths=paths)
    keys: set[tuple[str, str]] = set()
    legends: set[str] = set()
    notes: dict[str, Any] = {}
    sources = [dedupe_against] if isinstance(dedupe_against, dict) else list(dedupe_against or [])
    for options in sources:
        cc = load_codecontests(**options)
        inputs += cc.inputs
        for r in cc.records:
            m = r["meta"]
            if m.get("cf_contest_id") and m.get("cf_index"):
                keys.add((str(m["cf_contest_id"]), str(m["cf_index"])))
            legends.add(legend_key(r["prompt"]))
    legends.discard("")
    out = []
    dup = {"contest_index": 0, "statement": 0}
    for where, idx, row in rows:
        pid = str(_need(where, idx, row, "id"))
        desc = _need(where, idx, row, "description")
        if cf_keys(row) & keys:
            dup["contest_index"] += 1
            continue
        if legend_key(desc) in legends:
            dup["statement"] += 1
            continue
        tests = row.get("official_tests") or []
        source_tests = "official_tests"
        if not tests:
            tests, source_tests = row.get("examples") or [], "examples"
        cases = _stdio_cases(
            [t["input"] for t in tests], [t["output"] for t in tests], where, pid, source_tests
        )
        reason = None
        if row.get("interaction_format"):
            reason = "interactive problem"
        elif row.get("generated_checker"):
            reason = "needs a checker (several correct outputs)"
        elif row.get("input_mode") not in (None, "stdio"):
            reason = f"input mode {row.get('input_mode')!r}"
        elif not cases:
            reason = "no tests"
        out.append(_record(
            f"codeforces/{pid}", "codeforces", _cf_statement(row), None, {"format": "stdio", "cases": cases},
            time_limit=float(row["time_limit"]) if row.get("time_limit") else None,
            meta={"contest_id": row.get("contest_id"), "index": row.get("index"), "rating": row.get("rating"),
                  "tests_from": source_tests, "official_tests_complete": row.get("official_tests_complete")},
            no_tests_reason=reason,
        ))  # fmt: skip
    notes["removed_as_codecontests_duplicates"] = dup
    return SourceResult(_unique_ids(out), inputs, notes)


# --------------------------------------------------------------------------- MBPP
def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(node)


def mbpp_assert_to_io(assert_src: str) -> tuple[str, list[Any], Any] | None:
    """``assert f(a, b) == expected`` with literal arguments -> (f, [a, b], expected); None otherwise."""
    try:
        stmt = ast.parse(assert_src.strip()).body[0]
    except (SyntaxError, IndexError):
        return None
    if not isinstance(stmt, ast.Assert) or not isinstance(stmt.test, ast.Compare):
        return None
    cmp = stmt.test
    if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
        return None
    call, exp = cmp.left, cmp.comparators[0]
    if not isinstance(call, ast.Call) and isinstance(exp, ast.Call):
        call, exp = exp, call
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        return None
    try:
        args = [_literal(a) for a in call.args]
        expected = _literal(exp)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return call.func.id, args, expected


MBPP_IO_MAIN = (
    "\n\nimport ast as _ast, sys as _sys\n"
    "_args = [_ast.literal_eval(_l) for _l in _sys.stdin.read().splitlines() if _l.strip()]\n"
    "print(repr({fn}(*_args)))\n"
)
MBPP_IO_NOTE = (
    "Input: the arguments of `{fn}`, one Python literal per line. "
    "Output: print the value `{fn}` returns, as a Python literal (print(repr(result)))."
)


def load_mbpp(
    hub_id: str = "google-research-datasets/mbpp", name: str | None = "full", split: str = "test",
    revision: str | None = None, paths: list[str] | None = None, as_stdio: bool = True,
) -> SourceResult:  # fmt: skip
    """MBPP. ``as_stdio`` (the paper's choice) converts each ``assert f(args) == value`` into a stdin
    (one literal per argument line) -> stdout (``repr(value)``) case; asserts that are not of that
    literal form are dropped (counted in meta). ``as_stdio=False`` keeps one ``call`` case per assert."""
    rows, inputs = read_rows(hub_id=hub_id, split=split, revision=revision, paths=paths, name=name)
    out = []
    for where, idx, row in rows:
        tid = str(_need(where, idx, row, "task_id", (int, str)))
        text = _need(where, idx, row, "text")
        code = row.get("code")
        asserts = _need(where, idx, row, "test_list", list)
        setup = row.get("test_setup_code") or ""
        parsed = [mbpp_assert_to_io(a) for a in asserts]
        fns = {p[0] for p in parsed if p}
        fn = sorted(fns)[0] if len(fns) == 1 else None
        meta = {"task_id": row.get("task_id"), "num_asserts": len(asserts)}
        if not as_stdio:
            entry = fn or (mbpp_call_name(asserts[0]) if asserts else None)
            tests = {"format": "call", "entry_point": entry or "f", "setup": setup, "cases": list(asserts)}
            prompt = f"{text}\nYour code should pass this test:\n{asserts[0]}" if asserts else text
            out.append(_record(f"mbpp/{tid}", "mbpp", prompt, None, tests, reference=code, meta=meta,
                               no_tests_reason=None if asserts and entry else "no usable asserts"),
                       )  # fmt: skip
            continue
        cases = []
        if fn and not setup.strip():
            for p in parsed:
                if p:
                    cases.append({"input": "".join(f"{a!r}\n" for a in p[1]), "output": f"{p[2]!r}\n"})
        meta["dropped_asserts"] = len(asserts) - len(cases)
        reason = (
            None
            if cases
            else "asserts not convertible to input/output (non-literal, setup code or several functions)"
        )
        prompt = text
        if fn and cases:
            ex = cases[0]
            prompt = (f"{text}\n\n{MBPP_IO_NOTE.format(fn=fn)}\n"
                      f"Example input:\n{ex['input']}Example output:\n{ex['output']}")  # fmt: skip
        reference = None
        if code and fn and cases:
            reference = code.rstrip() + MBPP_IO_MAIN.format(fn=fn)
        meta["function_name"] = fn
        out.append(_record(f"mbpp/{tid}", "mbpp", prompt, None, {"format": "stdio", "cases": cases},
                           reference=reference, meta=meta, no_tests_reason=reason))  # fmt: skip
    return SourceResult(_unique_ids(out), inputs, {"as_stdio": as_stdio})


def mbpp_call_name(assert_src: str) -> str | None:
    m = re.search(r"assert\s+(?:\w+\()?\s*([A-Za-z_]\w*)\s*\(", assert_src)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- CURE (Gen-Verse/*)
def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def load_cure(
    hub_id: str | None = None, split: str = "test", revision: str | None = None,
    paths: list[str] | None = None, filename: str | None = None,
    name: str = "cure", include_examples: bool = False,
) -> SourceResult:  # fmt: skip
    """CURE's preprocessed stdin/stdout sets: ``question``, ``test_input``/``test_output`` (the reward
    tests), ``example_input``/``example_output`` (shown in the question; added only with
    ``include_examples``), ``test_time_limit`` (seconds). ``name`` prefixes the ids (``codecontests/17``).
    ``filename`` reads one JSON file of the repository (CURE's ``{split}/{Name}.json``) at ``revision``.

    Rows in the function-call format that later uploads under some of the same ids hold
    (``test_method: function``, ``test_list`` of asserts) are refused, naming the field."""
    rows, inputs = read_rows(hub_id=hub_id, split=split, revision=revision, paths=paths, filename=filename)
    out = []
    for where, idx, row in rows:
        if row.get("test_method", "stdio") != "stdio" or ("test_list" in row and "test_input" not in row):
            raise DataError(
                f"file {where}: row {idx}: field 'test_method' is {row.get('test_method')!r} with a "
                "'test_list' of asserts: the function-call format, not CURE's stdin/stdout rows "
                "(test_input/test_output); use the *-ReasonFlux id or a revision that holds the stdio set"
            )
        q = _need(where, idx, row, "question")
        tin = _need(where, idx, row, "test_input", list)
        tout = _need(where, idx, row, "test_output", list)
        cases = _stdio_cases(tin, tout, where, idx, "test_input/test_output")
        if include_examples:
            ex = _stdio_cases(list(row.get("example_input") or []), list(row.get("example_output") or []),
                              where, idx, "example_input/example_output")  # fmt: skip
            cases = ex + [c for c in cases if c not in ex]
        tl = row.get("test_time_limit")
        diff = row.get("difficulty")
        rid = row.get("task_id", row.get("id", idx))
        out.append(_record(
            f"{name}/{rid}", name, q, _int_or_none(diff), {"format": "stdio", "cases": cases},
            time_limit=float(tl) if _int_or_none(tl) is not None and tl > 0 else None,
            meta={"row": idx, "num_examples": len(row.get("example_input") or [])},
            no_tests_reason=None if cases else "no tests",
        ))  # fmt: skip
    return SourceResult(_unique_ids(out), inputs, {"hub_id": hub_id, "include_examples": include_examples})
