"""The PyTorch codegen: an msc Graph to the source of an ``nn.Module``.

# NOTE: invariants
# - One ``TorchCodegen`` per emission; its ``Namespace`` is fresh, so identifiers never depend on
#   an earlier run. Override points: ``lowered``, ``simplified``, ``class_name``, ``is_buffer``,
#   ``unused_weights``, ``plan``, ``emit_init``, ``emit_forward``, ``emit_node``,
#   ``emit_return``, and the ``emitters``/``module_rules`` registries.
# - The graph is lowered (ops without an emitter, through their decompositions) and simplified
#   (exact no-op arithmetic, msc.ops.simplify) first; the input graph is never changed.
# - The source is assembled from sections: a header comment (model strings only via ``repr``;
#   it names the unused weights left out), imports (torch only), ``NAMES`` (identifier ->
#   source name, only for real renames the code uses) and ``WEIGHT_KEYS`` (state_dict key ->
#   weight name, only for weights whose names cannot be module paths), each absent when empty,
#   the helpers the emitters asked for (verbatim source of ``helpers.py`` functions), the class
#   (``ast`` then ``ast.unparse``), and the ``load`` function.
# - Every node gets one statement ``out = <expr>`` (or ``a, b = <expr>``); nodes in a subgraph
#   (the ``if`` op) get theirs inside the branch. Then passes.py edits the forward: statements
#   nothing reads go, a tensor constant becomes a non-persistent buffer (``constants_``, loaded
#   with the weights), a size read once is written where it is read, ``del`` frees large values.
# - Nothing in the generated code depends on an example size of a symbolic dim: emitters read
#   static sizes only from ints in the graph and sizes of symbols from tensors at run time.
"""

from __future__ import annotations

import ast
import copy
import inspect
import keyword
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codegen.torch import code, custom, inplace, unsigned
from codegen.torch.blocks import (
    Block,
    ForwardInts,
    Sizes,
    canonical,
    carried_names,
    drop_defaults,
    explicit_defaults,
    find_blocks,
    height,
    loops,
    outside_weights,
    role_names,
    sequential_leaves,
    split_body,
)
from codegen.torch.helpers import HELPERS
from codegen.torch.modules import (
    Holder,
    Leaf,
    ModulePlan,
    block_init,
    init_statements,
    plan_modules,
)
from codegen.torch.names import TAKEN, Namespace, readable, sanitize
from codegen.torch.passes import (
    RELEASE_BYTES,
    Rename,
    inline_arithmetic,
    inline_sizes,
    prune,
    release_after_last_use,
    walk_stmts,
)
from codegen.torch.prepare import (
    constant_masks,
    indices_from_the_end,
    shape_weights_as_constants,
)
from codegen.torch.registry import (
    EMITTERS,
    GRAPH_REWRITES,
    GROUP_RULES,
    MODULE_RULES,
    EmitterRegistry,
    GroupModule,
    ModuleRule,
)
from msc.errors import NonNumericValuesError, UnsupportedOp, UnsupportedOpsError
from msc.io.marker import SOURCES
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import SymDim, TensorType
from msc.ir.validate import non_numeric_values
from msc.ops import registry as op_registry
from msc.ops.custom import is_custom
from msc.ops.layout import channels_first

__all__ = ["TorchCodegen", "Arg", "NodeEmit"]


class Arg:
    """An emitter's view of one input: its graph Value and the ways to spell it in code.

    ``expr`` is always a tensor. ``s`` may be a Python value instead, which torch accepts as
    an operand in most places and which keeps the graph's structure when the module is traced
    again: a 0-d constant is its literal (``x * 0.5``), a size read from a shape is a Python
    int (``x.shape[0]``, a SymInt when traced). Emitters use ``s`` where a scalar is allowed.
    """

    __slots__ = ("cg", "value")

    def __init__(self, cg: TorchCodegen | None, value: Value) -> None:
        self.cg = cg
        self.value = value

    @property
    def expr(self) -> ast.expr:
        """The value as a tensor."""
        return self.cg.tensor_expr(self.value)  # type: ignore[union-attr]

    @property
    def s(self) -> ast.expr:
        """A literal for a 0-d constant, the Python value of a size, else the tensor."""
        lit = self.literal
        if lit is not None and self.rank == 0:
            return code.const(lit)
        return self.cg.py_expr(self.value) if self.is_py else self.expr  # type: ignore[union-attr]

    @property
    def is_py(self) -> bool:
        """Held as a Python int / sequence of ints (a size computed from shapes)."""
        return self.cg is not None and id(self.value) in self.cg.py_values

    @property
    def literal(self) -> Any:
        """The Python value of a constant (0-d: a scalar; 1-d integer: a list), else None."""
        c = self.const
        dt = self.dtype
        if c is None or c.ndim > 1 or dt.is_complex:
            return None
        if c.ndim == 1:
            return [int(v) for v in c.tolist()] if dt.is_integer and c.size <= 16 else None
        if not dt.is_floating:
            from codegen.torch.emitters.common import scalar_for

            return scalar_for(dt, c.item())
        v = float(c.astype(np.float64))
        # An integral float reads (and traces) as an int; torch converts it exactly.
        if v.is_integer() and abs(v) < 2**53 and (v != 0 or str(v)[0] != "-"):
            return int(v)
        return code.shortest(v, c.dtype)

    @property
    def is_scalar(self) -> bool:
        """0-d with a Python form (a literal or a size): usable as a torch scalar operand."""
        return self.rank == 0 and (self.is_py or self.literal is not None)

    @property
    def type(self) -> TensorType:
        return self.value.type

    @property
    def dtype(self) -> DType:
        return self.value.type.dtype

    @property
    def shape(self) -> tuple | None:
        return self.value.type.shape

    @property
    def rank(self) -> int | None:
        return self.value.type.rank

    @property
    def weight(self) -> Weight | None:
        return self.value if isinstance(self.value, Weight) else None

    @property
    def const(self) -> np.ndarray | None:
        """The tensor, when the input is produced by a ``constant`` node."""
        p = self.value.producer
        return p.attrs["value"] if p is not None and p.op == "constant" else None

    def __repr__(self) -> str:
        return f"Arg({self.value.name!r}: {self.type})"


