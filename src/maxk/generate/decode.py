"""A tight batched decode loop for Qwen2-family models: many samples of several prompts at once.

``model.generate`` spends most of a step on bookkeeping when the model is tiny (the embedded one has
0.5M parameters): cache objects, logits processors, stopping criteria, and attention over the whole
static cache of every sequence. This loop does only the arithmetic of one step, on the model's own
weights (q/k/v and gate/up projections fused into one matrix each):

- **shared prefixes**: each prompt is prefilled once, all of a batch's prompts in one forward of the
  model's own (padded on the right, so that causal attention keeps each prompt's keys and values its
  own), and its samples attend to that one copy. Queries of all samples of a prompt meet the prefix
  in one matrix product; only the generated tokens have per-sample keys and values, in a
  preallocated cache;
- **several prompts per batch, one product per layer**: the prompts' caches are stacked (padded to
  the longest, the padding masked out of the softmax), and each running row's queries go to its
  prompt's slot of a ``[prompts, rows per prompt]`` grid, so one batched matrix product per layer
  serves every sample of every prompt (a prompt's samples depend on its batch-mates only through
  float rounding of the padded sums);
- **finished rows leave the batch**: once a quarter of the running rows have drawn a stop token, the
  batch is compacted, so late steps cost only what is still running;
- **sampling as in ``maxk.generate.hf``**: temperature and top-p, inverse-CDF draws from one seeded
  ``torch.Generator`` per prompt (a prompt's samples do not depend on what else is in the batch), and
  the exact entropy of the sampled distribution and the drawn token's log-prob at every step.

``tests/generate/test_generate_decode.py`` checks the logits against the model's own forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from maxk.generate.config import DEFAULT as _DEFAULT  # generate.temperature, generate.top_p

__all__ = ["DecodeResult", "QwenDecoder", "draw_tokens", "entropy_of", "sampling_logprobs", "supports"]

#: Compact the batch once this fraction of the running rows has finished.
COMPACT_FRACTION = 0.25
#: Prompts a prefill forward takes at once: 1.2-2.8x over one at a time for 8-128 suite prompts at 4-32
#: a forward (one thread, a loaded machine), 0.85x for 128 in one forward (its activations leave the cache).
PREFILL_PROMPTS = 16


def supports(model: Any) -> bool:
    """Whether ``model`` is a Qwen2-family causal LM this loop reproduces exactly."""
    cfg = getattr(model, "config", None)
    return (
        getattr(cfg, "model_type", None) == "qwen2"
        and not getattr(cfg, "use_sliding_window", False)
        and (getattr(cfg, "rope_parameters", None) or {}).get("rope_type", "default") == "default"
        and getattr(cfg, "hidden_act", "silu") == "silu"
    )


def _bias(linear: torch.nn.Linear) -> torch.Tensor:
    """A linear layer's bias, or zeros where it has none."""
    return linear.bias if linear.bias is not None else linear.weight.new_zeros(linear.weight.shape[0])


def padding_mask(lengths: Sequence[int], width: int) -> torch.Tensor:
    """The additive mask ``[prompts, width]`` of prompts padded on the right: 0 on a prompt's tokens, -inf
    past its length."""
    mask = torch.zeros(len(lengths), width, dtype=torch.float32)
    for p, length in enumerate(lengths):
        mask[p, length:] = -float("inf")
    return mask


