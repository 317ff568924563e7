"""A DAG's wall time on ``c`` cores, projected from the job times a run measured.

Snakemake's dry run (``snakemake -n --forceall --cores all ...``) prints every job of a DAG with its
inputs, outputs, benchmark file, threads and priority (the threads capped at ``--cores``: give the
measured run's); a results tree holds each job's measured seconds in that benchmark file. From the
two this module computes, for any number of cores:

- two lower bounds: the summed job time (thread-seconds) over the cores, and the critical path (the
  longest chain of dependent jobs, each at its measured time);
- a projection: the DAG list-scheduled greedily, a stand-in for Snakemake's local scheduler, which also
  starts ready jobs by priority while cores are free (here: at each job's end, the ready jobs by
  priority, then longest remaining chain, each started while its threads fit; a job asking more threads
  than there are cores gets them all, as ``--cores`` caps it).

Each job is assumed to take on ``c`` cores what it took in the measured run (one-thread jobs do not slow
one another down): a projection, not a measurement. ``--times-seed`` reads every seed's job time from
one seed's files (e.g. a seed that ran alone on an idle machine), so a DAG of more seeds than the tree
ran can be projected from the one it did.

``speed_up`` asks what a lever would buy before it exists: every job of a rule at its measured seconds
over a factor, or a part of each RL training job: its optimizer steps (``TRAIN_STEPS``: the summed
``step_time`` of the steps a job ran, from its metrics CSV), or one part of them (``TRAIN_PARTS``: the
sampling of the rollouts, the sandbox's rewards, the policy update; the three make up ``step_time``), or
the rest of the job (``TRAIN_REST``: its start-up, held-out and own-prompt measurements and saving, the
job's seconds less its steps). A factor of ``inf`` makes those seconds 0: the floor no speed-up of that
part can go below.
"""

from __future__ import annotations

import csv
import heapq
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

from maxk.readme import Job as BenchmarkJob
from maxk.readme import benchmark_seconds, format_duration, wall_seconds

__all__ = [
    "Job",
    "Projection",
    "critical_path",
    "dependencies",
    "fewest_cores",
    "job_seconds",
    "measured_span",
    "parse_dry_run",
    "project",
    "render",
    "schedule",
    "speed_up",
    "step_seconds",
]

#: ``speed_up``'s name for the training jobs' optimizer steps (not a rule name: rule names are identifiers)
TRAIN_STEPS = "train-steps"
#: ``speed_up``'s names for the parts of an optimizer step -> the metrics CSV's column of each part's
#: seconds (``maxk.train.run.METRIC_COLUMNS``); the three add up to ``step_time``
TRAIN_PARTS = {
    "train-sampling": "time/generation_s",
    "train-reward": "time/reward_s",
    "train-update": "time/update_s",
}
#: ``speed_up``'s name for the rest of a training job: its seconds less its optimizer steps
TRAIN_REST = "train-rest"
_TRAIN_NAMES = (TRAIN_STEPS, *TRAIN_PARTS, TRAIN_REST)
#: the rule of the RL training jobs (the base model's rule writes an SFT curve under the same folder)
TRAIN_RULE = "train"
#: a training job's metrics CSV (``maxk.paths``: ``results/seed{seed}/metrics/train/{run}.csv``)
_TRAIN_CSV = re.compile(r"(?<![^/])metrics/train/[^/]+\.csv$")

_SEED = re.compile(r"(?<![^/])seed\d+(?=/)")


@dataclass(frozen=True)
class Job:
    """One job of a dry run: its id, rule, files, benchmark file (None where the rule has none),
    threads and priority."""

    jobid: int
    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    benchmark: str | None
    threads: int = 1
    priority: int = 0

    def label(self) -> str:
        """The rule and, where it has one, its benchmark file: what a reader recognises."""
        return f"{self.rule} ({self.benchmark})" if self.benchmark else self.rule


def _files(value: str) -> tuple[str, ...]:
    return tuple(f.strip() for f in value.split(",") if f.strip())


