"""The embedded base model's build path: tokenizer options, the competence check and a tiny end-to-end build.

The sandbox is replaced by a recording fake scorer (it never runs the programs; untrusted output is only
ever executed in ``maxk.sandbox``), so these tests check the plumbing and the arithmetic, not the model.
"""

from __future__ import annotations

import json

import pytest
from train_helpers import times_problem

from maxk.docs import undocumented
from maxk.io import write_jsonl
from maxk.train.logged import SFT_KEYS


class FakeScorer:
    """Records the (problem, program) pairs; reward 1 for programs that mention the problem's factor."""

    def __init__(self):
        self.pairs: list[tuple[dict, str]] = []

    def score(self, pairs):
        from types import SimpleNamespace

        self.pairs.extend(pairs)
        out = []
        for problem, program in pairs:
            ok = f"* {problem['id'][-1]}" in program
            out.append(SimpleNamespace(passed=int(ok), total=1, reward=float(ok)))
        return out


def test_competence_reports_pass_at_k_grid_and_mean_reward():
    from maxk.train.base import competence

    passed = [[1, 0, 0, 0], [0, 0, 0, 0]]
    rewards = [[1.0, 0.5, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]]
    c = competence(rewards, passed)
    assert c["pass@1"] == pytest.approx(0.125)
    assert c["pass@2"] == pytest.approx((0.5 + 0.0) / 2)
    assert c["pass@4"] == pytest.approx(0.5)
    assert c["mean_reward"] == pytest.approx(2.5 / 8)
    assert c["ratio_pass@n_pass@1"] == pytest.approx(4.0)
    assert (c["samples"], c["problems"]) == (4, 2)
    assert competence([[0.0, 0.0]], [[0, 0]])["ratio_pass@n_pass@1"] is None


