#!/usr/bin/env python3
"""Rehearse a paper-scale config on this machine, end to end, before a cluster pays for its faults.

    python tests/rehearsal/rehearse.py                       # config/paper.yaml
    python tests/rehearsal/rehearse.py --configfile my.yaml  # a changed config, before submitting it

It runs the real command line, from the repository root, on a scratch directory, in two phases:

1. every job of the DAG, in one Snakemake process on this machine (the profile's settings, its executor
   replaced: ``--profile slurm --executor local``, as many jobs at once as this machine has cores: the
   profile's ``jobs: 64`` would otherwise run 64 on a laptop): each job's command, inputs and outputs
   at the paper config;
2. one job of every rule the cluster runs (all but ``localrules``) again, through Slurm, in one Snakemake
   run (``--profile slurm --force <one output of each rule> --rerun-triggers params``): each rule's
   submission (partition, GPUs, account: ``tests/fake_slurm/check_submission.py``), its job step and the
   outputs it leaves. Only the forced jobs run: without mtime among the rerun triggers, a forced job's
   new outputs do not make the finished jobs between it and another pick run again.

Every job through Slurm would cost two Snakemake processes per job (the job step and its inner run:
about 7 s of CPU each time, for ~130 jobs) and teach nothing the second phase does not: the rules'
submissions differ by rule, not by wildcard.

It changes only what this machine cannot have, each in one place:
- ``overlay.yaml``: sizes (samples, problems, shards, prompts, resamples), a comment per line;
- the model: a tiny random Qwen2 with Qwen2.5's chat template, saved in a scratch Hugging Face cache
  under the config's hub id (``base_model.path``, and ``data.tokenizer``) at its pinned revision, so the
  same hub-id resolution, offline flags and chat templating run as on the cluster;
- the datasets: every pool's file in the exact format of its source (``fixtures.py``), laid out in that
  cache where the loaders look for it (hub id, file, revision); a CodeContests-style pool gets as many
  rows as its split asks for, so the paper's split sizes and expected counts stay as they are;
- Slurm: ``tests/fake_slurm`` (sbatch records the submission, checks its partition and GPUs, and runs
  the job in the background; sacct reports it);
- vLLM: ``stand_ins/vllm``, strict where vLLM is (model length, logprobs, seeds), on the path of the
  generation jobs only (through Slurm: per rule, by the stand-in sbatch; locally: ``stand_ins/local_bin/maxk``
  for ``maxk generate``);
- ``accelerate launch`` (DeepSpeed ZeRO-2 on the GPUs): ``stand_ins/bin/accelerate`` checks the command
  and runs the same ``maxk train`` as one CPU process; TRL's vLLM rollouts, bf16 and gradient
  checkpointing are off on a CPU (``maxk.train.launch.grpo_kwargs``);
- the GPUs themselves: ``MAXK_CPU_STANDS_IN_FOR_GPU=1`` lets a job that asked for GPUs run on this CPU
  (``maxk.gpu.require_cuda``; on a cluster such a job stops at once).
Nothing reaches the network (``HF_HUB_OFFLINE=1``). Exit status 0 when every output the config declares
was produced.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "src")]

from fixtures import cure_rows  # noqa: E402

from maxk import paths as P  # noqa: E402

#: a commit for a revision the config leaves at a branch (``main``) or null
FAKE_COMMIT = "0" * 40
#: fixture rows of a pool without integer split sizes
DEFAULT_ROWS = 6
#: Qwen2.5-Instruct's chat template (the part without tools, which maxk never passes).
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)  # fmt: skip


def load_config(paths: list[Path]) -> dict:
    """The config as the Snakefile sees it: later files update earlier ones recursively, laid over the
    experiment they name, validated (``maxk.config.load_config``)."""
    from maxk.config import load_config as load

    return load(*paths)


def commit_of(revision: str | None) -> tuple[str, str | None]:
    """(commit to store under, branch ref to point at it): a sha is its own commit."""
    if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
        return revision, "main"
    return FAKE_COMMIT, revision or "main"


def stage_model(cache: Path, repo_id: str, revision: str | None, texts: list[str]) -> None:
    """A tiny random Qwen2 with Qwen2.5's chat template, stored as ``repo_id`` at ``revision``."""
    from maxk.hf_hub import fill_cache
    from maxk.tiny import init_model, save, train_tokenizer

    tok = train_tokenizer(texts, vocab_size=600)
    tok.chat_template = QWEN25_TEMPLATE
    # Qwen2.5-Coder-7B-Instruct's context: 32768 positions (RoPE, so the size costs nothing)
    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
             "num_key_value_heads": 1, "max_position_embeddings": 32768}  # fmt: skip
    model = init_model(tok, seed=0, **sizes)
    with tempfile.TemporaryDirectory() as tmp:
        save(model, tok, tmp)
        files = {p.name: p for p in Path(tmp).iterdir() if p.is_file()}
        commit, ref = commit_of(revision)
        fill_cache(cache, repo_id, files, commit=commit, ref=ref)


