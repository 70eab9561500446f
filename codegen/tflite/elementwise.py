"""TFLite emitters for elementwise ops: unary math and activations, binary arithmetic with
broadcasting, comparisons, logical ops, where, cast, clamps."""

from __future__ import annotations

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.dtype import DType
from msc.ir.types import TensorType

UNARY = {
    "abs": "ABS",
    "ceil": "CEIL",
    "cos": "COS",
    "exp": "EXP",
    "floor": "FLOOR",
    "log": "LOG",
    "sigmoid": "LOGISTIC",
    "neg": "NEG",
    "relu": "RELU",
    "round": "ROUND",
    "rsqrt": "RSQRT",
    "sign": "SIGN",
    "sin": "SIN",
    "sqrt": "SQRT",
    "tanh": "TANH",
    "hardswish": "HARD_SWISH",
    "logical_not": "LOGICAL_NOT",
}

BINARY = {
    "add": "ADD",
    "sub": "SUB",
    "mul": "MUL",
    "div": "DIV",
    "pow": "POW",
    "maximum": "MAXIMUM",
    "minimum": "MINIMUM",
    "floor_divide": "FLOOR_DIV",
    "remainder": "FLOOR_MOD",
    "atan2": "ATAN2",
    "logical_and": "LOGICAL_AND",
    "logical_or": "LOGICAL_OR",
    "bitwise_xor": "BITWISE_XOR",
    "bitshift_right": "RIGHT_SHIFT",
    "eq": "EQUAL",
    "ne": "NOT_EQUAL",
    "lt": "LESS",
    "le": "LESS_EQUAL",
    "gt": "GREATER",
    "ge": "GREATER_EQUAL",
    "prelu": "PRELU",
}


def _unary(name: str):
    def emit(e: Emit, x: Ref) -> Ref:
        return e.op(name, [x], e.out_type())

    return emit


for _op, _tfl in UNARY.items():
    emitter(_op)(_unary(_tfl))


# Integer types a kernel lacks: computed in int32 (shape arithmetic stays far below 2**31).
NARROW = {"FLOOR_DIV": {DType.INT64}}


def _binary(name: str):
    def emit(e: Emit, a: Ref, b: Ref) -> Ref:
        t = e.out_type()
        if a.dtype in NARROW.get(name, ()):
            i32 = TensorType(DType.INT32, t.shape)
            return e.cast(
                e.op(name, [e.cast(a, DType.INT32), e.cast(b, DType.INT32)], i32), a.dtype
            )
        return e.op(name, [a, b], t)

    return emit


for _op, _tfl in BINARY.items():
    emitter(_op)(_binary(_tfl))


@emitter("identity")
def identity(e: Emit, x: Ref) -> Ref:
    return x


@emitter("where")
def where(e: Emit, condition: Ref, x: Ref, y: Ref) -> Ref:
    return e.op("SELECT_V2", [condition, x, y], e.out_type())


@emitter("cast")
def cast(e: Emit, x: Ref, *, to: DType) -> Ref:
    if x.dtype is DType.FLOAT16 and to is DType.FLOAT32 and e.const_value(x) is not None:
        return e.op("DEQUANTIZE", [x], e.out_type())  # float16 weights, as converters write
    return e.cast(x, to)


def _clamp(e: Emit, x: Ref, lo: float | None, hi: float | None) -> Ref:
    t = e.out_type()
    if (lo, hi) == (0.0, 6.0):
        return e.op("RELU6", [x], t)
    if (lo, hi) == (-1.0, 1.0):
        return e.op("RELU_N1_TO_1", [x], t)
    if (lo, hi) == (0.0, 1.0):
        return e.op("RELU_0_TO_1", [x], t)
    if lo == 0.0 and hi is None:
        return e.op("RELU", [x], t)
    y = x
    if lo is not None:
        y = e.op("MAXIMUM", [y, e.const(np.asarray(lo, x.dtype.to_numpy()))], t)
    if hi is not None:
        y = e.op("MINIMUM", [y, e.const(np.asarray(hi, x.dtype.to_numpy()))], t)
    return y


@emitter("hardtanh")
def hardtanh(e: Emit, x: Ref, *, min: float, max: float) -> Ref:
    return _clamp(e, x, float(min), float(max))


@emitter("clamp")
def clamp(e: Emit, x: Ref, min: Ref | None = None, max: Ref | None = None) -> Ref:
    lo, hi = e.const_value(min), e.const_value(max)
    if (min is None or lo is not None and lo.size == 1) and (
        max is None or hi is not None and hi.size == 1
    ):
        return _clamp(
            e,
            x,
            None if lo is None else float(lo.reshape(-1)[0]),
            None if hi is None else float(hi.reshape(-1)[0]),
        )
    t = e.out_type()
    y = x if min is None else e.op("MAXIMUM", [x, min], t)
    return y if max is None else e.op("MINIMUM", [y, max], t)


@emitter("leaky_relu")
def leaky_relu(e: Emit, x: Ref, *, negative_slope: float) -> Ref:
    return e.op("LEAKY_RELU", [x], e.out_type(), alpha=float(negative_slope))


@emitter("gelu")
def gelu(e: Emit, x: Ref, *, approximate: str) -> Ref:
    return e.op("GELU", [x], e.out_type(), approximate=approximate == "tanh")


@emitter("elu")
def elu(e: Emit, x: Ref, *, alpha: float) -> Ref:
    e.require(alpha == 1.0, f"ELU with alpha {alpha} (TFLite's is 1)")
    return e.op("ELU", [x], e.out_type())


@emitter("full_like")
def full_like(e: Emit, x: Ref, *, value: float, dtype: DType | None) -> Ref:
    t = e.out_type()
    if value == 0.0 and (dtype is None or dtype is x.dtype):
        return e.op("ZEROS_LIKE", [x], t)
    shape = e.op("SHAPE", [x], TensorType(DType.INT32, [x.rank]), out_type=2)
    return e.op("FILL", [shape, e.const(np.asarray(value, t.dtype.to_numpy()))], t)
