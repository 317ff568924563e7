"""Atomic file output shared by every stage: nothing half-written ever appears at a final path.

Write to a temporary sibling, fsync, then ``os.replace`` (atomic on POSIX). A killed job leaves at
most a ``.tmp-*`` file, which no rule declares and so no rerun trusts.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


def _default_file_mode() -> int:
    """The mode ``open()`` would give a new file (0o666 less the umask); mkstemp would give 0o600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _default_file_mode()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` only if the block succeeds."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{final.name}-", dir=final.parent)
    os.fchmod(fd, _FILE_MODE)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():
            with open(tmp_path, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp_path, final)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open()`` for writing that only publishes the file when the block succeeds.

    A ``.gz`` suffix writes gzip with a fixed mtime of 0, so outputs are byte-identical across runs.
    """
    if "r" in mode or "a" in mode:
        raise ValueError("atomic_open is for writing only")
    with atomic_path(path) as tmp:
        if str(path).endswith(".gz"):
            raw = open(tmp, "wb")  # noqa: SIM115 - closed below
            try:
                gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
                try:
                    if "b" in mode:
                        yield gz
                    else:
                        import io as _io

                        text = _io.TextIOWrapper(gz, encoding=kwargs.get("encoding", "utf-8"))
                        yield text
                        text.flush()
                        text.detach()
                finally:
                    gz.close()
            finally:
                raw.close()
        else:
            if "b" not in mode:
                kwargs.setdefault("encoding", "utf-8")
            with open(tmp, mode, **kwargs) as fh:
                yield fh


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> int:
    """Atomically write ``rows`` as JSON Lines (gzip if the name ends in ``.gz``); return the count."""
    n = 0
    with atomic_open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True))
            fh.write("\n")
            n += 1
    return n


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)``; a malformed line raises ``ValueError`` naming file and line."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield lineno, row


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as pretty, key-sorted JSON (stable bytes for equal content)."""
    with atomic_open(path, "w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
