"""ONNX control flow: If, Loop, Scan -> the canonical ``if``, ``loop``, ``scan``.

# NOTE: invariants
# - A subgraph is imported by a child importer that shares the parent's problem list, reserved
#   names and options, and reads outer names through a chained environment: outer values are
#   used by reference (as msc subgraphs do), outer constants are re-materialized inside the
#   subgraph (an outer slot never gets a value defined in a subgraph).
# - Subgraph initializers and large constants become weights of the top-level graph (weights
#   live there): they are hoisted when the subgraph is done, renamed only on a clash.
# - An If whose condition is known at import is inlined: only the taken branch is imported,
#   into the current graph (ONNX function bodies use this for attribute-dependent code).
# - Unsupported nodes inside a subgraph are reported with every other problem of the model;
#   the control-flow node itself then fails with a reason pointing at them.
"""

from __future__ import annotations

import copy
from collections import ChainMap
from collections.abc import Sequence

import numpy as np
import onnx

from msc.frontend.onnx.importer import Ctx, Importer, Slot, Unsupported, _topological, dispose
from msc.frontend.onnx.initializers import UnsupportedType, type_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType, Graph, TensorType

__all__ = ["import_subgraph"]


class _SubImporter(Importer):
    """Imports one subgraph in the scope of a parent importer (see the module NOTE)."""

    parent: Importer

    @classmethod
    def child(cls, parent: Importer, name: str) -> _SubImporter:
        sub = copy.copy(parent)  # shares problems, reserved names, options, registry
        sub.__class__ = cls
        sub.parent = parent
        sub.graph = Graph(name)
        sub.env = ChainMap({}, parent.env)  # type: ignore[assignment]
        sub.skip = {}
        sub._counter = 0
        return sub

    def _scopes(self):
        imp: Importer = self
        while True:
            yield imp.graph
            if not isinstance(imp, _SubImporter):
                return
            imp = imp.parent

    def fresh_name(self) -> str:
        # Never a name an enclosing graph defines: the text format resolves names by scope.
        taken = [g._taken for g in self._scopes()]  # noqa: SLF001
        while str(self._counter) in self.reserved or any(str(self._counter) in t for t in taken):
            self._counter += 1
        name = str(self._counter)
        self._counter += 1
        return name

    def fresh_weight_name(self, base: str) -> str:
        name = super().fresh_weight_name(base)
        while any(name in g.weights for g in self._scopes()):
            name = super().fresh_weight_name(base)
        return name

    def _node(self, n: onnx.NodeProto) -> None:
        self._localize(list(n.input) + list(_outer_names(n)))
        super()._node(n)

    def _localize(self, names: Sequence[str]) -> None:
        """Copy outer constant slots into this scope, so materializing one here defines it
        here (and leaves the outer slot without a value from this subgraph)."""
        local = self.env.maps[0]  # type: ignore[attr-defined]
        for name in names:
            if not name or name in local:
                continue
            s = self.env.get(name)
            if s is not None and s.value is None and s.known:
                local[name] = Slot(name, const=s.const, origin=s.origin)

    def import_graph(self, g: onnx.GraphProto, input_types: Sequence[TensorType]) -> Graph:
        if len(input_types) != len(g.input):
            raise Unsupported(
                f"subgraph {g.name!r} takes {len(g.input)} inputs, the op binds {len(input_types)}"
            )
        self.reserved.update(v.name for v in list(g.input) + list(g.output))
        nodes = list(g.node)
        self._check_nodes(nodes)
        self._weights(g)
        local = self.env.maps[0]  # type: ignore[attr-defined]
        for vi, t in zip(g.input, input_types):
            local[vi.name] = Slot(vi.name, value=self.graph.add_input(vi.name, t))
        for n in _topological(nodes, set(self.env)):
            self._node(n)
        self._localize([vi.name for vi in g.output])
        self._outputs(g)
        self._prune()
        self._hoist()
        return self.graph

    def _hoist(self) -> None:
        """Move this subgraph's weights to the parent graph (and so on up to the top)."""
        top = self.parent.graph
        for w in list(self.graph.weights.values()):
            while w.name in top.weights:
                w.name = self.fresh_weight_name(w.name)
            top.weights[w.name] = w
        self.graph.weights.clear()


def _outer_names(n: onnx.NodeProto):
    """Names a node's subgraphs read (they may come from this scope or an outer one)."""
    for a in n.attribute:
        subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in subs:
            for m in g.node:
                yield from m.input
                yield from _outer_names(m)
            for vi in g.output:
                yield vi.name


