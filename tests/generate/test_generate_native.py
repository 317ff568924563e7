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

from maxk import ckernels
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
    built = ckernels.build(native.SOURCE, compiler, flags)
    assert built.parent == tmp_path / "kernels" and built.name.startswith("decode_step-")
    assert [p.name for p in built.parent.iterdir()] == [built.name]
    stamp = built.stat().st_mtime_ns
    assert ckernels.build(native.SOURCE, compiler, flags) == built and built.stat().st_mtime_ns == stamp
    other = ckernels.build(native.SOURCE, compiler, [*flags, "-DVARIANT"])
    assert other != built  # other flags, another file
    with pytest.raises(RuntimeError, match=r"(?s)failed:\n.*error:"):
        ckernels.build(native.SOURCE, compiler, [*flags[:-1], "-DHEAD_DIM=("])
    assert not [p for p in built.parent.iterdir() if p.name.startswith(".")]


def test_what_the_c_step_trusts_is_checked(base):
    """The C step reads raw memory: int32 tokens are widened, a cache too small or of another dtype is
    refused, a model moved to bfloat16 after the decoder was made is refused at ``refresh``, and a float64
    default dtype still gives float32 logits (the reviewer's findings, 2026-12-01)."""
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
        fast.step_logits(tokens, 0, positions, grid, fast.new_cache(2, 8))  # a row too few
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


