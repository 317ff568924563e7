"""Shards: per-problem seeds, determinism of a shard alone, extraction wiring, merge and its errors."""

from __future__ import annotations

import itertools
import json
import random

import gen_fixtures as fx
import pandas as pd
import pytest

from maxk.generate.backends import Sample, SamplingParams
from maxk.generate.run import (
    SAMPLE_COLUMNS,
    ShardError,
    manifest_path,
    merge_shards,
    run_shard,
    shard_bounds,
)
from maxk.seeds import COMMON_STREAM
from maxk.seeds import problem_seed as derive_seed


class ToyBackend:
    """Deterministic pure-Python backend: completions depend only on the prompt's seed."""

    name = "toy"
    entropy_kind = "exact"
    prompts_per_call = 2
    tokenizer = None

    def generate(self, prompts, seeds, params):
        out = []
        for prompt, seed in zip(prompts, seeds, strict=True):
            rng = random.Random(seed)
            out.append(
                [
                    Sample(
                        completion=f"```python\nprint({rng.randint(0, 9)})\n```\n{prompt}",
                        num_tokens=3,
                        finish_reason=rng.choice(["stop", "length"]),
                        sum_logprob=-rng.random(),
                        mean_entropy=rng.random(),
                        entropy_kind="exact",
                    )
                    for _ in range(params.n)
                ]
            )
        return out

    def describe(self):
        return {"name": self.name}


def _extract(completion, problem):
    body = completion.split("```python\n", 1)[-1].split("```", 1)[0]
    return body + f"# {problem['id']}"


def _run(problems, out, backend, *, shard=0, num_shards=1, n=4, model="base", params=None, crn=False):
    return run_shard(
        problems=problems,
        build_prompt=lambda p: f"PROMPT[{p['prompt']}]",
        extract=_extract,
        backend=backend,
        params=params or SamplingParams(n=n, max_new_tokens=8),
        output=out,
        model_name=model,
        dataset="toy",
        base_seed=1234,
        shard=shard,
        num_shards=num_shards,
        config={"generate": {"n": n}},
        common_random_numbers=crn,
    )


