"""Benchmark: peak memory of ``maxk data build`` against the size of a CURE-format JSON file.

A CURE set is one JSON array, read whole (``maxk.data.hub``); CURE's LiveCodeBench file is 4.1 GB,
so the paper config's ``resources.data_build.mem_mb`` comes from this ratio. Two shapes of rows
bound it: few long test strings (the JSON text and its strings, about 2x) and many short ones
(Python's per-object cost, more). Each build runs in its own process; the figure is its peak
resident memory over the file's size.

    PYTHONPATH=src python benchmarks/bench_data_memory.py             # ~300 MB and ~100 MB files
    PYTHONPATH=src python benchmarks/bench_data_memory.py --scale 0.2 # quick
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "rehearsal"))

from fixtures import cure_rows  # noqa: E402

#: (name, tests per row, integers per test input): the two shapes
SHAPES = (("long strings", 50, 16000), ("short strings", 20000, 10))

PEAK = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)\n"
)


def write_set(path: Path, rows: int, tests: int, ints: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    out = cure_rows("LiveCodeBench", rows)
    for row in out:
        inputs = [" ".join(str(rng.randint(0, 10**9)) for _ in range(ints)) + "\n" for _ in range(tests)]
        row["test_input"], row["test_output"] = inputs, [s[:20] for s in inputs]
    path.write_text(json.dumps(out))


def peak_mb(path: Path, out: Path) -> float:
    pool = {"source": "cure", "options": {"paths": [str(path)], "name": "lcb"}, "max_difficulty": None,
            "max_prompt_tokens": None, "max_tests": 8, "split": None, "expected": {}}  # fmt: skip
    config = {"data": {"pools": {"lcb": pool}, "tokenizer": None}, "datasets": {"lcb": {"pool": "lcb"}},
              "prompt": {"instructions": {"call": "{entry_point}", "stdio": "stdin"}, "system": "",
                         "plain_template": "{prompt}", "use_chat_template": False}}  # fmt: skip
    cmd = [sys.executable, "-m", "maxk", "data", "build", "--name", "lcb", "--config-json",
           json.dumps(config), "--output", str(out)]  # fmt: skip
    res = subprocess.run([sys.executable, "-c", PEAK, *cmd], capture_output=True, text=True, check=True)
    return int(res.stdout.split()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="rows x this (default 1: 40 rows)")
    args = ap.parse_args()
    rows = max(1, round(40 * args.scale))
    with tempfile.TemporaryDirectory() as tmp:
        for name, tests, ints in SHAPES:
            path = Path(tmp) / "set.json"
            write_set(path, rows, tests, ints)
            size = path.stat().st_size / 2**20
            peak = peak_mb(path, Path(tmp) / "out.jsonl.gz")
            print(f"{name:>13}: file {size:7.1f} MB, peak {peak:7.1f} MB, ratio {peak / size:4.2f}x")


if __name__ == "__main__":
    main()
