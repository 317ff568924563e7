"""Retried jobs ask for more memory and time, up to the caps; GPU rules do not grow without them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from guard import HANG_GUARD_S

from maxk.workflow.resources import UNBOUNDED, retry_resources

ROOT = Path(__file__).resolve().parents[2]


def _asks(res, attempts=(1, 2, 3)):
    out = retry_resources(res)
    return [(out["mem_mb"](None, a), out["runtime"](None, a)) for a in attempts], out


def test_cpu_rules_grow_with_each_attempt():
    asks, out = _asks({"threads": 4, "mem_mb": 1000, "runtime": 30, "slurm_partition": "cpu"})
    assert asks == [(1000, 30), (2000, 60), (3000, 90)]
    assert "gpu" not in out and "threads" not in out and out["slurm_partition"] == "cpu"
    assert "nodes" not in out


def test_gpu_rules_grow_only_up_to_the_caps_the_user_sets():
    asks, out = _asks({"mem_mb": 900000, "runtime": 1440, "gpu": 8})
    assert asks == [(900000, 1440)] * 3 and out["gpu"] == 8  # no caps: no growth
    assert out["nodes"] == 1  # one accelerate launch reaches only its own node's GPUs
    asks, _ = _asks({"mem_mb": 900000, "runtime": 1440, "gpu": 8, "max_runtime": 2880, "max_mem_mb": 1000000})
    assert asks == [(900000, 1440), (1000000, 2880), (1000000, 2880)]
    asks, _ = _asks({"mem_mb": 10, "runtime": 10, "max_runtime": 15})
    assert asks == [(10, 10), (20, 15), (30, 15)]


def test_paper_training_retry_stays_schedulable():
    """It used to ask for 1.8-2.7 TB and 48-72 h on a retry."""
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["resources"]
    for rule in ("train", "generate_shard"):
        entry = {**paper["default"], **paper[rule]}
        asks, _ = _asks(entry)
        assert max(m for m, _ in asks) <= entry.get("max_mem_mb", entry["mem_mb"]) < UNBOUNDED
        assert max(t for _, t in asks) <= entry.get("max_runtime", entry["runtime"]) <= 2 * entry["runtime"]


#: the rules whose command computes with torch; `score`'s `--threads` is its number of sandbox workers
#: (the cores granted: a verdict does not depend on it), so it is not among them
TORCH_RULES = ("base_model", "rl_prompts", "train", "generate_shard", "entropy_rescore")


def _plan(workdir: Path, cores: int, *args: str) -> list[tuple[str, str]]:
    """``(rule, its block)`` of every job of the embedded default's whole DAG as ``snakemake -n --forceall
    --cores N --configfile config/config.yaml ARGS...`` plans it in ``workdir``."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    command = ["-n", "--forceall", "--cores", str(cores), "--directory", str(workdir)]
    command += ["--configfile", str(ROOT / "config" / "config.yaml"), *args]
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), *command],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    blocks = re.split(r"\n(?=(?:local)?rule \w+:)", res.stdout + res.stderr)
    heads = [(re.match(r"(?:local)?rule (\w+):", block.strip()), block) for block in blocks]
    return [(m.group(1), block) for m, block in heads if m]


def _planned(workdir: Path, cores: int, overlay: Path) -> dict[str, list[str]]:
    """rule -> [its jobs' shell commands, sorted] of the whole DAG of the embedded default, as
    `snakemake -n -p --forceall --cores N` plans it; a `threads: N` line (the cores granted) as well."""
    out: dict[str, list[str]] = {}
    for rule, block in _plan(workdir, cores, str(overlay), "-p"):
        if rule in TORCH_RULES:
            granted = re.search(r"^\s*threads: (\d+)$", block, re.M)
            command = re.search(r"^Shell command: (.*)$", block, re.M)
            assert command, block
            out.setdefault(rule, []).append(f"{granted.group(1) if granted else 1}: {command.group(1)}")
    return {rule: sorted(jobs) for rule, jobs in out.items()}


