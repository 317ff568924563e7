"""The decode loop in C: ``NativeDecoder`` is ``QwenDecoder`` with these parts in ``kernels/decode_step.c``:

- ``step_logits``: one call a step instead of some fifty torch operations;
- ``_prefill``: the prompts through the model in the same arithmetic, unpadded, instead of the model's own
  forward;
- ``_draw``: each step's log-probs, entropies, draws and records in one call (top-p below 1: torch's);
- ``_compact``: the running rows moved down within the same cache instead of a copied one.

The C file is built at first use by ``maxk.ckernels`` (the system's C compiler, a per-user cache, the
``sgemm_`` of the BLAS torch links, the vector width of torch's kernel path), one library per head size.

Which step runs is ``$MAXK_DECODE_KERNEL``:

- ``auto`` (the default): the C step where the model fits it (a Qwen2-family model in float32 on a CPU,
  head size a multiple of 16) and it builds, torch's otherwise (with one warning that says why, where
  only the build failed);
- ``native``: the C step, or an error that says why not;
- ``torch``: ``QwenDecoder``'s own torch operations.

Both compute the same logits and draw from the same distributions up to float rounding
(``tests/generate/test_generate_native.py``), so the same prompts and seeds draw the same tokens but where
a draw falls within that rounding of a boundary of the cumulative distribution. What ran is in every
generation job's provenance (``decode_kernel``).
"""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from maxk import ckernels
from maxk.generate.decode import PREFILL_PROMPTS, QwenDecoder, head_dim, padding_mask, supports

__all__ = ["KERNELS", "KERNEL_ENV", "NativeDecoder", "kernel_choice", "native_unavailable", "new_decoder"]

log = logging.getLogger(__name__)

#: The environment variable that picks the decode step, and its values.
KERNEL_ENV = "MAXK_DECODE_KERNEL"
KERNELS = ckernels.KERNELS
SOURCE = Path(__file__).with_name("kernels") / "decode_step.c"
#: Most query heads a key/value head serves (the C step's per-row accumulators).
MAX_GROUP = 8
#: Largest head size the C step holds on its stack.
MAX_HEAD_DIM = 128
#: The generated-token cache and the prompt keys are padded to multiples of this many positions.
PAD = 16

_I, _F, _P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


def kernel_choice() -> str:
    """``$MAXK_DECODE_KERNEL``, checked (``auto`` where unset)."""
    return ckernels.choice(KERNEL_ENV)


def _compiler() -> str | None:
    return ckernels.compiler()


@functools.cache
def _library(head_dim: int) -> ctypes.CDLL | str:
    """The C step for heads of ``head_dim``, or why there is none."""
    lib = ckernels.load(SOURCE, [f"-DHEAD_DIM={head_dim}"], _compiler())
    if isinstance(lib, str):
        return lib
    lib.decode_step.argtypes = [_P, _F, _F, _P, _P, _P, _I, _I, _I, _I, _P, _P, _P, _I, _I, _I, _P, _P]
    lib.decode_step.restype = None
    lib.decode_work.argtypes = [_I] * 8
    lib.decode_work.restype = ctypes.c_int64
    _L = ctypes.c_int64
    lib.draw_step.argtypes = [_P, _L, _L, _F, _P, _L, _L, _L] + [_P] * 5 + [_L] + [_P] * 5 + [_L, _P]
    lib.draw_scratch.argtypes = [_L]
    lib.draw_scratch.restype = ctypes.c_int64
    lib.draw_step.restype = ctypes.c_int64
    lib.compact_rows.argtypes = [_P, _L, _L, _L, _L, _P, _L, _L]
    lib.compact_rows.restype = None
    lib.prefill.argtypes = [_P, _F, _F, _P, _P, _I, _I, _I, _I, _P, _P, _P, _P]
    lib.prefill.restype = None
    lib.prefill_work.argtypes = [_L, _L, _I, _I, _I, _I]
    lib.prefill_work.restype = ctypes.c_int64
    return lib


def native_unavailable(model: Any) -> str | None:
    """Why the C step cannot run ``model`` here, or None if it can (``_unfit``, then ``_library``)."""
    reason = _unfit(model)
    if reason is not None:
        return reason
    lib = _library(head_dim(model.config))
    return lib if isinstance(lib, str) else None


