"""Decompositions of special functions into elementary ops, for targets without them (ONNX).

# NOTE: each rule computes in float64 and casts back, so the series and rational
# approximations below are limited by their own error (stated per rule), not by float32
# rounding. Sources of the coefficients: Abramowitz & Stegun, Handbook of Mathematical
# Functions (9.4.1-9.4.6 for J0/J1/Y0/Y1, 9.8.1-9.8.8 for I0/I1/K0/K1, absolute error at
# most ~2e-7 of the scaled function); the Lanczos approximation with g = 7, n = 9 (lgamma,
# relative error ~1e-15); the asymptotic series of digamma; Numerical Recipes' Chebyshev
# fit of erfc.
"""

from __future__ import annotations

import math

from msc.ir.dtype import DType
from msc.ir.graph import Graph, Value
from msc.ir.types import TensorType
from msc.ops.decompose import Builder, registry

F64 = DType.FLOAT64


def _c(b: Builder, v: float) -> Value:
    return b.const(v, F64)


def _poly(b: Builder, t: Value, coeffs: tuple[float, ...]) -> Value:
    """c0 + c1 t + c2 t^2 + ... (Horner)."""
    p = _c(b, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        p = b.op("add", b.op("mul", p, t), _c(b, c))
    return p


def _in64(fn):
    """Run ``fn`` on x as float64 and cast its result back to x's dtype."""

    def rule(b: Builder, x: Value, *rest: Value, **attrs):
        xs = [b.cast(v, F64) for v in (x, *rest)]
        return b.cast(fn(b, *xs, **attrs), x.dtype)

    rule.__doc__ = fn.__doc__
    return rule


def _where(b: Builder, c: Value, x: Value, y: Value) -> Value:
    return b.op("where", c, x, y)


# Numerical Recipes' Chebyshev fit: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0,
# with fractional error below 1.2e-7 everywhere.
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
         -1.13520398, 1.48851587, -0.82215223, 0.17087277)  # fmt: skip


def _erfcx_pos(b: Builder, z: Value) -> Value:
    """exp(z^2) erfc(z) for z >= 0 (no overflow: the exp(z^2) factors cancel)."""
    t = b.op("reciprocal", b.op("add", _c(b, 1.0), b.op("mul", z, _c(b, 0.5))))
    return b.op("mul", t, b.op("exp", _poly(b, t, _ERFC)))


def _erfc(b: Builder, x: Value) -> Value:
    """erfc(x) for any x: erfc(-x) = 2 - erfc(x)."""
    a = b.op("abs", x)
    pos = b.op("mul", _erfcx_pos(b, a), b.op("exp", b.op("neg", b.op("mul", a, a))))
    return _where(b, b.op("lt", x, _c(b, 0.0)), b.op("sub", _c(b, 2.0), pos), pos)


@registry("erfc")
@_in64
def erfc(b: Builder, x: Value) -> Value:
    """Numerical Recipes' fit (relative error < 1.2e-7, in the tails too)."""
    return _erfc(b, x)


@registry("erfcx")
@_in64
def erfcx(b: Builder, x: Value) -> Value:
    """exp(x^2) erfc(x): the fit above for x >= 0; 2 exp(x^2) - erfcx(-x) below."""
    a = b.op("abs", x)
    pos = _erfcx_pos(b, a)
    neg = b.op("sub", b.op("mul", _c(b, 2.0), b.op("exp", b.op("mul", x, x))), pos)
    return _where(b, b.op("lt", x, _c(b, 0.0)), neg, pos)


@registry("ndtri")
def ndtri(b: Builder, p: Value) -> Value:
    """sqrt(2) erfinv(2p - 1) (erfinv's own decomposition, in p's dtype)."""
    y = b.op("erfinv", b.op("sub", b.op("mul", p, b.scalar(2.0, p)), b.scalar(1.0, p)))
    return b.op("mul", y, b.scalar(math.sqrt(2.0), p))


@registry("log_ndtr")
@_in64
def log_ndtr(b: Builder, x: Value) -> Value:
    """log(erfc(-x / sqrt 2) / 2); for x < 0 as log(erfcx(z) / 2) - z^2, z = -x / sqrt 2."""
    z = b.op("mul", x, _c(b, -1.0 / math.sqrt(2.0)))
    direct = b.op("log", b.op("mul", _erfc(b, z), _c(b, 0.5)))
    zp = b.op("maximum", z, _c(b, 0.0))
    tail = b.op("sub", b.op("log", b.op("mul", _erfcx_pos(b, zp), _c(b, 0.5))),
                b.op("mul", zp, zp))  # fmt: skip
    return _where(b, b.op("lt", x, _c(b, 0.0)), tail, direct)


