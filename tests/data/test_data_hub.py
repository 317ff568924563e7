# ruff: noqa: E501  (schema-exact fixture rows read best one row per line)
"""Hub loaders on schema-exact local fixtures (no hub access: HF_HUB_OFFLINE=1), awkward rows included."""

import base64
import json
import pickle
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maxk.data import load
from maxk.data.build import DataError, apply_filters
from maxk.data.hub import decode_lcb_tests, lcb_files, mbpp_assert_to_io
from maxk.data.schema import validate_dataset
from maxk.generate.extract import extract_program


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def cc_row(name, desc, pub, priv=((), ()), gen=((), ()), difficulty=1, cf=(1, "A"), **extra):
    row = {
        "name": name, "description": desc,
        "public_tests": {"input": list(pub[0]), "output": list(pub[1])},
        "private_tests": {"input": list(priv[0]), "output": list(priv[1])},
        "generated_tests": {"input": list(gen[0]), "output": list(gen[1])},
        "source": 2, "difficulty": difficulty,
        "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(int(input())+1)"]},
        "incorrect_solutions": {"language": [], "solution": []},
        "cf_contest_id": cf[0], "cf_index": cf[1], "cf_points": 0.0, "cf_rating": 800, "cf_tags": [],
        "is_description_translated": False, "untranslated_description": "",
        "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 256000000,
        "input_file": "", "output_file": "",
    }  # fmt: skip
    row.update(extra)
    return row


def test_codecontests_parquet_with_awkward_rows(tmp_path):
    rows = [
        cc_row(
            "1_A. Plus one", "Print n+1.", (["1\n"], ["2\n"]), (["5\n", "1\n"], ["6\n", "2\n"]), difficulty=2
        ),
        cc_row("2_B. No tests", "Nothing.", ([], []), cf=(2, "B")),
        cc_row("3_C. Empty input", "Print 7.", ([""], ["7\n"]), cf=(3, "C"), difficulty=7),
        cc_row("4_D. File io", "Read input.txt.", (["1"], ["1"]), cf=(4, "D"), input_file="input.txt"),
    ]
    path = tmp_path / "cc.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    recs = load("codecontests", paths=[str(path)])
    validate_dataset(recs, require_cases=False)
    by = {r["id"]: r for r in recs}
    a = by["codecontests/1_A"]
    assert a["tests"]["cases"] == [{"input": "1\n", "output": "2\n"}, {"input": "5\n", "output": "6\n"}]
    assert a["difficulty"] == 2 and a["time_limit"] == 2.5 and a["reference"] == "print(int(input())+1)"
    assert a["meta"]["cf_contest_id"] == 1 and a["meta"]["tests_per_set"]["private"] == 2
    assert by["codecontests/3_C"]["tests"]["cases"] == [{"input": "", "output": "7\n"}]
    kept, steps = apply_filters(recs, {"max_difficulty": 3})
    assert [r["id"] for r in kept] == ["codecontests/1_A"]
    assert steps[0]["reasons"] == {"no tests": 1, "reads or writes files instead of stdin/stdout": 1}
    assert steps[1]["reasons"] == {"difficulty 7 > 3": 1}


def test_codecontests_bad_row_names_file_row_field(tmp_path):
    row = cc_row("x", "d", (["1"], ["1", "2"]))
    path = write_jsonl(tmp_path / "cc.jsonl", [row])
    with pytest.raises(DataError, match=r"cc.jsonl: row 0: field 'tests': 1 inputs but 2 outputs"):
        load("codecontests", paths=[path])
    del row["description"]
    path = write_jsonl(tmp_path / "cc2.jsonl", [row])
    with pytest.raises(DataError, match=r"cc2.jsonl: row 0: missing field 'description'"):
        load("codecontests", paths=[path])


def lcb_encode(tests):
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def lcb_row(qid, tests_pub, tests_priv, func=None, starter="", encode=True, difficulty="easy"):
    return {
        "question_title": f"t{qid}", "question_content": f"Problem {qid}.", "platform": "leetcode" if func else "atcoder",
        "question_id": qid, "contest_id": "c1", "contest_date": "2025-02-01T00:00:00", "starter_code": starter,
        "difficulty": difficulty, "public_test_cases": json.dumps(tests_pub),
        "private_test_cases": lcb_encode(tests_priv) if encode else json.dumps(tests_priv),
        "metadata": json.dumps({"func_name": func} if func else {}),
    }  # fmt: skip


