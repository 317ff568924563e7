"""The paper config, rehearsed end to end through the real command line (tests/rehearsal/rehearse.py):
only sizes change (overlay.yaml), and the stand-ins replace what only a GPU cluster has."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from rehearse import CORES, HERE, LOCAL, ROOT, P, load_config, rehearse

from maxk.workflow.targets import final_targets


def test_the_overlay_changes_sizes_only():
    """Every key the overlay sets is a size; each line says so."""
    sizes = {("generate", "n"), ("generate", "max_problems"), ("generate", "num_shards"),
             ("train", "max_prompts"), ("analysis", "bootstrap"), ("analysis", "lab"),
             ("resources", "score"), ("resources", "train"), ("resources", "generate_shard")}  # fmt: skip
    overlay = yaml.safe_load((HERE / "overlay.yaml").read_text())
    assert {(section, key) for section, entries in overlay.items() for key in entries} == sizes
    for line in (HERE / "overlay.yaml").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and not line.rstrip().endswith(":"):
            assert "# SIZE:" in line, line


@pytest.mark.slow
def test_paper_config_rehearsal(tmp_path, monkeypatch):
    """Under ATen's other kernel path (``ATEN_CPU_CAPABILITY=default``, its unvectorised kernels): the
    end-to-end runs take this CPU's own, so the suite runs the pipeline and its reports under both; another
    CPU type gives other bytes, and must never give a failure (docs/design.md#reproducibility)."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    paper = ROOT / "config" / "paper.yaml"
    assert rehearse(paper, tmp_path) == 0
    config = load_config([paper, HERE / "overlay.yaml"])
    (seed,) = config["replicates"]
    results = tmp_path / "run" / P.seed_dir(seed)
    for table in config["analysis"]["tables"]:
        assert (results / "tables" / f"{table}.md").is_file(), table
    for name in ("claims/claims.csv", "claims/claims.md"):
        assert (results / name).is_file(), name
    assert sorted(p.name for p in (results / "models").iterdir()) == sorted(config["runs"])
    submissions = [json.loads(s) for s in (tmp_path / "slurm" / "sbatch.jsonl").read_text().splitlines()]
    rules = Counter(s["rule"] for s in submissions)
    # one job of every rule went through sbatch again, but the aggregation (localrules in
    # workflow/rules/analysis.smk), which ran in the main process; the contamination audit reads every
    # training and audited set (GBs at paper scale): a job of its own
    assert rules == {
        "data_build": 1,
        "train": 1,
        "generate_shard": 1,
        "entropy_rescore": 1,
        "score": 1,
        "analysis_lab": 1,
        "environment": 1,
        "analysis_contamination": 1,
    }
    gpu_rules = {"train", "generate_shard", "entropy_rescore"}
    assert {s["rule"] for s in submissions if s["opts"].get("gpus")} == gpu_rules
    estimates = (results / "figures" / "entropy_estimates.md").read_text()
    assert "| approx |" in estimates  # vLLM's top-k bound beside the exact entropy
    # and the first phase ran every job: every final output, from each model's scores on its sets
    missing = [t for t in final_targets(config) if not (tmp_path / "run" / t).exists()]
    assert not missing, missing
    assert len(list((results / "scores").glob("*/*.parquet"))) > 50
    trained, sampled = results / "models" / "grpo_continuous", results / "samples" / "grpo_continuous"
    for manifest in (trained / "provenance.json", sampled / "codecontests_test.manifest.json"):
        assert '"torch_capability": "DEFAULT"' in manifest.read_text(), f"{manifest}: another kernel path"
    assert Path(tmp_path / "hf").is_dir()


def test_the_local_phase_runs_as_many_jobs_at_once_as_there_are_cores(tmp_path):
    """Phase one runs the Slurm profile here (``LOCAL``): its ``jobs: 64`` (a cluster's queue) must not
    start more jobs at once than this machine has cores. Eight two-second jobs of one thread each, timed."""
    (tmp_path / "Snakefile").write_text(
        "rule all:\n    input: expand('o{i}', i=range(8))\n"
        "rule a:\n    output: 'o{i}'\n    threads: 1\n"
        "    shell: 'date +%s.%N > {output}; sleep 2; date +%s.%N >> {output}'\n"
    )
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(tmp_path / "Snakefile"),
           "--directory", str(tmp_path), *LOCAL, "--quiet"]  # fmt: skip
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    spans = [tuple(map(float, (tmp_path / f"o{i}").read_text().split())) for i in range(8)]
    at_once = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert 1 <= at_once <= int(CORES), (at_once, CORES)
