"""``maxk analyze contamination``: overlap of training problems with audited sets, on handmade data."""

from __future__ import annotations

import csv
import json

import pytest

from maxk.analysis.contamination import (
    COLUMNS,
    DATA_DIGEST,
    ContaminationError,
    audit,
    dataset_name,
    load_trained_on,
    model_name,
    normalise_reference,
    normalise_statement,
    parse_trained_on,
    problem_keys,
    render_markdown,
    verdict,
)
from maxk.cli import main
from maxk.io import write_json, write_jsonl


def call_problem(pid: str, prompt: str, reference: str | None, entry: str = "solve") -> dict:
    return {
        "id": pid,
        "source": pid.split("/")[0],
        "prompt": prompt,
        "difficulty": None,
        "tests": {"format": "call", "entry_point": entry, "setup": "", "cases": [f"assert {entry}(1) == 1"]},
        "reference": reference,
    }


def stdio_problem(pid: str, prompt: str, reference: str | None) -> dict:
    return {
        "id": pid,
        "source": pid.split("/")[0],
        "prompt": prompt,
        "difficulty": None,
        "tests": {"format": "stdio", "cases": [{"input": "1\n", "output": "1\n"}]},
        "reference": reference,
    }


# Training problems, each built to overlap the test set in exactly one way (or none).
TRAIN = [
    stdio_problem(
        "s/1", "Print the sum of the input numbers.", "print(sum(map(int, open(0).read().split())))"
    ),
    stdio_problem("t/2", "Add TWO numbers,\n  then print  the result!", "a, b = 1, 2\nprint(a + b)"),
    call_problem("t/3", "Return x doubled.", "def twice(x):\n    return x * 2\n", entry="twice"),
    stdio_problem("t/4", "Reverse a string.", "print(input()[::-1])"),
    stdio_problem("t/5", "Count vowels.", None),
]
TEST = [
    stdio_problem("s/1", "Print the product of the input numbers.", "import math\nprint(math.prod([1]))"),
    stdio_problem("u/2", "  add two numbers, then print the result", "print(3)"),
    call_problem("u/3", "Double the argument.", "def double(x):  return x*2", entry="double"),
    stdio_problem("u/5", "Count consonants.", None),
]
DISJOINT = [
    stdio_problem("h/1", "Print hello.", "print('hello')"),
    call_problem("h/2", "Return zero.", "def zero():\n    return 0\n", entry="zero"),
]


def keys(name: str, problems: list[dict]) -> list:
    return list(problem_keys(name, problems).values())


def single_row(train: list[dict], test: list[dict]):
    (row,) = audit({"m": keys("train", train)}, {"test": keys("test", test)})
    return row


# --------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Hello,\n\tWORLD!! ", "hello, world"),
        ("Add TWO numbers,\n  then print  the result!", "add two numbers, then print the result"),
        ("...(Sort) the list.", "sort) the list"),
        ("x = y + 1", "x = y + 1"),
        ("?!.", ""),
    ],
)
def test_normalise_statement(text, expected):
    assert normalise_statement(text) == expected


def test_normalise_statement_keeps_distinct_statements_distinct():
    assert normalise_statement("Print a + b.") != normalise_statement("Print a - b.")
    assert normalise_statement("print ab") != normalise_statement("print a b")


def test_normalise_reference():
    assert normalise_reference(None, {"entry_point": "g"}) is None
    call = {"format": "call", "entry_point": "twice"}
    other = {"format": "call", "entry_point": "double"}
    a = normalise_reference("def twice(x):\n    return x * 2\n", call)
    assert a == normalise_reference("def double(x):  return x*2", other) == "deff(x):returnx*2"
    assert a != normalise_reference("def double(x):  return x*3", other)
    # stdio problems: "solve" is the name replaced, as in the suite's dedup
    assert normalise_reference("def solve():\n  pass", {"format": "stdio"}) == "deff():pass"
    assert normalise_reference("def solve():\n  pass", None) == "deff():pass"
    assert normalise_reference(" \n", {"format": "stdio"}) is None


def test_names():
    assert dataset_name("results/data/suite_test.jsonl.gz") == "suite_test"
    assert dataset_name("d/humaneval.jsonl") == "humaneval"
    assert dataset_name("d/x.y.parquet") == "x.y"
    with pytest.raises(ContaminationError, match=r"x\.csv: not a dataset file"):
        dataset_name("d/x.csv")
    assert model_name("results/seed1234/models/grpo_continuous/trained_on.json") == "grpo_continuous"


