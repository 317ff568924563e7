"""The README's generated sections (``maxk.readme``) on a small results tree written here, never on a real
run; and the user docs carry no history (commit hashes, issue numbers)."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from maxk import paths as P
from maxk import readme as R
from maxk.analysis.across_seeds import ONE_SEED
from maxk.analysis.claims import CLAIMS, COLUMNS
from maxk.analysis.learning import LEARNING_COLUMNS
from maxk.config import load_config

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000.0  # the fixture run's start, seconds since the epoch

README = """# project

Run it: <!-- walltime:begin -->old<!-- walltime:end --> on two cores.

## Results

<!-- results:begin -->
old results
<!-- results:end -->

## Run times

<!-- runtime:begin -->
old table
<!-- runtime:end -->

The end.
"""


def _bench(results: Path, rel: str, seconds: float, end: float) -> None:
    """A Snakemake benchmark file (its header as Snakemake writes it) whose job ended at ``end``."""
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
    path.write_text(f"{head}\n{seconds:.4f}\t0:00:00\t100\t200\t90\t95\t0\t1\t50\t{seconds:.2f}\n")
    os.utime(path, (end, end))


def _claims(results: Path, seed: int, holding: set[str], instrument: dict | None) -> None:
    path = results / Path(P.claims(seed, "csv")).relative_to(P.RESULTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        for claim in CLAIMS:
            verdict = "holds" if claim.id in holding else "does not hold"
            if claim.id == "bon_mean_beats_bon_loo1":
                verdict = "not testable: bon_loo1 did not raise max@4"
            writer.writerow({"id": claim.id, "dataset": "suite_test", "holds": claim.id in holding,
                             "verdict": verdict})  # fmt: skip
    if instrument is not None:
        path.with_name(path.name + ".provenance.json").write_text(
            json.dumps({"cpu": {"model": "Test CPU 9000"}, "instrument": instrument})
        )
        learned = [True, True, False] if instrument["works"] else [False, False, False]
        with (results / Path(P.learning(seed)).relative_to(P.RESULTS)).open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(LEARNING_COLUMNS))
            writer.writeheader()
            for run, ok in zip(("grpo_continuous", "grpo_e4_ppo1", "bon_loo1"), learned, strict=True):
                writer.writerow({"run": run, "learned": ok})


def _instrument(effect: float, works: bool, calibration_passes: bool = True) -> dict:
    items = [
        {"name": "pass_at_1", "value": 0.17, "band": [0.1, 0.35], "pass": True},
        {"name": "sharpen_gain_pass_at_1", "value": 0.021, "band": [0.03, None], "pass": calibration_passes},
    ]
    return {
        "run": "grpo_e4_ppo1",
        "works": works,
        "objective": {"run": "grpo_e4_ppo1", "base": "base", "metric": "max@1", "dataset": "suite_test",
                      "a_value": 0.39, "b_value": 0.39 - effect, "effect": effect,
                      "ci_low": effect - 0.014, "ci_high": effect + 0.014, "n_problems": 300, "ok": works},
        "curve": {"points": [[0, 0.329], [64, 0.357]], "first": 0.329, "last": 0.357, "ok": works,
                  "effect": 0.028, "ci_low": 0.014, "ci_high": 0.044, "n_problems": 150},
        "calibration": {"items": items, "passes": calibration_passes},
    }  # fmt: skip


def _run(results: Path, seeds: dict[int, tuple[set[str], dict | None]]) -> None:
    """A finished run: the jobs made once, and per seed a base, a filter, two runs, generation, a re-score,
    scoring and analysis, one after the other from T0."""
    t = T0
    jobs = [("benchmarks/data/suite_test.tsv", 1.5), ("benchmarks/data/humaneval.tsv", 0.5),
            ("benchmarks/analysis/lab.tsv", 6.0), ("benchmarks/environment.tsv", 0.2)]  # fmt: skip
    for seed in seeds:
        b = f"seed{seed}/benchmarks"
        jobs += [(f"{b}/train/base_model.tsv", 150.0), (f"{b}/train/rl_prompts.tsv", 28.0),
                 (f"{b}/train/grpo_continuous.tsv", 80.0), (f"{b}/train/grpo_e4_ppo1.tsv", 175.0),
                 (f"{b}/generate/base/suite_test.tsv", 20.0),
                 (f"{b}/generate/rescore/base/suite_test.tsv", 5.0),
                 (f"{b}/score/base/suite_test.tsv", 12.0), (f"{b}/analysis/claims.tsv", 3.0)]  # fmt: skip
    for rel, seconds in jobs:
        t += seconds
        _bench(results, rel, seconds, t)
    for seed, (holding, instrument) in seeds.items():
        _claims(results, seed, holding, instrument)


def _table(results: Path, rel: str, columns: dict) -> None:
    """A CSV of ``columns`` at ``rel`` (a path as ``maxk.paths`` gives it) of the run under ``results``."""
    path = results / Path(rel).relative_to(P.RESULTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(columns).to_csv(path, index=False)


def _flat(text: str) -> str:
    """Prose with its line breaks undone."""
    return " ".join(text.split())


def test_stage_of_knows_every_rules_benchmark_file() -> None:
    """Each rule's `benchmark:` path (workflow/rules/*.smk), with its wildcards filled in, falls in a stage
    of the run-time table: a new rule or a moved benchmark file fails here, not silently under 'other'."""
    found = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        found += re.findall(r'benchmark:\s*\n\s*f"([^"]+)"', smk.read_text())
    assert len(found) >= 15
    for template in found:
        rel = template.replace("{SEED_BENCH}", "seed7/benchmarks").replace("{BENCH}", "benchmarks")
        rel = rel.replace("{GEN_NAME}", "{{model}}/{{dataset}}").replace("{TRAIN['dataset']}", "suite_rl")
        rel = re.sub(r"\{\{\w+\}\}", "x", rel)
        assert "{" not in rel, template
        assert R.stage_of(rel) != "other", template
    assert R.stage_of("seed7/benchmarks/train/base_model.tsv") == "base_model"
    assert R.stage_of("seed7/benchmarks/train/bon_mean.tsv") == "train"
    assert R.stage_of("seed7/benchmarks/train/rl_prompts.tsv") == "rl_prompts"
    assert R.stage_of("seed7/benchmarks/train/rl_prompts-e7055458.tsv") == "rl_prompts"  # a run's own filter
    assert R.stage_of("seed7/benchmarks/train/rl_prompts-suite_rl.tsv") == "rl_prompts"  # by its dataset
    assert R.stage_of("seed7/benchmarks/train/rl_prompts-suite_rl-e7055458.tsv") == "rl_prompts"
    assert R.stage_of("seed7/benchmarks/generate/rescore/base/suite_test.tsv") == "rescore"
    assert R.stage_of("seed7/benchmarks/generate/base/suite_test/shard3.tsv") == "generate"
    assert R.stage_of("benchmarks/environment.tsv") == "analysis"


def test_format_duration() -> None:
    assert [R.format_duration(s) for s in (0.24, 2.5, 28.4, 150, 1248, 7546)] == [
        "0.2 s", "2.5 s", "28 s", "2 min 30 s", "20 min 48 s", "2 h 5 min 46 s"
    ]  # fmt: skip


def test_runtime_section_from_benchmark_files(tmp_path: Path) -> None:
    _run(tmp_path, {1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True))})
    text = R.runtime_section(tmp_path)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "| 2 | 0.5-1.5 s | 2.0 s |" in rows["data (one job per dataset)"]
    assert "| 1 | 2 min 30 s | 2 min 30 s |" in rows["base model: SFT and calibration"]
    assert "| 2 | 1 min 20 s to 2 min 55 s | 4 min 15 s |" in rows["training runs"]
    assert "| 1 | 5.0 s | 5.0 s |" in rows["entropy re-scoring (figure 2)"]
    assert (
        "| 3 | 0.2-6.0 s | 9.2 s |"
        in rows["analysis: metrics, tables, figures, tests, claims, contamination, lab, environment"]
    )
    # 12 jobs one after the other: the wall time is their sum (481.2 s)
    assert "| **whole DAG** | 12 | | **8 min 1 s wall** |" in text
    assert "8 min 1 s of job time in 8 min 1 s of wall time; seeds: 1234; CPU: Test CPU 9000." in _flat(text)
    assert max(len(line) for line in text.splitlines() if not line.startswith("|")) <= R.WIDTH
    assert R.walltime_phrase(tmp_path) == "about 8 minutes"


def test_wall_time_counts_jobs_side_by_side_once(tmp_path: Path) -> None:
    _bench(tmp_path, "seed1/benchmarks/train/a.tsv", 100.0, T0 + 100)
    _bench(tmp_path, "seed1/benchmarks/train/b.tsv", 100.0, T0 + 110)  # started 10 s after a
    jobs = R.read_jobs(tmp_path)
    assert R.wall_seconds(jobs) == pytest.approx(110.0)
    assert sum(j.seconds for j in jobs) == pytest.approx(200.0)


def test_results_section_one_seed(tmp_path: Path) -> None:
    _run(tmp_path, {1234: ({"grpo_lowers_entropy", "rl_lowers_max_at_large_k"}, _instrument(0.031, True))})
    text = R.results_section(tmp_path)
    assert (
        "| 1234 | `grpo_e4_ppo1` | +0.031 [+0.017, +0.045] | 0.329 -> 0.357, +0.028 [+0.014, +0.044] "
        "| works | every band | 2 of 3 | 2 of 10 |"
    ) in text
    flat = _flat(text)
    assert "Claims that hold (seed 1234): `grpo_lowers_entropy`; `rl_lowers_max_at_large_k`." in flat
    assert "The other verdicts: does not hold 7, not testable 1." in flat
    assert "(max@1 on `suite_test`)" in flat


def test_results_section_several_seeds_and_a_failing_instrument(tmp_path: Path) -> None:
    _run(tmp_path, {
        1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True)),
        2: (set(), _instrument(0.004, False, calibration_passes=False)),
        3: ({"grpo_lowers_entropy"}, None),  # no provenance beside its claims: n/a, not a guess
    })  # fmt: skip
    text = R.results_section(tmp_path)
    lines = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [line.split(" | ")[0] for line in lines] == ["| 2", "| 3", "| 1234"]
    assert "| **not working** | misses sharpen_gain_pass_at_1 0.021 | 0 of 3 | 0 of 10 |" in lines[0]
    assert lines[1] == "| 3 | n/a | n/a | n/a | n/a | not checked | n/a | 1 of 10 |"
    assert "Claims that hold (seeds 2, 3, 1234): `grpo_lowers_entropy` (3, 1234)." in _flat(text)


def test_results_section_says_the_pooled_verdicts_first_where_the_run_pooled_seeds(tmp_path: Path) -> None:
    _run(tmp_path, {1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True)), 3: (set(), None)})
    text = R.results_section(tmp_path)
    assert "pooled" not in text.lower() and "Claims that hold" in text  # no across-seed report: per seed
    verdicts = {"grpo_lowers_entropy": "holds", "grpo_raises_pass_at_1": "does not hold", "c3": ONE_SEED}
    _table(tmp_path, P.across_seeds("csv"), {"id": list(verdicts), "verdict": list(verdicts.values())})
    _table(tmp_path, P.across_seeds_yardstick(), {"id": ["y1", "y2"], "verdict": ["holds", "does not hold"]})
    text = R.results_section(tmp_path)
    assert text.splitlines()[0].startswith("| claim, pooled over the seeds |")
    flat = _flat(text)
    assert (
        "Pooled over the seeds (the yardstick claims, `results/claims/across_seeds_yardstick.csv`): 1 of 2 "
        "hold; 2 of 2 read on two seeds or more."  # counted, not named: one claim a run
    ) in flat
    assert "the paper's claims, `results" not in flat  # the table says them
    assert "Claims that hold" not in flat  # each seed's count is in its row


def test_results_section_opens_with_the_pooled_claims_table(tmp_path: Path) -> None:
    _run(tmp_path, {1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True)), 2: (set(), None)})
    _table(tmp_path, P.across_seeds("csv"), {
        "id": ["grpo_lowers_entropy", "rl_lowers_max_at_large_k", "offpolicy_bon_best_max_at_large_k"],
        "effect": [0.0159, 0.0348, None], "ci_low": [0.0123, 0.0131, None], "ci_high": [0.0198, 0.0563, None],
        "detectable_effect": [0.0072, 0.0379, None], "paper_effect": [None, 0.013, 0.008],
        "verdict": ["holds", "not testable: grpo_e1_ppo1 did not raise max@1 pooled over seeds 1234, 2",
                    "not read"],
    })  # fmt: skip
    lines = R.results_section(tmp_path).splitlines()
    assert lines[:5] == [
        "| claim, pooled over the seeds | effect [95 % interval] | detectable | paper | verdict |",
        "|---|---|---|---|---|",
        "| `grpo_lowers_entropy` | +0.016 [+0.012, +0.020] | 0.007 | n/a | holds |",
        "| `rl_lowers_max_at_large_k` | +0.035 [+0.013, +0.056] | 0.038 | +0.013 | not testable |",
        "| `offpolicy_bon_best_max_at_large_k` | n/a | n/a | +0.008 | not read |",
    ]
    assert lines[5] == "" and lines[6].startswith("| seed | instrument run |")


def test_results_section_counts_the_runs_that_beat_the_yardstick_on_each_seed(tmp_path: Path) -> None:
    _run(tmp_path, {1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True)), 3: (set(), None)})
    assert "yardstick" not in R.results_section(tmp_path)  # no yardstick.csv: nothing said
    verdicts = ["holds", "does not hold", "does not hold"]
    _table(tmp_path, P.yardstick(1234), {"id": ["a", "b", "c"], "verdict": verdicts})
    text = _flat(R.results_section(tmp_path))
    assert (
        "Runs that beat the base re-tempered at their own objective (the yardstick): seed 1234 1 of 3."
        in text
    )


def test_splice_block_and_inline_regions() -> None:
    out = R.splice(README, {"walltime": "about 21 minutes", "results": "| a |\n", "runtime": "table\nrow"})
    assert "Run it: <!-- walltime:begin -->about 21 minutes<!-- walltime:end --> on two cores." in out
    assert "<!-- results:begin -->\n| a |\n<!-- results:end -->" in out
    assert "<!-- runtime:begin -->\ntable\nrow\n<!-- runtime:end -->\n\nThe end.\n" in out
    assert R.splice(out, {"results": "| a |"}) == out  # idempotent
    with pytest.raises(ValueError, match="expected one <!-- missing:begin -->"):
        R.splice(README, {"missing": "x"})
    with pytest.raises(ValueError, match="found 2"):
        R.splice(README + "<!-- results:begin -->\nx\n<!-- results:end -->\n", {"results": "y"})


def test_main_rewrites_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results, readme = tmp_path / "results", tmp_path / "README.md"
    _run(results, {1234: ({"grpo_lowers_entropy"}, _instrument(0.031, True))})
    readme.write_text(README)
    args = ["--results", str(results), "--readme", str(readme)]
    assert R.main([*args, "--check"]) == 1  # the README still holds the old text
    assert "-old table" in capsys.readouterr().out
    assert readme.read_text() == README  # --check writes nothing
    assert R.main(args) == 0
    text = readme.read_text()
    assert (
        "old table" not in text
        and "old results" not in text
        and "| **whole DAG** | 12 |" in text
        and text.endswith("The end.\n")
    )
    assert R.main([*args, "--check"]) == 0
    # a rerun that changes one job's time makes the README stale
    _bench(results, "seed1234/benchmarks/train/grpo_e4_ppo1.tsv", 190.0, T0 + 1000)
    assert R.main([*args, "--check"]) == 1
    capsys.readouterr()
    assert R.main(["--results", str(tmp_path / "nothing"), "--readme", str(readme)]) == 2
    assert "no benchmark files" in capsys.readouterr().err


def test_module_runs_as_a_script(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "maxk.readme", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--check" in out.stdout


def test_the_readme_has_each_generated_region_once() -> None:
    text = (ROOT / "README.md").read_text()
    R.splice(text, dict.fromkeys(R.MARKERS, "x"))  # raises on a missing or repeated marker pair


def test_the_readme_stays_within_180_lines_once_generated(tmp_path: Path) -> None:
    """The README, with its sections as the generator writes them for a run of the default's two seeds with
    every stage, five claims holding, every claim in the across-seed table and a yardstick claim for each
    of the default's twelve runs, each holding, is at most 180 lines."""
    holding = {c.id for c in CLAIMS[:5]}
    _run(tmp_path, {1234: (holding, _instrument(0.031, True)), 2: (holding, _instrument(0.011, True))})
    _table(tmp_path, P.across_seeds("csv"), {"id": [c.id for c in CLAIMS], "effect": 0.01, "ci_low": 0.0,
           "ci_high": 0.02, "detectable_effect": 0.02, "paper_effect": 0.05, "verdict": "holds"})  # fmt: skip
    yardstick = {"id": [f"{run}_beats_tempered_base" for run in load_config()["runs"]], "verdict": "holds"}
    assert len(yardstick["id"]) == 12
    _table(tmp_path, P.across_seeds_yardstick(), yardstick)
    for seed in (1234, 2):
        _table(tmp_path, P.yardstick(seed), yardstick)
    _bench(tmp_path, "seed1234/benchmarks/generate/base/suite_test/shard3.merge.tsv", 1.0, T0 + 2000)
    prov = tmp_path / "seed1234" / "claims" / "claims.csv.provenance.json"
    record = json.loads(prov.read_text())
    record["cpu"] = {  # the longest label: every field, a kernel path forced
        "model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "vendor": "GenuineIntel", "family": 6,
        "model_number": 143, "stepping": 8, "isa": ["avx2", "avx512f", "amx_tile"],
        "aten_cpu_capability": "avx2",
    }  # fmt: skip
    prov.write_text(json.dumps(record))
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 180
    assert len(R.splice(readme, R.render(tmp_path)).splitlines()) <= 180


