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


def clamp(ctx: Ctx, x: Value, lo: float, hi: float) -> Value:
    """``x`` clipped to [lo, hi] (the bounds as constants of x's dtype, as ONNX's Clip)."""
    return ctx.op("clamp", x, ctx.f32(lo, x), ctx.f32(hi, x))


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
        return clamp(ctx, x, 0.0, 6.0)
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
    return clamp(ctx, x, 0.0, float(top))


@converter("LeakyReLU")
def leaky_relu(ctx: Ctx, layer, x):
    return ctx.op("leaky_relu", x, negative_slope=float(layer.negative_slope))


@converter("ELU")
def elu(ctx: Ctx, layer, x):
    return ctx.op("elu", x, alpha=float(layer.alpha))


@converter("Softmax")
def softmax(ctx: Ctx, layer, x, mask=None):
    if mask is not None:  # Keras: masked positions (False, or <= 0.5) become -1e9
        from msc.ir import DType

        if mask.dtype is not DType.BOOL:
            mask = ctx.op("gt", mask, ctx.f32(0.5, mask))
        big = -3e4 if x.dtype is DType.FLOAT16 else -1e9
        x = ctx.op("where", mask, x, ctx.f32(big, x))
    axis = layer.axis
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            raise Unsupported(f"softmax over axes {list(axis)}")
        axis = axis[0]
    y = ctx.op("softmax", x, axis=int(axis))
    if mask is not None:  # Keras zeroes the masked positions (a row masked whole gives zeros)
        y = ctx.op("where", mask, y, ctx.f32(0.0, y))
    return y


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


@converter("Masking")
def masking(ctx: Ctx, layer, x):
    """Steps whose every feature equals ``mask_value`` become zeros (the mask itself is
    recorded by Keras as the graph's own any(not_equal) nodes)."""
    keep = ctx.op("ne", x, ctx.f32(float(layer.mask_value), x))
    keep = ctx.op("reduce_any", keep, axes=[-1], keepdims=True)
    return ctx.op("where", keep, x, ctx.f32(0.0, x))


@converter("PReLU")
def prelu(ctx: Ctx, layer, x):
    return ctx.op("prelu", x, ctx.weight(layer.alpha))


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
    """The identity at inference (dropout and noise layers act only in training): the
    layer's output is its input, no node."""
    return x


# ---------------------------------------------------------------- keras.ops calls
def operand(ctx: Ctx, a, like: Value) -> Value:
    """A keras.ops operand: a graph value, or a Python / numpy constant (as ``like``'s dtype,
    Keras' promotion of a weak scalar)."""
    if isinstance(a, Value):
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "f" or np.asarray(a).ndim == 0:
        arr = arr.astype(like.dtype.to_numpy())
    from msc.ir import DType

    return ctx.const(arr, DType.from_numpy(arr.dtype))


_BINARY_OPS = {
    "ops.Add": "add",
    "ops.Subtract": "sub",
    "ops.Multiply": "mul",
    "ops.Divide": "div",
    "ops.TrueDivide": "div",
    "ops.Maximum": "maximum",
    "ops.Minimum": "minimum",
    "ops.Power": "pow",
    "ops.Arctan2": "atan2",
    "ops.Mod": "remainder",
}


# comparisons and logic: what Keras' compute_mask functions record (Embedding's
# ``not_equal(ids, 0)``, Masking's ``any(not_equal(x, value), axis=-1)``, merged masks)
_BINARY_OPS.update(
    {
        "ops.Equal": "eq",
        "ops.NotEqual": "ne",
        "ops.Greater": "gt",
        "ops.GreaterEqual": "ge",
        "ops.Less": "lt",
        "ops.LessEqual": "le",
        "ops.LogicalAnd": "logical_and",
        "ops.LogicalOr": "logical_or",
    }
)


@converter(*_BINARY_OPS)
def binary_op(ctx: Ctx, op, a, b):
    like = a if isinstance(a, Value) else b
    if not isinstance(like, Value):
        raise Unsupported("no tensor operand")
    name = _BINARY_OPS[f"ops.{type(op).__name__}"]
    return ctx.op(name, operand(ctx, a, like), operand(ctx, b, like))


