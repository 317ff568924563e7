"""The trusted judge: every verdict is decided here, in the caller's process.

* ``call`` problems: each case (an assert, or a loop of asserts) runs here with the entry point
  bound to a proxy (``_Candidate``) that sends the arguments to the program's child and rebuilds the
  return value from strict tagged data (``wire.decode``); the assertion is evaluated on fresh builtin
  objects. Before the first program of a problem, each case runs once against a recording stand-in
  (``record_calls``): the calls it makes while every result looks right are sent with the program
  and answered with its load (prefetched); a case's calls go live, one round trip each, from the
  first one that differs.
* ``stdio`` problems: the raw stdout of each case is compared token-wise (``outputs_match``).
* How a run failed maps to a verdict (``VERDICTS``); ``Score`` is one program's result.
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import copy
import ctypes
import dataclasses
import inspect
import json
import random
import threading
import time
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from maxk.sandbox import wire
from maxk.sandbox.levels import SandboxError

if TYPE_CHECKING:
    from maxk.data.schema import Problem

OK = "ok"
WRONG_ANSWER = "wrong_answer"
#: every verdict a case can get: passed, failed its check, or how the program failed
VERDICTS = (
    OK,
    WRONG_ANSWER,
    wire.RUNTIME_ERROR,
    wire.TIMEOUT,
    wire.MEMORY,
    wire.OUTPUT_LIMIT,
    wire.SYNTAX_ERROR,
    wire.SANDBOX_ERROR,
)


def is_solved(passed: Any, total: Any) -> Any:
    """The one definition of "solved": the program passes every test of its problem (which has at least
    one). Elementwise on numpy arrays. Its reward (``passed / total``, 0 without tests) is then exactly
    1.0, and only then, so ``reward == 1.0`` reads the same thing off a scores file."""
    return (total > 0) & (passed == total)


@dataclasses.dataclass(frozen=True)
class Score:
    """Result for one program: per-case verdicts in case order, reward = passed / total."""

    passed: int
    total: int
    reward: float
    verdicts: tuple[str, ...]
    elapsed: float

    @property
    def solved(self) -> bool:
        """Every test passed (``is_solved``)."""
        return bool(is_solved(self.passed, self.total))

    @classmethod
    def from_verdicts(cls, verdicts: Sequence[str], elapsed: float) -> Score:
        passed = sum(v == OK for v in verdicts)
        total = len(verdicts)
        return cls(passed, total, passed / total if total else 0.0, tuple(verdicts), elapsed)


class _Abort(BaseException):
    """Raised into trusted test code when the candidate failed in a way that ends the case.

    A BaseException so that ``except Exception`` in test code does not swallow it; the proxy also
    remembers it, so even a bare ``except:`` cannot turn it into a pass.
    """

    def __init__(self, verdict: str, alive: bool) -> None:
        super().__init__(verdict)
        self.verdict = verdict
        self.alive = alive


_SPECIAL_ARGS = (UnicodeError,)


def _rebuild_exception(name: str) -> BaseException:
    """A fresh builtin exception of the candidate's exception class name (RuntimeError if unknown)."""
    cls = getattr(builtins, name, None) if isinstance(name, str) else None
    exc: BaseException
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, _SPECIAL_ARGS):
        try:
            exc = cls(f"raised by the candidate ({name})")
        except Exception:
            exc = RuntimeError(name)
    else:
        exc = RuntimeError(f"raised by the candidate ({name!s:.100})")
    exc._maxk_candidate = True  # type: ignore[attr-defined]
    return exc


def _encode_call(args: tuple, kwargs: dict) -> str:
    return json.dumps([[wire.encode(a) for a in args], [[k, wire.encode(v)] for k, v in kwargs.items()]])


#: Prefetch limits: calls recorded per case, and encoded arguments per problem (one load message).
PREFETCH_CALLS = 1000
PREFETCH_BYTES = 1 << 20


#: Wall-clock bound on recording one problem's calls (once per problem, in the trusted process;
#: enforced by ``_time_bound`` however the test code handles exceptions).
RECORDING_S = 5.0