class NodeEmit:
    """What an emitter may use while emitting one node."""

    def __init__(self, cg: TorchCodegen, node: Node, outputs: list[str], out: list[ast.stmt]):
        self.cg = cg
        self.node = node
        self.outputs = outputs
        self._out = out

    @property
    def output_types(self) -> list[TensorType]:
        return [v.type for v in self.node.outputs]

    def helper(self, name: str) -> ast.Name:
        """Use run-time helper ``name`` (from helpers.py); returns its name in the code."""
        self.cg.use_helper(name)
        return code.name(name)

    def tmp(self, hint: str = "t") -> str:
        """A fresh local identifier."""
        return self.cg.ns.create(f"{self.outputs[0] if self.outputs else ''}_{hint}")

    def stmt(self, s: ast.stmt) -> None:
        """Emit ``s`` before the node's own statement."""
        self._out.append(s)

    def let(self, hint: str, value: ast.expr) -> ast.Name:
        """``tmp = value``; returns the temporary's name."""
        t = self.tmp(hint)
        self.stmt(ast.Assign([ast.Name(t, ast.Store())], value))
        return code.name(t)

    def py(self, value: ast.expr) -> ast.expr:
        """Mark the node's outputs as Python values (sizes), not tensors; returns ``value``."""
        for v in self.node.outputs:
            self.cg.py_values.add(id(v))
        return value

    def assign(self, value: ast.expr) -> None:
        """Assign ``value`` to the node's outputs (for emitters that return None)."""
        self._out.append(self.cg.assign_outputs(self.outputs, value))

    def block(self, graph: Graph) -> tuple[list[ast.stmt], list[ast.expr]]:
        """Statements for a subgraph's nodes and the expressions of its outputs."""
        stmts: list[ast.stmt] = []
        for n in graph.nodes:
            stmts.extend(self.cg.emit_node(n))
        return stmts, [self.cg.ref(v) for v in graph.outputs]

    def bind(self, v: Value, hint: str = "v", py: bool = False) -> str:
        """A fresh local name for subgraph input ``v`` (a loop body's per-iteration input),
        which the emitter assigns; ``py``: it holds a Python int/bool, not a tensor."""
        ident = self.cg.ns.create(v.name or "", hint)
        self.cg._refs[id(v)] = code.name(ident)
        if py:
            self.cg.py_values.add(id(v))
        return ident