def test_torch_threads_of_a_command_are_the_configured_ones_whatever_the_cores(tmp_path: Path) -> None:
    """`--cores 1` used to reach `maxk base` as `--threads 1` (and every job's OMP_NUM_THREADS, which
    torch follows): from the same data, config and seed it built another base model (pass@1 0.150 at
    one thread, 0.217 at two). Every torch rule's command now carries its configured
    `resources.<rule>.threads`, whatever Snakemake grants it; fewer cores only make it slower."""
    overlay = tmp_path / "threads.yaml"
    threads = {"resources": {r: {"threads": 3} for r in TORCH_RULES[:-1]}}
    overlay.write_text(yaml.safe_dump({**threads, "base_model": {"build": True}}))  # the base job planned too
    one, two = (_planned(tmp_path, cores, overlay) for cores in (1, 2))
    assert set(one) == set(TORCH_RULES), set(one)  # every torch rule is planned (a rule renamed: edit here)
    for rule in TORCH_RULES:
        granted_one = {job.split(": ", 1)[0] for job in one[rule]}
        granted_two = {job.split(": ", 1)[0] for job in two[rule]}
        assert (granted_one, granted_two) == ({"1"}, {"2"}), rule  # the cores granted differ...
        commands = [job.split(": ", 1)[1] for job in one[rule]]
        assert commands == [job.split(": ", 1)[1] for job in two[rule]], rule  # ...the commands do not
        for command in commands:
            assert "--threads 3 " in command or command.startswith(
                "OMP_NUM_THREADS=3 MKL_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 "
            ), (rule, command[:300])


def test_the_longest_training_runs_are_planned_first(tmp_path: Path) -> None:
    """Each training job's priority is the passes over its prompts of the chain of jobs it starts
    (maxk.workflow.resources.train_priority: a four-epoch run that starts from a one-epoch run's end,
    maxk.train.prefix, trains three epochs after it), and its prompts' job carries the highest of its
    readers' (prompts_priority): PPO 3 above PPO 1, a chain's head above its tail, so that a long run is
    not left alone at the end of a run with a core idle beside it. Checked on Snakemake's own plan."""
    from maxk import paths as P
    from maxk.config import load_config
    from maxk.workflow.resources import prompts_priority, train_priority

    config = load_config(ROOT / "config" / "config.yaml")
    want = {run: train_priority(config, run) for run in config["runs"]}
    assert want["grpo_continuous"] > want["grpo_e4_ppo3"] > want["grpo_e1_ppo1"] > want["grpo_e4_ppo1"] >= 1
    assert want["grpo_continuous"] == want["offpolicy_bon"] == 16  # 4 epochs x (1 + 3), chained or not
    assert want["bon_mean"] == want["grpo_e1_ppo1"] == 8  # the same epochs and PPO iterations
    half = {**config, "runs": {"half": {"method": "grpo", "num_train_epochs": 0.5, "num_iterations": 2}}}
    assert train_priority(half, "half") == 2  # 0.5 x 3 = 1.5, rounded up: fractional epochs rank too
    probe = load_config(ROOT / "config" / "config.yaml", ROOT / "config" / "probes" / "comparison.yaml")
    (key,) = P.run_prompt_filters(probe)  # the design runs' own filter: its readers are those five runs
    own = [run for run in probe["runs"] if run.startswith(("k2_", "n4_"))]
    longest = max(train_priority(probe, run) for run in own)
    assert longest == 16 and prompts_priority(probe, f"-{key}", threads=2) == 2 * longest + 1
    assert prompts_priority(probe, "-00000000") == 0  # a file no run reads
    planned, prompts, waits = {}, [], {}
    for rule, block in _plan(tmp_path, 2, "--config", "replicates=[1234]"):
        priority = re.search(r"^\s*priority: (\d+)$", block, re.M)
        if rule == "train":
            run = re.search(r"wildcards: seed=\d+, run=(\w+)", block)
            assert run and priority, block
            planned[run.group(1)] = int(priority.group(1))
            inputs = re.search(r"^\s*input: (.*)$", block, re.M)
            waits[run.group(1)] = sorted(re.findall(r"metrics/train/(\w+)\.csv", inputs.group(1)))
        elif rule == "rl_prompts":
            assert priority, block
            prompts.append(int(priority.group(1)))
    assert planned == want
    # each four-epoch run of table 4 waits for the one-epoch run whose end it starts from, no other run waits
    assert {run: w for run, w in waits.items() if w} == {"grpo_e4_ppo1": ["grpo_e1_ppo1"],
                                                         "grpo_e4_ppo3": ["grpo_continuous"]}  # fmt: skip
    # the training jobs wait on their seed's prompts, which Snakemake would otherwise start after every
    # ready generation and scoring job, and after any set of training jobs that fits on the prompts' threads
    threads = (config["resources"].get("rl_prompts") or {}).get("threads", 1)
    (edge,) = P.run_prompt_filters(config)  # the inference-aware runs' filter (config.yaml's run_settings)
    shared_file = P.edge_prompts(1234, "suite_rl")
    shared = [run for run in config["runs"] if P.train_prompts(config, 1234, run) == shared_file]
    readers = {"": shared, f"-{edge}": [run for run in config["runs"] if run not in shared]}
    assert all(readers.values())
    assert sorted(prompts) == sorted(prompts_priority(config, suffix, threads) for suffix in readers)
    highest = [max(want[run] for run in runs) for runs in readers.values()]
    assert sorted(prompts) == sorted(threads * top + 1 for top in highest)
