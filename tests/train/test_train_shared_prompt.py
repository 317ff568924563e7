"""MaxKGRPOTrainer's 6th override: each group's prompt computed once in the log-prob passes
(``maxk.train.shared_prompt``) gives TRL's unshared log-probs, entropies and gradients."""

from __future__ import annotations

import pytest
import torch
from train_helpers import make_trainer

import maxk.train.shared_prompt as sp
from maxk.train.shared_prompt import grouped_rows, tail_labels, tail_position_ids

N = 4  # num_generations of make_trainer
C = 7  # completion width of the hand-made batches
ATOL = 2e-5


@pytest.fixture(scope="module")
def two_layer_dir(tiny_model_dir, tmp_path_factory):
    """A random 2-layer Qwen2 (4 query heads, 2 key/value heads) with the tiny tokenizer: the cache
    is expanded per layer and grouped-query attention is exercised."""
    from transformers import AutoTokenizer

    from maxk.tiny import init_model, save

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    model = init_model(tok, seed=1, num_key_value_heads=2, max_position_embeddings=256, **sizes)
    return str(save(model, tok, tmp_path_factory.mktemp("two_layer") / "model"))


@pytest.fixture
def spy(monkeypatch):
    """Calls of the shared-prompt computation (the models it ran on)."""
    calls = []
    real = sp.shared_prompt_logps

    def counting(model, *args, **kwargs):
        calls.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(sp, "shared_prompt_logps", counting)
    return calls


def grouped_batch(prompt_lens, vocab, pad_id, seed=0, n=N, width=C):
    """``(input_ids, attention_mask)`` of ``len(prompt_lens)`` groups of ``n`` rows: each group one
    left-padded random prompt, each row a random completion of 0..width tokens (right-padded)."""
    g = torch.Generator().manual_seed(seed)
    p = max(prompt_lens)
    rows = n * len(prompt_lens)
    prompt_ids = torch.full((rows, p), pad_id)
    prompt_mask = torch.zeros(rows, p, dtype=torch.long)
    for i, length in enumerate(prompt_lens):
        prompt = torch.randint(0, vocab, (length,), generator=g)
        prompt_ids[i * n : (i + 1) * n, p - length :] = prompt
        prompt_mask[i * n : (i + 1) * n, p - length :] = 1
    lengths = torch.randint(0, width + 1, (rows,), generator=g)
    lengths[0], lengths[-1] = width, 0  # one full completion, one empty
    completion_mask = (torch.arange(width) < lengths[:, None]).long()
    completion_ids = torch.randint(0, vocab, (rows, width), generator=g).masked_fill(
        completion_mask == 0, pad_id
    )
    return torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1)


def unshared(trainer, model, *args, **kwargs):
    """TRL's own computation (``GRPOTrainer._get_per_token_logps_and_entropies``)."""
    from trl import GRPOTrainer

    return GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, *args, **kwargs)


def outputs_and_grads(fn, model, ids, mask, grad, **kwargs):
    """log-probs, entropies and (with ``grad``) every parameter's gradient of a fixed random
    weighting of both."""
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(grad):
        logps, entropies, _ = fn(model, ids, mask, C, compute_entropy=True, **kwargs)
    grads = {}
    if grad:
        g = torch.Generator().manual_seed(7)
        w1, w2 = torch.randn(logps.shape, generator=g), torch.randn(logps.shape, generator=g)
        ((logps * w1).sum() + (entropies * w2).sum()).backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return logps.detach(), entropies.detach(), grads


LAYOUTS = {
    "mixed_lengths": [5, 9, 2, 1],  # the last group's cached prefix is all padding
    "no_padding": [6, 6, 6],
}


@pytest.fixture(params=["native", "torch"])
def kernel(request, monkeypatch):
    """The shared-prompt passes' attention (``$MAXK_TRAIN_KERNEL``): C, or torch's SDPA."""
    from maxk.train import native_attention

    lib = native_attention._library()
    if request.param == "native" and isinstance(lib, str):
        pytest.skip(f"no C attention here: {lib}")
    monkeypatch.setenv(native_attention.KERNEL_ENV, request.param)
    return request.param


