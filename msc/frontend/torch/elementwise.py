"""Converters for elementwise ATen ops: unary math, activations, binary arithmetic,
comparisons, logical and bitwise ops, where, clamp, casts.

# NOTE: PyTorch's type promotion is made explicit: operands are cast to the dtype torch computes
# in (``ctx.promote``) and Python scalars become constants of that dtype, so every binary node
# sees one dtype and the node's output dtype is what torch returns.
"""

from __future__ import annotations

import math
from typing import Any

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Value

# aten name -> (canonical op, promotion kind). int_to_float: integer inputs compute in float.
UNARY = {
    "abs": ("abs", "default"),
    "neg": ("neg", "default"),
    "exp": ("exp", "int_to_float"),
    "exp2": ("exp2", "int_to_float"),
    "expm1": ("expm1", "int_to_float"),
    "log": ("log", "int_to_float"),
    "log2": ("log2", "int_to_float"),
    "log10": ("log10", "int_to_float"),
    "log1p": ("log1p", "int_to_float"),
    "sqrt": ("sqrt", "int_to_float"),
    "rsqrt": ("rsqrt", "int_to_float"),
    "reciprocal": ("reciprocal", "int_to_float"),
    "sin": ("sin", "int_to_float"),
    "cos": ("cos", "int_to_float"),
    "tan": ("tan", "int_to_float"),
    "asin": ("asin", "int_to_float"),
    "acos": ("acos", "int_to_float"),
    "atan": ("atan", "int_to_float"),
    "sinh": ("sinh", "int_to_float"),
    "cosh": ("cosh", "int_to_float"),
    "tanh": ("tanh", "int_to_float"),
    "asinh": ("asinh", "int_to_float"),
    "acosh": ("acosh", "int_to_float"),
    "atanh": ("atanh", "int_to_float"),
    "erf": ("erf", "int_to_float"),
    "erfinv": ("erfinv", "int_to_float"),
    "sigmoid": ("sigmoid", "int_to_float"),
    "floor": ("floor", "default"),
    "ceil": ("ceil", "default"),
    "trunc": ("trunc", "default"),
    "fix": ("trunc", "default"),
    "sign": ("sign", "default"),
    "relu": ("relu", "default"),
    "silu": ("silu", "default"),
    "mish": ("mish", "default"),
    "selu": ("selu", "default"),
    "hardswish": ("hardswish", "default"),
    "log_sigmoid": ("log_sigmoid", "default"),
    "bitwise_not": ("bitwise_not", "default"),
}


def _unary(canonical: str, kind: str):
    def convert(ctx: Ctx, self: Value, **_: Any) -> Value:
        if canonical in ("floor", "ceil", "trunc", "round") and not self.dtype.is_floating:
            return self  # integer rounding is the identity (torch returns the input dtype)
        (x,) = ctx.promote(self, kind=kind)
        return ctx.op(canonical, x)

    return convert


for _name, (_canonical, _kind) in UNARY.items():
    converter(f"aten.{_name}.default")(_unary(_canonical, _kind))


@converter("aten.round.default")
def round_(ctx: Ctx, self: Value) -> Value:
    return self if not self.dtype.is_floating else ctx.op("round", self)


@converter("aten.round.decimals")
def round_decimals(ctx: Ctx, self: Value, *, decimals: int = 0) -> Value:
    if decimals == 0:
        return round_(ctx, self)
    # As torch's kernel: x * 10^d / 10^d, or x / 10^-d * 10^-d for negative d. One constant
    # per use (not shared), as the traced form of the same arithmetic has.
    scale = 10.0 ** abs(decimals)
    first, then = ("mul", "div") if decimals > 0 else ("div", "mul")
    r = ctx.op("round", ctx.op(first, self, ctx.const(scale, self.dtype)))
    return ctx.op(then, r, ctx.const(scale, self.dtype))


