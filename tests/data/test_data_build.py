# ruff: noqa: E501
"""Build: filters/splits/manifest, CLI end to end, byte-identical reruns, bad input leaves nothing."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from guard import HANG_GUARD_S

from maxk.cli import main
from maxk.data import default_config, load
from maxk.data.build import DataError, build_dataset, split_records

SMALL = default_config()
SMALL["data"]["pools"]["suite"]["options"]["n"] = 200
SMALL["data"]["pools"]["suite"]["expected"] = {
    "filtered": 200,
    "sft": 120,
    "rl": 50,
    "heldout": 10,
    "test": 20,
}


def test_splits_disjoint_exact_and_seeded():
    sft = load("suite_sft", config=SMALL)
    rl = load("suite_rl", config=SMALL)
    heldout = load("suite_heldout", config=SMALL)
    test = load("suite_test", config=SMALL)
    call = load("suite_call", config=SMALL)
    # fractions of each format stratum, rounded per stratum: within one problem per stratum (2) of target
    # (rl and heldout keep their part's stdio problems only: about three quarters of the part)
    got = {"sft": len(sft), "rl": len(rl), "heldout": len(heldout), "test": len(test) + len(call)}
    want = SMALL["data"]["pools"]["suite"]["expected"]
    assert abs(got["sft"] - want["sft"]) <= 2 and abs(got["test"] - want["test"]) <= 2, got
    assert 0.6 * want["rl"] <= got["rl"] <= want["rl"] and 0 < got["heldout"] <= want["heldout"], got
    assert {r["tests"]["format"] for r in rl + heldout + test} == {"stdio"}
    # every part of the one pool is disjoint from the others, by id and by reference program
    parts = (sft, rl, heldout, test, call)
    ids = [r["id"] for part in parts for r in part]
    refs = [r["reference"] for part in parts for r in part]
    assert len(ids) == len(set(ids)) and len(refs) == len(set(refs))
    assert {r["tests"]["format"] for r in call} == {"call"}
    recs = [{"id": str(i), "tests": {"format": "stdio"}} for i in range(100)]
    parts = split_records(recs, {"seed": 1, "sizes": {"train": 90, "test": 10}}, [])
    assert (len(parts["train"]), len(parts["test"])) == (90, 10)
    again = split_records(recs, {"seed": 1, "sizes": {"train": 90, "test": 10}}, [])
    other = split_records(recs, {"seed": 2, "sizes": {"train": 90, "test": 10}}, [])
    assert parts == again and parts != other


@pytest.mark.parametrize(
    "sizes", [{"sft": 0.6, "rl": 0.25, "heldout": 0.05, "test": 0.1}, {"a": 7, "b": 2, "c": 1}]
)
def test_a_split_does_not_depend_on_the_order_its_parts_are_listed_in(sizes):
    # the pipeline hands the config over as JSON with sorted keys, `maxk data build --configfile` in the
    # YAML's order: the same split either way (it did not, before the parts were taken in name order)
    recs = [{"id": str(i), "tests": {"format": "stdio" if i % 4 else "call"}} for i in range(103)]
    listed = split_records(recs, {"seed": 3, "sizes": sizes, "stratify": "format"}, [])
    backwards = dict(reversed(list(sizes.items())))
    assert split_records(recs, {"seed": 3, "sizes": backwards, "stratify": "format"}, []) == listed
    assert (
        split_records(recs, {"seed": 3, "sizes": dict(sorted(sizes.items())), "stratify": "format"}, [])
        == listed
    )


def test_the_command_line_config_and_the_pipeline_s_json_build_the_same_split(tmp_path):
    from maxk.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    as_json = json.loads(json.dumps(cfg, sort_keys=True))  # what the rules hand to `maxk data build`
    assert list(cfg["data"]["pools"]["suite"]["split"]["sizes"]) != sorted(
        cfg["data"]["pools"]["suite"]["split"]["sizes"]
    )
    assert (
        build_dataset("suite_sft", cfg)[1]["records_sha256"]
        == build_dataset("suite_sft", as_json)[1]["records_sha256"]
    )


def test_expected_count_mismatch_is_loud(capsys):
    cfg = copy.deepcopy(SMALL)
    cfg["data"]["pools"]["suite"]["expected"] = {"filtered": 2766, "train": 2490, "test": 276}
    cfg["data"]["pools"]["suite"]["split"]["sizes"] = {"train": 2490, "test": 276}
    cfg["data"]["pools"]["suite"]["split"]["stratify"] = None
    cfg["datasets"]["suite_train"] = {"pool": "suite", "part": "train"}
    _, manifest = build_dataset("suite_train", cfg)
    err = capsys.readouterr().err
    assert "WARNING" in err and "2766" in err and "200" in err and "2490" in err
    assert manifest["expected_ok"]["filtered"] is False and manifest["warnings"]


def test_prompt_length_filter_with_tokenizer():
    class CharTok:  # 1 token per character, no chat template
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(text)}

    cfg = copy.deepcopy(SMALL)
    cfg["data"]["pools"]["suite"]["max_prompt_tokens"] = 480
    cfg["data"]["pools"]["suite"]["expected"] = {}
    _recs, manifest = build_dataset("suite_sft", cfg, tokenizer=CharTok())
    step = next(s for s in manifest["steps"] if s["step"] == "max_prompt_tokens")
    assert 0 < step["dropped"] < step["before"] and manifest["length_unit"] == "tokens"


def test_zero_rows_and_unknown_dataset():
    cfg = copy.deepcopy(SMALL)
    cfg["data"]["pools"]["suite"]["max_difficulty"] = 0
    with pytest.raises(DataError, match="zero problems after filtering"):
        build_dataset("suite_sft", cfg)
    with pytest.raises(DataError, match="not in config 'datasets'"):
        build_dataset("nope", cfg)


def run_cli(*args):
    return main(["data", *args])


def test_cli_twice_byte_identical_and_manifest(tmp_path):
    cfg = json.dumps(SMALL)
    out = tmp_path / "suite_test.jsonl.gz"
    assert run_cli("build", "--name", "suite_test", "--config-json", cfg, "--output", str(out)) == 0
    files = sorted(tmp_path.iterdir())
    first = {p.name: p.read_bytes() for p in files}
    assert set(first) == {
        "suite_test.jsonl.gz",
        "suite_test.manifest.json",
        "suite_test.jsonl.gz.provenance.json",
    }
    assert run_cli("build", "--name", "suite_test", "--config-json", cfg, "--output", str(out)) == 0
    assert {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())} == first
    man = json.loads(first["suite_test.manifest.json"])
    assert man["count"] == man["formats"]["stdio"] and man["seed"] == 1234
    assert [s["step"] for s in man["steps"]] == ["load", "no_tests", "max_difficulty", "max_prompt_tokens", "split",
                                                 "formats"]  # fmt: skip
    assert run_cli("validate", str(out)) == 0


def test_cli_builds_from_a_scale_and_its_overlay(tmp_path):
    """`--configfile BASE OVERLAY` composes as snakemake does: the tests' overlay makes a 240-problem pool."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "suite_heldout.jsonl.gz"
    files = [str(root / "config" / "config.yaml"), str(root / "tests" / "workflow" / "config_small.yaml")]
    assert run_cli("build", "--name", "suite_heldout", "--configfile", *files, "--output", str(out)) == 0
    man = json.loads((tmp_path / "suite_heldout.manifest.json").read_text())
    assert man["options"]["n"] == 240 and 0 < man["count"] <= 12