@pytest.mark.parametrize("head", ["fused", "plain"])
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("batch_size", [None, 2 * N])
def test_shared_prompt_equals_trl(
    two_layer_dir, tmp_path, spy, monkeypatch, grad, layout, batch_size, head, kernel
):
    """With either attention and either LM head, TRL's numbers."""
    monkeypatch.setattr(sp, "HEAD", head)  # pass 2's LM head: TRL's fused kernel or head_logps
    trainer = make_trainer(two_layer_dir, tmp_path, temperature=0.7, beta=0.0)
    model = trainer.model
    model.train()
    ids, mask = grouped_batch(LAYOUTS[layout], model.config.vocab_size, model.config.pad_token_id)
    got = outputs_and_grads(
        trainer._get_per_token_logps_and_entropies, model, ids, mask, grad, batch_size=batch_size
    )
    chunks = -(-ids.shape[0] // batch_size) if batch_size else 1
    assert spy == [model] * chunks  # the shared path ran, once per chunk
    want = outputs_and_grads(
        lambda *a, **k: unshared(trainer, *a, **k), model, ids, mask, grad, batch_size=batch_size
    )
    assert torch.isfinite(got[0]).all() and torch.isfinite(got[1]).all()
    torch.testing.assert_close(got[0], want[0], atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=ATOL, rtol=1e-5)
    completion_mask = mask[:, -C:]
    assert (got[0][completion_mask == 0] == 0).all()
    assert got[2].keys() == want[2].keys() and (len(got[2]) > 0) == grad
    for name, g in want[2].items():
        torch.testing.assert_close(got[2][name], g, atol=ATOL, rtol=1e-4, msg=name)


@pytest.mark.parametrize("head", ["fused", "plain"])
def test_temperature_reaches_the_shared_path(two_layer_dir, tmp_path, monkeypatch, head):
    """Two temperatures give different log-probs through the shared path (the fused head's own, or the
    trainer's passed to ``head_logps``), each TRL's."""
    import maxk.train.shared_prompt as sp

    monkeypatch.setattr(sp, "HEAD", head)
    ids, mask = None, None
    results = []
    for temperature in (1.0, 0.5):
        trainer = make_trainer(two_layer_dir, tmp_path / str(temperature), temperature=temperature, beta=0.0)
        if ids is None:
            cfg = trainer.model.config
            ids, mask = grouped_batch([4, 7], cfg.vocab_size, cfg.pad_token_id)
        with torch.no_grad():
            results.append(trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, C)[0])
            torch.testing.assert_close(
                results[-1], unshared(trainer, trainer.model, ids, mask, C)[0], atol=ATOL, rtol=1e-5
            )
    assert not torch.allclose(results[0], results[1])


def test_not_grouped_falls_back_to_trl(two_layer_dir, tmp_path, spy):
    trainer = make_trainer(two_layer_dir, tmp_path, beta=0.0)
    model = trainer.model
    ids, mask = grouped_batch([5, 3, 8], model.config.vocab_size, model.config.pad_token_id)
    perm = torch.arange(ids.shape[0]).view(-1, N).t().flatten()  # groups interleaved row by row
    with torch.no_grad():
        got = trainer._get_per_token_logps_and_entropies(model, ids[perm], mask[perm], C)[0]
        want = unshared(trainer, model, ids[perm], mask[perm], C)[0]
    assert spy == []
    assert torch.equal(got, want)


def test_predicate_refuses_what_it_does_not_handle(two_layer_dir, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    trainer = make_trainer(two_layer_dir, tmp_path, beta=0.0)
    model = trainer.model
    ids, mask = grouped_batch([5, 3], model.config.vocab_size, model.config.pad_token_id)
    ok = trainer._can_share_prompts
    assert ok(model, ids, mask, C, None, {}) and ok(model, ids, mask, C, N, {"pixel_values": None})
    assert not ok(model, ids, mask, C, None, {"pixel_values": torch.zeros(1)})  # vision inputs
    assert not ok(model, ids, mask, C, N + 1, {})  # chunks that split a group
    assert not ok(model, ids, mask, ids.shape[1] - 1, None, {})  # a one-token prompt: nothing to share
    assert not ok(model, ids[1:], mask[1:], C, None, {})  # a partial group
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2))  # fmt: skip
    assert not ok(llama, ids % 64, mask, C, None, {})  # another model family
    model.gradient_checkpointing_enable()
    try:
        assert not ok(model, ids, mask, C, None, {})  # checkpointed layers drop the cache
    finally:
        model.gradient_checkpointing_disable()