def _unfit(model: Any) -> str | None:
    """Why the C step does not apply to ``model`` at all (its kind, device or sizes), or None."""
    if not supports(model):
        return "not a Qwen2-family model with default RoPE"
    cfg = model.config
    heads, kv_heads, size = cfg.num_attention_heads, cfg.num_key_value_heads, head_dim(cfg)
    weight = model.get_input_embeddings().weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return f"weights are {weight.dtype} on {weight.device}, the C step runs float32 on a CPU"
    if size % PAD or size > MAX_HEAD_DIM:
        return f"head size {size}: the C step needs a multiple of {PAD} up to {MAX_HEAD_DIM}"
    if heads // kv_heads > MAX_GROUP:
        return f"{heads // kv_heads} query heads a key/value head: the C step serves at most {MAX_GROUP}"
    if cfg.intermediate_size % PAD:
        return f"intermediate size {cfg.intermediate_size}: the C step needs a multiple of {PAD}"
    return None


def new_decoder(model: Any) -> QwenDecoder:
    """The decode loop for ``model`` with the step ``$MAXK_DECODE_KERNEL`` picks (module docstring)."""
    choice = kernel_choice()
    if choice == "torch":
        return QwenDecoder(model)
    reason = native_unavailable(model)
    if reason is None:
        return NativeDecoder(model)
    if choice == "native":
        raise RuntimeError(f"{KERNEL_ENV}=native, but the C decode step cannot run: {reason}")
    if _unfit(model) is None:  # it would apply but does not build: say so (a GPU or a big head is no news)
        _warn_once(reason)
    return QwenDecoder(model)


@functools.cache
def _warn_once(reason: str) -> None:
    log.warning("decoding with torch's step, not the C one: %s (%s=torch silences this)", reason, KERNEL_ENV)


