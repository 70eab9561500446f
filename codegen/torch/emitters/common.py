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


def size_elements(v: Any, depth: int = 0) -> list[Any] | None:
    """What the graph says statically about each element of ``v``, a 0-d or 1-d integer
    value computed from shapes: an int (a literal, or a static dim read from a shape), the
    symbol of a dim read from a shape (``SymDim``/``SymExpr``), or None where it is only known
    at run time. None when the number of elements is not static."""
    t = v.type
    if t.shape is None or len(t.shape) > 1 or not t.dtype.is_integer:
        return None
    n = t.shape[0] if t.shape else 1
    if not isinstance(n, int):
        return None
    unknown: list[Any] = [None] * n
    p = v.producer
    if p is None or depth > 64:
        return unknown
    ins = p.inputs

    def of(u: Any) -> list[Any] | None:
        return None if u is None else size_elements(u, depth + 1)

    got: list[Any] | None = None
    if p.op == "constant":
        got = [int(x) for x in p.attrs["value"].reshape(-1)]
    elif p.op == "shape" and ins[0] is not None and ins[0].type.shape is not None:
        got = list(ins[0].type.shape[p.attrs["start"] : p.attrs["end"]])
    elif p.op in ("squeeze", "unsqueeze", "reshape", "cast", "identity") and len(p.outputs) == 1:
        got = of(ins[0])
    elif p.op == "concat" and all(u is not None for u in ins):
        parts = [of(u) for u in ins]
        got = None if any(x is None for x in parts) else [d for x in parts for d in x]  # type: ignore[union-attr]
    elif p.op == "gather" and p.attrs.get("axis") in (0, -1) and len(ins) == 2:
        src = of(ins[0])
        c = ins[1].producer if ins[1] is not None else None
        if src is not None and c is not None and c.op == "constant":
            idx = [int(i) for i in c.attrs["value"].reshape(-1)]
            if all(-len(src) <= i < len(src) for i in idx):
                got = [src[i] for i in idx]
    elif p.op == "slice" and p.attrs.get("starts") is not None and _one_axis(p.attrs["axes"]):
        src = of(ins[0])
        steps = p.attrs.get("steps") or (1,)
        if src is not None:
            got = src[slice(p.attrs["starts"][0], p.attrs["ends"][0], steps[0])]
    elif p.op == "where" and len(ins) == 3 and all(u is not None for u in ins):
        cond, a, b = static_bools(ins[0]), of(ins[1]), of(ins[2])
        if cond is not None and a is not None and b is not None:
            cond, a, b = (_widen(x, n) for x in (cond, a, b))
            if cond is not None and a is not None and b is not None:
                got = [None if c is None else x if c else y for c, x, y in zip(cond, a, b)]
    return got if got is not None and len(got) == n else unknown


def _one_axis(axes: Any) -> bool:
    """A slice of a 1-d value: along axis 0 (or -1) only."""
    return axes is not None and tuple(axes) in ((0,), (-1,))


def _widen(items: list[Any], n: int) -> list[Any] | None:
    """A one-element list broadcast to ``n``; a list of ``n`` as it is; else None."""
    return items * n if len(items) == 1 else items if len(items) == n else None


def static_bools(v: Any) -> list[bool | None] | None:
    """Each element of ``v``, a 1-d (or 0-d) comparison of sizes (``eq`` / ``ne``), where the
    graph decides it: exporters test a shape for -1 or 0, which a size never is. None for an
    element only known at run time; None when ``v`` is no such comparison."""
    p = v.producer
    t = v.type
    if p is None or p.op not in ("eq", "ne") or t.shape is None or len(t.shape) > 1:
        return None
    n = t.shape[0] if t.shape else 1
    if not isinstance(n, int) or any(u is None for u in p.inputs):
        return None
    a, b = (size_elements(u) for u in p.inputs)
    if a is None or b is None:
        return None
    a, b = _widen(a, n), _widen(b, n)
    if a is None or b is None:
        return None
    same = [_same_size(x, y) for x, y in zip(a, b)]
    if p.op == "ne":
        return [None if s is None else not s for s in same]
    return same


def _same_size(a: Any, b: Any) -> bool | None:
    """Are two sizes equal: True, False, or None when only the run time knows."""
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int):
        a, b = b, a
    if isinstance(b, int):  # a symbol against a literal
        lo, hi = getattr(a, "min", None), getattr(a, "max", None)
        if b < 0 or (lo is not None and b < lo) or (hi is not None and b > hi):
            return False
        return None
    if getattr(a, "name", None) is not None and getattr(a, "name", None) == getattr(b, "name", 0):
        return True
    return None
