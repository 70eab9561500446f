"""Print a graph in msc's text format.

# NOTE: invariants
# - Deterministic: the same graph prints the same bytes. Attributes and metadata print sorted.
# - Every name round-trips: a name that is not ``[A-Za-z_][A-Za-z0-9_]*`` is quoted and escaped
#   (MLIR's rule), so dots, spaces, quotes, unicode, leading digits and "" all survive.
# - Floats print with ``repr`` (shortest exact form); a float always shows '.', 'e', inf or nan,
#   so the parser tells it from an int.
# - Text and binary data never share a spelling: str is a quoted, escaped literal; bytes are
#   ``bytes(b64 "...")`` (canonical base64), read back by the parser's own code, never eval.
#
# The format:
#   graph NAME {
#     meta {key = value, ...}
#     input %x: f32[1, 3, batch{1..64}]
#     weight @"conv.weight": f32[4, 3, 3, 3]
#     %y: f32[...], %z: i64[...] = op(%x, @"conv.weight", _) {attr = value} !{name = "...", ...}
#     output %y
#   }
#
# A node's module stack (Provenance.stack, format 2) prints as its ``stack`` metadata: one
# ``path Type`` entry per module, outermost first, separated by "; "; a path that extends the
# one before it is written from its "." on (``stack = "model LlamaModel; .layers.0
# LlamaDecoderLayer; .mlp LlamaMLP"``: the last path is ``model.layers.0.mlp``). Fields are
# percent-encoded for "%", " ", ";" and a leading "." (``%25``, ``%20``, ``%3B``, ``%2E``);
# an empty field is ``%``.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.spelling import escape, format_float, format_scalar, format_type, quote_name, quote_ref
from msc.ir.types import TensorType
from msc.ops import VERSION as OPS_VERSION

__all__ = [
    "to_text",
    "format_type",
    "format_tree",
    "quote_name",
    "quote_ref",
    "format_attr",
    "format_stack",
    "FORMAT_VERSION",
    "OPS_VERSION",
]

# The version of the text format this printer writes (files without the header line are
# version 0: the format before versions, which is still read). Bump it when a change makes
# files that an older parser would misread; the op set has its own version (msc.ops).
# 2: node metadata may hold ``stack`` (a format-1 parser refuses the key).
FORMAT_VERSION = 2

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SMALL_TENSOR = 64  # elements; larger tensor attributes print as base64 bytes


_FIELD_ESC = re.compile(r"[% ;]|^\.")


def _esc(s: str) -> str:
    return _FIELD_ESC.sub(lambda m: f"%{ord(m.group()):02X}", s)


def format_stack(stack: tuple[tuple[str, str], ...]) -> str:
    """A module stack ((path, type name), ...) in its ``stack`` metadata spelling."""
    out, prev = [], None
    for path, t in stack:
        if prev is not None and path.startswith(prev + "."):
            p = "." + _esc(path[len(prev) + 1 :])
        else:
            p = _esc(path) or "%"
        out.append(f"{p} {_esc(t) or '%'}")
        prev = path
    return "; ".join(out)


def _tensor(a: np.ndarray) -> str:
    dt = DType.from_numpy(a.dtype)
    head = f"tensor({format_type(TensorType(dt, a.shape))}, "
    flat = np.ascontiguousarray(a).reshape(-1)
    if dt.is_string:  # text has no byte form: always element by element, each escaped
        return head + "[" + ", ".join(escape(x) for x in flat.tolist()) + "])"
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


def _loud(n: Node, opset: Any) -> dict[str, Any]:
    """``n``'s attributes less the quiet ones at their defaults (``Attr.quiet``)."""
    schema = opset.get(n.op) if opset is not None and n.op in opset else None
    if schema is None:
        return n.attrs
    specs = schema.attrs
    return {
        k: v
        for k, v in n.attrs.items()
        if not (k in specs and specs[k].quiet and v == specs[k].default)
    }


class _Printer:
    def __init__(self, indent: str = "", opset: Any = None) -> None:
        self.indent = indent
        self.opset = opset

    def ref(self, v: Value | None) -> str:
        if v is None:
            return "_"
        return ("@" if isinstance(v, Weight) else "%") + quote_ref(v.name or "")

    def node(self, n: Node, ind: str) -> str:
        outs = ", ".join([f"%{quote_ref(v.name or '')}: {format_type(v.type)}" for v in n.outputs])
        ref = self.ref
        ins = ", ".join([ref(v) for v in n.inputs])
        op = n.op
        if not (op.isascii() and op.isidentifier()):
            op = escape(op)  # custom ops: "domain::name@1"
        s = f"{ind}{outs} = {op}({ins})"
        attrs = _loud(n, self.opset)
        if attrs:
            s += " " + _attrs(attrs, ind)
        p = n.provenance
        if n.name or p or p.stack:
            meta = [
                f"{k} = {escape(v)}"
                for k, v in (
                    ("name", n.name),
                    ("framework", p.framework),
                    ("op", p.op),
                    ("source", p.name),
                    ("module", p.module),
                    ("stack", format_stack(p.stack) if p.stack else ""),
                )
                if v
            ]
            s += " !{" + ", ".join(meta) + "}"
        return s

    def graph(self, g: Graph) -> str:
        ind = self.indent + "  "
        lines = [f"graph {quote_name(g.name)} {{"]
        if g.meta:
            lines.append(f"{ind}meta {_attrs(g.meta, ind)}")
        for v in g.inputs:
            lines.append(f"{ind}input %{quote_ref(v.name or '')}: {format_type(v.type)}")
        for w in g.weights.values():
            line = f"{ind}weight @{quote_ref(w.name)}: {format_type(w.type)}"
            fields = {"role": w.role or None, "aliases": list(w.aliases) or None}
            fields = {k: v for k, v in fields.items() if v is not None}
            lines.append(line + (" " + _attrs(fields, ind) if fields else ""))
        node = _Printer(ind, g.opset).node
        lines.extend([node(n, ind) for n in g.nodes])
        lines.append(
            f"{ind}output"
            + "".join((" " if i == 0 else ", ") + self.ref(v) for i, v in enumerate(g.outputs))
        )
        if g.output_tree is not None:
            lines.append(f"{ind}structure {format_tree(g.output_tree)}")
        lines.append(self.indent + "}")
        return "\n".join(lines) + "\n"


def format_tree(spec: Any) -> str:
    """An output structure (msc.ir.structure): ``tuple(leaf 0, dict("k": leaf 1, "n": 3))``."""
    ((kind, body),) = spec.items()
    if kind == "leaf":
        return f"leaf {body}"
    if kind == "const":
        return format_scalar(body)
    if kind == "dict":
        items = (f"{format_scalar(k)}: {format_tree(s)}" for k, s in body)
        return "dict(" + ", ".join(items) + ")"
    return kind + "(" + ", ".join(format_tree(s) for s in body) + ")"


def to_text(graph: Graph) -> str:
    """The graph in msc's text format, after a line naming the format and op-set versions.
    ``from_text(to_text(g))`` equals ``g``."""
    return f"msc format {FORMAT_VERSION}, ops {OPS_VERSION}\n" + _Printer().graph(graph)
