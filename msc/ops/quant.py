"""Quantization: quantize and dequantize with per-tensor, per-axis and block-wise scales.

ONNX QuantizeLinear / DequantizeLinear semantics, which onnxruntime and TensorRT recognise as
QDQ patterns around the float op between them:

    quantize:   y = saturate(round_half_even(x / scale) + zero_point)   as ``dtype``
    dequantize: y = (x - zero_point) * scale                            as the scale's dtype

Layouts, from the scale's shape: a scalar (or one element) is per tensor; a 1-d scale of
``x.shape[axis]`` elements is per axis; with ``block_size`` B > 0 the scale has x's rank and
``ceil(x.shape[axis] / B)`` along ``axis`` (each scale covers B consecutive elements), its
other dims equal to x's. A zero point, when given, has the scale's shape and the quantized
dtype. Float8 targets add the zero point (normally 0) and cast, saturating when asked.
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known
from msc.ops.infer import axis as norm_axis
from msc.ops.schema import Attr

# The integer types a quantized tensor may have, with their ranges; float8 types saturate at
# their largest finite value.
INT_RANGE = {
    DType.INT2: (-2, 1),
    DType.UINT2: (0, 3),
    DType.INT4: (-8, 7),
    DType.UINT4: (0, 15),
    DType.INT8: (-128, 127),
    DType.UINT8: (0, 255),
    DType.INT16: (-32768, 32767),
    DType.UINT16: (0, 65535),
    DType.INT32: (-(2**31), 2**31 - 1),
}
FLOAT8_MAX = {
    DType.FLOAT8_E4M3FN: 448.0,
    DType.FLOAT8_E4M3FNUZ: 240.0,
    DType.FLOAT8_E5M2: 57344.0,
    DType.FLOAT8_E5M2FNUZ: 57344.0,
    DType.FLOAT4_E2M1: 6.0,
}
QUANTIZED = frozenset(INT_RANGE) | frozenset(FLOAT8_MAX)


def layout(x: TensorType, scale: TensorType, axis: int, block_size: int) -> str:
    """ "tensor", "axis" or "block" for a scale of this shape; InferError when it fits none."""
    if block_size < 0:
        raise InferError(f"block_size must be >= 0, got {block_size}")
    if scale.shape is None or x.shape is None:
        raise InferError("quantization needs the ranks of x and scale")
    n = 1
    for d in scale.shape:
        n = n * d if known(d) and known(n) else None
    if block_size == 0 and len(scale.shape) <= 1 and n == 1:
        return "tensor"
    r = len(x.shape)
    a = norm_axis(axis, r)
    if block_size == 0:
        if len(scale.shape) != 1:
            raise InferError(f"a per-axis scale is 1-d, got {scale}")
        d, s = x.shape[a], scale.shape[0]
        if known(d) and known(s) and d != s:
            raise InferError(f"scale has {s} elements for dim {a} of size {d}")
        return "axis"
    if len(scale.shape) != r:
        raise InferError(f"a block-wise scale has x's rank {r}, got {scale}")
    for i, (d, s) in enumerate(zip(x.shape, scale.shape)):
        want = -(-d // block_size) if i == a and known(d) else (d if i != a else None)
        if known(want) and known(s) and want != s:
            raise InferError(f"block-wise scale dim {i} is {s}, expected {want}")
    return "block"


def _check(x, scale, zero_point, axis, block_size, what: str) -> None:
    if not scale.dtype.is_floating:
        raise InferError(f"{what}: scale must be floating point, got {scale.dtype.short}")
    layout(x, scale, axis, block_size)
    if zero_point is not None and zero_point.shape != scale.shape:
        if not (zero_point.numel() == 1 and scale.numel() == 1):
            raise InferError(f"{what}: zero point {zero_point} and scale {scale} differ in shape")


@registry.op(
    "quantize",
    ["x", "scale", "zero_point?"],
    {
        "dtype": Attr.dtype(doc="the quantized type (an integer or float8 type)"),
        "axis": Attr.int(1, doc="the axis of a per-axis or block-wise scale"),
        "block_size": Attr.int(0, doc="elements per scale along axis; 0: per tensor/axis"),
        "saturate": Attr.bool(True, doc="float8: clamp to the largest finite value"),
    },
    category="quant",
)
def quantize(x, scale, zero_point, *, dtype, axis, block_size, saturate):
    """saturate(round_half_even(x / scale) + zero_point) as ``dtype`` (ONNX QuantizeLinear)."""
    if dtype not in QUANTIZED:
        raise InferError(f"quantize: {dtype.short} is not a quantized type")
    if zero_point is not None and zero_point.dtype is not dtype:
        raise InferError(f"quantize: zero point is {zero_point.dtype.short}, not {dtype.short}")
    _check(x, scale, zero_point, axis, block_size, "quantize")
    return TensorType(dtype, x.shape)


@registry.op(
    "dequantize",
    ["x", "scale", "zero_point?"],
    {
        "axis": Attr.int(1, doc="the axis of a per-axis or block-wise scale"),
        "block_size": Attr.int(0, doc="elements per scale along axis; 0: per tensor/axis"),
    },
    category="quant",
)
def dequantize(x, scale, zero_point, *, axis, block_size):
    """(x - zero_point) * scale in the scale's dtype (ONNX DequantizeLinear)."""
    if x.dtype not in QUANTIZED:
        raise InferError(f"dequantize: {x.dtype.short} is not a quantized type")
    if zero_point is not None and zero_point.dtype is not x.dtype:
        raise InferError(f"dequantize: zero point is {zero_point.dtype.short}, not {x.dtype.short}")
    _check(x, scale, zero_point, axis, block_size, "dequantize")
    return TensorType(scale.dtype, x.shape)
