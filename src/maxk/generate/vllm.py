"""vLLM adapter (GPUs): one ``LLM`` per job, ``SamplingParams(n=..., seed=..., logprobs=...)`` per prompt.

vLLM is imported lazily (it is in the ``gpu`` extra only). The adapter reads the documented fields of
vLLM's outputs: ``RequestOutput.outputs`` -> ``CompletionOutput(index, text, token_ids,
cumulative_logprob, logprobs, finish_reason, stop_reason)``, where ``logprobs`` is one
``{token_id: Logprob(logprob, rank, decoded_token)}`` mapping per generated token containing the
sampled token plus the top-``k`` tokens; the adapter asks for vLLM's ``FlatLogprobs`` (the same entries
in flat lists, a constant number of Python objects per completion) and reads those lists directly.

Log-probs: the LLM is built with ``logprobs_mode="processed_logprobs"`` (configurable), so they refer to
the distribution after temperature/top-p, like the transformers backend. Entropy: vLLM returns only the
top-``k`` log-probs, so the entropy is **approximate** (``entropy_kind="approx"``): the top tokens'
``-p log p`` plus the rest of the mass ``r`` as one bucket ``-r log r``. Merging outcomes can only lower
entropy, so this is a lower bound of the exact value that tightens as ``k`` grows. With
``entropy_top_logprobs: 0`` no entropy is computed (``entropy_kind="none"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from maxk.generate.backends import Sample, SamplingParams, resolve_stop_token_ids
from maxk.generate.config import DEFAULT as _DEFAULT  # generate.vllm, generate.stop_tokens


def approx_entropy(position: Mapping[int, Any]) -> float:
    """Lower-bound entropy from one position's returned log-probs (top-k plus the sampled token)."""
    ps = [math.exp(lp.logprob) for lp in position.values() if lp.logprob > -math.inf]
    h = -sum(p * math.log(p) for p in ps if p > 0)
    rest = 1.0 - sum(ps)
    if rest > 1e-12:
        h -= rest * math.log(rest)
    return h


def flat_statistics(flat: Any, token_ids: Sequence[int]) -> tuple[float, float]:
    """``(sum of the sampled tokens' log-probs, sum over positions of approx_entropy)`` of vLLM's
    ``FlatLogprobs`` (``SamplingParams(flat_logprobs=True)``), read from its flat lists without building
    a mapping per position. Each position holds the sampled token exactly once (vLLM adds it to the
    top-k when it is not among them)."""
    import numpy as np

    starts, ends = np.asarray(flat.start_indices), np.asarray(flat.end_indices)
    ids, lps = np.asarray(flat.token_ids), np.asarray(flat.logprobs, dtype=np.float64)
    position = np.repeat(np.arange(len(starts)), ends - starts)
    sampled = ids == np.asarray(token_ids)[position]
    if np.bincount(position[sampled], minlength=len(starts)).tolist() != [1] * len(starts):
        raise RuntimeError("vLLM's flat log-probs lack the sampled token at some position")
    p = np.exp(lps)  # -inf -> 0
    terms = -p * np.where(p > 0, lps, 0.0)  # a -inf log-prob (p = 0) adds nothing
    entropy = np.bincount(position, weights=terms, minlength=len(starts))
    rest = 1.0 - np.bincount(position, weights=p, minlength=len(starts))
    tail = rest > 1e-12
    entropy[tail] -= rest[tail] * np.log(rest[tail])
    return float(lps[sampled].sum()), float(entropy.sum())


def convert_completion(output: Any, *, entropy_top_logprobs: int) -> Sample:
    """One vLLM ``CompletionOutput`` -> :class:`Sample`. The sampled token's log-prob is read from
    each position's mapping (vLLM always includes it); ``cumulative_logprob`` is the fallback."""
    token_ids = list(output.token_ids)
    if output.finish_reason not in ("stop", "length"):
        raise RuntimeError(f"vLLM completion {output.index} finished with {output.finish_reason!r}")
    positions = output.logprobs
    if positions is not None and len(positions) != len(token_ids):
        raise RuntimeError(f"vLLM returned {len(positions)} logprob positions for {len(token_ids)} tokens")
    flat = positions is not None and hasattr(positions, "start_indices")
    if flat:
        sum_logprob, sum_entropy = flat_statistics(positions, token_ids)
    elif positions is not None:
        sum_logprob = float(sum(pos[tok].logprob for pos, tok in zip(positions, token_ids, strict=True)))
    elif output.cumulative_logprob is not None:
        sum_logprob = float(output.cumulative_logprob)
    else:
        raise RuntimeError("vLLM returned neither logprobs nor cumulative_logprob (request logprobs >= 0)")
    if entropy_top_logprobs > 0 and positions is not None and token_ids:
        total = sum_entropy if flat else sum(approx_entropy(pos) for pos in positions)
        mean_entropy: float | None = total / len(token_ids)
        kind = "approx"
    else:
        mean_entropy, kind = None, "none"
    return Sample(
        completion=output.text,
        num_tokens=len(token_ids),
        finish_reason=output.finish_reason,
        sum_logprob=sum_logprob,
        mean_entropy=mean_entropy,
        entropy_kind=kind,
        token_ids=token_ids,
    )


