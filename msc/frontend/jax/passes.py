"""Graph clean-up after the walk: StableHLO spells every implicit broadcast out
(``broadcast_in_dim`` of a scalar or a bias before each elementwise op), which canonical ops
do themselves (numpy broadcasting). Dropping those makes the graph read like the model and lets
msc.ops.fusions recognize softmax, GELU, layer norm and linear.

# NOTE: invariants
# - A broadcast (``expand``, and the all-ones ``reshape`` before it) is bypassed only when every
#   user is a broadcasting elementwise op whose output already has the expanded shape (so
#   dropping it changes no type), and the bypassed value keeps the expanded rank or is 0-d.
"""

from __future__ import annotations

from msc.ir import Graph, TensorType
from msc.ir.graph import dead_nodes

__all__ = ["drop_broadcasts"]

BROADCASTING = {
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "where",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "atan2",
    "fmod",
}


def _shape(v) -> tuple | None:
    t = v.type
    return tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _full_other(user, index: int, want) -> bool:
    """``user`` broadcasts, its output is ``want``, and an input other than ``index`` already
    has that shape (so the one at ``index`` may be smaller)."""
    if user.op not in BROADCASTING or want is None or _shape(user.outputs[0]) != want:
        return False
    return any(
        j != index and x is not None and _shape(x) == want for j, x in enumerate(user.inputs)
    )


def drop_broadcasts(graph: Graph) -> Graph:
    """``graph`` (changed in place) with broadcasts its elementwise users do themselves
    bypassed."""
    changed = False
    for node in graph.nodes:  # loop bodies and branches (they broadcast alike)
        for sub in node.subgraphs():
            drop_broadcasts(sub)
    for node in list(graph.nodes):
        if node.op != "expand" or node.inputs[0] is None:
            continue
        out = node.outputs[0]
        want = _shape(out)
        uses = out.uses
        if not uses or want is None or out in graph.outputs:
            continue
        if not all(_full_other(u, i, want) for u, i in uses):
            continue
        src = node.inputs[0]
        # a scalar made all-ones by a reshape: use the scalar itself
        p = src.producer
        if (
            p is not None
            and p.op == "reshape"
            and p.inputs[0] is not None
            and _shape(p.inputs[0]) == ()
        ):
            src = p.inputs[0]
        out.replace_all_uses_with(src)
        changed = True
    # a reshape that only puts size-1 dims in front (a bias made [1, n]): broadcasting does it
    for node in list(graph.nodes):
        if node.op != "reshape" or node.inputs[0] is None:
            continue
        out, src = node.outputs[0], node.inputs[0]
        a, b = _shape(src), _shape(out)
        if a is None or b is None or len(b) < len(a) or out in graph.outputs:
            continue
        k = len(b) - len(a)
        if b[k:] != a or any(d != 1 for d in b[:k]) or not out.uses:
            continue
        if not all(
            u.op in BROADCASTING
            and _shape(u.outputs[0]) is not None
            and len(_shape(u.outputs[0])) >= len(b)
            and any(_shape(x) == _shape(u.outputs[0]) for x in u.inputs if x is not None)
            for u, _ in out.uses
        ):
            continue
        out.replace_all_uses_with(src)
        changed = True
    if changed:
        graph.remove_nodes(dead_nodes(graph))
    return graph
