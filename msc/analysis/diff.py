"""``diff``: structural equality first, else a node-level diff of two graphs.

Nodes are paired in three passes, each only among nodes not yet paired:

1. anchors: the same source name (provenance name, else node name), op and weight names, where
   no other node of the op reads those weights; or the same (module path, op, occurrence) --
   each key unique on both sides. Positional names alone (torch's ``relu_1``) are not
   trusted: they shift when a model changes;
2. by structure, repeated until nothing changes: walking A in topological order, a node of B
   with the same op whose inputs are the paired images of A's inputs (weights pair by name,
   else by type; a same-named candidate first); and walking back from paired consumers (and
   the graph outputs), producers of the same op;
3. the same unique source name and op, among what is left;
4. by position in the dataflow: producers of paired consumers, then nodes whose inputs are all
   paired images, of any op (an op that changed: ``linear`` that came back as ``gemm``).

Paired nodes pair their outputs, which is what lets pass 2 and 3 walk forward. A paired node
is *changed* when its op, attributes, output types, weights or wiring differ. What is left is
*removed* (only in A) or *added* (only in B).

# NOTE: the pairing (``match``) is also what ``verify`` uses to compare intermediate values;
# it never pairs two nodes of A with one node of B.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msc.analysis.canonical import canonicalize
from msc.ir import symexpr
from msc.ir.attrs import attr_equal
from msc.ir.equal import structural_equal
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import TensorType, ValueType, map_tensor, tensor_of
from msc.text.printer import format_attr, format_type

__all__ = ["Match", "match", "DiffReport", "diff_graphs", "format_diff"]


@dataclass
class Match:
    """Node and value pairing between graphs A and B."""

    nodes: dict[int, Node] = field(default_factory=dict)  # id(A node) -> B node
    rev: dict[int, Node] = field(default_factory=dict)  # id(B node) -> A node
    values: dict[int, Value] = field(default_factory=dict)  # id(A value) -> B value
    vrev: dict[int, Value] = field(default_factory=dict)
    how: dict[int, str] = field(default_factory=dict)  # id(A node) -> "name" | "structure" | ...

    def pair_value(self, a: Value, b: Value) -> None:
        if id(a) not in self.values and id(b) not in self.vrev:
            self.values[id(a)], self.vrev[id(b)] = b, a

    def pair(self, a: Node, b: Node, how: str) -> None:
        self.nodes[id(a)], self.rev[id(b)], self.how[id(a)] = b, a, how
        if len(a.outputs) == len(b.outputs):
            for x, y in zip(a.outputs, b.outputs):
                self.pair_value(x, y)


def _ident(n: Node) -> str:
    return n.provenance.name or n.name


def _unique_keys(nodes: Iterable[Node], key) -> dict[Any, Node]:
    seen: dict[Any, Node] = {}
    dup: set[Any] = set()
    for n in nodes:
        k = key(n)
        if not k:
            continue
        if k in seen:
            dup.add(k)
        seen[k] = n
    return {k: n for k, n in seen.items() if k not in dup}


def _module_keys(nodes: list[Node]) -> dict[Any, Node]:
    count: Counter[tuple[str, str]] = Counter()
    out: dict[Any, Node] = {}
    for n in nodes:
        if n.provenance.module:
            k = (n.provenance.module, n.op)
            out[(*k, count[k])] = n
            count[k] += 1
    return out


def _wired_alike(m: Match, a: Node, b: Node) -> bool:
    """No input of ``a`` is paired with something other than ``b``'s input at that place (the
    n-th transpose of a module is not the n-th of the other when their order differs)."""
    if len(a.inputs) != len(b.inputs):
        return False
    for x, y in zip(a.inputs, b.inputs):
        if x is None or y is None or isinstance(x, Weight) or isinstance(y, Weight):
            continue
        if m.values.get(id(x), y) is not y or m.vrev.get(id(y), x) is not x:
            return False
    return True


def _outputs_agree(ren: symexpr.Renaming, a: Node, b: Node) -> bool:
    """The nodes' output types agree (``_types_agree``), without growing ``ren``."""
    if len(a.outputs) != len(b.outputs):
        return False
    trial = symexpr.Renaming(ranges=False)
    trial.fwd, trial.bwd = dict(ren.fwd), dict(ren.bwd)
    return all(_types_agree(trial, x.type, y.type) for x, y in zip(a.outputs, b.outputs))