@contextlib.contextmanager
def _time_bound(deadline: float) -> Any:
    """Raise ``_Stop`` in this thread, inside this block, once ``deadline`` passes, and again every
    50 ms should the code catch it: a watchdog thread sets it as an asynchronous exception. Leaving
    the block withdraws any that is still pending, under the same lock, so none escapes it."""
    target = threading.get_ident()
    lock = threading.Lock()
    done = threading.Event()
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc

    def watchdog() -> None:
        wait = deadline - time.monotonic()
        while not done.wait(max(wait, 0.0)):
            with lock:
                if not done.is_set():
                    set_async(ctypes.c_ulong(target), ctypes.py_object(_Stop))
            wait = 0.05

    guard = threading.Thread(target=watchdog, daemon=True, name="maxk-recording-bound")
    guard.start()
    try:
        yield
    finally:
        with lock:
            done.set()
            set_async(ctypes.c_ulong(target), None)
        guard.join()


class _Stop(BaseException):
    """Raised by the recording proxy to end a case's recording (prefetch phase)."""


class _Anything:
    """What the recording proxy returns in place of a result, so that a case runs on to its next
    call: every comparison holds, arithmetic and indexing give itself back, it iterates as empty.
    It only serves to learn which arguments a case passes; it never reaches a verdict. Each use
    spends one of ``left``: a loop that only ends on a real result (``while r > 0: r -= 1``) stops
    the recording instead of spinning forever."""

    def __init__(self, left: int = 100_000) -> None:
        self.left = left

    def _spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _Stop

    def _true(self, *_: Any) -> bool:
        self._spend()
        return True

    def _same(self, *_: Any, **__: Any) -> _Anything:
        self._spend()
        return self

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __bool__ = _true  # type: ignore[assignment]
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __and__ = __rand__ = _same
    __or__ = __ror__ = __xor__ = __rxor__ = __neg__ = __pos__ = __abs__ = __round__ = _same
    __getitem__ = __call__ = __getattr__ = _same

    def __hash__(self) -> int:
        self._spend()
        return 0

    def __iter__(self) -> Any:
        self._spend()
        return iter(())

    def __len__(self) -> int:
        self._spend()
        return 0

    def __int__(self) -> int:
        self._spend()
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        self._spend()
        return 0.0

    def __str__(self) -> str:
        self._spend()
        return ""

    __repr__ = __str__


class _Recorder:
    """Prefetch phase: records the encoded arguments of every call a case makes, answering each with
    a ``_Anything``; stops at an argument it cannot encode (e.g. one computed from a result)."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self.anything = _Anything()  # one per case: its budget bounds the whole recording

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(self.payloads) >= PREFETCH_CALLS:
            raise _Stop
        try:
            self.payloads.append(_encode_call(args, kwargs))
        except wire.Unsupported:
            raise _Stop from None
        return self.anything


class _Candidate:
    """Stands in for the entry point inside trusted test code.

    While the case's calls match the prefetched ones (same encoded arguments, same order), each gets
    its prefetched reply; from the first call that differs on, every call goes live to the child
    through the session. Replies are rebuilt from strict tagged data.
    """

    def __init__(self, session: Any, deadline: float, budget: float, prefetched: collections.deque) -> None:
        self.session = session
        self.deadline = deadline
        self.budget = budget
        self.used = 0.0  # time the worker spent on the prefetched calls answered so far
        self.prefetched = prefetched
        self.abort: _Abort | None = None
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.abort is not None:
            raise self.abort
        self.calls += 1
        try:
            payload = _encode_call(args, kwargs)
        except wire.Unsupported as exc:
            self._fail(wire.SANDBOX_ERROR)
            raise AssertionError("unreachable") from exc
        if self.prefetched and self.prefetched[0][0] == payload:
            reply = self.prefetched.popleft()[1]
            spent = reply.get("t")  # since the case's first prefetched call, as the worker measured
            if isinstance(spent, int | float) and spent == spent:  # (not NaN)
                self.used = min(max(float(spent), 0.0), self.budget)
        else:
            self.prefetched.clear()  # diverged: later replies were computed after other calls
            left = self.deadline - self.used - time.monotonic()
            if left <= 0:
                self._fail(wire.TIMEOUT)
            reply = self.session.call(payload, left)
        status = reply.get("status")
        if status == wire.RETURNED:
            try:
                return wire.decode(reply.get("value"))
            except (wire.Malformed, RecursionError):
                self._fail(WRONG_ANSWER)
        if status == wire.RETURNED_UNSUPPORTED:
            self._fail(WRONG_ANSWER)
        if status == wire.RAISED:
            raise _rebuild_exception(reply.get("exc", ""))
        self._fail(map_status(status))
        return None  # unreachable

    def _fail(self, verdict: str) -> None:
        self.abort = _Abort(verdict, alive=False)
        raise self.abort


def _single_call_assert(tree: ast.Module, entry: str) -> bool:
    """True when a case is one ``assert`` with exactly one call of the entry point and no loops,
    lambdas or comprehensions: it calls the candidate at most once, so the child need not outlive
    the prefetched calls."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return False
    scoped = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)
    names, calls = [], []
    for node in ast.walk(tree):
        if isinstance(node, scoped):
            return False
        if isinstance(node, ast.Name) and node.id in (entry, "candidate"):
            names.append(node)
        elif isinstance(node, ast.Call):
            calls.append(node)
    return len(names) == 1 and sum(c.func is names[0] for c in calls) == 1


