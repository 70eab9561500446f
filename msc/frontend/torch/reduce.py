"""Converters for reductions, scans, arg-reductions, norms, top-k and sorting.

# NOTE: ``dim=None`` or ``[]`` reduces every dim (torch's rule for sum/mean/amax). Integer and
# bool sums and products accumulate in int64, as torch does; ``dtype=`` casts first.
"""

from __future__ import annotations

from typing import Any

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
