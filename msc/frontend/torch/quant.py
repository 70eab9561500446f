"""PyTorch 2 export quantization (torch.ao / torchao ``quantize_pt2e``): the
``quantized_decomposed`` ops it leaves around each float op, onto the canonical quantize /
dequantize, so a PT2E model keeps its Q/DQ pairs through msc and ONNX.

    quantize_*:   clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max) as dtype
    dequantize_*: (x - zero_point) * scale

# NOTE: torch quantizes as ``x * (1 / scale)``, the canonical op (ONNX's) as ``x / scale``; the
# two round differently in rare ties, so a quantized value may differ by one step. The integers
# themselves (weights, zero points) and dequantization are exact.
# NOTE: quant_min / quant_max narrower than the dtype's range (int8 in [-127, 127], 4-bit values
# held in int8) clamp the quantized integers after quantize; a dequantize ignores them, as
# torch's does.
"""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Value, Weight
from msc.ops.quant import INT_RANGE

__all__: list[str] = []

QD = "quantized_decomposed"


def _qdtype(dtype: torch.dtype) -> DType:
    try:
        d = to_msc(dtype)
    except Exception as e:  # noqa: BLE001 - the dtype named in the message
        raise Unsupported(f"quantized dtype {dtype}") from e
    if d not in INT_RANGE:
        raise Unsupported(f"quantized dtype {dtype}")
    return d


def _scale(ctx: Ctx, scale: Value | float, dtype: DType = DType.FLOAT32) -> Value:
    """A scale as a ``dtype`` Value: a constant for a Python float or a stored weight (so the
    Q/DQ pair reads a constant, as runtimes' QDQ fusions want), else a cast."""
    if isinstance(scale, Value):
        if isinstance(scale, Weight) and scale.has_data and scale.dtype is not dtype:
            return ctx.const(scale.numpy(), dtype)
        return ctx.cast(scale, dtype)
    return ctx.const(float(scale), dtype)


def _zero_point(ctx: Ctx, zp: Value | int | None, dtype: DType) -> Value | None:
    """A zero point in the quantized dtype (torch keeps them as int64)."""
    if zp is None:
        return None
    if isinstance(zp, Value):
        if isinstance(zp, Weight) and zp.has_data and zp.dtype is not dtype:
            arr = zp.numpy()
            lo, hi = INT_RANGE[dtype]
            if arr.size and (arr.min() < lo or arr.max() > hi):
                raise Unsupported(f"zero point outside {dtype.short}'s range")
            return ctx.const(arr, dtype)
        return ctx.cast(zp, dtype)
    return ctx.const(int(zp), dtype)


def _per_tensor(ctx: Ctx, v: Value) -> Value:
    """A one-element scale or zero point as a scalar (per-tensor layout)."""
    return v if v.shape == () else ctx.op("reshape", v, shape=[])


def _float_input(ctx: Ctx, x: Value) -> Value:
    if x.dtype in (DType.FLOAT16, DType.BFLOAT16):
        return ctx.cast(x, DType.FLOAT32)
    if x.dtype is not DType.FLOAT32:
        raise Unsupported(f"quantize of a {x.dtype.short} tensor (torch takes float32)")
    return x


def _quantize(ctx: Ctx, x, scale, zp, quant_min, quant_max, dtype, **layout) -> Value:
    d = _qdtype(dtype)
    y = ctx.op("quantize", _float_input(ctx, x), scale, zp, dtype=d, **layout)
    lo, hi = INT_RANGE[d]
    if isinstance(quant_min, Value) or isinstance(quant_max, Value):
        raise Unsupported("quant_min / quant_max computed at run time")
    if (quant_min, quant_max) != (lo, hi):
        if not lo <= quant_min <= quant_max <= hi:
            raise Unsupported(f"quant range [{quant_min}, {quant_max}] outside {d.short}")
        y = ctx.op("clamp", y, ctx.const(quant_min, d), ctx.const(quant_max, d))
    return y


def _dequantize(ctx: Ctx, x, scale, zp, dtype, out_dtype, **layout) -> Value:
    d = _qdtype(dtype)
    if x.dtype is not d:
        raise Unsupported(f"dequantize of a {x.dtype.short} tensor declared {d.short}")
    out = to_msc(out_dtype) if out_dtype is not None else DType.FLOAT32
    if isinstance(scale, Value) and scale.dtype is not out:
        scale = _scale(ctx, scale, out)
    return ctx.op("dequantize", x, scale, zp, **layout)


