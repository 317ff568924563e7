"""The whole DAG for real on a reduced config: every stage, kill-and-resume, byte-identical results.

One clean run (module fixture) is the reference. A second run is killed three times (SIGKILL while
training, SIGTERM while generating, SIGKILL while scoring), unlocked and rerun each time, exactly as a
user would; it must complete, keep what was finished before each kill, leave no process behind, and
end with tables byte-identical to the clean run's (same config and seed => same bytes). Its first part
runs at ``--cores 1``, so the same run also shows that the cores granted do not change a result. The config
runs two seeds (``replicates``): under its own ``results/seed{seed}/``, each seed runs every job the
across-seed claims table reads (its runs, samples, scores and claims), and the table joins them; the
first seed runs its whole DAG (``replicate_outputs: pooled``: the second's tables and figures would
repeat the same jobs under another seed). The killed run has the first seed only
(``config_one_seed.yaml``), run for the outputs it is compared on (its tables, significance and claims:
``compared_outputs``), which must be the clean run's.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from guard import HANG_GUARD_S

from maxk import paths as P
from maxk.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "workflow" / "config_small.yaml"  # an overlay on the embedded default
ONE_SEED = (ROOT / "tests" / "workflow" / "config_one_seed.yaml",)  # the killed run's, on SMALL
SANDBOX_UID = 65534 if os.getuid() == 0 else os.getuid()  # root drops to nobody; a user has no uid to drop to

pytestmark = pytest.mark.slow


def smk_cmd(
    workdir: Path, *args: str, config: Path = SMALL, cores: int = 2, overlays: tuple[Path, ...] = ()
) -> list[str]:
    return [
        sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
        "--directory", str(workdir), "--configfile", str(ROOT / "config" / "config.yaml"), str(config),
        *map(str, overlays), "--cores", str(cores), *args,
    ]  # fmt: skip


def env() -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), PATH=f"{bindir}:{os.environ['PATH']}", CI="true")


def smk(
    workdir: Path,
    *args: str,
    config: Path = SMALL,
    timeout: int = HANG_GUARD_S,
    cores: int = 2,
    overlays: tuple[Path, ...] = (),
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        smk_cmd(workdir, *args, config=config, cores=cores, overlays=overlays),
        capture_output=True, text=True, env=env(), timeout=timeout,
    )  # fmt: skip
    assert res.returncode == 0, f"snakemake {args} failed:\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    return res


def result_files(workdir: Path, pattern: str) -> dict[str, bytes]:
    return {
        str(Path(p).relative_to(workdir)): Path(p).read_bytes()
        for p in sorted(glob.glob(str(workdir / pattern), recursive=True))
    }


#: the seeds of the end-to-end config (``replicates``): two, so the jobs the across-seed table reads run twice
SEEDS = load_config(ROOT / "config" / "config.yaml", SMALL)["replicates"]


def clean_targets() -> tuple[str, ...]:
    """What the clean run is run for: every final output (``all``). With ``replicate_outputs: pooled``
    (the default's) the second seed makes what the across-seed outputs read (its runs, samples, scores,
    claims and yardstick) and its audit, no table or figure: the seed-dependent jobs the across-seed
    table needs run twice, the rest once."""
    from maxk.workflow.targets import final_targets

    return tuple(final_targets(load_config(ROOT / "config" / "config.yaml", SMALL)))


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("clean")
    smk(workdir, *clean_targets())
    return workdir


def test_clean_run_produces_every_artefact(clean_run: Path) -> None:
    assert len(SEEDS) == 2
    once = clean_run / "results"
    for rel in ["data/suite_sft.jsonl.gz", "data/suite_test.manifest.json", "provenance/environment.json",
                "claims/across_seeds.csv", "claims/across_seeds.md", "figures/across_seeds_curves.png",
                "figures/across_seeds_claims.pdf", "claims/across_seeds_yardstick.csv"]:  # fmt: skip
        assert (once / rel).is_file(), rel
    assert list((once / "lab").iterdir()), "the estimator lab wrote nothing"
    # a local run's jobs ran with glibc's allocator kept from trimming (maxk.workflow.allocator), where the
    # caller had set none of its variables; the environment record says which settings they ran with
    from maxk.workflow.allocator import ALLOCATOR_ENV, current
    from maxk.workflow.jobserver import gpu_present

    record = json.loads((once / "provenance" / "environment.json").read_text())
    assert record["allocator"] == current(os.environ if gpu_present() else {**ALLOCATOR_ENV, **os.environ})
    across = (once / "claims" / "across_seeds.md").read_text()
    assert all(f"seed {s}" in across for s in SEEDS) and "grpo_raises_pass_at_1" in across
    # the instrument over every seed, from the claims rule's differences.csv
    assert f"instrument, max@1, run - base, mean over all {len(SEEDS)} seed(s)" in across
    # the yardstick (analysis.claims.yardstick_temperatures): a claim per run, pooled in a family of its own
    assert "## Beyond the paper: each run against the base re-tempered, across seeds" in across
    assert "grpo_continuous_beats_tempered_base" in across
    # what each run learned, seed by seed and pooled, with each off-policy run's regime on every seed
    assert "## What each run learned, across seeds" in across and "off-policy regime by seed" in across
    assert all(f"seed {s}: test set" in across for s in SEEDS)
    regime_row = next(line for line in across.splitlines() if line.startswith("| `offpolicy_bon` |"))
    assert all(f"{s}: in (" in regime_row or f"{s}: out (" in regime_row for s in SEEDS), regime_row
    _seed_artefacts(clean_run / P.seed_dir(SEEDS[0]))
    second = clean_run / P.seed_dir(SEEDS[1])  # what the across-seed outputs read of the second seed
    for rel in ("claims/claims.csv", "claims/yardstick.csv", "metrics/base_T0.85/suite_test.parquet",
                "models/offpolicy_bon/config.json", "metrics/offpolicy_bon/suite_test.parquet"):  # fmt: skip
        assert (second / rel).is_file(), rel
    assert not (second / "tables").exists() and not (second / "figures").exists()  # replicate_outputs: pooled
    _trained_in_the_machines_best_sandbox(clean_run)
    weights = [(clean_run / P.model_dir(s, "grpo_continuous") / "model.safetensors").read_bytes()
               for s in SEEDS]  # fmt: skip
    assert weights[0] != weights[1], "two seeds trained the same model"
    again = smk(clean_run, "-n", *clean_targets())
    assert "Nothing to be done" in again.stdout + again.stderr


def _trained_in_the_machines_best_sandbox(workdir: Path) -> None:
    """Every training run, whoever runs the suite (root, or an ordinary user as CI does too), computed
    its rewards in the best sandbox this machine offers, with nothing exposed and its programs run as
    the sandbox uid (root drops to nobody; a user's own uid is guarded by Landlock)."""
    from maxk.sandbox import Scorer

    with Scorer(workers=1, minimum="none", allow_below_minimum=True) as probe:
        offered = probe.level
    runs = sorted(glob.glob(str(workdir / P.train_metrics("*", "*")) + ".provenance.json"))
    runs = [r for r in runs if not r.endswith(f"/{P.BASE}.csv.provenance.json")]
    assert len(runs) == 2 * len(SEEDS), runs
    for path in runs:
        sandbox = json.loads(Path(path).read_text())["summary"]["sandbox"]
        assert sandbox["level"] == offered and sandbox["exposed"] == [], (path, sandbox)
        assert sandbox["uid"] == (SANDBOX_UID if os.getuid() == 0 else f"unprivileged ({os.getuid()})")


def _seed_artefacts(res: Path) -> None:
    for rel in [
        "data/suite_rl.edge.jsonl.gz",
        "models/base/config.json", "models/base/trained_on.json", "models/grpo_continuous/trained_on.json",
        "metrics/train/base.csv",
        "contamination/contamination.csv", "contamination/contamination.md",
        "models/grpo_continuous/config.json", "models/offpolicy_bon/config.json",
        "metrics/train/offpolicy_bon.csv", "samples/grpo_continuous/suite_test.parquet",
        "scores/offpolicy_bon/suite_call.parquet", "metrics/base/suite_test.parquet",
        "tables/max_at_16.tex", "tables/max_at_16.md", "tables/max_at_16.csv",
        "tables/full_max_suite_test.tex", "stats/significance.csv", "figures/passk_curve.pdf",
        "figures/entropy.png", "figures/maxk_suite_test.png", "claims/claims.md", "claims/differences.csv",
        "claims/yardstick.csv", "samples/base_T0.85/suite_test.parquet",
        "metrics/base_T0.85/suite_test.parquet",
    ]:  # fmt: skip
        assert (res / rel).is_file(), rel
    # the tempered base: the base's weights, sampled at its own temperature (its manifest says which)
    manifest = json.loads((res / "samples/base_T0.85/suite_test.manifest.json").read_text())
    assert manifest["sampling"]["temperature"] == 0.85, manifest["sampling"]
    for table in (res / "tables").glob("*.tex"):
        assert (table.parent / (table.name + ".provenance.json")).is_file(), table


def test_the_learning_command_reads_runs_as_the_claims_job_did(clean_run: Path, tmp_path: Path) -> None:
    """`maxk analyze learning RUN...` on a finished seed, with the run's config files: the rows of that
    seed's learning.csv, byte for byte once parsed (the same settings, metrics and bootstrap seed)."""
    import pandas as pd

    seed, runs = SEEDS[1], ["offpolicy_bon", "grpo_continuous"]  # the small config's runs, in another order
    out = tmp_path / "learning.csv"
    cmd = [sys.executable, "-m", "maxk", "analyze", "learning", *runs, "--results", P.seed_dir(seed),
           "--configfile", str(ROOT / "config" / "config.yaml"), str(SMALL), "--csv", str(out)]  # fmt: skip
    res = subprocess.run(cmd, cwd=clean_run, env=env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert res.returncode == 0, res.stderr
    job = pd.read_csv(clean_run / P.learning(seed)).set_index("run").loc[runs]
    pd.testing.assert_frame_equal(pd.read_csv(out).set_index("run"), job)


def test_report_is_self_contained_html(clean_run: Path) -> None:
    smk(clean_run, "--report", "report.html", *clean_targets())
    html = (clean_run / "report.html").read_text(errors="replace")
    assert html.lstrip().lower().startswith("<!doctype html")
    for name in ("max_at_16", "passk_curve", "significance"):
        assert name in html, name


def run_until(
    workdir: Path,
    markers: str,
    sig: int,
    timeout: float = HANG_GUARD_S,
    cores: int = 2,
    overlays: tuple[Path, ...] = (),
    targets: tuple[str, ...] = (),
) -> set[str]:
    """Start the workflow, wait until a NEW file matches ``markers``, send ``sig`` to its process group."""
    before = set(glob.glob(str(workdir / markers)))
    proc = subprocess.Popen(
        smk_cmd(workdir, *targets, cores=cores, overlays=overlays),
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            new = set(glob.glob(str(workdir / markers))) - before
            if new:
                time.sleep(0.5)  # let the job get going
                os.killpg(proc.pid, sig)
                proc.wait(timeout=HANG_GUARD_S)
                return new
            if proc.poll() is not None:
                pytest.fail(f"the workflow ended (rc={proc.returncode}) before {markers} appeared")
            time.sleep(0.1)
        pytest.fail(f"{markers} did not appear within {timeout}s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    raise AssertionError("unreachable")


def _cmdline(pid: int | str) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _runs_in(pid: str, workdir: Path) -> bool:
    """Whether process ``pid`` runs in ``workdir`` (a job: Snakemake's --directory is its cwd)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(workdir)
    except OSError:
        return False


def leftover_processes(workdir: Path) -> list[str]:
    """Processes still running for this workdir (its jobs carry the path), and sandbox workers of this
    checkout whose owner (the pid in their tag, ``maxk.sandbox.scorer``) was a job of this workdir or is
    gone. The pools of other live processes are theirs: other checkouts, other tests running beside
    this one."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        cmd = _cmdline(pid)
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if cmd is None:
            continue
        if str(workdir) in cmd:
            out.append(f"{pid}: {cmd[:200]}")
        elif uid == SANDBOX_UID and f"{ROOT}/src/maxk/sandbox/_worker.py" in cmd:
            tag = re.search(r"maxk-sandbox-(\d+)-", cmd)
            owner = _cmdline(tag.group(1)) if tag else None
            if owner is None or str(workdir) in owner or _runs_in(tag.group(1), workdir):  # type: ignore[union-attr]
                out.append(f"{pid}: {cmd[:200]} (owner {tag.group(1) if tag else '?'}: {owner or 'gone'})")
    return out


def _job_server_gone(workdir: Path) -> None:
    """Wait (up to the hang guard) for this workdir's job server to exit after its Snakemake was killed.
    It learns of it by a signal (``PDEATHSIG``) or its once-a-second look at its parent, then kills its
    running jobs and reaps them before it exits: on a loaded machine that outlasts a fixed second (CI
    once found the server still there after one). What must not survive is checked after it, as before:
    its jobs are dead by then, killed and reaped by it."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline and any(" job-server " in p for p in leftover_processes(workdir)):
        time.sleep(0.2)


def compared_outputs(seed: int) -> tuple[str, ...]:
    """What the killed run is run for and compared on: one seed's tables, significance and claims (its
    figures, the lab and the audit lie beside them, not upstream: the clean run covers them)."""
    from maxk.workflow.targets import analysis_targets

    config = load_config(ROOT / "config" / "config.yaml", SMALL, *ONE_SEED)
    kept = ("tables", "stats", "claims")
    return tuple(t for t in analysis_targets(config["analysis"], seed) if Path(t).parent.name in kept)


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float], list[int]]:
    """The same workflow killed three times and resumed as a user would. Its first part, up to the
    kill in training, runs at ``--cores 1``: the data and the base model(s) finished by then were built
    with one core granted, where the clean run had two (one run serves both tests below: the suite's
    time is that of its end-to-end runs). Returns the work dir, the mtimes of the outputs certainly
    finished before the kills, and the seeds whose base model was built at ``--cores 1``."""
    workdir = tmp_path_factory.mktemp("killed")
    logs = P.logs("*")  # every seed's
    kills = [
        (f"{logs}/train/*.log", signal.SIGKILL, 1),
        (f"{logs}/generate/*/*.log", signal.SIGTERM, 2),  # one shard per (model, dataset), as by default
        (f"{logs}/score/*/*.log", signal.SIGKILL, 2),
    ]
    kept: dict[str, float] = {}
    built_at_one_core: list[int] = []
    (seed,) = load_config(ROOT / "config" / "config.yaml", SMALL, *ONE_SEED)["replicates"]
    targets = compared_outputs(seed)
    for markers, sig, cores in kills:
        run_until(workdir, markers, sig, cores=cores, overlays=ONE_SEED, targets=targets)
        _job_server_gone(workdir)
        time.sleep(1.0)
        assert leftover_processes(workdir) == [], f"processes survived {sig.name}"
        # Outputs of jobs that had certainly finished must be kept, not redone, by every later run.
        # Training needs the data and the base model, so they were complete before the first kill. (A
        # file that merely exists at kill time may belong to the killed job, which is rightly redone.)
        trained = {P.seed_of(str(Path(p).relative_to(workdir))) for p in glob.glob(str(workdir / markers))}
        if cores == 1:
            built_at_one_core = sorted(trained)
        for seed in trained:
            for path in glob.glob(str(workdir / P.data("*"))) + glob.glob(
                str(workdir / P.model_dir(seed, "base") / "*")
            ):
                kept.setdefault(path, os.stat(path).st_mtime_ns)
        smk(workdir, "--unlock", overlays=ONE_SEED)
    smk(workdir, *targets, overlays=ONE_SEED)
    return workdir, kept, built_at_one_core


def test_killed_run_resumes_to_identical_results(
    clean_run: Path, killed_run: tuple[Path, dict[str, float], list[int]]
) -> None:
    workdir, kept, _ = killed_run
    assert kept, "nothing finished before the kills: the test would not test resumption"
    for path, mtime in kept.items():
        assert os.stat(path).st_mtime_ns == mtime, f"{path} was redone after a kill"
    (seed,) = load_config(ROOT / "config" / "config.yaml", SMALL, *ONE_SEED)["replicates"]
    compared = (P.table(seed, "*", "[tcm][esd][xdv]"), P.significance(seed, "csv"), P.claims(seed, "csv"))
    clean = {k: v for pattern in compared for k, v in result_files(clean_run, pattern).items()}
    resumed = {k: v for pattern in compared for k, v in result_files(workdir, pattern).items()}
    assert clean and clean.keys() == resumed.keys()
    assert not (workdir / P.seed_dir(SEEDS[1])).exists(), "the killed run was to have one seed"
    for name in clean:
        assert clean[name] == resumed[name], (
            f"{name} differs between the clean and the killed-and-resumed run"
        )


def test_results_do_not_depend_on_the_cores(
    clean_run: Path, killed_run: tuple[Path, dict[str, float], list[int]]
) -> None:
    """The same data, config and seed give the same bytes at `--cores 1` as the clean run's `--cores 2`:
    every torch command computes with its configured threads (the base: two, the embedded default's),
    not the cores Snakemake grants (`--cores 1` used to build another base model: pass@1 0.150 at one
    thread, 0.217 at two). The killed run built its first base model(s) at `--cores 1`: their weights,
    SFT curves and the claims computed from them are the clean run's."""
    workdir, _, seeds = killed_run
    assert seeds, "no base model was built at --cores 1: the test would not test the cores"
    for seed in seeds:
        for name in (
            P.model_dir(seed, P.BASE) + "/model.safetensors",
            P.base_curve(seed),
            P.claims(seed, "csv"),
        ):
            same = (workdir / name).read_bytes() == (clean_run / name).read_bytes()
            assert same, f"{name} differs at --cores 1"
        # the comparison has teeth: that base computed with its configured two threads on one core
        manifest = json.loads((workdir / P.model_dir(seed, P.BASE) / "manifest.json").read_text())
        assert manifest["torch"]["threads"] == 2


def test_warm_and_cold_jobs_write_the_same_bytes(clean_run: Path, tmp_path: Path) -> None:
    """The clean run's jobs forked from the warm job server (``warm_start``, on by default;
    ``maxk.workflow.jobserver``); run again, each from a fresh interpreter, a base model, a GRPO run,
    a sample file and its scores are the same bytes (their timings aside)."""
    import shutil

    import pandas as pd

    seed, run = SEEDS[0], "grpo_continuous"
    log = (clean_run / P.LOGS / "job_server.log").read_text()
    assert "runs cold" not in log, log
    forked = [line for line in log.splitlines() if ": maxk " in line]  # the server's line per job it forked
    for job in (f"maxk base --out {P.model_dir(seed, P.BASE)}", f"maxk train --out {P.model_dir(seed, run)}",
                f"maxk score --output {P.scores(seed, P.BASE, 'suite_test')}"):  # fmt: skip
        assert any(line.endswith(job) for line in forked), f"{job!r} did not fork from the server:\n{log}"
    assert any("maxk generate --output" in line and "/base/suite_test" in line for line in forked), log
    workdir = tmp_path / "cold"
    shutil.copytree(clean_run, workdir, symlinks=True)
    (workdir / P.LOGS / "job_server.log").unlink()
    jobs = (P.model_dir(seed, P.BASE), P.train_metrics(seed, run), P.scores(seed, P.BASE, "suite_test"))
    smk(workdir, "--force", *jobs, "--rerun-triggers", "mtime", "--config", "warm_start=False")
    assert not (workdir / P.LOGS / "job_server.log").exists(), "warm_start=False started a job server"
    for rel in (
        P.model_dir(seed, P.BASE) + "/model.safetensors", P.base_curve(seed),
        P.model_dir(seed, run) + "/model.safetensors", P.model_dir(seed, run) + "/tokenizer_config.json",
        P.model_dir(seed, run) + "/config.json", P.samples(seed, P.BASE, "suite_test"),
    ):  # fmt: skip
        assert (workdir / rel).stat().st_mtime > (clean_run / rel).stat().st_mtime, f"{rel} was not redone"
        assert (workdir / rel).read_bytes() == (clean_run / rel).read_bytes(), f"{rel}: warm != cold"
    timings = ["step_time", "time/generation_s", "time/reward_s", "time/update_s"]
    warm, cold = (pd.read_csv(d / P.train_metrics(seed, run)) for d in (clean_run, workdir))
    pd.testing.assert_frame_equal(warm.drop(columns=timings), cold.drop(columns=timings))
    warm, cold = (pd.read_parquet(d / P.scores(seed, P.BASE, "suite_test")) for d in (clean_run, workdir))
    pd.testing.assert_frame_equal(warm.drop(columns="elapsed_s"), cold.drop(columns="elapsed_s"))


def test_corrupt_sample_file_fails_its_job_clearly(clean_run: Path, tmp_path: Path) -> None:
    """A corrupt input names the job, the file and the cause; --keep-going keeps every other result."""
    import shutil

    workdir = tmp_path / "corrupt"
    shutil.copytree(clean_run, workdir, symlinks=True)
    seed = SEEDS[0]
    bad = workdir / P.samples(seed, "base", "suite_test")
    bad.write_bytes(b"PAR1 this is not a parquet file")
    other = workdir / P.scores(seed, "base", "suite_call")
    other_mtime = other.stat().st_mtime_ns
    res = subprocess.run(
        smk_cmd(workdir, *clean_targets(), "--keep-going", "--rerun-triggers", "mtime"),
        capture_output=True, text=True, env=env(), timeout=HANG_GUARD_S,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "Error in rule score" in out and "dataset=suite_test" in out.replace(" ", "")
    log = (workdir / P.logs(seed) / "score" / "base" / "suite_test.log").read_text()
    assert str(bad.relative_to(workdir)) in log or str(bad) in log, log[-2000:]
    assert "parquet" in log.lower()
    assert "Traceback" not in log, "a user-facing error, not a crash"
    assert not (workdir / P.scores(seed, "base", "suite_test")).exists()
    assert other.stat().st_mtime_ns == other_mtime, "an unrelated result was redone"