class TorchCodegen:
    """Generates the source of an ``nn.Module`` for a graph. Subclass to change a part."""

    emitters: EmitterRegistry = EMITTERS
    module_rules = MODULE_RULES
    group_rules = GROUP_RULES
    graph_rewrites = GRAPH_REWRITES
    base_reserved: frozenset[str] = frozenset()

    def __init__(
        self,
        graph: Graph,
        keep_unused: bool = False,
        drop_unused: bool = False,
        flat: bool = False,
    ) -> None:
        from codegen.torch import emitters as _  # noqa: F401  (registers the emitters)

        if bad := non_numeric_values(graph):  # torch has no str, sequence or optional tensors
            raise NonNumericValuesError(bad, "codegen.torch", graph.name)
        self.graph = self.simplified(self.lowered(self.library_ops(channels_first(graph))))
        for rewrite in self.graph_rewrites:  # ops in the form of torch's modules
            self.graph = rewrite(self.graph)
        if keep_unused and drop_unused:
            raise ValueError("keep_unused and drop_unused exclude each other")
        self.keep_unused = keep_unused
        self.drop_unused = drop_unused
        # flat: one forward, as a trace reads; else one class per block of the source's module
        # hierarchy where the graph records it (blocks.py).
        self.flat = flat
        self.top_blocks_: list[Block] = []
        self.node_block_: dict[Node, Block] = {}
        self._base_of: dict[Node, list[str]] = {}  # module path of the class emitting a node
        # Weights a block reads from outside its path: weight name -> the root's local for it.
        self._handed: dict[str, ast.expr] = {}
        self.block_classes_: list[ast.ClassDef] = []
        self.inplace_: dict[Node, int] = {}  # node -> the operand it overwrites (inplace.py)
        self.forwards_: dict[str, ast.FunctionDef] = {}  # block class -> its forward
        self._class_holder: dict[str, Holder] = {}  # block class -> the state of an instance
        self.ns = Namespace(set(HELPERS) | set(self.base_reserved))
        self._helpers: list[str] = []
        self._refs: dict[int, ast.expr] = {}
        self.py_values: set[int] = set()  # ids of values held as Python ints/sequences
        self._reads: list[set[int]] = [set()]  # values each node's code reads (a stack)
        self._emitted: list[tuple[Node, list[ast.stmt], set[int]]] = []
        self.plan_: ModulePlan | None = None
        # Node groups emitted as one module call (an nn.LSTM): each node -> its group.
        self.groups_: dict[Node, GroupModule] = {}
        self.class_name_ = ""
        # Tensor constants of the forward pass made non-persistent buffers: state_dict key ->
        # value. Loaded with the weights (to_module, save), never part of state_dict().
        self.constants_: dict[str, np.ndarray] = {}
        self.dropped_: list[str] = []  # unused weights left out of the module
        self.scratch_values: list[Value] = []  # values made during emission (unsigned.py)

    # The spelled-out norms fused back (msc.ops.fusions: only where the op computes the same
    # function), so a source's own RMSNorm class (LlamaRMSNorm) is written as nn.RMSNorm; and
    # key / value heads repeated for grouped-query attention (transformers' repeat_kv) read
    # by SDPA's enable_gqa, as transformers calls it without a mask: no copy of K and V per
    # layer.
    LIBRARY_FUSIONS = (
        "layer_norm", "rms_norm", "layer_norm_mul", "layer_norm_add", "rms_norm_mul",
        "attention_gqa",
    )  # fmt: skip

    def library_ops(self, graph: Graph) -> Graph:
        """``graph`` with the norms torch has a module for, spelled out in it, fused back, and
        attention over repeated heads made grouped-query attention (``LIBRARY_FUSIONS``); the
        graph itself when there are none."""
        from msc.ops.fusions import FUSIONS, fuse

        ops = {n.op for n in graph.nodes}
        norms = "reduce_mean" in ops and {"rsqrt", "sqrt"} & ops
        if not norms and not ("attention" in ops and "expand" in ops):
            return graph
        fused = fuse(graph, [p for p in FUSIONS if p.name in self.LIBRARY_FUSIONS])
        for n in fused.nodes:  # the axis as torch's modules give it (from the end)
            rank = n.inputs[0].type.rank if n.inputs and n.inputs[0] is not None else None
            if n.op in ("layer_norm", "rms_norm") and rank and n.attrs.get("axis", -1) >= 0:
                n.attrs = {**n.attrs, "axis": n.attrs["axis"] - rank}
        return fused

    def lowered(self, graph: Graph) -> Graph:
        """``graph`` with every op that has no emitter but a decomposition lowered through it
        (quantize / dequantize become their exact arithmetic); the graph itself when there
        are none. A node its rule cannot lower stays, and is reported as unsupported."""
        from msc.ops.decompose import NotDecomposable, decompose
        from msc.ops.decompose import registry as rules

        def want(n: Node) -> bool:
            if is_custom(n.op) or n.op in self.emitters or n.op not in rules:
                return False
            try:  # a node its rule cannot lower stays, and is reported with the rule's reason
                rules.expand(n)
            except NotDecomposable:
                return False
            return True

        if not any(want(n) for n in graph.nodes):
            return graph
        return decompose(graph, want)

    def simplified(self, graph: Graph) -> Graph:
        """``graph`` without arithmetic that provably does nothing (``x + 0`` on integers,
        ``x * 1``: msc.ops.simplify), with attention masks computed from no input left out or
        made ``is_causal``, small integer initializers as constants and indices that may count
        from the end wrapped by graph ops (prepare.py); the graph itself when there is none of
        these."""
        from msc.ops.simplify import fold_identities

        graph = shape_weights_as_constants(constant_masks(graph))
        return fold_identities(indices_from_the_end(graph))

    # ------------------------------------------------------------------ override points
    def class_name(self) -> str:
        """CamelCase from the graph name, ``Model`` when it has none."""
        words = sanitize(self.graph.name, "").split("_")
        name = "".join(w[:1].upper() + w[1:] for w in words if w)
        if name in _MODULE_NAMES:  # a graph named f would shadow ``torch.nn.functional as F``
            return f"{name}Model"
        return name if name and name[0].isalpha() else "Model"

    def is_buffer(self, w: Weight) -> bool:
        """Register as a buffer (not a parameter)? What the weight's role says; a weight with
        no role (not from the torch frontend) is a buffer when it is not floating point or is
        batch_norm's running statistics."""
        if w.role == "buffer":
            return True
        if w.role:  # parameter or constant: a buffer only where torch needs one (no grad)
            return not (w.dtype.is_floating or w.dtype.is_complex)
        if any(n.op == "batch_norm" and i >= 3 for n, i in w.uses):
            return True
        return not (w.dtype.is_floating or w.dtype.is_complex)

    def is_constant(self, w: Weight) -> bool:
        """A tensor constant rather than model state: registered as a non-persistent buffer,
        so state_dict() keeps the source model's keys."""
        return w.role == "constant"

    def unused_weights(self) -> list[str]:
        """Names of the weights no node reads and no graph returns, left out of the module:
        constants and weights of no stated role (ONNX initializers) unless ``keep_unused``;
        parameters (state the source's state_dict has: a pooler whose output the export
        dropped) only with ``drop_unused``, so by default the source's own state_dict loads
        with strict=True. A persistent buffer always stays: small state the source keeps
        counting in (BatchNorm's num_batches_tracked)."""
        if self.keep_unused:
            return []
        read: set[int] = set()
        for g in [self.graph, *(sub for n in _walk(self.graph) for sub in n.subgraphs())]:
            read |= {id(v) for v in g.outputs}
        state = ("buffer",) if self.drop_unused else ("parameter", "buffer")
        return [
            name
            for name, w in self.graph.weights.items()
            if not w.uses and id(w) not in read and w.role not in state
        ]

    def plan(self) -> ModulePlan:
        tied = {a: w.name for w in self.graph.weights.values() for a in w.aliases}
        dropped = set(self.dropped_)
        kept = {n: w for n, w in self.graph.weights.items() if n not in dropped}
        found = [g for rule in self.group_rules for g in rule(self.graph)]
        fixed = [
            Leaf(g.prefix, g.ctor, g.roles, {g.anchor: [_Deferred(self, a) for a in g.args]})
            for g in found
        ]
        plan = plan_modules(
            self.graph, self.module_rules.get, self.call_module_rule, self.is_buffer,
            self.is_constant, tied, kept, fixed,
        )  # fmt: skip
        for g in found:  # the groups whose module found its place
            if plan.node_leaf.get(g.anchor) is not None:
                self.groups_.update((n, g) for n in g.nodes)
        return plan

    def kept_weights(self) -> list[Weight]:
        """The graph's weights the generated module holds (after ``generate``)."""
        return [w for w in self.graph.weights.values() if w.name in self.plan_.paths]  # type: ignore[union-attr]

    def emit_init(self) -> ast.FunctionDef:
        body = init_statements(self.plan_)  # type: ignore[arg-type]
        if self.plan_.stored:  # type: ignore[union-attr]
            keys = code.const(list(self.plan_.stored))  # type: ignore[union-attr]
            self.use_helper("_msc_read_stored")
            read = ast.Call(code.name("_msc_read_stored"), [code.name("self"), keys], [])
            body.append(ast.Expr(read))
        return _func("__init__", ["self"], body)

    def emit_forward(self) -> ast.FunctionDef:
        args = ["self"]
        for v in self.graph.inputs:
            ident = self.ns.create(v.name or "", "x")
            self._refs[id(v)] = code.name(ident)
            args.append(ident)
        body: list[ast.stmt] = []
        for w in outside_weights(self.node_block_, self.plan_):  # type: ignore[arg-type]
            ident = self.ns.create(w.name, "w")
            body.append(ast.Assign([ast.Name(ident, ast.Store())], self.plan_.weight_expr(w)))  # type: ignore[union-attr]
            self._handed[w.name] = code.name(ident)
        for node in self.graph.nodes:
            block = self.node_block_.get(node)
            self.plan_.base = block.parts if block is not None else []  # type: ignore[union-attr]
            body.extend(self.emit_node(node))
        self.plan_.base = []  # type: ignore[union-attr]
        body.append(self.emit_return())
        return _func("forward", args, body)

    def emit_node(self, node: Node) -> list[ast.stmt]:
        self._base_of[node] = list(self.plan_.base) if self.plan_ is not None else []
        self._reads.append(set())
        try:
            out = self._emit_node(node)
        finally:
            reads = self._reads.pop()
            if len(self._reads) > 1:  # a node inside a branch: the branch node reads it too
                self._reads[-1] |= reads
        self._emitted.append((node, list(out), reads))
        return out

    def _small_values(self) -> dict[str, int]:
        """Identifiers of intermediates too small for a ``del`` of their own, with their bytes:
        a size under ``RELEASE_BYTES``, counting a symbolic dim at its upper bound. Sizes
        without a bound may be large, and are released after their last read."""
        small: dict[str, int] = {}
        for n in self.graph.nodes:
            for v in n.outputs:
                t = v.type
                if t.shape is None:
                    continue
                size: int | None = 1
                for d in t.shape:
                    bound = d if isinstance(d, int) else getattr(d, "max", None)
                    if not isinstance(bound, int) or size is None:
                        size = None
                        break
                    size *= bound
                if size is None:
                    continue
                nbytes = size * max(1, t.dtype.bits // 8)
                if nbytes < RELEASE_BYTES:
                    small[self.ns_name(v)] = nbytes
        return small

    def _ident(self, node: Node, v: Value, module_call: bool) -> str:
        """The identifier of a node's output: its source name, or for a name an exporter made
        up (getitem_3, /layer1/layer1.0/conv1/Conv_output_0) one from the node's module; a
        symbolic size read from a shape is named after its symbol (``batch``)."""
        nice = _symbol_of(node)
        base = self.plan_.base if self.plan_ is not None else []
        leaf = self.plan_.node_leaf.get(node) if self.plan_ is not None else None
        if leaf is not None and not base and "." in leaf.prefix:
            leaf = None  # at the top level only its own modules (self.norm) name their outputs
        if nice is None and leaf is not None and len(node.outputs) == 1:
            # A module's output is named after the module (its role there).
            rel = leaf.prefix.split(".")[len(base) :]
            inside = rel and leaf.prefix.split(".")[: len(base)] == base
            nice = "_".join(rel).lower() if inside else None
        if nice is None and v.name and len(node.outputs) == 1:
            nice = readable(v.name, node.provenance.module, node.op, module_call)
        return self.ns.create(v.name or "", "v", base=nice)

    def _size_names(self) -> set[str]:
        """Identifiers of the node outputs held as Python sizes."""
        return {
            self.ns_name(v)
            for node, _, _ in self._emitted
            for v in node.outputs
            if id(v) in self.py_values
        }

    def _emit_group(self, node: Node, g: GroupModule) -> list[ast.stmt]:
        """The module call of group ``g`` at its last node; nothing for its other nodes."""
        if node is not g.anchor:
            return []
        leaf = self.plan_.node_leaf[node]  # type: ignore[union-attr]
        base = self.plan_.base  # type: ignore[union-attr]
        rel = leaf.prefix.split(".")[len(base) :]
        stem = "_".join(rel).lower() if leaf.prefix.split(".")[: len(base)] == base else None

        slot = iter(("", "_h", "_c", "_3", "_4"))  # output, states: rnn, rnn_h, rnn_c

        def target(t: Any) -> ast.expr:
            if isinstance(t, list):
                return ast.Tuple([target(x) for x in t], ast.Store())
            suffix = next(slot)
            if t is None:
                return ast.Name("_", ast.Store())
            nice = None if stem is None else stem + suffix
            ident = self.ns.create(t.name or "", "v", base=nice)
            self._refs[id(t)] = code.name(ident)
            return ast.Name(ident, ast.Store())

        callee = self.plan_.access(leaf.prefix.split("."))  # type: ignore[union-attr]
        args = [code.to_ast(a) for a in leaf.calls[node]]
        return [ast.Assign([target(g.target)], ast.Call(callee, args, []))]

    def _emit_node(self, node: Node) -> list[ast.stmt]:
        group = self.groups_.get(node)
        if group is not None:
            return self._emit_group(node, group)
        out: list[ast.stmt] = []
        leaf = self.plan_.node_leaf.get(node) if self.plan_ else None
        names = [self._ident(node, v, leaf is not None) for v in node.outputs]
        e = NodeEmit(self, node, names, out)
        if leaf is not None:
            callee = self.plan_.access(leaf.prefix.split("."))  # type: ignore[union-attr]
            value = ast.Call(callee, [code.to_ast(a) for a in leaf.calls[node]], [])
        elif is_custom(node.op):
            value = custom.call(node, [None if v is None else self.ref(v) for v in node.inputs])
        else:
            fn = self.emitters.get(node.op)
            if fn is None:  # generate() checks coverage first; this is a programming error
                raise UnsupportedOpsError([UnsupportedOp(node.op, node.name)], "graph")
            args, kwargs = self.node_args(node)
            how = unsigned.kind(node)
            if how is None:
                value = fn(e, *args, **kwargs)
            else:  # an op torch has no uint16/32/64 kernel for: computed in a signed type
                value = unsigned.emit(e, fn, args, kwargs, how)
            if node in self.inplace_ and how is None and value is not None:
                k = self.inplace_[node]
                target = self._refs.get(id(node.inputs[k]))
                new = None
                if isinstance(target, ast.Name) and id(node.inputs[k]) not in self.py_values:
                    new = inplace.rewrite(node, value, k, target.id)
                if isinstance(new, ast.stmt):  # a += b: the result is a's tensor, by a's name
                    out.append(new)
                    self._refs[id(node.outputs[0])] = code.name(target.id)  # type: ignore[union-attr]
                    return out
                value = new if new is not None else value
        if value is not None:
            bound = (
                op_registry.get(node.op).num_outputs(self.emitted_attrs(node))
                if (len(names) > 1 and not is_custom(node.op))
                else len(names)
            )
            out.append(self.assign_outputs(names[:bound], value))
        for v, ident in zip(node.outputs, names):
            self._refs[id(v)] = code.name(ident)
        return out

    def _same_forward(self, node: Node, producer: Node | None) -> bool:
        """Whether the forward that computes ``node`` also defines ``producer``'s outputs
        (its block is ``node``'s or one inside it; flat code has one forward)."""
        if producer is None:
            return False
        mine = self.node_block_.get(node)
        return mine is None or mine.contains(self.node_block_.get(producer))

    def _dead_statements(self) -> set[int]:
        """Statements of nodes whose results no code reads because of how they were emitted:
        constants used only as literals, shape arithmetic folded into Python ints (and the
        size checks on it, which torch regenerates). A node the graph itself leaves unused is
        kept: one statement per node."""
        outputs = {id(v) for v in self.graph.outputs}
        live = set(self._reads[0])
        dead: set[int] = set()
        for node, stmts, reads in reversed(self._emitted):
            group = self.groups_.get(node)
            results = group.results() if group is not None else node.outputs
            if any(id(v) in live for v in results):
                live |= reads
                continue
            used = any(v.uses or id(v) in outputs for v in results)
            on_sizes = any(v is not None and id(v) in self.py_values for v in node.inputs)
            if used or on_sizes:
                dead |= {id(st) for st in stmts}
            else:
                live |= reads
        return dead

    def _constants_to_buffers(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """``body`` with every tensor constant that is still built in it (not folded into a
        literal) turned into a non-persistent buffer: created once with the module and loaded
        with the weights, read as ``self.<name>``, not rebuilt on every call. 0-d constants stay
        inline (a literal or a one-element ``torch.tensor``)."""
        stmts = {id(st) for st in walk_stmts(body)}
        outputs = set(map(id, self.graph.outputs))
        subs: dict[str, ast.expr] = {}
        drop: set[int] = set()
        for node, out, _ in self._emitted:
            value = node.attrs.get("value") if node.op == "constant" else None
            if value is None or value.ndim == 0 or value.size == 0:
                continue
            if len(out) != 1 or id(out[0]) not in stmts or id(node.outputs[0]) in outputs:
                continue  # a returned constant stays a fresh tensor, not the module's state
            ident = self.ns_name(node.outputs[0])
            at = self._base_of.get(node, [])
            parts = self.plan_.add_constant(ident, node.outputs[0].type, value, at)  # type: ignore[union-attr]
            self.constants_[".".join(parts)] = value
            self.plan_.base = at  # type: ignore[union-attr]
            read = self.plan_.access(parts)  # type: ignore[union-attr]
            self.plan_.base = []  # type: ignore[union-attr]
            users = {id(u) for v in node.outputs for u, _ in v.uses}
            if all(self._base_of.get(u) == at for u in _walk(self.graph) if id(u) in users):
                subs[ident] = read
                drop.add(id(out[0]))
            else:  # read by other classes too: a local they are handed
                out[0].value = read  # type: ignore[attr-defined]
        if not subs:
            return body
        body = prune(body, drop)
        return [Rename(subs).visit(st) for st in body]

    def emit_return(self) -> ast.stmt:
        spec = self.graph.output_tree
        outs = [self.ref(v) for v in self.graph.outputs]
        if spec is not None:
            return ast.Return(_tree(spec, outs))
        if len(outs) == 1:
            return ast.Return(outs[0])
        return ast.Return(ast.Tuple(outs, ast.Load()))

    # ------------------------------------------------------------------ machinery
    def ref(self, v: Value) -> ast.expr:
        """The value as a tensor expression (a local, a module attribute, or a size made a
        tensor)."""
        return self.tensor_expr(v)

    def tensor_expr(self, v: Value) -> ast.expr:
        if isinstance(v, Weight):
            handed = self._handed.get(v.name)
            return handed if handed is not None else self.plan_.weight_expr(v)  # type: ignore[union-attr]
        e = self.py_expr(v)
        if id(v) in self.py_values:
            return code.call("torch.tensor", e, dtype=v.dtype)
        return e

    def py_expr(self, v: Value) -> ast.expr:
        """The local name of ``v`` (for a size: its Python value)."""
        try:
            ref = self._refs[id(v)]
        except KeyError:
            raise ValueError(f"value {v.name!r} is used before it is defined") from None
        self._reads[-1].add(id(v))
        return ref

    def arg(self, v: Value | None) -> Arg | None:
        return None if v is None else Arg(self, v)

    def node_args(self, node: Node) -> tuple[list[Any], dict[str, Any]]:
        """Inputs shaped like the schema (a list for a variadic input), and the attributes."""
        schema = op_registry.get(node.op)
        ins = [self.arg(v) for v in node.inputs]
        vi = next((i for i, s in enumerate(schema.inputs) if s.variadic), None)
        if vi is None:
            args = ins + [None] * (len(schema.inputs) - len(ins))
        else:
            after = len(schema.inputs) - vi - 1
            args = ins[:vi] + [ins[vi : len(ins) - after]] + ins[len(ins) - after :]
        return args, self.emitted_attrs(node)

    def emitted_attrs(self, node: Node) -> dict[str, Any]:
        """The node's attributes as the code computes them: a flag that only adds trailing
        outputs nothing reads (``return_indices`` of a pool whose indices are unused) is
        written off, so the code computes and binds only the outputs in use."""
        attrs = dict(node.attrs)
        schema = op_registry.get(node.op)
        if len(node.outputs) < 2 or not callable(schema.outputs):
            return attrs
        returned = {id(v) for v in self.graph.outputs}
        used = len(node.outputs)
        while used > 1:
            last = node.outputs[used - 1]
            if last.uses or id(last) in returned:
                break
            used -= 1
        for k, v in node.attrs.items():
            if v is True and used < len(node.outputs):
                fewer = {**attrs, k: False}
                if schema.num_outputs(fewer) == used:
                    return fewer
        return attrs

    def call_module_rule(self, rule: ModuleRule, node: Node) -> tuple[ast.expr, list] | None:
        """Ask ``rule`` whether ``node`` is its module; call arguments resolve at emission."""
        schema = op_registry.get(node.op)
        ins = [None if v is None else Arg(None, v) for v in node.inputs]
        kw = self.emitted_attrs(node)
        if rule.types:  # a module without parameters: the source's type picks its class
            kw["module_type"] = node.provenance.stack[-1][1]
        got = rule.fn(*ins, *[None] * (len(schema.inputs) - len(ins)), **kw)
        if got is None:
            return None
        ctor, call_args = got
        return ctor, [_Deferred(self, a.value) if isinstance(a, Arg) else a for a in call_args]

    def assign_outputs(self, names: Sequence[str], value: ast.expr) -> ast.stmt:
        if len(names) == 1:
            target: ast.expr = ast.Name(names[0], ast.Store())
        else:
            target = ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())
        return ast.Assign([target], value)

    def use_helper(self, name: str) -> None:
        if name not in HELPERS:
            raise KeyError(f"no helper {name!r}")
        if name in self._helpers:
            return
        for dep in _helper_deps(name):
            self.use_helper(dep)
        self._helpers.append(name)

    def unsupported(self) -> list[UnsupportedOp]:
        bad = []
        for node in _walk(self.graph):
            if is_custom(node.op):
                try:
                    custom.check(node)
                except ValueError as e:
                    bad.append(UnsupportedOp(node.op, node.name, node.provenance.module, str(e)))
            elif node.op not in self.emitters:
                bad.append(
                    UnsupportedOp(node.op, node.name, node.provenance.module, self._why_not(node))
                )
            elif why := unsigned.refusal(node):
                bad.append(UnsupportedOp(node.op, node.name, node.provenance.module, why))
        return bad

    def _why_not(self, node: Node) -> str:
        """Why a node with no emitter is left: its decomposition's reason, if it has one."""
        from msc.ops.decompose import NotDecomposable
        from msc.ops.decompose import registry as rules

        if node.op in rules:
            try:
                rules.expand(node)
            except NotDecomposable as e:
                return f"no emitter, and its decomposition cannot lower it: {e}"
        return self.emitters.reason(node.op)

    # ------------------------------------------------------------------ the source
    def generate(self) -> str:
        """The module source: header, imports, NAMES, helpers, the class, ``load``."""
        bad = self.unsupported()
        if bad:
            raise UnsupportedOpsError(bad, f"graph {self.graph.name!r} (torch codegen)")
        self.class_name_ = self.class_name()
        self.ns.reserve(self.class_name_)
        self.dropped_ = self.unused_weights()
        self.plan_ = self.plan()
        self.use_helper("_msc_load_weights")
        if not self.flat:
            self.top_blocks_, self.node_block_ = find_blocks(self.graph, self.plan_)
        self.inplace_ = inplace.overwritten(self.graph, self._same_forward)
        inplace.apply_modules(self.inplace_, self.plan_.leaves.values())
        forward = self.emit_forward()
        body = self._constants_to_buffers(prune(forward.body, self._dead_statements()))
        # Read before the block classes rename their parameters (carried_names renames the
        # identifiers in place).
        size_names, small = self._size_names(), self._small_values()
        if self.top_blocks_:
            body = self._assemble_blocks(body, [a.arg for a in forward.args.args])
        elif not self.flat:  # no block classes, but a source nn.Sequential may be called whole
            body = sequential_leaves(body, self.plan_, [])
        body = inline_sizes(body, size_names)
        if self.top_blocks_:  # not flat code (a statement per node, some users diff traces)
            body = inline_arithmetic(body, _pure_calls(self.plan_.root))
        forward.body = release_after_last_use(body, small)
        if not self.flat:
            forward = role_names(
                forward, self.plan_.root, self.plan_, self.forwards_, _returned_keys(forward),
                taken=self._module_names(),
            )  # fmt: skip
        cls = ast.ClassDef(
            name=self.class_name_,
            bases=[code.expr("nn.Module")],
            keywords=[],
            body=[
                ast.Expr(ast.Constant(self._docstring())),
                self.emit_init(),
                forward,
            ],
            decorator_list=[],
            **({"type_params": []} if "type_params" in ast.ClassDef._fields else {}),
        )
        # Only real renames: an identifier the code uses, made from a source name it differs
        # from. A by-position name (msc's ``%0``, an exporter's ``123``) names nothing.
        every = ast.Module([*self.block_classes_, cls], [])
        used = {n.id for n in ast.walk(every) if isinstance(n, ast.Name)}
        used |= {a.arg for n in ast.walk(every) if isinstance(n, ast.arguments) for a in n.args}
        counters = _counter_names(self.graph)
        names = {
            k: v
            for k, v in self.ns.source.items()
            if k != v and k in used and v and not v.isdigit() and v not in counters
        }
        body: list[ast.stmt] = []
        notes = []
        if names:
            body.append(ast.Assign([ast.Name("NAMES", ast.Store())], code.const(names)))
            notes.append("# NAMES: code identifier -> source name, where they differ.")
        if self.plan_.keys:
            keys = code.const(self.plan_.keys)
            body.append(ast.Assign([ast.Name("WEIGHT_KEYS", ast.Store())], keys))
            notes.append(
                "# WEIGHT_KEYS: state_dict key -> source weight name, for weights whose names "
                "cannot be\n# module paths."
            )
        parts = [
            self._header(),
            "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n",
        ]
        if body:
            parts.append("\n".join(notes) + "\n" + code.wrap_lines(_unparse(ast.Module(body, []))))
        parts += [inspect.getsource(HELPERS[h]).rstrip() + "\n" for h in self._helpers]
        parts += [code.wrap_lines(_unparse(ast.Module([c], []))) for c in self.block_classes_]
        parts.append(code.wrap_lines(_unparse(ast.Module([cls], []))))
        loader = _LOADER if self.plan_.keys else _LOADER.replace(_RENAMED_KEYS, _RENAMED_KEYS_NONE)
        parts.append(loader.replace("MODEL_CLASS", self.class_name_))
        return "\n\n\n".join(p.rstrip("\n") for p in parts) + "\n"

    def _assemble_blocks(self, body: list[ast.stmt], args: list[str]) -> list[ast.stmt]:
        """Cut the flat forward ``body`` into one class per block (blocks.py); returns the
        root's forward body, and keeps the classes in ``block_classes_`` (children first)."""
        plan = self.plan_
        assert plan is not None
        stmt_block: dict[int, Block] = {}
        for node, stmts, _ in self._emitted:
            b = self.node_block_.get(node)
            if b is not None:
                stmt_block.update((id(st), b) for st in stmts)
        values = (set(args) - {"self"}) | {
            n.id for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)
        }  # fmt: skip
        root, marks = split_body(body, stmt_block, self.top_blocks_, values)
        calls: dict[int, tuple[Block, ast.expr]] = {}

        def with_calls(stmts: list[ast.stmt], base: list[str]) -> list[ast.stmt]:
            out = []
            for st in stmts:
                b = marks.get(id(st))
                if b is None:
                    out.append(st)
                    continue
                plan.base = base
                fn = plan.access(b.parts)
                plan.base = []
                call = ast.Call(fn, [code.name(p) for p in b.params], [])
                if b.outputs:
                    new = self.assign_outputs(b.outputs, call)
                else:
                    new = ast.Expr(call)
                calls[id(new)] = (b, call)
                out.append(new)
            out = loops(out, calls, plan, base, self._loop_name, looped)
            return sequential_leaves(out, plan, base)

        looped: list[tuple[str, list[int]]] = []
        size_names, small = self._size_names(), self._small_values()
        params_of: dict[str, list[str]] = {}  # generated class -> its __init__'s parameters

        def functions(b: Block) -> tuple[ast.FunctionDef, ast.FunctionDef]:
            fbody = inline_sizes(with_calls(b.body, b.parts), size_names)
            if b.outputs:
                outs = [code.name(o) for o in b.outputs]
                fbody.append(ast.Return(outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Load())))
            # After the return: a value it reads is read outside, and stays a statement.
            fbody = inline_arithmetic(fbody, _pure_calls(b.holder))
            fbody = release_after_last_use(fbody, small)
            forward = _func("forward", ["self", *b.params], fbody)
            # A copy: the library modules' constructor calls are the plan's own expressions.
            own = copy.deepcopy(block_init(plan, b.holder, b.path + "."))
            init = _func("__init__", ["self"], own)
            explicit_defaults(init)
            return init, forward

        # By height (children first, and every instance of a class before any parent's
        # __init__ constructs one): blocks equal up to their locals' names and their sizes
        # share a class; the sizes that differ become its __init__'s parameters.
        every: list[Block] = []
        stack = list(self.top_blocks_)
        while stack:
            b = stack.pop()
            every.append(b)
            stack.extend(b.children)
        levels: dict[int, list[Block]] = {}
        order = {n: i for i, n in enumerate(self.graph.nodes)}
        for b in every:
            levels.setdefault(height(b), []).append(b)
        for h in sorted(levels):
            groups: dict[str, list[_Member]] = {}
            for b in sorted(levels[h], key=lambda b: order[b.nodes[0]]):
                init, forward = functions(b)
                local = set(b.params) | {
                    n.id for n in ast.walk(forward) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Store)
                }  # fmt: skip
                shape, form = copy.deepcopy(init), copy.deepcopy(forward)
                for blank in (Sizes(shape, params_of), ForwardInts(form)):
                    for k in range(len(blank.slots)):
                        blank.set(k, ast.Name("_size", ast.Load()))
                key = b.type_name + "\0" + canonical([shape, form], local)
                exact = canonical([forward], local)
                sizes = Sizes(init, params_of, b.type_name)
                groups.setdefault(key, []).append(
                    _Member(b, init, forward, sizes, ForwardInts(forward), exact)
                )
            classes = []
            for members in groups.values():  # forwards that differ in other integers: apart
                if self._size_columns(members) is not None:
                    classes.append(members)
                    continue
                apart: dict[str, list[_Member]] = {}
                for m in members:
                    apart.setdefault(m.exact, []).append(m)
                classes.extend(apart.values())
            for members in sorted(classes, key=lambda m: -len(m)):
                self._block_class(members, params_of)
        root = with_calls(root, [])
        carried = dict(looped)
        for c in self.block_classes_:  # a loop's carried value, or a block's only input
            forward = next(f for f in c.body if getattr(f, "name", "") == "forward")
            if c.name in carried or len(forward.args.args) == 2:
                carried_names(c, carried.get(c.name, [0]))
        for c in self.block_classes_:  # children first: a loop reads its layers' parameters
            k = next(i for i, f in enumerate(c.body) if getattr(f, "name", "") == "forward")
            c.body[k] = role_names(
                c.body[k], self._class_holder[c.name], plan, self.forwards_, merge_params=True,
                taken=self._module_names(),
            )  # fmt: skip
            self.forwards_[c.name] = c.body[k]
        return root

    @staticmethod
    def _size_columns(members: list[_Member]) -> dict[tuple[str, ...], list[int]] | None:
        """The sizes of ``members``'s __init__s that differ, by their column of values (one
        class parameter per column); None when their forwards differ in an integer that is
        not one of those columns."""
        table = [m.sizes.values() for m in members]
        columns: dict[tuple[str, ...], list[int]] = {}
        for k in range(len(members[0].sizes.slots)):
            column = tuple(v[k] for v in table)
            if len(set(column)) > 1:
                columns.setdefault(column, []).append(k)
        table = [m.ints.values() for m in members]
        for k in range(len(members[0].ints.slots)):
            column = tuple(v[k] for v in table)
            if len(set(column)) > 1 and column not in columns:
                return None
        return columns

    def _block_class(self, members: list[_Member], params_of: dict[str, list[str]]) -> None:
        """One class for ``members``, equal but for their sizes: the sizes that differ are
        parameters (one per distinct column of values, named after the constructor argument),
        each instance is constructed with its own; the forward reads the ones it uses from
        the instance (``self.nf``)."""
        plan = self.plan_
        assert plan is not None
        first = members[0]
        b0, init, sizes = first.block, first.init, first.sizes
        columns = self._size_columns(members)
        assert columns is not None
        params: list[tuple[str, list[int]]] = []
        taken = {"self"}
        for ks in columns.values():
            base = sizes.hint(ks[0])
            name, j = base, 2
            while name in taken or keyword.iskeyword(name):
                name, j = f"{base}_{j}", j + 1
            taken.add(name)
            params.append((name, ks))
        for m in members:
            m.block.holder.ctor_args = [copy.deepcopy(m.sizes.get(ks[0])) for _, ks in params]
        for name, ks in params:
            for k in ks:
                sizes.set(k, ast.Name(name, ast.Load()))
        drop_defaults(init)
        # The forward's integers that differ: the instance's copy of the size they are.
        forward = copy.deepcopy(first.forward)  # its ast.Names are shared with other classes
        ints = ForwardInts(forward)
        table = [m.ints.values() for m in members]
        kept: dict[str, str] = {}  # parameter -> its attribute
        by_column = {tuple(c): name for (name, _), c in zip(params, columns)}
        for k in range(len(ints.slots)):
            column = tuple(v[k] for v in table)
            if len(set(column)) == 1:
                continue
            name = by_column[column]
            if name not in kept:
                attr, j = name, 2
                while attr in b0.holder.children or attr in kept.values():
                    attr, j = f"{name}_{j}", j + 1
                kept[name] = attr
            ints.set(k, code.attr_path(code.name("self"), [kept[name]]))
        stores = [
            ast.Assign([ast.Attribute(code.name("self"), a, ast.Store())], code.name(n))
            for n, a in kept.items()
        ]
        body = init.body[:1] + stores + init.body[1:]
        init = _func("__init__", ["self", *(n for n, _ in params)], body)
        cls = self.ns.create(b0.type_name, "Block")
        self.block_classes_.append(
            ast.ClassDef(
                name=cls,
                bases=[code.expr("nn.Module")],
                keywords=[],
                body=[init, forward],
                decorator_list=[],
                **({"type_params": []} if "type_params" in ast.ClassDef._fields else {}),
            )
        )
        params_of[cls] = [n for n, _ in params]
        self._class_holder[cls] = b0.holder
        for m in members:
            m.block.cls = cls
            plan.classes[id(m.block.holder)] = cls

    def _module_names(self) -> frozenset[str]:
        """What no local may be named: builtins, keywords and the module's own globals."""
        own = {c.name for c in self.block_classes_} | set(self._helpers) | {self.class_name_}
        return TAKEN | own

    def _loop_name(self, holder: str) -> str:
        base = holder[:-1] if holder.endswith("s") and len(holder) > 1 else holder
        return self.ns.create(base, "block")

    def _header(self) -> str:
        g = self.graph
        stored = self.plan_ is not None and self.plan_.stored
        text = (
            f"{SOURCES['torch']}{g.name!r}: {len(g.nodes)} nodes, "
            f"{len(g.weights)} weights.\n"
            "# Imports only torch (and safetensors in load()"
            + (",\n# and in __init__ for the buffers it reads" if stored else "")
            + "); edit freely."
        )
        if self.dropped_:
            names = ", ".join(repr(n) for n in self.dropped_)
            count = _count(len(self.dropped_), "weight")
            text += (
                f"\n# Left out: {count} no node reads "
                f"({'drop_unused=False' if self.drop_unused else 'keep_unused=True'} keeps them):\n"
                + "\n".join(f"#   {line}" for line in _wrap(names))
            )
        return text

    def _docstring(self) -> str:
        ins = ", ".join(f"{self.ns_name(v)}: {v.type}" for v in self.graph.inputs)
        outs = ", ".join(str(v.type) for v in self.graph.outputs)
        text = f"Generated from an msc graph. Inputs: {ins or 'none'}. Outputs: {outs or 'none'}."
        if len(text) <= 90:
            return text
        return "\n    ".join(_wrap(text, 92)) + "\n    "

    def ns_name(self, v: Value) -> str:
        r = self._refs.get(id(v))
        return r.id if isinstance(r, ast.Name) else "?"


