"""Shared helpers of the generation tests (plain functions, not a conftest.py: a second conftest
module would clash with tests/conftest.py under pytest's rootdir import mode).

The tiny random Qwen2 model and its backend are built once per process (cached), however many test
modules use them.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path


@functools.cache
def tiny_model_dir() -> Path:
    from maxk.generate.testing import build_tiny_model

    directory = tempfile.mkdtemp(prefix="maxk-gen-tiny-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return build_tiny_model(directory)


@functools.cache
def hf_backend():
    from maxk.generate.hf import TransformersBackend

    return TransformersBackend(tiny_model_dir(), max_batch_size=16, threads=1)


def toy_problems() -> list[dict]:
    return [
        {"id": f"toy/{i}", "source": "toy", "prompt": f"Write function f{i}(x).", "tests": {}}
        for i in range(5)
    ]


def native_decoder_or_skip(model):
    """``maxk.generate.native.NativeDecoder`` of ``model``, or the test skipped with the reason it cannot
    run on this machine (no compiler, no ``sgemm_``, a model it does not fit)."""
    import pytest

    from maxk.generate import native

    reason = native.native_unavailable(model)
    if reason is not None:
        pytest.skip(f"the C decode step does not run here: {reason}")
    return native.NativeDecoder(model)
