"""``maxk provenance``: record the environment of a run (used by the ``environment`` rule);
``maxk job-server``: warm job starts for a local run (``maxk.workflow.jobserver``);
``maxk wall-time``: a DAG's wall time on more or fewer cores, projected from a run's job times
(``maxk.workflow.walltime``)."""

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

    j = sub.add_parser(
        "job-server",
        help="serve warm job starts to one Snakemake run (started by the workflow)",
        description=(
            "Import what the pipeline's jobs import, then fork each `maxk` command of the run's jobs from "
            "this warm interpreter (maxk.workflow.jobserver). The Snakefile starts one per local run "
            "(config key warm_start) and stops it with the run; jobs find it through $MAXK_JOB_SERVER."
        ),
    )
    j.add_argument("--socket", required=True, help="Unix socket path to listen on (in a 0700 directory)")
    j.add_argument("--parent", type=int, help="exit when this process (the Snakemake run) is gone")
    j.add_argument("--workdir", help="the run's working directory (named in the command line, for `ps`)")
    j.set_defaults(handler=_job_server)

    w = sub.add_parser(
        "wall-time",
        help="project a DAG's wall time on N cores from the job times a run measured",
        description=(
            "Read a dry run's jobs (`snakemake -n --forceall --cores all [your config options] > plan.txt`, "
            "with the measured run's --cores: Snakemake prints each job's threads capped at them) and each "
            "job's seconds from its benchmark file, then print, for each number of cores, the wall time "
            "of a greedy schedule of the DAG (priority, then longest remaining chain; a stand-in for "
            "Snakemake's) "
            "and its two lower bounds (summed job time over the cores; the critical path), and the "
            "critical path's jobs. A projection: each job is assumed to take what it took in the run."
        ),
    )
    w.add_argument("plan", help="the dry run's output (a file, or - for standard input)")
    w.add_argument(
        "--root",
        default=".",
        help="the directory of the tree that ran the plan's config (the plan's paths are relative to it; "
        "default: the current one)",
    )
    w.add_argument(
        "--cores", type=int, nargs="+", default=[2, 4, 8, 16], help="numbers of cores (default: 2 4 8 16)"
    )
    w.add_argument(
        "--times-seed",
        type=int,
        help="read every seed's job times from this seed's benchmark files (e.g. one run on an idle machine)",
    )
    w.add_argument(
        "--within",
        type=float,
        metavar="MINUTES",
        help="also print the fewest cores whose projected wall time is within this many minutes",
    )
    w.add_argument(
        "--speedup",
        action="append",
        default=[],
        metavar="NAME=FACTOR",
        help="project a lever before it exists: every job of rule NAME at its measured seconds / FACTOR, or, "
        "with NAME train-steps, only the training jobs' optimizer steps (their metrics CSV's step_time; "
        "start-up and evaluations as measured), with train-sampling, train-reward or train-update one part "
        "of those steps, with train-rest the rest of each training job; FACTOR inf: those seconds 0, the "
        "floor (repeatable)",
    )
    w.add_argument(
        "--missing-seconds",
        type=float,
        metavar="SECONDS",
        help="give a job with no benchmark file in any seed this many seconds instead of stopping (a job the "
        "measured run did not have, e.g. the pooling of seeds after a one-seed run); the report names them",
    )
    w.set_defaults(handler=_wall_time)


def _job_server(args: argparse.Namespace) -> int:
    from maxk.workflow.jobserver import serve

    return serve(args.socket, parent=args.parent)


def _wall_time(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from maxk.cli import UserError
    from maxk.workflow.walltime import render

    try:
        text = sys.stdin.read() if args.plan == "-" else Path(args.plan).read_text()
    except OSError as exc:
        raise UserError(f"{args.plan}: cannot read the dry run ({exc.strerror})") from None
    within = None if args.within is None else 60.0 * args.within
    speedups: dict[str, float] = {}
    for spec in args.speedup:
        name, sep, factor = spec.partition("=")
        try:
            speedups[name] = float(factor)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UserError(
                f"--speedup {spec}: expected NAME=FACTOR (e.g. train-steps=2 or generate_shard=inf)"
            )
    try:
        print(
            render(
                text,
                Path(args.root),
                args.cores,
                times_seed=args.times_seed,
                within=within,
                speedups=speedups,
                missing_seconds=args.missing_seconds,
            )
        )
    except ValueError as exc:
        raise UserError(f"{args.plan}: {exc}") from None
    return 0


def _provenance(args: argparse.Namespace) -> int:
    import os

    from maxk.io import write_json
    from maxk.provenance import provenance_record
    from maxk.workflow.allocator import current

    config = json.loads(args.config_json)
    record = provenance_record(config, seeds={"seed": config.get("seed")}, allocator=current(os.environ))
    write_json(args.output, record)
    return 0