@dataclass
class _Member:
    """A block with its class's functions, its sizes and its forward's integers, and its
    forward up to its locals' names (``exact``)."""

    block: Block
    init: ast.FunctionDef
    forward: ast.FunctionDef
    sizes: Sizes
    ints: ForwardInts
    exact: str


class _Deferred:
    """An argument of a module call, resolved to its expression at emission time (a list of
    values: a tuple of them)."""

    def __init__(self, cg: TorchCodegen, value: Value | list[Value]) -> None:
        self.cg = cg
        self.value = value

    @property
    def expr(self) -> ast.expr:
        if isinstance(self.value, list):
            return ast.Tuple([self.cg.ref(v) for v in self.value], ast.Load())
        return self.cg.ref(self.value)


def _symbol_of(node: Node) -> str | None:
    """The symbol's name when ``node`` reads one symbolic dim of a tensor from its shape
    (``squeeze(shape(x, start=i, end=i+1))``, ``gather(shape(x), i)``) and the name is a plain
    identifier; else None."""
    if node.op not in ("squeeze", "gather") or len(node.outputs) != 1 or node.output.type.rank:
        return None
    src = node.inputs[0]
    p = src.producer if src is not None else None
    if p is None or p.op != "shape" or p.inputs[0] is None:
        return None
    shape = p.inputs[0].type.shape
    if shape is None:
        return None
    start, end = p.attrs["start"], p.attrs["end"]
    dims = list(shape)[start:end]
    if node.op == "squeeze":
        k = 0 if len(dims) == 1 else None
    else:
        c = node.inputs[1].producer if len(node.inputs) > 1 and node.inputs[1] else None
        value = c.attrs["value"] if c is not None and c.op == "constant" else None
        ok = value is not None and value.ndim == 0 and node.attrs.get("axis") in (0, -1)
        k = int(value) if ok else None
    if k is None or not -len(dims) <= k < len(dims):
        return None
    dim = dims[k]
    return dim.name if isinstance(dim, SymDim) and code.is_plain_attr(dim.name) else None


