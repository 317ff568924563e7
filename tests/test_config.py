"""The config's one schema: defaults applied in every section file, configs that hold only differences."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from maxk.config import (
    ConfigError,
    compose,
    lay_over,
    load_config,
    merge,
    section_defaults,
    validate_config,
    with_defaults,
)
from maxk.sandbox import Limits

ROOT = Path(__file__).parents[1]
#: each scale file, with the files it is laid over (the tests' scale is an overlay on the embedded one)
CONFIGS = {
    "config/config.yaml": (),
    "config/paper.yaml": (),
    "tests/workflow/config_small.yaml": ("config/config.yaml",),
    "tests/workflow/config_one_seed.yaml": ("config/config.yaml", "tests/workflow/config_small.yaml"),
}
#: each experiment file, with the scale files that name it
EXPERIMENTS = {
    "config/experiment.yaml": ("config/config.yaml",),
    "tests/workflow/experiment_small.yaml": ("config/config.yaml", "tests/workflow/config_small.yaml"),
}


def _raw(name):
    return yaml.safe_load((ROOT / name).read_text())


def _scale(names):
    config = {}
    for name in names:
        merge(config, _raw(name))
    return config


def _flat(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _flat(value, (*path, key))
    else:
        yield path, node


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


def _redundant(raw, composed_of):
    """The leaves of ``raw`` whose removal leaves ``composed_of(raw)`` (validated) unchanged."""
    full = json.dumps(validate_config(composed_of(copy.deepcopy(raw))), sort_keys=True)
    redundant = []
    for path in _leaves(raw):
        if path in (("seed",), ("experiment",)):
            continue
        trial = _without(raw, path)
        if path[0] == "sandbox":
            same = Limits.make(**trial.get("sandbox", {})) == Limits.make(**raw["sandbox"])
            same = same and trial["sandbox"].get("batch_size", 512) == raw["sandbox"].get("batch_size", 512)
        else:
            try:
                same = json.dumps(validate_config(composed_of(trial)), sort_keys=True) == full
            except ConfigError:
                same = False  # required: not a default
        if same:
            redundant.append(".".join(map(str, path)))
    return redundant


@pytest.mark.parametrize("name", CONFIGS)
def test_configs_hold_only_what_differs_from_the_defaults(name):
    """Every key a scale file sets changes what the stages see: removing it must change the composed,
    validated config (or, in the sandbox section, the sandbox's Limits). For an overlay, a key that
    repeats the file beneath it is as redundant as one that repeats a default."""
    bases = _scale(CONFIGS[name])
    redundant = _redundant(_raw(name), lambda raw: compose(merge(copy.deepcopy(bases), raw)))
    assert redundant == [], f"{name} repeats defaults: {redundant}"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiments_hold_only_what_their_scales_see(name):
    scale = _scale(EXPERIMENTS[name])
    redundant = _redundant(_raw(name), lambda raw: lay_over(raw, scale))
    assert redundant == [], f"{name} repeats defaults or settings its scale replaces: {redundant}"


def test_the_experiment_is_written_once():
    """The run matrix, tables, figures and claims are config/experiment.yaml's; the two scales share
    few identical settings (issue 27: at most 25, from 85) and the embedded one defines no run or table."""
    embedded, paper = dict(_flat(_raw("config/config.yaml"))), dict(_flat(_raw("config/paper.yaml")))
    shared = sorted(".".join(map(str, k)) for k in embedded if k in paper and embedded[k] == paper[k])
    assert len(shared) <= 25, shared
    assert "runs" not in _raw("config/config.yaml") and "tables" not in _raw("config/config.yaml")["analysis"]
    experiment = _raw("config/experiment.yaml")
    assert set(experiment) == {"runs", "analysis"}
    # the paper scale adds one run its budget allows (the embedded one cannot afford it); it redefines none
    added = {name for name, run in _raw("config/paper.yaml")["runs"].items() if "method" in run}
    assert added == {"bon_mean_centered"} and not added & set(experiment["runs"])
    for name in ("config/config.yaml", "config/paper.yaml"):
        assert load_config(ROOT / name)["experiment"] == "config/experiment.yaml"
    assert list(load_config()["runs"]) == list(experiment["runs"])
    paper_runs = list(load_config(ROOT / "config" / "paper.yaml")["runs"])
    assert paper_runs == [*experiment["runs"], "bon_mean_centered"]


def test_a_scale_is_laid_over_its_experiment(tmp_path):
    table = {"caption": "x", "rows": ["base", "a"], "metrics": ["max"], "ks": [1]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({
        "runs": {"a": {"method": "grpo"}},
        "analysis": {"models": {"base": "Base", "a": "A"}, "tables": {"t": table}},
    }))  # fmt: skip
    lab = {"groups": 10, "n": [2], "k": [1], "plot_k": 1, "plot_n": 2}
    scale = {"experiment": "exp.yaml", "seed": 3, "analysis": {"datasets": {"d": {"label": "D"}},
             "tables": {"t": {"caption": "y"}}, "lab": lab}}  # fmt: skip
    cfg = validate_config(compose(copy.deepcopy(scale), root=tmp_path))
    table = cfg["analysis"]["tables"]["t"]
    assert table["caption"] == "y" and table["rows"] == ["base", "a"]  # the scale's key wins, the rest kept
    assert table["datasets"] == ["d"]  # no table_datasets: every dataset of analysis.datasets
    assert compose({"seed": 1}, root=tmp_path) == {"seed": 1}  # no experiment key: the file is whole
    # a scale that overrides a run its experiment does not define is named, with why
    stray = {**copy.deepcopy(scale), "runs": {"b": {"num_iterations": 1}}}
    with pytest.raises(ConfigError, match=r"runs\.b: 'method' is a required .*\(a scale file sets runs\.b"):
        validate_config(compose(stray, root=tmp_path))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"runs": {}, "seed": 1}))
    with pytest.raises(ConfigError, match=r"bad\.yaml: an experiment defines only runs, analysis; seed"):
        compose({"experiment": "bad.yaml", "seed": 1}, root=tmp_path)
    with pytest.raises(ConfigError, match=r"config key experiment: .*missing\.yaml not found"):
        compose({"experiment": "missing.yaml", "seed": 1}, root=tmp_path)


def test_merge_is_snakemake_s():
    """maxk.config.merge is the merge Snakemake applies to several --configfile (update_config)."""
    from snakemake.utils import update_config

    base = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": None}
    update = {"a": {"c": [3], "d": {"g": 2}, "h": None}, "f": {"i": 1}}
    ours, theirs = merge(copy.deepcopy(base), update), copy.deepcopy(base)
    update_config(theirs, copy.deepcopy(update))
    assert ours == theirs == {"a": {"b": 1, "c": [3], "d": {"e": 1, "g": 2}, "h": None}, "f": {"i": 1}}


def test_a_bad_key_is_named():
    with pytest.raises(ConfigError, match=r"config key train: Additional properties .*'lerning_rate'"):
        validate_config({"seed": 0, "train": {"lerning_rate": 1}})
    with pytest.raises(ConfigError, match=r"config key generate.n"):
        validate_config({"seed": 0, "generate": {"n": 0}})


def test_command_line_strings_become_the_schema_s_booleans_and_seeds():
    """`--config warm_start=false replicates=[1,2]`: Snakemake hands over strings; the schema's types win,
    and a string that is no boolean stays an error naming its key."""
    config = load_config()
    for given, read in (("false", False), ("True", True), ("FALSE", False)):
        assert validate_config({**config, "warm_start": given})["warm_start"] is read
    assert validate_config({**config, "replicates": ["1", "2"]})["replicates"] == [1, 2]
    with pytest.raises(ConfigError, match="warm_start"):
        validate_config({**config, "warm_start": "no"})


def test_base_model_path_is_required_only_when_the_workflow_does_not_build_it():
    """A built base is results/seed{seed}/models/base (maxk.paths.model_path): `path` is read only with
    `build: false`, and required only then."""
    built = validate_config({"seed": 0, "base_model": {"build": True}})
    assert "path" not in built["base_model"]
    with pytest.raises(ConfigError, match=r"config key base_model: 'path' is a required property"):
        validate_config({"seed": 0, "base_model": {"build": False}})
    validate_config({"seed": 0, "base_model": {"build": False, "path": "Org/Model"}})


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


#: every stage's typed config (issue 27): (class, its schema section)
def _stage_configs():
    from maxk.analysis.config import (
        AnalysisConfig,
        BootstrapSettings,
        LabSettings,
        OffpolicySettings,
        SignificanceSettings,
    )
    from maxk.data.config import Instructions, PromptConfig
    from maxk.generate.config import GenerateConfig, TransformersSettings, VLLMSettings
    from maxk.train.config import (
        BaseModelConfig,
        EvalSettings,
        LaunchSettings,
        RunSpec,
        SFTSettings,
        TokenizerSettings,
        TrainConfig,
        TrainVLLMSettings,
    )

    generate = [GenerateConfig, TransformersSettings, VLLMSettings]
    train = [TrainConfig, TrainVLLMSettings, LaunchSettings, RunSpec]
    base = [BaseModelConfig, TokenizerSettings, SFTSettings, EvalSettings]
    analysis = [AnalysisConfig, BootstrapSettings, SignificanceSettings, LabSettings, OffpolicySettings]
    return [PromptConfig, Instructions, *generate, *train, *base, *analysis]


@pytest.mark.parametrize("cls", _stage_configs(), ids=lambda c: c.__name__)
def test_each_stage_config_is_its_schema_section_field_by_field(cls):
    """Fields are the schema's keys; each default is what validate_config fills in and each help text
    the schema's description: the schema is the one source."""
    import dataclasses

    from maxk.config import _defaults_at, _help, _schema_at, defaults_of

    path = cls.__config_section__
    schema = _schema_at(path)
    props, required = schema["properties"], schema.get("required", [])
    assert [f.name for f in dataclasses.fields(cls)] == list(props)
    defaults = _defaults_at(path)
    made = defaults_of(cls)
    for f in dataclasses.fields(cls):
        assert f.metadata["help"] == _help(path, props[f.name]) != ""
        assert f.metadata["key"] == f"{path}.{f.name}"
        if f.name in required:
            assert f.name not in made  # no default of its own
            continue
        value = made[f.name]
        got = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        assert got == defaults.get(f.name), f.name  # the schema's default, or None: no default
    minimal = {name: defaults.get(name, 1) for name in required}  # required keys: any valid value
    if path == "train":
        minimal["dataset"] = "d"
    if path == "runs.*":
        minimal["method"] = "grpo"
    if path == "base_model":
        minimal.update(build=True)  # path: read only with build false
    if path == "analysis":
        lab = {"groups": 10, "n": [2], "k": [1], "plot_k": 1, "plot_n": 2}
        minimal.update(models={"base": "B"}, datasets={"d": {"label": "D"}}, lab=lab)
    built = cls.from_config(minimal)  # from a rule's slice: checked, defaults filled in
    assert {k: v for k, v in dataclasses.asdict(built).items() if k not in required} == {
        k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in made.items()
    }


def test_a_stage_config_is_built_from_a_slice_and_refuses_a_bad_one():
    import dataclasses

    from maxk.generate.config import GenerateConfig

    gen = GenerateConfig.from_config({"n": 4, "vllm": {"dtype": "auto"}})
    assert gen.n == 4 and gen.vllm.dtype == "auto" and gen.vllm.prompts_per_call == 16 and gen.top_p == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        gen.n = 5
    with pytest.raises(ConfigError, match=r"generate\.n: 0 is less than the minimum of 1"):
        GenerateConfig.from_config({"n": 0})
    with pytest.raises(ConfigError, match=r"generate: Additional properties .*'nn'"):
        GenerateConfig.from_config({"nn": 1})


def test_a_stage_config_must_match_its_schema():
    from maxk.config import config_section

    with pytest.raises(TypeError, match=r"not in the schema \['extra'\], schema keys without a field \["):

        @config_section("generate.transformers")
        class Wrong:
            max_batch_size: int
            extra: int


def test_no_module_writes_a_schema_default_of_its_own():
    """Issue 27: a parameter or field named like a config key never spells that key's schema default as
    a literal (it takes it from the stage's typed config), so the two cannot drift apart."""
    import re

    literals: dict[str, set[str]] = {}

    def walk(node):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value)
            elif type(value) in (int, float, str) and value not in (0, 1, ""):
                literals.setdefault(key, set()).add(repr(value).strip("'\""))

    for section in ("generate", "train", "prompt", "analysis", "base_model", "data"):
        walk(with_defaults(section, {}))
    pattern = re.compile(r"^\s*(\w+): [^=]+ = ([-\w.]+|\"[^\"]*\"|'[^']*'),?\s*(#.*)?$")
    found = []
    for path in sorted((ROOT / "src" / "maxk").rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            m = pattern.match(line)
            if m and m.group(2).strip("'\"") in literals.get(m.group(1), ()):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert found == []
    assert pattern.match("        decimals: int = 3,") and "3" in literals["decimals"]  # the check can fail


@pytest.mark.parametrize("probe", sorted((ROOT / "config/probes").glob("*.yaml")), ids=lambda p: p.name)
def test_probe_overlays_load_over_the_embedded_default(probe):
    """Each probe of config/probes/ is an overlay on the embedded default: the two load as one valid
    config, any runs the probe adds sit beside the experiment's and its documented command (the file's
    header) names them, and the command names the file itself."""
    below = _layered_over(probe)
    cfg = load_config(ROOT / "config/config.yaml", *below, probe)
    header = _header(probe)
    assert f"config/probes/{probe.name}" in header and "snakemake" in header
    assert all(f"config/probes/{p.name}" in header for p in below)  # the command layers them too
    added = set(_raw(f"config/probes/{probe.name}").get("runs") or {})
    beneath = load_config(ROOT / "config/config.yaml", *below)["runs"]
    assert set(beneath) | added == set(cfg["runs"])
    assert all(run in header for run in added)
    roles = (cfg["analysis"].get("claims") or {}).get("roles") or {}
    assert set(roles.values()) <= set(cfg["runs"])  # every role names a run of the layered config


def _header(probe: Path) -> str:
    """A probe's header: its comment block up to the first blank line."""
    return probe.read_text().split("\n\n")[0]


def _layered_over(probe: Path) -> list[Path]:
    """The probes a probe's header says it is laid over ("Overlay after a.yaml and b.yaml"), in order."""
    m = re.search(r"Overlay after (.*?)(?:\(|, targets|$)", " ".join(_header(probe).split()))
    return [ROOT / "config/probes" / name for name in re.findall(r"\w+\.yaml", m.group(1))] if m else []


def test_a_layered_probe_names_the_probes_beneath_it():
    """The parser of "Overlay after ..." finds each probe named, in order (a check that can fail)."""
    below = _layered_over(ROOT / "config/probes/distinct_prompts_tables.yaml")
    assert [p.name for p in below] == ["distinct_prompts.yaml", "distinct_prompts_bon.yaml"]
    assert all(p.is_file() for p in below)
    assert _layered_over(ROOT / "config/probes/comparison_256.yaml") == []


def test_the_comparison_probe_reads_the_designs_runs_as_they_are_in_the_paper_s_roles():
    """config/probes/comparison.yaml: its runs are designs 5's and 6's (n = 4), setting for setting, and the
    paper's claims read them in the roles of the paper's runs (the base and the GRPO runs stay)."""
    from maxk.analysis.claims import paper_claims

    raw = _raw("config/probes/comparison.yaml")
    designs = {
        **_raw("config/probes/bon_learns_k2.yaml")["runs"],
        **_raw("config/probes/bon_max_small_n.yaml")["runs"],
    }
    assert raw["runs"] and all(raw["runs"][run] == designs[run] for run in raw["runs"])
    roles = raw["analysis"]["claims"]["roles"]
    assert set(roles.values()) == set(raw["runs"])
    cfg = load_config(ROOT / "config/config.yaml", ROOT / "config/probes/comparison.yaml")
    read = {r for c in paper_claims(cfg["analysis"]) for r in c.runs()}
    assert set(roles.values()) <= read and not set(roles) & read and {"base", "grpo_continuous"} <= read


def _trains_with(cfg, run):
    """What ``run``'s training job trains with: the train section under the run's settings as its job slice
    has them (the instrument's held-out size included), without its description."""
    from maxk.train.launch import run_config
    from maxk.workflow import slices

    part = slices.train(cfg, run)
    settings = run_config(part["train"], part["run"])
    settings.pop("description", None)
    return settings


def test_the_default_s_inference_aware_runs_are_the_measured_design_setting_for_setting():
    """config/config.yaml gives the paper's five inference-aware runs the settings of
    config/probes/comparison_256.yaml, under which they were measured to learn (docs/design.md, "The
    inference-aware runs"): each run trains with the probe's run's settings, on its prompt file; every
    other run trains on the shared prompt filter's file; the paper scale keeps the paper's settings."""
    from maxk import paths as P

    default = load_config(ROOT / "config/config.yaml")
    probe = load_config(ROOT / "config/config.yaml", ROOT / "config/probes/comparison_256.yaml")
    roles = probe["analysis"]["claims"]["roles"]
    assert set(roles) == set(_raw("config/config.yaml")["run_settings"])

    for paper_run, probe_run in roles.items():
        assert _trains_with(default, paper_run) == _trains_with(probe, probe_run), paper_run
        assert P.train_prompts(default, 7, paper_run) == P.train_prompts(probe, 7, probe_run)
        assert P.train_prompts(default, 7, paper_run) != P.edge_prompts(7, "suite_rl")
    for run in set(default["runs"]) - set(roles):
        assert P.train_prompts(default, 7, run) == P.edge_prompts(7, "suite_rl"), run
    paper = load_config(ROOT / "config/paper.yaml")
    departures = _raw("config/config.yaml")["run_settings"]
    assert all(departures[run] and not set(departures[run]) & set(paper["runs"][run]) for run in roles)


def test_design_8_as_the_experiment_trains_each_paper_run_as_its_design_8_run():
    """config/probes/distinct_prompts_experiment.yaml gives each of the paper's runs, under its own name,
    the settings of the design-8 run that played its role (the three design-8 probes layered, their
    ``analysis.claims.roles``), the same job slice (the instrument's held-out size included) and the same
    prompt file, from the same pool; so the one command reproduces the design's runs, and a change to one
    file that is not made to the other fails here."""
    from maxk import paths as P

    chain = ["distinct_prompts.yaml", "distinct_prompts_bon.yaml", "distinct_prompts_tables.yaml"]
    design = load_config(ROOT / "config/config.yaml", *(ROOT / "config/probes" / name for name in chain))
    one = load_config(ROOT / "config/config.yaml", ROOT / "config/probes/distinct_prompts_experiment.yaml")
    roles = design["analysis"]["claims"]["roles"]
    assert len(roles) == 10 and set(roles) < set(one["runs"])
    assert not (one["analysis"].get("claims") or {}).get("roles")  # the paper's names, read as they are

    for paper_run, design_run in roles.items():
        assert _trains_with(one, paper_run) == _trains_with(design, design_run), paper_run
        assert P.train_prompts(one, 7, paper_run) == P.train_prompts(design, 7, design_run), paper_run
    assert one["data"]["pools"]["suite_rl_wide"] == design["data"]["pools"]["suite_rl_wide"]
    assert one["train"]["dataset"] == design["train"]["dataset"] == "suite_rl_wide"


#: probes that build another base or other data cannot share the default's tree; every other one must
OWN_TREE_KEYS = {"base_model", "data", "datasets"}


@pytest.mark.parametrize("probe", sorted((ROOT / "config/probes").glob("*.yaml")), ids=lambda p: p.name)
def test_a_probe_of_runs_leaves_the_default_s_runs_as_they_are(probe):
    """A probe that only adds runs (and what reads them) runs in the default's results tree: every job of
    the default's runs keeps its config (so nothing of the default reruns), its prompt file and the shared
    prompt filter's job. A probe run behind another filter names it itself (``runs.<run>.prompt_filter``):
    its prompts come from a file of their own, made by rule rl_prompts under that filter's key."""
    from maxk import paths as P
    from maxk.workflow import slices

    raw = _raw(f"config/probes/{probe.name}")
    if OWN_TREE_KEYS & set(raw):
        pytest.skip(f"{probe.name} builds its own base or data: a tree of its own")
    below = _layered_over(probe)
    for p in below:
        if (OWN_TREE_KEYS | {"train"}) & set(_raw(f"config/probes/{p.name}")):
            pytest.skip(f"{probe.name} is laid over {p.name}, which changes the default's runs or data")
    assert "train" not in raw, "a probe that changes train.* changes the default's runs: set it per run"
    default = load_config(ROOT / "config/config.yaml")
    both = load_config(ROOT / "config/config.yaml", *below, probe)
    for run in default["runs"]:
        assert slices.config_json(both, "train", run, 7) == slices.config_json(default, "train", run, 7), run
        assert P.train_prompts(both, 7, run) == P.train_prompts(default, 7, run), run
    assert slices.config_json(both, "rl_prompts", None, 7) == slices.config_json(
        default, "rl_prompts", None, 7
    )
    for run in raw.get("runs") or {}:
        filt = both["runs"][run].get("prompt_filter", both["train"]["prompt_filter"])
        path = P.train_prompts(both, 7, run)
        if not filt:
            assert path == P.data("suite_rl")
        elif filt != both["train"]["prompt_filter"]:
            key = P.filter_key(filt)
            assert path == P.edge_prompts(7, "suite_rl", key=key) and key in P.run_prompt_filters(both)
            part = json.loads(slices.config_json(both, "rl_prompts", key, 7))
            assert part["train"]["prompt_filter"] == filt and part["seed"] == 7


def test_a_run_s_prompt_filter_gets_a_file_and_a_job_of_its_own():
    from maxk import paths as P
    from maxk.train.launch import run_config
    from maxk.workflow import slices

    cfg = load_config(ROOT / "config/config.yaml")
    shared = dict(cfg["train"]["prompt_filter"])
    cfg["runs"]["own"] = {"method": "grpo", "prompt_filter": {**shared, "spread_k": 2}}
    cfg["runs"]["same"] = {"method": "grpo", "prompt_filter": dict(shared)}  # equal to the shared one
    cfg["runs"]["none"] = {"method": "grpo", "prompt_filter": None, "max_prompts": None}
    key = P.filter_key({**shared, "spread_k": 2})
    before = P.run_prompt_filters(load_config(ROOT / "config/config.yaml"))
    assert P.run_prompt_filters(cfg) == {**before, key: {**shared, "spread_k": 2}} and len(key) == 8
    assert P.train_prompts(cfg, 3, "own") == f"results/seed3/data/suite_rl.edge-{key}.jsonl.gz"
    assert (
        P.train_prompts(cfg, 3, "same")
        == P.train_prompts(cfg, 3)
        == "results/seed3/data/suite_rl.edge.jsonl.gz"
    )
    assert P.train_prompts(cfg, 3, "none") == P.data("suite_rl")
    effective = run_config(cfg["train"], cfg["runs"]["none"])
    assert effective["prompt_filter"] is None and effective["max_prompts"] is None  # an explicit null holds
    assert run_config(cfg["train"], {"method": "grpo"})["max_prompts"] == cfg["train"]["max_prompts"]
    with pytest.raises(ValueError, match="no run's prompt_filter has the key 'deadbeef'"):
        slices.config_json(cfg, "rl_prompts", "deadbeef", 3)


def test_a_scale_s_run_settings_tune_its_experiment_s_runs_beneath_an_overlay_s():
    """``run_settings`` merge into the runs the experiment defines, beneath any ``runs`` a later file
    sets, and are not kept; a run the experiment does not define loses its settings with it."""
    from maxk.config import lay_over

    experiment = {"runs": {"a": {"method": "grpo", "learning_rate": 1.0}, "b": {"method": "grpo"}}}
    scale = {
        "run_settings": {"a": {"learning_rate": 2.0, "bon_k": 2}, "gone": {"bon_k": 3}},
        "runs": {"a": {"bon_k": 5}},
    }
    out = lay_over(experiment, scale)
    assert out["runs"] == {"a": {"method": "grpo", "learning_rate": 2.0, "bon_k": 5}, "b": {"method": "grpo"}}
    assert "run_settings" not in out and "gone" not in out["runs"]
    assert experiment["runs"]["a"] == {"method": "grpo", "learning_rate": 1.0} and "run_settings" in scale
