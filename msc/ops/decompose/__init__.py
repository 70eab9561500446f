"""Decompositions: graph-level rewrites of high-level ops into simpler canonical ops.

A decomposition is a function registered for one canonical op. It receives a ``Builder`` and
the node's inputs and attributes (its signature mirrors the op's schema) and returns the
values that replace the node's outputs, built from simpler canonical ops::

    @decomposition("silu")
    def silu(b, x):
        return b.op("mul", x, b.op("sigmoid", x))

A codegen whose target lacks an op lowers it through ``registry.expand(node, inputs)``;
``decompose(graph, ops)`` rewrites a whole graph into a new one.

# NOTE: invariants
# - Pure msc: no torch, no onnx imports (lint enforces it). Rules build canonical nodes only.
# - A rule never mutates the node it lowers nor the graph it came from; it returns new Values.
# - A rule that cannot lower a particular node (a dynamic dim it needs, an attribute value it
#   cannot express) raises ``NotDecomposable`` with the reason; callers report it.
# - Nodes a rule builds carry the original node's provenance; their names derive from the
#   original node's name (``<name>/<op>_<k>``), so they stay traceable.
# - Registering a decomposition for an op twice is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msc.ir.builder import Builder as CoreBuilder
from msc.ir.graph import Graph, Node, Value
from msc.ir.registry import Registry

__all__ = [
    "Builder",
    "Decomposition",
    "DecompositionRegistry",
    "NotDecomposable",
    "registry",
    "decomposition",
    "decompose",
]


class NotDecomposable(ValueError):
    """A rule cannot lower this particular node (the message says why)."""


@dataclass(frozen=True, slots=True)
class Decomposition:
    op: str
    fn: Callable[..., Any]
    doc: str = ""


class Builder(CoreBuilder):
    """Collects the canonical nodes a rule builds (the core Builder, naming each node and value
    ``<base>/<op>_<k>`` after the node being lowered, with its provenance).

    Args:
        node: the node being lowered (for names and provenance), or None.
        prefix: base of generated node and value names.
    """

    def __init__(self, node: Node | None = None, prefix: str | None = None) -> None:
        super().__init__(provenance=node.provenance if node is not None else None)
        self.node = node
        base = prefix if prefix is not None else (node.name if node is not None else "")
        if not base and node is not None and node.outputs and node.outputs[0].name:
            base = node.outputs[0].name
        self._base = base or "decomposed"
        self._k = 0

    def add(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: Mapping[str, Any] | None = None,
        output_names: Sequence[str | None] | None = None,
    ) -> Node:
        self._k += 1
        self._name = tag = f"{self._base}/{op}_{self._k}"
        if output_names is None:
            from msc.ops import registry as ops

            schema = ops.get(op)
            n_out = schema.num_outputs(schema.normalize_attrs(attrs or {}))
            output_names = [tag] if n_out == 1 else [f"{tag}.{i}" for i in range(n_out)]
        return super().add(op, inputs, attrs, output_names)

    def scalar(self, value: float | int | bool, like: Value) -> Value:
        """A 0-d constant of ``like``'s dtype."""
        return self.const(value, like.dtype)


