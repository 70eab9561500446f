"""Pattern rewriting: find subgraphs and replace them (``msc.rewrite(graph, patterns)``).

A pattern is a small source graph, or a matcher function, with a replacement::

    src = Builder()                       # the pattern: y = add(matmul(x, w), b)
    x, w, b = (Value(n, TensorType(DType.FLOAT32, None)) for n in "xwb")
    y = src.op("add", src.op("matmul", x, w), b)
    p = Pattern("matmul_add", [x, w, b], [y],
                replace=lambda b, m: b.op("linear", m["x"], ..., m["b"]))
    g2 = msc.rewrite(g, [p])

# NOTE: invariants
# - A pattern's inputs are wildcards: each binds one graph value, the same one wherever it is
#   used. A pattern ``constant`` node matches a constant (a ``constant`` node or a weight) of the
#   same value. Every other pattern node matches a node of the same op, output index, attributes
#   (all of them, as normalized by the schema) and inputs; ``add``, ``mul`` and the other
#   commutative binary ops also match with their two inputs swapped.
# - A match is taken only when every matched node but the root (the node producing the
#   pattern's outputs) is used by matched nodes alone: an intermediate value that escapes
#   (another consumer, a graph output) blocks the rewrite, so nothing is computed twice.
# - The replacement's outputs take the root's output names and types (dtype must agree, else
#   it is an error in the pattern); its nodes take the root's name and provenance and go where
#   the root was, so the node list stays in topological order (a match may name another of
#   its nodes, ``Match.anchor``, whose name and provenance they take instead).
# - ``rewrite`` never changes its input graph (weights are shared, not copied) and returns a
#   validated graph. Pure msc: no torch, no onnx.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msc.ir.builder import Builder
from msc.ir.graph import Graph, GraphError, Node, Value, Weight
from msc.ir.types import TensorType

__all__ = ["Match", "Pattern", "rewrite", "copy_graph", "constant_value", "node_of", "COMMUTATIVE"]

# Binary ops whose two inputs may be swapped without changing the result.
COMMUTATIVE = frozenset(
    "add mul maximum minimum eq ne logical_and logical_or logical_xor "
    "bitwise_and bitwise_or bitwise_xor".split()
)

Replacement = Callable[[Builder, "Match"], "Value | Sequence[Value] | None"]


def constant_value(v: Value | None) -> np.ndarray | None:
    """The value of ``v`` when it is a constant (a ``constant`` node's or a weight's), else None."""
    if v is None:
        return None
    if isinstance(v, Weight):
        return v.numpy() if v.has_data else None
    p = v.producer
    if p is not None and p.op == "constant":
        return np.asarray(p.attrs["value"])
    return None


@dataclass
class Match:
    """One occurrence of a pattern: the root node, every matched node, and what each pattern
    input (wildcard) bound, by the pattern input's name."""

    root: Node
    nodes: list[Node]
    values: dict[str, Value] = field(default_factory=dict)
    graph: Graph | None = None
    # ``constant`` nodes the pattern's constants matched: removed with the match when nothing
    # else uses them, but a constant shared with the rest of the graph does not block it.
    constants: list[Node] = field(default_factory=list)
    # What a matcher function found besides values (an epsilon, an axis), for the replacement.
    info: dict[str, Any] = field(default_factory=dict)
    # The matched node whose name and provenance the replacement's nodes take (None: the
    # root's): a conv that absorbed the BatchNorm after it is still that conv.
    anchor: Node | None = None

    def __getitem__(self, name: str) -> Value:
        return self.values[name]

    def const(self, name: str) -> np.ndarray | None:
        """The constant value a wildcard bound, or None when it is computed at run time."""
        return constant_value(self.values.get(name))

    def scalar(self, name: str) -> float | None:
        """A one-element constant as a Python float, else None."""
        c = self.const(name)
        if c is None or c.size != 1:
            return None
        return float(c.reshape(-1)[0])


