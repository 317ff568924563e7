"""A run of more epochs passes through the end of a run of fewer (maxk.train.prefix), and a run resumed past
an epoch boundary is the run that was never stopped (maxk.train.grpo.EpochRepeatSampler): weights, metrics
and curves byte for byte, on the tiny model with a trusted fake scorer."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file
from test_train_resume import Killed, LengthScorer, _problems, _train

from maxk.io import write_jsonl
from maxk.train.prefix import prefix_run, remaining_epochs, trajectory
from maxk.train.run import train_run

#: the same curve in both runs; a curve with no point before the shorter run's end (only its start, which
#: the longer run measures on the base); a curve that would have points the shorter run did not measure
SAME, LATE, DENSE = "same", "late", "dense"


def _heldout(kind: str | None, epochs: int) -> dict | None:
    own = {"problems": 2, "samples": 2}
    if kind is None:
        return None
    if kind == SAME or epochs == 1:
        return {"problems": 2, "samples": 2, "every": 1, "own_prompts": own}
    if kind == LATE:
        return {"problems": 2, "samples": 4, "every": 1000, "own_prompts": own}
    return {"problems": 3, "samples": 2, "every": 1, "own_prompts": own}


def _run(tmp_path, model, name, epochs, iters, curve, checkpoints, scorer=None):
    data = tmp_path / "train.jsonl.gz"
    if not data.exists():
        write_jsonl(data, _problems(12))
    train = _train(num_train_epochs=epochs, num_iterations=iters, save_steps=iters, max_prompts=8,
                   per_device_train_batch_size=8, gradient_accumulation_steps=2,
                   heldout=_heldout(curve, epochs))  # fmt: skip
    train.pop("max_steps")
    config = {"seed": 3, "train": train, "run": {"method": "grpo"}}
    out = tmp_path / "out" / f"{name}-{checkpoints}"
    summary = train_run(config=config, run=name, model=model, data=str(data), out=str(out),
                        metrics=str(out) + ".csv", checkpoints=str(tmp_path / checkpoints),
                        scorer=scorer or LengthScorer())  # fmt: skip
    return summary, load_file(str(out / "model.safetensors")), pd.read_csv(str(out) + ".csv")


def _same_weights(a, b) -> bool:
    return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


def _same_metrics(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Every column but the clocks (step_time, time/*)."""
    keep = [c for c in a.columns if c != "step_time" and not c.startswith("time/")]
    return list(a.columns) == list(b.columns) and a[keep].equals(b[keep])


# killed at the first generation of epoch 2 (resumed at the boundary) or at its second (half-way through)
@pytest.mark.parametrize(("iters", "killed_at"), [(1, 3), (3, 4)])
def test_a_run_resumed_past_an_epoch_boundary_is_the_run_never_stopped(
    tiny_model_dir, tmp_path, iters, killed_at
):
    """Killed in its second epoch (at its start, or half-way) and resumed, a three-epoch run ends with the
    uninterrupted run's weights and metrics. TRL's sampler restarts its seeded stream in the resumed
    process, so the resumed epochs repeated the first epochs' orders (max |weight difference| 0.005
    before EpochRepeatSampler)."""
    _, whole, whole_metrics = _run(tmp_path, tiny_model_dir, "r", 3, iters, None, "a")
    steps_per_epoch = 2 * iters  # 8 prompts, 4 per generation (16 rows of 4 samples), iters steps each
    with pytest.raises(Killed):
        _run(tmp_path, tiny_model_dir, "r", 3, iters, None, "b", LengthScorer(die_at=killed_at))
    summary, resumed, resumed_metrics = _run(tmp_path, tiny_model_dir, "r", 3, iters, None, "b")
    assert int(summary["resumed_from"].rsplit("-", 1)[1]) == (killed_at - 1) * iters >= steps_per_epoch
    assert _same_weights(whole, resumed)
    assert _same_metrics(whole_metrics, resumed_metrics)


@pytest.mark.parametrize(("iters", "curve"), [(1, SAME), (3, None), (3, LATE)])
def test_a_longer_run_starts_from_a_shorter_run_s_end_and_ends_where_it_would_have(
    tiny_model_dir, tmp_path, iters, curve
):
    """The three-epoch run trained after the one-epoch run of the same trajectory starts from its final
    checkpoint and ends with the weights, metrics and curves of the three-epoch run trained alone."""
    alone = _run(tmp_path, tiny_model_dir, "long", 3, iters, curve, "alone")
    first = _run(tmp_path, tiny_model_dir, "short", 1, iters, curve, "chained")
    chained = _run(tmp_path, tiny_model_dir, "long", 3, iters, curve, "chained")
    assert "started_from_run" not in alone[0] and "started_from_run" not in first[0]
    start = chained[0]["started_from_run"]
    assert (start["run"], start["epochs"], start["steps"]) == ("short", 1, first[0]["steps"])
    assert chained[0]["steps"] == alone[0]["steps"] == 3 * first[0]["steps"]
    assert _same_weights(alone[1], chained[1])
    assert _same_metrics(alone[2], chained[2])
    if curve is not None:  # the curves are there: the start, the points, the end
        assert alone[2]["heldout/reward"].notna().sum() >= 2 and alone[2]["own/reward"].notna().sum() == 2


