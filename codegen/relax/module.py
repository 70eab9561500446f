"""msc Graph -> ``tvm.IRModule``: Relax function ``main``, and one private function per block
type of the source's module hierarchy (codegen.relax.blocks; none with ``flat=True``).

# NOTE: invariants
# - ``main``'s parameters are the graph inputs (their names), then, with ``params="inputs"``,
#   the weights whose role is "parameter" (or unknown), with the ``num_input`` and ``params``
#   function attributes TVM's frontends write; buffers and constants (and every weight with
#   ``params="bound"``) are bound as ``relax.Constant``s where they are used.
# - ``main``'s top-level nodes are emitted in graph order; the nodes of a block are one call of
#   its type's function (codegen.relax.blocks), unless ``flat``. A block function's array
#   constants become its parameters in the script form (``lift_constants``), passed by its
#   calls, so ``main`` lifts each once.
# - The body is one dataflow block, unless the graph holds control flow (relax.If may not sit
#   in a dataflow block). One output is returned bare when the source returned it bare (no
#   output tree); otherwise the flat outputs are returned as a tuple.
# - A loop or scan is a private recursive function ``loop<k>`` beside ``main`` whose body is a
#   relax.If (run the body and call itself, or return); the outer values its body reads are
#   passed as parameters, since a module-level function captures nothing.
# - Symbolic dims are int64 ``tirx.Var``s named after the msc symbol, one per name; their
#   ranges become the ``tir_var_lower_bound`` / ``tir_var_upper_bound`` function attributes.
# - Each canonical node goes through its emitter; if there is none, or it raises
#   ``Unsupported``, through its decomposition (recursively). Every node that can go neither
#   way, and every custom op, is collected and raised at once as UnsupportedOpsError.
"""

from __future__ import annotations

import itertools
import keyword
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from codegen.relax.blocks import BlockFunctions
from codegen.relax.registry import EMITTERS as default_emitters
from codegen.relax.registry import Emit, EmitterRegistry, Unsupported, relax_dtype
from msc.errors import ConversionError, NonNumericValuesError, UnsupportedOp, UnsupportedOpsError
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import Func, SymDim, SymExpr, TensorType
from msc.ir.validate import non_numeric_values
from msc.ops.custom import parse_custom
from msc.ops.decompose import DecompositionRegistry, NotDecomposable
from msc.ops.decompose import registry as default_decompositions
from msc.ops.layout import channels_first

__all__ = ["RelaxBuilder", "PARAMS"]

PARAMS = ("inputs", "bound")
_CONTROL = {"if", "loop", "scan"}


def _has_control(g: Graph) -> bool:
    return any(n.op in _CONTROL for n in g.nodes)


def _pad(op: str, ins: list) -> list:
    """Inputs padded with None up to the schema's fixed inputs."""
    from msc.ops import registry as ops

    specs = ops.get(op).inputs
    if any(s.variadic for s in specs) or len(ins) >= len(specs):
        return ins
    return list(ins) + [None] * (len(specs) - len(ins))


def _ident(name: str, taken: set[str]) -> str:
    """A Python identifier for a model's name (TVMScript prints parameter names as code),
    unique among ``taken``; a model's string never reaches the script otherwise."""
    base = re.sub(r"\W", "_", name or "v", flags=re.ASCII) or "v"
    if base[0].isdigit() or keyword.iskeyword(base) or base in ("R", "I", "T", "metadata"):
        base = f"v_{base}"
    out, k = base, 0
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


