"""Reductions, arg-reductions, scans and top-k.

# NOTE: reduction axes came as an attribute before opset 13 (ReduceSum) / 18 (the others) and as
# an optional input since; both become the canonical ``axes`` attribute. Empty axes reduce over
# every dim, or (``noop_with_empty_axes=1``) leave the input as it is.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.registry import converter
from msc.ir import DType

# ONNX op -> (canonical op, opset where axes became an input)
REDUCE = {
    "ReduceSum": ("reduce_sum", 13),
    "ReduceMean": ("reduce_mean", 18),
    "ReduceMax": ("reduce_max", 18),
    "ReduceMin": ("reduce_min", 18),
    "ReduceProd": ("reduce_prod", 18),
    "ReduceL1": ("reduce_l1", 18),
    "ReduceL2": ("reduce_l2", 18),
    "ReduceSumSquare": ("reduce_sum_square", 18),
    "ReduceLogSum": ("reduce_log_sum", 18),
    "ReduceLogSumExp": ("reduce_log_sum_exp", 18),
}


# Reductions whose value over no axes is the input itself (the others apply |x|, x*x or log).
_IDENTITY_OVER_NO_AXES = {
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_log_sum_exp",
}


def _reduce(ctx: Ctx, canon: str, data, axes, keepdims, noop):
    if not axes:
        if noop and canon in _IDENTITY_OVER_NO_AXES:
            return data
        axes = [] if noop else None
    return ctx.op(canon, data, axes=axes, keepdims=bool(keepdims))


def _reduce_attr(canon: str):
    def convert(ctx: Ctx, data, *, axes=None, keepdims=1):
        return _reduce(ctx, canon, data, axes, keepdims, 0)

    convert.__name__ = canon
    return convert


def _reduce_input(canon: str):
    def convert(ctx: Ctx, data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        if axes is not None and ctx.known(axes) is None:
            # Axes computed at run time: the canonical op's axes input (empty: every dim, or
            # none with noop_with_empty_axes).
            flags = {"keepdims": bool(keepdims), "noop_with_empty_axes": bool(noop_with_empty_axes)}
            return ctx.op(canon, data, ctx.cast(axes, DType.INT64), **flags)
        ax = None if axes is None else ctx.ints(axes, "axes")
        return _reduce(ctx, canon, data, ax, keepdims, noop_with_empty_axes)

    convert.__name__ = canon
    return convert


for _onnx, (_canon, _since) in REDUCE.items():
    converter(_onnx, since=1)(_reduce_attr(_canon))
    converter(_onnx, since=_since)(_reduce_input(_canon))


def _arg(canon: str):
    def convert(ctx: Ctx, data, *, axis=0, keepdims=1, select_last_index=0):
        return ctx.op(
            canon,
            data,
            axis=axis,
            keepdims=bool(keepdims),
            select_last_index=bool(select_last_index),
        )

    convert.__name__ = canon
    return convert


converter("ArgMax", since=1)(_arg("argmax"))
converter("ArgMin", since=1)(_arg("argmin"))


@converter("CumSum", since=11)
def cumsum(ctx: Ctx, x, axis, *, exclusive=0, reverse=0):
    if ctx.known(axis) is None:
        ax = ctx.int_input(axis)
        return ctx.op("cumsum", x, ax, axis=None, exclusive=bool(exclusive), reverse=bool(reverse))
    a = int(ctx.scalar(axis, "axis"))
    return ctx.op("cumsum", x, axis=a, exclusive=bool(exclusive), reverse=bool(reverse))


@converter("CumProd", since=26)
def cumprod(ctx: Ctx, x, axis, *, exclusive=0, reverse=0):
    if ctx.known(axis) is None:
        flags = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
        return ctx.op("cumprod", x, ctx.int_input(axis), axis=None, **flags)
    a = int(ctx.scalar(axis, "axis"))
    y = ctx.op("flip", x, axes=[a]) if reverse else x
    y = ctx.op("cumprod", y, axis=a)
    if exclusive:
        r = ctx.rank(x)
        a_ = a % r
        y = ctx.op("slice", y, starts=[0], ends=[-1], axes=[a_], steps=[1])
        pads = [0] * (2 * r)
        pads[a_] = 1
        y = ctx.op("pad", y, pads=pads, value=1.0)
    return ctx.op("flip", y, axes=[a]) if reverse else y


# ONNX TopK puts the lower index first among equal values (every opset says so).
def _topk(ctx: Ctx, x, k: int, axis: int, largest: int, sorted_: int):
    attrs = {"axis": axis, "largest": bool(largest), "sorted": bool(sorted_), "stable": True}
    v, i = ctx.ops("topk", x, k=k, **attrs)
    return [v, i]


@converter("TopK", since=1)
def topk_1(ctx: Ctx, X, *, k, axis=-1):  # noqa: N803
    return _topk(ctx, X, k, axis, 1, 1)


@converter("TopK", since=10)
def topk(ctx: Ctx, X, K, *, axis=-1, largest=1, sorted=1):  # noqa: N803, A002
    if ctx.known(K) is None:
        k = ctx.int_input(K)
        attrs = {"axis": axis, "largest": bool(largest), "sorted": bool(sorted), "stable": True}
        return list(ctx.ops("topk", X, k, k=None, **attrs))
    return _topk(ctx, X, int(ctx.scalar(K, "k")), axis, largest, sorted)


@converter("Hardmax", since=1)
def hardmax_1(ctx: Ctx, input, *, axis=1):  # noqa: A002
    # Before opset 13 the input is seen as 2-d [prod(dims[:axis]), prod(dims[axis:])].
    s = ctx.static_shape(input)
    r = ctx.rank(input)
    a = axis % r if r else 0
    if a == r - 1:
        return hardmax(ctx, input, axis=-1)
    if s is None:
        raise Unsupported("Hardmax before opset 13 over several dims needs a static shape")
    flat = ctx.op("reshape", input, shape=[int(np.prod(s[:a])), int(np.prod(s[a:]))])
    return ctx.op("reshape", hardmax(ctx, flat, axis=-1), shape=list(s))


@converter("Hardmax", since=13)
def hardmax(ctx: Ctx, input, *, axis=-1):  # noqa: A002
    depth = ctx.shape(input)[axis]
    if not isinstance(depth, int):
        raise Unsupported("Hardmax over a dim only known at run time")
    idx = ctx.op("argmax", input, axis=axis, keepdims=False)
    return ctx.op("one_hot", idx, depth=depth, axis=axis, dtype=ctx.dtype(input))