def _weights_alike(a: Weight, b: Weight) -> bool:
    return a.name == b.name or a.type == b.type


def _inputs_fit(m: Match, a: Node, b: Node, strict: bool) -> bool:
    """B's inputs are the images of A's (``strict``: all of them; else every non-weight)."""
    if len(a.inputs) != len(b.inputs):
        return False
    seen_value = False
    for x, y in zip(a.inputs, b.inputs):
        if x is None or y is None:
            if x is not y:
                return False
            continue
        if isinstance(x, Weight) or isinstance(y, Weight):
            if not (isinstance(x, Weight) and isinstance(y, Weight)):
                return False
            if strict and not _weights_alike(x, y):
                return False
            continue
        if m.values.get(id(x)) is not y:
            return False
        seen_value = True
    return seen_value or strict


def match(a: Graph, b: Graph) -> Match:
    """Pair the nodes and values of ``a`` and ``b`` (see the module docstring)."""
    m = Match()
    by_name_b = {v.name: v for v in b.inputs}
    # Symbols pair by the inputs they shape; an anchor whose types contradict that pairing
    # (the n-th arange of a module is over batch in one graph, seq in the other) is none.
    ren = symexpr.Renaming(ranges=False)
    for i, x in enumerate(a.inputs):
        y = by_name_b.get(x.name) or (b.inputs[i] if i < len(b.inputs) else None)
        if y is not None:
            m.pair_value(x, y)
            _types_agree(ren, x.type, y.type)
    # Anchors: a source name plus the same op and weights (positional names like ``relu_1``
    # shift when a model changes, weight names do not), and module path + op + occurrence.
    # The weights have to identify the node: a weight several nodes of the op read (rotary's
    # cos table, read by each layer's attention) leaves only the name, which is positional.
    reads_a = Counter((n.op, _weight_names(n)) for n in a.nodes)
    reads_b = Counter((n.op, _weight_names(n)) for n in b.nodes)
    ka, kb = _unique_keys(a.nodes, _ident), _unique_keys(b.nodes, _ident)
    for k, n in ka.items():
        c = kb.get(k)
        if c is not None and id(c) not in m.rev and c.op == n.op:
            w = _weight_names(n)
            if w and w == _weight_names(c) and reads_a[n.op, w] == reads_b[c.op, w] == 1:
                m.pair(n, c, "name")
    ka, kb = _module_keys(a.nodes), _module_keys(b.nodes)
    for k, n in ka.items():
        c = kb.get(k)
        if (
            id(n) not in m.nodes
            and c is not None
            and id(c) not in m.rev
            and _wired_alike(m, n, c)
            and _outputs_agree(ren, n, c)
        ):
            m.pair(n, c, "module")
    for _ in range(8):  # forward and backward passes feed each other; a few rounds settle
        before = len(m.nodes)
        _forward(m, a, b, strict=True)
        _backward(m, a, b)
        if len(m.nodes) == before:
            break
    # What structure left: same name and op.
    for k, n in ka_names(a, b, m):
        m.pair(n, k, "name")
    _backward(m, a, b, strict=False)
    _forward(m, a, b, strict=False)
    for n in a.nodes:
        c = m.nodes.get(id(n))
        if c is not None:
            for x, y in zip(n.inputs, c.inputs):
                if isinstance(x, Weight) and isinstance(y, Weight):
                    m.pair_value(x, y)
    return m


def _weight_names(n: Node) -> tuple[str, ...]:
    return tuple(v.name for v in n.inputs if isinstance(v, Weight) and v.name is not None)