def test_livecodebench_stdin_functional_and_encoded(tmp_path):
    std = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    std_priv = [{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
    fn_pub = [{"input": "[1, 2]\n3", "output": "true", "testtype": "functional"}]
    fn_priv = [{"input": "[]\n0", "output": "null", "testtype": "functional"}]
    starter = "class Solution:\n    def check(self, nums: List[int], k: int) -> bool:\n        "
    rows = [
        lcb_row("abc1_a", std, std_priv),
        lcb_row("3001", fn_pub, fn_priv, func="check", starter=starter, difficulty="medium"),
        lcb_row("abc1_b", [], [], encode=False),
        lcb_row("bad", fn_pub, [], func=None),
    ]
    path = write_jsonl(tmp_path / "test6.jsonl", rows)
    recs = load("livecodebench", paths=[path])
    by = {r["id"]: r for r in recs}
    assert by["livecodebench/abc1_a"]["tests"]["cases"][1] == {"input": "5 5\n", "output": "10\n"}
    t = by["livecodebench/3001"]["tests"]
    assert t["format"] == "call" and t["entry_point"] == "check"
    assert t["cases"] == [
        "assert _lcb_result(check([1, 2], 3)) == True",
        "assert _lcb_result(check([], 0)) == None",
    ]
    assert (
        by["livecodebench/3001"]["difficulty"] == 2 and "starter code" in by["livecodebench/3001"]["prompt"]
    )
    assert by["livecodebench/abc1_b"]["meta"]["no_tests_reason"] == "no tests"
    assert "func_name" in by["livecodebench/bad"]["meta"]["no_tests_reason"]
    # a completion defining class Solution gets a module-level forwarder for the entry point
    prog = extract_program(
        "```python\nclass Solution:\n    def check(self, nums, k):\n        return True\n```",
        by["livecodebench/3001"],
    )
    assert "def check(*args, **kwargs):\n    return Solution().check(*args, **kwargs)" in prog


def test_livecodebench_call_cases_accept_a_tuple_for_a_list_as_its_grader_does(tmp_path):
    """lcb_runner turns a tuple result into a list before comparing."""
    from maxk.sandbox import score_programs

    fn = [{"input": "[1, 2]", "output": "[2, 1]", "testtype": "functional"}]
    path = write_jsonl(tmp_path / "test6.jsonl", [lcb_row("9", fn, [], func="rev")])
    (problem,) = load("livecodebench", paths=[path])
    as_tuple = "class Solution:\n    def rev(self, a):\n        return tuple(reversed(a))\n"
    wrong = "class Solution:\n    def rev(self, a):\n        return (1, 2)\n"
    programs = [extract_program(f"```python\n{code}```", problem) for code in (as_tuple, wrong)]
    assert [s.reward for s in score_programs(problem, programs, workers=1)] == [1.0, 0.0]
    assert lcb_files("release_v6")[-1] == "test6.jsonl" and len(lcb_files("release_v6")) == 6
    assert lcb_files("v6") == ["test6.jsonl"]


def test_lcb_pickle_refuses_code():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing global"):
        decode_lcb_tests(blob)


def test_livebench(tmp_path):
    tests = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
    row = {
        "question_id": "q1", "category": "coding", "task": "LCB_generation", "turns": ["Double it."],
        "question_title": "double", "public_test_cases": json.dumps(tests), "private_test_cases": lcb_encode(tests * 2),
        "original_json": {"metadata": "{}"}, "release_date": 0, "citation": "", "livebench_release_date": "2024-06-24",
        "livebench_removal_date": "", "remainder": "", "solution": "", "partial_solution": "",
    }  # fmt: skip
    path = tmp_path / "lb.parquet"
    pq.write_table(pa.Table.from_pylist([row]), path)
    (rec,) = load("livebench", paths=[str(path)])
    assert rec["id"] == "livebench/q1" and rec["prompt"] == "Double it."
    assert rec["tests"]["cases"] == [{"input": "2\n", "output": "4\n"}]  # duplicates removed


def test_livebench_completion_tasks_and_removed_questions(tmp_path):
    """A coding_completion answer is scored with partial_solution prepended (LiveBench's grader); a
    question removed on or before the release is kept without tests, with the reason, for the counts."""
    import datetime as dt

    from maxk.generate.extract import extract_program

    tests = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
    base = {
        "question_id": "q", "category": "coding", "task": "LCB_generation", "turns": ["Double it."],
        "question_title": "double", "public_test_cases": json.dumps(tests), "private_test_cases": lcb_encode(tests),
        "original_json": {"metadata": "{}"}, "release_date": dt.datetime(2024, 6, 1), "citation": "",
        "livebench_release_date": dt.datetime(2024, 6, 24), "livebench_removal_date": None, "remainder": "",
        "solution": "", "partial_solution": "",
    }  # fmt: skip
    partial = "x = int(input())\n"
    rows = [
        {**base, "question_id": "done", "task": "coding_completion", "partial_solution": partial},
        {**base, "question_id": "gone", "livebench_release_date": dt.datetime(2024, 11, 25),
         "livebench_removal_date": dt.datetime(2024, 11, 25)},
        {**base, "question_id": "later", "livebench_removal_date": dt.datetime(2025, 4, 2)},
    ]  # fmt: skip
    path = tmp_path / "lb.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    done, gone, later = load("livebench", paths=[str(path)])
    assert (
        "removed from LiveBench on 2024-11-25" in gone["meta"]["no_tests_reason"]
        and not gone["tests"]["cases"]
    )
    assert later["tests"]["cases"] and "no_tests_reason" not in later["meta"]  # removed after the release
    answer = "```python\nprint(x * 2)\n```"
    assert extract_program(answer, done) == partial + "\nprint(x * 2)\n"
    assert extract_program(f"```python\n{partial}print(x * 2)\n```", done) == partial + "print(x * 2)\n"
    assert extract_program(answer, later) == "print(x * 2)\n"  # no partial solution: unchanged
    (again,) = [
        r for r in load("livebench", paths=[str(path)], release="2024-11-24") if r["id"].endswith("gone")
    ]
    assert again["tests"]["cases"]  # not yet removed at an earlier release


def cf_row(pid, contest, index, desc, official=(), examples=(), **extra):
    row = {
        "id": pid, "aliases": [], "contest_id": contest, "contest_name": "R", "contest_type": "CF",
        "contest_start": 0, "contest_start_year": 2025, "index": index, "time_limit": 1.0, "memory_limit": 256.0,
        "title": "T", "description": desc, "input_format": "One integer.", "output_format": "One integer.",
        "interaction_format": None, "note": None, "examples": [dict(input=i, output=o) for i, o in examples],
        "editorial": None, "rating": 800, "tags": [], "testset_size": len(official),
        "official_tests": [dict(input=i, output=o) for i, o in official], "official_tests_complete": True,
        "input_mode": "stdio", "generated_checker": None, "executable": True, "generated_tests": 0,
    }  # fmt: skip
    row.update(extra)
    return row


def test_codeforces_dedupe_and_awkward(tmp_path):
    cc = write_jsonl(tmp_path / "cc.jsonl", [
        cc_row("100_A. X", "Print   the SUM of $a$ and b.", (["1 2"], ["3"]), cf=(100, "A")),
        cc_row("7_Z. Y", "Another statement, same text.", (["1"], ["1"]), cf=(7, "Z")),
    ])  # fmt: skip
    rows = [
        cf_row("100/A", "100", "A", "whatever", official=[("1 2", "3")]),  # same contest+index
        cf_row("200/B", "200", "B", "another statement same text", official=[("1", "1")]),  # same statement
        cf_row("300/C", "300", "C", "Fresh.", official=[("1", "2")], examples=[("1", "2")]),
        cf_row("301/D", "301", "D", "Only examples.", examples=[("5", "6")]),
        cf_row("302/E", "302", "E", "Interactive.", official=[("1", "1")], interaction_format="talk"),
        cf_row(
            "303/F", "303", "F", "Any answer.", official=[("1", "1")], generated_checker="def check(): ..."
        ),
        cf_row("304/G", "304", "G", "Nothing.", official=[]),
    ]
    path = write_jsonl(tmp_path / "cf.jsonl", rows)
    from maxk.data.build import load_source

    res = load_source("codeforces", {"paths": [path], "dedupe_against": {"paths": [cc]}})
    ids = [r["id"] for r in res.records]
    assert ids == [
        "codeforces/300/C",
        "codeforces/301/D",
        "codeforces/302/E",
        "codeforces/303/F",
        "codeforces/304/G",
    ]
    assert res.notes["removed_as_codecontests_duplicates"] == {"contest_index": 1, "statement": 1}
    by = {r["id"]: r for r in res.records}
    assert by["codeforces/301/D"]["tests"]["cases"] == [{"input": "5", "output": "6"}]
    assert "Example 1\nInput\n1\nOutput\n2" in by["codeforces/300/C"]["prompt"]
    reasons = {r["id"]: r["meta"].get("no_tests_reason") for r in res.records}
    assert reasons["codeforces/302/E"] == "interactive problem"
    assert "checker" in reasons["codeforces/303/F"] and reasons["codeforces/304/G"] == "no tests"


def test_codeforces_dedupe_by_alias_every_split_and_latex_legend(tmp_path):
    """Mirror contests (aliases), every CodeContests split, and open-r1's LaTeX legend against
    CodeContests' plain text, which the whole-statement hash never matched."""
    plain = (
        "You are given an integer n (1 ≤ n ≤ 10^5). Print n.\n\nInput\n\nThe only line has n.\n\nOutput\n\nn."
    )
    train = write_jsonl(
        tmp_path / "train.jsonl", [cc_row("1500_A. X", plain, (["1"], ["1"]), cf=(1500, "A"))]
    )
    test = write_jsonl(
        tmp_path / "test.jsonl", [cc_row("1501_C. Y", "Other.", (["1"], ["2"]), cf=(1501, "C"))]
    )
    latex = "You are given an integer $$$n$$$ ($$$1 \\le n \\le 10^5$$$). Print $$$n$$$."
    rows = [
        cf_row("1499/D", "1499", "D", "Mirror.", official=[("1", "1")], aliases=["1500/A"]),
        cf_row("1502/B", "1502", "B", latex, official=[("1", "1")]),
        cf_row("1501/C", "1501", "C", "Test split.", official=[("1", "2")]),
        cf_row("1503/A", "1503", "A", "Fresh.", official=[("1", "2")]),
    ]
    from maxk.data.build import load_source

    opts = {"paths": [write_jsonl(tmp_path / "cf.jsonl", rows)]}
    res = load_source("codeforces", {**opts, "dedupe_against": [{"paths": [train]}, {"paths": [test]}]})
    assert [r["id"] for r in res.records] == ["codeforces/1503/A"]
    assert res.notes["removed_as_codecontests_duplicates"] == {"contest_index": 2, "statement": 1}
    only_train = load_source("codeforces", {**opts, "dedupe_against": {"paths": [train]}})
    assert [r["id"] for r in only_train.records] == ["codeforces/1501/C", "codeforces/1503/A"]


def test_mbpp_asserts_to_stdio(tmp_path):
    rows = [
        {"task_id": 11, "text": "Remove first and last occurrence of a char.",
         "code": "def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)[::-1]",
         "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"',
                       "assert math.isclose(remove_Occ('x', 'x'), 0)"],
         "test_setup_code": "", "challenge_test_list": []},
        {"task_id": 12, "text": "Uses setup.", "code": "def f(x):\n    return x",
         "test_list": ["assert f(x) == 1"], "test_setup_code": "x = 1", "challenge_test_list": []},
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "mbpp.jsonl", rows)
    recs = load("mbpp", paths=[path])
    r11, r12 = recs
    assert r11["tests"] == {
        "format": "stdio",
        "cases": [
            {"input": "'hello'\n'l'\n", "output": "'heo'\n"},
            {"input": "'abcda'\n'a'\n", "output": "'bcd'\n"},
        ],
    }
    assert r11["meta"]["dropped_asserts"] == 1 and "one Python literal per line" in r11["prompt"]
    assert r11["reference"].startswith("def remove_Occ")
    assert r12["tests"]["cases"] == [] and "not convertible" in r12["meta"]["no_tests_reason"]
    call = load("mbpp", paths=[path], as_stdio=False)
    assert call[0]["tests"]["format"] == "call" and call[0]["tests"]["entry_point"] == "remove_Occ"
    assert call[1]["tests"]["setup"] == "x = 1"
    assert mbpp_assert_to_io("assert f([1, 2], (3,)) == {1: 'a'}") == ("f", [[1, 2], (3,)], {1: "a"})
    assert mbpp_assert_to_io("assert f(g(1)) == 2") is None


def test_cure_json_list(tmp_path):
    rows = [
        {"question": "Add.", "test_input": ["1 2\n", "3 4\n"], "test_output": ["3\n", "7\n"],
         "example_input": ["1 2\n"], "example_output": ["3\n"], "test_time_limit": 1},
        {"question": "No tests.", "test_input": [], "test_output": [], "example_input": [], "example_output": [],
         "test_time_limit": 1},
    ]  # fmt: skip
    path = tmp_path / "CodeContests_train.json"
    path.write_text(json.dumps(rows))
    from maxk.data.build import load_source

    res = load_source("cure", {"paths": [str(path)], "name": "codecontests"})
    a, b = res.records
    assert a["id"] == "codecontests/0" and len(a["tests"]["cases"]) == 2 and a["time_limit"] == 1.0
    assert b["meta"]["no_tests_reason"] == "no tests"
    assert res.inputs[0]["sha256"] and len(res.inputs[0]["sha256"]) == 64
    bad = [{"question": "x", "test_input": ["1"]}]
    path.write_text(json.dumps(bad))
    with pytest.raises(DataError, match="row 0: missing field 'test_output'"):
        load_source("cure", {"paths": [str(path)]})


def _rehearsal_fixtures():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fixtures", Path(__file__).parents[1] / "rehearsal" / "fixtures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the field set of CURE's rows (Gen-Verse CodeContests(_train), CodeForces; LiveCodeBench adds difficulty)
CURE_FIELDS = {"dataset", "question", "test_input", "test_output", "example_input", "example_output", "solutions",
               "task_id", "test_time_limit", "exe_method"}  # fmt: skip


def test_cure_file_at_a_pinned_revision_from_the_hub_cache(tmp_path, monkeypatch):
    """The paper config reads CURE's `{split}/{Name}.json` at a pinned revision through the hub cache
    (offline on a compute node); rows carry the real field set, ids come from task_id."""
    from huggingface_hub import constants

    from maxk.data.build import load_source
    from maxk.hf_hub import fill_cache

    rows = _rehearsal_fixtures().cure_rows("CodeContests_train", 5)
    assert set(rows[0]) == CURE_FIELDS
    assert set(_rehearsal_fixtures().cure_rows("LiveCodeBench", 1)[0]) == CURE_FIELDS | {"difficulty"}
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sha = "c" * 40
    fill_cache(tmp_path, "Gen-Verse/CodeContests_train", {"train/CodeContests_train.json": json.dumps(rows)},
               commit=sha, ref=None, repo_type="dataset")  # fmt: skip
    opts = {"hub_id": "Gen-Verse/CodeContests_train", "filename": "train/CodeContests_train.json",
            "revision": sha, "name": "codecontests"}  # fmt: skip
    res = load_source("cure", opts)
    assert [r["id"] for r in res.records] == [f"codecontests/{i}" for i in range(5)]
    assert res.records[0]["time_limit"] == 1.0 and len(res.records[0]["tests"]["cases"]) == 4
    (entry,) = res.inputs
    assert (entry["hub"], entry["file"], entry["revision"]) == (opts["hub_id"], opts["filename"], sha)
    with pytest.raises(DataError, match=r"'Gen-Verse/CodeContests_train'.*'main'.*not in the cache"):
        load_source("cure", {**opts, "revision": "main"})  # only the pinned commit is cached


def test_cure_refuses_the_function_format_the_reused_ids_hold(tmp_path):
    """Gen-Verse/{MBPP,LiveCodeBench,LiveBench} were reused for dLLM-RL's function-call rows."""
    from maxk.data.build import load_source

    row = {"question": "Write f.", "test_method": "function", "test_list": ["assert f(1) == 2"],
           "prefix": "def f(x):", "test_time_limit": 1}  # fmt: skip
    path = tmp_path / "MBPP.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(DataError, match=r"row 0: field 'test_method' is 'function'.*ReasonFlux"):
        load_source("cure", {"paths": [str(path)]})
