"""HumanEval: all 164 problems, per-assert cases, canonical solutions pass (trusted code)."""

import ast

import pytest

from maxk.data import load
from maxk.data.humaneval import split_check
from maxk.data.schema import SchemaError, validate_problem


@pytest.fixture(scope="module")
def problems():
    return load("humaneval")


def test_all_164_with_cases(problems):
    assert len(problems) == 164
    assert len({p["id"] for p in problems}) == 164
    assert problems[0]["id"] == "humaneval/0"
    for p in problems:
        validate_problem(p)
        assert p["tests"]["format"] == "call"
        assert p["tests"]["cases"], p["id"]
        for case in p["tests"]["cases"]:
            ast.parse(case)
            assert "candidate" not in case
            assert p["tests"]["entry_point"] in case
    # 1128 top-level asserts mentioning the candidate + 5 loops of asserts; 48 `assert True` dropped
    assert sum(len(p["tests"]["cases"]) for p in problems) == 1133
    assert sum(p["meta"]["dropped_trivial_asserts"] for p in problems) == 48


def test_loops_stay_one_case_and_setup_shared(problems):
    p32 = problems[32]
    assert p32["tests"]["entry_point"] == "find_zero"
    assert len(p32["tests"]["cases"]) == 1 and p32["tests"]["cases"][0].startswith("for _ in range(100)")
    assert "def poly(" in p32["tests"]["setup"] and "rng = random.Random(42)" in p32["tests"]["setup"]
    p151 = problems[151]
    assert "lst = list(range(-99, 100, 2))" in p151["tests"]["setup"]
    assert len(p151["tests"]["cases"]) == 7
    p53 = problems[53]
    assert len(p53["tests"]["cases"]) == 6  # five asserts + one loop


def test_canonical_solutions_pass_every_case(problems):
    # Trusted dataset code (canonical solutions and tests), executed in-process on purpose.
    for p in problems:
        for case in p["tests"]["cases"]:
            g: dict = {}
            exec(p["reference"], g)
            exec(p["tests"]["setup"], g)
            exec(p["reference"], g)
            exec(case, g)


def test_mutated_solution_fails_some_cases(problems):
    p = problems[53]  # add(x, y)
    failed = 0
    for case in p["tests"]["cases"]:
        g: dict = {}
        exec(p["tests"]["setup"] + "def add(x, y):\n    return x - y\n", g)
        try:
            exec(case, g)
        except AssertionError:
            failed += 1
    assert 0 < failed <= len(p["tests"]["cases"])


def test_split_check_errors_name_row_and_field():
    with pytest.raises(SchemaError, match=r"row 'X/1'.*field 'test'"):
        split_check("def nope(c):\n    assert c(1)\n", "f", where="X/1")
    with pytest.raises(SchemaError, match="asserts nothing"):
        split_check("def check(candidate):\n    candidate(1)\n", "f", where="X/2")
