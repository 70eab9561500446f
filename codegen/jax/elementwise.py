"""JAX emitters of elementwise ops: unary math, activations, binary arithmetic, compare,
where, cast, clamp, constants."""

from __future__ import annotations

import math

from codegen.jax.core import Held, JaxCodegen, _scalar, dtype_expr, literal
from codegen.jax.registry import emitter, spelled_out
from msc.ir import DType

UNARY = {
    "abs": "jnp.abs",
    "acos": "jnp.arccos",
    "acosh": "jnp.arccosh",
    "asin": "jnp.arcsin",
    "asinh": "jnp.arcsinh",
    "atan": "jnp.arctan",
    "atanh": "jnp.arctanh",
    "ceil": "jnp.ceil",
    "cos": "jnp.cos",
    "cosh": "jnp.cosh",
    "erf": "jax.scipy.special.erf",
    "erfinv": "jax.scipy.special.erfinv",
    "exp": "jnp.exp",
    "exp2": "jnp.exp2",
    "expm1": "jnp.expm1",
    "floor": "jnp.floor",
    "isfinite": "jnp.isfinite",
    "isinf": "jnp.isinf",
    "isnan": "jnp.isnan",
    "log": "jnp.log",
    "log10": "jnp.log10",
    "log1p": "jnp.log1p",
    "log2": "jnp.log2",
    "log_sigmoid": "jax.nn.log_sigmoid",
    "logical_not": "jnp.logical_not",
    "bitwise_not": "jnp.invert",
    "neg": "jnp.negative",
    "reciprocal": "jnp.reciprocal",
    "relu": "jax.nn.relu",
    "round": "jnp.round",
    "rsqrt": "lax.rsqrt",
    "selu": "jax.nn.selu",
    "sigmoid": "jax.nn.sigmoid",
    "sign": "jnp.sign",
    "silu": "jax.nn.silu",
    "sin": "jnp.sin",
    "sinh": "jnp.sinh",
    "softsign": "jax.nn.soft_sign",
    "sqrt": "jnp.sqrt",
    "tan": "jnp.tan",
    "tanh": "jnp.tanh",
    "trunc": "jnp.trunc",
    "identity": "",
    "lgamma": "jax.scipy.special.gammaln",
    "digamma": "jax.scipy.special.digamma",
    "hardswish": "jax.nn.hard_swish",
}
BINARY = {
    "add": "{} + {}",
    "sub": "{} - {}",
    "mul": "{} * {}",
    "pow": "jnp.power({}, {})",
    "maximum": "jnp.maximum({}, {})",
    "minimum": "jnp.minimum({}, {})",
    "floor_divide": "jnp.floor_divide({}, {})",
    "remainder": "jnp.remainder({}, {})",
    "fmod": "lax.rem({}, {})",  # C fmod (the sign of a); jnp.fmod adds a zero guard to ints
    "atan2": "jnp.arctan2({}, {})",
    "logical_and": "jnp.logical_and({}, {})",
    "logical_or": "jnp.logical_or({}, {})",
    "logical_xor": "jnp.logical_xor({}, {})",
    "bitwise_and": "jnp.bitwise_and({}, {})",
    "bitwise_or": "jnp.bitwise_or({}, {})",
    "bitwise_xor": "jnp.bitwise_xor({}, {})",
    "bitshift_left": "jnp.left_shift({}, {})",
    "bitshift_right": "jnp.right_shift({}, {})",  # arithmetic for signed, logical for unsigned
    "eq": "{} == {}",
    "ne": "{} != {}",
    "lt": "{} < {}",
    "le": "{} <= {}",
    "gt": "{} > {}",
    "ge": "{} >= {}",
}


def _unary(fn: str):
    def emit(e: JaxCodegen, node, x):
        return x if not fn else f"{fn}({x})"

    return emit


for _op, _fn in UNARY.items():
    emitter(_op)(_unary(_fn))


# Integer arithmetic on sizes, in Python (sizes are Python ints under jax.jit).
SIZE_BINARY = {
    "add": "{} + {}",
    "sub": "{} - {}",
    "mul": "{} * {}",
    "floor_divide": "{} // {}",
    "remainder": "{} % {}",
    "maximum": "max({}, {})",
    "minimum": "min({}, {})",
}


def _on_sizes(e: JaxCodegen, node, fmt: str) -> Held:
    """``fmt`` over two sizes: one named value for scalars, else each element (broadcast)."""
    a, b = (e.size(v) for v in node.inputs)
    if not isinstance(a, list) and not isinstance(b, list):
        return Held(fmt.format(a, b), bind=True)
    n = len(a) if isinstance(a, list) else len(b)  # type: ignore[arg-type]
    a, b = (v if isinstance(v, list) else [v] * n for v in (a, b))
    a, b = (v * n if len(v) == 1 else v for v in (a, b))
    return Held([f"({fmt.format(x, y)})" for x, y in zip(a, b)])


