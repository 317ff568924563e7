"""Pure helpers of maxk.train.grpo: group shuffle, whole-group check, sequence deltas, config checks."""

from __future__ import annotations

import math

import pytest
import torch

from maxk.train.grpo import (
    MaxKGRPOConfig,
    assert_whole_groups,
    group_permutation,
    grouped,
    scheduled_k,
    sequence_deltas,
    shuffle_groups,
)


def test_group_permutation_moves_whole_groups():
    torch.manual_seed(0)
    seen = set()
    for _ in range(20):
        perm = group_permutation(12, 3)
        assert sorted(perm.tolist()) == list(range(12))
        blocks = perm.view(-1, 3)
        assert (blocks[:, 0] % 3 == 0).all()
        assert (blocks - blocks[:, :1] == torch.arange(3)).all()
        seen.add(tuple(blocks[:, 0].tolist()))
    assert len(seen) > 1  # it does shuffle


def test_group_permutation_rejects_partial_groups():
    with pytest.raises(ValueError, match="whole number of groups"):
        group_permutation(10, 4)


def test_shuffle_groups_keeps_rows_of_a_group_together():
    torch.manual_seed(1)
    n = 4
    gid = torch.arange(16) // n
    batch = {
        "group_ids": gid,
        "x": torch.arange(16) * 10,
        "rows": [f"r{i}" for i in range(16)],
        "num_items_in_batch": torch.tensor(7),
    }
    out = shuffle_groups(batch, n)
    assert out["num_items_in_batch"].item() == 7
    assert (out["x"] == out["group_ids"] * 0 + torch.tensor([int(r[1:]) * 10 for r in out["rows"]])).all()
    for block in out["group_ids"].view(-1, n):
        assert (block == block[0]).all()
    assert_whole_groups(out["group_ids"][:8], n)


def test_shuffle_groups_refuses_scattered_groups():
    with pytest.raises(AssertionError, match="not contiguous"):
        shuffle_groups({"group_ids": torch.tensor([0, 1, 0, 1])}, 2)


def test_assert_whole_groups():
    assert_whole_groups(torch.tensor([3, 3, 5, 5]), 2)
    with pytest.raises(AssertionError, match="partial groups"):
        assert_whole_groups(torch.tensor([3, 3, 3, 5]), 2)


def test_sequence_deltas_use_the_sum_of_token_log_ratios():
    new = torch.tensor([[0.1, 0.2, 5.0], [-0.1, 0.0, 0.0]])
    old = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    d = sequence_deltas(new, old, mask)
    assert d[0].item() == pytest.approx(math.exp(0.3) - 1)  # sum, not mean; masked token ignored
    assert d[1].item() == pytest.approx(math.exp(-0.1) - 1)
    assert (sequence_deltas(new, None, mask) == 0).all()
    assert torch.isfinite(
        sequence_deltas(torch.full((1, 3), 100.0), torch.zeros(1, 3), torch.ones(1, 3))
    ).all()


def test_grouped_restores_order():
    gid = torch.tensor([7, 2, 7, 2])
    vals = torch.tensor([1.0, 2.0, 3.0, 4.0])
    g, order = grouped(vals, gid, 2)
    assert g.tolist() == [[2.0, 4.0], [1.0, 3.0]]
    back = torch.empty_like(vals)
    back[order] = g.view(-1)
    assert (back == vals).all()
    with pytest.raises(AssertionError):
        grouped(vals, torch.tensor([1, 1, 1, 2]), 2)


def _cfg(tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=4,
        per_device_train_batch_size=4,
    )
    base.update(kw)
    return MaxKGRPOConfig(**base)


def test_the_trainer_reads_each_estimators_constraints_from_the_registry(tmp_path, monkeypatch):
    """min k and reward kinds live in the registry (``maxk.objectives.register``, declared in
    ``maxk.estimators``): a new estimator registered with its own constraints is checked by them,
    with no change to the trainer."""
    import torch

    from maxk.estimators import NEEDS
    from maxk.objectives import ESTIMATORS, register

    monkeypatch.setattr("maxk.objectives.ESTIMATORS", dict(ESTIMATORS))
    needs = dict(NEEDS)  # the probe's declared needs go in a copy too (maxk.estimators.declare)
    monkeypatch.setattr("maxk.estimators.NEEDS", needs)
    monkeypatch.setattr("maxk.objectives.NEEDS", needs)
    from maxk import objectives

    register("probe_k3", min_k=3, reward_kinds=("binary",))(lambda rewards, **_: torch.zeros_like(rewards))
    assert objectives.ESTIMATORS["probe_k3"].needs_k and "probe_k3" not in ESTIMATORS
    assert needs["probe_k3"].min_k == 3 and "probe_k3" not in NEEDS
    assert _cfg(tmp_path, advantage_method="probe_k3", bon_k=3, reward_kind="binary").bon_k == 3
    with pytest.raises(ValueError, match=r"probe_k3: bon_k=2 must be in \[3, num_generations=4\]"):
        _cfg(tmp_path, advantage_method="probe_k3", bon_k=2, reward_kind="binary")
    with pytest.raises(ValueError, match="probe_k3: reward_kind 'continuous' not in"):
        _cfg(tmp_path, advantage_method="probe_k3", bon_k=3)
    assert objectives.ESTIMATORS["bon_loo1"].min_k == 2 and objectives.ESTIMATORS["grpo"].min_k is None


