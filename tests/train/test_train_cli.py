"""`maxk train` / `maxk base` refuse a bad job before importing torch: missing config keys, missing files."""

from __future__ import annotations

import json

import pytest

from maxk.cli import main


@pytest.mark.parametrize(
    ("argv", "config", "message"),
    [
        (["train", "--run", "r", "--out", "o", "--metrics", "m.csv"], {"seed": 1, "train": {}}, "'run'"),
        (["base", "--out", "o"], {"base_model": {}}, "'seed'"),
    ],
)
def test_missing_config_key_is_named(tmp_path, capsys, argv, config, message):
    data = tmp_path / "d.jsonl.gz"
    data.write_bytes(b"")
    paths = (
        ["--model", str(tmp_path), "--data", str(data)]
        if argv[0] == "train"
        else ["--train-data", str(data), "--test-data", str(data)]
    )
    rc = main([*argv, *paths, "--config-json", json.dumps(config)])
    err = capsys.readouterr().err
    assert rc != 0 and "--config-json lacks the key" in err and message in err


def test_missing_input_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl.gz"
    cfg = {"seed": 1, "base_model": {}}
    inputs = ["--train-data", str(missing), "--test-data", str(missing)]
    rc = main(["base", "--out", str(tmp_path / "o"), *inputs, "--config-json", json.dumps(cfg)])
    err = capsys.readouterr().err
    assert rc != 0 and f"{missing}: no such file or directory" in err
    assert not (tmp_path / "o").exists()