def _binary(op: str, fmt: str):
    def emit(e: JaxCodegen, node, a, b):
        if op in SIZE_BINARY and e.on_sizes(node):
            return _on_sizes(e, node, SIZE_BINARY[op])
        # a size next to an array: its Python int (JAX keeps the array's dtype)
        x, y = node.inputs
        if x in e.held and x.type.rank == 0 and y.type.dtype == x.type.dtype:
            a = e.py(x)
        if y in e.held and y.type.rank == 0 and y.type.dtype == x.type.dtype:
            b = e.py(y)
        return fmt.format(a, b)

    return emit


for _op, _fmt in BINARY.items():
    emitter(_op)(_binary(_op, _fmt))


@emitter("div")
def div(e: JaxCodegen, node, a, b):
    if node.outputs[0].dtype.is_floating:
        return f"{a} / {b}"
    return f"lax.div({a}, {b})"  # truncating, as C and ONNX


@emitter("where")
def where(e: JaxCodegen, node, c, x, y):
    return f"jnp.where({c}, {x}, {y})"


@emitter("cast")
def cast(e: JaxCodegen, node, x):
    if e.on_sizes(node) and node.inputs[0].type.dtype.is_integer:
        return Held(e.size(node.inputs[0]))  # type: ignore[arg-type]
    return f"{x}.astype({dtype_expr(node.attrs['to'])})"


@emitter("bitcast")
def bitcast(e: JaxCodegen, node, x):
    """The same bits read as another type of one width (msc's bitcast keeps the width)."""
    return f"lax.bitcast_convert_type({x}, {dtype_expr(node.attrs['to'])})"


@emitter("clamp")
def clamp(e: JaxCodegen, node, x, lo=None, hi=None):
    # lax.clamp (one stablehlo.clamp) where its bounds need no broadcast: scalars or x's shape
    shape = node.inputs[0].type.shape
    if lo is not None and hi is not None and node.outputs[0].type.shape == shape:
        if all(v.type.shape in ((), shape) for v in node.inputs[1:]):
            return f"lax.clamp({lo}, {x}, {hi})"
    return f"jnp.clip({x}, {lo}, {hi})"


@emitter("hardtanh")
@spelled_out
def hardtanh(e: JaxCodegen, node, x):
    return f"lax.clamp({_scalar(node.attrs['min'])}, {x}, {_scalar(node.attrs['max'])})"


@emitter("leaky_relu")
def leaky_relu(e: JaxCodegen, node, x):
    return f"jax.nn.leaky_relu({x}, {_scalar(node.attrs['negative_slope'])})"


@emitter("elu")
def elu(e: JaxCodegen, node, x):
    return f"jax.nn.elu({x}, {_scalar(node.attrs['alpha'])})"


@emitter("gelu")
def gelu(e: JaxCodegen, node, x):
    if node.attrs.get("approximate", "none") == "tanh":
        return f"jax.nn.gelu({x}, approximate=True)"
    # exact GELU as its definition: lax.erf stays one op (chlo.erf) in JAX's export, where
    # jax.nn.gelu(approximate=False) is exported as erfc's polynomial
    return f"{x} * 0.5 * (1.0 + lax.erf({x} * {1 / math.sqrt(2)!r}))"


def _softplus(x: str, beta: float = 1.0, threshold: float = 20.0) -> str:
    """PyTorch's softplus as its definition (msc.ops.decompose's spelling): log(1 + e^(beta
    x)) / beta, x itself above the threshold, where e^(beta x) cannot overflow."""
    bx = x if beta == 1.0 else f"({x} * {_scalar(beta)})"
    soft = f"jnp.log(jnp.exp({bx}) + 1.0)"
    if beta != 1.0:
        soft = f"{soft} / {_scalar(beta)}"
    return f"jnp.where({bx} > {_scalar(threshold)}, {x}, {soft})"


@emitter("softplus")
@spelled_out
def softplus(e: JaxCodegen, node, x):
    return _softplus(x, float(node.attrs["beta"]), float(node.attrs["threshold"]))


@emitter("mish")
@spelled_out
def mish(e: JaxCodegen, node, x):
    return f"{x} * jnp.tanh({_softplus(x)})"


@emitter("hardsigmoid")
def hardsigmoid(e: JaxCodegen, node, x):
    a, b = _scalar(node.attrs["alpha"]), _scalar(node.attrs["beta"])
    return f"jnp.clip({x} * {a} + {b}, 0.0, 1.0)"


@emitter("constant")
def constant(e: JaxCodegen, node):
    value = node.attrs["value"]
    arr = value.numpy() if hasattr(value, "numpy") else value
    if arr.ndim == 0 and arr.dtype != bool:
        dt = DType.from_numpy(arr.dtype)
        return f"jnp.asarray({_scalar(arr.item(), arr.dtype)}, dtype={dtype_expr(dt)})"
    return literal(arr)