class RelaxBuilder:
    """One translation of a graph to an IRModule.

    Args:
        graph: the graph to translate (left unchanged).
        params: "inputs" (parameters become function parameters) or "bound" (constants).
        emitters: emitter registry (default: the package's).
        decompositions: decomposition registry (default: ``msc.ops.decompose.registry``).
        flat: one ``main`` holding every binding; else each block of the source's module
            hierarchy is a call of its type's function (codegen.relax.blocks).
    """

    def __init__(
        self,
        graph: Graph,
        *,
        params: str = "inputs",
        emitters: EmitterRegistry | None = None,
        decompositions: DecompositionRegistry | None = None,
        flat: bool = False,
    ) -> None:
        if params not in PARAMS:
            raise ConversionError(f"params must be one of {PARAMS}, got {params!r}")
        if bad := non_numeric_values(graph):  # TVM tensors hold numbers only
            raise NonNumericValuesError(bad, "codegen.relax", graph.name)
        self.graph = channels_first(graph)  # the emitters write channels-first convs and pools
        self.params = params
        self.emitters = emitters or default_emitters
        self.decompositions = decompositions or default_decompositions
        self.bb = relax.BlockBuilder()
        self.env: dict[Value, relax.Expr] = {}
        self.symbols: dict[str, tvm.tirx.Var] = {}
        self.ranges: dict[str, tuple[int | None, int | None]] = {}
        self._fresh = itertools.count()
        self.param_weights: list[Weight] = []
        self._taken: set[str] = set()
        self.functions: list[tuple[relax.GlobalVar, relax.Function]] = []
        # The values of small int parameters of the block function being written, as its
        # shape variables' expressions (codegen.relax.blocks; codegen.relax.symbolic).
        self.known: list[tuple[relax.Var, list]] = []
        self.blocks = None if flat else BlockFunctions(self, self.graph)

    # ------------------------------------------------------------------ types
    def dim(self, d: Any) -> Any:
        """An msc dim as a Relax PrimExpr (an int64 IntImm, a shape var, an expression)."""
        if isinstance(d, bool):
            raise TypeError(d)
        if isinstance(d, int | np.integer):
            return tvm.tirx.IntImm("int64", int(d))
        if isinstance(d, SymDim):
            var = self.symbols.get(d.name)
            if var is None:
                var = self.symbols[d.name] = tvm.tirx.Var(_ident(d.name, self._taken), "int64")
                self.ranges[var.name] = (d.min, d.max)
            return var
        if isinstance(d, SymExpr):
            total = None
            for mono, coef in d.terms:
                term: Any = tvm.tirx.IntImm("int64", int(coef))
                for atom in mono:
                    term = term * self._atom(atom)
                total = term if total is None else total + term
            return total if total is not None else tvm.tirx.IntImm("int64", 0)
        if d is None:  # a fresh dim (named apart from the graph's symbols)
            return tvm.tirx.Var(_ident(f"d{next(self._fresh)}", self._taken), "int64")
        raise TypeError(f"not a dim: {d!r}")

    def _atom(self, a: Any) -> Any:
        if isinstance(a, Func):
            args = [self.dim(x) for x in a.args]
            ops = {
                "floordiv": tvm.tirx.floordiv,
                "mod": tvm.tirx.floormod,
                "min": tvm.tirx.min,
                "max": tvm.tirx.max,
            }
            if a.op not in ops:
                raise Unsupported(f"dim function {a.op} has no Relax form")
            out = args[0]
            for x in args[1:]:
                out = ops[a.op](out, x)
            return out
        return self.dim(a)

    def struct_info(self, t: TensorType) -> relax.TensorType:
        dtype = relax_dtype(t.dtype)
        if t.shape is None:
            return relax.TensorType(dtype=dtype)
        return relax.TensorType([self.dim(d) for d in t.shape], dtype)

    def constant(self, w: Weight) -> relax.Constant:
        arr = _contiguous(w.numpy())
        relax_dtype(w.type.dtype)  # refuse dtypes Relax lacks with a clear reason
        return relax.const(arr, relax_dtype(w.type.dtype))

    # ------------------------------------------------------------------ nodes
    def emit_node(self, node: Node, ins: list[relax.Expr | None]) -> list[relax.Expr]:
        """Relax bindings for one node; returns one expression per output.

        Raises:
            Unsupported: neither an emitter nor a decomposition can express it.
        """
        custom = parse_custom(node.op)
        if custom is not None:
            raise Unsupported(
                f"custom op {custom.domain}::{custom.name} has no Relax form "
                "(register an emitter for it or rewrite it into canonical ops)"
            )
        reasons: list[str] = []
        ins = _pad(node.op, ins)
        fn = self.emitters.get(node.op)
        if fn is not None:
            e = Emit(
                self.bb,
                node,
                [None if v is None else v.type for v in _pad(node.op, list(node.inputs))],
                [o.type for o in node.outputs],
                self.dim,
                self.branch,
                self.loop,
                self.repeat,
            )
            e.known = self.known
            try:
                result = fn(e, *ins, **node.attrs)
            except Unsupported as u:
                reasons.append(f"emitter: {u}")
            else:
                return self._outputs(node, result)
        else:
            reasons.append(self.emitters.reason(node.op))
        if node.op in self.decompositions:
            try:
                return self._decompose(node, ins)
            except NotDecomposable as d:
                reasons.append(f"decomposition: {d}")
            except Unsupported as u:
                reasons.append(f"decomposition: {u}")
        raise Unsupported("; ".join(reasons))

    def _outputs(self, node: Node, result: Any) -> list[relax.Expr]:
        n = len(node.outputs)
        if isinstance(result, tuple | list):
            results = list(result)
        elif n > 1:  # one tuple-valued expression: its items
            results = [self.bb.emit(relax.TupleGetItem(result, i)) for i in range(n)]
        else:
            results = [result]
        if len(results) != n:
            raise AssertionError(f"relax emitter for {node.op} gave {len(results)} of {n}")
        return results

    def _decompose(self, node: Node, ins: list[relax.Expr | None]) -> list[relax.Expr]:
        proxies = [
            None if v is None else Value(f"p{i}", v.type)
            for i, v in enumerate(_pad(node.op, list(node.inputs)))
        ]
        env: dict[Value, relax.Expr] = {p: x for p, x in zip(proxies, ins) if p is not None}
        new_nodes, results = self.decompositions.expand(node, proxies)
        for n in new_nodes:
            n_ins = [None if v is None else env[v] for v in n.inputs]
            try:
                outs = self.emit_node(n, n_ins)
            except Unsupported as u:
                raise Unsupported(f"{n.op} inside: {u}") from None
            env.update(zip(n.outputs, outs))
        return [env[v] for v in results]

    def _body(self, g: Graph) -> list[UnsupportedOp]:
        """Emit the nodes of ``g`` into the current block; the unsupported ones. The top
        graph's blocks are calls of their functions (unless ``flat``)."""
        if self.blocks is not None and g is self.graph:
            return self.blocks.emit(g.nodes, self.blocks.top)
        return self.nodes(g.nodes)

    def nodes(self, nodes: Sequence[Node]) -> list[UnsupportedOp]:
        """Emit ``nodes`` one by one into the current block; the unsupported ones."""
        unsupported: list[UnsupportedOp] = []
        for node in nodes:
            ins = [None if v is None else self.env.get(v) for v in node.inputs]
            if any(x is None and v is not None for x, v in zip(ins, node.inputs)):
                continue  # an input came from a node already reported
            try:
                outs = self.emit_node(node, ins)
            except Unsupported as u:
                unsupported.append(
                    UnsupportedOp(node.op, node.name, node.provenance.module, str(u))
                )
                self._stand_in(node)  # so the nodes after it are tried (and reported) too
                continue
            self.env.update(zip(node.outputs, [self._sized(x) for x in outs]))
        return unsupported

    def _sized(self, x: Any) -> Any:
        """``x`` with fresh symbolic dims when Relax knows its rank only (a product of dims
        read from different run-time shapes, which Relax cannot tell agree): matched once
        where it is made, so every op after it reads its dims (the VM checks the rank)."""
        ty = getattr(x, "ty", None)
        if not isinstance(ty, relax.TensorType) or ty.shape is not None or int(ty.ndim) < 0:
            return x
        dims = [self.dim(None) for _ in range(int(ty.ndim))]
        return self.bb.match_cast(x, relax.TensorType(dims, ty.dtype))

    def _stand_in(self, node: Node) -> None:
        """Zeros of each output's type in place of a node that could not be emitted."""
        for o in node.outputs:
            try:
                sinfo = self.struct_info(o.type)
                if sinfo.shape is not None:
                    self.env[o] = self.bb.emit(relax.op.zeros(sinfo.shape, sinfo.dtype))
            except (Unsupported, TypeError):
                pass

    def branch(self, g: Graph, inputs: list) -> relax.SeqExpr:
        """A subgraph (an If branch) as a SeqExpr reading outer values by identity."""
        for v, x in zip(g.inputs, inputs):
            self.env[v] = x
        self.bb._begin_binding_block()
        bad = self._body(g)
        if bad:
            self.bb._end_block()
            raise Unsupported("; ".join(f"{o.op}: {o.reason}" for o in bad))
        outs = [self.env[v] for v in g.outputs]
        # A tuple of results is the branch's body as it is (not bound), as TVMScript writes it.
        body = outs[0] if len(outs) == 1 else relax.Tuple(outs)
        block = self.bb._end_block()
        return relax.SeqExpr([block], body)

    def _outer(self, g: Graph) -> list[Value]:
        """The values ``g`` (and the subgraphs in its nodes' attributes) reads from outside
        itself, in first-use order, that are variables of the enclosing function here
        (constants need no passing)."""
        found: dict[Value, None] = {}

        def walk(graph: Graph, inside: set[Value]) -> None:
            inside = inside | set(graph.inputs)
            for n in graph.nodes:
                for v in n.inputs:
                    if v is not None and v not in inside:
                        found.setdefault(v, None)
                for a in n.attrs.values():
                    if isinstance(a, Graph):
                        walk(a, inside)
                inside |= set(n.outputs)

        walk(g, set())
        return [v for v in found if isinstance(self.env.get(v), relax.Var)]

    def loop(
        self,
        body: Graph,
        trip: relax.Expr | None,
        cond: relax.Expr,
        carried: list[relax.Expr],
        carried_types: list[TensorType],
        extra: Sequence[relax.Expr] = (),
        inputs: Callable[..., list[relax.Expr]] | None = None,
        has_cond: bool = True,
    ) -> list[relax.Expr]:
        """An msc ``loop`` as a call of a recursive function (see ``repeat``) whose step runs
        the body graph.

        Args:
            extra: values passed to every iteration (a scan's sequences).
            inputs: ``inputs(i, cond, carried, extra)`` gives the body's inputs (default: the
                loop's ``i, cond, *carried``).
            has_cond: the body's first output is the next condition (loop); else the body
                gives the carried values first and the loop runs the trip count (scan).

        Returns:
            The carried values, then the stacked scan outputs, as the function returns them:
            a value whose shape is not static has its rank only.
        """
        n = len(carried)
        first = 1 if has_cond else 0
        scans = body.outputs[n + first :]
        for v in scans:
            if v.type.shape is None:
                raise Unsupported("a loop scan output of unknown rank")
        outer = self._outer(body)
        saved = {v: self.env[v] for v in outer}
        n_extra = len(extra)

        def step(i, c, carried_p, extra_p):
            self.env.update(zip(outer, extra_p[n_extra:]))
            if inputs is None:
                ins = [self._as(i, body.inputs[0].type), self._as(c, body.inputs[1].type)]
                ins += carried_p
            else:
                ins = inputs(i, c, carried_p, list(extra_p[:n_extra]))
            for v, x in zip(body.inputs, ins):
                self.env[v] = x
            bad = self._body(body)
            if bad:
                raise Unsupported("; ".join(f"{o.op}: {o.reason}" for o in bad))
            outs = [self.env[v] for v in body.outputs]
            new_cond = c
            if has_cond:
                new_cond = self._as(outs[0], TensorType(body.outputs[0].type.dtype, ()))
            return new_cond, outs[first : n + first], outs[n + first :]

        try:
            return self.repeat(
                trip, cond, carried, [self.struct_info(t) for t in carried_types],
                [self.struct_info(v.type) for v in scans], [*extra, *saved.values()], step,
                keep=[True] * (n_extra + len(saved)),
            )  # fmt: skip
        finally:
            self.env.update(saved)

    def repeat(
        self,
        trip: relax.Expr | None,
        cond: relax.Expr,
        carried: list[relax.Expr],
        carried_ty: list[relax.TensorType],
        scan_ty: list[relax.TensorType],
        extra: Sequence[relax.Expr],
        step: Callable[..., tuple],
        keep: Sequence[bool] | None = None,
    ) -> list[relax.Expr]:
        """A loop as a call of a recursive function: ``f(i, cond, *carried, *scans, [trip],
        *extra)`` emits ``step(i, cond, carried, extra)`` (on the function's parameters),
        which returns ``(next cond, next carried, per-step outputs)``, and calls itself with
        i + 1 while ``i < trip`` and ``cond``, else returns the carried values and the
        per-step outputs stacked so far.

        Args:
            carried_ty: the carried values' types (fixed across iterations where static).
            scan_ty: the per-step outputs' types (their dims must be defined outside).
            extra: values every iteration reads; a constant among them is read in place
                unless ``keep`` (per value) says to pass it (a module-level function captures
                no variable, so variables are always passed).

        Returns:
            The carried values, then the stacked per-step outputs, as the function returns
            them: a value whose shape is not static has its rank only.
        """
        bb = self.bb
        k = len(self.functions)
        i64, b = relax.TensorType([], "int64"), relax.TensorType([], "bool")
        p_i, p_cond = relax.Var(f"iter{k}", i64), relax.Var(f"cond{k}", b)
        # A dim computed from others (``(w - 1) // 8 + 1``) cannot be read back from a
        # parameter's shape: the function's parameters name one fresh dim for each.
        local: dict[str, tvm.tirx.Var] = {}
        p_carried = [relax.Var(f"carried{k}_{j}", self._local(t, local))
                     for j, t in enumerate(carried_ty)]  # fmt: skip
        lengths = [tvm.tirx.Var(f"n{k}_{j}", "int64") for j in range(len(scan_ty))]
        # A per-step output's dims that are not static are the accumulator's own (fresh), and
        # 0 in the empty one it starts from: it is reshaped to the step's shape (no element
        # when empty, the same shape after) before each step's output joins it.
        p_scans = [
            relax.Var(f"scan{k}_{j}", relax.TensorType(
                [ln, *[d if isinstance(d, tvm.tirx.IntImm) else self.dim(None)
                       for d in t.shape.values]], t.dtype))
            for j, (ln, t) in enumerate(zip(lengths, scan_ty))
        ]  # fmt: skip
        p_trip = [] if trip is None else [relax.Var(f"trip{k}", i64)]
        keep = [bool(kp) or isinstance(x, relax.Var)
                for kp, x in zip(keep or [False] * len(extra), extra)]  # fmt: skip
        passed = [x for x, kp in zip(extra, keep) if kp]
        p_passed = [relax.Var(f"extra{k}_{j}", self._local(x.ty, local))
                    for j, x in enumerate(passed)]  # fmt: skip
        it = iter(p_passed)
        inner = [next(it) if kp else x for x, kp in zip(extra, keep)]
        params = [p_i, p_cond, *p_carried, *p_scans, *p_trip, *p_passed]
        # A carried value whose shape may change between iterations, and every scan output,
        # is returned with its rank only (the callee's shape variables mean nothing outside).
        ret = relax.TupleType(
            [t if _static(t) else relax.TensorType(ndim=t.ndim, dtype=t.dtype)
             for t in carried_ty]
            + [relax.TensorType(ndim=1 + t.ndim, dtype=t.dtype) for t in scan_ty]
        )  # fmt: skip
        gv = relax.GlobalVar(f"loop{k}")
        relax.expr._update_type(gv, relax.FuncType([p.ty for p in params], ret))

        bb._begin_binding_block()
        go = p_cond
        if p_trip:
            go = bb.emit(relax.op.logical_and(relax.op.less(p_i, p_trip[0]), p_cond))
        bb._begin_binding_block()
        try:
            new_cond, new_carried, ys = step(p_i, p_cond, p_carried, inner)
        except BaseException:
            bb._end_block()
            bb._end_block()
            raise
        stacked = [bb.emit(relax.op.concat([self._as_step(acc, x), relax.op.expand_dims(x, [0])],
                                           0))
                   for acc, x in zip(p_scans, ys)]  # fmt: skip
        nxt = bb.emit(relax.op.add(p_i, relax.const(1, "int64")))
        again = bb.emit(relax.Call(gv, [nxt, new_cond, *new_carried, *stacked, *p_trip,
                                        *p_passed]))  # fmt: skip
        then = relax.SeqExpr([bb._end_block()], again)
        done = relax.SeqExpr([], relax.Tuple([*p_carried, *p_scans]))
        result = bb.emit(relax.If(go, then, done))
        func = relax.Function(params, relax.SeqExpr([bb._end_block()], result), ret)
        self.functions.append((gv, func))
        init_scans = [
            relax.op.zeros([0, *[d if isinstance(d, tvm.tirx.IntImm) else 0
                                 for d in t.shape.values]], t.dtype)
            for t in scan_ty
        ]  # fmt: skip
        trip_arg = [] if trip is None else [self._as(trip, TensorType(DType.INT64, ()))]
        call = self.bb.emit(relax.Call(gv, [
            relax.const(0, "int64"), self._as(cond, TensorType(DType.BOOL, ())), *carried,
            *init_scans, *trip_arg, *passed,
        ]))  # fmt: skip
        n = len(carried) + len(scan_ty)
        return [self.bb.emit(relax.TupleGetItem(call, j)) for j in range(n)]

    def _as_step(self, acc: relax.Var, x: relax.Expr) -> relax.Expr:
        """The stacked outputs ``acc`` with the step's dims (see ``repeat``)."""
        if _static(acc.ty):
            return acc
        x = self.bb.emit(x) if not isinstance(x, relax.Var) else x
        if not isinstance(x.ty.shape, relax.ShapeExpr):
            dims = [self.dim(None) for _ in range(int(x.ty.ndim))]
            x = self.bb.match_cast(x, relax.TensorType(dims, x.ty.dtype))
        n = acc.ty.shape.values[0]
        return self.bb.emit(relax.op.reshape(acc, [n, *x.ty.shape.values]))

    def _local(self, ty: Any, local: dict[str, tvm.tirx.Var]) -> Any:
        """``ty`` with each dim that is neither static nor a symbol replaced by a fresh
        symbol, one per distinct expression (``local``)."""
        sh = getattr(ty, "shape", None)
        if not isinstance(ty, relax.TensorType) or not isinstance(sh, relax.ShapeExpr):
            return ty
        dims = []
        for d in sh.values:
            if not isinstance(d, tvm.tirx.IntImm | tvm.tirx.Var):
                key = str(d)
                if key not in local:
                    local[key] = self.dim(None)
                d = local[key]
            dims.append(d)
        return relax.TensorType(dims, ty.dtype)

    def _as(self, x: relax.Expr, t: TensorType) -> relax.Expr:
        """A one-element ``x`` reshaped to the rank of ``t`` (0-d or [1] scalars)."""
        if t.shape is None or int(x.ty.ndim) == len(t.shape):
            return x
        return self.bb.emit(relax.op.reshape(x, [1] * len(t.shape)))

    # ------------------------------------------------------------------ driver
    def run(self) -> tvm.IRModule:
        g = self.graph
        params: list[relax.Var] = []
        for v in g.inputs:
            var = relax.Var(_ident(v.name, self._taken), self.struct_info(v.type))
            self.env[v] = var
            params.append(var)
        num_input = len(params)
        for w in g.weights.values():
            as_input = not w.has_data or (self.params == "inputs" and w.role in ("parameter", ""))
            if as_input:
                var = relax.Var(_ident(w.name, self._taken), self.struct_info(w.type))
                self.env[w] = var
                params.append(var)
                self.param_weights.append(w)
            else:
                self.env[w] = self.constant(w)

        attrs: dict[str, Any] = {}
        if self.params == "inputs":
            attrs["num_input"] = num_input
        bounded = [(n, lo, hi) for n, (lo, hi) in self.ranges.items()]
        lower = {n: lo for n, lo, _ in bounded if lo is not None}
        upper = {n: hi for n, _, hi in bounded if hi is not None}
        if lower:
            attrs["tir_var_lower_bound"] = lower
        if upper:
            attrs["tir_var_upper_bound"] = upper

        dataflow = not _has_control(g)
        # The scopes are always closed (an empty result stands in when nodes were
        # unsupported), so the error below leaves no half-built function behind.
        with self.bb.function("main", params, attrs=attrs or None):
            if dataflow:
                with self.bb.dataflow():
                    bad = self._body(g)
                    out = self.bb.emit_output(relax.Tuple([]) if bad else self._result())
            else:
                bad = self._body(g)
                out = relax.Tuple([]) if bad else self._result()
            self.bb.emit_func_output(out)
        if bad:
            raise UnsupportedOpsError(bad, what=f"graph {g.name!r} to Relax")
        mod = self.bb.get()
        functions = self.functions + (self.blocks.functions if self.blocks else [])
        for gv, func in functions:
            mod[gv] = func
        if functions:
            mod = relax.transform.Normalize()(mod)
        if dataflow:
            mod["main"] = _fold_output(mod["main"])
            mod = relax.transform.Normalize()(mod)
        if self.params == "inputs" and self.param_weights:
            data = [tvm.runtime.tensor(_contiguous(w.numpy())) for w in self.param_weights]
            if all(w.has_data for w in self.param_weights):
                mod["main"] = mod["main"].with_attr("params", data)
        return mod

    def _result(self) -> relax.Expr:
        g = self.graph
        outs = [self.env[v] for v in g.outputs]
        if g.output_tree is None and len(outs) == 1:
            return outs[0]
        return relax.Tuple(outs)