def parse_dry_run(text: str) -> list[Job]:
    """The jobs of ``snakemake -n`` output: each ``rule NAME:`` block's ``input``, ``output``,
    ``benchmark``, ``jobid``, ``threads`` (1 when absent) and ``priority`` (0 when absent).

    Raises ``ValueError`` naming the block when a job has no ``jobid``, and when no job is found."""
    jobs: list[Job] = []
    block: dict[str, str] | None = None
    rule = ""
    start = 0

    def close() -> None:
        if block is None:
            return
        if "jobid" not in block:
            raise ValueError(f"dry run, line {start}: rule {rule!r} has no jobid (not from `snakemake -n`?)")
        jobs.append(
            Job(
                jobid=int(block["jobid"]),
                rule=rule,
                inputs=_files(block.get("input", "")),
                outputs=_files(block.get("output", "")),
                benchmark=block.get("benchmark") or None,
                threads=int(block.get("threads", 1)),
                priority=int(block.get("priority", 0)),
            )
        )

    for number, line in enumerate(text.splitlines(), 1):
        head = re.fullmatch(r"(?:local)?rule (\w+):", line.strip()) if not line.startswith(" ") else None
        if head:
            close()
            block, rule, start = {}, head[1], number
        elif block is not None and line.startswith("    "):
            key, sep, value = line.strip().partition(": ")
            if sep and key in {"input", "output", "benchmark", "jobid", "threads", "priority"}:
                block[key] = value.strip()
        elif block is not None and not line.startswith(" "):
            close()
            block = None
    close()
    if not jobs:
        raise ValueError("dry run: no job found (run `snakemake -n --forceall ...` and pass its output)")
    return jobs


def dependencies(jobs: Sequence[Job]) -> dict[int, set[int]]:
    """Each job's upstream jobs: those with an output equal to one of its inputs or to a folder
    above one (a directory output)."""
    made = {out: j.jobid for j in jobs for out in j.outputs}
    deps: dict[int, set[int]] = {j.jobid: set() for j in jobs}
    for j in jobs:
        for f in j.inputs:
            path = PurePosixPath(f)
            for candidate in (path, *path.parents):
                up = made.get(candidate.as_posix())
                if up is not None and up != j.jobid:
                    deps[j.jobid].add(up)
                    break
    return deps


def _seeds(jobs: Sequence[Job]) -> list[int]:
    """The seeds the plan's benchmark files name (``seed{N}/``), in order."""
    return sorted({int(m[0][4:]) for j in jobs if j.benchmark for m in [_SEED.search(j.benchmark)] if m})


def _own_or_median(
    seeded: bool,
    seeds: Sequence[int],
    times_seed: int | None,
    read: Callable[[Callable[[str], str]], float | None],
) -> float | None:
    """What ``read`` finds in a job's own seed's files (``times_seed``'s when given), else the median of
    what it finds in each of ``seeds`` (only for a ``seeded`` job, one whose paths name a ``seed{N}/``);
    None where it finds nothing. ``read`` gets the map from a plan's path to that seed's path."""

    def into(seed: int | None) -> Callable[[str], str]:
        return (lambda p: p) if seed is None else (lambda p: _SEED.sub(f"seed{seed}", p))

    own = read(into(times_seed))
    if own is not None or not seeded:
        return own
    found = [x for s in seeds if (x := read(into(s))) is not None]
    return statistics.median(found) if found else None


