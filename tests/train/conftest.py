"""Fixtures for the training tests (helpers live in ``train_helpers.py``)."""

from __future__ import annotations

import pytest
from train_helpers import SYNTH_TEXT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from maxk.tiny import build_tiny

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", SYNTH_TEXT, seed=0))


def pytest_collection_modifyitems(config, items):
    """transformers 5.23 warns that TRL's own `gradient_checkpointing` default is deprecated: harmless."""
    here = str(__file__).rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.filterwarnings("ignore::FutureWarning"))
