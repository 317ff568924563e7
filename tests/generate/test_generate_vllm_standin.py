"""The vLLM adapter against a stand-in of vLLM's request/response objects."""

from __future__ import annotations

import math

import pytest
from vllm_standin import EOS, FakeLLM, SamplingParams

from maxk.generate.backends import SamplingParams as Params
from maxk.generate.vllm import VLLMBackend, approx_entropy, convert_completion, flat_statistics


def _backend(**kw):
    holder = {}

    def factory(**kwargs):
        holder["llm"] = FakeLLM(**kwargs)
        return holder["llm"]

    b = VLLMBackend("some/model", llm_factory=factory, sampling_params_cls=SamplingParams, **kw)
    return b, holder["llm"]


def test_engine_and_request_settings():
    b, llm = _backend(tensor_parallel_size=4, entropy_top_logprobs=5, seed=9)
    assert llm.kwargs["tensor_parallel_size"] == 4
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["model"] == "some/model" and llm.kwargs["seed"] == 9
    b.generate(["p0", "p1"], [101, 202], Params(n=3, temperature=0.8, top_p=0.95, max_new_tokens=7))
    ((prompts, sps),) = llm.calls
    assert prompts == ["p0", "p1"]
    assert [sp.seed for sp in sps] == [101, 202]
    sp = sps[0]
    assert (sp.n, sp.temperature, sp.top_p, sp.max_tokens, sp.logprobs) == (3, 0.8, 0.95, 7, 5)
    assert EOS in sp.stop_token_ids


def test_samples_logprobs_and_approx_entropy():
    b, llm = _backend(entropy_top_logprobs=5)
    params = Params(n=8, max_new_tokens=12)
    out = b.generate(["a", "b"], [1, 2], params)
    assert [len(x) for x in out] == [8, 8]
    for seed, samples in zip([1, 2], out, strict=True):
        for j, s in enumerate(samples):  # sorted back into index order
            assert s.entropy_kind == "approx"
            assert s.num_tokens == len(s.token_ids) <= 12
            exact = llm.exact_entropies[(seed, j)]
            assert len(exact) == s.num_tokens
            # top-5 of 40 tokens plus a tail bucket: a lower bound, and not a trivial one
            assert 0.5 * sum(exact) / len(exact) < s.mean_entropy <= sum(exact) / len(exact) + 1e-9
            if s.finish_reason == "stop":
                assert s.token_ids[-1] == EOS
            else:
                assert s.num_tokens == 12
    assert {s.finish_reason for x in out for s in x} == {"stop", "length"}


def test_flat_logprobs_are_asked_for_and_read_as_the_mapping_format_would_be():
    b, llm = _backend(entropy_top_logprobs=5)
    b.generate(["a"], [3], Params(n=6, max_new_tokens=10))
    ((_, (sp,)),) = llm.calls
    assert sp.flat_logprobs  # one flat set of lists per completion, not a mapping per position
    mapping = FakeLLM(**llm.kwargs)
    sp.flat_logprobs = False
    (request,) = mapping.generate(["a"], [sp])
    flat_out = b.generate(["a"], [3], Params(n=6, max_new_tokens=10))[0]
    for completion in request.outputs:
        assert isinstance(completion.logprobs, list)
        want = convert_completion(completion, entropy_top_logprobs=5)
        got = flat_out[completion.index]
        assert got.token_ids == want.token_ids
        assert got.sum_logprob == pytest.approx(want.sum_logprob, abs=1e-9)
        assert got.mean_entropy == pytest.approx(want.mean_entropy, abs=1e-9)


def test_flat_logprobs_without_the_sampled_token_are_an_error():
    from vllm_standin import _objects

    flat = _objects.FlatLogprobs.of(
        [{1: _objects.Logprob(-0.1, 1, None)}, {2: _objects.Logprob(-0.2, 1, None)}]
    )
    assert flat_statistics(flat, [1, 2])[0] == pytest.approx(-0.3)
    with pytest.raises(RuntimeError, match="lack the sampled token"):
        flat_statistics(flat, [1, 3])


def test_full_vocab_logprobs_give_exact_entropy_value():
    b, llm = _backend(entropy_top_logprobs=40)
    (samples,) = b.generate(["a"], [4], Params(n=3, max_new_tokens=5))
    for j, s in enumerate(samples):
        exact = llm.exact_entropies[(4, j)]
        assert s.mean_entropy == pytest.approx(sum(exact) / len(exact), abs=1e-9)
        assert s.entropy_kind == "approx"  # still labelled approx: never mixed with exact


def test_no_entropy_when_not_requested():
    b, _ = _backend(entropy_top_logprobs=0)
    (samples,) = b.generate(["a"], [4], Params(n=2, max_new_tokens=5))
    assert all(s.entropy_kind == "none" and s.mean_entropy is None for s in samples)
    assert all(math.isfinite(s.sum_logprob) for s in samples)
    assert b.entropy_kind == "none"


def test_sum_logprob_matches_cumulative():
    b, llm = _backend(entropy_top_logprobs=2)
    raw = llm  # regenerate the raw outputs with the same params to compare with the adapter
    (samples,) = b.generate(["a"], [8], Params(n=4, max_new_tokens=6))
    outs = raw.generate(["a"], [b.make_sampling_params(8, Params(n=4, max_new_tokens=6))])
    cum = {o.index: o.cumulative_logprob for o in outs[0].outputs}
    assert [s.sum_logprob for s in samples] == pytest.approx([cum[i] for i in range(4)])


def test_aborted_or_missing_completions_are_errors():
    b, llm = _backend()
    orig = llm.generate

    def aborted(prompts, sps, use_tqdm=True):
        outs = orig(prompts, sps)
        outs[0].outputs[0].finish_reason = "abort"
        return outs

    llm.generate = aborted
    with pytest.raises(RuntimeError, match="abort"):
        b.generate(["a"], [1], Params(n=2, max_new_tokens=3))

    def short(prompts, sps, use_tqdm=True):
        outs = orig(prompts, sps)
        outs[0].outputs.pop()
        return outs

    llm.generate = short
    with pytest.raises(RuntimeError, match="expected completions"):
        b.generate(["a"], [1], Params(n=2, max_new_tokens=3))


def test_approx_entropy_tail_bucket():
    from vllm_standin import Logprob

    # two tokens of 0.25 each, remaining 0.5 as one bucket
    pos = {1: Logprob(math.log(0.25)), 2: Logprob(math.log(0.25))}
    want = -2 * 0.25 * math.log(0.25) - 0.5 * math.log(0.5)
    assert approx_entropy(pos) == pytest.approx(want)


def test_standin_is_strict_where_vllm_is():
    """Over the model length: an error for the whole call; near it: completions cut at the limit."""
    b, _ = _backend(max_model_len=10)
    assert b.max_model_len == 10
    with pytest.raises(ValueError, match="longer than the maximum model length of 10"):
        b.generate(["w " * 11, "a"], [1, 2], Params(n=2, max_new_tokens=4))
    out = b.generate(["w " * 8], [1], Params(n=4, max_new_tokens=6))
    assert max(s.num_tokens for s in out[0]) <= 2


def test_backend_takes_the_engine_limit_when_none_is_set():
    from vllm_standin import MODEL_MAX_LEN

    b, _ = _backend()
    assert b.max_model_len == MODEL_MAX_LEN
