"""The neutral graph: Value, Weight, Node, Graph.

# NOTE: invariants
# - A Value is an edge: a name, a TensorType, and its producer (a Node and output index, or None
#   for graph inputs and weights). Its ``uses`` are kept right by ``Node.inputs``' setter; callers
#   never edit them.
# - A Weight is a Value whose data lives in the graph: a numpy array (memory-mapped or not), a
#   zero-argument loader, a FileRegion (bytes in a file: mapped when used, copied file to file
#   when saved) or Packed sub-byte bytes. Only arrays are kept; a loader's or region's result
#   belongs to the caller who asked for it. Data is never copied when it need not be.
# - ``Graph.nodes`` is in topological order; ``validate()`` checks it and everything else.
# - Names are kept exactly as the source gave them. Values and weights live in separate
#   namespaces (``%`` and ``@`` in text). A value with no source name gets the next free
#   positional name (``0``, ``1``, ...) when it joins a graph, never one derived from ``id()``.
# - Weights live in the top-level graph; a subgraph (an attribute of kind GRAPH) uses them and
#   any outer value by reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from msc.errors import MscError
from msc.ir.dtype import DType, check_strings
from msc.ir.tensor import FileRegion, Packed
from msc.ir.types import NON_TENSOR_TYPES, TensorType, ValueType

__all__ = [
    "Value",
    "Weight",
    "Node",
    "Provenance",
    "Graph",
    "GraphError",
    "OpSet",
    "default_opset",
    "set_default_opset",
    "dead_nodes",
]


class GraphError(MscError, ValueError):
    """A graph is not well formed; the message names the node and value."""


class OpSet(Protocol):
    """What the core needs of an op set: the schema of an op by name (``msc.ops.OpRegistry``
    is one). A schema checks a node's inputs, normalizes its attributes and infers its output
    types; the core never imports the vocabulary itself."""

    def get(self, name: str) -> Any: ...

    def __contains__(self, name: object) -> bool: ...


# The op set a node or graph is checked against when none is given: msc.ops installs the
# canonical one when it is imported (``import msc`` does), so the core depends on no vocabulary.
_default_opset: OpSet | None = None


def set_default_opset(opset: OpSet) -> None:
    """Make ``opset`` the one nodes and graphs use when they are given none."""
    global _default_opset
    _default_opset = opset


def default_opset() -> OpSet:
    if _default_opset is None:
        raise GraphError("no op set: import msc.ops, or pass opset= to Node and Graph")
    return _default_opset


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a node came from: framework, source op, source node name, module path."""

    framework: str = ""
    op: str = ""
    name: str = ""
    module: str = ""
    # The module stack, outermost first: (module path, module type name) per module call the
    # node is inside (torch.export's nn_module_stack). The text format prints it (``stack``,
    # format 2); equality ignores it (it says how the source was organised, not what it
    # computes, and files from before format 2 have none).
    stack: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.framework or self.op or self.name or self.module or self.stack)

    def counted(self, name: str) -> bool:
        """Whether ``name`` is one an exporter counted up from the op (torch.export's
        ``linear_3`` for the fourth aten.linear): it names nothing a reader knows."""
        if self.framework != "torch" or not self.op.startswith("aten."):
            return False
        base = self.op.split(".")[1]
        rest = name[len(base) :]
        return name.startswith(base) and (not rest or (rest[0] == "_" and rest[1:].isdigit()))


# Shared by every node with no provenance (it is frozen): one object, not one per node.
_NO_PROVENANCE = Provenance()


