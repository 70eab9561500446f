"""keras.ops reductions recorded in functional models (``ops.mean`` and friends)."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter

_OPS = {
    "ops.Mean": "reduce_mean",
    "ops.Max": "reduce_max",
    "ops.Min": "reduce_min",
    "ops.Sum": "reduce_sum",
    "ops.Any": "reduce_any",
    "ops.All": "reduce_all",
}


@converter(*_OPS)
def reduce(ctx: Ctx, op, x, *rest, **kw):
    if rest or kw or getattr(op, "initial", None) is not None:
        raise Unsupported("arguments msc does not read")
    axis = op.axis
    if axis is None:
        axes = list(range(x.type.rank))
    else:
        axes = [int(a) for a in (axis if isinstance(axis, list | tuple) else [axis])]
    return ctx.op(_OPS[f"ops.{type(op).__name__}"], x, axes=axes, keepdims=bool(op.keepdims))


@converter("ops.Cumsum")
def cumsum_op(ctx: Ctx, op, x):
    if op.axis is None:
        raise Unsupported("axis=None (a flattened sum)")
    if op.dtype is not None:
        raise Unsupported(f"dtype={op.dtype}")
    return ctx.op("cumsum", x, axis=int(op.axis))


@converter("ops.Argsort")
def argsort_op(ctx: Ctx, op, x):
    if op.axis is None:
        raise Unsupported("axis=None")
    from msc.ir import DType

    return ctx.op("cast", ctx.op("argsort", x, axis=int(op.axis)), to=DType.INT32)


@converter("ops.TopK")
def top_k_op(ctx: Ctx, op, x):
    """(values, int32 indices) of the k largest along the last axis; unsorted means any order,
    which the sorted result is one of."""
    from msc.ir import DType

    values, idx = ctx.multi("topk", x, k=int(op.k), axis=-1, largest=True, sorted=True)
    return values, ctx.op("cast", idx, to=DType.INT32)
