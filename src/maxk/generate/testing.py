"""A tiny random Qwen2 model and byte-level BPE tokenizer for tests and benchmarks (seconds, offline).

Used only when the real embedded base model (``results/seed{seed}/models/base``, built by the training stage)
is not available. The tokenizer has a ChatML template and ``<|im_end|>`` as EOS, like Qwen2.5-Instruct.
"""

from __future__ import annotations

import os
from pathlib import Path

_CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "def solve():\n    n = int(input())\n    print(n * 2)\n",
    "for i in range(10):\n    print(i)\n",
    "import sys\ndata = sys.stdin.read().split()\n",
    "Write a function that returns the sum of a list of integers.\n",
    "```python\nx = [1, 2, 3]\nprint(sum(x))\n```\n",
    "while True:\n    break\nif x > 0:\n    y = -x\nelse:\n    y = x\n",
    "class Solution:\n    def run(self, s: str) -> int:\n        return len(s)\n",
]


def build_tiny_model(
    directory: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 400,
    seed: int = 0,
) -> Path:
    """Save a random tiny Qwen2ForCausalLM + tokenizer into ``directory`` and return it.

    The same tokenizer and model builders as the embedded base model (``maxk.tiny``), at test size.
    """
    from maxk.tiny import init_model, save, train_tokenizer

    tok = train_tokenizer(_CORPUS * 20, vocab_size=vocab_size)
    model = init_model(
        tok,
        seed=seed,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    return save(model, tok, directory)
