"""Decompositions of quantize / dequantize into elementwise ops (div, round, add, clamp, cast):
what a target without QuantizeLinear / DequantizeLinear (generated PyTorch, an older ONNX
opset) computes. Exact: round is half to even, the clamp saturates as ONNX does.

# NOTE: a block-wise scale is repeated along its axis (unsqueeze, expand, reshape, slice), which
# needs the static shapes weights have; per-tensor and per-axis scales need none.
"""

from __future__ import annotations

import numpy as np

from msc.ir.graph import Value
from msc.ops.decompose import Builder, NotDecomposable, registry
from msc.ops.quant import FLOAT8_MAX, INT_RANGE, layout


def _spread(b: Builder, t: Value, x: Value, axis: int, block_size: int) -> Value:
    """``t`` (a scale or zero point) reshaped or repeated to broadcast against ``x``."""
    kind = layout(x.type, t.type, axis, block_size)
    r = len(x.shape)
    a = axis % r if r else 0
    if kind == "tensor":
        return b.op("reshape", t, shape=[]) if t.type.rank else t
    if kind == "axis":
        return b.op("reshape", t, shape=[-1] + [1] * (r - a - 1)) if r > 1 else t
    if not (x.type.is_static and t.type.is_static):
        raise NotDecomposable("a block-wise scale needs static shapes")
    n, nb = x.shape[a], t.shape[a]
    wide = list(t.shape)
    wide.insert(a + 1, block_size)
    y = b.op("unsqueeze", t, axes=[a + 1])
    y = b.op("expand", y, shape=wide)
    flat = list(t.shape)
    flat[a] = nb * block_size
    y = b.op("reshape", y, shape=flat)
    if nb * block_size != n:
        y = b.op("slice", y, starts=[0], ends=[n], axes=[a], steps=[1])
    return y


@registry("quantize")
def quantize(
    b: Builder,
    x: Value,
    scale: Value,
    zero_point: Value | None,
    *,
    dtype,
    axis,
    block_size,
    saturate,
) -> Value:
    """round(x / scale) + zero_point, clamped to the type's range, cast."""
    dt = x.dtype
    y = b.op("div", x, b.cast(_spread(b, scale, x, axis, block_size), dt))
    zp = None
    if zero_point is not None:
        zp = b.cast(_spread(b, zero_point, x, axis, block_size), dt)
    if dtype in FLOAT8_MAX:
        if zp is not None:
            y = b.op("add", y, zp)
        if saturate:
            m = FLOAT8_MAX[dtype]
            y = b.op("clamp", y, b.scalar(-m, y), b.scalar(m, y))
        return b.op("cast", y, to=dtype)
    y = b.op("round", y)
    if zp is not None:
        y = b.op("add", y, zp)
    lo, hi = INT_RANGE[dtype]
    npdt = dt.to_numpy()
    y = b.op("clamp", y, b.const(np.array(lo, npdt), dt), b.const(np.array(hi, npdt), dt))
    return b.op("cast", y, to=dtype)


@registry("dequantize")
def dequantize(
    b: Builder, x: Value, scale: Value, zero_point: Value | None, *, axis, block_size
) -> Value:
    """(x - zero_point) * scale in the scale's dtype."""
    dt = scale.dtype
    y = b.cast(x, dt)
    if zero_point is not None:
        y = b.op("sub", y, b.cast(_spread(b, zero_point, x, axis, block_size), dt))
    return b.op("mul", y, _spread(b, scale, x, axis, block_size))
