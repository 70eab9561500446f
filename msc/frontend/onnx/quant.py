"""ONNX quantization onto the canonical quantize / dequantize, kept as ops (not lowered to
arithmetic), so that msc -> ONNX writes the same QDQ pairs back: QuantizeLinear,
DequantizeLinear, and the integer ops onnxruntime's quantize_dynamic writes
(DynamicQuantizeLinear, MatMulInteger, ConvInteger) as dequantize -> float op.

# NOTE: MatMulInteger / ConvInteger dequantize with scale 1 (x - zero_point, exact in float32).
# MatMulInteger then multiplies in float64, which holds every int32 sum exactly: float32 holds
# integers only up to 2**24, a sum 8-bit operands pass after about 260 terms at full scale (a
# BERT-base FFN has 3072), and such a sum came out a few units off onnxruntime's exact int32.
# ConvInteger stays float32 (onnxruntime has no float64 Conv, so a float64 conv would not
# export back): exact while every sum of products stays below 2**24.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.initializers import dtype_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType


@converter("DequantizeLinear", since=10)
def dequantize_linear(
    ctx: Ctx, x, x_scale, x_zero_point=None, *, axis=1, block_size=0, output_dtype=0
):
    y = ctx.op("dequantize", x, x_scale, x_zero_point, axis=axis, block_size=block_size)
    if output_dtype and dtype_from_onnx(output_dtype) is not ctx.dtype(x_scale):
        y = ctx.op("cast", y, to=dtype_from_onnx(output_dtype))
    return y


@converter("QuantizeLinear", since=10)
def quantize_linear(
    ctx: Ctx,
    x,
    y_scale,
    y_zero_point=None,
    *,
    axis=1,
    block_size=0,
    output_dtype=0,
    saturate=1,
    precision=0,
):
    if precision and dtype_from_onnx(precision) is not ctx.dtype(x):
        raise Unsupported("QuantizeLinear with a precision other than the input's")
    if y_zero_point is not None:
        to = ctx.dtype(y_zero_point)
    else:
        to = dtype_from_onnx(output_dtype) if output_dtype else DType.UINT8
    return ctx.op(
        "quantize",
        x,
        y_scale,
        y_zero_point,
        dtype=to,
        axis=axis,
        block_size=block_size,
        saturate=bool(saturate),
    )


def _dequantized(ctx: Ctx, x, zp, axis: int):
    """x - zp as float32 through dequantize (scale 1): a scalar zero point per tensor, a 1-d
    one along ``axis``."""
    if zp is None:
        return ctx.op("dequantize", x, np.array(1.0, np.float32), None)  # as DequantizeLinear
    zshape = ctx.static_shape(zp)
    if zshape is None:
        raise Unsupported("a zero point of unknown shape")
    if len(zshape) == 1 and zshape[0] != 1:
        return ctx.op("dequantize", x, np.ones(zshape, np.float32), zp, axis=axis)
    if zshape:
        zp = ctx.op("reshape", zp, shape=[])
    return ctx.op("dequantize", x, np.array(1.0, np.float32), zp)


def _to_int32(ctx: Ctx, y):
    return ctx.op("cast", y, to=DType.INT32)  # integral while exact (see NOTE)


@converter("MatMulInteger", since=10)
def matmul_integer(ctx: Ctx, A, B, a_zero_point=None, b_zero_point=None):  # noqa: N803
    """(A - a_zero_point) @ (B - b_zero_point) in int32, computed in float64 (see NOTE)."""
    a = ctx.op("cast", _dequantized(ctx, A, a_zero_point, -2), to=DType.FLOAT64)
    b = ctx.op("cast", _dequantized(ctx, B, b_zero_point, -1), to=DType.FLOAT64)
    return _to_int32(ctx, ctx.op("matmul", a, b))


@converter("ConvInteger", since=10)
def conv_integer(ctx: Ctx, x, w, x_zero_point=None, w_zero_point=None, **attrs):
    from msc.frontend.onnx.nn import conv

    xf = _dequantized(ctx, x, x_zero_point, 1)
    wf = _dequantized(ctx, w, w_zero_point, 0)
    return _to_int32(ctx, conv(ctx, xf, wf, **attrs))


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: Ctx, x):
    """uint8 with scale (max(x, 0) - min(x, 0)) / 255 (1 for an all-zero x) and the zero
    point that maps 0 exactly, then quantize with them."""
    if ctx.dtype(x) is not DType.FLOAT32:
        raise Unsupported(f"DynamicQuantizeLinear of {ctx.dtype(x).short}")
    zero = np.array(0.0, np.float32)
    hi = ctx.op("maximum", ctx.op("reduce_max", x), zero)
    lo = ctx.op("minimum", ctx.op("reduce_min", x), zero)
    span = ctx.op("sub", hi, lo)
    # An all-zero x: scale 1 (onnxruntime's choice; the formula gives 0).
    span = ctx.op("where", ctx.op("eq", span, zero), np.array(255.0, np.float32), span)
    scale = ctx.op("div", span, np.array(255.0, np.float32))
    zp = ctx.op("sub", zero, ctx.op("div", lo, scale))
    zp = ctx.op("round", ctx.op("clamp", zp, zero, np.array(255.0, np.float32)))
    zp = ctx.op("cast", zp, to=DType.UINT8)
    y = ctx.op("quantize", x, scale, zp, dtype=DType.UINT8)
    return y, scale, zp


@converter("QLinearConv", since=10)
def qlinear_conv(
    ctx: Ctx,
    x,
    x_scale,
    x_zero_point,
    w,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    B=None,  # noqa: N803
    **attrs,
):
    """dequantize x and w (w per output channel), float conv with the int32 bias dequantized
    at x_scale * w_scale, quantize: the QDQ form of the same computation."""
    from msc.frontend.onnx.nn import conv

    xf = ctx.op("dequantize", x, x_scale, x_zero_point)
    w_axis = 0 if ctx.static_shape(w_scale) not in ((), (1,)) else 1
    wf = ctx.op("dequantize", w, w_scale, w_zero_point, axis=w_axis)
    bf = None
    if B is not None:
        bscale = ctx.op("mul", ctx.cast(x_scale, ctx.dtype(w_scale)), w_scale)
        bf = ctx.op("dequantize", B, bscale, axis=0)
    y = conv(ctx, xf, wf, bf, **attrs)
    return ctx.op("quantize", y, y_scale, y_zero_point, dtype=ctx.dtype(y_zero_point))


def _matmul_operand(ctx: Ctx, x, scale, zero_point, side: str):
    """dequantize one QLinearMatMul operand: a scalar scale per tensor; per row of ``a`` /
    per column of ``b`` as a 1-d scale (2-d operands) or one of the operand's rank with 1
    along K (block-wise, one block spanning K)."""
    r = ctx.rank(x)
    shape = ctx.static_shape(scale)
    if shape is None:
        raise Unsupported(f"QLinearMatMul {side}_scale of unknown shape")
    n = int(np.prod(shape)) if shape else 1
    if n == 1:
        if shape:
            scale = ctx.op("reshape", scale, shape=[])
            if zero_point is not None:
                zero_point = ctx.op("reshape", zero_point, shape=[])
        return ctx.op("dequantize", x, scale, zero_point)
    k_axis = -1 if side == "a" else -2
    if len(shape) == 1:
        return ctx.op("dequantize", x, scale, zero_point, axis=-2 if side == "a" else -1)
    k = ctx.shape(x)[k_axis]
    if len(shape) != r or not isinstance(k, int):
        raise Unsupported(f"QLinearMatMul {side}_scale of shape {list(shape)} for rank {r}")
    return ctx.op("dequantize", x, scale, zero_point, axis=k_axis, block_size=k)


@converter("QLinearMatMul", since=10)
def qlinear_matmul(
    ctx: Ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point=None
):
    """dequantize a and b, a float matmul, quantize: the QDQ form onnxruntime fuses back.

    ONNX defines the result with integer accumulation scaled once by a_scale * b_scale /
    y_scale; the QDQ form scales each operand instead, in float32, so an output whose exact
    value lies within float rounding of a half step may round one step apart."""
    af = _matmul_operand(ctx, a, a_scale, a_zero_point, "a")
    bf = _matmul_operand(ctx, b, b_scale, b_zero_point, "b")
    return _q(ctx, ctx.op("matmul", af, bf), y_scale, y_zero_point)


# ---------------------------------------------------------------------------- com.microsoft
# onnxruntime's QOperator format (quantize_static with QuantFormat.QOperator) writes these:
# each is dequantize -> the float op -> quantize, the same QDQ form as the rest.
MS = "com.microsoft"


def _dq(ctx: Ctx, x, scale, zero_point, axis: int = 1):
    return ctx.op("dequantize", x, scale, zero_point, axis=axis)


def _q(ctx: Ctx, y, scale, zero_point):
    if zero_point is None:
        return ctx.op("quantize", y, scale, dtype=DType.UINT8)
    return ctx.op("quantize", y, scale, zero_point, dtype=ctx.dtype(zero_point))


def _binary(op: str):
    def convert(
        ctx: Ctx, A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None
    ):  # noqa: N803
        y = ctx.op(op, _dq(ctx, A, A_scale, A_zero_point), _dq(ctx, B, B_scale, B_zero_point))
        return _q(ctx, y, C_scale, C_zero_point)

    return convert


converter("QLinearAdd", since=1, domain=MS)(_binary("add"))
converter("QLinearMul", since=1, domain=MS)(_binary("mul"))


@converter("QLinearSigmoid", since=1, domain=MS)
def qlinear_sigmoid(ctx: Ctx, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None):  # noqa: N803
    return _q(ctx, ctx.op("sigmoid", _dq(ctx, X, X_scale, X_zero_point)), Y_scale, Y_zero_point)


@converter("QLinearLeakyRelu", since=1, domain=MS)
def qlinear_leaky_relu(
    ctx: Ctx, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None, *, alpha=0.01
):  # noqa: N803
    from msc.frontend.onnx.elementwise import leaky_relu

    y = leaky_relu(ctx, _dq(ctx, X, X_scale, X_zero_point), alpha=alpha)
    return _q(ctx, y, Y_scale, Y_zero_point)


@converter("QLinearGlobalAveragePool", since=1, domain=MS)
def qlinear_global_average_pool(
    ctx: Ctx, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *, channels_last=0
):  # noqa: N803
    r = ctx.rank(X)
    axes = list(range(1, r - 1)) if channels_last else list(range(2, r))
    y = ctx.op("reduce_mean", _dq(ctx, X, x_scale, x_zero_point), axes=axes, keepdims=True)
    return _q(ctx, y, y_scale, y_zero_point)


@converter("QLinearAveragePool", since=1, domain=MS)
def qlinear_average_pool(
    ctx: Ctx, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *, channels_last=0, **attrs
):  # noqa: N803
    from msc.frontend.onnx.nn import average_pool

    if channels_last:
        raise Unsupported("QLinearAveragePool with channels_last")
    y = average_pool(ctx, _dq(ctx, X, x_scale, x_zero_point), **attrs)
    return _q(ctx, y, y_scale, y_zero_point)


@converter("QLinearSoftmax", since=1, domain=MS)
def qlinear_softmax(
    ctx: Ctx, X, X_scale, x_zero_point, y_scale, y_zero_point=None, *, axis=-1, opset
):  # noqa: N803
    """Softmax with the semantics of the ONNX opset it names (before 13: over the input
    flattened to 2-d at ``axis``)."""
    from msc.frontend.onnx.nn import _softmax_2d

    xf = _dq(ctx, X, X_scale, x_zero_point)
    y = ctx.op("softmax", xf, axis=axis) if opset >= 13 else _softmax_2d(ctx, "softmax", xf, axis)
    return _q(ctx, y, y_scale, y_zero_point)


@converter("QLinearConcat", since=1, domain=MS)
def qlinear_concat(ctx: Ctx, Y_scale, Y_zero_point, *inputs, axis):  # noqa: N803
    if len(inputs) % 3:
        raise Unsupported("QLinearConcat inputs come in (tensor, scale, zero point) triples")
    parts = [_dq(ctx, *inputs[i : i + 3]) for i in range(0, len(inputs), 3)]
    return _q(ctx, ctx.op("concat", *parts, axis=axis), Y_scale, Y_zero_point)


@converter("QGemm", since=1, domain=MS)
def qgemm(
    ctx: Ctx,
    A,  # noqa: N803
    a_scale,
    a_zero_point,
    B,  # noqa: N803
    b_scale,
    b_zero_point,
    C=None,  # noqa: N803
    y_scale=None,
    y_zero_point=None,
    *,
    alpha=1.0,
    transA=0,  # noqa: N803
    transB=0,  # noqa: N803
):
    """alpha * A' B' + C with A, B dequantized (B per output column); C is int32 at
    a_scale * b_scale; with no y_scale the result stays float."""
    from msc.frontend.onnx.nn import gemm

    b_axis = 0 if transB else 1
    per_col = ctx.static_shape(b_scale) not in ((), (1,))
    bf = _dq(ctx, B, b_scale, b_zero_point, axis=b_axis if per_col else 1)
    cf = None
    if C is not None:
        cscale = ctx.op("mul", a_scale, b_scale)
        cf = ctx.op("dequantize", C, cscale, axis=0)
    y = gemm(
        ctx, _dq(ctx, A, a_scale, a_zero_point), bf, cf, alpha=alpha, transA=transA, transB=transB
    )
    return y if y_scale is None else _q(ctx, y, y_scale, y_zero_point)


_NBITS_CODE = {2: DType.UINT2, 4: DType.UINT4, 8: DType.UINT8}


def _unpack_low_first(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Codes of ``bits`` each packed low-first into the bytes of the last axis, the first
    ``count`` of them per row, as uint8."""
    per = 8 // bits
    b = packed.astype(np.uint8)[..., None] >> (np.arange(per, dtype=np.uint8) * bits)
    codes = (b & np.uint8((1 << bits) - 1)).reshape(*packed.shape[:-1], -1)
    return codes[..., :count]


