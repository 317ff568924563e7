"""``maxk analyze``: per-problem metrics, tables, significance, figures and the estimator lab.

Registration is cheap (argparse only); numpy/pandas/matplotlib/torch are imported in the handlers.
Every handler takes the ``analysis`` config section as JSON (``--config-json``, as Snakemake passes
it through ``params``) and the master seed, and writes provenance beside its outputs. Input files are
named one by one (``--metrics`` / ``--samples``, each ``.../{model}/{dataset}.parquet`` as the workflow
lays them out, ``maxk.paths``): the rule hands over exactly the inputs it declared, and a
shell glob such as ``results/seed1234/metrics/*/*.parquet`` works by hand; files no table needs are
ignored.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from maxk.paths import LAB_FIGURES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help="metrics, tables, significance tests, figures and the estimator lab",
        description="Analysis stage: everything after scoring (see config/README.md, section analysis).",
    )
    s = p.add_subparsers(dest="analyze_command", metavar="SUBCOMMAND", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--config-json", required=True, help="the analysis config section as JSON")
        q.add_argument("--seed", type=int, default=0, help="master seed (bootstrap, lab)")

    def inputs(q: argparse.ArgumentParser, *, metrics: bool, samples: bool) -> None:
        if metrics:
            q.add_argument(
                "--metrics",
                nargs="*",
                default=[],
                metavar="FILE",
                help="metrics files .../{model}/{dataset}.parquet (`maxk analyze metrics`)",
            )
        if samples:
            q.add_argument(
                "--samples",
                nargs="*",
                default=[],
                metavar="FILE",
                help="samples files .../{model}/{dataset}.parquet (`maxk generate`), for entropy",
            )

    q = s.add_parser("metrics", help="per-problem pass@k and max@k of one scores file")
    common(q)
    q.add_argument("--scores", required=True, help="scores Parquet (problem_id, sample_index, reward, ...)")
    q.add_argument("--output", required=True, help="metrics Parquet to write")
    q.set_defaults(handler=_metrics)

    q = s.add_parser("tables", help="render tables (LaTeX, Markdown, CSV) from metrics files")
    common(q)
    inputs(q, metrics=True, samples=False)
    q.add_argument("--table", required=True, help="table name (analysis.tables, or full_<metric>_<dataset>)")
    q.add_argument("--tex", required=True, help="LaTeX table to write")
    q.add_argument("--md", required=True, help="Markdown table to write")
    q.add_argument("--csv", required=True, help="CSV to write (one row per cell, with its CI)")
    q.set_defaults(handler=_tables)

    q = s.add_parser("stats", help="Wilcoxon best-vs-second p-values (+ Holm) of every table that asks")
    common(q)
    inputs(q, metrics=True, samples=False)
    q.add_argument("--output", required=True, help="CSV to write (a JSON twin is written beside it)")
    q.set_defaults(handler=_stats)

    q = s.add_parser("figure", help="one figure (PDF + PNG)")
    common(q)
    q.add_argument("kind", choices=["passk", "entropy", "maxk"], help="figure 1, figure 2, or max@k curves")
    inputs(q, metrics=True, samples=True)
    q.add_argument("--dataset", help="dataset (default: the one in config, for passk / entropy)")
    q.add_argument(
        "--rescored",
        nargs="*",
        default=[],
        metavar="FILE",
        help="entropy only: re-scored subsamples .../{model}/{dataset}.parquet (`maxk generate rescore`); "
        "with them the three entropy estimates and their gaps go to --estimates-csv and --estimates-md",
    )
    q.add_argument("--estimates-csv", default=None, help="entropy with --rescored: the estimates' CSV")
    q.add_argument("--estimates-md", default=None, help="entropy with --rescored: their Markdown table")
    q.add_argument(
        "--output", nargs="+", required=True, metavar="FILE", help="figure files to write (.pdf and/or .png)"
    )
    q.set_defaults(handler=_figure)

    q = s.add_parser("claims", help="test each of the paper's claims on this run (claims.csv, claims.md)")
    common(q)
    inputs(q, metrics=True, samples=True)
    q.add_argument(
        "--train-metrics",
        nargs="*",
        default=[],
        metavar="CSV",
        help="the runs' training curves (results/seed{seed}/metrics/train/{run}.csv, the run read from the "
        "file name): the instrument run's held-out curve, and every run's held-out and own-prompt "
        "measurements and off-policy regime (the learning table)",
    )
    q.add_argument(
        "--base-model",
        default=None,
        metavar="DIR",
        help="the built base model's directory: its manifest.json's calibration block is reported",
    )
    q.add_argument("--csv", required=True, help="claims CSV to write (one row per claim)")
    q.add_argument("--md", required=True, help="claims Markdown to write (the instrument check first)")
    q.add_argument(
        "--differences",
        default=None,
        metavar="CSV",
        help="also write each tested claim's per-problem differences a - b (claim, problem_id, difference), "
        "and the instrument check's (claims 'instrument': max@1 run - base; 'instrument_heldout': the "
        "held-out rise): what `maxk analyze across-seeds` pools",
    )
    q.add_argument(
        "--learning",
        default=None,
        metavar="CSV",
        help="also write the learning table: each run's own objective on the test set, the held-out pool "
        "and its own training prompts, and the off-policy regime (maxk.analysis.learning)",
    )
    q.add_argument(
        "--yardstick",
        default=None,
        metavar="CSV",
        help="also write the yardstick claims (analysis.claims.yardstick_temperatures: each run against the "
        "base at its best temperature at the run's own objective; columns as --csv, their own Holm family); "
        "claims.md has them either way",
    )
    q.set_defaults(handler=_claims)

    q = s.add_parser(
        "across-seeds",
        help="every claim across several seeds' runs (random-effects t interval), with its figures",
        description="For each claim: each seed's effect and verdict, the seeds where it holds, the pooled "
        "effect with a random-effects t interval over every seed (the spread between seeds pooled over the "
        "claims), read where the "
        "instrument works pooled over them (the instrument check pooled, listed first) and where the runs "
        "it compares raised their objective pooled over them (the pooled learning gate), and the smallest "
        "detectable effect (maxk.analysis.across_seeds). Seeds are read from the paths "
        "(results/seed{seed}/...).",
    )
    common(q)
    q.add_argument("--claims", nargs="+", required=True, metavar="CSV", help="each seed's claims.csv")
    q.add_argument(
        "--differences", nargs="+", required=True, metavar="CSV", help="each seed's claims/differences.csv"
    )
    q.add_argument(
        "--learning",
        nargs="*",
        default=[],
        metavar="CSV",
        help="each seed's claims/learning.csv (optional): with them, each claim pools the seeds where the "
        "runs it compares were measured (and in their regime) and is read where they raised their "
        "objective pooled over those seeds (the pooled learning gate); without, the seeds where it was "
        "read on its own",
    )
    q.add_argument(
        "--yardstick",
        nargs="*",
        default=[],
        metavar="CSV",
        help="each seed's claims/yardstick.csv (optional): pooled into --yardstick-csv and the Markdown's "
        "last section",
    )
    q.add_argument("--yardstick-csv", default=None, help="across-seed CSV of the yardstick claims to write")
    inputs(q, metrics=True, samples=False)
    q.add_argument("--csv", required=True, help="across-seed CSV to write (one row per claim)")
    q.add_argument("--md", required=True, help="across-seed Markdown to write")
    q.add_argument(
        "--curves-figure", nargs="+", required=True, metavar="FILE", help="pass@k and max@k curves with bands"
    )
    q.add_argument("--claims-figure", nargs="+", required=True, metavar="FILE", help="the claims' intervals")
    q.set_defaults(handler=_across_seeds)

    q = s.add_parser("lab", help="estimator lab: bias/variance of the advantage estimators on a toy policy")
    common(q)
    q.add_argument("--onpolicy", required=True, help="on-policy CSV to write")
    q.add_argument("--offpolicy", required=True, help="off-policy CSV to write")
    for name in LAB_FIGURES:
        flag = f"--{name.replace('_', '-')}-figure"
        q.add_argument(flag, nargs="+", required=True, metavar="FILE", help=f"{name} figure files")
    q.set_defaults(handler=_lab)

    q = s.add_parser(
        "contamination",
        help="audit each model's training problems against the evaluation sets (no --config-json)",
        description="Overlap of every model's training problems (trained_on.json) with each audited "
        "dataset, by id, normalised statement, normalised reference and the suite's task key "
        "(maxk.analysis.contamination).",
    )
    q.add_argument(
        "--trained-on",
        nargs="+",
        required=True,
        metavar="FILE",
        help="each model's models/{model}/trained_on.json, one per model (model = its directory's name)",
    )
    q.add_argument(
        "--data",
        nargs="+",
        required=True,
        metavar="FILE",
        help="dataset files {name}.jsonl.gz/.jsonl/.parquet: every dataset trained on or audited",
    )
    q.add_argument("--audit", nargs="+", required=True, metavar="DATASET", help="dataset names to audit")
    q.add_argument("--output", required=True, help="CSV to write (one row per model and audited set)")
    q.add_argument("--markdown", required=True, help="Markdown report to write (table and verdict)")
    q.add_argument(
        "--fail-on-overlap",
        action="store_true",
        help="after writing both outputs, exit 1 if any model overlaps any audited set",
    )
    q.set_defaults(handler=_contamination)

    q = s.add_parser(
        "compare",
        help="paired intervals of runs against the base model (probes and variants; no --config-json)",
        description="For each RUN: max@1, pass@1, pass@K, max@K (K = the largest k of the metrics files) "
        "with run - reference and its paired bootstrap interval over problems, and the held-out curve's "
        "per-problem rise (maxk.analysis.compare). Reads RESULTS/metrics/{run}/{dataset}.parquet and "
        "RESULTS/metrics/train/{run}.csv of one seed's results (RESULTS = results/seed{seed}); prints "
        "Markdown.",
    )
    q.add_argument("runs", nargs="+", metavar="RUN", help="run names (RESULTS/metrics/{run}/)")
    q.add_argument(
        "--results",
        action="append",
        default=None,
        help="one seed's results directory, results/seed{seed} (default: the only one under results/); "
        "repeat it for several seeds: each seed's table, then every effect pooled over them (random-"
        "effects t interval)",
    )
    q.add_argument("--dataset", default="suite_test", help="evaluation set (default: suite_test)")
    q.add_argument("--reference", default="base", help="the model compared against (default: base)")
    q.add_argument("--metric", action="append", help="metric column (repeatable; default: see above)")
    q.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    q.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: 10000)")
    q.add_argument(
        "--sd",
        action="store_true",
        help="also print the standard deviation of each per-problem difference (it sets the interval's "
        "width: e.g. the same runs sampled with and without generate.common_random_numbers)",
    )
    q.set_defaults(handler=_compare)

    q = s.add_parser(
        "learning",
        help="what named runs learned, as the claims job reads it, from one seed's results or several "
        "(no --config-json)",
        description="For each RUN: its own objective on the unseen test set (run - base, paired interval, "
        "the smallest effect it detects, the paper's own effect), on the held-out pool and on its own "
        "training prompts (last - first), its off-policy regime, the base at its best temperature, and why "
        "a claim on it could not be read (maxk.analysis.learning: the claims job's learning.csv, for any "
        "run, a probe's included). The runs' settings come from the config files (--configfile, as given "
        "to snakemake: a probe's overlay names its runs); the bootstrap seed is the results directory's. "
        "With several --results, the across-seed report's per-run section for these runs instead "
        "(maxk.analysis.across_seeds.render_learning_across_seeds).",
    )
    q.add_argument("runs", nargs="+", metavar="RUN", help="run names (RESULTS/metrics/{run}/)")
    q.add_argument(
        "--results",
        action="append",
        default=None,
        help="one seed's results directory, results/seed{seed} (default: the only one under results/); "
        "repeat it for several seeds: each seed's table is computed as for one, then printed as the "
        "across-seed report's per-run section: each seed's test-set effect (bold: above zero) and regime, "
        "each part pooled over the seeds that measured it (random-effects t interval, the seed spread "
        "pooled over the RUNs named here, and the detectable effect; confidence and power of the config's "
        "claims), the runs' spread between seeds, and per run on how many seeds its test-set interval is "
        "above zero; a RUN without metrics on a seed is not measured there",
    )
    q.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        metavar="FILE",
        help="the config files the runs were trained with, in snakemake's order "
        "(default: config/config.yaml)",
    )
    q.add_argument(
        "--csv",
        default=None,
        help="also write the table (learning.csv's columns) here; with several --results, every seed's "
        "rows, a first column `seed` naming each row's",
    )
    q.set_defaults(handler=_learning)

    q = s.add_parser(
        "side-by-side",
        help="two or more results trees' verdicts side by side: what flips with other bytes "
        "(no --config-json)",
        description="For the seeds every tree has: each run's test-set reading of its own objective, per "
        "seed and, on two shared seeds or more, pooled over them (the claims' pooled learning gate, with the "
        "interval settings of a tree's across-seed report), each claim's and yardstick claim's verdict per "
        "seed and, where every tree has an across-seed report, pooled; a row flips when its verdict's kind "
        "(or whether a run learned) differs between the trees, a claim's flip shown with each tree's p-value "
        "(Holm-adjusted where it has one: p-values on both sides of the level mark a claim at the "
        "threshold) (maxk.analysis.side_by_side). E.g. the "
        "default run twice, once under ATEN_CPU_CAPABILITY=default. Each tree's counts by verdict kind "
        "come first. "
        "Prints Markdown, or writes it with --md.",
    )
    q.add_argument("results", nargs="+", metavar="RESULTS", help="results directories (a run's results/)")
    q.add_argument(
        "--label", action="append", help="a name per RESULTS, in order (default: its parent directory's name)"
    )
    q.add_argument("--md", default=None, help="Markdown file to write (default: print)")
    q.add_argument("--decimals", type=int, default=3, help="decimals of the effects (default: 3)")
    q.set_defaults(handler=_side_by_side)

    q = s.add_parser(
        "bases",
        help="the base models of results trees and base directories, one row each (no --config-json)",
        description="One row per base model: each results/seed{seed}/models/base of every RESULTS directory "
        "(in seed order), or a base model directory named directly (e.g. the shipped models/base): the "
        "SHA-256 of its model.safetensors, its ATen kernel path, pass@1, mean reward and sharpen gain of its "
        "manifest.json, the calibration items it misses, and, where its seed's directory has them, the mean "
        "SFT loss over the last 100 steps of its curve (metrics/train/base.csv) and the RL prompts its "
        "prompt filter kept (data/{dataset}.edge.manifest.json) (maxk.analysis.bases). Prints Markdown, or "
        "writes it with --md.",
    )
    q.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        help="results directories (a run's results/, every seed*/models/base in it) or base model "
        "directories (holding manifest.json)",
    )
    q.add_argument(
        "--label",
        action="append",
        help="a name per RESULTS, in order (default: a results directory's parent directory's name, a base "
        "directory's path)",
    )
    q.add_argument("--md", default=None, help="Markdown file to write (default: print)")
    q.add_argument(
        "--csv", default=None, help="also write the rows as CSV (the full SHA-256, values as recorded)"
    )
    q.add_argument(
        "--rl-dataset",
        default="suite_rl",
        help="the RL pool whose edge-of-competence prompts are counted (train.dataset; default: suite_rl)",
    )
    q.add_argument("--decimals", type=int, default=3, help="decimals of the values (default: 3)")
    q.set_defaults(handler=_bases)


def _cfg(args: argparse.Namespace) -> dict:
    from maxk.cli import UserError

    try:
        cfg = json.loads(args.config_json)
    except json.JSONDecodeError as exc:
        raise UserError(f"--config-json is not valid JSON: {exc}") from exc
    if not isinstance(cfg, dict):
        raise UserError("--config-json must be a JSON object (the analysis config section)")
    from maxk.config import ConfigError, with_defaults

    runs = cfg.pop("runs", None)  # the claims slice: each run's settings, validated by the workflow
    try:  # the keys of the section the rule passed, each key it leaves out at its schema default
        section = with_defaults("analysis", cfg)
    except ConfigError as exc:
        raise UserError(f"--config-json: {exc}") from None
    return section if runs is None else {**section, "runs": runs}


def _metrics(args: argparse.Namespace) -> int:
    import pandas as pd

    from maxk.analysis.per_problem import compute_metrics, reward_matrix, write_metrics
    from maxk.cli import UserError
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    path = Path(args.scores)
    if not path.exists():
        raise UserError(f"{path}: scores file not found")
    scores = pd.read_parquet(path, columns=["problem_id", "sample_index", "reward"])
    try:
        mat = reward_matrix(scores, ragged=cfg["ragged"], source=str(path))
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    frame = compute_metrics(mat, cfg["ks"])
    meta = {
        "source": str(path),
        "n": mat.n,
        "problems": len(frame),
        "dropped_samples": mat.dropped_samples,
        "notes": mat.notes,
    }
    write_metrics(args.output, frame, meta=meta)
    sub = {k: cfg.get(k) for k in ("ks", "ragged")}
    write_provenance(args.output, config=sub, seeds=None, **meta)
    print(
        f"{args.output}: {len(frame)} problems, n={mat.n}"
        + (f" ({'; '.join(mat.notes)})" if mat.notes else "")
    )
    return 0


def _files(files: list[str], pairs, kind: str, flag: str) -> dict:
    """``{(model, dataset): path}`` of every pair in ``pairs``, from the files given (any order);
    UserError naming the pairs no file covers."""
    from maxk.cli import UserError
    from maxk.paths import pair_of

    given = {pair_of(f): Path(f) for f in files}
    wanted = sorted(set(pairs))
    missing = [f"{m}/{d}" for m, d in wanted if (m, d) not in given]
    if missing:
        raise UserError(
            f"no {kind} file given for {', '.join(missing)}: pass {flag} .../{{model}}/{{dataset}}.parquet"
            + (" (written by `maxk analyze metrics`)" if kind == "metrics" else "")
        )
    for pair in wanted:
        if not given[pair].exists():
            raise UserError(f"{given[pair]}: {kind} file not found")
    return {pair: given[pair] for pair in wanted}


def _load_frames(files: list[str], pairs) -> dict:
    from maxk.analysis.per_problem import read_metrics

    return {pair: read_metrics(path) for pair, path in _files(files, pairs, "metrics", "--metrics").items()}


def _load_entropy_samples(files: list[str], pairs) -> dict:
    import pandas as pd

    columns = ["problem_id", "mean_entropy", "entropy_kind", "sum_logprob", "num_tokens"]
    found = _files(files, pairs, "samples", "--samples")
    return {pair: pd.read_parquet(path, columns=columns) for pair, path in found.items()}


def _labels(cfg: dict) -> dict:
    return {m: v for m, v in (cfg.get("models") or {}).items()}


def _build(cfg: dict, seed: int, spec, frames):
    from maxk.analysis.tables import build_table

    sig, boot = cfg["significance"], cfg["bootstrap"]
    return build_table(
        spec,
        frames,
        seed=seed,
        resamples=int(boot["resamples"]),
        confidence=float(boot["confidence"]),
        alternative=sig["alternative"],
        zero_method=sig["zero_method"],
        alpha=float(sig["alpha"]),
        star_correction=sig["star"],
    )


def _selected_specs(cfg: dict, names: list[str] | None):
    from maxk.analysis.tables import table_specs
    from maxk.cli import UserError

    specs = table_specs(cfg)
    if names:
        known = {s.name: s for s in specs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UserError(f"unknown table(s) {unknown}; declared: {sorted(known)}")
        specs = [known[n] for n in names]
    return specs


def _tables(args: argparse.Namespace) -> int:
    from maxk.analysis.tables import render_csv, render_latex, render_markdown
    from maxk.cli import UserError
    from maxk.io import atomic_open
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    labels = _labels(cfg)
    decimals = int(cfg["decimals"])
    (spec,) = _selected_specs(cfg, [args.table])
    frames = _load_frames(args.metrics, spec.pairs)
    try:
        result = _build(cfg, args.seed, spec, frames)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    rows = spec.labels(labels)
    with atomic_open(args.tex) as fh:
        fh.write(render_latex(result, rows, cfg["datasets"], decimals))
    with atomic_open(args.md) as fh:
        fh.write(render_markdown(result, rows, cfg["datasets"], decimals))
    with atomic_open(args.csv) as fh:
        render_csv(result, rows).to_csv(fh, index=False, float_format="%.6g")
    write_provenance(args.tex, config=cfg, seeds={"seed": args.seed})
    print(f"{args.tex}, {args.md}, {args.csv}: {len(spec.rows)} rows x {len(result.columns)} columns")
    return 0


def _stats(args: argparse.Namespace) -> int:
    import pandas as pd

    from maxk.cli import UserError
    from maxk.io import atomic_open, write_json
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    tests = []
    for spec in _selected_specs(cfg, None):
        if not spec.significance:
            continue
        frames = _load_frames(args.metrics, spec.pairs)
        try:
            tests += _build(cfg, args.seed, spec, frames).tests
        except ValueError as exc:
            raise UserError(str(exc)) from exc
    columns = [
        "table",
        "dataset",
        "metric",
        "k",
        "k_requested",
        "best",
        "second",
        "best_value",
        "second_value",
        "n_problems",
        "statistic",
        "pvalue",
        "pvalue_holm",
        "star_uses",
        "significant",
        "alternative",
        "zero_method",
        "note",
    ]
    frame = pd.DataFrame(tests, columns=columns)
    with atomic_open(args.output) as fh:
        frame.to_csv(fh, index=False, float_format="%.6g")
    json_path = Path(args.output).with_suffix(".json")
    write_json(json_path, json.loads(frame.to_json(orient="records")))
    write_provenance(args.output, config=cfg, seeds={"seed": args.seed})
    print(f"{args.output}: {len(frame)} tests")
    return 0


def _figure(args: argparse.Namespace) -> int:
    from maxk.analysis.figures import curve_figure, entropy_figure
    from maxk.cli import UserError
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    labels = _labels(cfg)
    figs = cfg.get("figures", {})
    boot = cfg["bootstrap"]
    bkw = {
        "seed": args.seed,
        "resamples": int(boot["resamples"]),
        "confidence": float(boot["confidence"]),
    }
    if args.kind in ("passk", "maxk"):
        if args.kind == "passk":
            fc = figs["passk"]
            dataset, models, metric = args.dataset or fc["dataset"], fc["models"], fc["metric"]
        else:
            fc = figs["maxk_curves"]
            if not args.dataset:
                raise UserError("--dataset is required for maxk curves")
            dataset, models, metric = args.dataset, fc["models"], "max"
        frames = _load_frames(args.metrics, [(m, dataset) for m in models])
        ds_label = cfg["datasets"].get(dataset, {}).get("label", dataset)
        try:
            curve_figure(
                {m: frames[(m, dataset)] for m in models},
                labels,
                metric,
                args.output,
                title=ds_label,
                **bkw,
            )
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        extra = {}
    else:
        fc = figs["entropy"]
        dataset = args.dataset or fc["dataset"]
        found = _load_entropy_samples(args.samples, [(m, dataset) for m in fc["models"]])
        samples = {m: found[(m, dataset)] for m in fc["models"]}
        if args.rescored and not (args.estimates_csv and args.estimates_md):
            raise UserError("--rescored needs --estimates-csv and --estimates-md (where the estimates go)")
        kind, _ = entropy_figure(
            samples, labels, args.output, title=cfg["datasets"].get(dataset, {}).get("label", dataset)
        )
        extra = {"entropy_kind": kind}
        if args.rescored:
            extra["estimates"] = _entropy_estimates(args, fc["models"], dataset, labels, bkw)
    write_provenance(args.output[0], config=cfg, seeds={"seed": args.seed}, **extra)
    print(f"{', '.join(args.output)} written")
    return 0


def _entropy_estimates(
    args: argparse.Namespace, models: list[str], dataset: str, labels: dict, bkw: dict
) -> list[str]:
    """Write ``--estimates-csv`` and ``--estimates-md`` from the re-scored files; return their paths."""
    import pandas as pd

    from maxk.analysis.figures import entropy_estimates, render_entropy_estimates
    from maxk.io import atomic_path

    pairs = [(m, dataset) for m in models]

    found = {
        m: pd.read_parquet(path)
        for (m, _), path in _files(args.rescored, pairs, "re-scored", "--rescored").items()
    }
    table = entropy_estimates({m: found[m] for m in models}, **bkw)
    csv, md = Path(args.estimates_csv), Path(args.estimates_md)
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(md) as tmp:
        Path(tmp).write_text(
            render_entropy_estimates(table, labels, confidence=bkw["confidence"]), encoding="utf-8"
        )
    return [str(csv), str(md)]


def _claims(args: argparse.Namespace) -> int:
    from maxk.analysis.claims import (
        READ,
        claim_inputs,
        evaluate_claims,
        heldout_curve,
        heldout_endpoints,
        instrument_check,
        render_claims_markdown,
        render_yardstick,
        yardstick_claims,
    )
    from maxk.analysis.figures import entropy_per_problem
    from maxk.analysis.learning import gates, learning_table, render_learning
    from maxk.analysis.paper_results import paper_lookup
    from maxk.cli import UserError
    from maxk.io import atomic_open
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    if "claims" not in cfg:
        raise UserError("the analysis config has no `claims` section (see config/README.md#analysis)")
    metric_pairs, sample_pairs = claim_inputs(cfg)
    metrics = _load_frames(args.metrics, metric_pairs)
    samples = _load_entropy_samples(args.samples, sample_pairs)
    kind, entropy = entropy_per_problem(samples) if samples else ("none", {})
    import pandas as pd

    train_frames = {Path(f).stem: pd.read_csv(f) for f in args.train_metrics}
    train_frame = train_frames.get(cfg["claims"]["instrument_run"])
    curve = heldout_curve(train_frame) if train_frame is not None else None
    endpoints = heldout_endpoints(train_frame) if train_frame is not None else None
    manifest = Path(args.base_model or "", "manifest.json")
    calibration = json.loads(manifest.read_text()).get("calibration") if args.base_model else None
    differences: dict = {}
    try:
        instrument = instrument_check(
            cfg, metrics, seed=args.seed, curve=curve, endpoints=endpoints, calibration=calibration,
            differences=differences,
        )  # fmt: skip
        learning = learning_table(
            cfg, metrics, train_frames, seed=args.seed, differences=differences, paper_lookup=paper_lookup
        )
        frame = evaluate_claims(
            cfg,
            metrics,
            entropy,
            seed=args.seed,
            paper_lookup=paper_lookup,
            instrument_works=instrument["works"],
            differences=differences,
            gates=gates(learning),
        )
        yardstick = yardstick_claims(cfg)
        tempered = None
        if yardstick:
            tempered = evaluate_claims(
                cfg, metrics, seed=args.seed, claims=yardstick, instrument_works=instrument["works"],
                differences=differences,
            )  # fmt: skip
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.yardstick and tempered is None:
        raise UserError("--yardstick: analysis.claims.yardstick_temperatures is empty: no yardstick to write")
    sig, boot = cfg["significance"], cfg["bootstrap"]
    power = float(cfg["claims"]["power"])
    if args.differences:
        from maxk.analysis.across_seeds import differences_frame

        with atomic_open(args.differences) as fh:
            differences_frame(differences).to_csv(fh, index=False, float_format="%.9g")
    if args.learning:
        with atomic_open(args.learning) as fh:
            learning.to_csv(fh, index=False, float_format="%.6g")
    if args.yardstick:
        with atomic_open(args.yardstick) as fh:
            tempered.to_csv(fh, index=False, float_format="%.6g")
    with atomic_open(args.csv) as fh:
        frame.to_csv(fh, index=False, float_format="%.6g")
    style = {"alpha": float(sig["alpha"]), "confidence": float(boot["confidence"]), "power": power}
    with atomic_open(args.md) as fh:
        fh.write(
            render_claims_markdown(
                frame,
                int(cfg["decimals"]),
                **style,
                instrument=instrument,
                learning=render_learning(
                    learning,
                    int(cfg["decimals"]),
                    confidence=style["confidence"],
                    power=power,
                    paper_dataset=cfg["claims"].get("paper_dataset"),
                ),
            )
        )
        if tempered is not None:
            fh.write("\n" + render_yardstick(tempered, int(cfg["decimals"]), **style))
    write_provenance(
        args.csv, config=cfg, seeds={"seed": args.seed}, entropy_kind=kind, instrument=instrument
    )
    held = int(frame["holds"].sum())
    works = "works" if instrument["works"] else f"NOT WORKING ({instrument['reason']})"
    read = int(frame["verdict"].isin(READ).sum())
    print(f"{args.csv}, {args.md}: instrument {works}; {held} of {read} read claims hold "
          f"({len(frame) - read} of {len(frame)} not read)")  # fmt: skip
    if not learning.empty:
        columns = ["run", "objective", "test_effect", "test_ci_low", "learned", "gate"]
        print(learning[columns].to_string(index=False))
    print(frame[["id", "effect", "ci_low", "ci_high", "pvalue_holm", "verdict"]].to_string(index=False))
    if tempered is not None:
        print(tempered[["id", "b", "effect", "ci_low", "ci_high", "verdict"]].to_string(index=False))
    return 0


def _by_seed(files: list[str], what: str) -> dict[int, str]:
    """``{seed: file}`` of per-seed files (``results/seed{seed}/...``), in the order given."""
    from maxk.cli import UserError
    from maxk.paths import seed_of

    out: dict[int, str] = {}
    for f in files:
        try:
            s = seed_of(f)
        except ValueError as exc:
            raise UserError(f"{what}: {exc}") from None
        if s in out:
            raise UserError(f"{what}: two files of seed {s}: {out[s]} and {f}")
        out[s] = f
    return out


def _gating(learning: dict, claims: Sequence) -> dict:
    """``across_seeds``'s pooled learning gate: each seed's learning table and each claim's gated runs
    (nothing without ``--learning``: the per-seed rule)."""
    return {"learning": learning, "gated": {c.id: c.gated_runs() for c in claims}} if learning else {}


def _across_seeds(args: argparse.Namespace) -> int:
    import pandas as pd

    from maxk.analysis.across_seeds import (
        DIFFERENCE_COLUMNS,
        across_seeds,
        claims_figure,
        curve_bands,
        curves_figure,
        learning_across_seeds,
        learning_spreads,
        render_across_seeds,
        render_yardstick_across_seeds,
    )
    from maxk.analysis.claims import paper_claims, yardstick_claims
    from maxk.analysis.per_problem import parse_metric_column
    from maxk.cli import UserError
    from maxk.io import atomic_open
    from maxk.paths import pair_of, seed_of
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    if "claims" not in cfg:
        raise UserError("the analysis config has no `claims` section (see config/README.md#analysis)")
    claims_files = _by_seed(args.claims, "--claims")
    diff_files = _by_seed(args.differences, "--differences")
    if set(claims_files) != set(diff_files):
        raise UserError(
            f"--claims of seeds {sorted(claims_files)}, --differences of seeds {sorted(diff_files)}"
        )
    claims = {s: pd.read_csv(f) for s, f in claims_files.items()}
    differences = {}
    for s, f in diff_files.items():
        frame = pd.read_csv(f, dtype={"problem_id": str})
        missing = [c for c in DIFFERENCE_COLUMNS if c not in frame.columns]
        if missing:
            raise UserError(
                f"{f}: missing column(s) {missing} (written by `maxk analyze claims --differences`)"
            )
        differences[s] = frame
    boot, sig, ccfg = cfg["bootstrap"], cfg["significance"], cfg["claims"]
    confidence = float(boot["confidence"])
    yardstick_files = _by_seed(args.yardstick, "--yardstick")
    if yardstick_files and set(yardstick_files) != set(claims_files):
        raise UserError(
            f"--claims of seeds {sorted(claims_files)}, --yardstick of seeds {sorted(yardstick_files)}"
        )
    if bool(yardstick_files) != bool(args.yardstick_csv):
        raise UserError("--yardstick and --yardstick-csv go together")
    pooled = {"confidence": confidence, "alpha": float(sig["alpha"]), "power": float(ccfg["power"])}
    learning = {s: pd.read_csv(f) for s, f in _by_seed(args.learning, "--learning").items()}
    if learning and set(learning) != set(claims_files):
        raise UserError(f"--claims of seeds {sorted(claims_files)}, --learning of seeds {sorted(learning)}")
    try:
        table = across_seeds(claims, differences, **pooled, **_gating(learning, paper_claims(cfg)))
        yardstick = None
        if yardstick_files:
            frames = {s: pd.read_csv(f) for s, f in yardstick_files.items()}
            gating = _gating(learning, yardstick_claims(cfg))
            yardstick = across_seeds(frames, differences, **pooled, **gating)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    table.attrs["learning"] = learning_across_seeds(
        learning, differences, confidence=confidence, power=float(ccfg["power"])
    )
    table.attrs["learning_spreads"] = learning_spreads(differences)
    with atomic_open(args.csv) as fh:
        table.to_csv(fh, index=False, float_format="%.6g")
    if yardstick is not None:
        with atomic_open(args.yardstick_csv) as fh:
            yardstick.to_csv(fh, index=False, float_format="%.6g")
    with atomic_open(args.md) as fh:
        power = float(ccfg["power"])
        fh.write(render_across_seeds(table, int(cfg["decimals"]), confidence=confidence, power=power))
        if yardstick is not None:
            fh.write(render_yardstick_across_seeds(yardstick, int(cfg["decimals"]), confidence=confidence,
                                                   power=power))  # fmt: skip
    metrics: dict[int, dict[str, pd.DataFrame]] = {}
    for f in args.metrics:
        model, _ = pair_of(f)
        frame = pd.read_parquet(f).sort_values("problem_id", kind="stable")
        metrics.setdefault(seed_of(f), {})[model] = frame
    frames = [m for by in metrics.values() for m in by.values()]
    columns = sorted({c for m in frames for c in m.columns if parse_metric_column(c)})
    bands = curve_bands(metrics, columns, confidence=confidence)
    curves_figure(bands, cfg.get("models") or {}, args.curves_figure, dataset=ccfg["dataset"])
    claims_figure(table, args.claims_figure)
    write_provenance(args.csv, config=cfg, seeds={"seed": args.seed, "replicates": list(claims)})
    print(f"{args.csv}, {args.md}: {len(table)} claims across seeds {list(claims)}")
    print(table[["id", "holds_in", "tested_in", "effect", "ci_low", "ci_high"]].to_string(index=False))
    return 0


def _lab(args: argparse.Namespace) -> int:
    from maxk.analysis.lab import plot_lab, run_lab
    from maxk.io import atomic_open
    from maxk.provenance import write_provenance

    cfg = _cfg(args)
    lab = cfg["lab"]
    on, off = run_lab(lab, args.seed)
    for path, frame in ((args.onpolicy, on), (args.offpolicy, off)):
        with atomic_open(path) as fh:
            frame.to_csv(fh, index=False, float_format="%.6g")
    figures = {name: getattr(args, f"{name}_figure") for name in LAB_FIGURES}
    plot_lab(on, off, figures, plot_k=int(lab["plot_k"]), plot_n=int(lab["plot_n"]))
    write_provenance(args.onpolicy, config=lab, seeds={"seed": args.seed})
    print(f"{args.onpolicy} ({len(on)} rows), {args.offpolicy} ({len(off)} rows), figures")
    return 0


def _contamination(args: argparse.Namespace) -> int:
    import csv

    from maxk.analysis.contamination import (
        COLUMNS,
        ContaminationError,
        audit,
        check_datasets,
        check_digest,
        data_files,
        load_trained_on,
        model_name,
        offenders,
        problem_keys,
        render_markdown,
        training_keys,
        verdict,
    )
    from maxk.cli import UserError
    from maxk.data.build import read_problems, records_sha256
    from maxk.data.source import DataError, sha256_file
    from maxk.io import atomic_open
    from maxk.provenance import write_provenance

    try:
        files = data_files(args.data)
        pairs: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        for f in args.trained_on:
            model = model_name(f)
            if model in pairs:
                raise UserError(f"two trained_on files for model {model!r}: {pairs[model][0]} and {f}")
            pairs[model] = (f, load_trained_on(f))
            check_datasets(pairs[model][1], files, f)
        missing = [a for a in args.audit if a not in files]
        if missing:
            raise UserError(
                f"--audit {', '.join(missing)}: no --data file for it (--data: {', '.join(sorted(files))})"
            )
        if len(set(args.audit)) != len(args.audit):
            raise UserError(f"--audit names a dataset twice: {args.audit}")
        needed = sorted({d for _, ps in pairs.values() for d, _ in ps} | set(args.audit))
        for name in needed:
            if not files[name].exists():
                raise UserError(f"{files[name]}: data file not found")
        problems = {name: read_problems(files[name]) for name in needed}

        def digest_of(name: str) -> str | None:
            if name not in problems and name in files and files[name].exists():
                problems[name] = read_problems(files[name])
            return records_sha256(problems[name]) if name in problems else None

        for f, _ in pairs.values():
            check_digest(f, digest_of)
        keys = {name: problem_keys(name, problems[name]) for name in needed}
        trained = {m: training_keys(ps, keys, f) for m, (f, ps) in pairs.items()}
        rows = audit(trained, {a: list(keys[a].values()) for a in args.audit})
    except (ContaminationError, DataError) as exc:
        raise UserError(str(exc)) from exc
    with atomic_open(args.output, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(r.as_dict() for r in rows)
    with atomic_open(args.markdown) as fh:
        fh.write(render_markdown(rows))
    bad = offenders(rows)
    write_provenance(
        args.output,
        config={"audit": list(args.audit), "fail_on_overlap": bool(args.fail_on_overlap)},
        seeds=None,
        trained_on={m: {"path": f, "sha256": sha256_file(f)} for m, (f, _) in sorted(pairs.items())},
        data={n: {"path": str(files[n]), "sha256": sha256_file(files[n])} for n in needed},
        markdown=str(args.markdown),
        offenders=[list(b) for b in bad],
    )
    print(f"{args.output}, {args.markdown}: {len(pairs)} models x {len(args.audit)} audited sets")
    print(verdict(rows))
    if args.fail_on_overlap and bad:
        raise UserError(
            "training overlaps audited sets (--fail-on-overlap): "
            + ", ".join(f"{m} on {a}: {n}" for m, a, n in bad)
        )
    return 0


def _learning(args: argparse.Namespace) -> int:
    from maxk.analysis.learning import claims_config, render_learning
    from maxk.cli import UserError
    from maxk.config import ConfigError, load_config
    from maxk.paths import seed_of

    roots = [Path(r) for r in args.results] if args.results else [_only_seed_dir()]
    seeds: dict[int, Path] = {}
    try:
        for root in roots:
            seed = seed_of(str(root.resolve()))
            if seed in seeds:
                raise UserError(f"--results: two directories of seed {seed}: {seeds[seed]} and {root}")
            seeds[seed] = root
        config = load_config(*args.configfile)
    except (ValueError, ConfigError) as exc:
        raise UserError(f"--results/--configfile: {exc}") from exc
    cfg = claims_config(config)
    files = " ".join(args.configfile) or "config/config.yaml"
    unknown = [r for r in args.runs if r not in cfg["runs"]]
    if unknown:
        raise UserError(
            f"{unknown}: no such run in {files} (a probe's runs: add its overlay with --configfile)"
        )
    if len(seeds) > 1:
        return _learning_across_seeds(args, cfg, seeds)
    ((seed, root),) = seeds.items()
    table = _learning_of_seed(cfg, root, seed, args.runs, every_run=True)
    if args.csv:
        from maxk.io import atomic_open

        with atomic_open(args.csv) as fh:
            table.to_csv(fh, index=False, float_format="%.6g")
    boot = cfg["bootstrap"]
    lines = render_learning(table, int(cfg["decimals"]), confidence=float(boot["confidence"]),
                            power=float(cfg["claims"]["power"]),
                            paper_dataset=cfg["claims"].get("paper_dataset"))  # fmt: skip
    print("\n".join(lines))
    return 0


def _learning_of_seed(
    cfg: dict, root: Path, seed: int, runs: Sequence[str], *, every_run: bool, differences: dict | None = None
):
    """One seed's learning table of ``runs`` (``learning_table`` on the claims' config ``cfg``, the seed's
    metrics under ``root``), ``differences`` filled as the claims job fills it. ``every_run``: a run
    without test-set metrics is an error; else its test set is left not measured (the base's never is)."""
    import pandas as pd

    from maxk.analysis.learning import learning_table, yardstick_models
    from maxk.analysis.paper_results import paper_lookup
    from maxk.cli import UserError
    from maxk.paths import BASE

    dataset = cfg["claims"]["dataset"]

    def metrics(model: str) -> pd.DataFrame | None:
        path = root / "metrics" / model / f"{dataset}.parquet"
        return _read_table(path, pd.read_parquet) if path.exists() else None

    frames = {(m, dataset): metrics(m) for m in (BASE, *runs, *yardstick_models(cfg))}
    missing = [m for (m, _), f in frames.items() if f is None and m in (BASE, *runs)]
    if missing and every_run:
        raise UserError(
            f"{root}/metrics: no {dataset} metrics of {missing} (run the pipeline up to them first)"
        )
    if BASE in missing:
        path = root / "metrics" / BASE / f"{dataset}.parquet"
        raise UserError(f"{path}: not found: seed {seed} has no base metrics (run the pipeline up to them)")
    if any(f is None for f in frames.values()):  # the yardstick's models not generated here: no yardstick
        cfg = {**cfg, "claims": {**cfg["claims"], "yardstick_temperatures": []}}
    csvs = {r: root / "metrics" / "train" / f"{r}.csv" for r in runs}
    train = {r: _read_table(f, pd.read_csv) for r, f in csvs.items() if f.exists()}
    cfg = {**cfg, "models": {m: m for m in (BASE, *runs)}, "runs": {r: cfg["runs"][r] for r in runs}}
    found = {k: f for k, f in frames.items() if f is not None}
    try:
        table = learning_table(
            cfg, found, train, seed=seed, differences=differences, paper_lookup=paper_lookup
        )
    except ValueError as exc:
        raise UserError(f"{root}: {exc}" if not every_run else str(exc)) from exc
    return table


def _read_table(path: Path, reader):
    """``reader(path)``, a file that cannot be read named in the error."""
    from maxk.cli import UserError

    try:
        return reader(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid and pandas' ParserError are ValueErrors
        raise UserError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from exc


def _learning_across_seeds(args: argparse.Namespace, cfg: dict, seeds: dict[int, Path]) -> int:
    """``maxk analyze learning`` on several seeds: each seed's table as on one, then the across-seed
    report's per-run section of those runs (``render_learning_across_seeds``, with the runs' spread) and
    on how many seeds each run learned (``render_learned_in``)."""
    import pandas as pd

    from maxk.analysis.across_seeds import (
        differences_frame,
        learning_across_seeds,
        learning_spreads,
        render_learned_in,
        render_learning_across_seeds,
    )
    from maxk.cli import UserError

    dataset = cfg["claims"]["dataset"]
    absent = [str(root) for root in seeds.values() if not root.is_dir()]
    if absent:
        raise UserError(f"--results {', '.join(absent)}: no such directory")

    def anywhere(run: str) -> bool:
        return any((root / "metrics" / run / f"{dataset}.parquet").exists() for root in seeds.values())

    never = [r for r in args.runs if not anywhere(r)]
    if never:
        listed = ", ".join(str(r) for r in seeds.values())
        raise UserError(
            f"no {dataset} metrics of {never} under any --results ({listed}; run the pipeline first)"
        )
    learning, differences = {}, {}
    for seed, root in seeds.items():
        found: dict[str, pd.Series] = {}
        learning[seed] = _learning_of_seed(cfg, root, seed, args.runs, every_run=False, differences=found)
        differences[seed] = differences_frame(found)
    if args.csv:
        from maxk.io import atomic_open

        frame = pd.concat([t.assign(seed=s) for s, t in learning.items()], ignore_index=True)
        frame = frame[["seed", *(c for c in frame.columns if c != "seed")]]
        with atomic_open(args.csv) as fh:
            frame.to_csv(fh, index=False, float_format="%.6g")
    boot, power = cfg["bootstrap"], float(cfg["claims"]["power"])
    rows = learning_across_seeds(learning, differences, confidence=float(boot["confidence"]), power=power)
    decimals, order = int(cfg["decimals"]), list(seeds)
    lines = render_learning_across_seeds(rows, order, decimals, learning_spreads(differences))
    print("\n".join([*lines, *render_learned_in(rows, order)]))
    return 0


def _only_seed_dir() -> Path:
    """The one seed's directory under results/ (``maxk.paths.seed_dir``), or a clear error."""
    from maxk.cli import UserError
    from maxk.paths import seed_dir

    found = sorted(Path().glob(seed_dir("*")))
    if len(found) != 1:
        listed = ", ".join(map(str, found)) or "none"
        raise UserError(f"--results: name one seed's results directory ({seed_dir('SEED')}; found: {listed})")
    return found[0]


def _compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from maxk.analysis.compare import (
        compare_runs,
        default_metrics,
        heldout_rise,
        pool_runs,
        render_comparison,
        render_pooled,
    )
    from maxk.cli import UserError

    roots = [Path(r) for r in args.results] if args.results else [_only_seed_dir()]
    per_seed, metrics = [], args.metric
    for root in roots:

        def metrics_file(run: str, root: Path = root) -> Path:
            path = root / "metrics" / run / f"{args.dataset}.parquet"
            if not path.exists():
                raise UserError(
                    f"{path}: no metrics of {run} on {args.dataset} (run the pipeline up to it first)"
                )
            return path

        reference = pd.read_parquet(metrics_file(args.reference))
        runs = {run: pd.read_parquet(metrics_file(run)) for run in args.runs}
        metrics = metrics or default_metrics(reference)
        try:
            table = compare_runs(reference, runs, metrics, seed=args.seed, resamples=args.resamples)
        except ValueError as exc:
            raise UserError(f"{root}: {exc}") from exc
        curves = {}
        for run in args.runs:
            csv = root / "metrics" / "train" / f"{run}.csv"
            frame = pd.read_csv(csv) if csv.exists() else None
            boot = {"seed": args.seed, "resamples": args.resamples}
            curves[run] = None if frame is None else heldout_rise(frame, **boot)
        if len(roots) > 1:
            print(f"## {root}\n")
        print(render_comparison(table, curves, sd=args.sd), end="")
        per_seed.append((reference, runs))
    if len(roots) > 1:
        try:
            pooled = pool_runs(per_seed, metrics)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        print("\n## pooled\n")
        print(render_pooled(pooled, [str(r) for r in roots]), end="")
    return 0


def _side_by_side(args: argparse.Namespace) -> int:
    from maxk.analysis.side_by_side import read_tree, render
    from maxk.cli import UserError

    if len(args.results) < 2:
        raise UserError("side-by-side: give two or more RESULTS directories")
    labels = args.label or [Path(r).resolve().parent.name for r in args.results]
    if len(labels) != len(args.results):
        raise UserError(f"side-by-side: {len(args.results)} RESULTS but {len(labels)} --label")
    try:
        text = render([read_tree(Path(r)) for r in args.results], labels, decimals=args.decimals)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.md:
        from maxk.io import atomic_open

        with atomic_open(args.md) as f:  # nothing half-written on failure
            f.write(text)
        print(f"wrote {args.md}")
    else:
        print(text, end="")
    return 0


def _bases(args: argparse.Namespace) -> int:
    import csv
    import sys

    from maxk.analysis.bases import COLUMNS, base_rows, csv_record, render_markdown
    from maxk.cli import UserError
    from maxk.io import atomic_open

    if args.label and len(args.label) != len(args.results):
        raise UserError(f"bases: {len(args.results)} RESULTS but {len(args.label)} --label")
    try:
        rows = base_rows(args.results, args.label, rl_dataset=args.rl_dataset)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    text = render_markdown(rows, decimals=args.decimals, rl_dataset=args.rl_dataset)
    if args.csv:
        with atomic_open(args.csv, newline="") as fh:  # nothing half-written on failure
            writer = csv.DictWriter(fh, fieldnames=list(COLUMNS), lineterminator="\n")
            writer.writeheader()
            writer.writerows(csv_record(r) for r in rows)
    if args.md:
        with atomic_open(args.md) as fh:
            fh.write(text)
        print(f"wrote {args.md}" + (f" and {args.csv}" if args.csv else ""))
    else:
        print(text, end="")
        if args.csv:  # stdout stays the Markdown
            print(f"wrote {args.csv}", file=sys.stderr)
    return 0
