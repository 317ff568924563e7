"""The Slurm profile, offline: it parses, plans the paper's jobs with the right resources, and drives a
small real DAG through the real executor plugin against stand-in sbatch/sacct/srun (tests/fake_slurm)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from guard import HANG_GUARD_S

from maxk import paths as P
from maxk.config import load_config

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "slurm"
FAKE = ROOT / "tests" / "fake_slurm"


def run(
    args: list[str], extra_env: dict[str, str] | None = None, timeout: int = HANG_GUARD_S
) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PATH=f"{bindir}:{os.environ['PATH']}")
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_profile_is_sane() -> None:
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert prof["executor"] == "slurm"
    assert prof["retries"] >= 1 and prof["rerun-incomplete"] is True
    assert "software-deployment-method" not in prof  # a dry run without conda would fail
    for rule, res in prof.get("set-resources", {}).items():
        assert not ("gres" in res and "gpu" in res), f"{rule}: gres and gpu both set"
        extra = str(res.get("slurm_extra", ""))
        assert not re.search(r"--(gres|gpus|mem|partition|time|account)\b|(^|\s)-[pAt]\s", extra), rule


#: what a cluster decides, not this workflow: the Slurm plugin's resources and settings that name the
#: site's account, partitions, QoS, node features, GPU models, reservations or clusters
SITE_KEYS = ("slurm_account", "slurm_partition", "qos", "constraint", "gpu_model", "gres", "clusters",
             "slurm-qos", "slurm-reservation")  # fmt: skip
#: sbatch options in `slurm_extra` that name such a value
SITE_FLAGS = re.compile(r"--(partition|account|qos|constraint|reservation|clusters|gres)\b|(^|\s)-[pAqCM]\s")
MARK = "SET ME"


def site_lines(text: str) -> list[tuple[int, str, str, bool]]:
    """(line number, key, value, marked) of every site value a YAML text sets literally: a SITE_KEYS key
    (block or flow style) or a `slurm_extra` naming a site option; `marked`: the line's comment says
    SET ME. An alias (`*name`) of an anchored value is no literal: the anchor's line is."""
    keys = "|".join(re.escape(k) for k in (*SITE_KEYS, "slurm_extra"))
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code, _, comment = line.partition("#")  # no site value here holds a '#'
        for m in re.finditer(rf"(?:^|[{{,\s])({keys})\s*:\s*([^,}}]*)", code):
            key, value = m.group(1), re.sub(r"^&\S+\s*", "", m.group(2).strip())
            if not value or value.startswith("*"):
                continue
            if key != "slurm_extra" or SITE_FLAGS.search(value):
                found.append((number, key, value, MARK in comment))
    return found


def _site_keys_set(node: object, path: str = "") -> set[str]:
    """Every SITE_KEYS key a loaded YAML document sets, as a dotted path."""
    if isinstance(node, dict):
        out = {f"{path}.{k}" for k in node if k in SITE_KEYS}
        for k, v in node.items():
            out |= _site_keys_set(v, f"{path}.{k}")
        return out
    if isinstance(node, list):
        return set().union(*(_site_keys_set(v, f"{path}[{i}]") for i, v in enumerate(node)))
    return set()


def test_every_site_value_of_the_profile_is_on_a_line_marked_set_me() -> None:
    """The README asks users to edit the lines marked SET ME: a partition, account or other value a
    cluster decides, hard-coded on any other line, would be left at ours (the GPU rules' partition
    was, three times over). Marked once, each rule that needs it refers to it (a YAML alias)."""
    text = (PROFILE / "config.yaml").read_text()
    found = site_lines(text)
    unmarked = [f"line {n}: {k}: {v}" for n, k, v, marked in found if not marked]
    assert not unmarked, f"site values outside the lines marked {MARK}: {unmarked}"
    # the line scan saw every site key the profile sets (none hidden in a form it does not read)
    loaded = yaml.safe_load(text)
    assert {k for _, k, _, _ in found} >= {p.rsplit(".", 1)[1] for p in _site_keys_set(loaded)}
    assert {"slurm_account", "slurm_partition"} <= {k for _, k, _, _ in found}
    gpu_rules = ("train", "generate_shard", "entropy_rescore")  # one partition, named once
    assert len({loaded["set-resources"][r]["slurm_partition"] for r in gpu_rules}) == 1
    # and the check bites: an unmarked partition, account or QoS (block, flow or slurm_extra) is found
    for bad in ('    slurm_partition: "gpu"', "  train: {slurm_partition: a100}", "  qos: high  # fast",
                '    slurm_extra: "--qos=high"', "    slurm_extra: -C skylake"):  # fmt: skip
        assert [marked for *_, marked in site_lines(bad)] == [False], bad
    assert site_lines("    slurm_partition: *gpu_partition") == []
    marked = site_lines('    slurm_partition: &p "gpu"   # SET ME: the GPU partition')
    assert [(k, v, m) for _, k, v, m in marked] == [("slurm_partition", '"gpu"', True)]