def job_seconds(
    jobs: Sequence[Job],
    root: Path,
    *,
    times_seed: int | None = None,
    read: Callable[[Path], float] = benchmark_seconds,
) -> tuple[dict[int, float], list[Job]]:
    """Each job's measured seconds, from its benchmark file under ``root`` (the directory the dry
    run's paths are relative to), and the jobs with a benchmark but no time.

    With ``times_seed``, a path's ``seed{N}`` is read as ``seed{times_seed}``. A job whose own file is
    missing takes the median of the same file in the seeds that have it; a job with no benchmark (the
    ``all`` target) takes 0."""
    seeds = _seeds(jobs)
    seconds: dict[int, float] = {}
    missing: list[Job] = []

    def benchmark(bench: str, at: Callable[[str], str]) -> float | None:
        """The seconds of benchmark file ``bench`` where ``at`` maps it; None where there is no file."""
        return read(root / at(bench)) if (root / at(bench)).is_file() else None

    for j in jobs:
        if not j.benchmark:
            seconds[j.jobid] = 0.0
            continue
        found = _own_or_median(
            bool(_SEED.search(j.benchmark)), seeds, times_seed, partial(benchmark, j.benchmark)
        )
        if found is None:
            missing.append(j)
        else:
            seconds[j.jobid] = found
    return seconds, missing


def step_seconds(path: Path, after: int | None = None, column: str = "step_time") -> float:
    """The summed ``step_time`` (or ``column``, e.g. one of ``TRAIN_PARTS``'s) of a training metrics CSV's
    rows (``maxk.train.run.write_metrics_csv``: one per optimizer step), those with ``step`` above
    ``after`` only when given; rows without a step time (the held-out point before the first step) add
    nothing. ``ValueError`` for a CSV without the ``step`` or that column."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and ("step_time" not in rows[0] or "step" not in rows[0]):
        raise ValueError(f"{path}: not a training metrics CSV (no 'step' and 'step_time' columns)")
    if rows and column not in rows[0]:
        raise ValueError(f"{path}: no {column!r} column (a CSV written before the step's parts were timed)")
    return sum(
        float(r[column])
        for r in rows
        if r["step_time"] and r[column] and (after is None or int(r["step"]) > after)
    )


def _last_step(path: Path) -> int:
    with path.open(newline="") as fh:
        return max((int(r["step"]) for r in csv.DictReader(fh) if r["step"]), default=0)


def speed_up(
    jobs: Sequence[Job],
    seconds: Mapping[int, float],
    root: Path,
    factors: Mapping[str, float],
    *,
    times_seed: int | None = None,
) -> dict[int, float]:
    """``seconds`` with each job of a rule named in ``factors`` at its seconds over the rule's factor, and
    each RL training job's (rule ``train``) parts named there at theirs over their factors: under
    ``TRAIN_STEPS`` its optimizer steps, under a ``TRAIN_PARTS`` name that part of them, under
    ``TRAIN_REST`` the rest of the job. A job's steps are those it ran (``step_seconds`` of its metrics CSV
    output; where it started from a shorter run's end, ``maxk.train.prefix``, whose metrics CSV is among
    its inputs, only the steps after that run's last), at most the job's own seconds (its parts cut in
    proportion); as ``job_seconds`` reads the seconds, with ``times_seed`` from that seed's files, and where
    a job's CSV is missing the median of the seeds that have it. A factor ``inf`` makes those seconds 0.
    ``ValueError`` for a name that is no rule of the plan, a factor not above 0, a rule and a part of its
    jobs or ``TRAIN_STEPS`` and a part of the steps together, and a training job without its metrics CSV
    in any seed."""
    rules = {j.rule for j in jobs}
    for name, factor in factors.items():
        if name not in _TRAIN_NAMES and name not in rules:
            raise ValueError(
                f"--speedup {name}: no such rule in the plan (rules: {', '.join(sorted(rules))}; "
                f"the training jobs' parts: {', '.join(_TRAIN_NAMES)})"
            )
        if not factor > 0:
            raise ValueError(f"--speedup {name}={factor}: the factor must be above 0 (inf: those seconds 0)")
    parts = [name for name in TRAIN_PARTS if name in factors]
    if TRAIN_STEPS in factors and parts:
        raise ValueError(
            f"--speedup {TRAIN_STEPS} and {', '.join(parts)}: the steps are their parts together "
            f"({', '.join(TRAIN_PARTS)}); name the steps or their parts"
        )
    asked = [name for name in _TRAIN_NAMES if name in factors]

    def scaled(value: float, factor: float) -> float:
        return 0.0 if math.isinf(factor) else value / factor

    seeds = _seeds(jobs)

    def steps_in(j: Job, metrics: str, column: str, at: Callable[[str], str]) -> float | None:
        """The job's summed ``column`` over its own steps in the files ``at`` maps its paths to; None
        without them."""
        if not (root / at(metrics)).is_file():
            return None
        prefix = [root / at(i) for i in j.inputs if _TRAIN_CSV.search(i)]
        after = _last_step(prefix[0]) if prefix and prefix[0].is_file() else None
        return step_seconds(root / at(metrics), after, column)

    def summed(j: Job, metrics: str, column: str) -> float:
        """``steps_in`` from the job's own seed, else the median of the seeds (as ``job_seconds`` reads)."""
        found = _own_or_median(
            bool(_SEED.search(metrics)), seeds, times_seed, partial(steps_in, j, metrics, column)
        )
        if found is None:
            raise ValueError(
                f"{j.label()}: no metrics CSV {metrics} (in no seed) to read its optimizer steps from"
            )
        return found

    out = dict(seconds)
    for j in jobs:
        if j.rule in factors:
            out[j.jobid] = scaled(out[j.jobid], factors[j.rule])
        metrics = [o for o in j.outputs if _TRAIN_CSV.search(o)]
        if not asked or j.rule != TRAIN_RULE or not metrics:
            continue
        if j.rule in factors:
            raise ValueError(f"--speedup {j.rule} and {asked[0]} both name the jobs of rule {j.rule}")

        read = partial(summed, j, metrics[0])
        total = read("step_time")
        steps = min(total, out[j.jobid])
        cut = steps / total if total else 0.0  # the parts in proportion where the steps exceed the job
        split = {name: read(column) * cut for name, column in TRAIN_PARTS.items() if name in factors}
        named = sum(split.values())
        if named > steps:  # medians over seeds (a missing own CSV) need not add up: cut in proportion
            split = {name: v * steps / named for name, v in split.items()}
        rest_of_steps = max(0.0, steps - sum(split.values()))
        out[j.jobid] = (
            scaled(out[j.jobid] - steps, factors.get(TRAIN_REST, 1.0))
            + scaled(rest_of_steps, factors.get(TRAIN_STEPS, 1.0))
            + sum(scaled(v, factors[name]) for name, v in split.items())
        )
    return out