@registry("spherical_bessel_j0")
@_in64
def spherical_bessel_j0(b: Builder, x: Value) -> Value:
    """sin(x) / x, and 1 - x^2 / 6 near 0."""
    small = b.op("lt", b.op("abs", x), _c(b, 1e-4))
    safe = _where(b, small, _c(b, 1.0), x)
    near = b.op("sub", _c(b, 1.0), b.op("div", b.op("mul", x, x), _c(b, 6.0)))
    return _where(b, small, near, b.op("div", b.op("sin", safe), safe))


_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
    1.5056327351493116e-7,
)  # fmt: skip


def _lgamma_pos(b: Builder, x: Value) -> Value:
    """log Gamma(x) for x >= 0.5 (Lanczos, g = 7)."""
    z = b.op("sub", x, _c(b, 1.0))
    s = _c(b, _LANCZOS[0])
    for i, p in enumerate(_LANCZOS[1:], 1):
        s = b.op("add", s, b.op("div", _c(b, p), b.op("add", z, _c(b, float(i)))))
    t = b.op("add", z, _c(b, 7.5))
    out = b.op("mul", b.op("add", z, _c(b, 0.5)), b.op("log", t))
    out = b.op("add", b.op("sub", out, t), b.op("log", s))
    return b.op("add", out, _c(b, 0.5 * math.log(2 * math.pi)))


@registry("lgamma")
@_in64
def lgamma(b: Builder, x: Value) -> Value:
    """Lanczos for x >= 0.5; below, the reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
    (+inf at the poles 0, -1, -2, ...)."""
    low = b.op("lt", x, _c(b, 0.5))
    pos = _lgamma_pos(b, _where(b, low, _c(b, 1.0), x))
    refl = _lgamma_pos(b, _where(b, low, b.op("sub", _c(b, 1.0), x), _c(b, 1.0)))
    sin = b.op("abs", b.op("sin", b.op("mul", x, _c(b, math.pi))))
    neg = b.op("sub", b.op("log", b.op("div", _c(b, math.pi), sin)), refl)
    pole = b.op("logical_and", b.op("le", x, _c(b, 0.0)), b.op("eq", x, b.op("floor", x)))
    out = _where(b, low, neg, pos)
    out = _where(b, pole, _c(b, math.inf), out)
    return _where(b, b.op("isinf", x), _c(b, math.inf), out)


def _digamma_pos(b: Builder, x: Value) -> Value:
    """psi(x) for x > 0: psi(x + 6) - sum 1/(x + k), psi(y) by its asymptotic series."""
    y = b.op("add", x, _c(b, 6.0))
    acc = _c(b, 0.0)
    for k in range(6):
        acc = b.op("add", acc, b.op("reciprocal", b.op("add", x, _c(b, float(k)))))
    r = b.op("reciprocal", b.op("mul", y, y))
    series = b.op("mul", r, _poly(b, r, (-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132)))
    psi = b.op("add", b.op("sub", b.op("log", y), b.op("div", _c(b, 0.5), y)), series)
    return b.op("sub", psi, acc)


@registry("digamma")
@_in64
def digamma(b: Builder, x: Value) -> Value:
    """Positive x as above; negative x by reflection psi(1 - x) - pi / tan(pi x); -inf at 0
    and NaN at the negative integers (as torch)."""
    neg = b.op("le", x, _c(b, 0.0))
    pos = _digamma_pos(b, _where(b, neg, _c(b, 1.0), x))
    refl = _digamma_pos(b, _where(b, neg, b.op("sub", _c(b, 1.0), x), _c(b, 1.0)))
    px = b.op("mul", x, _c(b, math.pi))
    cot = b.op("div", b.op("mul", _c(b, math.pi), b.op("cos", px)), b.op("sin", px))
    out = _where(b, neg, b.op("sub", refl, cot), pos)
    pole = b.op("logical_and", neg, b.op("eq", x, b.op("floor", x)))
    out = _where(b, pole, _c(b, math.nan), out)
    return _where(b, b.op("eq", x, _c(b, 0.0)), _c(b, -math.inf), out)


# ------------------------------------------------------------------------ Bessel functions
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706,
             0.02635537, -0.01647633, 0.00392377)  # fmt: skip
