"""Emitters for reductions, arg-reductions, scans, top-k and sorting.

# NOTE: ReduceSum takes its axes as an input from opset 13, the other reductions from 18;
# ``axes=None`` omits them (ONNX then reduces every dim). Bool any/all go through int32.
"""

from __future__ import annotations

from codegen.onnx.registry import Emit, Ref, emitter
from msc.ir.dtype import DType

REDUCTIONS = {
    "reduce_sum": ("ReduceSum", 13),
    "reduce_mean": ("ReduceMean", 18),
    "reduce_max": ("ReduceMax", 18),
    "reduce_min": ("ReduceMin", 18),
    "reduce_prod": ("ReduceProd", 18),
    "reduce_l1": ("ReduceL1", 18),
    "reduce_l2": ("ReduceL2", 18),
    "reduce_sum_square": ("ReduceSumSquare", 18),
    "reduce_log_sum": ("ReduceLogSum", 18),
    "reduce_log_sum_exp": ("ReduceLogSumExp", 18),
}


def reduce(e: Emit, onnx_op: str, x: str, axes, keepdims: bool, as_input=None) -> Ref:
    """``onnx_op`` over ``axes`` with the axes as an attribute or an input, per opset."""
    if as_input is None:
        as_input = e.opset >= (13 if onnx_op == "ReduceSum" else 18)
    if axes is None:
        return e.op(onnx_op, x, keepdims=int(keepdims))
    if not axes:  # over no dims: ONNX reads empty axes as "every dim" unless told otherwise
        e.require(as_input, f"{onnx_op} over no axes needs the axes input (noop_with_empty_axes)")
        return e.op(onnx_op, x, keepdims=int(keepdims), noop_with_empty_axes=1)
    if as_input:
        return e.op(onnx_op, x, e.ints(axes), keepdims=int(keepdims))
    return e.op(onnx_op, x, axes=list(axes), keepdims=int(keepdims))


def _runtime_axes(
    e: Emit, onnx_op: str, x: Ref, axes_in: Ref, keepdims: bool, noop: bool = False
) -> Ref:
    """``onnx_op`` over axes the graph computes at run time (passed through as the input)."""
    since = 13 if onnx_op == "ReduceSum" else 18
    e.require(e.opset >= since, f"{onnx_op} with run-time axes needs opset {since}")
    flags = {"noop_with_empty_axes": 1} if noop else {}
    return e.op(onnx_op, x, axes_in, keepdims=int(keepdims), **flags)


# The integer types onnxruntime's CPU kernels reduce (ONNX allows more): any other integer
# type is reduced as i64 and cast back, exact for max / min and, modulo 2^bits as the source
# wraps, for sum / prod (jnp.packbits sums u8). u64 stays: its max / min do not fit i64.
_ORT_INTS = {DType.INT32, DType.INT64}
_ORT_INTS_ORDERED = _ORT_INTS | {DType.INT8, DType.UINT8}
ORT_INTEGER_TYPES = {"ReduceMax": _ORT_INTS_ORDERED, "ReduceMin": _ORT_INTS_ORDERED}


def _reduction(onnx_op: str, as_input: bool):
    def emit(
        e: Emit, x: Ref, axes_in: Ref | None = None, *, axes, keepdims, noop_with_empty_axes=False
    ) -> Ref:
        dt = x.type.dtype if x.type is not None else None
        widen = (
            dt is not None
            and dt.is_integer
            and dt is not DType.UINT64
            and dt not in ORT_INTEGER_TYPES.get(onnx_op, _ORT_INTS)
        )
        if widen:
            x = e.cast(x, DType.INT64)
        if axes_in is not None:
            y = _runtime_axes(e, onnx_op, x, axes_in, keepdims, noop_with_empty_axes)
        else:
            y = reduce(e, onnx_op, x, axes, keepdims, as_input)
        return e.cast(y, dt) if widen else y

    return emit


for _op, (_onnx, _since) in REDUCTIONS.items():
    emitter.register(_op, 1, _reduction(_onnx, as_input=False))  # axes attribute
    emitter.register(_op, _since, _reduction(_onnx, as_input=True))  # axes input


def _bool_reduce(onnx_op: str):
    def emit(
        e: Emit, x: Ref, axes_in: Ref | None = None, *, axes, keepdims, noop_with_empty_axes=False
    ) -> Ref:
        b = x if x.dtype is DType.BOOL else e.cast(x, DType.BOOL)
        if axes_in is not None:
            i32 = e.cast(b, DType.INT32)
            r = _runtime_axes(e, onnx_op, i32, axes_in, keepdims, noop_with_empty_axes)
            return e.cast(r, DType.BOOL)
        r = reduce(e, onnx_op, e.cast(b, DType.INT32), axes, keepdims)
        return e.cast(r, DType.BOOL)

    return emit


