"""The ONNX importer: walks a ModelProto's graph and runs one converter per node.

# NOTE: invariants
# - Every ONNX value name maps to a ``Slot``: a graph Value, a known constant (numpy array), or
#   both. Constants come from initializers, Constant nodes, static shapes (``Shape`` of a static
#   tensor) and folding small all-constant subexpressions; they are turned into graph tensors
#   (a ``constant`` node when small, a weight when large) only where a converter needs a tensor,
#   under their ONNX name. Nodes left unused once constants became attributes are dropped.
# - Names are kept exactly: graph inputs, initializers (weights), value names, node names.
#   Values a converter makes in between get the next free positional name ("0", "1", ...),
#   skipping every name the model uses.
# - Every unsupported op, domain, type and attribute is collected; ``UnsupportedOpsError`` is
#   raised once, after the whole model was walked, listing them all with node names.
# - A malformed model (a string attribute or tensor that is not UTF-8) is not an unsupported
#   op: ``BadModelError`` is raised at once, naming the node and attribute (or the tensor).
#   Every node's text attributes are checked before any node is converted, kept or folded.
#   One exception: a lone string attribute of an op that neither ONNX's schemas nor msc's
#   converters define (onnxruntime's EPContext keeps a compiled blob in ``ep_cache_context``)
#   may be binary; kept as a custom node, it is a ``bytes`` value (UTF-8 ones stay ``str``).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from msc.errors import (
    BadModelError,
    ConversionError,
    Unsupported,
    UnsupportedOp,
    UnsupportedOpsError,
)
from msc.frontend.onnx.initializers import (
    UnsupportedType,
    tensor_data,
    tensor_to_numpy,
    value_type_from_onnx,
)
from msc.frontend.onnx.registry import CONVERTERS, ConverterRegistry, NoConverter
from msc.frontend.onnx.runtime_types import runtime_types
from msc.frontend.onnx.scopes import (
    TORCH_ONNX_GRAPH,
    read_signature,
    recover_weight_names,
    root_class,
    scope_provenance,
)
from msc.ir import (
    DType,
    Graph,
    GraphError,
    Node,
    Provenance,
    SymDim,
    TensorType,
    Value,
    Weight,
    structure,
    symexpr,
)
from msc.ir.attrs import infer_kind, normalize
from msc.ir.builder import Builder
from msc.ir.graph import dead_nodes
from msc.ir.tensor import SUB_BYTE_BITS, Packed
from msc.ir.types import ValueType, map_tensor
from msc.ops import ONNX_SILENT_ATTRS
from msc.ops import registry as OPS
from msc.ops.custom import CUSTOM_OPS, custom_op
from msc.ops.infer import InferError
from msc.ops.schema import OpError
from msc.text.check import checked

__all__ = [
    "OnnxUnsupportedOpsError",
    "Unsupported",
    "Slot",
    "Ctx",
    "Importer",
    "MIN_OPSET",
    "SMALL_CONSTANT",
]

# Opsets before 7 load, but most converters start at 7 (numpy broadcasting); an op older
# than every converter of it is reported with both versions.
MIN_OPSET = 1
# Constants with at most this many elements become ``constant`` nodes; larger ones weights.
SMALL_CONSTANT = 64
# All-constant nodes whose inputs hold at most FOLD_LIMIT elements, and whose output (predicted
# before evaluating, see _fold_bound) holds at most FOLD_OUTPUT_LIMIT, are folded at import;
# larger ones stay run-time ops, so a 200-byte file cannot make the import allocate gigabytes.
FOLD_LIMIT = 1 << 16
FOLD_OUTPUT_LIMIT = 1 << 20
# Arrays a converter builds at import from a model's shapes (index offsets, masks, windows)
# hold at most this many elements; a larger one is reported as unsupported, not allocated.
IMPORT_ARRAY_LIMIT = 1 << 26
DEFAULT_DOMAINS = ("", "ai.onnx")

# Deterministic ops cheap enough to evaluate at import when every input is constant (shape
# arithmetic in exported models and in the ONNX function bodies).
FOLDABLE = frozenset(
    """Abs Add And Cast CastLike Ceil Concat ConstantOfShape Div Equal Expand Flatten Floor Gather
    Greater GreaterOrEqual Identity Less LessOrEqual Max Min Mod Mul Neg Not Or Range Reciprocal
    ReduceMax ReduceMin ReduceProd ReduceSum Reshape Shape Sign Size Slice Sqrt Squeeze Sub Sum
    Tile Transpose Unsqueeze Where Xor""".split()
)

# Where torch.onnx (dynamo) writes the ExportedProgram's graph signature.
_SIGNATURE_KEY = "pkg.torch.export.ExportedProgram.graph_signature"


class OnnxUnsupportedOpsError(UnsupportedOpsError):
    """UnsupportedOpsError that also names the graph inputs whose values converters needed
    at import; binding them (``from_onnx(..., constant_inputs={...})``) may make the model
    convertible."""

    def __init__(self, ops: list[UnsupportedOp], runtime_inputs: list[str], what: str) -> None:
        super().__init__(ops, what=what)
        self.runtime_inputs = list(runtime_inputs)
        if self.runtime_inputs:
            self.args = (
                self.args[0] + "\nthese graph inputs are needed as constants (bind them with "
                f"constant_inputs=...): {', '.join(self.runtime_inputs)}",
            )


class Slot:
    """What an ONNX value name stands for: a graph value, a known constant, or both. An
    initializer's constant is its weight's data, read when a converter asks for it (a file
    region is mapped for that use, not kept)."""

    __slots__ = ("name", "value", "_const", "poisoned", "origin")

    def __init__(
        self,
        name: str,
        value: Value | None = None,
        const: np.ndarray | Weight | None = None,
        origin: onnx.NodeProto | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self._const = const
        self.poisoned = False
        self.origin = origin  # the node that made a constant (for provenance)

    @property
    def const(self) -> np.ndarray | None:
        c = self._const
        return c.numpy() if isinstance(c, Weight) else c

    @property
    def known(self) -> bool:
        return self._const is not None

    @property
    def size(self) -> int:
        c = self._const
        if isinstance(c, Weight):
            return c.type.numel() or 0
        return 0 if c is None else int(c.size)

    @property
    def type(self) -> TensorType:
        if self.value is not None:
            return self.value.type
        c = self._const
        assert c is not None, self.name
        if isinstance(c, Weight):
            return c.type
        return TensorType(DType.from_numpy(c.dtype), c.shape)

    def __repr__(self) -> str:
        kind = "const" if self.known else "value"
        return f"<Slot {self.name!r} {kind} {self.type}>"


Operand = Slot | Value | np.ndarray | None


def _stored(arr: np.ndarray) -> np.ndarray | Packed:
    """A computed constant as a weight holds it: sub-byte types packed."""
    if DType.from_numpy(arr.dtype) in SUB_BYTE_BITS:
        return Packed.of(arr)
    return np.ascontiguousarray(arr)


def _f32(x: float) -> float:
    """An ONNX float attribute (float32) as the shortest decimal that reads back to the same
    float32: an epsilon written as 1e-12 comes back as 1e-12, not 9.99999996e-13."""
    return float(str(np.float32(x)))


def _attr_value(a: onnx.AttributeProto, base_dir: str | None) -> Any:
    T = onnx.AttributeProto
    if a.ref_attr_name:
        raise Unsupported(f"attribute {a.name!r} refers to a function attribute")
    if a.type == T.FLOAT:
        return _f32(a.f)
    if a.type == T.INT:
        return int(a.i)
    if a.type == T.STRING:  # UTF-8: checked for every node first (_check_text)
        return a.s.decode("utf-8")
    if a.type == T.TENSOR:
        return tensor_to_numpy(a.t, base_dir)
    if a.type == T.GRAPH:
        return a.g
    if a.type == T.FLOATS:
        return [_f32(x) for x in a.floats]
    if a.type == T.INTS:
        return [int(x) for x in a.ints]
    if a.type == T.STRINGS:
        return [s.decode("utf-8") for s in a.strings]
    if a.type == T.TYPE_PROTO:
        return a.tp
    raise Unsupported(f"attribute {a.name!r} has type {T.AttributeType.Name(a.type)}")


def _node_label(n: onnx.NodeProto) -> str:
    """``node 'name' (Op)``; an unnamed node by the first value it gives (ONNX value names
    are unique in a model, subgraphs included)."""
    if n.name:
        return f"node {n.name!r} ({_op_label(n)})"
    out = next((o for o in n.output if o), "")
    return f"the unnamed {_op_label(n)} node" + (f" giving {out!r}" if out else "")


def _check_text(n: onnx.NodeProto, binary_ok: bool = False) -> None:
    """Raise BadModelError when a string attribute of ``n`` (a string, a list of them, or a
    STRING tensor) is not UTF-8, which ONNX requires: decoding it with replacement characters
    would change the attribute without a word. With ``binary_ok`` (an op no schema describes,
    see ``Importer._binary_ok``) a lone string may be binary: it is kept as bytes."""
    T = onnx.AttributeProto
    for a in n.attribute:
        if a.type == T.STRING:
            if binary_ok:
                continue
            items = [a.s]
        elif a.type == T.STRINGS:
            items = list(a.strings)
        elif a.type == T.TENSOR and a.t.data_type == onnx.TensorProto.STRING:
            items = list(a.t.string_data)
        else:
            continue
        for i, b in enumerate(items):
            try:
                b.decode("utf-8")
            except UnicodeDecodeError as e:
                which = "" if a.type == T.STRING else f"string {i}: "
                raise BadModelError(
                    f"{_node_label(n)}: attribute {a.name!r} is not UTF-8 text ({which}"
                    f"{e.reason} at byte {e.start}); ONNX strings are UTF-8"
                ) from None


def _custom_attr(ctx: Ctx, a: onnx.AttributeProto, base_dir: str | None) -> Any:
    """A custom node's attribute as an msc attribute value; a graph becomes an msc subgraph
    whose inputs have the types it declares (no op says what binds them)."""
    if a.type == onnx.AttributeProto.STRING and not a.ref_attr_name:
        try:
            return a.s.decode("utf-8")
        except UnicodeDecodeError:  # binary data (see _check_text): kept as it is
            return bytes(a.s)
    v = _attr_value(a, base_dir)
    if isinstance(v, onnx.GraphProto):
        from msc.frontend.onnx.control import import_subgraph  # control builds on this module

        types = [value_type_from_onnx(vi.type, f"subgraph input {vi.name!r}") for vi in v.input]
        return import_subgraph(ctx, v, types)
    if isinstance(v, onnx.TypeProto):
        return value_type_from_onnx(v, f"attribute {a.name!r}")
    return v


def _custom_version(n: onnx.NodeProto, opset: int) -> int:
    """The version a kept node's op is named with: a default-domain op's own (the opset that
    last changed it), so it names the same op whatever the model's opset; else the domain's."""
    if n.domain not in DEFAULT_DOMAINS:
        return opset
    try:
        return onnx.defs.get_schema(n.op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return opset


def dispose(g: Graph) -> None:
    """Drop the uses a (discarded) subgraph's nodes hold on outer values."""
    for n in g.nodes:
        for sub in n.subgraphs():
            dispose(sub)
        n.inputs = ()


