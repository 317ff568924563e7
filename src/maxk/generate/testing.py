"""A tiny random Qwen2 model and byte-level BPE tokenizer for tests and benchmarks (seconds, offline).

Used only when the real embedded base model (``results/models/base``, built by the training stage)
is not available. The tokenizer has a ChatML template and ``<|im_end|>`` as EOS, like Qwen2.5-Instruct.
"""

from __future__ import annotations

import os
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]

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
    """Save a random tiny Qwen2ForCausalLM + tokenizer into ``directory`` and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 20, trainer=trainer)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )
    hf_tok.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(hf_tok),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id
    )
    model.save_pretrained(out)
    return out
