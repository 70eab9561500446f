"""ONNX codegen: an msc Graph as an ``onnx.ModelProto`` for a chosen opset.

    proto = codegen.onnx.to_model(g, opset=None)   # default: choose_opset(g)
    codegen.onnx.save(g, "model.onnx", external_data=None)
    codegen.onnx.to_model(g, optimize=False)       # node for node, no export-time folding

Each canonical op has emitters by opset (``EMITTERS``), one module per op family named as in
``msc.ops`` (elementwise.py, nn.py, shape.py, ...); where the target opset lacks an op, the node is
lowered through ``msc.ops.decompose``. Every node that can be expressed neither way is reported
at once in one ``msc.errors.UnsupportedOpsError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import onnx

from codegen.onnx.consumers import CONSUMERS, DEFAULT_CONSUMER, Consumer, decompose_for
from codegen.onnx.model import ModelBuilder, written_weights
from codegen.onnx.opset import (
    MIN_OPSET,
    choose_opset,
    default_opset,
    has_kernel,
    max_opset,
)
from codegen.onnx.registry import EMITTERS, Emit, EmitterRegistry, Ref, Unsupported, emitter
from codegen.onnx.writer import save
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "to_model",
    "save",
    "as_written",
    "written_weights",
    "CONSUMERS",
    "DEFAULT_CONSUMER",
    "Consumer",
    "decompose_for",
    "default_opset",
    "choose_opset",
    "has_kernel",
    "max_opset",
    "MIN_OPSET",
    "EMITTERS",
    "emitter",
    "Emit",
    "EmitterRegistry",
    "Ref",
    "Unsupported",
    "ModelBuilder",
    "coverage_markdown",
]


def to_model(
    graph: Graph, opset: int | None = None, *, optimize: bool = True, **kwargs: Any
) -> onnx.ModelProto:
    """Translate ``graph`` to an ONNX model with weights as inline initializers.

    Args:
        graph: the graph to translate (left unchanged).
        opset: the default-domain opset to target; None for ``choose_opset(graph)``: the
            newest at which the installed onnxruntime has a kernel for every op.
        optimize: fold what is constant before writing (``codegen.onnx.optimize``: no
            ``Constant`` nodes, weights pre-transposed, BatchNorm folded into its Conv/Gemm,
            squares as ``Pow``, identical constants shared); False writes the graph node
            for node.
        **kwargs: passed to ``ModelBuilder`` (``emitters``, ``decompositions``, ``value_infos``,
            ``decompose``: ops written through their decompositions, e.g.
            ``decompose_for("ort-optimizer")``, ``("attention",)``: the file for onnxruntime's
            transformer optimizer, ``CONSUMERS``).

    Returns:
        The ModelProto; ``onnx.checker.check_model(m, full_check=True)`` accepts it.

    Raises:
        UnsupportedOpsError: every node that neither an emitter nor a decomposition can
            express at this opset, all at once.
        ConversionError: the opset is outside what the codegen targets.
    """
    return ModelBuilder(graph, opset, optimize=optimize, **kwargs).run()


def as_written(graph: Graph, opset: int | None = None, decompose: Iterable[str] = ()) -> Graph:
    """``graph`` as the ONNX model written at ``opset`` (None: ``choose_opset(graph)``'s)
    holds it, to compare a re-import of the model with: the nodes written through their
    decompositions (floor division, ``ne``: ops ONNX does not have) lowered by the same rules,
    the weights no node reads left out (``written_weights``); ``decompose`` as for
    ``to_model``. ``graph`` itself is not changed. This is the model written node for node
    (``optimize=False``); the optimized one's re-import is equivalent to it up to the
    rewrites ``msc diff`` knows (constants folded, a transposed weight absorbed into
    ``linear``, batch_norm folded into conv / linear), which is how ``msc convert`` checks it."""
    from msc.ops.rewrite import copy_graph

    if opset is None:
        opset, _ = choose_opset(graph, decompose=decompose)
    out = ModelBuilder(graph, opset, value_infos=False, decompose=decompose).lowered(opset)
    keep = {w.name for w in written_weights(out)}
    if len(keep) == len(out.weights):
        return out
    out = copy_graph(out) if out is graph else out
    for name in [n for n in out.weights if n not in keep]:
        del out.weights[name]
    return out


def coverage_markdown(opsets: tuple[int, ...] | None = None) -> str:
    """Which canonical ops emit at which opsets, and which go through a decomposition."""
    from codegen.onnx.coverage import coverage_markdown as impl

    return impl(opsets)


# One module per op family, named as in msc.ops; importing one registers its emitters.
import_families(__name__)