# --------------------------------------------------------------------------- overlap kinds
@pytest.mark.parametrize(
    ("train_id", "test_id", "kind", "example"),
    [
        ("s/1", "s/1", "overlap_id", "s/1"),
        ("t/2", "u/2", "overlap_statement", "t/2 (= u/2)"),
        ("t/3", "u/3", "overlap_reference", "t/3 (= u/3)"),
    ],
)
def test_each_overlap_kind_alone(train_id, test_id, kind, example):
    train = [p for p in TRAIN if p["id"] == train_id]
    test = [p for p in TEST if p["id"] == test_id]
    row = single_row(train, test)
    counts = {k: getattr(row, k) for k in ("overlap_id", "overlap_statement", "overlap_reference")}
    assert counts == {k: int(k == kind) for k in counts}
    assert row.overlap == 1 and row.example_ids == example
    # and the pair does not overlap once the matching key differs
    others = [p for p in TEST if p["id"] != test_id]
    assert single_row(train, others).overlap == 0


def test_the_same_task_in_other_words_and_code_overlaps_by_behaviour():
    """A suite problem records what it computes (``meta.behaviour``): a training problem with another id,
    statement and program but the same task is an overlap of its own kind; a source without the key
    (HumanEval, the hub's sets) never matches this way."""
    twin = {**stdio_problem("t/7", "Read x; print -3x.", "x = int(input())\nprint(-3 * x)"),
            "meta": {"behaviour": "b1"}}  # fmt: skip
    test = {**call_problem("u/7", "Return -(3x).", "def f(x):\n    x = x * 3\n    return -x"),
            "meta": {"behaviour": "b1"}}  # fmt: skip
    row = single_row([twin], [*TEST, test])
    assert (row.overlap_id, row.overlap_statement, row.overlap_reference, row.overlap_behaviour) == (
        0,
        0,
        0,
        1,
    )
    assert row.overlap == 1 and row.example_ids == "t/7 (= u/7)"
    assert single_row([twin], [*TEST, {**test, "meta": {"behaviour": "b2"}}]).overlap == 0
    assert single_row([{**twin, "meta": {}}], [*TEST, test]).overlap == 0


def test_all_kinds_together_count_each_problem_once():
    # t/6 matches u/3 by statement and by reference: one problem, two kinds, counted once in `overlap`
    train = [*TRAIN, call_problem("t/6", "Double the argument!", "def h(x):\n  return x*2", entry="h")]
    row = single_row(train, TEST)
    assert (row.overlap_id, row.overlap_statement, row.overlap_reference) == (1, 2, 2)
    assert row.overlap == 4  # s/1, t/2, t/3, t/6; not t/4 (disjoint) nor t/5 (null references)
    assert row.trained == 6 and row.audited_size == 4 and row.trained_on_datasets == "train"
    assert row.example_ids == "s/1; t/2 (= u/2); t/3 (= u/3)"


def test_empty_keys_match_nothing():
    # statements that normalise to "" and null references are not evidence of overlap
    train = [stdio_problem("t/1", "?!", None), stdio_problem("t/2", "Count.", " \n")]
    test = [stdio_problem("u/1", "...", None), stdio_problem("u/2", "Sum.", "\n ")]
    assert single_row(train, test).overlap == 0


def test_example_names_the_id_match_first():
    # s/1 shares its id with s/1 and its statement with u/2: the example names no other id
    train = [stdio_problem("s/1", "Add two numbers, then print the result.", "print(0)")]
    row = single_row(train, TEST)
    assert (row.overlap_id, row.overlap_statement, row.overlap) == (1, 1, 1)
    assert row.example_ids == "s/1"
    assert single_row(train, TEST[1:]).example_ids == "s/1 (= u/2)"


def test_disjoint_sets_have_zero_overlap():
    rows = audit({"base": keys("train", TRAIN)}, {"test": keys("h", DISJOINT)})
    assert [(r.overlap, r.overlap_id, r.overlap_statement, r.overlap_reference) for r in rows] == [
        (0, 0, 0, 0)
    ]
    assert rows[0].example_ids == ""
    assert verdict(rows) == "Verdict: 0 overlap between training and every audited set."
    md = render_markdown(rows)
    assert (
        md.startswith("# Contamination audit")
        and "| base | train | 5 | test | 2 | 0 | 0 | 0 | 0 | 0 | - | - |" in md
    )


def test_rows_order_and_sft_overlap():
    sft = keys("sft", TRAIN[:3])
    rl = [*keys("sft", TRAIN[1:2]), *keys("rl", TRAIN[3:])]
    rows = audit(
        {"zeta": rl, "base": sft, "alpha": keys("rl", TRAIN[3:])},
        {"test": keys("test", TEST), "h": keys("h", DISJOINT)},
    )
    assert [(r.model, r.audited) for r in rows] == [
        ("base", "test"),
        ("base", "h"),
        ("alpha", "test"),
        ("alpha", "h"),
        ("zeta", "test"),
        ("zeta", "h"),
    ]
    assert [r.sft_overlap for r in rows] == [None, None, 0, 0, 1, 1]
    assert rows[4].trained_on_datasets == "rl,sft"
    no_base = audit({"zeta": rl}, {"h": keys("h", DISJOINT)})
    assert no_base[0].sft_overlap is None
    assert "zeta on test (1)" in verdict(rows) and "base on test (3)" in verdict(rows)


