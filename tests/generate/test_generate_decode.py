"""maxk.generate.decode: the own decode loop reproduces the model exactly and samples reproducibly, with
its step in torch operations (``QwenDecoder``) and in C (``maxk.generate.native.NativeDecoder``)."""

from __future__ import annotations

import gen_fixtures as fx
import pytest
import torch

from maxk.generate.decode import QwenDecoder, draw_tokens, supports


@pytest.fixture(scope="module")
def model_and_prompts():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = fx.tiny_model_dir()
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tok = AutoTokenizer.from_pretrained(path)
    texts = ["Write function f(x).", "Read two integers and print their sum, then stop.", "abc"]
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
        for t in texts
    ]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return model, ids


@pytest.fixture(params=["torch", "native"])
def make_decoder(request):
    """The decoder class of each step: torch's, and the C one where this machine builds it."""
    return QwenDecoder if request.param == "torch" else fx.native_decoder_or_skip


def _sample(decoder, prompts, n, seeds, max_new_tokens=24, stop=(1,), **kw):
    return decoder.sample(prompts, n, max_new_tokens=max_new_tokens, stop_token_ids=stop, seeds=seeds, **kw)


def _stop_ids(model_and_prompts):
    model, _ = model_and_prompts
    eos = model.generation_config.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_recorded_logprobs_and_entropy_are_the_model_s(model_and_prompts, make_decoder, temperature, top_p):
    """Every drawn token's log-prob and every step's entropy, summed per sample, equal what the model's
    own forward pass over prompt + completion gives (after temperature and top-p)."""
    model, prompts = model_and_prompts
    decoder = make_decoder(model)
    stop = _stop_ids(model_and_prompts)
    res = _sample(decoder, prompts, 5, [1, 2, 3], stop=stop, temperature=temperature, top_p=top_p)
    assert len(res.token_ids) == 15
    for row, ids in enumerate(res.token_ids):
        prompt = prompts[row // 5]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        if top_p < 1.0:  # the same nucleus as transformers' TopPLogitsWarper
            from transformers.generation.logits_process import TopPLogitsWarper

            logp = torch.log_softmax(TopPLogitsWarper(top_p)(None, logits / temperature), dim=-1)
        p = logp.exp()
        drawn = logp.gather(1, torch.tensor(ids)[:, None]).sum().item()
        entropy = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum().item()
        assert res.sum_logprob[row] == pytest.approx(drawn, abs=1e-4)
        assert res.sum_entropy[row] == pytest.approx(entropy, abs=1e-4)
        assert res.stopped[row] == (ids[-1] in stop)
        assert all(t not in stop for t in ids[:-1])  # nothing after the first stop token


def test_a_prompt_s_samples_do_not_depend_on_its_batch_mates(model_and_prompts, make_decoder):
    model, prompts = model_and_prompts
    decoder = make_decoder(model)
    stop = _stop_ids(model_and_prompts)
    together = _sample(decoder, prompts, 8, [7, 8, 9], max_new_tokens=40, stop=stop)
    alone = _sample(decoder, prompts[1:2], 8, [8], max_new_tokens=40, stop=stop)
    assert together.token_ids[8:16] == alone.token_ids
    assert together.sum_logprob[8:16] == pytest.approx(alone.sum_logprob)
    again = _sample(decoder, prompts, 8, [7, 8, 9], max_new_tokens=40, stop=stop)
    assert again.token_ids == together.token_ids
    other = _sample(decoder, prompts, 8, [70, 8, 9], max_new_tokens=40, stop=stop)
    assert other.token_ids[:8] != together.token_ids[:8] and other.token_ids[8:] == together.token_ids[8:]


def test_compaction_keeps_every_sample_whole(model_and_prompts, make_decoder):
    """With a stop token that is drawn often, rows finish at many steps and the batch is compacted
    repeatedly: each row still gets exactly its own tokens (checked against its log-prob sum above)."""
    model, prompts = model_and_prompts
    decoder = make_decoder(model)
    with torch.no_grad():
        first = model(torch.tensor([prompts[0]])).logits[0, -1]
    common = torch.topk(first, 3).indices.tolist()  # likely tokens end most samples early
    res = _sample(decoder, prompts[:1], 64, [5], max_new_tokens=30, stop=common)
    lengths = [len(t) for t in res.token_ids]
    assert len(set(lengths)) > 3 and min(lengths) == 1
    for ids, lp in zip(res.token_ids, res.sum_logprob, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([prompts[0] + ids])).logits[0, len(prompts[0]) - 1 : -1]
        ref = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(ids)[:, None]).sum().item()
        assert lp == pytest.approx(ref, abs=1e-4)


