"""Small pieces shared by the emitter families."""

from __future__ import annotations

import ast
from typing import Any

from msc.ir.dtype import DType

__all__ = [
    "scalar_for",
    "norm_axis",
    "torch_pads",
    "symmetric",
    "fn_nd",
    "operands",
    "helper_call",
    "forward_to_helper",
    "int_list",
    "int_scalar",
]


def scalar_for(dt: DType, v: float) -> Any:
    """``v`` as the Python scalar that keeps a tensor of ``dt`` in its dtype."""
    if dt is DType.BOOL:
        return bool(v)
    if (dt.is_integer) and float(v).is_integer():
        return int(v)
    return float(v)


def norm_axis(a: int, rank: int) -> int:
    return a % rank if rank else 0


def torch_pads(pads: tuple[int, ...]) -> list[int]:
    """ONNX-ordered pads [b0, b1, ..., e0, e1, ...] in F.pad's order (last dim first)."""
    n = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(n)):
        out += [pads[i], pads[n + i]]
    return out


def symmetric(pads: tuple[int, ...], n: int) -> tuple[int, ...] | None:
    """Per-dim padding when begins equal ends (torch's conv/pool padding), else None."""
    if not pads:
        return (0,) * n
    if tuple(pads[:n]) != tuple(pads[n:]):
        return None
    return tuple(pads[:n])


def fn_nd(prefix: str, n: int) -> str | None:
    """``F.conv2d`` style name for n spatial dims (1 to 3), else None."""
    return f"{prefix}{n}d" if 1 <= n <= 3 else None


def operands(a: Any, b: Any) -> tuple[ast.expr, ast.expr, bool]:
    """Code for the two operands of a binary operator, and whether the result is a Python
    value.

    A scalar (0-d constant or size) next to a tensor is written as a Python scalar, which
    torch takes without changing the dtype (both have the tensor's dtype category). Two
    integer scalars, one of them a size, compute in Python (sizes stay SymInts when traced).
    Anything else is tensor op tensor.
    """
    if not a.is_scalar and not b.is_scalar:
        return a.expr, b.expr, False
    if not a.is_scalar:
        return a.expr, b.s, False
    if not b.is_scalar:
        return a.s, b.expr, False
    if (a.is_py or b.is_py) and a.dtype.is_integer:
        return a.s, b.s, True
    return a.expr, b.expr, False


def helper_call(e: Any, name: str, *args: Any, **kwargs: Any) -> ast.expr:
    """A call of the run-time helper ``name`` (pasted into the generated module)."""
    from codegen.torch.code import call

    return call(e.helper(name).id, *args, **kwargs)


def forward_to_helper(name: str, family: str) -> Any:
    """An emitter for an op that one run-time helper computes: it calls ``name`` with the
    node's inputs (None for absent optional ones), then its attributes, in schema order.
    ``family`` is the registering module (``__name__``), where the emitter is said to live."""

    def emit(e: Any, *inputs: Any, **attrs: Any) -> ast.expr:
        from msc.ops import registry as ops

        n = len(ops.get(e.node.op).inputs)
        return helper_call(e, name, *inputs, *[None] * (n - len(inputs)), *attrs.values())

    emit.__name__ = emit.__qualname__ = f"emit{name}"
    emit.__module__ = family
    return emit


def int_list(a: Any) -> ast.expr:
    """A run-time 1-d integer input (axes, pads, repeats, sizes) as a Python list of ints: a
    literal when it is constant, the Python value when the graph computed it from shapes,
    else the tensor's ``.tolist()``."""
    from codegen.torch.code import const, expr

    if a.is_py and a.rank == 1:
        return a.s
    lit = a.literal
    if lit is not None and a.rank == 1:
        return const([int(v) for v in lit])
    return expr("v.reshape(-1).tolist()", v=a)


def int_scalar(a: Any) -> ast.expr:
    """A run-time integer scalar input (k, axis, depth, size) as a Python int."""
    from codegen.torch.code import const, expr

    lit = a.literal
    if lit is not None and a.rank == 0:
        return const(int(lit))
    if a.is_py and a.rank == 0:
        return a.s
    return expr("int(v)", v=a)
