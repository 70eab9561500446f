"""Relax emitters of the elementwise family: unary math, binary arithmetic, comparisons,
activations, casts."""

from __future__ import annotations

import math

import tvm
from tvm import relax

from codegen.relax.registry import Emit, Unsupported, emitter, relax_dtype

R = relax.op

_UNARY = {
    "abs": R.abs,
    "acos": R.acos,
    "acosh": R.acosh,
    "asin": R.asin,
    "asinh": R.asinh,
    "atan": R.atan,
    "atanh": R.atanh,
    "ceil": R.ceil,
    "cos": R.cos,
    "cosh": R.cosh,
    "erf": R.erf,
    "exp": R.exp,
    "floor": R.floor,
    "log": R.log,
    "neg": R.negative,
    "relu": R.nn.relu,
    "round": R.round,
    "rsqrt": R.rsqrt,
    "sigmoid": R.sigmoid,
    "sign": R.sign,
    "sin": R.sin,
    "sinh": R.sinh,
    "sqrt": R.sqrt,
    "tan": R.tan,
    "tanh": R.tanh,
    "trunc": R.trunc,
    "isnan": R.isnan,
    "isinf": R.isinf,
    "isfinite": R.isfinite,
    "logical_not": R.logical_not,
    "selu": R.nn.selu,
}


def _unary(fn):
    def emit(e: Emit, x):
        return e.emit(fn(x))

    return emit


for _op, _fn in _UNARY.items():
    emitter(_op)(_unary(_fn))


@emitter("silu")
def silu(e: Emit, x):
    # x * sigmoid(x), as TVM's torch frontend writes it
    return e.emit(R.multiply(x, e.emit(R.sigmoid(x))))


@emitter("bitwise_not")
def bitwise_not(e: Emit, x):
    if e.dtype(x) == "bool":
        return e.emit(R.logical_not(x))
    return e.emit(R.bitwise_not(x))


@emitter("identity")
def identity(e: Emit, x):
    return x


@emitter("cast")
def cast(e: Emit, x, *, to):
    return e.emit(R.astype(x, relax_dtype(to)))


@emitter("gelu")
def gelu(e: Emit, x, *, approximate="none"):
    if approximate == "tanh":
        return e.emit(R.nn.gelu_tanh(x))
    return e.emit(R.nn.gelu(x))


@emitter("leaky_relu")
def leaky_relu(e: Emit, x, *, negative_slope=0.01):
    return e.emit(R.nn.leakyrelu(x, negative_slope))


@emitter("softplus")
def softplus(e: Emit, x, *, beta=1.0, threshold=20.0):
    return e.emit(R.nn.softplus(x, beta, threshold))


@emitter("hardtanh")
def hardtanh(e: Emit, x, *, min=-1.0, max=1.0):  # noqa: A002
    return e.emit(R.clip(x, min, max))


@emitter("hardsigmoid")
def hardsigmoid(e: Emit, x, *, alpha=1 / 6, beta=0.5):
    dt = e.dtype(x)
    y = e.emit(R.add(R.multiply(x, e.const(alpha, dt)), e.const(beta, dt)))
    return e.emit(R.clip(y, 0, 1))


@emitter("elu")
def elu(e: Emit, x, *, alpha=1.0):
    # alpha * relu(1 - exp(x)) * -1 + relu(x), as TVM's own frontends write it.
    dt = e.dtype(x)
    a = e.const(-alpha, dt)
    neg = e.emit(R.multiply(a, R.nn.relu(R.subtract(e.const(1.0, dt), R.exp(x)))))
    return e.emit(R.add(neg, R.nn.relu(x)))


@emitter("shrink")
def shrink(e: Emit, x, *, bias=0.0, lambd=0.5):
    dt = e.dtype(x)
    lo = e.emit(
        R.where(R.less(x, e.const(-lambd, dt)), R.add(x, e.const(bias, dt)), e.const(0, dt))
    )
    hi = R.where(R.greater(x, e.const(lambd, dt)), R.subtract(x, e.const(bias, dt)), lo)
    return e.emit(hi)


@emitter("thresholded_relu")
def thresholded_relu(e: Emit, x, *, alpha=1.0):
    dt = e.dtype(x)
    return e.emit(R.where(R.greater(x, e.const(alpha, dt)), x, e.const(0, dt)))


@emitter("softsign")
def softsign(e: Emit, x):
    dt = e.dtype(x)
    return e.emit(R.divide(x, R.add(e.const(1.0, dt), R.abs(x))))


@emitter("reciprocal")
def reciprocal(e: Emit, x):
    return e.emit(R.divide(e.const(1.0, e.dtype(x)), x))