def _all_graphs(g: onnx.GraphProto):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_graphs(a.g)
            for sub in a.graphs:
                yield from _all_graphs(sub)


def _graph_name(g: onnx.GraphProto) -> str:
    """The graph's name; for torch.onnx's fixed ``main_graph``, the exported module's class
    where its nodes record it (``LlamaForCausalLM``), as ``msc.from_torch`` names a graph."""
    if g.name == TORCH_ONNX_GRAPH:
        for node in g.node[:64]:
            props = {p.key: p.value for p in node.metadata_props}
            cls = root_class(props)
            if cls:
                return cls
    return g.name


def _provenance(node: onnx.NodeProto) -> Provenance:
    """The node's provenance: the original source's, when msc's ONNX codegen recorded it in
    the node's metadata_props (so module paths survive a trip through ONNX), else ONNX's own."""
    props = {p.key: p.value for p in node.metadata_props if p.key.startswith("msc.provenance.")}
    if props:
        get = lambda k: props.get(f"msc.provenance.{k}", "")  # noqa: E731
        return Provenance(get("framework"), get("op"), get("name"), get("module"))
    torch_onnx = {p.key: p.value for p in node.metadata_props if p.key.startswith("pkg.")}
    found = scope_provenance(node.name, torch_onnx, _op_label(node), list(node.input))
    return found if found is not None else Provenance("onnx", _op_label(node), node.name)


