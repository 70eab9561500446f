"""Converters for reductions, scans, arg-reductions, norms, top-k and sorting.

# NOTE: ``dim=None`` or ``[]`` reduces every dim (torch's rule for sum/mean/amax). Integer and
# bool sums and products accumulate in int64, as torch does; ``dtype=`` casts first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Value


def _axes(dim: Any) -> list[int] | None:
    if dim is None:
        return None
    if isinstance(dim, int):
        return [dim]
    return list(dim) or None


def _acc(ctx: Ctx, x: Value, dtype: Any, widen: bool) -> Value:
    if dtype is not None:
        return ctx.cast(x, to_msc(dtype))
    if widen and (x.dtype.is_integer or x.dtype is DType.BOOL):
        return ctx.cast(x, DType.INT64)
    return x


def _reduce(op: str, widen: bool = False, float_only: bool = False):
    def convert(ctx: Ctx, self: Value, dim: Any = None, keepdim: bool = False, *, dtype=None):
        x = _acc(ctx, self, dtype, widen)
        if float_only and not (x.dtype.is_floating or x.dtype.is_complex):
            raise Unsupported(f"{op} of an integer tensor (torch raises)")
        if ctx.rank(x) == 0:
            return x
        return ctx.op(op, x, axes=_axes(dim), keepdims=keepdim)

    return convert


converter("aten.sum.dim_IntList")(_reduce("reduce_sum", widen=True))
converter("aten.mean.dim")(_reduce("reduce_mean", float_only=True))
converter("aten.amax.default")(_reduce("reduce_max"))
converter("aten.amin.default")(_reduce("reduce_min"))


@converter("aten.sum.default")
def sum_all(ctx: Ctx, self: Value, *, dtype: Any = None) -> Value:
    return _reduce("reduce_sum", widen=True)(ctx, self, None, False, dtype=dtype)


@converter("aten.mean.default")
def mean_all(ctx: Ctx, self: Value, *, dtype: Any = None) -> Value:
    return _reduce("reduce_mean", float_only=True)(ctx, self, None, False, dtype=dtype)


@converter("aten.prod.default")
def prod_all(ctx: Ctx, self: Value, *, dtype: Any = None) -> Value:
    return _reduce("reduce_prod", widen=True)(ctx, self, None, False, dtype=dtype)


@converter("aten.prod.dim_int")
def prod_dim(ctx: Ctx, self: Value, dim: int, keepdim: bool = False, *, dtype=None) -> Value:
    return _reduce("reduce_prod", widen=True)(ctx, self, [dim], keepdim, dtype=dtype)


def _minmax_all(op: str):
    def convert(ctx: Ctx, self: Value) -> Value:
        return self if ctx.rank(self) == 0 else ctx.op(op, self, keepdims=False)

    return convert


converter("aten.max.default")(_minmax_all("reduce_max"))
converter("aten.min.default")(_minmax_all("reduce_min"))


def _logical_reduce(op: str):
    def convert(ctx: Ctx, self: Value, dim: Any = None, keepdim: bool = False) -> Value:
        x = ctx.cast(self, DType.BOOL)
        if ctx.rank(x) == 0:
            return x
        return ctx.op(op, x, axes=_axes(dim), keepdims=keepdim)

    return convert


converter("aten.any.default", "aten.any.dim", "aten.any.dims")(_logical_reduce("reduce_any"))
converter("aten.all.default", "aten.all.dim", "aten.all.dims")(_logical_reduce("reduce_all"))


def _with_index(op: str):
    def convert(ctx: Ctx, self: Value, dim: int, keepdim: bool = False) -> tuple:
        if ctx.rank(self) == 0:
            return self, ctx.const(0, DType.INT64)
        return tuple(ctx.node(op, [self], {"axis": dim, "keepdims": keepdim}))

    return convert


converter("aten.max.dim")(_with_index("max_dim"))
converter("aten.min.dim")(_with_index("min_dim"))


def _binary_minmax(op: str):
    def convert(ctx: Ctx, self: Value, other: Value) -> Value:
        return ctx.op(op, *ctx.promote(self, other))

    return convert


converter("aten.max.other")(_binary_minmax("maximum"))
converter("aten.min.other")(_binary_minmax("minimum"))


def _arg(op: str):
    def convert(ctx: Ctx, self: Value, dim: int | None = None, keepdim: bool = False) -> Value:
        if ctx.rank(self) == 0:
            return ctx.const(0, DType.INT64)
        return ctx.op(op, self, axis=dim, keepdims=keepdim)

    return convert


converter("aten.argmax.default")(_arg("argmax"))
converter("aten.argmin.default")(_arg("argmin"))


def _var(ctx: Ctx, x: Value, dim: Any, correction: float, keepdim: bool) -> Value:
    if ctx.rank(x) == 0:
        return x
    return ctx.op("var", x, axes=_axes(dim), keepdims=keepdim, correction=float(correction))


@converter("aten.var.correction", "aten.var.correction_names")
def var_correction(ctx, self, dim=None, *, correction=None, keepdim=False) -> Value:
    return _var(ctx, self, dim, 1.0 if correction is None else correction, keepdim)


@converter("aten.var.dim")
def var_dim(ctx, self, dim, unbiased=True, keepdim=False) -> Value:
    return _var(ctx, self, dim, 1.0 if unbiased else 0.0, keepdim)


@converter("aten.var.default")
def var_all(ctx, self, unbiased=True) -> Value:
    return _var(ctx, self, None, 1.0 if unbiased else 0.0, False)


@converter("aten.std.correction")
def std_correction(ctx, self, dim=None, *, correction=None, keepdim=False) -> Value:
    return ctx.op("sqrt", var_correction(ctx, self, dim, correction=correction, keepdim=keepdim))


@converter("aten.std.dim")
def std_dim(ctx, self, dim, unbiased=True, keepdim=False) -> Value:
    return ctx.op("sqrt", var_dim(ctx, self, dim, unbiased, keepdim))


@converter("aten.std.default")
def std_all(ctx, self, unbiased=True) -> Value:
    return ctx.op("sqrt", var_all(ctx, self, unbiased))


@converter("aten.var_mean.correction")
def var_mean(ctx, self, dim=None, *, correction=None, keepdim=False) -> tuple:
    v = var_correction(ctx, self, dim, correction=correction, keepdim=keepdim)
    m = ctx.op("reduce_mean", self, axes=_axes(dim), keepdims=keepdim)
    return v, m


@converter("aten.var_mean.dim")
def var_mean_dim(ctx, self, dim, unbiased=True, keepdim=False) -> tuple:
    return var_mean(ctx, self, dim, correction=1 if unbiased else 0, keepdim=keepdim)


@converter("aten.std_mean.correction")
def std_mean(ctx, self, dim=None, *, correction=None, keepdim=False) -> tuple:
    v, m = var_mean(ctx, self, dim, correction=correction, keepdim=keepdim)
    return ctx.op("sqrt", v), m


@converter("aten.logsumexp.default")
def logsumexp(ctx: Ctx, self: Value, dim: Any, keepdim: bool = False) -> Value:
    (x,) = ctx.promote(self, kind="int_to_float")
    if ctx.rank(x) == 0:  # dim 0 of a 0-d tensor names the value itself: log(exp(x)) = x
        return x
    return ctx.op("reduce_log_sum_exp", x, axes=_axes(dim), keepdims=keepdim)


@converter("aten.cumsum.default")
def cumsum(ctx: Ctx, self: Value, dim: int, *, dtype: Any = None) -> Value:
    x = _acc(ctx, self, dtype, widen=True)
    return x if ctx.rank(x) == 0 else ctx.op("cumsum", x, axis=dim)


@converter("aten.cumprod.default")
def cumprod(ctx: Ctx, self: Value, dim: int, *, dtype: Any = None) -> Value:
    x = _acc(ctx, self, dtype, widen=True)
    return x if ctx.rank(x) == 0 else ctx.op("cumprod", x, axis=dim)


@converter("aten.topk.default")
def topk(ctx, self, k, dim=-1, largest=True, sorted=True) -> tuple:
    return tuple(
        ctx.node("topk", [self], {"k": k, "axis": dim, "largest": largest, "sorted": sorted})
    )


@converter("aten.sort.default")
def sort(ctx: Ctx, self: Value, dim: int = -1, descending: bool = False) -> tuple:
    return tuple(ctx.node("sort", [self], {"axis": dim, "descending": descending}))


@converter("aten.sort.stable")
def sort_stable(ctx, self, *, stable=None, dim=-1, descending=False) -> tuple:
    attrs = {"axis": dim, "descending": descending, "stable": bool(stable)}
    return tuple(ctx.node("sort", [self], attrs))


@converter("aten.argsort.default", "aten.argsort.stable")
def argsort(ctx, self, dim=-1, descending=False, *, stable=False) -> Value:
    return ctx.op("argsort", self, axis=dim, descending=descending, stable=bool(stable))


def _norm(ctx: Ctx, x: Value, p: Any, dim: Any, keepdim: bool) -> Value:
    p = 2.0 if p is None else float(p)
    axes = _axes(dim)
    if p == 2:
        return ctx.op("reduce_l2", x, axes=axes, keepdims=keepdim)
    if p == 1:
        return ctx.op("reduce_l1", x, axes=axes, keepdims=keepdim)
    if p == float("inf"):
        return ctx.op("reduce_max", ctx.op("abs", x), axes=axes, keepdims=keepdim)
    if p == float("-inf"):
        return ctx.op("reduce_min", ctx.op("abs", x), axes=axes, keepdims=keepdim)
    s = ctx.op("reduce_sum", ctx.op("pow", ctx.op("abs", x), ctx.const(p, x.dtype)),
               axes=axes, keepdims=keepdim)  # fmt: skip
    return ctx.op("pow", s, ctx.const(1.0 / p, x.dtype))


@converter("aten.linalg_vector_norm.default")
def linalg_vector_norm(ctx, self, ord=2, dim=None, keepdim=False, *, dtype=None) -> Value:
    x = self if dtype is None else ctx.cast(self, to_msc(dtype))
    return _norm(ctx, x, ord, dim, keepdim)


@converter("aten.norm.ScalarOpt_dim", "aten.norm.Scalar", "aten.norm.ScalarOpt_dim_dtype")
def norm(ctx, self, p=2, dim=None, keepdim=False, **_: Any) -> Value:
    return _norm(ctx, self, p, dim, keepdim)


@converter("aten.frobenius_norm.dim")
def frobenius_norm(ctx, self, dim, keepdim=False) -> Value:
    return _norm(ctx, self, 2, dim, keepdim)


# ------------------------------------------------------- order statistics, running extrema
def _pick(ctx: Ctx, x: Value, index: Value | int, dim: int, keepdim: bool) -> Value:
    """x's entry at ``index`` along ``dim`` (an int, or an i64 tensor broadcast over the
    other dims with a size-1 ``dim``)."""
    if isinstance(index, int):
        idx = ctx.const([index], DType.INT64)
        out = ctx.op("gather", x, idx, axis=dim)
    else:
        out = ctx.op("gather_elements", x, index, axis=dim)
    return out if keepdim else ctx.op("squeeze", out, axes=[dim])


def _rank0(ctx: Ctx, x: Value) -> bool:
    return ctx.rank(x) == 0


@converter("aten.kthvalue.default")
def kthvalue(ctx: Ctx, self: Value, k: int, dim: int = -1, keepdim: bool = False) -> tuple:
    if _rank0(ctx, self):
        return self, ctx.const(0, DType.INT64)
    values, indices = ctx.multi("sort", self, axis=dim, stable=True)
    return (_pick(ctx, values, k - 1, dim, keepdim), _pick(ctx, indices, k - 1, dim, keepdim))


def _static_len(ctx: Ctx, x: Value, dim: int) -> int:
    n = x.type.shape[dim] if x.type.shape is not None else None
    if not isinstance(n, int):
        raise Unsupported("median along a dim of unknown size")
    return n


@converter("aten.median.dim")
def median_dim(ctx: Ctx, self: Value, dim: int, keepdim: bool = False) -> tuple:
    # The lower median: the ((n - 1) // 2)-th smallest (NaN sorts last, as torch's).
    if _rank0(ctx, self):
        return self, ctx.const(0, DType.INT64)
    n = _static_len(ctx, self, dim)
    values, indices = ctx.multi("sort", self, axis=dim, stable=True)
    k = (n - 1) // 2
    v, i = _pick(ctx, values, k, dim, keepdim), _pick(ctx, indices, k, dim, keepdim)
    if self.dtype.is_floating:  # a NaN anywhere makes the median NaN, at the first NaN
        nan = ctx.op("isnan", self)
        any_nan = ctx.op("reduce_any", nan, axes=[dim], keepdims=keepdim)
        first = ctx.op("argmax", ctx.cast(nan, DType.INT32), axis=dim, keepdims=keepdim)
        v = ctx.op("where", any_nan, ctx.const(float("nan"), self.dtype), v)
        i = ctx.op("where", any_nan, first, i)
    return v, i


@converter("aten.median.default")
def median(ctx: Ctx, self: Value) -> Value:
    flat = ctx.op("reshape", self, shape=[-1])
    return median_dim(ctx, flat, 0, False)[0]


@converter("aten.nanmedian.dim")
def nanmedian_dim(ctx: Ctx, self: Value, dim: int, keepdim: bool = False) -> tuple:
    # The lower median of the non-NaN entries (NaN when all are NaN): sorted, NaNs last.
    if _rank0(ctx, self):
        return self, ctx.const(0, DType.INT64)
    values, indices = ctx.multi("sort", self, axis=dim, stable=True)
    if not self.dtype.is_floating:
        n = _static_len(ctx, self, dim)
        return _pick(ctx, values, (n - 1) // 2, dim, keepdim), _pick(
            ctx, indices, (n - 1) // 2, dim, keepdim
        )  # noqa: E501
    ok = ctx.op("logical_not", ctx.op("isnan", self))
    count = ctx.op("reduce_sum", ctx.cast(ok, DType.INT64), axes=[dim], keepdims=True)
    k = ctx.op("floor_divide", ctx.op("sub", count, ctx.const(1, DType.INT64)),
               ctx.const(2, DType.INT64))  # fmt: skip
    k = ctx.op("maximum", k, ctx.const(0, DType.INT64))
    return _pick(ctx, values, k, dim, keepdim), _pick(ctx, indices, k, dim, keepdim)


@converter("aten.nanmedian.default")
def nanmedian(ctx: Ctx, self: Value) -> Value:
    return nanmedian_dim(ctx, ctx.op("reshape", self, shape=[-1]), 0, False)[0]


def _running(canonical: str, fill: float):
    # cummax / cummin: over j <= i of x[j] (a triangular mask, O(n^2)); the index is the last
    # j attaining it, as torch's.
    def convert(ctx: Ctx, self: Value, dim: int) -> tuple:
        r = ctx.rank(self)
        if r == 0:
            return self, ctx.const(0, DType.INT64)
        n = _static_len(ctx, self, dim)
        d = dim % r
        x = ctx.op("unsqueeze", self, axes=[d])  # [..., 1(i), n(j), ...]
        tri = np.tril(np.ones((n, n), dtype=bool))  # [i, j]: j <= i
        shape = [1] * (r + 1)
        shape[d], shape[d + 1] = n, n
        mask = ctx.op("reshape", ctx.const(tri, DType.BOOL), shape=shape)
        big = ctx.const(fill if self.dtype.is_floating else _int_fill(self.dtype, fill), self.dtype)
        masked = ctx.op("where", mask, x, big)
        values = ctx.op(f"reduce_{canonical}", masked, axes=[d + 1], keepdims=False)
        arg = "argmax" if canonical == "max" else "argmin"
        if self.dtype.is_floating:  # a NaN wins from where it appears, as torch
            nan = ctx.op("isnan", masked)
            masked = ctx.op("where", nan, ctx.const(-fill, self.dtype), masked)
        idx = ctx.op(arg, masked, axis=d + 1, keepdims=False, select_last_index=True)
        return values, idx

    return convert


def _int_fill(dtype: DType, fill: float) -> int:
    info = np.iinfo(dtype.to_numpy()) if dtype is not DType.BOOL else None
    if info is None:
        return 0 if fill < 0 else 1
    return int(info.min) if fill < 0 else int(info.max)


converter("aten.cummax.default")(_running("max", float("-inf")))
converter("aten.cummin.default")(_running("min", float("inf")))


@converter("aten.logcumsumexp.default")
def logcumsumexp(ctx: Ctx, self: Value, dim: int) -> Value:
    # log(cumsum(exp(x - m))) + m with m the max along dim (finite where x is).
    (x,) = ctx.promote(self, kind="int_to_float")
    if ctx.rank(x) == 0:
        return x
    m = ctx.op("reduce_max", x, axes=[dim], keepdims=True)
    m = ctx.op("where", ctx.op("isfinite", m), m, ctx.const(0.0, x.dtype))
    s = ctx.op("cumsum", ctx.op("exp", ctx.op("sub", x, m)), axis=dim)
    return ctx.op("add", ctx.op("log", s), m)


@converter("aten.mode.default")
def mode(ctx: Ctx, self: Value, dim: int = -1, keepdim: bool = False) -> tuple:
    # The most frequent value along dim (the smallest of those tied) and the index of its
    # last occurrence, as torch's CPU kernel gives: counts from an [.., n, n] equality table.
    if _rank0(ctx, self):
        return self, ctx.const(0, DType.INT64)
    r = ctx.rank(self)
    d = dim % r
    perm = [i for i in range(r) if i != d] + [d]
    x = ctx.op("transpose", self, perm=perm) if d != r - 1 else self
    n = _static_len(ctx, self, d)
    same = ctx.op("eq", ctx.op("unsqueeze", x, axes=[r]), ctx.op("unsqueeze", x, axes=[r - 1]))
    count = ctx.op("reduce_sum", ctx.cast(same, DType.INT64), axes=[-1], keepdims=False)
    best = ctx.op("reduce_max", count, axes=[-1], keepdims=True)
    top = _dtype_max(ctx, x.dtype)
    value = ctx.op("reduce_min", ctx.op("where", ctx.op("eq", count, best), x, top), axes=[-1],
                   keepdims=True)  # fmt: skip
    pos = ctx.op("arange", end=float(n), dtype=DType.INT64)
    at = ctx.op("where", ctx.op("eq", x, value), pos, ctx.const(-1, DType.INT64))
    index = ctx.op("reduce_max", at, axes=[-1], keepdims=True)
    if keepdim:
        inv = [perm.index(i) for i in range(r)]
        return ctx.op("transpose", value, perm=inv), ctx.op("transpose", index, perm=inv)
    return (ctx.op("squeeze", value, axes=[r - 1]), ctx.op("squeeze", index, axes=[r - 1]))


def _dtype_max(ctx: Ctx, dt: DType) -> Value:
    if dt.is_floating:
        return ctx.const(float("inf"), dt)
    if dt is DType.BOOL:
        return ctx.const(True, dt)
    return ctx.const(int(np.iinfo(dt.to_numpy()).max), dt)


# ----------------------------------------------------------------------- bags and segments
def _positions(ctx: Ctx, v: Value) -> Value:
    """0, 1, ..., len(v) - 1 for a 1-d ``v`` (of any, even symbolic, length)."""
    ones = ctx.op("full_like", v, value=1.0, dtype=DType.INT64)
    return ctx.op("sub", ctx.op("cumsum", ones, axis=0), ctx.const(1, DType.INT64))


def _members(ctx: Ctx, n_items: Value, starts: Value, ends: Value) -> Value:
    """[segments, items] bool: item i is in segment s when starts[s] <= i < ends[s]."""
    pos = ctx.op("unsqueeze", _positions(ctx, n_items), axes=[0])
    s, e = (ctx.op("unsqueeze", b, axes=[1]) for b in (starts, ends))
    return ctx.op("logical_and", ctx.op("ge", pos, s), ctx.op("lt", pos, e))


def _segment(
    ctx: Ctx, how: str, data: Value, member: Value, initial: Any = None
) -> tuple[Value, Value]:
    """(``how`` of the rows of ``data`` [items, ...] in each segment, the segments' sizes
    [segments, 1, ...] to broadcast against it),
    ``member`` [segments, items] saying which rows a segment has. ``how``: sum | mean | max |
    min | prod; ``initial`` joins every segment's reduction (a mean still divides by the
    size, and an empty segment's mean is ``initial``, NaN without one)."""
    dt = data.dtype
    extra = ctx.rank(data) - 1
    m = ctx.op("unsqueeze", member, axes=list(range(2, 2 + extra))) if extra else member
    count = ctx.op("reduce_sum", ctx.cast(m, DType.INT64), axes=[1], keepdims=False)
    rows = ctx.op("unsqueeze", data, axes=[0])  # [1, items, ...]
    neutral = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}
    picked = ctx.op("where", m, rows, ctx.const(neutral[how], dt))
    op = {"sum": "reduce_sum", "mean": "reduce_sum", "prod": "reduce_prod",
          "max": "reduce_max", "min": "reduce_min"}[how]  # fmt: skip
    out = ctx.op(op, picked, axes=[1], keepdims=False)
    if initial is not None:
        init = ctx.const(float(initial), dt)
        join = {"sum": "add", "mean": "add", "prod": "mul", "max": "maximum", "min": "minimum"}
        out = ctx.op(join[how], out, init)
    if how == "mean":
        out = ctx.op("div", out, ctx.cast(count, dt))
        if initial is not None:
            empty = ctx.op("eq", count, ctx.const(0, DType.INT64))
            out = ctx.op("where", empty, ctx.const(float(initial), dt), out)
    return out, count


