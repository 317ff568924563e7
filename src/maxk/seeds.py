"""Every seed the pipeline derives from the config's ``seed``, in one place (shared by every stage).

Two derivations, with distinct names because they mean different things and must never change
(each change would change every result made with it):

- ``derive_seed(seed, *labels)``: a seed for one labelled use (a bootstrap, a rollout step, the
  held-out subset, the estimator lab), from the master seed and any labels.
- ``problem_seed(seed, model, dataset, problem_id)``: the generation seed of one (model, dataset,
  problem), independent of shards and of the order problems are generated in, so a shard regenerated
  alone reproduces its rows. With common random numbers (``generate.common_random_numbers``) every
  model passes ``COMMON_STREAM`` as its model: sample j of a problem then draws the same uniforms in
  every model (the decode loop draws n per prompt per step, by sample index).
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["COMMON_STREAM", "derive_seed", "problem_seed"]

#: the model name every model's generation seed uses under common random numbers (no model is named so)
COMMON_STREAM = "*"


def derive_seed(seed: int, *labels: object) -> int:
    """A stable 63-bit seed from a master seed and labels (same on every machine and Python)."""
    text = "\x1f".join([str(int(seed)), *map(str, labels)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def problem_seed(seed: int, model: str, dataset: str, problem_id: str) -> int:
    """A 63-bit seed for generating one (model, dataset, problem), independent of shard layout and order."""
    key = json.dumps([int(seed), model, dataset, problem_id], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") >> 1