def measured_span(jobs: Sequence[Job], root: Path, seconds: Mapping[int, float]) -> float | None:
    """The wall seconds the measured run took over these jobs (``maxk.readme.wall_seconds``: the first
    job's start to the last job's end, a benchmark file being written at its job's end), with each job's
    ``seconds`` as ``job_seconds`` read them; None unless every job with a benchmark has its own file
    (its run ran this plan)."""
    records = []
    for j in jobs:
        if not j.benchmark:
            continue
        path = root / j.benchmark
        if not path.is_file():
            return None
        records.append(BenchmarkJob(j.benchmark, "", seconds[j.jobid], path.stat().st_mtime))
    return wall_seconds(records)


def _downstream(deps: Mapping[int, set[int]]) -> dict[int, list[int]]:
    """Each job's downstream jobs (the reverse of ``deps``), in id order."""
    down: dict[int, list[int]] = {j: [] for j in deps}
    for j in sorted(deps):
        for u in deps[j]:
            down[u].append(j)
    return down


def _tails(deps: Mapping[int, set[int]], seconds: Mapping[int, float]) -> dict[int, float]:
    """Each job's longest chain to the DAG's end, its own seconds included."""
    down = _downstream(deps)
    tail: dict[int, float] = {}
    for j in _topological(deps)[::-1]:
        tail[j] = seconds[j] + max((tail[d] for d in down[j]), default=0.0)
    return tail


def _topological(deps: Mapping[int, set[int]]) -> list[int]:
    """The job ids upstream first (ties by id); ``ValueError`` on a cycle."""
    indegree = {j: len(ups) for j, ups in deps.items()}
    down = _downstream(deps)
    ready = sorted(j for j, n in indegree.items() if n == 0)
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        j = heapq.heappop(ready)
        order.append(j)
        for d in down[j]:
            indegree[d] -= 1
            if indegree[d] == 0:
                heapq.heappush(ready, d)
    if len(order) != len(deps):
        raise ValueError("the dry run's jobs form a cycle")
    return order


