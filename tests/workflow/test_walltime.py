"""`maxk wall-time`: a dry run's DAG list-scheduled on N cores from measured job times
(maxk.workflow.walltime), checked against hand-worked schedules, an exhaustive search on small DAGs,
Graham's bound, and Snakemake's own dry run of the default."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from guard import HANG_GUARD_S
from hypothesis import given, settings
from hypothesis import strategies as st

from maxk.workflow.walltime import (
    Job,
    critical_path,
    dependencies,
    fewest_cores,
    job_seconds,
    measured_span,
    parse_dry_run,
    project,
    render,
    schedule,
    speed_up,
    step_seconds,
)

ROOT = Path(__file__).resolve().parents[2]

#: Snakemake 9's dry-run layout: a timestamp line, then each job's block (threads and priority only where
#: they differ from 1 and 0); the `all` target is a localrule with no benchmark.
PLAN = """\
Building DAG of jobs...
Job stats:
job      count
-----  -------
all          1
data         1
train        2
total        4

[Mon Nov 30 23:14:14 2026]
rule data:
    input: raw/a.txt
    output: results/data/a.jsonl.gz
    log: results/logs/data.log
    jobid: 3
    benchmark: results/benchmarks/data/a.tsv
    reason: Forced execution
    resources: tmpdir=/tmp, runtime=30
[Mon Nov 30 23:14:14 2026]
rule train:
    input: results/data/a.jsonl.gz, models/base
    output: results/seed1/models/long, results/seed1/metrics/train/long.csv
    jobid: 1
    benchmark: results/seed1/benchmarks/train/long.tsv
    reason: Forced execution
    wildcards: seed=1, run=long
    threads: 2
    priority: 5
    resources: tmpdir=/tmp, runtime=20
[Mon Nov 30 23:14:14 2026]
rule train:
    input: results/data/a.jsonl.gz, results/seed1/models/long/model.safetensors
    output: results/seed2/models/short
    jobid: 2
    benchmark: results/seed2/benchmarks/train/short.tsv
    reason: Forced execution
[Mon Nov 30 23:14:14 2026]
localrule all:
    input: results/seed1/metrics/train/long.csv, results/seed2/models/short
    jobid: 0
    reason: Forced execution
Job stats:
job      count
-----  -------
all          1
total        4

