"""The one seam between Snakemake and the package: paths, final targets and config slices (maxk.workflow)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from maxk import paths as P
from maxk.config import load_config
from maxk.workflow import slices, targets

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def _rules() -> dict[str, str]:
    """``{rule name: its text}`` of every rule of the workflow."""
    out = {}
    for path in [*RULE_FILES, ROOT / "Snakefile"]:
        parts = re.split(r"^\s*rule (\w+):\n", path.read_text(), flags=re.M)
        out.update(zip(parts[1::2], parts[2::2], strict=True))
    return out


def test_every_rule_with_config_passes_its_own_slice():
    rules = _rules()
    with_config = {name for name, text in rules.items() if "--config-json" in text}
    assert with_config == set(slices.SLICES)
    for name in with_config:
        assert f'config_json("{name}"' in rules[name], name


def test_the_results_root_is_written_once():
    """Rule files name paths through maxk.paths; no module but it spells the root."""
    for path in [*RULE_FILES, ROOT / "Snakefile"]:
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert '"results' not in code and "'results" not in code, path.name
    spelled = [
        p.relative_to(ROOT)
        for p in (ROOT / "src" / "maxk").rglob("*.py")
        if re.search(r"""[=(\[,]\s*f?["']results/""", p.read_text())
    ]
    assert spelled == [] and P.RESULTS == "results"


def test_every_output_path_is_built_in_maxk_paths():
    """Rules and targets name each result file through ``maxk.paths``: no module but it, and
    no rule file, builds one from the results root (logs and benchmarks aside)."""
    built = [
        path.relative_to(ROOT).as_posix()
        for path in [*RULE_FILES, ROOT / "Snakefile", *(ROOT / "src" / "maxk").rglob("*.py")]
        if path.name != "paths.py" and re.search(r"RESULTS\}/", path.read_text())
    ]
    assert built == []
    assert P.table("t1", "md") == "results/tables/t1.md" and P.claims("csv") == "results/claims/claims.csv"
    assert (
        P.figure("entropy", "png")
        == "results/figures/entropy.png"
        == P.entropy_estimates("png").replace("_estimates", "")
    )


def test_pair_of_inverts_every_per_pair_path():
    for make in (P.samples, P.scores, P.metrics):
        assert P.pair_of(make("grpo_e1", "lcb-v5.test")) == ("grpo_e1", "lcb-v5.test")
    assert P.pair_of("/elsewhere/metrics/base/humaneval.parquet") == ("base", "humaneval")


def test_model_paths_follow_the_base_model_section():
    built = {"base_model": {"build": True, "path": "x"}}
    hub = {"base_model": {"build": False, "path": "Org/Model", "revision": None}}
    assert P.model_path(built, "base") == "results/models/base" == P.model_inputs(built, "base")[0]
    assert P.model_path(hub, "base") == "Org/Model" and P.model_inputs(hub, "base") == []
    assert P.model_path(hub, "grpo") == "results/models/grpo" == P.model_inputs(hub, "grpo")[0]


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_final_targets_cover_every_declared_output(name):
    config = load_config(ROOT / "config" / name)
    out = targets.final_targets(config)
    assert len(out) == len(set(out))
    for run in config["runs"]:
        assert {P.model_dir(run), P.train_metrics(run)} <= set(out)
    for dataset in config["datasets"]:
        assert P.data(dataset) in out
    assert "results/claims/claims.csv" in out and "results/provenance/environment.json" in out
    # every metrics file an analysis job reads comes from a declared (model, dataset) pair
    analysis = config["analysis"]
    pairs = targets.significance_pairs(analysis) + targets.claims_pairs(analysis)[0]
    for m, d in pairs:
        assert m in analysis["models"] and d in config["datasets"]


#: Which slices each top-level section reaches (the environment record reaches all of them).
REACHES = {
    "seed": {"base_model", "rl_prompts", "train", "generate_shard", "entropy_rescore"},
    "generate": {"generate_shard", "entropy_rescore"},
    "prompt": {"data_build", "base_model", "rl_prompts", "train", "generate_shard", "entropy_rescore"},
    "sandbox": {"base_model", "rl_prompts", "train", "score"},
    "train": {"train"},
    "base_model": {"base_model"},
    "data": {"data_build"},
}


@pytest.mark.parametrize(
    ("key", "value", "reaches"),
    [
        ("learning_rate", 1e-3, {"train"}),
        ("prompt_filter", {"samples": 4}, {"rl_prompts", "train"}),
        ("temperature", 0.7, {"rl_prompts", "train"}),
    ],
)
def test_the_rl_prompt_filter_reruns_only_for_the_train_keys_it_reads(key, value, reaches):
    config = load_config(ROOT / "config" / "config.yaml")
    run = sorted(config["runs"])[0]
    changed = copy.deepcopy(config)
    changed["train"][key] = value
    moved = {
        rule
        for rule in ("rl_prompts", "train", "base_model")
        if slices.config_json(config, rule, run) != slices.config_json(changed, rule, run)
    }
    assert moved == reaches


@pytest.mark.parametrize("section", sorted(REACHES))
def test_a_change_reruns_exactly_the_jobs_that_depend_on_it(section):
    config = load_config(ROOT / "config" / "config.yaml")
    dataset, run = sorted(config["datasets"])[0], sorted(config["runs"])[0]
    names = {"data_build": dataset, "train": run}

    def all_slices(cfg):
        return {rule: slices.config_json(cfg, rule, names.get(rule)) for rule in slices.SLICES}

    before = all_slices(config)
    changed = copy.deepcopy(config)
    if isinstance(changed[section], dict):
        changed[section]["_probe"] = 1  # a new key anywhere in the section (schema not re-checked)
    else:
        changed[section] += 1
    after = all_slices(changed)
    moved = {rule for rule in before if before[rule] != after[rule]}
    assert moved == REACHES[section] | {"environment"}


def test_analysis_subsections_rerun_only_their_rules():
    config = load_config(ROOT / "config" / "config.yaml")
    for key, rules in (
        ("lab", {"analysis_lab"}),
        ("claims", {"analysis_claims"}),
        ("ks", {"analysis_metrics"} | {r for r in slices.SLICES if slices.SLICES[r] is slices.analysis}),
    ):
        changed = copy.deepcopy(config)
        changed["analysis"][key] = copy.deepcopy(config["analysis"][key]) if key != "ks" else [1, 2]
        if key != "ks":
            changed["analysis"][key]["_probe"] = 1
        moved = {
            r for r in slices.SLICES if r not in ("data_build", "train", "environment")
            and slices.config_json(config, r) != slices.config_json(changed, r)
        }  # fmt: skip
        assert moved == rules, key