def test_cli_bad_input_names_file_row_field_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "cc.jsonl"
    bad.write_text(json.dumps({"name": "x", "public_tests": {"input": [], "output": []}}) + "\n")
    cfg = {"datasets": {"cc": {"pool": "cc"}},
           "data": {"pools": {"cc": {"source": "codecontests", "options": {"paths": [str(bad)]}}}}}  # fmt: skip
    out = tmp_path / "out" / "cc.jsonl.gz"
    assert run_cli("build", "--name", "cc", "--config-json", json.dumps(cfg), "--output", str(out)) == 1
    err = capsys.readouterr().err
    assert "cc.jsonl" in err and "row 0" in err and "'description'" in err
    assert not out.parent.exists() or not any(out.parent.iterdir())
    # a file with a malformed record cannot be validated
    badgz = tmp_path / "x.jsonl"
    badgz.write_text(
        '{"id": "a", "source": "s", "prompt": "p", "difficulty": 1, "tests": {"format": "junit"}}\n'
    )
    assert run_cli("validate", str(badgz)) == 1
    assert "field 'tests.format'" in capsys.readouterr().err


@pytest.mark.skipif(not os.access(sys.executable, os.X_OK), reason="no python")
def test_snakemake_dry_run_paper_config():
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    snake = Path(sys.executable).parent / "snakemake"
    if not snake.exists():
        pytest.skip("snakemake not installed in this environment")
    res = subprocess.run([str(snake), "-n", "--cores", "1", "--configfile", "config/paper.yaml"],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    for name in (
        "codecontests_train",
        "codecontests_test",
        "livecodebench",
        "livebench",
        "codeforces",
        "mbpp",
    ):
        assert f"results/data/{name}.jsonl.gz" in res.stdout + res.stderr


def test_exact_split_sizes_say_how_many_problems_are_left_over():
    """The paper's 2,490 / 276 on a pool that keeps more problems: the rest must not vanish silently."""
    records = [{"id": f"p/{i}", "tests": {"format": "stdio"}, "difficulty": None} for i in range(10)]
    warnings: list[str] = []
    parts = split_records(records, {"seed": 1, "sizes": {"train": 5, "test": 2}}, warnings)
    assert [len(parts["train"]), len(parts["test"])] == [5, 2]
    assert warnings == [
        "split uses 7 of the 10 problems left after filtering ({'train': 5, 'test': 2}); 3 are in no part"
    ]
    warnings.clear()
    split_records(records, {"seed": 1, "sizes": {"train": 8, "test": 2}}, warnings)
    assert warnings == []


def _fake_source(records):
    """A source loader returning copies of ``records`` (a stand-in pool for the exclusion tests)."""

    def load(**_options):
        from maxk.data.source import SourceResult

        return SourceResult(copy.deepcopy(records), [{"generator": "fake"}])

    return load


def _problem(pid, prompt, reference):
    return {"id": pid, "source": "fake", "prompt": prompt, "difficulty": 1, "reference": reference,
            "tests": {"format": "stdio", "cases": [{"input": "1\n", "output": "1\n"}]}}  # fmt: skip


def test_exclude_pools_drops_what_the_audit_would_match_and_prefix_renames_ids(monkeypatch):
    """A pool with ``exclude_pools`` keeps only problems whose statement and reference program are in
    none of those pools (normalised as the contamination audit matches them), counts each drop's
    reason in the manifest, and ``id_prefix`` renames the ids' namespace."""
    from maxk.data import build as B

    main_pool = [_problem("fake/0", "Add two numbers.", "def solve():\n    print(1)\n"),
                 _problem("fake/1", "Print a word.", "def solve():\n    print(2)\n"),
                 _problem("fake/9", "", None)]  # an empty statement matches nothing  # fmt: skip
    second = [
        _problem("fake/0", "  ADD two numbers  ", "def solve():\n  print(99)\n"),  # same statement
        _problem("fake/1", "Another task.", "def solve():\n        print(2)"),  # same program
        _problem("fake/2", "A new task.", "def solve():\n    print(3)\n"),  # new
    ]
    second[2]["prompt"] = "..."  # normalises to the empty statement: still new
    monkeypatch.setitem(B.SOURCES, "fake_main", _fake_source(main_pool))
    monkeypatch.setitem(B.SOURCES, "fake_second", _fake_source(second))
    cfg = {"datasets": {"second": {"pool": "second"}},
           "data": {"pools": {"main": {"source": "fake_main"},
                              "second": {"source": "fake_second", "exclude_pools": ["main"],
                                         "id_prefix": "second"}}}}  # fmt: skip
    records, manifest = build_dataset("second", cfg)
    assert [r["id"] for r in records] == ["second/2"]
    step = manifest["steps"][1]
    assert step["step"] == "exclude_pools" and (step["before"], step["after"]) == (3, 1)
    assert step["reasons"] == {"statement in pool 'main'": 1, "reference in pool 'main'": 1}
    assert manifest["filters"]["exclude_pools"] == ["main"] and manifest["filters"]["id_prefix"] == "second"
    # without the exclusion all three are kept, under their prefixed ids
    del cfg["data"]["pools"]["second"]["exclude_pools"]
    records, _ = build_dataset("second", cfg)
    assert [r["id"] for r in records] == ["second/0", "second/1", "second/2"]
    assert B.prefix_ids([{"id": "plain"}], "p") == [{"id": "p/plain"}]
    assert B.prefix_ids([{"id": "a/b/c"}], None) == [{"id": "a/b/c"}]
    for bad, why in (("second", "the pool itself"), ("nope", "not in config 'data.pools'")):
        cfg["data"]["pools"]["second"]["exclude_pools"] = [bad]
        with pytest.raises(DataError, match=f"pool 'second': exclude_pools names '{bad}', which is {why}"):
            build_dataset("second", cfg)


def test_second_pool_probe_shares_nothing_with_the_main_pool():
    """config/probes/second_pool.yaml builds 2,402 problems of their own: no id, statement or reference
    program in common with any problem of the main pool (all 4,000, before the split), as the
    contamination audit matches them."""
    from maxk.analysis.contamination import index_set, match, problem_keys
    from maxk.config import load_config
    from maxk.data.build import load_source
    from maxk.workflow import slices

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "config/config.yaml", root / "config/probes/second_pool.yaml")
    records, manifest = build_dataset(
        "suite_extra", slices.data_build(cfg, "suite_extra")
    )  # the rule's input
    assert len(records) == manifest["expected"]["filtered"] == 2402 and manifest["expected_ok"]["filtered"]
    assert {r["tests"]["format"] for r in records} == {"stdio"}
    assert all(r["id"].startswith("suite_extra/") for r in records)
    main_pool = load_source("suite", cfg["data"]["pools"]["suite"]["options"]).records
    index = index_set(problem_keys("suite", main_pool).values())
    hits = [k.id for k in problem_keys("suite_extra", records).values() if match(k, index).any]
    assert hits == []
    # the check can fail: the same generator without the exclusion shares programs with the main pool
    unexcluded = load_source("suite", cfg["data"]["pools"]["suite_extra"]["options"]).records
    assert any(match(k, index).by_reference for k in problem_keys("x", unexcluded).values())
    assert any(match(k, index).by_behaviour for k in problem_keys("x", unexcluded).values())
