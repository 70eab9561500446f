"""msc Graph -> onnx.ModelProto.

# NOTE: invariants
# - Names are kept: graph inputs, weights (initializers), node names and value names are the
#   graph's own. ONNX has one namespace where msc has two (values and weights): a value whose
#   name a weight already took gets a ``__<k>`` suffix, recorded in metadata_props.
# - Each canonical node goes through the emitter for the target opset; if there is none, or it
#   raises ``Unsupported``, through the op's decomposition (recursively). Every node that can
#   go neither way is collected, and all of them are raised at once as UnsupportedOpsError.
# - The emission of one node is all-or-nothing: a failed attempt leaves no ONNX nodes behind.
# - Weights become initializers (raw_data) or external-data references chosen by the caller;
#   this module never reads weight data for external ones. Only weights something reads are
#   written (``written_weights``); the graph keeps the rest (state for a PyTorch output).
# - With ``optimize`` the written model goes through ``codegen.onnx.optimize.optimize_model``
#   last (constants folded into initializers, BatchNorm into its conv, ...); without it the
#   model holds the graph node for node, except that a Transpose / Reshape / ... of a
#   dequantized run-time integer tensor is written on the integers before its
#   DequantizeLinear (``optimize.moves_before_dequantize``): onnxruntime's session refuses
#   the file otherwise.
# - Types: dtypes and shapes of graph inputs, outputs and intermediate values are written
#   (SymDim -> dim_param, an expression -> its spelling as dim_param, unknown dim -> empty
#   dim); symbol ranges go to metadata_props. A sequence or optional value (made and taken by
#   custom nodes) is written as a sequence_type / optional_type around its element's type.
# - Node attributes ONNX's op cannot hold (``msc.ops.ONNX_SILENT_ATTRS``: a stable topk,
#   indices that may be negative) go to each of the node's ONNX nodes' metadata_props as
#   ``msc.attr.<name>`` (JSON), next to its provenance (``msc.provenance.<key>``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import onnx

if TYPE_CHECKING:
    from codegen.onnx.optimize import Store
from codegen.onnx.opset import (
    MIN_OPSET,
    ir_version_for,
    max_opset,
    pick_opset,
    unchanged_until,
)
from codegen.onnx.registry import EMITTERS as default_emitters
from codegen.onnx.registry import (
    ONNX_DTYPE,
    Emit,
    EmitterRegistry,
    Ref,
    Unsupported,
    onnx_attr,
    tensor_proto,
)
from msc.errors import ConversionError, UnsupportedOp, UnsupportedOpsError
from msc.ir import structure, symexpr
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.tensor import SUB_BYTE_BITS, FileRegion, Packed
from msc.ir.types import (
    VALUE_TYPES,
    OptionalType,
    SequenceType,
    SymDim,
    SymExpr,
    ValueType,
    tensor_of,
)
from msc.ops import ONNX_SILENT_ATTRS
from msc.ops.custom import CustomOp, parse_custom
from msc.ops.decompose import DecompositionRegistry, NotDecomposable
from msc.ops.decompose import registry as default_decompositions
from msc.ops.layout import channels_first

__all__ = ["ModelBuilder", "value_info", "written_weights"]

PROVENANCE_KEYS = ("framework", "op", "name", "module")


def type_proto(t: ValueType) -> onnx.TypeProto:
    """``t`` as an ONNX TypeProto: a tensor_type, or a sequence_type / optional_type around
    its element's."""
    tp = onnx.TypeProto()
    if isinstance(t, SequenceType):
        tp.sequence_type.elem_type.CopyFrom(type_proto(t.element))
        return tp
    if isinstance(t, OptionalType):
        tp.optional_type.elem_type.CopyFrom(type_proto(t.element))
        return tp
    tt = tp.tensor_type
    tt.elem_type = ONNX_DTYPE[t.dtype]
    if t.shape is not None:
        shape = tt.shape
        shape.SetInParent()
        for d in t.shape:
            dim = shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, SymDim | SymExpr):
                dim.dim_param = d.name  # an expression: its spelling, "2*s0 + 1"
    return tp


