"""StableHLO / CHLO elementwise ops: unary math, binary arithmetic, compare, select, convert,
clamp, constants."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.jax.importer import CONST_LIMIT, Ctx
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter
from msc.ir import DType

UNARY = {
    "abs": "abs",
    "ceil": "ceil",
    "cosine": "cos",
    "exponential": "exp",
    "exponential_minus_one": "expm1",
    "floor": "floor",
    "is_finite": "isfinite",
    "log": "log",
    "log_plus_one": "log1p",
    "logistic": "sigmoid",
    "negate": "neg",
    "round_nearest_even": "round",
    "rsqrt": "rsqrt",
    "sign": "sign",
    "sine": "sin",
    "sqrt": "sqrt",
    "tan": "tan",
    "tanh": "tanh",
}
CHLO_UNARY = {
    "erf": "erf",
    "erf_inv": "erfinv",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "lgamma": "lgamma",
    "digamma": "digamma",
    "tan": "tan",
    "square": None,
}
BINARY = {
    "add": "add",
    "subtract": "sub",
    "multiply": "mul",
    "maximum": "maximum",
    "minimum": "minimum",
    "power": "pow",
    "atan2": "atan2",
    "shift_left": "bitshift_left",
}
LOGICAL = {
    "and": ("logical_and", "bitwise_and"),
    "or": ("logical_or", "bitwise_or"),
    "xor": ("logical_xor", "bitwise_xor"),
}
COMPARE = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def _unary(op: str):
    def convert(ctx: Ctx, sop: ShloOp, x):
        return ctx.op(op, x)

    return convert


for _name, _op in UNARY.items():
    converter(f"stablehlo.{_name}")(_unary(_op))
for _name, _op in CHLO_UNARY.items():
    if _op is not None:
        converter(f"chlo.{_name}")(_unary(_op))


def _binary(op: str):
    def convert(ctx: Ctx, sop: ShloOp, a, b):
        return ctx.op(op, a, b)

    return convert


for _name, _op in BINARY.items():
    converter(f"stablehlo.{_name}")(_binary(_op))


def _constant(v) -> np.ndarray | None:
    """``v``'s value when it is a constant, read through its broadcasts."""
    while v.producer is not None and v.producer.op in ("reshape", "expand", "identity"):
        v = v.producer.inputs[0]
    p = v.producer
    return p.attrs["value"] if p is not None and p.op == "constant" else None


def _nonzero(v) -> bool:
    """``v`` holds no zero: a constant, or a divisor already made safe (``where(y == 0, k,
    y)`` of a nonzero ``k``, what this converter writes and what JAX code spelling it out
    re-exports as)."""
    c = _constant(v)
    if c is not None:
        return bool(c.size) and bool(np.all(c != 0))
    p = v.producer
    if p is None or p.op != "where":
        return False
    cond, k, y = p.inputs
    eq = cond.producer
    if eq is None or eq.op != "eq" or y not in eq.inputs:
        return False
    zero = _constant(eq.inputs[1] if eq.inputs[0] is y else eq.inputs[0])
    return zero is not None and bool(np.all(zero == 0)) and _nonzero(k)


def _integer_by_zero(op: str):
    """divide / remainder: StableHLO defines an integer division by zero (XLA: x / 0 is all
    ones, -1 signed; x % 0 is x), where PyTorch raises and onnxruntime fails, so a divisor
    that may be zero is replaced by one and the defined result selected where it was zero
    (jnp.gcd's loop divides by the zeros it then discards)."""

    def convert(ctx: Ctx, sop: ShloOp, a, b):
        if not a.dtype.is_integer or _nonzero(b):
            return ctx.op(op, a, b)
        zero = ctx.op("eq", b, ctx.const(0, b.dtype))
        safe = ctx.op("where", zero, ctx.const(1, b.dtype), b)
        if op == "fmod":
            defined = a
        else:
            defined = ctx.const(
                -1 if a.dtype.is_signed else np.iinfo(a.dtype.to_numpy()).max, a.dtype
            )
        return ctx.op("where", zero, defined, ctx.op(op, a, safe))

    return convert


converter("stablehlo.divide")(_integer_by_zero("div"))
converter("stablehlo.remainder")(_integer_by_zero("fmod"))


def _logical(ops: tuple[str, str]):
    def convert(ctx: Ctx, sop: ShloOp, a, b):
        return ctx.op(ops[0] if a.dtype is DType.BOOL else ops[1], a, b)

    return convert


for _name, _ops in LOGICAL.items():
    converter(f"stablehlo.{_name}")(_logical(_ops))


@converter("composite:chlo.erf")
def composite_erf(ctx: Ctx, sop: ShloOp, x):
    return ctx.op("erf", x)


@converter("chlo.square")
def square(ctx: Ctx, sop: ShloOp, x):
    return ctx.op("mul", x, x)


@converter("stablehlo.not")
def not_(ctx: Ctx, sop: ShloOp, x):
    return ctx.op("logical_not" if x.dtype is DType.BOOL else "bitwise_not", x)


@converter("stablehlo.cbrt")
def cbrt(ctx: Ctx, sop: ShloOp, x):
    third = ctx.const(1.0 / 3.0, x.dtype)
    return ctx.op("mul", ctx.op("sign", x), ctx.op("pow", ctx.op("abs", x), third))


