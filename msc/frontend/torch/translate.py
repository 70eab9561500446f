"""The walk over a torch.fx graph shared by torch.export and fx translation.

# NOTE: invariants
# - Nodes are translated in graph order; every unsupported op (and every converter failure) is
#   collected, translation continues past it (its users are skipped), and one
#   UnsupportedOpsError lists them all at the end.
# - What differs between an ExportedProgram and an fx GraphModule sits behind ``Source``:
#   placeholders and get_attr (parameter lookup), how a call node becomes a converter key plus
#   arguments, the recorded torch value of a node, and its module path.
# - After each converter the result is checked against the value PyTorch recorded for the node:
#   the dtype must be equal (so the graph's dtypes are PyTorch's), and the shape is refined with
#   what torch knows (named symbols, sizes inference left unknown).
# - Complex tensors travel as real tensors in the layout [..., 2] (real, imaginary); see
#   signal.py. The walk checks results against that layout of what torch recorded
#   (``real_layout``), and a node that reads or produces a complex tensor is converted by
#   ``COMPLEX_CONVERTERS`` (its complex inputs named in ``ctx.complex_ids``), never by the
#   real converter of the same op.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from msc.errors import ConversionError, UnsupportedOp, UnsupportedOpsError
from msc.frontend.torch.dtypes import tensor_to_numpy, to_msc
from msc.frontend.torch.registry import (
    COMPLEX_CONVERTERS,
    CONVERTERS,
    Ctx,
    Unsupported,
    aten_op,
    bind,
)
from msc.ir import Graph, Provenance, SymDim, TensorType, Value, symexpr
from msc.ir.graph import Node, dead_nodes
from msc.ir.types import Dim
from msc.ops.custom import custom_op
from msc.text.check import enabled as check_enabled

__all__ = [
    "Call",
    "Source",
    "Translator",
    "POISON",
    "target_key",
    "SMALL_CONSTANT",
    "is_small_constant",
    "constant_node",
    "finish",
    "real_layout",
]

# A tensor constant of the source program (``torch.tensor([...])`` in forward, lifted by
# torch.export; an fx ``_tensor_constant``) with at most this many elements becomes a
# ``constant`` node, so a codegen writes it as a literal; a larger one stays a weight.
SMALL_CONSTANT = 64


class _Poison:
    """The value of a node that could not be translated; its users are skipped."""

    def __repr__(self) -> str:
        return "<untranslated>"


POISON: Any = _Poison()

_OPERATOR_NAMES = {
    getattr(operator, n): f"operator.{n}"
    for n in (
        "add",
        "sub",
        "mul",
        "truediv",
        "floordiv",
        "mod",
        "neg",
        "pow",
        "getitem",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and_",
        "or_",
        "not_",
        "pos",
    )
}


def target_key(target: Any) -> str:
    """A stable string for an fx call target: ``aten.add.Tensor``, ``operator.mul``, ..."""
    if isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
        return str(target)
    if target in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[target]
    if isinstance(target, str):
        return target
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    return f"{mod}.{name}" if mod else name


@dataclass
class Call:
    """A normalized call: a converter key with arguments, or a handler function."""

    key: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    fn: Callable[..., Any] | None = None  # handler(ctx, *args, **kwargs) instead of the key's
    inplace_arg: torch.fx.Node | None = None  # an input the call mutates (rebound to the result)


class Source:
    """How one kind of graph (export or fx) answers the questions the walk asks."""

    def placeholder(self, node: torch.fx.Node) -> Any:
        raise NotImplementedError

    def get_attr(self, node: torch.fx.Node) -> Any:
        raise NotImplementedError

    def normalize(self, node: torch.fx.Node, env: dict) -> Call:
        raise NotImplementedError

    def meta(self, node: torch.fx.Node) -> Any:
        """The torch value recorded for ``node`` (FakeTensor, tensor meta, SymInt, int...)."""
        raise NotImplementedError

    def module_path(self, node: torch.fx.Node) -> str:
        return ""

    def module_stack(self, node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
        """(module path, type name) of each module call around ``node``, outermost first."""
        return ()

    def refine_shapes(self) -> bool:
        return True


_IGNORED = {
    "aten._assert_scalar.default",
    "aten._assert_tensor_metadata.default",
    "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default",
    "aten._assert_async.msg",
    "aten._assert_async.default",
    "aten._functional_assert_async.msg",
    "torch._check",
    "torch._check_is_size",
}


def _is_complex(meta: Any) -> bool:
    return isinstance(meta, torch.Tensor) and meta.is_complex()


def real_layout(meta: Any) -> Any:
    """The value torch recorded, with a complex tensor as the real tensor [..., 2] the graph
    carries it as (lists and tuples of them likewise)."""
    if _is_complex(meta):
        # a lazily conjugated tensor (torch's conj bit) has the same type; view_as_real
        # refuses it, so view its conjugate (no copy: fake tensors hold no data anyway).
        return torch.view_as_real(meta.conj() if meta.is_conj() else meta)
    if isinstance(meta, list | tuple) and any(_is_complex(m) for m in meta):
        return type(meta)(real_layout(m) for m in meta)
    return meta


def is_small_constant(t: torch.Tensor) -> bool:
    """Should the source's tensor constant ``t`` be a ``constant`` node (not a weight)?"""
    return t.numel() <= SMALL_CONSTANT and not t.is_complex()


