"""Command construction, config mapping, reward function, metrics CSV and the paper-scale DAG (offline)."""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from guard import HANG_GUARD_S

from maxk.train.launch import (
    check_run,
    grpo_kwargs,
    input_fingerprint,
    launch_prefix,
    launch_signature,
    run_config,
    run_hash,
)
from maxk.train.run import SandboxReward, write_metrics_csv
from maxk.workflow.slices import train as train_slice

ROOT = Path(__file__).parents[2]


def _config(name):
    """The config as the Snakefile sees it: validated, every default filled in."""
    from maxk.config import load_config

    return load_config(ROOT / "config" / name)


def test_launch_prefix_cpu_and_gpu():
    launch = {"accelerate_config": "workflow/deepspeed/zero2.yaml", "main_process_port": None}
    assert launch_prefix(launch, 0) == "maxk"
    cmd = shlex.split(launch_prefix(launch, 8))
    assert cmd[:2] == ["accelerate", "launch"]
    assert cmd[cmd.index("--config_file") + 1] == "workflow/deepspeed/zero2.yaml"
    assert cmd[cmd.index("--num_processes") + 1] == "8"
    assert cmd[cmd.index("--num_cpu_threads_per_process") + 1] == "1"
    # the job's threads are shared among its processes (accelerate would give each all of them)
    cmd = shlex.split(launch_prefix(launch, 8, threads=64))
    assert cmd[cmd.index("--num_cpu_threads_per_process") + 1] == "8"
    assert cmd[-2:] == ["-m", "maxk"]
    assert (ROOT / launch["accelerate_config"]).is_file()
    ds = yaml.safe_load((ROOT / launch["accelerate_config"]).read_text())
    assert ds["distributed_type"] == "DEEPSPEED" and ds["deepspeed_config"]["zero_stage"] == 2
    assert "--main_process_port" in launch_prefix({**launch, "main_process_port": 29511}, 2)
    # a job run in another working directory (snakemake --directory) still finds the config
    cmd = shlex.split(launch_prefix(launch, 8, basedir=str(ROOT)))
    assert cmd[cmd.index("--config_file") + 1] == str(ROOT / "workflow/deepspeed/zero2.yaml")


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_every_run_maps_to_a_valid_trainer_config(name, tmp_path):
    from maxk.train.grpo import MaxKGRPOConfig
    from maxk.workflow.slices import run_entry

    cfg = _config(name)
    hashes = set()
    for run in cfg["runs"]:
        entry = run_entry(cfg, run)  # the instrument run with its scale's held-out sizing
        eff = run_config(cfg["train"], entry)
        hashes.add(run_hash(eff))
        kw = grpo_kwargs(eff, output_dir=str(tmp_path / run), seed=1, use_cpu=True)
        args = MaxKGRPOConfig(**kw)
        assert args.advantage_method == entry["method"]
        assert args.loss_type == cfg["train"]["loss_type"] and args.use_bias_correction_kl is False
        assert args.num_iterations == entry.get("num_iterations", cfg["train"]["num_iterations"])
        assert train_slice(cfg, run)["run"] == entry
    assert len(hashes) == len(cfg["runs"])  # distinct checkpoint directories


def test_runs_may_override_k_its_schedule_and_the_own_ratio(tmp_path):
    from maxk.train.grpo import MaxKGRPOConfig

    train = _config("config.yaml")["train"]
    assert (
        train["bon_k_schedule"] is None and train["own_ratio"] is False
    )  # defaults: constant k, no own ratio
    run = {"method": "offpolicy_bon_exact", "bon_k": 6, "own_ratio": True,
           "bon_k_schedule": {"kind": "step", "final": 2, "at": 0.25}}  # fmt: skip
    eff = run_config(train, run)
    args = MaxKGRPOConfig(**grpo_kwargs(eff, output_dir=str(tmp_path), seed=1, use_cpu=True))
    assert (args.bon_k, args.own_ratio, args.bon_k_schedule, args.bon_k_final, args.bon_k_switch) == (
        6, True, "step", 2, 0.25,
    )  # fmt: skip
    linear = run_config(train, {"method": "bon_mean", "bon_k_schedule": {"kind": "linear", "final": 1}})
    args = MaxKGRPOConfig(**grpo_kwargs(linear, output_dir=str(tmp_path), seed=1, use_cpu=True))
    assert (args.bon_k_schedule, args.bon_k_final, args.bon_k_switch) == ("linear", 1, 0.5)
    assert run_hash(eff) != run_hash(run_config(train, {"method": "offpolicy_bon_exact"}))