@converter("aten.embedding_bag.padding_idx")
def embedding_bag(
    ctx: Ctx, weight: Value, indices: Value, offsets: Value, scale_grad_by_freq: bool,
    mode: int, sparse: bool, per_sample_weights: Value | None, include_last_offset: bool,
    padding_idx: int | None,
) -> tuple:  # fmt: skip
    # Bag b is indices[offsets[b]:offsets[b + 1]] (to the end for the last); its rows of
    # weight summed (times per_sample_weights), averaged or maxed, skipping padding_idx; an
    # empty bag gives zeros. Only the result is computed: offset2bag, bag_size and
    # max_indices (training bookkeeping) are left untranslated.
    how = {0: "sum", 1: "mean", 2: "max"}.get(int(mode))
    if how is None:
        raise Unsupported(f"embedding_bag mode {mode}")
    i64 = DType.INT64
    if ctx.rank(indices) != 1:  # F.embedding_bag flattens 2-d bags before calling it
        raise Unsupported("embedding_bag of 2-d indices")
    idx = ctx.cast(indices, i64)
    offs = ctx.cast(offsets, i64)
    n_static = ctx.shape(idx)[0]
    n = ctx.const([n_static], i64) if isinstance(n_static, int) else ctx.op("shape", idx)
    if include_last_offset:
        starts = ctx.call("aten.slice.Tensor", offs, 0, 0, -1)
        ends = ctx.call("aten.slice.Tensor", offs, 0, 1)
    else:
        starts = offs
        ends = ctx.op("concat", ctx.call("aten.slice.Tensor", offs, 0, 1), n, axis=0)
    member = _members(ctx, idx, starts, ends)
    if padding_idx is not None and padding_idx >= 0:
        keep = ctx.op("ne", idx, ctx.const(int(padding_idx), i64))
        member = ctx.op("logical_and", member, ctx.op("unsqueeze", keep, axes=[0]))
    rows = ctx.op("gather", weight, idx, axis=0)  # [items, dim]
    if per_sample_weights is not None:
        w = ctx.cast(per_sample_weights, rows.dtype)
        rows = ctx.op("mul", rows, ctx.op("unsqueeze", w, axes=[1]))
    out, count = _segment(ctx, how, rows, member)
    some = ctx.op("gt", count, ctx.const(0, i64))  # [bags, 1]
    return ctx.op("where", some, out, ctx.const(0.0, rows.dtype)), None, None, None