def head_dim(cfg: Any) -> int:
    """The size of one attention head of a model config (Qwen2 may name it; else hidden / heads)."""
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def sampling_logprobs(scores: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Log-probs ``[rows, vocab]`` (float32) of the distribution sampled from: ``scores`` (logits) divided
    by ``temperature``, then top-p (the smallest set of most likely tokens whose mass reaches ``top_p``,
    at least one; the others get log-prob -inf). Shared by sampling (``draw_tokens``) and re-scoring
    (``maxk.generate.rescore``), so both read the same distribution."""
    scores = scores.float()
    if temperature != 1.0:
        scores = scores / temperature
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
        cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - top_p)
        remove[..., -1:] = False  # keep at least the most likely token
        scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
    return torch.log_softmax(scores, dim=-1)


def entropy_of(logp: torch.Tensor, p: torch.Tensor | None = None, *, finite: bool = False) -> torch.Tensor:
    """``-sum p log p`` over the last axis of log-probs ``logp`` (tokens with p = 0, e.g. cut by top-p,
    add nothing); ``p`` = ``logp.exp()`` when the caller already has it. ``finite``: no log-prob is
    -inf (no top-p cut), so no guard is needed: where p underflows to 0, p log p is 0 as well."""
    p = logp.exp() if p is None else p
    if finite:
        return -(p * logp).sum(-1)
    return -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)


def draw_tokens(
    scores: torch.Tensor, u: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw one token per row by inverse-CDF sampling with uniforms ``u`` ``[rows]`` (float64).

    Applies temperature, then top-p (the smallest set of most likely tokens whose mass reaches
    ``top_p``, at least one). Returns ``(token, logp, entropy)``: the drawn token, its log-prob and
    the exact entropy ``-sum p log p`` of the distribution it was drawn from (tokens cut by top-p
    have p = 0 and add nothing).
    """
    logp = sampling_logprobs(scores, temperature, top_p)
    p = logp.exp()
    entropy = entropy_of(logp, p, finite=top_p >= 1.0)
    cdf = p.double().cumsum(-1)
    token = torch.searchsorted(cdf, (u[:, None] * cdf[:, -1:]).contiguous(), right=True)
    token = token.clamp_(max=p.shape[1] - 1)
    bad = p.gather(1, token) == 0  # only if rounding pushed u onto the last cdf value
    if bool(bad.any()):
        token = torch.where(bad, p.argmax(-1, keepdim=True), token)
    return token.squeeze(1), logp.gather(1, token).squeeze(1), entropy


@dataclass
class DecodeResult:
    """Per row (prompt-major, ``n`` rows per prompt): generated ids up to and including the first
    stop token (or ``max_new_tokens`` ids), whether it stopped, and the sums over those tokens."""

    token_ids: list[list[int]]
    stopped: list[bool]
    sum_logprob: list[float]
    sum_entropy: list[float]

    def texts(self, tokenizer: Any) -> list[str]:
        """The completions as text, without their stop token (special tokens skipped)."""
        return tokenizer.batch_decode(
            [t[:-1] if stop else t for t, stop in zip(self.token_ids, self.stopped, strict=True)],
            skip_special_tokens=True,
        )


class QwenDecoder:
    """Batched sampling from a Qwen2-family ``model`` (see the module docstring); ``step_logits`` in torch
    operations (``maxk.generate.native.NativeDecoder`` makes it one call of C)."""

    kernel = "torch"

    def __init__(self, model: Any) -> None:
        if not supports(model):
            raise ValueError(f"QwenDecoder supports Qwen2 models with default RoPE, got {model.config}")
        self.model = model
        cfg = model.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = head_dim(cfg)
        self.group = self.heads // self.kv_heads
        self.eps = cfg.rms_norm_eps
        self.scale = self.head_dim**-0.5
        self.refresh()

    @torch.no_grad()
    def refresh(self) -> None:
        """Re-read the model's weights (call after an optimizer step changed them)."""
        inner = self.model.model
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        self.lm_head = self.model.lm_head.weight
        self.inv_freq = inner.rotary_emb.inv_freq
        self.rope_scaling = float(getattr(inner.rotary_emb, "attention_scaling", 1.0))
        self.layers = []
        for layer in inner.layers:
            att, mlp = layer.self_attn, layer.mlp
            qkv_w = torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight])
            projections = (att.q_proj, att.k_proj, att.v_proj)
            qkv_b = None  # no biases; where only some have one, the others' are 0
            if any(p.bias is not None for p in projections):
                qkv_b = torch.cat([_bias(p) for p in projections])
            self.layers.append(
                (
                    layer.input_layernorm.weight,
                    qkv_w,
                    qkv_b,
                    att.o_proj.weight,
                    att.o_proj.bias,
                    layer.post_attention_layernorm.weight,
                    torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
                    mlp.down_proj.weight,
                )
            )

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def _rope_tables(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos``, ``sin`` ``[rows, 1, d]`` of positions ``pos`` ``[rows]`` (one step, every layer)."""
        freqs = pos[:, None].to(self.inv_freq.dtype) * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos = (emb.cos() * self.rope_scaling).to(dtype)[:, None, :]
        sin = (emb.sin() * self.rope_scaling).to(dtype)[:, None, :]
        return cos, sin

    @staticmethod
    def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x`` ``[rows, heads, d]`` rotated (as transformers' ``apply_rotary_pos_emb``)."""
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    @torch.no_grad()
    def _prefill(
        self, prompts: Sequence[Sequence[int]]
    ) -> tuple[tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor], torch.Tensor]:
        """The model's own forward over the prompts, ``PREFILL_PROMPTS`` at once, each padded on the
        right to the longest (causal attention: a prompt's tokens never see the padding after them, and
        each token sits at its own position): per layer the keys and values ``[kv_heads, prompts,
        longest, d]``, the additive mask ``[prompts, longest]`` (0 on a prompt's tokens, -inf on its
        padding, whose keys and values are finite and get weight 0), and each prompt's last logits
        ``[prompts, vocab]``. A prompt's keys differ from its forward alone only by the float rounding
        of the batch's products."""
        device = self.embed.device
        lengths = [len(ids) for ids in prompts]
        width = max(lengths)
        batch = torch.zeros(len(prompts), width, dtype=torch.long, device=device)
        for p, ids in enumerate(prompts):
            batch[p, : lengths[p]] = torch.tensor(list(ids), dtype=torch.long)
        last = torch.tensor(lengths, device=device) - 1
        keys: list[list[torch.Tensor]] = [[] for _ in self.layers]
        values: list[list[torch.Tensor]] = [[] for _ in self.layers]
        hidden = []
        for start in range(0, len(prompts), PREFILL_PROMPTS):
            rows = slice(start, start + PREFILL_PROMPTS)
            part = batch[rows, : max(lengths[rows])]
            out = self.model.model(part, use_cache=True)
            for li, layer in enumerate(out.past_key_values.layers):
                pad = (0, 0, 0, width - part.shape[1])  # to the longest of all: a -inf column each
                keys[li].append(F.pad(layer.keys, pad))
                values[li].append(F.pad(layer.values, pad))
            hidden.append(out.last_hidden_state[torch.arange(part.shape[0], device=device), last[rows]])
        mask = padding_mask(lengths, width).to(device)
        stacked_keys = [torch.cat(k).transpose(0, 1).contiguous() for k in keys]
        stacked_values = [torch.cat(v).transpose(0, 1).contiguous() for v in values]
        return (stacked_keys, stacked_values, mask), self.model.lm_head(torch.cat(hidden))

    def new_cache(self, rows: int, max_new_tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer the generated tokens' keys and values, each ``[kv_heads, rows, max_new_tokens, d]``
        (a step writes one contiguous ``d`` per row and head; keys stored transposed, ``[..., d,
        max_new_tokens]``, made that write a scatter at stride ``max_new_tokens``: 1.06x slower decode
        loop, the same samples); uninitialised (``step_logits`` writes row ``step`` before reading)."""
        device, dtype = self.embed.device, self.embed.dtype
        shape = (self.kv_heads, rows, max_new_tokens, self.head_dim)
        return [
            (
                torch.empty(shape, device=device, dtype=dtype),
                torch.empty(shape, device=device, dtype=dtype),
            )
            for _ in self.layers
        ]

    @torch.no_grad()
    def step_logits(
        self,
        tokens: torch.Tensor,
        step: int,
        positions: torch.Tensor,
        grid: _Grid,
        cache: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> torch.Tensor:
        """Logits ``[rows, vocab]`` after feeding ``tokens`` (the ``step``-th generated token of each row).

        ``positions[row]``: its position in the sequence; ``grid``: the stacked prompt caches and where
        each row's queries go (``_Grid``); ``cache[layer]``: per-row keys and values of the generated
        tokens (``new_cache``), written at ``step``.
        """
        rows = tokens.shape[0]
        h, kvh, g, d = self.heads, self.kv_heads, self.group, self.head_dim
        width, slots = grid.width, grid.prompts * grid.per_prompt
        x = self.embed[tokens]
        cos, sin = self._rope_tables(positions, x.dtype)
        for li, (ln1, qkv_w, qkv_b, o_w, o_b, ln2, gu_w, down_w) in enumerate(self.layers):
            qkv = F.linear(self._rms(x, ln1), qkv_w, qkv_b)
            qk = self._rope(qkv[:, : (h + kvh) * d].view(rows, h + kvh, d), cos, sin)  # queries, keys
            q = (qk[:, :h] * self.scale).view(rows, kvh, g, d).transpose(0, 1)  # [kvh, rows, g, d]
            keys, values = cache[li]
            keys[:, :, step] = qk[:, h:].transpose(0, 1)
            values[:, :, step] = qkv[:, (h + kvh) * d :].view(rows, kvh, d).transpose(0, 1)
            own = torch.matmul(q, keys[:, :, : step + 1].transpose(-1, -2))  # [kvh, rows, g, s+1]
            # the prompt part: queries into the [kvh, prompts, per_prompt * g, d] grid, one product
            # (a dense grid, every slot a row in order, needs no scatter or gather)
            qp = q if grid.dense else q.new_zeros(kvh, slots, g, d).index_copy_(1, grid.slot, q)
            shared = torch.matmul(qp.reshape(kvh, grid.prompts, -1, d), grid.keys_t[li])
            shared = shared.view(kvh, slots, g, width)
            shared = (shared if grid.dense else shared.index_select(1, grid.slot)) + grid.mask
            probs = torch.cat([shared, own], dim=-1).softmax(dim=-1)
            if grid.dense:
                pp = probs[..., :width]
            else:
                pp = probs.new_zeros(kvh, slots, g, width).index_copy_(1, grid.slot, probs[..., :width])
            out = torch.matmul(pp.reshape(kvh, grid.prompts, -1, width), grid.values[li])
            out = out.view(kvh, slots, g, d)
            out = out if grid.dense else out.index_select(1, grid.slot)
            out = out + torch.matmul(probs[..., width:], values[:, :, : step + 1])  # [kvh, rows, g, d]
            x = x + F.linear(out.permute(1, 0, 2, 3).reshape(rows, h * d), o_w, o_b)
            gate, up = F.linear(self._rms(x, ln2), gu_w).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, down_w)
        return F.linear(self._rms(x, self.norm), self.lm_head)

    @torch.no_grad()
    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        stop_token_ids: Sequence[int],
        seeds: Sequence[int],
        temperature: float = _DEFAULT.temperature,
        top_p: float = _DEFAULT.top_p,
    ) -> DecodeResult:
        """``n`` samples of each prompt (token ids), prompt-major; ``seeds[i]`` seeds prompt i's draws.

        The model runs in eval mode (no dropout) and is put back in its previous mode afterwards.
        """
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        was_training = self.model.training
        self.model.eval()
        try:
            return self._sample(prompts, n, max_new_tokens, stop_token_ids, seeds, temperature, top_p)
        finally:
            self.model.train(was_training)

    def _sample(self, prompts, n, max_new_tokens, stop_token_ids, seeds, temperature, top_p) -> DecodeResult:
        device = self.embed.device
        if any(len(ids) == 0 for ids in prompts):
            raise ValueError("empty prompt")
        total = n * len(prompts)
        lengths = [len(ids) for ids in prompts]
        stacked, first_logits = self._prefill(prompts)
        # Every prompt draws n uniforms per step, one per original sample, running or not: a sample's
        # draws depend on its prompt's seed alone, never on compaction or batch-mates (drawn up front:
        # a generator's draws of [steps, n] at once are its draws of n a step, one step after another)
        books = _Books.empty(_uniforms(seeds, n, max_new_tokens, device), n, stop_token_ids)
        cache = self.new_cache(total, max_new_tokens)
        rows = torch.arange(total)  # original row of each running row
        prompt_of = rows // n
        grid = _Grid.of(stacked, prompt_of.to(device))
        positions = torch.tensor(lengths, device=device).repeat_interleave(n)
        logits = first_logits.repeat_interleave(n, dim=0)
        alive = torch.ones(total, dtype=torch.bool)  # per running row: not yet stopped
        for step in range(max_new_tokens):
            token, live = self._draw(logits, step, rows, prompt_of, alive, books, temperature, top_p)
            if step + 1 == max_new_tokens or live == 0:
                break
            if len(rows) - live >= COMPACT_FRACTION * len(rows):
                idx = alive.nonzero().squeeze(1)
                rows, prompt_of, alive = rows[idx], prompt_of[idx], alive[idx]
                idx = idx.to(device)
                token, positions = token[idx], positions[idx]
                cache, grid = self._compact(cache, grid, stacked, idx, prompt_of.to(device), step)
            # Rows stopped but not yet compacted away still run; their draws are not recorded.
            logits = self.step_logits(token, step, positions, grid, cache)
            positions = positions + 1
        token_ids = [books.tokens[i, : int(books.length[i])].tolist() for i in range(total)]
        stopped, sum_logp, sum_ent = books.stopped.tolist(), books.sum_logp.tolist(), books.sum_ent.tolist()
        return DecodeResult(token_ids, stopped, sum_logp, sum_ent)

    def _compact(
        self,
        cache: list[tuple[torch.Tensor, torch.Tensor]],
        grid: _Grid,
        stacked: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor],
        idx: torch.Tensor,
        prompt_of: torch.Tensor,
        step: int,
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], _Grid]:
        """The cache and grid of the running rows ``idx`` (``prompt_of`` theirs) after ``step``."""
        cache = [(k.index_select(1, idx), v.index_select(1, idx)) for k, v in cache]
        return cache, _Grid.of(stacked, prompt_of)

    def _draw(
        self,
        logits: torch.Tensor,
        step: int,
        rows: torch.Tensor,
        prompt_of: torch.Tensor,
        alive: torch.Tensor,
        books: _Books,
        temperature: float,
        top_p: float,
    ) -> tuple[torch.Tensor, int]:
        """Each running row's token of ``step`` (``draw_tokens`` with its uniform of the step), recorded
        in ``books`` for the rows still ``alive``; a stop token ends its row (``alive`` is updated in
        place). Returns the tokens (on the model's device) and how many rows are still alive."""
        device = logits.device
        u = books.uniforms[prompt_of, step, rows - prompt_of * books.n].to(device)
        token, logp, ent = draw_tokens(logits, u, temperature, top_p)
        live = rows[alive]
        books.tokens[live, step] = token.cpu()[alive]
        books.sum_logp[live] += logp.double().cpu()[alive]
        books.sum_ent[live] += ent.double().cpu()[alive]
        done = alive & torch.isin(token.cpu(), books.stop)
        books.length[rows[done]] = step + 1
        books.stopped[rows[done]] = True
        alive &= ~done
        return token, int(alive.sum())


def _uniforms(seeds: Sequence[int], n: int, steps: int, device: Any) -> torch.Tensor:
    """``[prompts, steps, n]`` float64 uniforms: prompt i's from one ``torch.Generator`` seeded with
    ``seeds[i]``, ``n`` a step (``tests/generate/test_generate_decode.py`` checks that drawing them
    at once gives the draws of one step after another)."""
    draws = []
    for seed in seeds:
        generator = torch.Generator(device=device).manual_seed(int(seed))
        draws.append(torch.rand(steps, n, generator=generator, dtype=torch.float64, device=device))
    return torch.stack(draws).cpu()


@dataclass
class _Books:
    """What a call of ``QwenDecoder.sample`` records, on the CPU, per original row (``tokens`` ``[rows,
    max_new_tokens]``, ``length``, the sums of log-probs and entropies, ``stopped``), and what its draws
    read: ``uniforms`` ``[prompts, max_new_tokens, n]`` (``_uniforms``) and the ``stop`` token ids."""

    uniforms: torch.Tensor
    n: int
    tokens: torch.Tensor
    length: torch.Tensor
    sum_logp: torch.Tensor
    sum_ent: torch.Tensor
    stopped: torch.Tensor
    stop: torch.Tensor

    @classmethod
    def empty(cls, uniforms: torch.Tensor, n: int, stop_token_ids: Sequence[int]) -> _Books:
        """Nothing recorded yet for the ``prompts x n`` rows of ``uniforms`` (each at full length until
        it stops)."""
        total, steps = uniforms.shape[0] * n, uniforms.shape[1]
        return cls(
            uniforms=uniforms,
            n=n,
            tokens=torch.zeros(total, steps, dtype=torch.long),
            length=torch.full((total,), steps, dtype=torch.long),
            sum_logp=torch.zeros(total, dtype=torch.float64),
            sum_ent=torch.zeros(total, dtype=torch.float64),
            stopped=torch.zeros(total, dtype=torch.bool),
            stop=torch.tensor(sorted(set(stop_token_ids)), dtype=torch.long),
        )


@dataclass
class _Grid:
    """Where the running rows' queries meet their prompts' caches: the prompts that still have rows
    (per layer ``keys_t`` ``[kv_heads, prompts, d, width]``, transposed and contiguous for the scores'
    product, and ``values`` ``[kv_heads, prompts, width, d]``), ``per_prompt`` slots each (the most
    rows any of them has), row r at slot ``slot[r]`` of the flattened grid; ``mask`` ``[1, rows, 1,
    width]`` is each row's prompt's padding mask. ``dense``: every prompt has ``per_prompt`` rows, so
    ``slot`` is the identity (before the first compaction)."""

    keys_t: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    slot: torch.Tensor
    prompts: int
    per_prompt: int
    width: int
    dense: bool

    @classmethod
    def of(
        cls, stacked: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor], prompt_of: torch.Tensor
    ) -> _Grid:
        """The grid of rows grouped by prompt (``prompt_of`` ``[rows]``, each prompt's rows contiguous)."""
        keys, values, mask = stacked
        present, inverse, counts = torch.unique_consecutive(
            prompt_of, return_inverse=True, return_counts=True
        )
        per_prompt = int(counts.max())
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(len(prompt_of), device=prompt_of.device) - starts[inverse]
        slot = inverse * per_prompt + rank
        if len(present) < keys[0].shape[1]:
            keys = [k.index_select(1, present) for k in keys]
            values = [v.index_select(1, present) for v in values]
        keys_t = [k.transpose(-1, -2).contiguous() for k in keys]
        row_mask = mask.index_select(0, prompt_of).to(keys[0].dtype)[None, :, None, :]
        dense = bool((counts == per_prompt).all())
        return cls(keys_t, values, row_mask, slot, len(present), per_prompt, keys[0].shape[2], dense)
