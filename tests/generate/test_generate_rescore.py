"""Re-scoring samples with transformers (``maxk generate rescore``): the full-vocabulary entropy of the
distribution each token was drawn from, checked against the sampler's own exact values, and the
estimates table that puts it beside the samples' estimate (issue 26, fault 6)."""

from __future__ import annotations

import json

import gen_fixtures as fx
import numpy as np
import pandas as pd
import pytest

from maxk.cli import main
from maxk.generate.backends import SamplingParams
from maxk.generate.rescore import ForcedSample, rescore_samples, score_sequences, select_subsample
from maxk.io import write_jsonl


def _chat(backend, text):
    return backend.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def _frame(prompts_samples):
    """A samples-file frame from ``{problem_id: [Sample, ...]}``."""
    rows = []
    for pid, samples in prompts_samples.items():
        for i, s in enumerate(samples):
            rows.append(
                {"problem_id": pid, "sample_index": i, "completion": s.completion, "num_tokens": s.num_tokens,
                 "finish_reason": s.finish_reason, "sum_logprob": s.sum_logprob,
                 "mean_entropy": s.mean_entropy, "entropy_kind": s.entropy_kind}
            )  # fmt: skip
    return pd.DataFrame(rows)


def _sampled(backend, temperature, top_p):
    prompts = {"p/short": _chat(backend, "add"), "p/long": _chat(backend, "Write add(a, b) for a list " * 4)}
    params = SamplingParams(n=8, temperature=temperature, top_p=top_p, max_new_tokens=12)
    out = dict(zip(prompts, backend.generate(list(prompts.values()), [3, 4], params), strict=True))
    assert {s.finish_reason for ss in out.values() for s in ss} == {"stop", "length"}, "cover both endings"
    return prompts, out


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_rescored_entropy_equals_the_samplers_exact_entropy(temperature, top_p):
    """The transformers backend records the exact entropy of the distribution it sampled from; the
    teacher-forced re-scoring of the sampled ids must find the same sums (entropy and log-prob) for every
    sample: prompts of different lengths in one left-padded batch, stopped and length-capped samples. An
    off-by-one position, a padding leak or a missed temperature/top-p breaks the equality."""
    backend = fx.hf_backend()
    prompts, out = _sampled(backend, temperature, top_p)
    seqs, want = [], []
    for pid, samples in out.items():
        for s in samples:
            stopped = s.finish_reason == "stop"
            ids = s.token_ids[:-1] if stopped else s.token_ids
            seqs.append(ForcedSample(backend.encode(prompts[pid]), list(ids), stopped))
            want.append((s.mean_entropy * s.num_tokens, s.sum_logprob))
    got = score_sequences(
        backend.model, seqs, temperature=temperature, top_p=top_p, stop_token_ids=backend.stop_token_ids,
        batch_size=5,
    )  # fmt: skip
    assert [q.positions for q in seqs] == [s.num_tokens for ss in out.values() for s in ss]
    got, want = np.array(got), np.array(want)
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=1e-4, atol=1e-4)  # entropy: every sample
    # log-prob: exact without a stop token; with one, the most likely stop id's (>= the drawn one's)
    stopped = np.array([q.stopped for q in seqs])
    np.testing.assert_allclose(got[~stopped, 1], want[~stopped, 1], rtol=1e-4, atol=1e-4)
    assert (got[stopped, 1] >= want[stopped, 1] - 1e-4).all()