def _recorded_attrs(node: onnx.NodeProto) -> dict[str, str]:
    """The attribute values msc's ONNX codegen recorded on ``node`` (``msc.attr.<name>``,
    JSON text), for the canonical attributes ONNX's op cannot hold."""
    n = len("msc.attr.")
    return {p.key[n:]: p.value for p in node.metadata_props if p.key.startswith("msc.attr.")}


def _restore_attrs(op: str, attrs: Mapping[str, Any], recorded: dict[str, str]) -> dict:
    """``attrs`` of a new ``op`` node with the recorded values of its ONNX-silent attributes
    (``msc.ops.ONNX_SILENT_ATTRS``). The model is untrusted: a value that is not JSON, not of
    the attribute's kind, or for an attribute the op does not list there is ignored."""
    out = dict(attrs)
    for name in ONNX_SILENT_ATTRS.get(op, ()):
        if name not in recorded:
            continue
        kind = OPS.get(op).attrs[name].kind
        try:
            value = json.loads(recorded[name])
            if type(normalize(kind, value)) is type(value):  # 1 is not a bool, nor [1] an ints
                out[name] = value
        except (ValueError, TypeError, RecursionError):
            continue
    return out


def _restore_ranges(graph: Graph, ranges: dict[str, list]) -> None:
    """Give symbolic dims the ranges msc's ONNX codegen recorded (ONNX has no place for them)."""

    binding = {name: SymDim(name, *r) for name, r in ranges.items()}

    def fix_tensor(t: TensorType) -> TensorType:
        if t.shape is None or all(isinstance(d, int) or d is None for d in t.shape):
            return t
        dims = [d if isinstance(d, int) or d is None else symexpr.subs(d, binding) for d in t.shape]
        return TensorType(t.dtype, dims)

    def fix(t: ValueType) -> ValueType:
        return fix_tensor(t) if t.__class__ is TensorType else map_tensor(t, fix_tensor)  # type: ignore[arg-type]

    def walk(g: Graph) -> None:
        for v in g.inputs:
            v.type = fix(v.type)
        for n in g.nodes:
            for v in n.outputs:
                v.type = fix(v.type)
            for sub in n.subgraphs():
                walk(sub)

    walk(graph)


# The ONNX types a graph value may have in msc (see msc.ir.types).
_VALUE_KINDS = ("tensor_type", "sequence_type", "optional_type")


def _tensors_only(ins: Sequence[Slot | None]) -> None:
    """Converters build canonical ops, which take tensors: a node reading a sequence or an
    optional is Unsupported (``custom_ops="keep"`` keeps it as it is)."""
    bad = [
        f"{s.name!r} ({s.value.type})"
        for s in ins
        if s is not None and s.value is not None and s.value.type.__class__ is not TensorType
    ]
    if bad:
        raise Unsupported(f"input {', '.join(bad)} is not a tensor; canonical ops take tensors")


def _op_label(node: onnx.NodeProto) -> str:
    return f"{node.domain}::{node.op_type}" if node.domain not in DEFAULT_DOMAINS else node.op_type


def _topological(nodes: list[onnx.NodeProto], known: set[str]) -> list[onnx.NodeProto]:
    """``nodes`` in a topological order (kept as given when it already is one)."""
    defined = set(known)
    ok = True
    for n in nodes:
        if any(i and i not in defined for i in n.input):
            ok = False
            break
        defined.update(o for o in n.output if o)
    if ok:
        return nodes
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    order: list[onnx.NodeProto] = []
    state = [0] * len(nodes)  # 0 new, 1 visiting, 2 done
    for start in range(len(nodes)):
        stack = [(start, False)]
        while stack:
            i, expanded = stack.pop()
            if expanded:
                state[i] = 2
                order.append(nodes[i])
                continue
            if state[i] == 2:
                continue
            if state[i] == 1:
                raise ConversionError(f"ONNX graph has a cycle through node {nodes[i].name!r}")
            state[i] = 1
            stack.append((i, True))
            for inp in nodes[i].input:
                j = producer.get(inp)
                if j is not None and state[j] != 2:
                    if state[j] == 1:
                        raise ConversionError(
                            f"ONNX graph has a cycle through node {nodes[j].name!r}"
                        )
                    stack.append((j, False))
    return order


