"""``maxk provenance``: record the environment of a run (used by the ``environment`` rule)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "provenance",
        help="write config hash, git commit and package versions to a JSON file",
        description="Write the provenance record (config hash, git commit, package versions).",
    )
    p.add_argument("--config-json", required=True, help="the run's config as a JSON string")
    p.add_argument("--output", required=True, help="JSON file to write")
    p.set_defaults(handler=_provenance)


def _provenance(args: argparse.Namespace) -> int:
    from maxk.io import write_json
    from maxk.provenance import provenance_record

    config = json.loads(args.config_json)
    write_json(args.output, provenance_record(config, seeds={"seed": config.get("seed")}))
    return 0
