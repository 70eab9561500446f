"""Simplifications: arithmetic that does nothing, removed (``x + 0``, ``x * 1``, ``x / 1``).

Exporters leave such steps behind (torch's attention-mask code adds 0 to an ``arange``); a
codegen that writes them out produces code nobody would write.

# NOTE: invariants
# - A fold fires only where it is exact: the operand is a ``constant`` node (never a weight: a
#   trained bias that happens to be 0 is state) whose every element is the neutral value, the
#   result has x's dtype and shape (no broadcast, no type promotion), and the op returns x bit
#   for bit: ``x * 1``, ``1 * x``, ``x / 1`` and ``x - 0`` for every real dtype; ``x + 0`` for
#   integers and bools, and for floats only with -0.0 (``-0.0 + 0.0`` is +0.0). Complex
#   operands are left alone (``inf * (1+0j)`` has a NaN part).
# - Pure msc: no torch, no onnx.
"""

from __future__ import annotations

import numpy as np

from msc.ir.graph import Graph, Node, Value
from msc.ops.rewrite import Match, Pattern, rewrite

__all__ = ["IDENTITY_ARITHMETIC", "identity_operand", "fold_identities", "FOLD_LIMIT"]

# Elements: a constant computed from constants is folded (by ``msc diff``'s canonical form, by
# the ONNX codegen's optimization pass) only up to this size; a larger one stays computed.
FOLD_LIMIT = 1 << 20

# op -> (neutral value, which operand may be the constant: 0 left, 1 right)
_NEUTRAL: dict[str, tuple[int, tuple[int, ...]]] = {
    "add": (0, (0, 1)),
    "sub": (0, (1,)),
    "mul": (1, (0, 1)),
    "div": (1, (1,)),
}


def identity_operand(node: Node) -> tuple[Value, Node] | None:
    """``(x, constant node)`` when ``node`` computes exactly ``x`` (see the module's NOTE)."""
    rule = _NEUTRAL.get(node.op)
    if rule is None or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    neutral, slots = rule
    out = node.output
    for slot in slots:
        x, c = node.inputs[1 - slot], node.inputs[slot]
        p = c.producer if c is not None else None
        if x is None or p is None or p.op != "constant":
            continue
        dt = x.type.dtype
        if x.type != out.type or dt.is_complex or c.type.dtype.is_complex:
            continue
        value = np.asarray(p.attrs["value"])
        if value.size == 0 or not np.all(value == neutral):
            continue
        if node.op == "add" and dt.is_floating and not np.all(np.signbit(value)):
            continue  # x + 0.0 turns -0.0 into +0.0; x + -0.0 is exact
        return x, p
    return None


def _match(node: Node) -> Match | None:
    found = identity_operand(node)
    if found is None:
        return None
    x, const = found
    return Match(node, [node], {"x": x}, constants=[const])


IDENTITY_ARITHMETIC = Pattern("identity_arithmetic", matcher=_match, replace=lambda b, m: m["x"])


def fold_identities(graph: Graph) -> Graph:
    """``graph`` without its exact no-op arithmetic (a new graph; ``graph`` itself when there
    is none)."""
    if not any(identity_operand(n) for n in graph.nodes):
        return graph
    return rewrite(graph, [IDENTITY_ARITHMETIC])
