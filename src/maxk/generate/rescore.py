"""Re-score a fixed subsample of generated samples with transformers: the full-vocabulary entropy.

vLLM returns only the top-``k`` log-probs of each position, so the entropy it allows
(``maxk.generate.vllm.approx_entropy``) is a lower bound: the tokens outside the top ``k`` count as one
bucket. This module runs the generating model once more, teacher-forced on the sampled completions,
and reads at every position the whole distribution the token was drawn from (the logits after
temperature and top-p: ``maxk.generate.decode.sampling_logprobs``, the function the transformers
backend samples with). Per sample it gives

- ``entropy_full``: the mean over positions of ``-sum_v p(v) log p(v)`` (exact, full vocabulary);
- ``nll_rescored``: the mean negative log-prob of the sampled tokens under the same forward pass.

Beside them it keeps what the samples file already had: ``entropy_sampled`` (the top-``k`` bound with
vLLM, the exact value with transformers) and ``nll_sampled`` (``-sum_logprob / num_tokens``, the
estimate figure 2 reads at paper scale). ``maxk.analysis.figures.entropy_estimates`` puts them side by
side, with the gap.

The samples file stores text, not token ids, so the completion is re-tokenised. Where the stop token
ended a sample its id is not in the text; the entropy of that last position needs no id (it depends
only on the prefix), and its log-prob is that of the most likely stop id. ``tokens_match`` says
whether the re-tokenised length equals the sampled ``num_tokens``; a sample that does not match was
not scored on its own token sequence and is left out of the comparison (counted in the summary).

The subsample is fixed by position, not drawn: the first ``problems`` problems of the samples file
(dataset order) and their samples with ``sample_index < samples``, so every model is re-scored on the
same problems and sample indices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from maxk.generate.config import DEFAULT, GenerateConfig


def select_subsample(samples: Any, problems: int, per_problem: int) -> Any:
    """The first ``problems`` problem ids of ``samples`` (a samples DataFrame, in file order) and, of
    each, the rows with ``sample_index < per_problem``, ordered by (problem, sample index)."""
    if problems < 1 or per_problem < 1:
        raise ValueError(f"problems and samples per problem must be >= 1, got {problems}, {per_problem}")
    order = list(dict.fromkeys(samples["problem_id"]))[:problems]
    rank = {pid: i for i, pid in enumerate(order)}
    keep = samples[samples["problem_id"].isin(rank) & (samples["sample_index"] < per_problem)]
    keep = keep.assign(_rank=keep["problem_id"].map(rank))
    return (
        keep.sort_values(["_rank", "sample_index"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


@dataclass(frozen=True)
class ForcedSample:
    """One sample to re-score: prompt ids, the completion's re-tokenised ids, and whether a stop token
    followed them (one more position, whose id is not known from the text)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    stopped: bool

    @property
    def positions(self) -> int:
        return len(self.completion_ids) + int(self.stopped)