def test_shard_bounds_cover_in_order():
    for n in (0, 1, 5, 7, 10):
        for m in (1, 2, 3, 4):
            ranges = [shard_bounds(n, i, m) for i in range(m)]
            assert ranges[0][0] == 0 and ranges[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
            assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1
    with pytest.raises(ValueError):
        shard_bounds(5, 2, 2)


def test_seeds_depend_on_model_dataset_problem_only():
    s = derive_seed(1, "base", "toy", "toy/0")
    assert s == derive_seed(1, "base", "toy", "toy/0") and 0 <= s < 2**63
    others = {derive_seed(2, "base", "toy", "toy/0"), derive_seed(1, "run", "toy", "toy/0"),
              derive_seed(1, "base", "toy2", "toy/0"), derive_seed(1, "base", "toy", "toy/1")}  # fmt: skip
    assert s not in others and len(others) == 4


def test_rows_schema_and_extraction_wiring(tmp_path):
    problems = fx.toy_problems()
    out = tmp_path / "s.parquet"
    manifest = _run(problems, out, ToyBackend(), n=3)
    df = pd.read_parquet(out)
    assert tuple(df.columns) == SAMPLE_COLUMNS
    assert len(df) == 15 and manifest["num_rows"] == 15
    assert df["sample_index"].tolist() == [0, 1, 2] * 5
    assert df["problem_id"].tolist() == [p["id"] for p in problems for _ in range(3)]
    for row in df.itertuples():
        assert row.program == _extract(row.completion, {"id": row.problem_id})
        assert f"PROMPT[Write function f{row.problem_id.split('/')[1]}(x).]" in row.completion
    assert manifest["sampling"] == {"n": 3, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8}
    assert manifest["seeds"]["per_problem"]["toy/0"] == derive_seed(1234, "base", "toy", "toy/0")
    assert json.loads(manifest_path(out).read_text())["output_sha256"] == manifest["output_sha256"]
    assert manifest["packages"]["pyarrow"]


def test_hf_shard_alone_is_deterministic(tmp_path):
    """Shard 1 of 2 generated twice alone, and the same problems inside a 1-shard run: same rows."""
    problems = fx.toy_problems()
    hf_backend = fx.hf_backend()
    params = SamplingParams(n=5, max_new_tokens=6)
    a, b, full = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "full.parquet"
    _run(problems, a, hf_backend, shard=1, num_shards=2, params=params)
    _run(problems, b, hf_backend, shard=1, num_shards=2, params=params)
    _run(problems, full, hf_backend, params=params)
    da, db, dfull = (pd.read_parquet(p) for p in (a, b, full))
    lo, hi = shard_bounds(len(problems), 1, 2)
    assert da["problem_id"].unique().tolist() == [p["id"] for p in problems[lo:hi]]
    pd.testing.assert_frame_equal(da, db)
    sub = dfull[dfull["problem_id"].isin(da["problem_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(da, sub)
    assert set(da["entropy_kind"]) == {"exact"}


def test_common_random_numbers_give_one_model_under_two_names_the_same_samples(tmp_path):
    """With ``common_random_numbers`` sample j of a problem draws the same uniforms in every model: the
    same weights under two names sample the same completions (the decode loop, batched over problems);
    by default each name has its own stream, and they differ."""
    problems = fx.toy_problems()
    hf_backend = fx.hf_backend()
    params = SamplingParams(n=5, max_new_tokens=6)
    frames = {}
    for crn in (False, True):
        for model in ("a", "b"):
            out = tmp_path / f"{model}-{crn}.parquet"
            manifest = _run(problems, out, hf_backend, model=model, params=params, crn=crn)
            frames[model, crn] = pd.read_parquet(out)["completion"].tolist()
            stream = COMMON_STREAM if crn else model
            assert manifest["seeds"]["per_problem"]["toy/0"] == derive_seed(1234, stream, "toy", "toy/0")
    assert frames["a", True] == frames["b", True]
    assert frames["a", False] != frames["b", False]


def _shards(tmp_path, problems, m=3):
    paths = [tmp_path / f"shard{i}.parquet" for i in range(m)]
    for i, p in enumerate(paths):
        _run(problems, p, ToyBackend(), shard=i, num_shards=m)
    return paths


def test_merge_concatenates_in_order(tmp_path):
    problems = fx.toy_problems()
    paths = _shards(tmp_path, problems)
    _run(problems, tmp_path / "full.parquet", ToyBackend())
    manifest = merge_shards(paths, tmp_path / "merged.parquet")
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "merged.parquet"), pd.read_parquet(tmp_path / "full.parquet")
    )
    assert manifest["problem_ids"] == [p["id"] for p in problems]
    assert len(manifest["seeds"]["per_problem"]) == 5


def test_merge_rejects_missing_corrupt_incomplete_or_misordered(tmp_path):
    problems = fx.toy_problems()
    paths = _shards(tmp_path, problems)
    out = tmp_path / "merged.parquet"
    with pytest.raises(ShardError, match="expected shard 0 of 3"):
        merge_shards([paths[1], paths[0], paths[2]], out)
    with pytest.raises(ShardError, match="expected shard 0 of 2"):
        merge_shards(paths[1:], out)
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) // 2])  # truncated, as by a killed copy
    with pytest.raises(ShardError, match=r"shard1\.parquet: sha256 .* does not match"):
        merge_shards(paths, out)
    paths[1].write_bytes(data)
    manifest_path(paths[2]).unlink()  # killed between Parquet and manifest
    with pytest.raises(ShardError, match=r"shard2\.manifest\.json: manifest missing"):
        merge_shards(paths, out)
    paths[0].unlink()
    with pytest.raises(ShardError, match=r"shard0\.parquet: shard missing"):
        merge_shards(paths, out)
    assert not out.exists()


def test_merge_rejects_shards_of_different_runs(tmp_path):
    problems = fx.toy_problems()
    paths = _shards(tmp_path, problems, m=2)
    _run(problems, paths[1], ToyBackend(), shard=1, num_shards=2, model="other")
    with pytest.raises(ShardError, match="model_name"):
        merge_shards(paths, tmp_path / "m.parquet")


def test_killed_job_leaves_no_output_and_resumes_identically(tmp_path):
    problems = fx.toy_problems()
    calls: list[str] = []

    class Recording(ToyBackend):
        prompts_per_call = 1
        fail_on = None

        def generate(self, prompts, seeds, params):
            if self.fail_on and any(self.fail_on in p for p in prompts):
                raise KeyboardInterrupt  # like a kill mid-shard
            calls.extend(prompts)
            return super().generate(prompts, seeds, params)

    broken = Recording()
    broken.fail_on = "f3"
    out = tmp_path / "s.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(problems, out, broken)
    assert not out.exists() and not manifest_path(out).exists()  # nothing a rerun or merge would trust
    parts = tmp_path / "s.parquet.parts"
    assert sorted(p.name for p in parts.iterdir()) == ["000000.parquet", "000001.parquet", "000002.parquet"]
    (parts / "000002.parquet").write_bytes(b"torn")  # a corrupt part is regenerated, not trusted

    calls.clear()
    manifest = _run(problems, out, Recording())
    assert [c.split("[")[1] for c in calls] == ["Write function f2(x).]", "Write function f3(x).]",
                                                "Write function f4(x).]"]  # fmt: skip
    assert manifest["stats"]["resumed_problems"] == 2
    assert not parts.exists()
    _run(problems, tmp_path / "fresh.parquet", ToyBackend())
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(tmp_path / "fresh.parquet"))


