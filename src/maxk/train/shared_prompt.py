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
   fused LM head (``fused_lm_head=True``: same temperature, fp32 head, log-prob and entropy kernel) or
   ``head_logps`` (the same numbers in torch; ``HEAD``).

Both passes attend with the C attention (``maxk.train.native_attention``) where ``$MAXK_TRAIN_KERNEL``
picks it: torch's SDPA arithmetic to float rounding, 1.38x on the update with ``head_logps`` beside it.

Pass 2 runs in length runs: the rows sorted by completion length (up to their last unmasked token)
and cut into ``runs`` runs of equal count, each run as wide as its longest completion, so the padding
past a row's end is computed only up to its run's longest, not the micro-batch's (causal attention:
columns past a row's end never reach its tokens). Past a row's end the log-probs and entropies are 0;
TRL masks those positions out of every loss and metric.

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
import torch.nn.functional as F

from maxk.train.native_attention import native_attention

__all__ = [
    "grouped_rows",
    "head_logps",
    "length_runs",
    "shared_prompt_logps",
    "tail_labels",
    "tail_position_ids",
]

#: Pass 2's length runs per micro-batch (benchmarks/bench_update.py measures 1, 2, 4, 8).
RUNS = 4
#: Pass 2's LM head: ``"fused"`` (TRL's chunked kernel, which never holds ``[rows, width, vocab]``),
#: ``"plain"`` (``head_logps``: the run's logits at once and torch's log-softmax), or ``"auto"``: plain where
#: the update's attention is the C one (``$MAXK_TRAIN_KERNEL``), else fused. ``benchmarks/bench_update.py``
#: measures both: plain 1.15x on the update beside the C attention. Beside torch's, plain alone was 1.12x and
#: gave no end-to-end gain above the machine's noise on three seeds (docs/experiments.md, "Three seeds by
#: default?"), so torch's attention keeps TRL's head and its numbers.
HEAD = "auto"


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


def length_runs(completion_mask: torch.Tensor, runs: int) -> list[tuple[torch.Tensor, int]]:
    """The rows ``(indices, width)`` of pass 2's runs: rows sorted by length (their last unmasked
    column + 1; stable, so equal lengths keep their order), cut into ``runs`` runs of equal count (the
    first ones one row longer where it does not divide), each ``width`` its longest row's length."""
    cols = torch.arange(1, completion_mask.shape[1] + 1, device=completion_mask.device)
    lengths = (cols * (completion_mask != 0)).amax(1) if completion_mask.shape[1] else completion_mask.sum(1)
    order = torch.sort(lengths, stable=True).indices
    out = []
    for idx in torch.tensor_split(order, max(1, min(runs, len(order)))):
        if len(idx):
            out.append((idx, int(lengths[idx].max())))
    return out


def head_logps(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs of ``labels`` ``[rows, T]`` under ``softmax((hidden @ weight.T + bias) /
    temperature)`` in float32, and the entropies of those distributions (with their gradient, as TRL's;
    a loss that does not read them never runs it); both 0 where the label is -100. The same numbers as TRL's
    fused head (its ``ChunkedLogProbFunction``: an online log-sum-exp over vocabulary chunks), to
    float32 rounding, in one product and torch's log-softmax: on a CPU with a small vocabulary the
    chunked kernel's passes cost more than the ``[rows, T, vocab]`` logits they save."""
    logits = F.linear(hidden.float(), weight.float(), None if bias is None else bias.float())
    logp = (logits / temperature if temperature != 1.0 else logits).log_softmax(-1)
    valid = labels != -100
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1).masked_fill(~valid, 0.0)
    entropy = -(logp.exp() * logp).sum(-1).masked_fill(~valid, 0.0)
    return picked, entropy


def shared_prompt_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    n: int,
    runs: int | None = None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs ``[rows, logits_to_keep]`` of the completions (the last ``logits_to_keep``
    columns) at ``temperature`` and their entropies (None when TRL's fused head computes none), with
    each run of ``n`` rows' prompt computed once and the completions in ``runs`` (default ``RUNS``)
    length runs (0 past each row's end). ``model`` carries TRL's fused LM head (``HEAD``: used, or
    replaced by ``head_logps`` on the backbone's output, at the temperature TRL patched it with); its
    layers attend with the C attention where ``$MAXK_TRAIN_KERNEL`` picks it (``HEAD`` ``"auto"``: then
    ``head_logps``); the rows must pass ``grouped_rows``. Runs under the caller's grad mode and autocast."""
    with native_attention(model) as kernel:
        head = HEAD if HEAD != "auto" else "plain" if kernel == "native" else "fused"
        return _shared_prompt_logps(
            model, input_ids, attention_mask, logits_to_keep, n, runs, temperature, head
        )


def _shared_prompt_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    n: int,
    runs: int | None,
    temperature: float,
    head: str,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    from transformers.cache_utils import DynamicCache

    prompt_len = input_ids.shape[1] - logits_to_keep
    prefix = model(
        input_ids=input_ids[::n, : prompt_len - 1],
        attention_mask=attention_mask[::n, : prompt_len - 1],
        use_cache=True,
        logits_to_keep=1,  # the prefix's logits are never used: one position, not the whole prompt
    )
    layers = [(layer.keys, layer.values) for layer in prefix.past_key_values.layers]
    logps, entropies, rows = [], [], []
    for idx, width in length_runs(attention_mask[:, prompt_len:], RUNS if runs is None else runs):
        cache = DynamicCache(config=model.config)
        groups = idx // n  # each row's group: its prompt's cached keys and values
        for li, (keys, values) in enumerate(layers):
            cache.update(keys.index_select(0, groups), values.index_select(0, groups), li)
        tail_ids = input_ids[idx, prompt_len - 1 : prompt_len + width]
        mask = attention_mask[idx, : prompt_len + width]  # (prompt, completion): the cache's and the tail's
        labels = tail_labels(tail_ids, mask[:, prompt_len - 1 :])
        positions = tail_position_ids(prompt_len, width, input_ids.device)
        pad = (0, logits_to_keep - width)
        if head == "plain":
            hidden = model.model(
                input_ids=tail_ids, attention_mask=mask, past_key_values=cache, position_ids=positions,
                use_cache=False,
            ).last_hidden_state  # fmt: skip
            lm_head = model.get_output_embeddings()
            lp, ent = head_logps(hidden[:, :-1], lm_head.weight, lm_head.bias, labels[:, 1:], temperature)
        else:
            out = model(
                input_ids=tail_ids, attention_mask=mask, past_key_values=cache, position_ids=positions,
                labels=labels, fused_lm_head=True,
            )  # fmt: skip
            lp, ent = out.log_probs, out.entropy
        logps.append(F.pad(_last(lp, width), pad))
        entropies.append(None if ent is None else F.pad(_last(ent, width), pad))
        rows.append(idx)
    back = torch.argsort(torch.cat(rows))  # the rows' original order
    logp = torch.cat(logps).index_select(0, back)
    entropy = None if entropies[0] is None else torch.cat(entropies).index_select(0, back)
    return logp, entropy


def _last(x: torch.Tensor, width: int) -> torch.Tensor:
    """The last ``width`` columns of ``x`` (none for 0, where ``x[:, -0:]`` would be all)."""
    return x[:, x.shape[1] - width :]
