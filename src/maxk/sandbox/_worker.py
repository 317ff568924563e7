"""Sandbox worker: a pre-started, pre-imported fork server that runs untrusted programs.

Started by ``maxk.sandbox.scorer`` as ``python -I _worker.py CONFIG_JSON`` from an empty environment
(the caller is never forked). Standard library only, because it runs as a script; it loads its
two siblings by path: ``wire`` (framing, operations, statuses, the value codec) and ``isolation``
(one function per isolation primitive).

Once per worker: pre-import the modules programs use, close inherited descriptors, drop root to an
unprivileged uid, enter new user + network + IPC namespaces and a PID namespace whose pid 1 is the
worker itself, restrict the filesystem with Landlock (read-only interpreter and system dirs,
read-write private scratch, no TCP), build the Landlock signal-scope ruleset, load the seccomp
filter on itself (every child inherits it), become a child subreaper, non-dumpable,
``gc.freeze()``. Per program (``call``, and ``stdio``: its cases one after the other in the same
child while it survives them): a child forked *before* the
program is known (a spare, forked while the orchestrator is busy) gets a fresh empty cwd, memfd
stdio, rlimits, no capabilities, its own Landlock signal-scope domain (one syscall) and, without a
pid namespace or Landlock, a second seccomp filter for what the worker itself still needs (kill,
setsid, file writes); then it waits for the program (compiled once here, sent as marshal bytes)
and runs it. Each layer is applied where it is cheapest: loading the filter per child cost ~0.4 ms.

The worker never receives expected outputs or assertion code: only programs, call arguments and
stdin. Every verdict is decided by the trusted orchestrator; the worker only reports how the child
ended (exit status, raw stdout, or a candidate's return value as tagged JSON of builtin types).

Protocol (orchestrator <-> worker on stdin/stdout, worker <-> child on pipes): ``wire``'s frames.
Requests to the worker may be pipelined; replies come back in order.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import resource
import select
import signal
import sys
import time

if __package__:  # imported by the trusted side or the tests
    from maxk.sandbox import isolation as iso
    from maxk.sandbox import wire
else:  # run as a script (``python -I``): the sibling modules by path, then the path as it was
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import isolation as iso
    import wire

    del sys.path[0]

EXIT_MEMORY = 113  # child's own report: MemoryError escaped the program
EXIT_INTERNAL = 114  # child's harness failed before the program ran
PREFETCH_REPLY_BYTES = 4 << 20  # prefetched reply frames held for one load reply (more go live)
SPARE_CPU_S = 3600  # a spare child's CPU limit until its program arrives (then lowered to the budget)


class _Child:
    """A forked child: pid, scratch cwd, request/reply pipes (worker side), stdin/stdout memfds."""

    __slots__ = ("cwd", "pid", "rep", "req", "stdin", "stdout")

    def __init__(self, pid: int, cwd: str, req: int, rep: int, stdin: int, stdout: int) -> None:
        self.pid, self.cwd, self.req, self.rep, self.stdin, self.stdout = pid, cwd, req, rep, stdin, stdout


# ---------------------------------------------------------------------------------------------
# the worker


class Worker:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.layers: dict[str, object] = {}
        self.notes: list[str] = []
        self.child: _Child | None = None  # the running program (call problems)
        self.spare: _Child | None = None  # pre-forked, fully isolated, waiting for a program
        self.counter = 0
        self.deferred: list = []
        self.blob = b""  # the current program, compiled once, as marshal bytes
        self._nproc_at, self._nproc_cached = -1e9, 0
        self.token = None  # the orchestrator's id of the program whose child is alive
        self.reply_bytes = 0  # prefetched reply bytes held for the current load
        self.entry, self.cpu, self.load_timeout = "", 1.0, 1.0
        self.child_bpf = b""  # loaded per child, on top of the worker's own filter (see setup)
        self.landlock_abi = 0
        self.scope_ruleset = -1  # Landlock ruleset fd enforced by each child (signal/socket scoping)
        self.path_fds: list[int] = []  # sys.path directories, held open (see iso.pin_sys_path)

    # -- start-up ---------------------------------------------------------------------------
    def _preload(self, modules: list[str]) -> None:
        for mod in modules:
            try:
                __import__(mod)
            except Exception as exc:
                self.notes.append(f"preload {mod}: {exc!r}")

    def _layer(self, name: str, value: object, why_not: str | None) -> object:
        """Record one isolation step's outcome (its value, or False and a note saying why)."""
        self.layers[name] = value
        if why_not:
            self.notes.append(why_not)
        return value

    def setup(self) -> None:
        cfg = self.cfg
        want = cfg["layers"]
        # the only variable allowed is the C-locale coercion (PEP 538) the interpreter sets itself
        env_empty = set(os.environ) <= {"LC_CTYPE"}
        # A preloaded numpy would start OpenBLAS/OpenMP threads, and a threaded process cannot enter
        # a new user namespace (EINVAL): keep such libraries single-threaded (cleared below).
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
        self._preload(iso.PRELOAD + list(cfg.get("preload", [])))
        # descriptors: keep only stdio (our channel); stderr goes to the orchestrator's log
        os.closerange(3, 1 << 16)
        self.layers["closed_fds"] = True
        original_path = list(sys.path)
        if want.get("landlock", True) and iso.landlock_abi():
            self.path_fds = iso.pin_sys_path(skip=os.path.dirname(os.path.abspath(__file__)))
        else:
            self._preload(iso.PRELOAD_UNPINNED)
        self.layers["empty_env"] = env_empty
        os.environ.clear()
        # Each step: (what is active, or False; why not). The order matters: the uid is dropped
        # before the user namespace is entered, the scratch is bounded before Landlock confines
        # writes to it, and seccomp goes last (it denies what the steps before it need).
        self._layer("drop_uid", *iso.drop_uid(want.get("drop_uid", True), int(cfg.get("uid", 65534))))
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
        userns = want.get("userns", True) and self._layer("userns", *iso.user_namespaces())
        self.layers["userns"] = self.layers["netns"] = self.layers["ipcns"] = bool(userns)
        self.layers["pidns"] = bool(
            userns and want.get("pidns", True) and self._layer("pidns", *iso.pid_namespace())
        )
        iso.set_name(b"maxk-sbx-worker")
        iso.prctl(iso.PR_SET_DUMPABLE, 0)
        self.layers["non_dumpable"] = True
        iso.prctl(iso.PR_SET_CHILD_SUBREAPER, 1)
        self.scratch = iso.make_scratch([str(cfg.get("scratch_root") or "/tmp"), "/tmp", "/var/tmp"])
        self.layers["scratch_quota"] = False
        if userns:
            mb, inodes = int(cfg["scratch_mb"]), int(cfg["scratch_inodes"])
            self._layer("scratch_quota", *iso.bounded_scratch(self.scratch, mb, inodes))
        if not self.layers["scratch_quota"]:
            self.notes.append("no bounded scratch: programs may not write files (seccomp, when available)")
        iso.prctl(iso.PR_SET_NO_NEW_PRIVS, 1)
        self.layers["landlock"] = False
        abi = iso.landlock_abi() if want.get("landlock", True) else 0
        if abi:
            value, notes = iso.landlock_files(
                abi, self.scratch, list(cfg.get("preload", [])), self.layers["pidns"]
            )
            self.layers["landlock"] = value
            self.notes += notes
            self.landlock_abi = abi if value else 0
        if self.path_fds and not self.layers["landlock"]:  # pinned paths are safe only under Landlock
            self._preload(iso.PRELOAD_UNPINNED)  # (still readable through the descriptors)
            iso.unpin_sys_path(self.path_fds, original_path)
            self.path_fds = []
        if self.landlock_abi >= 6:  # built once; each child only enforces it (one syscall)
            try:
                self.scope_ruleset = iso.landlock_ruleset(
                    abi, [], [], fs=False, scope=iso.LL_SCOPE_SIGNAL | iso.LL_SCOPE_ABSTRACT_UNIX
                )
            except OSError as exc:
                self.notes.append(f"landlock signal scope failed: {exc}")
        self.layers["seccomp"] = False
        if want.get("seccomp", True):
            # file writes only where both confined (Landlock) and bounded (tmpfs scratch)
            confined = bool(self.layers["landlock"] and self.layers["scratch_quota"])
            value, self.child_bpf, note = iso.seccomp_filters(
                kill=not self.layers["pidns"], fs_write=not confined
            )
            self._layer("seccomp", value, note)
        self.layers["rlimits"] = True
        self.layers["fresh_cwd"] = True
        self.layers["process_group_kill"] = True
        self.layers["subreaper"] = True
        # a spare child is pre-forked between requests only with a pid namespace (see _sweep)
        self.use_spare = bool(self.layers["pidns"])
        self.devnull = os.open("/dev/null", os.O_RDWR)
        # Children must not traverse (and so copy-on-write) the whole pre-imported heap in their GCs.
        gc.collect()
        gc.freeze()

    # -- children ---------------------------------------------------------------------------
    def _nproc_limit(self) -> int:
        n = int(self.cfg["nproc"])
        if self.layers["userns"]:
            return n
        # without a user namespace the count is per uid, machine-wide: our uid's tasks + margin
        # (re-counted at most once a second: the scan costs a few ms)
        now = time.monotonic()
        if now - self._nproc_at < 1.0:
            return self._nproc_cached
        try:
            tasks = sum(
                1 for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid == os.getuid()
            )
        except OSError:
            tasks = 0
        self._nproc_at, self._nproc_cached = now, tasks + n
        return tasks + n

    def _child_setup(
        self, cwd: str, stdin_fd: int, stdout_fd: int, keep: tuple[int, ...], cpu: float
    ) -> None:
        """In the forked child: everything between fork and running untrusted code."""
        iso.set_name(b"maxk-sbx-child")
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()  # own process group: killpg reaches its descendants without a pid namespace
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(self.devnull, 2)
        lo = 3
        for fd in sorted(keep):
            if fd > lo:
                os.closerange(lo, fd)
            lo = fd + 1
        os.closerange(lo, 1 << 16)
        os.chdir(cwd)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the output cap must kill
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        cpu_s = max(1, int(cpu + 0.999))
        mem = int(self.cfg["memory_mb"]) << 20
        out = int(self.cfg["output_bytes"])
        nproc = self._nproc_limit()
        for res, val in (
            (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
            (resource.RLIMIT_AS, (mem, mem)),
            (resource.RLIMIT_FSIZE, (out, out)),
            (resource.RLIMIT_NOFILE, (int(self.cfg["nofile"]),) * 2),
            (resource.RLIMIT_NPROC, (nproc, nproc)),
            (resource.RLIMIT_CORE, (0, 0)),
        ):
            resource.setrlimit(res, val)
        if self.layers["userns"]:
            iso.drop_capabilities()
        if self.scope_ruleset >= 0:  # a nested domain per child: no signals to the worker or siblings
            iso.landlock_enforce(self.scope_ruleset)
            os.close(self.scope_ruleset)
        if self.child_bpf:
            iso.load_seccomp(self.child_bpf)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115

    def _prefork(self) -> None:
        """Fork a spare child and take it through every isolation step; it then waits for a program."""
        self.counter += 1
        cwd = os.path.join(self.scratch, f"c{self.counter}")
        os.mkdir(cwd, 0o700)
        stdin = os.memfd_create("stdin", os.MFD_CLOEXEC)
        stdout = os.memfd_create("stdout", os.MFD_CLOEXEC)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                keep = (req_r, rep_w, stdin, stdout, self.scope_ruleset, *self.path_fds)
                self._child_setup(cwd, stdin, stdout, tuple(fd for fd in keep if fd >= 0), SPARE_CPU_S)
                self._child_main(req_r, rep_w, stdin, stdout)
            finally:
                os._exit(EXIT_INTERNAL)
        os.close(req_r)
        os.close(rep_w)
        self.spare = _Child(pid, cwd, req_w, rep_r, stdin, stdout)

    def _take(self) -> _Child:
        if self.spare is None:
            self._prefork()
        child, self.spare = self.spare, None
        return child

    def _start(self, child: _Child, header: dict) -> bool:
        """Send the program (header frame + marshal frame) to a waiting child."""
        try:  # one frame: JSON header, newline, marshal bytes (read exactly: nothing may be over-read)
            wire.send_bytes(child.req, json.dumps(header).encode() + b"\n" + self.blob)
            return True
        except OSError:
            return False

    def _child_main(self, req: int, rep: int, stdin: int, stdout: int) -> None:
        """Child: wait for the program, lower the CPU limit to its budget, run it."""
        try:
            head, blob = wire.recv_bytes(req).split(b"\n", 1)
        except (EOFError, ValueError):
            os._exit(0)
        header = json.loads(head)
        code = marshal.loads(blob)  # produced by the worker's own compile()
        del head, blob
        cpu = float(header["cpu"])
        cpu_s = max(1, int(cpu + 0.999))
        if header.get("mode") == "stdio":
            # the cases' CPU seconds in all, a backstop: each case's own limit is set before it runs
            cases = max(1, int(header.get("cases", 1)))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cases * (cpu_s + 1)))
            self._run_cases(code, cpu, req, rep, stdin, stdout)
            os._exit(0)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        self._serve(code, header["entry"], req, rep)

    def _run_cases(self, code: object, cpu: float, req: int, rep: int, stdin: int, stdout: int) -> None:
        """Child (stdio): run the program once per case the worker sends, as a fresh ``__main__``.

        Before each case: stdin and stdout are the memfds again (a program may have closed or
        replaced descriptor 0 or 1: ``open(0).read()`` closes 0), and the soft CPU limit is what the
        process has used plus the case's budget. The reply echoes the case's sequence number and
        says how the program ended. Everything here after the first case runs in a process the
        program has run in: whatever it changed can only affect its own later cases, and the
        worker judges each case's time from outside (the process CPU clock and a wall deadline)."""
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        g: dict = {}
        while True:
            try:
                seq = wire.recv_bytes(req)
            except (EOFError, OSError):
                return
            # the last case's objects go first: a file it opened on 0 or 1 closes that descriptor
            sys.stdin = sys.stdout = None  # type: ignore[assignment]
            g.clear()
            gc.collect()
            os.dup2(stdin, 0)
            os.dup2(stdout, 1)
            used = resource.getrusage(resource.RUSAGE_SELF)
            soft = max(1, int(used.ru_utime + used.ru_stime + cpu + 0.999))
            resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard), hard))
            sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            g = {"__name__": "__main__", "__builtins__": __builtins__}
            rc = self._run_main(code, g)
            wire.send_frame(rep, f"{seq.decode()} {rc & 0xFF}")
            if rc == EXIT_MEMORY:
                return  # the heap may be in any state: the next case gets a fresh child

    @staticmethod
    def _run_main(code: object, g: dict) -> int:
        """Child (stdio): run the program as ``__main__`` in ``g``; flush; return the exit code."""
        rc = 0
        try:
            exec(code, g)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except MemoryError:
            rc = EXIT_MEMORY
        except BaseException:
            rc = 1
        try:
            sys.stdout.flush()
        except MemoryError:
            rc = EXIT_MEMORY
        except BaseException:
            rc = rc or 1
        return rc

    def _kill_reap(self, child: _Child) -> int:
        """SIGKILL the child (and its process group), reap it, sweep leftovers; return its wait status."""
        return self._kill_reap_cpu(child)[0]

    def _kill_reap_cpu(self, child: _Child) -> tuple[int, float]:
        """``_kill_reap``, also returning the CPU seconds (user + system) the child used."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        if not self.layers["pidns"]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        try:
            _, status, usage = os.wait4(child.pid, 0)
            cpu = usage.ru_utime + usage.ru_stime
        except ChildProcessError:
            status, cpu = signal.SIGKILL, 0.0
        self._sweep()
        return status, cpu

    @staticmethod
    def _release(child: _Child) -> None:
        for fd in (child.req, child.rep, child.stdin, child.stdout):
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            os.rmdir(child.cwd)  # the usual case: the program left nothing behind (one syscall)
        except OSError:
            iso.remove_tree(child.cwd)

    def _reap_spare(self) -> None:
        if self.spare is not None:
            spare, self.spare = self.spare, None
            self._kill_reap(spare)
            self._release(spare)

    def _sweep(self) -> None:
        """Kill and reap every remaining descendant (setsid escapees reparented to us, the subreaper)."""
        if self.layers["pidns"]:
            # we are pid 1: every leftover is in our namespace and kill(-1) reaches all but us
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            if self.spare is not None:  # killed too; its zombie is reaped below
                spare, self.spare = self.spare, None
                self._release(spare)
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    return
                except InterruptedError:
                    continue
        for _ in range(1000):
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid:
                continue
            me = os.getpid()
            found = False
            try:
                for p in os.listdir("/proc"):
                    if not p.isdigit():
                        continue
                    try:
                        with open(f"/proc/{p}/stat", "rb") as fh:
                            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        continue
                    if ppid == me:
                        found = True
                        with contextlib.suppress(OSError):
                            os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
            if not found:
                time.sleep(0.001)
            try:
                os.waitpid(-1, 0 if found else os.WNOHANG)
            except ChildProcessError:
                return

    @staticmethod
    def _status(status: int) -> str:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig in (signal.SIGXCPU, signal.SIGKILL):
                return wire.TIMEOUT  # SIGKILL also comes from the CPU hard limit
            if sig == signal.SIGXFSZ:
                return wire.OUTPUT_LIMIT
            return wire.RUNTIME_ERROR
        code = os.WEXITSTATUS(status)
        if code == 0:
            return wire.EXIT_OK
        if code == EXIT_MEMORY:
            return wire.MEMORY
        return wire.RUNTIME_ERROR

    # -- stdio ------------------------------------------------------------------------------
    def run_stdio(self, msg: dict) -> dict:
        """Run the program on each input: one child for all cases while it survives them (a fork
        costs ~2 ms, a case run in a waiting child ~0.1 ms); a child that dies, times out or runs out
        of memory is replaced for the next case."""
        try:
            code = compile(msg["program"], "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            return {"status": wire.SYNTAX_ERROR}
        self.blob = marshal.dumps(code)
        inputs = msg["inputs"]
        timeout = float(msg["timeout"])
        wall = float(msg.get("wall") or msg["timeout"])
        max_timeouts = int(msg.get("max_timeouts") or 0)
        results: list[dict] = []
        child: _Child | None = None
        try:
            for i, text in enumerate(inputs):
                if max_timeouts and sum(r["status"] == wire.TIMEOUT for r in results) >= max_timeouts:
                    results.append({"status": wire.TIMEOUT, "stdout": "", "elapsed": 0.0})  # budget spent
                    continue
                if child is None:
                    child = self._take()
                    if not self._start(child, {"mode": "stdio", "cpu": timeout, "cases": len(inputs) - i}):
                        self._kill_reap(child)
                        self._release(child)
                        child = None
                        results.append({"status": wire.SANDBOX_ERROR, "stdout": "", "elapsed": 0.0})
                        continue
                result, alive = self._run_stdio_case(child, i, text, timeout, wall)
                results.append(result)
                if alive and self.cfg.get("child_per_case"):
                    self._kill_reap(child)
                    alive = False
                if not alive:
                    self._release(child)
                    child = None
        finally:
            if child is not None:
                self._kill_reap(child)
                self._release(child)
        return {"status": wire.DONE, "results": results}

    @staticmethod
    def _cpu_clock(pid: int) -> float | None:
        """CPU seconds the process ``pid`` has used (its CPU-time clock, read from outside), or None."""
        try:
            return time.clock_gettime((~pid << 3) | 2)  # Linux: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
        except OSError:
            return None

    def _run_stdio_case(
        self, child: _Child, seq: int, text: str, timeout: float, wall: float
    ) -> tuple[dict, bool]:
        """Run one case in ``child``: ``timeout`` seconds of CPU time (the soft RLIMIT_CPU the child
        sets, then the exact figure from its CPU clock), and ``wall`` seconds of wall clock, which only
        a program that sleeps or blocks can reach: a busy program is judged by the CPU time it used,
        however loaded the machine is. Returns the result and whether the child can run another case."""
        for fd in (child.stdin, child.stdout):  # shared offsets: the child reads and writes from 0
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
        view = memoryview(text.encode())
        while view:
            view = view[os.write(child.stdin, view) :]
        os.lseek(child.stdin, 0, os.SEEK_SET)
        cpu0 = self._cpu_clock(child.pid)
        start = time.monotonic()
        deadline = start + wall
        alive, cpu = False, 0.0
        try:
            wire.send_bytes(child.req, str(seq).encode())
            reply = wire.recv_frame(child.rep, deadline, limit=64, exact=True)
        except TimeoutError:
            kind, reply = wire.TIMEOUT, None
        except (OSError, ValueError, UnicodeDecodeError, wire.FrameTooLarge):
            kind, reply = wire.RUNTIME_ERROR, None  # the program broke its own channel
        else:
            kind = None
        parts = reply.split(" ") if isinstance(reply, str) else []
        if kind is None and len(parts) == 2 and parts[0] == str(seq) and parts[1].isdigit():
            rc = int(parts[1])
            kind = wire.EXIT_OK if rc == 0 else wire.MEMORY if rc == EXIT_MEMORY else wire.RUNTIME_ERROR
            now = self._cpu_clock(child.pid)
            if now is not None and cpu0 is not None:
                cpu, alive = now - cpu0, rc != EXIT_MEMORY
        elif kind is None and reply is None:  # the child ended (or closed its reply pipe): wait for it
            kind = self._wait(child.pid, deadline)  # None: it exited in time (its status says how)
        elif kind is None:
            kind = wire.RUNTIME_ERROR  # a reply the harness did not write: the program forged it
        if not alive:
            status, total = self._kill_reap_cpu(child)
            cpu = total - (cpu0 or 0.0)
            if kind is None:
                kind = self._status(status)
        if cpu > timeout and kind in (wire.EXIT_OK, wire.RUNTIME_ERROR):
            kind = wire.TIMEOUT  # RLIMIT_CPU rounds up to whole seconds; the CPU clock is exact
            alive = False
        size, cap = os.fstat(child.stdout).st_size, int(self.cfg["output_bytes"])
        os.lseek(child.stdout, 0, os.SEEK_SET)
        out = os.read(child.stdout, min(size, cap)) if size else b""
        if size >= cap and kind in (wire.EXIT_OK, wire.RUNTIME_ERROR):
            kind = wire.OUTPUT_LIMIT
        if alive and kind not in (wire.EXIT_OK, wire.RUNTIME_ERROR):
            self._kill_reap(child)
            alive = False
        elapsed = time.monotonic() - start
        return {"status": kind, "stdout": out.decode("utf-8", "replace"), "elapsed": elapsed}, alive

    def _wait(self, pid: int, deadline: float) -> str | None:
        """Wait for the child to exit before ``deadline``; 'timeout' if it did not (caller kills it)."""
        try:
            pfd = os.pidfd_open(pid)
        except OSError:
            pfd = -1
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return wire.TIMEOUT
                if pfd >= 0:
                    ready, _, _ = select.select([pfd], [], [], left)
                    if ready:
                        return None
                else:
                    wpid, _ = os.waitpid(pid, os.WNOHANG)
                    if wpid:
                        raise RuntimeError("unexpected reap")
                    time.sleep(min(left, 0.002))
        finally:
            if pfd >= 0:
                os.close(pfd)

    # -- call -------------------------------------------------------------------------------
    def end_child(self) -> dict | None:
        child, self.child = self.child, None
        if child is None:
            return None
        status = self._kill_reap(child)
        self._release(child)
        return {"status": self._status(status)}

    def load(self, msg: dict) -> dict:
        """Compile and start the program; then answer the prefetched ``calls`` (per case, a list of
        encoded calls sharing the case's time budget; a case stops at a call the child does not
        survive), re-forking the child for the next case after a crash or timeout; keep the child
        only if ``keep``. One round trip."""
        self.end_child()
        try:
            code = compile(msg["program"], "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            return {"status": wire.SYNTAX_ERROR}
        self.blob = marshal.dumps(code)
        self.entry, self.cpu, self.load_timeout = msg["entry_point"], float(msg["cpu"]), float(msg["timeout"])
        self.token = msg.get("token")
        reply = self._spawn()
        if reply.get("status") != wire.READY:
            return reply
        cases = msg.get("calls") or []
        self.reply_bytes = 0
        results = [self._prefetch(payloads, float(msg["call_timeout"])) for payloads in cases]
        if cases:
            reply = dict(reply, results=results)
        if not msg.get("keep", True):
            self.deferred.append(self.end_child)  # after the reply: the orchestrator need not wait
        reply["alive"] = self.child is not None and bool(msg.get("keep", True))
        return reply

    def _prefetch(self, payloads: list[str], budget: float) -> dict | None:
        if not payloads:
            return None
        if self.child is None:
            again = self._spawn()
            if again.get("status") != wire.READY:
                return {"replies": [again]}
        start = time.monotonic()
        replies: list[dict] = []
        for payload in payloads:
            left = start + budget - time.monotonic()
            if left <= 0:
                break  # the case's budget is spent: the trusted side will say so
            if self.reply_bytes > PREFETCH_REPLY_BYTES:
                break  # the load's reply is big enough: the rest of the calls go live
            reply = self.call({"payload": payload, "timeout": left})
            reply["t"] = time.monotonic() - start  # the case's budget spent so far
            self.reply_bytes += wire.LAST_FRAME[0]
            replies.append(reply)
            if reply.get("status") not in wire.CALL_REPLIES:
                break  # the child is gone; so is the rest of this case
        return {"replies": replies}

    def _spawn(self) -> dict:
        self.child = self._take()
        if not self._start(self.child, {"mode": "call", "entry": self.entry, "cpu": self.cpu}):
            self.end_child()
            return {"status": wire.SANDBOX_ERROR, "detail": "child gone before the program arrived"}
        return self._await_reply(self.load_timeout)

    @staticmethod
    def _serve(code: object, entry: str, req: int, rep: int) -> None:
        """Child: run the program once, then answer calls of ``entry`` until the worker kills us."""
        g = {"__name__": "__solution__", "__builtins__": __builtins__}
        try:
            exec(code, g)
            fn = g.get(entry)
            if not callable(fn):
                wire.send_frame(rep, {"status": wire.RUNTIME_ERROR, "detail": f"no function {entry!r}"})
                return
            wire.send_frame(rep, {"status": wire.READY})
        except MemoryError:
            wire.send_frame(rep, {"status": wire.MEMORY})
            return
        except BaseException as exc:
            wire.send_frame(rep, {"status": wire.RUNTIME_ERROR, "detail": type(exc).__name__})
            return
        while True:
            msg = wire.recv_frame(req)
            if msg is None:
                return
            try:
                args, kwargs = msg
                result = fn(*[wire.decode(a) for a in args], **{k: wire.decode(v) for k, v in kwargs})
                try:
                    payload = wire.encode(result)
                except (TypeError, ValueError, RecursionError):
                    reply = {"status": wire.RETURNED_UNSUPPORTED, "detail": type(result).__name__}
                else:
                    reply = {"status": wire.RETURNED, "value": payload}
            except MemoryError:
                reply = {"status": wire.MEMORY}
            except RecursionError:
                reply = {"status": wire.RAISED, "exc": "RecursionError"}
            except BaseException as exc:
                reply = {"status": wire.RAISED, "exc": type(exc).__name__}
            try:
                wire.send_frame(rep, reply)
            except MemoryError:
                wire.send_frame(rep, {"status": wire.MEMORY})

    def _await_reply(self, timeout: float) -> dict:
        """Read the child's next frame before the deadline; on death or timeout, kill it and say why."""
        start = time.monotonic()
        try:
            reply = wire.recv_frame(self.child.rep, start + timeout, limit=int(self.cfg["output_bytes"]))
        except TimeoutError:
            self.end_child()
            return {"status": wire.TIMEOUT}
        except wire.FrameTooLarge:
            self.end_child()
            return {"status": wire.OUTPUT_LIMIT}
        except (ValueError, UnicodeDecodeError):
            self.end_child()
            return {"status": wire.RUNTIME_ERROR, "detail": "malformed reply"}
        if reply is None:
            ended = self.end_child() or {"status": wire.RUNTIME_ERROR}
            if ended["status"] == wire.EXIT_OK:
                ended["status"] = wire.RUNTIME_ERROR
            return ended
        if not isinstance(reply, dict) or "status" not in reply:
            self.end_child()
            return {"status": wire.RUNTIME_ERROR, "detail": "malformed reply"}
        if reply.get("status") not in wire.ALIVE:
            self.end_child()
        return reply

    def call(self, msg: dict) -> dict:
        if self.child is None or msg.get("token", self.token) != self.token:
            return {"status": wire.STALE, "detail": "not the program loaded now"}
        try:
            wire.send_bytes(self.child.req, msg["payload"].encode())
        except (BrokenPipeError, OSError):
            ended = (self.end_child() or {}).get("status")
            return {"status": wire.RUNTIME_ERROR if ended in (None, wire.EXIT_OK) else ended}
        return self._await_reply(float(msg["timeout"]))

    # -- loop -------------------------------------------------------------------------------
    def loop(self) -> None:
        inp, outp = 0, 1
        hello = {"status": wire.HELLO, "layers": self.layers, "notes": self.notes, "scratch": self.scratch}
        wire.send_frame(outp, hello)
        while True:
            msg = wire.recv_frame(inp, exact=True)
            if msg is None or msg.get("op") == wire.OP_EXIT:
                break
            op = msg["op"]
            if op == wire.OP_STDIO:
                reply = self.run_stdio(msg)
            elif op == wire.OP_LOAD:
                reply = self.load(msg)
            elif op == wire.OP_CALL:
                reply = self.call(msg)
            elif op == wire.OP_SYNC:  # answered after every earlier clean-up has run
                reply = {"status": wire.SYNCED}
            elif op == wire.OP_END:
                if msg.get("token", self.token) == self.token:
                    self.deferred.append(self.end_child)
                reply = {"status": wire.ENDED}
            else:
                reply = {"status": wire.SANDBOX_ERROR, "detail": f"unknown op {op!r}"}
            wire.send_frame(outp, reply)
            # the spare forked below must not inherit the previous request, reply or program
            msg = reply = None
            self.blob = b""
            while self.deferred:  # clean-up that need not delay the reply
                self.deferred.pop(0)()
            if self.use_spare and self.spare is None and self.child is None:
                self._prefork()  # overlaps the next program's fork and isolation with the orchestrator
        self.end_child()
        self._reap_spare()
        iso.remove_tree(self.scratch)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    w = Worker(cfg)
    try:
        w.setup()
    except Exception as exc:
        wire.send_frame(1, {"status": wire.SETUP_FAILED, "detail": repr(exc)})
        raise
    if cfg.get("debug"):  # MAXK_SANDBOX_DEBUG: periodic stack dumps to the inherited stderr
        import faulthandler

        # only after setup: its watchdog thread would make iso.unshare(iso.CLONE_NEWUSER) fail (EINVAL),
        # so debugging would silently run with fewer layers than the real thing
        faulthandler.dump_traceback_later(float(cfg["debug"]), repeat=True)
    w.loop()


if __name__ == "__main__":
    main()