_I1_SMALL = (0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411)
_I1_LARGE = (0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967,
             -0.02895312, 0.01787654, -0.00420059)  # fmt: skip


def _i_scaled(b: Builder, x: Value, order: int) -> Value:
    """exp(-|x|) I_order(x) (A&S 9.8.1-9.8.4)."""
    a = b.op("abs", x)
    big = b.op("gt", a, _c(b, 3.75))
    sa = _where(b, big, _c(b, 3.75), a)
    t2 = b.op("mul", b.op("div", sa, _c(b, 3.75)), b.op("div", sa, _c(b, 3.75)))
    small = _poly(b, t2, _I0_SMALL if order == 0 else _I1_SMALL)
    if order == 1:
        small = b.op("mul", small, sa)
    small = b.op("mul", small, b.op("exp", b.op("neg", sa)))
    la = _where(b, big, a, _c(b, 3.75))
    large = _poly(b, b.op("div", _c(b, 3.75), la), _I0_LARGE if order == 0 else _I1_LARGE)
    large = b.op("div", large, b.op("sqrt", la))
    out = _where(b, big, large, small)
    return out if order == 0 else b.op("mul", out, b.op("sign", x))


for _name, _order, _scaled in (
    ("i0", 0, False), ("i0e", 0, True), ("i1", 1, False), ("i1e", 1, True),
    ("modified_bessel_i0", 0, False), ("modified_bessel_i1", 1, False),
):  # fmt: skip

    def _rule(b: Builder, x: Value, _order: int = _order, _scaled: bool = _scaled) -> Value:
        out = _i_scaled(b, x, _order)
        return out if _scaled else b.op("mul", out, b.op("exp", b.op("abs", x)))

    _rule.__doc__ = f"A&S 9.8.1-9.8.4, order {_order}{' (scaled)' if _scaled else ''}."
    registry(_name)(_in64(_rule))

_K0_SMALL = (-0.57721566, 0.42278420, 0.23069756, 0.03488590, 0.00262698, 0.00010750,
             0.00000740)  # fmt: skip
_K0_LARGE = (1.25331414, -0.07832358, 0.02189568, -0.01062446, 0.00587872, -0.00251540,
             0.00053208)  # fmt: skip
_K1_SMALL = (1.0, 0.15443144, -0.67278579, -0.18156897, -0.01919402, -0.00110404,
             -0.00004686)  # fmt: skip
_K1_LARGE = (1.25331414, 0.23498619, -0.03655620, 0.01504268, -0.00780353, 0.00325614,
             -0.00068245)  # fmt: skip


def _k_scaled(b: Builder, x: Value, order: int) -> Value:
    """exp(x) K_order(x) for x > 0 (A&S 9.8.5-9.8.8); inf at 0, NaN below."""
    big = b.op("gt", x, _c(b, 2.0))
    sx = _where(b, big, _c(b, 1.0), b.op("maximum", x, _c(b, 1e-300)))
    h = b.op("div", sx, _c(b, 2.0))
    h2 = b.op("mul", h, h)
    log_h = b.op("log", h)
    i_small = b.op("mul", _i_scaled(b, sx, order), b.op("exp", sx))
    if order == 0:
        small = b.op("sub", _poly(b, h2, _K0_SMALL), b.op("mul", log_h, i_small))
    else:
        small = b.op("add", b.op("mul", b.op("mul", sx, log_h), i_small), _poly(b, h2, _K1_SMALL))
        small = b.op("div", small, sx)
    small = b.op("mul", small, b.op("exp", sx))
    lx = _where(b, big, x, _c(b, 2.0))
    large = _poly(b, b.op("div", _c(b, 2.0), lx), _K0_LARGE if order == 0 else _K1_LARGE)
    large = b.op("div", large, b.op("sqrt", lx))
    out = _where(b, big, large, small)
    out = _where(b, b.op("eq", x, _c(b, 0.0)), _c(b, math.inf), out)
    return _where(b, b.op("lt", x, _c(b, 0.0)), _c(b, math.nan), out)


for _name, _order, _scaled in (
    ("modified_bessel_k0", 0, False), ("modified_bessel_k1", 1, False),
    ("scaled_modified_bessel_k0", 0, True), ("scaled_modified_bessel_k1", 1, True),
):  # fmt: skip

    def _krule(b: Builder, x: Value, _order: int = _order, _scaled: bool = _scaled) -> Value:
        out = _k_scaled(b, x, _order)
        return out if _scaled else b.op("mul", out, b.op("exp", b.op("neg", x)))

    _krule.__doc__ = f"A&S 9.8.5-9.8.8, order {_order}{' (scaled)' if _scaled else ''}."
    registry(_name)(_in64(_krule))

