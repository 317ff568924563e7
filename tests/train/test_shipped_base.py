"""The embedded default's shipped base model (``models/base``): what the config reads, the model the
config describes, trained on exactly the SFT split the config makes and on no evaluated or held-out
problem, proved from the files (as the pipeline's audit proves it for every run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maxk import paths as P
from maxk.analysis.contamination import audit, offenders, parse_trained_on, problem_keys, training_keys
from maxk.config import load_config
from maxk.data.build import build_dataset

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "base"
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "manifest.json",
    "provenance.json",
    P.TRAINED_ON,
    "data_digest.json",
    "README.md",
)


@pytest.fixture(scope="module")
def config() -> dict:
    return load_config(ROOT / "config" / "config.yaml")


@pytest.fixture(scope="module")
def sft(config) -> tuple[list[dict], dict]:
    return build_dataset(json.loads((SHIPPED / "data_digest.json").read_text()).popitem()[0], config)


def test_the_default_reads_the_shipped_base(config):
    base = config["base_model"]
    assert base["build"] is False
    assert (ROOT / base["path"]).resolve() == SHIPPED.resolve()
    assert [f for f in FILES if not (SHIPPED / f).is_file()] == []


def test_the_shipped_base_is_the_model_the_config_describes(config):
    shipped = json.loads((SHIPPED / "config.json").read_text())
    described = config["base_model"]["model"]
    assert {k: shipped[k] for k in described} == described
    built_with = json.loads((SHIPPED / "provenance.json").read_text())["config"]["base_model"]
    for section in ("model", "sft", "tokenizer"):
        assert built_with[section] == config["base_model"][section], section


def test_the_shipped_base_trained_on_exactly_the_sft_split_the_config_makes(sft):
    records, manifest = sft
    digest = json.loads((SHIPPED / "data_digest.json").read_text())
    ((dataset, want),) = digest.items()
    assert manifest["records_sha256"] == want["records_sha256"] and len(records) == want["count"]
    pairs = parse_trained_on(json.loads((SHIPPED / P.TRAINED_ON).read_text()), str(SHIPPED / P.TRAINED_ON))
    assert {d for d, _ in pairs} == {dataset}
    assert sorted(i for _, i in pairs) == sorted(r["id"] for r in records)


def test_the_shipped_base_never_trained_on_an_audited_problem(config, sft):
    records, _ = sft
    dataset = json.loads((SHIPPED / "data_digest.json").read_text()).popitem()[0]
    pairs = parse_trained_on(json.loads((SHIPPED / P.TRAINED_ON).read_text()), str(SHIPPED / P.TRAINED_ON))
    trained = training_keys(pairs, {dataset: problem_keys(dataset, records)}, str(SHIPPED / P.TRAINED_ON))
    audited = {
        name: list(problem_keys(name, build_dataset(name, config)[0]).values())
        for name in config["analysis"]["contamination"]["audit"]
    }
    rows = audit({P.BASE: trained}, audited)
    assert [r.audited for r in rows] == list(audited) and offenders(rows) == []


def test_the_shipped_base_loads_and_answers():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SHIPPED)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED)
    ids = tok("print(1)", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size) and torch.isfinite(logits).all()
