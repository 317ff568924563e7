"""The generate stage's typed config reaches its backends whole: each settings class's fields are
keywords of its backend (``make_backend`` passes them as ``**asdict(settings)``)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from maxk.generate.config import GenerateConfig, TransformersSettings, VLLMSettings
from maxk.generate.hf import TransformersBackend
from maxk.generate.vllm import VLLMBackend


@pytest.mark.parametrize(
    ("settings", "backend"), [(TransformersSettings, TransformersBackend), (VLLMSettings, VLLMBackend)]
)
def test_each_settings_field_is_a_keyword_of_its_backend_with_the_same_default(settings, backend):
    params = inspect.signature(backend.__init__).parameters
    for f in dataclasses.fields(settings):
        assert f.name in params, f"{settings.__name__}.{f.name} is not a keyword of {backend.__name__}"
        assert params[f.name].default == getattr(settings(), f.name)  # the backend's default is the schema's


def test_make_backend_builds_the_transformers_backend_from_the_typed_config(tmp_path):
    import gen_fixtures as fx

    from maxk.generate.cli import make_backend

    gen = GenerateConfig.from_config({"transformers": {"max_batch_size": 3}})
    backend = make_backend(gen, str(fx.tiny_model_dir()), seed=0, threads=1)
    assert backend.max_batch_size == 3