def _static(t: relax.TensorType) -> bool:
    sh = t.shape
    return isinstance(sh, relax.ShapeExpr) and all(
        isinstance(d, tvm.tirx.IntImm) for d in sh.values
    )


def _contiguous(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself when C-contiguous (TVM copies it once anyway), else a C copy; 0-d stays
    0-d (np.ascontiguousarray would make it 1-d)."""
    return arr if arr.flags.c_contiguous else np.array(arr, order="C")


def _fold_output(func: relax.Function) -> relax.Function:
    """``lv = f(...); gv = lv`` at the end of the dataflow block becomes ``gv = f(...)``, as
    TVM's frontends bind a bare result (structural equality sees the extra binding)."""
    body = func.body
    block = body.blocks[-1]
    b = list(block.bindings)
    if (
        len(b) < 2
        or not isinstance(b[-1], relax.VarBinding)
        or not isinstance(b[-2], relax.VarBinding)
        or not b[-1].value.same_as(b[-2].var)
        or isinstance(b[-2].value, relax.Tuple)
    ):
        return func
    uses = [x for x in b[:-2] if _mentions(x.value, b[-2].var)]
    if uses:
        return func
    b = b[:-2] + [relax.VarBinding(b[-1].var, b[-2].value)]
    blocks = list(body.blocks[:-1]) + [relax.DataflowBlock(b)]
    new = relax.Function(
        func.params, relax.SeqExpr(blocks, body.body), func.ret_ty, func.is_pure, func.attrs
    )
    return new


def _mentions(expr: relax.Expr, var: relax.Var) -> bool:
    found = []
    relax.analysis.post_order_visit(expr, lambda e: found.append(e.same_as(var)))
    return any(found)


def lift_constants(mod: tvm.IRModule, prefix: str = "const") -> tuple[tvm.IRModule, list]:
    """``mod`` with every non-scalar constant of ``main`` made a parameter (appended after the
    others), and the lifted arrays in parameter order.

    TVMScript can only carry array constants as metadata, and TVM 0.27's metadata printer
    crashes; scalars print inline, so the script form lifts the arrays (and the scalars it
    prints as metadata too: unsigned ints and bfloat16). A block function's arrays
    (codegen.relax.blocks) become its trailing parameters first, passed by every call of it,
    so they reach ``main`` once each and are lifted there like its own.
    """
    called = _callees(mod)
    # function -> (its new GlobalVar, the arrays its calls append)
    passed: dict[str, tuple[tvm.ir.GlobalVar, list[relax.Constant]]] = {}
    funcs = {gv.name_hint: (gv, f) for gv, f in mod.functions.items()}
    for gv in [*called, mod.get_global_var("main")]:
        name = gv.name_hint
        func = mod[gv]
        lifted, body = _lift(func, prefix if name == "main" else "c", passed)
        if not lifted and not any(n in passed for n in _calls(func)):
            continue
        new = relax.Function(
            list(func.params) + [v for v, _ in lifted], body, func.ret_ty, func.is_pure,
            func.attrs,
        )  # fmt: skip
        if name != "main" and lifted:  # its calls pass the arrays: a new signature
            gv = relax.GlobalVar(name)
            relax.expr._update_type(gv, new.ty)  # noqa: SLF001
            passed[name] = (gv, [c for _, c in lifted])
        funcs[name] = (gv, new)
        if name == "main":
            out = tvm.IRModule({g: f for g, f in funcs.values()})
            return out, [c.value.numpy() for _, c in lifted]
    return mod, []


def _calls(func: relax.Function) -> list[str]:
    """The module functions ``func`` calls."""
    calls: list[str] = []
    relax.analysis.post_order_visit(
        func,
        lambda e: (
            calls.append(e.op.name_hint)
            if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.GlobalVar)
            else None
        ),
    )
    return calls


