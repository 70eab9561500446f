"""Elementwise ops: unary, binary (numpy broadcasting), comparisons, where, clamp, cast.

# NOTE: binary ops take inputs of one dtype; frontends insert ``cast`` where the source
# framework promotes (PyTorch's type promotion, ONNX's none), so every graph states its dtypes.
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, broadcast, same_dtype
from msc.ops.schema import Attr

# name -> doc. Output type equals the input type.
UNARY = {
    "abs": "|x|",
    "neg": "-x",
    "exp": "e^x",
    "exp2": "2^x",
    "log": "natural log",
    "log2": "log base 2",
    "log10": "log base 10",
    "log1p": "log(1 + x)",
    "expm1": "e^x - 1",
    "sqrt": "square root",
    "rsqrt": "1 / sqrt(x)",
    "reciprocal": "1 / x",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "asin": "arcsine",
    "acos": "arccosine",
    "atan": "arctangent",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "tanh": "hyperbolic tangent",
    "asinh": "inverse hyperbolic sine",
    "acosh": "inverse hyperbolic cosine",
    "atanh": "inverse hyperbolic tangent",
    "erf": "error function",
    "erfinv": "inverse error function",
    "floor": "round down",
    "ceil": "round up",
    "round": "round half to even",
    "trunc": "round toward zero",
    "sign": "-1, 0 or 1",
    "sigmoid": "1 / (1 + e^-x)",
    "relu": "max(x, 0)",
    "silu": "x * sigmoid(x)",
    "mish": "x * tanh(softplus(x))",
    "selu": "scaled ELU with the SELU constants",
    "softsign": "x / (1 + |x|)",
    "log_sigmoid": "log(sigmoid(x))",
    "hardswish": "x * relu6(x + 3) / 6",
    "bitwise_not": "bitwise NOT (logical NOT for bool)",
    "identity": "x (a copy; dropout in eval mode lowers to this)",
}

# name -> (attrs, doc)
UNARY_WITH_ATTRS = {
    "gelu": ({"approximate": Attr.str("none", doc="'none' (erf) or 'tanh'")}, "GELU"),
    "elu": ({"alpha": Attr.float(1.0)}, "x if x > 0 else alpha * (e^x - 1)"),
    "celu": ({"alpha": Attr.float(1.0)}, "max(0, x) + min(0, alpha * (e^(x/alpha) - 1))"),
    "leaky_relu": ({"negative_slope": Attr.float(0.01)}, "x if x >= 0 else slope * x"),
    "hardsigmoid": (
        {"alpha": Attr.float(1 / 6), "beta": Attr.float(0.5)},
        "max(0, min(1, alpha * x + beta))",
    ),
    "hardtanh": ({"min": Attr.float(-1.0), "max": Attr.float(1.0)}, "clamp to [min, max]"),
    "softplus": (
        {"beta": Attr.float(1.0), "threshold": Attr.float(20.0)},
        "log(1 + e^(beta x)) / beta, linear above threshold",
    ),
    "hardshrink": ({"lambd": Attr.float(0.5)}, "x if |x| > lambd else 0"),
    "softshrink": ({"lambd": Attr.float(0.5)}, "x - lambd*sign(x) if |x| > lambd else 0"),
    "threshold": (
        {"threshold": Attr.float(), "value": Attr.float()},
        "x if x > threshold else value",
    ),
    "shrink": (
        {"bias": Attr.float(0.0), "lambd": Attr.float(0.5)},
        "ONNX Shrink: x+bias if x < -lambd, x-bias if x > lambd, else 0",
    ),
    "thresholded_relu": ({"alpha": Attr.float(1.0)}, "x if x > alpha else 0"),
}

# Unary ops whose result is bool.
UNARY_PREDICATES = {
    "isnan": "x is NaN",
    "isinf": "x is +-inf",
    "isfinite": "x is finite",
    "logical_not": "not x (bool in, bool out)",
}

# Binary ops with broadcasting; output dtype equals the inputs' dtype.
BINARY = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / b (true division for floats; truncating for integers, as C and ONNX)",
    "floor_divide": "floor(a / b)",
    "pow": "a ** b",
    "maximum": "elementwise max (NaN propagates)",
    "minimum": "elementwise min (NaN propagates)",
    "remainder": "a mod b with the sign of b (Python %, torch.remainder)",
    "fmod": "a mod b with the sign of a (C fmod)",
    "atan2": "atan(a / b) with quadrant",
    "bitwise_and": "a & b",
    "bitwise_or": "a | b",
    "bitwise_xor": "a ^ b",
    "bitshift_left": "a << b",
    "bitshift_right": "a >> b (logical for unsigned)",
    "logical_and": "a and b (bool)",
    "logical_or": "a or b (bool)",
    "logical_xor": "a xor b (bool)",
    "prelu": "a if a >= 0 else b * a (b broadcasts as a slope)",
}

COMPARISONS = {
    "eq": "a == b",
    "ne": "a != b",
    "lt": "a < b",
    "le": "a <= b",
    "gt": "a > b",
    "ge": "a >= b",
}


def _unary(x: TensorType, **_: object) -> TensorType:
    return x


def _predicate(x: TensorType) -> TensorType:
    return TensorType(DType.BOOL, x.shape)


def _binary(a: TensorType, b: TensorType) -> TensorType:
    return TensorType(same_dtype(a, b), broadcast(a, b))


def _compare(a: TensorType, b: TensorType) -> TensorType:
    same_dtype(a, b)
    return TensorType(DType.BOOL, broadcast(a, b))


for _name, _doc in UNARY.items():
    registry.op(_name, ["x"], category="elementwise", doc=_doc)(_unary)
for _name, (_attrs, _doc) in UNARY_WITH_ATTRS.items():
    registry.op(_name, ["x"], _attrs, category="activation", doc=_doc)(_unary)
for _name, _doc in UNARY_PREDICATES.items():
    registry.op(_name, ["x"], category="elementwise", doc=_doc)(_predicate)
for _name, _doc in BINARY.items():
    registry.op(_name, ["a", "b"], category="binary", doc=_doc)(_binary)
for _name, _doc in COMPARISONS.items():
    registry.op(_name, ["a", "b"], category="compare", doc=_doc)(_compare)


@registry.op("where", ["condition", "x", "y"], category="binary")
def where(condition: TensorType, x: TensorType, y: TensorType) -> TensorType:
    """x where condition else y (all three broadcast)."""
    if condition.dtype is not DType.BOOL:
        raise InferError(f"where: condition must be bool, got {condition.dtype.short}")
    return TensorType(same_dtype(x, y), broadcast(condition, x, y))


@registry.op("clamp", ["x", "min?", "max?"], category="elementwise")
def clamp(x: TensorType, min: TensorType | None, max: TensorType | None) -> TensorType:
    """min(max(x, min), max); absent bounds are open. Bounds broadcast against x."""
    same_dtype(x, min, max)
    return TensorType(x.dtype, broadcast(x, min, max))


@registry.op("cast", ["x"], {"to": Attr.dtype()}, category="elementwise")
def cast(x: TensorType, *, to: DType) -> TensorType:
    """Convert to dtype ``to`` (floats to ints truncate toward zero)."""
    return TensorType(to, x.shape)
