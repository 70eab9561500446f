"""Keras emitters of reductions (``keras.ops.mean`` and friends)."""

from __future__ import annotations

from codegen.keras.model import Emit
from codegen.keras.registry import emitter
from msc.errors import Unsupported

_OPS = {"reduce_mean": "mean", "reduce_max": "max", "reduce_min": "min", "reduce_sum": "sum"}


@emitter(*_OPS)
def reduce(e: Emit, node):
    a = node.attrs
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        raise Unsupported("axes computed at run time")
    axes = a.get("axes")
    r = e.type(0).rank
    glob = {"reduce_mean": "GlobalAveragePooling", "reduce_max": "GlobalMaxPooling"}
    if node.op in glob and axes is not None and 3 <= r <= 5:
        if sorted(int(x) % r for x in axes) == list(range(1, r - 1)):
            keep = bool(a.get("keepdims", False))
            return f"{e.layer(f'{glob[node.op]}{r - 2}D', keepdims=keep)}({e.arg(0)})"
    axis = "None" if axes is None else repr(tuple(int(x) for x in axes))
    keep = bool(a.get("keepdims", False))
    return f"ops.{_OPS[node.op]}({e.arg(0)}, axis={axis}, keepdims={keep!r})"


_LOGICAL = {"reduce_any": "any", "reduce_all": "all"}


@emitter(*_LOGICAL)
def reduce_logical(e: Emit, node):
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        raise Unsupported("axes computed at run time")
    axes = node.attrs.get("axes")
    axis = "None" if axes is None else repr(tuple(int(x) for x in axes))
    keep = bool(node.attrs.get("keepdims", False))
    return f"ops.{_LOGICAL[node.op]}({e.arg(0)}, axis={axis}, keepdims={keep!r})"


@emitter("cumsum")
def cumsum(e: Emit, node):
    a = node.attrs
    if (len(node.inputs) > 1 and node.inputs[1] is not None) or a.get("axis") is None:
        raise Unsupported("an axis computed at run time")
    if a.get("exclusive") or a.get("reverse"):
        raise Unsupported("exclusive or reverse")
    return f"ops.cumsum({e.arg(0)}, axis={int(a['axis'])})"


@emitter("argsort")
def argsort(e: Emit, node):
    """``ops.argsort`` (ascending; Keras promises no order among equal keys, so a node that
    asks for a stable sort is refused)."""
    a = node.attrs
    if a.get("descending") or a.get("stable"):
        raise Unsupported("descending or stable")
    return f"ops.cast(ops.argsort({e.arg(0)}, axis={int(a.get('axis', -1))}), 'int64')"


@emitter("topk")
def topk(e: Emit, node):
    """ops.top_k (the largest k along the last axis, sorted); the smallest as the largest of
    the negation, another axis moved last and back. Values then int64 indices."""
    a = node.attrs
    if a.get("k") is None:
        raise Unsupported("k computed at run time")
    if not a.get("sorted", True):
        raise Unsupported("an unsorted top-k")
    r = e.type(0).rank
    axis = int(a["axis"]) % r
    x = e.arg(0)
    perm = None
    if axis != r - 1:
        perm = [d for d in range(r) if d != axis] + [axis]
        x = e.stmt(f"ops.transpose({x}, {tuple(perm)!r})", f"{node.name or 'topk'}_last")
    if not a.get("largest", True):
        x = e.stmt(f"ops.negative({x})", f"{node.name or 'topk'}_neg")
    both = e.stmt(f"ops.top_k({x}, {int(a['k'])}, sorted=True)", f"{node.name or 'topk'}_both")
    values, idx = f"{both}[0]", f"ops.cast({both}[1], 'int64')"
    if not a.get("largest", True):
        values = f"ops.negative({values})"
    if perm is not None:
        back = tuple(perm.index(d) for d in range(r))
        values, idx = f"ops.transpose({values}, {back!r})", f"ops.transpose({idx}, {back!r})"
    return f"({values}, {idx})"
