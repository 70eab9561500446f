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

__all__ = [
    "SHAPE_WEIGHT_ELEMENTS",
    "shape_weights_as_constants",
    "indices_from_the_end",
    "MASK_ELEMENTS",
    "constant_masks",
]

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


# Largest attention mask computed when the code is generated (elements).
MASK_ELEMENTS = 1 << 22


def _computed_from_nothing(graph: Graph) -> set[int]:
    """Ids of the nodes whose outputs no graph input, weight or random op feeds: ``arange``s,
    constants and what is computed from them alone (a mask transformers builds for inputs
    without an attention_mask)."""
    from msc.ops.custom import is_custom

    free: set[int] = set()
    made: set[int] = set()  # ids of their output values
    for n in graph.nodes:
        if (
            "rand" in n.op
            or is_custom(n.op)
            or any(True for _ in n.subgraphs())
            or any(v is not None and id(v) not in made for v in n.inputs)
        ):
            continue
        free.add(id(n))
        made.update(id(v) for v in n.outputs)
    return free


def _mask_cone(graph: Graph, masks: list[Value]) -> Graph:
    """The nodes computing ``masks`` as a graph of their own, with the masks its outputs."""
    want = {id(v) for v in masks}
    cone = []
    for n in reversed(graph.nodes):
        if any(id(v) in want for v in n.outputs):
            cone.append(n)
            want.update(id(v) for v in n.inputs if v is not None)
    one = Graph("masks")
    image: dict[int, Value] = {}
    for n in reversed(cone):
        ins = [None if v is None else image[id(v)] for v in n.inputs]
        node = one.add_node(n.op, ins, dict(n.attrs), output_types=[v.type for v in n.outputs])
        image.update(zip((id(v) for v in n.outputs), node.outputs))
    one.set_outputs([image[id(v)] for v in masks])
    return one


def _mask_facts(c: np.ndarray, q: Value, k: Value) -> tuple[bool, bool] | None:
    """(the mask hides nothing, the mask is the causal triangle) for a mask value ``c`` of
    attention over ``q`` and ``k``; None when it is neither."""
    from msc.ops.fusions import causal_mask_value

    if c.dtype == np.bool_ and c.all() or np.issubdtype(c.dtype, np.floating) and not c.any():
        return True, False
    n, s = q.type.shape[-2], k.type.shape[-2]  # type: ignore[index]
    if c.ndim < 2 or any(d != 1 for d in c.shape[:-2]) or type(n) is not int or type(s) is not int:
        return None
    try:
        c = np.broadcast_to(c.reshape(c.shape[-2:]), (n, s))
    except ValueError:
        return None
    return (False, True) if causal_mask_value(c) else None


def constant_masks(graph: Graph) -> Graph:
    """``graph`` with each attention mask that no input, weight or random op feeds computed
    now, by the codegen's own code: a mask that hides nothing is left out, and the causal
    triangle becomes ``is_causal=True``. That is how the eager model calls SDPA where
    transformers builds such a mask for the export (inputs without an attention_mask): the
    kernel then reads no mask (no bool -> float conversion per call) and skips what the
    triangle hides. The nodes that computed the mask go when nothing else reads them."""
    free = _computed_from_nothing(graph)
    todo: list[tuple[int, Value]] = []
    for i, n in enumerate(graph.nodes):
        if n.op != "attention" or len(n.inputs) < 4 or n.inputs[3] is None:
            continue
        q, k, m = n.inputs[0], n.inputs[1], n.inputs[3]
        p = m.producer
        if p is None or id(p) not in free or not m.type.is_static or q is None or k is None:
            continue
        if q.type.shape is None or k.type.shape is None or q.type.rank < 2:
            continue
        if (m.type.numel() or 0) > MASK_ELEMENTS:
            continue
        todo.append((i, m))
    if not todo:
        return graph
    from codegen.torch import to_module

    masks = list({id(m): m for _, m in todo}.values())
    try:
        values = to_module(_mask_cone(graph, masks), flat=True)()
    except Exception:  # noqa: BLE001  (an op that cannot run here: the mask stays computed)
        return graph
    from torch.utils._pytree import tree_leaves

    computed = {id(m): v.numpy() for m, v in zip(masks, tree_leaves(values))}
    facts = {}
    for i, m in todo:
        n = graph.nodes[i]
        f = _mask_facts(computed[id(m)], n.inputs[0], n.inputs[1])  # type: ignore[arg-type]
        if f is not None:
            facts[i] = f
    if not facts:
        return graph
    from msc.ir.graph import dead_nodes
    from msc.ops.rewrite import copy_graph

    out = copy_graph(graph)
    for i, (_, causal) in facts.items():
        n = out.nodes[i]
        n.inputs = [*n.inputs[:3], None]
        n.attrs = {**n.attrs, "is_causal": n.attrs["is_causal"] or causal}
    cone = {id(out.nodes[i]) for i, n in enumerate(graph.nodes) if id(n) in free}
    out.remove_nodes([n for n in dead_nodes(out) if id(n) in cone])
    return out
