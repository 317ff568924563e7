"""GRPO with advantages from the ``maxk.objectives`` registry, on top of TRL 1.16's GRPOTrainer.

TRL computes advantages inline in ``_generate_and_score_completions`` (z-score only), shuffles the
buffered generation batch row by row and reuses that split for every PPO iteration. Four overrides
change exactly that and nothing else:

1. ``_calculate_rewards`` keeps the gathered (all-process) raw rewards.
2. ``_generate_and_score_completions`` replaces ``advantages`` by the registry's estimator on the
   global groups and adds ``rewards`` (raw, local rows) and ``group_ids`` to the batch.
3. ``_prepare_inputs`` shuffles whole groups (never rows) and checks that every micro-batch holds
   whole groups (``per_device_train_batch_size`` must be a multiple of ``num_generations``).
4. off-policy estimators (every one the registry marks ``uses_deltas``: ``offpolicy_bon``,
   ``offpolicy_bon_exact`` and their ``_onstd`` variants): at every PPO iteration the
   advantages are recomputed inside the loss from
   delta_i = exp(sum_t (log pi_theta - log pi_old)) - 1, the SEQUENCE ratio of section 3.3 (detached,
   a constant like any PPO advantage), clamped to ``delta_clamp``. At the first iteration pi_theta =
   pi_old, so delta = 0 and the advantages equal ``bon_mean``'s. ``offpolicy_bon_exact`` leaves the
   sample's own ratio out of its weights (``own_ratio`` False): the surrogate's ``rho_i A_i`` carries it.
   Each recomputation logs the regime the first-order transform assumes (``delta_stats``: |delta|
   mean and quantiles, share clamped), per PPO iteration: ``maxk.analysis.learning`` checks it.
   Hook: TRL's ``_compute_loss`` calls ``_get_per_token_logps_and_entropies`` (policy log-probs)
   BEFORE it reads ``inputs["advantages"]``; the override of the former writes the recomputed
   advantages into a shallow copy of the micro-batch. ``tests/train/test_train_contract.py`` fails
   if a TRL upgrade changes that order.
5. the old policy's log-probs (PPO iterations > 1) come from the first iteration's own forward pass:
   that iteration is one optimizer step on the policy the batch was sampled from (generation happens
   at optimizer-step boundaries, ``steps_per_generation`` = ``gradient_accumulation_steps``), so TRL's
   separate no-grad pass over the generation batch computes the same numbers again. Its call is
   answered with a NaN placeholder (``_defer_old``); iteration 0's loss runs without old log-probs (TRL
   then takes ``per_token_logps.detach()``: ratio 1, and an off-policy delta of exactly 0) and writes its
   detached log-probs into the buffered micro-batch, where iterations 1, 2, ... read them. Not with
   vLLM (its importance-sampling correction reads them at generation) or a PEFT reference (the same
   model object answers both no-grad calls).
6. ``_generate_single_turn`` (rollouts without vLLM): for Qwen2-family models with plain sampling
   (``rollout_decoder="auto"``), the completions come from ``maxk.generate.decode.QwenDecoder`` (its
   step in C where it builds: ``maxk.generate.native``) on the live policy's weights: every prompt of
   the generation batch in one decode loop, its ``num_generations`` samples sharing the prompt's cache,
   seeded from (seed, step, prompt). TRL's own ``model.generate`` path is kept for other models, vLLM,
   and ``rollout_decoder="generate"``.
7. ``_get_per_token_logps_and_entropies`` runs each group's prompt once (``maxk.train.shared_prompt``).
8. ``_get_train_sampler``: TRL's ``RepeatSampler`` with ``set_epoch`` (``EpochRepeatSampler``), so that
   epoch e's prompt order is a function of (seed, e), the (e+1)-th permutation of the seeded stream that
   an uninterrupted run draws: a run resumed from a checkpoint past an epoch boundary draws the order
   the uninterrupted run drew (TRL's sampler restarts its stream in the resumed process, so epoch e
   there repeated epoch 1's order), and a run of E epochs passes through a run of fewer epochs' final
   state (``maxk.train.prefix``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import trl
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import RepeatSampler, split_tensor_dict

from maxk.objectives import ESTIMATORS, REWARD_KINDS, compute_advantages, estimator, needs_k, uses_deltas
from maxk.seeds import derive_seed
from maxk.train.config import RUN_DEFAULTS as _RUN_DEFAULTS  # the defaults below that the config also sets
from maxk.train.config import TRAIN_DEFAULTS as _TRAIN_DEFAULTS

#: The exact TRL release whose internals the overrides rely on (also pinned in pyproject.toml).
TRL_VERSION = "1.16.0"
K_SCHEDULES = ("constant", "linear", "step")
#: log-ratio guard before exp (as TRL's VESPO): keeps delta finite; delta_clamp then bounds it.
_MAX_LOG_RATIO = 20.0


@dataclass
class MaxKGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the advantage estimator and its parameters."""

    advantage_method: str = field(default="grpo", metadata={"help": f"one of {list(ESTIMATORS)}"})
    bon_k: int = field(
        default=_TRAIN_DEFAULTS["bon_k"], metadata={"help": "subset size k of the max@k (BoN) objectives"}
    )
    delta_clamp: float = field(
        default=_TRAIN_DEFAULTS["delta_clamp"],
        metadata={"help": "off-policy methods: deltas are clamped to [-c, c]"},
    )
    own_ratio: bool = field(
        default=_TRAIN_DEFAULTS["own_ratio"],
        metadata={"help": "offpolicy_bon_exact(_onstd): keep each sample's own ratio in its weights (paper)"},
    )
    bon_k_schedule: str = field(
        default="constant", metadata={"help": f"k over training: one of {K_SCHEDULES} (bon_k -> bon_k_final)"}
    )
    bon_k_final: int | None = field(default=None, metadata={"help": "k at the end of training (schedules)"})
    bon_k_switch: float = field(
        default=0.5, metadata={"help": "step schedule: fraction of training after which k = bon_k_final"}
    )
    reward_kind: str = field(
        default=_RUN_DEFAULTS["reward_kind"],
        metadata={"help": "continuous (fraction of tests passed) or binary (all pass)"},
    )
    rollout_decoder: str = field(
        default=_TRAIN_DEFAULTS["rollout_decoder"],
        metadata={"help": "auto: maxk's decode loop for Qwen2 rollouts without vLLM; generate: TRL's"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        spec = estimator(self.advantage_method)  # unknown names: ValueError listing the known ones
        if self.reward_kind not in REWARD_KINDS:
            raise ValueError(f"reward_kind {self.reward_kind!r} not in {REWARD_KINDS}")
        if self.per_device_train_batch_size % self.num_generations != 0:
            raise ValueError(
                f"per_device_train_batch_size ({self.per_device_train_batch_size}) must be a multiple of "
                f"num_generations ({self.num_generations}) so that every micro-batch holds whole groups"
            )
        spec.check(k=self.bon_k, n=self.num_generations, reward_kind=self.reward_kind)
        if self.bon_k_schedule not in K_SCHEDULES:
            raise ValueError(f"bon_k_schedule must be one of {K_SCHEDULES}, got {self.bon_k_schedule!r}")
        if self.bon_k_schedule != "constant":
            final = self.bon_k_final
            if final is None:
                raise ValueError(f"bon_k_schedule={self.bon_k_schedule!r} needs bon_k_final")
            spec.check(k=final, n=self.num_generations, reward_kind=self.reward_kind, what="bon_k_final")
            if not 0.0 <= self.bon_k_switch <= 1.0:
                raise ValueError(f"bon_k_switch must be in [0, 1], got {self.bon_k_switch}")
        if self.delta_clamp < 0:
            raise ValueError(f"delta_clamp must be >= 0, got {self.delta_clamp}")
        if self.rollout_decoder not in ("auto", "generate"):
            raise ValueError(f"rollout_decoder must be auto or generate, got {self.rollout_decoder!r}")


# ------------------------------------------------------------------------------------------------
# pure helpers (unit-tested on their own)


def scheduled_k(k: int, schedule: str, final: int | None, switch: float, progress: float) -> int:
    """The subset size k at ``progress`` in [0, 1] of training (the fraction of optimizer steps done).

    ``constant``: k. ``linear``: ``round(k + (final - k) * progress)``, from k at the start to
    ``final`` at the end. ``step``: k before ``switch``, ``final`` from it on. PKPO (Walder & Karkhanis
    2025, arXiv 2505.15201) reports that annealing k over training helps both pass@1 and pass@k.
    """
    progress = min(1.0, max(0.0, float(progress)))
    if schedule == "constant" or final is None:
        return int(k)
    if schedule == "linear":
        return round(k + (final - k) * progress)
    if schedule == "step":
        return int(final if progress >= switch else k)
    raise ValueError(f"unknown k schedule {schedule!r}; known: {K_SCHEDULES}")


def group_permutation(batch_size: int, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A row permutation that moves whole contiguous groups of ``n`` rows, keeping each group's order."""
    if batch_size % n:
        raise ValueError(f"batch of {batch_size} rows is not a whole number of groups of {n}")
    groups = torch.randperm(batch_size // n, generator=generator)
    return (groups[:, None] * n + torch.arange(n)).flatten()


def shuffle_groups(batch: dict[str, Any], n: int) -> dict[str, Any]:
    """Permute every per-row entry of ``batch`` by whole groups (rows with equal ``group_ids``)."""
    gid = batch["group_ids"]
    if not (gid.view(-1, n) == gid.view(-1, n)[:, :1]).all():
        raise AssertionError("group rows are not contiguous before the group shuffle")
    perm = group_permutation(len(gid), n).to(gid.device)

    def permute(v: Any) -> Any:
        if v is None or (isinstance(v, torch.Tensor) and v.ndim == 0):
            return v
        if isinstance(v, torch.Tensor):
            return v[perm]
        return [v[i] for i in perm.tolist()]

    return {key: permute(val) for key, val in batch.items()}


def assert_whole_groups(group_ids: torch.Tensor, n: int) -> None:
    """Raise unless every group present in ``group_ids`` appears exactly ``n`` times."""
    _, counts = torch.unique(group_ids, return_counts=True)
    if not (counts == n).all():
        raise AssertionError(f"micro-batch holds partial groups: counts {counts.tolist()}, expected {n} each")


def sequence_deltas(
    per_token_logps: torch.Tensor, old_per_token_logps: torch.Tensor | None, mask: torch.Tensor
) -> torch.Tensor:
    """delta_i = pi_theta(y_i|x) / pi_old(y_i|x) - 1 from per-token log-probs (detached, unclamped).

    The ratio is the product over the completion's tokens (sum of log-ratios), not TRL's per-token
    or length-averaged ratio. Without old log-probs (no PPO reuse) the policy is on-policy: 0.
    """
    if old_per_token_logps is None:
        return torch.zeros(per_token_logps.shape[0], device=per_token_logps.device)
    log_ratio = ((per_token_logps.detach() - old_per_token_logps) * mask).sum(-1)
    return torch.expm1(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))


#: the |delta| quantiles logged per PPO iteration (``delta/abs_q50_iter{i}``, ...): the off-policy regime
DELTA_QUANTILES = (0.5, 0.9)


def delta_stats(deltas: torch.Tensor, clamp: float) -> list[tuple[str, float]]:
    """The off-policy regime of one micro-batch's (gathered) deltas: ``abs_mean``, the |delta|
    quantiles of ``DELTA_QUANTILES`` (``abs_q50``, ``abs_q90``) and ``clamped_frac``, the share with
    |delta| above ``clamp`` (the paper's first-order expansion assumes delta ~ 0; section 3.3)."""
    if deltas.numel() == 0:
        return []
    names = ["abs_mean", *(f"abs_q{round(q * 100)}" for q in DELTA_QUANTILES), "clamped_frac"]
    return list(zip(names, delta_regime(deltas, clamp).tolist(), strict=True))


def delta_regime(deltas: torch.Tensor, clamp: float) -> torch.Tensor:
    """``delta_stats``' values as one float32 tensor on the deltas' own device (one host sync, not
    four): mean |delta|, its ``DELTA_QUANTILES``, the share above ``clamp``. ``deltas`` must not be
    empty (``delta_stats`` returns no values for none)."""
    abs_delta = deltas.detach().abs().float().flatten()
    q = torch.tensor(DELTA_QUANTILES, dtype=abs_delta.dtype, device=abs_delta.device)
    return torch.cat(
        [abs_delta.mean()[None], torch.quantile(abs_delta, q), (abs_delta > clamp).float().mean()[None]]
    )


def grouped(values: torch.Tensor, group_ids: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``values`` regrouped to ``[groups, n]`` by ``group_ids`` and the row order used (for scatter back)."""
    order = torch.argsort(group_ids, stable=True)
    gid = group_ids[order].view(-1, n)
    if not (gid == gid[:, :1]).all():
        raise AssertionError("micro-batch holds partial groups")
    return values[order].view(-1, n), order


def _prompt_groups(prompt_ids: list[list[int]], n: int) -> list[list[int]] | None:
    """The distinct prompts of a generation batch whose rows come in runs of ``n`` equal prompts
    (TRL's ``RepeatSampler`` order); None when the batch is laid out otherwise."""
    if not prompt_ids or len(prompt_ids) % n:
        return None
    groups = [prompt_ids[i] for i in range(0, len(prompt_ids), n)]
    if any(prompt_ids[i] != groups[i // n] for i in range(len(prompt_ids))):
        return None
    return [list(g) for g in groups]


class EpochRepeatSampler(RepeatSampler):
    """TRL's ``RepeatSampler`` whose epoch ``e`` (``set_epoch``, which the Trainer calls before each epoch)
    draws the (e+1)-th permutation of the stream its seed starts: the order an uninterrupted run draws,
    one ``__iter__`` per epoch, in a fresh process too (a resumed run). Without a seed or shuffling:
    as TRL's."""

    @classmethod
    def of(cls, sampler: RepeatSampler) -> RepeatSampler:
        """``sampler`` (TRL's, as ``GRPOTrainer._get_train_sampler`` built it) as this class."""
        if type(sampler) is not RepeatSampler:
            raise TypeError(f"expected trl's RepeatSampler, got {type(sampler).__name__}")
        new = cls.__new__(cls)
        new.__dict__.update(sampler.__dict__)
        return new

    def set_epoch(self, epoch: int) -> None:
        if not self.shuffle or self.seed is None:
            return
        self.generator.manual_seed(self.seed)
        for _ in range(epoch):  # the permutations of the epochs before (what __iter__ drew)
            torch.randperm(self.num_samples, generator=self.generator)


# ------------------------------------------------------------------------------------------------


class MaxKGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages come from ``maxk.objectives`` (see module docstring)."""

    args: MaxKGRPOConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if trl.__version__ != TRL_VERSION:
            raise RuntimeError(
                f"MaxKGRPOTrainer overrides trl {TRL_VERSION} internals; found {trl.__version__}"
            )
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, MaxKGRPOConfig):
            raise TypeError("MaxKGRPOTrainer needs a MaxKGRPOConfig")
        self._gathered_rewards: torch.Tensor | None = None
        self._recompute_inputs: dict[str, Any] | None = None
        self._batch_k = self.args.bon_k  # k of the buffered generation batch (its PPO iterations reuse it)
        self.time_totals = {"generation_s": 0.0, "reward_s": 0.0}
        self._defer_old = False  # armed: the next no-grad policy pass (TRL's old log-probs): a placeholder
        self._old_deferred = False  # the buffered batch's old log-probs wait for PPO iteration 0
        self._fill_old: torch.Tensor | None = None  # where iteration 0's loss writes them

    # -- 1. keep the raw gathered rewards ---------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        start = time.perf_counter()
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._reward_elapsed += time.perf_counter() - start
        self._gathered_rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(
            1
        )
        return rewards_per_func

    # -- 2. advantages from the registry, raw rewards and group ids in the batch -------------------
    def _generate_and_score_completions(self, inputs):
        start, self._reward_elapsed = time.perf_counter(), 0.0
        self._old_deferred = False
        self._defer_old = self.model.training and self._can_defer_old()
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._defer_old = False
        if not self.model.training:
            return out
        n, rank = self.num_generations, self.accelerator.process_index
        local = len(out["advantages"])
        rewards = self._gathered_rewards.double()  # [world * local], rank-major like TRL's gather
        self._batch_k = self.current_k()
        adv = compute_advantages(
            self.args.advantage_method,
            rewards.view(-1, n),
            k=self._batch_k,
            delta_clamp=self.args.delta_clamp if uses_deltas(self.args.advantage_method) else None,
        ).view(-1)
        if needs_k(self.args.advantage_method):
            self._log("bon_k", float(self._batch_k))
        rows = slice(rank * local, (rank + 1) * local)
        out["advantages"] = adv[rows].to(out["advantages"].dtype)
        out["rewards"] = rewards[rows].float()
        out["group_ids"] = torch.arange(rank * local, (rank + 1) * local, device=adv.device) // n
        self._log_advantages(adv, "advantage")
        elapsed = time.perf_counter() - start
        self._log("time/generation_s", elapsed - self._reward_elapsed)
        self._log("time/reward_s", self._reward_elapsed)
        self.time_totals["generation_s"] += elapsed - self._reward_elapsed
        self.time_totals["reward_s"] += self._reward_elapsed
        return out

    # -- 3. group-level shuffle; whole groups per micro-batch ---------------------------------------
    def _prepare_inputs(self, generation_batch):
        if not self.model.training:
            return super()._prepare_inputs(generation_batch)
        spg = self.args.steps_per_generation
        if self._step % (spg * self.num_iterations) == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            if "pixel_values" in batch:
                raise NotImplementedError("MaxKGRPOTrainer is text-only")
            batch = shuffle_groups(batch, self.num_generations)  # TRL: shuffle_sequence_dict (rows)
            self._buffered_inputs = split_tensor_dict(batch, spg)
        inputs = self._buffered_inputs[self._step % spg]
        assert_whole_groups(inputs["group_ids"], self.num_generations)
        self._log("ppo_iteration", float(self._ppo_iteration()))
        return inputs

    def current_k(self) -> int:
        """k for the next generation batch, from the schedule and the fraction of optimizer steps done."""
        a = self.args
        progress = self.state.global_step / self.state.max_steps if self.state.max_steps else 0.0
        return scheduled_k(a.bon_k, a.bon_k_schedule, a.bon_k_final, a.bon_k_switch, progress)

    # -- 4. off-policy BoN: recompute the advantages from the current policy ------------------------
    def _compute_loss(self, model, inputs):
        if self._old_deferred and self._ppo_iteration() == 0:
            # 5.: no old log-probs at iteration 0 (TRL takes this forward's, detached); it writes them
            self._fill_old = inputs["old_per_token_logps"]  # a view into the buffered micro-batch
            inputs = {key: val for key, val in inputs.items() if key != "old_per_token_logps"}
        if uses_deltas(self.args.advantage_method):
            inputs = dict(inputs)  # the buffered micro-batch is reused by later PPO iterations: copy
            self._recompute_inputs = inputs
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._recompute_inputs = self._fill_old = None

    def _ppo_iteration(self) -> int:
        """The PPO iteration of the micro-batch being processed (0 for the one sampled just now)."""
        return (self._step // self.args.steps_per_generation) % self.num_iterations

    def _can_defer_old(self) -> bool:
        """Whether TRL's old log-prob pass may be answered by iteration 0's forward (see 5.)."""
        a = self.args
        return (
            self.num_iterations > 1
            and a.steps_per_generation == a.gradient_accumulation_steps
            and not self.use_vllm
            and (self.beta == 0.0 or self.ref_model is not None)
        )

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **kwargs,
    ):
        if self._defer_old and model is self.model and not torch.is_grad_enabled():
            self._defer_old, self._old_deferred = False, True  # they wait for iteration 0 (see 5.)
            nan = torch.full((input_ids.shape[0], logits_to_keep), float("nan"), device=input_ids.device)
            return nan, None, None
        if self._can_share_prompts(model, input_ids, attention_mask, logits_to_keep, batch_size, kwargs):
            logps, entropies = self._shared_prompt_logps(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
            )
            aux = None
        else:
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **kwargs,
            )
        fill, self._fill_old = self._fill_old, None  # each fires once per loss call (its one pass)
        if fill is not None:
            fill.copy_(logps.detach())
        inputs, self._recompute_inputs = self._recompute_inputs, None
        if inputs is not None:
            inputs["advantages"] = self._offpolicy_advantages(inputs, logps)
        return logps, entropies, aux

    def _offpolicy_advantages(self, inputs: dict[str, Any], per_token_logps: torch.Tensor) -> torch.Tensor:
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        deltas = sequence_deltas(per_token_logps, inputs.get("old_per_token_logps"), mask)
        n = self.num_generations
        rewards, order = grouped(inputs["rewards"].double(), inputs["group_ids"], n)
        group_deltas = deltas.double()[order].view(-1, n)
        adv_grouped = compute_advantages(
            self.args.advantage_method,
            rewards,
            k=self._batch_k,
            deltas=group_deltas,
            delta_clamp=self.args.delta_clamp,
            own_ratio=self.args.own_ratio,
        )
        adv = torch.empty_like(deltas, dtype=torch.float64)
        adv[order] = adv_grouped.view(-1)
        iteration = (self._step // self.args.steps_per_generation) % self.num_iterations
        gathered = self.accelerator.gather(deltas.detach().float())
        for key, value in delta_stats(gathered, self.args.delta_clamp):
            self._log(f"delta/{key}", value)
            self._log(f"delta/{key}_iter{iteration}", value)
        self._log_advantages(adv, "advantage_recomputed")
        return adv.to(inputs["advantages"].dtype)

    # -- 6. rollouts through maxk's decode loop ---------------------------------------------------------
    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        groups = _prompt_groups(prompt_ids, num_generations)
        if groups is None or not self._own_rollouts(images):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        from maxk.generate.native import new_decoder

        model = self.accelerator.unwrap_model(self.model)
        if getattr(self, "_decoder", None) is None or self._decoder.model is not model:
            self._decoder = new_decoder(model)
        self._decoder.refresh()  # the optimizer changed the weights since the last rollout
        step, rank = self.state.global_step, self.accelerator.process_index
        result = self._decoder.sample(
            groups,
            num_generations,
            max_new_tokens=self.max_completion_length,
            stop_token_ids=self.eos_token_ids,
            seeds=[derive_seed(self.args.seed, "rollout", step, rank, g) for g in range(len(groups))],
            temperature=self.temperature,
            top_p=self.top_p,
        )
        return result.token_ids, None

    def _own_rollouts(self, images) -> bool:
        """Whether ``_generate_single_turn`` may use maxk's decode loop for this batch."""
        from maxk.generate.decode import supports

        a = self.args
        return (
            a.rollout_decoder == "auto"
            and not self.use_vllm
            and not images
            and not a.use_transformers_paged
            and a.generation_kwargs is None
            and not a.top_k
            and a.min_p is None
            and a.repetition_penalty == 1.0
            and supports(self.accelerator.unwrap_model(self.model))
        )

    # -- 8. an epoch's prompt order a function of (seed, epoch) ---------------------------------------
    def _get_train_sampler(self, dataset=None):
        self._epoch_sampler = EpochRepeatSampler.of(super()._get_train_sampler(dataset))
        return self._epoch_sampler

    def _run_epoch(self, model, epoch, *args, **kwargs):
        # transformers reaches the sampler's set_epoch through accelerate's loader, but not through the
        # wrappers of a multi-process loader skipping a resumed epoch's first batches: set it here too
        sampler = getattr(self, "_epoch_sampler", None)
        if sampler is not None:
            sampler.set_epoch(epoch)
        return super()._run_epoch(model, epoch, *args, **kwargs)

    # -- 7. each group's prompt computed once in the log-prob passes ------------------------------------
    def _can_share_prompts(self, model, input_ids, attention_mask, logits_to_keep, batch_size, extra) -> bool:
        """Whether ``_get_per_token_logps_and_entropies`` may run each group's prompt once
        (``maxk.train.shared_prompt``): a bare (not DDP/DeepSpeed/FSDP-wrapped) Qwen2-family model
        without gradient checkpointing or attention dropout, text only (every extra TRL argument
        None; ``compute_aux_loss`` is MoE-only, and Qwen2 is not MoE), chunks of whole groups, and
        rows in contiguous runs of ``num_generations`` with identical prompt ids and mask."""
        from maxk.generate.decode import supports
        from maxk.train.shared_prompt import grouped_rows

        n = self.num_generations
        cfg = getattr(model, "config", None)
        return (
            all(v is None for v in extra.values())
            and not (self.is_deepspeed_enabled or self.is_fsdp_enabled)
            and self.accelerator.unwrap_model(model) is model
            and supports(model)
            and not getattr(cfg, "output_router_logits", False)
            and not (model.training and getattr(cfg, "attention_dropout", 0.0))
            and not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
            and (batch_size is None or batch_size % n == 0)
            and grouped_rows(input_ids, attention_mask, input_ids.shape[1] - logits_to_keep, n)
        )

    def _shared_prompt_logps(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
    ):
        """TRL's per-token log-probs (and entropies when asked) in chunks of ``batch_size`` rows,
        each group's prompt computed once (``maxk.train.shared_prompt.shared_prompt_logps``)."""
        from maxk.train.shared_prompt import shared_prompt_logps

        rows = input_ids.shape[0]
        batch_size = batch_size or rows
        logps, entropies = [], []
        for start in range(0, rows, batch_size):
            chunk = slice(start, min(start + batch_size, rows))
            with self.accelerator.autocast():
                lp, ent = shared_prompt_logps(
                    model, input_ids[chunk], attention_mask[chunk], logits_to_keep, self.num_generations,
                    temperature=self.temperature,
                )  # fmt: skip
            logps.append(lp)
            entropies.append(ent)
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None

    # -- logging helpers --------------------------------------------------------------------------
    def _log(self, key: str, value: float) -> None:
        self._metrics["train"][key].append(float(value))

    def _log_advantages(self, adv: torch.Tensor, prefix: str) -> None:
        adv = adv.detach().float()
        self._log(f"{prefix}/mean", adv.mean().item())
        self._log(f"{prefix}/std", adv.std().item() if adv.numel() > 1 else 0.0)
        self._log(f"{prefix}/abs_mean", adv.abs().mean().item())
        self._log(f"{prefix}/frac_zero", (adv == 0).float().mean().item())
