"""Graph-level steps before emission that make the generated code read like PyTorch.

# NOTE: invariants
# - Each step returns a new graph (``copy_graph``), or the graph itself when it changes
#   nothing; the caller's graph is never edited. ``as_generated`` applies the same steps, so a
#   re-import of the generated module is compared with what the code really computes.
# - Only weights that are not state are touched: those whose source gave them no role (ONNX
#   initializers) or called them constants (tensor literals of the code, the shape pieces
#   torch.onnx made); a model's parameters and buffers stay weights.
# - What torch cannot say in one call is spelled as graph ops before emission (indices counted
#   from the end, for torch.gather), so the re-import of the code is the graph as prepared.
"""

from __future__ import annotations

import numpy as np

from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Graph, GraphError, Node, Value, Weight
from msc.ops.rewrite import Match, Pattern, rewrite

__all__ = ["SHAPE_WEIGHT_ELEMENTS", "shape_weights_as_constants", "indices_from_the_end"]

# An integer initializer this small (0-d or 1-d) is a shape, axis or index list, not state.
SHAPE_WEIGHT_ELEMENTS = 16


def _is_shape_weight(w: Weight, outputs: set[int]) -> bool:
    t = w.type
    return (
        w.role in ("", "constant")
        and not w.aliases
        and w.uses
        and id(w) not in outputs
        and (t.dtype.is_integer or t.dtype.is_bool)
        and t.shape is not None
        and t.is_static
        and len(t.shape) <= 1
        and (t.numel() or 0) <= SHAPE_WEIGHT_ELEMENTS
        and w.has_data
    )


def shape_weights_as_constants(graph: Graph) -> Graph:
    """``graph`` with its small integer initializers (ONNX's ``[1]``, ``[-1, 8]`` shape
    pieces) made ``constant`` nodes of the same name: the code then writes them as literals
    where sizes are computed (``[batch, -1, 8]``), in Python, as torch.export can trace,
    instead of reading a buffer's values at run time."""
    outputs = {id(v) for v in graph.outputs}
    picks = [n for n, w in graph.weights.items() if _is_shape_weight(w, outputs)]
    if not picks:
        return graph
    from msc.ops.rewrite import copy_graph

    out = copy_graph(graph)
    for name in picks:
        w = out.weights.pop(name)
        value = w.numpy().copy()
        try:
            c = out.add_node("constant", [], {"value": value}, output_names=[name]).output
        except GraphError:  # a value of that name exists: a name by position
            c = out.op("constant", value=value)
        w.replace_all_uses_with(c)
    out.sort()
    return out


# Ops whose torch function refuses a negative index (torch.gather, torch.scatter*), where the
# canonical op may count one from the end (``negative_indices``).
_FROM_END_OPS = ("gather_elements", "scatter_elements")


def _from_end_match(n: Node) -> Match | None:
    if n.op not in _FROM_END_OPS or not n.attrs.get("negative_indices"):
        return None
    x, i = n.inputs[0], n.inputs[1]
    if x is None or i is None or x.type.shape is None:
        return None
    axis = n.attrs["axis"] % len(x.type.shape)
    d = x.type.shape[axis]
    p = i.producer  # a constant node's values, never a weight's (state may change)
    c = np.asarray(p.attrs["value"]) if p is not None and p.op == "constant" else None
    if not isinstance(d, int) and i.type.dtype is not DType.INT64:
        return None  # a run-time size is an int64: the emitter wraps these inline
    ins = {f"in{k}": v for k, v in enumerate(n.inputs) if v is not None}
    info = {"axis": axis, "n": len(n.inputs), "wrap": c is None or bool((c < 0).any())}
    return Match(n, [n], ins, info=info)  # type: ignore[arg-type]


def _from_end(b: Builder, m: Match) -> Value:
    n, axis = m.root, m.info["axis"]
    ins = [m.values.get(f"in{k}") for k in range(m.info["n"])]
    x, i = ins[0], ins[1]
    if m.info["wrap"]:
        d = x.type.shape[axis]  # type: ignore[union-attr, index]
        size = (
            b.const(d, i.dtype)  # type: ignore[union-attr]
            if isinstance(d, int)
            else b.op("squeeze", b.op("shape", x, start=axis, end=axis + 1), axes=[0])
        )
        below = b.op("lt", i, b.const(0, i.dtype))  # type: ignore[union-attr]
        ins[1] = b.op("where", below, b.op("add", i, size), i)
    return b.op(n.op, *ins, **{**n.attrs, "negative_indices": False})


FROM_END = Pattern("indices_from_the_end", matcher=_from_end_match, replace=_from_end)


def indices_from_the_end(graph: Graph) -> Graph:
    """``graph`` with the indices of gather_elements / scatter_elements that may count from
    the end (``negative_indices``) wrapped by graph ops, ``where(i < 0, i + dim, i)``, and the
    flag cleared: torch.gather and torch.scatter refuse a negative index, so that is the code
    written, and a re-import of it (torch.export) reads these ops back. Constant indices that
    are never negative only lose the flag."""
    if not any(_from_end_match(n) for n in graph.nodes):
        return graph
    return rewrite(graph, [FROM_END])
