"""transformers backend (CPU or a small GPU): exact per-token entropy and log-probs from the logits.

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

from maxk.generate.backends import Sample, SamplingParams, resolve_stop_token_ids

#: Token strings that end a completion when they exist in the vocabulary (chat end tokens).
DEFAULT_STOP_TOKENS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>")


class _Sampler:
    """Logits processor that does the sampling: applies temperature/top-p, draws the next token by
    inverse-CDF sampling with its own seeded generator, records the exact entropy of that distribution
    and the log-prob of the drawn token, and returns scores whose argmax is the drawn token (``generate``
    runs greedy, so it emits exactly that token and handles stopping and padding as usual)."""

    def __init__(self, temperature: float, top_p: float, generator: Any) -> None:
        from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

        self.warpers: list[Any] = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
        self.generator = generator
        self.token_logps: list[Any] = []
        self.entropies: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        scores = scores.float()
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        logp = torch.log_softmax(scores, dim=-1)
        p = logp.exp()
        # Tokens removed by top-p have p = 0 and logp = -inf; they contribute 0 to the entropy.
        self.entropies.append(-(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1))
        cdf = p.double().cumsum(-1)
        u = torch.rand((p.shape[0], 1), generator=self.generator, dtype=torch.float64, device=p.device)
        token = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=p.shape[1] - 1)
        bad = p.gather(1, token) == 0  # only if rounding pushed u onto the last cdf value
        if bool(bad.any()):
            token = torch.where(bad, p.argmax(-1, keepdim=True), token)
        self.token_logps.append(logp.gather(1, token).squeeze(1))
        return torch.full_like(scores, -float("inf")).scatter_(1, token, 0.0)

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
        max_batch_size: int = 256,
        dtype: str = "float32",
        device: str = "cpu",
        threads: int | None = None,
        share_prefix: bool = True,
        static_cache: bool = True,
        stop_tokens: Sequence[str] = DEFAULT_STOP_TOKENS,
        revision: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

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
        self.model = AutoModelForCausalLM.from_pretrained(
            self.model_path, revision=revision, dtype=getattr(torch, dtype)
        ).to(device)
        self.model.eval()
        model_eos = self.model.generation_config.eos_token_id
        self.stop_token_ids = resolve_stop_token_ids(self.tokenizer, model_eos, stop_tokens)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad) if pad is not None else self.stop_token_ids[0]
        # A bare generation config: the checkpoint's sampling defaults (Qwen ships temperature 0.7,
        # top-p 0.8, top-k 20, repetition penalty 1.05) must not leak into the paper's setting.
        self.model.generation_config = GenerationConfig(
            eos_token_id=self.stop_token_ids, pad_token_id=self.pad_token_id
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entropy_kind": self.entropy_kind,
            "max_batch_size": self.max_batch_size,
            "share_prefix": self.share_prefix,
            "static_cache": self.static_cache,
            "dtype": self.dtype,
            "device": self.device,
            "stop_token_ids": self.stop_token_ids,
        }

    def encode(self, prompt: str) -> list[int]:
        """Prompt ids. Special tokens are added unless the prompt already starts with the BOS text
        (a chat-templated prompt), matching how vLLM tokenises a plain string prompt."""
        bos = self.tokenizer.bos_token
        add = not (bos and prompt.startswith(bos))
        return list(self.tokenizer(prompt, add_special_tokens=add)["input_ids"])

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int], params: SamplingParams
    ) -> list[list[Sample]]:
        if len(prompts) != len(seeds):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        return [self._generate_one(prompt, seed, params) for prompt, seed in zip(prompts, seeds, strict=True)]

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
