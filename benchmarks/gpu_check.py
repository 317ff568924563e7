"""The GPU check of ``../shared/gpu-check.md``, as one script for one call on a lent GPU machine.

    python benchmarks/gpu_check.py --out DIR [--data results/data/suite_rl.jsonl.gz]
        [--test results/data/suite_test.jsonl.gz] [--train-budget 300] [--tiny] [--launch]

The two default data files are the embedded default's datasets; build them first (seconds, offline,
from the repository root):

    maxk data build --name suite_rl && maxk data build --name suite_test

(or run the pipeline, which builds them). The script stops at once, naming the file and this command,
when ``--data`` or ``--test`` does not exist.

1. Training on CUDA: a random Qwen2 of a few hundred million parameters (built here: no weights can be
   downloaded), bf16 and gradient checkpointing as ``config/paper.yaml`` sets them, ``train_run`` (what
   ``maxk train`` calls) for every registered advantage estimator (``maxk.objectives.ESTIMATORS``; ``grpo``
   on both reward kinds), each for ``num_iterations + 1`` optimizer steps (the off-policy ones, which
   use the importance-ratio deltas, at 3 PPO iterations, as in the paper): every
   logged value finite, one metrics row per step, peak GPU memory and the step-time split.
2. Generation with the transformers backend on CUDA: 256 samples per problem through maxk's decode loop
   and through ``model.generate`` (samples/s of each), same-seed determinism on the device, and the
   decode loop's sum of log-probs and exact mean entropy against a teacher-forced float32 forward pass.

3. ``--launch``: one training job run as the ``train`` rule's shell runs it, ``{launch_prefix} train ...``
   (``maxk.train.launch.launch_prefix``): on CUDA, ``maxk train --gpus 1`` and then ``accelerate launch
   --config_file workflow/deepspeed/zero2.yaml --num_processes 1 -m maxk train`` (DeepSpeed ZeRO-2, the
   paper profile's command; DeepSpeed must be installed), ``num_iterations + 1`` steps of ``grpo`` each;
   on the CPU (``--tiny``) the ``maxk train`` job only. The sandbox scores these (a random model earns 0:
   a check of the launch plumbing, not of numerics).

Writes ``DIR/gpu_check.json`` after every step (a time-out still leaves what was measured) and prints a
short table last. ``--tiny``: a CPU rehearsal of the script itself (small model, float32, no bf16), for
checking it here before spending device time; ``tests/test_gpu_check.py`` runs it so in CI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from maxk.hf_hub import go_offline  # noqa: E402

go_offline()


def check_runs() -> dict[str, dict]:
    """Run name -> run spec: every registered estimator once on the continuous reward, ``grpo`` on the
    binary one too (the paper's table 1); 3 PPO iterations for the off-policy estimators, else 1."""
    from maxk.objectives import ESTIMATORS

    runs = {}
    for name, spec in ESTIMATORS.items():
        kinds = ("continuous", "binary") if name == "grpo" else ("continuous",)
        for kind in kinds:
            run = f"{name}_{kind}" if len(kinds) > 1 else name
            runs[run] = {"method": name, "reward_kind": kind, "num_iterations": 3 if spec.uses_deltas else 1}
    return runs


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "accelerate", "trl", "datasets", "numpy", "pyarrow"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def device_facts() -> dict[str, object]:
    import torch

    facts: dict[str, object] = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        facts.update(name=p.name, memory_gib=round(p.total_memory / 2**30, 1), sms=p.multi_processor_count,
                     bf16=torch.cuda.is_bf16_supported())  # fmt: skip
    return facts


def build_model(directory: Path, texts: list[str], tiny: bool) -> tuple[Path, int]:
    """A random Qwen2 (tokenizer trained on ``texts``): ~360M parameters, or ~1M with ``tiny``."""
    from maxk.tiny import init_model, save, train_tokenizer

    tok = train_tokenizer(texts, vocab_size=2000)
    sizes = (
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
        if tiny
        else dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16)
    )
    model = init_model(tok, seed=0, num_key_value_heads=2, max_position_embeddings=1024, **sizes)
    params = sum(p.numel() for p in model.parameters())
    save(model, tok, directory)
    return directory, params