def test_tokenizer_reloads_token_for_token_through_autotokenizer(tmp_path):
    """transformers loads a qwen2 directory's tokenizer as Qwen2Tokenizer (its own pre-tokenizer): the
    tokenizer SFT trains with must be the one every later stage gets back from AutoTokenizer."""
    from transformers import AutoTokenizer

    from maxk.tiny import init_model, save, train_tokenizer

    texts = [f"Replace x with x times {i}.\nx = x * {i}\nprint(x)\n" for i in range(300)] * 3
    tok = train_tokenizer(texts, vocab_size=400)
    save(
        init_model(
            tok,
            seed=0,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        tok,
        tmp_path,
    )
    back = AutoTokenizer.from_pretrained(tmp_path)
    msgs = [{"role": "user", "content": "Replace x with x times 173."}]
    for s in [
        "Replace x with x times 173.\nx = x * 173\n",
        "```python\ndef f(a, b):\n    return a % 7\n```",
        back.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
    ]:
        ids = tok(s)["input_ids"]
        assert back(s)["input_ids"] == ids
        assert tok.decode(ids) == s
    pieces = tok.tokenize("x = x * 173")
    assert [p for p in pieces if any(ch.isdigit() for ch in p)] == ["1", "7", "3"]  # one token per digit
    assert "Ġtimes" in tok.get_vocab()
    for t in ("<|im_start|>", "<|im_end|>", "<|pad|>"):
        assert back.convert_tokens_to_ids(t) == tok.convert_tokens_to_ids(t)
        assert len(tok(t)["input_ids"]) == 1
    assert (back.eos_token, back.pad_token, back.padding_side) == ("<|im_end|>", "<|pad|>", "left")


def test_sample_scored_uses_the_pipeline_prompt_and_extractor(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from maxk.generate.extract import extract_program
    from maxk.train.sampling import sample_scored

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    problems = [times_problem(3), times_problem(5)]
    scorer = FakeScorer()
    out = sample_scored(model, tok, problems, scorer=scorer, samples=5, max_new_tokens=8, seed=0, tag="t")
    assert [len(r) for r in out.rewards] == [5, 5] and [len(r) for r in out.passed] == [5, 5]
    assert [p["id"] for p, _ in scorer.pairs] == ["suite/stdio-00003"] * 5 + ["suite/stdio-00005"] * 5
    # every scored program is extract_program() of the completion, in order
    texts = [t for row in out.texts for t in row]
    assert [prog for _, prog in scorer.pairs] == [
        extract_program(t, problems[i // 5]) for i, t in enumerate(texts)
    ]


def _tiny_base_config(out, **sft) -> dict:
    return {
        "seed": 0,
        "base_model": {
            "build": True,
            "path": str(out),
            "threads": 1,
            "tokenizer": {"vocab_size": 320},
            "model": {
                "hidden_size": 16,
                "intermediate_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "max_position_embeddings": 512,
            },
            "sft": {"epochs": 1, "max_steps": 2, "learning_rate": 1e-3, "batch_size": 8, "max_length": 512}
            | sft,
            "eval": {"dataset": "t", "problems": 2, "samples": 4, "max_new_tokens": 8, "log_examples": 1},
        },
    }


def _tiny_build(tmp_path, **sft) -> tuple[dict, object, object]:
    """``(manifest, model dir, SFT curve)`` of a tiny base built in ``tmp_path`` (32 SFT examples)."""
    from maxk.train.base import build_base_model

    train = [times_problem(i % 10) | {"id": f"suite/stdio-{i:05d}"} for i in range(32)]
    test = [times_problem(i) for i in range(1, 4)]
    write_jsonl(tmp_path / "train.jsonl.gz", train)
    write_jsonl(tmp_path / "test.jsonl.gz", test)
    out = tmp_path / "base"
    config = _tiny_base_config(out, **sft)
    curve = tmp_path / "metrics" / "base.csv"
    manifest = build_base_model(
        config,
        train_data=str(tmp_path / "train.jsonl.gz"),
        test_data=str(tmp_path / "test.jsonl.gz"),
        out=str(out),
        metrics=str(curve),
        scorer=FakeScorer(),
    )
    return manifest, out, curve


def test_build_base_model_end_to_end_tiny(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    manifest, out, curve = _tiny_build(tmp_path)
    train = [times_problem(i % 10) | {"id": f"suite/stdio-{i:05d}"} for i in range(32)]
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest))
    assert {"pass@1", "pass@2", "pass@4", "mean_reward", "samples"} <= set(manifest["eval"])
    assert manifest["eval"]["samples"] == 4 and manifest["eval"]["problems"] == 2
    assert manifest["sft_steps"] == 2
    # every SFT example is listed, under the name of the file it came from
    trained_on = json.loads((out / "trained_on.json").read_text())
    assert trained_on == [{"dataset": "train", "id": r["id"]} for r in train]
    assert "calibration" not in manifest  # base_model.calibration is null here
    assert manifest["torch"]["threads"] == 1 and manifest["torch"]["cpu_capability"]
    # the SFT curve, as the RL runs write theirs: the first step's point (logging_steps 10 > 2 steps)
    import csv

    rows = list(csv.DictReader(curve.open()))
    assert [int(r["step"]) for r in rows] == [1]
    assert list(rows[0])[:4] == ["step", "epoch", "loss", "mean_token_accuracy"]
    assert undocumented(list(rows[0]), SFT_KEYS) == []  # maxk.train.logged, docs/outputs.md
    assert float(rows[0]["loss"]) > 0
    AutoTokenizer.from_pretrained(out)
    AutoModelForCausalLM.from_pretrained(out)


def test_micro_batches_accumulate_the_same_step(tmp_path):
    """Micro-batches of 2 accumulate the 8-example steps: still 2 optimizer steps, and the first
    step's loss and gradient norm (the whole batch's token mean) are the unsplit batch's."""
    import csv

    whole = _tiny_build(tmp_path / "whole")
    split = _tiny_build(tmp_path / "split", micro_batch_size=2)
    assert whole[0]["sft_steps"] == split[0]["sft_steps"] == 2
    first = [next(csv.DictReader(build[2].open())) for build in (whole, split)]
    for key in ("loss", "grad_norm"):
        assert float(first[1][key]) == pytest.approx(float(first[0][key]), rel=1e-5), key


def test_a_micro_batch_that_does_not_divide_the_batch_is_refused(tmp_path):
    from maxk.train.base import build_base_model

    config = _tiny_base_config(tmp_path / "base", micro_batch_size=3)
    with pytest.raises(ValueError, match=r"micro_batch_size=3 must divide base_model\.sft\.batch_size=8"):
        build_base_model(
            config, train_data="-", test_data="-", out=str(tmp_path / "base"), scorer=FakeScorer()
        )


def test_torch_numerics_pins_the_threads_and_restores_them():
    """A build computes with its configured thread count (part of its result) and deterministic
    algorithms, and leaves the process's torch settings as it found them."""
    import torch

    from maxk.train.base import torch_numerics

    fill = lambda: torch.utils.deterministic.fill_uninitialized_memory  # noqa: E731
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), fill()
    with torch_numerics(3) as numerics:
        assert torch.get_num_threads() == 3 and numerics["threads"] == 3
        assert torch.are_deterministic_algorithms_enabled()
        assert not fill()  # NaN-filling every new tensor doubled the SFT's time
        assert numerics["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), fill()) == before


def test_sft_curve_has_one_row_per_logged_step(tmp_path):
    from maxk.train.base import write_sft_curve

    history = [
        {"loss": 5.0, "grad_norm": 1.0, "learning_rate": 0.0, "entropy": 5.9, "mean_token_accuracy": 0.01,
         "epoch": 0.1, "step": 1},
        {"loss": 3.0, "grad_norm": 0.5, "learning_rate": 1e-3, "entropy": 4.0, "mean_token_accuracy": 0.2,
         "epoch": 1.0, "step": 10},
        {"train_runtime": 9.0, "train_loss": 3.2, "epoch": 1.0, "step": 10},  # the summary: left out
    ]  # fmt: skip
    assert write_sft_curve(tmp_path / "base.csv", history) == 2
    lines = (tmp_path / "base.csv").read_text().splitlines()
    assert lines[0] == "step,epoch,loss,mean_token_accuracy,learning_rate,grad_norm,entropy"
    assert lines[2] == "10,1.0,3.0,0.2,0.001,0.5,4.0"


def test_base_model_threads_default_to_one_not_to_every_core():
    """`maxk base` by hand used to take every core (os.cpu_count()): another machine, other weights."""
    from maxk.config import with_defaults

    assert with_defaults("base_model", {})["threads"] == 1


BANDS = {"pass_at_1": [0.10, 0.35], "mean_reward": [0.25, 0.45], "large_k_ratio": 2.0,
         "call_pass_at_1": 0.05, "sharpen_gain": 0.03}  # fmt: skip


def test_calibration_passes_only_when_every_item_is_in_its_band():
    from maxk.train.base import calibration

    check = {"samples": 64, "pass@1": 0.12, "pass@64": 0.6, "mean_reward": 0.34}
    block = calibration(check, {"pass@1": 0.2}, {"pass@1": 0.06}, BANDS)
    assert block["passes"] and [i["name"] for i in block["items"]] == [
        "pass_at_1", "pass_at_64_over_pass_at_1", "mean_reward", "call_pass_at_1", "sharpen_gain_pass_at_1",
    ]  # fmt: skip
    assert block["items"][-1]["value"] == pytest.approx(0.08)
    misses = {
        "pass_at_1": calibration({**check, "pass@1": 0.05}, {"pass@1": 0.2}, None, BANDS),
        "pass_at_64_over_pass_at_1": calibration({**check, "pass@64": 0.2}, None, None, BANDS),
        "mean_reward": calibration({**check, "mean_reward": 0.5}, None, None, BANDS),
        "call_pass_at_1": calibration(check, None, {"pass@1": 0.01}, BANDS),
        "sharpen_gain_pass_at_1": calibration(check, {"pass@1": 0.13}, None, BANDS),
    }
    for name, block in misses.items():
        assert not block["passes"]
        assert [i["name"] for i in block["items"] if not i["pass"]] == [name]
    # an item whose check was not run is left out, and pass@1 = 0 fails the ratio without dividing
    none = calibration({**check, "pass@1": 0.0}, None, None, BANDS)
    assert [i["name"] for i in none["items"]] == ["pass_at_1", "pass_at_64_over_pass_at_1", "mean_reward"]
    assert none["items"][1]["value"] is None and not none["items"][1]["pass"]


def test_calibration_bands_default_to_the_operating_point_of_the_issue():
    from maxk.config import load_config, with_defaults

    bm = with_defaults("base_model", {"calibration": {}})
    assert bm["calibration"]["bands"] == BANDS
    assert bm["calibration"]["sharpen_temperature"] == 0.5
    assert with_defaults("base_model", {})["calibration"] is None
    assert load_config()["base_model"]["calibration"]["bands"] == BANDS  # the embedded default checks it


def test_default_config_prompts_leave_room_in_the_default_base_model():
    """Every problem the embedded default generates for (and trains on) leaves room for its new tokens
    in the base model `maxk base` builds, with the tokenizer it trains: otherwise the prompt-room check
    stops `snakemake --cores all` at generation (HumanEval's longest prompt is 772 tokens)."""
    import random

    from maxk.config import load_config
    from maxk.data.build import build_dataset
    from maxk.data.prompts import build_prompt
    from maxk.tiny import train_tokenizer
    from maxk.train.base import _tokenizer_texts

    cfg = load_config()
    bm, prompt_cfg = cfg["base_model"], cfg["prompt"]
    train = [r for r in build_dataset(bm["sft"]["dataset"], cfg)[0] if r.get("reference")]
    if bm["sft"]["max_examples"]:
        train = random.Random(cfg["seed"]).sample(train, min(bm["sft"]["max_examples"], len(train)))
    tok = train_tokenizer(_tokenizer_texts(train, prompt_cfg), **bm["tokenizer"])
    positions = bm["model"]["max_position_embeddings"]
    needs = {name: cfg["generate"]["max_new_tokens"] for name in cfg["datasets"]}
    needs[cfg["train"]["dataset"]] = max(
        needs[cfg["train"]["dataset"]], cfg["train"]["max_completion_length"]
    )
    for name, new_tokens in needs.items():
        records = build_dataset(name, cfg)[0]
        longest = max(len(tok(build_prompt(r, tok, config=prompt_cfg))["input_ids"]) for r in records)
        assert longest + new_tokens <= positions, (name, longest, new_tokens, positions)
