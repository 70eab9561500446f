"""A networkx view of a graph, for analysis (paths, dominators, components)."""

from __future__ import annotations

import networkx as nx

from msc.ir.graph import Graph

__all__ = ["to_networkx"]


def to_networkx(graph: Graph) -> nx.MultiDiGraph:
    """Vertices: ``("input", name)``, ``("weight", name)``, ``("node", position)``,
    ``("output", position)``. Edges carry ``value`` (its name) and ``port`` (input position)."""
    g = nx.MultiDiGraph(name=graph.name)
    source: dict[int, tuple] = {}
    for v in graph.inputs:
        key = ("input", v.name)
        g.add_node(key, kind="input", type=v.type)
        source[id(v)] = key
    for w in graph.weights.values():
        key = ("weight", w.name)
        g.add_node(key, kind="weight", type=w.type)
        source[id(w)] = key
    for i, n in enumerate(graph.nodes):
        key = ("node", i)
        g.add_node(key, kind="node", op=n.op, name=n.name, module=n.provenance.module)
        for port, v in enumerate(n.inputs):
            if v is not None and id(v) in source:
                g.add_edge(source[id(v)], key, value=v.name, port=port)
        for v in n.outputs:
            source[id(v)] = key
    for i, v in enumerate(graph.outputs):
        key = ("output", i)
        g.add_node(key, kind="output", type=v.type)
        if id(v) in source:
            g.add_edge(source[id(v)], key, value=v.name, port=0)
    return g
