"""``maxk data``: build a configured dataset (records + manifest + provenance), validate a file."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="build and check problem datasets", description=__doc__)
    dsub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    b = dsub.add_parser("build", help="build one dataset of the config into results/data/")
    b.add_argument("--name", required=True, help="dataset name (a key of config 'datasets')")
    src = b.add_mutually_exclusive_group()
    src.add_argument(
        "--configfile",
        nargs="+",
        metavar="FILE",
        help="YAML config files, an overlay after its base, as for snakemake (default: config/config.yaml)",
    )
    src.add_argument("--config-json", help="config (sections datasets/data/prompt) as a JSON string")
    b.add_argument("--output", help="output .jsonl.gz (default: results/data/{name}.jsonl.gz)")
    b.set_defaults(handler=_build)
    v = dsub.add_parser("validate", help="validate a built dataset file against the problem schema")
    v.add_argument("paths", nargs="+", metavar="FILE", help="built dataset files (.jsonl.gz)")
    v.set_defaults(handler=_validate)


def _build(args: argparse.Namespace) -> int:
    from maxk.cli import UserError
    from maxk.config import load_config
    from maxk.data.build import DataError, build_dataset, write_dataset
    from maxk.paths import data as data_path
    from maxk.provenance import write_provenance

    config = json.loads(args.config_json) if args.config_json else load_config(*(args.configfile or ()))
    output = args.output or data_path(args.name)
    try:
        records, manifest = build_dataset(args.name, config)
    except (DataError, ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from exc
    mpath = write_dataset(output, records, manifest)
    subset = {"datasets": {args.name: config["datasets"][args.name]}, "data": config.get("data"),
              "prompt": config.get("prompt")}  # fmt: skip
    write_provenance(output, config=subset, seeds={"split": manifest["seed"], "options": manifest["options"]})
    print(f"{args.name}: {len(records)} problems -> {output} (manifest {mpath})")
    for w in manifest["warnings"]:
        print(f"WARNING: {w}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from maxk.cli import UserError
    from maxk.data.build import DataError, read_problems

    for path in args.paths:
        try:
            recs = read_problems(path)
        except (DataError, OSError) as exc:
            raise UserError(str(exc)) from exc
        print(f"{path}: {len(recs)} problems OK")
    return 0
