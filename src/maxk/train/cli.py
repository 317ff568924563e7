"""``maxk base`` (build the embedded base model) and ``maxk train`` (one named GRPO run).

Registration is cheap: torch, transformers and TRL are imported inside the handlers only.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from maxk.hf_hub import go_offline


def _config(text: str) -> dict[str, Any]:
    from maxk.cli import UserError

    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--config-json is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise UserError("--config-json must be a JSON object")
    return cfg


def _job_config(config_json: str, keys: tuple[str, ...], paths: tuple[str, ...]) -> dict[str, Any]:
    """The job's config, once it has every key in ``keys`` and every path in ``paths`` exists."""
    from maxk.cli import UserError
    from maxk.config import ConfigError, job_config

    cfg = _config(config_json)
    for key in keys:
        if key not in cfg:
            raise UserError(f"--config-json lacks the key {key!r} (needs {', '.join(keys)})")
    try:  # checked here, so that a bad key is a user error before any model is loaded
        job_config(cfg, ("train", "base_model"))
    except ConfigError as exc:
        raise UserError(f"--config-json: {exc}") from None
    for path in paths:
        if not os.path.exists(path):
            raise UserError(f"{path}: no such file or directory")
    return cfg


def _model_dir(model: str, revision: str | None) -> str:
    """``--model`` as a local directory: a directory as it is, a hub id from the cache (downloaded
    first when missing and the hub is reachable); then the Hugging Face libraries are put offline."""
    from maxk.cli import UserError
    from maxk.hf_hub import ModelNotFoundError, resolve_model

    try:
        path = resolve_model(model, revision)
    except ModelNotFoundError as exc:
        raise UserError(str(exc)) from None
    go_offline()
    return path


def _train(args: argparse.Namespace) -> int:
    paths = (args.data,) + ((args.heldout_data,) if args.heldout_data else ())
    cfg = _job_config(args.config_json, ("seed", "train", "run"), paths)
    from maxk.cli import UserError
    from maxk.gpu import CudaUnavailableError, require_cuda

    try:  # before the model is fetched or loaded: seconds, not a CPU run of days
        require_cuda(args.gpus, f"training run {args.run}")
    except CudaUnavailableError as exc:
        raise UserError(str(exc)) from None
    model = _model_dir(args.model, args.revision)
    from maxk.sandbox import SandboxError
    from maxk.train.run import train_run

    try:
        summary = train_run(
            run=args.run,
            config=cfg,
            model=model,
            data=args.data,
            out=args.out,
            metrics=args.metrics,
            checkpoints=args.checkpoints,
            heldout_data=args.heldout_data,
            trackers=args.trackers,
        )
    except SandboxError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(summary, sort_keys=True))
    return 0


def _base(args: argparse.Namespace) -> int:
    paths = (args.train_data, args.test_data) + ((args.call_data,) if args.call_data else ())
    cfg = _job_config(args.config_json, ("seed", "base_model"), paths)
    if args.threads is not None:
        cfg["base_model"]["threads"] = args.threads
    go_offline()
    from maxk.train.base import build_base_model

    manifest = build_base_model(
        cfg,
        train_data=args.train_data,
        test_data=args.test_data,
        call_data=args.call_data,
        out=args.out,
        metrics=args.metrics,
    )
    print(json.dumps(manifest.get("eval", {}), sort_keys=True))
    return 0


def _rl_prompts(args: argparse.Namespace) -> int:
    cfg = _job_config(args.config_json, ("seed", "train"), (args.data,))
    model = _model_dir(args.model, args.revision)
    from maxk.cli import UserError
    from maxk.sandbox import SandboxError
    from maxk.train.edge import build_edge_prompts

    try:
        manifest = build_edge_prompts(cfg, model=model, data=args.data, out=args.output)
    except (SandboxError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(json.dumps({k: manifest[k] for k in ("examined", "count", "solved_histogram")}, sort_keys=True))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("train", help="train one named GRPO run (advantage estimator from config)")
    p.add_argument("--run", required=True, help="run name (a key of config['runs'])")
    p.add_argument("--config-json", required=True, help="JSON with seed, train, run, prompt, sandbox")
    p.add_argument("--model", required=True, help="base model: a local directory or a hub id (org/name)")
    p.add_argument("--revision", default=None, help="hub revision (commit) of --model when it is a hub id")
    p.add_argument("--data", required=True, help="training problems (.jsonl.gz)")
    p.add_argument(
        "--heldout-data",
        default=None,
        help="held-out curve's problems (train.heldout.dataset); default: --data outside the run's prompts",
    )
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--metrics", required=True, help="output metrics CSV")
    p.add_argument("--checkpoints", default="work/checkpoints", help="checkpoint root (outside outputs)")
    p.add_argument(
        "--trackers",
        default=None,
        metavar="DIR",
        help="live curves (train.report_to) under DIR/{tracker}/ (the rule: "
        "results/seed{seed}/logs/trackers); default: the tracker's own place",
    )
    p.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="GPUs the job asked for (the rule passes resources.train.gpu): with > 0 and no usable CUDA it "
        "stops at once instead of training on the CPU (default 0: CPU allowed)",
    )
    p.set_defaults(handler=_train)

    r = subparsers.add_parser(
        "rl-prompts",
        help="keep the training problems at the base model's edge of competence (train.prompt_filter)",
    )
    r.add_argument("--config-json", required=True, help="JSON with seed, train, prompt, sandbox")
    r.add_argument("--model", required=True, help="base model: a local directory or a hub id (org/name)")
    r.add_argument("--revision", default=None, help="hub revision (commit) of --model when it is a hub id")
    r.add_argument("--data", required=True, help="candidate training problems (.jsonl.gz)")
    r.add_argument("--output", required=True, help="kept problems (.jsonl.gz; a .manifest.json beside it)")
    r.set_defaults(handler=_rl_prompts)

    b = subparsers.add_parser("base", help="build the embedded base model (tokenizer, small Qwen2, SFT)")
    b.add_argument("--config-json", required=True, help="JSON with seed, base_model, prompt, sandbox")
    b.add_argument("--train-data", required=True, help="the SFT examples (.jsonl.gz; base_model.sft.dataset)")
    b.add_argument("--test-data", required=True, help="test split problems for the competence check")
    b.add_argument(
        "--call-data", default=None, help="call-format problems of the calibration (calibration.call_dataset)"
    )
    b.add_argument("--out", required=True, help="output model directory")
    b.add_argument("--metrics", default=None, help="output CSV of the SFT curve (default: none written)")
    b.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (wins over base_model.threads; the rule passes resources.base_model.threads)",
    )
    b.set_defaults(handler=_base)
