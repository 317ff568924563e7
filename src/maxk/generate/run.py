"""Generation jobs: seeds, shards, Parquet rows, manifests and the merge of shards.

Seeds are derived per (model, dataset, problem) from the config seed, so a shard regenerated alone
reproduces exactly the rows it had in the full run (same hardware and backend). Shards are contiguous
problem ranges in dataset order; merging concatenates them in shard order. Every file is written
atomically (``maxk.io``); a shard's manifest records the sha256 and row count of its Parquet file so
the merge step refuses a corrupt, truncated or mismatched shard. Within a shard, finished problems are
checkpointed (:class:`Checkpoint`) so a killed job's rerun only generates what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from maxk.generate.backends import Backend, Sample, SamplingParams, check_prompt_room, prompt_token_ids
from maxk.seeds import COMMON_STREAM, problem_seed

#: Column order and types of the samples Parquet (the generate -> score contract).
SAMPLE_COLUMNS: tuple[str, ...] = (
    "problem_id", "sample_index", "completion", "program", "num_tokens",
    "finish_reason", "sum_logprob", "mean_entropy", "entropy_kind",
)  # fmt: skip
MANIFEST_SUFFIX = ".manifest.json"


def shard_bounds(num_problems: int, shard: int, num_shards: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``shard`` of ``num_shards`` contiguous, near-equal problem ranges."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard must be in [0, {num_shards}), got {shard}")
    base, extra = divmod(num_problems, num_shards)
    start = shard * base + min(shard, extra)
    return start, start + base + (1 if shard < extra else 0)


def manifest_path(samples_path: str | os.PathLike[str]) -> Path:
    """``x.parquet`` -> ``x.manifest.json``."""
    p = Path(samples_path)
    return p.with_name(p.name.removesuffix(".parquet") + MANIFEST_SUFFIX)


def samples_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("problem_id", pa.string()),
            ("sample_index", pa.int32()),
            ("completion", pa.string()),
            ("program", pa.string()),
            ("num_tokens", pa.int32()),
            ("finish_reason", pa.string()),
            ("sum_logprob", pa.float64()),
            ("mean_entropy", pa.float64()),
            ("entropy_kind", pa.string()),
        ]
    )


def sample_rows(
    problem: dict[str, Any], samples: Sequence[Sample], extract: Callable[..., str]
) -> list[dict]:
    """Parquet rows for one problem's samples; ``extract(completion, problem)`` gives the program."""
    return [
        {
            "problem_id": problem["id"],
            "sample_index": i,
            "completion": s.completion,
            "program": extract(s.completion, problem),
            "num_tokens": s.num_tokens,
            "finish_reason": s.finish_reason,
            "sum_logprob": s.sum_logprob,
            "mean_entropy": s.mean_entropy,
            "entropy_kind": s.entropy_kind,
        }
        for i, s in enumerate(samples)
    ]


