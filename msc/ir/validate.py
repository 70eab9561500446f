"""Graph validation and topological ordering.

# NOTE: every error names the graph, the node (name and op) and the value at fault.
"""

from __future__ import annotations

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Graph, GraphError, Node, Value, Weight
from msc.ir.types import TensorType, ValueType

__all__ = ["validate", "topological_order", "non_numeric_values"]


def _where(node: Node, i: int) -> str:
    label = f"{node.name!r} " if node.name else ""
    return f"node #{i} {label}({node.op})"


class _At:
    """``graph 'g': node #i 'name' (op)`` for an error message, built only when one is."""

    __slots__ = ("gname", "node", "i")

    def __init__(self, gname: str, node: Node, i: int) -> None:
        self.gname, self.node, self.i = gname, node, i

    def __str__(self) -> str:
        return f"{self.gname}: {_where(self.node, self.i)}"

    __call__ = __str__

    def label(self) -> str:
        return _where(self.node, self.i)


def _types_agree(stored: ValueType, inferred: ValueType) -> bool:
    try:
        if stored.dtype is not inferred.dtype:  # type: ignore[union-attr]
            return False
    except AttributeError:  # a sequence or optional: the same kind, around agreeing elements
        return stored.__class__ is inferred.__class__ and _types_agree(
            stored.element,  # type: ignore[union-attr]
            inferred.element,  # type: ignore[union-attr]
        )
    if stored.shape is None or inferred.shape is None:
        return True
    if len(stored.shape) != len(inferred.shape):
        return False
    # Only concrete sizes can disagree; a symbol on either side may stand for the other.
    return all(
        not (isinstance(a, int) and isinstance(b, int)) or a == b
        for a, b in zip(stored.shape, inferred.shape)
    )


def _label(what: str | _At) -> str:
    return what.label() if isinstance(what, _At) else what


def validate(graph: Graph, outer: frozenset[int] = frozenset()) -> None:
    registry = graph.opset
    gname = f"graph {graph.name!r}"
    defined: set[int] = set(outer)
    value_names: dict[str, Value] = {}
    weights = set(id(w) for w in graph.weights.values())

    def define(v: Value, what: str | _At) -> None:
        if isinstance(v, Weight):
            raise GraphError(f"{gname}: {_label(what)} defines weight {v.name!r} as a value")
        if v.name is None:
            raise GraphError(f"{gname}: {_label(what)} has a value with no name")
        if v.name in value_names:
            raise GraphError(f"{gname}: value name {v.name!r} is defined twice ({_label(what)})")
        value_names[v.name] = v
        defined.add(id(v))

    for name, w in graph.weights.items():
        if w.name != name:
            raise GraphError(f"{gname}: weight listed as {name!r} is named {w.name!r}")
        defined.add(id(w))
    for v in graph.inputs:
        if v.producer is not None:
            raise GraphError(f"{gname}: input {v.name!r} is produced by a node")
        define(v, "graph input")

    schemas: dict[str, object] = {}  # op -> schema, looked up once per op
    inferred_by: dict[tuple, list] = {}  # (op, input types, attrs) -> output types
    for i, node in enumerate(graph.nodes):
        where = _At(gname, node, i)
        schema = schemas.get(node.op)
        if schema is None:
            if node.op not in registry:
                raise GraphError(f"{where}: unknown op {node.op!r}")
            schema = schemas[node.op] = registry.get(node.op)
        try:
            schema.check_inputs(node.inputs, where=where)  # type: ignore[attr-defined]
            schema.normalize_attrs(node.attrs, where=where)  # type: ignore[attr-defined]
            schema.check_output_count(len(node.outputs), node.attrs, where=where)  # type: ignore[attr-defined]
        except (TypeError, ValueError) as e:
            raise GraphError(str(e)) from None
        for j, v in enumerate(node.inputs):
            if v is None:
                continue
            if isinstance(v, Weight) and id(v) not in weights and id(v) not in outer:
                raise GraphError(f"{where}: input {j} is weight {v.name!r}, not in this graph")
            if id(v) not in defined:
                later = {id(v): i for i, n in enumerate(graph.nodes) for v in n.outputs}
                if id(v) in later and later[id(v)] >= i:
                    # Used before defined: a cycle, or just out of order?
                    try:
                        topological_order(graph)
                        raise GraphError(
                            f"{where}: input {j} %{v.name} is used before it is defined "
                            f"(nodes are not in topological order; call graph.sort())"
                        )
                    except GraphError as e:
                        raise GraphError(f"{where}: input {j} %{v.name}: {e}") from None
                raise GraphError(f"{where}: input {j} %{v.name} is not defined in this graph")
        if node.attrs:
            for sub in node.subgraphs():
                validate(sub, frozenset(defined))
        for j, v in enumerate(node.outputs):
            if v.producer is not node or v.index != j:
                raise GraphError(f"{where}: output {j} %{v.name} has a wrong producer link")
            if v.name is None or v.name in value_names or isinstance(v, Weight):
                define(v, where)  # raises, naming the fault
            value_names[v.name] = v  # type: ignore[index]
            defined.add(id(v))
        # Inference reads only input types and attributes: a repeat of the same op on the same
        # types (every layer of a model) is looked up, not inferred again.
        key = (node.op, tuple(None if v is None else v.type for v in node._inputs))
        if node.attrs:
            key += tuple(node.attrs.items())
        try:
            inferred = inferred_by.get(key)
        except TypeError:  # an unhashable attribute (a tensor, a subgraph): no reuse
            key, inferred = None, None
        if inferred is None:
            try:
                inferred = schema.infer(node)  # type: ignore[attr-defined]
            except Exception as e:  # noqa: BLE001 - inference errors are reported, not raised
                raise GraphError(f"{where}: type inference failed: {e}") from None
            if key is not None:
                inferred_by[key] = inferred
        for j, (v, t) in enumerate(zip(node.outputs, inferred)):
            s = v.type
            if s is t or (
                s.__class__ is t.__class__ is TensorType
                and s.dtype is t.dtype
                and s.shape == t.shape
            ):
                continue
            if not _types_agree(s, t):
                raise GraphError(
                    f"{where}: output {j} %{v.name} has type {s}, but the op gives {t}"
                )
    for v in graph.outputs:
        if id(v) not in defined:
            raise GraphError(f"{gname}: output %{v.name} is not defined in this graph")
    if graph.output_tree is not None:
        from msc.ir.structure import leaves

        far = [i for i in leaves(graph.output_tree) if i >= len(graph.outputs)]
        if far:
            raise GraphError(
                f"{gname}: output structure names output {far[0]}, "
                f"but the graph has {len(graph.outputs)}"
            )


