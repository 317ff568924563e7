"""Warm job starts: one pre-imported interpreter per Snakemake run that forks each ``maxk`` job.

A pipeline job spends most of a small run starting up: the end-to-end test's generation job takes
12.6 s, of which sampling 0.6 s; the rest is importing torch, transformers and TRL
(``benchmarks/bench_job_start.py``: 11.4 s from a fresh interpreter, 1.2 s forked from a warm one).
So a local Snakemake run starts one *job server* (``onstart``; ``maxk job-server``), which imports
what the jobs import once and then waits on a Unix socket. The ``maxk`` command of each job is then a
thin *client*: it hands the server its arguments, working directory, environment, umask and its
standard input, output and error (the file descriptors themselves, ``SCM_RIGHTS``); the server forks,
and the child becomes the job: its own session, those descriptors, that directory and environment,
``maxk.cli.main(argv)``. The client waits and exits with the child's status.

What makes a forked job the job a fresh interpreter would have run:

- **Same inputs.** The client sends its whole environment. Variables read when a library is imported
  (``ATEN_CPU_CAPABILITY``, ``HF_HUB_OFFLINE``, ``PATH`` with another environment's Python) cannot
  be changed after the server imported it, so the server only takes a job whose environment equals
  its own but for the variables Snakemake sets per job (``PER_JOB_VARS``: the thread counts, the
  temporary directory, the shell's own) and directories put before its ``PYTHONPATH`` that shadow
  none of its modules (``extra_python_path``), on the same interpreter, ``maxk``, CPU affinity and
  resource limits: otherwise the client runs the job itself, as without a server.
- **Same numerics.** torch's thread count is read at import: the child sets it from the job's
  ``OMP_NUM_THREADS`` (what a fresh torch would read). The server computes nothing (it imports), so
  torch's random generators, its CPU-capability choice and OpenMP's threads are a fresh process's.
  Python's and numpy's global generators are reseeded from the OS, as a fresh interpreter seeds them.
  Measured, not assumed: ``tests/workflow/test_workflow_e2e.py`` rebuilds a base model, a GRPO run, a
  sample file and its scores cold and compares their bytes with the warm run's.
- **Same lifetime.** The child is its own session leader and dies with the server (``PDEATHSIG``);
  a client killed by a signal it can catch forwards it to the child's process group and exits as the
  child does; a client killed outright (``SIGKILL``) closes the socket, and the server kills the
  child's group. The server dies with the Snakemake process that started it, and stops with the run
  (``onsuccess``/``onerror``).
- **Only the owner.** The socket lies in a fresh ``0700`` directory and the server checks the peer's
  uid (``SO_PEERCRED``): no other user can start a job in it.

No server (a cluster executor, ``warm_start: false``, a machine with a GPU driver, a server gone):
``maxk`` runs the job itself; one still importing is waited for. The server is local to one machine: a
Slurm job's ``maxk`` finds no server and starts cold.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: the client's environment variable: the server's socket path
SERVER_VAR = "MAXK_JOB_SERVER"

#: variables a job's environment may hold other values of than the server's: Snakemake sets them per
#: job (snakemake/shell.py: the thread counts and, with a ``tmpdir`` resource, the temporary directory),
#: the rules set the thread counts (``torch_threads_env``), the shell sets its own. The child applies
#: each (torch's threads, ``tempfile``'s directory); nothing else may differ.
PER_JOB_VARS = frozenset(
    {
        "OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
        "TMPDIR", "TMP", "TEMPDIR", "TEMP",
        "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2",  # bash unsets the prompts when not interactive
        SERVER_VAR,
    }
)  # fmt: skip

#: what the server imports before it takes jobs: what the jobs of the embedded default import
#: (generation, training, the base model, scoring, analysis); one that fails to import is skipped
#: (the job imports it itself). ``tests/workflow/test_jobserver.py`` checks each name exists.
PRELOAD: tuple[str, ...] = (
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "scipy.stats",
    "tqdm",
    "torch",
    "transformers",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.qwen2.tokenization_qwen2",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
    "transformers.tokenization_utils_fast",
    "tokenizers",
    "trl",
    "maxk.cli",
    "maxk.generate.cli",
    "maxk.generate.run",
    "maxk.generate.hf",
    "maxk.train.cli",
    "maxk.train.run",
    "maxk.train.base",
    "maxk.train.edge",
    "maxk.sandbox",
    "maxk.sandbox.cli",
    "maxk.analysis.cli",
    "maxk.data.cli",
)

ENTRY = "maxk.cli:main"
#: beside the socket: the server's pid, from its start until it stops (clients wait while it imports)
PID_FILE = "server.pid"

_HEADER = struct.Struct("!Q")  # the request's JSON length, sent with the descriptors
_STATUS = struct.Struct("!i")  # the child's wait status
_FORKED, _COLD = b"F", b"C"  # the server's first reply byte
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


#: resource limits a job inherits from its parent: a forked job has the server's, so they must agree
_RLIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE",
            "RLIMIT_NPROC", "RLIMIT_STACK")  # fmt: skip


def process_facts() -> list[Any]:
    """What a process inherits besides its environment and a fork would not hand over: its CPU affinity
    (torch's default thread count follows it) and its resource limits."""
    import resource

    limits = [[name, *resource.getrlimit(getattr(resource, name))] for name in _RLIMITS]
    return [sorted(os.sched_getaffinity(0)), limits]


def fingerprint(env: Mapping[str, str], executable: str | None = None, facts: list[Any] | None = None) -> str:
    """What a job must share with the server: every environment variable but ``PER_JOB_VARS`` and
    ``PYTHONPATH`` (checked apart: ``extra_python_path``), the interpreter and the ``maxk`` package it
    runs, its CPU affinity and resource limits (``facts``, default this process's)."""
    import maxk

    fixed = sorted((k, v) for k, v in env.items() if k not in PER_JOB_VARS and k != "PYTHONPATH")
    ident = [os.path.realpath(executable or sys.executable), os.path.realpath(maxk.__file__), fixed]
    ident.append(process_facts() if facts is None else facts)
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()


def extra_python_path(job: str, server: str) -> list[str] | None:
    """The directories a job's ``PYTHONPATH`` puts before the server's, which a forked job can add to its
    ``sys.path`` as a fresh interpreter would (the rehearsal's generation jobs see a vLLM stand-in so);
    None where it cannot: the server's is not its tail, an entry is empty or relative (both mean the
    working directory), or one provides a module the server has imported (the job would get the
    server's, where a fresh interpreter imports the entry's)."""
    parts = job.split(os.pathsep) if job else []
    tail = server.split(os.pathsep) if server else []
    if len(parts) < len(tail) or parts[len(parts) - len(tail) :] != tail:
        return None
    extra = parts[: len(parts) - len(tail)]
    if any(not os.path.isabs(p) for p in extra):
        return None
    imported = {name.partition(".")[0] for name in sys.modules}
    for directory in extra:
        with contextlib.suppress(OSError):
            if {entry.partition(".")[0] for entry in os.listdir(directory)} & imported:
                return None
    return extra


# --- the client --------------------------------------------------------------------------------------


def forward(argv: Sequence[str], path: str | None = None) -> int | None:
    """Run ``maxk argv`` in the job server at ``path`` (default: ``$MAXK_JOB_SERVER``) and return its
    exit status; None where there is no server to run it (none configured, none listening, another
    environment): the caller runs the job itself."""
    path = path or os.environ.get(SERVER_VAR)
    if not path or not _wait_until_up(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    with sock, _std_fds() as fds:
        request = json.dumps(
            {
                "argv": list(argv),
                "argv0": sys.argv[0],
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "umask": _umask(),
                "fingerprint": fingerprint(os.environ),
            }
        ).encode()
        try:
            socket.send_fds(sock, [_HEADER.pack(len(request))], fds)
            sock.sendall(request)
            verdict = _recv_exactly(sock, 1)
        except OSError:
            verdict = b""
        if verdict != _FORKED:
            return None  # refused or gone before forking: nothing ran
        previous = {sig: signal.signal(sig, _forwarder(sock)) for sig in _FORWARDED}
        try:
            raw = _recv_exactly(sock, _STATUS.size)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if len(raw) < _STATUS.size:
        print("maxk: the job server stopped before the job ended", file=sys.stderr)
        return 1
    return _exit_as(_STATUS.unpack(raw)[0])


def _wait_until_up(path: str, limit_s: float = 300.0) -> bool:
    """Whether the server at ``path`` is up, waiting while it is still importing (its pid file beside
    the socket names a live process): every job of a run then forks from it, the first ones too."""
    pidfile = os.path.join(os.path.dirname(path), PID_FILE)
    deadline = time.monotonic() + limit_s
    while not os.path.exists(path):
        try:
            os.kill(int(Path(pidfile).read_text()), 0)
        except (OSError, ValueError):
            return False  # no server started, or it died before it was up
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _forwarder(sock: socket.socket) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        with contextlib.suppress(OSError):
            sock.send(bytes([signum]))

    return handler


def _exit_as(status: int) -> int:
    """The client's exit for the child's wait status: its code, or death by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal that does not end a process by default
    return os.waitstatus_to_exitcode(status)


@contextlib.contextmanager
def _std_fds():
    """Descriptors 0, 1 and 2 (``/dev/null`` in place of a closed one)."""
    opened = []
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            opened.append(null)
            fds.append(null)
    try:
        yield fds
    finally:
        for fd in opened:
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes: fewer only where the peer closed the connection."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


# --- starting and stopping it from the workflow --------------------------------------------------------


class Handle:
    """A started server: its process and socket directory (``start``/``stop``)."""

    def __init__(self, proc: subprocess.Popen, directory: str) -> None:
        self.proc = proc
        self.directory = directory
        self.socket = os.path.join(directory, "jobs.sock")


_started: Handle | None = None


def start(workdir: str, log: str | None = None) -> Handle:
    """Start a server for this process's jobs (the Snakefile's ``onstart``): it runs ``maxk job-server``
    (the ``maxk`` on ``PATH``, the jobs' own), dies with this process, and is found by the jobs through
    ``$MAXK_JOB_SERVER``, set here. Returns at once: jobs that start while the server imports what it
    preloads wait for it (its pid file, ``_wait_until_up``)."""
    global _started
    stop()
    directory = tempfile.mkdtemp(prefix="maxk-jobs-")  # 0700: only this user reaches the socket
    env = {k: v for k, v in os.environ.items() if k != SERVER_VAR}
    # the working directory in the command line: `ps` (and the end-to-end test) tells whose jobs these are
    maxk = ["maxk"] if shutil.which("maxk") else [sys.executable, "-m", "maxk"]
    cmd = [*maxk, "job-server", "--socket", os.path.join(directory, "jobs.sock")]
    cmd += ["--parent", str(os.getpid()), "--workdir", os.path.abspath(workdir)]
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (handed to the child)
    try:
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C reaches the jobs' clients, which forward it
        )  # fmt: skip
    finally:
        if log:
            out.close()
    _started = Handle(proc, directory)
    Path(directory, PID_FILE).write_text(str(proc.pid))
    os.environ[SERVER_VAR] = _started.socket
    return _started


def stop(timeout: float = 10.0) -> None:
    """Stop the server ``start`` started (its running jobs are killed), if any."""
    global _started
    handle, _started = _started, None
    os.environ.pop(SERVER_VAR, None)
    if handle is None:
        return
    if handle.proc.poll() is None:
        handle.proc.terminate()
        try:
            handle.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            handle.proc.kill()
            handle.proc.wait()
    remove_socket(handle.socket)  # the server removes it itself, unless it was killed outright


def remove_socket(path: str) -> None:
    """Remove the socket at ``path``, the pid file beside it and their directory (if nothing else is in
    it)."""
    directory = os.path.dirname(path)
    for name in (path, os.path.join(directory, PID_FILE)):
        with contextlib.suppress(OSError):
            os.unlink(name)
    with contextlib.suppress(OSError):
        os.rmdir(directory)


# --- the server -----------------------------------------------------------------------------------------


def _set_pdeathsig(sig: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _log(msg: str) -> None:
    print(f"maxk job-server [{os.getpid()}] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def preload(modules: Sequence[str] = PRELOAD) -> list[str]:
    """Import ``modules``; returns those that failed (each logged)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(name)
            _log(f"not preloaded: {name} ({type(exc).__name__}: {exc})")
    return failed


def _resolve(entry: str) -> Callable[[list[str]], int | None]:
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


class Server:
    """The event loop: one thread (a fork copies only the forking thread), one selector over the
    listening socket, each job's connection and each job's pidfd, and a wake-up pipe for signals."""

    def __init__(
        self, path: str, parent: int | None, entry: str = ENTRY, start_env: Mapping[str, str] | None = None
    ) -> None:
        """``start_env``: the environment the server started with, before its imports (default: now's):
        a job must share it, and gets what the imports changed in it (``become_job``)."""
        self.path = path
        self.parent = parent
        self.entry = _resolve(entry)
        start_env = dict(os.environ if start_env is None else start_env)
        self.start_env = start_env
        self.fingerprint = fingerprint(start_env)
        #: what importing changed in the environment (e.g. torch's TORCHINDUCTOR_CACHE_DIR), as a fresh
        #: interpreter's imports would change the job's
        self.import_env = {k: v for k, v in os.environ.items() if start_env.get(k) != v}
        self.import_unset = sorted(set(start_env) - set(os.environ))
        self.jobs: dict[int, tuple[socket.socket, int]] = {}  # pid -> (connection, pidfd)
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        staging = f"{path}.{os.getpid()}"
        self.listener.bind(staging)
        self.listener.listen(64)
        os.rename(staging, path)  # appears only once it accepts
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def release(self, conn: socket.socket) -> None:
        """In a child: close the server's descriptors (detached first, so that no socket object closes
        a number the job has reused) and ``conn``, the child's own client's."""
        self.sel.close()
        signal.set_wakeup_fd(-1)
        sockets = [self.listener, conn, *(c for c, _ in self.jobs.values())]
        fds = [s.detach() for s in sockets] + [self.wake_r, self.wake_w]
        fds += [pidfd for _, pidfd in self.jobs.values()]
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def run(self) -> None:
        _log(f"ready on {self.path} (parent {self.parent})")
        while not self.stopping:
            if self.parent is not None and os.getppid() != self.parent:
                _log("its Snakemake is gone")
                break
            for key, _ in self.sel.select(timeout=1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 512)
                elif key.data[0] == "conn":
                    self._from_client(key.data[1])
                elif key.data[0] == "exit":
                    self._reap(key.data[1])
        self.close()

    def close(self) -> None:
        for pid in list(self.jobs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in list(self.jobs):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            conn, pidfd = self.jobs.pop(pid)
            conn.close()
            os.close(pidfd)
        remove_socket(self.path)
        self.listener.close()
        _log("stopped")

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10.0)  # a client sends its request at once
        try:
            request, fds = self._request(conn)
        except (OSError, ValueError) as exc:
            _log(f"bad request: {exc}")
            conn.close()
            return
        try:
            reason = self._refusal(conn, request)
            if reason:
                _log(f"runs cold: {reason}")
                conn.sendall(_COLD)
                conn.close()
                return
            pid = os.fork()
            if pid == 0:
                self._child(conn, fds, request)  # never returns
            conn.sendall(_FORKED)
            _log(f"job {pid}: {describe(request['argv'])}")
        except OSError as exc:
            _log(f"lost a client: {exc}")
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        pidfd = os.pidfd_open(pid)
        conn.setblocking(False)
        self.jobs[pid] = (conn, pidfd)
        self.sel.register(conn, selectors.EVENT_READ, ("conn", pid))
        self.sel.register(pidfd, selectors.EVENT_READ, ("exit", pid))

    @staticmethod
    def _request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
        header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        if len(header) != _HEADER.size or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise ValueError("no header and three descriptors")
        (size,) = _HEADER.unpack(header)
        body = _recv_exactly(conn, size)
        if len(body) != size:
            for fd in fds:
                os.close(fd)
            raise ValueError("truncated")
        return json.loads(body), fds

    def _refusal(self, conn: socket.socket, request: dict[str, Any]) -> str | None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            return f"uid {uid} is not the server's"
        env = request.get("env", {})
        extra = extra_python_path(env.get("PYTHONPATH", ""), self.start_env.get("PYTHONPATH", ""))
        if extra is None:
            return "another PYTHONPATH (not the server's with directories before it that shadow nothing)"
        request["extra_path"] = extra
        if request.get("fingerprint") != self.fingerprint:
            keys = (set(env) | set(self.start_env)) - PER_JOB_VARS - {"PYTHONPATH"}
            names = sorted(k for k in keys if env.get(k) != self.start_env.get(k))
            what = ", ".join(names) or "the interpreter, maxk, the CPU affinity or the limits"
            return f"another environment (differs in {what})"
        return None

    def _from_client(self, pid: int) -> None:
        if pid not in self.jobs:  # reaped earlier in the same batch of events
            return
        conn, _ = self.jobs[pid]
        try:
            data = conn.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client is gone (killed outright): so is its job
            self.sel.unregister(conn)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return
        for signum in data:  # signals the client caught, for the job's process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

    def _reap(self, pid: int) -> None:
        _, status = os.waitpid(pid, 0)
        _log(f"job {pid}: exit {os.waitstatus_to_exitcode(status)}")
        conn, pidfd = self.jobs.pop(pid)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn)
        conn.setblocking(True)
        with contextlib.suppress(OSError):
            conn.sendall(_STATUS.pack(status))
        conn.close()

    def _child(self, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
        """In the forked child: become the job, run it, exit with its status."""
        code = 1
        try:
            server = os.getppid()
            os.setsid()
            _set_pdeathsig(signal.SIGKILL)
            if os.getppid() != server:
                os._exit(1)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.release(conn)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            become_job(request, self.import_env, self.import_unset)
            code = run_entry(self.entry, request["argv"])
        except BaseException:
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()
        finally:
            os._exit(code)


def describe(argv: Sequence[str]) -> str:
    """A job's command for the server's log: its subcommand and its output (``--out``/``--output``)."""
    words = [w for w in argv[:2] if not w.startswith("-")][:2]
    for flag in ("--out", "--output"):
        if flag in argv[:-1]:
            words += [flag, argv[list(argv).index(flag) + 1]]
    return "maxk " + " ".join(words)


#: in a job: the server's standard output and error objects, replaced but perhaps held by a library
_SERVER_STREAMS: list[Any] = []


def become_job(
    request: dict[str, Any], import_env: Mapping[str, str] = {}, import_unset: Sequence[str] = ()
) -> None:
    """The forked child takes on the client's directory, umask, environment (with what the server's
    imports set or unset in theirs), arguments and standard streams, and what a fresh interpreter
    would derive from them: torch's and the BLAS libraries' thread counts, Python's and numpy's
    random seeds, ``tempfile``'s directory."""
    import io
    import random

    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(import_env)
    for name in import_unset:
        os.environ.pop(name, None)
    sys.argv = [request.get("argv0") or "maxk", *request["argv"]]
    if request.get("extra_path"):  # where a fresh interpreter puts PYTHONPATH: after the script's directory
        sys.path[1:1] = request["extra_path"]
        importlib.invalidate_caches()
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    streams = []
    for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
        tty = os.isatty(fd)
        buffering = 0 if unbuffered and mode == "w" else -1
        stream = open(fd, mode + "b", buffering=buffering, closefd=False)  # noqa: SIM115 (the job's stream)
        streams.append(
            io.TextIOWrapper(
                stream,
                encoding=sys.stdout.encoding if mode == "w" else sys.stdin.encoding,
                errors="backslashreplace" if fd == 2 else "strict",
                line_buffering=tty or fd == 2,
                write_through=unbuffered and mode == "w",
            )
        )
    _SERVER_STREAMS[:] = [sys.stdout, sys.stderr]  # a library may hold them (a handler made at import)
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]
    tempfile.tempdir = None  # chosen again from this job's TMPDIR
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "")
    if blas.isdigit() and int(blas) > 0:
        set_openblas_threads(int(blas))
    name = " ".join(request["argv"][:1]) or "maxk"
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(f"maxk {name}".encode()[:15]), 0, 0, 0)  # PR_SET_NAME


