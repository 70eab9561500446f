"""msc: the multi-system graph hub.

Frontends translate PyTorch and ONNX models into one framework-neutral graph (``msc.Graph``);
codegens (the ``codegen`` package) regenerate the model for a target. The public API:

    g = msc.from_torch(module, example_args)      g = msc.from_onnx(path_or_model)
    text = msc.to_text(g);  g2 = msc.from_text(text)
    msc.save(g, directory);  g = msc.load(directory)
    msc.structural_equal(a, b);  msc.assert_structural_equal(a, b);  msc.structural_hash(g)
"""

from __future__ import annotations

from typing import Any

from msc.equal import EqualResult, assert_structural_equal, structural_equal, structural_hash
from msc.io import load, save
from msc.ir import (
    AttrKind,
    DType,
    Graph,
    GraphError,
    Node,
    Provenance,
    SymDim,
    TensorType,
    Value,
    Weight,
)
from msc.ops import registry as ops
from msc.text import ParseError, from_text, to_text

__version__ = "0.1.0"

__all__ = [
    "AttrKind",
    "DType",
    "EqualResult",
    "Graph",
    "GraphError",
    "Node",
    "ParseError",
    "Provenance",
    "SymDim",
    "TensorType",
    "Value",
    "Weight",
    "assert_structural_equal",
    "from_exported_program",
    "from_fx",
    "from_onnx",
    "from_text",
    "from_torch",
    "load",
    "ops",
    "save",
    "structural_equal",
    "structural_hash",
    "to_text",
]


def from_torch(module: Any, example_args: tuple = (), **kwargs: Any) -> Graph:
    """Export ``module`` with torch.export and translate it (see msc.frontend.torch)."""
    from msc.frontend.torch import from_torch as impl

    return impl(module, example_args, **kwargs)


def from_exported_program(ep: Any, **kwargs: Any) -> Graph:
    """Translate a torch.export ExportedProgram (see msc.frontend.torch)."""
    from msc.frontend.torch import from_exported_program as impl

    return impl(ep, **kwargs)


def from_fx(graph_module: Any, example_args: tuple = (), **kwargs: Any) -> Graph:
    """Translate a torch.fx GraphModule (see msc.frontend.torch)."""
    from msc.frontend.torch import from_fx as impl

    return impl(graph_module, example_args, **kwargs)


def from_onnx(model: Any, **kwargs: Any) -> Graph:
    """Translate an ONNX model (a path or a ModelProto; see msc.frontend.onnx)."""
    from msc.frontend.onnx import from_onnx as impl

    return impl(model, **kwargs)
