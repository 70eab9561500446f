"""TFLite emitters for quantize and dequantize: the quantized tensor carries the node's scale
and zero point (per tensor, or per channel along ``axis``), written as TFLite's QUANTIZE and
DEQUANTIZE ops."""

from __future__ import annotations

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.dtype import DType


def _params(e: Emit, scale: Ref, zero_point: Ref | None, block_size: int):
    e.require(block_size == 0, "block-wise quantization (TFLite scales per tensor or channel)")
    s = e.const_value(scale)
    e.require(s is not None, "a scale computed at run time")
    zp = np.zeros(1, np.int64) if zero_point is None else e.const_value(zero_point)
    e.require(zp is not None, "a zero point computed at run time")
    return np.asarray(s, np.float32), np.asarray(zp, np.int64)


# The integer types TFLite's DEQUANTIZE kernel reads; a constant of another (an int32 bias)
# is dequantized at write time.
KERNEL_TYPES = {DType.INT8, DType.UINT8, DType.INT16}


@emitter("dequantize")
def dequantize(e: Emit, x: Ref, scale: Ref, zero_point: Ref | None = None, *, axis, block_size):
    s, zp = _params(e, scale, zero_point, block_size)
    c = e.const_value(x)
    if c is not None and x.dtype not in KERNEL_TYPES:
        shape = [1] * x.rank
        if s.size > 1:
            shape[axis % x.rank] = s.size
        zp = zp.reshape(()) if zp.size == 1 else zp.reshape(shape)
        real = (c.astype(np.float64) - zp) * (s.reshape(()) if s.size == 1 else s.reshape(shape))
        return e.const(real.astype(e.out_type().dtype.to_numpy()))
    e.w.set_quant(x, s, zp, axis)
    return e.op("DEQUANTIZE", [x], e.out_type())


@emitter("quantize")
def quantize(
    e: Emit, x: Ref, scale: Ref, zero_point: Ref | None = None, *, dtype, axis, block_size, saturate
):
    s, zp = _params(e, scale, zero_point, block_size)
    e.require(s.size == 1, "per-channel quantization of a computed tensor")
    y = e.op("QUANTIZE", [x], e.out_type())
    e.w.set_quant(y, s, zp, axis)
    return y