This was a dry-run (flag -n). The order of jobs does not reflect the order of execution.
"""


def _bench(root: Path, rel: str, *seconds: float) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{s}\t0:00:00\t1\n" for s in seconds)
    path.write_text("s\th:m:s\tmax_rss\n" + rows)


def test_parse_reads_each_block_with_its_defaults():
    jobs = {j.jobid: j for j in parse_dry_run(PLAN)}
    assert sorted(jobs) == [0, 1, 2, 3]
    assert jobs[1].rule == "train" and jobs[1].threads == 2 and jobs[1].priority == 5
    assert jobs[1].inputs == ("results/data/a.jsonl.gz", "models/base")
    assert jobs[1].outputs == ("results/seed1/models/long", "results/seed1/metrics/train/long.csv")
    assert jobs[2].threads == 1 and jobs[2].priority == 0
    assert jobs[0].rule == "all" and jobs[0].benchmark is None and jobs[0].outputs == ()
    assert jobs[3].benchmark == "results/benchmarks/data/a.tsv"


def test_parse_refuses_text_without_jobs_and_blocks_without_ids():
    with pytest.raises(ValueError, match="no job found"):
        parse_dry_run("Building DAG of jobs...\nNothing to be done.\n")
    with pytest.raises(ValueError, match="line 1: rule 'x' has no jobid"):
        parse_dry_run("rule x:\n    input: a\n    output: b\n")


def test_dependencies_match_files_and_folders_above_them():
    deps = dependencies(parse_dry_run(PLAN))
    assert deps == {3: set(), 1: {3}, 2: {3, 1}, 0: {1, 2}}  # 2 reads a file inside 1's output folder


def test_job_seconds_read_each_file_fall_back_on_other_seeds_and_list_the_missing(tmp_path):
    jobs = parse_dry_run(PLAN)
    _bench(tmp_path, "results/benchmarks/data/a.tsv", 4.0)
    _bench(tmp_path, "results/seed1/benchmarks/train/long.tsv", 10.0, 20.0)  # repeats: their mean
    seconds, missing = job_seconds(jobs, tmp_path)
    assert seconds == {0: 0.0, 1: 15.0, 3: 4.0} and [j.jobid for j in missing] == [2]
    _bench(tmp_path, "results/seed1/benchmarks/train/short.tsv", 7.0)  # seed 2's file: seed 1's
    seconds, missing = job_seconds(jobs, tmp_path)
    assert seconds[2] == 7.0 and not missing
    _bench(tmp_path, "results/seed2/benchmarks/train/long.tsv", 99.0)
    assert job_seconds(jobs, tmp_path, times_seed=1)[0][1] == 15.0  # every seed read from seed 1
    assert job_seconds(jobs, tmp_path, times_seed=2)[0][1] == 99.0
    assert job_seconds(jobs, tmp_path)[0][2] == 7.0  # its own file first


def test_the_measured_span_runs_from_the_first_start_to_the_last_end(tmp_path):
    jobs = parse_dry_run(PLAN)
    for rel, seconds, end in [
        ("results/benchmarks/data/a.tsv", 4.0, 1000.0),
        ("results/seed1/benchmarks/train/long.tsv", 10.0, 1012.0),
    ]:
        _bench(tmp_path, rel, seconds)
        os.utime(tmp_path / rel, (end, end))
    seconds, _ = job_seconds(jobs, tmp_path)
    assert (
        measured_span(jobs, tmp_path, seconds) is None
    )  # seed 2's job has no file of its own: another run's plan
    _bench(tmp_path, "results/seed2/benchmarks/train/short.tsv", 6.0)
    os.utime(tmp_path / "results/seed2/benchmarks/train/short.tsv", (1020.0, 1020.0))
    seconds, _ = job_seconds(jobs, tmp_path)
    assert measured_span(jobs, tmp_path, seconds) == 1020.0 - (1000.0 - 4.0)
    assert "Measured: the run of these jobs took 24 s" in render(PLAN, tmp_path, [2])
    assert "Measured" not in render(PLAN, tmp_path, [2], times_seed=1)


def test_a_hand_worked_schedule():
    # a(3), b(2), c(2) independent, d(1) after a and b.
    deps = {1: set(), 2: set(), 3: set(), 4: {1, 2}}
    sec = {1: 3.0, 2: 2.0, 3: 2.0, 4: 1.0}
    ones = dict.fromkeys(deps, 1)
    assert schedule(deps, sec, ones, {}, 2) == 4.0  # longest chain first: a | b, c; d at 3
    pri = {3: 1}  # c first: c, a | b at 2; d at 4
    assert schedule(deps, sec, ones, pri, 2) == 5.0
    assert schedule(deps, sec, ones, pri, 1) == 8.0
    assert schedule(deps, sec, ones, pri, 3) == 4.0  # the critical path a -> d
    assert critical_path(deps, sec) == (4.0, [1, 4])
    two = {**ones, 1: 2}  # a asks two threads: c, b | a at 2, alone | d at 5
    assert schedule(deps, sec, two, pri, 2) == 6.0
    assert schedule(deps, sec, two, pri, 1) == 8.0  # capped at the one core, as --cores caps it


def test_the_fewest_cores_within_a_budget():
    def job(i, threads=1, *ups):
        return Job(i, "r", tuple(f"o{u}" for u in ups), (f"o{i}",), f"b{i}", threads)

    jobs = [job(1), job(2), job(3), job(4, 1, 1, 2)]  # the hand-worked DAG above
    sec = {1: 3.0, 2: 2.0, 3: 2.0, 4: 1.0}
    assert [fewest_cores(jobs, sec, b) for b in (8.0, 7.9, 4.0, 3.9)] == [1, 2, 2, None]
    wide = [job(1, 2), job(2, 2)]  # two two-thread jobs: both at once need four cores
    assert fewest_cores(wide, {1: 5.0, 2: 5.0}, 5.0) == 4 and fewest_cores(wide, {1: 5.0, 2: 5.0}, 10.0) == 1


def _brute_force_greedy(deps, sec, cores):
    """Every job-to-start order a greedy list scheduler could take on one-thread jobs: the best and
    worst of them bound any list schedule's wall time."""
    walls = []
    for order in itertools.permutations(sorted(deps)):
        rank = {j: i for i, j in enumerate(order)}
        walls.append(schedule(deps, sec, dict.fromkeys(deps, 1), {j: -rank[j] for j in deps}, cores))
    return min(walls), max(walls)


