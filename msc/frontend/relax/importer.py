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
#   branches as such, codegen.relax one function per block type) is read inline, its parameters
#   bound to the call's arguments; a recursive call is refused. The callee's shape variables are
#   the arguments' dims, and those the arguments do not give (an unknown dim, one its
#   match_casts define) are new symbols at each call, never shared with another call.
# - Dims known only at run time: a shape variable has a source, the value whose dim it is (an
#   input's, or one ``match_cast`` binds: a tensor's dim, or an element of the int tensor a
#   ``tensor_to_shape`` read). ``Ctx.shape_value`` turns dims into an int64 tensor computed
#   from those sources, which the run-time forms of reshape, expand, full, range, slice and
#   resize take. A ``match_cast`` itself adds no node: its checks (a leading 1 that says a
#   run-time shape fits) are the VM's, not part of the model.
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
from msc.ir.types import Func, SymDim, SymExpr, TensorType

__all__ = ["CONVERTERS", "converter", "Ctx", "RelaxImporter", "ShapeValue", "Unused", "to_dtype"]

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


class ShapeValue:
    """``R.tensor_to_shape(t)``: a shape whose dims are the elements of ``t`` at run time
    (a ``match_cast`` names them)."""

    def __init__(self, tensor: Value) -> None:
        self.tensor = tensor