def critical_path(deps: Mapping[int, set[int]], seconds: Mapping[int, float]) -> tuple[float, list[int]]:
    """The longest chain of dependent jobs: its seconds and its job ids, first job first."""
    tail = _tails(deps, seconds)
    down = _downstream(deps)
    roots = [j for j, ups in deps.items() if not ups]
    if not roots:
        return 0.0, []
    j = max(roots, key=lambda r: (tail[r], -r))
    chain = [j]
    while down[j]:
        j = max(down[j], key=lambda d: (tail[d], -d))
        chain.append(j)
    return tail[chain[0]], chain


def schedule(
    deps: Mapping[int, set[int]],
    seconds: Mapping[int, float],
    threads: Mapping[int, int],
    priority: Mapping[int, int],
    cores: int,
) -> float:
    """The wall seconds of a greedy list schedule on ``cores`` cores: whenever jobs end, the ready jobs
    in order of priority (high first), then longest remaining chain, then id, each started while its
    threads (capped at ``cores``) fit in the free cores."""
    if cores < 1:
        raise ValueError(f"cores must be at least 1, not {cores}")
    tail = _tails(deps, seconds)
    waiting = {j: len(ups) for j, ups in deps.items()}
    down = _downstream(deps)
    ready = [j for j, n in waiting.items() if n == 0]
    running: list[tuple[float, int]] = []
    free, now, done = cores, 0.0, 0
    while ready or running:
        ready.sort(key=lambda j: (-priority.get(j, 0), -tail[j], j))
        for j in list(ready):
            need = min(threads.get(j, 1), cores)
            if need <= free:
                free -= need
                ready.remove(j)
                heapq.heappush(running, (now + seconds[j], j))
        if not running:
            raise ValueError("no job can start: the dry run's jobs form a cycle")
        now, j = heapq.heappop(running)
        ended = [j]
        while running and running[0][0] == now:
            ended.append(heapq.heappop(running)[1])
        for j in ended:
            done += 1
            free += min(threads.get(j, 1), cores)
            for d in down[j]:
                waiting[d] -= 1
                if waiting[d] == 0:
                    ready.append(d)
    if done != len(deps):
        raise ValueError("not every job ran: the dry run's jobs form a cycle")
    return now


@dataclass(frozen=True)
class Projection:
    """One number of cores: the projected wall seconds and its two lower bounds."""

    cores: int
    wall: float
    work_bound: float
    path_bound: float


def project(jobs: Sequence[Job], seconds: Mapping[int, float], cores: Iterable[int]) -> list[Projection]:
    """The projection and the lower bounds for each number of ``cores``."""
    cores = list(cores)
    if any(c < 1 for c in cores):
        raise ValueError(f"cores must be at least 1, not {min(cores)}")
    deps = dependencies(jobs)
    threads = {j.jobid: j.threads for j in jobs}
    priority = {j.jobid: j.priority for j in jobs}
    path, _ = critical_path(deps, seconds)
    out = []
    for c in cores:
        work = sum(seconds[j.jobid] * min(j.threads, c) for j in jobs) / c
        out.append(Projection(c, schedule(deps, seconds, threads, priority, c), work, path))
    return out


def fewest_cores(jobs: Sequence[Job], seconds: Mapping[int, float], budget: float) -> int | None:
    """The fewest cores on which the projected wall time is within ``budget`` seconds; None where the
    critical path alone exceeds it. (A greedy schedule can be slower on more cores, Graham's anomaly, so
    this is a search from one core up, not a bisection; at the summed threads of all jobs every job
    starts when it is ready, so the search ends.)"""
    deps = dependencies(jobs)
    if critical_path(deps, seconds)[0] > budget:
        return None
    threads = {j.jobid: j.threads for j in jobs}
    priority = {j.jobid: j.priority for j in jobs}
    for c in range(1, sum(threads.values()) + 1):
        if schedule(deps, seconds, threads, priority, c) <= budget:
            return c
    raise AssertionError("unreachable: with a core per thread the wall time is the critical path")