emitter.register("reduce_any", 1, _bool_reduce("ReduceMax"))
emitter.register("reduce_all", 1, _bool_reduce("ReduceMin"))


def _arg(onnx_op: str):
    def emit(e: Emit, x: Ref, *, axis, keepdims, select_last_index) -> Ref:
        attrs = {"keepdims": int(keepdims)}
        if select_last_index:
            e.require(e.opset >= 12, f"{onnx_op} select_last_index needs opset 12")
            attrs["select_last_index"] = 1
        if axis is not None:
            return e.op(onnx_op, x, axis=axis, **attrs)
        flat = e.op("Reshape", x, e.ints([-1]))
        attrs["keepdims"] = 0
        out = e.op(onnx_op, flat, axis=0, **attrs)
        if keepdims:
            return e.op("Reshape", out, e.ints([1] * x.rank))
        return out

    return emit


emitter.register("argmax", 1, _arg("ArgMax"))
emitter.register("argmin", 1, _arg("ArgMin"))


def _with_index(reduce_op: str, arg_op: str):
    def emit(e: Emit, x: Ref, *, axis, keepdims):
        values = reduce(e, reduce_op, x, [axis], keepdims)
        indices = e.op(arg_op, x, axis=axis, keepdims=int(keepdims))
        return values, indices

    return emit


emitter.register("max_dim", 1, _with_index("ReduceMax", "ArgMax"))
emitter.register("min_dim", 1, _with_index("ReduceMin", "ArgMin"))


def _axis_in(e: Emit, axis_in: Ref | None, axis) -> Ref:
    return axis_in if axis_in is not None else e.scalar(axis, DType.INT64)


@emitter("cumsum", since=11)
def cumsum(e: Emit, x: Ref, axis_in: Ref | None = None, *, axis, exclusive, reverse) -> Ref:
    a = _axis_in(e, axis_in, axis)
    return e.op("CumSum", x, a, exclusive=int(exclusive), reverse=int(reverse))


@emitter("cumprod", since=26)
def cumprod(e: Emit, x: Ref, axis_in: Ref | None = None, *, axis, exclusive, reverse) -> Ref:
    a = _axis_in(e, axis_in, axis)
    return e.op("CumProd", x, a, exclusive=int(exclusive) or None, reverse=int(reverse) or None)


def _topk(e: Emit, x: Ref, k: Ref, axis: int, largest: bool, sorted_: bool):
    """TopK; a bool input (which ONNX's TopK does not take) ordered as i32, its values bool."""
    b = x.type is not None and x.dtype is DType.BOOL
    if b:
        x = e.cast(x, DType.INT32)
    if e.opset >= 11:
        v, i = e.op("TopK", x, k, outputs=2, axis=axis, largest=int(largest), sorted=int(sorted_))
    else:
        e.require(largest and sorted_, "TopK smallest/unsorted needs opset 11")
        v, i = e.op("TopK", x, k, outputs=2, axis=axis)
    return (e.cast(v, DType.BOOL) if b else v), i


# ONNX TopK is stable whatever ``stable`` says (the flag travels in metadata_props).
@emitter("topk", since=10)
def topk(e: Emit, x: Ref, k_in: Ref | None = None, *, k, axis, largest, sorted, stable):
    if k_in is not None:  # computed at run time: TopK takes it as a 1-d [1] tensor
        kk = k_in if k_in.rank == 1 else e.op("Reshape", k_in, e.ints([1]))
        return _topk(e, x, kk, axis, largest, sorted)
    return _topk(e, x, e.ints([k]), axis, largest, sorted)


def _sort_k(e: Emit, x: Ref, axis: int) -> Ref:
    d = x.shape[axis % x.rank]
    if isinstance(d, int):
        return e.ints([d])
    shape = e.op("Shape", x)
    return e.op("Gather", shape, e.ints([axis % x.rank]), axis=0)


@emitter("sort", since=10)
def sort(e: Emit, x: Ref, *, axis, descending, stable):
    return _topk(e, x, _sort_k(e, x, axis), axis, descending, True)


@emitter("argsort", since=10)
def argsort(e: Emit, x: Ref, *, axis, descending, stable) -> Ref:
    _, idx = _topk(e, x, _sort_k(e, x, axis), axis, descending, True)
    return idx
