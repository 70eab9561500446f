"""Keras emitters of elementwise ops: activations as ``layers.Activation`` (or their own
layer), binary ops as merging layers when both operands are tensors of one shape, else
``keras.ops``."""

from __future__ import annotations

from codegen.keras.model import Emit
from codegen.keras.registry import emitter
from msc.errors import Unsupported

# canonical op -> the Keras activation of the same function
_ACTIVATIONS = {
    "relu": "relu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "silu": "silu",
    "selu": "selu",
    "softsign": "softsign",
    "exp": "exponential",
    "hardswish": "hard_silu",
}


@emitter(*_ACTIVATIONS)
def activation(e: Emit, node):
    return f"{e.layer('Activation', _ACTIVATIONS[node.op])}({e.arg(0)})"


@emitter("gelu")
def gelu(e: Emit, node):
    if node.attrs.get("approximate", "none") == "none":
        return f"{e.layer('Activation', 'gelu')}({e.arg(0)})"
    return f"ops.gelu({e.arg(0)}, approximate=True)"


@emitter("softplus")
def softplus(e: Emit, node):
    if float(node.attrs.get("beta", 1.0)) != 1.0:
        raise Unsupported("beta other than 1")
    return f"{e.layer('Activation', 'softplus')}({e.arg(0)})"


@emitter("elu")
def elu(e: Emit, node):
    return f"{e.layer('ELU', alpha=float(node.attrs.get('alpha', 1.0)))}({e.arg(0)})"


@emitter("leaky_relu")
def leaky_relu(e: Emit, node):
    slope = float(node.attrs.get("negative_slope", 0.01))
    return f"{e.layer('LeakyReLU', negative_slope=slope)}({e.arg(0)})"


@emitter("hardsigmoid")
def hardsigmoid(e: Emit, node):
    alpha, beta = float(node.attrs.get("alpha", 1 / 6)), float(node.attrs.get("beta", 0.5))
    if abs(alpha - 1 / 6) < 1e-12 and beta == 0.5:
        return f"{e.layer('Activation', 'hard_sigmoid')}({e.arg(0)})"
    return f"ops.clip({e.arg(0)} * {alpha!r} + {beta!r}, 0.0, 1.0)"


@emitter("hardtanh")
def hardtanh(e: Emit, node):
    lo, hi = float(node.attrs.get("min", -1.0)), float(node.attrs.get("max", 1.0))
    if lo == 0.0:
        return f"{e.layer('ReLU', max_value=hi)}({e.arg(0)})"
    return f"ops.clip({e.arg(0)}, {lo!r}, {hi!r})"


@emitter("clamp")
def clamp(e: Emit, node):
    lo = e.const(1) if e.has(1) else None
    hi = e.const(2) if e.has(2) else None
    if (e.has(1) and lo is None) or (e.has(2) and hi is None):
        raise Unsupported("bounds computed at run time")
    if lo is not None and lo.size == 1 and float(lo) == 0.0 and (hi is None or hi.size == 1):
        top = None if hi is None else float(hi)
        return f"{e.layer('ReLU', max_value=top)}({e.arg(0)})"
    if lo is None:
        return f"ops.minimum({e.arg(0)}, {e.arg(2)})"
    if hi is None:
        return f"ops.maximum({e.arg(0)}, {e.arg(1)})"
    return f"ops.clip({e.arg(0)}, {e.arg(1)}, {e.arg(2)})"


@emitter("identity")
def identity(e: Emit, node):
    return f"{e.layer('Identity')}({e.arg(0)})"


_MERGE = {
    "add": "Add",
    "sub": "Subtract",
    "mul": "Multiply",
    "maximum": "Maximum",
    "minimum": "Minimum",
}
_OPS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "maximum": "maximum",
    "minimum": "minimum",
    "div": "divide",
    "pow": "power",
    "atan2": "arctan2",
}


@emitter(*_OPS)
def binary(e: Emit, node):
    a, b = e.arg(0), e.arg(1)
    same = e.type(0).shape == e.type(1).shape and e.const(0) is None and e.const(1) is None
    # Keras' merging layers type their output with the layer's float dtype policy
    if node.op in _MERGE and same and e.type(0).dtype.is_floating:
        return f"{e.layer(_MERGE[node.op])}([{a}, {b}])"
    return f"ops.{_OPS[node.op]}({a}, {b})"


_UNARY_OPS = {
    "abs": "abs",
    "neg": "negative",
    "sqrt": "sqrt",
    "log": "log",
    "erf": "erf",
    "floor": "floor",
    "ceil": "ceil",
    "sin": "sin",
    "cos": "cos",
    "reciprocal": "reciprocal",
    "rsqrt": "rsqrt",
    "isnan": "isnan",
}


@emitter(*_UNARY_OPS)
def unary(e: Emit, node):
    return f"ops.{_UNARY_OPS[node.op]}({e.arg(0)})"


@emitter("cast")
def cast(e: Emit, node):
    return f"ops.cast({e.arg(0)}, {node.attrs['to'].to_numpy().name!r})"


_COMPARE = {
    "eq": "equal",
    "ne": "not_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "lt": "less",
    "le": "less_equal",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
}


@emitter(*_COMPARE)
def compare(e: Emit, node):
    return f"ops.{_COMPARE[node.op]}({e.arg(0)}, {e.arg(1)})"


@emitter("logical_not")
def logical_not(e: Emit, node):
    return f"ops.logical_not({e.arg(0)})"


@emitter("where")
def where(e: Emit, node):
    return f"ops.where({e.arg(0)}, {e.arg(1)}, {e.arg(2)})"


@emitter("prelu")
def prelu(e: Emit, node):
    """``layers.PReLU`` when the slope is a weight of Keras' own shape (the input's dims after
    the batch, 1 on shared axes), else ``where(x >= 0, x, slope * x)``."""
    t = e.type(0)
    slope = e.const(1)
    dims = list(t.shape[1:])
    if slope is not None and slope.ndim == len(dims) and all(isinstance(d, int) for d in dims):
        shared = [i + 1 for i, (s, d) in enumerate(zip(slope.shape, dims)) if s == 1 and d != 1]
        if all(s in (1, d) for s, d in zip(slope.shape, dims)):
            kw = {"shared_axes": shared} if shared else {}
            return f"{e.layer('PReLU', weights=[slope], **kw)}({e.arg(0)})"
    x = e.arg(0)
    return f"ops.where(ops.greater_equal({x}, 0), {x}, ops.multiply({e.arg(1)}, {x}))"