def ka_names(a: Graph, b: Graph, m: Match) -> list[tuple[Node, Node]]:
    """Unpaired (B node, A node) pairs with the same unique source name and op."""
    ka = _unique_keys((n for n in a.nodes if id(n) not in m.nodes), _ident)
    kb = _unique_keys((n for n in b.nodes if id(n) not in m.rev), _ident)
    return [(kb[k], n) for k, n in ka.items() if k in kb and kb[k].op == n.op]


def _reads_values(n: Node) -> bool:
    """``n`` reads a computed value (not only weights): a constant pairs only by structure."""
    return any(v is not None and not isinstance(v, Weight) for v in n.inputs)


def _forward(m: Match, a: Graph, b: Graph, strict: bool) -> None:
    """Pair A's unpaired nodes, in order, with a B node fed by the images of their inputs."""
    how = "structure" if strict else "dataflow"
    free_b = [n for n in b.nodes if id(n) not in m.rev]
    for n in a.nodes:
        if id(n) in m.nodes or (not strict and not _reads_values(n)):
            continue
        fits = [
            c
            for c in free_b
            if id(c) not in m.rev
            and (c.op == n.op or not strict)
            and len(c.outputs) == len(n.outputs)
            and _inputs_fit(m, n, c, strict)
        ]
        if fits:
            same = [c for c in fits if c.op == n.op] or fits
            # Of several nodes fed alike (shape(x) of dims 0:1 and 1:2), the one of the same
            # attributes, so an equal computation is never reported as a changed one.
            alike = [c for c in same if _attrs_equal(n, c)] or same
            # and reading the same weights by name (the concat of a shape's [4, 8] or its
            # [2, 8], the query's and the key's heads: canonical weights are named by value)
            w = _weight_names(n)
            alike = [c for c in alike if w and _weight_names(c) == w] or alike
            named = [c for c in alike if _ident(c) and _ident(c) == _ident(n)]
            if not named and len(alike) > 1:  # q, k and v projections of one input: the
                # one whose module path and weight names share most words with n's
                words = _words(n)
                named = [max(alike, key=lambda c: len(words & _words(c)))]
            m.pair(n, (named or alike)[0], how)


def _words(n: Node) -> set[str]:
    """The words of a node's module path and weight names (``encoder.layer.0.query`` and
    Keras' ``encoder_layer_0_query_linear/kernel`` share ``encoder``, ``layer`` and
    ``query``); not its name nor numbers, often positional (``linear_1``, a constant ``5_1``:
    the layer a node is in, its inputs say)."""
    text = " ".join([n.provenance.module or "", *_weight_names(n)])
    return {w for w in re.split(r"[^0-9a-zA-Z]+", text.lower()) if w and not w.isdigit()}


def _attrs_equal(a: Node, b: Node) -> bool:
    keys = set(a.attrs) | set(b.attrs)
    try:
        return all(attr_equal(a.attrs.get(k), b.attrs.get(k)) or _same_attr(a, b, k) for k in keys)
    except Exception:  # noqa: BLE001 - a subgraph attribute: not compared here
        return False


def _heads_known_unequal(n: Node) -> bool:
    """An attention node's query and key (rank 4) have head counts known to differ: two
    ints that differ (symbols may be equal at run time)."""
    q, k = (v.type.shape if v is not None else None for v in n.inputs[:2])
    if q is None or k is None or len(q) != 4 or len(k) != 4:
        return False
    return isinstance(q[1], int) and isinstance(k[1], int) and q[1] != k[1]


# Attribute values that differ without changing what two paired nodes compute on the values
# they read (their inputs are each other's images, which the wiring check asks): (op,
# attribute) -> (the rule's label in diff's list of known rewrites, the test on the two
# nodes). An attention with enable_gqa over query and key of one head count computes plain
# attention (each query head reads the key head of its own index); the node without
# enable_gqa runs only on equal head counts, and the other reads the same values, so the two
# agree wherever the plain one is defined, unless a node's head counts are known to differ.
# An ONNX Attention, which groups implicitly, reads back as enable_gqa true when the head
# counts are not known (a Reshape to -1 heads at run time). Heads known unequal (4 over 2)
# stay a real change.
SAME_ATTRS = {
    ("attention", "enable_gqa"): (
        "enable_gqa over equal heads (plain attention)",
        lambda a, b: not _heads_known_unequal(a) and not _heads_known_unequal(b),
    ),
}


