"""transformers backend: exact entropy/log-probs, the sampling distribution, stop/finish handling."""

from __future__ import annotations

import math

import gen_fixtures as fx
import pytest
import torch

from maxk.generate.backends import SamplingParams


def _chat(backend, text):
    return backend.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def _direct_stats(backend, prompt, token_ids, temperature, top_p):
    """Recompute log-probs/entropies of ``token_ids`` with one full forward pass (no KV cache)."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    ids = backend.encode(prompt)
    seq = torch.tensor([ids + token_ids])
    with torch.no_grad():
        logits = backend.model(seq).logits[0, len(ids) - 1 : len(ids) - 1 + len(token_ids)].float()
    scores = TemperatureLogitsWarper(temperature)(seq, logits)
    scores = TopPLogitsWarper(top_p)(seq, scores)
    logp = torch.log_softmax(scores.double(), -1)
    p = logp.exp()
    ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)
    lp = logp.gather(1, torch.tensor(token_ids)[:, None]).squeeze(1)
    return float(lp.sum()), float(ent.mean())


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_entropy_and_logprob_are_exact(temperature, top_p):
    hf_backend = fx.hf_backend()
    prompt = _chat(hf_backend, "Write add(a, b).")
    params = SamplingParams(n=6, temperature=temperature, top_p=top_p, max_new_tokens=10)
    (samples,) = hf_backend.generate([prompt], [7], params)
    assert len(samples) == 6
    for s in samples:
        assert s.entropy_kind == "exact"
        want_lp, want_h = _direct_stats(hf_backend, prompt, s.token_ids, temperature, top_p)
        assert s.sum_logprob == pytest.approx(want_lp, abs=1e-3)
        assert s.mean_entropy == pytest.approx(want_h, abs=1e-4)
        assert math.isfinite(s.sum_logprob) and s.sum_logprob < 0


def test_checkpoint_sampling_defaults_do_not_leak():
    """HF's global default top_k=50 (or a checkpoint's top_k) would truncate the distribution. The random
    tiny model is near-uniform over ~400 tokens, so 256 first tokens must show far more than 50 values."""
    hf_backend = fx.hf_backend()
    (samples,) = hf_backend.generate([_chat(hf_backend, "hi")], [3], SamplingParams(n=256, max_new_tokens=1))
    assert len({s.token_ids[0] for s in samples}) > 80


def test_stop_and_length_finish():
    """Random weights emit the stop token now and then: rows stop at the FIRST stop token (included in
    num_tokens, excluded from the text) or run to max_new_tokens with finish 'length'."""
    hf_backend = fx.hf_backend()
    params = SamplingParams(n=64, max_new_tokens=24)
    (samples,) = hf_backend.generate([_chat(hf_backend, "go")], [11], params)
    stops = set(hf_backend.stop_token_ids)
    reasons = {s.finish_reason for s in samples}
    assert reasons == {"stop", "length"}, reasons  # this seed yields both kinds
    for s in samples:
        assert s.num_tokens == len(s.token_ids)
        body = s.token_ids[:-1] if s.finish_reason == "stop" else s.token_ids
        assert not stops & set(body)
        if s.finish_reason == "stop":
            assert s.token_ids[-1] in stops
            assert s.num_tokens <= params.max_new_tokens
        else:
            assert s.num_tokens == params.max_new_tokens
        assert s.completion == hf_backend.tokenizer.decode(body, skip_special_tokens=True)


def test_to_samples_masks_padding_after_stop():
    hf_backend = fx.hf_backend()
    eos, pad = hf_backend.stop_token_ids[0], hf_backend.pad_token_id
    a, b = 10, 11
    generated = torch.tensor([[a, eos, pad, pad], [a, b, a, b], [eos, pad, pad, pad]])
    logps = torch.tensor([[-1.0, -2.0, -50.0, -50.0], [-1.0, -1.0, -1.0, -1.0], [-3.0, -50.0, -50.0, -50.0]])
    ents = torch.tensor([[1.0, 3.0, 99.0, 99.0], [2.0, 2.0, 2.0, 2.0], [5.0, 99.0, 99.0, 99.0]])
    s = hf_backend._to_samples(generated, logps.double(), ents.double())
    assert [x.finish_reason for x in s] == ["stop", "length", "stop"]
    assert [x.num_tokens for x in s] == [2, 4, 1]
    assert [x.sum_logprob for x in s] == [-3.0, -4.0, -3.0]
    assert [x.mean_entropy for x in s] == [2.0, 2.0, 5.0]
    assert s[2].completion == ""


def test_same_seed_same_samples_and_chunking_is_seeded():
    hf_backend = fx.hf_backend()
    prompt = _chat(hf_backend, "x")
    params = SamplingParams(n=20, max_new_tokens=6)  # 20 > max_batch_size 16: two chunks
    one = hf_backend.generate([prompt], [5], params)[0]
    two = hf_backend.generate([prompt], [5], params)[0]
    other = hf_backend.generate([prompt], [6], params)[0]
    assert [s.token_ids for s in one] == [s.token_ids for s in two]
    assert [s.token_ids for s in one] != [s.token_ids for s in other]
    assert len(one) == 20


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.5, 0.8)])
def test_tokens_are_drawn_from_the_recorded_distribution(temperature, top_p):
    """E[log p(token)] = -H for tokens drawn from p: the mean log-prob of 2048 first tokens must match
    minus the recorded entropy (a sampler drawing from any other distribution fails this)."""
    hf_backend = fx.hf_backend()
    params = SamplingParams(n=2048, temperature=temperature, top_p=top_p, max_new_tokens=1)
    backend = hf_backend
    old, backend.max_batch_size = backend.max_batch_size, 2048
    try:
        (samples,) = backend.generate([_chat(backend, "sum a list")], [21], params)
    finally:
        backend.max_batch_size = old
    logps = torch.tensor([s.sum_logprob for s in samples], dtype=torch.float64)
    entropy = samples[0].mean_entropy
    assert all(s.mean_entropy == pytest.approx(entropy) for s in samples)  # same prompt, same step-1 dist
    stderr = float(logps.std()) / math.sqrt(len(samples))
    assert abs(float(logps.mean()) + entropy) < 4 * stderr + 1e-3


def test_static_and_dynamic_cache_paths_agree():
    tiny_model_dir = fx.tiny_model_dir()
    from maxk.generate.hf import TransformersBackend

    params = SamplingParams(n=8, temperature=0.9, max_new_tokens=12)
    out = []
    for kwargs in ({}, {"static_cache": False}, {"share_prefix": False}):
        b = TransformersBackend(tiny_model_dir, threads=1, **kwargs)
        (samples,) = b.generate([_chat(b, "abc")], [99], params)
        out.append(samples)
    for other in out[1:]:
        assert [s.token_ids for s in other] == [s.token_ids for s in out[0]]
        assert [s.mean_entropy for s in other] == pytest.approx([s.mean_entropy for s in out[0]], abs=1e-4)


def test_a_half_precision_model_on_a_cpu_attends_eagerly():
    """load_causal_lm: bf16 and fp16 on a CPU take eager attention (torch 2.13's CPU SDPA there failed
    under ATEN_CPU_CAPABILITY=default on a CPU with AMX); float32 keeps transformers' default."""
    from maxk.generate.hf import load_causal_lm

    path = fx.tiny_model_dir()
    for dtype in ("bfloat16", "float16"):
        model = load_causal_lm(path, dtype=dtype, device="cpu")
        assert model.dtype == getattr(torch, dtype) and model.config._attn_implementation == "eager"
    assert load_causal_lm(path, dtype="float32", device="cpu").config._attn_implementation != "eager"
