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