_J0_SMALL = (1.0, -2.2499997, 1.2656208, -0.3163866, 0.0444479, -0.0039444, 0.0002100)
_Y0_SMALL = (0.36746691, 0.60559366, -0.74350384, 0.25300117, -0.04261214, 0.00427916,
             -0.00024846)  # fmt: skip
_J1_SMALL = (0.5, -0.56249985, 0.21093573, -0.03954289, 0.00443319, -0.00031761, 0.00001109)
_Y1_SMALL = (-0.6366198, 0.2212091, 2.1682709, -1.3164827, 0.3123951, -0.0400976, 0.0027873)
_F0 = (0.79788456, -0.00000077, -0.00552740, -0.00009512, 0.00137237, -0.00072805, 0.00014476)
_T0 = (-0.78539816, -0.04166397, -0.00003954, 0.00262573, -0.00054125, -0.00029333,
       0.00013558)  # fmt: skip
_F1 = (0.79788456, 0.00000156, 0.01659667, 0.00017105, -0.00249511, 0.00113653, -0.00020033)
_T1 = (-2.35619449, 0.12499612, 0.00005650, -0.00637879, 0.00074348, 0.00079824,
       -0.00029166)  # fmt: skip


def _bessel(b: Builder, x: Value, order: int, second: bool) -> Value:
    """J_order (first kind) or Y_order (second kind) by A&S 9.4.1-9.4.6."""
    a = b.op("abs", x)
    big = b.op("gt", a, _c(b, 3.0))
    sa = _where(b, big, _c(b, 1.0), a)
    t = b.op("div", sa, _c(b, 3.0))
    t2 = b.op("mul", t, t)
    j_small = _poly(b, t2, _J0_SMALL if order == 0 else _J1_SMALL)
    if order == 1:
        j_small = b.op("mul", j_small, sa)
    if second:
        log_term = b.op("mul", b.op("log", b.op("div", sa, _c(b, 2.0))), _c(b, 2 / math.pi))
        if order == 0:
            small = b.op("add", b.op("mul", log_term, j_small), _poly(b, t2, _Y0_SMALL))
        else:
            small = b.op("add", b.op("mul", b.op("mul", log_term, sa), j_small),
                         _poly(b, t2, _Y1_SMALL))  # fmt: skip
            small = b.op("div", small, sa)
    else:
        small = j_small
    la = _where(b, big, a, _c(b, 3.0))
    u = b.op("div", _c(b, 3.0), la)
    f = _poly(b, u, _F0 if order == 0 else _F1)
    theta = b.op("add", la, _poly(b, u, _T0 if order == 0 else _T1))
    trig = b.op("sin" if second else "cos", theta)
    large = b.op("div", b.op("mul", f, trig), b.op("sqrt", la))
    out = _where(b, big, large, small)
    if second:
        out = _where(b, b.op("eq", x, _c(b, 0.0)), _c(b, -math.inf), out)
        return _where(b, b.op("lt", x, _c(b, 0.0)), _c(b, math.nan), out)
    return out if order == 0 else b.op("mul", out, b.op("sign", x))


for _name, _order, _second in (
    ("bessel_j0", 0, False), ("bessel_j1", 1, False),
    ("bessel_y0", 0, True), ("bessel_y1", 1, True),
):  # fmt: skip

    def _jrule(b: Builder, x: Value, _order: int = _order, _second: bool = _second) -> Value:
        return _bessel(b, x, _order, _second)

    _jrule.__doc__ = f"A&S 9.4.1-9.4.6: {'Y' if _second else 'J'}{_order}."
    registry(_name)(_in64(_jrule))


# ---------------------------------------------------------------- orthogonal polynomials
# (x, n) with the degree n a tensor: the three-term recurrence p_{k+1} = a_k(x) p_k - c_k p_{k-1}
# runs in a ``loop`` up to the largest degree present, each element keeping the p_k of its own
# degree (trunc(n), as torch casts it); a negative degree gives 0, as torch's kernels do.
# Each entry: (x -> p_1, (x, k) -> (a_k, c_k) with k the degree of p_k, shifted argument).
def _cheb(p1):
    return (p1, lambda b, x, k: (b.op("add", x, x), _c(b, 1.0)), False)


def _hermite_h(b: Builder, x: Value, k: Value):
    return b.op("add", x, x), b.op("add", k, k)


