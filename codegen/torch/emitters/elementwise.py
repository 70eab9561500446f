"""Emitters for elementwise ops: unary, activations, binary, comparisons, where, clamp, cast.

# NOTE: canonical binary ops take one dtype and keep it; where torch would promote (true
# division of integers, float-only functions on integer tensors) the emitter states the
# canonical result (``rounding_mode="trunc"``, a trailing ``.to(dtype)``).
"""

from __future__ import annotations

import ast
import copy

import torch

from codegen.torch import lowbit
from codegen.torch.code import call, const, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import operands, static_bools
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import emitter, module_rule
from msc.ir.dtype import DType

# canonical op -> torch function. Those marked float may promote integer inputs to float.
_UNARY = {
    "abs": ("torch.abs", False),
    "exp": ("torch.exp", True),
    "exp2": ("torch.exp2", True),
    "log": ("torch.log", True),
    "log2": ("torch.log2", True),
    "log10": ("torch.log10", True),
    "log1p": ("torch.log1p", True),
    "expm1": ("torch.expm1", True),
    "sqrt": ("torch.sqrt", True),
    "rsqrt": ("torch.rsqrt", True),
    "reciprocal": ("torch.reciprocal", True),
    "sin": ("torch.sin", True),
    "cos": ("torch.cos", True),
    "tan": ("torch.tan", True),
    "asin": ("torch.asin", True),
    "acos": ("torch.acos", True),
    "atan": ("torch.atan", True),
    "sinh": ("torch.sinh", True),
    "cosh": ("torch.cosh", True),
    "tanh": ("torch.tanh", True),
    "asinh": ("torch.asinh", True),
    "acosh": ("torch.acosh", True),
    "atanh": ("torch.atanh", True),
    "erf": ("torch.erf", True),
    "erfinv": ("torch.erfinv", True),
    "floor": ("torch.floor", False),
    "ceil": ("torch.ceil", False),
    "round": ("torch.round", False),  # half to even, as canonical
    "trunc": ("torch.trunc", False),
    "sign": ("torch.sign", False),
    "sigmoid": ("torch.sigmoid", True),
    "relu": ("torch.relu", False),
    "silu": ("F.silu", True),
    "mish": ("F.mish", True),
    "selu": ("F.selu", True),
    "softsign": ("F.softsign", True),
    "log_sigmoid": ("F.logsigmoid", True),
    "hardswish": ("F.hardswish", True),
    "bitwise_not": ("torch.bitwise_not", False),
    "isnan": ("torch.isnan", False),
    "isinf": ("torch.isinf", False),
    "isfinite": ("torch.isfinite", False),
    "logical_not": ("torch.logical_not", False),
}


# The torch functions the unary emitters write: pure and elementwise, so the codegen may write
# one inside the expression that reads it (passes.inline_arithmetic).
FUNCTIONS = frozenset(fn for fn, _ in _UNARY.values())


def _fix_dtype(x: Arg, value: ast.expr, out: DType, may_promote: bool) -> ast.expr:
    if may_promote and not (x.dtype.is_floating or x.dtype.is_complex):
        return expr("v.to(d)", v=value, d=out)
    return value


def _make_unary(fn: str, may_promote: bool):
    def emit(e: NodeEmit, x: Arg) -> ast.expr:
        return _fix_dtype(x, call(fn, x), e.output_types[0].dtype, may_promote)

    return emit


for _op, (_fn, _promote) in _UNARY.items():
    emitter(_op)(_make_unary(_fn, _promote))


@emitter("neg")
def neg(e: NodeEmit, x: Arg) -> ast.expr:
    if x.is_py and x.rank == 0:
        return e.py(expr("-x", x=x.s))
    return expr("-x", x=x)


@emitter("identity")
def identity(e: NodeEmit, x: Arg) -> ast.expr:
    return expr("x.clone()", x=x)


# ---------------------------------------------------------------- activations with attributes
@emitter("gelu")
def gelu(e: NodeEmit, x: Arg, *, approximate: str) -> ast.expr:
    if approximate == "none":
        return call("F.gelu", x)
    return call("F.gelu", x, approximate=approximate)


@emitter("elu")
def elu(e: NodeEmit, x: Arg, *, alpha: float) -> ast.expr:
    return call("F.elu", x) if alpha == 1.0 else call("F.elu", x, alpha=alpha)