def test_retokenised_samples_are_flagged_and_matched_ones_exact():
    """The samples file has text, not ids: ``tokens_match`` is true exactly when re-tokenising the text
    gives the sampled length, and where it gives the sampled ids the values are the sampler's. (The random
    test model draws non-canonical token sequences, so both cases occur.)"""
    backend = fx.hf_backend()
    prompts, out = _sampled(backend, 1.0, 1.0)
    frame = _frame(out)
    rows = pd.DataFrame(
        rescore_samples(
            backend.model, backend.tokenizer, frame, prompts, temperature=1.0, top_p=1.0,
            stop_token_ids=backend.stop_token_ids, batch_size=5,
        )
    )  # fmt: skip
    samples = [s for ss in out.values() for s in ss]
    same_ids, same_len = [], []
    for s in samples:
        ids = s.token_ids[:-1] if s.finish_reason == "stop" else s.token_ids
        again = backend.tokenizer(s.completion, add_special_tokens=False)["input_ids"]
        same_ids.append(list(again) == list(ids))
        same_len.append(len(again) == len(ids))
    assert rows["tokens_match"].tolist() == same_len
    assert any(same_ids) and not all(same_len), "the fixture must show both cases"
    exact = rows[same_ids]
    np.testing.assert_allclose(exact["entropy_full"], exact["entropy_sampled"], atol=1e-4)
    # NLL: equal, or lower where a stop id likelier than the drawn one ended the sample
    assert (exact["nll_rescored"] <= exact["nll_sampled"] + 1e-4).all()
    length = exact[frame.loc[same_ids, "finish_reason"].eq("length").to_numpy()]
    np.testing.assert_allclose(length["nll_rescored"], length["nll_sampled"], atol=1e-4)


def test_a_sequence_scores_the_same_alone_and_in_a_padded_batch():
    backend = fx.hf_backend()
    tok = backend.tokenizer
    seqs = [
        ForcedSample(backend.encode(_chat(backend, "x")), tok("print(1)")["input_ids"], True),
        ForcedSample(
            backend.encode(_chat(backend, "a much longer prompt " * 6)), tok("def f")["input_ids"], False
        ),
        ForcedSample(backend.encode(_chat(backend, "y")), [], True),  # only the stop position
    ]
    kw = {"temperature": 1.0, "top_p": 1.0, "stop_token_ids": backend.stop_token_ids}
    together = score_sequences(backend.model, seqs, batch_size=3, **kw)
    alone = [score_sequences(backend.model, [s], batch_size=1, **kw)[0] for s in seqs]
    np.testing.assert_allclose(np.array(together), np.array(alone), rtol=1e-5, atol=1e-5)
    assert all(h > 0 for h, _ in together) and all(lp < 0 for _, lp in together)


def test_subsample_is_fixed_by_position():
    df = pd.DataFrame(
        {"problem_id": ["b"] * 3 + ["a"] * 3 + ["c"] * 3, "sample_index": [2, 0, 1] * 3, "x": range(9)}
    )
    got = select_subsample(df, 2, 2)
    assert got["problem_id"].tolist() == ["b", "b", "a", "a"]  # file order, not sorted
    assert got["sample_index"].tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match=">= 1"):
        select_subsample(df, 0, 2)


def test_estimates_table_gaps_and_mismatches():
    from maxk.analysis.figures import entropy_estimates, render_entropy_estimates

    rng = np.random.default_rng(0)
    n = 40
    full = rng.uniform(1.0, 2.0, n)
    frame = pd.DataFrame(
        {
            "problem_id": [f"p{i // 2}" for i in range(n)],
            "tokens_match": [True] * (n - 1) + [False],
            "entropy_full": full,
            "entropy_sampled": full - 0.3,  # a top-k bound 0.3 nats below
            "entropy_kind": "approx",
            "nll_sampled": full + rng.normal(0, 0.05, n),
            "nll_rescored": full,
        }
    )
    frame.loc[n - 1, "entropy_sampled"] = 99.0  # a mismatched sample must not count
    table = entropy_estimates({"base": frame}, seed=1, resamples=500, confidence=0.95)
    r = table.iloc[0]
    assert r["samples"] == n and r["tokens_matched"] == n - 1 and r["problems"] == n // 2
    assert r["gap_sampled"] == pytest.approx(0.3) and r["gap_sampled_low"] == pytest.approx(0.3)
    assert r["gap_nll_low"] < r["gap_nll"] < r["gap_nll_high"] and abs(r["gap_nll"]) < 0.05
    md = render_entropy_estimates(table, {"base": "Base model"}, confidence=0.95)
    assert r["nll_disagreement"] == pytest.approx(np.abs(frame["nll_sampled"] - full)[:-1].mean())
    assert "| Base model | approx | 40 (39) |" in md and "+0.300 [+0.300, +0.300]" in md


