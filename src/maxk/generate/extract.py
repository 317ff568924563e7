"""Programs out: the program a completion holds, as the sandbox will run it.

``extract_program(completion, problem)`` turns a raw completion into the program the sandbox runs:
the best fenced code block (```python ...```; an unterminated fence from a truncated generation is
taken to the end), else the code part of a bare completion (prose lines before and after are cut until
it parses). For ``call`` problems it also repairs function-only completions: a body continuing a code
stub (HumanEval) is appended to the stub, and a function that uses names the stub imports or defines
(``List``, helper functions) gets them prepended. A problem with a ``meta.partial_solution`` (LiveBench's
completion tasks) has it prepended to a program that does not already start with it, as LiveBench's
grader does. It never executes anything.

Shared by generation (``maxk generate``), the training reward and the base model's evaluation, so the
same completion always becomes the same program.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_CODE_START = re.compile(
    r"^(def |class |import |from |async def |@|if |for |while |with |try:|print\(|[A-Za-z_][\w, ]*\s*=[^=]|"
    r"[A-Za-z_][\w.]*\(|#)"
)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def _pick_block(blocks: list[tuple[str, str]], problem: dict[str, Any]) -> str:
    tests = problem.get("tests", {})
    entry = tests.get("entry_point") if tests.get("format") == "call" else None
    non_python = {"text", "txt", "plaintext", "output", "input", "console", "bash", "sh", "shell", "json"}
    cands = [(lang, code) for lang, code in blocks if lang not in non_python]
    if not cands:
        return blocks[0][1]
    if entry:
        defining = [code for _, code in cands if _defines(code, entry)]
        if defining:
            parsing = [c for c in defining if _parses(c)]
            return max(parsing or defining, key=len)
    tagged = [code for lang, code in cands if lang in ("python", "py", "python3")]
    for code in tagged or [c for _, c in cands]:
        if _parses(code) and (entry or re.search(r"\b(input|print|stdin|stdout)\b", code)):
            return code
    return (tagged or [c for _, c in cands])[0]


def _bare_code(text: str) -> str:
    """The code part of a completion without fences: cut prose before and after until it parses."""
    lines = text.splitlines()
    start = 0
    for i, line in enumerate(lines):
        if line.startswith((" ", "\t")) or _CODE_START.match(line):
            start = i
            break
    else:
        return text.strip("\n")
    body = lines[start:]
    for end in range(len(body), 0, -1):
        chunk = "\n".join(body[:end])
        if chunk.strip() and _parses(chunk):
            return chunk
    return "\n".join(body)


def _stub_support(stub: str, entry: str) -> list[tuple[str, set[str], str]]:
    """(kind, names defined, source) for the stub's imports and helper definitions (not the entry)."""
    try:
        mod = (
            ast.parse(stub + "\n    pass\n")
            if stub.rstrip().endswith(('"""', "'''", ":"))
            else ast.parse(stub)
        )
    except SyntaxError:
        return []
    out = []
    for stmt in mod.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            names = {(a.asname or a.name).split(".")[0] for a in stmt.names}
            out.append(("import", names, ast.get_source_segment(stub, stmt) or ast.unparse(stmt)))
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name != entry:
            out.append(("def", {stmt.name}, ast.get_source_segment(stub, stmt) or ast.unparse(stmt)))
    return out


def _repair_call(code: str, problem: dict[str, Any]) -> str:
    tests = problem["tests"]
    entry = tests["entry_point"]
    meta = problem.get("meta") or {}
    if meta.get("call_style") == "class_method":
        # LiveCodeBench/LeetCode: the program defines `class Solution` with method `entry`; the cases
        # call `entry(...)`, so add a module-level function forwarding to a fresh instance.
        cls = meta.get("class_name", "Solution")
        if re.search(rf"^class\s+{re.escape(cls)}\b", code, re.M) and not re.search(
            rf"^(async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M
        ):
            return f"{code}\n\ndef {entry}(*args, **kwargs):\n    return {cls}().{entry}(*args, **kwargs)\n"
        return code
    stub = meta.get("stub") or ""
    if not stub:
        return code
    if not _defines(code, entry):
        first = next((ln for ln in code.splitlines() if ln.strip()), "")
        if first.startswith((" ", "\t")) or not _parses(code):
            head = stub if stub.endswith("\n") else stub + "\n"
            lines = code.splitlines()
            for end in range(len(lines), 0, -1):  # cut trailing prose after the body
                candidate = head + "\n".join(lines[:end]) + "\n"
                if _parses(candidate):
                    return candidate
            return head + code
        return code
    used = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)} if _parses(code) else set()
    used |= (
        {n.attr for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Attribute)}
        if _parses(code)
        else set()
    )
    prefix = []
    for kind, names, src in _stub_support(stub, entry):
        if kind == "import":
            if src.strip() not in code:
                prefix.append(src)
        elif not any(_defines(code, n) or re.search(rf"^\s*class\s+{n}\b", code, re.M) for n in names) and (
            names & used or kind == "def"
        ):
            prefix.append(src)
    if not prefix:
        return code
    return "\n".join(prefix) + "\n\n" + code


def extract_program(completion: str, problem: dict[str, Any]) -> str:
    """The program to score for ``completion`` (see module docstring). Pure text processing."""
    text = _THINK.sub("", completion or "")
    if "</think>" in text:  # opening tag was in the prompt
        text = text.split("</think>", 1)[1]
    text = text.replace("\r\n", "\n")
    blocks = _blocks(text)
    code = _pick_block(blocks, problem) if blocks else _bare_code(text)
    code = code.strip("\n") + "\n" if code.strip() else ""
    if problem.get("tests", {}).get("format") == "call" and code:
        code = _repair_call(code, problem)
    partial = (problem.get("meta") or {}).get("partial_solution")
    if partial and not code.startswith(partial):  # LiveBench's completion tasks, as its grader does
        code = partial + "\n" + code
    return code