def _laguerre(b: Builder, x: Value, k: Value):  # ((2k + 1 - x) p_k - k p_{k-1}) / (k + 1)
    k1 = b.op("add", k, _c(b, 1.0))
    return (b.op("div", b.op("sub", b.op("add", k, k1), x), k1), b.op("div", k, k1))


def _legendre(b: Builder, x: Value, k: Value):  # ((2k + 1) x p_k - k p_{k-1}) / (k + 1)
    k1 = b.op("add", k, _c(b, 1.0))
    return (b.op("div", b.op("mul", b.op("add", k, k1), x), k1), b.op("div", k, k1))


_RECURRENCES = {
    "chebyshev_polynomial_t": _cheb(lambda b, x: x),
    "chebyshev_polynomial_u": _cheb(lambda b, x: b.op("add", x, x)),
    "chebyshev_polynomial_v": _cheb(lambda b, x: b.op("sub", b.op("add", x, x), _c(b, 1.0))),
    "chebyshev_polynomial_w": _cheb(lambda b, x: b.op("add", b.op("add", x, x), _c(b, 1.0))),
    "hermite_polynomial_h": (lambda b, x: b.op("add", x, x), _hermite_h, False),
    "hermite_polynomial_he": (lambda b, x: x, lambda b, x, k: (x, k), False),
    "laguerre_polynomial_l": (lambda b, x: b.op("sub", _c(b, 1.0), x), _laguerre, False),
    "legendre_polynomial_p": (lambda b, x: x, _legendre, False),
}
for _kind in "tuvw":
    _p1, _step, _ = _RECURRENCES[f"chebyshev_polynomial_{_kind}"]
    _RECURRENCES[f"shifted_chebyshev_polynomial_{_kind}"] = (_p1, _step, True)


def _polynomial(name: str):
    first, step, shifted = _RECURRENCES[name]

    def rule(b: Builder, x: Value, n: Value) -> Value:
        yes = b.const(True, DType.BOOL)
        xf, nf = b.cast(x, F64), b.cast(n, F64)
        xb = b.op("where", yes, xf, nf)  # x broadcast against n
        deg = b.cast(b.op("where", yes, nf, xf), DType.INT64)  # trunc(n), broadcast
        if shifted:
            xb = b.op("sub", b.op("add", xb, xb), _c(b, 1.0))
        one = b.op("where", yes, _c(b, 1.0), xb)
        p1 = b.op("where", yes, first(b, xb), xb)
        i64 = lambda v: b.const(v, DType.INT64)  # noqa: E731
        res = b.op("where", b.op("eq", deg, i64(1)), p1, _c(b, 0.0))
        res = b.op("where", b.op("eq", deg, i64(0)), one, res)
        # p_2 .. p_max(deg): max(deg) - 1 iterations (none when every degree is below 2)
        top = b.op("reduce_max", b.op("reshape", deg, shape=[-1]), axes=[0], keepdims=False)
        trips = b.op("where", b.op("gt", top, i64(1)), b.op("sub", top, i64(1)), i64(0))
        body = Graph(f"{b._base}/recurrence")
        it = body.add_input(f"{b._base}/k", TensorType(DType.INT64, ()))
        body.add_input(f"{b._base}/cond", TensorType(DType.BOOL, ()))
        carried = [
            body.add_input(f"{b._base}/{nm}", v.type)
            for nm, v in (("x", xb), ("n", deg), ("p_prev", one), ("p", p1), ("result", res))
        ]
        bx, bdeg, prev, cur, acc = carried
        inner = Builder(prefix=f"{b._base}/step")
        k = inner.op("add", inner.cast(it, F64), inner.const(1.0, F64))  # degree of p_k
        a_k, c_k = step(inner, bx, k)
        nxt = inner.op("sub", inner.op("mul", a_k, cur), inner.op("mul", c_k, prev))
        hit = inner.op("eq", bdeg, inner.op("add", it, inner.const(2, DType.INT64)))
        acc2 = inner.op("where", hit, nxt, acc)
        keep = [inner.op("identity", v) for v in (bx, bdeg, cur)]
        go = inner.const(True, DType.BOOL)
        for node in inner.nodes:
            body.add_node(node)
        body.set_outputs([go, *keep, nxt, acc2])
        outs = b.multi("loop", trips, None, xb, deg, one, p1, res, body=body)
        return b.cast(outs[4], x.dtype)

    rule.__doc__ = f"{name}: its three-term recurrence in a loop to the largest degree (float64)"
    return rule


