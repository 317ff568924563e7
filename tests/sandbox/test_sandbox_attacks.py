"""Adversarial suite: every attack must score 0 and leave the machine as it was.

Each attack program only produces correct answers if its attack worked (reading the tests, reaching
the network, finding a secret, surviving a kill ...), so a non-zero score means the attack succeeded.
The suite runs twice: with every isolation layer this machine offers ("full") and with only the
portable minimum (rlimits, uid drop, scrubbed env/fds/cwd, process-group kill, subreaper, seccomp).
It runs as root (a container: the sandbox drops to ``nobody``) and as an ordinary user (the sandbox
runs as the caller's own uid: Landlock, not the uid, guards the files). Where a mode leaves a threat
without a guard (``maxk.sandbox.exposed_threats``, what the doctor prints and training refuses), the
attacks only that threat's guards stop are checked to succeed where they deterministically can: the
exposure the doctor names is real, not a guess.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from maxk.sandbox import Scorer, exposed_threats, isolation_level

TOKEN = uuid.uuid4().hex[:12]
SECRET = f"s3cr3t-{TOKEN}"
AS_ROOT = os.getuid() == 0
SANDBOX_UID = 65534 if AS_ROOT else os.getuid()  # root drops to nobody; a user has no uid to drop to

ADD = {
    "id": "attack/add",
    "tests": {
        "format": "call",
        "entry_point": "add",
        "setup": "import math\n",
        "cases": [
            "assert add(1, 2) == 3",
            "assert add(5, 7) == 12",
            "assert abs(add(0.5, 0.25) - 0.75) < 1e-9",
        ],
    },
}
SUM = {
    "id": "attack/sum",
    "tests": {
        "format": "stdio",
        "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}],
    },
}
GOOD_CALL = "def add(a, b):\n    return a + b\n"
GOOD_STDIO = "a, b = map(int, input().split())\nprint(a + b)\n"


def _call_attacks(ctx: dict[str, str]) -> dict[str, str]:
    """name -> program for the `add` problem; ``ctx`` has paths and ports set up by the fixture."""
    return {
        "infinite_loop": "while True:\n    pass\n",
        "infinite_loop_in_call": "def add(a, b):\n    while True:\n        pass\n",
        "sleep_forever_ignore_signals": (
            "import signal, time\n"
            "for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):\n"
            "    signal.signal(s, signal.SIG_IGN)\n"
            "def add(a, b):\n    time.sleep(10**6)\n"
        ),
        "fork_bomb": (
            "import os, posix, time\nn = 0\n"
            "for i in range(300):\n"
            "    try:\n        pid = posix.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n"
            "        try:\n            os.setsid()\n        except OSError:\n            pass\n"
            "        time.sleep(1000)\n        os._exit(0)\n"
            "    n += 1\n"
            "def add(a, b):\n    return a + b if n >= 250 else None\n"
        ),
        "thread_bomb": (
            "import threading, time\nstarted = 0\n"
            "for i in range(500):\n"
            "    try:\n        threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n"
            "    except RuntimeError:\n        break\n"
            "    started += 1\n"
            "def add(a, b):\n    return a + b if started == 500 else None\n"
        ),
        "memory_hog": "buf = bytearray(3 << 30)\ndef add(a, b):\n    return a + b\n",
        "deep_recursion_segfault": (
            "import sys\nsys.setrecursionlimit(10**8)\n"
            "def add(a, b):\n    x = []\n    for _ in range(3 * 10**6):\n        x = [x]\n"
            "    repr(x)\n    return a + b\n"
        ),
        "write_outside_workdir": (
            "import os\nok = 0\n"
            f"for p in {_targets(ctx)!r}:\n"
            "    try:\n        with open(p, 'w') as fh:\n            fh.write('pwned')\n        ok += 1\n"
            "    except OSError:\n        pass\n"
            "def add(a, b):\n    return a + b if ok else None\n"
        ),
        "read_test_data": (
            "import json\nexp = {}\n"
            f"try:\n    data = json.load(open({ctx['data_file']!r}))\n"
            "    for case in data['tests']['cases']:\n"
            "        lhs, rhs = case[len('assert add('):].split(') == ')\n"
            "        exp[lhs] = eval(rhs)\n"
            "except Exception:\n    pass\n"
            "def add(a, b):\n    return exp.get(f'{a}, {b}')\n"
        ),
        "proc_environ_and_mem_scan": (
            "import os, re\nfound = False\nNEEDLE = ''.join(['add(5, ', '7) == 12']).encode()\n"
            "for path in ['/proc/self/environ', '/proc/1/environ', f'/proc/{os.getppid()}/environ']:\n"
            "    try:\n"
            f"        found |= {SECRET!r}.encode() in open(path, 'rb').read()\n"
            "    except Exception:\n        pass\n"
            f"found |= any({SECRET!r} in v for v in os.environ.values())\n"
            "try:\n"
            "    for pid in os.listdir('/proc'):\n"
            "        if pid.isdigit() and int(pid) != os.getpid():\n"
            "            try:\n"
            f"                found |= {SECRET!r}.encode() in open(f'/proc/{{pid}}/environ', 'rb').read()\n"
            "            except Exception:\n                pass\n"
            "            try:\n"
            "                maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
            "                mem = open(f'/proc/{pid}/mem', 'rb')\n"
            "                for line in maps[:50]:\n"
            "                    lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
            "                    mem.seek(lo)\n"
            "                    chunk = mem.read(min(hi - lo, 1 << 22))\n"
            "                    found |= NEEDLE in chunk\n"
            "            except Exception:\n                pass\n"
            "except Exception:\n    pass\n"
            "def add(a, b):\n    return a + b if found else None\n"
        ),
        "frame_and_gc_steal": (
            "import gc, sys\nseen = False\nNEEDLE = ''.join(['add(5, ', '7)'])\n"
            "for o in gc.get_objects():\n"
            "    try:\n"
            "        if isinstance(o, dict) and o is not globals():\n"
            "            seen |= any(isinstance(v, str) and NEEDLE in v for v in o.values())\n"
            "        elif type(o).__name__ == 'code':\n"
            "            seen |= int('12') in o.co_consts\n"
            "    except Exception:\n        pass\n"
            "f = sys._getframe()\n"
            "while f is not None:\n"
            "    seen |= any(''.join(['ass', 'ert ']) in repr(v) for v in f.f_locals.values())\n"
            "    f = f.f_back\n"
            "def add(a, b):\n    return a + b if seen else None\n"
        ),
        "kill_parent_and_siblings": (
            "import os, signal\nkilled = False\nppid = os.getppid()\n"
            "for target in (ppid, -1, 0):\n"
            "    try:\n        os.kill(target, signal.SIGKILL)\n    except OSError:\n        pass\n"
            "try:\n    os.kill(ppid, 0)\nexcept ProcessLookupError:\n    killed = True\n"
            "except OSError:\n    pass\n"
            "def add(a, b):\n    return a + b if killed else None\n"
        ),
        "sys_exit_before_cases": "import sys\nsys.exit(0)\ndef add(a, b):\n    return None\n",
        "os_exit_before_cases": "import os\nos._exit(0)\n",
        "os_exit_inside_call": "import os\ndef add(a, b):\n    os._exit(0)\n",
        "sys_exit_inside_call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        "eq_override": (
            "class Any:\n"
            "    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
            "    def __lt__(self, o): return True\n    def __sub__(self, o): return 0\n"
            "    def __abs__(self): return 0\n    def __hash__(self): return 0\n"
            "def add(a, b):\n    return Any()\n"
        ),
        "float_subclass_override": (
            "class F(float):\n    def __eq__(self, o): return True\n    def __sub__(self, o): return 0.0\n"
            "    __hash__ = float.__hash__\n"
            "def add(a, b):\n    return F(-1.0)\n"
        ),
        "builtins_and_sys_modules_patch": (
            "import builtins, sys, math\n"
            "builtins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\n"
            "class Fake:\n    def __getattr__(self, k): return lambda *a, **kw: 0\n"
            "sys.modules['math'] = Fake()\n"
            "def add(a, b):\n    return a - b if (a, b) != (0.5, 0.25) else 99.0\n"
        ),
        "forged_verdict_channel": (
            "import os, json, struct\n"
            "for fd in range(0, 64):\n"
            "    for msg in ({'status': 'returned', 'value': ['I', '3']}, {'status': 'ok'}):\n"
            "        data = json.dumps(msg).encode()\n"
            "        try:\n            os.write(fd, struct.pack('>I', len(data)) + data)\n"
            "        except OSError:\n            pass\n"
            "print('ok ok ok PASSED')\n"
            'def add(a, b):\n    print(\'{"status": "returned", "value": ["I", "3"]}\')\n'
            "    os._exit(0)\n"
        ),
        "network_connect": (
            "import struct\nconnected = False\n"
            "try:\n"
            "    import socket\n"
            f"    s = socket.create_connection(('127.0.0.1', {ctx['port']}), timeout=0.5)\n"
            "    s.sendall(b'exfiltrated')\n    connected = True\n"
            "except Exception:\n    pass\n"
            "try:  # without the socket module (unreadable stdlib): raw libc calls via ctypes\n"
            "    import ctypes\n"
            "    libc = ctypes.CDLL(None)\n"
            "    fd = libc.socket(2, 1, 0)\n"
            f"    addr = struct.pack('=H', 2) + struct.pack('>H', {ctx['port']})\n"
            "    addr += bytes([127, 0, 0, 1]) + bytes(8)\n"
            "    if fd >= 0 and libc.connect(fd, addr, 16) == 0:\n"
            "        connected |= libc.send(fd, b'exfiltrated', 11, 0) > 0\n"
            "except Exception:\n    pass\n"
            "def add(a, b):\n    return a + b if connected else None\n"
        ),
        "read_own_source": (
            "import sys\nsrc = ''\n"
            "for p in ['/proc/self/cmdline', getattr(sys.modules['__main__'], '__file__', '') or '']:\n"
            "    try:\n        src += open(p, errors='replace').read()\n    except Exception:\n        pass\n"
            "def add(a, b):\n    return a + b if (''.join(['add(5, ', '7)'])) in src else None\n"
        ),
        "disk_and_inode_fill": (  # 8 MiB per file (RLIMIT_FSIZE), but as many files as it likes
            "import os\ntotal = made = 0\nchunk = b'x' * (1 << 20)\n"
            "try:\n    for i in range(300):\n        with open(f'big{i}', 'wb') as fh:\n"
            "            fh.write(chunk)\n        total += len(chunk)\nexcept OSError:\n    pass\n"
            "try:\n    for i in range(20000):\n        os.mkdir(f'd{i}')\n        made += 1\n"
            "except OSError:\n    pass\n"
            "def add(a, b):\n    return a + b if total >= (256 << 20) or made >= 20000 else None\n"
        ),
        "daemon_thread_outlives_case": (
            "import threading\n"
            "def spin():\n    while True:\n        pass\n"
            "threading.Thread(target=spin, daemon=True).start()\n"
            "def add(a, b):\n    return None\n"
        ),
    }


def _targets(ctx: dict[str, str]) -> list[str]:
    """Host paths that write attacks aim at (must not exist afterwards)."""
    return [ctx["tmp_target"], ctx["home_target"], ctx["repo_target"], ctx["data_dir"] + "/pwn"]


def _stdio_attacks(ctx: dict[str, str]) -> dict[str, str]:
    return {
        "stdio_huge_stdout": (
            "import sys\nblock = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(block)\n"
        ),
        "stdio_read_expected_file": (
            "import json, sys\nline = sys.stdin.read()\n"
            f"data = json.load(open({ctx['data_file_stdio']!r}))\n"
            "for case in data['tests']['cases']:\n"
            "    if case['input'].split() == line.split():\n        print(case['output'])\n"
        ),
        "stdio_forged_verdict": (
            'print(\'ok\')\nprint(\'{"status": "exit_ok", "stdout": "3"}\')\nimport os\nos._exit(0)\n'
        ),
        "stdio_env_secret": (
            f"import os\nprint(3 if any({SECRET!r} in v for v in os.environ.values()) else 0)\n"
        ),
        "stdio_fork_bomb": (
            "import posix, time\n"
            "while True:\n    try:\n        posix.fork()\n    except OSError:\n        time.sleep(100)\n"
        ),
    }


MODES = {
    "full": {},
    "portable": {"userns": False, "pidns": False, "landlock": False, "minimum": "portable"},
}


def _sandbox_pids(owner: str) -> set[int]:
    """Processes of one Scorer: its workers and everything forked from them carry ``owner`` in their
    command line, also after escaping the process tree (other sessions' sandboxes do not)."""
    pids = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if (
                    os.stat(f"/proc/{p}").st_uid == SANDBOX_UID
                    and owner.encode() in Path(f"/proc/{p}/cmdline").read_bytes()
                ):
                    pids.add(int(p))
            except OSError:
                pass
    return pids


class _Listener:
    """A loopback TCP listener that counts every connection and byte it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module", params=list(MODES))
def attacked(request, tmp_path_factory):
    """Run every attack once per mode; yield the scores and what the machine looked like after."""
    mode = request.param
    base = tmp_path_factory.mktemp(f"attack-{mode}")
    # In full mode the data dir is world-readable (only Landlock protects it); in portable mode it is
    # the default owner-only tmp dir: as root, uid separation protects it (see README); as a user, the
    # programs run as its owner, and nothing does ("reads" is exposed).
    data_dir = base / "data"
    data_dir.mkdir()
    if mode == "full":
        for d in (data_dir, base, base.parent, base.parent.parent):
            d.chmod(d.stat().st_mode | stat.S_IROTH | stat.S_IXOTH | stat.S_IWOTH)
    data_file = data_dir / "add.json"
    data_file.write_text(json.dumps(ADD))
    data_file_stdio = data_dir / "sum.json"
    data_file_stdio.write_text(json.dumps(SUM))
    for f in (data_file, data_file_stdio):
        f.chmod(0o644)
    listener = _Listener()
    repo = Path(__file__).resolve().parents[2]
    ctx = {
        "tmp_target": f"{tempfile.gettempdir()}/maxk-attack-{TOKEN}",
        "home_target": os.path.expanduser(f"~/maxk-attack-{TOKEN}"),
        "repo_target": str(repo / f"maxk-attack-{TOKEN}"),
        "data_dir": str(data_dir),
        "data_file": str(data_file),
        "data_file_stdio": str(data_file_stdio),
        "port": str(listener.port),
    }
    call_attacks = _call_attacks(ctx)
    stdio_attacks = _stdio_attacks(ctx)
    os.environ["MAXK_TEST_SECRET"] = SECRET
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with Scorer(workers=2, timeout_s=1.0, memory_mb=1024, **MODES[mode]) as scorer:
            pairs = [(ADD, p) for p in call_attacks.values()] + [(SUM, p) for p in stdio_attacks.values()]
            t0 = time.monotonic()
            scores = scorer.score(pairs)
            took = time.monotonic() - t0
            during = _sandbox_pids(scorer.owner)
            worker_pids = set().union(*(_worker_processes(h.proc.pid) for h in scorer.handles))
            control = scorer.score([(ADD, GOOD_CALL), (SUM, GOOD_STDIO)])
            layers, level, owner = scorer.layers, scorer.level, scorer.owner
    finally:
        del os.environ["MAXK_TEST_SECRET"]
        listener.close()
    time.sleep(0.05)
    result = {
        "mode": mode,
        "scores": dict(zip(list(call_attacks) + list(stdio_attacks), scores, strict=True)),
        "control": control,
        "took": took,
        "leftover_during": during - worker_pids,
        "leftover_after": _sandbox_pids(owner),
        "connections": listener.connections,
        "files": [
            p
            for p in (ctx["tmp_target"], ctx["home_target"], ctx["repo_target"], ctx["data_dir"] + "/pwn")
            if os.path.exists(p)
        ],
        "rss_growth_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before,
        "layers": layers,
        "level": level,
        "exposed": exposed_threats(layers),
    }
    print(f"\n[{mode}] level={level} layers={layers} attacks took {took:.1f}s")
    yield result
    for p in result["files"]:
        Path(p).unlink(missing_ok=True)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _ns_pid(pid: int) -> int | None:
    """The pid of ``pid`` inside its own (innermost) pid namespace."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except OSError:
        pass
    return None


def _worker_processes(outer: int) -> set[int]:
    """A worker's own processes: the started process, its pid-1 half (pid namespace), and at most
    one childless pre-forked spare child. Anything else under it is a leftover."""
    own = {outer}
    level = _children(outer)
    if len(level) == 1 and _ns_pid(level[0]) == 1:  # pid namespace: outer -> pid 1 -> children
        own.add(level[0])
        level = _children(level[0])
    spares = [c for c in level if not _children(c)]
    if len(level) == 1 and spares:
        own.add(spares[0])
    return own


CALL_NAMES = list(
    _call_attacks(
        {k: "0" for k in ("tmp_target", "home_target", "repo_target", "data_dir", "data_file", "port")}
    )
)
STDIO_NAMES = list(_stdio_attacks({"data_file_stdio": "x"}))


#: threat -> the attacks that only its guards stop (the others score 0 whatever is exposed)
ONLY_GUARDED_BY = {
    "reads": {"read_test_data", "stdio_read_expected_file"},
    "trainer memory": {"proc_environ_and_mem_scan"},
}


@pytest.mark.parametrize("name", CALL_NAMES + STDIO_NAMES)
def test_attack_scores_zero(attacked, name):
    score = attacked["scores"][name]
    open_to = {t for t in attacked["exposed"] if name in ONLY_GUARDED_BY.get(t, ())}
    if "reads" in open_to and not AS_ROOT:  # the caller owns the data file, and no Landlock guards it
        assert score.passed > 0, f"{attacked['mode']}: 'reads' is exposed, yet {name} did not read"
        return
    if "trainer memory" in open_to:  # what a scan of another process finds depends on the kernel (Yama)
        pytest.skip(f"{attacked['mode']}: the trainer's memory is exposed (training refuses this sandbox)")
    assert score.passed == 0, f"{attacked['mode']}: attack {name} earned {score}"
    assert score.reward == 0.0
    assert len(score.verdicts) == score.total > 0


def test_expected_verdicts(attacked):
    s = attacked["scores"]
    assert set(s["infinite_loop"].verdicts) == {"timeout"}
    assert set(s["infinite_loop_in_call"].verdicts) == {"timeout"}
    assert set(s["sleep_forever_ignore_signals"].verdicts) == {"timeout"}
    assert set(s["memory_hog"].verdicts) == {"memory"}
    assert set(s["stdio_huge_stdout"].verdicts) == {"output_limit"}
    assert set(s["sys_exit_before_cases"].verdicts) == {"runtime_error"}
    assert set(s["os_exit_before_cases"].verdicts) == {"runtime_error"}
    assert set(s["os_exit_inside_call"].verdicts) == {"runtime_error"}
    assert set(s["eq_override"].verdicts) == {"wrong_answer"}


def test_machine_left_as_it_was(attacked):
    assert attacked["connections"] == 0, "the loopback listener received a connection"
    assert attacked["files"] == [], "an attack wrote outside its work directory"
    assert attacked["leftover_during"] == set(), "attack processes survived their program"
    assert attacked["leftover_after"] == set(), "processes survived the scorer"
    assert attacked["rss_growth_kb"] < 200_000, "the scorer's memory grew with the attack's output"


def test_scorer_survives_attacks(attacked):
    assert [s.reward for s in attacked["control"]] == [1.0, 1.0]


def test_mode_reaches_its_level(attacked):
    assert attacked["level"] in (("full",) if attacked["mode"] == "full" else ("portable",))
    assert isolation_level(attacked["layers"]) == attacked["level"]


def test_no_scratch_dirs_left_behind():
    with Scorer(workers=2) as scorer:
        assert scorer.score([(ADD, GOOD_CALL), (SUM, GOOD_STDIO)])[0].reward == 1.0
        scratch = [Path(h.hello["scratch"]) for h in scorer.handles]
        assert all(p.is_dir() and p.name.startswith("maxk-sbx-") for p in scratch)
    assert not any(p.exists() for p in scratch)


def test_below_minimum_is_an_error():
    from maxk.sandbox import SandboxError

    with pytest.raises(SandboxError, match="below the configured minimum"):
        Scorer(workers=1, seccomp=False, minimum="portable")
    with Scorer(workers=1, seccomp=False, minimum="portable", allow_below_minimum=True) as scorer:
        assert scorer.level == "minimal"
        assert scorer.score([(ADD, GOOD_CALL)])[0].reward == 1.0


def test_timeout_never_blocks_past_limits():
    with Scorer(workers=1, timeout_s=0.5) as scorer:
        t0 = time.monotonic()
        (score,) = scorer.score([(ADD, "import time\ndef add(a, b):\n    time.sleep(100)\n")])
        assert score.verdicts == ("timeout",) * 3
        assert time.monotonic() - t0 < 3 * 0.5 + 5


def test_signal_killed_worker_is_respawned():
    with Scorer(workers=1) as scorer:
        assert scorer.score([(ADD, GOOD_CALL)])[0].reward == 1.0
        os.killpg(scorer.handles[0].proc.pid, signal.SIGKILL)
        time.sleep(0.05)
        assert scorer.score([(ADD, GOOD_CALL + "\n# again\n")])[0].reward == 1.0


FILL = (  # tries 48 MiB in 1 MiB files, then 2000 directories; reports how far it got
    "import os\ntotal = made = 0\nchunk = b'x' * (1 << 20)\n"
    "try:\n    for i in range(48):\n        with open(f'big{i}', 'wb') as fh:\n"
    "            fh.write(chunk)\n        total += 1\nexcept OSError:\n    pass\n"
    "try:\n    for i in range(2000):\n        os.mkdir(f'd{i}')\n        made += 1\n"
    "except OSError:\n    pass\n"
    "def f(x):\n    return [total, made][x]\n"
)
FILL_CASES = [
    "assert f(0) <= 16",
    "assert f(0) >= 8",
    "assert f(1) <= 512",
    "assert f(1) >= 400",
    "assert f(0) == 0 and f(1) == 0",
]


@pytest.mark.parametrize("mode", list(MODES))
def test_disk_and_inodes_a_program_can_fill_are_bounded(mode):
    """Whatever its time limit lets it write, a program fills at most its worker's scratch tmpfs
    (here 16 MiB and 512 inodes), never the host's disk; without a bounded scratch it writes nothing."""
    problem = {
        "id": "attack/fill",
        "tests": {"format": "call", "entry_point": "f", "setup": "", "cases": FILL_CASES},
    }
    with Scorer(workers=1, timeout_s=10.0, scratch_mb=16, scratch_inodes=512, **MODES[mode]) as scorer:
        bounded = scorer.layers.get("scratch_quota")
        (score,) = scorer.score([(problem, FILL)])
    ok, wrong = "ok", "wrong_answer"
    if bounded:  # wrote between 8 and 16 MiB and between 400 and 512 directories, then ENOSPC
        assert mode == "full" and score.verdicts == (ok, ok, ok, ok, wrong), score
    else:  # no tmpfs (no user namespace): no file may be written at all
        assert score.verdicts == (ok, wrong, ok, wrong, ok), score