# --------------------------------------------------------------------------- trained_on.json
@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"dataset": "a", "id": "x"}, "f.json: expected a JSON list"),
        ([{"dataset": "a", "id": "x"}, ["a", "x"]], "f.json: row 1: expected an object"),
        ([{"dataset": "a"}], "f.json: row 0, field 'id': missing"),
        ([{"id": "x"}], "f.json: row 0, field 'dataset': missing"),
        ([{"dataset": "a", "id": 3}], "f.json: row 0, field 'id': must be a non-empty string, got 3"),
        ([{"dataset": "", "id": "x"}], "f.json: row 0, field 'dataset': must be a non-empty string"),
    ],
)
def test_parse_trained_on_errors(obj, message):
    with pytest.raises(ContaminationError) as exc:
        parse_trained_on(obj, "f.json")
    assert message in str(exc.value)


def test_parse_trained_on_dedupes_in_order(tmp_path):
    rows = [{"dataset": "a", "id": "x"}, {"dataset": "b", "id": "x"}, {"dataset": "a", "id": "x"}]
    assert parse_trained_on(rows, "f") == [("a", "x"), ("b", "x")]
    path = tmp_path / "bad.json"
    path.write_text("[{")
    with pytest.raises(ContaminationError, match=r"bad\.json: not valid JSON"):
        load_trained_on(path)


# --------------------------------------------------------------------------- the command
@pytest.fixture
def work(tmp_path):
    """Datasets sft/rl/test/heldout and trained_on files of base (sft) and grpo (rl), no overlap."""
    data = tmp_path / "data"
    sft = [stdio_problem(f"sft/{i}", f"SFT problem number {i}.", f"print('sft {i}')") for i in range(4)]
    rl = [stdio_problem(f"rl/{i}", f"RL problem number {i}.", f"print('rl {i}')") for i in range(3)]
    write_jsonl(data / "sft.jsonl.gz", sft)
    write_jsonl(data / "rl.jsonl.gz", rl)
    write_jsonl(data / "test.jsonl.gz", TEST)
    write_jsonl(data / "heldout.jsonl", DISJOINT)
    models = tmp_path / "models"
    write_json(models / "base" / "trained_on.json", [{"dataset": "sft", "id": p["id"]} for p in sft])
    write_json(models / "grpo" / "trained_on.json", [{"dataset": "rl", "id": p["id"]} for p in rl])
    return tmp_path


def args(root, *extra, trained=("base", "grpo"), audited=("test", "heldout")):
    data = root / "data"
    return [
        "analyze",
        "contamination",
        "--trained-on",
        *(str(root / "models" / m / "trained_on.json") for m in trained),
        "--data",
        *(str(data / n) for n in ("sft.jsonl.gz", "rl.jsonl.gz", "test.jsonl.gz", "heldout.jsonl")),
        "--audit",
        *audited,
        "--output",
        str(root / "out" / "contamination.csv"),
        "--markdown",
        str(root / "out" / "contamination.md"),
        *extra,
    ]


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_cli_clean_run(work, capsys):
    # grpo listed first: the CSV still puts base first, audited sets in the order given
    assert main(args(work, "--fail-on-overlap", trained=("grpo", "base"))) == 0
    rows = read_csv(work / "out" / "contamination.csv")
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["model"], r["audited"]) for r in rows] == [
        ("base", "test"),
        ("base", "heldout"),
        ("grpo", "test"),
        ("grpo", "heldout"),
    ]
    assert [r["overlap"] for r in rows] == ["0"] * 4
    assert [(r["trained"], r["audited_size"]) for r in rows] == [
        ("4", "4"),
        ("4", "2"),
        ("3", "4"),
        ("3", "2"),
    ]
    assert [r["sft_overlap"] for r in rows] == ["", "", "0", "0"]
    md = (work / "out" / "contamination.md").read_text()
    assert "0 overlap between training and every audited set" in md and md.count("\n| ") == 5
    prov = json.loads((work / "out" / "contamination.csv.provenance.json").read_text())
    assert prov["config"]["audit"] == ["test", "heldout"] and prov["offenders"] == []
    assert set(prov["trained_on"]) == {"base", "grpo"} and set(prov["data"]) == {
        "sft",
        "rl",
        "test",
        "heldout",
    }
    assert "0 overlap" in capsys.readouterr().out
    before = (work / "out" / "contamination.csv").read_bytes()
    assert main(args(work)) == 0
    assert (work / "out" / "contamination.csv").read_bytes() == before