#: the thread-count setters of the OpenBLAS builds numpy and scipy bundle (and a system one)
_OPENBLAS_SETTERS = (
    "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_", "openblas_set_num_threads",
)  # fmt: skip


def set_openblas_threads(n: int) -> list[str]:
    """Set every loaded OpenBLAS's thread count to ``n`` (what it read from ``OPENBLAS_NUM_THREADS`` when
    loaded, in a fresh interpreter; as ``threadpoolctl`` does). Returns the libraries set."""
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    done = []
    for path in libs:
        with contextlib.suppress(OSError):
            lib = ctypes.CDLL(path)
            for name in _OPENBLAS_SETTERS:
                if hasattr(lib, name):
                    getattr(lib, name)(ctypes.c_int(n))
                    done.append(path)
                    break
    return done


def run_entry(entry: Callable[[list[str]], int | None], argv: list[str]) -> int:
    """``entry(argv)`` as ``python -m maxk`` would run it: its return or ``SystemExit`` as the status,
    an uncaught exception printed with status 1, exit handlers run, streams flushed."""
    import atexit
    import traceback

    code = 0
    try:
        code = entry(argv) or 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, *_SERVER_STREAMS):  # the server's: now on the job's fds
        with contextlib.suppress(BaseException):
            stream.flush()
    return int(code) & 0xFF


