"""TFLite emitters for reductions, arg max / min, top-k and cumulative sums."""

from __future__ import annotations

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.dtype import DType
from msc.ir.types import TensorType

REDUCERS = {
    "reduce_mean": "MEAN",
    "reduce_sum": "SUM",
    "reduce_prod": "REDUCE_PROD",
    "reduce_max": "REDUCE_MAX",
    "reduce_min": "REDUCE_MIN",
    "reduce_any": "REDUCE_ANY",
    "reduce_all": "REDUCE_ALL",
}


def _reducer(name: str):
    def emit(
        e: Emit, x: Ref, axes_in: Ref | None = None, *, axes, keepdims, noop_with_empty_axes
    ) -> Ref:
        e.require(axes_in is None, "run-time axes")
        if axes is not None and not axes and noop_with_empty_axes:
            return x
        ax = list(range(x.rank)) if not axes else sorted(int(a) % x.rank for a in axes)
        return e.op(name, [x, e.ints(ax)], e.out_type(), keep_dims=bool(keepdims))

    return emit


for _op, _tfl in REDUCERS.items():
    emitter(_op)(_reducer(_tfl))


@emitter("reduce_sum_square")
def reduce_sum_square(
    e: Emit, x: Ref, axes_in: Ref | None = None, *, axes, keepdims, noop_with_empty_axes
) -> Ref:
    sq = e.op("MUL", [x, x], x.type)
    return _reducer("SUM")(
        e, sq, axes_in, axes=axes, keepdims=keepdims, noop_with_empty_axes=noop_with_empty_axes
    )


def _arg(name: str):
    def emit(e: Emit, x: Ref, *, axis, keepdims, select_last_index) -> Ref:
        e.require(not select_last_index, "the last index among equal values")
        e.require(axis is not None, "an arg reduction over every dim")
        a = int(axis) % x.rank
        t = e.out_type()
        shape = [d for i, d in enumerate(x.shape) if i != a]
        code = 4 if t.dtype is DType.INT64 else 2
        y = e.op(name, [x, e.ints([a])], TensorType(t.dtype, shape), output_type=code)
        return e.expand_dims(y, a) if keepdims else y

    return emit


emitter("argmax")(_arg("ARG_MAX"))
emitter("argmin")(_arg("ARG_MIN"))


@emitter("topk")
def topk(e: Emit, x: Ref, k_in=None, *, k, axis, largest, sorted, stable):
    e.require(k_in is None and k is not None, "top-k with a run-time k")
    e.require(largest and sorted, "the smallest k, or unsorted")
    e.require(int(axis) % x.rank == x.rank - 1, "top-k along a dim other than the last")
    vt, it = (v.type for v in e.node.outputs)
    values, idx = e.op("TOPK_V2", [x, e.ints([k])], [vt, TensorType(DType.INT32, it.shape)])
    return values, e.cast(idx, it.dtype)


@emitter("cumsum")
def cumsum(e: Emit, x: Ref, axis_in=None, *, axis, exclusive, reverse) -> Ref:
    e.require(axis_in is None and axis is not None, "a run-time axis")
    return e.op(
        "CUMSUM",
        [x, e.ints([int(axis) % x.rank])],
        e.out_type(),
        exclusive=bool(exclusive),
        reverse=bool(reverse),
    )
