"""The README's results and run-time sections, rewritten from a finished run's files.

    python -m maxk.readme [--results results] [--readme README.md] [--check]

Reads, under ``--results``:

- ``seed{seed}/claims/claims.csv`` of every seed (one row per claim: its ``verdict``) and, beside it,
  ``claims.csv.provenance.json`` (the instrument check: the instrument run's max@1 against the base
  model's, its held-out rise, the base model's calibration block; the CPU the run used) and
  ``learning.csv`` (what each run learned: whether it raised its own objective on the test set);
- every Snakemake benchmark TSV (``benchmarks/**/*.tsv`` of the jobs made once and
  ``seed{seed}/benchmarks/**/*.tsv`` of each seed's jobs: one job each, its seconds in column ``s``).

and replaces the text between each pair of marker comments of the README,
``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->``, for NAME in ``MARKERS``:

- ``results``: one row per seed (instrument, calibration, how many runs learned, how many claims hold)
  and the claims that hold;
- ``runtime``: the run-time table (jobs, seconds per job, job time per stage, the whole DAG's wall time);
- ``walltime``: the whole DAG's wall time in words, for the quickstart (inline).

The wall time is read from the benchmark files' modification times: from the first job's start (its
file's time less its seconds) to the last job's end. It is the run's wall time only for a run made in
one go, from empty ``results/`` (a resumed run spans its pauses).

``--check`` writes nothing and exits 1 when the README differs from what the files give (the diff is
printed). Only the standard library and ``maxk.paths`` are imported: no stage's code.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import json
import math
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from maxk import paths as P
from maxk.provenance import cpu_label

__all__ = [
    "MARKERS",
    "STAGES",
    "Job",
    "benchmark_seconds",
    "format_duration",
    "read_jobs",
    "render",
    "results_section",
    "runtime_section",
    "splice",
    "wall_seconds",
    "walltime_phrase",
]

#: the README's generated regions, in the order they appear
MARKERS = ("walltime", "results", "runtime")
#: the README's prose width
WIDTH = 105

#: (key, label) of each stage of the run-time table, in table order
STAGES: tuple[tuple[str, str], ...] = (
    ("data", "data (one job per dataset)"),
    ("base_model", "base model: SFT and calibration"),
    ("rl_prompts", "RL prompt filter (`rl_prompts`)"),
    ("train", "training runs"),
    ("generate", "generation"),
    ("rescore", "entropy re-scoring (figure 2)"),
    ("score", "scoring in the sandbox"),
    ("analysis", "analysis: metrics, tables, figures, tests, claims, contamination, lab, environment"),
    ("other", "other jobs"),
)


@dataclass(frozen=True)
class Job:
    """One job's benchmark record: its file (relative to the results directory), stage, seconds and
    the time its file was written (the job's end, seconds since the epoch)."""

    path: str
    stage: str
    seconds: float
    end: float


def stage_of(rel: str) -> str:
    """The stage (a key of ``STAGES``) of a benchmark file, by its path relative to the results directory:
    ``benchmarks/...`` (jobs made once) or ``seed{seed}/benchmarks/...`` (a seed's jobs)."""
    parts = Path(rel).parts
    if parts and re.fullmatch(r"seed\d+", parts[0]):
        parts = parts[1:]
    if not parts or parts[0] != "benchmarks":
        return "other"
    rest = parts[1:]
    if rest == ("environment.tsv",):
        return "analysis"
    top = rest[0] if rest else ""
    if top == "train" and len(rest) == 2:
        name = Path(rest[1]).stem.partition("-")[0]  # rl_prompts-KEY: a run's own filter (run names are \w+)
        return name if name in ("base_model", "rl_prompts") else "train"
    if top == "generate":
        return "rescore" if len(rest) > 1 and rest[1] == "rescore" else "generate"
    return top if top in ("data", "score", "analysis") else "other"


def read_jobs(results: Path) -> list[Job]:
    """Every benchmark TSV under ``results`` (the jobs made once and every seed's), as ``Job``\\ s."""
    jobs = []
    files = sorted(results.glob(f"{_below_results(P.BENCH)}/**/*.tsv"))
    files += sorted(results.glob(f"seed*/{_below_seed(P.benchmarks(0))}/**/*.tsv"))
    for f in files:
        rel = f.relative_to(results).as_posix()
        jobs.append(Job(rel, stage_of(rel), benchmark_seconds(f), f.stat().st_mtime))
    return jobs


def benchmark_seconds(path: Path) -> float:
    """A Snakemake benchmark file's seconds: its ``s`` column (repeats: their mean)."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if not rows or "s" not in rows[0]:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no 's' column)")
    return sum(float(r["s"]) for r in rows) / len(rows)


def wall_seconds(jobs: Sequence[Job]) -> float | None:
    """From the first job's start to the last job's end (None without jobs)."""
    if not jobs:
        return None
    return max(j.end for j in jobs) - min(j.end - j.seconds for j in jobs)


def format_duration(seconds: float) -> str:
    """``2.5 s``, ``28 s``, ``2 min 30 s``, ``1 h 5 min 46 s``."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return (f"{h} h " if h else "") + f"{m} min {sec} s"


def _range(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    if format_duration(lo) == format_duration(hi):
        return format_duration(lo)
    a, b = format_duration(lo), format_duration(hi)
    if a.endswith(" s") and b.endswith(" s") and "min" not in a + b:
        return f"{a[:-2]}-{b}"
    return f"{a} to {b}"


def _below_results(path: str) -> str:
    """A ``maxk.paths`` path relative to the results directory."""
    return Path(path).relative_to(P.RESULTS).as_posix()


def _below_seed(path: str) -> str:
    """A ``maxk.paths`` path of seed 0 relative to that seed's directory."""
    return Path(path).relative_to(P.seed_dir(0)).as_posix()


#: a seed's claims table and its per-run learning table, relative to the seed's directory
CLAIMS_CSV = _below_seed(P.claims(0, "csv"))
LEARNING_CSV = _below_seed(P.learning(0))
YARDSTICK_CSV = _below_seed(P.yardstick(0))


def _seed_dirs(results: Path) -> list[tuple[int, Path]]:
    """``(seed, its directory)`` of every seed with a claims table, by seed."""
    found = []
    for d in results.glob("seed*"):
        if re.fullmatch(r"seed\d+", d.name) and (d / CLAIMS_CSV).is_file():
            found.append((int(d.name[4:]), d))
    return sorted(found)


def _provenance(path: Path) -> Path:
    """The provenance record beside a result file (``maxk.provenance.provenance_path``'s rule)."""
    return path.with_name(path.name + ".provenance.json")


def _machine(results: Path, seeds: Sequence[tuple[int, Path]]) -> str | None:
    """The CPU a provenance record of the run names (the environment record, else a claims table's), as
    ``maxk.provenance.cpu_label`` writes it."""
    candidates = [results / _below_results(P.environment())]
    candidates += [_provenance(d / CLAIMS_CSV) for _, d in seeds]
    for f in candidates:
        if f.is_file():
            label = cpu_label(json.loads(f.read_text()).get("cpu") or {})
            if label:
                return label
    return None


def runtime_section(results: Path) -> str:
    """The run-time table of the run under ``results`` (Markdown, ending in a newline)."""
    jobs = read_jobs(results)
    if not jobs:
        raise ValueError(f"{results}: no benchmark files (benchmarks/**/*.tsv): no finished run to read")
    seeds = _seed_dirs(results)
    rows = ["| stage | jobs | time per job | job time, summed |", "|---|---:|---|---:|"]
    for key, label in STAGES:
        times = [j.seconds for j in jobs if j.stage == key]
        if times:
            rows.append(f"| {label} | {len(times)} | {_range(times)} | {format_duration(sum(times))} |")
    wall = wall_seconds(jobs)
    total = sum(j.seconds for j in jobs)
    rows.append(f"| **whole DAG** | {len(jobs)} | | **{format_duration(wall)} wall** |")
    machine = _machine(results, seeds)
    seed_list = ", ".join(str(s) for s, _ in seeds) or "none"
    footer = (
        f"{format_duration(total)} of job time in {format_duration(wall)} of wall time; seeds: {seed_list}"
        + (f"; CPU: {machine}" if machine else "")
        + ". Read from `results/**/benchmarks/` by `python -m maxk.readme` (jobs: those with a benchmark "
        "file)."
    )
    return "\n".join([*rows, "", _wrap(footer)]) + "\n"


def _wrap(text: str) -> str:
    """Prose wrapped as the README is (lines of at most ``WIDTH``; code spans are never split)."""
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def walltime_phrase(results: Path) -> str:
    """The whole DAG's wall time in words (inline: no newline)."""
    wall = wall_seconds(read_jobs(results))
    if wall is None:
        raise ValueError(f"{results}: no benchmark files: no finished run to read")
    return f"about {max(1, round(wall / 60))} minutes"


def _num(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _interval(part: dict | None) -> str:
    if not part or _num(part.get("effect")) is None:
        return "n/a"
    e, lo, hi = (_num(part.get(k)) for k in ("effect", "ci_low", "ci_high"))
    if lo is None or hi is None:
        return f"{e:+.3f}"
    return f"{e:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _calibration(cal: dict | None) -> str:
    if not cal:
        return "not checked"
    if cal.get("passes"):
        return "every band"
    missed = [f"{i['name']} {_fmt(i.get('value'))}" for i in cal.get("items", []) if not i.get("pass")]
    return "misses " + ", ".join(missed)


def _fmt(v: object) -> str:
    x = _num(v)
    return "n/a" if x is None else f"{x:.3f}"


def _truthy(v: object) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes")


def _read_claims(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and ("id" not in rows[0] or "verdict" not in rows[0]):
        raise ValueError(f"{path}: not a claims table (no 'id' or 'verdict' column)")
    return rows


def _learned(path: Path) -> str:
    """How many runs raised their own objective on the test set (``learning.csv``'s ``learned``), of
    how many; n/a without the file."""
    if not path.is_file():
        return "n/a"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and "learned" not in rows[0]:
        raise ValueError(f"{path}: not a learning table (no 'learned' column)")
    return f"{sum(_truthy(r['learned']) for r in rows)} of {len(rows)}"


def _verdict_kind(verdict: str) -> str:
    v = verdict.strip().lower()
    if v == "holds":
        return "holds"
    if v == "does not hold":
        return "does not hold"
    if v.startswith("instrument not working"):
        return "instrument not working"
    if v.startswith("not testable"):
        return "not testable"
    return "not tested"


def _pooled(results: Path, *, claims: bool = True) -> list[str]:
    """The pooled verdicts of the across-seed report (``results/claims/across_seeds.csv``, left out
    without ``claims``, and the yardstick's), a sentence each, or nothing where the run has one seed. The
    paper's claims that hold are named; the yardstick's are counted (one per run: named, they would grow
    the README with the runs; ``across_seeds.md`` names them)."""
    out = []
    files = (
        *([(P.across_seeds("csv"), "the paper's claims", True)] if claims else []),
        (P.across_seeds_yardstick(), "the yardstick claims", False),
    )
    for rel, what, named in files:
        path = results / Path(rel).relative_to(P.RESULTS)
        rows = _read_claims(path) if path.is_file() else []
        if not rows or "verdict" not in rows[0]:
            continue
        held = [r["id"] for r in rows if r["verdict"] == "holds"]
        pooled = [r for r in rows if r["verdict"] in ("holds", "does not hold")]
        listed = f": {', '.join(f'`{c}`' for c in held)}" if held and named else ""
        out.append(
            f"Pooled over the seeds ({what}, `{rel}`): {len(held)} of {len(rows)} hold{listed}; "
            f"{len(pooled)} of {len(rows)} read on two seeds or more."
        )
    return out


def _pooled_table(results: Path) -> list[str]:
    """The paper's claims pooled over the seeds (``results/claims/across_seeds.csv``), one row each: the
    pooled effect and its interval, the smallest effect the pool can detect, the paper's effect and the
    verdict's kind (its reason is in ``across_seeds.md``); nothing where the run has one seed."""
    path = results / Path(P.across_seeds("csv")).relative_to(P.RESULTS)
    rows = _read_claims(path) if path.is_file() else []
    if not rows:
        return []
    out = [
        "| claim, pooled over the seeds | effect [95 % interval] | detectable | paper | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        kind = _verdict_kind(r["verdict"])
        if kind == "not tested":  # "not read", "read on one seed": the verdict's own words
            kind = r["verdict"].split(":")[0].strip() or kind
        paper = _num(r.get("paper_effect"))
        out.append(
            f"| `{r['id']}` | {_interval(r)} | {_fmt(r.get('detectable_effect'))} "
            f"| {'n/a' if paper is None else f'{paper:+.3f}'} | {kind} |"
        )
    return out


def _yardstick(seeds: Sequence[tuple[int, Path]]) -> list[str]:
    """One sentence: on each seed, how many runs beat the base re-tempered (``claims/yardstick.csv``);
    nothing where no seed has the file."""
    counts = []
    for seed, d in seeds:
        rows = _read_claims(d / YARDSTICK_CSV) if (d / YARDSTICK_CSV).is_file() else []
        if rows:
            held = sum(_verdict_kind(r["verdict"]) == "holds" for r in rows)
            counts.append(f"seed {seed} {held} of {len(rows)}")
    if not counts:
        return []
    return [
        f"Runs that beat the base re-tempered at their own objective (the yardstick): {', '.join(counts)}."
    ]


def results_section(results: Path) -> str:
    """The results of the run under ``results`` (Markdown, ending in a newline): with several seeds first
    the claims pooled over them (``_pooled_table``), then one row per seed."""
    seeds = _seed_dirs(results)
    if not seeds:
        raise ValueError(f"{results}: no seed{{seed}}/claims/claims.csv: no finished run to read")
    rows = [
        "| seed | instrument run | its max@1 - base's, unseen test set | held-out rise | instrument "
        "| base calibration | runs that raised their own objective | claims that hold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    holding: dict[str, list[int]] = {}
    others: dict[str, int] = {}
    dataset = None
    for seed, d in seeds:
        claims_csv = d / CLAIMS_CSV
        claims = _read_claims(claims_csv)
        prov = _provenance(claims_csv)
        instrument = (json.loads(prov.read_text()).get("instrument") or {}) if prov.is_file() else {}
        obj, curve = instrument.get("objective") or {}, instrument.get("curve") or {}
        dataset = (
            dataset
            or obj.get("dataset")
            or next((r.get("dataset") for r in claims if r.get("dataset")), None)
        )
        held = [r["id"] for r in claims if _verdict_kind(r["verdict"]) == "holds"]
        for c in held:
            holding.setdefault(c, []).append(seed)
        for r in claims:
            kind = _verdict_kind(r["verdict"])
            if kind != "holds":
                others[kind] = others.get(kind, 0) + 1
        works = instrument.get("works")
        state = "works" if works else ("**not working**" if works is False else "n/a")
        rise = _interval(curve) if curve else "n/a"
        if curve and _num(curve.get("first")) is not None:
            rise = f"{_fmt(curve['first'])} -> {_fmt(curve['last'])}, {rise}"
        run = f"`{instrument['run']}`" if instrument.get("run") else "n/a"
        rows.append(
            f"| {seed} | {run} | {_interval(obj)} | {rise} | {state} "
            f"| {_calibration(instrument.get('calibration'))} | {_learned(d / LEARNING_CSV)} "
            f"| {len(held)} of {len(claims)} |"
        )
    seed_word = "seed" if len(seeds) == 1 else "seeds"
    pooled = _pooled_table(results)
    text: list[str] = []
    if pooled:  # the table gives the paper's claims pooled, each seed's row its own count
        text += _pooled(results, claims=False)
        intervals = (
            "Intervals: pooled, a random-effects t interval (every claim with its reason and the spread "
            "between seeds: `results/claims/across_seeds.md`); per seed, 95 % paired bootstrap over problems"
        )
    else:
        text += _pooled(results)
        if holding:
            listed = "; ".join(
                f"`{c}`" + ("" if len(seeds) == 1 else f" ({', '.join(map(str, s))})")
                for c, s in holding.items()
            )
            text.append(f"Claims that hold ({seed_word} {', '.join(str(s) for s, _ in seeds)}): {listed}.")
        else:
            text.append("No claim holds.")
        if others:
            counts = ", ".join(f"{k} {n}" for k, n in sorted(others.items()))
            text.append(f"The other verdicts: {counts}.")
        intervals = "Intervals: 95 % paired bootstrap over problems"
    text.append(intervals + (f" (max@1 on `{dataset}`)" if dataset else "") + ".")
    text += _yardstick(seeds)
    text.append(
        "Read from `results/` by `python -m maxk.readme`; each seed's claims, with effect, interval and the "
        "smallest effect the run can detect: `results/seed*/claims/claims.md`."
    )
    return "\n".join([*pooled, *([""] if pooled else []), *rows, "", _wrap(" ".join(text))]) + "\n"


def render(results: Path) -> dict[str, str]:
    """Each marker's generated text (``MARKERS``) from the run under ``results``."""
    return {
        "walltime": walltime_phrase(results),
        "results": results_section(results),
        "runtime": runtime_section(results),
    }


def splice(text: str, regions: dict[str, str]) -> str:
    """``text`` with the text between each ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` replaced by
    ``regions[NAME]``. A block region (its begin marker ends a line) keeps the markers on lines of their
    own; an inline one stays on its line. A missing or repeated marker pair is an error."""
    for name, body in regions.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        pattern = re.compile(re.escape(begin) + r"(\n?)(.*?)" + re.escape(end), re.DOTALL)
        found = pattern.findall(text)
        if len(found) != 1:
            raise ValueError(f"README: expected one {begin} ... {end} pair, found {len(found)}")
        block = found[0][0] == "\n"
        new = f"{begin}\n{body.rstrip(chr(10))}\n{end}" if block else f"{begin}{body.strip()}{end}"
        text = pattern.sub(lambda _m, new=new: new, text, count=1)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m maxk.readme",
        description="Rewrite the README's results and run-time sections from a finished run's files.",
    )
    parser.add_argument("--results", default=P.RESULTS, help="the run's results directory (default: results)")
    parser.add_argument("--readme", default="README.md", help="the README to rewrite (default: README.md)")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the README differs from the files"
    )
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    try:
        old = readme.read_text()
        new = splice(old, render(Path(args.results)))
    except (OSError, ValueError) as exc:
        print(f"python -m maxk.readme: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if new == old:
            print(f"{readme}: up to date with {args.results}")
            return 0
        diff = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), str(readme), f"{readme} (files)"
        )
        sys.stdout.writelines(diff)
        print(
            f"{readme}: differs from {args.results} (run `python -m maxk.readme` to rewrite it)",
            file=sys.stderr,
        )
        return 1
    if new != old:
        readme.write_text(new)
    print(f"{readme}: {'rewritten' if new != old else 'already up to date'} from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
