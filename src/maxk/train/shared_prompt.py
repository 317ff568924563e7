"""Per-token log-probs of GRPO groups with each group's shared prompt run once (policy update, old and
reference log-probs).

TRL scores a micro-batch as ``model(cat(prompt, completion))``, one full row per completion, so a
group's prompt is recomputed ``num_generations`` times. When the rows come in contiguous runs of ``n``
rows with identical prompt ids and prompt mask (the layout of a GRPO batch), the same numbers come
from two passes:

1. the prompt without its last column, once per group (``use_cache=True``): its keys and values;
2. that cache repeated to the group's rows (``repeat_interleave``, so the gradient of the shared
   prefix is the sum over the rows, as in the unshared computation), then per row the last prompt
   column and the completion on top of it, with the attention mask of the whole (prompt, completion)
   row and the position ids the unshared forward uses, through the model's own forward with TRL's
   fused LM head (``fused_lm_head=True``: same temperature, fp32 head, log-prob and entropy kernel).

The last prompt column goes into pass 2 so that its hidden state, which predicts the first
completion token, is computed per row exactly as TRL computes it, whatever the padding. Positions:
transformers 5.23's Qwen2 (and TRL, which passes none) uses ``arange(length)`` per row, not positions
from the mask; pass 2 continues that count (``P - 1 ... P + C - 1``), so every token sits at the same
position as in the unshared row. ``tests/train/test_train_shared_prompt.py`` compares log-probs,
entropies and parameter gradients with TRL's unshared computation.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["grouped_rows", "shared_prompt_logps", "tail_labels", "tail_position_ids"]


def grouped_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int, n: int) -> bool:
    """Whether the rows come in contiguous runs of ``n`` rows whose first ``prompt_len`` columns
    (prompt ids and prompt mask) are identical within each run."""
    rows = input_ids.shape[0]
    if n < 2 or rows == 0 or rows % n or prompt_len < 2:
        return False
    ids = input_ids[:, :prompt_len].reshape(rows // n, n, prompt_len)
    mask = attention_mask[:, :prompt_len].reshape(rows // n, n, prompt_len)
    return bool((ids == ids[:, :1]).all() and (mask == mask[:, :1]).all())


def tail_labels(tail_ids: torch.Tensor, tail_mask: torch.Tensor) -> torch.Tensor:
    """Labels of pass 2 (last prompt column + completion), as TRL labels the full row: -100 on
    masked tokens and on the prompt column, the token id elsewhere."""
    labels = tail_ids.masked_fill(tail_mask == 0, -100)
    labels[:, 0] = -100
    return labels


def tail_position_ids(prompt_len: int, completion_len: int, device: torch.device) -> torch.Tensor:
    """Position ids ``[1, completion_len + 1]`` of pass 2: the unshared row's positions
    (``arange(prompt_len + completion_len)``) of the last prompt column and the completion."""
    return torch.arange(prompt_len - 1, prompt_len + completion_len, device=device).unsqueeze(0)


def shared_prompt_logps(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, n: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs ``[rows, logits_to_keep]`` of the completions (the last ``logits_to_keep``
    columns) and the fused head's entropies (None when the head does not compute them), with each
    run of ``n`` rows' prompt computed once. ``model`` carries TRL's fused LM head; the rows must
    pass ``grouped_rows``. Runs under the caller's grad mode and autocast."""
    prompt_len = input_ids.shape[1] - logits_to_keep
    prefix = model(
        input_ids=input_ids[::n, : prompt_len - 1],
        attention_mask=attention_mask[::n, : prompt_len - 1],
        use_cache=True,
        logits_to_keep=1,  # the prefix's logits are never used: one position, not the whole prompt
    )
    cache = prefix.past_key_values
    cache.batch_repeat_interleave(n)
    tail_ids = input_ids[:, prompt_len - 1 :]
    out = model(
        input_ids=tail_ids,
        attention_mask=attention_mask,  # (prompt, completion): the cache's columns and the tail's
        past_key_values=cache,
        position_ids=tail_position_ids(prompt_len, logits_to_keep, input_ids.device),
        labels=tail_labels(tail_ids, attention_mask[:, prompt_len - 1 :]),
        fused_lm_head=True,
    )
    entropy = None if out.entropy is None else out.entropy[:, -logits_to_keep:]
    return out.log_probs[:, -logits_to_keep:], entropy
