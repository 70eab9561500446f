"""Elementwise ONNX ops: unary math and activations, binary arithmetic, comparisons, logic,
Where, Clip, Cast.

# NOTE: ONNX binary ops take inputs of one element type (the canonical ops do too), except Pow
# (whose exponent may differ: it is cast to the base's type, which is what the output is) and
# BitShift. Variadic Max/Min/Sum/Mean become chains of binary ops.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.initializers import dtype_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType

# ONNX op -> (canonical op, since)
UNARY = {
    "Abs": ("abs", 6),
    "Neg": ("neg", 6),
    "Exp": ("exp", 6),
    "Log": ("log", 6),
    "Sqrt": ("sqrt", 6),
    "Reciprocal": ("reciprocal", 6),
    "Sin": ("sin", 7),
    "Cos": ("cos", 7),
    "Tan": ("tan", 7),
    "Asin": ("asin", 7),
    "Acos": ("acos", 7),
    "Atan": ("atan", 7),
    "Sinh": ("sinh", 9),
    "Cosh": ("cosh", 9),
    "Tanh": ("tanh", 6),
    "Asinh": ("asinh", 9),
    "Acosh": ("acosh", 9),
    "Atanh": ("atanh", 9),
    "Erf": ("erf", 9),
    "Floor": ("floor", 6),
    "Ceil": ("ceil", 6),
    "Round": ("round", 11),
    "Sign": ("sign", 9),
    "Sigmoid": ("sigmoid", 6),
    "Relu": ("relu", 6),
    "Softsign": ("softsign", 1),
    "Softplus": ("softplus", 1),
    "Mish": ("mish", 18),
    "HardSwish": ("hardswish", 14),
    "Not": ("logical_not", 1),
    "BitwiseNot": ("bitwise_not", 18),
    "IsNaN": ("isnan", 9),
    "Identity": ("identity", 1),
}

BINARY = {
    "Add": ("add", 7),
    "Sub": ("sub", 7),
    "Mul": ("mul", 7),
    "Div": ("div", 7),
    "And": ("logical_and", 7),
    "Or": ("logical_or", 7),
    "Xor": ("logical_xor", 7),
    "BitwiseAnd": ("bitwise_and", 18),
    "BitwiseOr": ("bitwise_or", 18),
    "BitwiseXor": ("bitwise_xor", 18),
    "Equal": ("eq", 7),
    "Less": ("lt", 7),
    "Greater": ("gt", 7),
    "LessOrEqual": ("le", 12),
    "GreaterOrEqual": ("ge", 12),
    "PRelu": ("prelu", 7),
}


def _unary(canon: str):
    def convert(ctx: Ctx, x):
        return ctx.op(canon, x)

    convert.__name__ = canon
    return convert


def _binary(canon: str):
    def convert(ctx: Ctx, a, b):
        return ctx.op(canon, a, b)

    convert.__name__ = canon
    return convert


for _onnx, (_canon, _since) in UNARY.items():
    converter(_onnx, since=_since)(_unary(_canon))
for _onnx, (_canon, _since) in BINARY.items():
    converter(_onnx, since=_since)(_binary(_canon))


@converter("Elu", since=6)
def elu(ctx: Ctx, x, *, alpha=1.0):
    return ctx.op("elu", x, alpha=alpha)


@converter("Celu", since=12)
def celu(ctx: Ctx, x, *, alpha=1.0):
    return ctx.op("celu", x, alpha=alpha)


@converter("LeakyRelu", since=6)
def leaky_relu(ctx: Ctx, x, *, alpha=0.01):
    return ctx.op("leaky_relu", x, negative_slope=alpha)


@converter("HardSigmoid", since=6)
def hard_sigmoid(ctx: Ctx, x, *, alpha=0.2, beta=0.5):
    return ctx.op("hardsigmoid", x, alpha=alpha, beta=beta)


SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


@converter("Selu", since=6)
def selu(ctx: Ctx, x, *, alpha=SELU_ALPHA, gamma=SELU_GAMMA):
    if np.float32(alpha) == np.float32(SELU_ALPHA) and np.float32(gamma) == np.float32(SELU_GAMMA):
        return ctx.op("selu", x)
    scale = np.array(gamma, ctx.dtype(x).to_numpy())
    return ctx.op("mul", ctx.op("elu", x, alpha=alpha), scale)


@converter("ThresholdedRelu", since=10)
def thresholded_relu(ctx: Ctx, x, *, alpha=1.0):
    return ctx.op("thresholded_relu", x, alpha=alpha)


@converter("Shrink", since=9)
def shrink(ctx: Ctx, x, *, bias=0.0, lambd=0.5):
    return ctx.op("shrink", x, bias=bias, lambd=lambd)


@converter("Gelu", since=20)
def gelu(ctx: Ctx, x, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate={approximate!r}")
    return ctx.op("gelu", x, approximate=approximate)


# onnxruntime's fused activations (com.microsoft), written by its transformer optimizer.
MS = "com.microsoft"


def _plus(ctx: Ctx, x, bias):
    return x if bias is None else ctx.op("add", x, bias)


@converter("Gelu", since=1, domain=MS)
def ms_gelu(ctx: Ctx, X):  # noqa: N803
    return ctx.op("gelu", X, approximate="none")


@converter("BiasGelu", since=1, domain=MS)
def bias_gelu(ctx: Ctx, A, B):  # noqa: N803
    return ctx.op("gelu", _plus(ctx, A, B), approximate="none")


@converter("FastGelu", since=1, domain=MS)
def fast_gelu(ctx: Ctx, X, bias=None):  # noqa: N803
    return ctx.op("gelu", _plus(ctx, X, bias), approximate="tanh")


@converter("QuickGelu", since=1, domain=MS)
def quick_gelu(ctx: Ctx, X, *, alpha=1.702):  # noqa: N803
    """x * sigmoid(alpha * x): silu when alpha is 1."""
    if alpha == 1.0:
        return ctx.op("silu", X)
    a = np.array(alpha, ctx.dtype(X).to_numpy())
    return ctx.op("mul", X, ctx.op("sigmoid", ctx.op("mul", X, a)))


@converter("BiasAdd", since=1, domain=MS)
def bias_add(ctx: Ctx, X, bias, skip):  # noqa: N803
    return ctx.op("add", ctx.op("add", X, bias), skip)


@converter("Swish", since=24)
def swish(ctx: Ctx, x, *, alpha=1.0):
    if alpha == 1.0:
        return ctx.op("silu", x)
    a = np.array(alpha, ctx.dtype(x).to_numpy())
    return ctx.op("mul", x, ctx.op("sigmoid", ctx.op("mul", x, a)))


@converter("IsInf", since=10)
def is_inf(ctx: Ctx, x, *, detect_negative=1, detect_positive=1):
    inf = ctx.op("isinf", x)
    if detect_negative and detect_positive:
        return inf
    if not detect_negative and not detect_positive:
        return ctx.op("logical_and", inf, np.array(False))
    zero = np.array(0, ctx.dtype(x).to_numpy())
    side = ctx.op("gt" if detect_positive else "lt", x, zero)
    return ctx.op("logical_and", inf, side)


@converter("Pow", since=7)
def pow_(ctx: Ctx, x, y):
    return ctx.op("pow", x, ctx.cast(y, ctx.dtype(x)))


@converter("Mod", since=10)
def mod(ctx: Ctx, a, b, *, fmod=0):
    return ctx.op("fmod" if fmod else "remainder", a, b)


@converter("BitShift", since=11)
def bit_shift(ctx: Ctx, x, y, *, direction):
    if direction not in ("LEFT", "RIGHT"):
        raise Unsupported(f"direction={direction!r}")
    return ctx.op("bitshift_left" if direction == "LEFT" else "bitshift_right", x, y)


def _chain(ctx: Ctx, canon: str, xs) -> object:
    out = xs[0]
    for x in xs[1:]:
        out = ctx.op(canon, out, x)
    return out


@converter("Max", since=6)
def max_(ctx: Ctx, *xs):
    return _chain(ctx, "maximum", xs)


@converter("Min", since=6)
def min_(ctx: Ctx, *xs):
    return _chain(ctx, "minimum", xs)


@converter("Sum", since=6)
def sum_(ctx: Ctx, *xs):
    return _chain(ctx, "add", xs)


@converter("Mean", since=6)
def mean(ctx: Ctx, *xs):
    total = _chain(ctx, "add", xs)
    return ctx.op("div", total, np.array(len(xs), ctx.dtype(xs[0]).to_numpy()))


@converter("Where", since=9)
def where(ctx: Ctx, condition, x, y):
    return ctx.op("where", condition, x, y)


@converter("Clip", since=6)
def clip_6(ctx: Ctx, x, *, min=-3.4028234663852886e38, max=3.4028234663852886e38):  # noqa: A002
    dt = ctx.dtype(x).to_numpy()
    return ctx.op("clamp", x, np.array(min).astype(dt), np.array(max).astype(dt))


@converter("Clip", since=11)
def clip(ctx: Ctx, x, min=None, max=None):  # noqa: A002
    return ctx.op("clamp", x, min, max)


# Finite range of each float8 type: ONNX's saturating cast clamps to it.
_FLOAT8_MAX = {
    DType.FLOAT8_E4M3FN: 448.0,
    DType.FLOAT8_E4M3FNUZ: 240.0,
    DType.FLOAT8_E5M2: 57344.0,
    DType.FLOAT8_E5M2FNUZ: 57344.0,
    DType.FLOAT4_E2M1: 6.0,
}


# float8 types without an infinity: a cast without saturation turns what rounds past the
# largest finite value (from the midpoint to the next power step on) and +-inf into NaN.
_FLOAT8_NAN_FROM = {
    DType.FLOAT8_E4M3FN: 464.0,
    DType.FLOAT8_E4M3FNUZ: 248.0,
    DType.FLOAT8_E5M2FNUZ: 59392.0,
}


def _cast(ctx: Ctx, x, to: DType, saturate: int, round_mode: str):
    src = ctx.dtype(x)
    if to is DType.FLOAT8_E8M0 and src is not to:
        return _cast_e8m0(ctx, x, saturate, round_mode)
    if not saturate and to in _FLOAT8_NAN_FROM and src.is_floating and src not in _FLOAT8_MAX:
        if src.itemsize < 4:  # in float32 (exact): onnxruntime has no float16 Neg kernel
            x, src = ctx.op("cast", x, to=DType.FLOAT32), DType.FLOAT32
        dt = src.to_numpy()
        over = ctx.op("ge", ctx.op("abs", x), np.array(_FLOAT8_NAN_FROM[to], dt))
        # NaN keeps x's sign, as ONNX's reference does (neg of NaN: the text format has no -nan).
        nan = np.array(np.nan, dt)
        signed = ctx.op("where", ctx.op("lt", x, np.array(0, dt)), ctx.op("neg", nan), nan)
        x = ctx.op("where", over, signed, x)
    if saturate and to in _FLOAT8_MAX and (src.is_floating and src not in _FLOAT8_MAX):
        m = _FLOAT8_MAX[to]
        dt = src.to_numpy()
        x = ctx.op("clamp", x, np.array(-m, dt), np.array(m, dt))
    return ctx.op("cast", x, to=to)


@converter("Cast", since=6)
def cast(ctx: Ctx, input, *, to, saturate=1, round_mode="up"):  # noqa: A002
    return _cast(ctx, input, dtype_from_onnx(to), saturate, round_mode)


@converter("CastLike", since=15)
def cast_like(ctx: Ctx, input, target_type, *, saturate=1, round_mode="up"):  # noqa: A002
    to = ctx.dtype(target_type)
    c = ctx.known(input)
    if c is not None and c.size <= 1024 and to not in _FLOAT8_MAX:
        # Only the target's type matters: a constant input stays a constant (shape arithmetic).
        return c.astype(to.to_numpy())
    return _cast(ctx, input, to, saturate, round_mode)


def _cast_e8m0(ctx: Ctx, x, saturate: int, round_mode: str):
    """Cast to float8e8m0 (powers of two) rounding as ``round_mode`` says: the canonical cast
    rounds to one of the two neighbouring powers; a where() moves it up or down when needed.
    Saturation clamps to [2^-127, 2^127] (zero becomes the smallest power)."""
    if round_mode not in ("up", "down"):
        raise Unsupported(f"round_mode={round_mode!r} for float8e8m0")
    f32 = DType.FLOAT32
    y = ctx.cast(x, f32)
    hi = np.array(2.0**127 if saturate else np.inf, np.float32)
    y = ctx.op("clamp", y, np.array(2.0**-127, np.float32), hi)
    back = ctx.op("cast", ctx.op("cast", y, to=DType.FLOAT8_E8M0), to=f32)
    off, step = ("lt", 2.0) if round_mode == "up" else ("gt", 0.5)
    moved = ctx.op("mul", back, np.array(step, np.float32))
    fixed = ctx.op("where", ctx.op(off, back, y), moved, back)
    return ctx.op("cast", fixed, to=DType.FLOAT8_E8M0)
