"""Converters for data-dependent ATen ops: item, masked_select, unique, bincount, histc,
searchsorted / bucketize.

# NOTE: a result whose size depends on the data gets the unbacked symbol torch.export gave it
# (``u0``, with the range torch._check proved) as its dim: the translator refines every result
# with the shape torch recorded, so the converters here only build the computation. ``item``
# (``_local_scalar_dense``) gives a 0-d value, which later ops read as a symbolic scalar.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Value


@converter("aten._local_scalar_dense.default", "aten.item.default")
def local_scalar_dense(ctx: Ctx, self: Value) -> Value:
    # A one-element tensor read as a number: a 0-d value of the dtype torch's scalar has
    # (int64 for integers, as SymInts are; bool; the tensor's float type).
    x = ctx.op("reshape", self, shape=[])
    meta = ctx.meta
    if isinstance(meta, torch.SymInt | int) and not isinstance(meta, bool):
        return ctx.cast(x, DType.INT64)
    if isinstance(meta, torch.SymBool | bool):
        return ctx.cast(x, DType.BOOL)
    return x


def _flat(ctx: Ctx, x: Value) -> Value:
    return ctx.op("reshape", x, shape=[-1])


@converter("aten.masked_select.default")
def masked_select(ctx: Ctx, self: Value, mask: Value) -> Value:
    # Both broadcast to one shape; the selected elements in row-major order.
    shape = ctx.op("shape", ctx.op("add", ctx.op("cast", mask, to=self.dtype), self))
    x = ctx.op("expand", self, shape)
    m = ctx.op("expand", mask, shape)
    idx = ctx.op("nonzero", _flat(ctx, m))  # [count, 1]
    return ctx.op("gather_nd", _flat(ctx, x), idx)


def _unique(
    ctx: Ctx, x: Value, return_inverse: bool, return_counts: bool, axis: int | None = None
) -> tuple:
    """(values, inverse, counts) as torch gives them: the flat inverse in x's shape (no axis);
    an output not asked for is empty."""
    values, _, inverse, counts = ctx.multi("unique", x, axis=axis, sorted=True)
    if return_inverse and axis is None:
        inverse = ctx.op("reshape", inverse, ctx.op("shape", x))
    if not return_inverse:
        inverse = ctx.op("full", shape=[0], value=0.0, dtype=DType.INT64)
    if not return_counts:
        counts = ctx.op("full", shape=[0], value=0.0, dtype=DType.INT64)
    return values, inverse, counts


@converter("aten._unique2.default")
def unique2(
    ctx: Ctx, self: Value, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
    return_counts: bool = False,
) -> tuple:  # fmt: skip
    # CPU torch.unique sorts whatever ``sorted`` says; the canonical op sorts too.
    return _unique(ctx, self, return_inverse, return_counts)


@converter("aten._unique.default")
def unique(ctx: Ctx, self: Value, sorted: bool = True, return_inverse: bool = False) -> tuple:  # noqa: A002
    values, inverse, _ = _unique(ctx, self, return_inverse, False)
    return values, inverse


@converter("aten.unique_dim.default")
def unique_dim(
    ctx: Ctx, self: Value, dim: int, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
    return_counts: bool = False,
) -> tuple:  # fmt: skip
    return _unique(ctx, self, return_inverse, return_counts, axis=dim)


@converter("aten.unique_consecutive.default")
def unique_consecutive(
    ctx: Ctx, self: Value, return_inverse: bool = False, return_counts: bool = False,
    dim: int | None = None,
) -> tuple:  # fmt: skip
    if dim is not None:
        raise Unsupported("unique_consecutive along a dim")
    flat = _flat(ctx, self)
    n = ctx.op("shape", flat)  # [N]
    head = ctx.op("slice", flat, starts=[0], ends=[-1], axes=[0])
    tail = ctx.op("slice", flat, starts=[1], ends=[2**62], axes=[0])
    first = ctx.op("full", shape=[1], value=1.0, dtype=DType.BOOL)
    starts = ctx.op("concat", first, ctx.op("ne", tail, head), axis=0)  # a run starts here
    idx = ctx.op("reshape", ctx.op("nonzero", starts), shape=[-1])  # run starts, [runs]
    values = ctx.op("gather", flat, idx, axis=0)
    inverse = ctx.op("full", shape=[0], value=0.0, dtype=DType.INT64)
    if return_inverse:
        run = ctx.op("cumsum", ctx.cast(starts, DType.INT64), axis=0)
        inverse = ctx.op("reshape", ctx.op("sub", run, ctx.const(1, DType.INT64)),
                         ctx.op("shape", self))  # fmt: skip
    counts = ctx.op("full", shape=[0], value=0.0, dtype=DType.INT64)
    if return_counts:
        ends = ctx.op("concat", ctx.op("slice", idx, starts=[1], ends=[2**62], axes=[0]), n,
                      axis=0)  # fmt: skip
        counts = ctx.op("sub", ends, idx)
    return values, inverse, counts


@converter("aten.bincount.default")
def bincount(ctx: Ctx, self: Value, weights: Value | None = None, minlength: int = 0) -> Value:
    # out[i] = sum of weights (or 1) where self == i; length max(max(self) + 1, minlength).
    i64 = DType.INT64
    x = ctx.cast(self, i64)
    top = ctx.op("add", ctx.op("reduce_max", x, keepdims=False), ctx.const(1, i64))
    # An empty input has no max: torch gives minlength zeros.
    empty = ctx.op("eq", ctx.op("reduce_prod", ctx.op("shape", x)), ctx.const(0, i64))
    top = ctx.op("where", empty, ctx.const(0, i64), top)
    n = ctx.op("reshape", ctx.op("maximum", top, ctx.const(minlength, i64)), shape=[1])
    dt = to_msc(ctx.meta.dtype) if isinstance(ctx.meta, torch.Tensor) else DType.INT64
    zeros = ctx.op("full", n, value=0.0, dtype=dt)
    ones = ctx.op("full_like", x, value=1.0, dtype=dt) if weights is None else ctx.cast(weights, dt)
    return ctx.op("scatter_elements", zeros, x, ones, axis=0, reduction="add")


@converter("aten.histc.default")
def histc(ctx: Ctx, self: Value, bins: int = 100, min: Any = 0, max: Any = 0) -> Value:  # noqa: A002
    # Equal-width bins over [min, max] (the data's range when both are 0); the last bin is
    # closed; elements outside are ignored.
    x = _flat(ctx, self)
    dt = x.dtype
    if min == max:
        lo = ctx.op("reduce_min", x, keepdims=False)
        hi = ctx.op("reduce_max", x, keepdims=False)
        if min != 0:
            lo = hi = ctx.const(float(min), dt)
        same = ctx.op("eq", lo, hi)  # one value: torch widens the range by 1 each side
        lo = ctx.op("where", same, ctx.op("sub", lo, ctx.const(1.0, dt)), lo)
        hi = ctx.op("where", same, ctx.op("add", hi, ctx.const(1.0, dt)), hi)
    else:
        lo, hi = ctx.const(float(min), dt), ctx.const(float(max), dt)
    inside = ctx.op("logical_and", ctx.op("ge", x, lo), ctx.op("le", x, hi))
    scaled = ctx.op("div", ctx.op("mul", ctx.op("sub", x, lo), ctx.const(float(bins), dt)),
                    ctx.op("sub", hi, lo))  # fmt: skip
    idx = ctx.cast(ctx.op("floor", scaled), DType.INT64)
    idx = ctx.op("clamp", idx, ctx.const(0, DType.INT64), ctx.const(bins - 1, DType.INT64))
    ones = ctx.cast(inside, dt)
    zeros = ctx.op("full", shape=[bins], value=0.0, dtype=dt)
    return ctx.op("scatter_elements", zeros, idx, ones, axis=0, reduction="add")


@converter("aten.histogram.bin_ct")
def histogram(
    ctx: Ctx, self: Value, bins: int = 100, *, range: Any = None,  # noqa: A002
    weight: Value | None = None, density: bool = False,
) -> tuple:  # fmt: skip
    # ``bins`` equal bins over ``range`` (the data's, widened by 0.5 each side when it is one
    # value); the last bin is closed, elements outside are ignored; the edges are returned too.
    x = _flat(ctx, self)
    dt = x.dtype
    if range is not None:  # the bounds known: edges and scale are constants
        a, b = float(range[0]), float(range[1])
        a, b = (a - 0.5, b + 0.5) if a == b else (a, b)
        lo, hi = ctx.const(a, dt), ctx.const(b, dt)
        width = ctx.const(b - a, dt)
        edges = ctx.const(a + np.arange(bins + 1, dtype=np.float64) * ((b - a) / bins), dt)
    else:
        lo = ctx.op("reduce_min", x, keepdims=False)
        hi = ctx.op("reduce_max", x, keepdims=False)
        same = ctx.op("eq", lo, hi)
        lo = ctx.op("where", same, ctx.op("sub", lo, ctx.const(0.5, dt)), lo)
        hi = ctx.op("where", same, ctx.op("add", hi, ctx.const(0.5, dt)), hi)
        width = ctx.op("sub", hi, lo)
        steps = ctx.const(np.arange(bins + 1, dtype=np.float64) / bins, dt)
        edges = ctx.op("add", lo, ctx.op("mul", steps, width))
    inside = ctx.op("logical_and", ctx.op("ge", x, lo), ctx.op("le", x, hi))
    scaled = ctx.op("div", ctx.op("mul", ctx.op("sub", x, lo), ctx.const(float(bins), dt)), width)
    idx = ctx.cast(ctx.op("floor", scaled), DType.INT64)
    idx = ctx.op("clamp", idx, ctx.const(0, DType.INT64), ctx.const(bins - 1, DType.INT64))
    w = ctx.cast(inside, dt)
    if weight is not None:
        w = ctx.op("mul", w, ctx.cast(_flat(ctx, weight), dt))
    zeros = ctx.op("full", shape=[bins], value=0.0, dtype=dt)
    hist = ctx.op("scatter_elements", zeros, idx, w, axis=0, reduction="add")
    if density:  # each bin's share of the total, per unit of width
        total = ctx.op("reduce_sum", hist, keepdims=False)
        bin_width = ctx.op("div", width, ctx.const(float(bins), dt))
        hist = ctx.op("div", hist, ctx.op("mul", total, bin_width))
    return hist, edges


def _searchsorted(ctx: Ctx, seq: Value, values: Value, out_int32: bool, right: bool) -> Value:
    # Per value, how many sorted entries are < it (left) or <= it (right), along the last
    # dim of ``seq`` (1-d seq: shared by every value).
    v = ctx.op("unsqueeze", values, axes=[-1])  # [..., n, 1]
    s = seq if ctx.rank(seq) == 1 else ctx.op("unsqueeze", seq, axes=[-2])  # [..., 1, m]
    if s.dtype is not v.dtype:
        dt = ctx.result_dtype(seq, values)
        s, v = ctx.cast(s, dt), ctx.cast(v, dt)
    hit = ctx.op("le" if right else "lt", s, v)
    count = ctx.op("reduce_sum", ctx.cast(hit, DType.INT64), axes=[-1], keepdims=False)
    return ctx.cast(count, DType.INT32) if out_int32 else count


@converter("aten.searchsorted.Tensor")
def searchsorted(
    ctx: Ctx, sorted_sequence: Value, self: Value, *, out_int32: bool = False,
    right: bool = False, side: str | None = None, sorter: Value | None = None,
) -> Value:  # fmt: skip
    if sorter is not None:
        sorted_sequence = ctx.op("gather_elements", sorted_sequence, sorter, axis=-1)
    return _searchsorted(ctx, sorted_sequence, self, out_int32, right or side == "right")


@converter("aten.searchsorted.Scalar")
def searchsorted_scalar(
    ctx: Ctx, sorted_sequence: Value, self: Any, *, out_int32: bool = False,
    right: bool = False, side: str | None = None, sorter: Value | None = None,
) -> Value:  # fmt: skip
    values = ctx.tensor(self)
    return searchsorted(ctx, sorted_sequence, values, out_int32=out_int32, right=right,
                        side=side, sorter=sorter)  # fmt: skip


@converter("aten.bucketize.Tensor")
def bucketize(
    ctx: Ctx, self: Value, boundaries: Value, *, out_int32: bool = False, right: bool = False
) -> Value:
    return _searchsorted(ctx, boundaries, self, out_int32, right)


@converter("aten.nonzero_static.default")
def nonzero_static(ctx: Ctx, self: Value, *, size: int, fill_value: int = -1) -> Value:
    # nonzero's rows, cut or padded with fill_value to exactly ``size`` rows.
    nz = ctx.op("nonzero", self)  # [count, rank]
    pad = ctx.op("full", shape=[size, ctx.rank(self)], value=float(fill_value), dtype=DType.INT64)
    both = ctx.op("concat", nz, pad, axis=0)
    return ctx.op("slice", both, starts=[0], ends=[size], axes=[0])


@converter("aten.index_reduce.default")
def index_reduce(
    ctx: Ctx, self: Value, dim: int, index: Value, source: Value, reduce: str,
    *, include_self: bool = True,
) -> Value:  # fmt: skip
    # scatter_reduce with the 1-d index spread over source's other dims.
    if ctx.rank(self) == 0:  # 0-d: as 1-element vectors
        one = [ctx.op("reshape", v, shape=[1]) for v in (self, index, source)]
        out = index_reduce(ctx, one[0], 0, one[1], one[2], reduce, include_self=include_self)
        return ctx.op("reshape", out, shape=[])
    r = ctx.rank(source)
    d = dim % max(r, 1)
    shape = [1] * r
    shape[d] = -1
    idx = ctx.op("expand", ctx.op("reshape", ctx.cast(index, DType.INT64), shape=shape),
                 ctx.op("shape", source))  # fmt: skip
    return ctx.call("aten.scatter_reduce.two", self, d, idx, source, reduce,
                    include_self=include_self)  # fmt: skip


@converter("aten.frexp.Tensor", "prims.frexp.default")
def frexp(ctx: Ctx, self: Value) -> tuple:
    # x = m * 2^e with 0.5 <= |m| < 1 (m = x, e = 0 for 0, inf and NaN).
    dt = self.dtype
    a = ctx.op("abs", self)
    finite = ctx.op("logical_and", ctx.op("isfinite", self), ctx.op("ne", a, ctx.const(0.0, dt)))
    safe = ctx.op("where", finite, a, ctx.const(1.0, dt))
    e = ctx.op("add", ctx.op("floor", ctx.op("log2", safe)), ctx.const(1.0, dt))
    m = ctx.op("div", self, ctx.op("exp2", e))
    # log2 rounding can leave |m| at 1 (or just below 0.5): one correction step.
    big = ctx.op("ge", ctx.op("abs", m), ctx.const(1.0, dt))
    e = ctx.op("where", big, ctx.op("add", e, ctx.const(1.0, dt)), e)
    small = ctx.op("lt", ctx.op("abs", m), ctx.const(0.5, dt))
    e = ctx.op("where", small, ctx.op("sub", e, ctx.const(1.0, dt)), e)
    m = ctx.op("div", self, ctx.op("exp2", e))
    m = ctx.op("where", finite, m, self)
    e = ctx.op("where", finite, e, ctx.const(0.0, dt))
    return m, ctx.cast(e, DType.INT32)


@converter("aten.diagonal_scatter.default")
def diagonal_scatter(
    ctx: Ctx, self: Value, src: Value, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> Value:
    # src written on the diagonal of the (dim1, dim2) planes: both dims moved to the front,
    # one scatter_nd at the diagonal's (static) positions, moved back.
    shape = self.type.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise Unsupported("diagonal_scatter on a tensor of unknown shape")
    r = len(shape)
    a, b = dim1 % r, dim2 % r
    rest = [i for i in range(r) if i not in (a, b)]
    perm = [a, b, *rest]
    x = ctx.op("transpose", self, perm=perm)
    n, m = shape[a], shape[b]
    rows = range(max(0, -offset), min(n, m - offset))
    pos = np.asarray([[i, i + offset] for i in rows], np.int64).reshape(-1, 2)
    upd = ctx.op("transpose", ctx.cast(src, self.dtype),
                 perm=[ctx.rank(src) - 1, *range(ctx.rank(src) - 1)])  # fmt: skip
    y = ctx.op("scatter_nd", x, ctx.const(pos, DType.INT64), upd)
    inv = [perm.index(i) for i in range(r)]
    return ctx.op("transpose", y, perm=inv)


@converter("aten.put.default")
def put(ctx: Ctx, self: Value, index: Value, source: Value, accumulate: bool = False) -> Value:
    # self.flatten()[index] = source (added with accumulate), index counted from the end when
    # negative, as torch's take/put read a flat index.
    flat = _flat(ctx, self)
    idx = ctx.cast(_flat(ctx, index), DType.INT64)
    shape = self.type.shape
    static = shape is not None and all(isinstance(d, int) for d in shape)
    numel = (ctx.const(int(np.prod(shape)), DType.INT64) if static
             else ctx.op("reduce_prod", ctx.op("shape", self), keepdims=False))  # fmt: skip
    neg = ctx.op("lt", idx, ctx.const(0, DType.INT64))
    idx = ctx.op("where", neg, ctx.op("add", idx, numel), idx)
    src = ctx.cast(_flat(ctx, source), self.dtype)
    out = ctx.op("scatter_elements", flat, idx, src, axis=0,
                 reduction="add" if accumulate else "none")  # fmt: skip
    if static:
        return ctx.op("reshape", out, shape=list(shape))
    return ctx.op("reshape", out, ctx.op("shape", self))
