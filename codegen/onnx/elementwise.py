"""Emitters for elementwise ops: unary math, activations, binary ops, comparisons, where,
clamp and cast.

# NOTE: canonical binary ops take one dtype on both sides, as ONNX does, so no casts are
# needed except where ONNX lacks a kernel type (bool reductions, signed shifts). Constants an
# emitter makes take the dtype of the input they combine with.
"""

from __future__ import annotations

from codegen.onnx.registry import ONNX_DTYPE, Emit, Ref, emitter
from msc.ir.dtype import DType

# canonical op -> (ONNX op, first opset in which it exists with broadcasting / these types)
UNARY = {
    "abs": ("Abs", 6),
    "neg": ("Neg", 6),
    "exp": ("Exp", 6),
    "log": ("Log", 6),
    "sqrt": ("Sqrt", 6),
    "reciprocal": ("Reciprocal", 6),
    "sin": ("Sin", 7),
    "cos": ("Cos", 7),
    "tan": ("Tan", 7),
    "asin": ("Asin", 7),
    "acos": ("Acos", 7),
    "atan": ("Atan", 7),
    "sinh": ("Sinh", 9),
    "cosh": ("Cosh", 9),
    "tanh": ("Tanh", 6),
    "asinh": ("Asinh", 9),
    "acosh": ("Acosh", 9),
    "atanh": ("Atanh", 9),
    "erf": ("Erf", 9),
    "floor": ("Floor", 6),
    "ceil": ("Ceil", 6),
    "round": ("Round", 11),
    "sign": ("Sign", 9),
    "sigmoid": ("Sigmoid", 6),
    "relu": ("Relu", 6),
    "softsign": ("Softsign", 1),
    "identity": ("Identity", 1),
    "isnan": ("IsNaN", 9),
    "isinf": ("IsInf", 10),
    "logical_not": ("Not", 1),
    "mish": ("Mish", 18),
    "hardswish": ("HardSwish", 14),
}

BINARY = {
    "add": ("Add", 7),
    "sub": ("Sub", 7),
    "mul": ("Mul", 7),
    "div": ("Div", 7),
    "logical_and": ("And", 7),
    "logical_or": ("Or", 7),
    "logical_xor": ("Xor", 7),
    "prelu": ("PRelu", 9),
    "eq": ("Equal", 11),
    "lt": ("Less", 9),
    "gt": ("Greater", 9),
    "le": ("LessOrEqual", 12),
    "ge": ("GreaterOrEqual", 12),
}


def _simple(onnx_op: str):
    def emit(e: Emit, *xs: Ref) -> Ref:
        return e.op(onnx_op, *xs)

    emit.__name__ = onnx_op
    return emit


for _op, (_onnx, _since) in {**UNARY, **BINARY}.items():
    emitter.register(_op, _since, _simple(_onnx))


@emitter("selu", since=6)
def selu(e: Emit, x: Ref) -> Ref:
    return e.op("Selu", x)  # ONNX's default alpha and gamma are torch's SELU constants


@emitter("gelu", since=20)
def gelu(e: Emit, x: Ref, *, approximate: str) -> Ref:
    return e.op("Gelu", x, approximate=approximate)


@emitter("elu", since=6)
def elu(e: Emit, x: Ref, *, alpha: float) -> Ref:
    return e.op("Elu", x, alpha=alpha)


@emitter("celu", since=12)
def celu(e: Emit, x: Ref, *, alpha: float) -> Ref:
    # Celu-28 also takes float16, bfloat16 and float64; before that float32 only.
    e.require(x.dtype is DType.FLOAT32 or e.opset >= 28, "ONNX Celu takes float32 before 28")
    return e.op("Celu", x, alpha=alpha)


@emitter("leaky_relu", since=6)
def leaky_relu(e: Emit, x: Ref, *, negative_slope: float) -> Ref:
    return e.op("LeakyRelu", x, alpha=negative_slope)


@emitter("hardsigmoid", since=6)
def hardsigmoid(e: Emit, x: Ref, *, alpha: float, beta: float) -> Ref:
    return e.op("HardSigmoid", x, alpha=alpha, beta=beta)


