"""quantize / dequantize in generated PyTorch: one run-time helper each, computing ONNX's
QuantizeLinear / DequantizeLinear exactly (round half to even, saturation). Sub-byte results
live in their carrier dtype (codegen.torch.lowbit)."""

from __future__ import annotations

import ast

import torch

from codegen.torch import lowbit
from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import emitter, spelled_out
from msc.ir.dtype import DType
from msc.ops.quant import FLOAT8_MAX, INT_RANGE


@emitter("quantize")
@spelled_out
def quantize(
    e: NodeEmit, x: Arg, scale: Arg, zero_point: Arg | None, *, dtype, axis, block_size, saturate
) -> ast.expr:
    if dtype in INT_RANGE:
        lo, hi = INT_RANGE[dtype]
    else:
        lo, hi = None, (FLOAT8_MAX[dtype] if saturate else None)
    carrier = lowbit.CARRIERS.get(dtype, dtype)
    zp = None if zero_point is None else zero_point.expr
    y = call(
        e.helper("_msc_quantize").id, x.expr, scale.expr, zp, axis, block_size, lo, hi, carrier
    )
    if dtype is DType.FLOAT4_E2M1:
        return lowbit.cast(e, y, dtype)
    return y


@emitter("dequantize")
@spelled_out
def dequantize(
    e: NodeEmit, x: Arg, scale: Arg, zero_point: Arg | None, *, axis, block_size
) -> ast.expr:
    zp = None if zero_point is None else zero_point.expr
    return call(e.helper("_msc_dequantize").id, x.expr, scale.expr, zp, axis, block_size)


# ---------------------------------------------------------------- run-time helpers
# Pasted into the generated modules that use them: only torch and other _msc_* helpers.
def _msc_spread(t, x, axis, block_size):
    """A scale or zero point shaped to broadcast against x: per tensor, per axis, per block."""
    if block_size == 0 and t.numel() == 1:
        return t.reshape(())
    axis = axis % x.dim()
    if block_size == 0:
        return t.reshape([-1] + [1] * (x.dim() - axis - 1))
    return t.repeat_interleave(block_size, dim=axis).narrow(axis, 0, x.shape[axis])


def _msc_quantize(x, scale, zero_point, axis, block_size, lo, hi, dtype):
    """ONNX QuantizeLinear: x / scale rounded half to even (integers; lo is None for float8),
    plus the zero point, saturated to [lo, hi] (float8: [-hi, hi], none when hi is None)."""
    y = x / _msc_spread(scale, x, axis, block_size).to(x.dtype)
    if lo is not None:
        y = torch.round(y)
    if zero_point is not None:
        y = y + _msc_spread(zero_point, x, axis, block_size).to(x.dtype)
    if hi is not None:
        y = torch.clamp(y, -hi if lo is None else lo, hi)
    return y.to(dtype)


def _msc_dequantize(x, scale, zero_point, axis, block_size):
    """ONNX DequantizeLinear: (x - zero_point) * scale, in the scale's dtype."""
    y = x.to(scale.dtype)
    if zero_point is not None:
        y = y - _msc_spread(zero_point, x, axis, block_size).to(scale.dtype)
    return y * _msc_spread(scale, x, axis, block_size)


runtime_helpers(_msc_spread, _msc_quantize, _msc_dequantize)