class Value:
    """A named, typed edge of the graph. Its type is a TensorType, or (a value only custom
    ops make or take, and graph inputs and outputs) a SequenceType or OptionalType, which
    have no ``dtype`` or ``shape``."""

    __slots__ = ("name", "type", "producer", "index", "_uses")

    def __init__(self, name: str | None, type: ValueType) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"value name must be str, got {name!r}")
        if not isinstance(type, TensorType) and not isinstance(type, NON_TENSOR_TYPES):
            raise TypeError(
                f"value {name!r}: type must be TensorType, SequenceType or OptionalType, "
                f"got {type!r}"
            )
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self.index = 0
        # The (node, input index) pairs that read this value: None for none, the pair itself
        # for one (most values: no dict per value, which was a third of a parsed graph's
        # memory), else a dict used as an insertion-ordered set, so that unlinking one use is
        # O(1) however many uses a value has (a shared constant can have thousands).
        self._uses: tuple[Node, int] | dict[tuple[Node, int], None] | None = None

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def shape(self):
        return self.type.shape

    @property
    def uses(self) -> tuple[tuple[Node, int], ...]:
        u = self._uses
        return () if u is None else (u,) if type(u) is tuple else tuple(u)

    def _link(self, use: tuple[Node, int]) -> None:
        u = self._uses
        if u is None:
            self._uses = use
        elif type(u) is tuple:
            self._uses = {u: None, use: None}
        else:
            u[use] = None

    def _unlink(self, use: tuple[Node, int]) -> None:
        u = self._uses
        if type(u) is tuple and u == use:
            self._uses = None
        elif type(u) is dict:
            del u[use]
        else:
            raise KeyError(use)

    def replace_all_uses_with(self, other: Value) -> None:
        for node, i in self.uses:
            ins = list(node.inputs)
            ins[i] = other
            node.inputs = ins

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


# What a weight is in the source model. "" when the source does not say (ONNX initializers);
# a codegen then guesses from the dtype and the weight's uses.
ROLES = ("", "parameter", "buffer", "constant")

# What a weight's data may be (see the NOTE above).
WeightData = np.ndarray | Callable[[], np.ndarray] | FileRegion | Packed


