"""The wire between the trusted scorer, the sandbox worker and its children: one definition of each.

Standard library only: the worker (``_worker.py``, run as a script) loads this module by path before
any isolation step; the trusted side imports it as ``maxk.sandbox.wire``.

* **Framing**: a 4-byte big-endian length, then the body (UTF-8 JSON, or raw bytes for the program
  frame from worker to child: JSON header, newline, marshal bytes).
* **Operations** (orchestrator -> worker, ``{"op": ...}``) and **statuses** (every reply,
  ``{"status": ...}``), each a constant below.
* **Values**: a value crosses as ``[tag, payload]`` with exact builtin types only (``N`` None, ``B``
  bool, ``I`` int in hex, ``F`` float in ``float.hex``, ``C`` complex, ``S`` str, ``Y`` bytes in hex,
  ``L``/``T``/``E``/``Z`` list/tuple/set/frozenset, ``D`` dict as pairs). The decoder checks every tag
  and payload type and rebuilds fresh builtin objects, so nothing the child returns can carry
  behaviour (no ``__eq__`` overrides, no subclasses, no pickle). Anything malformed is rejected.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

# -- operations (orchestrator -> worker) -----------------------------------------------------------
OP_STDIO = "stdio"  # run a program on each stdin; reply DONE with one result per input
OP_LOAD = "load"  # start a call program in a child (and answer prefetched calls); reply READY or a failure
OP_CALL = "call"  # one call of the loaded program's entry point
OP_SYNC = "sync"  # answered once every earlier clean-up has run
OP_END = "end"  # end the loaded program's child
OP_EXIT = "exit"  # stop the worker

# -- statuses (every reply) --------------------------------------------------------------------------
HELLO = "hello"  # the worker is set up (with its layers and notes)
SETUP_FAILED = "setup_failed"
DONE = "done"  # OP_STDIO: every input was run
SYNCED = "synced"
ENDED = "ended"
STALE = "stale"  # OP_CALL for a program that is no longer the loaded one
READY = "ready"  # the program ran and its entry point waits for calls
RETURNED = "returned"  # a call returned (the value follows, tagged)
RETURNED_UNSUPPORTED = "returned_unsupported"  # ... a value that cannot cross the boundary
RAISED = "raised"  # a call raised (the exception's class name follows)
EXIT_OK = "exit_ok"  # a stdio program exited with status 0 (its stdout follows)
# how a program failed; each is also the verdict of the case it failed
SYNTAX_ERROR = "syntax_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MEMORY = "memory"
OUTPUT_LIMIT = "output_limit"
SANDBOX_ERROR = "sandbox_error"

#: replies after which the call program's child is still alive
ALIVE = (READY, RETURNED, RAISED, RETURNED_UNSUPPORTED)
#: replies to a call that the child survived
CALL_REPLIES = (RETURNED, RAISED, RETURNED_UNSUPPORTED)
#: how a run can fail once the program compiled (each passes through as a verdict)
FAILURES = (RUNTIME_ERROR, TIMEOUT, MEMORY, OUTPUT_LIMIT, SANDBOX_ERROR)


# -- framing ----------------------------------------------------------------------------------------


def frame(obj: object) -> bytes:
    """One frame: 4-byte big-endian length, then compact UTF-8 JSON."""
    data = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(data)) + data


def send_frame(fd: int, obj: object) -> None:
    view = memoryview(frame(obj))
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """Read exactly ``n`` bytes; None on EOF; raises TimeoutError past ``deadline``."""
    chunks = []
    while n > 0:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class FrameTooLarge(Exception):
    pass


LAST_FRAME = [0]  # size of the last frame ``recv_frame`` returned (bounds what the worker holds)


def recv_frame(
    fd: int, deadline: float | None = None, limit: int = 1 << 30, exact: bool = False
) -> object | None:
    """One frame. On a strictly request/response channel a first large read usually gets it all;
    ``exact`` reads never past the frame (the orchestrator pipelines requests to the worker)."""
    if exact:
        head = _read_exact(fd, 4, deadline)
        if head is None:
            return None
        (size,) = struct.unpack(">I", head)
        if size > limit:
            raise FrameTooLarge
        body = _read_exact(fd, size, deadline)
        return None if body is None else json.loads(body)
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
    first = os.read(fd, 65536)
    if not first:
        return None
    if len(first) < 4:
        rest = _read_exact(fd, 4 - len(first), deadline)
        if rest is None:
            return None
        first += rest
    (size,) = struct.unpack(">I", first[:4])
    if size > limit:
        raise FrameTooLarge
    LAST_FRAME[0] = size
    body = first[4 : 4 + size]  # bytes past the frame can only come from a misbehaving child: dropped
    if len(body) < size:
        rest = _read_exact(fd, size - len(body), deadline)
        if rest is None:
            return None
        body += rest
    return json.loads(body)


def send_bytes(fd: int, data: bytes) -> None:
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def recv_bytes(fd: int) -> bytes:
    head = _read_exact(fd, 4, None)
    if head is None:
        raise EOFError
    body = _read_exact(fd, struct.unpack(">I", head)[0], None)
    if body is None:
        raise EOFError
    return body


# -- tagged values ----------------------------------------------------------------------------------


MAX_DEPTH = 200
MAX_INT_HEX_DIGITS = 100_000


class Unsupported(TypeError):
    """A value that cannot cross the boundary (not an exact builtin type)."""


class Malformed(ValueError):
    """A reply that is not valid tagged data."""


def encode(value: Any, depth: int = 0) -> list:
    """Tagged JSON of exact builtin types; anything else is ``Unsupported``. Used by both sides: for
    call arguments (trusted) and return values (child, where numpy values cross via ``tolist``)."""
    if depth > MAX_DEPTH:
        raise Unsupported("nested too deeply")
    t = type(value)
    if value is None:
        return ["N"]
    if t is bool:
        return ["B", value]
    if t is int:
        return ["I", format(value, "x")]
    if t is float:
        return ["F", value.hex()]
    if t is str:
        return ["S", value]
    if t in (list, tuple, set, frozenset):
        tag = {list: "L", tuple: "T", set: "E", frozenset: "Z"}[t]
        return [tag, [encode(x, depth + 1) for x in value]]
    if t is dict:
        return ["D", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    if t is complex:
        return ["C", value.real.hex(), value.imag.hex()]
    if t is bytes:
        return ["Y", value.hex()]
    if getattr(t, "__module__", "") == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), depth + 1)
    raise Unsupported(f"cannot send a {t.__name__} to the sandbox")


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise Malformed(what)


def decode(node: Any, depth: int = 0) -> Any:
    """Rebuild a value from tagged JSON, checking every tag and payload type exactly (used by both
    sides: return values from the child are untrusted)."""
    _expect(depth <= MAX_DEPTH, "nested too deeply")
    _expect(type(node) is list and len(node) >= 1 and type(node[0]) is str, "bad node")
    tag = node[0]
    n = len(node)
    if tag == "N":
        _expect(n == 1, "N")
        return None
    if tag == "B":
        _expect(n == 2 and type(node[1]) is bool, "B")
        return node[1] is True
    if tag == "I":
        _expect(n == 2 and type(node[1]) is str and 0 < len(node[1]) <= MAX_INT_HEX_DIGITS, "I")
        try:
            return int(node[1], 16)
        except ValueError as exc:
            raise Malformed("I") from exc
    if tag == "F":
        _expect(n == 2 and type(node[1]) is str and len(node[1]) < 64, "F")
        try:
            return float.fromhex(node[1])
        except ValueError as exc:
            raise Malformed("F") from exc
    if tag == "S":
        _expect(n == 2 and type(node[1]) is str, "S")
        return str(node[1])
    if tag in ("L", "T", "E", "Z"):
        _expect(n == 2 and type(node[1]) is list, tag)
        items = [decode(x, depth + 1) for x in node[1]]
        try:
            return {"L": list, "T": tuple, "E": set, "Z": frozenset}[tag](items)
        except TypeError as exc:  # unhashable member of a set
            raise Malformed(tag) from exc
    if tag == "D":
        _expect(n == 2 and type(node[1]) is list, "D")
        out = {}
        for pair in node[1]:
            _expect(type(pair) is list and len(pair) == 2, "D pair")
            try:
                out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
            except TypeError as exc:
                raise Malformed("D key") from exc
        return out
    if tag == "C":
        _expect(n == 3 and type(node[1]) is str and type(node[2]) is str, "C")
        try:
            return complex(float.fromhex(node[1]), float.fromhex(node[2]))
        except ValueError as exc:
            raise Malformed("C") from exc
    if tag == "Y":
        _expect(n == 2 and type(node[1]) is str, "Y")
        try:
            return bytes.fromhex(node[1])
        except ValueError as exc:
            raise Malformed("Y") from exc
    raise Malformed(f"unknown tag {tag!r}")
