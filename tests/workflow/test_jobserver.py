"""The warm job server (``maxk.workflow.jobserver``): a forked job is the job its client would have run.

Each test talks to a real server process over its socket. The job is a probe (``probe.main``, written
here) that reports what it received; the server preloads nothing but torch where a test needs it. The
end-to-end test (``test_workflow_e2e.py``) runs the real pipeline through it and compares its bytes
with cold jobs'.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from guard import HANG_GUARD_S

from maxk.workflow import jobserver

PROBE = """
import json, os, signal, sys, time

def main(argv):
    what = argv[0]
    if what == "report":
        import torch
        print(json.dumps({
            "argv": argv, "cwd": os.getcwd(), "umask": os.umask(0), "probe": os.environ.get("PROBE"),
            "imported": os.environ.get("IMPORTED"), "sid": os.getsid(0) == os.getpid(),
            "threads": torch.get_num_threads(), "argv0": sys.argv,
        }))
        print("to stderr", file=sys.stderr)
        return int(argv[1])
    if what == "sleep":
        Path = __import__("pathlib").Path
        Path(argv[1]).write_text(str(os.getpid()))
        time.sleep(60)
        return 0
    if what == "import":
        print(__import__(argv[1]).__file__)
        return 0
    if what == "raise":
        raise ValueError("the probe fails")
    if what == "exit":
        sys.exit(argv[1])
    return 3
