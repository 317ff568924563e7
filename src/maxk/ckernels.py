"""Building and loading the C kernels (``maxk/generate/kernels/``, ``maxk/train/kernels/``).

A C file is compiled at first use with the system's C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``)
into a per-user cache (``$MAXK_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/maxk/kernels``, else
``~/.cache/maxk/kernels``), one library per source, compiler and flags, written under a temporary name and
renamed, so concurrent jobs never load half a file. The kernels' matrix products call the ``sgemm_`` of the
BLAS torch links (MKL in torch's x86 wheels), handed to each library by its ``set_sgemm``; their vector
width follows torch's kernel path (``torch.backends.cpu.get_cpu_capability()``, which
``ATEN_CPU_CAPABILITY`` sets): AVX-512, AVX2 or none.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import torch

from maxk.io import atomic_path

__all__ = [
    "BUILD_TIMEOUT_S",
    "INCLUDE",
    "KERNELS",
    "build",
    "cache_dir",
    "choice",
    "compiler",
    "headers",
    "isa_flags",
    "load",
    "sgemm_address",
]

#: The values of a kernel's environment variable (``MAXK_DECODE_KERNEL``, ``MAXK_TRAIN_KERNEL``): the C
#: kernel where it applies and builds, else torch's (``auto``); the C kernel or an error; torch's.
KERNELS = ("auto", "native", "torch")
#: Seconds a build may take before it counts as failed (it takes about one).
BUILD_TIMEOUT_S = 600
#: The headers every kernel may include (``vec.h``: vector helpers; ``blas.h``: torch's ``sgemm_``).
INCLUDE = Path(__file__).with_name("kernels")
#: Flags every kernel is built with (before its own and the vector width's).
BASE_FLAGS = ["-O3", "-ffp-contract=fast", "-fPIC", "-shared", "-Wno-psabi"]


def choice(env: str) -> str:
    """The kernel ``$env`` picks, one of ``KERNELS`` (``auto`` where unset), or a ValueError naming it."""
    value = os.environ.get(env, "auto").strip().lower() or "auto"
    if value not in KERNELS:
        raise ValueError(f"{env}={value!r}: expected one of {', '.join(KERNELS)}")
    return value


def isa_flags() -> list[str]:
    """Compiler flags for the vector width of torch's kernel path on this CPU."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    capability = torch.backends.cpu.get_cpu_capability().upper()
    if capability.startswith("AVX512"):
        return ["-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma"]
    if capability == "AVX2":
        return ["-mavx2", "-mfma"]
    return []


def cache_dir() -> Path:
    """Where built libraries live (module docstring)."""
    if os.environ.get("MAXK_KERNEL_CACHE"):
        return Path(os.environ["MAXK_KERNEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "maxk" / "kernels"


def compiler() -> str | None:
    """The C compiler's path, or None."""
    found = (shutil.which(name) for name in (os.environ.get("CC"), "cc", "gcc", "clang") if name)
    return next((path for path in found if path), None)


def sgemm_address() -> int | None:
    """The address of ``sgemm_`` in the BLAS torch links, or None."""
    lib_dir = Path(torch.__file__).parent / "lib"
    for name in ("libtorch_cpu.so", "libtorch_cpu.dylib"):
        if (lib_dir / name).exists():
            try:
                return ctypes.cast(ctypes.CDLL(str(lib_dir / name)).sgemm_, ctypes.c_void_p).value
            except (AttributeError, OSError):
                return None
    return None


def headers(source: Path, include: list[Path]) -> list[Path]:
    """The headers ``source`` includes by ``#include "name"`` (found in ``include``, first match), and
    theirs, in the order first met."""
    found: list[Path] = []
    todo = [source]
    while todo:
        for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', todo.pop(0).read_text(), re.MULTILINE):
            path = next((d / name for d in include if (d / name).is_file()), None)
            if path is None:
                raise RuntimeError(
                    f'{source}: #include "{name}" is in none of {", ".join(map(str, include))}'
                )
            if path not in found:
                found.append(path)
                todo.append(path)
    return found


def build(source: Path, compiler_path: str, flags: list[str], include: list[Path] | None = None) -> Path:
    """The library of ``source`` compiled with ``flags`` (built into the cache if it is not there yet), its
    headers looked for in ``include`` (default: its own folder, then ``INCLUDE``); the cache's key covers
    the source, the headers it includes, the compiler's version and the flags."""
    include = [source.parent, INCLUDE] if include is None else include
    version = subprocess.run([compiler_path, "--version"], capture_output=True, text=True).stdout
    texts = [source.read_text(), *(h.read_text() for h in headers(source, include))]
    key = hashlib.sha256("\0".join([*texts, version, *flags]).encode()).hexdigest()[:16]
    target = cache_dir() / f"{source.stem}-{key}.so"
    if target.exists():
        return target
    with atomic_path(target) as tmp:  # concurrent jobs never load half a file
        cmd = [compiler_path, *flags, *(f"-I{d}" for d in include), "-o", str(tmp), str(source), "-lm"]
        try:  # a hang guard far above the second a build takes
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as err:
            raise RuntimeError(f"{' '.join(cmd)} did not finish in {BUILD_TIMEOUT_S} s") from err
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return target


def load(source: Path, flags: list[str], compiler_path: str | None) -> ctypes.CDLL | str:
    """``source`` built with ``BASE_FLAGS``, ``flags`` and the vector width's, loaded, its ``set_sgemm``
    given torch's ``sgemm_``; or why it cannot be (no compiler, no ``sgemm_``, a failed build)."""
    if compiler_path is None:
        return "no C compiler found (set CC, or install cc, gcc or clang)"
    sgemm = sgemm_address()
    if sgemm is None:
        return f"torch's libraries ({Path(torch.__file__).parent / 'lib'}) export no sgemm_"
    try:
        lib = ctypes.CDLL(str(build(source, compiler_path, BASE_FLAGS + flags + isa_flags())))
    except (OSError, RuntimeError) as err:
        return f"building {source.name} failed: {err}"
    lib.set_sgemm.argtypes = [ctypes.c_void_p]
    lib.set_sgemm(sgemm)
    return lib