def _pure_calls(holder: Holder) -> set[str]:
    """What a forward of ``holder`` calls that computes a value and nothing else: the
    elementwise torch functions the emitters write (emitters.elementwise) and its library
    modules (``self.norm``; a generated block's call stays a statement of its own)."""
    from codegen.torch.emitters import elementwise

    leaves = {f"self.{k}" for k, c in holder.children.items() if isinstance(c, Leaf)}
    return set(elementwise.FUNCTIONS) | {k for k in leaves if k[5:].isidentifier()}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _wrap(text: str, width: int = 90) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


# Names the generated file binds at module level besides its classes.
_MODULE_NAMES = frozenset({"torch", "nn", "F", "NAMES", "WEIGHT_KEYS", "load", "os"})


def _returned_keys(fn: ast.FunctionDef) -> dict[str, str]:
    """identifier -> key of each value ``fn`` returns in a dict under a string key (a model
    output's field: ``{'last_hidden_state': h}``)."""
    ret = fn.body[-1] if fn.body else None
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict)):
        return {}
    out: dict[str, str] = {}
    for k, v in zip(ret.value.keys, ret.value.values):
        if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name):
            out.setdefault(v.id, k.value)
    return out


def _counter_names(graph: Graph) -> set[str]:
    """Names an exporter counted up from the op (Provenance.counted): NAMES does not map them."""
    return {
        v.name
        for node in _walk(graph)
        for v in node.outputs
        if v.name and node.provenance.counted(v.name)
    }


