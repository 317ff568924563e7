"""The pipeline's two seed derivations (``maxk.seeds``), pinned: a change to either changes every
result made with it, so each is fixed here by a value computed once, and each name is defined once."""

from __future__ import annotations

import re
from pathlib import Path

from maxk.seeds import derive_seed, problem_seed

SRC = Path(__file__).resolve().parents[1] / "src" / "maxk"


def test_derivations_are_pinned():
    assert derive_seed(1234, "claims", "instrument") == 1396581679333905419
    assert problem_seed(1234, "base", "suite_test", "suite/stdio-00006") == 4792623424910032320
    assert all(0 <= s < 2**63 for s in (derive_seed(-5), problem_seed(0, "", "", "")))


def test_each_seed_function_and_score_name_is_defined_once():
    """One ``derive_seed`` (and one ``problem_seed``) in the package; no module defines its own."""
    defined = {}
    for path in SRC.rglob("*.py"):
        for name in re.findall(r"^def (derive_seed|problem_seed|is_solved)\(", path.read_text(), flags=re.M):
            defined.setdefault(name, []).append(path.relative_to(SRC).as_posix())
    assert defined == {
        "derive_seed": ["seeds.py"],
        "problem_seed": ["seeds.py"],
        "is_solved": ["sandbox/judge.py"],
    }