def test_a_run_may_set_its_own_learning_rate(tmp_path):
    """An off-policy run must stay near the policy it sampled from: its step size is its own."""
    from maxk.train.grpo import MaxKGRPOConfig

    train = _config("config.yaml")["train"]
    eff = run_config(train, {"method": "offpolicy_bon", "learning_rate": 2.5e-5})
    args = MaxKGRPOConfig(**grpo_kwargs(eff, output_dir=str(tmp_path), seed=1, use_cpu=True))
    assert args.learning_rate == 2.5e-5 != train["learning_rate"]
    assert run_config(train, {"method": "offpolicy_bon"})["learning_rate"] == train["learning_rate"]
    assert run_hash(eff) != run_hash(run_config(train, {"method": "offpolicy_bon"}))


def test_a_runs_settings_are_checked_once_and_handed_out_as_fresh_copies():
    """``run_config`` remembers a run entry's checked, defaulted form (the Snakefile asks for every run's
    settings while it builds each training job): the same settings as a check afresh, key order included;
    what a caller changes in one result, nested values of the run's own included, never reaches the next;
    a bad entry still fails every time."""
    import copy

    from maxk.config import ConfigError, with_defaults
    from maxk.train.launch import _run_entry

    train = _config("config.yaml")["train"]
    for spec in _config("config.yaml")["runs"].values():
        fresh = with_defaults("runs", {"run": copy.deepcopy(spec)})["run"]  # as run_config checked it before
        for _ in range(2):  # the first call may check it, the second finds it remembered
            assert json.dumps(_run_entry(spec)) == json.dumps(fresh)
        assert json.dumps(run_config(train, spec)) == json.dumps(run_config(train, spec))
    spec = {"method": "bon_mean", "bon_k_schedule": {"kind": "linear", "final": 1}, "num_generations": 8}
    first = run_config(train, spec)
    first["bon_k_schedule"]["final"] = 99
    first["num_generations"] = -1
    again = run_config(train, spec)
    assert again["bon_k_schedule"]["final"] == 1 and again["num_generations"] == 8
    assert spec["bon_k_schedule"] == {"kind": "linear", "final": 1}  # the caller's entry untouched
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"runs\.run\.num_generations"):
            run_config(train, {"method": "grpo", "num_generations": "eight"})


def test_a_run_may_size_its_own_heldout_curve():
    """A run's heldout override (problems, samples, every) is merged into train.heldout key by key (the
    pool stays train's); the config check refuses it where the held-out curve is off or a key is unknown."""
    from maxk.config import ConfigError, validate_config

    train = _config("config.yaml")["train"]
    big = run_config(train, {"method": "grpo", "heldout": {"problems": 150, "samples": 64}})
    assert big["heldout"] == {**train["heldout"], "problems": 150, "samples": 64}
    assert run_config(train, {"method": "grpo"})["heldout"] == train["heldout"]
    assert run_hash(big) != run_hash(run_config(train, {"method": "grpo"}))
    with pytest.raises(ValueError, match=r"needs train\.heldout"):
        run_config({**train, "heldout": None}, {"method": "grpo", "heldout": {"samples": 4}})
    cfg = _config("config.yaml")
    cfg["runs"]["grpo_e4_ppo1"]["heldout"] = {"dataset": "suite_test"}  # the pool is not a run's to pick
    with pytest.raises(ConfigError, match=r"runs\.grpo_e4_ppo1\.heldout"):
        validate_config(cfg)


