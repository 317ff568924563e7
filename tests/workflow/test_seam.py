"""The one seam between Snakemake and the package: paths, final targets and config slices (maxk.workflow)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from maxk import paths as P
from maxk.config import ConfigError, load_config, validate_config
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
    assert P.table(7, "t1", "md") == "results/seed7/tables/t1.md"
    assert P.claims(7, "csv") == "results/seed7/claims/claims.csv"
    assert (
        P.figure(7, "entropy", "png")
        == "results/seed7/figures/entropy.png"
        == P.entropy_estimates(7, "png").replace("_estimates", "")
    )


#: every path of one seed's run, as a rule's pattern (the ``{seed}`` wildcard) and for seed 12
SEED_PATHS = {
    "model_dir": lambda s: P.model_dir(s, "grpo"),
    "trained_on": lambda s: P.trained_on(s, "grpo"),
    "train_metrics": lambda s: P.train_metrics(s, "grpo"),
    "edge_prompts": lambda s: P.edge_prompts(s, "suite_rl"),
    "samples": lambda s: P.samples(s, "grpo", "d"),
    "shard": lambda s: P.shard(s, "grpo", "d", 3),
    "scores": lambda s: P.scores(s, "grpo", "d"),
    "metrics": lambda s: P.metrics(s, "grpo", "d"),
    "entropy_rescored": lambda s: P.entropy_rescored(s, "grpo", "d"),
    "table": lambda s: P.table(s, "t1", "md"),
    "significance": lambda s: P.significance(s, "csv"),
    "figure": lambda s: P.figure(s, "maxk_d", "png"),
    "claims": lambda s: P.claims(s, "md"),
    "claim_differences": P.claim_differences,
    "contamination": lambda s: P.contamination(s, "csv"),
    "logs": P.logs,
    "benchmarks": P.benchmarks,
}


@pytest.mark.parametrize("name", sorted(SEED_PATHS))
def test_every_seed_dependent_path_lies_under_its_seed(name):
    make = SEED_PATHS[name]
    pattern, path = make("{seed}"), make(12)
    assert pattern.startswith("results/seed{seed}/") and path == pattern.replace("{seed}", "12")
    assert P.seed_of(path) == 12 and P.seed_of("/x/" + path) == 12
    # two seeds never share a file, and nothing of a seed lies where the once-made files are
    assert make(12) != make(1) and not path.startswith(("results/data/", "results/lab/", "results/claims/"))


def test_seed_independent_paths_are_made_once():
    for path in (P.data("d"), P.lab("onpolicy.csv"), P.environment(), P.across_seeds("md"),
                 P.across_seeds_figure("claims", "png")):  # fmt: skip
        assert "/seed" not in path
        with pytest.raises(ValueError, match="not under a results/seed"):
            P.seed_of(path)
    assert P.seed_of("results/seed0/models/base") == 0


def test_pair_of_inverts_every_per_pair_path():
    for make in (P.samples, P.scores, P.metrics):
        assert P.pair_of(make(3, "grpo_e1", "lcb-v5.test")) == ("grpo_e1", "lcb-v5.test")
    assert P.pair_of("/elsewhere/metrics/base/humaneval.parquet") == ("base", "humaneval")


def test_model_paths_follow_the_base_model_section():
    built = {"base_model": {"build": True, "path": "x"}}
    hub = {"base_model": {"build": False, "path": "Org/Model", "revision": None}}
    assert P.model_path(built, 5, "base") == "results/seed5/models/base"
    assert P.model_inputs(built, 5, "base") == [P.model_path(built, 5, "base")]
    assert P.model_path(hub, 5, "base") == "Org/Model" and P.model_inputs(hub, 5, "base") == []
    assert P.model_path(hub, 5, "grpo") == P.model_dir(5, "grpo") == P.model_inputs(hub, 5, "grpo")[0]


def test_a_local_base_directory_is_a_rule_input_and_a_hub_id_is_not(tmp_path):
    local = {"base_model": {"build": False, "path": str(tmp_path), "revision": None}}
    assert P.model_path(local, 5, "base") == str(tmp_path)
    assert P.model_inputs(local, 5, "base") == P.model_inputs(local, 5, "base_T0.7") == [str(tmp_path)]
    missing = {"base_model": {"build": False, "path": str(tmp_path / "absent"), "revision": None}}
    assert P.model_inputs(missing, 5, "base") == []


def test_the_audit_reads_the_base_it_trains_or_a_local_one_with_its_record(tmp_path):
    runs = {"grpo": {}}
    sft = {"dataset": "suite_sft"}
    built = {"base_model": {"build": True, "path": "x", "sft": sft}, "runs": runs}
    hub = {"base_model": {"build": False, "path": "Org/Model", "sft": sft}, "runs": runs}
    bare = {"base_model": {"build": False, "path": str(tmp_path), "sft": sft}, "runs": runs}
    local_dir = tmp_path / "base"
    local_dir.mkdir()
    (local_dir / P.TRAINED_ON).write_text(
        json.dumps([{"dataset": "sft_pool", "id": "a"}, {"dataset": "sft_pool", "id": "b"}])
    )
    local = {"base_model": {"build": False, "path": str(local_dir), "sft": sft}, "runs": runs}
    assert targets.trained_models(built) == ["base", "grpo"]
    assert targets.trained_models(hub) == targets.trained_models(bare) == ["grpo"]
    assert targets.trained_models(local) == ["base", "grpo"]
    assert P.model_path(local, 5, "base") == str(local_dir)
    # the base's training files: the configured SFT set when built, the record's sets when local
    assert targets.base_trained_on_datasets(built) == ["suite_sft"]
    assert targets.base_trained_on_datasets(local) == ["sft_pool"]
    assert targets.base_trained_on_datasets(hub) == targets.base_trained_on_datasets(bare) == []
    (local_dir / P.TRAINED_ON).write_text("not json")  # the audit job reports it, naming the file
    assert targets.trained_models(local) == ["base", "grpo"]
    assert targets.base_trained_on_datasets(local) == []


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_final_targets_cover_every_declared_output(name):
    config = load_config(ROOT / "config" / name)
    out = targets.final_targets(config)
    assert len(out) == len(set(out))
    seeds = config["replicates"]
    assert seeds[0] == config["seed"]  # the master seed runs first (replicates: null is the one seed)
    for seed in seeds:
        for run in config["runs"]:
            assert {P.model_dir(seed, run), P.train_metrics(seed, run)} <= set(out)
        assert f"results/seed{seed}/claims/claims.csv" in out
    for dataset in config["datasets"]:
        assert P.data(dataset) in out
    assert "results/provenance/environment.json" in out
    # several seeds: the across-seed report; one seed: no across-seed job
    assert (P.across_seeds("md") in out) == (len(seeds) > 1)
    assert bool([f for f in out if "across_seeds" in f]) == (len(seeds) > 1)
    # every metrics file an analysis job reads comes from a declared (model, dataset) pair
    analysis = config["analysis"]
    pairs = targets.significance_pairs(analysis) + targets.claims_pairs(config)[0]
    assert {(run, analysis["claims"]["dataset"]) for run in ("base", *config["runs"])} <= set(pairs)
    yardstick = {P.tempered(t) for t in analysis["claims"]["yardstick_temperatures"]}
    for m, d in pairs:
        assert (m in analysis["models"] or m in yardstick) and d in config["datasets"]
    # the yardstick's tempered base: its own samples on the claims' dataset, the base's weights
    assert {(m, analysis["claims"]["dataset"]) for m in yardstick} <= set(pairs)
    assert (P.yardstick(seed) in out) == bool(yardstick)


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
        if slices.config_json(config, rule, run if rule == "train" else None)
        != slices.config_json(changed, rule, run if rule == "train" else None)
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
        ("claims", {"analysis_claims", "analysis_across_seeds"}),
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


def test_three_seeds_make_three_of_every_seed_dependent_target_but_the_checks_and_one_of_the_rest():
    config = load_config(ROOT / "config" / "config.yaml")
    config["replicates"], config["replicate_outputs"] = [1234], "all"
    one = targets.final_targets(config)
    config["replicates"] = [1234, 2, 3]
    three = targets.final_targets(config)
    per_seed = [f for f in one if f.startswith(P.seed_dir(1234) + "/")]
    once = [f for f in one if f not in per_seed]
    across = targets.across_seed_targets(config)
    checks = targets.metrics_files(config["analysis"]["checks"], 1234)  # the first seed's only
    assert checks and set(checks) <= set(per_seed)
    assert per_seed and once and len(three) == len(once) + 3 * len(per_seed) - 2 * len(checks) + len(across)
    for seed in (2, 3):
        moved = {f.replace("seed1234/", f"seed{seed}/") for f in per_seed}
        checked = {f.replace("seed1234/", f"seed{seed}/") for f in checks}
        assert moved - checked <= set(three) and not checked & set(three)
    config["replicates"] = [3, 1234]  # the first seed of the list, whichever it is
    assert set(targets.metrics_files(config["analysis"]["checks"], 3)) <= set(targets.final_targets(config))
    assert not set(checks) & set(targets.final_targets(config))
    config["replicates"] = [1234, 2, 3]
    assert set(targets.across_seed_targets(config)) == {
        P.across_seeds("csv"), P.across_seeds("md"),
        *(P.across_seeds_figure(n, e) for n in P.ACROSS_SEED_FIGURES for e in ("pdf", "png")),
        P.across_seeds_yardstick(),  # the default config has yardstick temperatures
    }  # fmt: skip
    inputs = targets.across_seed_inputs(config)
    assert [P.seed_of(f) for f in inputs["yardstick"]] == [1234, 2, 3]
    assert [P.seed_of(f) for f in inputs["claims"]] == [1234, 2, 3]
    assert [P.seed_of(f) for f in inputs["differences"]] == [1234, 2, 3]


def test_pooled_replicates_make_what_the_pooled_reading_reads_and_the_first_seed_everything():
    """``replicate_outputs: pooled``: a later seed's final outputs are its runs, its claims and
    yardstick files and its audit; the first seed's are those of ``all``; the across-seed job reads
    only files the later seeds still make (through the claims job's inputs)."""
    config = load_config(ROOT / "config" / "config.yaml")
    config["replicates"], config["replicate_outputs"] = [1234, 2, 3], "all"
    full = {s: targets.seed_targets(config, s) for s in (1234, 2)}
    config["replicate_outputs"] = "pooled"
    assert targets.seed_targets(config, 1234) == full[1234]
    later = targets.seed_targets(config, 2)
    runs = [f for r in sorted(config["runs"]) for f in (P.train_metrics(2, r), P.model_dir(2, r))]
    read = [P.claims(2, "csv"), P.claims(2, "md"), P.yardstick(2)]
    audit = [P.contamination(2, e) for e in ("csv", "md")]
    assert later == runs + read + audit and set(later) < set(full[2])
    assert not [f for f in later if "/tables/" in f or "/figures/" in f or "suite_call" in f]
    inputs = targets.across_seed_inputs(config)
    assert {f for fs in inputs.values() for f in fs if P.seed_of(f) == 2} and all(
        "suite_call" not in f for fs in inputs.values() for f in fs
    )


def test_a_seed_slice_takes_the_jobs_seed_and_only_where_it_has_one():
    config = load_config(ROOT / "config" / "config.yaml")
    run = sorted(config["runs"])[0]
    for rule in set(slices.SLICES) - {"environment"}:  # made once: the whole config, never a seed
        name = run if rule == "train" else (sorted(config["datasets"])[0] if rule == "data_build" else None)
        plain, seeded = slices.config_json(config, rule, name), slices.config_json(config, rule, name, "9")
        if rule in REACHES["seed"]:
            assert json.loads(seeded)["seed"] == 9 and json.loads(plain)["seed"] == config["seed"]
        else:
            assert seeded == plain, rule


def test_replicates_from_the_command_line_are_ints():
    """``--config replicates=[1234,2,3]`` hands Snakemake's parse over as strings; they are seeds."""
    config = load_config(ROOT / "config" / "config.yaml")
    config["replicates"] = ["1234", "2", "3"]
    assert validate_config(config)["replicates"] == [1234, 2, 3]
    config["replicates"] = [2, 2]
    with pytest.raises(ConfigError, match="replicates"):
        validate_config(config)
