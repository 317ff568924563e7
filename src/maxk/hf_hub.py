"""Hugging Face hub references, resolved through the local cache: a model is a local directory or a
hub id (``org/name``) at an optional revision.

``resolve_model`` is the one place a training or generation job turns ``base_model.path`` into a
directory: a local directory is used as it is; a hub id is looked up in the cache (``HF_HOME``) first,
and downloaded only when it is missing and the hub is reachable (``HF_HUB_OFFLINE`` unset). Anything
else fails with one message that names the model, the revision and where it was looked for.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: ``org/name`` as the hub spells repository ids (one slash, no leading ``.`` or ``/``).
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ModelNotFoundError(FileNotFoundError):
    """The model is neither a local directory nor a hub id that the cache or the hub can provide."""


def is_repo_id(ref: str) -> bool:
    """Whether ``ref`` is spelled like a hub repository id (it may still be a local relative path)."""
    return bool(REPO_ID.match(ref)) and ".." not in ref


def offline() -> bool:
    """Whether the hub must not be contacted (``HF_HUB_OFFLINE`` set to a true value)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def go_offline() -> None:
    """Never contact the hub (unless this environment already says otherwise): ``HF_HUB_OFFLINE``,
    telemetry off, no tokenizers thread pool. Set before the Hugging Face libraries are imported, and,
    where they were imported already (a job forked from the warm job server,
    ``maxk.workflow.jobserver``), also in ``huggingface_hub.constants``, which reads these variables
    once, at import: without it a forked job saved ``local_files_only: false`` in its tokenizer config
    where a fresh one saves ``true``."""
    import sys

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # the library's own expressions for the two (huggingface_hub 1.x-2.x)
        env = os.environ.get
        constants.HF_HUB_OFFLINE = constants._is_true(env("HF_HUB_OFFLINE") or env("TRANSFORMERS_OFFLINE"))
        telemetry_off = ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK")
        constants.HF_HUB_DISABLE_TELEMETRY = any(constants._is_true(env(var)) for var in telemetry_off)


def resolve_model(ref: str, revision: str | None = None) -> str:
    """A local directory holding the model ``ref`` (see the module docstring).

    A local directory wins over a hub id of the same spelling; a revision applies to hub ids only."""
    if Path(ref).is_dir():
        return ref
    if not is_repo_id(ref):
        raise ModelNotFoundError(f"model {ref!r}: no such directory, and not a hub id (org/name)")
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    at = f"{ref!r} at revision {revision or 'main'!r}"
    try:
        return snapshot_download(ref, revision=revision, local_files_only=True)
    except OSError:  # LocalEntryNotFoundError among them: not in the cache
        pass
    if offline():
        raise ModelNotFoundError(
            f"model {at} is not in the Hugging Face cache {HF_HUB_CACHE} and HF_HUB_OFFLINE is set: "
            f"fill the cache first (hf download {ref}"
            + (f" --revision {revision}" if revision else "")
            + ") or set base_model.path to a local directory"
        )
    try:
        return snapshot_download(ref, revision=revision)
    except Exception as exc:  # network, auth, unknown repo or revision: one message for all
        raise ModelNotFoundError(
            f"model {at}: not in the cache {HF_HUB_CACHE} and not downloadable ({type(exc).__name__}: {exc})"
        ) from exc


def fill_cache(
    cache: str | os.PathLike[str],
    repo_id: str,
    files: dict[str, bytes | str | Path],
    *,
    commit: str,
    repo_type: str = "model",
    ref: str | None = "main",
) -> Path:
    """Lay ``files`` (path in the repository -> content, or a local file to copy) out in a Hugging Face
    hub cache exactly where the hub client looks for them offline: ``<cache>/<type>s--org--name/
    snapshots/<commit>/<path>``, with ``refs/<ref>`` naming the commit. Used to pre-fill a cluster's
    cache and by the paper-config rehearsal; returns the snapshot directory."""
    import shutil

    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"commit must be 40 hex digits, got {commit!r}")
    folder = Path(cache) / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    for name, content in files.items():
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_bytes(content.encode() if isinstance(content, str) else content)
    if ref:
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snapshot


def dataset_file(repo_id: str, filename: str, revision: str | None = None) -> str:
    """Local path of one file of a hub dataset repository at ``revision``: from the cache when it is
    there (offline included), downloaded otherwise. Reading the file itself, rather than through
    ``datasets.load_dataset``, keeps the exact bytes the pinned revision holds (no schema inference)."""
    from huggingface_hub import hf_hub_download

    try:
        return hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision)
    except Exception as exc:  # offline miss, network, unknown repo/revision/file: one message
        where = "the cache (HF_HUB_OFFLINE is set)" if offline() else "the cache or the hub"
        raise FileNotFoundError(
            f"dataset {repo_id!r} file {filename!r} at revision {revision or 'main'!r}: not in {where} "
            f"({type(exc).__name__})"
        ) from exc