def value_info(name: str, t: ValueType) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto()
    vi.name = name
    vi.type.CopyFrom(type_proto(t))
    return vi


class ModelBuilder:
    """One conversion of a graph to a ModelProto; subclass to override how weights are
    stored (``initializer``) or how a node is lowered (``emit_node``).

    Args:
        graph: the graph to convert.
        opset: target default-domain opset (None: by ``choose_opset``'s rule, the newest at
            which the installed onnxruntime has a kernel for every op; ``run`` sets
            ``opset`` and ``opset_reason``).
        emitters: emitter registry (default: the package's).
        decompositions: decomposition registry (default: ``msc.ops.decompose.registry``).
        external: weight name -> a function that fills an external-data TensorProto, for
            weights stored outside the model; others are written inline.
        value_infos: write the types of intermediate values.
        optimize: run ``codegen.onnx.optimize.optimize_model`` on the written model (constants
            as initializers, constant subgraphs folded, BatchNorm folded into its Conv/Gemm,
            squares as Pow, identical constants shared); False writes node for node.
        decompose: canonical ops written through their decompositions even where the opset
            has an op for them: ``("attention",)`` writes MatMul/Softmax instead of ONNX
            ``Attention``, the form onnxruntime's transformer optimizer fuses around (its
            shape inference takes ONNX ``Attention`` for com.microsoft's and gives up).
        store: with ``optimize``, where the weights the pass makes go as they are made
            (``optimize_model``'s ``store``); None keeps them inline.
    """

    def __init__(
        self,
        graph: Graph,
        opset: int | None = None,
        *,
        emitters: EmitterRegistry | None = None,
        decompositions: DecompositionRegistry | None = None,
        external: Callable[[Weight], onnx.TensorProto | None] | None = None,
        value_infos: bool = True,
        optimize: bool = False,
        decompose: Iterable[str] = (),
        store: Store | None = None,
    ) -> None:
        self.graph = channels_first(graph)  # ONNX's Conv and pools are channels first
        self.optimize = optimize
        self.optimized: dict[str, int] = {}  # what the pass did, by rewrite (set by run())
        self.opset: int = 0  # set by run(): ``opset``, or the one ``pick_opset`` chose
        self.opset_reason = "asked for"
        self._asked = None if opset is None else int(opset)
        if self._asked is not None and not MIN_OPSET <= self._asked <= max_opset():
            raise ConversionError(
                f"opset {self._asked} is outside what the ONNX codegen targets "
                f"({MIN_OPSET} to {max_opset()})"
            )
        self.emitters = emitters or default_emitters
        self.decompositions = decompositions or default_decompositions
        self.decompose = frozenset(decompose)
        lacking = sorted(op for op in self.decompose if op not in self.decompositions)
        if lacking:
            raise ConversionError(f"no decomposition to write {', '.join(lacking)} through")
        self.external = external
        self.store = store
        self.value_infos = value_infos
        self._start(self._asked or 0)

    def _start(self, opset: int) -> None:
        """A fresh emission at ``opset``: no names taken, no domains imported."""
        self.opset = opset
        self._taken: set[str] = set()
        self._renamed: dict[str, str] = {}
        self._names: dict[Value, str] = {}
        self._types: dict[str, ValueType] = {}
        self._counter = 0
        self._domains: dict[str, int] = {}  # custom op domain -> version
        self.decomposed: set[int] = set()  # ids of the nodes written through decompositions

    # ------------------------------------------------------------------ names
    def _reserve(self, v: Value) -> str:
        name = v.name or "v"
        if name in self._taken:
            new = self._fresh_name(name)
            self._renamed[name] = new
            name = new
        self._taken.add(name)
        self._names[v] = name
        return name

    def _fresh_name(self, hint: str) -> str:
        name = hint
        while name in self._taken:
            self._counter += 1
            name = f"{hint}__{self._counter}"
        self._taken.add(name)
        return name

    def ref(self, v: Value | None) -> Ref | None:
        return None if v is None else Ref(self._names[v], v.type)

    # ------------------------------------------------------------------ weights
    def initializer(self, w: Weight, target: onnx.TensorProto) -> None:
        """Fill ``target`` for a weight: external when ``external`` says so, else inline."""
        if self.external is not None:
            t = self.external(w)
            if t is not None:
                target.CopyFrom(t)  # a small proto: no data, only the reference
                target.name = self._names[w]
                return
        packed = w.storage if isinstance(w.storage, FileRegion | Packed) else None
        if packed is not None and w.type.dtype in SUB_BYTE_BITS:  # ONNX's packing: as stored
            target.name = self._names[w]
            target.data_type = ONNX_DTYPE[w.type.dtype]
            target.dims.extend(int(d) for d in packed.shape)
            target.raw_data = packed.packed_bytes().tobytes()
            return
        tensor_proto(w.numpy(), self._names[w], target)

    # ------------------------------------------------------------------ nodes
    def emit_node(self, node: Node, ins: list[Ref | None], outs: list[str]) -> list[onnx.NodeProto]:
        """ONNX nodes for one msc node whose outputs must be named ``outs``.

        Raises:
            Unsupported: neither an emitter nor a decomposition can express it.
        """
        custom = parse_custom(node.op)
        if custom is not None:
            return self._custom(node, custom, ins, outs)
        reasons: list[str] = []
        ins = _pad(node.op, ins)
        em = None if node.op in self.decompose else self.emitters.lookup(node.op, self.opset)
        if em is not None:
            base = node.name or outs[0]
            e = Emit(self.opset, self._fresh_name, base, node, self.subgraph)
            try:
                result = em.fn(e, *ins, **node.attrs)
            except Unsupported as u:
                reasons.append(f"emitter (opset {em.since}+): {u}")
            else:
                return self._bind(e.nodes, result, outs, node, base)
        elif node.op in self.decompose:
            reasons.append("written through its decomposition as asked")
        else:
            vs = self.emitters.versions(node.op)
            reasons.append(f"no emitter before opset {vs[0]}" if vs else "no ONNX emitter")
        if node.op in self.decompositions:
            try:
                emitted = self._decompose(node, ins, outs)
            except NotDecomposable as d:
                reasons.append(f"decomposition: {d}")
            except Unsupported as u:
                reasons.append(f"decomposition: {u}")
            else:
                self.decomposed.add(id(node))
                return emitted
        raise Unsupported("; ".join(reasons))

    def _custom(
        self, node: Node, op: CustomOp, ins: list[Ref | None], outs: list[str]
    ) -> list[onnx.NodeProto]:
        """A custom node, written as it came: its op in its domain (the default domain for
        ``ai.onnx``), its attributes, and the domain's version in the opset imports."""
        domain = "" if op.domain == "ai.onnx" else op.domain
        if not domain:
            _same_default_op(op, self.opset)
        if domain:
            seen = self._domains.setdefault(domain, op.version)
            if seen != op.version:
                raise Unsupported(
                    f"domain {domain!r} is used at versions {seen} and {op.version}; "
                    "an ONNX model imports one version of a domain"
                )
        attrs = []
        for k, v in sorted(node.attrs.items()):
            if isinstance(v, Graph):  # self-contained: an op's own graph may not see outside
                sub = self.subgraph(v, v.name or f"{node.name}_{k}", inline_weights=True)
                attrs.append(onnx.helper.make_attribute(k, sub))
            elif isinstance(v, DType):
                attrs.append(onnx.helper.make_attribute(k, ONNX_DTYPE[v]))
            elif isinstance(v, VALUE_TYPES):
                attrs.append(onnx.helper.make_attribute(k, type_proto(v)))
            else:
                attrs.append(onnx_attr(k, v))
        n = onnx.helper.make_node(
            op.name, ["" if r is None else str(r) for r in ins], outs, name=node.name, domain=domain
        )
        n.attribute.extend(attrs)
        return self._bind([n], outs, outs, node, node.name or outs[0])

    def _decompose(self, node: Node, ins: list[Ref | None], outs: list[str]) -> list:
        proxies = [None if r is None else Value(str(r), r.type) for r in ins]
        refs: dict[Value, Ref] = {p: r for p, r in zip(proxies, ins) if p is not None}
        new_nodes, results = self.decompositions.expand(node, proxies)
        want = {id(v): outs[i] for i, v in enumerate(results)}
        emitted: list[onnx.NodeProto] = []
        for n in new_nodes:
            n_ins = [None if v is None else refs[v] for v in n.inputs]
            n_outs = [
                want.pop(id(o)) if id(o) in want else self._fresh_name(o.name) for o in n.outputs
            ]
            try:
                emitted += self.emit_node(n, n_ins, n_outs)
            except Unsupported as u:
                raise Unsupported(f"{n.op} inside: {u}") from None
            for o, name in zip(n.outputs, n_outs):
                refs[o] = Ref(name, o.type)
                self._note_type(name, o.type)
        # An output that is an input of the node (a no-op rule) needs a copy.
        for i, v in enumerate(results):
            if id(v) in want:
                emitted.append(
                    onnx.helper.make_node(
                        "Identity", [refs[v]], [outs[i]], name=f"{node.name or outs[i]}/Identity"
                    )
                )
        return emitted

    def _bind(self, nodes: list, result: Any, outs: list[str], node: Node, base: str) -> list:
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(outs):
            raise AssertionError(
                f"emitter for {node.op} gave {len(results)} outputs for {len(outs)}"
            )
        produced = {o: n for n in nodes for o in n.output}
        renames: dict[str, str] = {}
        for r, want in zip(results, outs):
            r = str(r)
            if r in produced and r not in renames:
                renames[r] = want
            else:
                nodes.append(
                    onnx.helper.make_node(
                        "Identity", [renames.get(r, r)], [want], name=f"{base}/Identity_{want}"
                    )
                )
        for n in nodes:
            for i, name in enumerate(n.output):
                if name in renames:
                    n.output[i] = renames[name]
            for i, name in enumerate(n.input):
                if name in renames:
                    n.input[i] = renames[name]
        # The node that makes the first output carries the msc node's own name.
        for n in nodes:
            if outs[0] in n.output:
                n.name = node.name
        prov = node.provenance
        silent = ONNX_SILENT_ATTRS.get(node.op, ())
        for n in nodes:
            for key in PROVENANCE_KEYS:
                val = getattr(prov, key)
                if val:
                    p = n.metadata_props.add()
                    p.key, p.value = f"msc.provenance.{key}", val
            for key in silent:  # what ONNX's op cannot say, for the ONNX frontend to restore
                p = n.metadata_props.add()
                p.key, p.value = f"msc.attr.{key}", json.dumps(node.attrs[key])
        return nodes

    def subgraph(self, g: Graph, name: str, inline_weights: bool = False) -> onnx.GraphProto:
        """A branch or loop body: its nodes emitted in this model's namespace, outer values
        (and weights) referenced by name; with ``inline_weights`` the weights it reads are
        its own initializers (a custom op's graph attribute, which its op may run on its own).

        Raises:
            Unsupported: a node of the subgraph cannot be emitted.
        """
        for v in g.inputs:  # a loop body's per-iteration inputs
            self._reserve(v)
            self._note_type(self._names[v], v.type)
        for n in g.nodes:
            for o in n.outputs:
                self._reserve(o)
        inits: list[onnx.TensorProto] = []
        outer: dict[Weight, str] = {}
        if inline_weights:
            for w in _weights_read(g):
                if not w.has_data:
                    raise Unsupported(f"weight {w.name!r} has no data to put in graph {name!r}")
                outer[w] = self._names[w]
                self._names[w] = self._fresh_name(f"{outer[w]}__{name}")
                inits.append(onnx.TensorProto())
                self.initializer(w, inits[-1])
        try:
            sg = self._subgraph_body(g, name)
        finally:
            self._names.update(outer)
        sg.initializer.extend(inits)
        return sg

    def _subgraph_body(self, g: Graph, name: str) -> onnx.GraphProto:
        nodes: list[onnx.NodeProto] = []
        for n in g.nodes:
            outs = [self._names[o] for o in n.outputs]
            try:
                nodes += self.emit_node(n, [self.ref(v) for v in n.inputs], outs)
            except Unsupported as u:
                raise Unsupported(f"{n.op} in subgraph {name!r}: {u}") from None
            for o, oname in zip(n.outputs, outs):
                self._note_type(oname, o.type)
        inner = {o for n in g.nodes for o in n.outputs}
        out_names = []
        for v in g.outputs:
            oname = self._names[v]
            if v not in inner or oname in out_names:  # an outer value: copy it into the scope
                copy = self._fresh_name(f"{oname}__{name}")
                nodes.append(onnx.helper.make_node("Identity", [oname], [copy], name=copy))
                oname = copy
            out_names.append(oname)
        sg = onnx.GraphProto()
        sg.name = name
        _unique_node_names(nodes, set())
        sg.node.extend(nodes)
        sg.input.extend(value_info(self._names[v], v.type) for v in g.inputs)
        sg.output.extend(value_info(n, v.type) for n, v in zip(out_names, g.outputs))
        return sg

    def _note_type(self, name: str, t: ValueType) -> None:
        self._types[name] = t

    # ------------------------------------------------------------------ driver
    def _fresh(self, opset: int) -> None:
        """Start an emission at ``opset``, the graph's own names reserved."""
        self._start(opset)
        g = self.graph
        for v in g.inputs:
            self._reserve(v)
        for w in g.weights.values():
            self._reserve(w)
        for n in g.nodes:
            for o in n.outputs:
                self._reserve(o)

    def sample_nodes(self, opset: int) -> list[onnx.NodeProto]:
        """ONNX nodes at ``opset`` for the first node of each op of the graph (those that can
        be written): what the opset search looks at before writing every node."""
        self._fresh(opset)
        nodes: list[onnx.NodeProto] = []
        seen: set[str] = set()
        for node in self.graph.nodes:
            if node.op in seen:
                continue
            seen.add(node.op)
            outs = [self._names[o] for o in node.outputs]
            try:
                nodes += self.emit_node(node, [self.ref(v) for v in node.inputs], outs)
            except Unsupported:
                continue
        return nodes

    def emit_nodes(self, opset: int) -> list[onnx.NodeProto]:
        """The graph's nodes as ONNX nodes at ``opset`` (a fresh emission: what an earlier
        call named is forgotten).

        Raises:
            UnsupportedOpsError: every node that cannot be written at ``opset``.
        """
        self._fresh(opset)
        g = self.graph
        nodes: list[onnx.NodeProto] = []
        unsupported: list[UnsupportedOp] = []
        for node in g.nodes:
            outs = [self._names[o] for o in node.outputs]
            ins = [self.ref(v) for v in node.inputs]
            try:
                nodes += self.emit_node(node, ins, outs)
            except Unsupported as u:
                unsupported.append(
                    UnsupportedOp(
                        f"{node.op} (opset {self.opset})", node.name, node.provenance.module, str(u)
                    )
                )
            for o, name in zip(node.outputs, outs):
                self._note_type(name, o.type)
        if unsupported:
            raise UnsupportedOpsError(
                unsupported, what=f"graph {g.name!r} at ONNX opset {self.opset}"
            )
        return nodes

    def lowered(self, opset: int) -> Graph:
        """The graph as the model written at ``opset`` holds it: each node written through
        its decomposition (no emitter at ``opset``, or one that refuses the node) lowered by
        the same rule, so a re-import of the model is compared with what was written, not
        with an op ONNX does not have. The graph itself when no node is lowered.

        Raises:
            UnsupportedOpsError: as ``emit_nodes``.
        """
        from msc.ops.decompose import decompose

        self.emit_nodes(opset)
        own = {id(n) for n in self.graph.nodes}
        picked = self.decomposed & own
        if not picked:
            return self.graph

        def want(n: Node) -> bool:
            if id(n) in own:
                return id(n) in picked
            # a node a rule built: lowered again where emission finds no emitter for it
            emitted = n.op not in self.decompose and self.emitters.lookup(n.op, opset) is not None
            return not emitted and n.op in self.decompositions

        return decompose(self.graph, want, rules=self.decompositions)

    def run(self) -> onnx.ModelProto:
        g = self.graph
        if self._asked is None:  # the default: emitted at each opset the rule tries
            self.opset, self.opset_reason, nodes = pick_opset(g, self.emit_nodes, self.sample_nodes)
        else:
            nodes = self.emit_nodes(self._asked)

        model = onnx.ModelProto()
        og = model.graph
        graph_inputs = [value_info(self._names[v], v.type) for v in g.inputs]
        for w in written_weights(g):
            if w.has_data:
                self.initializer(w, og.initializer.add())
            else:  # a type-only graph: its weights become inputs
                graph_inputs.append(value_info(self._names[w], w.type))

        out_names: list[str] = []
        boundary = {self._names[v] for v in g.inputs} | {self._names[w] for w in g.weights.values()}
        for v in g.outputs:
            name = self._names[v]
            if name in boundary or name in out_names:
                copy = self._fresh_name(f"{name}__out")
                nodes.append(
                    onnx.helper.make_node("Identity", [name], [copy], name=f"{copy}/Identity")
                )
                name = copy
            out_names.append(name)
        graph_outputs = [value_info(n, v.type) for n, v in zip(out_names, g.outputs)]

        og.name = g.name or "msc"
        _unique_node_names(nodes, set())
        og.node.extend(nodes)
        og.input.extend(graph_inputs)
        og.output.extend(graph_outputs)
        if self.value_infos:
            skip = set(out_names) | boundary
            made = {o for n in nodes for o in n.output}
            for name, t in self._types.items():
                if name not in skip and name in made:
                    og.value_info.append(value_info(name, t))

        model.ir_version = ir_version_for(self.opset)
        model.producer_name = "msc"
        from msc.version import __version__

        model.producer_version = __version__
        op = model.opset_import.add()
        op.domain, op.version = "", self.opset
        for domain, version in sorted(self._domains.items()):
            op = model.opset_import.add()
            op.domain, op.version = domain, version
        self._metadata(model)
        if self.optimize:
            from codegen.onnx.optimize import optimize_model

            by_name = {self._names[w]: w for w in g.weights.values() if w in self._names}
            self.optimized = dict(
                optimize_model(model, lambda n: by_name[n].numpy(), store=self.store)
            )
        elif any(n.op_type == "DequantizeLinear" for n in model.graph.node):
            from codegen.onnx.optimize import moves_before_dequantize

            moved = moves_before_dequantize(model)
            self.optimized = {"moves before dequantize": moved} if moved else {}
        return model

    def _metadata(self, model: onnx.ModelProto) -> None:
        g = self.graph
        props: dict[str, str] = {}
        ranges: dict[str, list[int | None]] = {}
        for v in [*g.inputs, *g.outputs, *(o for n in g.nodes for o in n.outputs)]:
            for d in tensor_of(v.type).shape or ():
                for sym in symexpr.symbols(d) if d is not None else ():
                    if sym.min is not None or sym.max is not None:
                        ranges[sym.name] = [sym.min, sym.max]
        if ranges:
            props["msc.dim_ranges"] = json.dumps(ranges, sort_keys=True)
        if self._renamed:
            props["msc.renamed_values"] = json.dumps(self._renamed, sort_keys=True)
        if g.output_tree is not None:
            props["msc.output_tree"] = structure.encode(g.output_tree)
        fields = {
            w.name: {"role": w.role, "aliases": list(w.aliases)}
            for w in written_weights(g)
            if w.role or w.aliases
        }
        if fields:
            props["msc.weights"] = json.dumps(fields, sort_keys=True)
        for k, v in g.meta.items():
            try:
                # JSON for every value (strings too), so the ONNX frontend reads back the type.
                props[f"msc.meta.{k}"] = json.dumps(v, sort_keys=True)
            except TypeError:
                continue
        for k in sorted(props):
            p = model.metadata_props.add()
            p.key, p.value = k, props[k]