def train_config(tiny: bool) -> dict:
    """The embedded config with the paper's training numerics (bf16, gradient checkpointing, bf16 weights,
    lr 5e-6, 256-token completions); 4 groups of 8 per optimizer step, no held-out curve."""
    from maxk.config import load_config

    cfg = load_config(ROOT / "config/config.yaml")
    train = dict(cfg["train"])
    train.update(
        max_prompts=16,
        save_steps=3 * 10**6,
        learning_rate=5.0e-6,
        per_device_train_batch_size=16,
        gradient_accumulation_steps=2,
        max_completion_length=32 if tiny else 256,
        heldout=None,
        report_to="none",
        bf16=not tiny,
        gradient_checkpointing=not tiny,
        model_dtype="float32" if tiny else "bfloat16",
    )
    return {"seed": 1234, "train": train, "prompt": cfg.get("prompt"), "sandbox": cfg["sandbox"]}


def run_job_config(base: dict, spec: dict) -> dict:
    """``base`` (``train_config``) for one run spec of ``check_runs``: ``num_iterations + 1`` steps."""
    return {**base, "train": {**base["train"], "max_steps": spec["num_iterations"] + 1}, "run": spec}


def time_split(m) -> dict[str, float]:
    """Seconds spent generating, scoring and updating, summed over a metrics CSV's rows."""
    keys = ("time/generation_s", "time/reward_s", "time/update_s")
    return {k: round(float(m[k].sum()), 2) for k in keys if k in m}


def env_with_src() -> dict[str, str]:
    """This environment with the repository's ``src`` first on PYTHONPATH (for ``python -m maxk``)."""
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


class VariedScorer:
    """A trusted stand-in that executes nothing: reward = eighths of the program's share of distinct
    characters. A random model earns 0 from the sandbox on every sample, so every advantage, loss and
    gradient is 0 and the estimators' bf16 numerics go unexercised; this gives groups varied rewards."""

    def score(self, pairs):
        from types import SimpleNamespace

        out = []
        for _, program in pairs:
            passed = round(8 * len(set(program)) / (len(program) + 1))
            out.append(SimpleNamespace(passed=passed, total=8, reward=passed / 8))
        return out


def check_training(
    model: Path,
    data: str,
    work: Path,
    record: dict,
    deadline: float,
    save,
    stand_in,
    only: list[str] | None = None,
) -> None:
    import pandas as pd
    import torch

    from maxk.train.run import train_run

    base = train_config(record["tiny"])
    keys = ("learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps",
            "max_completion_length", "bf16", "gradient_checkpointing", "model_dtype")  # fmt: skip
    record["train_config"] = {k: base["train"][k] for k in keys}
    runs = record.setdefault("train", {})
    cuda = torch.cuda.is_available()
    for run, spec in check_runs().items():
        if only and run not in only:
            continue
        if time.monotonic() > deadline:
            runs[run] = {"status": "skipped (train budget spent)"}
            continue
        cfg = run_job_config(base, spec)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            summary = train_run(
                run=run, config=cfg, model=str(model), data=data, out=str(work / run),
                metrics=str(work / f"{run}.csv"), checkpoints=str(work / "ckpt"),
                scorer=VariedScorer() if stand_in else None,
            )  # fmt: skip
            m = pd.read_csv(work / f"{run}.csv")
            cols = ["loss", "reward", "advantage/mean", "advantage/std", "grad_norm", "kl", "entropy"]
            # rewards and advantages are logged when a batch is generated (PPO iteration 0) only
            fresh = m["ppo_iteration"].fillna(0) == 0 if "ppo_iteration" in m else slice(None)
            every = m[[c for c in ("loss", "grad_norm", "kl", "entropy") if c in m]].to_numpy(dtype=float)
            values = m.loc[fresh, [c for c in cols if c in m]].to_numpy(dtype=float)
            runs[run] = {
                "status": "ok",
                "steps": int(summary["steps"]),
                "metric_rows": len(m),
                "all_finite": bool(math.isfinite(values.sum() + every.sum())),
                "rows_match_steps": len(m) == summary["steps"],
                "wall_s": round(time.perf_counter() - t0, 1),
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else 0,
                "time_split_s": time_split(m),
                "last": {c: round(float(m[c].iloc[-1]), 5) for c in cols if c in m},
                "delta_iters": [c for c in m if c.startswith("delta/abs_mean_iter") and m[c].notna().any()],
            }  # fmt: skip
        except Exception as exc:  # record every failure, go on with the next run
            runs[run] = {
                "status": f"FAILED: {type(exc).__name__}: {exc}",
                "trace": traceback.format_exc()[-3000:],
            }
        print(f"train {run}: {json.dumps({k: v for k, v in runs[run].items() if k != 'trace'})}", flush=True)
        save()