"""

#: set by the probe module when the server imports it: a job sees what the server's imports changed
PROBE_MODULE_SIDE_EFFECT = "import os\nos.environ['IMPORTED'] = 'yes'\n"

CLIENT = (
    "import sys\nfrom maxk.workflow.jobserver import forward\n"
    "r = forward(sys.argv[2:], sys.argv[1])\nsys.exit(100 if r is None else r)\n"
)  # exit 100: the client would run the job itself


def _env(tmp: Path) -> dict[str, str]:
    src = str(Path(jobserver.__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k != jobserver.SERVER_VAR}
    return dict(env, PYTHONPATH=f"{tmp}:{src}")


class Served:
    def __init__(self, tmp: Path, modules: tuple[str, ...], sock_dir: Path | None = None) -> None:
        (tmp / "probe.py").write_text(PROBE_MODULE_SIDE_EFFECT + PROBE)
        self.tmp = tmp
        sock_dir = sock_dir or tmp / "sock"
        self.path = str(sock_dir / "jobs.sock")
        sock_dir.mkdir(mode=0o700, exist_ok=True)
        self.log = tmp / "server.log"
        code = (
            "import sys\nfrom maxk.workflow.jobserver import serve\n"
            f"sys.exit(serve({self.path!r}, entry='probe:main', modules={modules!r}))\n"
        )
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-c", code], env=_env(tmp), stdout=out, stderr=out)
        (sock_dir / jobserver.PID_FILE).write_text(str(self.proc.pid))
        self.env = _env(tmp)

    def client(self, *argv: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", CLIENT, self.path, *argv],
            env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,
        )  # fmt: skip

    def run(self, *argv: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
        proc = self.client(*argv, env=env, **kw)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=HANG_GUARD_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("jobserver"), ("torch", "probe"))
    assert jobserver._wait_until_up(served.path), served.log.read_text()
    yield served
    served.stop()


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _wait_for(path: Path, within: float = 60.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear")


def test_a_forked_job_gets_the_clients_arguments_directory_umask_environment_and_streams(
    server: Served, tmp_path: Path
) -> None:
    env = dict(server.env, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))  # per-job variables may differ
    res = server.run("report", "7", env=env, cwd=tmp_path, umask=0o027)
    assert res.returncode == 7, res.stderr  # the job's status is the client's
    report = json.loads(res.stdout)
    assert report["argv"] == ["report", "7"] and report["argv0"] == ["-c", "report", "7"]  # the client's
    assert report["cwd"] == str(tmp_path) and report["umask"] == 0o027
    assert report["sid"], "the job is not its own session's leader"
    assert report["threads"] == 1, "torch's threads are not the job's OMP_NUM_THREADS"
    assert report["imported"] == "yes", "what the server's imports set in the environment is lost"
    assert res.stderr == "to stderr\n"  # the client's own descriptors, not the server's
    assert "job " in server.log.read_text()
    env["OMP_NUM_THREADS"] = "2"
    assert json.loads(server.run("report", "0", env=env).stdout)["threads"] == 2


def test_a_job_exits_as_a_fresh_interpreter_would(server: Served) -> None:
    failed = server.run("raise")
    assert failed.returncode == 1 and "ValueError: the probe fails" in failed.stderr
    assert server.run("exit", "4").returncode == 1  # sys.exit("4"): a message, status 1
    assert server.run("other").returncode == 3


def test_another_environment_runs_cold_and_says_why(server: Served) -> None:
    res = server.run("report", "0", env=dict(server.env, ATEN_CPU_CAPABILITY="default"))
    assert res.returncode == 100, "a job whose import-time environment differs must not fork"
    assert "differs in ATEN_CPU_CAPABILITY" in server.log.read_text()


def test_directories_before_the_servers_python_path_are_the_jobs_unless_they_shadow_its_modules(
    server: Served, tmp_path: Path
) -> None:
    (tmp_path / "stand_in_only_here.py").write_text("")
    env = dict(server.env, PYTHONPATH=f"{tmp_path}:{server.env['PYTHONPATH']}")
    res = server.run("import", "stand_in_only_here", env=env)
    assert res.returncode == 0 and res.stdout.strip() == str(tmp_path / "stand_in_only_here.py"), res.stderr
    (tmp_path / "torch.py").write_text("")  # torch: imported by the server, shadowed here
    assert server.run("import", "stand_in_only_here", env=env).returncode == 100
    assert "another PYTHONPATH" in server.log.read_text()


def test_extra_python_path(tmp_path: Path) -> None:
    assert jobserver.extra_python_path("/a:/b", "/a:/b") == []
    assert jobserver.extra_python_path("/nowhere:/a", "/a") == ["/nowhere"]
    assert jobserver.extra_python_path("/a", "/a:/b") is None  # the server's is not its tail
    assert jobserver.extra_python_path("/b:/a", "/c") is None
    assert jobserver.extra_python_path("rel:/a", "/a") is None  # relative: the working directory's
    assert jobserver.extra_python_path(":/a", "/a") is None
    assert jobserver.extra_python_path(f"{tmp_path}:/a", "/a") == [str(tmp_path)]
    (tmp_path / "json.py").write_text("")  # json: imported here (as in every server)
    assert jobserver.extra_python_path(f"{tmp_path}:/a", "/a") is None


def test_other_resource_limits_run_cold(server: Served) -> None:
    import resource

    def lower() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512) - 1, hard))

    assert server.run("report", "0", preexec_fn=lower).returncode == 100


def test_no_server_runs_cold(tmp_path: Path) -> None:
    assert jobserver.forward(["x"], str(tmp_path / "none.sock")) is None
    (tmp_path / jobserver.PID_FILE).write_text("999999999")  # a server that died while importing
    start = time.monotonic()
    assert jobserver.forward(["x"], str(tmp_path / "jobs.sock")) is None
    assert time.monotonic() - start < 60  # did not wait for it (a hang guard, not a timing test)


def test_a_client_killed_outright_takes_its_job_along(server: Served, tmp_path: Path) -> None:
    client = server.client("sleep", str(tmp_path / "pid"))
    job = int(_wait_for(tmp_path / "pid"))
    client.kill()
    client.wait()
    assert _gone(job), "the job outlived its client's SIGKILL"


def test_a_signal_the_client_catches_reaches_the_job(server: Served, tmp_path: Path) -> None:
    client = server.client("sleep", str(tmp_path / "pid"))
    job = int(_wait_for(tmp_path / "pid"))
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=HANG_GUARD_S) == -signal.SIGTERM  # the client ends as its job did
    assert _gone(job)


def test_a_stopped_server_takes_its_jobs_along_and_their_clients_say_so(tmp_path: Path) -> None:
    served = Served(tmp_path, ("probe",))
    try:
        client = served.client("sleep", str(tmp_path / "pid"))
        job = int(_wait_for(tmp_path / "pid"))
        served.stop()
        _, err = client.communicate(timeout=HANG_GUARD_S)
        assert client.returncode == 1 and "job server stopped" in err
        assert _gone(job)
        assert not Path(served.path).parent.exists(), "the socket's directory outlived its server"
    finally:
        served.stop()


def test_the_server_ends_with_its_parent(tmp_path: Path) -> None:
    """Started by a process that then dies (Snakemake killed outright): the server does not linger."""
    path = tmp_path / "jobs.sock"
    (tmp_path / "serve_child.py").write_text(
        "import sys\nfrom maxk.workflow.jobserver import serve\n"
        "sys.exit(serve(sys.argv[1], parent=int(sys.argv[2]), modules=()))\n"
    )
    code = (
        "import os, subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, {str(tmp_path / 'serve_child.py')!r}, {str(path)!r}, "
        "str(os.getpid())])\n"
        "print(p.pid, flush=True)\n"
        f"while not os.path.exists({str(path)!r}): time.sleep(0.05)\n"
    )
    parent = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                            text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert parent.returncode == 0, parent.stderr
    assert _gone(int(parent.stdout.split()[0])), "the server outlived the process that started it"


@pytest.mark.skipif(os.getuid() != 0, reason="needs another uid to connect as")
def test_another_user_cannot_start_a_job(tmp_path: Path) -> None:
    import shutil
    import tempfile

    sock_dir = Path(tempfile.mkdtemp(prefix="maxk-test-jobs-"))  # /tmp: every user can reach it
    served = Served(tmp_path, ("probe",), sock_dir)
    try:
        assert jobserver._wait_until_up(served.path), served.log.read_text()
        sock_dir.chmod(0o755)  # past the directory's own guard: the server must refuse by itself
        os.chmod(served.path, 0o777)
        pid = os.fork()
        if pid == 0:  # a client of another uid (this interpreter: the venv may not be theirs to run)
            code = 2
            try:
                os.setgid(65534)
                os.setuid(65534)
                code = 100 if jobserver.forward(["report", "0"], served.path) is None else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 100, "another user's job was not refused"
        assert "uid 65534 is not the server's" in served.log.read_text()
    finally:
        served.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_a_gpu_machine_serves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA context does not survive a fork: on a machine with a GPU driver every job starts cold."""
    monkeypatch.setattr(jobserver, "GPU_DEVICES", (str(tmp_path),))  # a device file that exists
    assert jobserver.serve(str(tmp_path / "jobs.sock"), modules=("no_such_module_to_import",)) == 0
    assert not (tmp_path / "jobs.sock").exists()


