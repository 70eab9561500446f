"""Relax converters of the shape family."""

from __future__ import annotations

import numpy as np

from msc.frontend.relax.importer import Ctx, converter
from msc.ir.graph import Weight
from msc.ir.types import SymDim, SymExpr


@converter("relax.permute_dims")
def permute_dims(ctx: Ctx, x, *, attrs):
    rank = len(x.type.shape)
    perm = list(range(rank))[::-1] if attrs.axes is None else [int(a) for a in attrs.axes]
    return ctx.op("transpose", x, perm=perm)


@converter("relax.reshape")
def reshape(ctx: Ctx, x, shape, *, attrs=None):
    dims = list(shape)
    sym = [i for i, d in enumerate(dims) if isinstance(d, SymDim | SymExpr)]
    ctx.require(len(sym) <= 1, "a reshape to more than one symbolic dim")
    target = [-1 if i in sym else int(d) for i, d in enumerate(dims)]
    return ctx.op("reshape", x, None, shape=target)


@converter("relax.expand_dims")
def expand_dims(ctx: Ctx, x, *, attrs):
    return ctx.op("unsqueeze", x, axes=[int(a) for a in attrs.axis])


@converter("relax.squeeze")
def squeeze(ctx: Ctx, x, *, attrs):
    axes = None if attrs.axis is None else [int(a) for a in attrs.axis]
    return ctx.op("squeeze", x, axes=axes)


@converter("relax.flatten")
def flatten(ctx: Ctx, x, *, attrs=None):
    return ctx.op("flatten", x)


@converter("relax.broadcast_to")
def broadcast_to(ctx: Ctx, x, shape, *, attrs=None):
    dims = list(shape)
    ctx.require(all(isinstance(d, int) for d in dims), "broadcast_to a symbolic shape")
    return ctx.op("expand", x, None, shape=[int(d) for d in dims])


@converter("relax.concat")
def concat(ctx: Ctx, xs, *, attrs):
    return ctx.op("concat", *xs, axis=int(attrs.axis))


