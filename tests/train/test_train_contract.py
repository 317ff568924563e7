"""Contract with TRL's internals: fails loudly if an upgrade changes what MaxKGRPOTrainer relies on."""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path

import pytest
import torch
import yaml
from train_helpers import make_trainer

from maxk.objectives import compute_advantages
from maxk.train.grpo import TRL_VERSION


def test_trl_is_the_pinned_release():
    import trl

    assert trl.__version__ == TRL_VERSION == importlib.metadata.version("trl")
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'"trl=={TRL_VERSION}"' in pyproject


def test_trl_source_order_the_hook_relies_on():
    from trl import GRPOTrainer

    loss_src = inspect.getsource(GRPOTrainer._compute_loss)
    assert loss_src.index("self._get_per_token_logps_and_entropies(") < loss_src.index('inputs["advantages"]')
    prep_src = inspect.getsource(GRPOTrainer._prepare_inputs)
    for needle in ("self._generate_and_score_completions(", "shuffle_sequence_dict(", "split_tensor_dict("):
        assert needle in prep_src
    gen_src = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "self._calculate_rewards(" in gen_src and '"advantages": advantages' in gen_src


def _first_batch(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))


def _grad_total(model):
    return sum(p.grad.abs().sum().item() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize(
    ("method", "moves"), [("offpolicy_bon", True), ("offpolicy_bon_exact", True), ("grpo", False)]
)
def test_zeroed_buffer_gradient_only_through_recomputation(tiny_model_dir, tmp_path, method, moves):
    trainer = make_trainer(tiny_model_dir, tmp_path, method, beta=0.0)
    batch = _first_batch(trainer)
    assert batch["advantages"].abs().sum() > 0  # the synthetic reward varies within the group
    batch["advantages"] = torch.zeros_like(batch["advantages"])
    trainer.model.zero_grad()
    trainer._compute_loss(trainer.model, batch).backward()
    grad = _grad_total(trainer.model)
    assert (grad > 0) if moves else (grad == 0.0)
    assert (batch["advantages"] == 0).all()  # the buffer (reused by later PPO iterations) is untouched


def _sequence_logps(model, batch):
    """Sum of completion-token log-probs, computed independently of TRL (temperature 1)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
    tok = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    t = batch["completion_ids"].shape[1]
    return (tok[:, -t:] * batch["completion_mask"]).sum(-1)


@pytest.mark.parametrize(
    ("method", "own_ratio"),
    [("offpolicy_bon", False), ("offpolicy_bon_exact", False), ("offpolicy_bon_exact", True)],
)
def test_offpolicy_recomputation_uses_sequence_ratio(tiny_model_dir, tmp_path, method, own_ratio):
    trainer = make_trainer(tiny_model_dir, tmp_path, method, beta=0.0, delta_clamp=10.0, own_ratio=own_ratio)
    batch = _first_batch(trainer)
    assert "old_per_token_logps" in batch and "rewards" in batch and "group_ids" in batch
    n, k = trainer.num_generations, trainer.args.bon_k
    order = torch.argsort(batch["group_ids"], stable=True)
    rewards = batch["rewards"].double()[order].view(-1, n)
    seen = []
    real = trainer._offpolicy_advantages
    trainer._offpolicy_advantages = lambda inputs, logps: seen.append(real(inputs, logps)) or seen[-1]

    # iteration 1: pi_theta == pi_old, so the recomputed advantages equal bon_mean's (and the buffer's)
    trainer._compute_loss(trainer.model, batch)
    bon_mean = compute_advantages("bon_mean", rewards, k=k).view(-1)
    assert torch.allclose(seen[-1][order].double(), bon_mean, atol=1e-5)
    assert torch.allclose(batch["advantages"][order].double(), bon_mean, atol=1e-5)

    # later iteration: move the policy; deltas from the SEQUENCE ratio pi_theta(y|x)/pi_old(y|x)
    trainer._step = trainer.args.steps_per_generation  # the buffered batch's second PPO iteration
    assert not batch["old_per_token_logps"].isnan().any()  # iteration 0 wrote them (override 5)
    old_seq = _sequence_logps(trainer.model, batch)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    deltas = torch.expm1(_sequence_logps(trainer.model, batch) - old_seq).double()
    assert deltas.abs().max() > 1e-3
    trainer._compute_loss(trainer.model, batch)
    expect = compute_advantages(
        method, rewards, k=k, deltas=deltas[order].view(-1, n), delta_clamp=10.0, own_ratio=own_ratio
    ).view(-1)
    assert torch.allclose(seen[-1][order].double(), expect, atol=1e-4)
    assert not torch.allclose(expect, bon_mean, atol=1e-4)


@pytest.mark.parametrize(
    "method", ["grpo", "bon_max_second", "bon_loo1", "bon_subset_std", "bon_mean_centered"]
)
def test_batch_advantages_come_from_the_registry(tiny_model_dir, tmp_path, method):
    trainer = make_trainer(tiny_model_dir, tmp_path, method)
    batch = _first_batch(trainer)
    n = trainer.num_generations
    order = torch.argsort(batch["group_ids"], stable=True)
    expect = compute_advantages(method, batch["rewards"].double()[order].view(-1, n), k=trainer.args.bon_k)
    assert torch.allclose(batch["advantages"][order].double(), expect.view(-1), atol=1e-6)


def test_trl_source_the_old_logprob_deferral_relies_on():
    """Override 5: TRL computes the old log-probs by a no-grad pass of ``self.model`` before the
    reference model's, and its loss takes ``per_token_logps.detach()`` when the batch has none."""
    from trl import GRPOTrainer

    gen = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    old = gen.index("old_per_token_logps, _, _ = self._get_per_token_logps_and_entropies(\n")
    assert gen.index("with torch.no_grad()") < old < gen.index("ref_per_token_logps, _, _ =")
    assert gen[old:].split("(", 1)[1].split(",", 1)[0].strip() == "self.model"
    loss = inspect.getsource(GRPOTrainer._compute_loss)
    assert 'old_per_token_logps = inputs.get("old_per_token_logps")' in loss
    assert "per_token_logps.detach() if old_per_token_logps is None else old_per_token_logps" in loss
    assert loss.count("self._get_per_token_logps_and_entropies(") == 1


def _spy_old_logprobs(trainer) -> tuple[list, list]:
    """Record the old log-probs each loss after PPO iteration 1 reads, and for every no-grad pass of the
    policy whether it was computed (False: answered by override 5's NaN placeholder)."""
    losses, passes = [], []
    real_loss, real_pass = trainer._compute_loss, trainer._get_per_token_logps_and_entropies

    def loss(model, inputs):
        if trainer._ppo_iteration():
            losses.append(inputs["old_per_token_logps"].clone())
        return real_loss(model, inputs)

    def logps(model, *args, **kwargs):
        out = real_pass(model, *args, **kwargs)
        if model is trainer.model and not torch.is_grad_enabled():
            passes.append(not out[0].isnan().all())
        return out

    trainer._compute_loss, trainer._get_per_token_logps_and_entropies = loss, logps
    return losses, passes


@pytest.mark.parametrize("method", ["grpo", "offpolicy_bon"])
def test_old_logprobs_come_from_the_first_ppo_iteration(tiny_model_dir, tmp_path, method):
    """Override 5: at 3 PPO iterations, the old log-probs that iterations 2 and 3 read are iteration
    1's (no NaN placeholder survives), equal to TRL's own no-grad pass, and training ends on the same
    weights; TRL's pass is computed only without the deferral."""
    seen, weights = {}, {}
    for defer in (False, True):
        trainer = make_trainer(tiny_model_dir, tmp_path / str(defer), method)
        if not defer:
            trainer._can_defer_old = lambda: False
        seen[defer] = _spy_old_logprobs(trainer)
        trainer.train()
        weights[defer] = [p.detach().clone() for p in trainer.model.parameters()]
    (got_old, got_passes), (want_old, want_passes) = seen[True], seen[False]
    assert len(got_old) == len(want_old) == 4  # 2 micro-batches x PPO iterations 2 and 3
    for got, want in zip(got_old, want_old, strict=True):
        assert not got.isnan().any()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for got, want in zip(weights[True], weights[False], strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert want_passes == [True] and got_passes == [False]  # one generation batch


def test_trl_rollout_hook_signature_and_call():
    """Override 5 replaces _generate_single_turn; TRL must still call it with these arguments and
    read back (completion_ids, logprobs)."""
    from trl import GRPOTrainer

    params = list(inspect.signature(GRPOTrainer._generate_single_turn).parameters)
    assert params[:5] == ["self", "prompt_ids", "images", "multimodal_fields", "num_generations"]
    src = inspect.getsource(GRPOTrainer._generate)
    assert "completion_ids, logprobs = self._generate_single_turn(" in src


@pytest.mark.parametrize("decoder", ["auto", "generate"])
def test_rollouts_come_from_the_decode_loop(tiny_model_dir, tmp_path, decoder):
    """With rollout_decoder=auto the completions are maxk.generate.decode's: one call per generation
    batch, groups of num_generations samples of one prompt, reproducible from the seed; with
    generate, TRL's own path runs and the decoder is never called."""
    import maxk.generate.decode as dec

    calls = []
    real = dec.QwenDecoder.sample

    def spy(self, prompts, n, **kw):
        out = real(self, prompts, n, **kw)
        calls.append((len(prompts), n, out.token_ids))
        return out

    dec.QwenDecoder.sample = spy
    try:
        batches = []
        for run in range(2):
            trainer = make_trainer(tiny_model_dir, tmp_path / f"{decoder}{run}", rollout_decoder=decoder)
            batches.append(_first_batch(trainer))
    finally:
        dec.QwenDecoder.sample = real
    if decoder == "generate":
        assert calls == []
        return
    assert [(c[0], c[1]) for c in calls] == [(2, 4), (2, 4)]  # 2 prompts x 4 samples per generation batch
    assert calls[0][2] == calls[1][2]  # same seed, same step: the same completions
    batch = batches[0]  # the first micro-batch: one whole group of the generation batch
    mask = batch["completion_mask"].bool()
    got = sorted(tuple(ids[m].tolist()) for ids, m in zip(batch["completion_ids"], mask, strict=True))
    groups = [sorted(tuple(t) for t in calls[0][2][i : i + 4]) for i in (0, 4)]
    assert got in groups


def test_k_schedule_reaches_the_advantages(tiny_model_dir, tmp_path):
    """A step schedule switches the k of the next generation batch (and is logged)."""
    trainer = make_trainer(
        tiny_model_dir, tmp_path, "bon_mean", bon_k_schedule="step", bon_k_final=1, bon_k_switch=0.5
    )
    n = trainer.num_generations
    trainer.state.max_steps = 10
    for step, k in ((0, trainer.args.bon_k), (4, trainer.args.bon_k), (5, 1), (9, 1)):
        trainer.state.global_step = step
        assert trainer.current_k() == k
    trainer.state.global_step = 5
    batch = _first_batch(trainer)
    order = torch.argsort(batch["group_ids"], stable=True)
    expect = compute_advantages("bon_mean", batch["rewards"].double()[order].view(-1, n), k=1)
    assert torch.allclose(batch["advantages"][order].double(), expect.view(-1), atol=1e-6)
    assert trainer._metrics["train"]["bon_k"][-1] == 1.0


def test_trl_loads_the_policy_in_the_dtype_model_init_kwargs_names(tiny_model_dir):
    """TRL 1.16 loads a model given by path in float32 unless model_init_kwargs names a dtype: the paper
    config's train.model_dtype (bfloat16) must reach it (maxk.train.launch.grpo_kwargs)."""
    from trl.trainer.utils import create_model_from_path

    from maxk.train.launch import grpo_kwargs, run_config

    assert create_model_from_path(str(tiny_model_dir)).dtype == torch.float32  # TRL's default
    paper = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "paper.yaml").read_text())
    from maxk.config import job_config

    train = job_config({"train": paper["train"]}, ("train",))["train"]
    effective = run_config(train, {"method": "grpo"})
    gpu = grpo_kwargs(effective, output_dir="x", seed=1, use_cpu=False)["model_init_kwargs"]
    assert gpu == {"dtype": "bfloat16"}
    assert create_model_from_path(str(tiny_model_dir), **gpu).dtype == torch.bfloat16
    cpu = grpo_kwargs(effective, output_dir="x", seed=1, use_cpu=True)["model_init_kwargs"]
    assert cpu == {"dtype": "float32"}  # a CPU run keeps float32 whatever the config says


