"""The embedded task suite: a deterministic, seeded generator of small programming problems.

It stands in for CodeContests (family ``stdio``: read stdin, print) and MBPP (family ``call``: write a
function) on a CPU, for a tiny model trained from scratch in minutes. Design choices:

- **Short programs from a small vocabulary of idioms**: read an integer / a pair / a list, apply 1-4
  composed operations (``x = x + 3``, ``a = [v for v in a if v % 2 == 0]``, ``x = sum(a)``, ...), maybe
  branch on a condition, print (or return). Every reference is written in one consistent style, so a
  few-M-parameter model can learn the mapping statement -> code.
- **Difficulty 1-5** = the number of composed units: each operation, the list reduction or the pair
  combination, a branch (plus the operations inside it), a YES/NO verdict, a loop over test cases.
- **Varied statements**: several phrasings per operation, intro, output sentence and layout (prose,
  "First ..., then ...", numbered steps), so the model cannot rely on one template.
- **Partial credit**: ``num_tests`` scored tests per problem, chosen to cover every path (each branch,
  both verdicts, empty list, zero, negatives, ties) first and then round-robin, so a program right on
  one branch only earns a fraction. A multi-test-case stdio test holds 1-3 values.
- **Not gameable by echoing the example**: the example printed in the statement is never a scored
  test. It is one more input, whose output is the rarest among the candidates; the tests prefer
  outputs not used yet and repeat the example's output only when a path leaves no other choice, so a
  program printing (returning) the example's output earns next to nothing. A YES/NO verdict problem
  has as many YES as NO tests, so a constant answer (the echoed example included) earns half of a
  stdio problem (less with multi-case tests); a call verdict test asserts one True and one False
  input together, so a constant earns nothing. Degenerate problems (fewer than 3 distinct outputs
  without a verdict, verdicts that cannot be balanced, a branch that never matters, too few inputs)
  are rejected.
- **Deterministic**: ``random.Random`` seeded from a string (stable across processes and
  ``PYTHONHASHSEED``); no set iteration.
- **One task, one problem**: a problem whose computation behaves like one already generated, in either
  family, is rejected (``behaviour``: the spec's results on fixed probe inputs of its input kind, so the
  same computation read from stdin or passed as arguments, looped over test cases or not, or with a step
  that changes nothing, such as a reverse before a sum, is one task), so a split of one pool never puts
  the same task in train and test; the audit (``maxk.analysis.contamination``) matches problems by it too.
  Until suite-v3 only identical reference programs were rejected, and 17-25 % of the evaluated and
  held-out problems computed what an SFT problem computes (``docs/experiment-log.md``).

Expected outputs are computed by a small interpreter of the problem's spec (``_run``), independently
of the rendered reference code; the tests check that the reference reproduces them.
"""

from __future__ import annotations

import hashlib
import pickle
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Revision of the generator's output (the dataset manifests record it): bump on any change that
#: alters the problems generated for the same arguments.
#: suite-v1: the example was the first test. suite-v2: the example is not scored; rare example
#: outputs, tests prefer unused outputs; balanced verdicts, call verdict tests in (True, False)
#: pairs; multi-case stdio problems have num_tests cases.
#: suite-v3: problems are distinct by behaviour (``behaviour``), across both families, not by reference text.
#: suite-v4: the behaviour's probe inputs are those the tests draw from (suite-v3's missed some and added
#: others outside them).
SUITE_REVISION = "suite-v4"

DEFAULT_LEVEL_WEIGHTS = {1: 0.05, 2: 0.2, 3: 0.3, 4: 0.25, 5: 0.2}
CALL_NAMES = ("solve", "compute", "transform", "process", "calc", "apply_steps", "result_of", "evaluate")


# --------------------------------------------------------------------------- vocabulary
@dataclass(frozen=True)
class Op:
    """A scalar operation on ``x``: code template, phrasings, semantics, constant range."""

    name: str
    code: str
    phrases: tuple[str, ...]
    fn: Callable[[int, int], int]
    kmin: int = 0
    kmax: int = 0