def check_generation(model: Path, test: str, record: dict, tiny: bool, save) -> None:
    import torch

    from maxk.data.prompts import build_prompt
    from maxk.generate.backends import SamplingParams
    from maxk.generate.hf import TransformersBackend
    from maxk.io import read_jsonl

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = "float32" if tiny else "bfloat16"
    gen: dict = record.setdefault("generate", {"device": device, "dtype": dtype})
    fast = TransformersBackend(model, device=device, dtype=dtype, max_batch_size=512)
    slow = TransformersBackend(model, device=device, dtype=dtype, max_batch_size=256, decoder="generate")
    rows = [row for _, row in read_jsonl(test)][:8]
    prompts = [build_prompt(r, fast.tokenizer) for r in rows]
    n, new = (32, 16) if tiny else (256, 256)
    params = SamplingParams(n=n, max_new_tokens=new)
    for b in (fast, slow):  # warm-up
        b.generate(prompts[:1], [0], SamplingParams(n=8, max_new_tokens=4))

    def timed(backend, ps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = backend.generate(ps, list(range(len(ps))), params)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    f_s, f_out = timed(fast, prompts[:4])
    s_s, s_out = timed(slow, prompts[:2])
    f_samples, s_samples = sum(map(len, f_out)), sum(map(len, s_out))
    gen.update(
        samples_per_problem=n, max_new_tokens=new,
        decode_loop={"samples": f_samples, "tokens": sum(s.num_tokens for r in f_out for s in r),
                     "seconds": round(f_s, 2), "samples_per_s": round(f_samples / f_s, 1)},
        model_generate={"samples": s_samples, "tokens": sum(s.num_tokens for r in s_out for s in r),
                        "seconds": round(s_s, 2), "samples_per_s": round(s_samples / s_s, 1)},
    )  # fmt: skip
    gen["speedup_samples_per_s"] = round((f_samples / f_s) / (s_samples / s_s), 2)
    save()
    # same seed, same device: the same samples
    _, again = timed(fast, prompts[:4])
    gen["deterministic"] = all(
        a.token_ids == b.token_ids
        for ra, rb in zip(f_out, again, strict=True)
        for a, b in zip(ra, rb, strict=True)
    )
    # exact entropy and log-probs against a teacher-forced float32 pass (temperature 1, top-p 1: the
    # sampling distribution is the model's own)
    ref = fast.model.to(torch.float32)
    errs_lp, errs_h = [], []
    ids = fast.encode(prompts[0])
    for s in f_out[0][:8]:
        seq = torch.tensor([ids + s.token_ids], device=device)
        with torch.no_grad():
            logits = ref(seq).logits[0, len(ids) - 1 : -1].double()
        logp = torch.log_softmax(logits, -1)
        tok = torch.tensor(s.token_ids, device=device)
        lp = float(logp.gather(1, tok[:, None]).sum())
        h = float(-(logp.exp() * logp).sum(-1).mean())
        errs_lp.append(abs(lp - s.sum_logprob) / max(1.0, abs(lp)))
        errs_h.append(abs(h - (s.mean_entropy or 0.0)) / max(1e-9, abs(h)))
    gen["sum_logprob_rel_err_max"] = round(max(errs_lp), 5)
    gen["mean_entropy_rel_err_max"] = round(max(errs_h), 5)
    gen["sampling"] = {"temperature": params.temperature, "top_p": params.top_p}
    save()


def check_launch(model: Path, data: str, work: Path, record: dict, tiny: bool, save) -> None:
    """The training job as the ``train`` rule runs it (its command prefix from ``launch_prefix``)."""
    import shlex

    import pandas as pd
    import torch

    from maxk.train.launch import launch_prefix

    cuda = torch.cuda.is_available()
    spec = check_runs()["grpo_continuous"]
    cfg = run_job_config(train_config(tiny), spec)
    launch = {"accelerate_config": "workflow/deepspeed/zero2.yaml"}
    jobs = {"maxk_train": 0, "accelerate_zero2": 1} if cuda else {"maxk_train": 0}
    env = env_with_src()
    out = record.setdefault("launch", {})
    work.mkdir(parents=True, exist_ok=True)
    for job, gpus in jobs.items():
        prefix = launch_prefix(launch, gpus, basedir=str(ROOT), threads=4)
        if prefix == "maxk":  # the rule finds the installed entry point; here, this interpreter's maxk
            prefix = shlex.join([sys.executable, "-m", "maxk"])
        args = ["train", "--run", "grpo_continuous", "--config-json", json.dumps(cfg), "--model", str(model),
                "--data", data, "--out", str(work / job), "--metrics", str(work / f"{job}.csv"),
                "--checkpoints", str(work / f"ckpt-{job}"), "--gpus", str(1 if cuda else 0)]  # fmt: skip
        cmd = f"{prefix} {shlex.join(args)}"
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        log = proc.stdout + proc.stderr
        lines = [x[:200] for x in log.splitlines() if "deepspeed" in x.lower() or "ZeRO" in x]
        r: dict = {"command": prefix + " train ...", "rc": proc.returncode, "deepspeed_lines": lines[:12],
                   "wall_s": round(time.perf_counter() - t0, 1), "log_tail": log[-2500:]}  # fmt: skip
        metrics = work / f"{job}.csv"
        if proc.returncode == 0 and metrics.exists():
            m = pd.read_csv(metrics)
            vals = m[[c for c in ("loss", "grad_norm", "kl", "entropy", "reward") if c in m]].to_numpy(float)
            r.update(steps=len(m), all_finite=bool(math.isfinite(vals.sum())), time_split_s=time_split(m),
                     model_saved=(work / job / "config.json").exists())  # fmt: skip
        out[job] = r
        print(f"launch {job}: rc={r['rc']} wall={r['wall_s']}s steps={r.get('steps')}", flush=True)
        save()


#: the command that builds the default ``--data`` and ``--test`` files (the embedded default's datasets)
BUILD_DATA = "maxk data build --name suite_rl && maxk data build --name suite_test"


def missing_data(paths: dict[str, str]) -> str | None:
    """The error for the first of ``{option: path}`` that is not a file, naming it and the command that
    builds the defaults; None when every one exists."""
    for option, path in paths.items():
        if not Path(path).is_file():
            return (
                f"{option} {path}: no such file. Build the default data first, from the repository root:"
                f" {BUILD_DATA}; or pass {option} a .jsonl.gz of problems"
            )
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for gpu_check.json and the work files")
    ap.add_argument(
        "--data",
        default=str(ROOT / "results/data/suite_rl.jsonl.gz"),
        help=f"RL problems (the default: built by `{BUILD_DATA.split(' && ')[0]}`)",
    )
    ap.add_argument(
        "--test",
        default=str(ROOT / "results/data/suite_test.jsonl.gz"),
        help=f"problems to sample (the default: built by `{BUILD_DATA.split(' && ')[1]}`)",
    )
    ap.add_argument("--train-budget", type=float, default=300.0, help="seconds; later runs are skipped")
    ap.add_argument("--tiny", action="store_true", help="CPU rehearsal: small model, float32")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument(
        "--runs", nargs="+", metavar="RUN", help="train only these of the check's runs (a rerun after a fix)"
    )
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--launch", action="store_true", help="also run the train rule's command (item 3)")
    ap.add_argument(
        "--varied-rewards",
        action="store_true",
        help="train on VariedScorer's rewards instead of the sandbox's",
    )
    a = ap.parse_args()
    if a.runs and (unknown := sorted(set(a.runs) - set(check_runs()))):
        ap.error(f"--runs: unknown {unknown}; the check's runs: {sorted(check_runs())}")
    needed = {"--data": a.data} | ({} if a.skip_generate else {"--test": a.test})
    if error := missing_data(needed):  # before any model is built or device time spent
        ap.error(error)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {"tiny": a.tiny, "versions": versions(), "device": device_facts()}

    def save() -> None:
        (out / "gpu_check.json").write_text(json.dumps(record, indent=1, sort_keys=True))

    cmd = [sys.executable, "-m", "maxk", "sandbox", "doctor"]
    doctor = subprocess.run(cmd, capture_output=True, text=True, env=env_with_src())
    record["sandbox_doctor"] = {"rc": doctor.returncode, "output": (doctor.stdout + doctor.stderr)[-2500:]}
    save()
    print(json.dumps({k: record[k] for k in ("versions", "device")}), flush=True)

    from maxk.io import read_jsonl

    texts = [f"{r.get('statement', '')}\n{r.get('reference', '')}" for _, r in read_jsonl(a.data)]
    t0 = time.perf_counter()
    model, params = build_model(out / "model", texts, a.tiny)
    record["model"] = {"parameters": params, "build_s": round(time.perf_counter() - t0, 1)}
    save()
    print(f"model: {params / 1e6:.1f}M parameters", flush=True)
    if not a.skip_train:
        deadline = time.monotonic() + a.train_budget
        record["rewards"] = "VariedScorer (no execution)" if a.varied_rewards else "sandbox"
        check_training(model, a.data, out / "train", record, deadline, save, a.varied_rewards, a.runs)
    try:
        if not a.skip_generate:
            check_generation(model, a.test, record, a.tiny, save)
    except Exception as exc:
        record.setdefault("generate", {})["status"] = f"FAILED: {type(exc).__name__}: {exc}"
        record["generate"]["trace"] = traceback.format_exc()[-3000:]
        save()

    if a.launch:
        check_launch(model, a.data, out / "launch", record, a.tiny, save)

    print("\n== gpu check ==")
    print(json.dumps(record["versions"]), json.dumps(record["device"]))
    for run, r in record.get("train", {}).items():
        split = r.get("time_split_s", {})
        print(f"{run:22s} {r['status'][:60]:12s} steps={r.get('steps')} finite={r.get('all_finite')} "
              f"peak={r.get('peak_gib')}GiB wall={r.get('wall_s')}s split={split}")  # fmt: skip
    print(json.dumps({k: v for k, v in record.get("generate", {}).items() if k != "trace"}))
    for job, r in record.get("launch", {}).items():
        print(f"{job}: rc={r['rc']} steps={r.get('steps')} finite={r.get('all_finite')} wall={r['wall_s']}s")


if __name__ == "__main__":
    main()