def test_config_validation(tmp_path):
    assert _cfg(tmp_path, advantage_method="bon_mean", bon_k=4).bon_k == 4
    with pytest.raises(ValueError, match="multiple of num_generations"):
        _cfg(tmp_path, per_device_train_batch_size=2, gradient_accumulation_steps=2)
    with pytest.raises(ValueError, match="unknown advantage method 'nope'; known: grpo, "):
        _cfg(tmp_path, advantage_method="nope")
    with pytest.raises(ValueError, match="bon_k"):
        _cfg(tmp_path, advantage_method="bon_mean", bon_k=5)
    with pytest.raises(ValueError, match="bon_k"):
        _cfg(tmp_path, advantage_method="bon_loo1", bon_k=1)
    with pytest.raises(ValueError, match="reward_kind"):
        _cfg(tmp_path, reward_kind="fuzzy")
    with pytest.raises(ValueError, match="bon_k_schedule"):
        _cfg(tmp_path, advantage_method="bon_mean", bon_k=2, bon_k_schedule="cosine")
    with pytest.raises(ValueError, match="needs bon_k_final"):
        _cfg(tmp_path, advantage_method="bon_mean", bon_k=2, bon_k_schedule="linear")
    with pytest.raises(ValueError, match="bon_k_final=5"):
        _cfg(tmp_path, advantage_method="bon_mean", bon_k=2, bon_k_schedule="linear", bon_k_final=5)
    with pytest.raises(ValueError, match="bon_k_switch"):
        _cfg(
            tmp_path,
            advantage_method="bon_mean",
            bon_k=2,
            bon_k_schedule="step",
            bon_k_final=1,
            bon_k_switch=2.0,
        )


def test_scheduled_k():
    assert [scheduled_k(4, "constant", None, 0.5, p) for p in (0.0, 0.5, 1.0)] == [4, 4, 4]
    assert [scheduled_k(8, "linear", 2, 0.5, p) for p in (0.0, 0.25, 0.5, 1.0, 1.5)] == [8, 6, 5, 2, 2]
    assert [scheduled_k(1, "linear", 4, 0.5, p) for p in (0.0, 0.5, 1.0)] == [1, 2, 4]  # 2.5 rounds to even
    assert [scheduled_k(8, "step", 1, 0.25, p) for p in (0.0, 0.24, 0.25, 1.0)] == [8, 8, 1, 1]
    with pytest.raises(ValueError, match="unknown k schedule"):
        scheduled_k(4, "cosine", 1, 0.5, 0.3)


def test_the_trainer_config_takes_every_default_it_shares_with_the_schema_from_the_schema():
    """Every MaxKGRPOConfig field that is also a key of the ``train`` schema section has the schema's
    default (one source, workflow/schemas/train.schema.yaml); TRL's own fields are TRL's."""
    import dataclasses

    from trl import GRPOConfig

    from maxk.config import with_defaults
    from maxk.train.grpo import MaxKGRPOConfig

    schema = with_defaults("train", {})
    trl = {f.name for f in dataclasses.fields(GRPOConfig)}
    shared = [f for f in dataclasses.fields(MaxKGRPOConfig) if f.name not in trl and f.name in schema]
    assert {f.name for f in shared} >= {"bon_k", "delta_clamp", "own_ratio", "rollout_decoder"}
    for f in shared:
        if f.name == "bon_k_schedule":  # an object-or-null in the config, a name here (launch maps it)
            assert schema[f.name] is None and f.default == "constant"
            continue
        assert f.default == schema[f.name], f.name
    run = with_defaults("runs", {"r": {"method": "grpo"}})["r"]
    assert MaxKGRPOConfig.__dataclass_fields__["reward_kind"].default == run["reward_kind"] == "continuous"


def test_delta_stats_measure_the_off_policy_regime():
    """The regime the first-order off-policy transform assumes (delta ~ 0): |delta| mean and
    quantiles, and the share clamped, each against a hand count."""
    from maxk.train.grpo import DELTA_QUANTILES, delta_stats

    deltas = torch.tensor([0.0, -0.01, 0.02, -0.03, 0.3, -0.5, 0.04, 0.1, -0.2, 0.25])
    stats = dict(delta_stats(deltas, clamp=0.2))
    assert DELTA_QUANTILES == (0.5, 0.9) and set(stats) == {"abs_mean", "abs_q50", "abs_q90", "clamped_frac"}
    assert stats["abs_mean"] == pytest.approx(1.45 / 10)
    assert stats["abs_q50"] == pytest.approx((0.04 + 0.1) / 2)  # linear interpolation, 10 values
    assert stats["abs_q90"] == pytest.approx(0.3 + 0.1 * (0.5 - 0.3))
    assert stats["clamped_frac"] == pytest.approx(0.3)  # 0.3, -0.5, 0.25 lie beyond 0.2 (0.2 itself does not)
    assert delta_stats(torch.zeros(0), clamp=0.2) == []


def test_delta_regime_stays_on_the_deltas_device():
    """The GPU check found every off-policy run failing on CUDA: the quantile levels were made on the
    CPU ("quantile() q tensor must be on the same device as the input tensor"). The meta device
    reproduces that fault without a GPU; the values stay on the deltas' device until one host sync."""
    from maxk.train.grpo import delta_regime

    out = delta_regime(torch.zeros(16, device="meta"), clamp=0.2)
    assert out.device.type == "meta" and out.shape == (4,)
