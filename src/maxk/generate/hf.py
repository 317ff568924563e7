"""transformers backend (CPU or a small GPU): exact per-token entropy and log-probs from the logits.

For Qwen2-family models (the embedded base model and the paper's) sampling runs in
``maxk.generate.decode``'s own batched decode loop (``decoder="auto"``, the default): several
prompts per call, shared prompt caches, finished samples leaving the batch. Other models, or
``decoder="generate"``, use ``model.generate`` as described below.

All ``n`` samples of a prompt go through one ``generate`` call, split into chunks of at most
``max_batch_size`` sequences to bound memory. The prompt is prefilled once and its KV cache copied to
every sequence of the chunk (the samples share it); decoding uses a preallocated (static) KV cache,
which avoids re-concatenating the cache at every step (the dominant cost with a dynamic cache on a
tiny model), and generation stops as soon as every sequence of the chunk has drawn a stop token.

Sampling happens in our own logits processor (``_Sampler``), run as the last one while ``generate``
decodes greedily with no other processor (no top-k, no repetition penalty, no checkpoint defaults):
it applies temperature and top-p, draws each sequence's token by inverse-CDF sampling with a
``torch.Generator`` seeded per problem (several times faster than ``torch.multinomial`` on CPU and
independent of the global RNG), and returns scores whose argmax is the drawn token. So the distribution
it records is, by construction, the one the token was drawn from: per step it keeps the exact entropy
``-sum p log p`` of the processed distribution and the drawn token's log-prob. Memory is
O(batch x vocab) per step plus O(batch x steps) statistics, never O(batch x steps x vocab).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from maxk.generate.backends import Sample, SamplingParams, prompt_token_ids, resolve_stop_token_ids
from maxk.generate.config import DEFAULT as _DEFAULT  # generate.transformers, generate.stop_tokens


def load_causal_lm(path: str, *, dtype: str, device: str, revision: str | None = None) -> Any:
    """A transformers causal LM in ``dtype`` (a torch dtype's name) on ``device``. On a CPU in bf16 or fp16
    its attention is eager: torch 2.13's CPU SDPA there calls an AVX-512 packing kernel on a CPU with AMX
    that a lower ``ATEN_CPU_CAPABILITY`` forbids ("pack_vnni2 is only supported when avx512 is
    supported"; the paper rehearsal's re-scoring under ``default`` failed on such a machine)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = getattr(torch, dtype)
    eager = str(device).startswith("cpu") and torch_dtype in (torch.bfloat16, torch.float16)
    extra = {"attn_implementation": "eager"} if eager else {}
    model = AutoModelForCausalLM.from_pretrained(path, revision=revision, dtype=torch_dtype, **extra)
    return model.to(device)


class _Sampler:
    """Logits processor that does the sampling: applies temperature/top-p, draws the next token by
    inverse-CDF sampling with its own seeded generator, records the exact entropy of that distribution
    and the log-prob of the drawn token, and returns scores whose argmax is the drawn token (``generate``
    runs greedy, so it emits exactly that token and handles stopping and padding as usual)."""

    def __init__(self, temperature: float, top_p: float, generator: Any) -> None:
        self.temperature, self.top_p = temperature, top_p
        self.generator = generator
        self.token_logps: list[Any] = []
        self.entropies: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        from maxk.generate.decode import draw_tokens

        u = torch.rand(scores.shape[0], generator=self.generator, dtype=torch.float64, device=scores.device)
        token, logp, entropy = draw_tokens(scores, u, self.temperature, self.top_p)
        self.entropies.append(entropy)
        self.token_logps.append(logp)
        return torch.full_like(scores, -float("inf")).scatter_(1, token[:, None], 0.0)

    def stats(self) -> tuple[Any, Any]:
        """``[batch, steps]`` log-probs of the drawn tokens and entropies (rows past a stop are junk)."""
        import torch

        return torch.stack(self.token_logps, dim=1), torch.stack(self.entropies, dim=1)


class TransformersBackend:
    """Sampling with ``model.generate`` on one device; see the module docstring."""

    name = "transformers"
    entropy_kind = "exact"
    prompts_per_call = 1  # one prompt's n samples fill a generate call

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        max_batch_size: int = _DEFAULT.transformers.max_batch_size,
        dtype: str = _DEFAULT.transformers.dtype,
        device: str = _DEFAULT.transformers.device,
        threads: int | None = None,
        share_prefix: bool = True,
        static_cache: bool = True,
        stop_tokens: Sequence[str] = tuple(_DEFAULT.stop_tokens),
        revision: str | None = None,
        decoder: str = "auto",
    ) -> None:
        import torch
        from transformers import AutoTokenizer, GenerationConfig

        if threads:
            torch.set_num_threads(int(threads))
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model_path = str(model_path)
        self.max_batch_size = int(max_batch_size)
        self.share_prefix = bool(share_prefix)
        self.static_cache = bool(static_cache)
        self.dtype = dtype
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, revision=revision)
        self.model = load_causal_lm(self.model_path, dtype=dtype, device=device, revision=revision)
        self.model.eval()
        self.max_model_len: int | None = getattr(self.model.config, "max_position_embeddings", None)
        model_eos = self.model.generation_config.eos_token_id
        self.stop_token_ids = resolve_stop_token_ids(self.tokenizer, model_eos, stop_tokens)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad) if pad is not None else self.stop_token_ids[0]
        # A bare generation config: the checkpoint's sampling defaults (Qwen ships temperature 0.7,
        # top-p 0.8, top-k 20, repetition penalty 1.05) must not leak into the paper's setting.
        self.model.generation_config = GenerationConfig(
            eos_token_id=self.stop_token_ids, pad_token_id=self.pad_token_id
        )
        if decoder not in ("auto", "generate"):
            raise ValueError(f"decoder must be 'auto' or 'generate', got {decoder!r}")
        from maxk.generate.decode import supports
        from maxk.generate.native import new_decoder

        self.decoder = new_decoder(self.model) if decoder == "auto" and supports(self.model) else None
        if self.decoder is not None:
            self.prompts_per_call = 64  # grouped into calls of at most max_batch_size rows

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entropy_kind": self.entropy_kind,
            "max_batch_size": self.max_batch_size,
            "share_prefix": self.share_prefix,
            "static_cache": self.static_cache,
            "decoder": "maxk.generate.decode" if self.decoder is not None else "model.generate",
            "decode_kernel": self.decoder.kernel if self.decoder is not None else None,
            "dtype": self.dtype,
            "device": self.device,
            "stop_token_ids": self.stop_token_ids,
        }

    def encode(self, prompt: str) -> list[int]:
        """Prompt ids, as vLLM tokenises a plain string prompt (``backends.prompt_token_ids``)."""
        return prompt_token_ids(self.tokenizer, prompt)

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int], params: SamplingParams
    ) -> list[list[Sample]]:
        if len(prompts) != len(seeds):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        if self.decoder is not None:
            return self._decode(prompts, seeds, params)
        return [self._generate_one(prompt, seed, params) for prompt, seed in zip(prompts, seeds, strict=True)]

    def _decode(
        self, prompts: Sequence[str], seeds: Sequence[int], params: SamplingParams
    ) -> list[list[Sample]]:
        """Through ``QwenDecoder``: as many prompts per call as fit in ``max_batch_size`` rows (>= 1)."""
        per_call = max(1, self.max_batch_size // params.n)
        out: list[list[Sample]] = []
        for lo in range(0, len(prompts), per_call):
            ids = [self.encode(p) for p in prompts[lo : lo + per_call]]
            if not all(ids):
                raise ValueError("empty prompt after tokenisation")
            res = self.decoder.sample(
                ids,
                params.n,
                max_new_tokens=params.max_new_tokens,
                stop_token_ids=self.stop_token_ids,
                seeds=seeds[lo : lo + per_call],
                temperature=params.temperature,
                top_p=params.top_p,
            )
            texts = res.texts(self.tokenizer)
            samples = [
                Sample(
                    completion=text,
                    num_tokens=len(t),
                    finish_reason="stop" if stop else "length",
                    sum_logprob=float(lp),
                    mean_entropy=float(ent) / max(len(t), 1),
                    entropy_kind="exact",
                    token_ids=t,
                )
                for text, t, stop, lp, ent in zip(
                    texts, res.token_ids, res.stopped, res.sum_logprob, res.sum_entropy, strict=True
                )
            ]
            out += [samples[i * params.n : (i + 1) * params.n] for i in range(len(ids))]
        return out

    def _generate_one(self, prompt: str, seed: int, params: SamplingParams) -> list[Sample]:
        import torch

        ids = self.encode(prompt)
        if not ids:
            raise ValueError("empty prompt after tokenisation")
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        generator = torch.Generator(device=self.device).manual_seed(int(seed))
        samples: list[Sample] = []
        remaining = params.n
        while remaining > 0:
            chunk = min(remaining, self.max_batch_size)
            samples.extend(self._generate_chunk(input_ids, chunk, params, generator))
            remaining -= chunk
        return samples

    def _generate_chunk(
        self, input_ids: Any, chunk: int, params: SamplingParams, generator: Any
    ) -> list[Sample]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        sampler = _Sampler(params.temperature, params.top_p, generator)
        batch_ids = input_ids.expand(chunk, -1)
        cache = None
        if self.share_prefix and input_ids.shape[1] > 1:
            # Prefill the prompt (all but its last token) once and copy the KV cache to every
            # sequence: the n samples share the prompt, so this saves (n - 1) prompt forwards.
            with torch.inference_mode():
                prefix = self.model(input_ids[:, :-1], use_cache=True).past_key_values
            if self.static_cache:
                from transformers import StaticCache

                cache = StaticCache(
                    config=self.model.config, max_cache_len=input_ids.shape[1] + params.max_new_tokens
                )
                for i, layer in enumerate(prefix.layers):  # preallocated: no per-step torch.cat
                    cache.update(
                        layer.keys.expand(chunk, -1, -1, -1), layer.values.expand(chunk, -1, -1, -1), i
                    )
            else:
                cache = prefix
                cache.batch_repeat_interleave(chunk)
        config = GenerationConfig(
            do_sample=False,  # the sampling happens in _Sampler; greedy picks its token
            repetition_penalty=1.0,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.stop_token_ids,
            pad_token_id=self.pad_token_id,
            use_cache=True,
        )
        with torch.inference_mode():
            sequences = self.model.generate(
                batch_ids,
                attention_mask=torch.ones_like(batch_ids),
                past_key_values=cache,
                generation_config=config,
                logits_processor=LogitsProcessorList([sampler]),
            )
        generated = sequences[:, input_ids.shape[1] :].cpu()
        token_logps, entropies = sampler.stats()
        return self._to_samples(generated, token_logps.cpu().double(), entropies.cpu().double())

    def _to_samples(self, generated: Any, token_logps: Any, entropies: Any) -> list[Sample]:
        import torch

        steps = generated.shape[1]
        is_stop = torch.isin(generated, torch.tensor(self.stop_token_ids))
        has_stop = is_stop.any(dim=1)
        first_stop = torch.where(
            has_stop, is_stop.int().argmax(dim=1), torch.full_like(has_stop, steps, dtype=torch.long)
        )
        lengths = torch.where(has_stop, first_stop + 1, torch.full_like(first_stop, steps))
        mask = torch.arange(steps)[None, :] < lengths[:, None]
        sum_logprob = (token_logps * mask).sum(dim=1)
        mean_entropy = (entropies * mask).sum(dim=1) / lengths.clamp(min=1)
        texts = self.tokenizer.batch_decode(
            [row[: int(n)].tolist() for row, n in zip(generated, first_stop, strict=True)],
            skip_special_tokens=True,
        )
        out = []
        for i, text in enumerate(texts):
            n = int(lengths[i])
            out.append(
                Sample(
                    completion=text,
                    num_tokens=n,
                    finish_reason="stop" if bool(has_stop[i]) else "length",
                    sum_logprob=float(sum_logprob[i]),
                    mean_entropy=float(mean_entropy[i]),
                    entropy_kind="exact",
                    token_ids=generated[i, :n].tolist(),
                )
            )
        return out
