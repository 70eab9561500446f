"""How names and tensor types are spelled in msc's text format (and in messages).

# NOTE: this lives in the core so that ``TensorType.__str__`` and the text printer share one
# spelling: a name that is not ``[A-Za-z_][A-Za-z0-9_]*`` (or is a keyword of the format) is
# quoted and escaped, MLIR's rule, so every name round-trips through print -> parse.
"""

from __future__ import annotations

import base64
import math
import re
from typing import Any

from msc.ir.dtype import DType
from msc.ir.types import (
    VALUE_TYPES,
    OptionalType,
    SequenceType,
    SymDim,
    SymExpr,
    TensorType,
    ValueType,
)

__all__ = [
    "escape",
    "format_float",
    "format_scalar",
    "format_type",
    "format_dim",
    "CONTAINER_SPELLING",
    "quote_name",
    "quote_ref",
    "KEYWORDS",
]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KEYWORDS = frozenset(
    {
        "graph",
        "input",
        "weight",
        "output",
        "meta",
        "true",
        "false",
        "none",
        "inf",
        "nan",
        "tensor",
        "type",
        "b64",
        "bytes",
    }
)


def escape(s: str) -> str:
    """``s`` as a quoted string literal of the text format."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'  # nothing to escape (most names)
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable():
            o = ord(ch)
            out.append(
                f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_DIGITS = re.compile(r"[0-9]+\Z")


def quote_ref(name: str) -> str:
    """A value or weight name after ``%``/``@``: positional names (``0``, ``17``) stay bare."""
    if name.isascii() and (name.isdigit() or (name.isidentifier() and name not in KEYWORDS)):
        return name  # for ASCII, isidentifier() is exactly [A-Za-z_][A-Za-z0-9_]*
    return escape(name)


def quote_name(name: str) -> str:
    """A name as the text format writes it: bare if an identifier, else a quoted string."""
    if name.isascii() and name.isidentifier() and name not in KEYWORDS:
        return name
    return escape(name)


def format_dim(d) -> str:
    """A dim as the text format writes it: ``7``, ``?``, ``batch{1..64}``, ``2*s0 + 1``."""
    if type(d) is int:
        return str(d)
    if d is None:
        return "?"
    if isinstance(d, SymExpr):
        from msc.ir.symexpr import spell

        return spell(d)
    if isinstance(d, SymDim):
        s = quote_name(d.name)
        if d.min is not None or d.max is not None:
            lo = "" if d.min is None else str(d.min)
            hi = "" if d.max is None else str(d.max)
            s += "{" + lo + ".." + hi + "}"
        return s
    return str(d)


# The spellings of the non-tensor types: ``seq<f32[?, 3]>``, ``opt<seq<i64[?]>>``.
CONTAINER_SPELLING = {SequenceType: "seq", OptionalType: "opt"}


def format_type(t: ValueType) -> str:
    """``f32[1, batch{1..64}, ?]``; ``f32[*]`` for unknown rank; ``seq<...>`` and ``opt<...>``
    around the element's spelling for sequences and optionals. Computed once per type."""
    text = t._text
    if text is None:
        if t.__class__ is not TensorType:
            text = f"{CONTAINER_SPELLING[t.__class__]}<{format_type(t.element)}>"  # type: ignore[union-attr]
        elif t.shape is None:  # type: ignore[union-attr]
            text = f"{t.dtype.value}[*]"
        else:
            text = f"{t.dtype.value}[" + ", ".join(map(format_dim, t.shape)) + "]"
        object.__setattr__(t, "_text", text)
    return text


def format_float(x: float) -> str:
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def format_scalar(v: Any) -> str:
    """An attribute value that is not a tensor or a graph: none, bool, int, float, str, bytes,
    dtype, tensor type, or a list of them. Bytes are ``bytes(b64 "...")``: standard base64 with
    padding, one spelling per value, so they parse back exactly (and never read as text)."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, str):
        return escape(v)
    if isinstance(v, bytes):
        return 'bytes(b64 "' + base64.b64encode(v).decode("ascii") + '")'
    if isinstance(v, DType):
        return v.short
    if isinstance(v, VALUE_TYPES):
        return "type(" + format_type(v) + ")"
    if isinstance(v, tuple | list):
        return "[" + ", ".join(format_scalar(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")