class Ctx(Builder):
    """What a converter sees: the node, its opset, and helpers to read inputs and add ops
    (the core Builder's, taking ONNX operands: graph values, import-time constants, or
    arrays)."""

    def __init__(self, imp: Importer, node: onnx.NodeProto, opset: int) -> None:
        super().__init__(node.name, _provenance(node))
        self._imp = imp
        self.node = node
        self._recorded = _recorded_attrs(node)
        self.opset = opset
        self.name = node.name

    # ------------------------------------------------------------------ reading inputs
    def known(self, x: Operand) -> np.ndarray | None:
        """The value of ``x`` when it is known at import, else None."""
        if x is None:
            return None
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, Slot):
            return x.const
        return None

    def type(self, x: Operand) -> TensorType:
        if isinstance(x, np.ndarray):
            return TensorType(DType.from_numpy(x.dtype), x.shape)
        assert x is not None
        return x.type

    def dtype(self, x: Operand) -> DType:
        return self.type(x).dtype

    def rank(self, x: Operand) -> int:
        r = self.type(x).rank
        if r is None:
            raise Unsupported(f"input {self._label(x)} has unknown rank")
        return r

    def shape(self, x: Operand) -> tuple:
        s = self.type(x).shape
        if s is None:
            raise Unsupported(f"input {self._label(x)} has unknown rank")
        return s

    def static_shape(self, x: Operand) -> tuple[int, ...] | None:
        t = self.type(x)
        return t.shape if t.is_static else None  # type: ignore[return-value]

    def need(self, x: Operand, what: str) -> np.ndarray:
        """The constant value of ``x``; Unsupported when it is only known at run time."""
        c = self.known(x)
        if c is None:
            if isinstance(x, Slot) and x.value is not None and x.value.producer is None:
                self._imp.runtime_inputs.add(x.name)
            raise Unsupported(f"{what} is computed at run time; msc needs it constant")
        return c

    def ints(self, x: Operand, what: str) -> list[int]:
        """A constant integer input as a list; Unsupported when it is only known at run time."""
        c = self.need(x, what)
        return [int(v) for v in np.asarray(c).reshape(-1)]

    def int_input(self, x: Operand) -> Operand:
        """A run-time integer scalar (k, axis, depth) as the canonical ops read it: i64, 0-d
        or one-element 1-d as the model has it (no reshape, so a round trip adds no node)."""
        x = self.cast(x, DType.INT64)
        return x if self.type(x).rank in (0, 1) else self.op("reshape", x, shape=[])

    def check_size(self, elements: int, what: str) -> None:
        """Refuse to build an import-time array of more than IMPORT_ARRAY_LIMIT elements."""
        if elements > IMPORT_ARRAY_LIMIT:
            raise Unsupported(
                f"{what} would need {elements} elements at import "
                f"(at most {IMPORT_ARRAY_LIMIT}); the model's sizes are not plausible"
            )

    def scalar(self, x: Operand, what: str) -> float | int:
        v = np.asarray(self.need(x, what)).reshape(-1)
        if v.size != 1:
            raise Unsupported(f"{what} must hold one element, has {v.size}")
        return v[0].item()

    def _label(self, x: Operand) -> str:
        n = getattr(x, "name", None)
        return repr(n) if n else "(tensor)"

    # ------------------------------------------------------------------ making nodes
    def value(self, x: Operand) -> Value:
        """``x`` as a graph value (a constant is materialized under its ONNX name)."""
        if isinstance(x, Value):
            return x
        if isinstance(x, np.ndarray):
            return self.constant(x)
        if x is None:
            raise Unsupported("a required input is missing")
        if x.value is None:
            x.value = self._imp.materialize(x, self)
        return x.value

    def constant(self, arr: np.ndarray, name: str | None = None) -> Value:
        """A new ``constant`` node (or weight, when large) holding ``arr``."""
        arr = np.asarray(arr)
        if name is None and arr.size > SMALL_CONSTANT:
            name = self._imp.fresh_weight_name(self.name or "const")
        if arr.size > SMALL_CONSTANT:
            return self._imp.graph.add_weight(name, _stored(arr))  # type: ignore[arg-type]
        return self.add("constant", [], {"value": arr}, [name]).output

    def add(
        self,
        op: str,
        inputs: Sequence[Operand],
        attrs: Mapping[str, Any] | None = None,
        output_names: Sequence[str | None] | None = None,
    ) -> Node:
        ins = [None if x is None else self.value(x) for x in inputs]
        if self._recorded:
            attrs = _restore_attrs(op, attrs or {}, self._recorded)
        return super().add(op, ins, attrs, output_names)

    def ops(self, op: str, *inputs: Operand, **attrs: Any) -> tuple[Value, ...]:
        """Add a multi-output canonical node and return its outputs."""
        return self.add(op, list(inputs), attrs).outputs

    def cast(self, x: Operand, dtype: DType) -> Operand:
        """``x`` as ``dtype`` (no node when it already is)."""
        if self.dtype(x) is dtype:
            return x
        c = self.known(x)
        if c is not None and not isinstance(x, Value):
            return np.asarray(c).astype(dtype.to_numpy())
        return self.op("cast", x, to=dtype)

    @staticmethod
    def unsupported(reason: str) -> Unsupported:
        return Unsupported(reason)