def write_samples(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> str:
    """Atomically write ``rows`` as Parquet; return the file's sha256."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from maxk.io import atomic_path

    table = pa.Table.from_pylist(rows, schema=samples_schema())
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
        digest = file_sha256(tmp)
    return digest


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_fingerprint(model_path: str, revision: str | None = None) -> dict[str, Any]:
    """Identify the weights: for a local directory, sha256 of its files (files over 64 MiB are hashed
    by size plus first and last MiB, marked ``partial``); the HF cache snapshot id when the path is
    one; otherwise (a hub id not resolved here) just the id and the requested revision."""
    p = Path(model_path)
    info: dict[str, Any] = {"path": model_path, "revision": revision}
    if "snapshots" in p.parts:
        info["revision"] = info["revision"] or p.parts[p.parts.index("snapshots") + 1]
    if not p.is_dir():
        return info
    h = hashlib.sha256()
    partial = False
    for f in sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith(".")):
        size = f.stat().st_size
        h.update(f"{f.relative_to(p).as_posix()}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if size <= 64 << 20:
                h.update(fh.read())
            else:
                partial = True
                h.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                h.update(fh.read())
    info["sha256"] = h.hexdigest()
    info["sha256_partial"] = partial
    return info


def progress_bar(total: int, desc: str) -> Any:
    """tqdm on stderr counting problems; disabled when stderr is not a TTY or ``CI`` is set."""
    from tqdm import tqdm

    disable = bool(os.environ.get("CI")) or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit="problem", file=sys.stderr, disable=disable, dynamic_ncols=True)


class Checkpoint:
    """Per-problem parts of an unfinished shard, so a killed job resumes where it stopped.

    Each finished problem's rows are written atomically to ``<dir>/<index>.parquet`` with a key in the
    file's metadata: the sha256 of everything the samples depend on (model weights fingerprint, backend
    settings, sampling parameters, seeds, prompt text). A part is reused only if its key matches the
    rerun's exactly; anything else (other key, unreadable file) is regenerated. Because seeds are per
    problem, resumed rows equal those of an uninterrupted run. The directory is deleted once the shard's
    output is written, so parts are never mistaken for a result.
    """

    META_KEY = b"maxk_part_key"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, index: int) -> Path:
        return self.directory / f"{index:06d}.parquet"

    def load(self, index: int, key: str) -> list[dict[str, Any]] | None:
        import pyarrow.parquet as pq

        path = self._path(index)
        if not path.exists():
            return None
        try:
            table = pq.read_table(path)
        except Exception:  # a torn or foreign file is just regenerated
            return None
        stored = (table.schema.metadata or {}).get(self.META_KEY)
        if stored != key.encode() or table.schema.remove_metadata() != samples_schema():
            return None
        return table.to_pylist()

    def save(self, index: int, key: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from maxk.io import atomic_path

        schema = samples_schema().with_metadata({self.META_KEY: key.encode()})
        with atomic_path(self._path(index)) as tmp:
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)

    def clear(self) -> None:
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)


def part_key(job_key: str, problem_id: str, seed: int, prompt: str) -> str:
    """The checkpoint key of one problem (see :class:`Checkpoint`)."""
    blob = json.dumps([job_key, problem_id, int(seed), prompt], separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def generate_rows(
    problems: Sequence[dict[str, Any]],
    prompts: Sequence[str],
    seeds: Sequence[int],
    backend: Backend,
    params: SamplingParams,
    extract: Callable[..., str],
    *,
    problems_per_call: int = 1,
    desc: str = "generate",
    checkpoint: Checkpoint | None = None,
    keys: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Sample every problem and build its rows, with a progress bar (problems, samples/s, ETA).

    With a ``checkpoint`` (and one key per problem), problems whose part is already there are loaded
    instead of generated (their programs re-extracted), and every newly finished problem is saved.
    """
    done: dict[int, list[dict[str, Any]]] = {}
    if checkpoint is not None:
        assert keys is not None and len(keys) == len(problems)
        for i, problem in enumerate(problems):
            rows = checkpoint.load(i, keys[i])
            if rows is not None:
                for row in rows:
                    row["program"] = extract(row["completion"], problem)
                done[i] = rows
    todo = [i for i in range(len(problems)) if i not in done]
    n_samples = n_tokens = 0
    start = time.perf_counter()
    with progress_bar(len(problems), desc) as bar:
        bar.update(len(done))
        for lo in range(0, len(todo), problems_per_call):
            batch = todo[lo : lo + problems_per_call]
            results = backend.generate([prompts[i] for i in batch], [seeds[i] for i in batch], params)
            if len(results) != len(batch):
                raise RuntimeError(
                    f"backend {backend.name} returned {len(results)} results for {len(batch)} prompts"
                )
            for i, samples in zip(batch, results, strict=True):
                if len(samples) != params.n:
                    raise RuntimeError(
                        f"backend {backend.name} returned {len(samples)} samples for problem "
                        f"{problems[i]['id']!r}, expected n={params.n}"
                    )
                done[i] = sample_rows(problems[i], samples, extract)
                if checkpoint is not None:
                    checkpoint.save(i, keys[i], done[i])  # type: ignore[index]
                n_samples += len(samples)
                n_tokens += sum(s.num_tokens for s in samples)
            elapsed = time.perf_counter() - start
            bar.update(len(batch))
            bar.set_postfix(samples_s=f"{n_samples / max(elapsed, 1e-9):.0f}", refresh=False)
    elapsed = time.perf_counter() - start
    stats = {
        "elapsed_s": elapsed,
        "samples": n_samples,
        "tokens": n_tokens,
        "samples_per_s": n_samples / max(elapsed, 1e-9),
        "tokens_per_s": n_tokens / max(elapsed, 1e-9),
        "resumed_problems": len(problems) - len(todo),
    }
    return [row for i in range(len(problems)) for row in done[i]], stats