def test_the_instrument_run_is_measured_as_its_scale_says():
    """analysis.claims.instrument_heldout reaches the instrument run's job (and no other run's) as its
    heldout override: the embedded scale measures grpo_e4_ppo1 on all 150 held-out problems x 64."""
    from maxk.workflow import slices

    cfg = _config("config.yaml")
    instrument = slices.train(cfg, "grpo_e4_ppo1")["run"]
    assert instrument["heldout"] == {"problems": 150, "samples": 64, "every": 1000}
    assert run_config(cfg["train"], instrument)["heldout"]["dataset"] == "suite_heldout"
    assert "heldout" not in slices.train(cfg, "grpo_continuous")["run"]
    cfg["analysis"]["claims"]["instrument_run"] = "grpo_continuous"
    assert slices.train(cfg, "grpo_continuous")["run"]["heldout"]["samples"] == 64
    assert "heldout" not in slices.train(cfg, "grpo_e4_ppo1")["run"]
    assert "heldout" not in slices.train(_config("paper.yaml"), "grpo_continuous")["run"]


def test_runs_schema_lists_exactly_the_registered_methods():
    from maxk.objectives import ESTIMATORS

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "runs.schema.yaml").read_text())
    assert set(schema["additionalProperties"]["properties"]["method"]["enum"]) == set(ESTIMATORS)


def test_checkpoints_fall_between_generation_batches():
    """save_steps must be a multiple of the PPO iterations: a resume mid-cycle replays a used batch."""
    check_run("r", {"save_steps": 21, "num_iterations": 3})
    check_run("r", {"save_steps": 5, "num_iterations": 1})
    with pytest.raises(ValueError, match=r"run 'r'.*save_steps = 20.*num_iterations = 3.*use e\.g\. 21"):
        check_run("r", {"save_steps": 20, "num_iterations": 3})
    cfg = _config("paper.yaml")
    cfg["train"]["save_steps"] = 20
    with pytest.raises(ValueError, match="grpo_continuous"):  # planning fails, naming the run
        train_slice(cfg, "grpo_continuous")
    assert train_slice(cfg, "grpo_e1_ppo1")  # one PPO iteration: any interval


def test_a_run_may_set_its_own_group_size_and_planning_checks_it(tmp_path):
    """BoN-max's objective is max@n: a run may sample fewer completions per prompt (with a micro-batch
    that holds whole groups). A micro-batch of part groups, or a k the estimator cannot take at that
    n, fails at planning, naming the run."""
    from maxk.train.grpo import MaxKGRPOConfig

    cfg = _config("config.yaml")
    train = cfg["train"]
    run = {"method": "bon_max_mean", "num_generations": 2, "per_device_train_batch_size": 16}
    eff = run_config(train, run)
    args = MaxKGRPOConfig(**grpo_kwargs(eff, output_dir=str(tmp_path), seed=1, use_cpu=True))
    assert (args.num_generations, args.per_device_train_batch_size) == (2, 16) != (
        train["num_generations"], train["per_device_train_batch_size"],
    )  # fmt: skip
    assert run_hash(eff) != run_hash(run_config(train, {"method": "bon_max_mean"}))
    check_run("small", eff)
    cfg["runs"]["bon_max_mean"].update(num_generations=2, per_device_train_batch_size=16)
    assert train_slice(cfg, "bon_max_mean")
    cfg["runs"]["bon_max_mean"]["per_device_train_batch_size"] = 15
    with pytest.raises(ValueError, match=r"run 'bon_max_mean': per_device_train_batch_size = 15 .*num_gen"):
        train_slice(cfg, "bon_max_mean")
    cfg["runs"]["bon_mean"].update(num_generations=2, per_device_train_batch_size=16, bon_k=4)  # k 4 > n 2
    with pytest.raises(ValueError, match=r"run 'bon_mean': bon_mean: bon_k=4 must be in \[1, num_gen"):
        train_slice(cfg, "bon_mean")