class Pattern:
    """A subgraph to find and what to put in its place.

    Args:
        name: for error messages.
        inputs: the pattern's wildcards (Values with no producer; their names are the keys of
            ``Match.values``). Their types constrain what they bind: the dtype unless
            ``any_dtype``, the rank and static dims when the shape is given.
        outputs: values produced by one pattern node, the root.
        replace: a function ``(builder, match) -> value(s)`` building the replacement (or None
            to decline this match), or a Graph whose inputs are named like wildcards and
            whose outputs replace the pattern's, in order.
        matcher: instead of inputs/outputs, a function ``(node) -> Match | None`` that finds
            the pattern rooted at ``node`` itself.
        check: an extra condition on a match (constant values, shapes); False declines it.
        any_dtype: wildcards bind values of any dtype, constants compare by value alone.
    """

    def __init__(
        self,
        name: str,
        inputs: Sequence[Value] = (),
        outputs: Sequence[Value] = (),
        *,
        replace: Replacement | Graph,
        matcher: Callable[[Node], Match | None] | None = None,
        check: Callable[[Match], bool] | None = None,
        any_dtype: bool = False,
    ) -> None:
        self.name = name
        self.replace = replace
        self.matcher = matcher
        self.check = check
        self.any_dtype = any_dtype
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        if matcher is None:
            if not self.outputs:
                raise GraphError(f"pattern {name!r}: give outputs (or a matcher)")
            roots = {id(v.producer) for v in self.outputs}
            if None in {v.producer for v in self.outputs} or len(roots) != 1:
                raise GraphError(f"pattern {name!r}: its outputs must come from one node")
            self.root: Node | None = self.outputs[0].producer
            for v in self.inputs:
                if v.producer is not None:
                    raise GraphError(f"pattern {name!r}: input {v.name!r} has a producer")
        else:
            self.root = None

    @classmethod
    def from_graph(cls, name: str, source: Graph, **kw: Any) -> Pattern:
        """A pattern written as a Graph (built in code or parsed from the text format)."""
        return cls(name, source.inputs, source.outputs, **kw)

    # ------------------------------------------------------------------ matching
    def match(self, node: Node, graph: Graph | None = None) -> Match | None:
        """The match rooted at ``node`` (before the uses rule), or None."""
        if self.matcher is not None:
            m = self.matcher(node)
        else:
            assert self.root is not None
            if node.op != self.root.op or len(node.outputs) != len(self.root.outputs):
                return None
            state = _State({}, {}, {})
            if not self._node(self.root, node, state):
                return None
            names = {id(v): v.name for v in self.inputs}
            m = Match(
                node,
                list(state.nodes.values()),
                {names[k]: gv for k, gv in state.binds.items() if k in names},
                constants=list(state.consts.values()),
            )
        if m is None:
            return None
        m.graph = graph
        if self.check is not None and not self.check(m):
            return None
        return m

    def _node(self, pn: Node, gn: Node, st: _State) -> bool:
        if pn.op != gn.op or len(pn.outputs) != len(gn.outputs):
            return False
        if len(pn.inputs) != len(gn.inputs) or set(pn.attrs) != set(gn.attrs):
            return False
        if any(not _attr_eq(pn.attrs[k], gn.attrs[k]) for k in pn.attrs):
            return False
        st.nodes[id(pn)] = gn
        orders = [list(zip(pn.inputs, gn.inputs))]
        if pn.op in COMMUTATIVE and len(pn.inputs) == 2:
            orders.append(list(zip(pn.inputs, reversed(gn.inputs))))
        for order in orders:
            trial = st.copy()
            if all(self._value(p, g, trial) for p, g in order):
                st.binds, st.nodes, st.consts = trial.binds, trial.nodes, trial.consts
                return True
        del st.nodes[id(pn)]
        return False

    def _value(self, pv: Value | None, gv: Value | None, st: _State) -> bool:
        if pv is None or gv is None:
            return pv is None and gv is None
        if id(pv) in st.binds:
            return st.binds[id(pv)] is gv
        p = pv.producer
        if p is None:  # a wildcard
            if not self._type_fits(pv.type, gv.type):
                return False
            st.binds[id(pv)] = gv
            return True
        if p.op == "constant":
            want, got = np.asarray(p.attrs["value"]), constant_value(gv)
            if got is None or want.size != got.size:
                return False
            if not self.any_dtype and want.dtype != got.dtype:
                return False
            w64, g64 = want.astype(np.float64).ravel(), got.astype(np.float64).ravel()
            if not np.allclose(w64, g64, rtol=1e-6, atol=0):
                return False
            st.binds[id(pv)] = gv
            if gv.producer is not None:
                st.consts[id(gv.producer)] = gv.producer
            return True
        g = gv.producer
        if g is None or gv.index != pv.index:
            return False
        if id(p) in st.nodes:
            return st.nodes[id(p)] is g
        if not self._node(p, g, st):
            return False
        st.binds[id(pv)] = gv
        return True

    def _type_fits(self, want: TensorType, got: TensorType) -> bool:
        if not self.any_dtype and want.dtype is not got.dtype:
            return False
        if want.shape is None:
            return True
        if got.shape is None or len(got.shape) != len(want.shape):
            return False
        return all(not isinstance(w, int) or w == g for w, g in zip(want.shape, got.shape))