@converter(f"{QD}.quantize_per_tensor.default")
def quantize_per_tensor(ctx: Ctx, input, scale, zero_point, quant_min, quant_max, dtype):
    d = _qdtype(dtype)
    s, z = _scale(ctx, scale), _zero_point(ctx, zero_point, d)
    return _quantize(ctx, input, s, z, quant_min, quant_max, dtype)


@converter(f"{QD}.quantize_per_tensor.tensor", f"{QD}.quantize_per_tensor.tensor2")
def quantize_per_tensor_tensor(ctx: Ctx, input, scale, zero_point, quant_min, quant_max, dtype):
    d = _qdtype(dtype)
    s = _per_tensor(ctx, _scale(ctx, scale))
    z = _per_tensor(ctx, _zero_point(ctx, zero_point, d))
    return _quantize(ctx, input, s, z, _int(quant_min), _int(quant_max), dtype)


@converter(f"{QD}.dequantize_per_tensor.default")
def dequantize_per_tensor(
    ctx: Ctx, input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None
):
    out = to_msc(out_dtype) if out_dtype is not None else DType.FLOAT32
    s, z = _scale(ctx, scale, out), _zero_point(ctx, zero_point, _qdtype(dtype))
    return _dequantize(ctx, input, s, z, dtype, out_dtype)


@converter(f"{QD}.dequantize_per_tensor.tensor", f"{QD}.dequantize_per_tensor.tensor2")
def dequantize_per_tensor_tensor(
    ctx: Ctx, input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None
):
    out = to_msc(out_dtype) if out_dtype is not None else DType.FLOAT32
    s = _per_tensor(ctx, _scale(ctx, scale, out))
    z = _per_tensor(ctx, _zero_point(ctx, zero_point, _qdtype(dtype)))
    return _dequantize(ctx, input, s, z, dtype, out_dtype)


@converter(f"{QD}.quantize_per_channel.default")
def quantize_per_channel(ctx: Ctx, input, scales, zero_points, axis, quant_min, quant_max, dtype):
    d = _qdtype(dtype)
    s, z = _scale(ctx, scales), _zero_point(ctx, zero_points, d)
    return _quantize(ctx, input, s, z, quant_min, quant_max, dtype, axis=axis)


@converter(f"{QD}.dequantize_per_channel.default")
def dequantize_per_channel(
    ctx: Ctx, input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None
):
    out = to_msc(out_dtype) if out_dtype is not None else DType.FLOAT32
    s, z = _scale(ctx, scales, out), _zero_point(ctx, zero_points, _qdtype(dtype))
    return _dequantize(ctx, input, s, z, dtype, out_dtype, axis=axis)


def _groups(ctx: Ctx, x: Value, group_size: int) -> dict:
    """Groups of ``group_size`` along the last axis of a 2-d tensor: block-wise layout."""
    shape = ctx.shape(x)
    if len(shape) != 2 or not isinstance(shape[1], int) or shape[1] % group_size:
        raise Unsupported(f"per-channel groups of {group_size} on a tensor of shape {shape}")
    return {"axis": 1, "block_size": group_size}