def run_shard(
    *,
    problems: Sequence[dict[str, Any]],
    build_prompt: Callable[[dict[str, Any]], str],
    extract: Callable[..., str],
    backend: Backend,
    params: SamplingParams,
    output: str | os.PathLike[str],
    model_name: str,
    dataset: str,
    base_seed: int,
    shard: int = 0,
    num_shards: int = 1,
    model_info: dict[str, Any] | None = None,
    config: Any = None,
    resume: bool = True,
    common_random_numbers: bool = False,
) -> dict[str, Any]:
    """Generate shard ``shard`` of ``problems`` and write ``output`` (Parquet) and its manifest.

    ``common_random_numbers``: seed every problem from ``(base_seed, COMMON_STREAM, dataset, id)``
    instead of the model's name, so that every model draws sample j of a problem from one stream.

    The manifest is written last: a shard without one, or whose Parquet does not match it, is
    rejected by :func:`merge_shards`.
    """
    from maxk.io import write_json
    from maxk.provenance import config_hash, provenance_record

    lo, hi = shard_bounds(len(problems), shard, num_shards)
    chunk = list(problems[lo:hi])
    ids = [p["id"] for p in chunk]
    if len(set(ids)) != len(ids):
        raise ValueError(f"dataset {dataset!r}: duplicate problem ids in shard {shard}")
    stream = COMMON_STREAM if common_random_numbers else model_name
    seeds = [problem_seed(base_seed, stream, dataset, pid) for pid in ids]
    prompts = [build_prompt(p) for p in chunk]
    limit = getattr(backend, "max_model_len", None)
    if limit is not None:
        check_prompt_room(
            ids,
            [len(prompt_token_ids(backend.tokenizer, q)) for q in prompts],
            params.max_new_tokens,
            limit,
            where=f"{model_name}/{dataset} shard {shard}: ",
        )
    sampling = {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_new_tokens": params.max_new_tokens,
    }
    model_info = model_info or {"path": model_name}
    checkpoint = keys = None
    if resume:
        job_key = config_hash(
            {"model": model_info, "backend": backend.describe(), "sampling": sampling, "v": 1}
        )
        keys = [part_key(job_key, p["id"], s, q) for p, s, q in zip(chunk, seeds, prompts, strict=True)]
        checkpoint = Checkpoint(Path(output).with_name(Path(output).name + ".parts"))
    rows, stats = generate_rows(
        chunk,
        prompts,
        seeds,
        backend,
        params,
        extract,
        problems_per_call=getattr(backend, "prompts_per_call", 1),
        desc=f"{model_name}/{dataset} shard {shard}",
        checkpoint=checkpoint,
        keys=keys,
    )
    digest = write_samples(output, rows)
    manifest = provenance_record(
        config,
        seeds={"base_seed": base_seed, "per_problem": dict(zip(ids, seeds, strict=True))},
        kind="samples",
        model_name=model_name,
        model=model_info,
        dataset=dataset,
        backend=backend.describe(),
        sampling=sampling,
        entropy_kind=backend.entropy_kind,
        shard={"index": shard, "num_shards": num_shards, "problem_start": lo, "problem_stop": hi},
        problem_ids=ids,
        num_rows=len(rows),
        output_sha256=digest,
        stats=stats,
    )
    write_json(manifest_path(output), manifest)
    if checkpoint is not None:
        checkpoint.clear()
    return manifest