def _same_attr(a: Node, b: Node, key: str) -> str | None:
    """The label of the SAME_ATTRS rule that makes ``a``'s and ``b``'s attribute ``key``
    agree though their values differ, or None."""
    rule = SAME_ATTRS.get((a.op, key)) if a.op == b.op else None
    return rule[0] if rule is not None and rule[1](a, b) else None


def _backward(m: Match, a: Graph, b: Graph, strict: bool = True) -> None:
    """From paired consumers (and the graph outputs) back to producers of the same op (any op
    unless ``strict``)."""
    pending: list[tuple[Value | None, Value | None]] = list(zip(a.outputs, b.outputs))
    for n in reversed(a.nodes):
        c = m.nodes.get(id(n))
        if c is not None and len(c.inputs) == len(n.inputs):
            pending += list(zip(n.inputs, c.inputs))
    while pending:
        x, y = pending.pop()
        if x is None or y is None or x.producer is None or y.producer is None:
            continue
        px, py = x.producer, y.producer
        if id(px) in m.nodes or id(py) in m.rev:
            continue
        if not strict and not (px.op == py.op or (_reads_values(px) and _reads_values(py))):
            continue  # constants of different ops never pair: nothing ties them
        if (
            (px.op == py.op or not strict)
            and x.index == y.index
            and len(px.outputs) == len(py.outputs)
        ):
            m.pair(px, py, "structure" if strict else "dataflow")
            if len(px.inputs) == len(py.inputs):
                pending += list(zip(px.inputs, py.inputs))


# ------------------------------------------------------------------------------------ report
@dataclass
class Change:
    a: str
    b: str
    op: str
    changes: list[str]
    module: str = ""
    a_index: int = -1  # the nodes' positions in A and B, for per-node overlays
    b_index: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "op": self.op,
            "module": self.module,
            "changes": self.changes,
        }


@dataclass
class DiffReport:
    """What ``msc diff`` shows, as data."""

    equal: bool
    first_difference: str | None
    a_name: str
    b_name: str
    matched: list[tuple[str, str, str]]  # (A node, B node, how paired)
    changed: list[Change]
    removed: list[str]
    added: list[str]
    io_changes: list[str]
    weight_changes: list[str]
    # Per node position: "same" | "changed" | "removed" (A) / "added" (B), for overlays.
    node_status_a: dict[int, str] = field(default_factory=dict)
    node_status_b: dict[int, str] = field(default_factory=dict)
    rewrites: list[tuple[str, str, int]] = field(default_factory=list)  # (side, rewrite, count)
    real_changes: int = 0  # changed + removed + added nodes + input/output changes

    @property
    def equivalent(self) -> bool:
        """Equal, or equal once the known exporter rewrites are undone."""
        return self.equal or self.real_changes == 0

    def verdict(self) -> str:
        """The one line ``msc diff`` leads with."""
        if self.equal:
            return "equal (same ops, attributes, types, wiring and weights)"
        n = sum(c for _, _, c in self.rewrites)
        known = ", ".join(f"{k} x{c} ({side})" for side, k, c in self.rewrites)
        rw = f"{n} known rewrite{'s' * (n != 1)}: {known}"
        if self.real_changes == 0:
            return f"equivalent (up to {rw})" if n else "equivalent"
        head = f"{self.real_changes} real change{'s' * (self.real_changes != 1)}"
        return head + (f" (after {rw})" if n else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict(),
            "equivalent": self.equivalent,
            "real_changes": self.real_changes,
            "rewrites": [{"side": s, "rewrite": k, "count": c} for s, k, c in self.rewrites],
            "equal": self.equal,
            "first_difference": self.first_difference,
            "a": self.a_name,
            "b": self.b_name,
            "matched": [{"a": x, "b": y, "by": h} for x, y, h in self.matched],
            "changed": [c.to_json() for c in self.changed],
            "removed": self.removed,
            "added": self.added,
            "io_changes": self.io_changes,
            "weight_changes": self.weight_changes,
        }