def test_an_event_for_a_job_already_reaped_is_ignored(tmp_path: Path) -> None:
    """Its client's end and its exit can come in one batch of events, the exit handled first."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    wakeup = signal.set_wakeup_fd(-1)
    (tmp_path / "sock").mkdir()
    server = jobserver.Server(str(tmp_path / "sock" / "jobs.sock"), None, entry="json:dumps")
    try:
        server._from_client(999999999)
    finally:
        server.close()
        signal.set_wakeup_fd(wakeup)  # this process's own, as before the server took them
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_every_preloaded_module_exists() -> None:
    """A renamed module would only cost time (the job imports it itself): this says so at once."""
    import importlib.util

    assert [name for name in jobserver.PRELOAD if importlib.util.find_spec(name) is None] == []


def test_the_fingerprint_ignores_only_the_per_job_variables() -> None:
    base = {"PATH": "/bin", "HF_HUB_OFFLINE": "1"}
    same = dict(base, OMP_NUM_THREADS="2", TMPDIR="/x", PWD="/y", MAXK_JOB_SERVER="/s")
    assert jobserver.fingerprint(base) == jobserver.fingerprint(same)
    others = ({**base, "HF_HUB_OFFLINE": "0"}, {**base, "ATEN_CPU_CAPABILITY": "avx2"}, {"PATH": "/bin"})
    for changed in others:
        assert jobserver.fingerprint(changed) != jobserver.fingerprint(base), changed
    assert jobserver.fingerprint(base, "/other/python") != jobserver.fingerprint(base)
    facts = jobserver.process_facts()
    assert jobserver.fingerprint(base, facts=facts) == jobserver.fingerprint(base)
    one, other = ([[cpu], facts[1]] for cpu in (0, 1))
    assert jobserver.fingerprint(base, facts=one) != jobserver.fingerprint(base, facts=other)


def test_describe_names_the_subcommand_and_its_output() -> None:
    assert jobserver.describe(["analyze", "metrics", "--scores", "a", "--output", "b"]) == (
        "maxk analyze metrics --output b"
    )
    assert jobserver.describe(["train", "--run", "r", "--out", "m"]) == "maxk train --out m"