class ShardError(ValueError):
    """A shard is missing, corrupt, or inconsistent with its manifest or its siblings."""


def _check_shard(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ShardError(f"{path}: shard missing (rerun its generate job)")
    mpath = manifest_path(path)
    if not mpath.exists():
        raise ShardError(f"{mpath}: manifest missing, so {path} is incomplete (rerun its generate job)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ShardError(f"{mpath}: unreadable manifest ({exc})") from exc
    digest = file_sha256(path)
    if manifest.get("output_sha256") != digest:
        raise ShardError(
            f"{path}: sha256 {digest[:12]} does not match its manifest (corrupt or replaced shard)"
        )
    return manifest


def merge_shards(shards: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> dict[str, Any]:
    """Concatenate shard Parquets in the given (shard) order into ``output`` with a merged manifest.

    Every shard must exist, match its manifest's checksum, parse as Parquet with the samples schema,
    and agree with the others on model, dataset, sampling, backend and shard count; shard ``i`` must
    be at position ``i``. Errors name the shard file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from maxk.io import write_json

    if not shards:
        raise ShardError("no shards to merge")
    paths = [Path(s) for s in shards]
    manifests = [_check_shard(p) for p in paths]
    same = ("model_name", "dataset", "sampling", "entropy_kind", "config_hash")
    first = manifests[0]
    for path, m in zip(paths, manifests, strict=True):
        for key in same:
            if m.get(key) != first.get(key):
                raise ShardError(f"{path}: {key} {m.get(key)!r} differs from {paths[0]}'s {first.get(key)!r}")
        if m["backend"].get("name") != first["backend"].get("name"):
            raise ShardError(f"{path}: backend differs from {paths[0]}'s")
    for i, (path, m) in enumerate(zip(paths, manifests, strict=True)):
        if m["shard"]["num_shards"] != len(paths) or m["shard"]["index"] != i:
            raise ShardError(
                f"{path}: manifest says shard {m['shard']['index']} of {m['shard']['num_shards']}, "
                f"expected shard {i} of {len(paths)}"
            )
    tables = []
    for path, m in zip(paths, manifests, strict=True):
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise ShardError(f"{path}: not a readable Parquet file ({exc})") from exc
        if table.schema != samples_schema() or table.num_rows != m["num_rows"]:
            raise ShardError(f"{path}: schema or row count does not match its manifest")
        tables.append(table)
    merged = pa.concat_tables(tables)
    from maxk.io import atomic_path

    with atomic_path(output) as tmp:
        pq.write_table(merged, tmp, compression="zstd")
        digest = file_sha256(tmp)
    manifest = {
        k: v
        for k, v in first.items()
        if k not in ("shard", "problem_ids", "num_rows", "output_sha256", "stats")
    }
    manifest["seeds"] = {
        "base_seed": first["seeds"]["base_seed"],
        "per_problem": {k: v for m in manifests for k, v in m["seeds"]["per_problem"].items()},
    }
    manifest.update(
        problem_ids=[pid for m in manifests for pid in m["problem_ids"]],
        num_rows=merged.num_rows,
        output_sha256=digest,
        shards=[
            {"path": str(p), "sha256": m["output_sha256"], "stats": m.get("stats")}
            for p, m in zip(paths, manifests, strict=True)
        ],
    )
    write_json(manifest_path(output), manifest)
    return manifest


def read_samples(path: str | os.PathLike[str]) -> Any:
    """The samples Parquet as a pandas DataFrame."""
    import pandas as pd

    return pd.read_parquet(path)