def score_sequences(
    model: Any,
    sequences: Sequence[ForcedSample],
    *,
    temperature: float,
    top_p: float,
    stop_token_ids: Sequence[int],
    batch_size: int,
    device: str = DEFAULT.transformers.device,
) -> list[tuple[float, float]]:
    """``(sum of entropies, sum of sampled log-probs)`` over each sequence's completion positions.

    One forward pass per batch: left-padded, with position ids counted from each row's first real
    token, and only the last ``max(positions) + 1`` logits computed (``logits_to_keep``), so memory is
    batch x completion length x vocabulary, never the prompt's length. Completion position ``t`` is
    predicted by the logit at input position ``len(prompt) + t - 1``. A stop position's log-prob is the
    largest over ``stop_token_ids``.
    """
    import torch

    from maxk.generate.decode import entropy_of, sampling_logprobs

    stops = torch.tensor(list(stop_token_ids), dtype=torch.long, device=device)
    out: list[tuple[float, float]] = []
    for lo in range(0, len(sequences), batch_size):
        batch = sequences[lo : lo + batch_size]
        rows = [s.prompt_ids + s.completion_ids for s in batch]
        width = max(len(r) for r in rows)
        # left-padded, so every completion ends the row and only the last `keep` logits are computed
        keep = max(s.positions for s in batch) + 1
        ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
        mask = torch.zeros(len(rows), width, dtype=torch.long, device=device)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(
                input_ids=ids, attention_mask=mask, position_ids=position_ids, logits_to_keep=keep
            ).logits
        for i, s in enumerate(batch):
            if s.positions == 0:
                out.append((0.0, 0.0))
                continue
            # the row's last logit (kept index keep - 1) follows the completion's last token and predicts
            # the stop position; completion token t is predicted by kept index keep - 1 - C + t
            first = keep - 1 - len(s.completion_ids)
            end = first + s.positions
            logp = sampling_logprobs(logits[i, first:end], temperature, top_p)
            entropy = entropy_of(logp)
            drawn = torch.tensor(s.completion_ids, dtype=torch.long, device=device)
            lp = logp[: len(s.completion_ids)].gather(1, drawn[:, None]).sum()
            if s.stopped:
                lp = lp + logp[-1, stops].max()
            out.append((float(entropy.sum()), float(lp)))
    return out


