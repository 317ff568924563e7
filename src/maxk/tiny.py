"""Build a small, real causal LM from scratch: byte-level BPE tokenizer (with a ChatML template) and a
random Qwen2 model, both saved in Hugging Face format so ``AutoTokenizer``/``AutoModelForCausalLM``
load them like any hub model. Used by ``maxk base`` (then fine-tuned) and by the tests (tiny sizes).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: ChatML, as Qwen2.5-Instruct: the pipeline builds prompts with ``apply_chat_template``.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")


def train_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int = 2):
    """Byte-level BPE trained on ``texts``, returned as the ``Qwen2Tokenizer`` that loads it back.

    transformers (v5) loads the tokenizer of every ``qwen2`` model directory as ``Qwen2Tokenizer``, which
    rebuilds its pipeline from vocab + merges with Qwen2's fixed NFC normalizer and pre-tokenizer (a
    word-splitting regex that also isolates every digit, then byte-level), whatever ``tokenizer.json``
    says. So the BPE is trained under exactly that pipeline and returned as a ``Qwen2Tokenizer``: what SFT
    trains on is token for token what generation and GRPO later load with ``AutoTokenizer``. (A tokenizer
    trained with another pre-tokenizer, e.g. merges across words or multi-digit tokens, would silently be
    re-split on reload.) Digits one per token also makes copying a number from a statement into a program
    a token copy. eos ``<|im_end|>``, pad ``<|pad|>``, left padding, ChatML template.
    """
    import json

    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    pipeline = Qwen2Tokenizer().backend_tokenizer  # Qwen2's normalizer and pre-tokenizer, empty vocab
    tok = Tokenizer(models.BPE())
    tok.normalizer = pipeline.normalizer
    tok.pre_tokenizer = pipeline.pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    merges = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
        for m in json.loads(tok.to_str())["model"]["merges"]
    ]
    out = Qwen2Tokenizer(
        vocab=tok.get_vocab(),
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )
    out.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True
    )
    return out


def init_model(tokenizer: Any, *, seed: int, **sizes: int):
    """A random ``Qwen2ForCausalLM`` sized by ``sizes`` (hidden_size, num_hidden_layers, ...)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **sizes,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    return model


def save(model: Any, tokenizer: Any, directory: str | Path) -> Path:
    """Save both in HF format (safetensors) into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny(directory: str | Path, texts: Iterable[str], *, seed: int = 0, vocab_size: int = 400) -> Path:
    """Tokenizer + a ~0.1M-parameter Qwen2 saved to ``directory`` (tests and smoke runs)."""
    tok = train_tokenizer(texts, vocab_size=vocab_size)
    model = init_model(
        tok,
        seed=seed,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
    )
    return save(model, tok, directory)
