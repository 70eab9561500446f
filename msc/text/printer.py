"""Print a graph in msc's text format.

# NOTE: invariants
# - Deterministic: the same graph prints the same bytes. Attributes and metadata print sorted.
# - Every name round-trips: a name that is not ``[A-Za-z_][A-Za-z0-9_]*`` is quoted and escaped
#   (MLIR's rule), so dots, spaces, quotes, unicode, leading digits and "" all survive.
# - Floats print with ``repr`` (shortest exact form); a float always shows '.', 'e', inf or nan,
#   so the parser tells it from an int.
#
# The format:
#   graph NAME {
#     meta {key = value, ...}
#     input %x: f32[1, 3, batch{1..64}]
#     weight @"conv.weight": f32[4, 3, 3, 3]
#     %y: f32[...], %z: i64[...] = op(%x, @"conv.weight", _) {attr = value} !{name = "...", ...}
#     output %y
#   }
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.spelling import escape, format_float, format_scalar, format_type, quote_name, quote_ref
from msc.ir.types import TensorType

__all__ = ["to_text", "format_type", "quote_name", "quote_ref", "format_attr"]

_SMALL_TENSOR = 64  # elements; larger tensor attributes print as base64 bytes


def _tensor(a: np.ndarray) -> str:
    dt = DType.from_numpy(a.dtype)
    head = f"tensor({format_type(TensorType(dt, a.shape))}, "
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.size <= _SMALL_TENSOR and not dt.is_complex:
        if dt.is_bool:
            items = ["true" if v else "false" for v in flat.tolist()]
        elif dt.is_floating:
            items = [format_float(v) for v in flat.astype(np.float64).tolist()]
        else:
            items = [str(int(v)) for v in flat.tolist()]
        return head + "[" + ", ".join(items) + "])"
    data = flat.astype(flat.dtype.newbyteorder("<"), copy=False).tobytes()
    return head + 'b64 "' + base64.b64encode(data).decode("ascii") + '")'


def format_attr(v: Any, indent: str = "") -> str:
    if isinstance(v, tuple | list):
        return "[" + ", ".join(format_attr(x, indent) for x in v) + "]"
    if isinstance(v, np.ndarray):
        return _tensor(v)
    if isinstance(v, Graph):
        return _Printer(indent).graph(v).rstrip("\n")
    return format_scalar(v)


def _attrs(d: dict[str, Any], indent: str) -> str:
    items = [f"{quote_name(k)} = {format_attr(d[k], indent)}" for k in sorted(d)]
    return "{" + ", ".join(items) + "}"


class _Printer:
    def __init__(self, indent: str = "") -> None:
        self.indent = indent

    def ref(self, v: Value | None) -> str:
        if v is None:
            return "_"
        return ("@" if isinstance(v, Weight) else "%") + quote_ref(v.name or "")

    def node(self, n: Node, ind: str) -> str:
        outs = ", ".join(f"%{quote_ref(v.name or '')}: {format_type(v.type)}" for v in n.outputs)
        ins = ", ".join(self.ref(v) for v in n.inputs)
        s = f"{ind}{outs} = {n.op}({ins})"
        if n.attrs:
            s += " " + _attrs(n.attrs, ind)
        p = n.provenance
        meta = [
            (k, v)
            for k, v in (
                ("name", n.name),
                ("framework", p.framework),
                ("op", p.op),
                ("source", p.name),
                ("module", p.module),
            )
            if v
        ]
        if meta:
            s += " !{" + ", ".join(f"{k} = {escape(v)}" for k, v in meta) + "}"
        return s

    def graph(self, g: Graph) -> str:
        ind = self.indent + "  "
        lines = [f"graph {quote_name(g.name)} {{"]
        if g.meta:
            lines.append(f"{ind}meta {_attrs(g.meta, ind)}")
        for v in g.inputs:
            lines.append(f"{ind}input %{quote_ref(v.name or '')}: {format_type(v.type)}")
        for w in g.weights.values():
            lines.append(f"{ind}weight @{quote_ref(w.name)}: {format_type(w.type)}")
        inner = _Printer(ind)
        for n in g.nodes:
            lines.append(inner.node(n, ind))
        lines.append(
            f"{ind}output"
            + "".join((" " if i == 0 else ", ") + self.ref(v) for i, v in enumerate(g.outputs))
        )
        lines.append(self.indent + "}")
        return "\n".join(lines) + "\n"


def to_text(graph: Graph) -> str:
    """The graph in msc's text format. ``from_text(to_text(g))`` equals ``g``."""
    return _Printer().graph(graph)
