"""Graph-level steps before emission that make the generated code read like PyTorch.

# NOTE: invariants
# - Each step returns a new graph (``copy_graph``), or the graph itself when it changes
#   nothing; the caller's graph is never edited. ``as_generated`` applies the same steps, so a
#   re-import of the generated module is compared with what the code really computes.
# - Only weights whose source gave them no role (ONNX initializers) are touched: a torch
#   model's parameters, buffers and constants are state and stay weights.
"""

from __future__ import annotations

from msc.ir.graph import Graph, GraphError, Weight

__all__ = ["SHAPE_WEIGHT_ELEMENTS", "shape_weights_as_constants"]

# An integer initializer this small (0-d or 1-d) is a shape, axis or index list, not state.
SHAPE_WEIGHT_ELEMENTS = 16


def _is_shape_weight(w: Weight, outputs: set[int]) -> bool:
    t = w.type
    return (
        w.role == ""
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
