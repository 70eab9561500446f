"""The source's module hierarchy as a partition of a graph into blocks, for any codegen.

    part = blocks.partition(graph)
    for b in part.top:                  # the outermost blocks, in graph order
        b.path, b.name, b.nodes, b.inputs, b.outputs, b.children
    part.same(a, b)                     # the same computation up to their weights

# NOTE: invariants
# - A block is a module path ``P`` from node provenance (``Provenance.module``: torch.export's
#   nn_module_stack, torch.onnx's scope names) whose nodes (each top-level node's module, a
#   constant's where all its users are, a node with no module where its producers and users
#   are) form one contiguous run of ``graph.nodes`` between its first and last non-constant
#   node (a constant inside the run is the block's whoever's it is; its own constants just
#   before the run join it), with at least ``min_ops`` non-constant nodes. A container (a
#   Sequential, ModuleList or ModuleDict by the stack's type, or a path with numbered children
#   when the source names no type) is not a block: its items are. Anything else stays inline
#   in its parent: falling back is always right, a wrong call never is.
# - ``inputs`` are the values a block's nodes (and their subgraphs) read that it does not define,
#   weights included, in the order first read; ``outputs`` the values it defines that a node
#   outside it reads or the graph returns, in the order defined. Emitting a block's nodes in
#   place of one call at its first node keeps the graph's topological order.
# - ``key``: blocks with equal keys are the same computation up to their weights: their
#   subgraphs, every read value (weights too) an input, are ``structural_equal`` with weights
#   compared by type (same ops, attributes, wiring and types, symbols up to renaming). A block
#   with control flow (a subgraph attribute) has a key of its own.
# - Only provenance, types and wiring are read; the graph is not changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from msc.ir.equal import structural_equal, structural_hash
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.symexpr import symbols
from msc.ir.types import SymDim, TensorType
from msc.ir.validate import _all_inputs

__all__ = [
    "Block",
    "Partition",
    "partition",
    "owners",
    "module_types",
    "module_paths",
    "nest",
    "closed",
    "CONTAINERS",
]

# Source module types that only hold others: their items are the blocks.
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})


@dataclass(eq=False)
class Block:
    path: str
    type_name: str  # the source's module type ("" when the provenance does not say)
    nodes: list[Node]
    parent: Block | None = None
    children: list[Block] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    key: str = ""
    start: int = 0  # the position of its first node in ``graph.nodes``

    @property
    def name(self) -> str:
        """The source type, else the module path without its indices in CamelCase
        (``encoder.layer.3.attention`` -> ``EncoderLayerAttention``); not sanitized."""
        if self.type_name:
            return self.type_name
        parts = [p for p in re.split(r"[._]", self.path) if p and not p.isdigit()]
        return "".join(p[:1].upper() + p[1:] for p in parts) or "Block"

    def weights(self) -> list[Weight]:
        return [v for v in self.inputs if isinstance(v, Weight)]


@dataclass
class Partition:
    top: list[Block]
    blocks: list[Block]  # every block, parents before children
    innermost: dict[Node, Block]

    def same(self, a: Block, b: Block) -> bool:
        """Whether ``a`` and ``b`` are the same computation up to their weights."""
        return a.key == b.key

    def groups(self) -> dict[str, list[Block]]:
        """The blocks by key, in first-block order."""
        out: dict[str, list[Block]] = {}
        for b in self.blocks:
            out.setdefault(b.key, []).append(b)
        return out


def _common(paths: list[str]) -> str:
    split = [p.split(".") if p else [] for p in paths]
    out: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        out.append(parts[0])
    return ".".join(out)


def owners(graph: Graph) -> dict[Node, str]:
    """The module path of each top-level node: its provenance's; a constant's is the common
    prefix of its users'; a node with none (a frontend or a rewrite made it) the common prefix
    of its producers' and users'."""
    owner = {n: n.provenance.module for n in graph.nodes}
    for n in reversed(graph.nodes):
        if n.op != "constant":
            continue
        users = {owner.get(u, u.provenance.module) for v in n.outputs for u, _ in v.uses}
        if users:
            owner[n] = _common(list(users))
    for n in graph.nodes:
        if n.op == "constant" or n.provenance.module or n.provenance.stack:
            continue
        users = [owner.get(u, u.provenance.module) for v in n.outputs for u, _ in v.uses]
        made = [owner[v.producer] for v in n.inputs if v is not None and v.producer in owner]
        if users and made:
            owner[n] = _common(users + made)
    return owner


def module_paths(owner: dict[Node, str]) -> set[str]:
    """Every module path the owners name, with all its prefixes (``a.b.c``: a, a.b, a.b.c)."""
    paths: set[str] = set()
    for m in set(owner.values()):
        parts = m.split(".") if m else []
        for k in range(1, len(parts) + 1):
            paths.add(".".join(parts[:k]))
    return paths


def nest(found: dict) -> list:
    """Link blocks keyed by module path (in parents-first order) into a tree: each block's
    ``parent`` is the nearest found prefix of its path, and it joins that parent's ``children``
    or, with none, the returned top level."""
    top = []
    for path, b in found.items():
        parts = path.split(".")
        parent = None
        for k in range(len(parts) - 1, 0, -1):
            parent = found.get(".".join(parts[:k]))
            if parent is not None:
                break
        b.parent = parent
        (parent.children if parent is not None else top).append(b)
    return top


def _under(module: str, path: str) -> bool:
    return module == path or module.startswith(path + ".")


def module_types(graph: Graph) -> dict[str, str]:
    """Module path -> its type name, as the nodes' provenance stacks say (the first seen)."""
    types: dict[str, str] = {}
    for n in graph.nodes:
        for path, t in n.provenance.stack:
            types.setdefault(path, t)
    return types