def import_subgraph(ctx: Ctx, g: onnx.GraphProto, input_types: Sequence[TensorType]) -> Graph:
    """Import ``g`` as an msc subgraph whose inputs have ``input_types``.

    Raises:
        Unsupported: a node of the subgraph is unsupported (reported on its own as well).
    """
    imp = ctx._imp  # noqa: SLF001 - control flow converters drive the importer itself
    before = len(imp.problems)
    sub = _SubImporter.child(imp, g.name)
    try:
        graph = sub.import_graph(g, input_types)
    except Unsupported:
        dispose(sub.graph)
        raise
    if len(imp.problems) > before:
        dispose(graph)
        raise Unsupported(f"subgraph {g.name!r} has unsupported nodes (reported above)")
    return graph


def _inline(ctx: Ctx, g: onnx.GraphProto) -> list[Slot]:
    """Import the nodes of a branch into the current graph; its outputs' slots."""
    imp = ctx._imp  # noqa: SLF001
    if g.input:
        raise Unsupported(f"branch {g.name!r} declares inputs")
    nodes = list(g.node)
    skip = imp.skip
    imp._check_nodes(nodes)  # noqa: SLF001
    imp.skip |= skip
    imp._weights(g)  # noqa: SLF001
    for n in _topological(nodes, set(imp.env)):
        imp._node(n)  # noqa: SLF001
    outs = [imp.env[vi.name] for vi in g.output]
    if any(s.poisoned for s in outs):
        raise Unsupported(f"branch {g.name!r} has unsupported nodes (reported above)")
    return outs


def _node_op(ctx: Ctx, op: str, inputs: list, attrs: dict, subgraphs: list[Graph]):
    try:
        _tensor_bodies(subgraphs)
        return ctx.ops(op, *inputs, **attrs)
    except Exception:
        for s in subgraphs:
            dispose(s)
        raise


def _tensor_bodies(subgraphs: list[Graph]) -> None:
    """The canonical control ops carry tensors: a body or branch that binds or gives a
    sequence or optional is Unsupported (``custom_ops="keep"`` keeps the ONNX node whole)."""
    bad = [
        f"%{v.name} ({v.type})"
        for g in subgraphs
        for v in [*g.inputs, *g.outputs]
        if not isinstance(v.type, TensorType)
    ]
    if bad:
        raise Unsupported(f"a body carries values that are not tensors: {', '.join(bad)}")


# ---------------------------------------------------------------------------- If
@converter("If", since=1)
def if_(ctx: Ctx, cond, *, then_branch, else_branch):
    c = ctx.known(cond)
    if c is not None:
        taken = bool(np.asarray(c).reshape(-1)[0])
        return _inline(ctx, then_branch if taken else else_branch)
    then_g = import_subgraph(ctx, then_branch, [])
    try:
        else_g = import_subgraph(ctx, else_branch, [])
    except Unsupported:
        dispose(then_g)
        raise
    return _node_op(
        ctx, "if", [cond], {"then_branch": then_g, "else_branch": else_g}, [then_g, else_g]
    )


# ---------------------------------------------------------------------------- Loop, Scan
def _declared(vi: onnx.ValueInfoProto, fallback: TensorType | None) -> TensorType:
    """A body input's type: as declared when it says more than the outer value's type."""
    try:
        t = type_from_onnx(vi.type, f"subgraph input {vi.name!r}")
    except UnsupportedType:
        if fallback is None or vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise
        return fallback
    if fallback is not None and t.dtype is fallback.dtype and t.shape is None:
        return fallback
    return t


def _relaxed(a: TensorType, b: TensorType) -> TensorType:
    if a == b:
        return a
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(a.dtype, None)
    return TensorType(a.dtype, [x if x == y else None for x, y in zip(a.shape, b.shape)])


def _carried_body(
    ctx: Ctx, g: onnx.GraphProto, fixed: list[TensorType], carried: list[TensorType], first: int
) -> Graph:
    """Import a body whose inputs ``first``.. are carried to its outputs ``first``.. (shifted):
    when an iteration changes a carried value's shape, import again with that dim unknown."""
    for _ in range(3):
        body = import_subgraph(ctx, g, fixed + carried)
        outs = [v.type for v in body.outputs[first : first + len(carried)]]
        if len(outs) < len(carried):
            return body  # the op's own type check reports it
        relaxed = [_relaxed(c, o) if c.dtype is o.dtype else c for c, o in zip(carried, outs)]
        if relaxed == carried:
            return body
        dispose(body)
        carried = relaxed
    return body


