"""Leakage, not speed: how many evaluated problems of the suite-v2 data had a twin in training.

    python benchmarks/suite_v2_twins.py RESULTS   # a results tree made with suite-v2 data (before 043d8f7)

Until suite-v3 the suite rejected only identical reference programs, so the same task could sit in a
training split and an evaluated one: in the other format, looped over test cases, or with a step that
changes nothing. This regenerates the suite-v2 pool with its own generator (``src/maxk/data/suite.py``
at ``2b41751``, read from git), keys each problem by today's task key (``maxk.data.suite.behaviour``, the
spec's results on fixed probe inputs; the generator's random draws are unchanged), checks that the pool
is the one the tree's data files were split from, and prints how many problems of each evaluated and
held-out set share their task with an SFT problem, and with each run's RL prompts
(``results/seed*/models/*/trained_on.json``).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

OLD = "2b41751"  # the last commit of the suite-v2 generator
EVALUATED = ("suite_test", "suite_call", "suite_heldout")
SPEC_FIELDS = ("family", "shape", "multi", "combine", "reduce", "list_ops", "ops", "branch", "verdict")


def old_generator():
    """The suite-v2 generator module, with each problem's spec kept as ``_spec``."""
    code = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD}:src/maxk/data/suite.py"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "suite_v2.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("suite_v2", path)
    old = importlib.util.module_from_spec(spec)
    sys.modules["suite_v2"] = old
    spec.loader.exec_module(old)
    sample, make = old._sample_spec, old.make_problem
    last: dict = {}

    def keep(rng, family, level):
        last["spec"] = sample(rng, family, level)
        return last["spec"]

    def make_problem(rng, family, level, index, num_tests):
        problem = make(rng, family, level, index, num_tests)
        if problem is not None:
            problem["_spec"] = last["spec"]
        return problem

    old._sample_spec, old.make_problem = keep, make_problem
    return old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a results tree made with suite-v2 data")
    a = ap.parse_args()
    from maxk.config import load_config
    from maxk.data.suite import Spec, behaviour

    options = load_config(ROOT / "config/config.yaml")["data"]["pools"]["suite"]["options"]
    pool = old_generator().generate_suite(
        options["family"], options["n"], options["seed"],
        level_weights=options["level_weights"], num_tests=options["num_tests"],
    )  # fmt: skip
    task = {p["id"]: behaviour(Spec(**{f: getattr(p["_spec"], f) for f in SPEC_FIELDS})) for p in pool}
    reference = {p["id"]: p["reference"] for p in pool}
    sets = {}
    for name in ("suite_sft", *EVALUATED):
        with gzip.open(a.results / "data" / f"{name}.jsonl.gz", "rt") as f:
            rows = [json.loads(line) for line in f]
        if any(reference.get(r["id"]) != r["reference"] for r in rows):
            raise SystemExit(f"{a.results}/data/{name}.jsonl.gz: not the suite-v2 pool's problems")
        sets[name] = [r["id"] for r in rows]
    sft = {task[i] for i in sets["suite_sft"]}
    print(f"suite-v2 pool: {len(pool)} problems, {len(set(task.values()))} distinct tasks")
    for name in EVALUATED:
        twins = sum(task[i] in sft for i in sets[name])
        print(f"{name}: {twins} of {len(sets[name])} compute what an SFT problem computes")
    for path in sorted(a.results.glob("seed*/models/*/trained_on.json")):
        trained = {task[r["id"]] for r in json.loads(path.read_text()) if r.get("dataset") != "suite_sft"}
        if trained:
            counts = ", ".join(f"{n} {sum(task[i] in trained for i in sets[n])}" for n in EVALUATED)
            print(f"{path.parts[-4]} {path.parts[-2]}: its RL prompts hold the task of {counts}")


if __name__ == "__main__":
    main()
