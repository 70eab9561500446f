"""Ops torch has no kernels for on uint16 / uint32 / uint64, computed in a signed type.

torch (2.x, CPU) holds uint16/32/64 tensors but many ops raise NotImplementedError on them
(add, sub, div, remainder, maximum, lt, bitwise_not, shifts, amax, argmax, clamp, topk, gather,
scatter, flip, matmul, ...; found by running each op on a small tensor of each dtype). For a
node whose op is in ``KERNELS`` and which reads such a tensor, ``emit`` hands the emitter its
unsigned inputs in a signed type and casts the results back, so every emitter stays written
for the types torch has.

# NOTE: invariants
# - uint16 -> int32 and uint32 -> int64 hold every value, in order: each op below is exact
#   there, and ``.to(uint)`` of the result wraps modulo 2**bits as the unsigned op does.
# - uint64 -> int64 keeps the bits (``.to`` wraps, two's complement). By kind of op:
#   WRAP  results congruent modulo 2**64 (add, sub, mul, bitwise, left shift) or moved without
#         arithmetic (gather, scatter, flip): exact on the bits.
#   ORDER results that depend on order (comparisons, max/min, clamp, argmax, topk): the top bit
#         is flipped (x ^ -2**63), which maps uint64 order onto int64 order; results of the
#         input's type flip it back.
#   VALUE results that need the unsigned value (division, remainder, right shift): through a
#         run-time helper written for the bits (``U64_HELPERS``), or refused at generate time
#         naming the node (``refusal``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import torch

from codegen.torch import code
from codegen.torch.code import call, const, expr
from codegen.torch.helpers import runtime_helpers
from msc.ir.dtype import DType
from msc.ir.graph import Node, Value
from msc.ir.types import TensorType

__all__ = ["KERNELS", "U64_HELPERS", "WIDE", "kind", "refusal", "emit"]

WRAP, ORDER, VALUE = "wrap", "order", "value"

# The signed type each unsigned one is computed in.
WIDE = {DType.UINT16: DType.INT32, DType.UINT32: DType.INT64, DType.UINT64: DType.INT64}

# -2**63: x ^ TOP maps uint64 bits (read as int64) onto int64 in the same order.
TOP = -(2**63)


def _scatter_kind(attrs: dict[str, Any]) -> str:
    return ORDER if attrs.get("reduction") in ("max", "min") else WRAP


# Canonical op -> how its result depends on its unsigned inputs (a function of the attributes
# where that decides it). Ops torch runs on these dtypes (mul, eq, ne, bitwise and/or/xor,
# sort, cat, where, indexing, constant pad) are not here.
KERNELS: dict[str, str | Callable[[dict[str, Any]], str]] = {
    "add": WRAP,
    "sub": WRAP,
    "neg": WRAP,
    "bitwise_not": WRAP,
    "bitshift_left": WRAP,
    "matmul": WRAP,
    "gather_elements": WRAP,
    "flip": WRAP,
    "trilu": WRAP,
    "scatter_elements": _scatter_kind,
    "scatter_nd": _scatter_kind,
    "index_put": WRAP,
    "pad": WRAP,
    "nonzero": WRAP,
    "reduce_sum": WRAP,  # sum(dtype=uint16) has no kernel either
    "reduce_prod": WRAP,
    "cumsum": WRAP,
    "cumprod": WRAP,
    "lt": ORDER,
    "le": ORDER,
    "gt": ORDER,
    "ge": ORDER,
    "maximum": ORDER,
    "minimum": ORDER,
    "clamp": ORDER,
    "reduce_max": ORDER,
    "reduce_min": ORDER,
    "argmax": ORDER,
    "argmin": ORDER,
    "max_dim": ORDER,
    "min_dim": ORDER,
    "topk": ORDER,
    "div": VALUE,
    "floor_divide": VALUE,
    "remainder": VALUE,
    "fmod": VALUE,
    "bitshift_right": VALUE,
    "abs": VALUE,
    "sign": VALUE,
    "pow": VALUE,
}


def kind(node: Node) -> str | None:
    """How ``node`` is computed for its unsigned inputs, or None when it needs nothing."""
    how = KERNELS.get(node.op)
    if how is None or not any(_unsigned(v) for v in node.inputs):
        return None
    return how(node.attrs) if callable(how) else how


def refusal(node: Node) -> str | None:
    """Why ``node`` cannot be generated (a uint64 op with no exact spelling), else None."""
    if kind(node) == VALUE and node.op not in U64_HELPERS:
        if any(_unsigned(v) is DType.UINT64 for v in node.inputs):
            return (
                f"torch has no uint64 kernel for {node.op}, and int64 does not compute it "
                "exactly for values >= 2**63"
            )
    return None


def emit(e: Any, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], how: str):
    """The node's value (a tuple for several outputs) with its unsigned inputs computed in
    ``WIDE`` types by emitter ``fn`` (or a uint64 helper) and its unsigned outputs cast back."""
    u64 = any(_unsigned(v) is DType.UINT64 for v in e.node.inputs)
    flip = u64 and how == ORDER
    args = [_widen(e, a, flip) for a in args]
    narrow = any(_unsigned(v) for v in e.node.outputs)  # else bool / int64 results as they are
    names = list(e.outputs)
    tmps = [e.tmp("wide") for _ in names] if narrow else names
    e.outputs[:] = tmps  # an emitter that assigns its outputs itself assigns the wide ones
    try:
        if u64 and how == VALUE:
            value = call(e.helper(U64_HELPERS[e.node.op]).id, *args)
        else:
            value = fn(e, *args, **kwargs)
    finally:
        e.outputs[:] = names
    if not narrow:
        return value
    if value is not None:
        e.stmt(e.cg.assign_outputs(tmps, value))
    outs = [_narrow(code.name(t), v.type.dtype, flip) for t, v in zip(tmps, e.node.outputs)]
    return outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Load())


def _unsigned(v: Value | None) -> DType | None:
    if v is None or not isinstance(v.type, TensorType):
        return None
    return v.type.dtype if v.type.dtype in WIDE else None


def _widen(e: Any, a: Any, flip: bool) -> Any:
    """Arg ``a`` as a fresh local of its ``WIDE`` type (top bit flipped with ``flip``)."""
    if isinstance(a, list):
        return [_widen(e, x, flip) for x in a]
    dt = None if a is None else _unsigned(a.value)
    if dt is None:
        return a
    value = expr("x.to(d)", x=a, d=WIDE[dt])
    if flip:
        value = expr("v ^ m", v=value, m=const(TOP))
    fresh = Value(a.value.name, TensorType(WIDE[dt], a.type.shape))
    e.cg.scratch_values.append(fresh)  # alive while its id keys the codegen's tables
    e.stmt(ast.Assign([ast.Name(e.bind(fresh, "wide"), ast.Store())], value))
    return type(a)(e.cg, fresh)


def _narrow(value: ast.expr, dt: DType, flip: bool) -> ast.expr:
    if dt not in WIDE:
        return value
    if flip:
        value = expr("v ^ m", v=value, m=const(TOP))
    return expr("v.to(d)", v=value, d=dt)


# ---------------------------------------------------------------- uint64 run-time helpers
# Inputs and results are int64 tensors holding uint64 bits.
def _msc_u64_div(a, b):
    """Unsigned 64-bit a // b (Hacker's Delight 9-3: halve a so the signed division is exact,
    then correct the quotient by one)."""
    top = -(2**63)
    big = b < 0  # b >= 2**63: the quotient is 1 where a >= b, else 0
    d = torch.where(big, 1, b)
    q = torch.div((a >> 1) & (2**63 - 1), d, rounding_mode="trunc") << 1
    q = q + ((a - q * d) ^ top >= d ^ top).to(torch.int64)
    return torch.where(big, (a ^ top >= b ^ top).to(torch.int64), q)


def _msc_u64_rem(a, b):
    """Unsigned 64-bit a % b."""
    return a - _msc_u64_div(a, b) * b


def _msc_u64_shr(a, s):
    """Logical right shift of 64-bit a by s in [0, 63] (int64's >> copies the sign bit)."""
    return (a >> s) & ~((-1 << (63 - s)) << 1)


def _msc_u64_abs(a):
    """Unsigned |a|: a itself (int64's abs would negate values >= 2**63)."""
    return a


def _msc_u64_sign(a):
    """Unsigned sign(a): 0 or 1 (int64's sign is -1 for values >= 2**63)."""
    return (a != 0).to(torch.int64)


def _msc_u64_pow(a, b):
    """Unsigned 64-bit a ** b modulo 2**64, by squaring over the 64 bits of b (each product
    wraps as the unsigned one does; int64's pow refuses the exponents >= 2**63)."""
    a, b = torch.broadcast_tensors(a, b)
    r, base = torch.ones_like(a), a.clone()
    for i in range(64):
        r = torch.where((b >> i) & 1 == 1, r * base, r)
        base = base * base
    return r


runtime_helpers(_msc_u64_div, _msc_u64_rem, _msc_u64_shr, _msc_u64_abs, _msc_u64_sign, _msc_u64_pow)

U64_HELPERS = {
    "div": "_msc_u64_div",
    "floor_divide": "_msc_u64_div",
    "remainder": "_msc_u64_rem",
    "fmod": "_msc_u64_rem",
    "bitshift_right": "_msc_u64_shr",
    "abs": "_msc_u64_abs",
    "sign": "_msc_u64_sign",
    "pow": "_msc_u64_pow",
}
