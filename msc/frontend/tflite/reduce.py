"""TFLite reductions (MEAN, SUM, REDUCE_*), arg max / min, top-k, cumulative sums."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.tflite.importer import Ctx
from msc.frontend.tflite.registry import converter

REDUCERS = {
    "MEAN": "reduce_mean",
    "SUM": "reduce_sum",
    "REDUCE_PROD": "reduce_prod",
    "REDUCE_MAX": "reduce_max",
    "REDUCE_MIN": "reduce_min",
    "REDUCE_ANY": "reduce_any",
    "REDUCE_ALL": "reduce_all",
}


def _axes(ctx: Ctx, t) -> list[int]:
    return sorted({int(a) for a in np.asarray(ctx.array(t, "the axes")).reshape(-1)})


def _reducer(op: str):
    def convert(ctx: Ctx, x, axis, *, keep_dims=False):
        axes = _axes(ctx, axis)
        xv = ctx.value(x)
        if not axes:
            return ctx.op("identity", xv)
        return ctx.op(op, xv, axes=axes, keepdims=bool(keep_dims))

    return convert


for _tfl, _op in REDUCERS.items():
    converter(_tfl)(_reducer(_op))


def _arg(op: str):
    def convert(ctx: Ctx, x, axis, *, output_type=4):
        axes = _axes(ctx, axis)
        if len(axes) != 1:
            raise Unsupported(f"an arg reduction over {len(axes)} axes")
        return ctx.as_out(ctx.op(op, ctx.value(x), axis=axes[0], keepdims=False))

    return convert


converter("ARG_MAX")(_arg("argmax"))
converter("ARG_MIN")(_arg("argmin"))


@converter("TOPK_V2")
def topk_v2(ctx: Ctx, x, k):
    kk = int(np.asarray(ctx.array(k, "k")).reshape(-1)[0])
    values, indices = ctx.multi("topk", ctx.value(x), k=kk, axis=-1, largest=True, sorted=True)
    return values, ctx.as_out(indices, 1)


@converter("CUMSUM")
def cumsum(ctx: Ctx, x, axis, *, exclusive=False, reverse=False):
    a = int(np.asarray(ctx.array(axis, "the axis")).reshape(-1)[0])
    return ctx.op("cumsum", ctx.value(x), axis=a, exclusive=bool(exclusive), reverse=bool(reverse))