_BINARY = {
    "add": R.add,
    "sub": R.subtract,
    "mul": R.multiply,
    "maximum": R.maximum,
    "minimum": R.minimum,
    "remainder": R.floor_mod,
    "bitshift_left": R.left_shift,
    "bitshift_right": R.right_shift,
    "logical_and": R.logical_and,
    "logical_or": R.logical_or,
    "logical_xor": R.logical_xor,
    "eq": R.equal,
    "ne": R.not_equal,
    "lt": R.less,
    "le": R.less_equal,
    "gt": R.greater,
    "ge": R.greater_equal,
}


def _binary(fn):
    def emit(e: Emit, a, b):
        return e.broadcast(fn, a, b)

    return emit


for _op, _fn in _BINARY.items():
    emitter(_op)(_binary(_fn))


def _bitwise(fn, logical):
    def emit(e: Emit, a, b):
        # Bools as the logical op, unless read from Relax's bitwise op (TVM writes it for bools)
        as_logical = e.dtype(a) == "bool" and e.source_op != f"relax.{fn.__name__}"
        return e.broadcast(logical if as_logical else fn, a, b)

    return emit


emitter("bitwise_and")(_bitwise(R.bitwise_and, R.logical_and))
emitter("bitwise_or")(_bitwise(R.bitwise_or, R.logical_or))
emitter("bitwise_xor")(_bitwise(R.bitwise_xor, R.logical_xor))


@emitter("div")
def div(e: Emit, a, b):
    a, b = e.unify(a, b)
    if e.dtype(a).startswith(("int", "uint")):  # C and ONNX: integers divide toward zero
        return e.emit(_trunc_div(e, a, b))
    return e.emit(R.divide(a, b))


def _trunc_div(e: Emit, a, b):
    # floor division corrected toward zero where the signs differ and the division is inexact
    q = e.emit(R.floor_divide(a, b))
    r = e.emit(R.floor_mod(a, b))
    zero = e.const(0, e.dtype(a))
    fix = R.logical_and(R.not_equal(r, zero), R.logical_xor(R.less(a, zero), R.less(b, zero)))
    return R.where(fix, R.add(q, e.const(1, e.dtype(a))), q)


@emitter("floor_divide")
def floor_divide(e: Emit, a, b):
    a, b = e.unify(a, b)
    if e.dtype(a).startswith(("int", "uint")):
        return e.emit(R.floor_divide(a, b))
    return e.emit(R.floor(R.divide(a, b)))


@emitter("fmod")
def fmod(e: Emit, a, b):
    a, b = e.unify(a, b)
    # a - trunc(a / b) * b, with the sign of a
    if e.dtype(a).startswith(("int", "uint")):
        q = e.emit(_trunc_div(e, a, b))
        return e.emit(R.subtract(a, R.multiply(q, b)))
    return e.emit(R.subtract(a, R.multiply(R.trunc(R.divide(a, b)), b)))


@emitter("pow")
def pow_(e: Emit, a, b):
    a, b = e.unify(a, b)
    dt = e.dtype(a)
    if dt.startswith(("int", "uint")):  # Relax's power is for floats: exact in f64 here
        y = R.power(R.astype(a, "float64"), R.astype(b, "float64"))
        return e.emit(R.astype(R.round(y), dt))
    return e.emit(R.power(a, b))


@emitter("atan2")
def atan2(e: Emit, a, b):
    return e.broadcast(R.atan2, a, b)


@emitter("where")
def where(e: Emit, condition, x, y):
    return e.broadcast(R.where, condition, x, y)


@emitter("prelu")
def prelu(e: Emit, a, b):
    a, b = e.unify(a, b)
    zero = e.const(0, e.dtype(a))
    return e.emit(R.where(R.greater(a, zero), a, R.multiply(a, b)))


def _scalar_bound(b) -> float | None:
    if isinstance(b, tvm.ir.GenericConst) and b.value.numpy().ndim == 0:
        return float(b.value.numpy())
    return None


@emitter("clamp")
def clamp(e: Emit, x, min=None, max=None):  # noqa: A002
    lo, hi = _scalar_bound(min), _scalar_bound(max)
    scalar = (min is None or lo is not None) and (max is None or hi is not None)
    if scalar and e.dtype(x).startswith(("float", "bfloat")):  # one clip, as TVM writes it
        lo = -math.inf if lo is None else lo
        hi = math.inf if hi is None else hi
        return e.emit(R.clip(x, lo, hi))
    out = x
    if min is not None:
        out = e.emit(R.maximum(out, min))
    if max is not None:
        out = e.emit(R.minimum(out, max))
    return out


@emitter("celu")
def celu(e: Emit, x, *, alpha=1.0):
    dt = e.dtype(x)
    if alpha == 0:
        raise Unsupported("celu with alpha 0")
    a = e.const(alpha, dt)
    neg = R.minimum(
        e.const(0, dt), R.multiply(a, R.subtract(R.exp(R.divide(x, a)), e.const(1, dt)))
    )
    return e.emit(R.add(R.maximum(e.const(0, dt), x), neg))
