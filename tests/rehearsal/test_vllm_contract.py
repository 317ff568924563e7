"""The rehearsal's vLLM stand-in accepts what vLLM accepts and rejects what it rejects.

A misspelled engine option must fail the rehearsal, as it would fail on the cluster. Where a real vLLM
is importable (the ``gpu`` extra), its signatures are compared with the stand-in's tables.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
from types import SimpleNamespace

import pytest
from rehearse import HERE

from maxk.generate.backends import SamplingParams as MaxkSampling
from maxk.generate.vllm import VLLMBackend


def load_stand_in():
    """The stand-in package under its own name (never shadowing a real ``vllm``)."""
    folder = HERE / "stand_ins" / "vllm"
    spec = importlib.util.spec_from_file_location(
        "vllm_rehearsal_stand_in", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


STAND_IN = load_stand_in()
SIGS = sys.modules["vllm_rehearsal_stand_in._signatures"]


class Recorded(Exception):
    pass


def test_a_misspelled_engine_option_fails_as_in_vllm(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpu_memory_utilisation'"):
        STAND_IN.LLM(model=str(tmp_path), gpu_memory_utilisation=0.9)


def test_every_engine_and_sampling_argument_maxk_passes_is_one_vllm_accepts():
    seen = {}

    def record(**kwargs):
        seen.update(kwargs)
        raise Recorded

    with pytest.raises(Recorded):
        VLLMBackend("m", llm_factory=record, sampling_params_cls=STAND_IN.SamplingParams)
    assert set(seen) - {"model"} <= SIGS.ENGINE_ARGS
    backend = SimpleNamespace(sampling_params_cls=STAND_IN.SamplingParams, entropy_top_logprobs=20,
                              stop_token_ids=[7])  # fmt: skip
    params = MaxkSampling(n=4, temperature=1.0, top_p=1.0, max_new_tokens=32)
    made = VLLMBackend.make_sampling_params(backend, 3, params)
    assert (made.n, made.seed, made.logprobs, made.stop_token_ids) == (4, 3, 20, [7])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"temprature": 1.0}, TypeError, "Unexpected keyword argument 'temprature'"),
        ({"temperature": 2.5}, ValueError, "temperature must be in \\[0, 2\\]"),
        ({"top_p": 0.0}, ValueError, "top_p must be in \\(0, 1\\]"),
        ({"n": 0}, ValueError, "n must be at least 1"),
        ({"top_k": -2}, ValueError, "top_k must be 0"),
        ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1"),
        ({"logprobs": -3}, ValueError, "logprobs must be non-negative or -1"),
        ({"presence_penalty": 0.5}, NotImplementedError, "does not model it"),
    ],
)
def test_sampling_params_reject_what_vllm_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        STAND_IN.SamplingParams(**kwargs)


def test_bounds_vllm_allows_pass():
    sp = STAND_IN.SamplingParams(n=256, temperature=2.0, top_p=1.0, top_k=-1, logprobs=-1, max_tokens=1)
    assert (sp.n, sp.temperature, sp.skip_special_tokens) == (256, 2.0, True)


def real_vllm():
    try:
        import vllm
    except ImportError:
        return None
    return None if "maxk-rehearsal" in getattr(vllm, "__version__", "") else vllm


@pytest.mark.skipif(real_vllm() is None, reason="no real vLLM installed (the gpu extra)")
def test_the_tables_match_the_installed_vllm():
    vllm = real_vllm()
    named = set(inspect.signature(vllm.LLM.__init__).parameters) - {"self", "kwargs"}
    engine = {f.name for f in dataclasses.fields(vllm.EngineArgs)}
    assert named | engine >= SIGS.ENGINE_ARGS, sorted(SIGS.ENGINE_ARGS - named - engine)
    fields = set(vllm.SamplingParams.__struct_fields__)
    assert fields >= SIGS.SAMPLING_PARAMS, sorted(SIGS.SAMPLING_PARAMS - fields)