def _books(total: int, n: int, steps: int, stop: list[int], seed: int):
    from maxk.generate.decode import _Books, _uniforms

    return _Books.empty(_uniforms(range(seed, seed + total // n), n, steps, "cpu"), n, stop)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_c_draws_and_records_are_torch_s_up_to_rounding(base, temperature):
    """``NativeDecoder._draw`` against ``QwenDecoder._draw`` on the same logits, over three steps of 19
    running rows of 24 (some rows already stopped, some compacted away), a stop set that ends some rows,
    and one row whose uniform is 1 and whose last tokens have p = 0 (the search runs off the end and falls
    back to the most likely token): tokens, alive rows and every record equal, the sums of log-probs and
    entropies within float rounding."""
    import dataclasses

    fast = fx.native_decoder_or_skip(base)
    g = torch.Generator().manual_seed(3)
    vocab, n, steps = fast.vocab, 8, 3
    books = {k: _books(24, n, steps, [5, 9, 700], seed=4) for k in ("torch", "c")}
    for b in books.values():
        b.uniforms[0, 1, 0] = 1.0
    rows = torch.tensor([r for r in range(24) if r not in (3, 10, 11, 17, 20)])
    prompt_of = rows // n
    alive = {k: torch.ones(len(rows), dtype=torch.bool) for k in books}
    for a in alive.values():
        a[[2, 7]] = False
    stopped_any = False
    for step in range(steps):
        logits = torch.randn(len(rows), vocab, generator=g) * 2
        logits[:, [5, 9]] = 6.0  # the stop tokens are likely: about one row in five stops a step
        logits[0, vocab - 50 :] = -300.0  # p = 0 in float32
        t_tok, t_live = QwenDecoder._draw(
            fast, logits, step, rows, prompt_of, alive["torch"], books["torch"], temperature, 1.0
        )
        c_tok, c_live = fast._draw(logits, step, rows, prompt_of, alive["c"], books["c"], temperature, 1.0)
        assert torch.equal(c_tok, t_tok) and c_live == t_live
        assert torch.equal(alive["c"], alive["torch"])
        stopped_any |= bool(books["torch"].stopped.any())
    assert stopped_any and bool(alive["c"].any())
    for field in dataclasses.fields(books["c"]):
        c, t = getattr(books["c"], field.name), getattr(books["torch"], field.name)
        if field.name in ("sum_logp", "sum_ent"):
            torch.testing.assert_close(c, t, atol=1e-5, rtol=0)
            assert not torch.equal(c, t)  # computed apart (else torch was compared with itself)
        else:
            assert torch.equal(c, t) if isinstance(c, torch.Tensor) else c == t, field.name


def test_compaction_in_place_keeps_every_sample_bit_for_bit(base):
    """The pipeline's sampling through the C step, compacting in place, against the same with
    ``QwenDecoder``'s compaction (the cache copied, the grid rebuilt): every sample equal, its sums bit for
    bit, with rows stopping early enough that the batch is compacted several times."""
    import functools

    fast, plain = fx.native_decoder_or_skip(base), native.NativeDecoder(base)
    plain._compact = functools.partial(QwenDecoder._compact, plain)
    compactions = []
    original = fast._compact
    fast._compact = lambda *a: compactions.append(a[-1]) or original(*a)
    prompts = _prompts(5, seed=6)
    kw = {"max_new_tokens": 40, "stop_token_ids": list(range(4, 30)), "seeds": range(5)}
    a, b = plain.sample(prompts, 16, **kw), fast.sample(prompts, 16, **kw)
    assert len(compactions) >= 2
    assert (a.token_ids, a.stopped, a.sum_logprob, a.sum_entropy) == (
        b.token_ids,
        b.stopped,
        b.sum_logprob,
        b.sum_entropy,
    )
    assert 0 < sum(b.stopped) < len(b.stopped)


def test_the_c_prefill_gives_the_model_s_keys_values_and_logits(base, monkeypatch):
    """``NativeDecoder._prefill`` against ``QwenDecoder._prefill`` (the model's own forward) on 7 prompts of
    different lengths in chunks of 3 (so a chunk's prompts land at an offset of the outputs): the same mask,
    keys and values at every prompt position and last logits, up to float rounding."""
    from maxk.generate import decode

    monkeypatch.setattr(native, "PREFILL_PROMPTS", 3)
    ref, fast = QwenDecoder(base), fx.native_decoder_or_skip(base)
    prompts = _prompts(7, seed=8)
    (want_k, want_v, want_mask), want_logits = ref._prefill(prompts)
    (got_k, got_v, got_mask), got_logits = fast._prefill(prompts)
    assert torch.equal(got_mask, want_mask) and decode.PREFILL_PROMPTS > 3
    valid = want_mask == 0
    for a, b in zip(got_k + got_v, want_k + want_v, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a[:, valid], b[:, valid], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_logits, want_logits, atol=2e-4, rtol=1e-4)
    assert not torch.equal(got_logits, want_logits)  # computed apart
    with pytest.raises(ValueError, match="outside the vocabulary"):
        fast._prefill([[5, 6, fast.vocab]])


def test_the_c_draws_hold_at_the_edges(base):
    """Edges of the C draw against torch's (the reviewer's findings, 2026-12-01): a logit of 1e10 at
    temperature 1.3 (a fused multiply-add once left the top token's y - max y a rounding error past exp's
    range: token 0, log-prob inf); a uniform of 1 with every p > 0 (torch's search runs off the end and
    takes the last token); an empty prompt is refused by the prefill."""
    fast = fx.native_decoder_or_skip(base)
    vocab = fast.vocab
    logits = torch.zeros(2, vocab)
    logits[0, 7] = 1e10
    logits[1] = torch.linspace(-2, 2, vocab)
    rows = torch.tensor([0, 1])
    for temperature in (1.0, 1.3):
        books = {k: _books(2, 1, 1, [], seed=0) for k in ("torch", "c")}
        for b in books.values():
            b.uniforms[1, 0, 0] = 1.0
        t_tok, _ = QwenDecoder._draw(fast, logits, 0, rows, rows.clone(), torch.ones(2, dtype=torch.bool),
                                     books["torch"], temperature, 1.0)  # fmt: skip
        c_tok, _ = fast._draw(logits, 0, rows, rows.clone(), torch.ones(2, dtype=torch.bool), books["c"],
                              temperature, 1.0)  # fmt: skip
        assert c_tok.tolist() == t_tok.tolist() == [7, vocab - 1]
        torch.testing.assert_close(books["c"].sum_logp, books["torch"].sum_logp, atol=1e-5, rtol=0)
        torch.testing.assert_close(books["c"].sum_ent, books["torch"].sum_ent, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="empty"):
        fast._prefill([[], [5, 6]])