def constant_node(g: Graph, name: str, t: torch.Tensor) -> Value:
    """A ``constant`` node in ``g`` holding the source's tensor constant ``t``."""
    taken = {v.name for v in g.values()} | set(g.weights)
    node = g.add_node(
        "constant",
        [],
        {"value": tensor_to_numpy(t).copy()},
        name=name,
        provenance=Provenance("torch", "", name, ""),
        output_names=[None if name in taken else name],
    )
    return node.output


def finish(g: Graph, buffers: list[str], constants: list[str], aliases: dict[str, str]) -> None:
    """Drop nodes nothing uses (a converter's rewrite can leave a constant behind, as
    ``x**2`` -> ``x*x`` does; torch leaves size arithmetic and views it no longer needs), and
    give every weight its role: a buffer (``buffers``: persistent), a constant (``constants``:
    non-persistent buffers and lifted tensor constants) or a parameter. Weights stay, used or
    not (state). ``aliases`` (other name -> weight name) are the tied weights' other names."""
    g.remove_nodes(dead_nodes(g, {id(v) for v in g.outputs}))
    roles = dict.fromkeys(buffers, "buffer") | dict.fromkeys(constants, "constant")
    for w in g.weights.values():
        w.role = roles.get(w.name, "parameter")
    for alias, name in aliases.items():
        g.weights[name].aliases = (*g.weights[name].aliases, alias)
    g.meta["producer"] = "msc.frontend.torch"


_INLINED_HOPS = {"wrap_with_set_grad_enabled", "wrap_with_autocast"}
# Higher-order ops that become control-flow nodes with subgraphs (msc.frontend.torch.control).
_CONTROL_HOPS = {"cond", "while_loop", "map_impl"}


