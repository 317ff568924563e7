"""``maxk score`` (samples Parquet -> scores Parquet) and ``maxk sandbox doctor``.

Cheap to import: the scorer, pyarrow and tqdm are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

SCORE_COLUMNS = ("problem_id", "sample_index", "reward", "passed", "total", "verdicts", "elapsed_s")


def scores_schema() -> Any:
    """The scores Parquet's schema: ``SCORE_COLUMNS`` with their types (pyarrow imported here)."""
    import pyarrow as pa

    string, integer, number = pa.string(), pa.int64(), pa.float64()
    types = (string, integer, number, integer, integer, pa.list_(string), number)
    return pa.schema(list(zip(SCORE_COLUMNS, types, strict=True)))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score generated programs in the sandbox (samples Parquet -> scores Parquet)",
        description="Run every sample's program against its problem's tests in the sandbox and write "
        "per-sample rewards and per-case verdicts, in input order.",
    )
    p.add_argument(
        "--samples", required=True, help="samples Parquet (problem_id, sample_index, program, ...)"
    )
    p.add_argument("--problems", required=True, help="problem records (JSONL, .gz allowed)")
    p.add_argument("--output", required=True, help="scores Parquet to write")
    p.add_argument("--config-json", default="{}", help="the `sandbox` config section as JSON")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="cores available: the number of workers when sandbox.workers is null (default: all)",
    )
    p.add_argument("--shard", default="0/1", help="I/N: score only problems whose position %% N == I")
    p.add_argument(
        "--cache",
        default=None,
        metavar="FOLDER",
        help="share verdicts with other score jobs through FOLDER: run only the (problem, program) pairs "
        "no earlier job recorded there under the same limits, isolation, sandbox code and interpreter, then "
        "record this job's (maxk.sandbox.shared_cache; time, memory and sandbox failures are never shared). "
        "Default: none",
    )
    p.set_defaults(handler=_score)

    sb = sub.add_parser("sandbox", help="sandbox utilities", description="Sandbox utilities.")
    sbsub = sb.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    d = sbsub.add_parser(
        "doctor",
        help="print which isolation layers are active on this machine, and whether training may run",
        description="Start a worker with every layer requested, report what is active and what stays "
        "exposed, and check that a few attacks are stopped. Exits non-zero where the sandbox is below "
        "the config's minimum, an attack is not stopped, or RL training would refuse this sandbox; "
        "submit it to a compute node before a cluster run.",
    )
    src = d.add_mutually_exclusive_group()
    src.add_argument(
        "--configfile",
        nargs="+",
        metavar="FILE",
        help="YAML config files, an overlay after its base, as for snakemake: their `sandbox` section",
    )
    src.add_argument(
        "--config-json", default="{}", help="the `sandbox` config section as JSON ({}: every default)"
    )
    d.set_defaults(handler=_doctor)
    sb.set_defaults(handler=lambda args: sb.print_help() or 2)


def limits_from_config(section: dict[str, Any], workers: int | None = None) -> dict[str, Any]:
    """The ``sandbox`` config section -> keyword arguments of ``Scorer`` (which accepts it as is)."""
    kw = dict(section)
    if workers is not None:
        kw["workers"] = workers
    return kw


def _parse_shard(text: str) -> tuple[int, int]:
    from maxk.cli import UserError

    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError as exc:
        raise UserError(f"--shard must look like I/N, got {text!r}") from exc
    if not (n >= 1 and 0 <= i < n):
        raise UserError(f"--shard {text}: need 0 <= I < N")
    return i, n


def _load_problems(path: str) -> dict[str, dict[str, Any]]:
    from maxk.cli import UserError
    from maxk.data.schema import SchemaError, validate_scorable
    from maxk.io import read_jsonl

    problems: dict[str, dict[str, Any]] = {}
    try:
        for lineno, row in read_jsonl(path):
            record = validate_scorable(row, file=path, row=f"line {lineno}")
            problems[record["id"]] = record
    except SchemaError as exc:
        raise UserError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: {exc}") from exc
    return problems


def _progress(total: int):
    from tqdm import tqdm

    disable = not sys.stderr.isatty() or bool(os.environ.get("CI"))
    return tqdm(total=total, unit="prog", desc="score", file=sys.stderr, disable=disable, smoothing=0.1)