@converter("stablehlo.round_nearest_afz")
def round_half_away(ctx: Ctx, sop: ShloOp, x):
    """Round half away from zero (jnp.round's cousin that floor_divide and divmod use): the
    integer part plus the sign where the fraction (exact: x - trunc(x)) is at least one half."""
    t = ctx.op("trunc", x)
    frac = ctx.op("sub", x, t)
    half = ctx.op("ge", ctx.op("abs", frac), ctx.const(0.5, x.dtype))
    step = ctx.op("where", half, ctx.op("sign", x), ctx.const(0.0, x.dtype))
    return ctx.op("add", t, step)


def _shift_right(kind: str):
    def convert(ctx: Ctx, sop: ShloOp, a, b):
        # msc's bitshift_right is arithmetic for signed and logical for unsigned integers
        if a.dtype.is_signed != (kind == "arithmetic"):
            raise Unsupported(f"a {kind} right shift of {a.dtype} integers")
        return ctx.op("bitshift_right", a, b)

    return convert


converter("stablehlo.shift_right_arithmetic")(_shift_right("arithmetic"))
converter("stablehlo.shift_right_logical")(_shift_right("logical"))


_SAME_WIDTH_INT = {2: DType.INT16, 4: DType.INT32, 8: DType.INT64}


def _total_order_key(ctx: Ctx, x):
    """A float's bits as the signed integer that orders as IEEE's totalOrder does (-NaN <
    -inf < ... < -0 < +0 < ... < inf < +NaN): a negative float's magnitude bits flipped, so
    a larger magnitude is a smaller integer."""
    to = _SAME_WIDTH_INT.get(x.dtype.itemsize)
    if to is None:
        raise Unsupported(f"a TOTALORDER comparison of {x.dtype.value}")
    i = ctx.op("bitcast", x, to=to)
    magnitude = ctx.const(np.iinfo(to.to_numpy()).max, to)
    flipped = ctx.op("bitwise_xor", i, magnitude)
    return ctx.op("where", ctx.op("lt", i, ctx.const(0, to)), flipped, i)


@converter("stablehlo.compare")
def compare(ctx: Ctx, sop: ShloOp, a, b):
    """A comparison; TOTALORDER (what jnp.searchsorted and the sort of floats with NaN ask
    for) compares the floats' total-order keys."""
    direction = str(sop.raw("comparison_direction")).split()[-1].rstrip(">")
    if direction not in COMPARE:
        raise Unsupported(f"comparison direction {direction}")
    if "TOTALORDER" in str(sop.attr("compare_type", "")) and a.dtype.is_floating:
        a, b = _total_order_key(ctx, a), _total_order_key(ctx, b)
    return ctx.op(COMPARE[direction], a, b)


@converter("stablehlo.popcnt")
def popcnt(ctx: Ctx, sop: ShloOp, x):
    """The set bits of each integer (jnp.bitwise_count), exact: neither torch nor ONNX counts
    bits, so fields of 1, 2, 4 bits are summed in place (the SWAR count), then the bytes. The
    top bit is counted apart, so no sum overflows a signed type."""
    dt = x.dtype
    if not dt.is_integer:
        raise Unsupported(f"a popcnt of {dt.value}")
    w = dt.bits

    def c(v: int):
        return ctx.const(v, dt)

    def shr(v, n: int):  # arithmetic or logical alike: every use masks the bits shifted in
        return ctx.op("bitshift_right", v, c(n))

    top = ctx.op("bitwise_and", shr(x, w - 1), c(1))
    y = ctx.op("bitwise_and", x, c(2 ** (w - 1) - 1))
    for n, byte in ((1, 0x55), (2, 0x33), (4, 0x0F)):
        mask = c(int.from_bytes(bytes([byte]) * (w // 8), "little"))
        lo, hi = ctx.op("bitwise_and", y, mask), ctx.op("bitwise_and", shr(y, n), mask)
        y = ctx.op("add", lo, hi)
    n = 8
    while n < w:  # each byte holds its count: add them into the lowest
        y = ctx.op("add", y, shr(y, n))
        n *= 2
    return ctx.op("add", ctx.op("bitwise_and", y, c(0xFF if w > 8 else 0x7F)), top)


@converter("stablehlo.bitcast_convert")
def bitcast_convert(ctx: Ctx, sop: ShloOp, x):
    """A reinterpretation of the bits (jnp.signbit, copysign, frexp, nextafter); one between
    widths (an f32 as four u8) changes the shape, which msc's bitcast does not."""
    to = ctx.out_type().dtype
    if to.itemsize != x.dtype.itemsize:
        raise Unsupported(f"a bitcast_convert from {x.dtype.value} to {to.value} (another width)")
    return ctx.op("bitcast", x, to=to)


@converter("stablehlo.select")
def select(ctx: Ctx, sop: ShloOp, pred, on_true, on_false):
    return ctx.op("where", pred, on_true, on_false)


@converter("stablehlo.clamp")
def clamp(ctx: Ctx, sop: ShloOp, lo, x, hi):
    return ctx.op("clamp", x, lo, hi)


@converter("stablehlo.convert")
def convert(ctx: Ctx, sop: ShloOp, x):
    to = ctx.out_type().dtype
    if to is x.dtype:
        return ctx.op("identity", x)
    return ctx.op("cast", x, to=to)


@converter("stablehlo.constant")
def constant(ctx: Ctx, sop: ShloOp):
    value = sop.attr("value")
    if not isinstance(value, np.ndarray):
        raise Unsupported("a constant that is not a dense tensor")
    if value.size > CONST_LIMIT:
        return ctx.weight(value)
    return ctx.op("constant", value=value)