def _callees(mod: tvm.IRModule) -> list[tvm.ir.GlobalVar]:
    """The block functions of ``mod`` (private, not recursive), each after those it calls."""
    funcs = {gv.name_hint: gv for gv in mod.get_global_vars()}
    order: list[tvm.ir.GlobalVar] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        calls = _calls(mod[name])
        if name in calls:  # a loop: it stays as it is
            return
        for c in calls:
            visit(c)
        if name != "main":
            order.append(funcs[name])

    visit("main")
    return order


def _lift(
    func: relax.Function,
    prefix: str,
    passed: dict[str, tuple[tvm.ir.GlobalVar, list[relax.Constant]]],
) -> tuple[list[tuple[relax.Var, relax.Constant]], relax.Expr]:
    """The arrays of ``func`` as new parameters (one per constant object, in first-use order)
    and its body reading them; a call of a function in ``passed`` appends its arrays."""
    lifted: list[tuple[relax.Var, relax.Constant]] = []
    memo: dict[Any, relax.Var] = {}

    @relax.expr_functor.mutator
    class _Lift(relax.PyExprMutator):
        def visit_generic_const_(self, op, shared=False):
            arr = op.value.numpy()
            dt = str(op.ty.dtype)
            if arr.ndim == 0 and not dt.startswith(("uint", "bfloat")):
                return op
            if shared:  # an array a callee takes: one parameter however many calls pass it
                for k, v in memo.items():
                    if k.same_as(op):
                        return v
            var = relax.Var(f"{prefix}{len(lifted)}", op.ty)
            lifted.append((var, op))
            if shared:
                memo[op] = var
            return var

        def visit_call_(self, op):
            call = super().visit_call_(op)
            if isinstance(op.op, tvm.ir.GlobalVar) and op.op.name_hint in passed:
                gv, arrays = passed[op.op.name_hint]
                extra = [self.visit_generic_const_(c, True) for c in arrays]
                call = relax.Call(gv, [*call.args, *extra], call.attrs, call.ty_args)
            return call

    return lifted, _Lift().visit_expr(func.body)
