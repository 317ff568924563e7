"""Every key the training jobs log, by who logs it: the columns of their metrics CSVs.

A run's metrics CSV (``maxk.train.run.write_metrics_csv``) and the base model's SFT curve
(``maxk.train.base.write_sft_curve``) take their columns from the trainer's ``log_history``: whatever
transformers' ``Trainer``, TRL and maxk logged. Those keys are known only at run time, so they are
listed here, once: ``docs/outputs.md`` documents exactly these (``python -m maxk.docs`` checks it),
and the short training runs of ``tests/train`` check that every key they log is one of them.

A ``{name}`` in a key is a placeholder (``maxk.docs.PLACEHOLDERS``): ``{i}`` a PPO iteration
(0 to ``num_iterations - 1``), ``{k}`` a subset size, ``{func}`` a reward function's name (the
sandbox reward's is ``sandbox``). Torch-free: nothing here imports a trainer.
"""

from __future__ import annotations

__all__ = ["GRPO_KEYS", "MAXK_KEYS", "SFT_KEYS", "TRAINER_KEYS", "TRL_GRPO_KEYS", "TRL_SFT_KEYS"]

#: transformers' ``Trainer``: every logged row (``step`` and ``epoch`` are added to every entry)
TRAINER_KEYS: tuple[str, ...] = ("step", "epoch", "loss", "grad_norm", "learning_rate")

#: TRL 1.16's ``GRPOTrainer`` at the settings a run can have: the loss types of the ``train`` schema
#: (the ``clip_ratio`` keys), ``kl`` only with ``beta > 0``, ``sampling/*`` only with vLLM and its
#: importance-sampling correction (``train.vllm``)
TRL_GRPO_KEYS: tuple[str, ...] = (
    "num_tokens",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "completions/mean_terminated_length",
    "completions/min_terminated_length",
    "completions/max_terminated_length",
    "rewards/{func}/mean",
    "rewards/{func}/std",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
    "step_time",
    "sampling/sampling_logp_difference/mean",
    "sampling/sampling_logp_difference/max",
    "sampling/importance_sampling_ratio/min",
    "sampling/importance_sampling_ratio/mean",
    "sampling/importance_sampling_ratio/max",
)

#: maxk's own: ``MaxKGRPOTrainer`` (``maxk.train.grpo``: advantages, the off-policy deltas, k, the PPO
#: iteration, the time split), the held-out and own-prompt measurements (``maxk.train.heldout``) and
#: ``write_metrics_csv`` (``time/update_s``)
MAXK_KEYS: tuple[str, ...] = (
    "ppo_iteration",
    "bon_k",
    "advantage/mean",
    "advantage/std",
    "advantage/abs_mean",
    "advantage/frac_zero",
    "advantage_recomputed/mean",
    "advantage_recomputed/std",
    "advantage_recomputed/abs_mean",
    "advantage_recomputed/frac_zero",
    "delta/abs_mean",
    "delta/abs_q50",
    "delta/abs_q90",
    "delta/clamped_frac",
    "delta/abs_mean_iter{i}",
    "delta/abs_q50_iter{i}",
    "delta/abs_q90_iter{i}",
    "delta/clamped_frac_iter{i}",
    "time/generation_s",
    "time/reward_s",
    "time/update_s",
    "heldout/reward",
    "heldout/pass@1",
    "heldout/entropy",
    "heldout/problem_rewards",
    "heldout/problem_pass@1",
    "heldout/problem_max@{k}",
    "own/reward",
    "own/pass@1",
    "own/entropy",
    "own/problem_rewards",
    "own/problem_pass@1",
    "own/problem_max@{k}",
)

#: every column a run's metrics CSV (``results/seed{seed}/metrics/train/{run}.csv``) can hold
GRPO_KEYS: tuple[str, ...] = TRAINER_KEYS + TRL_GRPO_KEYS + MAXK_KEYS

#: TRL 1.16's ``SFTTrainer`` (a dense model: no ``aux_loss``)
TRL_SFT_KEYS: tuple[str, ...] = ("entropy", "mean_token_accuracy", "num_tokens")

#: every column of the base model's SFT curve (``results/seed{seed}/metrics/train/base.csv``)
SFT_KEYS: tuple[str, ...] = TRAINER_KEYS + TRL_SFT_KEYS
