"""quantize / dequantize as QuantizeLinear / DequantizeLinear: the QDQ form onnxruntime and
TensorRT fuse. An opset without what a node needs (per-axis scales before 13, float8 before 19,
block-wise scales and 4/16-bit types before 21, float4 before 23, 2-bit types before 25, half
precision scales before 19) refuses it, and the node goes through its decomposition."""

from __future__ import annotations

import numpy as np

from codegen.onnx.registry import Emit, Ref, emitter
from msc.ir.dtype import DType
from msc.ops.quant import FLOAT8_MAX, layout

_SINCE = {
    DType.INT8: 10,
    DType.UINT8: 10,
    DType.INT32: 10,  # dequantize only
    DType.INT16: 21,
    DType.UINT16: 21,
    DType.INT4: 21,
    DType.UINT4: 21,
    DType.FLOAT4_E2M1: 23,
    DType.INT2: 25,
    DType.UINT2: 25,
    **{d: 19 for d in FLOAT8_MAX if d is not DType.FLOAT4_E2M1},
}


def _require(e: Emit, x: Ref, scale: Ref, q: DType, axis: int, block_size: int) -> str:
    kind = layout(x.type, scale.type, axis, block_size)
    need = _SINCE.get(q, 10**6)
    if kind == "axis":
        need = max(need, 13)
    if kind == "block":
        need = max(need, 21)
    if scale.dtype is not DType.FLOAT32:
        need = max(need, 19)
    e.require(need < 10**6, f"ONNX has no QuantizeLinear/DequantizeLinear for {q.short}")
    e.require(e.opset >= need, f"{q.short} {kind}-wise needs opset {need}")
    return kind


def _zero_point(e: Emit, scale: Ref, q: DType) -> Ref:
    """An explicit zero point of ``q`` (0), where ONNX would otherwise assume uint8."""
    e.require(scale.type is not None and scale.type.is_static, "a zero point needs static shapes")
    return e.const(np.zeros(scale.shape, dtype=q.to_numpy()), q)


@emitter("quantize", since=10)
def quantize(
    e: Emit, x: Ref, scale: Ref, zero_point: Ref | None, *, dtype, axis, block_size, saturate
):
    kind = _require(e, x, scale, dtype, axis, block_size)
    e.require(dtype is not DType.INT32, "ONNX quantizes to int32 nowhere")
    e.require(
        x.dtype is DType.FLOAT32 or (e.opset >= 19 and x.dtype.is_floating),
        f"QuantizeLinear of {x.dtype.short} needs opset 19",
    )
    e.require(saturate or dtype in FLOAT8_MAX, "saturate=false applies to float8 only")
    if zero_point is None and dtype is not DType.UINT8:
        zero_point = _zero_point(e, scale, dtype)
    return e.op(
        "QuantizeLinear",
        x,
        scale,
        zero_point,
        axis=axis if kind != "tensor" else None,
        block_size=block_size or None,
        saturate=(0 if not saturate else None) if dtype in FLOAT8_MAX else None,
    )


@emitter("dequantize", since=10)
def dequantize(e: Emit, x: Ref, scale: Ref, zero_point: Ref | None, *, axis, block_size):
    kind = _require(e, x, scale, x.dtype, axis, block_size)
    return e.op(
        "DequantizeLinear",
        x,
        scale,
        zero_point,
        axis=axis if kind != "tensor" else None,
        block_size=block_size or None,
    )
