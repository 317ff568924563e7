"""The held-out learning curve (maxk.train.heldout): fixed problems outside the run, fixed seeds."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from train_helpers import make_trainer

from maxk.docs import undocumented
from maxk.metrics import max_at_k
from maxk.train.heldout import (
    OWN,
    PROBLEM_REWARDS,
    HeldoutCurve,
    heldout_problems,
    own_problems,
    problem_column,
)
from maxk.train.logged import GRPO_KEYS
from maxk.train.run import write_metrics_csv


def test_own_prompts_are_a_seeded_subset_of_the_run_s_prompts():
    problems = [{"id": f"p{i}"} for i in range(10)]
    chosen = own_problems(problems, 4, seed=3)
    assert chosen == own_problems(problems, 4, seed=3) and len(chosen) == 4
    assert [p["id"] for p in chosen] == sorted(p["id"] for p in chosen)  # file order kept
    assert own_problems(problems, 4, seed=4) != chosen and own_problems(problems, 40, seed=3) == problems


def test_heldout_problems_are_outside_the_run_and_seeded():
    rows = [{"id": f"p{i}"} for i in range(20)]
    train = {f"p{i}" for i in range(0, 20, 2)}
    a = heldout_problems(rows, train, 5, seed=3)
    assert len(a) == 5 and not {r["id"] for r in a} & train
    assert a == heldout_problems(rows, train, 5, seed=3)
    assert [r["id"] for r in a] == sorted((r["id"] for r in a), key=lambda s: int(s[1:]))  # file order
    with pytest.raises(ValueError, match="only 10 problems of the held-out pool"):
        heldout_problems(rows, train, 11, seed=3)


class DigitScorer:
    """A trusted stand-in for the sandbox (nothing is executed): reward = digit fraction of the text."""

    def __init__(self):
        self.calls = []

    def score(self, pairs):
        self.calls.append([text for _, text in pairs])
        out = []
        for _, text in pairs:
            r = sum(c.isdigit() for c in text) / max(1, len(text))
            out.append(SimpleNamespace(reward=r, passed=int(r > 0.5), total=1))
        return out


def test_curve_is_measured_before_and_during_training(tiny_model_dir, tmp_path):
    trainer = make_trainer(tiny_model_dir, tmp_path, max_steps=4)
    tok = trainer.processing_class
    problems = [{"id": f"h{i}"} for i in range(3)]
    ids = [tok(f"Task {i}: print {i}.", add_special_tokens=False)["input_ids"] for i in range(3)]
    scorer = DigitScorer()
    curve = HeldoutCurve(
        problems,
        ids,
        scorer=scorer,
        extract=lambda text, problem: text,
        tokenizer=tok,
        samples=4,
        every=2,
        max_new_tokens=8,
        temperature=1.0,
        top_p=1.0,
        stop_token_ids=list(trainer.eos_token_ids),
        seed=0,
    )
    trainer.add_callback(curve)
    own_scorer = DigitScorer()  # the run's own prompts: before the first step and after the last only
    own = HeldoutCurve(problems[:2], ids[:2], scorer=own_scorer, extract=lambda text, problem: text,
                       tokenizer=tok, samples=4, every=None, max_new_tokens=8, temperature=1.0, top_p=1.0,
                       stop_token_ids=list(trainer.eos_token_ids), seed=0, prefix=OWN)  # fmt: skip
    trainer.add_callback(own)
    trainer.train()
    own_points = [e for e in trainer.state.log_history if "own/reward" in e]
    assert [p["step"] for p in own_points] == [0, 4] and all(len(c) == 8 for c in own_scorer.calls)
    for p, texts in zip(own_points, own_scorer.calls, strict=True):
        rewards = [
            [sum(c.isdigit() for c in t) / max(1, len(t)) for t in texts[4 * i : 4 * i + 4]] for i in range(2)
        ]
        # each problem's unbiased max@k (k = 2, 4 of its 4 samples) and pass@1, in problem order
        for k in (2, 4):
            got = [float(v) for v in p[problem_column(OWN, f"max@{k}")].split()]
            assert got == pytest.approx([max_at_k(r, k) for r in rewards], abs=1e-5)
        assert p[problem_column(OWN, "max@4")] == " ".join(f"{max(r):.6g}" for r in rewards)
        passed = [float(v) for v in p[problem_column(OWN, "pass@1")].split()]
        assert passed == pytest.approx([sum(x > 0.5 for x in r) / 4 for r in rewards])
    points = [e for e in trainer.state.log_history if "heldout/reward" in e]
    assert [p["step"] for p in points] == [0, 2, 4]
    assert all(len(c) == 12 for c in scorer.calls)  # 3 problems x 4 samples each time
    for p, texts in zip(points, scorer.calls, strict=True):
        expected = sum(sum(c.isdigit() for c in t) / max(1, len(t)) for t in texts) / 12
        assert p["heldout/reward"] == pytest.approx(expected)
        assert 0 <= p["heldout/entropy"] < 10
        # each problem's mean reward (its 4 samples), in problem order: the paired interval's input
        per_problem = [float(v) for v in p[PROBLEM_REWARDS].split()]
        by_problem = [texts[4 * i : 4 * i + 4] for i in range(3)]
        want = [sum(sum(c.isdigit() for c in t) / max(1, len(t)) for t in ts) / 4 for ts in by_problem]
        assert per_problem == pytest.approx(want, abs=1e-5)
    # the same seeds at every point: with unchanged weights, the same completions come back
    again = curve.measure(99)
    assert again["step"] == 99 and scorer.calls[-1] == scorer.calls[-2]
    rows = tmp_path / "m.csv"
    write_metrics_csv(rows, trainer.state.log_history)
    text = rows.read_text().splitlines()
    header = text[0].split(",")
    assert "heldout/reward" in header
    assert undocumented(header, GRPO_KEYS) == []  # maxk.train.logged, docs/outputs.md
    by_step = {line.split(",")[0]: line.split(",") for line in text[1:]}
    assert set(by_step) == {"0", "1", "2", "3", "4"}
    col = header.index("heldout/reward")
    assert by_step["0"][col] and by_step["2"][col] and not by_step["1"][col]
    col = header.index("own/reward")  # merged into the rows of steps 0 and 4 only
    assert by_step["0"][col] and by_step["4"][col] and not by_step["2"][col]
    from maxk.analysis.learning import measured_endpoints

    start, end = measured_endpoints(pd.read_csv(rows), OWN, "max@4")
    assert start.tolist() == pytest.approx(
        [float(v) for v in own_points[0][problem_column(OWN, "max@4")].split()]
    )
    assert end.size == 2 and measured_endpoints(pd.read_csv(rows), OWN, "max@8") is None
    from maxk.analysis.claims import heldout_endpoints

    first, last = heldout_endpoints(pd.read_csv(rows))
    assert first.tolist() == pytest.approx([float(v) for v in points[0][PROBLEM_REWARDS].split()])
    assert last.tolist() == pytest.approx([float(v) for v in points[-1][PROBLEM_REWARDS].split()])


def _curve(trainer, scorer, cache, samples=4):
    tok = trainer.processing_class
    problems = [{"id": f"h{i}"} for i in range(3)]
    ids = [tok(f"Task {i}: print {i}.", add_special_tokens=False)["input_ids"] for i in range(3)]
    return HeldoutCurve(problems, ids, scorer=scorer, extract=lambda text, problem: text, tokenizer=tok,
                        samples=samples, every=None, max_new_tokens=8, temperature=1.0, top_p=1.0,
                        stop_token_ids=list(trainer.eos_token_ids), seed=0, start_cache=cache)  # fmt: skip


def test_a_start_point_is_measured_once_and_read_by_the_next_run_of_the_same_model(tiny_model_dir, tmp_path):
    from maxk.train.heldout import StartCache

    cache = StartCache(tmp_path / "start", {"model": "m", "threads": 1})
    first_scorer, second_scorer = DigitScorer(), DigitScorer()
    first = make_trainer(tiny_model_dir, tmp_path / "a", max_steps=2)
    first.add_callback(_curve(first, first_scorer, cache))
    first.train()
    assert len(first_scorer.calls) == 2 and cache.read == {"heldout": "measured"}  # start and end
    kept = list((tmp_path / "start").iterdir())
    assert len(kept) == 1 and not kept[0].name.startswith(".tmp")  # written whole, then renamed
    second = make_trainer(tiny_model_dir, tmp_path / "b", max_steps=2)
    curve = _curve(second, second_scorer, cache)
    second.add_callback(curve)
    second.train()
    assert len(second_scorer.calls) == 1 and cache.read == {"heldout": str(kept[0])}  # the end only
    start = [e for e in second.state.log_history if e.get("step") == 0 and "heldout/reward" in e]
    assert start == [e for e in first.state.log_history if e.get("step") == 0 and "heldout/reward" in e]
    # what was read is what measuring gives: the base's weights, the same seeds
    fresh = make_trainer(tiny_model_dir, tmp_path / "c", max_steps=1)
    check = _curve(fresh, DigitScorer(), None)
    check.model = fresh.model
    assert check.measure(0) == start[0]


@pytest.mark.parametrize("change", ["identity", "samples", "broken file"])
def test_a_start_point_of_anything_else_is_measured_again(tiny_model_dir, tmp_path, change):
    from maxk.train.heldout import StartCache

    cache = StartCache(tmp_path / "start", {"model": "m"})
    trainer = make_trainer(tiny_model_dir, tmp_path / "a", max_steps=1)
    curve = _curve(trainer, DigitScorer(), cache)
    curve.model = trainer.model
    path = cache.path(curve.settings())
    cache.keep(path, curve.measure(0))
    scorer = DigitScorer()
    if change == "identity":
        other = _curve(trainer, scorer, StartCache(tmp_path / "start", {"model": "another"}))
    elif change == "samples":
        other = _curve(trainer, scorer, cache, samples=2)
    else:
        path.write_text("{not json", encoding="utf-8")
        other = _curve(trainer, scorer, cache)
    other.model = trainer.model
    assert other.start()["step"] == 0 and len(scorer.calls) == 1


def test_the_start_cache_s_identity_is_the_model_s_bytes_data_and_code(tiny_model_dir, tmp_path):
    import shutil

    from maxk.train.run import _start_cache

    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    sandbox = {"batch_size": 8}
    one = _start_cache(str(tmp_path / "ck"), tiny_model_dir, [str(data)], sandbox, use_cpu=True)
    assert one is not None and one.directory == tmp_path / "ck" / "start-measurements"
    assert (
        one.identity
        == _start_cache(str(tmp_path / "ck"), tiny_model_dir, [str(data)], sandbox, True).identity
    )
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)  # the same bytes elsewhere: the same points
    assert _start_cache("ck", str(copy), [str(data)], sandbox, True).identity == one.identity
    (copy / "config.json").write_text((copy / "config.json").read_text() + " ")
    assert _start_cache("ck", str(copy), [str(data)], sandbox, True).identity != one.identity
    data.write_text("{} \n")
    assert _start_cache("ck", tiny_model_dir, [str(data)], sandbox, True).identity != one.identity
    assert _start_cache("ck", tiny_model_dir, [str(data)], {"batch_size": 9}, True).identity != one.identity
    assert _start_cache("ck", "Qwen/Qwen2.5-Coder-7B-Instruct", [str(data)], sandbox, True) is None
    assert _start_cache("ck", tiny_model_dir, [str(data)], sandbox, use_cpu=False) is None
