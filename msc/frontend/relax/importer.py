"""A Relax function -> msc Graph.

# NOTE: invariants
# - ``main``'s first ``num_input`` parameters (all of them without the attribute) are the graph
#   inputs; the others are weights (role "parameter"), with the data of the ``params``
#   attribute when the module carries it, else type-only. Array constants bound in the body
#   become weights of role "constant" named ``const<k>``; scalar constants become
#   ``constant`` nodes (a scalar bound to a variable of its own: one named as the variable,
#   with provenance op ``relax.const``, which codegen.relax binds again).
# - Each call goes through the converter registered for its Relax op name; call_tir,
#   call_dps_packed, calls of what is not a Relax function of the module, and ops without a
#   converter (in the body, a branch or a function read inline) are collected and
#   raised at once as UnsupportedOpsError, with the binding's variable name as the node name.
# - Shape variables become SymDims named as the variable, with the function's
#   ``tir_var_lower_bound`` / ``tir_var_upper_bound`` as their range.
# - Tuples and TupleGetItem are resolved here (no node); the returned value's nesting becomes
#   ``graph.output_tree``.
# - A ``relax.If`` becomes an ``if`` node whose branches are subgraphs read like the body (their
#   nodes read outer values by reference; an outer value a branch returns as it is goes through
#   an ``identity``); a branch that returns a tuple gives the node one output per field.
#   Weights (bound array constants) always go to the top graph.
# - A call of another Relax function of the module (TVM's torch frontend writes torch.cond's
#   branches as such) is read inline, its parameters bound to the call's arguments; a recursive
#   call is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax

from msc.errors import ConversionError, Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.ir import symexpr
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Provenance, Value
from msc.ir.registry import Registry
from msc.ir.types import SymDim, TensorType

__all__ = ["CONVERTERS", "converter", "Ctx", "RelaxImporter", "Unused", "to_dtype"]

CONVERTERS: Registry[str, Callable[..., Any]] = Registry("relax converter")
converter = CONVERTERS

_DTYPES = {
    "bool": DType.BOOL,
    "int8": DType.INT8,
    "int16": DType.INT16,
    "int32": DType.INT32,
    "int64": DType.INT64,
    "uint8": DType.UINT8,
    "uint16": DType.UINT16,
    "uint32": DType.UINT32,
    "uint64": DType.UINT64,
    "float16": DType.FLOAT16,
    "bfloat16": DType.BFLOAT16,
    "float32": DType.FLOAT32,
    "float64": DType.FLOAT64,
}


def to_dtype(dt: Any) -> DType:
    """An msc dtype for a Relax dtype (a string or PrimType)."""
    s = str(dt)
    if s not in _DTYPES:
        raise Unsupported(f"dtype {s} has no msc equivalent here")
    return _DTYPES[s]


class Unused:
    """An output of a Relax op that its canonical op does not have (batch_norm's updated
    statistics); reading it is an error naming it."""

    def __init__(self, what: str) -> None:
        self.what = what


class _Skip(Exception):
    """A binding reads a value whose own binding was reported unsupported."""


_FAILED = object()


class Ctx:
    """What a converter builds through: the graph, the call's provenance and its inputs.

    Converters receive the call's arguments already read (``Value`` for tensors, Python
    ints/floats for PrimValues and shapes, lists for tuples) and the call's attrs object.
    """

    def __init__(self, importer: RelaxImporter, call: relax.Call, name: str) -> None:
        self._imp = importer
        self.call = call
        self.name = name
        self.prov = Provenance("relax", str(call.op.name), name)

    def op(self, op: str, *inputs: Value | None, **attrs: Any) -> Value:
        """One canonical node; returns its (first) output."""
        return self.multi(op, *inputs, **attrs)[0]

    def multi(self, op: str, *inputs: Value | None, **attrs: Any) -> tuple[Value, ...]:
        g = self._imp.graph
        node = g.add_node(
            op, list(inputs), attrs, name=self._imp.fresh(self.name), provenance=self.prov
        )
        return node.outputs

    def scalar(self, value: Any, dtype: DType) -> Value:
        """A 0-d ``constant`` node."""
        return self.op("constant", value=np.asarray(value, dtype=dtype.to_numpy()))

    def out_type(self) -> TensorType:
        return self._imp.tensor_type(self.call.ty)

    def require(self, cond: bool, reason: str) -> None:
        if not cond:
            raise Unsupported(reason)


class RelaxImporter:
    """One translation of a Relax function into a Graph."""

    def __init__(self, mod: Any, function: str = "main") -> None:
        self.mod = None
        if isinstance(mod, relax.Function):
            func = mod
        else:
            self.mod = mod
            names = [gv.name_hint for gv in mod.functions]
            if function not in names:
                raise ConversionError(f"the module has no function {function!r} (has {names})")
            func = mod[function]
            if not isinstance(func, relax.Function):
                raise ConversionError(f"{function!r} is not a Relax function")
        self.func = func
        self.graph = Graph(function)
        self.root = self.graph  # self.graph is a branch's subgraph while one is read
        self.env: dict[Any, Any] = {}
        self.symbols: dict[str, SymDim] = {}
        attrs = func.attrs or {}
        self.lower = dict(attrs["tir_var_lower_bound"]) if "tir_var_lower_bound" in attrs else {}
        self.upper = dict(attrs["tir_var_upper_bound"]) if "tir_var_upper_bound" in attrs else {}
        self.unsupported: list[UnsupportedOp] = []
        self._names: set[str] = set()
        self._consts = 0
        # The functions being read inline, each with its shape variables' values.
        self._calling: list[tuple[str, dict[str, Any]]] = []

    # ------------------------------------------------------------------ types
    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        if isinstance(d, tvm.tirx.IntImm):
            return int(d.value)
        if isinstance(d, tvm.tirx.Var):
            name = str(d.name)
            if self._calling and name in self._calling[-1][1]:  # a callee's own shape variable
                return self._calling[-1][1][name]
            if name not in self.symbols:
                lo = self.lower.get(name)
                hi = self.upper.get(name)
                self.symbols[name] = SymDim(
                    name, None if lo is None else int(lo), None if hi is None else int(hi)
                )
            return self.symbols[name]
        ops = {
            tvm.tirx.Add: symexpr.add,
            tvm.tirx.Sub: symexpr.sub,
            tvm.tirx.Mul: symexpr.mul,
            tvm.tirx.FloorDiv: symexpr.floordiv,
            tvm.tirx.FloorMod: symexpr.mod,
        }
        for kind, fn in ops.items():
            if isinstance(d, kind):
                return fn(self.dim(d.a), self.dim(d.b))
        raise Unsupported(f"shape expression {d} has no msc form")

    def tensor_type(self, ty: Any) -> TensorType:
        if not isinstance(ty, relax.TensorType):
            raise Unsupported(f"a value of type {ty} (msc values are tensors)")
        dtype = to_dtype(ty.dtype)
        shape = ty.shape
        if shape is None or not isinstance(shape, relax.ShapeExpr):
            if int(ty.ndim) < 0:
                return TensorType(dtype, None)
            return TensorType(dtype, [None] * int(ty.ndim))
        return TensorType(dtype, [self.dim(d) for d in shape.values])

    # ------------------------------------------------------------------ values
    def fresh(self, hint: str) -> str:
        name, k = hint or "v", 0
        while name in self._names:
            k += 1
            name = f"{hint}_{k}"
        self._names.add(name)
        return name

    def read(self, expr: Any) -> Any:
        """A Relax argument as a converter sees it."""
        if isinstance(expr, tvm.tirx.IntImm | tvm.tirx.FloatImm):  # a PrimValue
            return expr.value
        if isinstance(expr, relax.Var):
            if expr not in self.env:
                raise Unsupported(f"variable {expr.name} is not bound")
            value = self.env[expr]
            if value is _FAILED:
                raise _Skip
            if isinstance(value, Unused):
                raise Unsupported(f"{value.what} is used (msc's op has no such output)")
            return value
        if isinstance(expr, tvm.tirx.Var):
            return self.dim(expr)
        if isinstance(expr, tvm.ir.GenericConst):
            arr = expr.value.numpy()
            if arr.ndim == 0:
                node = self.graph.add_node("constant", [], {"value": arr}, name=self.fresh("const"))
                return node.outputs[0]
            name = self.fresh(f"const{self._consts}")
            self._consts += 1
            return self.root.add_weight(name, np.array(arr), role="constant")
        if isinstance(expr, relax.Tuple):
            return [self.read(f) for f in expr.fields]
        if isinstance(expr, relax.TupleGetItem):
            return self.read(expr.tuple_value)[int(expr.index)]  # an Unused stays lazy
        if isinstance(expr, relax.ShapeExpr):
            return [self.dim(d) for d in expr.values]
        if isinstance(expr, tvm.ir.StringImm):
            return str(expr.value)
        raise Unsupported(f"argument {type(expr).__name__}")

    # ------------------------------------------------------------------ driver
    def run(self) -> Graph:
        func, g = self.func, self.graph
        attrs = func.attrs or {}
        num_input = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
        data = list(attrs["params"]) if "params" in attrs else None
        for i, p in enumerate(func.params):
            t = self.tensor_type(p.ty)
            name = self.fresh(p.name)
            if i < num_input:
                self.env[p] = g.add_input(name, t)
            else:
                arr = None
                if data is not None and i - num_input < len(data):
                    arr = np.array(data[i - num_input].numpy())
                self.env[p] = g.add_weight(name, arr, t, role="parameter")
        body = func.body
        if not isinstance(body, relax.SeqExpr):
            raise ConversionError("the function body is not a sequence of blocks")
        for block in body.blocks:
            for b in block.bindings:
                self.bind(b)
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what=f"Relax function {g.name!r}")
        out = self.read(body.body)
        flat: list[Value] = []
        tree = self._tree(out, flat)
        g.set_outputs(flat)
        if not isinstance(out, Value):
            g.output_tree = tree
        return g.validate()

    def _tree(self, out: Any, flat: list[Value]) -> Any:
        if isinstance(out, list):
            return {"tuple": [self._tree(o, flat) for o in out]}
        flat.append(out)
        return {"leaf": len(flat) - 1}

    def bind(self, b: Any) -> None:
        name = b.var.name
        if isinstance(b, relax.MatchCast):
            self._fail(name, "R.match_cast", "match_cast has no msc form")
            return
        value = b.value
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            op = str(value.op.name)
            fn = CONVERTERS.get(op)
            if fn is None:
                reason = (
                    "a call into lowered TIR or a packed function has no canonical op"
                    if op in ("relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed")
                    else "no converter"
                )
                self._fail(name, op, reason)
                self.env[b.var] = _FAILED
                return
            try:
                args = [self.read(a) for a in value.args]
                out = fn(Ctx(self, value, name), *args, attrs=value.attrs)
            except _Skip:
                self.env[b.var] = _FAILED
                return
            except Unsupported as u:
                self._fail(name, op, str(u))
                self.env[b.var] = _FAILED
                return
            self.env[b.var] = list(out) if isinstance(out, tuple) else out
            return
        if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar):
            callee = str(value.op.name_hint)
            try:
                self.env[b.var] = self._call(value, callee)
            except _Skip:
                self.env[b.var] = _FAILED
            except Unsupported as u:
                self.env[b.var] = _FAILED
                self._fail(name, callee, str(u))
            return
        self.env[b.var] = _FAILED
        if isinstance(value, relax.Call):
            self._fail(name, str(value.op), "a call of a value that is not a Relax function")
            return
        if isinstance(value, relax.If):
            try:
                self.env[b.var] = self._if(value, name)
            except _Skip:
                pass
            except Unsupported as u:
                self._fail(name, "relax.If", str(u))
            return
        if isinstance(value, tvm.ir.GenericConst) and value.value.numpy().ndim == 0:
            # A scalar bound on its own: a named constant node that codegen.relax binds again.
            arr = value.value.numpy()
            prov = Provenance("relax", "relax.const", name)
            node = self.graph.add_node(
                "constant", [], {"value": arr}, name=self.fresh(name), provenance=prov
            )
            self.env[b.var] = node.outputs[0]
            return
        try:
            self.env[b.var] = self.read(value)
        except _Skip:
            pass
        except Unsupported as u:
            self._fail(name, type(value).__name__, str(u))

    def _call(self, call: relax.Call, callee: str) -> Any:
        """The result of a module function called here, its body read inline."""
        func = self.mod[callee] if self.mod is not None and callee in self._functions() else None
        if not isinstance(func, relax.Function):
            raise Unsupported(f"a call of {callee}, which is not a Relax function of the module")
        if callee in [c for c, _ in self._calling]:
            raise Unsupported(f"a recursive call of {callee} (a loop) has no msc form yet")
        if not isinstance(func.body, relax.SeqExpr):
            raise Unsupported(f"the body of {callee} is not a sequence of blocks")
        args = [self.read(a) for a in call.args]
        if len(args) != len(func.params):
            raise Unsupported(f"{callee} takes {len(func.params)} arguments, given {len(args)}")
        dims: dict[str, Any] = {}  # the callee's shape variables: the arguments' dims
        for p, a in zip(func.params, args):
            self.env[p] = a
            shape = getattr(p.ty, "shape", None)
            if isinstance(a, Value) and isinstance(shape, relax.ShapeExpr) and a.type.shape:
                for d, v in zip(shape.values, a.type.shape):
                    if isinstance(d, tvm.tirx.Var):
                        dims.setdefault(str(d.name), v)
        before = len(self.unsupported)
        self._calling.append((callee, dims))
        try:
            for block in func.body.blocks:
                for b in block.bindings:
                    self.bind(b)
        finally:
            self._calling.pop()
        if len(self.unsupported) > before:
            raise Unsupported(f"{callee} has unsupported bindings (reported above)")
        return self.read(func.body.body)

    def _functions(self) -> list[str]:
        return [gv.name_hint for gv in self.mod.functions]

    def _if(self, expr: relax.If, name: str) -> Value | list[Value]:
        cond = self.read(expr.cond)
        try:
            then_g, tuple_out = self._branch(expr.true_branch, f"{name}.then")
        except Unsupported:
            self._branch(expr.false_branch, f"{name}.else")  # so its problems are reported too
            raise
        else_g, _ = self._branch(expr.false_branch, f"{name}.else")
        node = self.graph.add_node(
            "if",
            [cond],
            {"then_branch": then_g, "else_branch": else_g},
            name=self.fresh(name),
            provenance=Provenance("relax", "relax.If", name),
        )
        return list(node.outputs) if tuple_out else node.outputs[0]

    def _branch(self, seq: Any, name: str) -> tuple[Graph, bool]:
        """A branch (a SeqExpr) as a subgraph, and whether it returns a tuple.

        Raises:
            Unsupported: the branch has bindings that were reported (or is not a SeqExpr).
        """
        if not isinstance(seq, relax.SeqExpr):
            raise Unsupported(f"a branch that is a {type(seq).__name__}, not a sequence")
        outer, before = self.graph, len(self.unsupported)
        sub = self.graph = Graph(name)
        try:
            for block in seq.blocks:
                for b in block.bindings:
                    self.bind(b)
            if len(self.unsupported) > before:
                raise Unsupported(f"branch {name} has unsupported bindings (reported above)")
            out = self.read(seq.body)
        finally:
            self.graph = outer
        tuple_out = isinstance(out, list)
        local = {v for n in sub.nodes for v in n.outputs}
        outs = []
        for v in out if tuple_out else [out]:
            if not isinstance(v, Value):
                raise Unsupported(f"branch {name} returns a nested tuple")
            if v not in local:  # an outer value returned as it is: a node of the branch
                v = sub.add_node("identity", [v], {}, name=self.fresh(f"{name}.out")).outputs[0]
            outs.append(v)
        sub.set_outputs(outs)
        return sub, tuple_out

    def _fail(self, name: str, op: str, reason: str) -> None:
        self.unsupported.append(UnsupportedOp(op, name, "", reason))
