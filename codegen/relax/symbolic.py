"""The values of small integer tensors that are computed from shapes, as PrimExprs.

Exporters compute reshape targets and sizes with tensors: ``Shape``, ``Slice``, ``Concat``
with constants, ``Where`` over a constant mask (ONNX Reshape's zeros made explicit). Read at
run time, such a target gives fresh dims that Relax cannot relate to the input's (TVM's
RewriteDataflowReshape then fails on the reshape of a symbolic length), though every element
follows from dims Relax knows. ``values`` evaluates the bindings behind a 1-d / 0-d integer
tensor to one PrimExpr per element, or None when one depends on data.

# NOTE: integers here are mathematical (shape products do not wrap): ``astype`` to a float
# keeps the integer, so the float64 product checks of Emit.ints are proven like the int64
# ones. Only tensors of at most ``MAX_ELEMENTS`` elements are evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx

MAX_ELEMENTS = 64

Vals = list[Any]  # PrimExprs (int64 or bool), one per element; 0-d: one


def _imm(v: Any) -> Any:
    if isinstance(v, bool | np.bool_):
        return tirx.IntImm("bool", int(v))
    return tirx.IntImm("int64", int(v))


def _dtype(v: Any) -> str:
    return str(v.ty)


def _b(fn: Callable[[Any, Any], Any]) -> Callable[[Vals, Vals], Vals | None]:
    def apply(a: Vals, b: Vals) -> Vals | None:
        if len(a) != len(b) and 1 not in (len(a), len(b)):
            return None
        n = max(len(a), len(b))
        return [fn(a[i % len(a)], b[i % len(b)]) for i in range(n)]

    return apply


def _where(c: Vals, a: Vals, b: Vals, select: Callable[[Any, Any, Any], Any]) -> Vals | None:
    n = max(len(c), len(a), len(b))
    if any(len(v) not in (1, n) for v in (c, a, b)):
        return None
    return [select(c[i % len(c)], a[i % len(a)], b[i % len(b)]) for i in range(n)]


def _prod(a: Vals) -> Vals:
    out = _imm(1)
    for v in a:
        out = out * v
    return [out]


def _sum(a: Vals) -> Vals:
    out = _imm(0)
    for v in a:
        out = out + (tirx.Cast("int64", v) if _dtype(v) == "bool" else v)
    return [out]


def _astype(a: Vals, dtype: str) -> Vals | None:
    if dtype == "bool":
        return [tirx.NE(v, _imm(0)) if _dtype(v) != "bool" else v for v in a]
    if dtype.startswith(("int", "float")):  # mathematical integers (see the NOTE)
        return [tirx.Cast("int64", v) if _dtype(v) == "bool" else v for v in a]
    return None


_BINARY = {
    "relax.add": _b(lambda a, b: a + b),
    "relax.subtract": _b(lambda a, b: a - b),
    "relax.multiply": _b(lambda a, b: a * b),
    "relax.floor_divide": _b(tirx.floordiv),
    "relax.floor_mod": _b(tirx.floormod),
    "relax.maximum": _b(tirx.max),
    "relax.minimum": _b(tirx.min),
    "relax.equal": _b(tirx.EQ),
    "relax.not_equal": _b(tirx.NE),
    "relax.less": _b(tirx.LT),
    "relax.less_equal": _b(tirx.LE),
    "relax.greater": _b(tirx.GT),
    "relax.greater_equal": _b(tirx.GE),
    "relax.logical_and": _b(tirx.And),
    "relax.logical_or": _b(tirx.Or),
}


def _ints(t: Any) -> list[int] | None:
    """A tuple / shape of static ints (strided_slice's axes, begins, ends, strides)."""
    items = t.values if isinstance(t, relax.ShapeExpr) else getattr(t, "fields", None)
    if items is None:
        return None
    out = []
    for v in items:
        if not isinstance(v, tirx.IntImm):
            return None
        out.append(int(v))
    return out


class Values:
    """Evaluates integer tensors bound in ``bb`` (see the module docstring)."""

    def __init__(
        self, bb: relax.BlockBuilder, known: list[tuple[relax.Var, Vals]] | None = None
    ) -> None:
        self.bb = bb
        # The values of variables bound nowhere in ``bb`` (a block function's parameters whose
        # every call passes them: codegen.relax.blocks).
        self.known = known or []
        self.analyzer = tvm.sym.Analyzer()
        self._bounded: set[Any] = set()

    def values(self, x: relax.Expr) -> Vals | None:
        """One PrimExpr per element of the 0-d / 1-d tensor ``x``, simplified; or None."""
        vals = self._eval(x)
        return None if vals is None else [self.simplify(v) for v in vals]

    def simplify(self, v: Any) -> Any:
        for var in tirx.analysis.undefined_vars(v):
            if var not in self._bounded:  # shape symbols are sizes: >= 0
                self._bounded.add(var)
                self.analyzer.update(var, tvm.sym.ConstIntBound(0, tvm.sym.ConstIntBound.POS_INF))
        return self.analyzer.simplify(v)

    def select(self, c: Any, a: Any, b: Any) -> Any:
        """``c ? a : b``, as ``b`` when ``a`` equals it wherever ``c`` holds: ONNX Reshape's
        zeros made explicit pick x's dim where the target's is 0, which a target read from
        the shape it replaces (``n == 0 ? n * k : n``) gives back unchanged."""
        c, a, b = self.simplify(c), self.simplify(a), self.simplify(b)
        with self.analyzer.constraint_scope(c):
            same = self.analyzer.can_prove_equal(a, b)
        return b if same else tirx.Select(c, a, b)

    def proven(self, valid: relax.Expr) -> bool:
        """Whether every element of the bool tensor ``valid`` is provably true."""
        vals = self._eval(valid)
        return vals is not None and all(self.analyzer.can_prove(self.simplify(v)) for v in vals)

    def _eval(self, x: relax.Expr) -> Vals | None:
        if isinstance(x, relax.Var):
            bound = self.bb.lookup_binding(x)
            if bound is None:
                return next((list(v) for k, v in self.known if k.same_as(x)), None)
            return self._eval(bound)
        try:
            ty = x.ty
        except (AttributeError, ValueError, tvm.error.TVMError):  # not normalized yet
            ty = None
        if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
            dims = ty.shape.values
            if len(dims) > 1 or any(not isinstance(d, tirx.IntImm) for d in dims):
                return None
            if dims and int(dims[0]) > MAX_ELEMENTS:
                return None
        if isinstance(x, tvm.ir.GenericConst):
            arr = x.value.numpy()
            if arr.ndim > 1 or arr.size > MAX_ELEMENTS or arr.dtype.kind not in "iub":
                return None
            return [_imm(v) for v in arr.reshape(-1)]
        if not isinstance(x, relax.Call) or not isinstance(x.op, tvm.ir.Op):
            return None
        op, args = x.op.name, list(x.args)
        if op == "relax.shape_to_tensor":
            sh = args[0].ty
            vals = getattr(sh, "values", None)
            return None if vals is None else list(vals)
        if op in _BINARY:
            a, b = self._eval(args[0]), self._eval(args[1])
            return None if a is None or b is None else _BINARY[op](a, b)
        if op == "relax.where":
            c, a, b = (self._eval(v) for v in args)
            return None if c is None or a is None or b is None else _where(c, a, b, self.select)
        if op == "relax.logical_not":
            a = self._eval(args[0])
            return None if a is None else [tirx.Not(v) for v in a]
        if op in ("relax.reshape", "relax.expand_dims", "relax.squeeze"):
            return self._eval(args[0])  # 0-d / 1-d to 0-d / 1-d: the same elements
        if op == "relax.astype":
            a = self._eval(args[0])
            return None if a is None else _astype(a, str(x.attrs.dtype))
        if op in ("relax.prod", "relax.sum"):
            a = self._eval(args[0])
            return None if a is None else (_prod(a) if op == "relax.prod" else _sum(a))
        if op == "relax.concat":
            parts = [self._eval(v) for v in args[0].fields]
            return None if any(p is None for p in parts) else [v for p in parts for v in p]
        if op == "relax.strided_slice":
            a = self._eval(args[0])
            axes, begin, end = (_ints(v) for v in args[1:4])
            step = _ints(args[4]) if len(args) > 4 else [1]
            if a is None or axes != [0] or begin is None or end is None or step is None:
                return None
            return a[slice(begin[0], end[0], step[0])]
        if op == "relax.take" and int(x.attrs.axis) == 0:
            a, i = self._eval(args[0]), self._eval(args[1])
            if a is None or i is None or not all(isinstance(v, tirx.IntImm) for v in i):
                return None
            n = len(a)
            return [a[int(v) % n] for v in i] if n else None
        return None