def _label(n: Node, g: Graph) -> str:
    name = n.name or f"#{g.nodes.index(n)}"
    mod = f" [{n.provenance.module}]" if n.provenance.module else ""
    return f"{name} ({n.op}){mod}"


def _vname(v: Value | None) -> str:
    if v is None:
        return "_"
    return f"@{v.name}" if isinstance(v, Weight) else f"%{v.name}"


def _short(x: Any) -> str:
    s = format_attr(x) if not isinstance(x, Graph) else f"<graph {x.name!r}>"
    return s if len(s) <= 60 else s[:57] + "..."


def _same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit-identical arrays (NaN payloads and -0.0 included); 0-d arrays (BatchNorm's
    ``num_batches_tracked``) too."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False

    def raw(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a).reshape(-1).view(np.uint8)

    return bool(np.array_equal(raw(x), raw(y)))


# Weights a canonical rewrite computed (BatchNorm folded in float64, then rounded) agree with
# the exporter's own folding to float32 rounding, not bit for bit.
WEIGHT_RTOL, WEIGHT_ATOL = 1e-4, 1e-6


def _weight_differs(x: Weight, y: Weight, close: bool = False) -> str | None:
    if x.type != y.type:
        return f"{format_type(x.type)} -> {format_type(y.type)}"
    if x.has_data and y.has_data:
        xa, ya = x.numpy(), y.numpy()
        if _same_bytes(xa, ya):
            return None
        if close and xa.dtype.kind == "f":
            err = float(np.max(np.abs(xa.astype(np.float64) - ya.astype(np.float64))))
            scale = float(np.max(np.abs(ya))) if ya.size else 0.0
            if err <= WEIGHT_ATOL + WEIGHT_RTOL * scale:
                return None
            return f"values differ (max abs {err:.3g})"
        return "values differ"
    return None


def _types_agree(ren: symexpr.Renaming, a: ValueType, b: ValueType) -> bool:
    """``a`` and ``b`` describe the same values: one dtype, and dims equal up to a one-to-one
    renaming of symbols (``ren``, grown here) and their ranges (a range is a property of an
    input, and ONNX stores none). An unknown dim or rank (one exporter's shape inference
    gave up where the other's did not) is no contradiction."""
    if _untyped(a) != _untyped(b):
        return False
    sa, sb = tensor_of(a).shape, tensor_of(b).shape
    if sa is None or sb is None:
        return True
    if len(sa) != len(sb):
        return False
    pairs = [(x, y) for x, y in zip(sa, sb) if x is not None and y is not None]
    fwd, bwd = dict(ren.fwd), dict(ren.bwd)
    if all(ren.equal(x, y) for x, y in pairs):
        return True
    ren.fwd, ren.bwd = fwd, bwd
    return False


def _untyped(t: ValueType) -> ValueType:
    return map_tensor(t, lambda x: TensorType(x.dtype, None))


