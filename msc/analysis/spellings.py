"""Spellings: how one graph's attributes and inputs are written, normalized for comparing.

Two exporters write one node differently without computing anything different: ``axis=-1``
against ``axis=3``, a trailing absent input left out or not, a slice's default axes and
steps spelled out, a padding of zeros as none. ``normalize_spellings`` writes each such node
one way, in place; ``msc.analysis.canonical`` runs it with its rewrites (it is not a rewrite:
nothing is counted).

# NOTE: invariants. Every normalization is exact and in place: a node keeps its op and
# outputs and computes what it did; only its attributes change, its trailing absent inputs
# are left out, and a slice's constant axes / steps inputs become attributes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from msc.ir.graph import Graph, Node
from msc.ir.types import TensorType
from msc.ops.rewrite import constant_value

__all__ = ["normalize_spellings"]


# ------------------------------------------------------------------------------ helpers
def _set_op(g: Graph, n: Node, op: str, attrs: dict) -> None:
    """Turn ``n`` into ``op`` with ``attrs`` (normalised by the op's schema, as a frontend's)."""
    n.op = op
    n.attrs = g.opset.get(op).normalize_attrs(attrs)


def _size(shape) -> int:
    return int(np.prod([int(d) for d in shape])) if shape else 1


# ------------------------------------------------------------------------------ spellings
# Ops whose ``axis`` counts the first input's dims (one_hot's counts its output's; dft's
# the complex pair's), so -1 and rank - 1 are one axis.
_AXIS_OPS = {"layer_norm", "rms_norm", "softmax", "log_softmax", "concat", "gather"}
_AXIS_OPS |= {"gather_elements", "scatter_elements", "split", "cumsum", "cumprod"}
_AXIS_OPS |= {"argmax", "argmin", "argsort", "sort", "topk", "max_dim", "min_dim"}
_AXIS_OPS |= {"quantize", "dequantize", "unique"}


def normalize_spellings(g: Graph, done: Counter[str]) -> None:
    """Axes as non-negative (and reduction axes sorted): ``[-1, -2]`` is ``[2, 3]`` of a 4-d
    input; trailing absent inputs left out (``layer_norm(x, _, _)`` is ``layer_norm(x)``). An
    embedding's ``padding_idx`` (a training-only fact) is dropped; a padding of zeros is none
    (``[]``: a TFLite VALID conv, against ONNX's explicit ``pads``), and so is a dilation of
    ones. A reshape's -1 of a static result is the size it inferred. Spellings, not
    rewrites: not counted."""
    for n in g.nodes:
        if n.inputs and n.inputs[-1] is None:
            ins = list(n.inputs)
            while ins and ins[-1] is None:
                ins.pop()
            n.inputs = ins
        x = n.inputs[0] if n.inputs else None
        t = None if x is None else x.type  # a custom node's input may be a sequence
        rank = len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
        if n.op in _AXIS_OPS and rank and isinstance(n.attrs.get("axis"), int):
            if n.attrs["axis"] < 0:
                _set_op(g, n, n.op, {**n.attrs, "axis": n.attrs["axis"] % rank})
        if n.op == "flatten" and rank:
            start, end = n.attrs["start_axis"] % rank, n.attrs["end_axis"] % rank
            if (start, end) != (n.attrs["start_axis"], n.attrs["end_axis"]):
                _set_op(g, n, n.op, {"start_axis": start, "end_axis": end})
        if n.op in ("unsqueeze", "squeeze") and isinstance(n.attrs.get("axes"), tuple | list):
            r = n.outputs[0].type.rank if n.op == "unsqueeze" else rank
            if r:
                new_axes = sorted(a % r for a in n.attrs["axes"])
                if list(n.attrs["axes"]) != new_axes:
                    _set_op(g, n, n.op, {"axes": new_axes})
        pad = n.attrs.get("padding")
        if isinstance(pad, tuple | list) and pad and not any(pad):
            if g.opset.get(n.op).attrs["padding"].default == ():
                _set_op(g, n, n.op, {**n.attrs, "padding": ()})
        dil = n.attrs.get("dilation")
        if isinstance(dil, tuple | list) and dil and all(d == 1 for d in dil):
            if g.opset.get(n.op).attrs["dilation"].default == ():
                _set_op(g, n, n.op, {**n.attrs, "dilation": ()})
        if n.op == "sort" and not n.attrs["stable"] and not n.outputs[1].uses:
            _set_op(g, n, n.op, {**n.attrs, "stable": True})  # ties: equal values, any order
        if n.op in ("quantize", "dequantize") and _per_tensor(n) and n.attrs["axis"] != 1:
            _set_op(g, n, n.op, {**n.attrs, "axis": 1})  # the default; it applies to nothing
        if n.op == "embedding" and n.attrs.get("padding_idx") is not None:
            _set_op(g, n, n.op, {**n.attrs, "padding_idx": None})
        if n.op == "shape" and rank is not None and (n.attrs["end"] or 0) >= rank:
            _set_op(g, n, n.op, {**n.attrs, "end": None})  # the shape up to its last dim
        if n.op == "expand" and rank is not None and n.attrs["shape"] is not None:
            _expand_keeps(g, n, t.shape)
        if n.op == "reshape" and -1 in (n.attrs.get("shape") or ()):
            out = n.outputs[0].type
            dims = out.shape if isinstance(out, TensorType) else None
            if dims is not None and all(isinstance(d, int) for d in dims):
                _set_op(g, n, n.op, {**n.attrs, "shape": list(dims)})  # the -1 it inferred
        if n.op == "slice" and rank:
            _slice_defaults(g, n, rank)
            _slice_whole_axes(g, n, t.shape)
        axes = n.attrs.get("axes") if n.op.startswith("reduce_") else None
        if axes is None or rank is None:
            continue
        new = sorted(a % rank for a in axes)
        if list(axes) != new:
            _set_op(g, n, n.op, {**n.attrs, "axes": new})


def _expand_keeps(g: Graph, n: Node, dims: Sequence[object]) -> None:
    """An expand's target entry that is the input's own static dim is -1 (keep it): a
    target of [-1, 3, 1, -1] of an input [b, 1, 1, s] is [-1, 3, -1, -1]."""
    shape = list(n.attrs["shape"])
    lead = len(shape) - len(dims)
    new = [
        -1 if i >= lead and isinstance(dims[i - lead], int) and s == dims[i - lead] else s
        for i, s in enumerate(shape)
    ]
    if new != shape:
        _set_op(g, n, n.op, {**n.attrs, "shape": new})


def _per_tensor(n: Node) -> bool:
    """A quantize / dequantize of one scale for the whole tensor (its axis applies to
    nothing)."""
    s = n.inputs[1] if len(n.inputs) > 1 else None
    shape = s.type.shape if s is not None and isinstance(s.type, TensorType) else None
    return not n.attrs["block_size"] and shape is not None and len(shape) <= 1 and _size(shape) == 1


def _slice_defaults(g: Graph, n: Node, rank: int) -> None:
    """A slice's default axes (0, 1, ... for as many bounds as it has) and steps (1 each)
    spelled out, its axes non-negative: ``slice(x, s, e)`` is ``slice(x, s, e, axes=[0],
    steps=[1])`` of one-entry bounds, as one frontend writes and another leaves implied."""
    _slice_constant_inputs(g, n)
    attrs = n.attrs
    axes, steps = attrs.get("axes"), attrs.get("steps")
    if axes is None and len(n.inputs) <= 3 and attrs.get("starts") is None:
        shape = n.inputs[1].type.shape if len(n.inputs) > 1 and n.inputs[1] is not None else None
        if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
            return
        axes = list(range(shape[0]))
    if axes is None:
        return
    new_axes = [a % rank for a in axes]
    if not steps and len(n.inputs) <= 4:
        steps = [1] * len(new_axes)
    if (
        list(new_axes) != list(attrs.get("axes") or [])
        or list(steps) != list(attrs.get("steps") or [])
        or (attrs.get("axes") is None)
    ):
        _set_op(g, n, n.op, {**attrs, "axes": new_axes, "steps": list(steps)})


_TO_END = 2**62  # an end this large is "to the end" in every frontend (TFLite's 2**62, 2**63-1)
_INT64_MAX = 2**63 - 1


def _slice_whole_axes(g: Graph, n: Node, shape: Sequence[object]) -> None:
    """A slice's axes that keep the whole dim (start 0, step 1, end at or past the dim) left
    out, and a "to the end" sentinel (or, stepping forward, an end at or past a static dim)
    written as int64's max: TFLite's STRIDED_SLICE names every
    axis (its "to the end" is 2**62), torch.export's slice one. A slice of every axis whole
    (a copy) is spelled as one of axis 0. Left as it is when a bound is computed at run
    time."""
    a = n.attrs
    axes, starts, ends, steps = a.get("axes"), a.get("starts"), a.get("ends"), a.get("steps")
    if len(n.inputs) != 1 or not all(isinstance(v, tuple | list) for v in (axes, starts, ends)):
        return
    steps = list(steps or [1] * len(axes))
    if not len(axes) == len(starts) == len(ends) == len(steps):
        return
    keep, new_starts, new_ends = [], [], []
    for i, ax in enumerate(axes):
        d = shape[ax] if 0 <= ax < len(shape) else None
        past = ends[i] >= _TO_END or (isinstance(d, int) and ends[i] >= d)
        # a start before the first element is the first (int64's min, TFLite's int32 one)
        start = 0 if steps[i] > 0 and isinstance(d, int) and starts[i] <= -d else starts[i]
        if steps[i] == 1 and past and start == 0:
            continue
        keep.append(i)
        new_starts.append(start)
        # an end at or past a static dim is "to the end" (JAX writes the dim, torch int64's max)
        new_ends.append(_INT64_MAX if ends[i] >= _TO_END or past and steps[i] > 0 else ends[i])
    if not keep and shape:
        if list(axes) != [0] or list(starts) != [0] or list(ends) != [_INT64_MAX]:
            whole = {"axes": [0], "starts": [0], "ends": [_INT64_MAX], "steps": [1]}
            _set_op(g, n, n.op, {**a, **whole})
        return
    if not keep or (
        len(keep) == len(axes) and new_ends == list(ends) and new_starts == list(starts)
    ):
        return
    _set_op(g, n, n.op, {
        **a, "axes": [axes[i] for i in keep], "starts": new_starts,
        "ends": new_ends, "steps": [steps[i] for i in keep],
    })  # fmt: skip


def _slice_constant_inputs(g: Graph, n: Node) -> None:
    """A run-time slice's constant axes / steps inputs as attributes (one reader passes an
    ONNX Slice's constant axes as an input, another as an attribute): the same slice."""
    ins = list(n.inputs) + [None] * (5 - len(n.inputs))
    attrs = dict(n.attrs)
    if ins[3] is None and ins[4] is None:
        return
    for i, key in ((3, "axes"), (4, "steps")):
        if ins[i] is None:
            continue
        c = constant_value(ins[i])
        if c is None or c.ndim != 1 or c.dtype.kind not in "iu":
            return  # computed at run time: left as it is
        attrs[key] = [int(a) for a in c]
        ins[i] = None
    while ins and ins[-1] is None:
        ins.pop()
    n.inputs = ins
    _set_op(g, n, n.op, attrs)