def test_a_step_measured_by_the_curve_keeps_its_row_of_the_metrics(tiny_model_dir, tmp_path):
    """A held-out point at every step (and at the last): every step still has its own training row (its
    loss and reward). transformers' on_log cleared the step's should_log, so these rows were dropped."""
    _, _, metrics = _run(tmp_path, tiny_model_dir, "r", 2, 1, SAME, "a")
    steps = metrics[metrics["step"] > 0]
    assert list(steps["step"]) == [1, 2, 3, 4]
    assert steps["loss"].notna().all() and steps["reward"].notna().all()
    assert steps["heldout/reward"].notna().all()  # the test can fail: the curve measured every step


def test_a_curve_the_shorter_run_did_not_measure_is_not_adopted(tiny_model_dir, tmp_path):
    """Where the longer run's curve has points before the shorter run's end that the shorter run did not
    measure (another pool), nothing is adopted: it trains from the base, to the same end."""
    alone = _run(tmp_path, tiny_model_dir, "long", 2, 1, DENSE, "alone")
    _run(tmp_path, tiny_model_dir, "short", 1, 1, DENSE, "chained")
    chained = _run(tmp_path, tiny_model_dir, "long", 2, 1, DENSE, "chained")
    assert "started_from_run" not in chained[0] and chained[0]["resumed_from"] is None
    assert _same_weights(alone[1], chained[1]) and _same_metrics(alone[2], chained[2])


def _effective(**over):
    base = {"num_train_epochs": 1, "num_iterations": 3, "learning_rate": 1e-4,
            "lr_scheduler_type": "constant", "max_steps": None, "bon_k_schedule": None,
            "heldout": {"every": 16}, "save_steps": 6}  # fmt: skip
    return base | over


def test_which_run_a_run_passes_through():
    """The same trajectory, fewer whole epochs, the most of them; no step may depend on the run's length."""
    runs = {"e1": _effective(), "e2": _effective(num_train_epochs=2), "e4": _effective(num_train_epochs=4),
            "e4_lr": _effective(num_train_epochs=4, learning_rate=2e-4),
            "e4_curve": _effective(num_train_epochs=4, heldout={"every": 1000}, save_steps=3)}  # fmt: skip
    assert (
        prefix_run(runs, "e4") == "e2" and prefix_run(runs, "e2") == "e1" and prefix_run(runs, "e1") is None
    )
    assert prefix_run(runs, "e4_curve") == "e2"  # what it measures and how often it saves: not the trajectory
    assert prefix_run(runs, "e4_lr") is None
    assert remaining_epochs(runs, "e4") == 2 and remaining_epochs(runs, "e1") == 1
    for length_bound in ({"lr_scheduler_type": "linear"}, {"max_steps": 10}, {"num_train_epochs": 1.5},
                         {"bon_k_schedule": {"kind": "linear", "final": 4}}):  # fmt: skip
        assert trajectory(_effective(**length_bound)) is None, length_bound
    assert trajectory(_effective(bon_k_schedule={"kind": "constant"})) is not None