for _name in _RECURRENCES:
    registry.register(_name, _polynomial(_name))


# ------------------------------------------------------------------ Hurwitz zeta, polygamma
def _bernoulli_ratios(count: int) -> tuple[float, ...]:
    """(2j)! / B_2j for j = 1..count (B_2j the Bernoulli numbers, from their recurrence)."""
    from fractions import Fraction

    bern = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        bern.append(-sum(math.comb(m + 1, k) * bern[k] for k in range(m)) / (m + 1))
    return tuple(float(math.factorial(2 * j) / bern[2 * j]) for j in range(1, count + 1))


_ZETA_TERMS, _ZETA_RATIOS = 9, _bernoulli_ratios(12)
_ZETA_SHIFT = 32  # q down to -32 (below: NaN)


def _zeta(b: Builder, x: Value, q: Value) -> Value:
    """Cephes' zeta (which torch uses): sum_{k<=i} (q + k)^-x with i the first count >= 9 at
    which q + i > 9 (9 for q > 0; more for negative q, up to 32 more here), then the
    Euler-Maclaurin tail at w = q + i with 12 Bernoulli terms."""
    neg_x = b.op("neg", x)
    # i per element: max(9, floor(9 - q) + 1)
    nine = _c(b, float(_ZETA_TERMS))
    i = b.op("maximum", nine, b.op("add", b.op("floor", b.op("sub", nine, q)), _c(b, 1.0)))
    s = _c(b, 0.0)
    for k in range(_ZETA_TERMS + _ZETA_SHIFT + 1):
        term = b.op("pow", b.op("add", q, _c(b, float(k))), neg_x)
        if k > _ZETA_TERMS:  # only where the element's count reaches k
            term = _where(b, b.op("le", _c(b, float(k)), i), term, _c(b, 0.0))
        s = b.op("add", s, term)
    w = b.op("add", q, i)
    tail = b.op("pow", w, neg_x)  # w^-x
    s = b.op("add", s, b.op("div", b.op("mul", tail, w), b.op("sub", x, _c(b, 1.0))))
    s = b.op("sub", s, b.op("mul", tail, _c(b, 0.5)))
    rising, term_w, k = _c(b, 1.0), tail, 0.0
    for ratio in _ZETA_RATIOS:  # B_2j / (2j)! * x (x+1) ... (x+2j-2) * w^(-x-2j+1)
        rising = b.op("mul", rising, b.op("add", x, _c(b, k)))
        term_w = b.op("div", term_w, w)
        s = b.op("add", s, b.op("div", b.op("mul", rising, term_w), _c(b, ratio)))
        rising = b.op("mul", rising, b.op("add", x, _c(b, k + 1.0)))
        term_w = b.op("div", term_w, w)
        k += 2.0
    # Cephes' special values: x = 1 -> inf, x < 1 -> NaN, q a non-positive integer -> inf,
    # q <= 0 with x not an integer -> NaN; q below the unrolled shift -> NaN.
    s = _where(b, b.op("lt", q, _c(b, -float(_ZETA_SHIFT))), _c(b, math.nan), s)
    s = _where(b, b.op("lt", x, _c(b, 1.0)), _c(b, math.nan), s)
    s = _where(b, b.op("eq", x, _c(b, 1.0)), _c(b, math.inf), s)
    q_le0 = b.op("le", q, _c(b, 0.0))
    x_frac = b.op("ne", x, b.op("floor", x))
    s = _where(b, b.op("logical_and", q_le0, x_frac), _c(b, math.nan), s)
    q_pole = b.op("logical_and", q_le0, b.op("eq", q, b.op("floor", q)))
    return _where(b, q_pole, _c(b, math.inf), s)


@registry("zeta")
@_in64
def zeta(b: Builder, x: Value, q: Value) -> Value:
    """Hurwitz zeta by Euler-Maclaurin summation (Cephes' scheme), float64."""
    return _zeta(b, x, q)


@registry("polygamma")
def polygamma(b: Builder, x: Value, *, n: int) -> Value:
    """(-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (digamma for n = 0), float64."""
    xf = b.cast(x, F64)
    if n == 0:
        return b.cast(b.op("digamma", xf), x.dtype)
    z = _zeta(b, _c(b, float(n + 1)), xf)
    sign = 1.0 if n % 2 else -1.0
    return b.cast(b.op("mul", z, _c(b, sign * math.factorial(n))), x.dtype)
