"""ONNX emitters of the tensor family (bitcast, det, range, unique, reverse_sequence,
tensor_scatter)."""

from __future__ import annotations

from codegen.onnx.registry import ONNX_DTYPE, Emit, Ref, emitter
from msc.ir.dtype import DType


# ---------------------------------------------------------------- tensor
@emitter("bitcast", since=26)
def bitcast(e: Emit, x: Ref, *, to: DType):
    return e.op("BitCast", x, to=ONNX_DTYPE[to])


@emitter("unique", since=11)
def unique(e: Emit, x: Ref, *, axis, sorted):  # noqa: A002
    return e.op("Unique", x, outputs=4, axis=axis, sorted=int(sorted))


@emitter("range", since=11)
def range_(e: Emit, start: Ref, limit: Ref, delta: Ref):
    return e.op("Range", start, limit, delta)


@emitter("det", since=11)
def det(e: Emit, x: Ref):
    return e.op("Det", x)


@emitter("reverse_sequence", since=10)
def reverse_sequence(e: Emit, x: Ref, sequence_lens: Ref, *, batch_axis, time_axis):
    return e.op("ReverseSequence", x, sequence_lens, batch_axis=batch_axis, time_axis=time_axis)


@emitter("tensor_scatter", since=24)
def tensor_scatter(e: Emit, past_cache, update, write_indices, *, axis, mode):
    return e.op("TensorScatter", past_cache, update, write_indices, axis=axis, mode=mode)