@pytest.fixture()
def samples_file(tmp_path):
    from maxk.data import load

    problems = load("suite", family="mixed:0.5", n=4, seed=1)
    data = tmp_path / "toy.jsonl.gz"
    write_jsonl(data, problems)
    cfg = {"seed": 5, "generate": {"n": 4, "max_new_tokens": 8}, "prompt": {}}
    out = tmp_path / "samples" / "base" / "toy.parquet"
    argv = ["generate", "--model-path", str(fx.tiny_model_dir()), "--model-name", "base",
            "--problems", str(data), "--threads", "1", "--config-json", json.dumps(cfg),
            "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    return data, out, cfg


def test_cli_rescores_a_samples_file_and_the_figure_reports_the_gap(tmp_path, samples_file, capsys):
    data, samples, cfg = samples_file
    out = tmp_path / "entropy" / "base" / "toy.parquet"
    argv = ["generate", "rescore", "--model-path", str(fx.tiny_model_dir()), "--model-name", "base",
            "--samples", str(samples), "--problems", str(data), "--subsample-problems", "3",
            "--subsample-samples", "2", "--batch-size", "4", "--threads", "1",
            "--config-json", json.dumps(cfg), "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    df = pd.read_parquet(out)
    first = list(dict.fromkeys(pd.read_parquet(samples)["problem_id"]))[:3]
    assert df["problem_id"].tolist() == [pid for pid in first for _ in range(2)]
    assert df["entropy_full"].gt(0).all() and (df["entropy_kind"] == "exact").all()
    manifest = json.loads(out.with_name("toy.manifest.json").read_text())
    assert manifest["kind"] == "entropy_rescore" and manifest["num_rows"] == 6
    assert manifest["subsample"] == {"problems": 3, "samples_per_problem": 2}
    assert manifest["samples"]["sha256"] and manifest["tokens_matched"] == int(df["tokens_match"].sum())

    # another model's name: refused, naming the file
    assert main([*argv[:5], "run_x", *argv[6:]]) == 1
    assert "sampled by 'base', not 'run_x'" in capsys.readouterr().err

    # the entropy figure with --rescored writes the estimates table beside it
    analysis = {
        "models": {"base": "Base model"},
        "datasets": {"toy": {"label": "Toy", "short": "T"}},
        "tables": {},
        "figures": {"entropy": {"dataset": "toy", "models": ["base"]}},
    }
    figures = tmp_path / "figures"
    argv = ["analyze", "figure", "entropy", "--config-json", json.dumps(analysis), "--samples", str(samples),
            "--rescored", str(out), "--output", str(figures / "entropy.pdf"),
            str(figures / "entropy.png")]  # fmt: skip
    estimates = ["--estimates-csv", str(figures / "entropy_estimates.csv"),
                 "--estimates-md", str(figures / "entropy_estimates.md")]  # fmt: skip
    assert main(argv) == 1  # where the estimates go is the caller's to say
    assert "--rescored needs --estimates-csv and --estimates-md" in capsys.readouterr().err
    argv += estimates
    assert main(argv) == 0
    table = pd.read_csv(tmp_path / "figures" / "entropy_estimates.csv")
    assert table["model"].tolist() == ["base"] and table["sampled_kind"].tolist() == ["exact"]
    assert table["samples"].tolist() == [6] and table["tokens_matched"].tolist() == [
        int(df["tokens_match"].sum())
    ]
    assert "Base model" in (tmp_path / "figures" / "entropy_estimates.md").read_text()
    # a figure model without its re-scored file: refused
    other = {**analysis, "figures": {"entropy": {"dataset": "toy", "models": ["base", "grpo"]}}}
    argv[4] = json.dumps(other)
    assert main(argv) == 1
