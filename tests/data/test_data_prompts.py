"""Prompt builder and completion extractor on messy, real-looking outputs."""

import ast

import pytest

from maxk.data import load
from maxk.data.prompts import build_messages, build_prompt
from maxk.generate.extract import extract_program

STDIO = {
    "id": "s/1",
    "source": "s",
    "prompt": "Read x. Print x + 1.",
    "difficulty": 1,
    "tests": {"format": "stdio", "cases": [{"input": "1\n", "output": "2\n"}]},
}
CALL = {
    "id": "c/1",
    "source": "c",
    "prompt": "Write add(a, b).",
    "difficulty": 1,
    "tests": {"format": "call", "entry_point": "add", "setup": "", "cases": ["assert add(1, 2) == 3"]},
}


class ChatTok:
    chat_template = "fake"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt is True and tokenize is False
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>"


class PlainTok:
    chat_template = None


def test_messages_and_chat_template():
    cfg = {"system": "SYS", "instructions": {"call": "Define `{entry_point}`."}}
    msgs = build_messages(CALL, cfg)
    assert msgs[0] == {"role": "system", "content": "SYS"}
    assert msgs[1]["content"].endswith("Define `add`.") and "Write add(a, b)." in msgs[1]["content"]
    text = build_prompt(CALL, ChatTok(), config=cfg)
    assert text.startswith("<system>SYS</system><user>") and text.endswith("<assistant>")


def test_plain_template_without_chat_template():
    cfg = {"system": "S", "plain_template": "{system}|{prompt}|{instruction}|"}
    text = build_prompt(STDIO, PlainTok(), config=cfg)
    assert text.startswith("S|Read x. Print x + 1.|") and "standard input" in text
    assert build_prompt(STDIO, None, config=cfg) == text
    no_sys = build_messages(STDIO, {"system": ""})
    assert [m["role"] for m in no_sys] == ["user"]


def test_fenced_block_with_prose_and_examples():
    completion = (
        "Sure! Here's the solution:\n\n```python\nx = int(input())\nprint(x + 1)\n```\n\n"
        "Example:\n```\n1\n```\nOutput:\n```text\n2\n```\nHope this helps."
    )
    assert extract_program(completion, STDIO) == "x = int(input())\nprint(x + 1)\n"


def test_unterminated_fence_and_think_block():
    completion = "<think>maybe ```python\nprint(0)\n```</think>\n```py\nx = int(input())\nprint(x + 1"
    assert extract_program(completion, STDIO) == "x = int(input())\nprint(x + 1\n"


def test_bare_code_with_prose_around():
    completion = "The answer is below.\nx = int(input())\nprint(x + 1)\nThis reads x and prints x+1."
    assert extract_program(completion, STDIO) == "x = int(input())\nprint(x + 1)\n"


def test_call_prefers_block_defining_entry_point():
    completion = (
        "```python\nprint(add(1, 2))\n```\nThe function:\n```python\ndef add(a, b):\n    return a + b\n```\n"
        "```python\nassert add(1, 2) == 3\n```"
    )
    assert extract_program(completion, CALL) == "def add(a, b):\n    return a + b\n"


def test_humaneval_body_only_and_missing_imports():
    he = load("humaneval")
    p0 = he[0]  # has_close_elements(numbers: List[float], ...), stub imports List
    body = (
        "    for i, a in enumerate(numbers):\n        for b in numbers[i + 1:]:\n"
        "            if abs(a - b) < threshold:\n                return True\n    return False\n\nThat's it."
    )
    prog = extract_program(body, p0)
    assert prog.startswith(p0["prompt"]) and "That's it" not in prog
    ast.parse(prog)
    func_only = (
        "```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return False\n```"
    )
    prog = extract_program(func_only, p0)
    assert prog.startswith("from typing import List") and "def has_close_elements" in prog
    p32 = he[32]  # find_zero needs helper poly from the stub
    prog = extract_program("```python\ndef find_zero(xs):\n    return poly(xs, 0)\n```", p32)
    assert "def poly(" in prog and "import math" in prog
    ast.parse(prog)


@pytest.mark.parametrize("completion", ["", "I cannot solve this.", "```\n```"])
def test_garbage_gives_something_harmless(completion):
    out = extract_program(completion, STDIO)
    assert isinstance(out, str)