def partition(graph: Graph, *, min_ops: int = 2) -> Partition:
    """The blocks of ``graph``'s top level (see the module NOTE)."""
    owner = owners(graph)
    types = module_types(graph)
    index = {n: i for i, n in enumerate(graph.nodes)}
    paths = module_paths(owner)
    listed = {p.rpartition(".")[0] for p in paths if p.rpartition(".")[2].isdigit()}
    found: dict[str, Block] = {}
    for path in sorted(paths, key=lambda p: (p.count("."), p)):
        t = types.get(path, "")
        if t in CONTAINERS or (not t and path in listed):
            continue
        inside = [
            i for n, i in index.items()
            if n.op != "constant" and _under(owner[n], path)
        ]  # fmt: skip
        if len(inside) < min_ops:
            continue
        first = inside[0]
        while (
            first > 0
            and _under(owner[graph.nodes[first - 1]], path)
            and (graph.nodes[first - 1].op == "constant")
        ):  # its own constants just before it
            first -= 1
        nodes = graph.nodes[first : inside[-1] + 1]
        if len(nodes) - len(inside) != sum(n.op == "constant" for n in nodes):
            continue  # not contiguous (a constant inside the run may be anyone's)
        found[path] = Block(path, t, nodes, start=first)
    blocks = list(found.values())
    top = nest(found)
    for b in blocks:
        b.children.sort(key=lambda c: c.start)
    top.sort(key=lambda c: c.start)
    returned = set(graph.outputs)
    innermost: dict[Node, Block] = {}
    for b in blocks:  # deeper blocks later: they win
        for n in b.nodes:
            innermost[n] = b
        _boundary(b, returned)
        b.key = _key(b)
    return Partition(top, blocks, innermost)


def _boundary(b: Block, returned: set[Value]) -> None:
    mine = set(b.nodes)
    defined = {v for n in b.nodes for v in n.outputs}
    reads: dict[Value, None] = {}
    for n in b.nodes:
        for v in _all_inputs(n):
            if v not in defined:
                reads.setdefault(v, None)
    b.inputs = list(reads)
    b.outputs = [
        v for n in b.nodes for v in n.outputs
        if v in returned or any(u not in mine for u, _ in v.uses)
    ]  # fmt: skip


def _key(b: Block) -> str:
    """Equal for blocks that are the same computation up to their weights (see the NOTE)."""
    if any(True for n in b.nodes for _ in n.subgraphs()):
        return f"control:{id(b)}"
    return "graph:" + structural_hash(subgraph(b), weights="types")


def subgraph(b: Block) -> Graph:
    """The block's nodes as a graph of their own: every value the block reads (weights
    too) an input, in the order first read; its outputs the block's. Node attributes are
    shared with the graph's, not copied."""
    g = Graph(b.path)
    env: dict[Value, Value] = {v: g.add_input(None, v.type) for v in b.inputs}
    for n in b.nodes:
        ins = [None if v is None else env[v] for v in n.inputs]
        new = g.add_node(n.op, ins, n.attrs, output_types=[o.type for o in n.outputs])
        env.update(zip(n.outputs, new.outputs))
    g.set_outputs([env[v] for v in b.outputs])
    return g


def same_computation(a: Block, b: Block) -> bool:
    """Whether ``a`` and ``b`` are the same computation up to their weights, compared (not
    hashed): the check behind ``key``."""
    if a.key.startswith("control:") or b.key.startswith("control:"):
        return a is b
    return bool(structural_equal(subgraph(a), subgraph(b), weights="types"))


def closed(b: Block) -> bool:
    """Whether every symbol of the block's types is a dim of its inputs' shapes (none an
    expression there): a function of the block can read its sizes from its arguments."""
    bare: set[str] = set()
    for v in b.inputs:
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            continue
        for d in v.type.shape:
            if isinstance(d, SymDim):
                bare.add(d.name)
            elif d is not None and not isinstance(d, int):
                return False
    for n in b.nodes:
        for o in n.outputs:
            t = o.type
            if not isinstance(t, TensorType) or t.shape is None:
                continue
            for d in t.shape:
                if d is not None and not isinstance(d, int):
                    if any(s.name not in bare for s in symbols(d)):
                        return False
    return True