def _node_changes(
    m: Match,
    n: Node,
    c: Node,
    close: bool = False,
    ren: symexpr.Renaming | None = None,
    agreed: Counter[tuple[str, str]] | None = None,
) -> list[str]:
    """What differs between paired nodes ``n`` (A) and ``c`` (B); an attribute a SAME_ATTRS
    rule lets agree is counted in ``agreed`` under (the side whose value is true, label)."""
    ren = ren if ren is not None else symexpr.Renaming(ranges=False)
    out: list[str] = []
    if n.op != c.op:
        out.append(f"op {n.op} -> {c.op}")
    else:
        for k in sorted(set(n.attrs) | set(c.attrs)):
            x, y = n.attrs.get(k), c.attrs.get(k)
            if not attr_equal(x, y) and (label := _same_attr(n, c, k)):
                if agreed is not None:
                    agreed["B" if y else "A", label] += 1
                continue
            if not attr_equal(x, y):
                note = ""
                if isinstance(x, float) and isinstance(y, float) and np.float32(x) == np.float32(y):
                    if close:  # an exporter stores float attributes as float32
                        continue
                    note = " (equal as float32)"
                out.append(f"attr {k}: {_short(x)} -> {_short(y)}{note}")
    if len(n.inputs) != len(c.inputs):
        out.append(f"inputs: {len(n.inputs)} -> {len(c.inputs)}")
    else:
        for i, (x, y) in enumerate(zip(n.inputs, c.inputs)):
            if isinstance(x, Weight) and isinstance(y, Weight):
                why = _weight_differs(x, y, close)
                if why:
                    out.append(f"input {i} {_vname(x)}: {why}")
            elif x is not None and y is not None and not isinstance(x, Weight):
                img = m.values.get(id(x))
                if img is not y and not (img is None and m.vrev.get(id(y)) is None):
                    if img is not None:
                        why = f"B reads {_vname(y)}, not {_vname(img)} (A's {_vname(x)})"
                    else:
                        other = m.vrev.get(id(y))
                        why = (
                            f"A reads {_vname(x)} (nothing in B corresponds), B reads "
                            f"{_vname(y)} (A's {_vname(other)})"
                        )
                    out.append(f"input {i} rewired: {why}")
            elif (x is None) != (y is None) or isinstance(x, Weight) != isinstance(y, Weight):
                out.append(f"input {i}: {_vname(x)} -> {_vname(y)}")
    if len(n.outputs) != len(c.outputs):
        out.append(f"outputs: {len(n.outputs)} -> {len(c.outputs)}")
    else:
        for i, (x, y) in enumerate(zip(n.outputs, c.outputs)):
            if not _types_agree(ren, x.type, y.type):
                out.append(f"output {i} type: {format_type(x.type)} -> {format_type(y.type)}")
    return out


def diff_graphs(a: Graph, b: Graph, canonical: bool = True) -> DiffReport:
    """Compare ``a`` and ``b``: structural equality, else a node-level diff -- of the graphs as
    they are, or of their canonical forms (``msc.analysis.canonical``) when undoing the known
    exporter rewrites leaves fewer real changes (``canonical=False``: as they are only)."""
    eq = structural_equal(a, b)
    raw = _diff(a, b, eq, [], close=False)
    if eq or not canonical or raw.real_changes == 0:
        return raw
    try:
        ca, cb = canonicalize(a), canonicalize(b)
    except Exception:  # noqa: BLE001 - a graph the canonical passes cannot take: as it is
        return raw
    # A rewrite both sides needed (both had their BatchNorms) separates nothing.
    both = ca.rewrites & cb.rewrites
    rewrites = [("A", k, n) for k, n in sorted((ca.rewrites - both).items())]
    rewrites += [("B", k, n) for k, n in sorted((cb.rewrites - both).items())]
    can = _diff(ca.graph, cb.graph, eq, rewrites, close=True)
    if can.real_changes >= raw.real_changes:
        return raw
    # Per-node statuses and positions refer to the canonical graphs: carry them to the graphs
    # as given by value name (canonical passes keep a rewritten pattern's last value name);
    # a node a known rewrite absorbed counts as the same.
    can.node_status_a = _remap(can.node_status_a, ca.graph, a)
    can.node_status_b = _remap(can.node_status_b, cb.graph, b)
    pa, pb = _positions(ca.graph, a), _positions(cb.graph, b)
    for ch in can.changed:
        ch.a_index, ch.b_index = pa.get(ch.a_index, -1), pb.get(ch.b_index, -1)
    return can


