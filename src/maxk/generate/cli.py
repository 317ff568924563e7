"""``maxk generate``: n samples per problem for one model and one dataset (or one shard of it);
``maxk generate merge``: concatenate shards in order. Cheap to import (no torch here)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # built in the commands: the schema is read there, not at `maxk --help`
    from maxk.generate.config import GenerateConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="sample n completions per problem (Parquet + manifest); 'merge' joins shards",
        description=(
            "Sample n completions per problem of one dataset with one model and write the samples "
            "Parquet plus its manifest. Use 'maxk generate merge' to concatenate shards."
        ),
    )
    p.add_argument("--model-path", help="HF model directory or hub id")
    p.add_argument(
        "--revision", default=None, help="hub revision (commit) of --model-path when it is a hub id"
    )
    p.add_argument("--model-name", help="name used for seeds and the manifest (e.g. 'base' or a run name)")
    p.add_argument("--problems", help="problem records (results/data/{dataset}.jsonl.gz)")
    p.add_argument("--dataset", help="dataset name for seeds and the manifest (default: file stem)")
    p.add_argument("--output", help="samples Parquet to write (manifest goes beside it)")
    p.add_argument("--shard", type=int, default=0, help="shard index (default 0)")
    p.add_argument("--num-shards", type=int, default=1, help="number of shards (default 1)")
    p.add_argument(
        "--config-json",
        help='JSON with "seed", "generate" and "prompt" (config sections; keys left out take their defaults)',
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (transformers backend)")
    p.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="GPUs the job asked for (the rule passes resources.generate_shard.gpu): with > 0 and no usable "
        "CUDA it stops at once instead of generating on the CPU (default 0)",
    )
    p.add_argument(
        "--no-resume",
        action="store_true",
        help="ignore and do not write per-problem checkpoints (<output>.parts/) of an interrupted run",
    )
    p.set_defaults(handler=_generate)
    msub = p.add_subparsers(dest="generate_command", metavar="SUBCOMMAND")
    m = msub.add_parser("merge", help="concatenate shard Parquets in order (checks manifests)")
    m.add_argument("--output", required=True, help="merged samples Parquet")
    m.add_argument("shards", nargs="+", help="shard Parquets in shard order")
    m.set_defaults(handler=_merge)
    r = msub.add_parser(
        "rescore",
        help="full-vocabulary entropy of a fixed subsample of a samples file (transformers)",
        description="Re-run the generating model, teacher-forced, on the first PROBLEMS problems x first "
        "SAMPLES samples of a samples file and record each sample's exact full-vocabulary entropy and "
        "log-probs beside the file's own estimates (maxk.generate.rescore): the gap between vLLM's top-k "
        "entropy bound and the exact value.",
    )
    r.add_argument("--model-path", required=True, help="HF model directory or hub id (the one that sampled)")
    r.add_argument(
        "--revision", default=None, help="hub revision (commit) of --model-path when it is a hub id"
    )
    r.add_argument("--model-name", required=True, help="the samples file's model name (checked)")
    r.add_argument(
        "--samples",
        required=True,
        help="samples Parquet (results/seed{seed}/samples/{model}/{dataset}.parquet)",
    )
    r.add_argument("--problems", required=True, help="the dataset's problem records (to rebuild the prompts)")
    r.add_argument(
        "--config-json",
        required=True,
        help='JSON with "seed", "generate" and "prompt" (as for maxk generate)',
    )
    r.add_argument("--subsample-problems", type=int, required=True, help="the first N problems")
    r.add_argument("--subsample-samples", type=int, required=True, help="the first M samples of each")
    r.add_argument("--batch-size", type=int, required=True, help="samples per forward pass")
    r.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    r.add_argument(
        "--gpus", type=int, default=0, help="GPUs the job asked for (no usable CUDA: stop at once)"
    )
    r.add_argument("--output", required=True, help="re-scored Parquet to write (manifest beside it)")
    r.set_defaults(handler=_rescore)


def _load_problems(path: str) -> list[dict[str, Any]]:
    from maxk.io import read_jsonl

    problems = []
    for lineno, row in read_jsonl(path):
        for field in ("id", "prompt"):
            if field not in row:
                raise ValueError(f"{path}:{lineno}: problem {row.get('id', '?')!r} has no field {field!r}")
        problems.append(row)
    return problems


def make_backend(gen: GenerateConfig, model_path: str, *, seed: int, threads: int | None) -> Any:
    """The backend named by ``gen.backend`` with its settings, on the model directory ``model_path``
    (a hub id and its revision are resolved before: ``maxk.hf_hub``)."""
    if gen.backend == "transformers":  # TransformersSettings' fields are the backend's keywords
        from maxk.generate.hf import TransformersBackend

        hf = asdict(gen.transformers)
        return TransformersBackend(model_path, **hf, threads=threads, stop_tokens=gen.stop_tokens)
    if gen.backend == "vllm":  # VLLMSettings' fields are the backend's keywords
        from maxk.generate.vllm import VLLMBackend

        return VLLMBackend(model_path, **asdict(gen.vllm), seed=seed, stop_tokens=gen.stop_tokens)
    raise ValueError(f"unknown generate.backend {gen.backend!r} (expected 'transformers' or 'vllm')")


def prompt_functions(tokenizer: Any, prompt_config: dict[str, Any]) -> tuple[Any, Any]:
    """``(build_prompt(problem) -> str, extract_program(completion, problem) -> str)``: the prompt of
    ``maxk.data.prompts``, built with the generating model's tokenizer, and ``maxk.generate.extract``."""
    from maxk.data.prompts import build_prompt
    from maxk.generate.extract import extract_program

    def build(problem: dict[str, Any]) -> str:
        return build_prompt(problem, tokenizer, config=prompt_config)

    return build, extract_program