def _predicate(op: str):
    def convert(ctx: Ctx, self: Value) -> Value:
        if not self.dtype.is_floating:
            value = 1.0 if op == "isfinite" else 0.0
            return ctx.op("full_like", self, value=value, dtype=DType.BOOL)
        return ctx.op(op, self)

    return convert


for _p in ("isnan", "isinf", "isfinite"):
    converter(f"aten.{_p}.default")(_predicate(_p))


def _signed_inf(sign: float):
    def convert(ctx: Ctx, self: Value) -> Value:
        if not self.dtype.is_floating:
            return ctx.op("full_like", self, value=0.0, dtype=DType.BOOL)
        return ctx.op("eq", self, ctx.const(sign * math.inf, self.dtype))

    return convert


converter("aten.isposinf.default")(_signed_inf(1.0))
converter("aten.isneginf.default")(_signed_inf(-1.0))


@converter("aten.logical_not.default")
def logical_not(ctx: Ctx, self: Value) -> Value:
    return ctx.op("logical_not", ctx.cast(self, DType.BOOL))


# ----------------------------------------------------------------------- activations
@converter("aten.gelu.default")
def gelu(ctx: Ctx, self: Value, *, approximate: str = "none") -> Value:
    return ctx.op("gelu", self, approximate=approximate)


@converter("aten.leaky_relu.default")
def leaky_relu(ctx: Ctx, self: Value, negative_slope: float = 0.01) -> Value:
    return ctx.op("leaky_relu", self, negative_slope=float(negative_slope))