class Weight(Value):
    """A Value whose data the graph holds (parameters, buffers, constants, initializers).

    ``role`` says what it is in the source: "parameter" (trained), "buffer" (model state, saved
    with it), "constant" (neither: a non-persistent buffer or a tensor literal of the code), or
    "" when the source does not say. ``aliases`` are the other source names of the same tensor
    (tied weights: ``lm_head.weight`` for ``embed.weight``).
    """

    __slots__ = ("_data", "_role", "_aliases")

    def __init__(
        self,
        name: str,
        type: TensorType | None = None,
        data: WeightData | None = None,
        *,
        role: str = "",
        aliases: Iterable[str] = (),
    ) -> None:
        if type is None:
            if isinstance(data, np.ndarray):
                type = TensorType(DType.from_numpy(data.dtype), data.shape)
            elif isinstance(data, FileRegion | Packed):
                type = TensorType(data.dtype, data.shape)
            else:
                raise TypeError(f"weight {name!r}: give a type, or data as a numpy array")
        elif not isinstance(type, TensorType):
            raise TypeError(f"weight {name!r}: a weight is a tensor, its type cannot be {type}")
        super().__init__(name, type)
        self._data: WeightData | None = None
        self.set_data(data)
        self.role = role
        self.aliases = aliases

    @property
    def role(self) -> str:
        return self._role

    @role.setter
    def role(self, role: str) -> None:
        if role not in ROLES:
            raise GraphError(f"weight {self.name!r}: role {role!r} is not one of {ROLES[1:]}")
        self._role = role

    @property
    def aliases(self) -> tuple[str, ...]:
        return self._aliases

    @aliases.setter
    def aliases(self, names: Iterable[str]) -> None:
        names = tuple(names)
        if any(not isinstance(n, str) or not n for n in names) or self.name in names:
            raise GraphError(f"weight {self.name!r}: bad aliases {names!r}")
        self._aliases = tuple(sorted(set(names)))

    def _check(self, arr: np.ndarray) -> None:
        dt = DType.from_numpy(arr.dtype)
        if dt is not self.type.dtype or (
            self.type.shape is not None and tuple(arr.shape) != self.type.shape
        ):
            raise GraphError(
                f"weight {self.name!r}: data is {dt.short}{list(arr.shape)}, type says {self.type}"
            )

    def _check_stored(self, data: FileRegion | Packed) -> None:
        if data.dtype is not self.type.dtype or (
            self.type.shape is not None and tuple(data.shape) != self.type.shape
        ):
            raise GraphError(
                f"weight {self.name!r}: data is {data.dtype.short}{list(data.shape)}, "
                f"type says {self.type}"
            )

    @property
    def has_data(self) -> bool:
        return self._data is not None

    @property
    def storage(self) -> WeightData | None:
        """The data as held: an array, a loader, a FileRegion or Packed bytes."""
        return self._data

    @property
    def region(self) -> FileRegion | None:
        """Where the data sits in a file, when it does (and has not been replaced)."""
        return self._data if isinstance(self._data, FileRegion) else None

    @property
    def nbytes(self) -> int:
        """Bytes the data takes as stored: packed sub-byte types count packed; a str weight
        counts its elements' UTF-8 bytes (0 when its data is not in memory)."""
        if isinstance(self._data, FileRegion | Packed):
            return self._data.nbytes
        if self.type.dtype.is_string:
            data = self._data if isinstance(self._data, np.ndarray) else ()
            return sum(len(x.encode("utf-8")) for x in np.asarray(data).flat)
        return self.type.storage_bytes() or 0

    def numpy(self) -> np.ndarray:
        """The data as an array. An array held in memory is returned as is; a file region is
        mapped for this use and packed bytes unpacked, a loader runs: none of those results is
        kept, so walking a large model does not pin its weights in memory."""
        data = self._data
        if data is None:
            raise GraphError(f"weight {self.name!r} has no data (a type-only graph?)")
        if isinstance(data, np.ndarray):
            return data
        arr = data.array() if isinstance(data, FileRegion | Packed) else data()
        self._check(arr)
        if self.type.dtype.is_string:
            arr = check_strings(arr, f"weight {self.name!r}")
        return arr

    def set_data(self, data: WeightData | None) -> None:
        if isinstance(data, np.ndarray):
            self._check(data)
            if self.type.dtype.is_string:
                try:
                    data = check_strings(data, f"weight {self.name!r}")
                except ValueError as e:
                    raise GraphError(str(e)) from None
        elif isinstance(data, FileRegion | Packed):
            self._check_stored(data)
        self._data = data

    def __repr__(self) -> str:
        return f"@{self.name}: {self.type}"


