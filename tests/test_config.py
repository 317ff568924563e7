"""The config's one schema: defaults applied in every section file, configs that hold only differences."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from maxk.config import ConfigError, load_config, section_defaults, validate_config, with_defaults
from maxk.sandbox import Limits

ROOT = Path(__file__).parents[1]
CONFIGS = ["config/config.yaml", "config/paper.yaml", "tests/workflow/config_small.yaml"]


def _leaves(node, path=()):
    """Key paths of a raw config down to scalars, lists and maps of user-chosen names."""
    named = {"runs", "datasets", "pools", "tables", "models", "settings", "resources", "options", "model"}
    for key, value in node.items():
        if isinstance(value, dict) and value and key not in named:
            yield from _leaves(value, (*path, key))
        else:
            yield (*path, key)


def _without(raw, path):
    out = copy.deepcopy(raw)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def test_defaults_of_every_section_file_are_applied():
    """snakemake.utils.validate fills in the top-level file's defaults only; ours reach each section."""
    cfg = validate_config({"seed": 1, "train": {"dataset": "d", "save_steps": 3, "max_completion_length": 8,
                           "learning_rate": 1e-4, "per_device_train_batch_size": 8,
                           "gradient_accumulation_steps": 1}})  # fmt: skip
    assert (cfg["train"]["beta"], cfg["train"]["epsilon"], cfg["train"]["num_iterations"]) == (0.01, 0.2, 3)
    assert cfg["train"]["vllm"]["mode"] == "colocate" and cfg["train"]["bon_k_schedule"] is None
    assert cfg["generate"]["n"] == 256 and cfg["generate"]["vllm"]["entropy_top_logprobs"] == 20
    assert cfg["prompt"] == section_defaults("prompt") and cfg["prompt"]["use_chat_template"] is True
    assert cfg["sandbox"] == {"isolation": {"allow_exposed_training": False}, "batch_size": 512}


@pytest.mark.parametrize("name", CONFIGS)
def test_configs_hold_only_what_differs_from_the_defaults(name):
    """Every key a config sets changes what the stages see: removing it must change the validated
    config (or, in the sandbox section, the sandbox's Limits)."""
    text = (ROOT / name).read_text()
    raw = yaml.safe_load(text)
    full = json.dumps(validate_config(copy.deepcopy(raw)), sort_keys=True)
    redundant = []
    for path in _leaves(raw):
        if path == ("seed",):
            continue
        trial = _without(raw, path)
        if path[0] == "sandbox":
            same = Limits.make(**trial.get("sandbox", {})) == Limits.make(**raw["sandbox"])
            same = same and trial["sandbox"].get("batch_size", 512) == raw["sandbox"].get("batch_size", 512)
        else:
            try:
                same = json.dumps(validate_config(trial), sort_keys=True) == full
            except ConfigError:
                same = False  # required: not a default
        if same:
            redundant.append(".".join(map(str, path)))
    assert redundant == [], f"{name} repeats defaults: {redundant}"


def test_a_bad_key_is_named():
    with pytest.raises(ConfigError, match=r"config key train: Additional properties .*'lerning_rate'"):
        validate_config({"seed": 0, "train": {"lerning_rate": 1}})
    with pytest.raises(ConfigError, match=r"config key generate.n"):
        validate_config({"seed": 0, "generate": {"n": 0}})


def test_a_rule_s_part_of_a_section_gets_defaults_but_no_required_keys():
    part = with_defaults("analysis", {"ks": [1, 2]})
    assert part["bootstrap"] == {"resamples": 1000, "confidence": 0.95} and part["ks"] == [1, 2]
    assert "models" not in part  # required by the section, not by this job
    with pytest.raises(ConfigError, match=r"analysis\.ragged"):
        with_defaults("analysis", {"ragged": "sometimes"})


def test_load_config_is_what_the_snakefile_sees():
    cfg = load_config(ROOT / "config" / "paper.yaml")
    assert cfg["generate"]["n"] == 256 and cfg["train"]["learning_rate"] == 5e-6
    assert cfg["prompt"]["system"] == "You are a helpful assistant."  # the paper config's own


def test_the_paper_config_reads_the_hub_at_commits():
    """A branch moves under a run (CURE's LiveCodeBench file was renamed on `main`): every hub file and
    the model are read at a commit; a pool left at a branch says UNPINNED, and why, in its own lines."""
    text = (ROOT / "config" / "paper.yaml").read_text()
    cfg = yaml.safe_load(text)
    commit = re.compile(r"[0-9a-f]{40}")
    assert commit.fullmatch(cfg["base_model"]["revision"])
    assert cfg["data"]["tokenizer"] == cfg["base_model"]["path"]
    assert cfg["data"]["tokenizer_revision"] == cfg["base_model"]["revision"]
    pools = cfg["data"]["pools"]
    blocks = re.split(r"^    (\w+):\n", text.split("\n  pools:\n", 1)[1].split("\nprompt:", 1)[0], flags=re.M)
    block_of = dict(zip(blocks[1::2], blocks[2::2], strict=True))
    assert set(block_of) == set(pools)
    unpinned = {name for name, pool in pools.items() if not commit.fullmatch(pool["options"]["revision"])}
    for name in unpinned:
        assert "UNPINNED" in block_of[name], f"pool {name}: revision {pools[name]['options']['revision']!r}"
    for name in set(pools) - unpinned:
        assert "UNPINNED" not in block_of[name], name
    assert len(unpinned) <= 1  # LiveBench's: no commit of it could be read offline (issue 14)
