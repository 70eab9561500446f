"""Structural equality and hashing of graphs.

# NOTE: invariants
# - One walk, linear in graph size: inputs are paired by position, nodes by their position in a
#   canonical topological order (depth-first from the outputs, operands in order; nodes no
#   output depends on follow in list order), so two graphs that list independent nodes in a
#   different order still compare equal. Every value reference must map consistently (a
#   bijection), so a swapped edge, a reordered input or a different output is a difference.
# - Modulo names by default (alpha-equivalence), symbolic dims' names included: a symbol may
#   be renamed (``s77`` in one graph is ``batch`` in the other), one to one throughout the
#   graph, its range kept. ``names=True`` also compares value, node, weight, symbol and graph
#   names, provenance, graph metadata, weight roles and aliases, and the output structure.
# - ``structural_hash`` hashes exactly what ``structural_equal`` compares, so equal graphs hash
#   equal.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from msc.ir import structure, symexpr
from msc.ir.attrs import attr_equal, infer_kind, normalize
from msc.ir.bulk import paused
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.spelling import format_scalar, format_type
from msc.ir.tensor import content_bytes
from msc.ir.types import SymDim, TensorType, ValueType, map_tensor, tensor_of
from msc.ir.validate import _all_inputs

__all__ = [
    "structural_equal",
    "assert_structural_equal",
    "structural_hash",
    "canonical_order",
    "EqualResult",
]


@dataclass(frozen=True, slots=True)
class EqualResult:
    """Truthy when equal; ``diff`` names the first difference as a path, else None."""

    diff: str | None = None

    def __bool__(self) -> bool:
        return self.diff is None

    def __repr__(self) -> str:
        return "EqualResult(equal)" if self.diff is None else f"EqualResult({self.diff!r})"


class _Diff(Exception):
    pass


def _fmt(v: Any) -> str:
    if isinstance(v, Graph):
        return f"<graph {v.name!r}>"
    if isinstance(v, np.ndarray):
        return f"tensor {v.dtype}{list(v.shape)}"
    if isinstance(v, bytes) and len(v) > 48:
        return f"<{len(v)} bytes, blake2b {_digest(v)}>"
    s = format_scalar(v)
    return s if len(s) < 80 else s[:77] + "..."


def _meta(m: dict[str, Any]) -> dict[str, Any]:
    return {k: normalize(infer_kind(v), v) if v is not None else None for k, v in m.items()}


def _weight_bytes(w: Weight) -> bytes | None:
    if not w.has_data:
        return None
    return content_bytes(w.numpy())


Path = str | Callable[[], str]  # a difference's location; a callable is built only on failure


class _Comparer:
    def __init__(self, names: bool, weights: str) -> None:
        if weights not in ("values", "types"):
            raise ValueError(f"weights must be 'values' or 'types', got {weights!r}")
        self.names, self.weights = names, weights
        self.fwd: dict[Value, Value] = {}  # keyed by identity (Value has no __eq__)
        self.bwd: dict[Value, Value] = {}
        self.symbols = symexpr.Renaming()

    def fail(self, path: Path, what: str, a: Any, b: Any) -> None:
        if callable(path):  # built only when there is a difference to report
            path = path()
        raise _Diff(f"{path}: {what} differs: expected {a}, found {b}")

    def define(self, path: Path, a: Value, b: Value) -> None:
        """Two values each graph defines here (an input, a node output): name, type, paired."""
        if self.names and a.name != b.name:
            self.fail(path, "name", repr(a.name), repr(b.name))
        if a.type is not b.type:
            self.types(path, a.type, b.type)
        self.fwd[a], self.bwd[b] = b, a

    def pair(self, path: Path, a: Value, b: Value) -> None:
        self.fwd[a], self.bwd[b] = b, a

    def types(self, path: Path, a: ValueType, b: ValueType) -> None:
        if isinstance(a, TensorType) and isinstance(b, TensorType):
            if a.dtype is not b.dtype:
                self.fail(path, "dtype", a.dtype.short, b.dtype.short)
            if not self.shapes(a.shape, b.shape):
                self.fail(path, "shape", format_type(a), format_type(b))
        elif _untyped(a) != _untyped(b) or not self.shapes(
            tensor_of(a).shape, tensor_of(b).shape
        ):  # a sequence or optional type on either side: its element's dims
            self.fail(path, "type", format_type(a), format_type(b))

    def shapes(self, a: tuple | None, b: tuple | None) -> bool:
        """Equal shapes: the same dims, or (modulo names) symbols renamed one to one."""
        if self.names or a is None or b is None:
            return a == b
        return self.symbols.shapes_equal(a, b)

    def weight(self, path: Path, a: Weight, b: Weight) -> None:
        if self.names:
            if a.name != b.name:
                self.fail(path, "weight name", repr(a.name), repr(b.name))
            if a.role != b.role:
                self.fail(path, "weight role", repr(a.role), repr(b.role))
            if a.aliases != b.aliases:
                self.fail(path, "weight aliases", list(a.aliases), list(b.aliases))
        self.types(path, a.type, b.type)
        if self.weights == "values":
            da, db = _weight_bytes(a), _weight_bytes(b)
            if (da is None) != (db is None):
                self.fail(
                    path,
                    "weight data",
                    "present" if da is not None else "absent",
                    "present" if db is not None else "absent",
                )
            if da != db:
                self.fail(
                    path,
                    "weight values",
                    f"@{a.name} (hash {_digest(da)})",
                    f"@{b.name} (hash {_digest(db)})",
                )

    def ref(self, path: Path, a: Value | None, b: Value | None) -> None:
        if a is None or b is None:
            if a is not b:
                self.fail(
                    path,
                    "input",
                    "_" if a is None else f"%{a.name}",
                    "_" if b is None else f"%{b.name}",
                )
            return
        if isinstance(a, Weight) != isinstance(b, Weight):
            self.fail(
                path,
                "input kind",
                "weight" if isinstance(a, Weight) else "value",
                "weight" if isinstance(b, Weight) else "value",
            )
        mapped = self.fwd.get(a)
        if mapped is b:
            return
        if mapped is None and isinstance(a, Weight) and b not in self.bwd:
            self.weight(path, a, b)  # weights pair on first use
            self.pair(path, a, b)
            return
        self.fail(
            path, "edge", f"%{a.name} (maps to %{mapped.name if mapped else '?'})", f"%{b.name}"
        )

    def attr(self, path: Path, a: Any, b: Any) -> None:
        if isinstance(a, Graph) and isinstance(b, Graph):
            self.graph(a, b, path)
        elif not attr_equal(a, b):
            self.fail(path, "value", _fmt(a), _fmt(b))

    def graph(self, a: Graph, b: Graph, path: str = "graph") -> None:
        if self.names:
            if a.name != b.name:
                self.fail(path, "name", repr(a.name), repr(b.name))
            ma, mb = _meta(a.meta), _meta(b.meta)
            if sorted(ma) != sorted(mb):
                self.fail(path + ".meta", "keys", sorted(ma), sorted(mb))
            for k in sorted(ma):
                self.attr(f"{path}.meta.{k}", ma[k], mb[k])
            if a.output_tree != b.output_tree:
                self.fail(path, "output structure", a.output_tree, b.output_tree)
        if len(a.inputs) != len(b.inputs):
            self.fail(path, "input count", len(a.inputs), len(b.inputs))
        for i, (x, y) in enumerate(zip(a.inputs, b.inputs)):
            self.define(f"{path}.inputs[{i}] %{x.name}", x, y)
        if len(a.nodes) != len(b.nodes):
            self.fail(path, "node count", len(a.nodes), len(b.nodes))
        for i, (n, m) in enumerate(zip(canonical_order(a), canonical_order(b))):

            def p(i: int = i, n: Node = n) -> str:
                return f"{path}.nodes[{i}] ({n.name or n.op}: {n.op})"

            if n.op != m.op:
                self.fail(p, "op", n.op, m.op)
            if self.names:
                if n.name != m.name:
                    self.fail(p, "node name", repr(n.name), repr(m.name))
                if n.provenance != m.provenance:
                    self.fail(p, "provenance", n.provenance, m.provenance)
            if n.attrs or m.attrs:
                if sorted(n.attrs) != sorted(m.attrs):
                    self.fail(p() + ".attrs", "keys", sorted(n.attrs), sorted(m.attrs))
                for k in sorted(n.attrs):
                    self.attr(f"{p()}.attrs.{k}", n.attrs[k], m.attrs[k])
            ins_a, ins_b = n._inputs, m._inputs
            if len(ins_a) != len(ins_b):
                self.fail(p, "input count", len(ins_a), len(ins_b))
            fwd = self.fwd
            for j, x in enumerate(ins_a):
                y = ins_b[j]
                if x is None or fwd.get(x) is not y:  # the common case, a mapped edge, is done
                    self.ref(lambda j=j, p=p: f"{p()}.inputs[{j}]", x, y)
            if len(n.outputs) != len(m.outputs):
                self.fail(p, "output count", len(n.outputs), len(m.outputs))
            for j, (x, y) in enumerate(zip(n.outputs, m.outputs)):
                self.define(lambda j=j, p=p, x=x: f"{p()}.outputs[{j}] %{x.name}", x, y)
        if len(a.outputs) != len(b.outputs):
            self.fail(path, "output count", len(a.outputs), len(b.outputs))
        for i, (x, y) in enumerate(zip(a.outputs, b.outputs)):
            self.ref(f"{path}.outputs[{i}]", x, y)
        # Weights no node uses still count: pair the rest in declaration order.
        rest_a = [w for w in a.weights.values() if w not in self.fwd]
        rest_b = [w for w in b.weights.values() if w not in self.bwd]
        if len(rest_a) != len(rest_b):
            self.fail(path, "weight count", len(a.weights), len(b.weights))
        for x, y in zip(rest_a, rest_b):
            self.weight(f"{path}.weights @{x.name}", x, y)
            self.pair(path, x, y)


def _untyped(t: ValueType) -> ValueType:
    """``t`` with every dim forgotten: what is left to compare once the dims are."""
    return map_tensor(t, lambda x: TensorType(x.dtype, None))


def canonical_order(g: Graph) -> list[Node]:
    """The nodes in a topological order that depends only on the graph's structure: depth-first
    from the outputs in order, each node's operands (and the outer values its subgraphs read) in
    order; nodes no output needs come last, in list order."""
    inside = set(g.nodes)  # a subgraph's operands may come from outer nodes: not ours
    seen: set[Node] = set()
    order: list[Node] = []
    append, mark = order.append, seen.add
    for out in g.outputs:
        root = out.producer if out is not None else None
        if root is None or root not in inside or root in seen:
            continue
        mark(root)
        # One frame per node on the path: the node and where its operands resume.
        stack = [(root, iter(_operands(root)))]
        while stack:
            node, rest = stack[-1]
            for v in rest:
                p = v.producer if v is not None else None
                if p is not None and p not in seen and p in inside:
                    mark(p)
                    stack.append((p, iter(_operands(p))))
                    break
            else:
                append(node)
                stack.pop()
    if len(order) != len(g.nodes):
        order.extend(n for n in g.nodes if n not in seen)
    return order


def _operands(n: Node) -> Sequence[Value | None]:
    """A node's inputs, and the outer values its subgraphs read (when it has any)."""
    attrs = n.attrs
    if attrs and any(a.__class__ is Graph for a in attrs.values()):
        return list(_all_inputs(n))
    return n._inputs


