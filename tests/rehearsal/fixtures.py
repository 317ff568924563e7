"""Rows in the exact format of CURE's Gen-Verse sets (a JSON array in ``{split}/{Name}.json``), for the
rehearsal: the full field set and types of the real rows (../shared/notes/paper-data.md, section 1):
``dataset, question, test_input [str], test_output [str], example_input [str], example_output [str],
solutions [str], task_id (int), test_time_limit (int), exe_method ("stdin")``, plus ``difficulty``
("easy" | "medium" | "hard") in the LiveCodeBench set. The problems are small stdin/stdout tasks with a
reference solution, so every downstream stage has real tests to run."""

from __future__ import annotations

import random

#: (statement, reference program, input generator, answer) templates
TASKS = (
    ("Given two integers a and b on one line, print their sum.",
     "a, b = map(int, input().split())\nprint(a + b)\n",
     lambda r: (r.randint(-99, 99), r.randint(-99, 99)), lambda a, b: a + b),
    ("Given two integers a and b on one line, print the larger one.",
     "a, b = map(int, input().split())\nprint(max(a, b))\n",
     lambda r: (r.randint(-99, 99), r.randint(-99, 99)), max),
    ("Given two integers a and b on one line, print a * b modulo 1000000007.",
     "a, b = map(int, input().split())\nprint(a * b % 1000000007)\n",
     lambda r: (r.randint(0, 10**9), r.randint(0, 10**9)), lambda a, b: a * b % 1000000007),
)  # fmt: skip

#: CURE's per-set time limit (seconds): 1 for CodeContests-style sets, 8 for LiveCodeBench
TIME_LIMITS = {"LiveCodeBench": 8}


def cure_rows(dataset: str, count: int, seed: int = 0) -> list[dict]:
    """``count`` rows of CURE's ``dataset`` (its file name without ``.json``)."""
    rng = random.Random(f"{dataset}/{seed}")
    rows = []
    for i in range(count):
        statement, solution, draw, answer = TASKS[i % len(TASKS)]
        cases = [draw(rng) for _ in range(4)]
        inputs = [f"{a} {b}\n" for a, b in cases]
        outputs = [f"{answer(a, b)}\n" for a, b in cases]
        row = {
            "dataset": dataset,
            "question": f"{statement}\n\n-----Input-----\nTwo integers a and b.\n\n-----Output-----\n"
            f"One integer.\n\n-----Example-----\nInput\n{inputs[0]}\nOutput\n{outputs[0]}",
            "test_input": inputs,
            "test_output": outputs,
            "example_input": inputs[:1],
            "example_output": outputs[:1],
            "solutions": [solution],
            "task_id": i,
            "test_time_limit": TIME_LIMITS.get(dataset, 1),
            "exe_method": "stdin",
        }
        if dataset == "LiveCodeBench":
            row["difficulty"] = ("easy", "medium", "hard")[i % 3]
        rows.append(row)
    return rows