_HEAVY = "('torch', 'transformers', 'trl', 'scipy', 'deepspeed')"


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_planning_imports_no_torch(name):
    """Every snakemake call plans the DAG: each run's slice, with check_run's estimator check, reads
    the registry's needs from maxk.estimators, so planning does not pay for importing torch (about
    2.5 s a call) or the trainer's stack."""
    code = (
        "import sys; from maxk.config import load_config; from maxk.workflow import slices\n"
        f"cfg = load_config({str(ROOT / 'config' / name)!r})\n"
        "assert cfg['runs'] and all(slices.train(cfg, run) for run in cfg['runs'])\n"
        f"print(sorted(m for m in {_HEAVY} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_snakemake_dry_run_imports_no_torch(tmp_path):
    """The same for the whole plan, as `snakemake -n` makes it (the Snakefile, its rules' inputs and
    params, the final targets), on the default config with two seeds."""
    argv = ["snakemake", "-n", "--quiet", "all", "--cores", "1", "--snakefile", str(ROOT / "Snakefile"),
            "--directory", str(tmp_path), "--configfile", str(ROOT / "config" / "config.yaml"),
            "--config", "replicates=[1234,2]"]  # fmt: skip
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print('HEAVY', sorted(m for m in {_HEAVY} if m in sys.modules)))\n"
        f"from snakemake.cli import main; sys.argv = {argv!r}; main()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "HEAVY []" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_the_estimators_are_declared_without_torch_as_the_trainer_registers_them():
    """Planning knows a method only if maxk.estimators declares it: the torch-free declarations, the
    trainer's registry (in the same order) and the config schema's method enum name the same estimators
    (an estimator registered with constraints in maxk.objectives only would pass the trainer and fail
    planning)."""
    from dataclasses import fields

    from maxk.estimators import EstimatorNeeds
    from maxk.objectives import ESTIMATORS

    code = "import sys; from maxk.estimators import NEEDS; assert 'torch' not in sys.modules; print([*NEEDS])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "runs.schema.yaml").read_text())
    enum = schema["additionalProperties"]["properties"]["method"]["enum"]
    assert out.stdout.strip() == repr(list(ESTIMATORS)) and set(ESTIMATORS) == set(enum)
    for spec in ESTIMATORS.values():
        assert callable(spec.fn) and isinstance(spec, EstimatorNeeds)
        assert {f.name for f in fields(EstimatorNeeds)} < {f.name for f in fields(spec)}


def test_a_declared_estimator_is_registered_without_constraints(monkeypatch):
    """Its constraints live in one place: registering a declared name with constraints is an error
    that says where they are."""
    from maxk.objectives import ESTIMATORS, register

    others = {name: spec for name, spec in ESTIMATORS.items() if name != "bon_mean"}
    monkeypatch.setattr("maxk.objectives.ESTIMATORS", others)
    with pytest.raises(ValueError, match=r"'bon_mean' is declared in maxk.estimators; register it without"):
        register("bon_mean", min_k=2)(lambda rewards, **_: rewards)


def test_paper_values():
    t = _config("paper.yaml")["train"]
    assert (t["num_generations"], t["temperature"], t["top_p"], t["max_completion_length"]) == (
        8,
        1.0,
        1.0,
        256,
    )
    assert (t["learning_rate"], t["beta"], t["epsilon"], t["num_iterations"], t["num_train_epochs"]) == (
        5e-6,
        0.01,
        0.2,
        3,
        1,
    )
    kw = grpo_kwargs(run_config(t, {"method": "offpolicy_bon"}), output_dir="x", seed=1, use_cpu=False)
    assert kw["use_vllm"] and kw["vllm_mode"] == "colocate" and kw["optim"] == "adamw_torch"
    assert kw["weight_decay"] == 0.0  # Adam