def render(
    text: str,
    root: Path,
    cores: Iterable[int],
    *,
    times_seed: int | None = None,
    within: float | None = None,
    speedups: Mapping[str, float] | None = None,
    missing_seconds: float | None = None,
) -> str:
    """The Markdown report of ``maxk wall-time``: a row per number of cores, then the summed job time,
    with ``within`` (seconds) the fewest cores that fit it, and the critical path's jobs; with
    ``speedups`` (``speed_up``'s factors) every number at the sped-up times, the measured job time
    beside. ``ValueError`` lists the jobs that have a benchmark but no time, unless ``missing_seconds``
    gives them a time (a job the measured run did not have, e.g. the pooling of seeds after a one-seed run:
    the report names them)."""
    jobs = parse_dry_run(text)
    seconds, missing = job_seconds(jobs, root, times_seed=times_seed)
    assumed = ""
    if missing and missing_seconds is not None:
        seconds.update(dict.fromkeys((j.jobid for j in missing), float(missing_seconds)))
        assumed = (
            f" {len(missing)} job(s) with no benchmark file in any seed at "
            f"{format_duration(missing_seconds)}: "
            + (", ".join(j.label() for j in missing[:5]) + (" ..." if len(missing) > 5 else "") + ".")
        )
        missing = []
    if missing:
        shown = "\n".join(f"  {j.label()}" for j in missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(
            f"{len(missing)} of {len(jobs)} jobs have no benchmark file under {root} (in no seed):\n"
            f"{shown}{more}\nrun the DAG first, or pass --times-seed with a seed that ran "
            "(or --missing-seconds)"
        )
    measured = seconds
    if speedups:
        seconds = speed_up(jobs, seconds, root, speedups, times_seed=times_seed)
    rows = [
        "| cores | projected wall | bound: job time / cores | bound: critical path |",
        "|---:|---:|---:|---:|",
    ]
    for p in project(jobs, seconds, cores):
        rows.append(
            f"| {p.cores} | {format_duration(p.wall)} | {format_duration(p.work_bound)} "
            f"| {format_duration(p.path_bound)} |"
        )
    by_id = {j.jobid: j for j in jobs}
    total, chain = critical_path(dependencies(jobs), seconds)
    source = f"seed {times_seed}'s benchmark files" if times_seed is not None else "each job's benchmark file"
    named = ", ".join(
        f"{name} {'at 0 s' if math.isinf(f) else f'{f:g}x faster'}" for name, f in (speedups or {}).items()
    )
    with_speedups, measured_time, less = (
        (f" with {named}", f"measured: {format_duration(sum(measured.values()))}, ", ", less the speed-ups")
        if speedups
        else ("", "", "")
    )
    summary = (
        f"{len(jobs)} jobs, {format_duration(sum(seconds.values()))} of job time{with_speedups} "
        f"({measured_time}from {source} under {root}). A projection: each job takes what it took in the "
        f"measured run{less}." + assumed
    )
    lines = [*rows, "", summary, ""]
    span = measured_span(jobs, root, measured) if times_seed is None and not speedups else None
    if span is not None:
        lines += [
            f"Measured: the run of these jobs took {format_duration(span)}, first start to last end (on the "
            "cores that run had).",
            "",
        ]
    if within is not None:
        fit = fewest_cores(jobs, seconds, within)
        lines += [
            f"Within {format_duration(within)}: "
            + (
                f"{fit} core{'s' * (fit > 1)} at the fewest."
                if fit
                else "on no number of cores (the critical path is longer)."
            ),
            "",
        ]
    lines += [
        f"Critical path ({format_duration(total)}):",
        *(f"- {format_duration(seconds[j])}: {by_id[j].label()}" for j in chain if seconds[j] > 0),
    ]
    return "\n".join(lines)
