"""The one graph builder: appends nodes of an op set's ops and returns their values.

Both frontends' converter contexts and the decompositions build on it, adding what their
source needs (PyTorch's type promotion, ONNX's constant inputs, generated names).

# NOTE: invariants
# - Nodes are collected in ``nodes`` in creation order (a topological order, since a node's
#   inputs exist before it); the caller decides where they go (a graph, or nowhere when a
#   conversion is abandoned).
# - Every node gets the builder's current name and provenance (``_current_name()`` and
#   ``_current_provenance()``, which a subclass may compute from its state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import GraphError, Node, OpSet, Provenance, Value

__all__ = ["Builder"]


class Builder:
    """Builds canonical nodes: ``y = b.op("relu", x)``; ``b.nodes`` holds them."""

    def __init__(
        self, name: str = "", provenance: Provenance | None = None, opset: OpSet | None = None
    ) -> None:
        self.nodes: list[Node] = []
        self._name = name
        self._provenance = provenance
        self._opset = opset

    def _current_name(self) -> str:
        return self._name

    def _current_provenance(self) -> Provenance | None:
        return self._provenance

    def add(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: Mapping[str, Any] | None = None,
        output_names: Sequence[str | None] | None = None,
    ) -> Node:
        """A new node of ``op``; returns the node."""
        node = Node(
            op,
            list(inputs),
            attrs or {},
            name=self._current_name(),
            provenance=self._current_provenance(),
            output_names=output_names,
            opset=self._opset,
        )
        self.nodes.append(node)
        return node

    def multi(self, op: str, *inputs: Value | None, **attrs: Any) -> tuple[Value, ...]:
        """A node of ``op``; returns all its outputs."""
        return self.add(op, inputs, attrs).outputs

    def op(self, op: str, *inputs: Any, **attrs: Any) -> Value:
        """A single-output node of ``op``; returns its output."""
        outs = self.add(op, inputs, attrs).outputs
        if len(outs) != 1:
            raise GraphError(f"{op} has {len(outs)} outputs; use multi()")
        return outs[0]

    def const(self, value: Any, dtype: DType) -> Value:
        """A ``constant`` node holding ``value`` as ``dtype`` (0-d for a Python scalar)."""
        return self.op("constant", value=np.asarray(value, dtype=dtype.to_numpy()))

    def cast(self, v: Value, dtype: DType) -> Value:
        """``v`` as ``dtype`` (itself when it already is)."""
        return v if v.dtype is dtype else self.op("cast", v, to=dtype)
