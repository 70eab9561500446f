"""The neutral graph IR. Imports neither torch nor onnx (enforced by ruff's banned-api)."""

from msc.ir import symexpr
from msc.ir.attrs import AttrKind
from msc.ir.dtype import DType
from msc.ir.graph import Graph, GraphError, Node, Provenance, Value, Weight
from msc.ir.types import Dim, OptionalType, SequenceType, SymDim, SymExpr, TensorType

__all__ = [
    "AttrKind",
    "DType",
    "Dim",
    "Graph",
    "GraphError",
    "Node",
    "OptionalType",
    "Provenance",
    "SequenceType",
    "SymDim",
    "SymExpr",
    "symexpr",
    "TensorType",
    "Value",
    "Weight",
]