SCALAR_OPS: tuple[Op, ...] = (
    Op("add", "x = x + {k}", ("add {k} to x", "increase x by {k}"), lambda x, k: x + k, 1, 15),
    Op("sub", "x = x - {k}", ("subtract {k} from x", "decrease x by {k}"), lambda x, k: x - k, 1, 15),
    Op("mul", "x = x * {k}", ("multiply x by {k}", "replace x with x times {k}"), lambda x, k: x * k, 2, 9),
    Op("div", "x = x // {k}", ("divide x by {k}, rounding down", "integer-divide x by {k} (round down)"),
       lambda x, k: x // k, 2, 9),
    Op("mod", "x = x % {k}", ("replace x with x modulo {k}", "take the remainder of x divided by {k}"),
       lambda x, k: x % k, 2, 9),
    Op("square", "x = x * x", ("square x", "replace x with its square"), lambda x, k: x * x),
    Op("abs", "x = abs(x)", ("take the absolute value of x", "replace x with its absolute value"),
       lambda x, k: abs(x)),
    Op("neg", "x = -x", ("negate x", "change the sign of x"), lambda x, k: -x),
    Op("max", "x = max(x, {k})", ("replace x with the larger of x and {k}",), lambda x, k: max(x, k),
       -5, 10),
    Op("min", "x = min(x, {k})", ("replace x with the smaller of x and {k}",), lambda x, k: min(x, k),
       -5, 10),
)  # fmt: skip


@dataclass(frozen=True)
class Cond:
    name: str
    code: str  # with {v} and {k}
    phrase: str
    fn: Callable[[int, int], bool]
    kmin: int = 0
    kmax: int = 0


CONDS: tuple[Cond, ...] = (
    Cond("even", "{v} % 2 == 0", "{v} is even", lambda v, k: v % 2 == 0),
    Cond("odd", "{v} % 2 == 1", "{v} is odd", lambda v, k: v % 2 == 1),
    Cond("gt", "{v} > {k}", "{v} is greater than {k}", lambda v, k: v > k, -3, 10),
    Cond("lt", "{v} < {k}", "{v} is less than {k}", lambda v, k: v < k, -3, 10),
    Cond("divisible", "{v} % {k} == 0", "{v} is divisible by {k}", lambda v, k: v % k == 0, 3, 7),
)

PAIR_COMBINES: dict[str, tuple[str, tuple[str, ...], Callable[[int, int], int]]] = {
    "sum": ("x = a + b", ("the sum of a and b", "a plus b"), lambda a, b: a + b),
    "diff": ("x = a - b", ("a minus b", "the difference a - b"), lambda a, b: a - b),
    "prod": ("x = a * b", ("the product of a and b", "a times b"), lambda a, b: a * b),
    "max": ("x = max(a, b)", ("the larger of a and b", "the maximum of a and b"), max),
    "min": ("x = min(a, b)", ("the smaller of a and b", "the minimum of a and b"), min),
    "absdiff": ("x = abs(a - b)", ("the absolute difference of a and b",), lambda a, b: abs(a - b)),
}

REDUCES: dict[str, tuple[str, tuple[str, ...], Callable[[list[int]], int], bool]] = {
    # name: (code, phrases, fn, needs a non-empty list)
    "sum": ("x = sum(a)", ("the sum of the elements of a", "the sum of a"), sum, False),
    "len": ("x = len(a)", ("the number of elements in a", "the length of a"), len, False),
    "max": ("x = max(a)", ("the largest element of a", "the maximum of a"), max, True),
    "min": ("x = min(a)", ("the smallest element of a", "the minimum of a"), min, True),
}

LIST_MAPS: dict[str, tuple[str, tuple[str, ...], Callable[[int, int], int], int, int]] = {
    "mul": ("a = [v * {k} for v in a]", ("multiply every element of a by {k}",), lambda v, k: v * k, 2, 5),
    "add": ("a = [v + {k} for v in a]", ("add {k} to every element of a",), lambda v, k: v + k, 1, 9),
    "abs": ("a = [abs(v) for v in a]", ("replace every element of a with its absolute value",),
            lambda v, k: abs(v), 0, 0),
    "square": ("a = [v * v for v in a]", ("square every element of a",), lambda v, k: v * v, 0, 0),
}  # fmt: skip


# --------------------------------------------------------------------------- spec
@dataclass
class Spec:
    """Abstract problem: rendered into statement, reference and tests."""

    family: str
    shape: str  # scalar | pair | list_reduce | list_out
    multi: bool = False
    combine: str | None = None
    reduce: str | None = None
    list_ops: list[tuple[str, str, int]] = field(default_factory=list)  # (kind map|filter|sort|rev, name, k)
    ops: list[tuple[str, int]] = field(default_factory=list)
    branch: tuple[str, int, list[tuple[str, int]], list[tuple[str, int]]] | None = None
    verdict: tuple[str, int] | None = None  # final YES/NO (stdio) or True/False (call) condition

    def level(self) -> int:
        n = len(self.ops) + len(self.list_ops)
        n += {"scalar": 0, "pair": 1, "list_reduce": 1, "list_out": 0}[self.shape]
        if self.branch:
            n += 1 + len(self.branch[2]) + len(self.branch[3])
        n += bool(self.verdict) + bool(self.multi)
        return n


_OPS = {op.name: op for op in SCALAR_OPS}
_CONDS = {c.name: c for c in CONDS}


def _k(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randint(lo, hi) if hi > lo else lo


def _rand_ops(rng: random.Random, n: int, prev: str | None = None) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for _ in range(n):
        choices = [op for op in SCALAR_OPS if op.name != prev]
        op = rng.choice(choices)
        out.append((op.name, _k(rng, op.kmin, op.kmax)))
        prev = op.name
    return out


def _rand_cond(rng: random.Random) -> tuple[str, int]:
    c = rng.choice(CONDS)
    return c.name, _k(rng, c.kmin, c.kmax)


def _sample_spec(rng: random.Random, family: str, level: int) -> Spec | None:
    """A random spec of exactly ``level`` units, or None (caller retries)."""
    shapes = ["scalar", "pair", "list_reduce", "list_out"]
    shape = rng.choices(shapes, weights=[4, 2, 3, 2])[0]
    spec = Spec(family=family, shape=shape)
    budget = level - {"scalar": 0, "pair": 1, "list_reduce": 1, "list_out": 0}[shape]
    if shape == "pair":
        spec.combine = rng.choice(sorted(PAIR_COMBINES))
    if shape in ("list_reduce", "list_out"):
        n_list = rng.randint(1 if shape == "list_out" else 0, min(2, max(budget, 0)))
        for _ in range(n_list):
            kind = rng.choices(["map", "filter", "sort", "rev"], weights=[3, 4, 1, 1])[0]
            if kind == "map":
                name = rng.choice(sorted(LIST_MAPS))
                _, _, _, lo, hi = LIST_MAPS[name]
                spec.list_ops.append(("map", name, _k(rng, lo, hi)))
            elif kind == "filter":
                name, k = _rand_cond(rng)
                spec.list_ops.append(("filter", name, k))
            else:
                spec.list_ops.append((kind, kind, 0))
        budget -= n_list
        if shape == "list_reduce":
            names = sorted(REDUCES)
            if any(kind == "filter" for kind, _, _ in spec.list_ops):
                names = [r for r in names if not REDUCES[r][3]]
            spec.reduce = rng.choice(names)
        if shape == "list_out":
            if budget != 0:
                return None
            return spec
    if family == "stdio" and shape == "scalar" and level >= 3 and rng.random() < 0.25:
        spec.multi = True
        budget -= 1
    if level >= 2 and rng.random() < 0.25:
        spec.verdict = _rand_cond(rng)
        budget -= 1
    if level >= 3 and rng.random() < 0.5 and budget >= 2:
        budget -= 1
        inner = rng.randint(1, min(budget, 3))
        n_then = rng.randint(1, inner)
        cname, k = _rand_cond(rng)
        spec.ops = _rand_ops(rng, budget - inner)
        spec.branch = (cname, k, _rand_ops(rng, n_then), _rand_ops(rng, inner - n_then))
        return spec
    if budget < 0 or (budget == 0 and shape == "scalar"):
        return None
    spec.ops = _rand_ops(rng, budget)
    return spec


# --------------------------------------------------------------------------- semantics
def _apply_ops(x: int, ops: list[tuple[str, int]]) -> int:
    for name, k in ops:
        x = _OPS[name].fn(x, k)
    return x


def _cond(name: str, k: int, v: int) -> bool:
    return _CONDS[name].fn(v, k)


def _run(spec: Spec, arg: Any, force: bool | None = None) -> tuple[Any, tuple]:
    """Evaluate the spec on one input; return (result, path signature for test selection).

    ``force`` overrides the branch condition (used to check that each branch matters).
    """
    path: list[Any] = []
    if spec.shape == "scalar":
        x = arg
    elif spec.shape == "pair":
        x = PAIR_COMBINES[spec.combine][2](*arg)
        path.append((arg[0] > arg[1]) - (arg[0] < arg[1]))
    else:
        a = list(arg)
        path.append(len(a) == 0)
        for kind, name, k in spec.list_ops:
            if kind == "map":
                a = [LIST_MAPS[name][2](v, k) for v in a]
            elif kind == "filter":
                before = len(a)
                a = [v for v in a if _cond(name, k, v)]
                path.append((len(a) == 0, len(a) == before))
            elif kind == "sort":
                a = sorted(a)
            else:
                a = a[::-1]
        if spec.shape == "list_out":
            return a, tuple(path)
        if REDUCES[spec.reduce][3] and not a:
            raise ValueError("empty list for max/min")
        x = REDUCES[spec.reduce][2](a)
    x = _apply_ops(x, spec.ops)
    if spec.branch:
        cname, k, then_ops, else_ops = spec.branch
        taken = _cond(cname, k, x)
        path.append(taken)
        taken = taken if force is None else force
        x = _apply_ops(x, then_ops if taken else else_ops)
    if spec.verdict:
        v = _cond(spec.verdict[0], spec.verdict[1], x)
        path.append(v)
        return v, tuple(path)
    return x, tuple(path)


# --------------------------------------------------------------------------- rendering
def _indent(lines: list[str], n: int) -> list[str]:
    return [" " * n + line for line in lines]


def _ops_code(ops: list[tuple[str, int]]) -> list[str]:
    return [_OPS[name].code.format(k=k) for name, k in ops]


def _cond_code(name: str, k: int, v: str = "x") -> str:
    return _CONDS[name].code.format(v=v, k=k)


def _body_code(spec: Spec) -> list[str]:
    """Code after the input has been read into x / a, b / a (before output)."""
    lines: list[str] = []
    if spec.shape == "pair":
        lines.append(PAIR_COMBINES[spec.combine][0])
    if spec.shape in ("list_reduce", "list_out"):
        for kind, name, k in spec.list_ops:
            if kind == "map":
                lines.append(LIST_MAPS[name][0].format(k=k))
            elif kind == "filter":
                lines.append(f"a = [v for v in a if {_cond_code(name, k, 'v')}]")
            elif kind == "sort":
                lines.append("a = sorted(a)")
            else:
                lines.append("a = a[::-1]")
        if spec.shape == "list_reduce":
            lines.append(REDUCES[spec.reduce][0])
    lines += _ops_code(spec.ops)
    if spec.branch:
        cname, k, then_ops, else_ops = spec.branch
        lines.append(f"if {_cond_code(cname, k)}:")
        lines += _indent(_ops_code(then_ops), 4)
        if else_ops:
            lines.append("else:")
            lines += _indent(_ops_code(else_ops), 4)
    return lines


def render_reference(spec: Spec, entry_point: str = "solve") -> str:
    body = _body_code(spec)
    if spec.family == "call":
        params = {"scalar": "x", "pair": "a, b", "list_reduce": "a", "list_out": "a"}[spec.shape]
        if spec.shape == "list_out":
            ret = "return a"
        elif spec.verdict:
            ret = f"return {_cond_code(*spec.verdict)}"
        else:
            ret = "return x"
        return "\n".join([f"def {entry_point}({params}):", *_indent([*body, ret], 4)]) + "\n"
    read = {
        "scalar": ["x = int(input())"],
        "pair": ["a, b = map(int, input().split())"],
        "list_reduce": ["n = int(input())", "a = list(map(int, input().split()))"],
        "list_out": ["n = int(input())", "a = list(map(int, input().split()))"],
    }[spec.shape]
    if spec.shape == "list_out":
        out = "print(*a)"
    elif spec.verdict:
        out = f'print("YES" if {_cond_code(*spec.verdict)} else "NO")'
    else:
        out = "print(x)"
    lines = [*read, *body, out]
    if spec.multi:
        lines = ["t = int(input())", "for _ in range(t):", *_indent(lines, 4)]
    return "\n".join(lines) + "\n"


def _phrase(rng: random.Random, phrases: tuple[str, ...], **kw: Any) -> str:
    return rng.choice(phrases).format(**kw)


def _op_phrase(rng: random.Random, name: str, k: int) -> str:
    return _phrase(rng, _OPS[name].phrases, k=k)


def _cond_phrase(name: str, k: int, v: str = "x") -> str:
    return _CONDS[name].phrase.format(v=v, k=k)


def _join_ops(rng: random.Random, ops: list[tuple[str, int]]) -> str:
    parts = [_op_phrase(rng, n, k) for n, k in ops]
    if len(parts) == 1:
        return parts[0]
    return ", then ".join(parts) if rng.random() < 0.5 else ", ".join(parts[:-1]) + " and then " + parts[-1]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _steps(rng: random.Random, spec: Spec) -> list[str]:
    """The statement's step sentences (without intro/output)."""
    steps: list[str] = []
    if spec.shape == "pair":
        steps.append(f"let x be {_phrase(rng, PAIR_COMBINES[spec.combine][1])}")
    for kind, name, k in spec.list_ops:
        if kind == "map":
            steps.append(_phrase(rng, LIST_MAPS[name][1], k=k))
        elif kind == "filter":
            steps.append(
                rng.choice(
                    ["keep only the elements v of a where {c}", "remove from a every element v unless {c}"]
                ).format(c=_cond_phrase(name, k, "v"))
            )
        elif kind == "sort":
            steps.append(rng.choice(["sort a in increasing order", "sort a from smallest to largest"]))
        else:
            steps.append(rng.choice(["reverse a", "reverse the order of a"]))
    if spec.shape == "list_reduce":
        steps.append(f"let x be {_phrase(rng, REDUCES[spec.reduce][1])}")
    steps += [_op_phrase(rng, n, k) for n, k in spec.ops]
    if spec.branch:
        cname, k, then_ops, else_ops = spec.branch
        s = f"if {_cond_phrase(cname, k)}, {_join_ops(rng, then_ops)}"
        if else_ops:
            s += f"; otherwise, {_join_ops(rng, else_ops)}"
        steps.append(s)
    return steps


def _layout(rng: random.Random, steps: list[str]) -> str:
    if not steps:
        return ""
    style = rng.randrange(3)
    if style == 0 or len(steps) == 1:
        return " ".join(_cap(s) + "." for s in steps)
    if style == 1:
        words = ["First", "Then", "Next", "After that", "Finally"]
        out = []
        for i, s in enumerate(steps):
            w = words[0] if i == 0 else (words[-1] if i == len(steps) - 1 else words[1 + (i - 1) % 3])
            out.append(f"{w}, {s}.")
        return " ".join(out)
    return "\n".join(f"{i + 1}. {_cap(s)}." for i, s in enumerate(steps))


def _fmt_stdin(spec: Spec, arg: Any) -> str:
    if spec.shape == "scalar":
        return f"{arg}\n"
    if spec.shape == "pair":
        return f"{arg[0]} {arg[1]}\n"
    return f"{len(arg)}\n{' '.join(map(str, arg))}\n"


def _fmt_stdout(spec: Spec, result: Any) -> str:
    if spec.shape == "list_out":
        return " ".join(map(str, result)) + "\n"
    if isinstance(result, bool):
        return ("YES" if result else "NO") + "\n"
    return f"{result}\n"


def render_statement(rng: random.Random, spec: Spec, example: tuple[str, str], entry_point: str) -> str:
    steps = _steps(rng, spec)
    if spec.family == "call":
        params = {"scalar": "x", "pair": "a, b", "list_reduce": "a", "list_out": "a"}[spec.shape]
        what = {
            "scalar": "an integer x",
            "pair": "two integers a and b",
            "list_reduce": "a list of integers a",
            "list_out": "a list of integers a",
        }[spec.shape]
        intro = rng.choice(
            ["Write a function {f}({p}) that takes {w}.", "Define {f}({p}), given {w}."]
        ).format(f=entry_point, p=params, w=what)
        if spec.shape == "list_out":
            out = rng.choice(["Return the resulting list.", "Return a."])
        elif spec.verdict:
            out = f"Return True if {_cond_phrase(*spec.verdict)}, otherwise False."
        else:
            out = rng.choice(["Return x.", "Return the final value of x."])
        body = _layout(rng, steps)
        sep = "\n" if "\n" in body else " "
        text = intro + (sep + body if body else "") + sep + out
        return text + f"\nExample: {example[0]} == {example[1]}"
    intro = {
        "scalar": ("Read an integer x.", "You are given an integer x.", "The input is a single integer x."),
        "pair": ("Read two integers a and b.", "The input is one line with two integers a and b."),
        "list_reduce": (
            "The first line has n, the second line has n integers a.",
            "Read an integer n and then a list a of n integers.",
        ),
    }
    intro["list_out"] = intro["list_reduce"]
    if spec.multi:
        head = rng.choice(
            [
                "The first line has t. Each of the next t lines has an integer x. For each x:",
                "Read t, then t integers x, one per line. For every x:",
            ]
        )
    else:
        head = rng.choice(intro[spec.shape])
    if spec.shape == "list_out":
        out = rng.choice(["Print the elements of a separated by spaces.", "Print a on one line."])
    elif spec.verdict:
        out = f"Print YES if {_cond_phrase(*spec.verdict)}, otherwise print NO."
    else:
        out = rng.choice(["Print x.", "Print the final value of x.", "Output x."])
    if spec.multi:
        out = out[:-1] + ", one line per x."
    body = _layout(rng, steps)
    sep = "\n" if "\n" in body else " "
    text = head + (sep + body if body else "") + ("\n" if "\n" in body else " ") + out
    return text + f"\nExample input:\n{example[0]}Example output:\n{example[1]}"


# --------------------------------------------------------------------------- tests
def _candidate_args(rng: random.Random, spec: Spec, n: int) -> list[Any]:
    ks = [k for _, k in spec.ops] + ([spec.branch[1]] if spec.branch else [])
    ks += [spec.verdict[1]] if spec.verdict else []
    if spec.shape == "scalar":
        pool = [0, 1, -1, 2, -2, 3, 5, 7, 10, -7, 12, 15, -12, 20]
        pool += [k + d for k in ks for d in (-1, 0, 1)]
        pool += [rng.randint(-25, 30) for _ in range(n)]
        return pool
    if spec.shape == "pair":
        fixed = [(3, 5), (5, 3), (4, 4), (-2, 6), (7, -3), (0, 0), (-5, -8), (10, 1)]
        return fixed + [(rng.randint(-12, 15), rng.randint(-12, 15)) for _ in range(n)]
    need_nonempty = spec.shape == "list_reduce" and REDUCES[spec.reduce][3]
    out: list[Any] = [] if need_nonempty else [[]]
    out += [[4], [-3], [2, 4, 6], [1, 3, 5], [5, -2, 0, 7], [10, 3, 8, 1, 6]]
    for _ in range(n):
        out.append([rng.randint(-9, 12) for _ in range(rng.randint(1, 6))])
    return out


def _informative(arg: Any, res: Any) -> int:
    """How useful an input is as the statement's example: a non-trivial input and result."""
    score = 0
    if isinstance(res, bool) or res not in (0, []):
        score += 2
    if arg not in (0, [], (0, 0)):
        score += 1
    if isinstance(arg, list) and len(arg) > 4:
        score -= 1
    return score


def _make_tests(
    rng: random.Random, spec: Spec, num_tests: int
) -> tuple[tuple[Any, Any], list[tuple[Any, Any]]] | None:
    """The statement's example and ``num_tests`` scored (input, result) pairs, or None if degenerate.

    The example is never scored: a non-trivial input whose result is the rarest among the candidates,
    taken from a path that keeps another candidate for the tests. The tests cover every path first,
    then fill round-robin; within a path they take a result not picked yet where they can, and the
    example's result only as a last resort. For a verdict they balance True and False (counts equal,
    up to one for an odd ``num_tests``, or the problem is rejected): a constant answer, the echoed
    example included, earns half.
    """
    groups: dict[tuple, list[tuple[Any, Any]]] = {}
    order: list[tuple] = []
    seen: set[str] = set()
    for arg in _candidate_args(rng, spec, max(30, 4 * num_tests)):
        key = repr(arg)
        if key in seen:
            continue
        seen.add(key)
        try:
            res, path = _run(spec, arg)
        except (ValueError, ZeroDivisionError):
            continue
        if isinstance(res, int) and not isinstance(res, bool) and abs(res) > 10**9:
            continue
        if path not in groups:
            groups[path] = []
            order.append(path)
        groups[path].append((arg, res))
    for g in groups.values():
        rng.shuffle(g)
    freq = Counter(repr(r) for g in groups.values() for _, r in g)
    example: tuple[Any, Any] | None = None
    best: tuple[int, ...] = ()
    ex_path: tuple = ()
    for p in order:
        if len(groups[p]) < 2:  # the path's only input: it must be a test
            continue
        for a, r in groups[p]:
            info = _informative(a, r)
            key = (info < 2, freq[repr(r)], -info)
            if example is None or key < best:
                example, best, ex_path = (a, r), key, p
    if example is None:
        return None
    groups[ex_path].remove(example)
    ex_out = repr(example[1])
    used: Counter[str] = Counter()  # results picked so far: a test repeats the example's result last
    rank = {p: i for i, p in enumerate(order)}
    count = dict.fromkeys(order, 0)
    verdicts: Counter[bool] = Counter()  # verdict problems: tests per expected verdict
    picked: list[tuple[Any, Any]] = []
    while len(picked) < num_tests:
        live = [p for p in order if groups[p]]
        if not live:
            return None
        want = None
        if spec.verdict and verdicts[True] != verdicts[False]:
            want = verdicts[True] < verdicts[False]
        # every path once first, then the verdict picked less often, then round-robin
        p = min(live, key=lambda q: (count[q] > 0, want is not None and q[-1] != want, count[q], rank[q]))
        count[p] += 1
        g = groups[p]
        arg, res = g.pop(min(range(len(g)), key=lambda i: (repr(g[i][1]) == ex_out, used[repr(g[i][1])], -i)))
        used[repr(res)] += 1
        if spec.verdict:
            verdicts[res] += 1
        picked.append((arg, res))
    results = [repr(r) for _, r in picked]
    if len(set(results)) < min(3, num_tests) and not spec.verdict:
        return None
    if spec.verdict and abs(verdicts[True] - verdicts[False]) > num_tests % 2:
        return None
    if spec.branch:
        # both "always then" and "always else" must be wrong on some test: each branch matters
        for force in (True, False):
            if all(_run(spec, a, force)[0] == r for a, r in picked):
                return None
    return example, picked


def _call_args(spec: Spec, arg: Any) -> str:
    return f"{arg[0]}, {arg[1]}" if spec.shape == "pair" else repr(arg)


def _call_case(entry_point: str, spec: Spec, arg: Any, res: Any) -> str:
    return f"assert {entry_point}({_call_args(spec, arg)}) == {res!r}"


def _call_pair_cases(
    rng: random.Random, entry_point: str, spec: Spec, picked: list[tuple[Any, Any]]
) -> list[str]:
    """Verdict call tests: each case asserts one True and one False input, so no constant passes."""
    yes = [a for a, r in picked if r]
    no = [a for a, r in picked if not r]
    rng.shuffle(yes)
    rng.shuffle(no)
    cases = []
    for y, n in zip(yes, no, strict=True):
        (a, ra), (b, rb) = ((y, True), (n, False)) if rng.random() < 0.5 else ((n, False), (y, True))
        f = entry_point
        cases.append(f"assert ({f}({_call_args(spec, a)}), {f}({_call_args(spec, b)})) == ({ra}, {rb})")
    return cases


def _multi_input(values: list[Any]) -> str:
    return f"{len(values)}\n" + "".join(f"{a}\n" for a in values)


def _multi_cases(picked: list[tuple[Any, Any]], spec: Spec, sizes: list[int]) -> list[dict[str, str]]:
    """Group single-x tests into multi-test-case inputs of ``sizes`` values each."""
    cases = []
    i = 0
    for size in sizes:
        chunk = picked[i : i + size]
        i += size
        out = "".join(_fmt_stdout(spec, r) for _, r in chunk)
        cases.append({"input": _multi_input([a for a, _ in chunk]), "output": out})
    return cases


# --------------------------------------------------------------------------- public API
def _probe_inputs() -> dict[str, tuple[Any, ...]]:
    """Inputs of each kind on which ``behaviour`` runs a spec, all inside the range the tests draw from
    (``_candidate_args``), so that two tasks the tests cannot tell apart share a key: every scalar of
    -25..30, every pair of -12..15, every list of at most two values of -9..12, and 200 seeded lists of
    three to six such values."""
    scalars = tuple(range(-25, 31))
    pairs = tuple((a, b) for a in range(-12, 16) for b in range(-12, 16))
    values = range(-9, 13)
    lists = [(), *((v,) for v in values), *((v, w) for v in values for w in values)]
    rng = random.Random("maxk-suite-behaviour-probes")
    lists += [tuple(rng.choice(values) for _ in range(rng.randint(3, 6))) for _ in range(200)]
    return {"scalar": scalars, "pair": pairs, "list": tuple(lists)}


_PROBES = _probe_inputs()


def behaviour(spec: Spec) -> str:
    """What a problem computes, as a key: the spec's input kind and its results (``_run``) on that kind's
    probe inputs (``_probe_inputs``, drawn from the tests' own input range), an input it rejects marked
    so. Family, statement, input/output code and test-case loop do not enter it, nor a step that changes
    nothing on every probe (a reverse before a sum). Two specs with one key agree on every probe: the
    same task for any test drawn from the probes' range, and merged as one (a few distinct tasks that
    agree on every probe are merged too: conservative, never a leak)."""
    kind = "list" if spec.shape in ("list_reduce", "list_out") else spec.shape
    results = []
    for arg in _PROBES[kind]:
        try:
            value = _run(spec, list(arg) if kind == "list" else arg)[0]
        except (ValueError, ZeroDivisionError):
            value = "rejected"
        results.append(repr(value))
    return kind + ":" + ",".join(results)


def make_problem(
    rng: random.Random, family: str, level: int, index: int, num_tests: int
) -> dict[str, Any] | None:
    spec = _sample_spec(rng, family, level)
    if spec is None or spec.level() != level:
        return None
    # a multi-case stdio test holds 1-3 values; a verdict call test asserts a True and a False input
    sizes = [rng.randint(1, 3) for _ in range(num_tests)] if spec.multi else []
    paired = family == "call" and spec.verdict is not None
    made = _make_tests(rng, spec, sum(sizes) if spec.multi else 2 * num_tests if paired else num_tests)
    if made is None:
        return None
    (ex_arg, ex_res), picked = made
    entry = rng.choice(CALL_NAMES) if family == "call" else "solve"
    reference = render_reference(spec, entry)
    if family == "call":
        example = (f"{entry}({_call_args(spec, ex_arg)})", repr(ex_res))
        cases = (
            _call_pair_cases(rng, entry, spec, picked)
            if paired
            else [_call_case(entry, spec, a, r) for a, r in picked]
        )
        tests: dict[str, Any] = {"format": "call", "entry_point": entry, "setup": "", "cases": cases}
    else:
        if spec.multi:
            stdio_cases = _multi_cases(picked, spec, sizes)
            example = (_multi_input([ex_arg]), _fmt_stdout(spec, ex_res))
        else:
            stdio_cases = [{"input": _fmt_stdin(spec, a), "output": _fmt_stdout(spec, r)} for a, r in picked]
            example = (_fmt_stdin(spec, ex_arg), _fmt_stdout(spec, ex_res))
        tests = {"format": "stdio", "cases": stdio_cases}
    prompt = render_statement(rng, spec, example, entry)
    return {
        "id": f"suite/{family}-{index:05d}",
        "source": "suite",
        "prompt": prompt,
        "difficulty": level,
        "tests": tests,
        "reference": reference,
        "time_limit": None,
        "meta": {
            "family": family,
            "shape": spec.shape,
            "num_branches": int(bool(spec.branch)),
            "verdict": spec.verdict is not None,
            "behaviour": hashlib.sha256(behaviour(spec).encode()).hexdigest()[:32],
        },
    }


def generate_suite(
    family: str = "stdio",
    n: int = 100,
    seed: int = 0,
    *,
    level_weights: dict[int, float] | None = None,
    num_tests: int = 8,
    max_tries: int = 200,
) -> list[dict[str, Any]]:
    """``n`` distinct problems of ``family`` ("stdio", "call" or "mixed:<call fraction>").

    Levels are drawn from ``level_weights`` (default ``DEFAULT_LEVEL_WEIGHTS``); a level whose space
    of distinct programs is exhausted is redrawn. Same arguments -> same problems, in the same order,
    so a process generates a pool once (``_POOLS``) and hands each call its own copy.
    """
    weights = (
        None if level_weights is None else tuple(sorted((int(k), float(v)) for k, v in level_weights.items()))
    )
    key = (family, n, seed, weights, num_tests, max_tries)
    if key not in _POOLS:
        problems = _generate_pool(family, n, seed, level_weights, num_tests, max_tries)
        while len(_POOLS) >= _POOLS_KEPT:
            _POOLS.pop(next(iter(_POOLS)))
        _POOLS[key] = pickle.dumps(problems, protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.loads(_POOLS[key])


#: pools generated in this process, pickled (a copy per call: callers may change their records), by
#: ``generate_suite``'s arguments; a 4,000-problem pool costs about 10 s to generate and 0.1 s to copy, and
#: one process often builds several datasets of one pool (``maxk data``'s datasets, the base's SFT split,
#: the contamination audit, the tests)
_POOLS: dict[tuple[Any, ...], bytes] = {}
#: the most pools ``_POOLS`` keeps (the oldest goes first)
_POOLS_KEPT = 4


def _generate_pool(
    family: str,
    n: int,
    seed: int,
    level_weights: dict[int, float] | None,
    num_tests: int,
    max_tries: int,
) -> list[dict[str, Any]]:
    """``generate_suite`` without the process's copy."""
    if family.startswith("mixed"):
        frac = float(family.split(":", 1)[1]) if ":" in family else 0.2
        n_call = round(n * frac)
        seen: set[str] = set()  # one task is one problem across the two families
        kw = {"level_weights": level_weights, "num_tests": num_tests, "max_tries": max_tries, "seen": seen}
        return _generate("stdio", n - n_call, seed, **kw) + _generate("call", n_call, seed, **kw)
    return _generate(family, n, seed, level_weights=level_weights, num_tests=num_tests, max_tries=max_tries)


def _generate(
    family: str,
    n: int,
    seed: int,
    *,
    level_weights: dict[int, float] | None,
    num_tests: int,
    max_tries: int,
    seen: set[str] | None = None,
) -> list[dict[str, Any]]:
    """``generate_suite`` of one family; ``seen``: the behaviours taken already (updated)."""
    if family not in ("stdio", "call"):
        raise ValueError(f"unknown suite family {family!r}; expected 'stdio', 'call' or 'mixed:<fraction>'")
    weights = {int(k): float(v) for k, v in (level_weights or DEFAULT_LEVEL_WEIGHTS).items()}
    for lvl in weights:
        if not 1 <= lvl <= 5:
            raise ValueError(f"suite levels are 1-5, got {lvl}")
    levels = sorted(weights)
    rng = random.Random(f"maxk-suite-{family}-{seed}")
    out: list[dict[str, Any]] = []
    seen = set() if seen is None else seen
    exhausted: set[int] = set()
    while len(out) < n:
        live = [lv for lv in levels if lv not in exhausted and weights[lv] > 0]
        if not live:
            raise ValueError(f"cannot generate {n} distinct {family} problems with levels {levels}")
        level = rng.choices(live, weights=[weights[lv] for lv in live])[0]
        for _ in range(max_tries):
            prob = make_problem(rng, family, level, len(out), num_tests)
            if prob is None:
                continue
            key = prob["meta"]["behaviour"]
            if key in seen:
                continue
            seen.add(key)
            out.append(prob)
            break
        else:
            exhausted.add(level)
    return out