class Node:
    """One op application: canonical op name, typed attributes, inputs, outputs, provenance."""

    __slots__ = ("op", "name", "attrs", "provenance", "outputs", "_inputs", "__weakref__")

    def __init__(
        self,
        op: str,
        inputs: Sequence[Value | None] = (),
        attrs: Mapping[str, Any] | None = None,
        *,
        outputs: Sequence[Value] | None = None,
        output_types: Sequence[TensorType] | None = None,
        output_names: Sequence[str | None] | None = None,
        name: str = "",
        provenance: Provenance | None = None,
        opset: OpSet | None = None,
    ) -> None:
        schema = (opset or default_opset()).get(op)
        self.op = op
        self.name = name
        self.provenance = provenance or _NO_PROVENANCE
        self._inputs: tuple[Value | None, ...] = ()
        inputs = list(inputs)
        schema.check_inputs(inputs, where=self._where)
        self.attrs = schema.normalize_attrs(attrs or {}, where=self._where)
        self.inputs = inputs
        if outputs is None:
            if output_types is None:
                output_types = schema.infer(self)
            names = list(output_names) if output_names is not None else [None] * len(output_types)
            if len(names) != len(output_types):
                raise GraphError(
                    f"{self._where()}: {len(names)} names for {len(output_types)} outputs"
                )
            outputs = [Value(n, t) for n, t in zip(names, output_types)]
        schema.check_output_count(len(outputs), self.attrs, where=self._where)
        for i, v in enumerate(outputs):
            if v.producer is not None:
                raise GraphError(f"{self._where()}: output {v.name!r} already has a producer")
            v.producer, v.index = self, i
        self.outputs: tuple[Value, ...] = tuple(outputs)

    @classmethod
    def _assemble(
        cls,
        op: str,
        schema: Any,
        inputs: list[Value | None],
        attrs: dict[str, Any],
        outputs: list[Value],
        name: str,
        provenance: Provenance | None,
    ) -> Node:
        """A node from parts a reader has already typed (the text parser's fast path): inputs
        are Values or None and ``attrs`` are ``schema``'s normalized attributes (this node's own
        dict). The input and output counts and the outputs' producers are checked as in
        ``__init__``; only the per-item type checks and attribute normalization are skipped."""
        self = cls.__new__(cls)
        self.op, self.name = op, name
        self.provenance = provenance or _NO_PROVENANCE
        schema.check_inputs(inputs, where=self._where)
        self.attrs = attrs
        schema.check_output_count(len(outputs), attrs, where=self._where)
        for i, v in enumerate(inputs):
            if v is not None:
                v._link((self, i))
        self._inputs = tuple(inputs)
        for i, v in enumerate(outputs):
            if v.producer is not None:
                raise GraphError(f"{self._where()}: output {v.name!r} already has a producer")
            v.producer, v.index = self, i
        self.outputs = tuple(outputs)
        return self

    def _where(self) -> str:
        return f"node {self.name!r} ({self.op})" if self.name else f"node ({self.op})"

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return self._inputs

    @inputs.setter
    def inputs(self, new: Iterable[Value | None]) -> None:
        new = tuple(new)
        for i, v in enumerate(self._inputs):
            if v is not None:
                v._unlink((self, i))
        for i, v in enumerate(new):
            if v is not None:
                if not isinstance(v, Value):
                    raise TypeError(
                        f"{self._where()}: input {i} is {type(v).__name__}, not a Value"
                    )
                v._link((self, i))
        self._inputs = new

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise GraphError(f"{self._where()} has {len(self.outputs)} outputs, not one")
        return self.outputs[0]

    def subgraphs(self) -> Iterator[Graph]:
        for v in self.attrs.values():
            if isinstance(v, Graph):
                yield v

    def __repr__(self) -> str:
        outs = ", ".join(f"%{v.name}" for v in self.outputs)
        ins = ", ".join("_" if v is None else f"%{v.name}" for v in self.inputs)
        return f"<Node {outs} = {self.op}({ins})>"


