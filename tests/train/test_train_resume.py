"""`train_run` end to end on the tiny model with a trusted fake scorer: outputs, metrics, resume."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest

from maxk.io import write_jsonl
from maxk.train.run import train_run


class Killed(Exception):
    pass


class LengthScorer:
    """Trusted stand-in for maxk.sandbox.Scorer: never executes the program. ``die_at``: the call
    that raises (simulates a job killed half-way)."""

    def __init__(self, die_at=None):
        self.calls, self.die_at = 0, die_at

    def score(self, pairs):
        self.calls += 1
        if self.calls == self.die_at:
            raise Killed
        return [
            SimpleNamespace(passed=len(p) % 3, total=2, reward=min(1.0, (len(p) % 3) / 2)) for _, p in pairs
        ]


def _problems(n):
    return [
        {"id": f"syn/{i}", "source": "syn", "prompt": f"Print {i}.", "difficulty": 1,
         "tests": {"format": "stdio", "cases": [{"input": "", "output": f"{i}\n"}]}}
        for i in range(n)
    ]  # fmt: skip


def _train(**overrides):
    """The ``train`` section of these tests: 4 steps of 4 completions, a checkpoint every 2."""
    return dict(
        dataset="x", max_prompts=None, max_steps=4, save_steps=2, num_generations=4, temperature=1.0,
        top_p=1.0,
        max_completion_length=6, learning_rate=1e-3, beta=0.01, use_bias_correction_kl=False, epsilon=0.2,
        num_iterations=2, num_train_epochs=1, loss_type="grpo", per_device_train_batch_size=4,
        gradient_accumulation_steps=1, bon_k=2, delta_clamp=0.2,
    ) | overrides  # fmt: skip


def test_train_run_writes_outputs_and_resumes(tiny_model_dir, tmp_path):
    data = tmp_path / "train.jsonl.gz"
    write_jsonl(data, _problems(6))
    config = {"seed": 3, "train": _train(), "run": {"method": "offpolicy_bon"}}
    kw = dict(run="r", model=tiny_model_dir, data=str(data), out=str(tmp_path / "out" / "r"),
              metrics=str(tmp_path / "m.csv"), checkpoints=str(tmp_path / "ck"))  # fmt: skip
    with pytest.raises(Killed):  # killed at the 2nd generation, after checkpoint-2 was written
        train_run(config=config, **kw, scorer=LengthScorer(die_at=2))
    assert not (tmp_path / "out" / "r").exists()
    ckpts = sorted(p.name for p in (tmp_path / "ck").glob("r-*/checkpoint-*"))
    assert ckpts and ckpts[-1] == "checkpoint-2"  # checkpoints live outside the declared output

    summary = train_run(config=config, **kw, scorer=LengthScorer())
    assert summary["steps"] == 4 and summary["resumed_from"].endswith("checkpoint-2")
    assert (tmp_path / "out" / "r" / "config.json").is_file()
    assert (tmp_path / "out" / "r" / "provenance.json").is_file()
    assert not list((tmp_path / "out").glob(".tmp-*"))
    rows = list(csv.DictReader((tmp_path / "m.csv").read_text().splitlines()))
    assert [r["step"] for r in rows] == ["1", "2", "3", "4"]  # history restored from the checkpoint
    assert {"reward", "advantage/mean", "time/update_s", "kl"} <= set(rows[0])
    assert rows[0]["delta/abs_mean_iter0"] != "" and rows[1]["delta/abs_mean_iter1"] != ""


def test_a_checkpoint_of_another_start_is_never_resumed(tiny_model_dir, tmp_path, monkeypatch):
    """A rerun with another seed (`--config seed=2`), another process layout (DeepSpeed) or rebuilt RL
    prompts at the same path starts from the base model, not from the checkpoint an earlier config left
    behind."""
    data = tmp_path / "train.jsonl.gz"
    write_jsonl(data, _problems(6))
    train = _train(max_steps=2, beta=0.0, num_iterations=1)
    kw = dict(run="r", model=tiny_model_dir, data=str(data), metrics=str(tmp_path / "m.csv"),
              checkpoints=str(tmp_path / "ck"), scorer=LengthScorer())  # fmt: skip
    config = {"seed": 3, "train": train, "run": {"method": "grpo"}}
    first = train_run(config=config, out=str(tmp_path / "a"), **kw)
    assert first["resumed_from"] is None and list((tmp_path / "ck").glob("r-*/checkpoint-2"))
    same = train_run(config=config, out=str(tmp_path / "b"), **kw)
    assert same["resumed_from"].endswith("checkpoint-2")  # the same start: resumed (the test can fail)
    other_seed = train_run(config={**config, "seed": 4}, out=str(tmp_path / "c"), **kw)
    assert other_seed["resumed_from"] is None
    with monkeypatch.context() as m:  # as under accelerate launch with ZeRO-2 (no DeepSpeed on a CPU)
        m.setattr("maxk.train.run.launch_signature", lambda env: {"processes": 1, "zero_stage": 2})
        other_launch = train_run(config=config, out=str(tmp_path / "e"), **kw)
    assert other_launch["resumed_from"] is None
    write_jsonl(data, _problems(7)[1:])  # other prompts, same path
    other_data = train_run(config=config, out=str(tmp_path / "d"), **kw)
    assert other_data["resumed_from"] is None


def test_training_refuses_a_sandbox_whose_programs_can_read_the_host(tiny_model_dir, tmp_path):
    """Without Landlock a program reads every file its uid can (expected outputs included): the policy
    could learn to read them. Training stops before the first step unless the user opts in."""
    from maxk.sandbox import SandboxError

    data = tmp_path / "train.jsonl.gz"
    write_jsonl(data, _problems(4))
    train = dict(
        dataset="x", max_prompts=None, max_steps=1, save_steps=2, num_generations=4, temperature=1.0,
        top_p=1.0, max_completion_length=4, learning_rate=1e-3, beta=0.0, use_bias_correction_kl=False,
        epsilon=0.2, num_iterations=1, num_train_epochs=1, loss_type="grpo", per_device_train_batch_size=4,
        gradient_accumulation_steps=1, bon_k=2, delta_clamp=0.2,
    )  # fmt: skip
    portable = {
        "workers": 1,
        "isolation": {"minimum": "portable", "layers": {"userns": False, "landlock": False}},
    }
    config = {"seed": 3, "train": train, "run": {"method": "grpo"}, "sandbox": portable}
    kw = dict(run="r", model=tiny_model_dir, data=str(data), out=str(tmp_path / "out"),
              metrics=str(tmp_path / "m.csv"), checkpoints=str(tmp_path / "ck"))  # fmt: skip
    with pytest.raises(SandboxError, match=r"refusing to train.*no Landlock.*allow_exposed_training"):
        train_run(config=config, **kw)
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.csv").exists()
    portable["isolation"]["allow_exposed_training"] = True
    assert train_run(config=config, **kw)["steps"] == 1


def test_live_curves_reach_tensorboard_with_the_heldout_points(tiny_model_dir, tmp_path, monkeypatch):
    """train.report_to: every logged number, the held-out curve's points included, lands in the run's
    own TensorBoard directory under --trackers while it trains."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    data = tmp_path / "train.jsonl.gz"
    write_jsonl(data, _problems(6))
    heldout = {"dataset": None, "problems": 2, "samples": 2, "every": 1}
    train = _train(
        max_steps=2, beta=0.0, num_iterations=1, max_prompts=4, report_to="tensorboard", heldout=heldout
    )
    kw = dict(
        run="live", model=tiny_model_dir, data=str(data), out=str(tmp_path / "out"), scorer=LengthScorer()
    )
    kw.update(metrics=str(tmp_path / "m.csv"), checkpoints=str(tmp_path / "ck"))
    train_run(
        config={"seed": 3, "train": train, "run": {"method": "grpo"}}, trackers=str(tmp_path / "tr"), **kw
    )
    events = EventAccumulator(str(tmp_path / "tr" / "tensorboard" / "live"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    # transformers' TensorBoardCallback puts every training log under train/
    assert {"train/reward", "train/entropy", "train/heldout/reward", "train/heldout/pass@1"} <= tags, tags
    assert [e.step for e in events.Scalars("train/heldout/reward")] == [0, 1, 2]
