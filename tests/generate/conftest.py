"""Fixtures for the generation tests: a tiny random Qwen2 model (built once per session, seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from maxk.generate.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def hf_backend(tiny_model_dir):
    from maxk.generate.hf import TransformersBackend

    return TransformersBackend(tiny_model_dir, max_batch_size=16, threads=1)


@pytest.fixture()
def problems():
    return [
        {"id": f"toy/{i}", "source": "toy", "prompt": f"Write function f{i}(x).", "tests": {}}
        for i in range(5)
    ]