def _config_of(text: str) -> dict[str, Any]:
    """``--config-json`` validated, every default filled in; UserError naming the bad JSON or key."""
    from maxk.cli import UserError
    from maxk.config import ConfigError, validate_config

    try:
        return validate_config(json.loads(text))
    except json.JSONDecodeError as exc:
        raise UserError(f"--config-json is not valid JSON ({exc.msg})") from exc
    except ConfigError as exc:
        raise UserError(f"--config-json: {exc}") from None


def _generate(args: argparse.Namespace) -> int:
    from maxk.cli import UserError

    missing = [
        f"--{k.replace('_', '-')}"
        for k in ("model_path", "problems", "output", "config_json")
        if not getattr(args, k)
    ]
    if missing:
        raise UserError(f"missing {', '.join(missing)}")

    config = _config_of(args.config_json)  # every default filled in
    from pathlib import Path

    from maxk.generate.backends import PromptTooLongError, SamplingParams
    from maxk.generate.config import GenerateConfig
    from maxk.generate.run import model_fingerprint, run_shard

    gen = GenerateConfig.from_config(config["generate"])
    seed = int(config["seed"])
    dataset = args.dataset or Path(args.problems).name.split(".")[0]
    model_name = args.model_name or Path(args.model_path).name
    try:
        problems = _load_problems(args.problems)
        if gen.max_problems is not None:
            problems = problems[: gen.max_problems]  # the first ones, in dataset order
        params = SamplingParams(
            n=gen.n, temperature=gen.temperature, top_p=gen.top_p, max_new_tokens=gen.max_new_tokens
        )
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    from maxk.gpu import CudaUnavailableError, require_cuda
    from maxk.hf_hub import ModelNotFoundError, resolve_model

    try:  # before the model is fetched or loaded
        require_cuda(args.gpus, f"generation of {model_name} on {dataset} ({gen.backend} backend)")
    except CudaUnavailableError as exc:
        raise UserError(str(exc)) from None
    try:
        model_dir = resolve_model(args.model_path, args.revision)
    except ModelNotFoundError as exc:
        raise UserError(str(exc)) from None
    try:
        backend = make_backend(gen, model_dir, seed=seed, threads=args.threads)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load model {args.model_path!r} for generation: {exc}") from exc
    build, extract = prompt_functions(backend.tokenizer, config["prompt"])
    try:
        manifest = run_shard(
            problems=problems,
            build_prompt=build,
            extract=extract,
            backend=backend,
            params=params,
            output=args.output,
            model_name=model_name,
            dataset=dataset,
            base_seed=seed,
            shard=args.shard,
            num_shards=args.num_shards,
            model_info={**model_fingerprint(model_dir, args.revision), "ref": args.model_path},
            config=config,
            resume=not args.no_resume,
            common_random_numbers=gen.common_random_numbers,
        )
    except PromptTooLongError as exc:
        raise UserError(str(exc)) from None
    s = manifest["stats"]
    print(
        f"{args.output}: {manifest['num_rows']} samples of {len(manifest['problem_ids'])} problems in "
        f"{s['elapsed_s']:.1f}s ({s['samples_per_s']:.1f} samples/s, {s['tokens_per_s']:.0f} tokens/s; "
        f"{s['resumed_problems']} problems resumed from checkpoints)"
    )
    return 0


def _merge(args: argparse.Namespace) -> int:
    from maxk.cli import UserError
    from maxk.generate.run import ShardError, merge_shards

    try:
        manifest = merge_shards(args.shards, args.output)
    except ShardError as exc:
        raise UserError(str(exc)) from exc
    print(f"{args.output}: {manifest['num_rows']} rows from {len(args.shards)} shards")
    return 0


def _rescore(args: argparse.Namespace) -> int:
    from maxk.cli import UserError

    config = _config_of(args.config_json)
    from maxk.data.prompts import build_prompt
    from maxk.generate.rescore import run_rescore
    from maxk.generate.run import model_fingerprint
    from maxk.gpu import CudaUnavailableError, require_cuda
    from maxk.hf_hub import ModelNotFoundError, resolve_model

    try:
        cuda = require_cuda(args.gpus, f"entropy re-scoring of {args.model_name}")
        model_dir = resolve_model(args.model_path, args.revision)
    except (CudaUnavailableError, ModelNotFoundError) as exc:
        raise UserError(str(exc)) from None
    from maxk.generate.config import GenerateConfig

    gen = GenerateConfig.from_config(config["generate"])
    if not cuda and gen.transformers.device.startswith("cuda"):  # rehearsal stand-in, or gpu: 0
        gen = replace(gen, transformers=replace(gen.transformers, device="cpu"))
    try:
        manifest = run_rescore(
            model_dir=model_dir,
            model_name=args.model_name,
            samples_path=args.samples,
            problems=_load_problems(args.problems),
            build_prompt=lambda tok, problem: build_prompt(problem, tok, config=config["prompt"]),
            generate_config=gen,
            subsample=(args.subsample_problems, args.subsample_samples),
            output=args.output,
            config=config,
            model_info={**model_fingerprint(model_dir, args.revision), "ref": args.model_path},
            threads=args.threads,
            batch_size=args.batch_size,
        )
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    print(
        f"{args.output}: {manifest['num_rows']} samples re-scored, {manifest['tokens_matched']} with the "
        "sampled token count"
    )
    return 0
