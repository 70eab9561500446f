"""The StableHLO importer: a module's ``main`` into an msc Graph, one converter per op.

# NOTE: invariants
# - ``func.call`` is inlined: the callee's body is converted with its arguments bound to the
#   caller's values (JAX spells activations and ``where`` as private functions).
# - Input names come from the arguments' locations (``jax.export`` writes the signature's
#   names there), else ``arg<i>``; outputs from ``jax.result_info`` when it is a name.
# - Arguments listed in ``weights`` (position -> (name, array[, role])) become weights, not
#   inputs.
# - Every unsupported op is collected (with the op it feeds into poisoned); one
#   ``UnsupportedOpsError`` is raised after the whole function was walked. A ``custom_call``
#   is refused by its target name unless ``custom_ops="keep"`` keeps it as a custom node
#   ``stablehlo::<target>``; JAX's ``shape_assertion`` checks are dropped (msc's symbolic
#   dims carry the constraints).
# - A region (a loop body, a branch) is converted into its own subgraph (``scope``), reading
#   the enclosing values by reference; constants it reads are copied in, weights stay in the
#   top-level graph. A result whose sizes msc's inference leaves unknown takes the sizes the
#   StableHLO op states.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from msc.errors import BadModelError, Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.frontend.jax.reader import ShloOp, tensor_type
from msc.frontend.jax.registry import CONVERTERS, REASONS, ConverterRegistry
from msc.ir import Graph, Node, Provenance, SymDim, TensorType, Value
from msc.ir.builder import Builder
from msc.ir.graph import GraphError
from msc.ops.custom import custom_op
from msc.ops.infer import InferError
from msc.ops.schema import OpError

__all__ = ["Importer", "Ctx", "CONST_LIMIT", "scope_of"]

# Constants up to this many elements stay constant nodes; larger ones become weights.
CONST_LIMIT = 64
_DROPPED_CALLS = {"shape_assertion"}


class Ctx(Builder):
    """What a converter builds with: canonical nodes (``ctx.op``) and the current op."""

    def __init__(self, imp: Importer) -> None:
        super().__init__()
        self.imp = imp
        self.current: ShloOp | None = None

    def _current_provenance(self) -> Provenance | None:
        if self.current is None:
            return None
        return Provenance("stablehlo", self.current.name, "", scope_of(self.current))

    def out_type(self, i: int = 0) -> TensorType:
        assert self.current is not None
        return self.current.out_types[i]

    def weight(self, array: np.ndarray) -> Value:
        return self.imp.constant_weight(array)


class Importer:
    def __init__(
        self,
        module: Any,
        registry: ConverterRegistry = CONVERTERS,
        custom_ops: str = "error",
        name: str = "",
        weights: dict[int, tuple[str, np.ndarray]] | None = None,
        input_names: list[str] | None = None,
        input_dims: list | None = None,
        symbols: Mapping[str, SymDim] | None = None,
    ) -> None:
        self.module = module
        self.registry = registry
        self.custom_ops = custom_ops
        self.funcs: dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[str(op.attributes["sym_name"]).strip('"')] = op
        if "main" not in self.funcs:
            raise BadModelError("the module has no func.func @main")
        self.graph = Graph(name or "main")
        self.root = self.graph  # weights live here, also those a region's ops make
        self.env: dict[Any, Value | None] = {}  # the values the op being converted sees
        # in a region: the ids of the values it defines, and its copies of outer constants
        self._here: set[int] = set()
        self._copies: dict[int, Value] = {}
        self.ctx = Ctx(self)
        self.weights = weights or {}
        self.input_names = input_names
        self.input_dims = input_dims
        self.symbols = dict(symbols or {})
        self.unsupported: list[UnsupportedOp] = []
        self._taken: set[str] = set()
        self._counter = 0
        self._n_const = 0
        self._depth = 0

    # ------------------------------------------------------------ names
    def _unique(self, name: str) -> str:
        base = name or "t"
        out, k = base, 1
        while out in self._taken:
            out = f"{base}_{k}"
            k += 1
        self._taken.add(out)
        return out

    def _fresh(self) -> str:
        while str(self._counter) in self._taken:
            self._counter += 1
        return self._unique(str(self._counter))

    def constant_weight(self, array: np.ndarray) -> Value:
        from msc.ir.dtype import DType

        self._n_const += 1
        dt = DType.from_numpy(array.dtype)
        name = self._unique(f"const_{self._n_const}")
        return self.root.add_weight(name, array, TensorType(dt, list(array.shape)))

    # ------------------------------------------------------------ the walk
    def run(self) -> Graph:
        main = self.funcs["main"]
        block = main.regions[0].blocks[0]
        env: dict[Any, Value | None] = {}
        located = _arg_names(block)
        # with symbolic shapes, jax.export wraps the function: its names are on the wrapper's
        # arguments (after the dimension variables)
        wrapped = self.funcs.get("_wrapped_jax_export_main")
        if wrapped is not None and not any(located):
            inner = _arg_names(wrapped.regions[0].blocks[0])
            if len(inner) >= len(located):
                located = inner[len(inner) - len(located) :]
        for i, arg in enumerate(block.arguments):
            try:
                ty = tensor_type(arg.type)
            except Unsupported as e:
                raise BadModelError(f"argument {i}: {e}") from None
            ty = self._symbolic(i, ty)
            if i in self.weights:
                wname, data, *role = self.weights[i]
                w = self.graph.add_weight(
                    self._unique(wname), data, ty, role=role[0] if role else ""
                )
                env[arg] = w
                continue
            name = None
            if self.input_names and i < len(self.input_names):
                name = self.input_names[i]
            if not name:
                name = located[i] or f"arg{i}"
            env[arg] = self.graph.add_input(self._unique(name), ty)
        outs = self._block(block, env)
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what="StableHLO module")
        names = _result_names(main)
        final = []
        for v, want in zip(outs, names):
            assert v is not None
            if want and v.producer is not None and want not in self._taken:
                self._taken.discard(v.name)
                self.graph._taken.discard(v.name)
                v.name = want
                self._taken.add(want)
                self.graph._taken.add(want)
            final.append(v)
        self.graph.set_outputs(final)
        return self.graph

    def _symbolic(self, i: int, ty: TensorType) -> TensorType:
        """``ty`` with its unknown dims named after jax.export's symbols (``b``); a dim that
        is an expression of symbols (``2*b``) stays unknown."""
        if not self.input_dims or i >= len(self.input_dims) or ty.shape is None:
            return ty
        dims = self.input_dims[i]
        if len(dims) != len(ty.shape):
            return ty
        shape: list[Any] = []
        for d, have in zip(dims, ty.shape):
            if have is None and isinstance(d, str) and d.isidentifier():
                shape.append(self.symbols.get(d) or SymDim(d))
            else:
                shape.append(have)
        return TensorType(ty.dtype, shape)

    def _block(self, block: Any, env: dict[Any, Value | None]) -> list[Value | None]:
        for raw in block.operations:
            op = ShloOp(raw)
            if op.name in ("func.return", "stablehlo.return"):
                return [env.get(v) for v in raw.operands]
            self._convert(op, env)
        return []

    def _convert(self, op: ShloOp, env: dict[Any, Value | None]) -> None:
        results = list(op.op.results)
        ins = [env.get(v) for v in op.op.operands]
        if any(v is None for v in ins):  # downstream of an unsupported op
            for r in results:
                env[r] = None
            return
        if self.graph is not self.root:
            ins = [self._localize(v) for v in ins]  # type: ignore[misc]
        if op.name == "func.call":
            self._call(op, ins, env, op.attr("callee"))
            return
        if op.name == "stablehlo.composite":
            kind = op.attr("name", "")
            if self.registry.get(f"composite:{kind}") is None:
                self._call(op, ins, env, op.attr("decomposition"))
                return
        ctx = self.ctx
        ctx.current = op
        ctx.nodes = []
        outer, self.env = self.env, env
        try:
            values = self._apply(op, ins)
            self._finish(op, values, env)
        except (Unsupported, InferError, OpError, GraphError) as e:
            ctx.nodes = []
            self._refused(op, ins, env, str(e))
        finally:
            self.env = outer
        ctx.current = None

    def _apply(self, op: ShloOp, ins: list[Value]) -> list[Value]:
        if op.name == "stablehlo.custom_call":
            target = op.attr("call_target_name", "")
            if target in _DROPPED_CALLS and not op.op.results:
                return []
            conv = self.registry.get(f"custom_call:{target}")
            if conv is None:
                raise Unsupported(f"custom_call {target!r}")
            result = conv(self.ctx, op, *ins)
            return list(result) if isinstance(result, tuple | list) else [result]
        key = op.name
        if key == "stablehlo.composite":
            key = f"composite:{op.attr('name', '')}"
        conv = self.registry.get(key)
        if conv is None:
            raise Unsupported(REASONS.get(op.name, "no converter"))
        result = conv(self.ctx, op, *ins)
        return list(result) if isinstance(result, tuple | list) else [result]

    def _finish(self, op: ShloOp, values: list[Value], env: dict[Any, Value | None]) -> None:
        results = list(op.op.results)
        if len(values) != len(results):
            raise Unsupported(f"the converter gave {len(values)} outputs for {len(results)}")
        for r, v in zip(results, values):
            want = tensor_type(r.type)
            _check_type(v, want)
            _refine(v, want)
            env[r] = v
        for node in self.ctx.nodes:
            for o in node.outputs:
                if o.name is None:
                    o.name = self._fresh()
                self._here.add(id(o))
            self.graph.add_node(node)
        self.ctx.nodes = []

    def _refused(self, op: ShloOp, ins: list, env: dict[Any, Value | None], why: str) -> None:
        if self.custom_ops == "keep" and op.name == "stablehlo.custom_call":
            target = op.attr("call_target_name", "") or "custom_call"
            types = op.out_types
            node = Node(
                custom_op("stablehlo", re.sub(r"\W", "_", target), 0),
                ins,
                {"call_target_name": target},
                output_types=types,
                name="",
                provenance=Provenance("stablehlo", op.name, "", ""),
            )
            self.ctx.nodes = [node]
            self._finish(op, list(node.outputs), env)
            return
        for r in op.op.results:
            env[r] = None
        label = op.name
        if op.name == "stablehlo.custom_call":
            label = f"custom_call @{op.attr('call_target_name', '')}"
        self.unsupported.append(UnsupportedOp(label, _where(op), "", why))

    def _call(
        self, op: ShloOp, ins: list[Value], env: dict[Any, Value | None], callee: str
    ) -> None:
        fn = self.funcs.get(callee)
        if fn is None:
            raise BadModelError(f"func.call of @{callee}, which the module does not define")
        self._depth += 1
        if self._depth > 64:
            raise BadModelError(f"func.call nesting deeper than 64 (at @{callee})")
        block = fn.regions[0].blocks[0]
        inner: dict[Any, Value | None] = dict(zip(block.arguments, ins))
        outs = self._block(block, inner)
        self._depth -= 1
        for r, v in zip(op.op.results, outs):
            env[r] = v

    # ------------------------------------------------------------ regions
    @contextmanager
    def scope(self, name: str) -> Iterator[Graph]:
        """Convert into a new (sub)graph while inside; the converter's state is kept."""
        saved = (self.graph, self.ctx.current, self.ctx.nodes, self._here, self._copies)
        self.graph = Graph(name)
        self._here, self._copies = set(), {}
        try:
            yield self.graph
        finally:
            self.graph, self.ctx.current, self.ctx.nodes, self._here, self._copies = saved

    def _localize(self, v: Value) -> Value:
        """An outer constant a region reads, as a constant of the region's own (as the ONNX
        frontend does; a codegen may write an outer constant inline where it is used)."""
        p = v.producer
        if p is None or p.op != "constant" or id(v) in self._here:
            return v
        if id(v) not in self._copies:
            b = Builder(provenance=p.provenance)
            self._copies[id(v)] = b.op("constant", value=p.attrs["value"])
            self.add(b)
        return self._copies[id(v)]

    def region(self, block: Any, args: list[Value]) -> list[Value | None]:
        """Convert a region's block into the current graph, its arguments bound to ``args``;
        it reads the enclosing values by reference. Returns what it returns (None where an
        unsupported op is upstream)."""
        inner = dict(self.env)
        inner.update(zip(block.arguments, args))
        saved = (self.ctx.current, self.ctx.nodes)
        try:
            return self._block(block, inner)
        finally:
            self.ctx.current, self.ctx.nodes = saved

    def add(self, builder: Builder) -> None:
        """Put nodes a converter built outside ``ctx`` into the current graph."""
        for node in builder.nodes:
            for o in node.outputs:
                if o.name is None:
                    o.name = self._fresh()
                self._here.add(id(o))
            self.graph.add_node(node)
        builder.nodes = []

    def close(self, graph: Graph, outs: list[Value | None]) -> Graph:
        """Give ``graph`` (the current one) its outputs: a value it does not compute (its
        input, an outer value) through an identity, so each output is the graph's own."""
        if any(v is None for v in outs):
            raise Unsupported("a region reads or computes a value msc could not translate")
        outs = [self._localize(v) for v in outs]  # type: ignore[arg-type]
        own = {id(o) for n in graph.nodes for o in n.outputs}
        b = Builder(provenance=self.ctx._current_provenance())
        final = [v if id(v) in own else b.op("identity", v) for v in outs]  # type: ignore[misc]
        self.add(b)
        graph.set_outputs(final)  # type: ignore[arg-type]
        return graph