@emitter("hardtanh", since=11)
def hardtanh(e: Emit, x: Ref, *, min: float, max: float) -> Ref:
    return e.op("Clip", x, e.scalar(min, x.dtype), e.scalar(max, x.dtype))


@emitter("hardtanh", since=6)
def hardtanh_6(e: Emit, x: Ref, *, min: float, max: float) -> Ref:
    return e.op("Clip", x, min=min, max=max)


@emitter("softplus", since=1)
def softplus(e: Emit, x: Ref, *, beta: float, threshold: float) -> Ref:
    # ONNX Softplus is log(1 + e^x); above torch's threshold (20 by default) the two differ
    # by less than e^-20 relative, so only beta must match.
    e.require(beta == 1.0 and threshold >= 15.0, "ONNX Softplus has no beta or threshold")
    return e.op("Softplus", x)


@emitter("shrink", since=9)
def shrink(e: Emit, x: Ref, *, bias: float, lambd: float) -> Ref:
    return e.op("Shrink", x, bias=bias, lambd=lambd)


@emitter("hardshrink", since=9)
def hardshrink(e: Emit, x: Ref, *, lambd: float) -> Ref:
    return e.op("Shrink", x, bias=0.0, lambd=lambd)


@emitter("softshrink", since=9)
def softshrink(e: Emit, x: Ref, *, lambd: float) -> Ref:
    return e.op("Shrink", x, bias=lambd, lambd=lambd)


@emitter("thresholded_relu", since=10)
def thresholded_relu(e: Emit, x: Ref, *, alpha: float) -> Ref:
    return e.op("ThresholdedRelu", x, alpha=alpha)


@emitter("bitwise_not", since=1)
def bitwise_not(e: Emit, x: Ref) -> Ref:
    if x.dtype is DType.BOOL:
        return e.op("Not", x)
    e.require(e.opset >= 18, "BitwiseNot needs opset 18")
    return e.op("BitwiseNot", x)


def _bitwise(onnx_op: str, bool_op: str):
    def emit(e: Emit, a: Ref, b: Ref) -> Ref:
        if a.dtype is DType.BOOL:
            return e.op(bool_op, a, b)
        e.require(e.opset >= 18, f"{onnx_op} needs opset 18")
        return e.op(onnx_op, a, b)

    return emit


emitter.register("bitwise_and", 7, _bitwise("BitwiseAnd", "And"))
emitter.register("bitwise_or", 7, _bitwise("BitwiseOr", "Or"))
emitter.register("bitwise_xor", 7, _bitwise("BitwiseXor", "Xor"))


def _minmax(onnx_op: str):
    def emit(e: Emit, a: Ref, b: Ref) -> Ref:
        e.require(a.dtype.is_floating or e.opset >= 12, f"{onnx_op} takes integers from opset 12")
        return e.op(onnx_op, a, b)

    return emit


emitter.register("maximum", 8, _minmax("Max"))
emitter.register("minimum", 8, _minmax("Min"))


@emitter("pow", since=7)
def pow_(e: Emit, a: Ref, b: Ref) -> Ref:
    e.require(a.dtype.is_floating or e.opset >= 12, "Pow takes integers from opset 12")
    return e.op("Pow", a, b)


@emitter("eq", since=7)
def eq_7(e: Emit, a: Ref, b: Ref) -> Ref:
    ok = a.dtype in (DType.BOOL, DType.INT32, DType.INT64)
    e.require(ok, "Equal takes bool, int32 and int64 only before opset 11")
    return e.op("Equal", a, b)


@emitter("le", since=9)
def le_9(e: Emit, a: Ref, b: Ref) -> Ref:
    e.require(e.opset >= 11 or not a.dtype.is_floating, "Equal takes floats from opset 11")
    return e.op("Or", e.op("Less", a, b), e.op("Equal", a, b))


@emitter("ge", since=9)
def ge_9(e: Emit, a: Ref, b: Ref) -> Ref:
    e.require(e.opset >= 11 or not a.dtype.is_floating, "Equal takes floats from opset 11")
    return e.op("Or", e.op("Greater", a, b), e.op("Equal", a, b))


@emitter("fmod", since=10)
def fmod(e: Emit, a: Ref, b: Ref) -> Ref:
    return e.op("Mod", a, b, fmod=1)