@emitter("celu")
def celu(e: NodeEmit, x: Arg, *, alpha: float) -> ast.expr:
    return call("F.celu", x) if alpha == 1.0 else call("F.celu", x, alpha=alpha)


@emitter("leaky_relu")
def leaky_relu(e: NodeEmit, x: Arg, *, negative_slope: float) -> ast.expr:
    return call("F.leaky_relu", x, negative_slope)


@emitter("hardsigmoid")
def hardsigmoid(e: NodeEmit, x: Arg, *, alpha: float, beta: float) -> ast.expr:
    if alpha == 1 / 6 and beta == 0.5:
        return call("F.hardsigmoid", x)
    return expr("torch.clamp(x * a + b, 0.0, 1.0)", x=x, a=alpha, b=beta)


@emitter("hardtanh")
def hardtanh(e: NodeEmit, x: Arg, *, min: float, max: float) -> ast.expr:
    return call("F.hardtanh", x, min, max)


@emitter("softplus")
def softplus(e: NodeEmit, x: Arg, *, beta: float, threshold: float) -> ast.expr:
    if beta == 1.0 and threshold == 20.0:
        return call("F.softplus", x)
    return call("F.softplus", x, beta=beta, threshold=threshold)


# ---------------------------------------------------------------- activation modules
# Where the source ran an activation as a module (``self.act = nn.GELU()``, an item of an
# nn.Sequential), the generated code does too: op -> the module class for the source's type.
_ACTIVATION_MODULES = {
    "relu": ("ReLU",),
    "sigmoid": ("Sigmoid",),
    "tanh": ("Tanh",),
    "silu": ("SiLU",),
    "mish": ("Mish",),
    "selu": ("SELU",),
    "softsign": ("Softsign",),
    "log_sigmoid": ("LogSigmoid",),
    "hardswish": ("Hardswish",),
}


def _plain_module(op: str):
    def rule(x: Arg, *, module_type: str):
        return call(f"nn.{module_type}"), [x]

    return rule


for _op, _types in _ACTIVATION_MODULES.items():
    module_rule(_op, roles=(), types=_types)(_plain_module(_op))


@module_rule("gelu", roles=(), types=("GELU",))
def gelu_module(x: Arg, *, approximate: str, module_type: str):
    return (
        call("nn.GELU") if approximate == "none" else call("nn.GELU", approximate=approximate)
    ), [x]


@module_rule("elu", roles=(), types=("ELU",))
def elu_module(x: Arg, *, alpha: float, module_type: str):
    return (call("nn.ELU") if alpha == 1.0 else call("nn.ELU", alpha=alpha)), [x]


@module_rule("celu", roles=(), types=("CELU",))
def celu_module(x: Arg, *, alpha: float, module_type: str):
    return (call("nn.CELU") if alpha == 1.0 else call("nn.CELU", alpha=alpha)), [x]


@module_rule("leaky_relu", roles=(), types=("LeakyReLU",))
def leaky_relu_module(x: Arg, *, negative_slope: float, module_type: str):
    return (
        call("nn.LeakyReLU") if negative_slope == 0.01 else call("nn.LeakyReLU", negative_slope)
    ), [x]


@module_rule("hardsigmoid", roles=(), types=("Hardsigmoid",))
def hardsigmoid_module(x: Arg, *, alpha: float, beta: float, module_type: str):
    return (call("nn.Hardsigmoid"), [x]) if alpha == 1 / 6 and beta == 0.5 else None


@module_rule("hardtanh", roles=(), types=("Hardtanh", "ReLU6"))
def hardtanh_module(x: Arg, *, min: float, max: float, module_type: str):
    if module_type == "ReLU6":
        return (call("nn.ReLU6"), [x]) if (min, max) == (0.0, 6.0) else None
    return call("nn.Hardtanh", min, max), [x]


@module_rule("softplus", roles=(), types=("Softplus",))
def softplus_module(x: Arg, *, beta: float, threshold: float, module_type: str):
    if beta == 1.0 and threshold == 20.0:
        return call("nn.Softplus"), [x]
    return call("nn.Softplus", beta=beta, threshold=threshold), [x]


@emitter("hardshrink")
def hardshrink(e: NodeEmit, x: Arg, *, lambd: float) -> ast.expr:
    return call("F.hardshrink", x, lambd)


@emitter("softshrink")
def softshrink(e: NodeEmit, x: Arg, *, lambd: float) -> ast.expr:
    return call("F.softshrink", x, lambd)