def _is_prim(v: Any) -> bool:
    """A shape variable (TVM's Relax and TIR variables are one class)."""
    return isinstance(getattr(v, "ty", None), tvm.ir.PrimType)


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

    def arg_type(self, i: int) -> TensorType:
        """The type Relax gives the call's ``i``-th argument (its dims named by Relax where
        msc's own inference has none: a value computed at run time)."""
        return self._imp.tensor_type(self.call.args[i].ty)

    def shape_value(self, dims: list) -> Value:
        """``dims`` (ints, shape variables, expressions of them) as a 1-d int64 tensor,
        computed at run time from the values the variables are dims of."""
        parts = [self._imp.dim_value(d) for d in dims]
        return parts[0] if len(parts) == 1 else self.op("concat", *parts, axis=0)

    def dim_scalar(self, d: Any) -> Value:
        """One dim as a 0-d int64 tensor (see ``shape_value``)."""
        return self.op("reshape", self._imp.dim_value(d), None, shape=[])

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
        # The functions being read inline, each with its shape variables' values, and the
        # symbols made for the shape variables a call defines itself.
        self._calling: list[tuple[str, dict[str, Any]]] = []
        self._call_symbols: set[str] = set()
        # Where each shape variable's run-time value comes from: ("shape", value, axis) or
        # ("elem", 1-d int tensor, index); and the tensors made of them, per graph.
        self.sources: dict[str, tuple[str, Value, int]] = {}
        self._dim_values: dict[tuple[int, str], Value] = {}

    # ------------------------------------------------------------------ types
    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        if isinstance(d, tvm.tirx.IntImm):
            return int(d.value)
        if isinstance(d, tvm.tirx.Var):
            name = str(d.name)
            if self._calling:  # a callee's shape variable: its own (a function captures none)
                local = self._calling[-1][1]
                if name not in local:  # one its arguments do not give: new at each call
                    local[name] = self._call_symbol(name)
                return local[name]
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
            tvm.tirx.Max: symexpr.maximum,
            tvm.tirx.Min: symexpr.minimum,
        }
        for kind, fn in ops.items():
            if isinstance(d, kind):
                return fn(self.dim(d.a), self.dim(d.b))
        raise Unsupported(f"shape expression {d} has no msc form")

    def _call_symbol(self, name: str) -> SymDim:
        """A symbol for a callee's shape variable first defined in one call of it, named apart
        from every other symbol (the same function called twice defines two)."""
        taken = set(self.symbols) | self._call_symbols
        base, k = name, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        self._call_symbols.add(name)
        return SymDim(name)

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
        if isinstance(expr, relax.Var) and expr not in self.env and _is_prim(expr):
            return self.dim(expr)  # a shape variable passed as a PrimValue
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
        if _is_prim(expr):  # an expression of shape variables
            return self.dim(expr)
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
            self._dims_of(p.ty, self.env[p])
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
            try:
                self.env[b.var] = self._match_cast(b)
            except _Skip:
                self.env[b.var] = _FAILED
            except Unsupported as u:
                self.env[b.var] = _FAILED
                self._fail(name, "R.match_cast", str(u))
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
        # The callee's shape variables: the arguments' dims, as Relax knows them here (the
        # caller's shape variables), else as the arguments' msc types do.
        dims: dict[str, Any] = {}
        for p, expr, a in zip(func.params, call.args, args):
            self.env[p] = a
            shape = getattr(p.ty, "shape", None)
            if not isinstance(shape, relax.ShapeExpr):
                continue
            here = getattr(getattr(expr, "ty", None), "shape", None)
            here = list(here.values) if isinstance(here, relax.ShapeExpr) else None
            known = a.type.shape if isinstance(a, Value) else None
            for k, d in enumerate(shape.values):
                if not isinstance(d, tvm.tirx.Var) or str(d.name) in dims:
                    continue
                v = None
                if here is not None and k < len(here):
                    try:
                        v = self.dim(here[k])
                    except Unsupported:
                        v = None
                if v is None and known is not None and k < len(known):
                    v = known[k]
                if v is not None:
                    dims[str(d.name)] = v
        before = len(self.unsupported)
        self._calling.append((callee, dims))
        try:
            for p, a in zip(func.params, args):  # the others are read from the arguments
                self._dims_of(p.ty, a)
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

    # ------------------------------------------------------------------ run-time dims
    def _dims_of(self, ty: Any, value: Any) -> None:
        """Record the shape variables of ``ty`` first seen here as dims of ``value``."""
        shape = getattr(ty, "shape", None)
        if not isinstance(value, Value) or not isinstance(shape, relax.ShapeExpr):
            return
        for axis, d in enumerate(shape.values):
            if isinstance(d, tvm.tirx.Var):
                self.sources.setdefault(self._symbol_name(d), ("shape", value, axis))

    def _symbol_name(self, d: Any) -> str:
        """The name of the symbol shape variable ``d`` is here (a callee's: of this call)."""
        s = self.dim(d)
        return s.name if isinstance(s, SymDim) else str(d.name)

    def _match_cast(self, b: Any) -> Any:
        """The value ``match_cast`` binds: its input, unchanged (the cast only names dims and
        checks them); new shape variables get their sources."""
        value = self.read(b.value)
        ty = b.ty
        if isinstance(value, ShapeValue):
            ctx_values = getattr(ty, "values", None)
            if ctx_values is None:
                raise Unsupported("a match_cast of a shape to a shape of unknown rank")
            for i, d in enumerate(ctx_values):
                if isinstance(d, tvm.tirx.Var):
                    self.sources.setdefault(self._symbol_name(d), ("elem", value.tensor, i))
            return value
        if not isinstance(value, Value):
            raise Unsupported(f"a match_cast of a {type(value).__name__}")
        self._dims_of(ty, value)
        return value

    def dim_value(self, d: Any) -> Value:
        """``d`` as an i64[1] tensor of the graph being built (see Ctx.shape_value)."""
        key = (id(self.graph), symexpr.spell(d) if not isinstance(d, int) else str(d))
        if key not in self._dim_values:
            self._dim_values[key] = self._dim_value(d)
        return self._dim_values[key]

    def _node(self, op: str, *inputs: Any, **attrs: Any) -> Value:
        node = self.graph.add_node(op, list(inputs), attrs, name=self.fresh("dim"))
        return node.outputs[0]

    def _dim_value(self, d: Any) -> Value:
        if isinstance(d, int):
            return self._node("constant", value=np.asarray([d], np.int64))
        if isinstance(d, SymDim):
            src = self.sources.get(d.name)
            if src is None:
                raise Unsupported(f"the run-time value of dim {d.name} (no tensor has it)")
            kind, v, i = src
            if kind == "shape":
                return self._node("shape", v, start=i, end=i + 1)
            t = self._node("slice", v, starts=[i], ends=[i + 1], axes=[0], steps=[1])
            return t if v.type.dtype == DType.INT64 else self._node("cast", t, to=DType.INT64)
        if isinstance(d, SymExpr):
            total = None
            for mono, coef in d.terms:
                term = self.dim_value(coef) if coef != 1 or not mono else None
                for atom in mono:
                    a = self._atom_value(atom)
                    term = a if term is None else self._node("mul", term, a)
                total = term if total is None else self._node("add", total, term)
            return total if total is not None else self.dim_value(0)
        raise Unsupported(f"the run-time value of dim {d}")

    def _atom_value(self, atom: Any) -> Value:
        if isinstance(atom, Func):
            fns = {"floordiv": "floor_divide", "min": "minimum", "max": "maximum"}
            op = fns.get(atom.op)
            if op is None or len(atom.args) < 2:
                raise Unsupported(f"the run-time value of {atom}")
            out = self.dim_value(atom.args[0])
            for a in atom.args[1:]:
                out = self._node(op, out, self.dim_value(a))
            return out
        return self.dim_value(atom)

    def _fail(self, name: str, op: str, reason: str) -> None:
        self.unsupported.append(UnsupportedOp(op, name, "", reason))