@st.composite
def _dags(draw):
    n = draw(st.integers(1, 6))
    deps = {j: set(draw(st.sets(st.integers(0, j - 1), max_size=j)) if j else set()) for j in range(n)}
    sec = {j: float(draw(st.integers(0, 9))) for j in range(n)}
    return deps, sec


@settings(max_examples=60, deadline=None)
@given(_dags(), st.integers(1, 4))
def test_the_schedule_lies_between_its_bounds_and_among_the_list_schedules(dag, cores):
    deps, sec = dag
    wall = schedule(deps, sec, dict.fromkeys(deps, 1), {}, cores)
    path, chain = critical_path(deps, sec)
    work = sum(sec.values()) / cores
    assert max(work, path) - 1e-9 <= wall <= work + path + 1e-9  # Graham: no idle core while work waits
    assert sum(sec[j] for j in chain) == path
    assert all(a in deps[b] for a, b in itertools.pairwise(chain))
    best, worst = _brute_force_greedy(deps, sec, cores)
    assert best <= wall <= worst
    assert schedule(deps, sec, dict.fromkeys(deps, 1), {}, len(deps)) == path  # a core per job


def test_project_and_render(tmp_path):
    for rel, s in [
        ("results/benchmarks/data/a.tsv", 4.0),
        ("results/seed1/benchmarks/train/long.tsv", 10.0),
        ("results/seed2/benchmarks/train/short.tsv", 6.0),
    ]:
        _bench(tmp_path, rel, s)
    jobs = parse_dry_run(PLAN)
    seconds, _ = job_seconds(jobs, tmp_path)
    (one, two) = project(jobs, seconds, [1, 2])
    assert (one.wall, one.work_bound, one.path_bound) == (20.0, 20.0, 20.0)
    assert (two.wall, two.work_bound) == (20.0, (4.0 + 2 * 10.0 + 6.0) / 2)
    text = render(PLAN, tmp_path, [2])
    assert "| 2 | 20 s | 15 s | 20 s |" in text
    assert "- 10 s: train (results/seed1/benchmarks/train/long.tsv)" in text
    assert "Within 20 s: 1 core at the fewest." in render(PLAN, tmp_path, [2], within=20.0)
    assert "on no number of cores" in render(PLAN, tmp_path, [2], within=19.0)
    with pytest.raises(ValueError, match="cores must be at least 1, not 0"):
        render(PLAN, tmp_path, [2, 0])
    (tmp_path / "results/seed2/benchmarks/train/short.tsv").unlink()
    (tmp_path / "results/seed1/benchmarks/train/long.tsv").unlink()
    with pytest.raises(ValueError, match=r"2 of 4 jobs have no benchmark file.*\n  train \(results/seed1"):
        render(PLAN, tmp_path, [2])
    text = render(PLAN, tmp_path, [1], missing_seconds=3.0)  # data 4 s, the two training jobs 3 s each
    assert "| 1 | 10 s |" in text
    assert "2 job(s) with no benchmark file in any seed at 3.0 s: train (results/seed1" in text


#: PLAN with seed 2's run starting from seed 1's end (maxk.train.prefix: the shorter run's metrics CSV is
#: among the longer run's inputs) and writing a metrics CSV of its own
PREFIXED = PLAN.replace(
    "    input: results/data/a.jsonl.gz, results/seed1/models/long/model.safetensors\n"
    "    output: results/seed2/models/short\n",
    "    input: results/data/a.jsonl.gz, results/seed1/metrics/train/long.csv\n"
    "    output: results/seed2/models/short, results/seed2/metrics/train/short.csv\n",
)


def _metrics(root: Path, rel: str, step_times: dict[int, float]) -> None:
    """A training metrics CSV as maxk.train.run.write_metrics_csv writes it: a held-out point before the
    first step (step 0, no step time), then a row per optimizer step."""
    from maxk.train.run import write_metrics_csv

    history = [{"step": 0, "heldout/reward": 0.5}]
    history += [{"step": k, "loss": 0.1, "step_time": t} for k, t in step_times.items()]
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    write_metrics_csv(root / rel, history)