@converter("aten.hardtanh.default")
def hardtanh(ctx: Ctx, self: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    return ctx.op("hardtanh", self, min=float(min_val), max=float(max_val))


@converter("aten.relu6.default")
def relu6(ctx: Ctx, self: Value) -> Value:
    return ctx.op("hardtanh", self, min=0.0, max=6.0)


@converter("aten.hardsigmoid.default")
def hardsigmoid(ctx: Ctx, self: Value) -> Value:
    return ctx.op("hardsigmoid", self, alpha=1 / 6, beta=0.5)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@converter("aten.elu.default")
def elu(
    ctx: Ctx, self: Value, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0
) -> Value:
    if input_scale == 1 and scale == 1:
        return ctx.op("elu", self, alpha=float(alpha))
    if input_scale == 1 and math.isclose(alpha, _SELU_ALPHA) and math.isclose(scale, _SELU_SCALE):
        return ctx.op("selu", self)
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    dt = self.dtype
    neg = ctx.op("mul", ctx.op("expm1", ctx.op("mul", self, ctx.const(input_scale, dt))),
                 ctx.const(alpha, dt))  # fmt: skip
    y = ctx.op("where", ctx.op("gt", self, ctx.const(0, dt)), self, neg)
    return ctx.op("mul", y, ctx.const(scale, dt))


@converter("aten.celu.default")
def celu(ctx: Ctx, self: Value, alpha: float = 1.0) -> Value:
    return ctx.op("celu", self, alpha=float(alpha))


@converter("aten.softplus.default")
def softplus(ctx: Ctx, self: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    return ctx.op("softplus", self, beta=float(beta), threshold=float(threshold))


@converter("aten.hardshrink.default")
def hardshrink(ctx: Ctx, self: Value, lambd: float = 0.5) -> Value:
    return ctx.op("hardshrink", self, lambd=float(lambd))


@converter("aten.softshrink.default")
def softshrink(ctx: Ctx, self: Value, lambd: float = 0.5) -> Value:
    return ctx.op("softshrink", self, lambd=float(lambd))


@converter("aten.threshold.default")
def threshold(ctx: Ctx, self: Value, threshold: float, value: float) -> Value:
    return ctx.op("threshold", self, threshold=float(threshold), value=float(value))


@converter("aten.prelu.default", "aten._prelu_kernel.default")
def prelu(ctx: Ctx, self: Value, weight: Value) -> Value:
    r = ctx.rank(self)
    if r >= 2 and ctx.shape(weight) != (1,) and ctx.rank(weight) == 1:
        # one slope per channel (dim 1): shape it [C, 1, ...] to broadcast.
        weight = ctx.op("reshape", weight, shape=[-1] + [1] * (r - 2))
    return ctx.op("prelu", self, ctx.cast(weight, self.dtype))


# ----------------------------------------------------------------------- binary
def _add_sub(op: str):
    def convert(ctx: Ctx, self: Any, other: Any, alpha: Any = 1, **_: Any) -> Value:
        a, b = ctx.promote(self, other)
        if alpha is not None and alpha != 1:
            b = ctx.op("mul", b, ctx.const(alpha, b.dtype))
        if a.dtype is DType.BOOL and op == "add":
            return ctx.op("logical_or", a, b)
        return ctx.op(op, a, b)

    return convert


converter("aten.add.Tensor", "aten.add.Scalar")(_add_sub("add"))
converter("aten.sub.Tensor", "aten.sub.Scalar")(_add_sub("sub"))


@converter("aten.rsub.Tensor", "aten.rsub.Scalar")
def rsub(ctx: Ctx, self: Any, other: Any, alpha: Any = 1) -> Value:
    """other - alpha * self."""
    a, b = ctx.promote(self, other)
    if alpha != 1:
        a = ctx.op("mul", a, ctx.const(alpha, a.dtype))
    return ctx.op("sub", b, a)


@converter("aten.mul.Tensor", "aten.mul.Scalar")
def mul(ctx: Ctx, self: Any, other: Any) -> Value:
    a, b = ctx.promote(self, other)
    if a.dtype is DType.BOOL:
        return ctx.op("logical_and", a, b)
    return ctx.op("mul", a, b)


@converter("aten.div.Tensor", "aten.div.Scalar")
def div(ctx: Ctx, self: Any, other: Any) -> Value:
    a, b = ctx.promote(self, other, kind="int_to_float")
    return ctx.op("div", a, b)


@converter("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(ctx: Ctx, self: Any, other: Any, *, rounding_mode: str | None = None) -> Value:
    if rounding_mode is None:
        return div(ctx, self, other)
    a, b = ctx.promote(self, other)
    if rounding_mode == "floor":
        return ctx.op("floor_divide", a, b)
    if a.dtype.is_floating:
        return ctx.op("trunc", ctx.op("div", a, b))
    return ctx.op("div", a, b)  # integer division truncates


@converter("aten.floor_divide.default", "aten.floor_divide.Scalar")
def floor_divide(ctx: Ctx, self: Any, other: Any) -> Value:
    a, b = ctx.promote(self, other)
    return ctx.op("floor_divide", a, b)


def _binary(canonical: str, kind: str = "default"):
    def convert(ctx: Ctx, self: Any, other: Any, **_: Any) -> Value:
        a, b = ctx.promote(self, other, kind=kind)
        if a.dtype is DType.BOOL and canonical.startswith("bitwise_"):
            return ctx.op("logical_" + canonical[len("bitwise_") :], a, b)
        return ctx.op(canonical, a, b)

    return convert


for _keys, _canonical, _kind in (
    (("aten.remainder.Tensor", "aten.remainder.Scalar"), "remainder", "default"),
    (("aten.fmod.Tensor", "aten.fmod.Scalar"), "fmod", "default"),
    (("aten.atan2.default", "aten.atan2.out"), "atan2", "int_to_float"),
    (("aten.maximum.default",), "maximum", "default"),
    (("aten.minimum.default",), "minimum", "default"),
    (
        (
            "aten.bitwise_and.Tensor",
            "aten.bitwise_and.Scalar",
            "aten.__and__.Tensor",
            "aten.__and__.Scalar",
        ),
        "bitwise_and",
        "default",
    ),
    (
        (
            "aten.bitwise_or.Tensor",
            "aten.bitwise_or.Scalar",
            "aten.__or__.Tensor",
            "aten.__or__.Scalar",
        ),
        "bitwise_or",
        "default",
    ),
    (
        (
            "aten.bitwise_xor.Tensor",
            "aten.bitwise_xor.Scalar",
            "aten.__xor__.Tensor",
            "aten.__xor__.Scalar",
        ),
        "bitwise_xor",
        "default",
    ),
    (("aten.bitwise_left_shift.Tensor",), "bitshift_left", "default"),
    (("aten.bitwise_right_shift.Tensor",), "bitshift_right", "default"),
):
    converter(*_keys)(_binary(_canonical, _kind))


@converter("aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar", "aten.pow.Scalar")
def pow_(ctx: Ctx, self: Any, exponent: Any) -> Value:
    if isinstance(exponent, int | float) and not isinstance(exponent, bool):
        if exponent == 2 and isinstance(self, Value):
            a, _ = ctx.promote(self, exponent)
            return ctx.op("mul", a, a)
        if exponent == 0.5 and isinstance(self, Value):
            a, _ = ctx.promote(self, exponent)
            return ctx.op("sqrt", a)
    a, b = ctx.promote(self, exponent)
    return ctx.op("pow", a, b)


def _logical(canonical: str):
    def convert(ctx: Ctx, self: Value, other: Value) -> Value:
        return ctx.op(canonical, ctx.cast(self, DType.BOOL), ctx.cast(other, DType.BOOL))

    return convert


converter("aten.logical_and.default")(_logical("logical_and"))
converter("aten.logical_or.default")(_logical("logical_or"))
converter("aten.logical_xor.default")(_logical("logical_xor"))


def _compare(canonical: str):
    def convert(ctx: Ctx, self: Any, other: Any) -> Value:
        a, b = ctx.promote(self, other)
        return ctx.op(canonical, a, b)

    return convert


for _c in ("eq", "ne", "lt", "le", "gt", "ge"):
    converter(f"aten.{_c}.Tensor", f"aten.{_c}.Scalar")(_compare(_c))


@converter(
    "aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar"
)
def where(ctx: Ctx, condition: Value, self: Any, other: Any) -> Value:
    a, b = ctx.promote(self, other)
    return ctx.op("where", ctx.cast(condition, DType.BOOL), a, b)


@converter("aten.clamp.default", "aten.clamp.Tensor", "aten.clip.default", "aten.clip.Tensor")
def clamp(ctx: Ctx, self: Value, min: Any = None, max: Any = None) -> Value:
    if min is None and max is None:
        return self
    x, lo, hi = ctx.promote(self, min, max)
    return ctx.op("clamp", x, lo, hi)


@converter("aten.clamp_min.default", "aten.clamp_min.Tensor")
def clamp_min(ctx: Ctx, self: Value, min: Any) -> Value:
    return clamp(ctx, self, min, None)


@converter("aten.clamp_max.default", "aten.clamp_max.Tensor")
def clamp_max(ctx: Ctx, self: Value, max: Any) -> Value:
    return clamp(ctx, self, None, max)


@converter("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(ctx: Ctx, self: Value, mask: Value, value: Any) -> Value:
    v = ctx.tensor(value, self.dtype)
    return ctx.op("where", ctx.cast(mask, DType.BOOL), v, self)


@converter("aten.lerp.Scalar", "aten.lerp.Tensor")
def lerp(ctx: Ctx, self: Value, end: Value, weight: Any) -> Value:
    a, b, w = ctx.promote(self, end, weight)
    return ctx.op("add", a, ctx.op("mul", ctx.op("sub", b, a), w))


@converter("aten.addcmul.default")
def addcmul(ctx: Ctx, self: Value, tensor1: Value, tensor2: Value, *, value: Any = 1) -> Value:
    a, t1, t2 = ctx.promote(self, tensor1, tensor2)
    prod = ctx.op("mul", t1, t2)
    if value != 1:
        prod = ctx.op("mul", prod, ctx.const(value, a.dtype))
    return ctx.op("add", a, prod)


@converter("aten.addcdiv.default")
def addcdiv(ctx: Ctx, self: Value, tensor1: Value, tensor2: Value, *, value: Any = 1) -> Value:
    a, t1, t2 = ctx.promote(self, tensor1, tensor2)
    q = ctx.op("div", t1, t2)
    if value != 1:
        q = ctx.op("mul", q, ctx.const(value, a.dtype))
    return ctx.op("add", a, q)


# ----------------------------------------------------------------------- casts, copies
def _identity(ctx: Ctx, **kw: Any) -> Value:
    return kw["self"] if "self" in kw else kw["input"]


converter(
    "aten.clone.default",
    "aten.alias.default",
    "aten.contiguous.default",
    "aten.detach.default",
    "aten.lift_fresh_copy.default",
    "aten.lift_fresh.default",
    "aten.dropout.default",
    "aten.feature_dropout.default",
    "aten.alpha_dropout.default",
    "aten.feature_alpha_dropout.default",
    "aten.positive.default",
    "aten.resolve_conj.default",
    "aten.resolve_neg.default",
)(_identity)


@converter("aten.native_dropout.default")
def native_dropout(ctx: Ctx, input: Value, p: float, train: bool | None) -> tuple:
    if train:
        raise Unsupported("dropout in training mode (random); export in eval mode")
    return input, ctx.op("full_like", input, value=1.0, dtype=DType.BOOL)


def _to_dtype(ctx: Ctx, self: Value, dtype: Any) -> Value:
    return self if dtype is None else ctx.cast(self, to_msc(dtype))


@converter("aten._to_copy.default")
def to_copy(ctx: Ctx, self: Value, *, dtype: Any = None, **_: Any) -> Value:
    return _to_dtype(ctx, self, dtype)


@converter("aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.to.other")
def to(ctx: Ctx, self: Value, *args: Any, dtype: Any = None, other: Any = None, **_: Any):
    if isinstance(other, Value):
        return ctx.cast(self, other.dtype)
    return _to_dtype(ctx, self, dtype)


@converter("aten.type_as.default")
def type_as(ctx: Ctx, self: Value, other: Value) -> Value:
    return ctx.cast(self, other.dtype)


@converter("aten.copy.default")
def copy(ctx: Ctx, self: Value, src: Value, non_blocking: bool = False) -> Value:
    v = ctx.cast(src, self.dtype)
    if ctx.shape(v) != ctx.shape(self):
        v = ctx.op("expand", v, shape=[-1 if d is None else d for d in _static(ctx, self)])
    return v


def _static(ctx: Ctx, v: Value) -> list[int]:
    out = []
    for d in ctx.shape(v):
        if not isinstance(d, int):
            raise Unsupported("copy into a tensor of symbolic shape")
        out.append(d)
    return out


# ---------------------------------------------------------- IEEE helpers (fmax, copysign, ...)
def _signbit(ctx: Ctx, x: Value) -> Value:
    """True where x's sign bit is set: x < 0, and -0.0 (whose reciprocal is -inf)."""
    zero = ctx.const(0.0, x.dtype)
    neg_zero = ctx.op("logical_and", ctx.op("eq", x, zero),
                      ctx.op("lt", ctx.op("reciprocal", x), zero))  # fmt: skip
    return ctx.op("logical_or", ctx.op("lt", x, zero), neg_zero)


@converter("aten.signbit.default", "prims.signbit.default")
def signbit(ctx: Ctx, self: Value) -> Value:
    if not self.dtype.is_floating:
        if self.dtype.is_signed:
            return ctx.op("lt", self, ctx.const(0, self.dtype))
        return ctx.op("full_like", self, value=0.0, dtype=DType.BOOL)
    return _signbit(ctx, self)


@converter("aten.copysign.Tensor", "aten.copysign.Scalar", "prims.copysign.default")
def copysign(ctx: Ctx, self: Any, other: Any) -> Value:
    a, b = ctx.promote(self, other, kind="int_to_float")
    mag = ctx.op("abs", a)
    return ctx.op("where", _signbit(ctx, b), ctx.op("neg", mag), mag)


def _nan_ignoring(canonical: str):
    # fmax/fmin: a NaN loses to a number (maximum/minimum propagate it).
    def convert(ctx: Ctx, self: Any, other: Any) -> Value:
        a, b = ctx.promote(self, other)
        out = ctx.op(canonical, a, b)
        if not a.dtype.is_floating:
            return out
        out = ctx.op("where", ctx.op("isnan", a), b, out)
        return ctx.op("where", ctx.op("isnan", b), a, out)

    return convert


converter("aten.fmax.default", "prims.fmax.default")(_nan_ignoring("maximum"))
converter("aten.fmin.default", "prims.fmin.default")(_nan_ignoring("minimum"))


@converter("aten.hypot.default", "prims.hypot.default")
def hypot(ctx: Ctx, self: Value, other: Value) -> Value:
    a, b = ctx.promote(self, other)
    return ctx.op("sqrt", ctx.op("add", ctx.op("mul", a, a), ctx.op("mul", b, b)))


converter("prims.abs.default")(_unary("abs", "default"))
converter("prims.neg.default")(_unary("neg", "default"))


@converter("prims.where.default")
def prims_where(ctx: Ctx, pred: Value, a: Any, b: Any) -> Value:
    x, y = ctx.promote(a, b)
    return ctx.op("where", pred, x, y)


@converter("aten.rrelu_with_noise.default")
def rrelu_with_noise(
    ctx: Ctx, self: Value, noise: Value, lower: float = 1 / 8, upper: float = 1 / 3,
    training: bool = False, generator: Any = None,
) -> Value:  # fmt: skip
    # In eval mode RReLU is leaky ReLU with the mean slope; training draws random slopes.
    if training:
        raise Unsupported("rrelu in training mode draws random slopes; export in eval mode")
    return ctx.op("leaky_relu", self, negative_slope=(lower + upper) / 2)


@converter("aten.rrelu_with_noise_functional.default")
def rrelu_with_noise_functional(
    ctx: Ctx, self: Value, noise: Value, lower: float = 1 / 8, upper: float = 1 / 3,
    training: bool = False, generator: Any = None,
) -> tuple:  # fmt: skip
    return rrelu_with_noise(ctx, self, noise, lower, upper, training), noise


@converter("aten._conj.default", "aten._conj_physical.default", "aten.conj_physical.default")
def conj(ctx: Ctx, self: Value) -> Value:
    if self.dtype.is_complex:
        raise Unsupported("conjugate of a complex tensor")
    return self  # the conjugate of a real tensor is itself


# Python arithmetic on symbolic sizes (0-d i64 values), as torch.export writes it for
# ``n ** 2``, ``max(n, 4)``, ``n ** 0.5`` on a size ``n``.
converter("operator.pow")(pow_)


def _sym_extremum(canonical: str):
    def convert(ctx: Ctx, a: Any, b: Any) -> Any:
        if not isinstance(a, Value) and not isinstance(b, Value):
            return max(a, b) if canonical == "maximum" else min(a, b)
        return ctx.op(canonical, *ctx.promote(a, b))

    return convert


converter("torch.sym_max")(_sym_extremum("maximum"))
converter("torch.sym_min")(_sym_extremum("minimum"))


@converter("torch.sym_float")
def sym_float(ctx: Ctx, a: Any) -> Any:
    # A Python float: 0-d float64, which (0-d) does not promote the tensors it meets.
    return ctx.cast(a, DType.FLOAT64) if isinstance(a, Value) else float(a)


@converter("torch.sym_int")
def sym_int(ctx: Ctx, a: Any) -> Any:
    if not isinstance(a, Value):
        return int(a)
    return ctx.cast(ctx.op("trunc", a) if a.dtype.is_float else a, DType.INT64)