def _arg_names(block: Any) -> list[str]:
    """The names jax.export puts in the arguments' locations (``loc("x")``), "" where none."""
    out = []
    for arg in block.arguments:
        m = re.fullmatch(r'loc\("([^"]+)"\)', str(arg.location))
        out.append(m.group(1) if m else "")
    return out


def _where(op: ShloOp) -> str:
    """The source location JAX wrote for an op (``jit(f)/dot_general``), else ""."""
    m = re.search(r'loc\("([^"]*)"', str(op.op.location))
    return m.group(1) if m else ""


def scope_of(op: ShloOp) -> str:
    """The scope JAX's name stack puts an op in, as a module path: the identifiers between
    ``jit(f)`` and the primitive (``jit(f)/Encoder/layer0/attn/dot_general`` ->
    ``Encoder/layer0/attn``: Flax linen's module names, ``jax.named_scope``'s names); the
    transformations JAX records there (``jit(_take)``, ``vmap()``, an einsum's spec) are left
    out. "" when the op is at the top."""
    parts = _where(op).split("/")[1:-1]
    return "/".join(p for p in parts if p.isidentifier() and p != "jit")


def _result_names(main: Any) -> list[str]:
    n = len(list(main.regions[0].blocks[0].operations)[-1].operands)
    names = [""] * n
    if "res_attrs" not in main.attributes:
        return names
    for i, d in enumerate(main.attributes["res_attrs"]):
        if i < n and "jax.result_info" in d:
            info = str(d["jax.result_info"]).strip('"')
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", info) and info != "result":
                names[i] = info
            elif re.fullmatch(r"(result)?(\['[A-Za-z_][A-Za-z0-9_]*'\])+", info):  # dict keys
                names[i] = ".".join(re.findall(r"\['([^']*)'\]", info))
    return names


def _check_type(v: Value, want: TensorType) -> None:
    got = v.type
    if not isinstance(got, TensorType):
        raise Unsupported(f"the converter gave a {got}")
    if got.dtype is not want.dtype:
        raise Unsupported(f"the converter gave {got.dtype.value}, the op says {want.dtype.value}")
    if got.shape is not None and want.shape is not None:
        if len(got.shape) != len(want.shape) or any(
            isinstance(a, int) and isinstance(b, int) and a != b
            for a, b in zip(got.shape, want.shape)
        ):
            raise Unsupported(f"the converter gave shape {got.shape}, the op says {want.shape}")


def _refine(v: Value, want: TensorType) -> None:
    """Give ``v`` the sizes the op states where msc's inference left them unknown (a slice at
    run-time offsets has the static size StableHLO says)."""
    got = v.type
    if not isinstance(got, TensorType) or got.shape is None or want.shape is None:
        return
    if any(d is None and isinstance(w, int) for d, w in zip(got.shape, want.shape)):
        pairs = zip(got.shape, want.shape)
        shape = [w if d is None and isinstance(w, int) else d for d, w in pairs]
        v.type = TensorType(got.dtype, shape)
