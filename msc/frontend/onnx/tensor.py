"""ONNX tensor ops with data-dependent or bit-level results: BitCast, Unique, Det,
ReverseSequence and TensorScatter (the quantized ops are in quant.py).
"""

from __future__ import annotations

from msc.frontend.onnx.importer import Ctx
from msc.frontend.onnx.initializers import dtype_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType


@converter("BitCast", since=26)
def bitcast(ctx: Ctx, input, *, to):  # noqa: A002
    return ctx.op("bitcast", input, to=dtype_from_onnx(to))


@converter("Unique", since=11)
def unique(ctx: Ctx, X, *, axis=None, sorted=1):  # noqa: N803, A002
    return ctx.ops("unique", X, axis=axis, sorted=bool(sorted))


@converter("Det", since=11)
def det(ctx: Ctx, X):  # noqa: N803
    return ctx.op("det", X)


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx: Ctx, input, sequence_lens, *, batch_axis=1, time_axis=0):  # noqa: A002
    lens = ctx.cast(sequence_lens, DType.INT64)
    return ctx.op("reverse_sequence", input, lens, batch_axis=batch_axis, time_axis=time_axis)


@converter("TensorScatter", since=24)
def tensor_scatter(ctx: Ctx, past_cache, update, write_indices=None, *, axis=-2, mode="linear"):
    idx = None if write_indices is None else ctx.cast(write_indices, DType.INT64)
    return ctx.op("tensor_scatter", past_cache, update, idx, axis=axis, mode=mode)
