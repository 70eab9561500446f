"""msc: the multi-system graph hub.

Frontends translate PyTorch and ONNX models into one framework-neutral graph (``msc.Graph``);
codegens (the ``codegen`` package) regenerate the model for a target. The public API:

    g = msc.from_torch(module, example_args)      g = msc.from_onnx(path_or_model)
    g = msc.from_relax(ir_module, function="main")   g = msc.from_tflite(path_or_bytes)
    g = msc.from_keras(model_or_path)             (a Keras 3 model or a .keras file)
    g = msc.from_saved_model(directory)           (TensorFlow's TFLite converter; [tensorflow])
    g = msc.from_jax(fn, *example_args, params=None)  g = msc.from_stablehlo(text_bytes_or_exported)
    g = msc.from_flax(linen_module, variables, *example_args)  g = msc.from_flax(nnx_module, *args)
    text = msc.to_text(g);  g2 = msc.from_text(text)
    msc.save(g, directory);  g = msc.load(directory)
    msc.structural_equal(a, b);  msc.assert_structural_equal(a, b);  msc.structural_hash(g)
    g2 = msc.rewrite(g, [msc.Pattern(...)])   (find subgraphs, replace them)
"""

from __future__ import annotations

from typing import Any

import msc.ops  # noqa: F401 - installs the canonical op set every graph uses by default
from msc.io import load, save
from msc.ir import (
    AttrKind,
    DType,
    Graph,
    GraphError,
    Node,
    OptionalType,
    Provenance,
    SequenceType,
    SymDim,
    SymExpr,
    TensorType,
    Value,
    Weight,
)
from msc.ir.equal import EqualResult, assert_structural_equal, structural_equal, structural_hash
from msc.ops.rewrite import Match, Pattern, rewrite
from msc.text import ParseError, from_text, to_text
from msc.version import __version__ as __version__

__all__ = [
    "AttrKind",
    "DType",
    "EqualResult",
    "Graph",
    "GraphError",
    "Match",
    "Node",
    "OptionalType",
    "ParseError",
    "Pattern",
    "Provenance",
    "SequenceType",
    "SymDim",
    "SymExpr",
    "TensorType",
    "Value",
    "Weight",
    "assert_structural_equal",
    "batch",
    "convert",
    "diff",
    "from_exported_program",
    "from_flax",
    "from_fx",
    "from_jax",
    "from_keras",
    "from_onnx",
    "from_relax",
    "from_saved_model",
    "from_stablehlo",
    "from_tflite",
    "from_text",
    "from_torch",
    "inspect",
    "load",
    "render",
    "rewrite",
    "save",
    "structural_equal",
    "structural_hash",
    "to_text",
    "verify",
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


def from_keras(model: Any, example_args: Any = None, **kwargs: Any) -> Graph:
    """Translate a Keras 3 model (a model object or a .keras path; see msc.frontend.keras).

    A subclassed ``keras.Model`` (its ``call`` is Python, no functional graph to read) is an
    ``nn.Module`` on Keras' torch backend: given ``example_args`` it is converted by
    ``msc.from_torch`` (torch.export), the ops as Keras' torch backend runs them."""
    from msc.frontend.keras import from_keras as impl
    from msc.frontend.keras import is_subclassed

    if example_args is not None and is_subclassed(model):
        import torch

        args = tuple(a if isinstance(a, torch.Tensor) else torch.as_tensor(a) for a in example_args)
        return from_torch(model, args)
    kwargs.setdefault("translate_export", from_exported_program)
    return impl(model, **kwargs)


def from_tflite(model: Any, **kwargs: Any) -> Graph:
    """Translate a TFLite / LiteRT model (a .tflite path or its bytes; see msc.frontend.tflite)."""
    from msc.frontend.tflite import from_tflite as impl

    return impl(model, **kwargs)


def from_saved_model(path: Any, **kwargs: Any) -> Graph:
    """Translate a TensorFlow SavedModel's signature through TensorFlow's own TFLite converter
    and ``from_tflite`` (needs the ``[tensorflow]`` extra; TensorFlow loads the model's graph,
    so only for models you trust; see msc.frontend.tflite.saved_model)."""
    from msc.frontend.tflite.saved_model import from_saved_model as impl

    return impl(path, **kwargs)


def from_stablehlo(module: Any, **kwargs: Any) -> Graph:
    """Translate a StableHLO module (MLIR text or bytecode, serialized jax.export bytes, or a
    jax.export.Exported; see msc.frontend.jax)."""
    from msc.frontend.jax import from_stablehlo as impl

    return impl(module, **kwargs)


def from_jax(fn: Any, *example_args: Any, **kwargs: Any) -> Graph:
    """Export a JAX function with jax.export and translate it (see msc.frontend.jax)."""
    from msc.frontend.jax import from_jax as impl

    return impl(fn, *example_args, **kwargs)


def from_flax(module: Any, *args: Any, **kwargs: Any) -> Graph:
    """Translate a Flax model: ``from_flax(linen_module, variables, *example_args)`` or
    ``from_flax(nnx_module, *example_args)``; weights named by their pytree paths
    (``params/Dense_0/kernel``; see msc.frontend.jax.flax)."""
    from msc.frontend.jax.flax import from_flax as impl

    return impl(module, *args, **kwargs)


def from_relax(module: Any, function: str = "main") -> Graph:
    """Translate a TVM Relax function of an IRModule (see msc.frontend.relax)."""
    from msc.frontend.relax import from_relax as impl

    return impl(module, function)


# The analysis tools behind the ``msc`` command (see msc.analysis); imported on first use.
def inspect(model: Any, shapes: Any = None, **kwargs: Any) -> Any:
    """Inputs/outputs, ops, parameters, FLOPs/MACs and peak memory (msc.analysis.inspect)."""
    from msc.analysis import inspect as impl

    return impl(model, shapes, **kwargs)


def diff(a: Any, b: Any, **kwargs: Any) -> Any:
    """Structural equality, else a node-level diff of two models (msc.analysis.diff)."""
    from msc.analysis import diff as impl

    return impl(a, b, **kwargs)


def verify(a: Any, b: Any, inputs: Any = None, **kwargs: Any) -> Any:
    """Run two models on the same inputs; name the first divergence (msc.analysis.verify)."""
    from msc.analysis import verify as impl

    return impl(a, b, inputs, **kwargs)


def render(model: Any, path: Any, **kwargs: Any) -> Any:
    """Draw a model's graph to .svg, .dot or .html (msc.analysis.render)."""
    from msc.analysis import render as impl

    return impl(model, path, **kwargs)


def convert(src: Any, out: Any, **kwargs: Any) -> Any:
    """Convert a model file to torch / onnx / msc and check it (msc.analysis.convert)."""
    from msc.analysis import convert as impl

    return impl(src, out, **kwargs)


def batch(manifest: Any, output: Any = None, **kwargs: Any) -> Any:
    """Convert / verify / inspect many models, each in its own worker process with a time and
    memory limit, locally or on Ray; reruns resume (msc.analysis.batch)."""
    from msc.analysis import batch as impl

    return impl(manifest, output, **kwargs)