@converter("aten.embedding_bag.default")
def embedding_bag_default(
    ctx: Ctx, weight: Value, indices: Value, offsets: Value, scale_grad_by_freq: bool = False,
    mode: int = 0, sparse: bool = False, per_sample_weights: Value | None = None,
    include_last_offset: bool = False,
) -> tuple:  # fmt: skip
    return embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                         per_sample_weights, include_last_offset, None)  # fmt: skip


@converter("aten._embedding_bag_forward_only.default", "aten._embedding_bag.default")
def embedding_bag_forward(
    ctx: Ctx, weight: Value, indices: Value, offsets: Value, scale_grad_by_freq: bool = False,
    mode: int = 0, sparse: bool = False, per_sample_weights: Value | None = None,
    include_last_offset: bool = False, padding_idx: int = -1,
) -> tuple:  # fmt: skip
    return embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                         per_sample_weights, include_last_offset, padding_idx)  # fmt: skip


@converter("aten.segment_reduce.default")
def segment_reduce(
    ctx: Ctx, data: Value, reduce: str, *, lengths: Value | None = None,
    indices: Value | None = None, offsets: Value | None = None, axis: int = 0,
    unsafe: bool = False, initial: Any = None,
) -> Value:  # fmt: skip
    # Segment s covers data[offsets[s]:offsets[s + 1]] along axis (offsets from lengths by a
    # running sum); the segments replace that axis.
    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise Unsupported(f"segment_reduce {reduce!r}")
    bounds = lengths if lengths is not None else offsets
    if bounds is None or indices is not None or ctx.rank(bounds) != 1:
        raise Unsupported("segment_reduce other than by 1-d lengths or offsets")
    i64 = DType.INT64
    bounds = ctx.cast(bounds, i64)
    if lengths is not None:
        run = ctx.op("cumsum", bounds, axis=0)
        bounds = ctx.op("concat", ctx.const([0], i64), run, axis=0)
    starts = ctx.call("aten.slice.Tensor", bounds, 0, 0, -1)
    ends = ctx.call("aten.slice.Tensor", bounds, 0, 1)
    r = ctx.rank(data)
    a = axis % r
    perm = [a, *(i for i in range(r) if i != a)]
    x = ctx.op("transpose", data, perm=perm) if a else data
    n = ctx.shape(data)[a]
    if isinstance(n, int):
        items = ctx.op("full", shape=[n], value=0.0, dtype=i64)
    else:
        size = ctx.op("slice", ctx.op("shape", data), starts=[a], ends=[a + 1], axes=[0])
        items = ctx.op("full", size, value=0.0, dtype=i64)
    out, _ = _segment(ctx, reduce, x, _members(ctx, items, starts, ends), initial)
    return ctx.op("transpose", out, perm=[perm.index(i) for i in range(r)]) if a else out
