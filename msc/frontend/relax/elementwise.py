"""Relax converters of the elementwise family."""

from __future__ import annotations

import math

from msc.frontend.relax.importer import Ctx, converter, to_dtype

_UNARY = {
    "abs": "abs",
    "acos": "acos",
    "acosh": "acosh",
    "asin": "asin",
    "asinh": "asinh",
    "atan": "atan",
    "atanh": "atanh",
    "ceil": "ceil",
    "cos": "cos",
    "cosh": "cosh",
    "erf": "erf",
    "exp": "exp",
    "floor": "floor",
    "log": "log",
    "negative": "neg",
    "nn.relu": "relu",
    "round": "round",
    "rsqrt": "rsqrt",
    "sigmoid": "sigmoid",
    "sign": "sign",
    "sin": "sin",
    "sinh": "sinh",
    "sqrt": "sqrt",
    "tan": "tan",
    "tanh": "tanh",
    "trunc": "trunc",
    "isnan": "isnan",
    "isinf": "isinf",
    "isfinite": "isfinite",
    "logical_not": "logical_not",
    "bitwise_not": "bitwise_not",
    "nn.selu": "selu",
    "nn.silu": "silu",
}


def _unary(op):
    def convert(ctx: Ctx, x, *, attrs=None):
        return ctx.op(op, x)

    return convert


for _name, _op in _UNARY.items():
    converter(f"relax.{_name}")(_unary(_op))

_BINARY = {
    "add": "add",
    "subtract": "sub",
    "multiply": "mul",
    "divide": "div",
    "power": "pow",
    "maximum": "maximum",
    "minimum": "minimum",
    "floor_mod": "remainder",
    "floor_divide": "floor_divide",
    "atan2": "atan2",
    "equal": "eq",
    "not_equal": "ne",
    "less": "lt",
    "less_equal": "le",
    "greater": "gt",
    "greater_equal": "ge",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "left_shift": "bitshift_left",
    "right_shift": "bitshift_right",
}


def _binary(op):
    def convert(ctx: Ctx, a, b, *, attrs=None):
        return ctx.op(op, a, b)

    return convert


for _name, _op in _BINARY.items():
    converter(f"relax.{_name}")(_binary(_op))


@converter("relax.where")
def where(ctx: Ctx, c, x, y, *, attrs=None):
    return ctx.op("where", c, x, y)


@converter("relax.astype")
def astype(ctx: Ctx, x, *, attrs):
    return ctx.op("cast", x, to=to_dtype(attrs.dtype))


@converter("relax.nn.gelu")
def gelu(ctx: Ctx, x, *, attrs=None):
    return ctx.op("gelu", x)


@converter("relax.nn.gelu_tanh")
def gelu_tanh(ctx: Ctx, x, *, attrs=None):
    return ctx.op("gelu", x, approximate="tanh")


@converter("relax.nn.leakyrelu")
def leakyrelu(ctx: Ctx, x, *, attrs):
    return ctx.op("leaky_relu", x, negative_slope=float(attrs.alpha))


@converter("relax.nn.softplus")
def softplus(ctx: Ctx, x, *, attrs):
    return ctx.op("softplus", x, beta=float(attrs.beta), threshold=float(attrs.threshold))


@converter("relax.clip")
def clip(ctx: Ctx, x, lo, hi, *, attrs=None):
    dt = ctx.out_type().dtype
    lo_v = None if math.isinf(float(lo)) else ctx.scalar(lo, dt)
    hi_v = None if math.isinf(float(hi)) else ctx.scalar(hi, dt)
    return ctx.op("clamp", x, lo_v, hi_v)