def test_no_site_value_outside_the_slurm_profile() -> None:
    """Partitions and accounts belong in profiles/slurm/config.yaml only (config/README.md#resources):
    never in a config, nor in the default profile that applies to every run."""
    files = [*sorted((ROOT / "config").rglob("*.yaml")), ROOT / "profiles" / "default" / "config.yaml"]
    for path in files:
        text = path.read_text()
        assert not site_lines(text), (path, site_lines(text))
        assert not _site_keys_set(yaml.safe_load(text)), path


def _profile_values() -> tuple[str, str, str]:
    """The CPU partition, the GPU partition and the account the profile sets (its SET ME lines)."""
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    default, gpu = prof["default-resources"], prof["set-resources"]["train"]
    return default["slurm_partition"], gpu["slurm_partition"], default["slurm_account"]


def dry_run_jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every job in a `snakemake -n` listing."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        res = re.search(r"^\s*resources: (.*)$", block, re.M)
        pairs = dict(kv.split("=", 1) for kv in res.group(1).split(", ")) if res else {}
        jobs.append((m.group(1), pairs))
    return jobs


def test_paper_config_plans_every_job_on_slurm() -> None:
    """As the README types it, from the repository root: `--profile slurm` (./slurm links the profile)."""
    assert (ROOT / "slurm").resolve() == PROFILE.resolve()
    res = run(["-n", "--forceall", "--configfile", "config/paper.yaml", "--profile", "slurm"])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    jobs = dry_run_jobs(res.stdout + res.stderr)
    counts = Counter(rule for rule, _ in jobs)
    paper = load_config(ROOT / "config" / "paper.yaml")
    assert counts["train"] == len(paper["runs"]) == 13  # the paper's 10 runs and 3 beyond it
    assert counts["data_build"] == len(paper["datasets"])
    assert "base_model" not in counts  # the paper's base model is Qwen2.5-Coder-7B-Instruct, not built
    pairs = counts["score"]
    assert pairs >= 10 and counts["merge_samples"] == pairs
    assert counts["generate_shard"] == pairs * paper["generate"]["num_shards"]
    assert counts["analysis_table"] >= 4 + 2 * len(paper["analysis"]["datasets"])
    cpu_partition, gpu_partition, account = _profile_values()
    for rule, resources in jobs:
        if rule in ("train", "generate_shard"):
            assert resources["nodes"] == "1", (rule, resources)  # one node: the launch reaches no other
        if rule == "train":
            assert resources["gpu"] == str(paper["resources"]["train"]["gpu"])
            assert resources["slurm_partition"] == gpu_partition
        elif rule == "generate_shard":
            assert int(resources["gpu"]) >= 1 and resources["slurm_partition"] == gpu_partition
        elif rule in ("score", "data_build", "analysis_table"):
            assert "gpu" not in resources and resources["slurm_partition"] == cpu_partition, (rule, resources)
        if resources:
            assert resources["slurm_account"] == account


@pytest.mark.slow
def test_small_dag_runs_through_the_real_slurm_plugin(tmp_path: Path) -> None:
    """Base model -> one generation in two shards with a GPU request each, merged -> scoring, all submitted
    through sbatch (the merge and the shards' removal run here only: the end-to-end runs, like the
    embedded default, have one shard per model and dataset)."""
    small = ROOT / "tests" / "workflow" / "config_small.yaml"  # an overlay on the embedded default
    overlay = yaml.safe_load(small.read_text())
    gpu_shard = {"threads": 1, "mem_mb": 2000, "runtime": 20, "gpu": 1}
    overlay.setdefault("resources", {})["generate_shard"] = gpu_shard
    overlay["generate"]["num_shards"] = 2
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(overlay))
    cfg = load_config(ROOT / "config" / "config.yaml", config)
    state = tmp_path / "slurm"
    workdir = tmp_path / "work"
    res = run(
        [
            "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
            "--configfile", str(ROOT / "config" / "config.yaml"), str(config),
            "--profile", str(PROFILE), "--slurm-init-seconds-before-status-checks", "1",
            "--seconds-between-status-checks", "1",
            P.scores(cfg["seed"], "base", "suite_test"),
        ],
        extra_env={
            "PATH": f"{FAKE / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "FAKE_SLURM_DIR": str(state),
            "FAKE_SLURM_CHECK": str(FAKE / "check_submission.py"),
            "MAXK_CPU_STANDS_IN_FOR_GPU": "1",  # the GPU job runs on this CPU on purpose (maxk.gpu)
        },
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    submissions = [json.loads(line) for line in (state / "sbatch.jsonl").read_text().splitlines()]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (workdir / P.scores(cfg["seed"], "base", "suite_test")).is_file()
    rules = Counter(s["rule"] for s in submissions)
    assert rules["generate_shard"] == cfg["generate"]["num_shards"] == 2 and rules["base_model"] == 1
    samples = workdir / P.samples(cfg["seed"], "base", "suite_test")
    assert samples.is_file() and rules["merge_samples"] == 1  # merged, through sbatch too
    assert not list(samples.parent.glob("*/shard*.parquet")), "shards are temp() and must be gone"
    assert rules["score"] == 1
    gpu_jobs = [s for s in submissions if s["rule"] == "generate_shard"]
    assert all(s["opts"]["gpus"] == "1" and s["opts"]["p"] == "gpu" for s in gpu_jobs)
    assert all(s["opts"]["nodes"] == "1" for s in gpu_jobs)