class VLLMBackend:
    """See the module docstring. ``llm_factory`` and ``sampling_params_cls`` default to vLLM's ``LLM``
    and ``SamplingParams``; tests pass stand-ins with the same signatures and output objects."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        revision: str | None = None,
        tensor_parallel_size: int = _DEFAULT.vllm.tensor_parallel_size,
        gpu_memory_utilization: float = _DEFAULT.vllm.gpu_memory_utilization,
        max_model_len: int | None = _DEFAULT.vllm.max_model_len,
        dtype: str = _DEFAULT.vllm.dtype,
        entropy_top_logprobs: int = _DEFAULT.vllm.entropy_top_logprobs,
        logprobs_mode: str = _DEFAULT.vllm.logprobs_mode,
        enforce_eager: bool = _DEFAULT.vllm.enforce_eager,
        stop_tokens: Sequence[str] = tuple(_DEFAULT.stop_tokens),
        seed: int = 0,
        prompts_per_call: int = _DEFAULT.vllm.prompts_per_call,
        llm_factory: Callable[..., Any] | None = None,
        sampling_params_cls: Callable[..., Any] | None = None,
    ) -> None:
        if llm_factory is None or sampling_params_cls is None:
            try:
                import vllm
            except ImportError as exc:  # pragma: no cover - depends on the GPU environment
                raise RuntimeError(
                    "backend 'vllm' needs the gpu extra (pip install 'maxk[gpu]'); "
                    "use backend 'transformers' on CPU"
                ) from exc
            llm_factory = llm_factory or vllm.LLM
            sampling_params_cls = sampling_params_cls or vllm.SamplingParams
        self.sampling_params_cls = sampling_params_cls
        self.entropy_top_logprobs = int(entropy_top_logprobs)
        self.entropy_kind = "approx" if self.entropy_top_logprobs > 0 else "none"
        self.settings = {
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            "dtype": dtype,
            "logprobs_mode": logprobs_mode,
            "enforce_eager": enforce_eager,
        }
        self.llm = llm_factory(
            model=model_path,
            revision=revision,
            seed=seed,
            max_logprobs=max(self.entropy_top_logprobs, 20),
            **self.settings,
        )
        self.prompts_per_call = int(prompts_per_call)
        self.tokenizer = self.llm.get_tokenizer()
        # The limit vLLM settled on (the model's own when max_model_len is null).
        engine_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        engine_len = getattr(engine_config, "max_model_len", None)
        self.max_model_len: int | None = engine_len or max_model_len
        self.stop_token_ids = resolve_stop_token_ids(self.tokenizer, None, stop_tokens)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entropy_kind": self.entropy_kind,
            "entropy_top_logprobs": self.entropy_top_logprobs,
            "prompts_per_call": self.prompts_per_call,
            "stop_token_ids": self.stop_token_ids,
            **self.settings,
        }

    def make_sampling_params(self, seed: int, params: SamplingParams) -> Any:
        return self.sampling_params_cls(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            max_tokens=params.max_new_tokens,
            seed=int(seed),
            logprobs=self.entropy_top_logprobs,
            stop_token_ids=self.stop_token_ids,
            skip_special_tokens=True,
            # flat lists instead of one {token: Logprob} mapping per position: a call of 64 prompts x
            # 256 samples x 256 tokens x 21 log-probs is ~88 M Logprob objects otherwise
            # (benchmarks/bench_vllm_logprobs.py)
            flat_logprobs=True,
        )

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int], params: SamplingParams
    ) -> list[list[Sample]]:
        if len(prompts) != len(seeds):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        sampling = [self.make_sampling_params(seed, params) for seed in seeds]
        outputs = self.llm.generate(list(prompts), sampling, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} request outputs for {len(prompts)} prompts")
        results = []
        for request in outputs:
            completions = sorted(request.outputs, key=lambda o: o.index)
            if [o.index for o in completions] != list(range(params.n)):
                raise RuntimeError(
                    f"vLLM request {request.request_id}: expected completions 0..{params.n - 1}"
                )
            results.append(
                [convert_completion(o, entropy_top_logprobs=self.entropy_top_logprobs) for o in completions]
            )
        return results
