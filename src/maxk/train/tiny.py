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


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    individual_digits: bool = False,
    cross_word_merges: bool = False,
):
    """Byte-level BPE trained on ``texts``; eos ``<|im_end|>``, pad ``<|pad|>``, left padding.

    ``individual_digits`` splits every digit into its own token before the byte-level step (as Qwen2's
    tokenizer does), so copying a number from the statement into the program is token-by-token copying
    rather than matching one of many multi-digit merges. ``cross_word_merges`` drops GPT-2's word-splitting
    regex (``ByteLevel(use_regex=False)``), so merges may span spaces and newlines (as in SuperBPE): the
    suite's stock phrases and code lines become single tokens, sequences get ~3x shorter, and a tiny model
    learns more per CPU second.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not cross_word_merges)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if individual_digits
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )


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
