"""TFLite elementwise ops: unary math, activations, binary arithmetic with broadcasting,
comparisons, logical ops, select, cast."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.tflite.importer import DTYPES, Ctx, complex_part, is_complex
from msc.frontend.tflite.registry import converter, not_read

# TFLite op -> canonical unary op.
UNARY = {
    "ABS": "abs",
    "CEIL": "ceil",
    "COS": "cos",
    "EXP": "exp",
    "FLOOR": "floor",
    "LOG": "log",
    "LOGISTIC": "sigmoid",
    "NEG": "neg",
    "RELU": "relu",
    "ROUND": "round",
    "RSQRT": "rsqrt",
    "SIGN": "sign",
    "SIN": "sin",
    "SQRT": "sqrt",
    "TANH": "tanh",
    "HARD_SWISH": "hardswish",
    "LOGICAL_NOT": "logical_not",
}

BINARY = {
    "ADD": "add",
    "SUB": "sub",
    "MUL": "mul",
    "DIV": "div",
    "POW": "pow",
    "MAXIMUM": "maximum",
    "MINIMUM": "minimum",
    "FLOOR_DIV": "floor_divide",
    "FLOOR_MOD": "remainder",
    "SQUARED_DIFFERENCE": None,
    "ATAN2": "atan2",
    "LOGICAL_AND": "logical_and",
    "LOGICAL_OR": "logical_or",
    "BITWISE_XOR": "bitwise_xor",
    "RIGHT_SHIFT": "bitshift_right",
    "EQUAL": "eq",
    "NOT_EQUAL": "ne",
    "LESS": "lt",
    "LESS_EQUAL": "le",
    "GREATER": "gt",
    "GREATER_EQUAL": "ge",
}


def _unary(op: str):
    def convert(ctx: Ctx, x):
        return ctx.op(op, ctx.value(x))

    return convert


for _tfl, _op in UNARY.items():
    converter(_tfl)(_unary(_op))


def _binary(op: str):
    def convert(ctx: Ctx, a, b):
        return ctx.op(op, ctx.value(a), ctx.value(b))

    return convert


for _tfl, _op in BINARY.items():
    if _op is not None:
        converter(_tfl)(_binary(_op))


@converter("SQUARED_DIFFERENCE")
def squared_difference(ctx: Ctx, a, b):
    d = ctx.op("sub", ctx.value(a), ctx.value(b))
    return ctx.op("mul", d, d)


@converter("SQUARE")
def square(ctx: Ctx, x):
    v = ctx.value(x)
    return ctx.op("mul", v, v)


@converter("RELU6")
def relu6(ctx: Ctx, x):
    return ctx.op("hardtanh", ctx.value(x), min=0.0, max=6.0)


@converter("RELU_N1_TO_1")
def relu_n1_to_1(ctx: Ctx, x):
    return ctx.op("hardtanh", ctx.value(x), min=-1.0, max=1.0)


@converter("RELU_0_TO_1")
def relu_0_to_1(ctx: Ctx, x):
    return ctx.op("hardtanh", ctx.value(x), min=0.0, max=1.0)


@converter("LEAKY_RELU")
def leaky_relu(ctx: Ctx, x, *, alpha=0.0):
    return ctx.op("leaky_relu", ctx.value(x), negative_slope=float(alpha))


@converter("ELU")
def elu(ctx: Ctx, x):
    return ctx.op("elu", ctx.value(x), alpha=1.0)


@converter("GELU")
def gelu(ctx: Ctx, x, *, approximate=False):
    return ctx.op("gelu", ctx.value(x), approximate="tanh" if approximate else "none")


@converter("PRELU")
def prelu(ctx: Ctx, x, alpha):
    return ctx.op("prelu", ctx.value(x), ctx.value(alpha))


@converter("SELECT", "SELECT_V2")
def select(ctx: Ctx, cond, x, y):
    return ctx.op("where", ctx.value(cond), ctx.value(x), ctx.value(y))


@converter("CAST")
def cast(ctx: Ctx, x, *, in_data_type=0, out_data_type=0):
    to = ctx.out_type().dtype
    if out_data_type and DTYPES.get(out_data_type) not in (None, to):
        raise Unsupported("CAST's out_data_type differs from its output tensor's type")
    if is_complex(x):  # to a real type: the real part, as TensorFlow's cast
        if is_complex(ctx.out()):
            raise Unsupported("a CAST between complex types")
        return ctx.op("cast", complex_part(ctx, ctx.value(x), 0), to=to)
    return ctx.op("cast", ctx.value(x), to=to)


@converter("ADD_N")
def add_n(ctx: Ctx, *xs):
    acc = ctx.value(xs[0])
    for x in xs[1:]:
        acc = ctx.op("add", acc, ctx.value(x))
    return acc


@converter("ZEROS_LIKE")
def zeros_like(ctx: Ctx, x):
    return ctx.op("full_like", ctx.value(x), value=0.0)


@converter("ONES_LIKE")
def ones_like(ctx: Ctx, x):
    return ctx.op("full_like", ctx.value(x), value=1.0)


not_read("a bit view between types of different widths has no canonical op", "BITCAST")