def rescore_samples(
    model: Any,
    tokenizer: Any,
    samples: Any,
    prompts: Mapping[str, str],
    *,
    temperature: float,
    top_p: float,
    stop_token_ids: Sequence[int],
    batch_size: int,
    device: str = DEFAULT.transformers.device,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row (the columns of ``rescore_schema``) per row of ``samples`` (already subsampled);
    ``prompts`` maps each problem id to the prompt text the samples were generated from."""
    from maxk.generate.backends import prompt_token_ids

    encoded: dict[str, list[int]] = {}
    seqs: list[ForcedSample] = []
    records = samples.to_dict("records")
    for r in records:
        pid = r["problem_id"]
        if pid not in prompts:
            raise ValueError(f"problem {pid!r} of the samples file is not in the problems file")
        if pid not in encoded:
            encoded[pid] = prompt_token_ids(tokenizer, prompts[pid])
        comp = list(tokenizer(r["completion"], add_special_tokens=False)["input_ids"])
        seqs.append(ForcedSample(encoded[pid], comp, r["finish_reason"] == "stop"))
    rows: list[dict[str, Any]] = []
    for lo in range(0, len(seqs), batch_size):
        chunk = seqs[lo : lo + batch_size]
        sums = score_sequences(
            model, chunk, temperature=temperature, top_p=top_p, stop_token_ids=stop_token_ids,
            batch_size=batch_size, device=device,
        )  # fmt: skip
        for r, s, (ent, lp) in zip(records[lo : lo + batch_size], chunk, sums, strict=True):
            n = s.positions
            tokens = int(r["num_tokens"])
            sampled = r["mean_entropy"]
            rows.append(
                {
                    "problem_id": r["problem_id"],
                    "sample_index": int(r["sample_index"]),
                    "num_tokens": tokens,
                    "rescored_tokens": n,
                    "tokens_match": n == tokens,
                    "entropy_full": ent / n if n else math.nan,
                    "nll_rescored": -lp / n if n else math.nan,
                    "entropy_sampled": None if sampled is None or _isnan(sampled) else float(sampled),
                    "entropy_kind": r["entropy_kind"],
                    "nll_sampled": -float(r["sum_logprob"]) / tokens if tokens else math.nan,
                }
            )
        if progress is not None:
            progress(len(chunk))
    return rows


def _isnan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def rescore_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("problem_id", pa.string()),
            ("sample_index", pa.int32()),
            ("num_tokens", pa.int32()),
            ("rescored_tokens", pa.int32()),
            ("tokens_match", pa.bool_()),
            ("entropy_full", pa.float64()),
            ("nll_rescored", pa.float64()),
            ("entropy_sampled", pa.float64()),
            ("entropy_kind", pa.string()),
            ("nll_sampled", pa.float64()),
        ]
    )


def run_rescore(
    *,
    model_dir: str,
    model_name: str,
    samples_path: str,
    problems: Sequence[dict[str, Any]],
    build_prompt: Callable[[Any, dict[str, Any]], str],
    generate_config: GenerateConfig,
    subsample: tuple[int, int],
    output: str,
    config: Any = None,
    model_info: Mapping[str, Any] | None = None,
    threads: int | None = None,
    batch_size: int,
) -> dict[str, Any]:
    """Re-score the fixed subsample of ``samples_path`` (``subsample`` = (problems, samples per
    problem)) with the model in ``model_dir`` and write ``output`` (Parquet) and its manifest.

    Temperature and top-p are read from the samples file's manifest (the distribution actually sampled);
    dtype and device from ``generate_config.transformers``; ``batch_size`` samples per forward pass;
    ``build_prompt(tokenizer, problem)`` rebuilds each prompt as generation built it.
    """
    import json

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoTokenizer

    from maxk.generate.backends import resolve_stop_token_ids
    from maxk.generate.hf import load_causal_lm
    from maxk.generate.run import file_sha256, manifest_path, progress_bar
    from maxk.io import atomic_path, write_json
    from maxk.provenance import provenance_record

    mpath = manifest_path(samples_path)
    try:
        sampled = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{mpath}: cannot read the samples manifest ({exc})") from exc
    if sampled.get("model_name") != model_name:
        raise ValueError(f"{samples_path}: sampled by {sampled.get('model_name')!r}, not {model_name!r}")
    temperature = float(sampled["sampling"]["temperature"])
    top_p = float(sampled["sampling"]["top_p"])
    frame = select_subsample(pd.read_parquet(samples_path), *subsample)
    hf = generate_config.transformers
    if threads:
        torch.set_num_threads(int(threads))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = load_causal_lm(model_dir, dtype=hf.dtype, device=hf.device)
    model.eval()
    stop_ids = resolve_stop_token_ids(
        tokenizer, model.generation_config.eos_token_id, generate_config.stop_tokens
    )
    by_id = {p["id"]: p for p in problems}
    wanted = list(dict.fromkeys(frame["problem_id"]))
    missing = [pid for pid in wanted if pid not in by_id]
    if missing:
        raise ValueError(f"{samples_path}: problems {missing[:3]} are not in the problems file")
    prompts = {pid: build_prompt(tokenizer, by_id[pid]) for pid in wanted}
    bar = progress_bar(len(frame), f"rescore {model_name}/{sampled.get('dataset')}")
    bar.unit = "sample"
    try:
        rows = rescore_samples(
            model, tokenizer, frame, prompts, temperature=temperature, top_p=top_p,
            stop_token_ids=stop_ids, batch_size=batch_size, device=hf.device,
            progress=bar.update,
        )  # fmt: skip
    finally:
        bar.close()
    table = pa.Table.from_pylist(rows, schema=rescore_schema())
    with atomic_path(output) as tmp:
        pq.write_table(table, tmp, compression="zstd")
        digest = file_sha256(tmp)
    matched = sum(r["tokens_match"] for r in rows)
    manifest = provenance_record(
        config,
        kind="entropy_rescore",
        model_name=model_name,
        model=dict(model_info or {"path": model_dir}),
        dataset=sampled.get("dataset"),
        samples={"path": str(samples_path), "sha256": file_sha256(samples_path)},
        sampling={"temperature": temperature, "top_p": top_p},
        subsample={"problems": subsample[0], "samples_per_problem": subsample[1]},
        stop_token_ids=stop_ids,
        num_rows=len(rows),
        tokens_matched=int(matched),
        output_sha256=digest,
    )
    write_json(manifest_path(output), manifest)
    return manifest
