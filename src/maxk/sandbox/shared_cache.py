"""Verdicts shared between ``maxk score`` jobs through a folder: a program is run once per problem.

Models of one experiment write many of the same programs: on the default's suite_test, 16 models x
9,600 samples hold about 40 % distinct (problem, program) pairs against 74 % within one model (a
seed's samples, 2026-11-29), since similar policies share one random stream (common random numbers)
and short solutions repeat. Each ``maxk score --cache FOLDER`` job reads what earlier jobs recorded
there, runs only the pairs it does not find, and records its own at the end, in one file of its own
(``FOLDER/{context}/{job}.parquet``, written atomically: no lock, so concurrent jobs and shared file
systems are safe; a job that fails records nothing). Jobs running at the same time do not see each
other's pairs; they only miss a saving.

What may be shared: a verdict is kept only where every case ended without a time, memory or sandbox
failure (``UNSTABLE``): those depend on the machine's load, not the program, and are run again. The
context names what a verdict depends on besides the problem and the program (the problem's own tests
and time limit are in its key, ``scorer.problem_key``): the limits (the modules preloaded, the only
installed packages a program can import, among them), the isolation layers active (a program probing
the network scores differently under another level), the source of every module of ``maxk.sandbox``
(the judge, the scorer's verdict mapping, the isolation rules: a fix to any starts a new context
instead of reusing old verdicts) and the interpreter (its version and path). Left to chance, as
without the cache: a program whose output depends on chance or the clock (hash order, ``random``) gets
one recorded verdict per context, as if its first run were every run, and a ``runtime_error`` caused
by another job's processes (a fork refused at ``nproc``, counted per uid) is shared like any other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from maxk.sandbox import wire
from maxk.sandbox.judge import Score

__all__ = ["UNSTABLE", "SharedCache", "cache_context"]

#: verdicts that depend on the machine (its load, its memory), not on the program: never shared
UNSTABLE = frozenset({wire.TIMEOUT, wire.MEMORY, wire.SANDBOX_ERROR})
#: the Limits fields that cannot change a verdict (pool size and the in-memory cache's size)
_POOL_ONLY = ("workers", "cache_size")
_COLUMNS = ("problem_key", "program_sha", "verdicts", "elapsed_s")


def _sources() -> bytes:
    """Every module of ``maxk.sandbox`` and the interpreter: a change to any starts a new context."""
    here = Path(__file__).parent
    code = b"".join(path.read_bytes() for path in sorted(here.glob("*.py")))
    return code + f"{sys.version}\0{sys.executable}".encode()


def cache_context(limits: Any, layers: Mapping[str, Any]) -> str:
    """A short hash of what a verdict depends on besides the problem and the program: ``limits`` (a
    ``scorer.Limits``, its pool-only fields left out), the isolation ``layers`` active, the source of every
    module of ``maxk.sandbox`` and the interpreter."""
    fields = {k: v for k, v in dataclasses.asdict(limits).items() if k not in _POOL_ONLY}
    blob = json.dumps([fields, dict(layers)], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob + _sources()).hexdigest()[:16]


def program_sha(program: str) -> str:
    return hashlib.sha256(program.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class SharedCache:
    """One ``maxk score`` job's view of the folder: ``lookup`` what earlier jobs recorded, ``record`` what
    this job ran, ``save`` it as this job's file (``name``: the job's own, e.g. a hash of its output)."""

    def __init__(self, folder: str | os.PathLike, context: str, name: str) -> None:
        self.folder = Path(folder) / context
        self.name = name
        self.known: dict[tuple[str, str], Score] = {}
        self.mine: dict[tuple[str, str], Score] = {}
        self.hits = 0
        self.files_read = 0

    def load(self, problem_keys: Iterable[str]) -> None:
        """Read every other job's file in the context, keeping the pairs of ``problem_keys``. A file that
        cannot be read or holds what a job never writes (another version's, half-copied, edited) is
        skipped whole: it only costs its saving."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        wanted = set(problem_keys)
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.parquet")):
            if path.stem == self.name:
                continue  # this job's own earlier run: scored again, as without the cache
            try:
                table = pq.read_table(path, columns=list(_COLUMNS)).to_pydict()
                found = {
                    (pk, sha): Score.from_verdicts([str(v) for v in verdicts], float(elapsed))
                    for pk, sha, verdicts, elapsed in zip(*(table[c] for c in _COLUMNS), strict=True)
                    if pk in wanted
                }
            except (OSError, pa.ArrowException, KeyError, TypeError, ValueError):
                continue
            self.files_read += 1
            self.known.update(found)

    def lookup(self, problem_key: str, program: str) -> Score | None:
        hit = self.known.get((problem_key, program_sha(program)))
        self.hits += hit is not None
        return hit

    def record(self, problem_key: str, program: str, score: Score) -> None:
        """Keep a verdict this job ran, unless one of its cases ended in an ``UNSTABLE`` way."""
        if not UNSTABLE.intersection(score.verdicts):
            self.mine[(problem_key, program_sha(program))] = score

    def save(self) -> Path:
        """Write this job's pairs to ``{folder}/{context}/{name}.parquet`` (atomically)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from maxk.io import atomic_path

        self.folder.mkdir(parents=True, exist_ok=True)
        keys = list(self.mine)
        table = pa.table({
            "problem_key": [k[0] for k in keys],
            "program_sha": [k[1] for k in keys],
            "verdicts": [list(self.mine[k].verdicts) for k in keys],
            "elapsed_s": [float(self.mine[k].elapsed) for k in keys],
        })  # fmt: skip
        path = self.folder / f"{self.name}.parquet"
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path