@emitter("remainder", since=10)
def remainder(e: Emit, a: Ref, b: Ref) -> Ref:
    if not a.dtype.is_floating:
        return e.op("Mod", a, b, fmod=0)  # integer Mod with fmod=0 takes the divisor's sign
    # Floats: C fmod, then move a non-zero result whose sign differs from b's by b.
    r = e.op("Mod", a, b, fmod=1)
    zero = e.scalar(0, a.dtype)
    differ = e.op("Xor", e.op("Less", r, zero), e.op("Less", b, zero))
    fix = e.op("And", differ, e.op("Not", e.op("Equal", r, zero)))
    return e.op("Where", fix, e.op("Add", r, b), r)


@emitter("bitshift_left", "bitshift_right", since=11)
def bitshift(e: Emit, a: Ref, b: Ref) -> Ref:
    left = e.node.op == "bitshift_left"
    direction = "LEFT" if left else "RIGHT"
    if a.dtype in (DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64):
        return e.op("BitShift", a, b, direction=direction)
    e.require(a.dtype.is_integer and e.opset >= 12, "signed shifts need integer Pow (opset 12)")
    if e.opset >= 28:  # BitShift takes signed integers (arithmetic right shift) from opset 28
        return e.op("BitShift", a, b, direction=direction)
    if a.dtype in (DType.INT8, DType.INT16):
        # Pow takes no 8/16-bit integers: shift in int32, then wrap back to the narrow type.
        wide = e.op("Cast", a, to=ONNX_DTYPE[DType.INT32])
        amount = e.op("Cast", b, to=ONNX_DTYPE[DType.INT32])
        p = e.op("Pow", e.scalar(2, DType.INT32), amount)
        if left:
            return e.op("Cast", e.op("Mul", wide, p), to=ONNX_DTYPE[a.dtype])
        q = e.op("Div", wide, p)
        inexact = e.op("Not", e.op("Equal", e.op("Mul", q, p), wide))
        down = e.op("And", inexact, e.op("Less", wide, e.scalar(0, DType.INT32)))
        r = e.op("Where", down, e.op("Sub", q, e.scalar(1, DType.INT32)), q)
        return e.op("Cast", r, to=ONNX_DTYPE[a.dtype])
    p = e.op("Pow", e.scalar(2, a.dtype), b)
    if left:
        return e.op("Mul", a, p)
    # Arithmetic right shift = floor(a / 2^b); Div truncates, so step down where it rounded up.
    q = e.op("Div", a, p)
    inexact = e.op("Not", e.op("Equal", e.op("Mul", q, p), a))
    down = e.op("And", inexact, e.op("Less", a, e.scalar(0, a.dtype)))
    return e.op("Where", down, e.op("Sub", q, e.scalar(1, a.dtype)), q)


@emitter("where", since=9)
def where(e: Emit, condition: Ref, x: Ref, y: Ref) -> Ref:
    if x.dtype is DType.BOOL:  # onnxruntime has no bool Where kernel: the same in logic ops
        keep = e.op("And", condition, x)
        return e.op("Or", keep, e.op("And", e.op("Not", condition), y))
    return e.op("Where", condition, x, y)


def _is_scalar(v: Ref | None) -> bool:
    return v is None or (v.type is not None and v.type.shape == ())


@emitter("clamp", since=8)
def clamp(e: Emit, x: Ref, min: Ref | None, max: Ref | None) -> Ref:
    if e.opset >= 12 or (e.opset >= 11 and x.dtype.is_floating):
        if _is_scalar(min) and _is_scalar(max):
            return e.op("Clip", x, min, max)
    e.require(x.dtype.is_floating or e.opset >= 12, "Max/Min take integers from opset 12")
    y = x
    if min is not None:
        y = e.op("Max", y, min)
    if max is not None:
        y = e.op("Min", y, max)
    return y if y is not x else e.op("Identity", x)


@emitter("cast", since=9)
def cast(e: Emit, x: Ref, *, to: DType) -> Ref:
    e.require(
        e.opset >= 13 or DType.BFLOAT16 not in (to, x.dtype), "Cast takes bfloat16 from opset 13"
    )
    return e.op("Cast", x, to=ONNX_DTYPE[to])