class DecompositionRegistry:
    """Decompositions by canonical op; registering an op twice is an error."""

    def __init__(self) -> None:
        self._rules: Registry[str, Decomposition] = Registry("decomposition")

    def register(self, op: str, fn: Callable[..., Any], doc: str = "") -> None:
        from msc.ops import registry as ops

        if op not in ops:
            raise ValueError(f"decomposition for unknown op {op!r}")
        doc = doc or (fn.__doc__ or "").strip().split("\n")[0]
        self._rules.register(op, Decomposition(op, fn, doc))

    def __call__(self, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: ``@registry("gelu")`` registers the decorated rule for ``gelu``."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(op, fn)
            return fn

        return deco

    def __contains__(self, op: object) -> bool:
        return op in self._rules

    def __iter__(self) -> Iterator[Decomposition]:
        return iter(d for _, d in self._rules.items())

    def __len__(self) -> int:
        return len(self._rules)

    def get(self, op: str) -> Decomposition | None:
        return self._rules.get(op)

    def expand(
        self, node: Node, inputs: Sequence[Value | None] | None = None, *, prefix: str | None = None
    ) -> tuple[list[Node], list[Value]]:
        """Lower ``node`` one level.

        Args:
            node: the node to lower.
            inputs: the values to use in place of ``node.inputs`` (e.g. in another graph);
                defaults to the node's own inputs.
            prefix: base for generated names (default: the node's name or first output name).

        Returns:
            The new nodes in topological order, and the values standing for node.outputs.

        Raises:
            KeyError: no rule for the op.
            NotDecomposable: the rule cannot lower this node.
        """
        rule = self._rules.get(node.op)
        if rule is None:
            raise KeyError(f"no decomposition for {node.op!r}")
        b = Builder(node, prefix)
        ins = list(node.inputs if inputs is None else inputs)
        from msc.ops import registry as ops

        specs = ops.get(node.op).inputs
        if not any(s.variadic for s in specs) and len(ins) < len(specs):
            ins += [None] * (len(specs) - len(ins))
        out = rule.fn(b, *ins, **node.attrs)
        outs = [out] if isinstance(out, Value) else list(out)
        if len(outs) != len(node.outputs):
            raise AssertionError(
                f"decomposition of {node.op} gave {len(outs)} outputs for {len(node.outputs)}"
            )
        for old, new in zip(node.outputs, outs):
            if old.type.dtype is not new.type.dtype:
                raise AssertionError(
                    f"decomposition of {node.op} changed dtype {old.type} -> {new.type}"
                )
        return b.nodes, outs


registry = DecompositionRegistry()
decomposition = registry


def _copy_weight(g: Graph, w: Any) -> Value:
    data = w.storage  # shared: an array, a file region, packed bytes or a loader
    return g.add_weight(w.name, data, type=w.type, role=w.role, aliases=w.aliases)


def decompose(
    graph: Graph,
    ops: Iterable[str] | Callable[[Node], bool] | None = None,
    *,
    rules: DecompositionRegistry | None = None,
    recursive: bool = True,
) -> Graph:
    """A new graph with the chosen ops lowered through their decompositions.

    Args:
        graph: the source graph (left unchanged; weights are shared lazily, not copied).
        ops: op names to lower, or a predicate on nodes; None lowers every op with a rule.
        rules: the registry to use (default: ``msc.ops.decompose.registry``).
        recursive: also lower nodes that a rule produced, when they match.

    Returns:
        The rewritten graph. Output values of a lowered node keep their names.

    Raises:
        NotDecomposable: a matching node cannot be lowered.
    """
    rules = rules or registry
    if ops is None:
        want: Callable[[Node], bool] = lambda n: n.op in rules
    elif callable(ops):
        want = ops
    else:
        names = set(ops)
        want = lambda n: n.op in names and n.op in rules

    out = Graph(graph.name)
    out.meta = dict(graph.meta)
    out.output_tree = graph.output_tree
    vmap: dict[Value, Value] = {}
    for v in graph.inputs:
        vmap[v] = out.add_input(v.name, v.type)
    for w in graph.weights.values():
        vmap[w] = _copy_weight(out, w)

    def lower(node: Node, ins: list[Value | None], names: list[str | None]) -> list[Value]:
        if want(node):
            new_nodes, outs = rules.expand(node, ins)
            inner: dict[Value, Value] = {}
            result_ids = {id(v): i for i, v in enumerate(outs)}
            for n in new_nodes:
                n_ins = [None if v is None else inner.get(v, v) for v in n.inputs]
                n_names = [
                    names[result_ids[id(o)]] if id(o) in result_ids else o.name for o in n.outputs
                ]
                n.inputs = ()  # detach from the scratch values before re-adding
                got = lower(n, n_ins, n_names) if recursive else emit(n, n_ins, n_names)
                inner.update(zip(n.outputs, got))
            final = []
            for i, o in enumerate(outs):
                v = inner.get(o, o)
                if v.name != names[i] and names[i] is not None:
                    v = out.add_node("identity", [v], output_names=[names[i]]).output
                final.append(v)
            return final
        return emit(node, ins, names)

    # Names the rules generate (``<node>/<op>_<k>``) must not take a name the source graph
    # uses (its values keep theirs) or one another rule's output took (several source nodes
    # may share one node name).
    original = {v.name for v in graph.values()} | set(graph.weights)
    taken: set[str | None] = set(original)
    claimed: set[str] = set()

    def fresh(name: str | None) -> str | None:
        if name is None:
            return None
        if name in original and name not in claimed:  # a source value: keeps its name
            claimed.add(name)
            return name
        base, k = name, 1
        while name in taken:
            k += 1
            name = f"{base}~{k}"
        taken.add(name)
        return name

    def emit(node: Node, ins: list[Value | None], names: list[str | None]) -> list[Value]:
        names = [fresh(n) for n in names]
        new = Node(
            node.op,
            ins,
            node.attrs,
            name=node.name,
            provenance=node.provenance,
            output_types=[o.type for o in node.outputs],
            output_names=names,
        )
        out.add_node(new)
        return list(new.outputs)

    for node in graph.nodes:
        ins = [None if v is None else vmap[v] for v in node.inputs]
        got = lower(node, ins, [o.name for o in node.outputs])
        vmap.update(zip(node.outputs, got))
    out.set_outputs([vmap[v] for v in graph.outputs])
    return out.validate()


# Importing the rule families registers them.
from msc.ops.decompose import activation, linalg, nn, quant, recurrent, shape, special  # noqa: E402,F401