def pool_rows(pool: dict) -> int:
    sizes = ((pool.get("split") or {}).get("sizes") or {}).values()
    if sizes and all(isinstance(v, int) for v in sizes):
        return sum(sizes)
    return DEFAULT_ROWS


def stage_data(cache: Path, config: dict) -> list[str]:
    """Every pool's file where its loader finds it; returns the texts (for the tokenizer)."""
    from maxk.hf_hub import fill_cache

    texts = []
    for name, pool in config["data"]["pools"].items():
        opts = pool.get("options") or {}
        if pool["source"] != "cure" or not (opts.get("hub_id") and opts.get("filename")):
            raise SystemExit(
                f"rehearsal: pool {name!r}: only `source: cure` pools read by hub_id + filename are "
                f"staged (got source {pool['source']!r}); add a fixture for it in {HERE / 'fixtures.py'}"
            )
        # CURE's renamed files (test/<Name>-ReasonFlux.json) hold the same rows, byte for byte
        dataset = Path(opts["filename"]).stem.removesuffix("-ReasonFlux")
        rows = cure_rows(dataset, pool_rows(pool))
        commit, ref = commit_of(opts.get("revision"))
        fill_cache(cache, opts["hub_id"], {opts["filename"]: json.dumps(rows)}, commit=commit, ref=ref,
                   repo_type="dataset")  # fmt: skip
        texts += [r["question"] for r in rows] + [s for r in rows for s in r["solutions"]]
    return texts


def stage(config: dict, work: Path) -> dict[str, str]:
    """Fill the scratch cache; return the environment of the run."""
    hf_home = work / "hf"
    cache = hf_home / "hub"
    texts = stage_data(cache, config)
    base = config["base_model"]
    models = {}
    if not base.get("build"):
        models[base["path"]] = base.get("revision")
    tokenizer = (config.get("data") or {}).get("tokenizer")
    if tokenizer and tokenizer not in models:
        models[tokenizer] = config["data"].get("tokenizer_revision")
    for repo_id, revision in models.items():
        stage_model(cache, repo_id, revision, texts)
    bindir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PATH": os.pathsep.join(
            [
                str(ROOT / "tests" / "fake_slurm" / "bin"),
                str(HERE / "stand_ins" / "bin"),
                bindir,
                os.environ.get("PATH", ""),
            ]
        ),
        "PYTHONPATH": str(ROOT / "src"),
        # vLLM for generation jobs only: TRL would take the stand-in for a real vLLM in training jobs
        "FAKE_SLURM_RULE_PYTHONPATH": f"generate_shard={HERE / 'stand_ins'}",
        "FAKE_SLURM_DIR": str(work / "slurm"),
        "FAKE_SLURM_CHECK": str(ROOT / "tests" / "fake_slurm" / "check_submission.py"),
        "FAKE_SLURM_ASYNC": "1",
        "MAXK_CPU_STANDS_IN_FOR_GPU": "1",  # the jobs that ask for GPUs run on this CPU on purpose
        # jobs share this machine's few cores: one thread each (a cluster job owns its cores)
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


#: Phase one's options: the Slurm profile run here, as many jobs at once as this machine has cores.
#: `--jobs` caps the jobs at once beside `--cores`: left at the profile's 64 (a cluster's queue),
#: Snakemake 9 ran seven one-thread jobs at once on 2 cores.
CORES = str(len(os.sched_getaffinity(0)))
LOCAL = ("--profile", "slurm", "--executor", "local", "--cores", CORES, "--jobs", CORES)