class _BodySource(Source):
    """The body of a higher-order op: placeholders are bound by the caller."""

    def __init__(self, outer: Source, env: dict) -> None:
        self.outer, self.env = outer, env

    def placeholder(self, node: torch.fx.Node) -> Any:
        return self.env[node]

    def get_attr(self, node: torch.fx.Node) -> Any:
        return self.outer.get_attr(node)

    def normalize(self, node: torch.fx.Node, env: dict) -> Call:
        return self.outer.normalize(node, env)

    def meta(self, node: torch.fx.Node) -> Any:
        return self.outer.meta(node)

    def module_path(self, node: torch.fx.Node) -> str:
        return self.outer.module_path(node)

    def module_stack(self, node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
        return self.outer.module_stack(node)

    def refine_shapes(self) -> bool:
        return self.outer.refine_shapes()


def _is_token(node: torch.fx.Node) -> bool:
    """Whether ``node`` takes the effect token (output 0) of a ``with_effects`` call."""
    src = node.args[0]
    return (
        isinstance(src, torch.fx.Node)
        and src.target is torch.ops.higher_order.with_effects
        and node.args[1] == 0
    )


def _assert_only(fx_graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Call nodes whose every use is a run-time check (``_assert_scalar``, ``sym_constrain_range``
    ...), directly or through other such nodes: torch's checks on unbacked sizes."""
    out: set[torch.fx.Node] = set()
    for node in reversed(fx_graph.nodes):
        if node.op != "call_function" or not node.users:
            continue
        if all(u in out or (u.op == "call_function" and target_key(u.target) in _IGNORED)
               for u in node.users):  # fmt: skip
            out.add(node)
    return out


def library_op(target: Any) -> torch._ops.OpOverload | None:
    """``target`` when it is an op a library registered with torch.library (not PyTorch's own
    aten / prims / quantized namespaces): the ops a custom node may stand for."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    return None if target.namespace in _TORCH_NAMESPACES else target


_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "higher_order", "_c10d_functional"})


def keep_custom(op: torch._ops.OpOverload, ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    """A torch.library op with no converter as a custom node ``namespace::name@1`` (the
    overload joins the name unless it is ``default``): tensor arguments become inputs in schema
    order, the others attributes by argument name, the output types torch's meta gives."""
    schema = op._schema
    bound = bind(schema, args, kwargs)
    inputs: list[Value | None] = []
    attrs: dict[str, Any] = {}
    for a in schema.arguments:
        v = bound[a.name]
        kind = str(a.type)
        if kind in ("Tensor", "Optional[Tensor]"):
            if v is not None and not isinstance(v, Value):
                raise Unsupported(f"argument {a.name!r} is not a graph tensor")
            inputs.append(v)
        elif "Tensor" in kind:
            raise Unsupported(f"argument {a.name!r} ({kind}): tensor lists are not kept")
        elif v is None:
            if a.has_default_value() and a.default_value is not None:
                raise Unsupported(f"argument {a.name!r} is None where its default is not")
        else:
            attrs[a.name] = _custom_attr(a.name, v)
    name = op._opname if op._overloadname == "default" else f"{op._opname}.{op._overloadname}"
    meta = ctx.meta
    metas = list(meta) if isinstance(meta, list | tuple) else [meta]
    if not metas or not all(isinstance(m, torch.Tensor) for m in metas):
        raise Unsupported("a custom op is kept only when it returns tensors")
    types = [TensorType(to_msc(m.dtype), [ctx.dim_of(d) for d in m.shape]) for m in metas]
    node = Node(
        custom_op(op.namespace, name),
        inputs,
        attrs,
        output_types=types,
        name=ctx.node_name,
        provenance=ctx._current_provenance(),  # noqa: SLF001
    )
    ctx.nodes.append(node)
    outs = node.outputs
    return tuple(outs) if isinstance(meta, list | tuple) else outs[0]


def _custom_attr(name: str, v: Any) -> Any:
    if isinstance(v, torch.dtype):
        return to_msc(v)
    if isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple) and all(isinstance(x, bool | int | float | str) for x in v):
        return list(v)
    raise Unsupported(f"argument {name!r} is a {type(v).__name__}, which a custom node cannot hold")


_SYMPY_FUNCS = {
    "FloorDiv": symexpr.floordiv,
    "CleanDiv": symexpr.floordiv,  # an exact division
    "Mod": symexpr.mod,
    "PythonMod": symexpr.mod,
    "Min": symexpr.minimum,
    "Max": symexpr.maximum,
    "CeilDiv": symexpr.ceildiv,
}


def sympy_dim(e: Any, symbols: dict[Any, SymDim]) -> Dim:
    """A sympy expression over torch's size symbols as an msc dim (TypeError for anything
    else: a float, a symbol torch did not declare, a function msc has no counterpart for)."""
    if getattr(e, "is_Integer", False):
        return int(e)
    if getattr(e, "is_Symbol", False):
        if e not in symbols:
            raise TypeError(f"unknown symbol {e}")
        return symbols[e]
    args = [sympy_dim(a, symbols) for a in getattr(e, "args", ())]
    kind = type(e).__name__
    if kind == "Add":
        return functools.reduce(symexpr.add, args)
    if kind == "Mul":
        return functools.reduce(symexpr.mul, args)
    if kind == "Pow" and len(args) == 2 and isinstance(args[1], int) and 0 < args[1] <= 8:
        return functools.reduce(symexpr.mul, [args[0]] * args[1])
    fn = _SYMPY_FUNCS.get(kind)
    if fn is None or not args:
        raise TypeError(f"no msc counterpart for {kind}")
    return fn(*args)


class Translator:
    """Translate the nodes of an fx graph into ``graph`` through ``source``."""

    def __init__(self, graph: Graph, source: Source) -> None:
        self.graph = graph
        self.source = source
        self.ctx = Ctx(graph, CONVERTERS)
        self.ctx.dim_of = self.dim_of
        self.env: dict[torch.fx.Node, Any] = {}
        self.problems: list[UnsupportedOp] = []
        self.first_error: BaseException | None = None
        self.symbols: dict[Any, SymDim] = {}
        self.strict = check_enabled()
        self.prefix = ""  # prepended to value and node names (inlined submodules)
        self.custom_ops = "error"  # or "keep": an op with no converter becomes a custom node
        self.decomposed: set[str] = set()  # ops PyTorch's decompositions replaced (their keys)

    # ------------------------------------------------------------------ types
    def sym_dim(self, expr: Any) -> Dim:
        """torch's size expression as a graph dim: an int, a symbol (with the user's Dim name
        and torch's range), an expression over symbols (``2*s0``, ``s0 + 1``, floor
        division, modulo, min, max), or None when it holds anything else."""
        if getattr(expr, "is_Integer", False):
            return int(expr)
        d = self.symbols.get(expr)
        if d is not None:
            return d
        try:
            return sympy_dim(expr, self.symbols)
        except (TypeError, ValueError, ZeroDivisionError):
            return None

    def dim_of(self, d: Any) -> Dim:
        """A torch size (an int or a SymInt) as a graph dim."""
        return self.sym_dim(d.node.expr) if isinstance(d, torch.SymInt) else int(d)

    def torch_type(self, t: Any) -> TensorType:
        t = real_layout(t)
        dims = []
        for d in t.shape:
            if isinstance(d, torch.SymInt):
                dims.append(self.sym_dim(d.node.expr))
            else:
                dims.append(int(d))
        return TensorType(to_msc(t.dtype), dims)

    def _refine(self, v: Value, meta: Any, fresh: bool) -> Value:
        if not isinstance(meta, torch.Tensor):
            return v
        want = to_msc(meta.dtype)
        if v.dtype is not want:
            if self.strict:
                raise AssertionError(
                    f"converter produced {v.dtype.short}, torch computes {want.short}"
                )
            v = self.ctx.cast(v, want)
            fresh = True
        self.ctx.torch_shapes[id(v)] = tuple(meta.shape)
        if not fresh or not self.source.refine_shapes() or v.type.shape is None:
            return v
        tt = self.torch_type(meta)
        if len(tt.shape) != len(v.type.shape):
            raise AssertionError(f"converter produced rank {len(v.type.shape)}, torch {tt.shape}")
        merged = []
        for mine, theirs in zip(v.type.shape, tt.shape):
            if isinstance(mine, int) and isinstance(theirs, int) and mine != theirs:
                raise AssertionError(f"converter produced shape {v.type}, torch {tt}")
            merged.append(theirs if theirs is not None else mine)
        v.type = TensorType(v.dtype, merged)
        return v

    # ------------------------------------------------------------------ walk
    def resolve(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, list | tuple):
            return type(a)(self.resolve(x) for x in a)
        if isinstance(a, dict):
            return {k: self.resolve(x) for k, x in a.items()}
        if isinstance(a, slice):
            return slice(self.resolve(a.start), self.resolve(a.stop), self.resolve(a.step))
        return a

    def _poisoned(self, a: Any) -> bool:
        if a is POISON:
            return True
        if isinstance(a, list | tuple):
            return any(self._poisoned(x) for x in a)
        if isinstance(a, dict):
            return any(self._poisoned(x) for x in a.values())
        if isinstance(a, slice):
            return any(self._poisoned(x) for x in (a.start, a.stop, a.step))
        return False

    def _original(self, node: torch.fx.Node) -> str:
        """The op a decomposition replaced, for a node it produced; else ""."""
        orig = node.meta.get("original_aten")
        key = str(orig) if orig is not None else ""
        return key if key in self.decomposed and key != target_key(node.target) else ""

    def _report(self, op: str, node: torch.fx.Node, reason: str, err: BaseException | None) -> None:
        orig = self._original(node)
        if orig:
            reason += f" (in PyTorch's decomposition of {orig})"
        self.problems.append(UnsupportedOp(op, node.name, self.source.module_path(node), reason))
        if err is not None and self.first_error is None:
            self.first_error = err

    def run(self, fx_graph: torch.fx.Graph) -> Any:
        """Translate every node; return the output node's (resolved) argument."""
        from msc.frontend.torch.coverage import UNSUPPORTED

        out: Any = None
        checks = _assert_only(fx_graph)
        for node in fx_graph.nodes:
            if node in checks:  # computed only for torch's run-time checks, which we drop
                self.env[node] = None
                continue
            if node.op == "placeholder":
                self.env[node] = self.source.placeholder(node)
                continue
            if node.op == "get_attr":
                self.env[node] = self.source.get_attr(node)
                continue
            if node.op == "output":
                out = node.args[0]
                break
            self._call(node, UNSUPPORTED)
        if self.problems:
            raise UnsupportedOpsError(self.problems) from self.first_error
        return out

    def _complex_args(self, node: torch.fx.Node) -> set[int]:
        """ids of the translated inputs of ``node`` that torch recorded as complex tensors."""
        out: set[int] = set()
        for a in node.all_input_nodes:
            v = self.env.get(a)
            if isinstance(v, Value) and _is_complex(self.source.meta(a)):
                out.add(id(v))
        return out

    def _call(self, node: torch.fx.Node, reasons: dict[str, str]) -> None:
        raw_meta = self.source.meta(node)
        complex_ids = self._complex_args(node)
        touches_complex = (
            bool(complex_ids)
            or _is_complex(raw_meta)
            or (isinstance(raw_meta, list | tuple) and any(_is_complex(m) for m in raw_meta))
        )
        meta = real_layout(raw_meta)
        if isinstance(meta, bool | int | float) and not isinstance(meta, torch.SymInt):
            self.env[node] = meta  # a Python value torch computed once: a constant
            return
        if node.op == "call_function" and node.target is operator.getitem:
            base = self.env[node.args[0]]
            if isinstance(base, list | tuple) or base is POISON:
                item = POISON if base is POISON else base[node.args[1]]
                if item is None and (_is_token(node) or not node.users):
                    self.env[node] = None  # an effect token (ordering only) or read by none
                    return
                if item is None:
                    self._report("operator.getitem", node, "this output is not translated", None)
                    item = POISON
                self.env[node] = item
                return
        try:
            call = self.source.normalize(node, self.env)
        except Unsupported as e:
            self._report(target_key(node.target), node, str(e), e)
            self.env[node] = POISON
            return
        if call.key in _IGNORED:
            self.env[node] = None
            return
        if call.key in _INLINED_HOPS:
            self._inline_hop(node, call)
            return
        if call.key in _CONTROL_HOPS:
            from msc.frontend.torch.control import translate_control

            translate_control(self, node, call, meta)
            return
        fn = call.fn
        inplace = False
        if fn is None and touches_complex:
            fn, inplace = COMPLEX_CONVERTERS.lookup(call.key)
            if fn is None:
                self._report(call.key, node, "no converter for complex tensors", None)
                self.env[node] = POISON
                return
        elif fn is None:
            fn, inplace = CONVERTERS.lookup(call.key)
            if fn is None and self.custom_ops == "keep" and library_op(node.target) is not None:
                fn = functools.partial(keep_custom, node.target)
            elif fn is None:
                reason = reasons.get(call.key, "no converter")
                if library_op(node.target) is not None:
                    reason += " (custom_ops='keep' keeps this torch.library op as a custom node)"
                self._report(call.key, node, reason, None)
                self.env[node] = POISON
                return
        args, kwargs = self.resolve(call.args), self.resolve(call.kwargs)
        if self._poisoned(args) or self._poisoned(kwargs):
            self.env[node] = POISON
            return
        ctx = self.ctx
        ctx.nodes = []
        ctx.node_name = self.prefix + node.name
        ctx.module = self.source.module_path(node)
        ctx.stack = self.source.module_stack(node)
        ctx.source_op = self._original(node) or ("" if call.fn is not None else call.key)
        ctx.meta = meta
        ctx.complex_ids = complex_ids
        try:
            if call.fn is not None:
                result = call.fn(ctx, *args, **kwargs)
            else:
                op = aten_op(call.key)
                if op is not None:
                    result = fn(ctx, **bind(op._schema, args, kwargs))
                else:
                    result = fn(ctx, *args, **kwargs)
            result = self._finish(node, result, meta)
        except Unsupported as e:
            self._report(call.key, node, str(e), e)
            self.env[node] = POISON
            return
        except Exception as e:  # noqa: BLE001 - reported with the node, all at once
            self._report(call.key, node, f"{type(e).__name__}: {e}", e)
            self.env[node] = POISON
            return
        for n in ctx.nodes:
            self.graph.add_node(n)
        ctx.nodes = []
        self.env[node] = result
        target = call.inplace_arg
        if target is None and inplace and node.args and isinstance(node.args[0], torch.fx.Node):
            target = node.args[0]
        if target is not None:
            self.env[target] = result

    def body(self, gm: torch.fx.GraphModule, operands: list[Any], graph: Graph, prefix: str) -> Any:
        """Translate ``gm`` (a higher-order op's body) into ``graph`` with its placeholders
        bound to ``operands``; the resolved output. Problems join this translator's."""
        inner = Translator(graph, self.source)
        inner.symbols, inner.prefix, inner.ctx = self.symbols, self.prefix + prefix, self.ctx
        inner.custom_ops, inner.decomposed = self.custom_ops, self.decomposed
        for p, v in zip([n for n in gm.graph.nodes if n.op == "placeholder"], operands):
            inner.env[p] = v
        inner.source = _BodySource(self.source, inner.env)
        try:
            out = inner.run(gm.graph)
        except UnsupportedOpsError as e:
            self.problems.extend(e.ops)
            return POISON
        return inner.resolve(out)

    def _inline_hop(self, node: torch.fx.Node, call: Call) -> None:
        """wrap_with_set_grad_enabled / wrap_with_autocast: translate the body in place."""
        args = self.resolve(call.args)
        if self._poisoned(args):
            self.env[node] = POISON
            return
        body = next((a for a in args if isinstance(a, torch.fx.GraphModule)), None)
        operands = args[args.index(body) + 1 :] if body is not None else []
        if body is None:
            self._report(call.key, node, "no body graph", None)
            self.env[node] = POISON
            return
        inner = Translator(self.graph, self.source)
        inner.symbols, inner.prefix, inner.ctx = (
            self.symbols,
            f"{self.prefix}{node.name}.",
            self.ctx,
        )
        for p, v in zip([n for n in body.graph.nodes if n.op == "placeholder"], operands):
            inner.env[p] = v
        inner.source = _BodySource(self.source, inner.env)
        try:
            out = inner.run(body.graph)
        except UnsupportedOpsError as e:
            self.problems.extend(e.ops)
            self.env[node] = POISON
            return
        self.env[node] = inner.resolve(out)

    def _finish(self, node: torch.fx.Node, result: Any, meta: Any) -> Any:
        produced = {id(v) for n in self.ctx.nodes for v in n.outputs}
        if isinstance(result, Value):
            if id(result) in produced and result.name is None:
                result.name = self.prefix + node.name
            if isinstance(meta, torch.SymInt):
                return self.ctx.mark_sym(result, meta.node.expr)
            return self._refine(result, meta, id(result) in produced)
        if isinstance(result, list | tuple):
            names: dict[int, str] = {}
            for u in node.users:
                if u.target is operator.getitem and isinstance(u.args[1], int):
                    names.setdefault(u.args[1], self.prefix + u.name)
            metas = meta if isinstance(meta, list | tuple) else [None] * len(result)
            out = []
            for i, v in enumerate(result):
                if isinstance(v, Value):
                    fresh = id(v) in produced
                    if fresh and v.name is None and i in names:
                        v.name = names[i]
                    if i < len(metas):
                        v = self._refine(v, metas[i], fresh)
                out.append(v)
            return type(result)(out) if isinstance(result, tuple) else out
        if isinstance(meta, torch.Tensor):
            raise ConversionError(f"converter returned {type(result).__name__} for a tensor")
        return result
