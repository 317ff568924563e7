"""Model references: a local directory, a hub id from a pre-filled cache, and one clear error otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maxk.cli import main
from maxk.hf_hub import ModelNotFoundError, fill_cache, is_repo_id, resolve_model

SHA_A = "a" * 40
SHA_B = "b" * 40


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty hub cache the client uses, offline (as on a compute node)."""
    from huggingface_hub import constants

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return root


def test_repo_id_spelling():
    assert is_repo_id("Qwen/Qwen2.5-Coder-7B-Instruct")
    for ref in ("results/models/base/x", "/abs/path", "./rel", "../up", "name", "a/../b"):
        assert not is_repo_id(ref), ref


def test_a_local_directory_is_used_as_it_is(tmp_path, cache):
    (tmp_path / "m").mkdir()
    assert resolve_model(str(tmp_path / "m")) == str(tmp_path / "m")


def test_a_hub_id_resolves_from_a_prefilled_cache_at_main_or_a_pinned_revision(cache):
    fill_cache(cache, "Org/Model", {"config.json": "{}"}, commit=SHA_A)
    fill_cache(cache, "Org/Model", {"config.json": '{"v": 2}'}, commit=SHA_B, ref=None)
    main_dir = Path(resolve_model("Org/Model"))
    assert main_dir.name == SHA_A and (main_dir / "config.json").read_text() == "{}"
    pinned = Path(resolve_model("Org/Model", SHA_B))
    assert pinned.name == SHA_B and json.loads((pinned / "config.json").read_text()) == {"v": 2}


def test_a_missing_model_fails_with_one_message_naming_it(cache):
    with pytest.raises(ModelNotFoundError, match=r"'Org/Absent' at revision 'main'.*HF_HUB_OFFLINE"):
        resolve_model("Org/Absent")
    with pytest.raises(ModelNotFoundError, match=r"not a hub id"):
        resolve_model("no/such/dir")
    fill_cache(cache, "Org/Model", {"config.json": "{}"}, commit=SHA_A)
    with pytest.raises(ModelNotFoundError, match=SHA_B):
        resolve_model("Org/Model", SHA_B)  # the cache holds another revision only


def test_fill_cache_rejects_a_revision_that_is_not_a_commit(tmp_path):
    with pytest.raises(ValueError, match="40 hex"):
        fill_cache(tmp_path, "Org/Model", {}, commit="main")


def test_train_cli_takes_a_hub_id_from_the_cache(cache, tmp_path, monkeypatch):
    """The paper config names the model by hub id: the train job must load it (it used to demand a path)."""
    import maxk.train.run as run_module

    snapshot = fill_cache(cache, "Qwen/Qwen2.5-Coder-7B-Instruct", {"config.json": "{}"}, commit=SHA_A)
    data = tmp_path / "train.jsonl.gz"
    data.write_bytes(b"")
    seen = {}
    monkeypatch.setattr(run_module, "train_run", lambda **kw: seen.update(kw) or {"steps": 0})
    cfg = json.dumps({"seed": 1, "train": {}, "run": {"method": "grpo"}})
    args = ["train", "--run", "r", "--config-json", cfg, "--model", "Qwen/Qwen2.5-Coder-7B-Instruct",
            "--revision", SHA_A, "--data", str(data), "--out", str(tmp_path / "o"),
            "--metrics", str(tmp_path / "m.csv")]  # fmt: skip
    assert main(args) == 0
    assert Path(seen["model"]) == snapshot


def test_train_cli_names_a_missing_model(cache, tmp_path, capsys):
    data = tmp_path / "train.jsonl.gz"
    data.write_bytes(b"")
    cfg = json.dumps({"seed": 1, "train": {}, "run": {"method": "grpo"}})
    args = ["train", "--run", "r", "--config-json", cfg, "--model", "Org/Absent", "--data", str(data),
            "--out", str(tmp_path / "o"), "--metrics", str(tmp_path / "m.csv")]  # fmt: skip
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "'Org/Absent'" in err and "Traceback" not in err


def test_rules_pass_the_pinned_base_revision_to_every_job_that_loads_it():
    from maxk.paths import model_revision_arg

    pinned = {"base_model": {"build": False, "path": "Org/Model", "revision": SHA_A}}
    assert model_revision_arg(pinned, "base") == f" --revision {SHA_A}"
    assert model_revision_arg(pinned, "grpo_continuous") == ""  # a trained run is a local directory
    assert model_revision_arg({"base_model": {"build": False, "path": "Org/Model"}}, "base") == ""
    assert model_revision_arg({"base_model": {"build": True, "path": "x", "revision": SHA_A}}, "base") == ""