def test_parts_of_a_different_job_are_not_reused(tmp_path):
    problems = fx.toy_problems()

    class Broken(ToyBackend):
        def generate(self, prompts, seeds, params):
            if any("f4" in p for p in prompts):
                raise KeyboardInterrupt
            return super().generate(prompts, seeds, params)

    out = tmp_path / "s.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(problems, out, Broken(), n=4)
    manifest = _run(problems, out, ToyBackend(), n=3)  # other sampling params: other keys
    assert manifest["stats"]["resumed_problems"] == 0
    assert len(pd.read_parquet(out)) == 15


def test_prompts_without_room_for_max_new_tokens_fail_before_any_generation(tmp_path):
    """A prompt that fits the model but leaves less than max_new_tokens would get completions cut
    short in silence (vLLM), biasing pass@k down: the shard must refuse, naming the problems."""
    from maxk.generate.backends import PromptTooLongError, check_prompt_room

    class Words:
        bos_token = None

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": list(range(len(text.split())))}

    class Limited(ToyBackend):
        tokenizer = Words()
        max_model_len = 12

        def generate(self, prompts, seeds, params):
            raise AssertionError("generation must not start")

    problems = [dict(p, prompt=" ".join(["w"] * (2 + 2 * i))) for i, p in enumerate(fx.toy_problems()[:4])]
    out = tmp_path / "s.parquet"
    with pytest.raises(PromptTooLongError) as err:  # prompts of 2, 4, 6, 8 words; room 12 - 8 = 4
        _run(problems, out, Limited(), params=SamplingParams(n=2, max_new_tokens=8))
    msg = str(err.value)
    assert "2 of 4 prompts" in msg and f"{problems[2]['id']} (6 tokens)" in msg
    assert problems[1]["id"] not in msg
    assert "max_model_len" in msg and not out.exists()
    check_prompt_room(["a"], [4], 8, 12)  # exactly enough room
    check_prompt_room(["a"], [10**6], 8, None)  # no known limit: nothing to check