def _score(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from maxk.cli import UserError
    from maxk.config import ConfigError, with_defaults
    from maxk.io import atomic_path
    from maxk.provenance import write_provenance
    from maxk.sandbox import SandboxError, Scorer

    try:
        section = with_defaults("sandbox", json.loads(args.config_json))
    except (json.JSONDecodeError, ConfigError) as exc:
        raise UserError(f"--config-json: {exc}") from None
    shard_i, shard_n = _parse_shard(args.shard)
    problems = _load_problems(args.problems)
    try:
        table = pq.read_table(args.samples, columns=["problem_id", "sample_index", "program"])
    except (OSError, pa.ArrowInvalid, KeyError) as exc:
        raise UserError(
            f"{args.samples}: cannot read columns problem_id, sample_index, program ({exc})"
        ) from exc
    pids = table.column("problem_id").to_pylist()
    idxs = table.column("sample_index").to_pylist()
    programs = table.column("program").to_pylist()
    order = {pid: k for k, pid in enumerate(problems)}
    rows = []
    for r, (pid, idx, prog) in enumerate(zip(pids, idxs, programs, strict=True)):
        if pid not in problems:
            raise UserError(
                f"{args.samples}: row {r} (problem_id {pid!r}, sample {idx}): field 'problem_id' "
                f"not found in {args.problems}"
            )
        if prog is not None and not isinstance(prog, str):
            raise UserError(f"{args.samples}: row {r} (problem_id {pid!r}): field 'program' is not a string")
        if order[pid] % shard_n == shard_i:
            rows.append((pid, idx, prog))
    batch = int(section["batch_size"])
    schema = scores_schema()
    try:
        scorer = Scorer(**limits_from_config(section, section.get("workers") or args.threads))
    except (SandboxError, TypeError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    print(f"sandbox isolation: {scorer.level} {json.dumps(scorer.layers, sort_keys=True)}", file=sys.stderr)
    from maxk.sandbox.judge import Score
    from maxk.sandbox.scorer import problem_key
    from maxk.sandbox.wire import SYNTAX_ERROR

    bar = _progress(len(rows))
    with scorer, atomic_path(args.output) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        # the shared cache's keys (the scorer computes its own): only with --cache; read inside the
        # `with`, so the workers stop whatever happens
        pids = dict.fromkeys(pid for pid, _, _ in rows) if args.cache else {}
        keys = {pid: problem_key(problems[pid]) for pid in pids}
        shared = _shared_cache(args, scorer, keys.values())
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            runnable = [(pid, prog) for pid, _, prog in chunk if prog is not None]
            scores = iter(_score_chunk(scorer, shared, problems, keys, runnable))
            out: dict[str, list] = {c: [] for c in SCORE_COLUMNS}
            for pid, idx, prog in chunk:
                # nothing could be extracted from the completion: every case a syntax error
                n = len(problems[pid]["tests"]["cases"])
                s = next(scores) if prog is not None else Score.from_verdicts([SYNTAX_ERROR] * n, 0.0)
                row = (pid, idx, s.reward, s.passed, s.total, list(s.verdicts), s.elapsed)
                for c, v in zip(SCORE_COLUMNS, row, strict=True):
                    out[c].append(v)
            writer.write_table(pa.table(out, schema=schema))
            bar.update(len(chunk))
            if bar.format_dict.get("elapsed"):
                bar.set_postfix(
                    programs_s=f"{bar.n / bar.format_dict['elapsed']:.0f}", cache_hits=scorer.hits
                )
    bar.close()
    shared_info = None
    if shared is not None:
        shared_info = {"folder": str(shared.folder), "files_read": shared.files_read, "hits": shared.hits,
                       "recorded": len(shared.mine)}  # fmt: skip
        try:
            shared.save()
        except OSError as exc:  # a cache: this job's scores stand without it
            print(f"warning: could not record verdicts in {shared.folder}: {exc}", file=sys.stderr)
    write_provenance(
        args.output,
        config={"sandbox": section},
        isolation={"level": scorer.level, "layers": scorer.layers},
        shard=args.shard,
        rows=len(rows),
        cache_hits=scorer.hits,
        shared_cache=shared_info,
    )
    shared_note = f", {shared.hits} from {shared.folder}" if shared is not None else ""
    print(
        f"scored {len(rows)} samples ({scorer.hits} cache hits{shared_note}) -> {args.output}",
        file=sys.stderr,
    )
    return 0


def _shared_cache(args: argparse.Namespace, scorer: Any, problem_keys: Any) -> Any:
    """``--cache``'s view of its folder for this job (None without it), loaded with the pairs of this
    job's problems; the job's own file is named by its output path."""
    if not args.cache:
        return None
    import hashlib

    from maxk.sandbox.shared_cache import SharedCache, cache_context

    name = hashlib.sha256(os.path.abspath(args.output).encode()).hexdigest()[:16]
    shared = SharedCache(args.cache, cache_context(scorer.limits, scorer.layers), name)
    shared.load(problem_keys)
    return shared


def _score_chunk(
    scorer: Any, shared: Any, problems: dict[str, Any], keys: dict[str, str], pairs: list[tuple[str, str]]
) -> list[Any]:
    """Scores of ``(problem id, program)`` pairs in order: from the shared cache where it has them, else
    run by ``scorer`` (and recorded in the shared cache)."""
    if shared is None:
        return scorer.score([(problems[pid], prog) for pid, prog in pairs])
    out = [shared.lookup(keys[pid], prog) for pid, prog in pairs]
    missing = [i for i, s in enumerate(out) if s is None]
    for i, s in zip(
        missing, scorer.score([(problems[pairs[i][0]], pairs[i][1]) for i in missing]), strict=True
    ):
        out[i] = s
        shared.record(keys[pairs[i][0]], pairs[i][1], s)
    return out


DOCTOR_PROBES = {
    "correct program scores 1": ("def f(x):\n    return x + 1\n", 1.0),
    "network connect blocked": (
        "import ctypes, struct\nlibc = ctypes.CDLL(None)\nfd = libc.socket(2, 1, 0)\n"
        "addr = struct.pack('=H', 2) + struct.pack('>H', PORT) + bytes([127, 0, 0, 1]) + bytes(8)\n"
        "ok = fd >= 0 and libc.connect(fd, addr, 16) == 0\n"
        "def f(x):\n    return x + 1 if ok else None\n",
        0.0,
    ),
    "write to /tmp blocked": (
        "import os\ntry:\n    open('/tmp/maxk-doctor-probe', 'w').write('x')\n"
        "    os.unlink('/tmp/maxk-doctor-probe')\n"
        "    ok = True\nexcept OSError:\n    ok = False\ndef f(x):\n    return x + 1 if ok else None\n",
        0.0,
    ),
    "disk fill bounded": (
        "import os\nn = 0\ntry:\n    for i in range(20000):\n        os.mkdir(f'd{i}')\n        n += 1\n"
        "except OSError:\n    pass\ndef f(x):\n    return x + 1 if n >= 20000 else None\n",
        0.0,
    ),
    "fork limit enforced": (
        "import posix, time\nn = 0\nfor _ in range(200):\n    try:\n        if posix.fork() == 0:\n"
        "            time.sleep(30)\n    except OSError:\n        break\n    n += 1\n"
        "def f(x):\n    return x + 1 if n >= 200 else None\n",
        0.0,
    ),
}


def _doctor(args: argparse.Namespace) -> int:
    import socket

    from maxk.sandbox import LEVEL_ORDER, LEVELS, SandboxError, Scorer, exposure_fixes, exposures, uid_note

    if args.configfile:
        from maxk.config import load_config

        section = load_config(*args.configfile)["sandbox"]
    else:
        section = json.loads(args.config_json)
    allow_exposed = bool((section.get("isolation") or {}).get("allow_exposed_training"))
    kw = limits_from_config(section, 1)
    want = (section.get("isolation") or {}).get("minimum", "portable")
    kw["isolation"] = dict(kw.get("isolation") or {}, minimum="none", allow_below_minimum=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        scorer = Scorer(**kw)
    except SandboxError as exc:
        print(f"sandbox: cannot start a worker: {exc}")
        return 1
    with scorer:
        print(f"python {sys.version.split()[0]} uid {os.getuid()} kernel {os.uname().release}")
        print(f"{'layer':<20} {'level':<9} active")
        for level in LEVEL_ORDER[1:]:
            for name in LEVELS[level]:
                print(f"{name:<20} {level:<9} {scorer.layers.get(name)}")
        quota = scorer.layers.get("scratch_quota")
        writes = f"only to a scratch {quota}" if quota else "none (seccomp denies every file write)"
        print(f"file writes: {writes if scorer.layers.get('seccomp') or quota else 'UNBOUNDED'}")
        for note in [*scorer.notes, uid_note(scorer.layers)]:
            if note:
                print(f"note: {note}")
        exposed = exposures(scorer.layers)
        for line in exposed:
            print(f"EXPOSED {line}")
        for fix in exposure_fixes(scorer.layers):
            print(f"fix: {fix}")
        if not exposed:
            print("exposed: nothing known (Landlock read-only view, non-dumpable judge, bounded file writes)")
        problem = {
            "id": "doctor/f",
            "tests": {"format": "call", "entry_point": "f", "setup": "", "cases": ["assert f(1) == 2"]},
        }
        scores = scorer.score(
            [(problem, prog.replace("PORT", str(port))) for prog, _ in DOCTOR_PROBES.values()]
        )
        listener.close()
        healthy = True
        for (name, (_, expected)), s in zip(DOCTOR_PROBES.items(), scores, strict=True):
            good = s.reward == expected
            healthy &= good
            print(f"probe: {name:<28} {'yes' if good else 'NO'} ({', '.join(s.verdicts)})")
        below = LEVEL_ORDER.index(scorer.level) < LEVEL_ORDER.index(want)
        print(
            f"isolation level: {scorer.level} (configured minimum: {want}"
            f"{', BELOW MINIMUM' if below else ''})"
        )
        refused = bool(exposed) and not allow_exposed
        if refused:
            print("training: REFUSED (`maxk train` stops: see EXPOSED and fix above)")
        else:
            print(f"training: allowed ({'allow_exposed_training is set' if exposed else 'nothing exposed'})")
    return 0 if healthy and not below and not refused else 1