def _walk(g: Graph):
    for n in g.nodes:
        yield n
        for sub in n.subgraphs():
            yield from _walk(sub)


def _tree(spec: Any, outs: list[ast.expr]) -> ast.expr:
    ((kind, body),) = spec.items()
    if kind == "leaf":
        return outs[body]
    if kind == "tuple":
        return ast.Tuple([_tree(s, outs) for s in body], ast.Load())
    if kind == "list":
        return ast.List([_tree(s, outs) for s in body], ast.Load())
    if kind == "dict":
        return ast.Dict([code.const(k) for k, _ in body], [_tree(s, outs) for _, s in body])
    return code.const(body)


def function(name: str, args: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    """``def name(*args): body`` (for emitters that define a local function)."""
    return _func(name, args, body)


def _func(name: str, args: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    return ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(a) for a in args],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        **extra,
    )


def _unparse(mod: ast.Module) -> str:
    return ast.unparse(ast.fix_missing_locations(mod))


_DEPS: dict[str, list[str]] = {}


def _helper_deps(name: str) -> list[str]:
    if name not in _DEPS:
        tree = ast.parse(inspect.getsource(HELPERS[name]))
        _DEPS[name] = sorted(
            {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in HELPERS} - {name}
        )
    return _DEPS[name]


_LOADER = '''
def load(path=None, device="cpu"):
    """MODEL_CLASS with its weights from ``path`` (default: model.safetensors
    next to this file), in eval mode. Needs the safetensors package."""
    import os

    from safetensors.torch import load_file

    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.safetensors")
    tensors = load_file(path, device=str(device))
    by_source = {source: key for key, source in WEIGHT_KEYS.items()}
    state = {by_source.get(name, name): t for name, t in tensors.items()}
    with torch.device("meta"):
        model = MODEL_CLASS()
    return _msc_load_weights(model, state).to(device).eval()
'''
# Without WEIGHT_KEYS (every weight at its own path) the file's names are the state_dict keys.
_RENAMED_KEYS = """by_source = {source: key for key, source in WEIGHT_KEYS.items()}
    state = {by_source.get(name, name): t for name, t in tensors.items()}
    with torch.device("meta"):
        model = MODEL_CLASS()
    return _msc_load_weights(model, state)"""
_RENAMED_KEYS_NONE = """with torch.device("meta"):
        model = MODEL_CLASS()
    return _msc_load_weights(model, tensors)"""