class Importer:
    """One import of one ModelProto."""

    def __init__(
        self,
        model: onnx.ModelProto,
        base_dir: str | os.PathLike | None,
        input_types: Mapping[str, TensorType] | None = None,
        registry: ConverterRegistry = CONVERTERS,
        constant_inputs: Mapping[str, np.ndarray] | None = None,
        custom_ops: str = "error",
    ) -> None:
        if custom_ops not in CUSTOM_OPS:
            raise ValueError(f"custom_ops must be one of {CUSTOM_OPS}, got {custom_ops!r}")
        self.model = model
        self.custom_ops = custom_ops
        # id -> node, for the nodes kept as custom ops (and below, those skipped): the node is
        # held so that no other node's proto wrapper, made later, can take a freed id.
        self.custom: dict[int, onnx.NodeProto] = {}
        self._declared: dict[str, onnx.TypeProto] | None = None
        self._inferred = False  # whether ONNX shape inference has filled _declared
        self._asked_runtime = False  # whether onnxruntime's inference has, after it
        self.constant_inputs = {k: np.asarray(v) for k, v in (constant_inputs or {}).items()}
        self.base_dir = None if base_dir is None else os.fspath(base_dir)
        self.input_types = dict(input_types or {})
        self.registry = registry
        self.opsets = {(o.domain or ""): int(o.version) for o in model.opset_import}
        if "ai.onnx" in self.opsets and "" not in self.opsets:
            self.opsets[""] = self.opsets["ai.onnx"]
        self.opset = self.opsets.get("", 0)
        self.graph = Graph(_graph_name(model.graph))
        self.env: dict[str, Slot] = {}
        self.problems: list[UnsupportedOp] = []
        # Graph inputs whose values a converter needed at import (see constant_inputs).
        self.runtime_inputs: set[str] = set()
        self.reserved: set[str] = set()
        self._counter = 0
        self._wcounter = 0

    # ------------------------------------------------------------------ names
    def fresh_name(self) -> str:
        taken = self.graph._taken  # noqa: SLF001 - the graph's own claimed names
        while str(self._counter) in self.reserved or str(self._counter) in taken:
            self._counter += 1
        name = str(self._counter)
        self._counter += 1
        return name

    def fresh_weight_name(self, base: str) -> str:
        while True:
            name = f"{base}.const{self._wcounter}"
            self._wcounter += 1
            if name not in self.graph.weights and name not in self.reserved:
                return name

    # ------------------------------------------------------------------ problems
    def problem(self, node: onnx.NodeProto | None, op: str, reason: str, name: str = "") -> None:
        self.problems.append(
            UnsupportedOp(op=op, node=node.name if node is not None else name, reason=reason)
        )

    # ------------------------------------------------------------------ run
    def run(self) -> Graph:
        newest = onnx.defs.onnx_opset_version()
        if not self.opset:
            if any(n.domain in DEFAULT_DOMAINS for n in self.model.graph.node):
                raise ConversionError("model imports no default-domain (ai.onnx) opset")
            self.opset = newest  # only other domains: each node is reported unsupported
        if not MIN_OPSET <= self.opset <= newest:
            raise ConversionError(
                f"model uses ai.onnx opset {self.opset}; msc reads opsets {MIN_OPSET} to {newest}"
            )
        g = self.model.graph
        for n in _all_nodes(g):
            _check_text(n, self._binary_ok(n))
            self.reserved.update(x for x in list(n.input) + list(n.output) if x)
        self.reserved.update(v.name for v in list(g.input) + list(g.output) + list(g.value_info))
        nodes = list(g.node)  # one Python object per node, so ids stay stable
        self._check_nodes(nodes)
        self._weights(g)
        self._inputs(g)
        for n in _topological(nodes, set(self.env)):
            self._node(n)
        self._outputs(g)
        if self.problems:
            raise OnnxUnsupportedOpsError(
                self.problems, sorted(self.runtime_inputs), what=f"ONNX model {g.name!r}"
            )
        self._prune()
        recover_weight_names(self.graph, self._signature(g))
        self._msc_metadata()
        self.graph.meta["source"] = "onnx"
        self.graph.meta["onnx_opset"] = self.opset
        if self.model.producer_name:
            self.graph.meta["producer"] = self.model.producer_name
        return checked(self.graph)

    def _signature(self, g: onnx.GraphProto):
        """torch.onnx's record of the ExportedProgram's graph signature, when it wrote one
        (msc.frontend.onnx.scopes.read_signature)."""
        text = next(
            (p.value for p in g.metadata_props if p.key == _SIGNATURE_KEY),
            next((p.value for p in self.model.metadata_props if p.key == _SIGNATURE_KEY), ""),
        )
        if not text:
            return None
        nodes = [(list(n.input), {p.key: p.value for p in n.metadata_props}) for n in g.node]
        return read_signature(text, nodes, {t.name for t in g.initializer})

    def _msc_metadata(self) -> None:
        """Restore what msc's ONNX codegen recorded in metadata_props: symbolic dim ranges,
        the output structure, weight roles and aliases, and graph metadata (JSON-encoded
        values). A property that does not hold what msc writes there is ignored."""
        props = {p.key: p.value for p in self.model.metadata_props}
        try:
            ranges = json.loads(props.get("msc.dim_ranges", "{}"))
        except json.JSONDecodeError:
            ranges = {}
        if isinstance(ranges, dict) and ranges:
            ok = {
                k: v
                for k, v in ranges.items()
                if isinstance(v, list)
                and len(v) == 2
                and all(x is None or (isinstance(x, int) and x >= 0) for x in v)
                and (None in v or v[0] <= v[1])
            }
            _restore_ranges(self.graph, ok)
        if "msc.output_tree" in props:
            try:
                tree = structure.decode(props["msc.output_tree"])
                if all(i < len(self.graph.outputs) for i in structure.leaves(tree)):
                    self.graph.output_tree = tree
            except ValueError:
                pass
        try:
            fields = json.loads(props.get("msc.weights", "{}"))
        except json.JSONDecodeError:
            fields = {}
        for name, f in fields.items() if isinstance(fields, dict) else ():
            w = self.graph.weights.get(name)
            if w is None or not isinstance(f, dict):
                continue
            try:
                w.role = f.get("role", "")
                w.aliases = [a for a in f.get("aliases", ()) if a not in self.graph.weights]
            except (ValueError, TypeError):
                continue
        for key, raw in props.items():
            if not key.startswith("msc.meta."):
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            if isinstance(value, list):
                value = tuple(value)
            try:
                infer_kind(value)
            except TypeError:
                continue
            self.graph.meta[key[len("msc.meta.") :]] = value

    def _check_nodes(self, nodes: list[onnx.NodeProto]) -> None:
        """Report every op msc has no converter for, before converting anything."""
        self.skip: dict[int, onnx.NodeProto] = {}
        for n in nodes:
            try:
                conv = self._lookup(n)
            except NoConverter as e:
                if self.custom_ops == "keep":
                    self.custom[id(n)] = n
                    continue
                reason = str(e)
                self.problem(n, _op_label(n), reason + " (custom_ops='keep' keeps it as is)")
                self.skip[id(n)] = n
                continue
            bad = [a.name for a in n.attribute if a.name not in conv.attrs]
            if bad and not conv.takes_any_attr:
                self.problem(n, _op_label(n), f"attribute(s) {bad} not supported")
                self.skip[id(n)] = n
                continue
            # Ops of other domains have no ONNX schema to say which attributes they need.
            missing = sorted(conv.required - {a.name for a in n.attribute})
            if missing:
                self.problem(n, _op_label(n), f"required attribute(s) {missing} missing")
                self.skip[id(n)] = n

    def _binary_ok(self, n: onnx.NodeProto) -> bool:
        """Whether ``n``'s lone string attributes may hold binary data: only when neither
        ONNX's own schemas (whose strings are text) nor msc's converters (at any version:
        canonical ops take text) define its op. Such a node is kept as a custom node
        (``custom_ops="keep"``) or reported as unsupported, never converted."""
        domain = "" if n.domain in DEFAULT_DOMAINS else n.domain
        if (domain, n.op_type) in self.registry:  # at any version
            return False
        try:
            onnx.defs.get_schema(n.op_type, domain)
        except onnx.defs.SchemaError:
            return True
        return False

    def _lookup(self, n: onnx.NodeProto):
        if n.domain in DEFAULT_DOMAINS:
            return self.registry.lookup(n.op_type, self.opset)
        # Another domain (com.microsoft): converters registered for it, by its opset version.
        return self.registry.lookup(n.op_type, self.opsets.get(n.domain, 1), n.domain)

    def _weights(self, g: onnx.GraphProto) -> None:
        for t in g.initializer:
            try:
                data = tensor_data(t, self.base_dir)
            except UnsupportedType as e:
                self.problem(None, "initializer", str(e), name=t.name)
                continue
            w = self.graph.add_weight(t.name, data)
            self.env[t.name] = Slot(t.name, value=w, const=w)
        for t in g.sparse_initializer:
            self.problem(
                None, "sparse initializer", "sparse tensors are not supported", name=t.values.name
            )

    def _inputs(self, g: onnx.GraphProto) -> None:
        for vi in g.input:
            if vi.name in self.env:  # an initializer listed as an input (IR < 4 style)
                continue
            if vi.name in self.constant_inputs:
                self.env[vi.name] = Slot(vi.name, const=self.constant_inputs[vi.name])
                continue
            try:
                t = self.input_types.get(vi.name) or value_type_from_onnx(
                    vi.type, f"input {vi.name!r}"
                )
            except UnsupportedType as e:
                self.problem(None, "graph input", str(e), name=vi.name)
                self.env[vi.name] = _poisoned(vi.name)
                continue
            self.env[vi.name] = Slot(vi.name, value=self.graph.add_input(vi.name, t))
        names = {vi.name for vi in g.input}
        for what, given in (
            ("input_types", self.input_types),
            ("constant_inputs", self.constant_inputs),
        ):
            unknown = set(given) - names
            if unknown:
                raise ConversionError(f"{what} names unknown graph input(s) {sorted(unknown)}")

    def _node(self, n: onnx.NodeProto) -> None:
        def poison() -> None:
            for o in n.output:
                if o:
                    self.env[o] = _poisoned(o)

        missing = [i for i in n.input if i and i not in self.env]
        if missing:
            raise ConversionError(f"node {n.name!r} ({n.op_type}) reads undefined {missing}")
        ins = [self.env[i] if i else None for i in n.input]
        if id(n) in self.skip or any(s is not None and s.poisoned for s in ins):
            poison()
            return
        if id(n) in self.custom:
            self._keep(n, ins)
            return
        if self._fold(n, ins):
            return
        conv = self._lookup(n)
        ctx = Ctx(self, n, self.opset)
        try:
            _tensors_only(ins)
            _check_against_schema(n, self.opset)
            attrs = {a.name: _attr_value(a, self.base_dir) for a in n.attribute}
            while ins and ins[-1] is None:
                ins.pop()
            if len(ins) > conv.n_inputs and not conv.variadic:
                raise Unsupported(f"{len(ins)} inputs given, msc reads {conv.n_inputs}")
            result = conv.fn(ctx, *ins, **attrs)
            self._bind(ctx, n, result)
        except (Unsupported, UnsupportedType) as e:
            self._discard(ctx)
            if self.custom_ops == "keep":  # a node msc cannot translate stays as it came
                self._keep(n, [self.env[i] if i else None for i in n.input])
                return
            self.problem(n, _op_label(n), str(e))
            poison()
        except (OpError, InferError, GraphError) as e:
            self._discard(ctx)
            self.problem(n, _op_label(n), f"cannot convert: {e}")
            poison()

    def _keep(self, n: onnx.NodeProto, ins: list[Slot | None]) -> None:
        """``n`` as a custom node: its domain, op type, the domain's opset version, its
        attributes, and the output types the model declares (value_info, graph outputs, ONNX
        shape inference for default-domain ops, or onnxruntime's for its own ops)."""
        domain = n.domain or "ai.onnx"
        op = custom_op(domain, n.op_type, _custom_version(n, self.opsets.get(n.domain or "", 1)))
        ctx = Ctx(self, n, self.opset)
        attrs: dict[str, Any] = {}
        try:
            for a in n.attribute:
                attrs[a.name] = _custom_attr(ctx, a, self.base_dir)
            names = list(n.output)
            while names and not names[-1]:
                names.pop()
            types = [self._declared_type(o, i) for i, o in enumerate(names)]
            while ins and ins[-1] is None:
                ins.pop()
            values = [None if x is None else ctx.value(x) for x in ins]
            node = Node(
                op,
                values,
                attrs,
                output_types=types,
                name=n.name,
                provenance=ctx._current_provenance(),  # noqa: SLF001
            )
            ctx.nodes.append(node)
            self._bind(ctx, n, node.outputs)
        except (Unsupported, UnsupportedType, OpError, GraphError) as e:
            self._discard(ctx)
            for sub in attrs.values():
                if isinstance(sub, Graph):
                    dispose(sub)
            self.problem(n, _op_label(n), f"cannot keep as a custom op: {e}")
            for o in n.output:
                if o:
                    self.env[o] = _poisoned(o)

    def _declared_type(self, name: str, index: int) -> ValueType:
        if self._declared is None:
            self._declared = {}
            for g in _all_graphs(self.model.graph):
                for vi in list(g.value_info) + list(g.output):
                    if vi.type.WhichOneof("value") in _VALUE_KINDS:
                        self._declared[vi.name] = vi.type
        if name not in self._declared and not self._inferred:
            self._inferred = True  # inference runs once, on the whole model
            try:
                inferred = onnx.shape_inference.infer_shapes(self.model, strict_mode=False)
            except Exception:  # noqa: BLE001 - inference fails in many ways on custom domains
                inferred = None
            if inferred is not None:  # subgraphs too: a node kept in a branch or loop body
                for g in _all_graphs(inferred.graph):
                    for vi in g.value_info:
                        if vi.type.WhichOneof("value") in _VALUE_KINDS:
                            self._declared.setdefault(vi.name, vi.type)
        if name and name not in self._declared and not self._asked_runtime:
            # onnxruntime's schemas type its own ops (com.microsoft), which ONNX's do not.
            self._asked_runtime = True
            top = [o for n in self.model.graph.node for o in n.output if o]
            untyped = [o for o in top if o not in self._declared]
            self._declared.update(runtime_types(self.model, untyped))
        if name not in self._declared or not name:
            raise Unsupported(
                f"output {index} ({name!r}) has no type in the model, and neither ONNX's nor "
                "onnxruntime's shape inference gives one; add value_info for it"
            )
        return value_type_from_onnx(self._declared[name], f"output {name!r}")

    def _discard(self, ctx: Ctx) -> None:
        for node in reversed(ctx.nodes):
            node.inputs = ()
        for s in self.env.values():
            if s.value is not None and s.value.producer in ctx.nodes:
                s.value = None
        ctx.nodes.clear()

    def _bind(self, ctx: Ctx, n: onnx.NodeProto, result: Any) -> None:
        outs = list(result) if isinstance(result, list | tuple) else [result]
        names = list(n.output)
        if len(outs) < len(names):
            outs += [None] * (len(names) - len(outs))
        mine = {id(v) for node in ctx.nodes for v in node.outputs}
        bound: list[tuple[str, Value | np.ndarray]] = []
        for i, name in enumerate(names):
            if not name:
                continue
            r = outs[i]
            if r is None:
                raise Unsupported(f"output {i} ({name!r}) is not supported")
            if isinstance(r, Slot):
                r = r.const if r.value is None else r.value
            if isinstance(r, np.ndarray | np.generic):
                bound.append((name, np.asarray(r)))
                continue
            if id(r) in mine and r.name is None:
                r.name = name
            else:
                r = ctx.add("identity", [r], output_names=[name]).output
            bound.append((name, r))
        for node in ctx.nodes:
            for v in node.outputs:
                if v.name is None:
                    v.name = self.fresh_name()
            self.graph.add_node(node)
        ctx.nodes.clear()
        for name, r in bound:
            if isinstance(r, np.ndarray):
                self.env[name] = Slot(name, const=r, origin=n)
            else:
                self.env[name] = Slot(name, value=r)

    def _fold(self, n: onnx.NodeProto, ins: list[Slot | None]) -> bool:
        """Evaluate an all-constant node at import; True when done."""
        if n.op_type not in FOLDABLE or n.domain not in DEFAULT_DOMAINS:
            return False
        present = [s for s in ins if s is not None]
        if not present or any(not s.known for s in present):
            return False
        if sum(s.size for s in present) > FOLD_LIMIT:
            return False
        arrays = [None if s is None else s.const for s in ins]
        if _fold_bound(n.op_type, arrays) > FOLD_OUTPUT_LIMIT:
            return False
        try:
            outs = _evaluate(n, arrays, self.opset)
        except Exception:  # noqa: BLE001 - a node the reference cannot fold is converted
            return False
        for name, arr in zip(n.output, outs):
            if name:
                arr = np.asarray(arr)
                try:
                    DType.from_numpy(arr.dtype)
                except ValueError:
                    return False
                self.env[name] = Slot(name, const=arr, origin=n)
        return True

    def materialize(self, slot: Slot, ctx: Ctx | None) -> Value:
        """A graph tensor for a constant slot, under the slot's ONNX name."""
        arr = slot.const
        assert arr is not None
        if arr.size > SMALL_CONSTANT:
            name = slot.name if slot.name not in self.graph.weights else None
            return self.graph.add_weight(name or self.fresh_weight_name(slot.name), _stored(arr))
        origin = slot.origin
        prov = _provenance(origin) if origin is not None else None
        node = Node(
            "constant",
            [],
            {"value": np.array(arr)},
            name=origin.name if origin is not None else "",
            provenance=prov,
            output_names=[slot.name],
        )
        if ctx is not None:
            ctx.nodes.append(node)
        else:
            self.graph.add_node(node)
        return node.output

    def _outputs(self, g: onnx.GraphProto) -> None:
        outs: list[Value] = []
        for vi in g.output:
            s = self.env.get(vi.name)
            if s is None:
                raise ConversionError(f"graph output {vi.name!r} is not produced by any node")
            if s.poisoned:
                continue
            if s.value is None:
                s.value = self.materialize(s, None)
            outs.append(s.value)
        # ONNX names each graph output once, so a tensor returned twice is written as an
        # Identity of an earlier output (codegen.onnx, torch.onnx): read as that output again
        earlier: set[int] = set()
        for k, v in enumerate(outs):
            p = v.producer
            if p is not None and p.op == "identity" and id(p.inputs[0]) in earlier:
                outs[k] = p.inputs[0]
            earlier.add(id(outs[k]))
        self.graph.set_outputs(outs)

    def _prune(self) -> None:
        """Drop nodes and weights nothing uses (shape arithmetic folded into attributes)."""
        keep = {id(v) for v in self.graph.outputs}
        self.graph.remove_nodes(dead_nodes(self.graph, keep))
        for name, w in list(self.graph.weights.items()):
            if not w.uses and id(w) not in keep:
                del self.graph.weights[name]