def test_a_step_without_one_prompt_s_rows_gives_the_model_s_logits(model_and_prompts, make_decoder):
    """After compaction a prompt may have no rows left: the grid holds the others' caches only, and
    each row's next-token logits still equal the model's own forward pass over prompt + token."""
    from maxk.generate.decode import _Grid

    model, prompts = model_and_prompts
    decoder = make_decoder(model)
    stacked, _ = decoder._prefill(prompts)
    lengths = [len(ids) for ids in prompts]
    prompt_of, tokens = torch.tensor([0, 0, 2]), torch.tensor([5, 7, 9])  # prompt 1 has left
    grid = _Grid.of(stacked, prompt_of)
    assert grid.prompts == 2
    cache = decoder.new_cache(3, 4)
    positions = torch.tensor([lengths[p] for p in prompt_of.tolist()])
    logits = decoder.step_logits(tokens, 0, positions, grid, cache)
    for row, (p, token) in enumerate(zip(prompt_of.tolist(), tokens.tolist(), strict=True)):
        with torch.no_grad():
            want = model(torch.tensor([prompts[p] + [token]])).logits[0, -1]
        torch.testing.assert_close(logits[row], want, atol=1e-4, rtol=1e-4)


def test_a_model_with_a_bias_on_some_projections_only_gets_its_logits(make_decoder):
    """q and v with a bias, k without (the reviewer's finding, 2026-12-01: the step dropped every bias):
    the logits after one generated token equal the model's own forward over prompt + token."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from maxk.generate.decode import _Grid

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16)  # fmt: skip
    model = Qwen2ForCausalLM(cfg).eval()
    attention = model.model.layers[0].self_attn
    attention.k_proj.bias = None
    with torch.no_grad():
        attention.q_proj.bias.normal_()
        attention.v_proj.bias.normal_()
    decoder = make_decoder(model)
    prompt = [5, 6, 7, 8, 9]
    stacked, _ = decoder._prefill([prompt])
    grid = _Grid.of(stacked, torch.tensor([0]))
    logits = decoder.step_logits(torch.tensor([11]), 0, torch.tensor([5]), grid, decoder.new_cache(1, 4))
    with torch.no_grad():
        want = model(torch.tensor([[*prompt, 11]])).logits[0, -1]
    torch.testing.assert_close(logits[0], want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("at_once", [1, 2, 16])
def test_the_prompts_prefilled_at_once_are_each_prompt_s_own_forward(model_and_prompts, monkeypatch, at_once):
    """Forwards over the prompts padded on the right (``at_once`` a forward, the last one narrower than
    the longest): each prompt's keys, values and last logits are its forward alone (to rounding), its
    padding is masked with -inf and nothing else is."""
    from maxk.generate import decode

    monkeypatch.setattr(decode, "PREFILL_PROMPTS", at_once)
    model, prompts = model_and_prompts
    prompts = sorted(prompts, key=len, reverse=True)  # at 2 a forward, the second is narrower
    decoder = QwenDecoder(model)
    (keys, values, mask), last = decoder._prefill(prompts)
    lengths = [len(ids) for ids in prompts]
    assert len(set(lengths)) == len(lengths)  # every prompt padded but the longest
    assert keys[0].shape[:3] == (model.config.num_key_value_heads, len(prompts), max(lengths))
    for p, ids in enumerate(prompts):
        with torch.no_grad():
            alone = model(torch.tensor([ids]), use_cache=True)
        for layer, cached in enumerate(alone.past_key_values.layers):
            torch.testing.assert_close(keys[layer][:, p, : lengths[p]], cached.keys[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(
                values[layer][:, p, : lengths[p]], cached.values[0], atol=1e-5, rtol=1e-5
            )
        torch.testing.assert_close(last[p], alone.logits[0, -1], atol=1e-4, rtol=1e-4)
        assert mask[p, : lengths[p]].eq(0).all() and mask[p, lengths[p] :].eq(-float("inf")).all()


def test_uniforms_drawn_up_front_are_the_draws_of_one_step_after_another():
    """A prompt's uniforms are its generator's draws of n a step, as the loop drew them step by step
    before (so a seed gives the same samples): the table is ``[prompts, steps, n]``, prompt-major."""
    from maxk.generate.decode import _uniforms

    table = _uniforms([11, 12], 32, 96, "cpu")
    assert table.shape == (2, 96, 32) and table.dtype == torch.float64
    for p, seed in enumerate([11, 12]):
        generator = torch.Generator().manual_seed(seed)
        steps = [torch.rand(32, generator=generator, dtype=torch.float64) for _ in range(96)]
        assert torch.equal(table[p], torch.stack(steps))


def test_grid_places_each_row_at_its_prompt_s_slot():
    from maxk.generate.decode import _Grid

    keys = torch.stack([torch.full((2, 5, 4), float(v)) for v in (1, 2, 3)], dim=1)  # 3 prompts, one layer
    mask = torch.tensor([[0, 0, 0, -float("inf"), -float("inf")], [0] * 5, [0, 0] + [-float("inf")] * 3])
    grid = _Grid.of(([keys], [-keys], mask), torch.tensor([0, 2, 2, 2]))  # prompt 1 has left the batch
    assert (grid.prompts, grid.per_prompt, grid.width) == (2, 3, 5)
    assert grid.slot.tolist() == [0, 3, 4, 5]
    assert grid.keys_t[0][0, :, 0, 0].tolist() == [1.0, 3.0]  # prompts 0 and 2 remain
    assert grid.values[0][0, :, 0, 0].tolist() == [-1.0, -3.0]
    assert grid.mask.shape == (1, 4, 1, 5) and grid.mask[0, 1, 0].tolist() == mask[2].tolist()


def test_draw_tokens_follows_the_distribution():
    """Inverse-CDF draws: u below the first token's mass picks it; top-p removes the tail."""
    scores = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    pick = lambda u, **kw: draw_tokens(scores, torch.tensor([u], dtype=torch.float64), **kw)[0].item()  # noqa: E731
    assert [pick(u, temperature=1.0, top_p=1.0) for u in (0.1, 0.6, 0.95)] == [0, 1, 2]
    assert pick(0.99, temperature=1.0, top_p=0.8) == 1  # 0.2 cut: the mass is renormalised over {0, 1}
    _, logp, ent = draw_tokens(scores, torch.tensor([0.1], dtype=torch.float64), 1.0, 1.0)
    assert logp.item() == pytest.approx(torch.log(torch.tensor(0.5)).item())
    probs = torch.tensor([0.5, 0.3, 0.2])
    assert ent.item() == pytest.approx(-(probs * probs.log()).sum().item())


def test_only_qwen2_models_are_taken(model_and_prompts):
    model, _ = model_and_prompts
    assert supports(model)

    class Other:
        config = type("C", (), {"model_type": "llama"})()

    assert not supports(Other())
    with pytest.raises(ValueError, match="Qwen2"):
        QwenDecoder(Other())


def test_the_unguarded_entropy_equals_the_guarded_one_without_a_top_p_cut():
    """``entropy_of(..., finite=True)`` (sampling without top-p) skips the guard against 0 x -inf: equal
    bit for bit where probabilities underflow to 0; with a top-p cut the guard is needed."""
    from maxk.generate.decode import entropy_of, sampling_logprobs

    scores = torch.randn(64, 1000, generator=torch.Generator().manual_seed(0)) * 40  # many p underflow
    logp = sampling_logprobs(scores, 1.0, 1.0)
    assert (logp.exp() == 0).any() and torch.isfinite(logp).all()
    assert torch.equal(entropy_of(logp, finite=True), entropy_of(logp))
    cut = sampling_logprobs(scores, 1.0, 0.9)
    assert torch.isinf(cut).any() and torch.isnan(entropy_of(cut, finite=True)).any()
    assert torch.isfinite(entropy_of(cut)).all()
