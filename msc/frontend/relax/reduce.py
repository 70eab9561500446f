"""Relax converters of the reduce family."""

from __future__ import annotations

from msc.frontend.relax.importer import Ctx, converter


def _reduce(op):
    def convert(ctx: Ctx, x, *, attrs):
        axes = None if attrs.axis is None else [int(a) for a in attrs.axis]
        return ctx.op(op, x, axes=axes, keepdims=bool(attrs.keepdims))

    return convert


for _n, _op in {
    "sum": "reduce_sum",
    "mean": "reduce_mean",
    "max": "reduce_max",
    "min": "reduce_min",
    "prod": "reduce_prod",
}.items():
    converter(f"relax.{_n}")(_reduce(_op))


def _arg(op):
    def convert(ctx: Ctx, x, *, attrs):
        axis = None if attrs.axis is None else int(attrs.axis)
        return ctx.op(op, x, axis=axis, keepdims=bool(attrs.keepdims))

    return convert


converter("relax.argmax")(_arg("argmax"))
converter("relax.argmin")(_arg("argmin"))


@converter("relax.cumsum")
def cumsum(ctx: Ctx, x, *, attrs):
    ctx.require(attrs.axis is not None, "cumsum over the flattened tensor")
    ctx.require(attrs.dtype is None or str(attrs.dtype) in ("", str(x.type.dtype.value)), "cast")
    return ctx.op("cumsum", x, axis=int(attrs.axis), exclusive=bool(attrs.exclusive))


@converter("relax.cumprod")
def cumprod(ctx: Ctx, x, *, attrs):
    ctx.require(attrs.axis is not None, "cumprod over the flattened tensor")
    ctx.require(attrs.dtype is None or str(attrs.dtype) in ("", str(x.type.dtype.value)), "cast")
    return ctx.op("cumprod", x, None, axis=int(attrs.axis), exclusive=bool(attrs.exclusive))


def _int64(ctx: Ctx, dtype) -> None:
    ctx.require(str(dtype) == "int64", f"indices of dtype {dtype}")


@converter("relax.topk")
def topk(ctx: Ctx, x, *, attrs):
    k, ret, axis = int(attrs.k), str(attrs.ret_type), int(attrs.axis)
    _int64(ctx, attrs.dtype)
    k_in = None
    if k < 1:  # every element along the axis, in order
        n = x.type.shape[axis] if x.type.shape is not None else None
        ctx.require(n is not None, "topk of every element of a dim of unknown size")
        k, k_in = (n, None) if isinstance(n, int) else (None, ctx.shape_value([n]))
    values, indices = ctx.multi(
        "topk", x, k_in, k=k, axis=axis, largest=bool(attrs.largest), stable=True
    )
    return {"both": (values, indices), "values": values, "indices": indices}[ret]


@converter("relax.sort")
def sort(ctx: Ctx, x, *, attrs):
    values, _ = ctx.multi(
        "sort", x, axis=int(attrs.axis), descending=bool(attrs.descending), stable=True
    )
    return values


@converter("relax.argsort")
def argsort(ctx: Ctx, x, *, attrs):
    _int64(ctx, attrs.dtype)
    return ctx.op(
        "argsort", x, axis=int(attrs.axis), descending=bool(attrs.descending), stable=True
    )