def _weights_read(g: Graph) -> list[Weight]:
    """The weights ``g``'s nodes (and their subgraphs) read or ``g`` returns, in first-use order."""
    seen: dict[Weight, None] = {}
    for n in g.nodes:
        for v in n.inputs:
            if isinstance(v, Weight):
                seen.setdefault(v)
        for sub in n.subgraphs():
            for w in _weights_read(sub):
                seen.setdefault(w)
    for v in g.outputs:
        if isinstance(v, Weight):
            seen.setdefault(v)
    return list(seen)


def _same_default_op(op: CustomOp, opset: int) -> None:
    """A default-domain op kept at ``op.version`` means the same op at ``opset`` (where ONNX
    knows it); else Unsupported."""
    last = unchanged_until(op.name, op.version)
    if not op.version <= opset <= last:
        raise Unsupported(
            f"{op.name} of opset {op.version} is another op at opset {opset}: write it at an "
            f"opset from {op.version} to {last}"
        )


def written_weights(g: Graph) -> list[Weight]:
    """The weights the model holds as initializers (or, without data, as inputs): those a
    node reads or the graph returns. A weight nothing reads (a BatchNorm's
    ``num_batches_tracked``, state a PyTorch output keeps) is not written: onnxruntime warns
    at every load of a model with one; one read only inside custom ops' graphs is written
    there, with the graph that reads it. A tied weight is one Weight (its other names are
    ``aliases``): one initializer."""
    scopes = _weight_scopes(g)
    return [w for w in g.weights.values() if scopes.get(w)]