def test_sandbox_reward_kinds():
    class FakeScorer:  # trusted: no program runs here
        def __init__(self):
            self.calls = []

        def score(self, pairs):
            self.calls.append(pairs)
            return [
                SimpleNamespace(passed=len(prog) % 4, total=3, reward=(len(prog) % 4) / 3)
                for _, prog in pairs
            ]

    problems = {"p": {"id": "p", "tests": {"format": "stdio", "cases": []}}}
    scorer = FakeScorer()
    extract = lambda text, problem: text.upper()  # noqa: E731
    cont = SandboxReward(problems, scorer, "continuous", extract)
    binary = SandboxReward(problems, scorer, "binary", extract)
    comps = ["ab", "abc", [{"role": "assistant", "content": "a"}]]
    assert cont(comps, ["p"] * 3) == pytest.approx([2 / 3, 1.0, 1 / 3])
    assert binary(comps, ["p"] * 3) == [0.0, 1.0, 0.0]
    assert len(scorer.calls) == 2 and len(scorer.calls[0]) == 3  # one batched call per reward step
    assert scorer.calls[0][0][1] == "AB"
    with pytest.raises(ValueError):
        SandboxReward(problems, scorer, "fuzzy", extract)


def test_metrics_csv(tmp_path):
    hist = [
        {"loss": 0.1, "step": 1, "step_time": 2.0, "time/generation_s": 1.2, "time/reward_s": 0.3, "kl": 0.0},
        {"loss": 0.2, "step": 2, "step_time": 0.5, "delta/abs_mean_iter1": 0.01},
        {"train_runtime": 3.0, "step": 2},
    ]
    path = tmp_path / "m.csv"
    assert write_metrics_csv(path, hist) == 2
    rows = list(csv.DictReader(path.open()))
    assert float(rows[0]["time/update_s"]) == pytest.approx(0.5)
    assert float(rows[1]["time/update_s"]) == pytest.approx(0.5)
    assert rows[1]["delta/abs_mean_iter1"] == "0.01" and rows[1]["kl"] == ""


def test_cli_registration_is_cheap():
    code = (
        "import sys, maxk.cli; maxk.cli.build_parser(); print('torch' in sys.modules, 'trl' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_cli_rejects_bad_config(tmp_path, capsys):
    from maxk.cli import main

    assert (
        main(
            [
                "train",
                "--run",
                "r",
                "--config-json",
                "{oops",
                "--model",
                "m",
                "--data",
                "d",
                "--out",
                "o",
                "--metrics",
                "x.csv",
            ]
        )
        == 1
    )
    assert "not valid JSON" in capsys.readouterr().err
    (tmp_path / "d").write_bytes(b"")
    assert (
        main(
            [
                "train",
                "--run",
                "r",
                "--config-json",
                '{"seed": 1, "train": {}, "run": {}}',
                "--model",
                str(tmp_path / "missing"),
                "--data",
                str(tmp_path / "d"),
                "--out",
                "o",
                "--metrics",
                "x.csv",
            ]
        )
        == 1
    )
    assert "missing" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "config", "message"),
    [
        (["train", "--run", "r", "--out", "o", "--metrics", "m.csv"], {"seed": 1, "train": {}}, "'run'"),
        (["base", "--out", "o"], {"base_model": {}}, "'seed'"),
    ],
)
def test_cli_names_a_missing_config_key(tmp_path, capsys, argv, config, message):
    from maxk.cli import main

    data = tmp_path / "d.jsonl.gz"
    data.write_bytes(b"")
    paths = (
        ["--model", str(tmp_path), "--data", str(data)]
        if argv[0] == "train"
        else ["--train-data", str(data), "--test-data", str(data)]
    )
    rc = main([*argv, *paths, "--config-json", json.dumps(config)])
    err = capsys.readouterr().err
    assert rc != 0 and "--config-json lacks the key" in err and message in err


def test_cli_names_a_missing_input_file(tmp_path, capsys):
    from maxk.cli import main

    missing = tmp_path / "nope.jsonl.gz"
    cfg = {"seed": 1, "base_model": {}}
    inputs = ["--train-data", str(missing), "--test-data", str(missing)]
    rc = main(["base", "--out", str(tmp_path / "o"), *inputs, "--config-json", json.dumps(cfg)])
    err = capsys.readouterr().err
    assert rc != 0 and f"{missing}: no such file or directory" in err
    assert not (tmp_path / "o").exists()