@dataclass
class _State:
    binds: dict[int, Value]  # id(pattern value) -> graph value
    nodes: dict[int, Node]  # id(pattern node) -> graph node
    consts: dict[int, Node]  # graph constant nodes matched by pattern constants

    def copy(self) -> _State:
        return _State(dict(self.binds), dict(self.nodes), dict(self.consts))


def _attr_eq(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b))
        )
    if isinstance(a, Graph) or isinstance(b, Graph):
        return a is b
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------- the pass
def rewrite(
    graph: Graph,
    patterns: Iterable[Pattern],
    *,
    max_rounds: int = 8,
) -> Graph:
    """A new graph with every occurrence of each pattern replaced.

    Patterns are tried in the order given, each over the whole graph; rounds repeat until a
    round rewrites nothing (a replacement may complete another pattern), at most
    ``max_rounds`` times.

    Args:
        graph: the source graph (left unchanged; weights are shared).
        patterns: the patterns, in priority order.
        max_rounds: bound on the rounds.

    Returns:
        The rewritten graph, validated.

    Raises:
        GraphError: a replacement's outputs disagree with the pattern's (count or dtype).
    """
    patterns = list(patterns)
    out = copy_graph(graph)
    for _ in range(max_rounds):
        changed = False
        for p in patterns:
            changed |= _apply(out, p)
        if not changed:
            break
    # Weights the rewrites left unused go (a weight the source did not use stays; one a
    # rewrite replaced under another name is gone already).
    used = {name for name, w in graph.weights.items() if w.uses or w in graph.outputs}
    for name in used:
        w = out.weights.get(name)
        if w is not None and not w.uses and w not in out.outputs:
            del out.weights[name]
    return out.validate()


def _apply(g: Graph, p: Pattern) -> bool:
    changed = False
    gone: set[int] = set()
    for node in list(g.nodes):
        if id(node) in gone:
            continue
        m = p.match(node, g)
        if m is None:
            continue
        if m.root not in m.nodes:
            m.nodes.append(m.root)
        if not _contained(m, {id(v) for v in g.outputs}):
            continue
        if _replace(g, p, m):
            gone.update(id(n) for n in m.nodes)
            changed = True
    return changed


def _contained(m: Match, graph_outputs: set[int]) -> bool:
    """No value computed inside the match (but the root's outputs) is used outside it, and no
    wildcard binds a value computed inside it."""
    inside = {id(n) for n in m.nodes}
    for n in m.nodes:
        if n is m.root:
            continue
        for v in n.outputs:
            if id(v) in graph_outputs or any(id(u) not in inside for u, _ in v.uses):
                return False
    return all(v.producer is None or id(v.producer) not in inside for v in m.values.values())


def _discard(b: Builder) -> None:
    for n in b.nodes:
        n.inputs = ()