@converter("relax.split")
def split(ctx: Ctx, x, *, attrs):
    axis = int(attrs.axis)
    n = x.type.shape[axis]
    ctx.require(isinstance(n, int), "a split of a symbolic dim")
    ind = attrs.indices_or_sections
    if isinstance(ind, int) or hasattr(ind, "value"):
        k = int(ind)
        sizes = [n // k] * k
    else:
        cuts = [0] + [int(c) for c in ind] + [n]
        sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    return tuple(ctx.multi("split", x, axis=axis, sizes=sizes))


@converter("relax.strided_slice")
def strided_slice(ctx: Ctx, x, axes, begin, end, strides=None, *, attrs=None):
    def ints(v, what):
        ctx.require(all(isinstance(i, int) for i in v), f"a run-time or symbolic slice {what}")
        return [int(i) for i in v]

    axes = ints(axes, "axis")
    steps = ints(strides, "step") if strides is not None else [1] * len(axes)
    return ctx.op(
        "slice", x, starts=ints(begin, "start"), ends=ints(end, "end"), axes=axes, steps=steps
    )


@converter("relax.take")
def take(ctx: Ctx, x, indices, *, attrs):
    ctx.require(attrs.axis is not None, "take from the flattened tensor")
    mode = str(attrs.mode)
    if mode == "wrap":  # the same as "fast" for constant indices already in range
        arr = _known(indices)
        n = x.type.shape[int(attrs.axis)] if x.type.shape is not None else None
        ctx.require(
            arr is not None and isinstance(n, int) and bool(((arr >= 0) & (arr < n)).all()),
            "take mode wrap with indices that may be out of range",
        )
    else:
        ctx.require(mode == "fast", f"take mode {mode}")
    return ctx.op("gather", x, indices, axis=int(attrs.axis))


def _known(v) -> np.ndarray | None:
    """The data of a bound constant (a constant weight, or a constant node), else None."""
    if isinstance(v, Weight):
        return v.numpy() if v.has_data and v.role == "constant" else None
    node = getattr(v, "producer", None)
    return np.asarray(node.attrs["value"]) if node is not None and node.op == "constant" else None


@converter("relax.tril")
def tril(ctx: Ctx, x, k=0, *, attrs=None):
    return ctx.op("trilu", x, upper=False, k=int(k))


@converter("relax.triu")
def triu(ctx: Ctx, x, k=0, *, attrs=None):
    return ctx.op("trilu", x, upper=True, k=int(k))


@converter("relax.tile")
def tile(ctx: Ctx, x, *, attrs):
    return ctx.op("tile", x, repeats=[int(r) for r in attrs.repeats])


@converter("relax.flip")
def flip(ctx: Ctx, x, *, attrs):
    return ctx.op("flip", x, axes=[int(attrs.axis)])


@converter("relax.zeros")
def zeros(ctx: Ctx, shape, *, attrs):
    t = ctx.out_type()
    ctx.require(t.is_static, "zeros of a symbolic shape")
    return ctx.op("full", None, shape=list(t.shape), value=0.0, dtype=t.dtype)


@converter("relax.ones")
def ones(ctx: Ctx, shape, *, attrs):
    t = ctx.out_type()
    ctx.require(t.is_static, "ones of a symbolic shape")
    return ctx.op("full", None, shape=list(t.shape), value=1.0, dtype=t.dtype)


@converter("relax.full_like")
def full_like(ctx: Ctx, x, value, *, attrs):
    v = value.producer.attrs["value"] if value.producer is not None else None
    ctx.require(v is not None, "full_like with a run-time value")
    return ctx.op("full_like", x, value=float(np.asarray(v)), dtype=ctx.out_type().dtype)


def _const_value(ctx: Ctx, v, what: str) -> float:
    node = getattr(v, "producer", None)
    ctx.require(node is not None and node.op == "constant", f"{what} computed at run time")
    return float(np.asarray(node.attrs["value"]))


@converter("relax.zeros_like")
def zeros_like(ctx: Ctx, x, *, attrs):
    return ctx.op("full_like", x, value=0.0, dtype=ctx.out_type().dtype)


@converter("relax.ones_like")
def ones_like(ctx: Ctx, x, *, attrs):
    return ctx.op("full_like", x, value=1.0, dtype=ctx.out_type().dtype)


@converter("relax.full")
def full(ctx: Ctx, shape, value, *, attrs):
    t = ctx.out_type()
    ctx.require(t.is_static, "full of a symbolic shape")
    v = _const_value(ctx, value, "the fill value")
    return ctx.op("full", None, shape=list(t.shape), value=v, dtype=t.dtype)


@converter("relax.arange")
def arange(ctx: Ctx, start, end, step, *, attrs):
    for v, what in ((start, "start"), (end, "end"), (step, "step")):
        ctx.require(isinstance(v, int | float), f"a symbolic arange {what}")
    return ctx.op(
        "arange", start=float(start), end=float(end), step=float(step), dtype=ctx.out_type().dtype
    )


@converter("relax.gather_elements")
def gather_elements(ctx: Ctx, x, indices, *, attrs):
    return ctx.op("gather_elements", x, indices, axis=int(attrs.axis))


@converter("relax.index_tensor")
def index_tensor(ctx: Ctx, x, indices, *, attrs=None):
    return ctx.op("index", x, *indices, axes=list(range(len(indices))))


class ShapeOf(list):
    """``R.shape_of(x)``: its dims (what a reshape or broadcast_to reads), remembering ``x`` for
    a ``shape_to_tensor`` of it."""

    def __init__(self, x) -> None:
        super().__init__(x.type.shape)
        self.of = x


@converter("relax.shape_of")
def shape_of(ctx: Ctx, x, *, attrs=None):
    ctx.require(x.type.shape is not None, "the shape of a tensor of unknown rank")
    return ShapeOf(x)


@converter("relax.shape_to_tensor")
def shape_to_tensor(ctx: Ctx, shape, *, attrs=None):
    if isinstance(shape, ShapeOf):
        return ctx.op("shape", shape.of)
    ctx.require(all(isinstance(d, int) for d in shape), "a tensor of a symbolic shape expression")
    return ctx.op("constant", value=np.asarray(shape, dtype=np.int64))