def test_cli_overlap_and_fail_flag(work, capsys):
    # grpo also trains on two test problems and one SFT example
    rows = [{"dataset": "rl", "id": "rl/0"}, {"dataset": "sft", "id": "sft/2"}]
    rows += [{"dataset": "test", "id": "s/1"}, {"dataset": "test", "id": "u/3"}]
    write_json(work / "models" / "grpo" / "trained_on.json", rows)
    assert main(args(work)) == 0  # without the flag: reported, exit 0
    out = read_csv(work / "out" / "contamination.csv")
    grpo = {r["audited"]: r for r in out if r["model"] == "grpo"}
    assert (grpo["test"]["overlap"], grpo["test"]["overlap_id"], grpo["test"]["example_ids"]) == (
        "2",
        "2",
        "s/1; u/3",
    )
    assert grpo["heldout"]["overlap"] == "0" and grpo["test"]["sft_overlap"] == "1"
    assert grpo["test"]["trained_on_datasets"] == "rl,sft,test"
    capsys.readouterr()
    (work / "out" / "contamination.csv").unlink()
    assert main(args(work, "--fail-on-overlap")) == 1
    err = capsys.readouterr().err
    assert "maxk analyze: error: training overlaps audited sets (--fail-on-overlap): grpo on test: 2" in err
    assert "heldout" not in err
    # both outputs are written before failing
    assert (work / "out" / "contamination.csv").exists()
    assert "grpo on test (2)" in (work / "out" / "contamination.md").read_text()


def test_cli_checks_the_data_digest_recorded_beside_a_model_trained_elsewhere(work, capsys):
    # a shipped base names its SFT problems by id: the audit reads them in this config's data only if
    # that data is the data it was trained on (data_digest.json beside its trained_on.json)
    from maxk.data.build import read_problems, records_sha256

    sft = records_sha256(read_problems(work / "data" / "sft.jsonl.gz"))
    digest = work / "models" / "base" / DATA_DIGEST
    write_json(digest, {"sft": {"records_sha256": sft, "count": 4}})
    assert main(args(work, "--fail-on-overlap")) == 0
    write_json(digest, {"sft": {"records_sha256": "f" * 64, "count": 4}})
    assert main(args(work)) == 1
    err = capsys.readouterr().err
    want = f"{digest}: dataset 'sft', field 'records_sha256': ffffffffffff, but the data read here has "
    assert want + sft[:12] in err
    assert "rebuild it (base_model.build: true)" in err
    write_json(digest, {"rl": {"records_sha256": sft}})  # read even when no model trained on it
    assert main(args(work, trained=("base",))) == 1
    assert "dataset 'rl', field 'records_sha256': ffff" not in capsys.readouterr().err
    write_json(digest, {"other": {"records_sha256": sft}})
    assert main(args(work)) == 1
    assert "dataset 'other', field 'records_sha256': no --data file for it" in capsys.readouterr().err
    write_json(digest, ["sft"])
    assert main(args(work)) == 1
    assert f"{digest}: not a mapping of dataset -> {{records_sha256: ...}}" in capsys.readouterr().err


def test_cli_input_errors(work, capsys):
    base = work / "models" / "base" / "trained_on.json"
    # an audited dataset without a data file
    assert main(args(work, audited=("test", "nosuch"))) == 1
    assert "--audit nosuch: no --data file for it" in capsys.readouterr().err
    # a trained_on dataset without a data file
    write_json(base, [{"dataset": "sft", "id": "sft/0"}, {"dataset": "other", "id": "o/1"}])
    assert main(args(work)) == 1
    err = capsys.readouterr().err
    assert f"{base}: row 1, field 'dataset': dataset 'other' is not among the data files given" in err
    # an id not in its dataset
    write_json(base, [{"dataset": "sft", "id": "sft/0"}, {"dataset": "sft", "id": "sft/99"}])
    assert main(args(work)) == 1
    assert f"{base}: row 1, field 'id': 'sft/99' is not a problem of dataset 'sft'" in capsys.readouterr().err
    # malformed trained_on.json
    write_json(base, [{"dataset": "sft", "id": "sft/0"}, {"dataset": "sft"}])
    assert main(args(work)) == 1
    assert f"{base}: row 1, field 'id': missing" in capsys.readouterr().err
    base.write_text("not json")
    assert main(args(work)) == 1
    assert f"{base}: not valid JSON" in capsys.readouterr().err
    base.unlink()
    assert main(args(work)) == 1
    assert f"{base}: file not found" in capsys.readouterr().err
    assert not (work / "out").exists()  # nothing written on an input error