@converter("MatMulNBits", since=1, domain=MS)
def matmul_nbits(
    ctx: Ctx,
    A,  # noqa: N803
    B,  # noqa: N803
    scales,
    zero_points=None,
    g_idx=None,
    bias=None,
    *,
    K,  # noqa: N803
    N,  # noqa: N803
    bits=4,
    block_size,
    accuracy_level=0,
):
    """A @ dequantize(W) + bias with B's codes unpacked at import into a [K, N] weight of
    ``bits`` (uint2 / uint4 / uint8), dequantized block-wise along K (axis 0): the weight keeps
    its quantized form and size, and the ONNX it writes back is DequantizeLinear -> MatMul, the
    pattern onnxruntime fuses into MatMulNBits again. The default zero point is 2**(bits - 1);
    float zero points (the scales' type, as HQQ writes) are subtracted after scaling.
    ``accuracy_level`` is a compute-precision hint for onnxruntime and changes no value."""
    if bits not in _NBITS_CODE:
        raise Unsupported(f"MatMulNBits with bits={bits} (2, 4 or 8)")
    kb = -(-K // block_size)
    if g_idx is not None:
        order = np.asarray(ctx.need(g_idx, "MatMulNBits's g_idx")).reshape(-1)
        if not np.array_equal(order, np.arange(K) // block_size):
            raise Unsupported("MatMulNBits with a g_idx that reorders K (act-order)")
    packed = np.asarray(ctx.need(B, "MatMulNBits's packed weight B"))
    if packed.shape != (N, kb, block_size * bits // 8):
        raise Unsupported(
            f"MatMulNBits: B has shape {packed.shape}, expected "
            f"{(N, kb, block_size * bits // 8)} for N={N}, K={K}"
        )
    code = _NBITS_CODE[bits].to_numpy()
    float_zp = zero_points is not None and ctx.dtype(zero_points) is not DType.UINT8
    # With float zero points the codes keep K's padding to whole blocks (reshaped per block
    # below, sliced to K after); otherwise the weight is exactly [K, N].
    rows = kb * block_size if float_zp else K
    q = _unpack_low_first(packed.reshape(N, -1), bits, rows).astype(code).T
    w = ctx.constant(np.ascontiguousarray(q), f"{B.name}.codes" if getattr(B, "name", "") else None)
    s = _blocks_first(ctx, scales, N, kb)
    zp = None
    if zero_points is None:
        zp = np.full((kb, N), 1 << (bits - 1), code)
    elif not float_zp:
        zp_packed = np.asarray(ctx.need(zero_points, "MatMulNBits's zero points"))
        zp = np.ascontiguousarray(
            _unpack_low_first(zp_packed.reshape(N, -1), bits, kb).astype(code).T
        )
    wf = ctx.op("dequantize", w, s, zp, axis=0, block_size=block_size)
    if float_zp:  # (q - z) * s = q * s - z * s, per block
        z = _blocks_first(ctx, zero_points, N, kb)
        offset = ctx.op("reshape", ctx.op("mul", z, s), shape=[kb, 1, N])
        wf = ctx.op("reshape", wf, shape=[kb, block_size, N])
        wf = ctx.op("reshape", ctx.op("sub", wf, offset), shape=[rows, N])
        if rows != K:
            wf = ctx.op("slice", wf, starts=[0], ends=[K], axes=[0], steps=[1])
    y = ctx.op("matmul", A, wf)
    return y if bias is None else ctx.op("add", y, bias)


def _blocks_first(ctx: Ctx, v, n: int, kb: int):
    """Per-block parameters stored [N * k_blocks] or [N, k_blocks], as [k_blocks, N]."""
    known = ctx.known(v)
    if known is not None:
        return np.ascontiguousarray(np.asarray(known).reshape(n, kb).T)
    return ctx.op("transpose", ctx.op("reshape", v, shape=[n, kb]), perm=[1, 0])