def test_grouped_rows():
    ids = torch.tensor([[1, 2, 9], [1, 2, 8], [0, 3, 7], [0, 3, 6]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 1, 1]])
    assert grouped_rows(ids, mask, 2, 2)
    assert not grouped_rows(ids, mask, 3, 2)  # the third column differs
    assert not grouped_rows(ids[[0, 2, 1, 3]], mask[[0, 2, 1, 3]], 2, 2)
    assert not grouped_rows(ids, mask, 2, 4)
    other = mask.clone()
    other[1, 0] = 0
    assert not grouped_rows(ids, other, 2, 2)  # same ids, different prompt mask
    assert not grouped_rows(ids, mask, 1, 2)  # a one-column prompt: nothing to share


def test_tail_labels_and_positions():
    tail = torch.tensor([[5, 6, 7, 0], [5, 8, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert tail_labels(tail, mask).tolist() == [[-100, 6, 7, -100], [-100, 8, -100, -100]]
    assert tail_position_ids(5, 3, torch.device("cpu")).tolist() == [[4, 5, 6, 7]]


@pytest.mark.parametrize("defer", [False, True])
def test_old_and_reference_passes_share_the_prompt(two_layer_dir, tmp_path, spy, defer):
    """beta != 0 and 3 PPO iterations: the generation batch's old-policy and reference log-probs go
    through the shared path (policy and the separate reference model) and equal TRL's. With the old
    log-probs deferred to PPO iteration 1 (MaxKGRPOTrainer's override 5, the default) only the reference
    pass runs here; without (TRL's own pass, as under vLLM) both do."""
    trainer = make_trainer(two_layer_dir, tmp_path, temperature=0.7, beta=0.05, num_iterations=3)
    if not defer:
        trainer._can_defer_old = lambda: False
    assert trainer.ref_model is not None and trainer.ref_model is not trainer.model
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    chunks = (
        trainer.args.generation_batch_size // trainer.args.per_device_train_batch_size
    )  # TRL's batch_size
    assert spy == [trainer.model] * chunks * (not defer) + [trainer.ref_model] * chunks
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    width = batch["completion_ids"].shape[1]
    passes = [(trainer.ref_model, "ref_per_token_logps")]
    if defer:
        assert batch["old_per_token_logps"].isnan().all()  # written by PPO iteration 1's loss
    else:
        passes.append((trainer.model, "old_per_token_logps"))
    with torch.no_grad():
        for model, key in passes:
            want = unshared(trainer, model, ids, mask, width)[0]
            torch.testing.assert_close(batch[key], want, atol=ATOL, rtol=1e-5)


def test_offpolicy_hook_fires_once_per_loss_with_sharing(two_layer_dir, tmp_path, spy):
    """The off-policy recomputation still reads the policy log-probs once per loss call."""
    trainer = make_trainer(two_layer_dir, tmp_path, "offpolicy_bon", beta=0.0, temperature=0.7)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    spy.clear()
    seen = []
    real = trainer._offpolicy_advantages
    trainer._offpolicy_advantages = lambda inputs, logps: seen.append(logps.detach()) or real(inputs, logps)
    for _ in range(2):
        trainer._compute_loss(trainer.model, batch).backward()
    assert len(seen) == 2 and spy == [trainer.model] * 2
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    with torch.no_grad():
        want = unshared(trainer, trainer.model, ids, mask, batch["completion_ids"].shape[1])[0]
    torch.testing.assert_close(seen[0], want, atol=ATOL, rtol=1e-5)


def test_length_runs_sort_rows_by_their_last_token_and_cut_equal_counts():
    from maxk.train.shared_prompt import length_runs

    mask = torch.tensor(
        [
            [1, 1, 1, 0, 0],  # 3
            [1, 0, 0, 0, 0],  # 1
            [1, 1, 1, 1, 1],  # 5
            [0, 0, 0, 0, 0],  # 0: an empty completion
            [1, 0, 1, 0, 0],  # 3: a hole counts up to the last unmasked token
        ]
    )
    runs = length_runs(mask, 2)
    assert [(idx.tolist(), width) for idx, width in runs] == [([3, 1, 0], 3), ([4, 2], 5)]
    assert [(idx.tolist(), w) for idx, w in length_runs(mask, 1)] == [([3, 1, 0, 4, 2], 5)]
    assert [w for _, w in length_runs(mask, 9)] == [0, 1, 3, 3, 5]  # at most one run per row
    assert sorted(torch.cat([idx for idx, _ in length_runs(mask, 3)]).tolist()) == list(range(5))