def test_paper_dag_lists_every_gpu_training_run():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--configfile", "config/paper.yaml", "--cores", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    runs = sorted(_config("paper.yaml")["runs"])
    assert len(runs) == 13  # the paper's 10 and 3 beyond it
    for run in runs:
        assert f"results/seed1234/models/{run}" in text and f"--run {run} " in text
    launch = f"accelerate launch --config_file {ROOT / 'workflow/deepspeed/zero2.yaml'} --num_processes 8"
    assert text.count(launch) >= len(runs)
    assert "gpu=8" in text
    # each GPU job is told what it asked for, so it stops at once without CUDA (maxk.gpu)
    assert text.count("--gpus 8 ") >= len(runs)
    # live curves (train.report_to)
    assert text.count("--trackers results/seed1234/logs/trackers ") >= len(runs)
    assert "--gpus 1 " in next(line for line in text.splitlines() if "maxk generate --model-path" in line)


def test_input_fingerprint_follows_content_and_rebuilds(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("a\n")
    first = input_fingerprint(str(data))
    data.write_text("b\n")
    assert input_fingerprint(str(data)) != first
    model = tmp_path / "model"
    model.mkdir()
    (model / "w.bin").write_bytes(b"12")
    before = input_fingerprint(str(model))
    assert input_fingerprint(str(model)) == before
    os.utime(model / "w.bin", ns=(1, 1))  # rebuilt: same name and size, another time
    assert input_fingerprint(str(model)) != before
    assert input_fingerprint("Qwen/Qwen2.5-Coder-7B-Instruct") == "Qwen/Qwen2.5-Coder-7B-Instruct"


def test_launch_signature_tells_a_deepspeed_or_multi_process_job_from_a_plain_one():
    """What accelerate launch sets (accelerate.utils.launch): a checkpoint of one layout is not resumed in
    another (a ZeRO-2 job stopped on a plain job's checkpoint on a GPU)."""
    plain = launch_signature({})
    assert plain == {"processes": 1, "zero_stage": None}
    zero2 = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2", "WORLD_SIZE": "1"}
    assert launch_signature(zero2) == {"processes": 1, "zero_stage": 2}
    assert launch_signature({**zero2, "WORLD_SIZE": "8"}) == {"processes": 8, "zero_stage": 2}
    assert launch_signature({"ACCELERATE_USE_DEEPSPEED": "false", "WORLD_SIZE": "2"})["zero_stage"] is None
    signatures = [plain, launch_signature(zero2), launch_signature({**zero2, "WORLD_SIZE": "8"})]
    assert len({run_hash({"launch": s}) for s in signatures}) == 3


def test_each_tracker_writes_under_the_trackers_directory_offline(monkeypatch):
    from maxk.train.launch import tracker_env

    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert tracker_env("tensorboard", "logs/trackers", "grpo") == {
        "TENSORBOARD_LOGGING_DIR": "logs/trackers/tensorboard/grpo"
    }
    assert tracker_env("trackio", "logs/trackers", "grpo") == {"TRACKIO_DIR": "logs/trackers/trackio"}
    wandb = tracker_env("wandb", "logs/trackers", "grpo")
    assert wandb["WANDB_DIR"] == "logs/trackers/wandb" and wandb["WANDB_MODE"] == "offline"
    monkeypatch.setenv("WANDB_MODE", "online")  # a user who asks for online keeps it
    assert tracker_env("wandb", "d", "r")["WANDB_MODE"] == "online"
    assert tracker_env("none", "d", "r") == {}
    kw = grpo_kwargs(run_config(_config("config.yaml")["train"], {"method": "grpo"}), output_dir="x", seed=1,
                     use_cpu=True, run_name="grpo")  # fmt: skip
    assert (kw["report_to"], kw["run_name"], kw["trackio_static_space_id"]) == ("tensorboard", "grpo", False)
