"""The policy update's attention in C (``kernels/attention.c``): forward and backward of what torch's
scaled dot-product attention computes in transformers' Qwen2 layers, for the shared-prompt log-prob passes
(``maxk.train.shared_prompt``: the update and the no-grad old-policy and reference passes).

torch's CPU attention for these shapes (head size 32, a boolean mask, the key/value heads repeated to the
query heads) spends 40 % of the update: its flash kernel's backward recomputes the probabilities in small
blocks. Here each batch row's query heads of one key/value head are one matrix: the scores, the softmax and
the weighted values in three steps, the probabilities kept for the backward, the products in torch's BLAS
(``maxk.ckernels`` builds the file). The numbers are torch's up to float rounding
(``tests/train/test_train_native_attention.py``: outputs and gradients).

Which attention runs is ``$MAXK_TRAIN_KERNEL``:

- ``auto`` (the default): the C one where the model fits it (float32 on a CPU, no attention dropout while
  training) and it builds, torch's SDPA otherwise (with one warning that says why, where only the build
  failed);
- ``native``: the C one, or an error that says why not;
- ``torch``: torch's SDPA, as transformers runs it.

A training run's provenance names what ran (``train_kernel``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from maxk import ckernels

__all__ = [
    "KERNELS",
    "KERNEL_ENV",
    "NAME",
    "attention",
    "kernel_choice",
    "native_attention",
    "unavailable",
]

log = logging.getLogger(__name__)

#: The environment variable that picks the update's attention, and its values.
KERNEL_ENV = "MAXK_TRAIN_KERNEL"
KERNELS = ckernels.KERNELS
#: The attention's name in transformers' attention and mask registries.
NAME = "maxk_native"
SOURCE = Path(__file__).with_name("kernels") / "attention.c"
#: The probabilities' rows are padded to a multiple of this many keys (the widest vector).
PAD = 16

_I, _F, _P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


def kernel_choice() -> str:
    """``$MAXK_TRAIN_KERNEL``, checked (``auto`` where unset)."""
    return ckernels.choice(KERNEL_ENV)


@functools.cache
def _library() -> ctypes.CDLL | str:
    """The C attention, or why there is none."""
    lib = ckernels.load(SOURCE, [], ckernels.compiler())
    if isinstance(lib, str):
        return lib
    lib.attention_forward.argtypes = [_P, _P, _P, _P] + [_I] * 8 + [_F, _P, _P]
    lib.attention_forward.restype = None
    lib.attention_backward.argtypes = [_P] * 6 + [_I] * 7 + [_F] + [_P] * 5
    lib.attention_backward.restype = None
    return lib


def _unfit(model: Any) -> str | None:
    """Why the C attention does not apply to ``model`` at all, or None."""
    cfg = model.config
    if getattr(cfg, "model_type", None) not in ("qwen2",):
        return f"model type {getattr(cfg, 'model_type', None)!r}: the C attention serves Qwen2"
    weight = model.get_input_embeddings().weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return f"weights are {weight.dtype} on {weight.device}, the C attention runs float32 on a CPU"
    if model.training and getattr(cfg, "attention_dropout", 0.0):
        return f"attention dropout {cfg.attention_dropout}: the C attention has none"
    if getattr(cfg, "use_sliding_window", False):
        return "sliding-window attention: the C attention attends to the whole mask"
    return None


def unavailable(model: Any) -> str | None:
    """Why the C attention cannot run ``model`` here, or None if it can."""
    reason = _unfit(model)
    if reason is not None:
        return reason
    lib = _library()
    return lib if isinstance(lib, str) else None


@functools.cache
def _warn_once(reason: str) -> None:
    log.warning(
        "the update attends with torch's SDPA, not the C attention: %s (%s=torch silences this)",
        reason,
        KERNEL_ENV,
    )


def kernel_for(model: Any) -> str:
    """``"native"`` or ``"torch"``: the attention ``$MAXK_TRAIN_KERNEL`` picks for ``model`` (docstring)."""
    choice = kernel_choice()
    if choice == "torch":
        return "torch"
    reason = unavailable(model)
    if reason is None:
        return "native"
    if choice == "native":
        raise RuntimeError(f"{KERNEL_ENV}=native, but the C attention cannot run: {reason}")
    if _unfit(model) is None:  # it would apply but does not build: say so
        _warn_once(reason)
    return "torch"


@contextlib.contextmanager
def native_attention(model: Any) -> Iterator[str]:
    """Within the block, ``model``'s layers attend with the C attention where ``kernel_for`` picks it;
    yields the kernel (``"native"`` or ``"torch"``)."""
    kernel = kernel_for(model)
    if kernel == "torch":
        yield kernel
        return
    before = model.config._attn_implementation
    model.config._attn_implementation = NAME
    try:
        yield kernel
    finally:
        model.config._attn_implementation = before


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


class _Attention(torch.autograd.Function):
    """``o = softmax(scale q k^T + mask) v`` per key/value head's query heads (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, mask, offset: int, scale: float):
        lib = _library()
        B, H, W, D = q.shape
        KVH, S = k.shape[1], k.shape[2]
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        Sp = -(-S // PAD) * PAD
        p = torch.empty(B, H, W, Sp)
        o = torch.empty(B, W, H, D)
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), _ptr(mask), offset, B, H, KVH, W, S, Sp, D, scale)
        lib.attention_forward(*args, p.data_ptr(), o.data_ptr())
        ctx.save_for_backward(q, k, v, p, o)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, p, o = ctx.saved_tensors
        B, H, W, D = q.shape
        KVH, S = k.shape[1], k.shape[2]
        do = do.contiguous()
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        Sp, G = p.shape[3], H // KVH
        scratch, delta = torch.empty(G, W, Sp), torch.empty(G, W)
        ptrs = (q, k, v, p, o, do)
        _library().attention_backward(*(t.data_ptr() for t in ptrs), B, H, KVH, W, S, Sp, D, ctx.scale,
                                      scratch.data_ptr(), delta.data_ptr(), dq.data_ptr(), dk.data_ptr(),
                                      dv.data_ptr())  # fmt: skip
        return dq, dk, dv, None, None, None


def attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface (``sdpa_attention_forward``'s arguments and output ``[batch,
    queries, heads, head size]``) with the C attention: the same mask semantics (a boolean mask, or none:
    causal from the first key where there are several queries, else every key)."""
    if dropout or kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None:
        raise ValueError("the C attention has no dropout, softcap or position bias")
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        raise ValueError(f"the C attention takes a boolean mask, got {attention_mask.dtype}")
    B, W, D, S = query.shape[0], query.shape[2], query.shape[3], key.shape[2]
    scale = D**-0.5 if scaling is None else scaling
    mask, offset = None, S  # no mask: every key
    if attention_mask is not None:
        mask = attention_mask.expand(B, 1, W, S).reshape(B, W, S).contiguous().view(torch.uint8)
    elif W > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
        offset = 0  # torch's is_causal: query i sees keys 0 .. i
    return _Attention.apply(query.float(), key.float(), value.float(), mask, offset, scale), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


_register()
