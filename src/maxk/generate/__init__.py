"""Sampling n completions per problem (transformers on CPU, vLLM on GPUs).

Cheap to import: torch, transformers and vLLM are imported only by the backends that need them.

- ``maxk.generate.backends``  the backend interface, ``SamplingParams`` and ``Sample``
- ``maxk.generate.hf``        transformers backend (exact per-token entropy)
- ``maxk.generate.vllm``      vLLM adapter (approximate entropy from top log-probs, or none)
- ``maxk.generate.extract``   the program a completion holds (also used by the training reward)
- ``maxk.generate.run``       sharding, seeds, checkpoints, Parquet rows, manifests, merging
- ``maxk.generate.testing``   a tiny random Qwen2 + tokenizer for tests and benchmarks
"""
