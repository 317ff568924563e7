"""maxk.train.native_attention: the policy update's attention in C against torch's SDPA as transformers runs
it (outputs and gradients), and which attention runs (``$MAXK_TRAIN_KERNEL``)."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from maxk.train import native_attention as na

ATOL = 1e-5


@pytest.fixture(scope="module")
def lib():
    built = na._library()
    if isinstance(built, str):
        pytest.skip(f"no C attention here: {built}")
    return built


class Layer(torch.nn.Module):
    """What transformers' attention functions read of a layer."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def inputs(B, H, KVH, W, S, D, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, W, D, generator=g, requires_grad=True)
    k = torch.randn(B, KVH, S, D, generator=g, requires_grad=True)
    v = torch.randn(B, KVH, S, D, generator=g, requires_grad=True)
    return q, k, v, g


def both(layer, q, k, v, mask, seed):
    """(C, SDPA): each output and the gradients of q, k, v under one random weighting of it."""
    out = []
    for fn in (na.attention, sdpa_attention_forward):
        o, _ = fn(layer, q, k, v, mask, scaling=q.shape[-1] ** -0.5)
        w = torch.randn(o.shape, generator=torch.Generator().manual_seed(seed))
        out.append((o.detach(), *torch.autograd.grad((o * w).sum(), (q, k, v))))
    return out


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize(("W", "S"), [(1, 5), (5, 17), (12, 40)])
def test_masked_attention_is_sdpa_s(lib, groups, W, S):
    """A boolean mask with rows of no key (0 out, as torch's kernel gives), key counts off the vector width,
    one to four query heads a key/value head."""
    q, k, v, g = inputs(3, 2 * groups, 2, W, S, 16, seed=W * S + groups)
    mask = torch.rand(3, 1, W, S, generator=g) > 0.4
    mask[1, 0, 0] = False  # a query that sees no key
    mine, want = both(Layer(groups), q, k, v, mask, seed=3)
    assert (mine[0][1, 0] == 0).all()
    for got, ref in zip(mine, want, strict=True):
        torch.testing.assert_close(got, ref, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize(("W", "S"), [(1, 9), (6, 6), (4, 20)])
def test_no_mask_is_sdpa_s_causal_rule(lib, W, S):
    """No mask: torch's is_causal from the first key where there are several queries (transformers keeps
    the first W keys), every key for one query."""
    q, k, v, _ = inputs(2, 4, 2, W, S, 32, seed=W + S)
    mine, want = both(Layer(2), q, k, v, None, seed=5)
    for got, ref in zip(mine, want, strict=True):
        torch.testing.assert_close(got, ref, atol=ATOL, rtol=1e-5)


def test_the_mask_matters(lib):
    """A test that can fail: the C attention given another mask gives other outputs."""
    q, k, v, g = inputs(2, 4, 2, 5, 17, 16, seed=1)
    mask = torch.rand(2, 1, 5, 17, generator=g) > 0.5
    a, _ = na.attention(Layer(2), q, k, v, mask)
    b, _ = na.attention(Layer(2), q, k, v, ~mask)
    assert (a - b).abs().max() > 0.1


def test_what_it_does_not_do_is_refused(lib):
    q, k, v, _ = inputs(1, 2, 1, 3, 3, 16, seed=0)
    with pytest.raises(ValueError, match="no dropout"):
        na.attention(Layer(2), q, k, v, None, dropout=0.1)
    with pytest.raises(ValueError, match=r"boolean mask, got torch\.float32"):
        na.attention(Layer(2), q, k, v, torch.zeros(1, 1, 3, 3))


def test_the_kernel_is_picked_by_the_environment(tiny_model_dir, monkeypatch, caplog):
    """``torch`` leaves the model's attention alone; ``native`` without a compiler says why; ``auto`` then
    keeps torch's SDPA with one warning; the block restores the model's attention even when it raises."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = model.config._attn_implementation
    monkeypatch.setenv(na.KERNEL_ENV, "fast")
    with pytest.raises(ValueError, match=r"MAXK_TRAIN_KERNEL='fast': expected one of auto, native, torch"):
        na.kernel_for(model)
    monkeypatch.setenv(na.KERNEL_ENV, "torch")
    with na.native_attention(model) as kernel:
        assert kernel == "torch" and model.config._attn_implementation == before
    if not isinstance(na._library(), str):
        monkeypatch.setenv(na.KERNEL_ENV, "native")
        with pytest.raises(KeyError), na.native_attention(model) as kernel:
            assert kernel == "native" and model.config._attn_implementation == na.NAME
            raise KeyError("inside")
        assert model.config._attn_implementation == before
    monkeypatch.setattr(na.ckernels, "compiler", lambda: None)
    na._library.cache_clear()
    na._warn_once.cache_clear()
    try:
        monkeypatch.setenv(na.KERNEL_ENV, "native")
        with pytest.raises(RuntimeError, match="no C compiler found"):
            na.kernel_for(model)
        monkeypatch.setenv(na.KERNEL_ENV, "auto")
        with caplog.at_level(logging.WARNING, logger="maxk.train.native_attention"):
            assert na.kernel_for(model) == na.kernel_for(model) == "torch"
        assert [r.getMessage() for r in caplog.records if "SDPA" in r.getMessage()] == [
            "the update attends with torch's SDPA, not the C attention: no C compiler found (set CC, or "
            "install cc, gcc or clang) (MAXK_TRAIN_KERNEL=torch silences this)"
        ]
    finally:
        na._library.cache_clear()


def test_a_model_it_does_not_fit_gets_sdpa_without_a_warning(tiny_model_dir, monkeypatch, caplog):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).to(torch.float64)
    monkeypatch.setenv(na.KERNEL_ENV, "auto")
    with caplog.at_level(logging.WARNING, logger="maxk.train.native_attention"):
        assert na.kernel_for(model) == "torch"
    assert not caplog.records
    monkeypatch.setenv(na.KERNEL_ENV, "native")
    with pytest.raises(RuntimeError, match="runs float32 on a CPU"):
        na.kernel_for(model)
