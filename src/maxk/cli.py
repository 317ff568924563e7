"""The ``maxk`` command line: one subcommand per pipeline stage.

Each stage package may provide a ``cli`` module with ``register(subparsers)``, which adds its
subcommands. Registration must stay cheap (no torch import): heavy imports belong inside the
handlers, so ``maxk --help`` answers instantly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from maxk import __version__

#: Stage packages whose ``cli`` module registers subcommands, in help order.
STAGES: tuple[str, ...] = ("data", "sandbox", "train", "generate", "analysis", "workflow")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="maxk",
        description="Pipeline for max@k-aligned RL on code (see README.md).",
    )
    parser.add_argument("--version", action="version", version=f"maxk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for stage in STAGES:
        try:
            module = importlib.import_module(f"maxk.{stage}.cli")
        except ModuleNotFoundError as exc:
            if exc.name in (f"maxk.{stage}", f"maxk.{stage}.cli"):
                continue  # stage not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``maxk argv`` (default: the command line). A command-line call in a Snakemake job whose run
    started a job server (``$MAXK_JOB_SERVER``, ``maxk.workflow.jobserver``) runs forked from it; with
    none, or one that cannot run it, here."""
    if argv is None and os.environ.get("MAXK_JOB_SERVER"):
        from maxk.workflow.jobserver import forward

        status = forward(sys.argv[1:])
        if status is not None:
            return status
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        result = handler(args)
    except UserError as exc:
        print(f"maxk {args.command}: error: {exc}", file=sys.stderr)
        return 1
    return int(result or 0)


class UserError(Exception):
    """An error caused by the user's input (bad file, bad config): printed without traceback."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