@converter("Loop", since=1)
def loop(ctx: Ctx, M=None, cond=None, *v_initial, body):  # noqa: N803 - ONNX's input name
    ins = body.input
    n = len(v_initial)
    if len(ins) != n + 2:
        raise Unsupported(f"Loop body takes {len(ins)} inputs for {n} carried values")
    fixed = [
        _declared(ins[0], TensorType(DType.INT64, ())),
        _declared(ins[1], TensorType(DType.BOOL, ())),
    ]
    carried = [_declared(vi, ctx.type(v)) for vi, v in zip(ins[2:], v_initial)]
    g = _carried_body(ctx, body, fixed, carried, 1)
    m = None if M is None else ctx.cast(M, DType.INT64)
    c = None if cond is None else ctx.cast(cond, DType.BOOL)
    return _node_op(ctx, "loop", [m, c, *v_initial], {"body": g}, [g])


def _scan_body_types(ctx: Ctx, body, states, scans, axes) -> tuple[list, list]:
    ins = body.input
    carried = [_declared(vi, ctx.type(v)) for vi, v in zip(ins, states)]
    fixed = []
    for vi, x, a in zip(ins[len(states) :], scans, axes):
        t = ctx.type(x)
        if t.shape is not None:
            r = len(t.shape)
            t = TensorType(t.dtype, [d for i, d in enumerate(t.shape) if i != a % r])
        fixed.append(_declared(vi, t))
    return carried, fixed


@converter("Scan", since=9)
def scan(
    ctx: Ctx,
    *inputs,
    body,
    num_scan_inputs,
    scan_input_axes=None,
    scan_input_directions=None,
    scan_output_axes=None,
    scan_output_directions=None,
):
    m = num_scan_inputs
    n = len(inputs) - m
    if n < 0 or len(body.input) != len(inputs):
        raise Unsupported(
            f"Scan with {len(inputs)} inputs, {m} scanned, body takes {len(body.input)}"
        )
    k = len(body.output) - n
    in_axes = list(scan_input_axes or [0] * m)
    carried, fixed = _scan_body_types(ctx, body, inputs[:n], inputs[n:], in_axes)
    # The body's states come first here: import them as the "carried" part.
    g = _scan_import(ctx, body, carried, fixed)
    attrs = {
        "body": g,
        "num_scan_inputs": m,
        "scan_input_axes": in_axes,
        "scan_input_directions": list(scan_input_directions or [0] * m),
        "scan_output_axes": list(scan_output_axes or [0] * k),
        "scan_output_directions": list(scan_output_directions or [0] * k),
    }
    return _node_op(ctx, "scan", list(inputs), attrs, [g])


def _scan_import(ctx: Ctx, body, carried: list[TensorType], fixed: list[TensorType]) -> Graph:
    for _ in range(3):
        g = import_subgraph(ctx, body, carried + fixed)
        outs = [v.type for v in g.outputs[: len(carried)]]
        relaxed = [_relaxed(c, o) if c.dtype is o.dtype else c for c, o in zip(carried, outs)]
        if len(outs) < len(carried) or relaxed == carried:
            return g
        dispose(g)
        carried = relaxed
    return g


@converter("Scan", since=8)
def scan_8(ctx: Ctx, sequence_lens, *inputs, body, num_scan_inputs, directions=None):
    """Opset-8 Scan has a batch axis 0 (scanning axis 1): one opset-9 scan per batch entry."""
    m = num_scan_inputs
    n = len(inputs) - m
    if sequence_lens is not None:
        lens = ctx.known(sequence_lens)
        seq = ctx.shape(inputs[n])[1] if n < len(inputs) else None
        if lens is None or not isinstance(seq, int) or not np.all(np.asarray(lens) == seq):
            raise Unsupported("Scan (opset 8) with sequence_lens shorter than the sequence")
    batch = ctx.shape(inputs[0])[0]
    if not isinstance(batch, int) or batch > 16:
        raise Unsupported(f"Scan (opset 8) over a batch of {batch} (a static size <= 16 only)")
    k = len(body.output) - n
    per_batch: list[tuple] = []
    for b in range(batch):
        row = [ctx.op("gather", ctx.value(x), np.array(b, np.int64), axis=0) for x in inputs]
        carried, fixed = _scan_body_types(ctx, body, row[:n], row[n:], [0] * m)
        g = _scan_import(ctx, body, carried, fixed)
        attrs = {
            "body": g,
            "num_scan_inputs": m,
            "scan_input_axes": [0] * m,
            "scan_input_directions": list(directions or [0] * m),
            "scan_output_axes": [0] * k,
            "scan_output_directions": [0] * k,
        }
        per_batch.append(_node_op(ctx, "scan", row, attrs, [g]))
    outs = []
    for i in range(n + k):
        parts = [ctx.op("unsqueeze", r[i], axes=[0]) for r in per_batch]
        outs.append(parts[0] if len(parts) == 1 else ctx.op("concat", *parts, axis=0))
    return outs