def test_the_default_s_table_4_pairs_pass_through_their_one_epoch_runs():
    """config/config.yaml: grpo_e4_ppo1 starts from grpo_e1_ppo1's end, grpo_e4_ppo3 from grpo_continuous's;
    no other run has a run to start from (the others differ in more than their epochs)."""
    from maxk.config import load_config
    from maxk.workflow.resources import prefix_of, train_priority

    config = load_config(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    prefixes = {run: prefix_of(config, run) for run in config["runs"]}
    assert {run: p for run, p in prefixes.items() if p} == {"grpo_e4_ppo1": "grpo_e1_ppo1",
                                                            "grpo_e4_ppo3": "grpo_continuous"}  # fmt: skip
    # a chain's head carries the chain's passes (1 + 3 epochs x 2 and x 4 passes), its tail its own
    assert train_priority(config, "grpo_e1_ppo1") == 8 and train_priority(config, "grpo_e4_ppo1") == 6
    assert train_priority(config, "grpo_continuous") == 16 and train_priority(config, "grpo_e4_ppo3") == 12
    assert math.ceil(4 * (1 + 3)) == train_priority(config, "offpolicy_bon")


def test_epoch_e_draws_the_order_an_uninterrupted_sampler_draws_in_its_e_th_pass():
    """EpochRepeatSampler.set_epoch(e) then one pass = the (e+1)-th pass of TRL's sampler from its seed."""
    import torch
    from trl.trainer.utils import RepeatSampler

    from maxk.train.grpo import EpochRepeatSampler

    def trl():
        return RepeatSampler(list(range(12)), mini_repeat_count=2, batch_size=3, repeat_count=2, seed=5)

    stream = trl()
    passes = [list(stream) for _ in range(4)]
    assert len({tuple(p) for p in passes}) == 4  # the test can fail: the passes differ
    for epoch in (3, 0, 2, 1):  # any order, a fresh sampler each time (a resumed process)
        fresh = EpochRepeatSampler.of(trl())
        fresh.set_epoch(epoch)
        assert list(fresh) == passes[epoch]
    with pytest.raises(TypeError):
        EpochRepeatSampler.of(torch.utils.data.SequentialSampler(range(3)))


def _fake_record(tmp_path, fmt=None):
    """A shorter run's final checkpoint (2 steps, its log) and its record under trajectory key "k"."""
    import json

    from maxk.train.prefix import FORMAT, publish

    ckpt = tmp_path / "short" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (ckpt / "weights.bin").write_bytes(b"w")
    log = [{"step": 1, "loss": 0.1}, {"step": 2, "loss": 0.2}, {"step": 2, "train_runtime": 1.0}]
    (ckpt / "trainer_state.json").write_text(
        json.dumps({"global_step": 2, "save_steps": 6, "log_history": log})
    )
    record = publish(
        tmp_path / "ck", "k", run="short", epochs=1, steps=2, checkpoint=ckpt, log_history=log, heldout=None
    )
    if fmt is not None and fmt != FORMAT:
        record.write_text(json.dumps({**json.loads(record.read_text()), "format": fmt}))
    return ckpt


def test_adopting_writes_the_checkpoint_whole_with_its_starts_or_not_at_all(tmp_path):
    """The starts are measured before the checkpoint appears (a kill while they are measured leaves no
    checkpoint to resume on the wrong start); the shorter run's files are linked, never written through;
    the longer run's save_steps replaces the shorter run's; a record of another format is never adopted."""
    import json

    from maxk.train.prefix import adopt

    source = _fake_record(tmp_path)
    before = (source / "trainer_state.json").read_text()
    target = tmp_path / "long"

    def dies(log):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adopt(
            tmp_path / "ck",
            "k",
            epochs=3,
            heldout=None,
            checkpoint_dir=target,
            save_steps=3,
            measure_starts=dies,
        )
    assert not (target / "checkpoint-2").exists()
    adopted = adopt(tmp_path / "ck", "k", epochs=3, heldout=None, checkpoint_dir=target, save_steps=3,
                    measure_starts=lambda log: [{"step": 0, "own/reward": 0.5}])  # fmt: skip
    state = json.loads((target / "checkpoint-2" / "trainer_state.json").read_text())
    assert adopted["steps"] == 2 and adopted["source"] == str(source.resolve())
    assert state["log_history"] == [
        {"step": 0, "own/reward": 0.5},
        {"step": 1, "loss": 0.1},
        {"step": 2, "loss": 0.2},
    ]
    assert state["save_steps"] == 3 and (source / "trainer_state.json").read_text() == before
    assert (target / "checkpoint-2" / "weights.bin").stat().st_ino == (source / "weights.bin").stat().st_ino
    assert (
        adopt(tmp_path / "ck", "k", epochs=1, heldout=None, checkpoint_dir=tmp_path / "x", save_steps=3)
        is None
    )

    old = tmp_path / "old"
    _fake_record(old, fmt=1)  # written before the metrics kept every step's row
    assert adopt(old / "ck", "k", epochs=3, heldout=None, checkpoint_dir=old / "long", save_steps=3) is None


def test_a_resumed_run_whose_log_lacks_its_start_stops(tmp_path):
    """A start measured on a checkpoint's weights would be recorded as the base's: refused, loudly."""
    from types import SimpleNamespace

    from maxk.train.heldout import HeldoutCurve

    curve = HeldoutCurve([{"id": "p"}], [[1]], scorer=None, extract=None, tokenizer=None, samples=2,
                         every=None, max_new_tokens=2, temperature=1.0, top_p=1.0, stop_token_ids=[0],
                         seed=1)  # fmt: skip
    state = SimpleNamespace(log_history=[{"step": 4, "loss": 0.1}], global_step=4)
    with pytest.raises(RuntimeError, match=r"resuming at step 4.*no heldout point before the first step"):
        curve.on_train_begin(None, state, None, model=None)
