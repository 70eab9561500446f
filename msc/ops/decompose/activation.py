"""Decompositions of elementwise ops and activations into plainer elementwise ops.

# NOTE: every rule keeps the input dtype; constants are 0-d tensors of that dtype, so
# broadcasting never changes a shape. Rules here need no static shapes.
"""

from __future__ import annotations

import math

from msc.ir.graph import Value
from msc.ops.decompose import Builder, registry


def _unary_const(b: Builder, op: str, x: Value, c: float) -> Value:
    return b.op(op, x, b.scalar(c, x))


@registry("gelu")
def gelu(b: Builder, x: Value, *, approximate: str) -> Value:
    """0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation."""
    half = b.scalar(0.5, x)
    one = b.scalar(1.0, x)
    if approximate == "tanh":
        cube = b.op("mul", b.op("mul", x, x), x)
        inner = b.op("add", x, _unary_const(b, "mul", cube, 0.044715))
        t = b.op("tanh", _unary_const(b, "mul", inner, math.sqrt(2.0 / math.pi)))
    else:
        t = b.op("erf", _unary_const(b, "mul", x, 1.0 / math.sqrt(2.0)))
    return b.op("mul", b.op("mul", x, half), b.op("add", t, one))


@registry("silu")
def silu(b: Builder, x: Value) -> Value:
    """x * sigmoid(x)."""
    return b.op("mul", x, b.op("sigmoid", x))


@registry("mish")
def mish(b: Builder, x: Value) -> Value:
    """x * tanh(softplus(x))."""
    return b.op("mul", x, b.op("tanh", b.op("softplus", x)))


@registry("hardswish")
def hardswish(b: Builder, x: Value) -> Value:
    """x * hardsigmoid(x) with alpha 1/6, beta 1/2."""
    return b.op("mul", x, b.op("hardsigmoid", x, alpha=1 / 6, beta=0.5))


@registry("softplus")
def softplus(b: Builder, x: Value, *, beta: float, threshold: float) -> Value:
    """log1p(e^(beta x)) / beta, and x itself where beta x > threshold."""
    bx = _unary_const(b, "mul", x, beta) if beta != 1.0 else x
    soft = b.op("log", b.op("add", b.op("exp", bx), b.scalar(1.0, x)))
    if beta != 1.0:
        soft = _unary_const(b, "div", soft, beta)
    return b.op("where", b.op("gt", bx, b.scalar(threshold, x)), x, soft)


@registry("log_sigmoid")
def log_sigmoid(b: Builder, x: Value) -> Value:
    """-softplus(-x)."""
    return b.op("neg", b.op("softplus", b.op("neg", x)))


@registry("celu")
def celu(b: Builder, x: Value, *, alpha: float) -> Value:
    """max(0, x) + min(0, alpha (e^(x/alpha) - 1))."""
    zero = b.scalar(0.0, x)
    e = b.op("sub", b.op("exp", _unary_const(b, "div", x, alpha)), b.scalar(1.0, x))
    neg = b.op("minimum", zero, _unary_const(b, "mul", e, alpha))
    return b.op("add", b.op("maximum", zero, x), neg)


@registry("hardtanh")
def hardtanh(b: Builder, x: Value, *, min: float, max: float) -> Value:
    """clamp(x, min, max)."""
    return b.op("clamp", x, b.scalar(min, x), b.scalar(max, x))


@registry("threshold")
def threshold(b: Builder, x: Value, *, threshold: float, value: float) -> Value:
    """x where x > threshold else value."""
    return b.op("where", b.op("gt", x, b.scalar(threshold, x)), x, b.scalar(value, x))


@registry("hardshrink")
def hardshrink(b: Builder, x: Value, *, lambd: float) -> Value:
    """x where |x| > lambd else 0."""
    keep = b.op("gt", b.op("abs", x), b.scalar(lambd, x))
    return b.op("where", keep, x, b.scalar(0.0, x))


@registry("softshrink")
def softshrink(b: Builder, x: Value, *, lambd: float) -> Value:
    """x - lambd sign(x) where |x| > lambd else 0."""
    keep = b.op("gt", b.op("abs", x), b.scalar(lambd, x))
    moved = b.op("sub", x, _unary_const(b, "mul", b.op("sign", x), lambd))
    return b.op("where", keep, moved, b.scalar(0.0, x))


@registry("exp2")
def exp2(b: Builder, x: Value) -> Value:
    """2 ** x."""
    return b.op("pow", b.scalar(2.0, x), x)


@registry("log2")
def log2(b: Builder, x: Value) -> Value:
    """log(x) / log(2)."""
    return _unary_const(b, "div", b.op("log", x), math.log(2.0))


@registry("log10")
def log10(b: Builder, x: Value) -> Value:
    """log(x) / log(10)."""
    return _unary_const(b, "div", b.op("log", x), math.log(10.0))