def _positions(canon: Graph, orig: Graph) -> dict[int, int]:
    """Canonical node position -> the position of its node in ``orig``: the one with the same
    provenance (a fused pattern keeps its first node's, the conv of conv + BatchNorm), else
    the one with its output's name (which a rewritten pattern keeps from its last node)."""
    by_prov: dict[Any, int] = {}
    for i, n in enumerate(orig.nodes):
        p = n.provenance
        if p.name:
            by_prov.setdefault((p.framework, p.op, p.name, p.module), i)
    by_name = {v.name: i for i, n in enumerate(orig.nodes) for v in n.outputs if v.name}
    out = {}
    for i, n in enumerate(canon.nodes):
        p = n.provenance
        j = by_prov.get((p.framework, p.op, p.name, p.module)) if p.name else None
        if j is None:
            j = next((by_name[v.name] for v in n.outputs if v.name in by_name), None)
        if j is not None:
            out[i] = j
    return out


def _remap(status: dict[int, str], canon: Graph, orig: Graph) -> dict[int, str]:
    out = {i: "same" for i in range(len(orig.nodes))}
    for ci, oi in _positions(canon, orig).items():
        out[oi] = status.get(ci, "same")
    return out


def _read_in_place_of(w: Weight, pairs: dict[int, Node], close: bool) -> Weight | None:
    """The one weight of the other graph that the nodes paired with ``w``'s readers read in
    its place, when its values are ``w``'s (an exporter stores equal weights once)."""
    seen: Weight | None = None
    for n, i in w.uses:
        c = pairs.get(id(n))
        y = c.inputs[i] if c is not None and i < len(c.inputs) else None
        if not isinstance(y, Weight) or (seen is not None and y is not seen):
            return None
        seen = y
    if seen is None or _weight_differs(w, seen, close) is not None:
        return None
    return seen


def _diff(a: Graph, b: Graph, eq: Any, rewrites: list, close: bool) -> DiffReport:
    m = match(a, b)
    # Symbols pair by position in the inputs first, then where paired nodes' types show them.
    ren = symexpr.Renaming(ranges=False)
    io_types = [_types_agree(ren, x.type, y.type) for x, y in zip(a.inputs, b.inputs)]
    matched, changed = [], []
    agreed: Counter[tuple[str, str]] = Counter()
    pos_b = {id(n): j for j, n in enumerate(b.nodes)}
    status_a = {i: "removed" for i in range(len(a.nodes))}
    status_b = {j: "added" for j in range(len(b.nodes))}
    for i, n in enumerate(a.nodes):
        c = m.nodes.get(id(n))
        if c is None:
            continue
        matched.append((_label(n, a), _label(c, b), m.how[id(n)]))
        ch = _node_changes(m, n, c, close, ren, agreed)
        j = pos_b[id(c)]
        status_a[i] = status_b[j] = "changed" if ch else "same"
        if ch:
            changed.append(Change(_label(n, a), _label(c, b), n.op, ch, n.provenance.module, i, j))
    removed = [_label(n, a) for n in a.nodes if id(n) not in m.nodes]
    added = [_label(n, b) for n in b.nodes if id(n) not in m.rev]
    io: list[str] = []
    renames = 0
    for kind, xs, ys in (("input", a.inputs, b.inputs), ("output", a.outputs, b.outputs)):
        if len(xs) != len(ys):
            io.append(f"{kind}s: {len(xs)} -> {len(ys)}")
        for i, (x, y) in enumerate(zip(xs, ys)):
            same = io_types[i] if kind == "input" else _types_agree(ren, x.type, y.type)
            if not same:
                io.append(f"{kind} {i} %{x.name}: {format_type(x.type)} -> {format_type(y.type)}")
            elif x.name != y.name:
                io.append(f"{kind} {i}: renamed %{x.name} -> %{y.name}")
                renames += 1
    wc: list[str] = []
    wa, wb = a.weights, b.weights
    only_a = [k for k in wa if k not in wb and id(wa[k]) not in m.values]
    only_b = [k for k in wb if k not in wa and id(wb[k]) not in m.vrev]
    for side, only, ws, pairs in (("A", only_a, wa, m.nodes), ("B", only_b, wb, m.rev)):
        for k in only:
            same = _read_in_place_of(ws[k], pairs, close)
            if same is not None:
                other = "B" if side == "A" else "A"
                wc.append(f"@{k} ~ @{same.name}: equal values ({other} shares one weight)")
            elif side == "A":
                wc.append(f"removed @{k}: {format_type(ws[k].type)}")
            else:
                wc.append(f"added @{k}: {format_type(ws[k].type)}")
    for k in wa:
        if k in wb:
            why = _weight_differs(wa[k], wb[k], close)
            if why:
                wc.append(f"@{k}: {why}")
    real = len(changed) + len(removed) + len(added) + len(io) - renames
    rewrites = rewrites + [(side, k, count) for (side, k), count in sorted(agreed.items())]
    return DiffReport(
        equal=bool(eq),
        first_difference=eq.diff,
        a_name=a.name,
        b_name=b.name,
        matched=matched,
        changed=changed,
        removed=removed,
        added=added,
        io_changes=io,
        weight_changes=wc,
        node_status_a=status_a,
        node_status_b=status_b,
        rewrites=rewrites,
        real_changes=0 if eq else real,
    )