def _prefixed_benched(root: Path) -> list[Job]:
    """PREFIXED's jobs, with the data job at 4 s, long (seed 1) at 10 s and short (seed 2) at 6 s."""
    for rel, s in [
        ("results/benchmarks/data/a.tsv", 4.0),
        ("results/seed1/benchmarks/train/long.tsv", 10.0),
        ("results/seed2/benchmarks/train/short.tsv", 6.0),
    ]:
        _bench(root, rel, s)
    return parse_dry_run(PREFIXED)


def test_speed_ups_scale_a_rule_or_only_the_optimizer_steps_a_job_ran(tmp_path):
    assert PREFIXED != PLAN
    jobs = _prefixed_benched(tmp_path)
    _metrics(tmp_path, "results/seed1/metrics/train/long.csv", {1: 2.0, 2: 3.0})
    _metrics(tmp_path, "results/seed2/metrics/train/short.csv", {1: 2.0, 2: 3.0, 3: 1.5})  # 1-2 adopted
    assert step_seconds(tmp_path / "results/seed2/metrics/train/short.csv") == 6.5
    assert step_seconds(tmp_path / "results/seed2/metrics/train/short.csv", after=2) == 1.5
    seconds, _ = job_seconds(jobs, tmp_path)
    assert speed_up(jobs, seconds, tmp_path, {}) == seconds
    sft = [
        Job(
            9,
            "base_model",
            (),
            ("results/seed1/metrics/train/base.csv",),
            "results/seed1/benchmarks/base.tsv",
        )
    ]
    assert speed_up(sft, {9: 5.0}, tmp_path, {"train-steps": 2.0}) == {9: 5.0}  # an SFT curve: not RL steps
    # long: 10 s of which 5 s of steps; short: 6 s of which 1.5 s of its own steps (after long's step 2)
    assert speed_up(jobs, seconds, tmp_path, {"train-steps": 2.0}) == {0: 0.0, 1: 7.5, 2: 5.25, 3: 4.0}
    assert speed_up(jobs, seconds, tmp_path, {"train-steps": float("inf")}) == {
        0: 0.0,
        1: 5.0,
        2: 4.5,
        3: 4.0,
    }
    assert speed_up(jobs, seconds, tmp_path, {"data": float("inf"), "train": 4.0}) == {
        0: 0.0, 1: 2.5, 2: 1.5, 3: 0.0,
    }  # fmt: skip
    _metrics(tmp_path, "results/seed1/metrics/train/long.csv", {1: 20.0})  # more than the job's 10 s
    assert speed_up(jobs, seconds, tmp_path, {"train-steps": float("inf")})[1] == 0.0
    for factors, message in [
        ({"train": 2.0, "train-steps": 2.0}, "both name the jobs of rule train"),
        (
            {"nope": 2.0},
            r"nope: no such rule in the plan \(rules: all, data, train; the training jobs' parts",
        ),
        ({"data": 0.0}, "must be above 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            speed_up(jobs, seconds, tmp_path, factors)
    (tmp_path / "results/seed2/metrics/train/short.csv").unlink()
    with pytest.raises(
        ValueError, match=r"no metrics CSV results/seed2/metrics/train/short\.csv \(in no seed\)"
    ):
        speed_up(jobs, seconds, tmp_path, {"train-steps": 2.0})
    # every seed's files read from seed 1's (--times-seed): seed 2's job is seed 1's short run
    _metrics(tmp_path, "results/seed1/metrics/train/long.csv", {1: 2.0, 2: 3.0})
    _bench(tmp_path, "results/seed1/benchmarks/train/short.tsv", 8.0)
    _metrics(tmp_path, "results/seed1/metrics/train/short.csv", {2: 1.0, 3: 3.0})  # its own: step 3
    seed1, _ = job_seconds(jobs, tmp_path, times_seed=1)
    assert speed_up(jobs, seed1, tmp_path, {"train-steps": float("inf")}, times_seed=1)[2] == 5.0
    # without --times-seed, seed 2's missing CSV falls back on the seeds that have it (as its seconds do)
    assert speed_up(jobs, seconds, tmp_path, {"train-steps": float("inf")})[2] == 6.0 - 3.0
    text = render(PREFIXED, tmp_path, [1], times_seed=1, speedups={"train-steps": float("inf"), "data": 2.0})
    assert "with train-steps at 0 s, data 2x faster (measured: 22 s, from seed 1's" in text
    assert "| 1 | 12 s |" in text  # data 4 / 2, long 10 - 5, short 8 - 3


def test_speed_ups_scale_one_part_of_the_steps_or_the_rest_of_a_training_job(tmp_path):
    from maxk.train.run import write_metrics_csv

    jobs = _prefixed_benched(tmp_path)
    # step: (step_time, sampling, reward); write_metrics_csv adds the update, the step's remainder
    long = {1: (2.0, 1.0, 0.5), 2: (3.0, 1.0, 1.0)}  # steps 5: sampling 2, reward 1.5, update 1.5; rest 5
    short = {**long, 3: (1.5, 0.5, 0.5)}  # its own step 3 (1-2 adopted from long): 0.5 each; rest 4.5
    for rel, steps in [
        ("results/seed1/metrics/train/long.csv", long),
        ("results/seed2/metrics/train/short.csv", short),
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        write_metrics_csv(
            tmp_path / rel,
            [{"step": 0, "heldout/reward": 0.5}]
            + [
                {"step": k, "loss": 0.1, "step_time": t, "time/generation_s": g, "time/reward_s": r}
                for k, (t, g, r) in steps.items()
            ],
        )
    csv_path = tmp_path / "results/seed1/metrics/train/long.csv"
    assert step_seconds(csv_path, column="time/update_s") == 1.5
    seconds, _ = job_seconds(jobs, tmp_path)
    assert speed_up(jobs, seconds, tmp_path, {"train-update": 2.0}) == {0: 0.0, 1: 9.25, 2: 5.75, 3: 4.0}
    every_part = dict.fromkeys(["train-sampling", "train-reward", "train-update"], float("inf"))
    assert speed_up(jobs, seconds, tmp_path, every_part) == speed_up(
        jobs, seconds, tmp_path, {"train-steps": float("inf")}
    ) == {0: 0.0, 1: 5.0, 2: 4.5, 3: 4.0}  # fmt: skip
    assert speed_up(jobs, seconds, tmp_path, {"train-rest": float("inf")}) == {0: 0.0, 1: 5.0, 2: 1.5, 3: 4.0}
    # the rest and one part: long 5 / 2 + (5 - 2) + 2 / 2, short 4.5 / 2 + 1 + 0.5 / 2
    both = {"train-rest": 2.0, "train-sampling": 2.0}
    assert speed_up(jobs, seconds, tmp_path, both) == {0: 0.0, 1: 6.5, 2: 3.5, 3: 4.0}
    text = render(PREFIXED, tmp_path, [1], speedups={"train-update": float("inf"), "data": 2.0})
    assert "with train-update at 0 s, data 2x faster (measured: 20 s," in text
    for factors, message in [
        ({"train-steps": 2.0, "train-update": 2.0}, "the steps are their parts together"),
        (
            {"train": 2.0, "train-rest": 2.0},
            "--speedup train and train-rest both name the jobs of rule train",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            speed_up(jobs, seconds, tmp_path, factors)
    # steps longer than the job (short at 1 s, its own steps 1.5 s): the steps at 1 s, each part cut to 2/3
    assert speed_up(jobs, {**seconds, 2: 1.0}, tmp_path, {"train-update": float("inf")})[2] == pytest.approx(
        2 / 3
    )
    # a CSV written before the parts were timed (no time/* columns): only its parts cannot be read
    csv_path.write_text("step,loss,step_time\n1,0.1,2.0\n2,0.1,3.0\n")
    assert speed_up(jobs, seconds, tmp_path, {"train-steps": float("inf")})[1] == 5.0
    with pytest.raises(ValueError, match=r"long\.csv: no 'time/generation_s' column"):
        speed_up(jobs, seconds, tmp_path, {"train-sampling": 2.0})


def test_a_job_without_its_csv_takes_the_median_seed_s_parts_never_more_than_its_steps(tmp_path):
    from maxk.train.run import write_metrics_csv

    jobs = [
        Job(
            s,
            "train",
            (),
            (f"results/seed{s}/metrics/train/r.csv",),
            f"results/seed{s}/benchmarks/train/r.tsv",
        )
        for s in (1, 2, 3, 4)
    ]
    for seed, (t, g, r) in {1: (10.0, 5.0, 5.0), 2: (6.0, 6.0, 0.0), 3: (6.0, 0.0, 6.0)}.items():
        _bench(tmp_path, f"results/seed{seed}/benchmarks/train/r.tsv", 12.0)
        rel = tmp_path / f"results/seed{seed}/metrics/train/r.csv"
        rel.parent.mkdir(parents=True, exist_ok=True)
        step = {"step": 1, "loss": 0.1, "step_time": t, "time/generation_s": g, "time/reward_s": r}
        write_metrics_csv(rel, [step])
    seconds = {1: 12.0, 2: 12.0, 3: 12.0, 4: 8.0}  # seed 4 ran (8 s) but its CSV is gone
    # seed 4's medians: steps 6, sampling 5, reward 5: the parts cut to 3 + 3, so that a factor of 1
    # projects what was measured, never more
    ones = {"train-sampling": 1.0, "train-reward": 1.0}
    assert speed_up(jobs, seconds, tmp_path, ones)[4] == pytest.approx(8.0)
    halves = {"train-sampling": 2.0, "train-reward": 2.0}
    assert speed_up(jobs, seconds, tmp_path, halves)[4] == pytest.approx(2.0 + 1.5 + 1.5)
    assert speed_up(jobs, seconds, tmp_path, {"train-sampling": 2.0})[1] == pytest.approx(12.0 - 2.5)


def test_the_cli_reads_a_plan_from_standard_input(tmp_path):
    _bench(tmp_path, "results/benchmarks/data/a.tsv", 4.0)
    _bench(tmp_path, "results/seed1/benchmarks/train/long.tsv", 10.0)
    _bench(tmp_path, "results/seed1/benchmarks/train/short.tsv", 6.0)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "maxk", "wall-time", "-", "--root", str(tmp_path), "--cores", "1", "4"],
        input=PLAN, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "| 1 | 20 s |" in res.stdout and "| 4 | 20 s |" in res.stdout
    res = subprocess.run(
        [sys.executable, "-m", "maxk", "wall-time", str(tmp_path / "none.txt")],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert res.returncode == 1 and "none.txt: cannot read the dry run" in res.stderr
    assert "Traceback" not in res.stderr
    for spec, message in [("train-steps", "expected NAME=FACTOR"), ("data=fast", "expected NAME=FACTOR"),
                          ("nope=2", "nope: no such rule in the plan")]:  # fmt: skip
        res = subprocess.run(
            [sys.executable, "-m", "maxk", "wall-time", "-", "--root", str(tmp_path), "--speedup", spec],
            input=PLAN, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
        )  # fmt: skip
        assert res.returncode == 1 and message in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_snakemake_s_own_dry_run_of_the_default_parses_into_one_dag():
    """Pins the parser to the installed Snakemake: every job of the default's dry run, its count as
    Snakemake counts it, a benchmark for every job but `all`, and one acyclic DAG ending in `all`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "2"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout + res.stderr
    total = int(re.search(r"^total\s+(\d+)$", out, flags=re.M)[1])
    jobs = parse_dry_run(out)
    assert len(jobs) == total and len({j.jobid for j in jobs}) == total
    assert [j.rule for j in jobs if not j.benchmark] == ["all"]
    deps = dependencies(jobs)
    sinks = {j.jobid for j in jobs} - {u for ups in deps.values() for u in ups}
    assert [j.rule for j in jobs if j.jobid in sinks] == ["all"]
    by_id = {j.jobid: j for j in jobs}
    trained = [j for j in jobs if j.rule == "generate_shard" and "/base" not in j.benchmark]
    assert trained and all(any(by_id[u].rule == "train" for u in deps[j.jobid]) for j in trained)
    threads = {j.jobid: j.threads for j in jobs}
    ones = dict.fromkeys(deps, 1.0)
    assert schedule(deps, ones, threads, {}, 2) >= critical_path(deps, ones)[0] > 5
    assert any(j.threads == 2 for j in jobs) and any(j.priority > 0 for j in jobs)