@registry("log1p")
def log1p(b: Builder, x: Value) -> Value:
    """log(1 + x), with Kahan's correction where |x| < 1/2 so small x stays exact:
    u = 1 + x; log(u) x / (u - 1), or x itself where u rounds to 1."""
    one = b.scalar(1.0, x)
    u = b.op("add", x, one)
    d = b.op("sub", u, one)
    log_u = b.op("log", u)
    corrected = b.op("mul", log_u, b.op("div", x, d))
    near = b.op("where", b.op("eq", d, b.scalar(0.0, x)), x, corrected)
    return b.op("where", _small(b, x), near, log_u)


def _small(b: Builder, x: Value) -> Value:
    return b.op("lt", b.op("abs", x), b.scalar(0.5, x))


@registry("expm1")
def expm1(b: Builder, x: Value) -> Value:
    """e^x - 1, with Kahan's correction where |x| < 1/2: u = e^x; (u - 1) x / log(u), or x
    itself where u rounds to 1."""
    u = b.op("exp", x)
    um1 = b.op("sub", u, b.scalar(1.0, x))
    corrected = b.op("div", b.op("mul", um1, x), b.op("log", u))
    near = b.op("where", b.op("eq", um1, b.scalar(0.0, x)), x, corrected)
    return b.op("where", _small(b, x), near, um1)


@registry("rsqrt")
def rsqrt(b: Builder, x: Value) -> Value:
    """1 / sqrt(x)."""
    return b.op("reciprocal", b.op("sqrt", x))


@registry("trunc")
def trunc(b: Builder, x: Value) -> Value:
    """ceil(x) for negative x, floor(x) otherwise."""
    return b.op("where", b.op("lt", x, b.scalar(0.0, x)), b.op("ceil", x), b.op("floor", x))


@registry("isnan")
def isnan(b: Builder, x: Value) -> Value:
    """x != x: NaN is the one value unequal to itself (IEEE 754)."""
    return b.op("ne", x, x)


@registry("isfinite")
def isfinite(b: Builder, x: Value) -> Value:
    """not (isnan(x) or isinf(x))."""
    return b.op("logical_not", b.op("logical_or", b.op("isnan", x), b.op("isinf", x)))


@registry("atan2")
def atan2(b: Builder, a: Value, x: Value) -> Value:
    """atan(a / x) moved to the right quadrant; atan2(0, 0) = 0."""
    zero = b.scalar(0.0, a)
    q = b.op("atan", b.op("div", a, x))
    pi = b.scalar(math.pi, a)
    moved = b.op("where", b.op("ge", a, zero), b.op("add", q, pi), b.op("sub", q, pi))
    out = b.op("where", b.op("lt", x, zero), moved, q)
    both_zero = b.op("logical_and", b.op("eq", a, zero), b.op("eq", x, zero))
    return b.op("where", both_zero, zero, out)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): single precision.
_ERFINV_SMALL = (
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
)
_ERFINV_LARGE = (
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
)


def _horner(b: Builder, w: Value, coeffs: tuple[float, ...]) -> Value:
    p = b.scalar(coeffs[0], w)
    for c in coeffs[1:]:
        p = b.op("add", b.op("mul", p, w), b.scalar(c, w))
    return p


@registry("erfinv")
def erfinv(b: Builder, x: Value) -> Value:
    """Giles' polynomial approximation (relative error ~1e-7 in single precision) followed
    by one Newton step on erf(y) = x; +-1 map to +-inf."""
    one = b.scalar(1.0, x)
    w = b.op("neg", b.op("log", b.op("mul", b.op("sub", one, x), b.op("add", one, x))))
    small = _horner(b, b.op("sub", w, b.scalar(2.5, x)), _ERFINV_SMALL)
    large = _horner(b, b.op("sub", b.op("sqrt", w), b.scalar(3.0, x)), _ERFINV_LARGE)
    p = b.op("where", b.op("lt", w, b.scalar(5.0, x)), small, large)
    y = b.op("mul", p, x)
    # Newton: y -= (erf(y) - x) / (2/sqrt(pi) e^(-y^2)); skipped where y is infinite.
    deriv = _unary_const(
        b, "mul", b.op("exp", b.op("neg", b.op("mul", y, y))), 2 / math.sqrt(math.pi)
    )
    step = b.op("div", b.op("sub", b.op("erf", y), x), deriv)
    refined = b.op("sub", y, step)
    edge = b.op("eq", b.op("abs", x), one)
    return b.op("where", edge, _unary_const(b, "mul", x, math.inf), refined)


@registry("ne")
def ne(b: Builder, a: Value, x: Value) -> Value:
    """not (a == x)."""
    return b.op("logical_not", b.op("eq", a, x))


@registry("floor_divide")
def floor_divide(b: Builder, a: Value, x: Value) -> Value:
    """floor(a / x) for floats; (a - remainder(a, x)) / x, exact, for integers."""
    if a.dtype.is_floating:
        return b.op("floor", b.op("div", a, x))
    return b.op("div", b.op("sub", a, b.op("remainder", a, x)), x)