class Graph:
    """Inputs, outputs, nodes in topological order, weights, metadata.

    ``output_tree`` is the structure the source returns its outputs in (tuples, lists, dicts,
    constants around the flat ``outputs``; see msc.ir.structure), or None: one output returned
    bare, several as a tuple.
    """

    __slots__ = (
        "name",
        "inputs",
        "outputs",
        "_output_tree",
        "nodes",
        "weights",
        "meta",
        "_opset",
        "_counter",
        "_taken",
    )

    def __init__(self, name: str = "", opset: OpSet | None = None) -> None:
        self.name = name
        self._opset = opset
        self._output_tree: Any = None
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.weights: dict[str, Weight] = {}
        self.meta: dict[str, Any] = {}
        self._counter = 0
        self._taken: set[str] = set()

    @property
    def output_tree(self) -> Any:
        return self._output_tree

    @output_tree.setter
    def output_tree(self, tree: Any) -> None:
        from msc.ir import structure

        if tree is not None:
            structure.check(tree)
        self._output_tree = tree

    @property
    def opset(self) -> OpSet:
        """The op set this graph's nodes are checked against (the canonical one by default)."""
        return self._opset or default_opset()

    # ---------------------------------------------------------------- building
    def _claim(self, v: Value) -> None:
        if v.name is None:
            while str(self._counter) in self._taken:
                self._counter += 1
            v.name = str(self._counter)
            self._counter += 1
        elif v.name in self._taken:
            raise GraphError(f"graph {self.name!r}: value name {v.name!r} is used twice")
        self._taken.add(v.name)

    def add_input(self, name: str | None, type: ValueType) -> Value:
        v = Value(name, type)
        self._claim(v)
        self.inputs.append(v)
        return v

    def add_weight(
        self,
        name: str,
        data: WeightData | None = None,
        type: TensorType | None = None,
        *,
        role: str = "",
        aliases: Iterable[str] = (),
    ) -> Weight:
        if name in self.weights:
            raise GraphError(f"graph {self.name!r}: weight {name!r} is declared twice")
        w = Weight(name, type, data, role=role, aliases=aliases)
        self.weights[name] = w
        return w

    def add_node(
        self,
        node_or_op: Node | str,
        inputs: Sequence[Value | None] = (),
        attrs: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> Node:
        if isinstance(node_or_op, Node):
            node = node_or_op
        else:
            kw.setdefault("opset", self._opset)
            node = Node(node_or_op, inputs, attrs, **kw)
        for v in node.outputs:
            self._claim(v)
        self.nodes.append(node)
        return node

    def op(self, op: str, *inputs: Value | None, **attrs: Any) -> Value:
        """Add a single-output node and return its output: ``y = g.op("relu", x)``."""
        return self.add_node(op, inputs, attrs).output

    def set_outputs(self, values: Iterable[Value]) -> None:
        self.outputs = list(values)

    def remove_node(self, node: Node) -> None:
        self.remove_nodes([node])

    def remove_nodes(self, nodes: Iterable[Node]) -> None:
        """Remove ``nodes`` (none of whose outputs may still be used or be graph outputs) in
        one pass over the node list."""
        drop = {id(n): n for n in nodes}
        outputs = {id(v) for v in self.outputs}
        for node in drop.values():
            for v in node.outputs:
                if any(id(u) not in drop for u, _ in v.uses) or id(v) in outputs:
                    raise GraphError(
                        f"cannot remove {node._where()}: output {v.name!r} is still used"
                    )
        for node in drop.values():
            node.inputs = ()
            for v in node.outputs:
                self._taken.discard(v.name)  # type: ignore[arg-type]
        self.nodes = [n for n in self.nodes if id(n) not in drop]

    # ---------------------------------------------------------------- queries
    def values(self) -> Iterator[Value]:
        """Every value defined in this graph (inputs, then node outputs), not weights."""
        yield from self.inputs
        for n in self.nodes:
            yield from n.outputs

    def __repr__(self) -> str:
        return (
            f"<Graph {self.name!r}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
            f"{len(self.weights)} weights, {len(self.outputs)} outputs>"
        )

    def __str__(self) -> str:
        return _printer(self) if _printer is not None else repr(self)

    def validate(self) -> Graph:
        """Check the graph; raise GraphError naming the node and value at fault. Returns self."""
        from msc.ir.bulk import paused
        from msc.ir.validate import validate

        with paused():
            validate(self)
        return self

    def sort(self) -> None:
        """Put nodes in a topological order (stable: keeps the current order where it can)."""
        from msc.ir.validate import topological_order

        self.nodes = topological_order(self)

    def to_networkx(self):
        """A networkx.MultiDiGraph: one vertex per node (by position), graph input and weight."""
        from msc.ir.nx import to_networkx

        return to_networkx(self)


# ``str(graph)`` prints the text format; msc.text installs its printer when imported, so the
# core does not import the layer above it.
_printer: Callable[[Graph], str] | None = None


def set_printer(printer: Callable[[Graph], str]) -> None:
    global _printer
    _printer = printer


def dead_nodes(graph: Graph, keep: set[int] = frozenset()) -> list[Node]:  # type: ignore[assignment]
    """The nodes nothing needs: no output is a graph output, in ``keep`` (value ids), or used
    by a node that is needed. One reverse pass over the (topologically ordered) nodes."""
    keep = set(keep) | {id(v) for v in graph.outputs}
    dead: set[int] = set()
    out: list[Node] = []
    for node in reversed(graph.nodes):
        if any(id(v) in keep or any(id(u) not in dead for u, _ in v.uses) for v in node.outputs):
            continue
        dead.add(id(node))
        out.append(node)
    return out