_UNARY_OPS = {
    "ops.Abs": "abs",
    "ops.Negative": "neg",
    "ops.Sqrt": "sqrt",
    "ops.Log": "log",
    "ops.Exp": "exp",
    "ops.Erf": "erf",
    "ops.Floor": "floor",
    "ops.Ceil": "ceil",
    "ops.Sin": "sin",
    "ops.Cos": "cos",
    "ops.Reciprocal": "reciprocal",
    "ops.Rsqrt": "rsqrt",
    "ops.Tanh": "tanh",
    "ops.Sigmoid": "sigmoid",
    "ops.Relu": "relu",
    "ops.LogicalNot": "logical_not",
    "ops.Isnan": "isnan",
}


@converter(*_UNARY_OPS)
def unary_op(ctx: Ctx, op, x):
    return ctx.op(_UNARY_OPS[f"ops.{type(op).__name__}"], x)


@converter("ops.Where")
def where_op(ctx: Ctx, op, condition, x=None, y=None):
    if x is None or y is None:
        raise Unsupported("where(condition) alone (the indices of its true elements)")
    like = x if isinstance(x, Value) else y
    if not isinstance(like, Value):  # two constants: each keeps its own dtype
        from msc.ir import DType

        x, y = (np.asarray(a) for a in (x, y))
        return ctx.op(
            "where",
            condition,
            ctx.const(x, DType.from_numpy(x.dtype)),
            ctx.const(y, DType.from_numpy(y.dtype)),
        )
    return ctx.op("where", condition, operand(ctx, x, like), operand(ctx, y, like))


@converter("ops.Clip")
def clip_op(ctx: Ctx, op, x):
    return ctx.op("clamp", x, operand(ctx, op.x_min, x), operand(ctx, op.x_max, x))


@converter("ops.Gelu")
def gelu_op(ctx: Ctx, op, x):
    return ctx.op("gelu", x, approximate="tanh" if op.approximate else "none")


@converter("ops.LogSoftmax")
def log_softmax_op(ctx: Ctx, op, x):
    return ctx.op("log_softmax", x, axis=int(op.axis))


@converter("ops.Softmax")
def softmax_op(ctx: Ctx, op, x):
    return ctx.op("softmax", x, axis=int(op.axis))


@converter("ops.Cast")
def cast_op(ctx: Ctx, op, x):
    from msc.frontend.keras.importer import DTYPES

    dt = DTYPES.get(str(op.dtype))
    if dt is None:
        raise Unsupported(f"cast to {op.dtype}")
    return ctx.cast(x, dt)


@converter("Normalization")
def normalization(ctx: Ctx, layer, x):
    """(x - mean) / sqrt(variance), the adapted (or given) statistics as constants;
    ``invert=True`` undoes it."""
    mean = np.asarray(keras_array(layer.mean), x.dtype.to_numpy())
    var = np.asarray(keras_array(layer.variance), x.dtype.to_numpy())
    std = np.maximum(np.sqrt(var), np.asarray(1e-7, var.dtype))  # Keras' epsilon floor
    if getattr(layer, "invert", False):
        return ctx.op("add", ctx.op("mul", x, ctx.f32(std, x)), ctx.f32(mean, x))
    return ctx.op("div", ctx.op("sub", x, ctx.f32(mean, x)), ctx.f32(std, x))


def keras_array(v) -> np.ndarray:
    from msc.frontend.keras.importer import to_numpy

    return v if isinstance(v, np.ndarray) else to_numpy(v)


@converter("LayerScale")
def layer_scale(ctx: Ctx, layer, x):
    """keras.applications.convnext's LayerScale: x * gamma."""
    return ctx.op("mul", x, ctx.weight(layer.gamma))


@converter("SourceWeight")
def source_weight(ctx: Ctx, layer, x):
    """codegen.keras' SourceWeight (a weight used as an operand): its value."""
    value = getattr(layer, "value", None)
    if value is None or len(layer.weights) != 1:
        raise Unsupported("a SourceWeight layer other than codegen.keras writes")
    return ctx.weight(value)