def topological_order(graph: Graph) -> list[Node]:
    """Nodes in a topological order, stable where possible; raises GraphError on a cycle."""
    producer = {id(v): n for n in graph.nodes for v in n.outputs}
    deps: dict[int, set[int]] = {}
    users: dict[int, list[Node]] = {}
    for n in graph.nodes:
        ds = set()
        for v in _all_inputs(n):
            p = producer.get(id(v))
            if p is not None and p is not n:
                ds.add(id(p))
                users.setdefault(id(p), []).append(n)
            elif p is n:
                raise GraphError(f"cycle: node {n.name!r} ({n.op}) uses its own output %{v.name}")
        deps[id(n)] = ds
    import heapq

    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    ready = [pos[id(n)] for n in graph.nodes if not deps[id(n)]]
    heapq.heapify(ready)
    out: list[Node] = []
    while ready:
        n = graph.nodes[heapq.heappop(ready)]
        out.append(n)
        for u in users.get(id(n), ()):
            d = deps[id(u)]
            if id(n) in d:
                d.discard(id(n))
                if not d:
                    heapq.heappush(ready, pos[id(u)])
    if len(out) != len(graph.nodes):
        stuck = [n for n in graph.nodes if deps[id(n)]]
        names = ", ".join(f"{n.name or '?'} ({n.op})" for n in stuck[:5])
        raise GraphError(f"graph {graph.name!r} has a cycle through: {names}")
    return out


def _all_inputs(node: Node):
    """Inputs plus outer values used inside the node's subgraphs."""
    for v in node.inputs:
        if v is not None:
            yield v
    for sub in node.subgraphs():
        inner = {id(v) for v in sub.values()}
        for n in sub.nodes:
            for v in _all_inputs(n):
                if id(v) not in inner:
                    yield v


def non_numeric_values(graph: Graph, where: str = "") -> list[str]:
    """Every value of ``graph`` (and its subgraphs) that a target holding numeric tensors only
    (PyTorch, Relax) cannot hold: ``str`` tensors, sequences and optionals, as inputs, weights,
    node outputs or tensor attributes. Each is named as the text format spells it, with its
    type and where it is, in definition order: ``input %x: str[5]``, ``weight @vocab: str[3]``,
    ``%0: seq<f32[?]> (output of node #2 (ai.onnx::SplitToSequence@11))``, ``attribute 'keys'
    of node #0 (...): str[3]``, ``... in body of node #1 'loop' (ai.onnx::Loop@16)``."""
    from msc.ir.spelling import format_type, quote_ref

    def held(t: ValueType) -> bool:
        return t.__class__ is TensorType and not t.dtype.is_string  # type: ignore[union-attr]

    at = f" in {where}" if where else ""
    found = [
        f"input %{quote_ref(v.name or '')}: {format_type(v.type)}{at}"
        for v in graph.inputs
        if not held(v.type)
    ]
    found += [
        f"weight @{quote_ref(w.name)}: {format_type(w.type)}{at}"
        for w in graph.weights.values()
        if not held(w.type)
    ]
    for i, n in enumerate(graph.nodes):
        label = _where(n, i)
        found += [
            f"%{quote_ref(v.name or '')}: {format_type(v.type)} (output of {label}){at}"
            for v in n.outputs
            if not held(v.type)
        ]
        for k, a in sorted(n.attrs.items()):
            if isinstance(a, np.ndarray) and a.dtype == object:
                t = format_type(TensorType(DType.STRING, a.shape))
                found.append(f"attribute {k!r} of {label}: {t}{at}")
            elif isinstance(a, Graph):
                found += non_numeric_values(a, f"{k} of {label}{at}")
    return found
