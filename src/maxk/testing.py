"""Test utilities: a tiny, real causal LM (random Qwen2 + byte-level BPE tokenizer) built in seconds.

Used by tests that need TRL or transformers to run end to end on a CPU without downloading anything.
"""

from __future__ import annotations

import os
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


def build_tiny_model(path: str | os.PathLike[str], *, seed: int = 0, corpus: list[str] | None = None) -> Path:
    """Write a random 2-layer Qwen2 and its tokenizer to ``path`` (loadable with ``from_pretrained``)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    corpus = (
        corpus
        or [
            "def add(a, b):\n    return a + b\n",
            "n = int(input())\nprint(n * 2)\n",
            "for i in range(10):\n    print(i)\n",
        ]
        * 20
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        bos_token=None,
        padding_side="left",
        chat_template=CHATML_TEMPLATE,
    )
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(path)
    return path