def _replace(g: Graph, p: Pattern, m: Match) -> bool:
    root = m.root
    olds = (
        list(root.outputs) if p.matcher is not None else [root.outputs[v.index] for v in p.outputs]
    )
    replaced = {id(v) for v in olds}
    if any(v.uses or v in g.outputs for v in root.outputs if id(v) not in replaced):
        return False  # a root output the pattern does not stand for is still needed
    who = m.anchor or root
    b = Builder(who.name, who.provenance, g._opset)  # noqa: SLF001 - the graph's own op set
    if isinstance(p.replace, Graph):
        new = _instantiate(b, p.replace, m)
    else:
        new = p.replace(b, m)
        if new is None:
            _discard(b)
            return False
    new = [new] if isinstance(new, Value) else list(new)
    if len(new) != len(olds):
        _discard(b)
        raise GraphError(
            f"pattern {p.name!r}: replacement gives {len(new)} outputs for {len(olds)}"
        )
    for old, v in zip(olds, new):
        if old.type.dtype is not v.type.dtype:
            _discard(b)
            raise GraphError(
                f"pattern {p.name!r}: replacement of {old.name!r} is {v.type}, was {old.type}"
            )
    names = [v.name for v in olds]
    fresh = {id(v) for n in b.nodes for v in n.outputs}
    extra: list[Node] = []
    for old, v in zip(olds, new):
        if old in g.outputs and id(v) not in fresh:  # a graph output keeps its name
            ident = Node(
                "identity",
                [v],
                name=root.name,
                provenance=root.provenance,
                opset=g._opset,  # noqa: SLF001
            )
            extra.append(ident)
            fresh.add(id(ident.output))
            v = ident.output
            new[names.index(old.name)] = v
        old.replace_all_uses_with(v)
        g.outputs = [v if o is old else o for o in g.outputs]
    added = b.nodes + extra
    at = g.nodes.index(root)
    g.nodes[at:at] = added
    # Drop the matched nodes nothing uses any more (consumers first).
    pos = {id(n): i for i, n in enumerate(g.nodes)}
    drop: set[int] = set()
    outs = {id(v) for v in g.outputs}
    candidates = {id(n): n for n in [*m.nodes, *m.constants] if id(n) in pos}
    for n in sorted(candidates.values(), key=lambda n: -pos[id(n)]):
        if all(id(v) not in outs and all(id(u) in drop for u, _ in v.uses) for v in n.outputs):
            drop.add(id(n))
    g.remove_nodes([n for n in candidates.values() if id(n) in drop])
    for name, v in zip(names, new):
        if id(v) in fresh and v.name is None and name not in g._taken:  # noqa: SLF001
            v.name = name
    # Names join the graph's namespace: the kept ones first, so a by-position name given to
    # a new value cannot take the name a replaced output keeps (``%2``).
    made = [v for n in added for v in n.outputs]
    for v in sorted(made, key=lambda v: v.name is None):
        g._claim(v)  # noqa: SLF001
    return True


def _instantiate(b: Builder, rep: Graph, m: Match) -> list[Value]:
    env: dict[int, Value] = {}
    for v in rep.inputs:
        if v.name not in m.values:
            raise GraphError(f"replacement input {v.name!r} is not a pattern input")
        env[id(v)] = m.values[v.name]
    for w in rep.weights.values():
        raise GraphError(f"replacement graph holds weight {w.name!r}; use a function")
    for n in rep.nodes:
        ins = [None if v is None else env[id(v)] for v in n.inputs]
        new = b.add(n.op, ins, n.attrs)
        env.update({id(o): v for o, v in zip(n.outputs, new.outputs)})
    return [env[id(v)] for v in rep.outputs]


def copy_graph(graph: Graph) -> Graph:
    """A copy of ``graph``: new inputs, nodes and values (subgraphs too); weights share their
    data."""
    out = Graph(graph.name, graph._opset)  # noqa: SLF001
    out.meta = dict(graph.meta)
    env: dict[int, Value] = {}
    for w in graph.weights.values():
        env[id(w)] = out.add_weight(w.name, w.storage, w.type, role=w.role, aliases=w.aliases)
    _copy_into(graph, out, env)
    out.output_tree = graph.output_tree
    return out


def _copy_into(src: Graph, out: Graph, env: dict[int, Value]) -> None:
    for v in src.inputs:
        env[id(v)] = out.add_input(v.name, v.type)
    for n in src.nodes:
        attrs = dict(n.attrs)
        for k, a in attrs.items():
            if isinstance(a, Graph):
                sub = Graph(a.name, a._opset)  # noqa: SLF001
                sub.meta = dict(a.meta)
                _copy_into(a, sub, env)
                attrs[k] = sub
        ins = [None if v is None else env.get(id(v), v) for v in n.inputs]
        new = Node(
            n.op,
            ins,
            attrs,
            name=n.name,
            provenance=n.provenance,
            output_types=[o.type for o in n.outputs],
            output_names=[o.name for o in n.outputs],
            opset=src._opset,  # noqa: SLF001
        )
        out.add_node(new)
        env.update({id(o): c for o, c in zip(n.outputs, new.outputs)})
    out.set_outputs([env.get(id(v), v) for v in src.outputs])


def node_of(v: Value | None, op: str) -> Node | None:
    """The producer of ``v`` when it is an ``op`` node, else None (for matcher functions)."""
    if v is None or v.producer is None or v.producer.op != op:
        return None
    return v.producer