@emitter("threshold")
def threshold(e: NodeEmit, x: Arg, *, threshold: float, value: float) -> ast.expr:
    return call("F.threshold", x, threshold, value)


@emitter("shrink")
def shrink(e: NodeEmit, x: Arg, *, bias: float, lambd: float) -> ast.expr:
    return call(e.helper("_msc_shrink").id, x, bias, lambd)


@emitter("thresholded_relu")
def thresholded_relu(e: NodeEmit, x: Arg, *, alpha: float) -> ast.expr:
    return expr("torch.where(x > a, x, 0)", x=x, a=alpha)


# ---------------------------------------------------------------- binary
def _operator(tpl: str, py_ok: bool = True):
    def emit(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
        x, y, py = operands(a, b)
        if py and not py_ok:
            x, y, py = a.expr, b.expr, False
        value = expr(tpl, a=x, b=y)
        return e.py(value) if py else value

    return emit


_OPERATORS = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "pow": "a ** b",
    "floor_divide": "a // b",
    "remainder": "a % b",
}
for _op, _tpl in _OPERATORS.items():
    emitter(_op)(_operator(_tpl))

for _op, _tpl in {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items():
    emitter(_op)(_operator(f"a {_tpl} b", py_ok=False))

# torch function -> (second operand may be a Python scalar, integer inputs may become float)
_BINARY_FNS = {
    "fmod": ("torch.fmod", True, False),
    "atan2": ("torch.atan2", False, True),
    "bitwise_and": ("torch.bitwise_and", True, False),
    "bitwise_or": ("torch.bitwise_or", True, False),
    "bitwise_xor": ("torch.bitwise_xor", True, False),
    "bitshift_left": ("torch.bitwise_left_shift", True, False),
    "bitshift_right": ("torch.bitwise_right_shift", True, False),
    "logical_and": ("torch.logical_and", False, False),
    "logical_or": ("torch.logical_or", False, False),
    "logical_xor": ("torch.logical_xor", False, False),
}


def _function(fn: str, scalar_ok: bool, promote: bool):
    def emit(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
        out = e.output_types[0].dtype
        second = b.s if scalar_ok and b.is_scalar else b
        value = call(fn, a, second)
        if fn.startswith("torch.logical") and out is not DType.BOOL:
            return expr("v.to(d)", v=value, d=out)
        return _fix_dtype(a, value, out, promote)

    return emit


for _op, (_fn, _scalar, _promote) in _BINARY_FNS.items():
    emitter(_op)(_function(_fn, _scalar, _promote))


def _extremum(fn: str, sym: str):
    def emit(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
        x, y, py = operands(a, b)
        if py:
            return e.py(call(sym, x, y))
        return call(fn, a, b)

    return emit


emitter("maximum")(_extremum("torch.maximum", "torch.sym_max"))
emitter("minimum")(_extremum("torch.minimum", "torch.sym_min"))


@emitter("div")
def div(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
    if a.dtype.is_floating or a.dtype.is_complex:
        x, y, _ = operands(a, b)
        return expr("a / b", a=x, b=y)
    # C and ONNX integer division truncates toward zero (torch's `/` would give floats).
    return call("torch.div", a, b.s if b.is_scalar else b, rounding_mode="trunc")


@emitter("prelu")
def prelu(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
    # F.prelu applies a 1-d weight along dim 1. Numpy broadcasting agrees when b has one
    # element, when b is 1-d and a 2-d, and when b is a [C] tensor reshaped to [C, 1, ...]
    # (how torch's own prelu reaches the graph): then F.prelu takes the [C] tensor itself.
    n = b.type.numel()
    if n == 1 and b.rank == 1 or (b.rank == 1 and a.rank == 2 and b.shape[0] == a.shape[1]):
        return call("F.prelu", a, b)
    p = b.value.producer
    if p is not None and p.op == "reshape" and a.rank is not None and a.rank >= 2:
        src = p.inputs[0]
        c = src.type.shape
        if c is not None and len(c) == 1 and b.shape == (c[0],) + (1,) * (a.rank - 2):
            if a.shape[1] == c[0]:
                return call("F.prelu", a, e.cg.arg(src))
    return expr("torch.where(a >= 0, a, a * b)", a=a, b=b)


@emitter("where")
def where(e: NodeEmit, condition: Arg, x: Arg, y: Arg) -> ast.expr:
    picked = _sizes_picked(e, condition, x, y)
    if picked is not None:
        return e.py(picked)
    if x.is_scalar != y.is_scalar:  # one Python scalar beside a tensor keeps the dtype
        return call("torch.where", condition, x.s, y.s)
    return call("torch.where", condition, x, y)


def _sizes_picked(e: NodeEmit, condition: Arg, x: Arg, y: Arg) -> ast.expr | None:
    """A choice between two lists of sizes by a comparison of sizes (exporters replace a -1
    or 0 in a shape): the chosen sizes as a Python list, each element decided here where the
    graph decides it (a size is never -1) and by a Python comparison otherwise, computed as
    torch.export can trace rather than as tensors whose values the code reads back."""
    out = e.node.output.type
    if out.shape is None or len(out.shape) != 1 or not isinstance(out.shape[0], int):
        return None
    if not out.dtype.is_integer or not all(_sizes(a) for a in (x, y)):
        return None
    p = condition.value.producer
    if p is None or p.op not in ("eq", "ne") or any(u is None for u in p.inputs):
        return None
    left, right = (Arg(e.cg, u) for u in p.inputs)
    if not all(_sizes(a) for a in (left, right)):
        return None
    n = out.shape[0]
    cond = static_bools(condition.value)
    if cond is None or len(cond) not in (1, n):
        return None
    cond = cond * n if len(cond) == 1 else cond
    if all(c is False for c in cond) and y.rank == 1 and y.shape == (n,):
        return y.s if y.is_py else const(list(y.literal))
    if all(c is True for c in cond) and x.rank == 1 and x.shape == (n,):
        return x.s if x.is_py else const(list(x.literal))
    items = [_size_items(a, n) for a in (x, y, left, right)]
    if any(i is None for i in items):
        return None
    xs, ys, ls, rs = items
    op = ast.Eq() if p.op == "eq" else ast.NotEq()
    picked = []
    for c, a, b, lft, rgt in zip(cond, xs, ys, ls, rs):  # type: ignore[arg-type]
        if c is None:
            test = ast.Compare(lft, [op], [rgt])
            picked.append(ast.IfExp(test, a, b))
        else:
            picked.append(a if c else b)
    return ast.List(picked, ast.Load())


def _sizes(a: Arg) -> bool:
    """A list of sizes the code holds in Python: computed from shapes, or a literal."""
    return (a.is_py or a.literal is not None) and a.rank in (0, 1)


def _size_items(a: Arg, n: int) -> list[ast.expr] | None:
    """``n`` expressions for the elements of a Python list of sizes (one element repeated)."""
    if not a.is_py:
        lit = [a.literal] if a.rank == 0 else list(a.literal)
        lit = lit * n if len(lit) == 1 else lit
        return [const(v) for v in lit] if len(lit) == n else None
    s = a.s
    m = 1 if a.rank == 0 else a.shape[0] if a.shape else None
    if not isinstance(m, int) or m not in (1, n):
        return None
    if a.rank == 0:
        elts = [s]
    elif isinstance(s, ast.List) and not any(isinstance(v, ast.Starred) for v in s.elts):
        elts = list(s.elts)
    else:
        elts = [expr("v[i]", v=s, i=i) for i in range(m)]
    # Each use its own node: later passes edit the tree in place.
    return [copy.deepcopy(v) for v in elts * n] if m == 1 else elts


@emitter("clamp")
def clamp(e: NodeEmit, x: Arg, min: Arg | None = None, max: Arg | None = None) -> ast.expr:
    if min is None and max is None:
        return expr("x.clone()", x=x)
    kw = {k: (v.s if v.is_scalar else v) for k, v in (("min", min), ("max", max)) if v is not None}
    return call("torch.clamp", x, **kw)


@emitter("cast")
def cast(e: NodeEmit, x: Arg, *, to: DType) -> ast.expr:
    if to in lowbit.CARRIERS:  # a sub-byte type: wrap or round into its carrier
        return lowbit.cast(e, x, to)
    if x.is_py and to.is_integer:
        return e.py(x.s)
    return expr("x.to(d)", x=x, d=to)


# ---------------------------------------------------------------- run-time helpers
# Pasted into the generated modules that use them: only torch, F and other _msc_* helpers.
def _msc_shrink(x, bias, lambd):
    """ONNX Shrink."""
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero))


runtime_helpers(_msc_shrink)
