"""The RL prompt filter (``maxk.train.edge``) and the shared sample-and-score loop (``maxk.train.sampling``).

The sandbox is replaced by a trusted stand-in that scores the text without running it (untrusted
output only ever runs in ``maxk.sandbox``): these tests check the selection, the seeding and the files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from train_helpers import times_problem

from maxk.io import read_jsonl, write_jsonl
from maxk.sandbox.judge import OK, WRONG_ANSWER, Score, is_solved
from maxk.train.edge import build_edge_prompts, edge_bounds, select_edge, spread_k
from maxk.train.sampling import sample_scored


class CountingScorer:
    """Solved = the problem's index is in ``solves`` and the sample's text has an even length: so a
    problem is solved by some, all or none of its samples, as the test needs."""

    def __init__(self, solves: dict[str, str]):
        self.solves, self.calls = solves, []

    def score(self, pairs):
        self.calls.append(pairs)
        out = []
        for problem, program in pairs:
            rule = self.solves.get(problem["id"], "none")
            if rule == "graded":  # never fully solved; passes len(program) % 4 of 4 tests
                passed = len(program) % 4
                out.append(Score.from_verdicts([OK] * passed + [WRONG_ANSWER] * (4 - passed), 0.0))
                continue
            ok = rule == "all" or (rule == "some" and len(program) % 2 == 0)
            out.append(Score.from_verdicts([OK if ok else WRONG_ANSWER], 0.0))
        return out


def test_edge_bounds_default_to_some_but_not_all_and_check_the_interval():
    assert edge_bounds({"samples": 8}) == (1, 7)
    assert edge_bounds({"samples": 8, "min_solved": 0, "max_solved": 8}) == (0, 8)
    with pytest.raises(ValueError, match="min_solved"):
        edge_bounds({"samples": 4, "min_solved": 3, "max_solved": 2})
    with pytest.raises(ValueError, match="samples"):
        edge_bounds({"samples": 4, "max_solved": 5})


def test_select_edge_keeps_the_counts_inside_the_bounds_in_order():
    problems = [{"id": str(i)} for i in range(5)]
    assert [p["id"] for p in select_edge(problems, [0, 1, 8, 7, 3], 1, 7)] == ["1", "3", "4"]
    assert select_edge(problems, [0] * 5, 1, 7) == []
    with pytest.raises(ValueError):
        select_edge(problems, [1, 2], 1, 7)


def test_select_edge_with_signal_flags_keeps_both_conditions():
    problems = [{"id": str(i)} for i in range(5)]
    kept = select_edge(problems, [0, 1, 2, 3, 8], 0, 7, [True, True, False, True, True])
    assert [p["id"] for p in kept] == ["0", "1", "3"]
    with pytest.raises(ValueError, match="5 problems but 5 counts, 2 signal flags"):
        select_edge(problems, [0] * 5, 0, 7, [True, False])


def test_spread_k_is_optional_and_checked():
    assert spread_k({"samples": 8}) is None and spread_k({"samples": 8, "spread_k": None}) is None
    assert spread_k({"samples": 8, "spread_k": 4}) == 4
    for bad in (0, 9, 2.5, True):
        with pytest.raises(ValueError, match="spread_k"):
            spread_k({"samples": 8, "spread_k": bad})


def test_solved_means_every_test_passed():
    assert Score(3, 3, 1.0, ("ok",) * 3, 0.0).solved and is_solved(3, 3)
    assert not Score(2, 3, 2 / 3, ("ok",) * 3, 0.0).solved
    assert not Score.from_verdicts([], 0.0).solved  # no tests: never solved
    np.testing.assert_array_equal(is_solved(np.array([3, 2, 0]), np.array([3, 3, 0])), [True, False, False])


def test_sample_scored_is_seeded_per_problem_whatever_the_chunking(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    problems = [times_problem(i) for i in range(1, 4)]
    kw = {"samples": 3, "max_new_tokens": 6, "seed": 5, "tag": "t", "extract": lambda t, p: t}
    whole = sample_scored(model, tok, problems, scorer=CountingScorer({}), max_rows=64, **kw)
    chunked = sample_scored(model, tok, problems, scorer=CountingScorer({}), max_rows=3, **kw)
    alone = sample_scored(model, tok, problems[1:2], scorer=CountingScorer({}), **kw)
    assert whole.texts == chunked.texts and alone.texts == whole.texts[1:2]
    assert [len(r) for r in whole.rewards] == [3, 3, 3] and len(whole.entropy) == 3
    other = sample_scored(model, tok, problems, scorer=CountingScorer({}), **{**kw, "tag": "other"})
    assert other.texts != whole.texts


def test_build_edge_prompts_keeps_the_problems_solved_by_some_samples(tiny_model_dir, tmp_path):
    problems = [times_problem(i) for i in range(1, 7)]
    data = tmp_path / "pool.jsonl.gz"
    write_jsonl(data, problems)
    ids = [p["id"] for p in problems]
    scorer = CountingScorer({ids[0]: "all", ids[1]: "some", ids[2]: "some", ids[4]: "all"})
    config = {
        "seed": 3,
        "train": {"prompt_filter": {"samples": 8}, "max_completion_length": 12},
    }
    out = tmp_path / "pool.edge.jsonl.gz"
    manifest = build_edge_prompts(config, model=tiny_model_dir, data=str(data), out=str(out), scorer=scorer)
    counts = manifest["solved"]
    assert counts[ids[0]] == counts[ids[4]] == 8 and counts[ids[3]] == counts[ids[5]] == 0
    kept = [row["id"] for _, row in read_jsonl(out)]
    assert kept == [i for i in ids if 1 <= counts[i] <= 7] and manifest["count"] == len(kept)
    assert set(kept) <= {ids[1], ids[2]}
    on_disk = json.loads((tmp_path / "pool.edge.manifest.json").read_text())
    assert on_disk["examined"] == 6 and on_disk["filter"]["max_solved"] == 7
    assert sum(on_disk["solved_histogram"].values()) == 6


def test_spread_k_keeps_only_the_problems_with_a_max_at_k_signal(tiny_model_dir, tmp_path):
    """With ``spread_k``, all-solved and none-solved problems (constant rewards) go, whatever the solved
    bounds; a never-solved problem with graded partial rewards stays when its samples rank."""
    problems = [times_problem(i) for i in range(1, 6)]
    data = tmp_path / "pool.jsonl.gz"
    write_jsonl(data, problems)
    ids = [p["id"] for p in problems]
    scorer = CountingScorer({ids[0]: "all", ids[1]: "some", ids[2]: "graded", ids[4]: "all"})
    spec = {"samples": 8, "min_solved": 0, "max_solved": 8, "spread_k": 4}
    config = {"seed": 3, "train": {"prompt_filter": spec, "max_completion_length": 12}}
    out = tmp_path / "pool.edge.jsonl.gz"
    manifest = build_edge_prompts(config, model=tiny_model_dir, data=str(data), out=str(out), scorer=scorer)
    signal = manifest["signal"]
    assert signal[ids[0]] is signal[ids[3]] is signal[ids[4]] is False  # constant rewards: no signal
    assert signal[ids[2]] is True and manifest["solved"][ids[2]] == 0  # graded, never fully solved
    kept = [row["id"] for _, row in read_jsonl(out)]
    assert kept == [i for i in ids if signal[i]] and manifest["with_signal"] == len(kept)
    assert manifest["filter"]["spread_k"] == 4


def test_build_edge_prompts_fails_naming_the_counts_when_nothing_is_kept(tiny_model_dir, tmp_path):
    data = tmp_path / "pool.jsonl.gz"
    write_jsonl(data, [times_problem(i) for i in range(1, 3)])
    config = {"seed": 0, "train": {"prompt_filter": {"samples": 2}, "max_completion_length": 4}}
    with pytest.raises(ValueError, match=r"kept no problem.*\{0: 2\}"):
        build_edge_prompts(
            config,
            model=tiny_model_dir,
            data=str(data),
            out=str(tmp_path / "o.jsonl.gz"),
            scorer=CountingScorer({}),
        )
    assert not (tmp_path / "o.jsonl.gz").exists()