def _weight_scopes(g: Graph, in_custom: bool = False, seen: dict | None = None) -> dict:
    """Weight -> whether it is read outside the graph attributes of custom nodes (which get
    their own copies)."""
    seen = {} if seen is None else seen
    for n in g.nodes:
        for v in n.inputs:
            if isinstance(v, Weight):
                seen[v] = seen.get(v, False) or not in_custom
        custom = in_custom or parse_custom(n.op) is not None
        for sub in n.subgraphs():
            _weight_scopes(sub, custom, seen)
    for v in g.outputs:
        if isinstance(v, Weight):
            seen[v] = seen.get(v, False) or not in_custom
    return seen


def _unique_node_names(nodes: list[onnx.NodeProto], used: set[str]) -> None:
    """onnxruntime rejects a graph with two nodes of one name; msc allows it (a frontend may
    give every node of one source op the op's name). Later duplicates get ``__<k>``."""
    for n in nodes:
        if not n.name:
            continue
        name, k = n.name, 0
        while name in used:
            k += 1
            name = f"{n.name}__{k}"
        used.add(name)
        n.name = name


def _pad(op: str, ins: list) -> list:
    """Inputs padded with None up to the schema's fixed inputs, so emitters' optional
    parameters always receive a value."""
    from msc.ops import registry as ops

    specs = ops.get(op).inputs
    if any(s.variadic for s in specs) or len(ins) >= len(specs):
        return ins
    return list(ins) + [None] * (len(specs) - len(ins))


def to_model_impl(graph: Graph, opset: int | None = None, **kw: Any) -> onnx.ModelProto:
    return ModelBuilder(graph, opset, **kw).run()