def _ceil(n: int, to: int = PAD) -> int:
    return -(-n // to) * to


class NativeDecoder(QwenDecoder):
    """``QwenDecoder`` whose ``step_logits`` is the C step (module docstring). The generated tokens' keys
    are stored in tiles of the vector width (``new_cache``); everything else is ``QwenDecoder``'s."""

    kernel = "native"

    def __init__(self, model: Any) -> None:
        reason = native_unavailable(model)
        if reason is not None:
            raise RuntimeError(f"the C decode step cannot run this model: {reason}")
        self.lib = _library(head_dim(model.config))
        self._state: dict[str, Any] = {}
        self._rope_cache = torch.empty(0, 2, 0)
        super().__init__(model)

    @torch.no_grad()
    def refresh(self) -> None:
        """Re-read the weights (``QwenDecoder.refresh``) and the C step's table of their addresses; the model
        must still fit the C step (a model moved to a GPU or to bfloat16 since is an error, not garbage)."""
        super().refresh()
        cfg = self.model.config
        self.hidden, self.inter, self.vocab = cfg.hidden_size, cfg.intermediate_size, self.lm_head.shape[0]
        self._weights = [self.embed.contiguous(), self.norm.contiguous(), self.lm_head.contiguous()]
        table = [len(self.layers), self.hidden, self.inter, self.vocab, self.heads, self.kv_heads]
        table += [w.data_ptr() for w in self._weights]
        for layer in self.layers:  # ln1, qkv_w, qkv_b, o_w, o_b, ln2, gu_w, down_w
            tensors = [t.contiguous() if t is not None else None for t in layer]
            self._weights += [t for t in tensors if t is not None]
            table += [t.data_ptr() if t is not None else 0 for t in tensors]
        wrong = {(str(w.dtype), str(w.device)) for w in self._weights} - {("torch.float32", "cpu")}
        if wrong:
            raise RuntimeError(
                f"the C decode step runs float32 weights on a CPU; this model has {sorted(wrong)}"
            )
        self._table = torch.tensor(table, dtype=torch.int64)
        self._draw_scratch = torch.empty(self.lib.draw_scratch(self.vocab), dtype=torch.float32)
        self._state = {}

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """``QwenDecoder.sample``; the C step's buffers of the call are let go after it."""
        try:
            return super().sample(*args, **kwargs)
        finally:
            self._state = {}

    def new_cache(self, rows: int, max_new_tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer the generated tokens' keys and values, ``[kv_heads, rows, T, d]`` each with ``T`` =
        ``max_new_tokens`` rounded up to 16; the keys' memory holds, per row and head, tiles of the
        vector width's steps, transposed (``[T / width, d, width]``), which the C step writes and reads."""
        shape = (self.kv_heads, rows, _ceil(max_new_tokens), self.head_dim)
        return [
            (torch.empty(shape, dtype=torch.float32), torch.empty(shape, dtype=torch.float32))
            for _ in self.layers
        ]

    def _rope_table(self, positions: int) -> torch.Tensor:
        """``[positions, 2, d]``: cos and sin of every position (as ``_rope_tables`` computes them)."""
        if self._rope_cache.shape[0] < positions:
            cos, sin = self._rope_tables(torch.arange(_ceil(positions, 256)), torch.float32)
            self._rope_cache = torch.stack([cos[:, 0], sin[:, 0]], dim=1).contiguous()
        return self._rope_cache

    @torch.no_grad()
    def _prefill(self, prompts):
        """``QwenDecoder._prefill`` in C (``prefill``): ``PREFILL_PROMPTS`` whole prompts a call, unpadded,
        with the arithmetic of the C step; the same keys, values and last logits as the model's own forward
        up to float rounding. A prompt's keys and values past its length are 0 (masked out, as ever)."""
        lengths = [len(ids) for ids in prompts]
        if not lengths or min(lengths) == 0:
            raise ValueError("no prompts, or an empty one")
        width, count = max(lengths), len(prompts)
        shape = (self.kv_heads, count, width, self.head_dim)
        keys = [torch.zeros(shape, dtype=torch.float32) for _ in self.layers]
        values = [torch.zeros(shape, dtype=torch.float32) for _ in self.layers]
        table = torch.tensor([[k.data_ptr(), v.data_ptr()] for k, v in zip(keys, values, strict=True)])
        logits = torch.empty(count, self.vocab, dtype=torch.float32)
        rope = self._rope_table(width)
        chunks = range(0, count, PREFILL_PROMPTS)
        sizes = [(sum(part), max(part)) for part in (lengths[c : c + PREFILL_PROMPTS] for c in chunks)]
        work = max(self.lib.prefill_work(tokens, longest, self.hidden, self.inter, self.heads, self.kv_heads)
                   for tokens, longest in sizes)  # fmt: skip
        buffer = torch.empty(work, dtype=torch.float32)  # one for every chunk
        for start in chunks:
            chunk = prompts[start : start + PREFILL_PROMPTS]
            tokens = torch.tensor([int(t) for ids in chunk for t in ids], dtype=torch.int64)
            if not 0 <= int(tokens.min()) <= int(tokens.max()) < self.vocab:
                raise ValueError(f"a prompt token outside the vocabulary of {self.vocab}")
            starts = torch.tensor([0, *lengths[start : start + len(chunk)]], dtype=torch.int64).cumsum(0)
            self.lib.prefill(
                self._table.data_ptr(), self.eps, self.scale, tokens.data_ptr(), starts.data_ptr(),
                len(chunk), start, count, width, table.data_ptr(), rope.data_ptr(), logits[start:].data_ptr(),
                buffer.data_ptr(),
            )  # fmt: skip
        return (keys, values, padding_mask(lengths, width)), logits

    def _grid_state(self, grid: Any, cache: list) -> dict[str, Any]:
        """What the C step needs of a grid and cache, made once for each pair (``_compact`` keeps both and
        updates the rows' prompts, ``prompt_of``: indices into the grid's prompts)."""
        state = self._state
        if state.get("grid") is grid and state.get("cache") is cache:
            return state
        capacity, T = cache[0][0].shape[1], cache[0][0].shape[2]
        want = (self.kv_heads, capacity, _ceil(T), self.head_dim)
        for keys, values in cache:  # the C step trusts the layout new_cache makes: check it once a grid
            for t in (keys, values):
                if tuple(t.shape) != want or not t.is_contiguous() or t.dtype != torch.float32:
                    raise ValueError(
                        f"cache tensor {tuple(t.shape)} {t.dtype}: expected {want} float32, contiguous"
                    )
        prompt_of = (grid.slot // grid.per_prompt).contiguous()
        if capacity < len(prompt_of):
            raise ValueError(
                f"cache of {capacity} rows for a grid of {len(prompt_of)}: expected at least as many"
            )
        row_len = (grid.mask[0, :, 0, :] == 0).sum(-1)
        prompt_len = torch.zeros(grid.prompts, dtype=torch.long).index_copy_(0, prompt_of, row_len)
        keys = [F.pad(k, (0, _ceil(grid.width) - grid.width)).contiguous() for k in grid.keys_t]
        values = [v.contiguous() for v in grid.values]
        table = [[k.data_ptr(), v.data_ptr(), pk.data_ptr(), pv.data_ptr()]
                 for (k, v), pk, pv in zip(cache, keys, values, strict=True)]  # fmt: skip
        work = self.lib.decode_work(len(prompt_of), self.hidden, self.inter, self.heads, self.kv_heads,
                                    grid.per_prompt, grid.width, T)  # fmt: skip
        self._state = {
            "grid": grid, "cache": cache, "prompt_of": prompt_of, "prompt_len": prompt_len, "keys": keys,
            "values": values, "table": torch.tensor(table, dtype=torch.int64),
            "work": torch.empty(work, dtype=torch.float32),
        }  # fmt: skip
        return self._state

    def _compact(self, cache, grid, stacked, idx, prompt_of, step) -> tuple[list, Any]:
        """``QwenDecoder._compact`` in place: the running rows' keys and values of the first ``step``
        positions move down to the first rows of the same cache (C, ``compact_rows``), and the grid keeps
        every prompt of the call (a row's prompt is its index there), so nothing is allocated or rebuilt;
        each row's arithmetic is what it was."""
        state = self._grid_state(grid, cache)
        idx = idx.to(torch.int64).contiguous()
        capacity, T = cache[0][0].shape[1], cache[0][0].shape[2]
        self.lib.compact_rows(state["table"].data_ptr(), len(self.layers), self.kv_heads, capacity, T,
                              idx.data_ptr(), len(idx), step)  # fmt: skip
        state["prompt_of"] = state["prompt_of"][idx].contiguous()
        return cache, grid

    @torch.no_grad()
    def step_logits(self, tokens, step, positions, grid, cache) -> torch.Tensor:
        """``QwenDecoder.step_logits``, in one call of the C step."""
        rows = tokens.shape[0]
        state = self._grid_state(grid, cache)
        if rows != len(state["prompt_of"]):
            raise ValueError(f"{rows} tokens for {len(state['prompt_of'])} running rows")
        capacity, T = cache[0][0].shape[1], cache[0][0].shape[2]
        tokens = tokens.to(torch.int64).contiguous()
        positions = positions.to(torch.int64).contiguous()
        rope = self._rope_table(int(positions.max()) + T - step + 1)
        logits = torch.empty(rows, self.vocab, dtype=torch.float32)
        self.lib.decode_step(
            self._table.data_ptr(), self.eps, self.scale, state["table"].data_ptr(), tokens.data_ptr(),
            positions.data_ptr(), rows, step, capacity, T, rope.data_ptr(), state["prompt_of"].data_ptr(),
            state["prompt_len"].data_ptr(), grid.prompts, grid.width, grid.per_prompt, logits.data_ptr(),
            state["work"].data_ptr(),
        )  # fmt: skip
        return logits

    def _draw(self, logits, step, rows, prompt_of, alive, books, temperature, top_p) -> tuple[Any, int]:
        """``QwenDecoder._draw`` in one call of C (``draw_step``): the log-probs, the entropy, the draw and
        the records of every running row, the same distribution as ``draw_tokens``'s up to float
        rounding; top-p below 1 is ``QwenDecoder``'s."""
        if top_p < 1.0:
            return super()._draw(logits, step, rows, prompt_of, alive, books, temperature, top_p)
        logits = logits.to(torch.float32).contiguous()
        for name, t, dtype in (("rows", rows, torch.int64), ("prompt_of", prompt_of, torch.int64),
                               ("alive", alive, torch.bool)):  # fmt: skip
            if t.dtype != dtype or not t.is_contiguous() or t.shape != (logits.shape[0],):
                raise ValueError(f"{name}: {t.dtype} {tuple(t.shape)}, expected {dtype} [{logits.shape[0]}]")
        if logits.shape[1] != self.vocab:
            raise ValueError(f"logits of {logits.shape[1]} tokens, the model has {self.vocab}")
        token = torch.empty(len(rows), dtype=torch.int64)
        live = self.lib.draw_step(
            logits.data_ptr(), len(rows), self.vocab, temperature, books.uniforms.data_ptr(),
            books.uniforms.shape[1], books.n, step, rows.data_ptr(), prompt_of.data_ptr(), alive.data_ptr(),
            token.data_ptr(), books.tokens.data_ptr(), books.tokens.shape[1], books.sum_logp.data_ptr(),
            books.sum_ent.data_ptr(), books.length.data_ptr(), books.stopped.data_ptr(),
            books.stop.data_ptr(), len(books.stop), self._draw_scratch.data_ptr(),
        )  # fmt: skip
        return token, int(live)