_SETUP_LOCK = threading.Lock()  # test setups run one at a time (they may use the global random)


@dataclasses.dataclass
class CallProblem:
    entry_point: str
    base: dict[str, Any]
    codes: list[Any]
    timeout: float
    single: list[bool] = dataclasses.field(default_factory=list)
    #: encoded calls each case makes when every result is as expected (independent of the program;
    #: recorded once, see ``record_calls``)
    prefetch: list[list[str]] | None = None
    #: the cases compiled for recording (asserts as bare expressions, see ``_recording_code``)
    recording: list[Any] = dataclasses.field(default_factory=list)
    #: random generators the cases reach from ``base`` (see ``_random_plan``)
    randoms: list[tuple[str, str, Any]] = dataclasses.field(default_factory=list)
    #: the compiled setup (``base`` is its result; ``fresh_base`` runs it again)
    setup_code: Any = None
    #: the global random state the setup first ran from
    random_before: Any = None

    def fresh_base(self) -> dict[str, Any]:
        """The setup's globals, made anew: what one program's cases (or the recording) leave in
        them never reaches another's evaluation. One thread at a time, from the global random
        state the first run started from (restored afterwards): a setup that draws from ``random``
        builds the same data every time. It ran once in ``_prepare``; if it fails now, so does the
        program (``sandbox_error``): no fallback to shared state."""
        if self.setup_code is None:
            return self.base
        own: dict[str, Any] = {"__name__": "__maxk_tests__"}
        with _SETUP_LOCK:
            saved = random.getstate()
            random.setstate(self.random_before)
            try:
                exec(self.setup_code, own)  # trusted dataset code
            finally:
                random.setstate(saved)
        return own

    def namespace(self, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """A case's globals: ``base`` (default: the problem's), with every random generator it
        reaches replaced by a copy in the state it had after the setup, so each run of a case
        (recording, then every program) draws the same numbers, whatever ran before or runs in
        another thread."""
        ns = dict(self.base if base is None else base)
        twins: dict[int, random.Random] = {}
        for name, kind, snapshot in self.randoms:
            twin = twins.get(id(snapshot))
            if twin is None:
                twin = twins[id(snapshot)] = copy.copy(snapshot)
            if kind == "module":
                module = types.ModuleType("random", random.__doc__)
                module.__dict__.update(random.__dict__)
                for attr, value in random.__dict__.items():
                    if getattr(value, "__self__", None) is random._inst:  # type: ignore[attr-defined]
                        setattr(module, attr, getattr(twin, value.__name__))
                ns[name] = module
            elif kind == "instance":
                ns[name] = twin
            else:  # a bound method such as `from random import choice`
                ns[name] = getattr(twin, kind)
        return ns


def _recording_code(tree: ast.Module, name: str) -> Any:
    """A case compiled for recording its calls: each ``assert test, msg`` becomes the bare expression
    ``test`` (its calls still run; a failed check no longer ends the case, e.g. in a loop of asserts
    on results the recording proxy cannot make true). Rewrites ``tree`` in place."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for i, stmt in enumerate(block):
                    if isinstance(stmt, ast.Assert):
                        block[i] = ast.copy_location(ast.Expr(stmt.test), stmt)
    try:
        return compile(tree, name, "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None


def _random_plan(base: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(name, kind, snapshot) for each name of ``base`` that is the ``random`` module, a
    ``random.Random`` or one of its bound methods; snapshots are shared per generator."""
    snapshots: dict[int, Any] = {}

    def snap(gen: Any) -> Any:
        if not isinstance(gen, random.Random) or isinstance(gen, random.SystemRandom):
            return None
        if id(gen) not in snapshots:
            snapshots[id(gen)] = copy.copy(gen)
        return snapshots[id(gen)]

    plan = []
    for name, value in base.items():
        if value is random:
            plan.append((name, "module", snap(random._inst)))  # type: ignore[attr-defined]
        elif (shot := snap(value)) is not None:
            plan.append((name, "instance", shot))
        elif inspect.ismethod(value) and (shot := snap(value.__self__)) is not None:
            plan.append((name, value.__name__, shot))
    return plan


@dataclasses.dataclass
class StdioProblem:
    inputs: list[str]
    outputs: list[str]
    timeout: float


def map_status(status: Any) -> str:
    """The verdict of a failed run: the failure itself, or ``sandbox_error`` for anything else."""
    return status if status in wire.FAILURES else wire.SANDBOX_ERROR


# ---------------------------------------------------------------------------------------------
# stdio comparison


def _float_equal(a: str, b: str, rel: float, abs_: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if x != x or y != y:
        return False
    return abs(x - y) <= max(abs_, rel * max(abs(x), abs(y)))


def outputs_match(got: str, expected: str, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Token-wise comparison ignoring whitespace layout; numeric tokens within tolerance if set."""
    a, b = got.split(), expected.split()
    if a == b:
        return True
    if len(a) != len(b) or not (rel_tol or abs_tol):
        return False
    return all(x == y or _float_equal(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True))


def prepare(problem: Problem, default_timeout: float) -> CallProblem | StdioProblem:
    """A problem made ready to judge: stdio cases as lists, or call cases compiled, their setup run
    (trusted dataset code) and their calls recorded (``record_calls``). Once per problem."""
    tests = problem.get("tests") or {}
    timeout = float(problem.get("time_limit") or default_timeout)
    if tests.get("format") == "stdio":
        cases = tests.get("cases") or []
        prepared = StdioProblem([c["input"] for c in cases], [c["output"] for c in cases], timeout)
    elif tests.get("format") == "call":
        base: dict[str, Any] = {"__name__": "__maxk_tests__"}
        setup = tests.get("setup") or ""
        setup_code = compile(setup, f"<setup {problem.get('id')}>", "exec")
        with _SETUP_LOCK:
            random_before = random.getstate()
            exec(setup_code, base)  # trusted dataset code
        prepared = CallProblem(tests["entry_point"], base, [], timeout)
        for j, src in enumerate(tests.get("cases") or []):  # each case parsed once
            name = f"<case {problem.get('id')}#{j}>"
            tree = ast.parse(src, name)
            prepared.codes.append(compile(tree, name, "exec"))
            single = _single_call_assert(tree, tests["entry_point"])
            prepared.single.append(single)
            # a single call comes before its check: the case itself records it
            prepared.recording.append(prepared.codes[-1] if single else _recording_code(tree, name))
        prepared.randoms = _random_plan(base)
        prepared.setup_code, prepared.random_before = setup_code, random_before
        # once, under the Scorer's lock: before any program of this problem is evaluated
        prepared.prefetch = record_calls(prepared)
    else:
        raise SandboxError(f"problem {problem.get('id')!r}: unknown tests.format {tests.get('format')!r}")
    return prepared


def record_calls(prob: CallProblem) -> list[list[str]]:
    """Run every case in the trusted process with a recording proxy for the candidate: the calls
    (encoded arguments) it makes while every result looks right. Trusted code between calls
    cannot depend on the program, so this is done once per problem; phase 2 still checks each
    call's arguments against the recording (random generators are replayed, see ``namespace``).

    The recording runs on its own copy of the setup (``fresh_base``), so nothing it
    computes from the stand-in (``results.append(f(x) == y)``) reaches the real evaluation; the
    stand-in is spent afterwards in any case, and the whole recording has a wall-clock bound
    (``RECORDING_S``: a loop on identity, ``while type(r) is not int``, spends no budget)."""
    own = prob.fresh_base()
    recorders: list[_Recorder] = []
    # one watchdog for the whole recording; a deadline between cases ends it there
    deadline = time.monotonic() + RECORDING_S
    with contextlib.suppress(_Stop), _time_bound(deadline):
        for code in prob.recording:
            if time.monotonic() > deadline:
                break
            recorders.append(_Recorder())
            if code is None:
                continue
            ns = prob.namespace(own)
            ns[prob.entry_point] = ns["candidate"] = recorders[-1]
            # the case may fail or stop early: what it called so far is prefetched, the rest live
            with contextlib.suppress(Exception, _Stop):
                exec(code, ns)
    out: list[list[str]] = []
    budget = PREFETCH_BYTES
    for recorder in recorders:
        # If the stand-in was kept somewhere all the same, any later use raises: it must never
        # make a real check pass.
        recorder.anything.left = -1
        calls = []
        for payload in recorder.payloads:
            budget -= len(payload)
            if budget < 0:
                break
            calls.append(payload)
        out.append(calls)
    return out + [[] for _ in range(len(prob.codes) - len(out))]  # (cases the deadline cut off)


def stdio_verdicts(prob: StdioProblem, reply: dict[str, Any], rel_tol: float, abs_tol: float) -> list[str]:
    """Per-case verdicts of a stdio run: each exit-0 stdout compared token-wise with the expected."""
    n = len(prob.inputs)
    if reply.get("status") == wire.SYNTAX_ERROR:
        return [wire.SYNTAX_ERROR] * n
    results = reply.get("results")
    if reply.get("status") != wire.DONE or not isinstance(results, list) or len(results) != n:
        return [wire.SANDBOX_ERROR] * n
    verdicts = []
    for res, expected in zip(results, prob.outputs, strict=True):
        status = res.get("status")
        if status == wire.EXIT_OK:
            ok = outputs_match(str(res.get("stdout", "")), expected, rel_tol, abs_tol)
            verdicts.append(OK if ok else WRONG_ANSWER)
        else:
            verdicts.append(map_status(status))
    return verdicts


def run_case(session: Any, prob: CallProblem, code: Any, pre: collections.deque, base: dict[str, Any]) -> str:
    """Run one call case in this (trusted) process with the entry point bound to a proxy of the
    child (``session.call``); prefetched replies in ``pre`` answer the calls they match."""
    proxy = _Candidate(session, time.monotonic() + prob.timeout, prob.timeout, pre)
    ns = prob.namespace(base)
    ns[prob.entry_point] = ns["candidate"] = proxy
    verdict = OK
    try:
        exec(code, ns)  # trusted assertion code; only `proxy` touches the sandbox
    except _Abort:
        pass
    except BaseException as exc:  # any failure of the assertion is a failed case
        ctx = exc.__context__
        from_candidate = getattr(exc, "_maxk_candidate", False) or getattr(ctx, "_maxk_candidate", False)
        verdict = wire.RUNTIME_ERROR if from_candidate else WRONG_ANSWER
    if proxy.abort is not None:  # sticky: a swallowed abort still fails the case
        return proxy.abort.verdict
    return verdict