#: device files of a GPU driver (NVIDIA's, AMD's ROCm)
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")


def gpu_present() -> bool:
    """Whether this machine has a GPU driver: the server then serves nothing (its clients start cold).
    torch's ``cuda.is_available()``, which an import may call, initialises CUDA, and a forked child
    cannot use CUDA after its parent did: the warm start is for the CPU-only miniature."""
    return any(os.path.exists(device) for device in GPU_DEVICES)


def serve(path: str, parent: int | None = None, entry: str = ENTRY, modules: Sequence[str] = PRELOAD) -> int:
    """The ``maxk job-server`` process: preload ``modules``, then fork a job per client until stopped
    (``SIGTERM``) or its ``parent`` is gone."""
    if parent is not None:
        _set_pdeathsig(signal.SIGTERM)
        if os.getppid() != parent:
            return 0
    if gpu_present():
        _log("a GPU machine: every job starts cold (a CUDA context made at import dies in a fork)")
        return 0
    started, start_env = time.perf_counter(), dict(os.environ)
    preload(modules)
    import gc

    gc.collect()
    gc.freeze()  # the imported objects stay in pages the children share (no refcount-free writes by gc)
    _log(f"imported {len(modules)} modules in {time.perf_counter() - started:.1f} s")
    sys.stdout.flush()
    sys.stderr.flush()
    Server(path, parent, entry, start_env).run()
    return 0