# --- the user docs carry no history ------------------------------------------------------------------

#: a commit hash: 7-40 lowercase hex characters, at least one digit and one letter, a word of its own
HASH = re.compile(r"(?<![\w./#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
#: an issue or item number: "issue 25", "issues 25, 28", "issue #25", "item 5 of"
ISSUE = re.compile(r"\bissues? #?\d+|\bitem \d+ of\b|#\d+\b(?!\.\d)", re.IGNORECASE)
USER_DOCS = ("README.md", "config/README.md", "docs/glossary.md", "docs/cli.md", "docs/outputs.md")


def _history(text: str) -> list[str]:
    return [m.group(0) for pattern in (HASH, ISSUE) for m in pattern.finditer(text)]


def test_history_patterns() -> None:
    assert _history("from a fresh clone of 1acaacd, then b683171 (issue 25, item 5 of it); issue #28") == [
        "1acaacd", "b683171", "issue 25", "item 5 of", "issue #28"
    ]  # fmt: skip
    assert _history("fixed in #31.") == ["#31"]
    assert _history("issues 25, 28 and item 5 of issue 25") == ["issues 25", "item 5 of", "issue 25"]
    # not history: plain numbers, words of hex letters, colours, seeds, sizes, a hub id's digits
    clean = "seed 1234, 1,097 tests, decade, #57BB8A, 2.0e-4, 3000000, suite-v2, Qwen2.5-Coder-7B, #power"
    assert _history(clean) == []


@pytest.mark.parametrize("doc", USER_DOCS)
def test_user_docs_carry_no_commit_hashes_or_issue_numbers(doc: str) -> None:
    found = _history((ROOT / doc).read_text())
    assert found == [], f"{doc}: history belongs in docs/experiment-log.md and CHANGELOG.md: {found}"


# --- one source for the default's run time -----------------------------------------------------------

#: a duration in minutes as prose gives one: "41 minutes", "21 to 53 minutes", "20 min 48 s", "1 h 7 min"
DURATION = r"(?:about )?(?:\d+ h )?\d+(?:(?: to |-)\d+)? min(?:utes)?(?: \d+ s)?\b"
#: a duration the prose gives the default: "the default's 30 minutes", "the default has taken 21 to 53
#: minutes" (words only between the two: one clause), "30 minutes for the whole default"
DEFAULT_TIME = re.compile(
    rf"\bdefault(?:'s)?\s+(?:[\w']+\s+){{0,6}}?(?P<a>{DURATION})"
    rf"|(?P<b>{DURATION})\s+for\s+the\s+(?:whole\s+|embedded\s+)*default\b",
    re.IGNORECASE,
)
#: a dated run ("experiment log, 2026-11-26"): a measurement of that run, not a claim about the default
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
#: the user docs: what a user reads (the experiment log is the dated history and keeps its measurements)
TIMED_DOCS = sorted(
    {"README.md", "config/README.md", "results/README.md"}
    | {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name != "experiment-log.md"}
)


def _region(text: str, name: str) -> str:
    return text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def _generated_times(readme: str) -> set[str]:
    """The default's wall time as the README's generated regions give it: the quickstart's phrase and the
    run-time table's whole-DAG row, without "about"."""
    row = next(line for line in _region(readme, "runtime").splitlines() if "whole DAG" in line)
    found = re.findall(DURATION, _region(readme, "walltime") + " " + row)
    return {d.removeprefix("about ") for d in found}


def _default_times(text: str, generated: set[str]) -> list[str]:
    """Durations ``text`` gives the default that are not the README's generated ones, its generated regions
    left out; one followed within 200 characters by a date names the dated run it was measured on."""
    for name in R.MARKERS:
        text = re.sub(rf"<!-- {name}:begin -->.*?<!-- {name}:end -->", " ", text, flags=re.DOTALL)
    flat = " ".join(text.split())
    out = []
    for m in DEFAULT_TIME.finditer(flat):
        duration = (m.group("a") or m.group("b")).removeprefix("about ")
        if duration not in generated and not DATE.search(flat, m.end(), m.end() + 200):
            out.append(m.group(0))
    return out


def test_default_time_patterns() -> None:
    generated = {"41 minutes", "40 min 55 s"}
    old = (
        "The same default has taken 21 to 53 minutes on idle machines. The design does not fit the\n"
        "default's 30 minutes: four epochs. Its three jobs took 14, 16 and 32 minutes (job time), against 30"
        " minutes for the whole default. It took 30 min 17 s against the default's 20 min 48 s. Its claims."
    )
    assert _default_times(old, generated) == [
        "default has taken 21 to 53 minutes", "default's 30 minutes", "30 minutes for the whole default",
        "default's 20 min 48 s",
    ]  # fmt: skip
    fine = (
        "Run it: <!-- walltime:begin -->about 9 minutes<!-- walltime:end -->. The default takes about 41"
        " minutes. Design 5's run, 30 min 17 s, against the default's run of the same day, 20 min 48 s"
        " (experiment log, 2026-11-26). Its jobs took 14 minutes of job time (with other work beside them)"
        " against the default DAG's wall time (the README's run-time table). The default seed is 1234."
    )
    assert _default_times(fine, generated) == []
    readme = (ROOT / "README.md").read_text()
    assert _generated_times(readme) and all(re.fullmatch(DURATION, d) for d in _generated_times(readme))


@pytest.mark.parametrize("doc", TIMED_DOCS)
def test_user_docs_give_the_default_no_run_time_but_the_readmes_generated_one(doc: str) -> None:
    """The default's wall time has one source, the README's generated run-time table (``maxk.readme``): a
    user doc that quotes another figure for it names the dated run it was measured on, or links there."""
    generated = _generated_times((ROOT / "README.md").read_text())
    found = _default_times((ROOT / doc).read_text(), generated)
    assert found == [], f"{doc}: the default's run time is the README's ({sorted(generated)}): {found}"


def test_the_readme_tests_section_points_to_the_log_for_the_suites_time() -> None:
    """The test command's time varies from run to run; the README points to the experiment log's table of
    them rather than quoting one."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(DURATION, section) == [] and not re.search(r"\b\d+ s\b", section), section
    assert "docs/experiment-log.md" in section


# --- config/README.md is the schemas' reference ------------------------------------------------------

SCHEMAS = ROOT / "workflow" / "schemas"
NO_DEFAULT = object()


def _schema_keys() -> dict[str, dict]:
    """Every key of the config schema by its dotted path (a mapping's own keys as ``<*>``):
    ``{"default", "required", "leaf"}``. A key without a default of its own takes the one its enclosing
    mapping's default gives it (``lab.offpolicy``'s default sets ``lab.offpolicy.n``); an entry of a
    mapping of named entries (``<*>``) takes none: the user names it and sets it."""
    import yaml

    files: dict[str, dict] = {}

    def load(name: str) -> dict:
        if name not in files:
            files[name] = yaml.safe_load((SCHEMAS / name).read_text())
        return files[name]

    def resolve(node: dict, file: str) -> tuple[dict, str]:
        while "$ref" in node:
            target_file, _, fragment = node["$ref"].partition("#")
            target_file = target_file or file
            target = load(target_file)
            for part in filter(None, fragment.split("/")):
                target = target[part]
            node, file = {**target, **{k: v for k, v in node.items() if k != "$ref"}}, target_file
        return node, file

    keys: dict[str, dict] = {}

    def walk(node: dict, file: str, path: str, required: bool, inherited: object = NO_DEFAULT) -> None:
        node, file = resolve(node, file)
        extra = node.get("additionalProperties")
        extra = resolve(extra, file)[0] if isinstance(extra, dict) else None
        nested = extra is not None and (
            "properties" in extra or isinstance(extra.get("additionalProperties"), dict)
        )
        default = node.get("default", inherited)
        if path:
            leaf = not node.get("properties") and not nested
            keys[path] = {"default": default, "required": required, "leaf": leaf}
        for name, sub in (node.get("properties") or {}).items():
            given = default.get(name, NO_DEFAULT) if isinstance(default, dict) else NO_DEFAULT
            walk(sub, file, f"{path}.{name}" if path else name, name in node.get("required", []), given)
        if nested:
            walk(node["additionalProperties"], file, f"{path}.<*>", False)

    walk(load("config.schema.yaml"), "config.schema.yaml", "", False)
    return keys


def _sandbox_defaults() -> dict[str, object]:
    """The sandbox section's defaults: ``maxk.sandbox.Limits``'s, by config key."""
    import dataclasses

    from maxk.sandbox.scorer import Limits

    limits = {f.name: f.default for f in dataclasses.fields(Limits)}
    out = {f"sandbox.{k}": v for k, v in limits.items()}
    out["sandbox.output_mb"] = limits["output_bytes"] / (1 << 20)
    out["sandbox.preload"] = list(limits["preload"])
    for key in ("minimum", "allow_below_minimum", "uid"):
        out[f"sandbox.isolation.{key}"] = limits[key]
    for key in ("userns", "pidns", "landlock", "seccomp", "drop_uid"):
        out[f"sandbox.isolation.layers.{key}"] = limits[key]
    return out


def _reference_rows() -> list[tuple[str, str, str]]:
    """``(dotted key, default cell, section)`` of every key row of config/README.md's tables."""
    rows, section = [], None
    for line in (ROOT / "config" / "README.md").read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        prefix = "" if section == "top level" else f"{section}."
        names = re.findall(r"`([^`]+)`", cells[0])
        first = names[0]
        for name in names:
            key = first.rsplit(".", 1)[0] + name if name.startswith(".") else name
            rows.append((prefix + re.sub(r"<\w+>", "<*>", key), cells[2], section))
    return rows


def test_config_reference_documents_every_schema_key_with_its_default() -> None:
    import yaml

    keys, sandbox = _schema_keys(), _sandbox_defaults()
    rows = _reference_rows()
    documented = {key for key, _, _ in rows}
    assert not documented - set(keys), (
        f"config/README.md documents keys the schema lacks: {documented - set(keys)}"
    )
    missing = {k for k, v in keys.items() if v["leaf"]} - documented
    assert not missing, f"config/README.md lacks these schema keys: {sorted(missing)}"
    checked = 0
    for key, cell, _ in rows:
        spec = keys[key]
        default = sandbox.get(key, spec["default"]) if spec["default"] is NO_DEFAULT else spec["default"]
        if cell == "required":
            assert spec["required"] and default is NO_DEFAULT, f"{key}: not a required key without a default"
        elif cell == "—":
            assert not spec["required"] and default is NO_DEFAULT, (
                f"{key}: the schema gives a default or requires it"
            )
        elif re.fullmatch(r"`[^`]+`", cell):
            value = yaml.safe_load(cell.strip("`").replace("\\|", "|"))
            assert default is not NO_DEFAULT and value == default, (
                f"{key}: {cell} against the schema's {default!r}"
            )
            checked += 1
    assert checked >= 100
