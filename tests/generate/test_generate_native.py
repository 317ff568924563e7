"""maxk.generate.native: the C decode step, its build, and which step runs (``$MAXK_DECODE_KERNEL``).

The C step's samples against the model's own forward pass are checked in ``test_generate_decode.py``
(every test there runs with both steps); here, the C step against torch's at the shipped base's sizes,
and the choosing and building around it."""

from __future__ import annotations

import logging
from pathlib import Path

import gen_fixtures as fx
import pytest
import torch

from maxk.generate import native
from maxk.generate.decode import QwenDecoder, _Grid

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base():
    """The embedded default's base model (head size 32, two query heads a key/value head)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(ROOT / "models" / "base").eval()


def _prompts(count: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(20, 90, (count,), generator=g).tolist()
    return [torch.randint(4, 700, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("prompt_of", [[0] * 4 + [1] * 4 + [2] * 4, [0, 0, 0, 2, 2, 3]])
def test_the_c_step_gives_torch_s_logits_step_after_step(base, prompt_of):
    """Twenty steps of the same tokens through both steps, on a dense grid and on one that lost a prompt
    and some rows: the logits agree to float rounding at every step (the C step's keys of steps past 16
    sit in a second tile)."""
    ref, fast = QwenDecoder(base), fx.native_decoder_or_skip(base)
    prompts = _prompts(4)
    stacked, _ = ref._prefill(prompts)
    prompt_of = torch.tensor(prompt_of)
    grid = _Grid.of(stacked, prompt_of)
    caches = {d: d.new_cache(len(prompt_of), 20) for d in (ref, fast)}
    positions = torch.tensor([len(prompts[p]) for p in prompt_of.tolist()])
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for step in range(20):
        tokens = torch.randint(4, 700, (len(prompt_of),), generator=g)
        want = ref.step_logits(tokens, step, positions + step, grid, caches[ref])
        got = fast.step_logits(tokens, step, positions + step, grid, caches[fast])
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
        worst = max(worst, float((got - want).abs().max()))
    assert worst > 0  # another order of sums: close, not equal (else torch was compared with itself)


def test_the_c_step_draws_torch_s_samples(base):
    """The pipeline's sampling at the base's sizes (32 samples of 6 prompts, compaction included): the same
    tokens, and per sample log-prob and entropy sums within float rounding, but where a uniform fell
    within that rounding of a boundary of the cumulative distribution. Such a flip moves the draw to the
    neighbouring token id (the distribution is cumulated in id order): at most two here, and each such
    sample is the same up to a token one id off (``ATEN_CPU_CAPABILITY=default`` makes one)."""
    ref, fast = QwenDecoder(base), fx.native_decoder_or_skip(base)
    prompts = _prompts(6, seed=2)
    kw = {"max_new_tokens": 48, "stop_token_ids": [base.generation_config.eos_token_id], "seeds": range(6)}
    a, b = ref.sample(prompts, 32, **kw), fast.sample(prompts, 32, **kw)
    same = [x == y for x, y in zip(a.token_ids, b.token_ids, strict=True)]
    assert sum(same) >= len(same) - 2
    for i in (i for i, equal in enumerate(same) if not equal):
        x, y = a.token_ids[i], b.token_ids[i]
        k = next(j for j in range(min(len(x), len(y))) if x[j] != y[j])
        assert abs(x[k] - y[k]) == 1
    keep = [i for i, equal in enumerate(same) if equal]
    assert [b.stopped[i] for i in keep] == [a.stopped[i] for i in keep]
    assert [b.sum_logprob[i] for i in keep] == pytest.approx([a.sum_logprob[i] for i in keep], abs=1e-3)
    assert [b.sum_entropy[i] for i in keep] == pytest.approx([a.sum_entropy[i] for i in keep], abs=1e-3)


def test_the_kernel_is_picked_by_the_environment(monkeypatch, caplog):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fx.tiny_model_dir()).eval()
    monkeypatch.setenv(native.KERNEL_ENV, "torch")
    assert type(native.new_decoder(model)) is QwenDecoder
    monkeypatch.setenv(native.KERNEL_ENV, "fast")
    with pytest.raises(ValueError, match=r"MAXK_DECODE_KERNEL='fast': expected one of auto, native, torch"):
        native.new_decoder(model)
    # no compiler: `native` says why, `auto` falls back to torch's step with one warning
    monkeypatch.setattr(native, "_compiler", lambda: None)
    native._library.cache_clear()
    native._warn_once.cache_clear()
    try:
        monkeypatch.setenv(native.KERNEL_ENV, "native")
        with pytest.raises(RuntimeError, match="no C compiler found"):
            native.new_decoder(model)
        monkeypatch.setenv(native.KERNEL_ENV, "auto")
        with caplog.at_level(logging.WARNING, logger="maxk.generate.native"):
            assert type(native.new_decoder(model)) is QwenDecoder
            assert type(native.new_decoder(model)) is QwenDecoder
        assert [r.getMessage() for r in caplog.records if "torch's step" in r.getMessage()] == [
            "decoding with torch's step, not the C one: no C compiler found (set CC, or install cc, gcc or "
            "clang) (MAXK_DECODE_KERNEL=torch silences this)"
        ]
    finally:
        native._library.cache_clear()


def test_a_model_the_c_step_does_not_fit_gets_torch_s_step_without_a_warning(monkeypatch, caplog):
    """bfloat16 weights (or a GPU's, or a head size that is not a multiple of 16) are no fault to warn of."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fx.tiny_model_dir(), dtype=torch.bfloat16).eval()
    monkeypatch.setenv(native.KERNEL_ENV, "auto")
    with caplog.at_level(logging.WARNING, logger="maxk.generate.native"):
        assert type(native.new_decoder(model)) is QwenDecoder
    assert not caplog.records
    assert "float32 on a CPU" in native.native_unavailable(model)
    monkeypatch.setenv(native.KERNEL_ENV, "native")
    with pytest.raises(RuntimeError, match="float32 on a CPU"):
        native.new_decoder(model)


def test_the_library_is_built_once_into_the_cache(tmp_path, monkeypatch):
    """One file per source, compiler and flags, renamed into place (no temporary file left); a second
    build finds it; a failed build says what ran and what the compiler said."""
    compiler = native._compiler()
    if compiler is None:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("MAXK_KERNEL_CACHE", str(tmp_path / "kernels"))
    flags = ["-O1", "-fPIC", "-shared", "-DHEAD_DIM=16"]
    built = native._build(compiler, flags)
    assert built.parent == tmp_path / "kernels" and built.name.startswith("decode_step-")
    assert [p.name for p in built.parent.iterdir()] == [built.name]
    stamp = built.stat().st_mtime_ns
    assert native._build(compiler, flags) == built and built.stat().st_mtime_ns == stamp
    assert native._build(compiler, [*flags, "-DVARIANT"]) != built  # other flags, another file
    with pytest.raises(RuntimeError, match=r"(?s)failed:\n.*error:"):
        native._build(compiler, [*flags[:-1], "-DHEAD_DIM=("])
    assert not [p for p in built.parent.iterdir() if p.name.startswith(".")]


def test_what_the_c_step_trusts_is_checked(base):
    """The C step reads raw memory: int32 tokens are widened, a cache of another shape or dtype is refused,
    a model moved to bfloat16 after the decoder was made is refused at ``refresh``, and a float64 default
    dtype still gives float32 logits (the reviewer's findings, 2026-12-01)."""
    import copy

    ref, fast = QwenDecoder(base), fx.native_decoder_or_skip(base)
    prompts = _prompts(2)
    stacked, _ = ref._prefill(prompts)
    grid = _Grid.of(stacked, torch.tensor([0, 0, 1]))
    positions = torch.tensor([len(prompts[0])] * 2 + [len(prompts[1])])
    tokens = torch.tensor([5, 6, 7])
    want = ref.step_logits(tokens, 0, positions, grid, ref.new_cache(3, 8))
    got = fast.step_logits(tokens.int(), 0, positions.int(), grid, fast.new_cache(3, 8))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="expected"):
        fast.step_logits(tokens, 0, positions, grid, fast.new_cache(4, 8))  # a row too many
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = fast.step_logits(tokens, 0, positions, grid, fast.new_cache(3, 8))
    finally:
        torch.set_default_dtype(previous)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    moved = copy.deepcopy(base)
    decoder = native.NativeDecoder(moved)
    moved.to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="float32 weights on a CPU"):
        decoder.refresh()
