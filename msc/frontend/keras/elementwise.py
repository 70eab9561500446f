"""Keras activations and merging layers: Activation, ReLU, Softmax, ..., Add, Multiply, ...,
Rescaling, and the layers that are the identity at inference (Dropout and friends)."""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.errors import Unsupported
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ir import Value


def activation_name(fn: Any) -> str:
    """The registered name of a Keras activation function (``relu``), "" for linear."""
    if fn is None:
        return ""
    from msc.frontend.keras.importer import keras_module

    name = keras_module().activations.serialize(fn)
    if not isinstance(name, str):
        raise Unsupported(f"activation {name!r} is not a built-in one")
    return "" if name == "linear" else name


def activate(ctx: Ctx, x: Value, fn: Any) -> Value:
    """``x`` through a Keras activation (a function or its name)."""
    name = fn if isinstance(fn, str) else activation_name(fn)
    if name in ("", "linear"):
        return x
    simple = {
        "relu": "relu",
        "sigmoid": "sigmoid",
        "tanh": "tanh",
        "silu": "silu",
        "swish": "silu",
        "selu": "selu",
        "softsign": "softsign",
        "exponential": "exp",
        "hard_silu": "hardswish",
        "hard_swish": "hardswish",
    }
    if name in simple:
        return ctx.op(simple[name], x)
    if name == "gelu":  # keras.activations.gelu(x, approximate=False) as a string or function
        return ctx.op("gelu", x, approximate="none")
    if name == "elu":
        return ctx.op("elu", x, alpha=1.0)
    if name == "softplus":
        return ctx.op("softplus", x)
    if name == "relu6":
        return ctx.op("hardtanh", x, min=0.0, max=6.0)
    if name == "hard_sigmoid":
        return ctx.op("hardsigmoid", x, alpha=1.0 / 6.0, beta=0.5)
    if name == "leaky_relu":
        return ctx.op("leaky_relu", x, negative_slope=0.2)
    if name == "softmax":
        return ctx.op("softmax", x, axis=-1)
    if name == "log_softmax":
        return ctx.op("log_softmax", x, axis=-1)
    raise Unsupported(f"activation {name!r}")


@converter("Activation")
def activation(ctx: Ctx, layer, x):
    return activate(ctx, x, layer.activation)


@converter("ReLU")
def relu(ctx: Ctx, layer, x):
    slope = float(layer.negative_slope)
    threshold = float(layer.threshold)
    top = layer.max_value
    if threshold != 0.0:
        raise Unsupported(f"threshold={threshold}")
    if slope != 0.0:
        if top is not None:
            raise Unsupported("negative_slope with max_value")
        return ctx.op("leaky_relu", x, negative_slope=slope)
    if top is None:
        return ctx.op("relu", x)
    return ctx.op("hardtanh", x, min=0.0, max=float(top))


@converter("LeakyReLU")
def leaky_relu(ctx: Ctx, layer, x):
    return ctx.op("leaky_relu", x, negative_slope=float(layer.negative_slope))


@converter("ELU")
def elu(ctx: Ctx, layer, x):
    return ctx.op("elu", x, alpha=float(layer.alpha))


@converter("Softmax")
def softmax(ctx: Ctx, layer, x, mask=None):
    if mask is not None:
        raise Unsupported("a mask")
    axis = layer.axis
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            raise Unsupported(f"softmax over axes {list(axis)}")
        axis = axis[0]
    return ctx.op("softmax", x, axis=int(axis))


def _fold(ctx: Ctx, op: str, xs: tuple[Value, ...]) -> Value:
    if not xs:
        raise Unsupported("no inputs")
    y = xs[0]
    for x in xs[1:]:
        y = ctx.op(op, y, x)
    return y


@converter("Add")
def add(ctx: Ctx, layer, *xs):
    return _fold(ctx, "add", xs)


@converter("Multiply")
def multiply(ctx: Ctx, layer, *xs):
    return _fold(ctx, "mul", xs)


@converter("Maximum")
def maximum(ctx: Ctx, layer, *xs):
    return _fold(ctx, "maximum", xs)


@converter("Minimum")
def minimum(ctx: Ctx, layer, *xs):
    return _fold(ctx, "minimum", xs)


@converter("Subtract")
def subtract(ctx: Ctx, layer, a, b):
    return ctx.op("sub", a, b)


@converter("Average")
def average(ctx: Ctx, layer, *xs):
    s = _fold(ctx, "add", xs)
    return ctx.op("div", s, ctx.f32(len(xs), s))


@converter("Rescaling")
def rescaling(ctx: Ctx, layer, x):
    scale = np.asarray(layer.scale, x.dtype.to_numpy())
    offset = np.asarray(layer.offset, x.dtype.to_numpy())
    y = x if np.all(scale == 1) else ctx.op("mul", x, ctx.f32(scale, x))
    return y if np.all(offset == 0) else ctx.op("add", y, ctx.f32(offset, x))


@converter(
    "Dropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    "GaussianDropout",
    "GaussianNoise",
    "AlphaDropout",
    "ActivityRegularization",
    "Identity",
)
def identity(ctx: Ctx, layer, x):
    """The identity at inference (dropout and noise layers act only in training)."""
    return ctx.op("identity", x)
