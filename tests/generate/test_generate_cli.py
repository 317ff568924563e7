"""``maxk generate`` / ``maxk generate merge`` end to end on the tiny model (in process)."""

from __future__ import annotations

import json
import sys
import types

import gen_fixtures as fx
import pandas as pd
import pytest

from maxk.cli import main
from maxk.io import write_jsonl


@pytest.fixture()
def fake_prompts(monkeypatch):
    """Stand-in for the data stage's prompt builder/extractor; records what the CLI passes it."""
    calls = {"build": [], "extract": 0}
    mod = types.ModuleType("maxk.data.prompts")
    ext = types.ModuleType("maxk.generate.extract")

    def build_prompt(problem, tokenizer=None, *, config):
        calls["build"].append((problem["id"], tokenizer is not None, config))
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": problem["prompt"]}], tokenize=False, add_generation_prompt=True
        )

    def extract_program(completion, problem):
        calls["extract"] += 1
        return f"# {problem['id']}\n{completion[:5]}"

    mod.build_prompt, ext.extract_program = build_prompt, extract_program
    monkeypatch.setitem(sys.modules, "maxk.data.prompts", mod)
    monkeypatch.setitem(sys.modules, "maxk.generate.extract", ext)
    return calls


def test_cli_shards_then_merge(tmp_path, fake_prompts, capsys):
    tiny_model_dir = fx.tiny_model_dir()
    problems = fx.toy_problems()
    data = tmp_path / "toy.jsonl.gz"
    write_jsonl(data, problems)
    cfg = {
        "seed": 7,
        "generate": {
            "backend": "transformers",
            "n": 3,
            "max_new_tokens": 5,
            "transformers": {"max_batch_size": 2},
        },
        "prompt": {"system": "S"},
    }
    shards = [tmp_path / f"shard{i}.parquet" for i in range(2)]
    for i, out in enumerate(shards):
        rc = main(
            ["generate", "--model-path", str(tiny_model_dir), "--model-name", "base", "--problems", str(data),
             "--shard", str(i), "--num-shards", "2", "--threads", "1", "--config-json", json.dumps(cfg),
             "--output", str(out)]
        )  # fmt: skip
        assert rc == 0
    merged = tmp_path / "toy.parquet"
    assert main(["generate", "merge", "--output", str(merged), *map(str, shards)]) == 0
    df = pd.read_parquet(merged)
    assert len(df) == 15 and df["problem_id"].tolist() == [p["id"] for p in problems for _ in range(3)]
    assert (df["program"] == [f"# {r.problem_id}\n{r.completion[:5]}" for r in df.itertuples()]).all()
    assert fake_prompts["extract"] == 15
    assert [c[0] for c in fake_prompts["build"]] == [p["id"] for p in problems]
    # the prompt section as given, every key it leaves out at its schema default
    from maxk.config import section_defaults

    expected = {**section_defaults("prompt"), "system": "S"}
    assert all(has_tok and conf == expected for _, has_tok, conf in fake_prompts["build"])
    assert set(df["entropy_kind"]) == {"exact"} and df["mean_entropy"].notna().all()
    assert set(df["finish_reason"]) <= {"stop", "length"} and (df["num_tokens"] <= 5).all()
    manifest = json.loads((tmp_path / "toy.manifest.json").read_text())
    assert manifest["dataset"] == "toy" and manifest["model"]["sha256"]
    assert manifest["backend"]["name"] == "transformers" and manifest["sampling"]["n"] == 3
    assert "15 rows from 2 shards" in capsys.readouterr().out
    cfg["generate"]["max_problems"] = 2  # the first two problems only, same samples as above
    capped = tmp_path / "capped.parquet"
    argv = ["generate", "--model-path", str(tiny_model_dir), "--model-name", "base", "--problems", str(data)]
    assert main([*argv, "--config-json", json.dumps(cfg), "--output", str(capped)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(capped), df.iloc[:6])


def test_cli_errors_are_user_errors(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a/1"}\n')
    argv = ["generate", "--model-path", "x", "--problems", str(bad), "--output", str(tmp_path / "o.parquet")]
    assert main(argv) == 1 and "missing --config-json" in capsys.readouterr().err
    assert main([*argv, "--config-json", '{"seed": 1, "generate": {"n": 0}}']) == 1
    assert "config key generate.n" in capsys.readouterr().err  # the key named, before any work
    assert main([*argv, "--config-json", '{"seed": 1}']) == 1
    assert "bad.jsonl:1: problem 'a/1' has no field 'prompt'" in capsys.readouterr().err
    rc = main(
        ["generate", "merge", "--output", str(tmp_path / "m.parquet"), str(tmp_path / "shard0.parquet")]
    )
    assert rc == 1 and "shard0.parquet: shard missing" in capsys.readouterr().err


def test_real_prompt_builder_and_extractor_are_wired(tmp_path):
    """The CLI's glue uses the data stage's build_prompt (with the model's chat template and the prompt
    config) and extract_program on every completion."""
    tiny_model_dir = fx.tiny_model_dir()
    from maxk.data import load
    from maxk.data.prompts import build_prompt
    from maxk.generate.cli import prompt_functions
    from maxk.generate.extract import extract_program
    from maxk.generate.hf import TransformersBackend

    problems = load("suite", family="mixed:0.5", n=4, seed=1)
    backend = TransformersBackend(tiny_model_dir, threads=1)
    build, extract = prompt_functions(backend.tokenizer, {"system": "SYS-MARK"})
    prompt = build(problems[0])
    assert prompt == build_prompt(problems[0], backend.tokenizer, config={"system": "SYS-MARK"})
    assert prompt.startswith("<|im_start|>system\nSYS-MARK") and prompt.endswith("<|im_start|>assistant\n")
    assert extract is extract_program
    assert extract("Sure:\n```python\nprint(int(input()) * 2)\n```\nDone.", problems[0]) == (
        "print(int(input()) * 2)\n"
    )

    data = tmp_path / "suite_x.jsonl.gz"
    write_jsonl(data, problems)
    cfg = {"seed": 1, "generate": {"n": 2, "max_new_tokens": 4}, "prompt": {}}
    out = tmp_path / "s.parquet"
    argv = ["generate", "--model-path", str(tiny_model_dir), "--problems", str(data), "--output", str(out)]
    assert main([*argv, "--config-json", json.dumps(cfg)]) == 0
    df = pd.read_parquet(out)
    by_id = {p["id"]: p for p in problems}
    assert len(df) == 8
    assert all(r.program == extract_program(r.completion, by_id[r.problem_id]) for r in df.itertuples())
    assert json.loads((tmp_path / "s.manifest.json").read_text())["dataset"] == "suite_x"