def _grouped(ctx: Ctx, v: Value | None, x: Value, group_size: int) -> Value | None:
    """Per-group scales / zero points (rows x groups) in x's rank."""
    if v is None:
        return None
    rows, cols = ctx.shape(x)
    want = [rows, cols // group_size]
    return v if list(ctx.shape(v)) == want else ctx.op("reshape", v, shape=want)


@converter(f"{QD}.quantize_per_channel_group.default")
def quantize_per_channel_group(
    ctx: Ctx, input, scales, zero_points, quant_min, quant_max, dtype, group_size
):
    d = _qdtype(dtype)
    layout = _groups(ctx, input, group_size)
    s = _grouped(ctx, _scale(ctx, scales), input, group_size)
    z = _grouped(ctx, _zero_point(ctx, zero_points, d), input, group_size)
    return _quantize(ctx, input, s, z, quant_min, quant_max, dtype, **layout)


@converter(f"{QD}.dequantize_per_channel_group.default")
def dequantize_per_channel_group(
    ctx: Ctx, input, scales, zero_points, quant_min, quant_max, dtype, group_size, output_dtype
):
    layout = _groups(ctx, input, group_size)
    s = _grouped(ctx, _scale(ctx, scales, to_msc(output_dtype)), input, group_size)
    z = _grouped(ctx, _zero_point(ctx, zero_points, _qdtype(dtype)), input, group_size)
    return _dequantize(ctx, input, s, z, dtype, output_dtype, **layout)


def _tokens(ctx: Ctx, x: Value) -> dict:
    """One scale per token (every position but the last axis): block-wise layout with one
    block spanning the last axis."""
    shape = ctx.shape(x)
    if not shape or not isinstance(shape[-1], int):
        raise Unsupported("per-token quantization needs a static last dim")
    return {"axis": -1, "block_size": shape[-1]}


@converter(f"{QD}.quantize_per_token.default")
def quantize_per_token(ctx: Ctx, input, scales, zero_points, quant_min, quant_max, dtype):
    d = _qdtype(dtype)
    s, z = _scale(ctx, scales), _zero_point(ctx, zero_points, d)
    return _quantize(ctx, input, s, z, quant_min, quant_max, dtype, **_tokens(ctx, input))


@converter(f"{QD}.dequantize_per_token.default")
def dequantize_per_token(
    ctx: Ctx, input, scales, zero_points, quant_min, quant_max, dtype, output_dtype
):
    s = _scale(ctx, scales, to_msc(output_dtype))
    z = _zero_point(ctx, zero_points, _qdtype(dtype))
    return _dequantize(ctx, input, s, z, dtype, output_dtype, **_tokens(ctx, input))


def _int(v):
    if isinstance(v, Value):
        if isinstance(v, Weight) and v.has_data and v.numpy().size == 1:
            return int(v.numpy().reshape(()))
        raise Unsupported("quant_min / quant_max computed at run time")
    return int(v)


def _choose(ctx: Ctx, x: Value, quant_min: int, quant_max: int, eps: float, symmetric: bool):
    """torch's determine_qparams for one tensor: the range widened to include 0, scale =
    span / (quant_max - quant_min) at least eps; asymmetric zero point quant_min -
    round(min / scale) clamped to the range; symmetric zero point 0 (128 for uint8 with the
    full range). The scale is computed in float32 and returned widened to float64, the zero
    point as int64, as torch does."""
    x = _float_input(ctx, x)
    zero = ctx.const(0.0, DType.FLOAT32)
    lo = ctx.op("minimum", ctx.op("reduce_min", x), zero)
    hi = ctx.op("maximum", ctx.op("reduce_max", x), zero)
    levels = float(quant_max - quant_min)
    if symmetric:
        span = ctx.op("maximum", ctx.op("neg", lo), hi)
        scale = ctx.op("div", span, ctx.const(levels / 2, DType.FLOAT32))
    else:
        scale = ctx.op("div", ctx.op("sub", hi, lo), ctx.const(levels, DType.FLOAT32))
    scale = ctx.op("maximum", scale, ctx.const(eps, DType.FLOAT32))
    # torch returns one-element tensors, the scale widened to float64
    one = ctx.op("reshape", ctx.cast(scale, DType.FLOAT64), shape=[1])
    if symmetric:
        return one, ctx.const([0], DType.INT64)
    qmin, qmax = (
        ctx.const(float(quant_min), DType.FLOAT32),
        ctx.const(float(quant_max), DType.FLOAT32),
    )
    zp = ctx.op("sub", qmin, ctx.op("round", ctx.op("div", lo, scale)))
    zp = ctx.op("cast", ctx.op("clamp", zp, qmin, qmax), to=DType.INT64)
    return one, ctx.op("reshape", zp, shape=[1])


@converter(f"{QD}.choose_qparams.tensor")
def choose_qparams(ctx: Ctx, input, quant_min, quant_max, eps, dtype):
    _qdtype(dtype)
    return _choose(ctx, input, quant_min, quant_max, eps, symmetric=False)


@converter(f"{QD}.choose_qparams_symmetric.tensor")
def choose_qparams_symmetric(ctx: Ctx, input, quant_min, quant_max, eps, dtype):
    d = _qdtype(dtype)
    scale, zp = _choose(ctx, input, quant_min, quant_max, eps, symmetric=True)
    if d is DType.UINT8:
        zp = ctx.const([128], DType.INT64)
    return scale, zp