@functools.lru_cache(maxsize=4096)
def _schema(op_type: str, opset: int, domain: str) -> Any:
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None


def _check_against_schema(n: onnx.NodeProto, opset: int) -> None:
    """A node whose attributes or input count its ONNX schema does not allow (a mistyped or
    missing attribute, too many or too few inputs) is reported as such, before a converter
    reads it. Ops with no ONNX schema (other domains) are left to their converters."""
    schema = _schema(n.op_type, opset, n.domain)
    if schema is None:
        return
    given = {a.name: a for a in n.attribute}
    for name, a in given.items():
        spec = schema.attributes.get(name)
        if spec is not None and int(a.type) != int(spec.type.value):
            kind = _ATTR_NAMES.get(a.type, a.type)
            raise Unsupported(f"attribute {name!r} is {kind}, the op takes {spec.type.name}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in given:
            raise Unsupported(f"required attribute {name!r} is missing")
    present = len(n.input)
    while present and not n.input[present - 1]:
        present -= 1
    if present < schema.min_input or len(n.input) > schema.max_input:
        raise Unsupported(
            f"{len(n.input)} inputs given; the op takes {schema.min_input} to {schema.max_input}"
        )


_ATTR_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def _fold_bound(op: str, arrays: list[np.ndarray | None]) -> float:
    """An upper bound on the elements an all-constant node would produce, from its inputs'
    values and shapes alone (Python ints: no overflow). inf when it cannot be bounded."""
    a = [x for x in arrays if x is not None]
    try:
        if op == "ConstantOfShape":
            return math.prod(max(int(v), 0) for v in a[0].reshape(-1))
        if op == "Range":
            start, limit, delta = (float(x.reshape(-1)[0]) for x in a[:3])
            return max(math.ceil((limit - start) / delta), 0) if delta else math.inf
        if op == "Expand":
            want = [int(v) for v in a[1].reshape(-1)]
            return math.prod(max(d, 1) for d in _broadcast(list(a[0].shape), want))
        if op == "Tile":
            reps = [max(int(v), 0) for v in a[1].reshape(-1)]
            return a[0].size * math.prod(reps)
        if op == "Gather":
            return a[0].size * max(a[1].size, 1)
        return math.prod(_broadcast(*(list(x.shape) for x in a))) + sum(x.size for x in a)
    except (ValueError, IndexError, OverflowError, ZeroDivisionError):
        return math.inf


def _broadcast(*shapes: list[int]) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            out[i] = max(out[i], abs(int(d)))
    return out


def _poisoned(name: str) -> Slot:
    s = Slot(name)
    s.poisoned = True
    return s


def _all_nodes(g: onnx.GraphProto):
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _all_nodes(sub)


def _evaluate(n: onnx.NodeProto, arrays: list[np.ndarray | None], opset: int) -> list:
    """Run one node with the ONNX reference implementation at the model's opset."""
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" if a is not None else "" for k, a in enumerate(arrays)]
    node = helper.make_node(
        n.op_type, names, [f"o{k}" for k in range(len(n.output))], domain=n.domain
    )
    node.attribute.extend(n.attribute)
    graph = helper.make_graph(
        [node],
        "fold",
        [helper.make_value_info(x, onnx.TypeProto()) for x in names if x],
        [helper.make_value_info(f"o{k}", onnx.TypeProto()) for k in range(len(n.output))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {x: a for x, a in zip(names, arrays) if x}
    return ReferenceEvaluator(model).run(None, feeds)
