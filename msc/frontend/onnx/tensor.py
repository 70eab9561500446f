"""ONNX tensor ops with data-dependent or bit-level results: BitCast, Unique, Det,
ReverseSequence, TensorScatter, and QLinearMatMul (the other quantized ops are in quant.py).

# NOTE: the integer/quantized ops map onto existing canonical ops with their exact arithmetic:
# zero-point-centered 8-bit integers multiplied and summed exactly in float64; QLinearMatMul
# then scales by a_scale * b_scale / y_scale (computed in the scales' dtype, as ONNX does),
# rounds half to even and saturates.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
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


@converter("QLinearMatMul", since=10)
def qlinear_matmul(
    ctx: Ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
):
    out = ctx.dtype(y_zero_point)
    if out not in (DType.INT8, DType.UINT8):
        raise Unsupported(f"QLinearMatMul to {out.short}")
    f64 = DType.FLOAT64

    def centered(x, zp):
        return ctx.op("sub", ctx.cast(x, f64), ctx.cast(zp, f64))

    acc = ctx.op("matmul", centered(a, a_zero_point), centered(b, b_zero_point))
    scale = ctx.op("div", ctx.op("mul", a_scale, b_scale), y_scale)
    y = ctx.op("add", ctx.op("mul", acc, ctx.cast(scale, f64)), ctx.cast(y_zero_point, f64))
    info = np.iinfo(out.to_numpy())
    lo, hi = np.array(info.min, np.float64), np.array(info.max, np.float64)
    return ctx.cast(ctx.op("clamp", ctx.op("round", y), lo, hi), out)


def _centered(ctx: Ctx, x, zp, zp_axis: int | None = None):
    """x - zp in float64 (exact for 8-bit integers); a 1-d zp lies along ``zp_axis``."""
    f64 = DType.FLOAT64
    y = ctx.cast(x, f64)
    if zp is None:
        return y
    z = ctx.cast(zp, f64)
    if zp_axis is not None and ctx.rank(zp) == 1:
        r = ctx.rank(x)
        z = ctx.op("reshape", z, shape=[-1 if i == zp_axis % r else 1 for i in range(r)])
    return ctx.op("sub", y, z)
