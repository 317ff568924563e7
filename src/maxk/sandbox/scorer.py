"""Trusted side of the sandbox: the pool of workers, its job queue and its cache.

The orchestrator (this module, in the caller's process) holds problems, assertion code and expected
outputs; ``judge`` decides every verdict. Untrusted programs run only in children of the worker
processes (``_worker.py``), which are started with ``subprocess`` from an empty environment (the
caller is never forked) and never receive expected outputs or assertion code. One thread per worker
takes jobs from a shared queue and sends each job's one request (a stdio run, or a call program's
load with its prefetched calls), pipelining the next while the current one is judged.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maxk.sandbox import judge, wire
from maxk.sandbox.judge import CallProblem, Score, StdioProblem
from maxk.sandbox.levels import LEVEL_ORDER, LEVELS, SandboxError, isolation_level

if TYPE_CHECKING:
    from maxk.data.schema import Problem

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))


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
            # the baseline of benchmarks/bench_sandbox.py: a fresh child for every stdio case
            "child_per_case": os.environ.get("MAXK_SANDBOX_CHILD_PER_CASE") == "1",
            "scratch_root": tempfile.gettempdir(),  # the worker's environment is empty: no TMPDIR
            "scratch_mb": self.scratch_mb,
            "scratch_inodes": self.scratch_inodes,
        }


# ---------------------------------------------------------------------------------------------
# worker handle


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
        if hello.get("status") != wire.HELLO:
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
            self.proc.stdin.write(wire.frame(msg))
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
            self.proc.stdin.write(wire.frame({"op": wire.OP_EXIT}))
            self.proc.stdin.flush()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _Session:
    """The child of one program as seen from the trusted side: loaded lazily, reloaded after a crash.

    Every load and call carries the session's token; the worker answers ``stale`` to a call whose
    token is not its current child's, so a call can never reach another program's child.
    """

    def __init__(
        self, scorer: Scorer, handle: _WorkerHandle, prob: CallProblem, program: str, token: int, alive: bool
    ) -> None:
        self.scorer, self.handle, self.prob, self.program = scorer, handle, prob, program
        self.token, self.alive = token, alive

    def call(self, payload: str, left: float) -> dict[str, Any]:
        for _ in range(2):
            if not self.alive:
                state = self.scorer._load(self.handle, self.prob, self.program, self.token)
                if state != wire.READY:
                    return {"status": state if state != wire.SYNTAX_ERROR else wire.SANDBOX_ERROR}
                self.alive = True
            msg = {"op": wire.OP_CALL, "payload": payload, "timeout": left, "token": self.token}
            try:
                reply = self.handle.request(msg, guard=left + 10)
            except _Dead:
                self.alive = False
                return {"status": wire.SANDBOX_ERROR}
            if reply.get("status") == wire.STALE:  # our child was replaced by a pipelined load: reload
                self.alive = False
                continue
            if reply.get("status") not in wire.CALL_REPLIES:
                self.alive = False
            return reply
        return {"status": wire.SANDBOX_ERROR}


# ---------------------------------------------------------------------------------------------
# the pool


def problem_key(problem: Problem) -> str:
    """Identity of a problem for the cache: its id plus a hash of its tests and time limit."""
    blob = json.dumps([problem.get("tests"), problem.get("time_limit")], sort_keys=True, default=str)
    return f"{problem.get('id')}:{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


class _Job:
    __slots__ = ("done", "error", "key", "problem", "program", "result", "t0")

    def __init__(self, key: tuple[str, str], problem: Problem, program: str) -> None:
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
                    handle.request({"op": wire.OP_SYNC}, guard=30)
        except SandboxError as exc:
            job.error = exc
            verdicts = []
        except Exception:  # never let one program take the pool down
            handle.kill()
            verdicts = [wire.SANDBOX_ERROR] * _num_cases(job.problem)
        job.result = Score.from_verdicts(verdicts, time.monotonic() - job.t0)
        job.done.set()

    # -- scoring ------------------------------------------------------------------------------
    def score(self, pairs: Iterable[tuple[Problem, str]]) -> list[Score]:
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

    def _prepare(self, problem: Problem) -> CallProblem | StdioProblem:
        """``judge.prepare``, once per problem (cached; under a lock, so one thread prepares each problem)."""
        key = problem_key(problem)
        with self.problems_lock:
            prepared = self.problems.get(key)
            if prepared is None:
                prepared = judge.prepare(problem, self.limits.timeout_s)
                if len(self.problems) > 10_000:
                    self.problems.clear()
                self.problems[key] = prepared
            return prepared

    def _begin(self, handle: _WorkerHandle, job: _Job) -> _Pending:
        """Send the job's one request (stdio run, or call-program load with prefetched calls)."""
        pending = _Pending(job, self._prepare(job.problem), next(self.tokens))
        prob = pending.prepared
        if isinstance(prob, StdioProblem):
            n = len(prob.inputs)
            msg = {
                "op": wire.OP_STDIO,
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
        n = len(prob.inputs) if isinstance(prob, StdioProblem) else len(prob.codes)
        if n == 0:
            return []
        if pending.dead:
            return [wire.SANDBOX_ERROR] * n
        try:
            reply = handle.take()
        except _Dead:
            return [wire.SANDBOX_ERROR] * n
        if isinstance(prob, StdioProblem):
            return judge.stdio_verdicts(prob, reply, self.limits.float_rel_tol, self.limits.float_abs_tol)
        return self._call_verdicts(handle, prob, pending, reply)

    def _load(self, handle: _WorkerHandle, prob: CallProblem, program: str, token: int) -> str:
        msg, guard = self._load_msg(prob, program, None, True, token)
        try:
            status = handle.request(msg, guard).get("status")
        except _Dead:
            return wire.SANDBOX_ERROR
        return status if status in (wire.READY, wire.SYNTAX_ERROR) else judge.map_status(status)

    @staticmethod
    def _load_msg(
        prob: CallProblem, program: str, calls: list[list[str]] | None, keep: bool, token: int
    ) -> tuple[dict[str, Any], float]:
        msg = {
            "op": wire.OP_LOAD,
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

    def _call_verdicts(
        self, handle: _WorkerHandle, prob: CallProblem, pending: _Pending, reply: dict[str, Any]
    ) -> list[str]:
        n = len(prob.codes)
        status = reply.get("status")
        if status != wire.READY:
            return [status if status == wire.SYNTAX_ERROR else judge.map_status(status)] * n
        results = reply.get("results") or [None] * n
        calls = prob.prefetch or [[]] * n
        if not isinstance(results, list) or len(results) != n:
            return [wire.SANDBOX_ERROR] * n
        # Phase 2: every case runs in full here; prefetched replies answer matching calls.
        session = _Session(
            self, handle, prob, pending.job.program, pending.token, alive=bool(reply.get("alive"))
        )
        verdicts: list[str] = []
        base = prob.fresh_base()  # this program's cases share it, as the body of one check() would
        for code, payloads, result in zip(prob.codes, calls, results, strict=True):
            if self.limits.max_timeouts and verdicts.count(wire.TIMEOUT) >= self.limits.max_timeouts:
                verdicts += [wire.TIMEOUT] * (n - len(verdicts))  # budget spent: the rest is not run
                break
            pre: collections.deque = collections.deque()
            if payloads and isinstance(result, dict) and isinstance(result.get("replies"), list):
                replies = [r if isinstance(r, dict) else {} for r in result["replies"]]
                pre.extend(zip(payloads, replies, strict=False))
            verdicts.append(judge.run_case(session, prob, code, pre, base))
        if session.alive:
            with contextlib.suppress(_Dead):
                handle.request({"op": wire.OP_END, "token": session.token}, guard=10)
        return verdicts


def _num_cases(problem: Problem) -> int:
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


def score_programs(problem: Problem, programs: Sequence[str], **limits: Any) -> list[Score]:
    """Score ``programs`` against one problem.

    The first call starts a sandbox pool for its limits (``shared_scorer``); later calls with the same
    limits reuse it, its workers and its cache, so a call per problem costs what a ``Scorer`` does.
    The pool closes at exit (or ``close_shared_scorers()``); a forked child gets its own.
    """
    programs = list(programs)
    if not programs:
        return []
    return shared_scorer(**limits).score([(problem, p) for p in programs])
