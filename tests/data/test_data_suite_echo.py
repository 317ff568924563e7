"""The suite's partial credit is not gameable by echoing the statement's example (scored in the sandbox).

Echo programs are model-like output: they only ever run inside ``maxk.sandbox``. Re-measure on the
embedded default's pool (``config/config.yaml``, ``data.pools.suite``), printing echo and constant
YES/NO credit for a number of problems of each format::

    python tests/data/test_data_suite_echo.py --n 400
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from maxk.data.suite import generate_suite
from maxk.sandbox import Scorer

#: at most this mean credit for the echo program, per format (issue 25, item 4)
ECHO_MAX = 0.1
#: the embedded default's suite pool, as the data stage generates it
POOL = yaml.safe_load((Path(__file__).parents[2] / "config" / "config.yaml").read_text())["data"]["pools"][
    "suite"
]["options"]
#: problems of each format the tests score (the first of the pool)
SAMPLE = 200


def pool_problems(n: int) -> dict[str, list[dict[str, Any]]]:
    """The first ``n`` problems of each format of the embedded pool."""
    opts = dict(POOL)
    pool = generate_suite(opts.pop("family"), opts.pop("n"), opts.pop("seed"), **opts)
    return {fmt: [p for p in pool if p["tests"]["format"] == fmt][:n] for fmt in ("stdio", "call")}


def statement_example(problem: dict[str, Any]) -> tuple[str, str]:
    """(input, output) for stdio, (call expression, result expression) for call, from the prompt."""
    if problem["tests"]["format"] == "stdio":
        m = re.search(r"\nExample input:\n(.*)Example output:\n(.*)\Z", problem["prompt"], re.S)
    else:
        m = re.search(r"\nExample: (.*) == (.*)\Z", problem["prompt"], re.S)
    assert m, problem["prompt"]
    return m.group(1), m.group(2)


def is_verdict(problem: dict[str, Any]) -> bool:
    """A YES/NO (True/False) problem, read off the statement (as a model would)."""
    return "Print YES if" in problem["prompt"] or "Return True if" in problem["prompt"]


def is_multi(problem: dict[str, Any]) -> bool:
    return problem["prompt"].startswith(("The first line has t.", "Read t, then t"))


def echo_program(problem: dict[str, Any]) -> str:
    """Print the example's output (stdio) / return the example's result whatever the input (call)."""
    output = statement_example(problem)[1]
    if problem["tests"]["format"] == "stdio":
        return f"import sys\nsys.stdout.write({output!r})\n"
    return f"def {problem['tests']['entry_point']}(*a):\n    return {output}\n"


def constant_program(problem: dict[str, Any], answer: bool) -> str:
    """Answer YES (True) or NO (False) whatever the input, once per value of a multi-case input."""
    if problem["tests"]["format"] == "call":
        return f"def {problem['tests']['entry_point']}(*a):\n    return {answer}\n"
    word = "YES" if answer else "NO"
    if is_multi(problem):
        return f"t = int(input())\nfor _ in range(t):\n    print({word!r})\n"
    return f"print({word!r})\n"


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def credits(scorer: Scorer, problems: list[dict[str, Any]], program: Any) -> list[float]:
    return [s.reward for s in scorer.score([(p, program(p)) for p in problems])]


@pytest.fixture(scope="module")
def scorer():
    with Scorer(workers=2) as s:
        yield s


@pytest.fixture(scope="module")
def problems() -> dict[str, list[dict[str, Any]]]:
    """The first problems of each format of the embedded pool: the echo's credit is a mean over the
    pool's mix of problems (verdict problems, where a constant earns most, are about 16 %)."""
    return pool_problems(SAMPLE)


@pytest.mark.parametrize("fmt", ["stdio", "call"])
def test_echoing_the_example_earns_little(scorer, problems, fmt):
    probs = problems[fmt]
    assert sum(map(is_verdict, probs)) >= 4  # the sample has verdict problems, where the echo earns most
    echo = credits(scorer, probs, echo_program)
    assert mean(echo) <= ECHO_MAX, (fmt, mean(echo))
    # without a verdict the example's output is (next to) never a test's
    assert mean([c for p, c in zip(probs, echo, strict=True) if not is_verdict(p)]) <= 0.02
    # the references still pass everything: the example is a correct one, the tests are right
    assert credits(scorer, probs, lambda p: p["reference"]) == [1.0] * len(probs)


def test_constant_verdicts(scorer, problems):
    """Balanced verdicts: a constant earns exactly half a single-input stdio problem, and nothing on a
    call problem (each test pairs a True and a False input)."""
    single = [p for p in problems["stdio"] if is_verdict(p) and not is_multi(p)]
    calls = [p for p in problems["call"] if is_verdict(p)]
    assert len(single) >= 4 and len(calls) >= 4
    for answer in (True, False):
        assert credits(scorer, single, lambda p, a=answer: constant_program(p, a)) == [0.5] * len(single)
        assert credits(scorer, calls, lambda p, a=answer: constant_program(p, a)) == [0.0] * len(calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400, help="problems of each format (first of the pool)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with Scorer(workers=args.workers) as scorer:
        for fmt, probs in pool_problems(args.n).items():
            verdict = [p for p in probs if is_verdict(p)]
            echo = credits(scorer, probs, echo_program)
            yes = credits(scorer, verdict, lambda p: constant_program(p, True))
            no = credits(scorer, verdict, lambda p: constant_program(p, False))
            print(
                f"{fmt:5s} n={len(probs)} echo {mean(echo):.4f}"
                f" | verdict problems {len(verdict) / len(probs):.3f}:"
                f" constant YES {mean(yes):.3f} / NO {mean(no):.3f} on them,"
                f" {sum(yes) / len(probs):.4f} / {sum(no) / len(probs):.4f} over all"
            )


if __name__ == "__main__":
    main()