def structural_equal(
    a: Graph, b: Graph, *, names: bool = False, weights: str = "values"
) -> EqualResult:
    """Compare two graphs. Truthy if equal; ``.diff`` gives the path of the first difference.

    Args:
        names: also compare value, node, weight and graph names, provenance and metadata.
        weights: "values" compares weight data byte for byte; "types" only dtypes and shapes.
    """
    try:
        with paused():
            _Comparer(names, weights).graph(a, b)
    except _Diff as e:
        return EqualResult(str(e))
    return EqualResult(None)


def assert_structural_equal(
    a: Graph, b: Graph, *, names: bool = False, weights: str = "values"
) -> None:
    """Raise AssertionError naming the first difference if the graphs differ."""
    r = structural_equal(a, b, names=names, weights=weights)
    if not r:
        raise AssertionError(f"graphs differ: {r.diff}")


def _digest(b: bytes | None) -> str:
    return "none" if b is None else hashlib.blake2b(b, digest_size=8).hexdigest()


_LEN = struct.Struct("<Q")


class _Hasher:
    """Feeds blake2b one length-prefixed item at a time, as one stream (collected in a list and
    fed in large chunks: the digest is that of the concatenation, so chunking does not change
    it). Strings' encodings are cached: ops, type spellings and markers repeat on every node."""

    def __init__(self, names: bool, weights: str) -> None:
        self.h = hashlib.blake2b(digest_size=16)
        self.names, self.weights = names, weights
        self.ids: dict[Value, int] = {}  # keyed by identity (Value has no __eq__)
        self.parts: list[bytes] = []
        self.cache: dict[str, bytes] = {}
        self.symbols: dict[str, str] = {}  # symbol name -> its number (modulo names)
        self.types: dict[ValueType, str] = {}

    def put(self, *items: Any) -> None:
        cache, parts = self.cache, self.parts
        for x in items:
            if x.__class__ is str:
                enc = cache.get(x)
                if enc is None:
                    b = x.encode("utf-8", "surrogatepass")
                    enc = cache[x] = _LEN.pack(len(b)) + b
                parts.append(enc)
                continue
            if x.__class__ is not bytes:
                x = str(x).encode("utf-8", "surrogatepass")
            parts.append(_LEN.pack(len(x)) + x)
        if len(parts) > 65536:
            self.flush()

    def flush(self) -> None:
        self.h.update(b"".join(self.parts))
        self.parts.clear()

    def type(self, t: ValueType) -> None:
        if self.names:
            self.put(format_type(t))
            return
        text = self.types.get(t)
        if text is None:
            text, stable = self._renamed(t)
            if stable:
                self.types[t] = text
        self.put(text)

    def _renamed(self, t: ValueType) -> tuple[str, bool]:
        """``t`` spelled with its symbols numbered by first appearance (equal graphs modulo
        renaming number theirs alike), and whether that spelling is final: symbols first seen
        together in one expression (which the comparer pairs by trying each assignment) stay
        unnumbered placeholders until one appears alone."""
        shape = tensor_of(t).shape
        if shape is None or all(d is None or d.__class__ is int for d in shape):
            return format_type(t), True
        stable = True
        for d in shape:
            if d is None or d.__class__ is int:
                continue
            new = sorted({s.name for s in symexpr.symbols(d)} - self.symbols.keys())
            if len(new) == 1:
                self.symbols[new[0]] = f"${len(self.symbols)}"
            elif new:
                stable = False

        def number(x: TensorType) -> TensorType:
            dims = []
            for d in x.shape or ():
                if d is not None and d.__class__ is not int:
                    syms = symexpr.symbols(d)
                    d = symexpr.subs(
                        d,
                        {
                            s.name: SymDim(self.symbols.get(s.name, "$?"), s.min, s.max)
                            for s in syms
                        },
                    )
                dims.append(d)
            return x.with_shape(dims)

        return format_type(map_tensor(t, number)), stable

    def define(self, v: Value) -> None:
        self.ids[v] = len(self.ids)
        self.type(v.type)
        if self.names:
            self.put(v.name)

    def ref(self, v: Value | None) -> None:
        if v is None:
            self.put("_")
        elif v in self.ids:
            self.put("%", self.ids[v])
        elif isinstance(v, Weight):
            self.weight(v)
        else:
            self.put("?")

    def weight(self, w: Weight) -> None:
        self.ids[w] = len(self.ids)
        self.put("@")
        self.type(w.type)
        if self.names:
            self.put(w.name, w.role, *w.aliases)
        if self.weights == "values":
            self.put(_digest(_weight_bytes(w)))

    def attr(self, v: Any) -> None:
        if isinstance(v, Graph):
            self.graph(v)
        elif isinstance(v, float) and math.isnan(v):
            self.put("nan")
        elif isinstance(v, np.ndarray):
            self.put(
                "tensor",
                DType.from_numpy(v.dtype).short,
                v.shape,
                content_bytes(v),
            )
        elif isinstance(v, bytes):  # the bytes themselves, marked apart from text
            self.put("bytes", v)
        elif isinstance(v, tuple):
            self.put("[", len(v))
            for x in v:
                self.attr(x)
        else:
            self.put(type(v).__name__, format_scalar(v) if not isinstance(v, SymDim) else v)

    def graph(self, g: Graph) -> None:
        self.put("graph", len(g.inputs), len(g.nodes), len(g.outputs))
        if self.names:
            self.put(g.name)
            m = _meta(g.meta)
            for k in sorted(m):
                self.put(k)
                self.attr(m[k])
            if g.output_tree is not None:
                self.put("structure", structure.encode(g.output_tree))
        for v in g.inputs:
            self.define(v)
        for n in canonical_order(g):
            self.put(n.op, len(n.inputs), len(n.outputs))
            if self.names:
                p = n.provenance
                self.put(n.name, p.framework, p.op, p.name, p.module)
            for k in sorted(n.attrs):
                self.put(k)
                self.attr(n.attrs[k])
            for v in n.inputs:
                self.ref(v)
            for v in n.outputs:
                self.define(v)
        for v in g.outputs:
            self.ref(v)
        for w in g.weights.values():
            if w not in self.ids:
                self.weight(w)


def structural_hash(g: Graph, *, names: bool = False, weights: str = "values") -> str:
    """A hex digest consistent with ``structural_equal`` (equal graphs, equal hashes)."""
    h = _Hasher(names, weights)
    with paused():
        h.graph(g)
        h.flush()
    return h.h.hexdigest()
