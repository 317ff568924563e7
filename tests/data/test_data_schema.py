"""Problem schema: validation errors name file, row id and field; reading rejects bad rows."""

import gzip
import json

import pytest

from maxk.data import DataError, read_problems
from maxk.data.schema import SchemaError, validate_dataset, validate_problem

GOOD = {
    "id": "x/1",
    "source": "x",
    "prompt": "Print 1.",
    "difficulty": 1,
    "tests": {"format": "stdio", "cases": [{"input": "", "output": "1\n"}]},
}


def test_good_records():
    validate_problem(GOOD)
    call = {
        **GOOD,
        "tests": {"format": "call", "entry_point": "f", "setup": "", "cases": ["assert f() == 1"]},
        "reference": "def f():\n    return 1\n",
        "time_limit": 2.5,
        "meta": {"a": 1},
    }
    validate_problem(call)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda r: r.pop("prompt"), "prompt"),
        (lambda r: r.update(difficulty="hard"), "difficulty"),
        (lambda r: r.update(tests={"format": "junit", "cases": []}), "tests.format"),
        (
            lambda r: r.update(tests={"format": "stdio", "cases": [{"input": 1, "output": ""}]}),
            "tests.cases[0].input",
        ),
        (lambda r: r.update(tests={"format": "stdio", "cases": []}), "tests.cases"),
        (
            lambda r: r.update(
                tests={"format": "call", "entry_point": "1f", "setup": "", "cases": ["assert 1"]}
            ),
            "tests.entry_point",
        ),
        (lambda r: r.update(time_limit=-1), "time_limit"),
        (lambda r: r.update(extra=1), "extra"),
    ],
)
def test_bad_records_name_file_row_field(mutate, field):
    rec = json.loads(json.dumps(GOOD))
    mutate(rec)
    with pytest.raises(SchemaError) as err:
        validate_problem(rec, file="f.jsonl", row=3)
    msg = str(err.value)
    assert "file f.jsonl" in msg and f"field '{field}'" in msg
    assert "row 'x/1'" in msg


def test_duplicate_ids():
    with pytest.raises(SchemaError, match="duplicate id"):
        validate_dataset([GOOD, GOOD], file="d")


def test_read_problems_rejects_bad_rows(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    bad = {**GOOD, "id": "x/2"}
    del bad["tests"]
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"d.jsonl.gz.*row 'x/2'.*field 'tests'"):
        read_problems(path)
    path.write_bytes(gzip.compress(b'{"id": \n'))
    with pytest.raises(DataError, match=r"d.jsonl.gz:1"):
        read_problems(path)