def _kind(change: str) -> str:
    """A change with value names taken out, so equal kinds of change count together."""
    if change.startswith("input ") and "rewired" in change:
        return "input rewired"
    if change.startswith("input ") and ":" in change:
        return "input " + change.split(":", 1)[1].strip()
    return change


def _capped(items: list[str], limit: int, prefix: str) -> list[str]:
    shown = items if limit <= 0 else items[:limit]
    out = [f"{prefix}{s}" for s in shown]
    if len(shown) < len(items):
        out.append(f"{prefix}... and {len(items) - len(shown)} more (--all or --json lists all)")
    return out


def format_diff(r: DiffReport, a_label: str = "", b_label: str = "", limit: int = 25) -> str:
    """The text ``msc diff`` prints (labels default to the graph names; ``limit`` caps each
    list, 0 for no cap)."""
    lines = [
        f"A: {a_label or r.a_name or '(unnamed)'}",
        f"B: {b_label or r.b_name or '(unnamed)'}",
    ]
    lines.insert(0, f"verdict: {r.verdict()}")
    if r.equal:
        lines.append("structurally equal: yes (same ops, attributes, types, wiring and weights)")
        return "\n".join(lines) + "\n"
    lines.append(f"structurally equal: no (first difference: {r.first_difference})")
    if r.rewrites:
        lines.append("compared after undoing known exporter rewrites")
    same = len(r.matched) - len(r.changed)
    lines.append(
        f"nodes: {len(r.matched)} matched ({same} identical, {len(r.changed)} changed), "
        f"{len(r.removed)} removed, {len(r.added)} added"
    )
    if r.io_changes:
        lines.append("inputs/outputs")
        lines += [f"  {s}" for s in r.io_changes]
    if len(r.changed) > 3:
        kinds = Counter(_kind(s) for c in r.changed for s in c.changes)
        lines.append("changes by kind")
        lines += _table_rows([(k, f"x{n}") for k, n in kinds.most_common()], limit)
    if r.changed:
        lines.append("changed (by module)")
        entries = []
        for c in sorted(r.changed, key=lambda c: c.module):
            head = c.a if c.a == c.b else f"{c.a} ~ {c.b}"
            head = f"{c.module or '(no module)'}: {head}"
            entries.append(head + "".join(f"\n      {s}" for s in c.changes))
        lines += _capped(entries, limit, "  ")
    if r.removed:
        lines.append("removed (only in A)")
        lines += _capped(r.removed, limit, "  - ")
    if r.added:
        lines.append("added (only in B)")
        lines += _capped(r.added, limit, "  + ")
    if r.weight_changes:
        lines.append("weights")
        lines += _capped(r.weight_changes, limit, "  ")
    return "\n".join(lines) + "\n"


def _table_rows(rows: list[tuple[str, str]], limit: int) -> list[str]:
    w = max(len(a) for a, _ in rows)
    return _capped([f"{a.ljust(w)}  {b}" for a, b in rows], limit, "  ")
