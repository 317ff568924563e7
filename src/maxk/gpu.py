"""A job that asked for GPUs stops at once when CUDA is not usable, instead of running on the CPU.

On a GPU node whose driver is too old for the CUDA build of torch, ``torch.cuda.is_available()`` is
False and every library quietly falls back to the CPU: a 7B training run would go on for days. The
training and generation jobs receive their Slurm request (``resources.<rule>.gpu``) as ``--gpus`` and
call ``require_cuda`` before loading anything heavy, so they fail in seconds with the versions that
explain why.

The rehearsal (``tests/rehearsal/``) runs GPU jobs on this CPU on purpose; it says so by setting
``MAXK_CPU_STANDS_IN_FOR_GPU=1``, and nothing else does.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

STAND_IN_ENV = "MAXK_CPU_STANDS_IN_FOR_GPU"
DRIVER_FILE = Path("/proc/driver/nvidia/version")


class CudaUnavailableError(RuntimeError):
    """The job asked for GPUs and CUDA cannot be used; the message says why."""


def driver_version(path: Path = DRIVER_FILE) -> str | None:
    """The loaded NVIDIA kernel module's version (``/proc/driver/nvidia/version``), or None."""
    try:
        text = path.read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module(?: for \w+)?\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else text.strip().splitlines()[0] if text.strip() else None


def cuda_diagnosis() -> tuple[bool, str]:
    """``(usable, why)``: whether torch can use CUDA, and the facts a reader needs when it cannot: the
    torch build, its CUDA version, the NVIDIA driver, ``CUDA_VISIBLE_DEVICES`` and torch's own warning."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        usable = bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    facts = [
        f"torch {torch.__version__} built for CUDA {torch.version.cuda}"
        if torch.version.cuda
        else f"torch {torch.__version__} is a CPU-only build",
        f"NVIDIA driver {driver_version() or 'not found (no /proc/driver/nvidia/version)'}",
    ]
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        facts.append(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}")
    facts += [" ".join(str(w.message).split()) for w in caught if "cuda" in str(w.message).lower()]
    return usable, "; ".join(facts)


def require_cuda(gpus: int, job: str) -> bool:
    """Whether CUDA is usable. Raises ``CudaUnavailableError`` when ``gpus`` > 0 and it is not (unless the
    rehearsal's ``MAXK_CPU_STANDS_IN_FOR_GPU=1`` is set); with ``gpus`` = 0 nothing is required."""
    usable, why = cuda_diagnosis()
    if gpus > 0 and not usable and os.environ.get(STAND_IN_ENV) != "1":
        raise CudaUnavailableError(
            f"{job} asked for {gpus} GPU(s) (resources.*.gpu) but CUDA is not usable: {why}. "
            "Stopping rather than running on the CPU: install a torch build matching this node's driver "
            "(pip index: download.pytorch.org/whl/cuXXX), or ask for gpu: 0 to run on the CPU on purpose."
        )
    return usable
