"""glibc's allocator settings for a local run's jobs (maxk.workflow.allocator): set where unset, read by a
process at its start, and recorded."""

from __future__ import annotations

import os
import subprocess
import sys

from maxk.workflow.allocator import ALLOCATOR_ENV, apply, current


def test_apply_sets_only_what_the_user_left_unset():
    environ = {"MALLOC_TRIM_THRESHOLD_": "123", "PATH": "/bin"}
    added = apply(environ)
    assert environ["MALLOC_TRIM_THRESHOLD_"] == "123" and "MALLOC_TRIM_THRESHOLD_" not in added
    assert added and all(environ[k] == v == ALLOCATOR_ENV[k] for k, v in added.items())
    assert set(ALLOCATOR_ENV) <= set(environ) and environ["PATH"] == "/bin"
    assert apply(environ) == {}  # a second call changes nothing


def test_current_names_every_variable_and_none_where_unset():
    assert current({}) == dict.fromkeys(ALLOCATOR_ENV)
    assert current({**ALLOCATOR_ENV, "OTHER": "1"}) == ALLOCATOR_ENV


def test_each_value_is_a_byte_count_glibc_reads():
    """glibc takes a decimal integer (mallopt(3)): no suffix, no sign; the thresholds above what a job
    holds."""
    assert all(v.isdigit() for v in ALLOCATOR_ENV.values())
    assert int(ALLOCATOR_ENV["MALLOC_MMAP_THRESHOLD_"]) >= 1 << 30
    assert int(ALLOCATOR_ENV["MALLOC_TRIM_THRESHOLD_"]) >= 1 << 30


def test_a_process_started_with_them_keeps_a_freed_block_mapped():
    """The effect itself: a 64 MiB block freed and allocated again costs its page faults once with the
    settings (the pages are kept), twice with glibc's defaults (returned to the kernel, faulted in again)."""
    probe = (
        "import ctypes, resource\n"
        "libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]\n"
        "def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "n = 64 << 20; counts = []\n"
        "for _ in range(2):\n"
        "    p = libc.malloc(n); f = faults(); libc.memset(p, 1, n)\n"
        "    counts.append(faults() - f); libc.free(p)\n"
        "print(counts[1] / counts[0])\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_ENV}

    def second_over_first(env: dict[str, str]) -> float:
        cmd = [sys.executable, "-c", probe]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return float(out.stdout)

    assert second_over_first({**base, **ALLOCATOR_ENV}) < 0.1  # the second fill found its pages mapped
    assert second_over_first(base) > 0.9  # glibc's default: a fresh mapping, every page faulted again
