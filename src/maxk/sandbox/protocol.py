"""Strict data format between the trusted scorer and untrusted children: tagged JSON of builtins.

A value crosses the boundary as ``[tag, payload]`` with exact builtin types only (``N`` None, ``B``
bool, ``I`` int in hex, ``F`` float in ``float.hex``, ``C`` complex, ``S`` str, ``Y`` bytes in hex,
``L``/``T``/``E``/``Z`` list/tuple/set/frozenset, ``D`` dict as pairs). The trusted decoder checks
every tag and payload type and rebuilds fresh builtin objects, so nothing the child returns can carry
behaviour (no ``__eq__`` overrides, no subclasses, no pickle). Anything malformed is rejected.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 200
MAX_INT_HEX_DIGITS = 100_000


class Unsupported(TypeError):
    """A value that cannot cross the boundary (not an exact builtin type)."""


class Malformed(ValueError):
    """A reply that is not valid tagged data."""


def encode(value: Any, depth: int = 0) -> list:
    """Trusted-side encoder for call arguments (exact builtin types; anything else is Unsupported)."""
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
    raise Unsupported(f"cannot send a {t.__name__} to the sandbox")


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise Malformed(what)


def decode(node: Any, depth: int = 0) -> Any:
    """Rebuild a value from untrusted tagged JSON, checking every type exactly."""
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