def test_trl_source_the_epoch_sampler_relies_on():
    """Override 8 (EpochRepeatSampler): TRL builds its train sampler as a RepeatSampler drawing one
    permutation per pass; transformers' _run_epoch(model, epoch, ...), which the override wraps to set the
    epoch itself, iterates the loader once per epoch after calling set_epoch (through accelerate's
    DataLoaderShard, which does not reach a sampler under a multi-process loader's skip wrappers). A
    release that changes these breaks the resumed and chained runs' equality
    (tests/train/test_train_prefix.py), so it fails here by name."""
    from accelerate.data_loader import DataLoaderShard
    from transformers import Trainer
    from trl import GRPOTrainer
    from trl.trainer.utils import RepeatSampler

    assert "return RepeatSampler(" in inspect.getsource(GRPOTrainer._get_train_sampler)
    assert "torch.randperm(self.num_samples, generator=self.generator)" in inspect.getsource(RepeatSampler)
    assert list(inspect.signature(Trainer._run_epoch).parameters)[:3] == ["self", "model", "epoch"]
    epoch_src = inspect.getsource(Trainer._run_epoch)
    assert epoch_src.index("set_epoch(epoch)") < epoch_src.index("epoch_iterator = iter(train_dataloader)")
    assert "self.batch_sampler.sampler.set_epoch(epoch)" in inspect.getsource(DataLoaderShard.set_epoch)