def snakemake(configfile: Path, work: Path, *args: str) -> list[str]:
    """The command line a user types (from the repository root), on the rehearsal's config and directory."""
    overlay = HERE / "overlay.yaml"
    return [sys.executable, "-m", "snakemake", "--configfile", str(configfile), str(overlay),
            "--directory", str(work / "run"), *args]  # fmt: skip


def local_rules() -> set[str]:
    """The rules the workflow's ``localrules:`` directives keep in the Snakemake process (never submitted)."""
    names: set[str] = set()
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        for block in re.findall(r"^localrules:\n((?:[ \t]+\w+,?[ \t]*\n)+)", smk.read_text(), re.M):
            names.update(re.findall(r"\w+", block))
    return names


def one_output_per_submitted_rule(configfile: Path, work: Path, env: dict[str, str]) -> dict[str, str]:
    """Rule -> the first (sorted) of its outputs in the finished tree (``snakemake --summary``), for every
    rule a Slurm run submits."""
    cmd = snakemake(configfile, work, "--summary", "--cores", "1")
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    picked: dict[str, str] = {}
    skip = local_rules() | {"all"}
    for line in out.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) > 2 and fields[2] and fields[2] not in skip:
            picked[fields[2]] = min(picked.get(fields[2], fields[0]), fields[0])
    return dict(sorted(picked.items()))


def rehearse(configfile: Path, work: Path, extra: list[str] | None = None) -> int:
    config = load_config([configfile, HERE / "overlay.yaml"])
    env = stage(config, work)
    local_env = dict(env, PATH=os.pathsep.join([str(HERE / "stand_ins" / "local_bin"), env["PATH"]]))
    prioritize = [
        # the base model's evaluations first: every table waits on them, and the greedy scheduler
        # (largest inputs first) would start them last, as a hub model is no input of theirs
        "--prioritize",
        *(P.scores(s, P.BASE, d) for s in config["replicates"] for d in config["analysis"]["datasets"]),
    ]
    greedy = ["--scheduler", "greedy"]  # the default ILP scheduler costs minutes of CPU over ~200 small jobs
    start = time.monotonic()
    local = snakemake(configfile, work, *LOCAL, *prioritize, *greedy, *(extra or []))
    print("rehearsal, every job here:", " ".join(local[2:]), flush=True)
    rc = subprocess.run(local, cwd=ROOT, env=local_env).returncode
    print(f"rehearsal: every job here, exit {rc} after {time.monotonic() - start:.0f} s", flush=True)
    if rc != 0:
        return rc
    return through_slurm(configfile, work, env, extra)


def through_slurm(configfile: Path, work: Path, env: dict[str, str], extra: list[str] | None = None) -> int:
    """Phase two, on phase one's finished tree: one job of each submitted rule again, through Slurm."""
    # One Snakemake run for every pick. By mtime, a forced job's new outputs would make every finished job
    # between it and a later pick that reads them run again (14 more jobs, measured): params only.
    targets = one_output_per_submitted_rule(configfile, work, env)
    print(f"rehearsal, one job of each rule through Slurm: {', '.join(targets)}", flush=True)
    poll = ["--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "1"]
    start = time.monotonic()
    slurm = snakemake(configfile, work, "--profile", "slurm", *poll, "--rerun-triggers", "params",
                      *(extra or []), "--force", *targets.values())  # fmt: skip
    print("rehearsal, through Slurm:", " ".join(slurm[2:]), flush=True)
    rc = subprocess.run(slurm, cwd=ROOT, env=env).returncode
    if rc != 0:
        return rc
    elapsed = time.monotonic() - start
    print(f"rehearsal: through Slurm, exit 0 after {elapsed:.0f} s; outputs in {work / 'run'}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", type=Path, default=ROOT / "config" / "paper.yaml")
    ap.add_argument("--workdir", type=Path, help="scratch directory, kept (default: a temporary one)")
    args, extra = ap.parse_known_args(argv)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return rehearse(args.configfile.resolve(), args.workdir.resolve(), extra)
    work = Path(tempfile.mkdtemp(prefix="maxk-rehearsal-"))
    try:
        return rehearse(args.configfile.resolve(), work, extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
