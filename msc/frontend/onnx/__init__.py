"""The ONNX frontend: ``from_onnx(path_or_model)`` -> msc Graph.

Any default-domain opset from 7 to the newest the installed ``onnx`` knows. One converter per op
and opset range (``@converter("Conv", since=11)``), grouped by op family in this package; the
converter chosen is the newest whose ``since`` is <= the model's opset.

# NOTE: invariants
# - Initializers become weights without copying: numpy views of raw_data, external data
#   memory-mapped (a model over 2 GB loads). Names are kept exactly.
# - Every unsupported op (node names included) is reported at once in one UnsupportedOpsError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from msc.errors import ConversionError
from msc.frontend.onnx.coverage import coverage_markdown, supported_ops, unsupported_ops
from msc.frontend.onnx.importer import Importer, OnnxUnsupportedOpsError
from msc.frontend.onnx.registry import CONVERTERS, ConverterRegistry, converter
from msc.ir import Graph, TensorType
from msc.ops import import_families

__all__ = [
    "from_onnx",
    "OnnxUnsupportedOpsError",
    "converter",
    "CONVERTERS",
    "ConverterRegistry",
    "coverage_markdown",
    "supported_ops",
    "unsupported_ops",
]


def from_onnx(
    model: str | os.PathLike | onnx.ModelProto | bytes,
    *,
    input_types: Mapping[str, TensorType] | None = None,
    constant_inputs: Mapping[str, np.ndarray] | None = None,
    registry: ConverterRegistry = CONVERTERS,
    custom_ops: str = "error",
    fuse: bool = True,
) -> Graph:
    """Translate an ONNX model into an msc Graph.

    Args:
        model: a path to a ``.onnx`` file (external data is memory-mapped from its directory),
            a ``ModelProto``, or serialized model bytes.
        input_types: overrides of graph input types by input name (e.g. a static batch size).
        constant_inputs: graph inputs to bind to fixed values (numpy arrays) at import; they
            stop being inputs. Use it for inputs that only set shapes or axes (a Reshape target,
            ReduceSum axes, Resize scales), which msc keeps as attributes.
        registry: the converter registry (tests may pass their own).
        custom_ops: what to do with a node msc cannot translate (an op of another domain
            such as com.microsoft, an ai.onnx op msc lacks, or a use of an op its converter
            does not take, such as a Dropout whose training_mode is computed at run time):
            "error" reports them all at once; "keep" keeps each as a custom node
            (``domain::name@version``; an ai.onnx op carries the opset that last changed it)
            with its attributes (a graph attribute as an msc subgraph) and the output types
            the model declares, which codegen.onnx writes back in its domain.
        fuse: put the high-level ops ONNX spells out back together (MatMul + Add and Gemm
            of an [out, in] weight -> linear, the erf and tanh GELU formulas -> gelu,
            decomposed LayerNorm / RMSNorm -> layer_norm / rms_norm, x * sigmoid(x) -> silu,
            softmax(Q K^T * s + mask) V -> attention, a Gather torch.onnx lowered from an
            embedding -> embedding), where the fused op computes the same function
            (msc.ops.fusions).

    Returns:
        The graph: inputs, initializers (as weights) and value names as in the model.

    Raises:
        UnsupportedOpsError: listing every op (with node names) msc cannot translate; its
            ``runtime_inputs`` names graph inputs converters needed as constants.
        ConversionError: the file or model is malformed, or its opset is out of range.
    """
    base_dir: str | None = None
    if isinstance(model, str | os.PathLike):
        path = Path(model)
        if not path.is_file():
            raise ConversionError(f"ONNX file {str(path)!r} does not exist")
        if path.stat().st_size == 0:
            raise ConversionError(f"ONNX file {str(path)!r} is empty (0 bytes)")
        try:
            proto = onnx.load(os.fspath(path), load_external_data=False)
        except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
            raise ConversionError(f"cannot read ONNX file {str(path)!r}: {e}") from None
        base_dir = os.fspath(path.resolve().parent)
    elif isinstance(model, bytes):
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(model)
        except Exception as e:  # noqa: BLE001
            raise ConversionError(f"cannot parse ONNX model bytes: {e}") from None
    elif isinstance(model, onnx.ModelProto):
        proto = model
    else:
        raise TypeError(f"from_onnx takes a path, bytes or ModelProto, got {type(model).__name__}")
    check_model_shape(proto)
    graph = Importer(proto, base_dir, input_types, registry, constant_inputs, custom_ops).run()
    if fuse:
        from msc.ops.fusions import fuse as fuse_patterns
        from msc.text.check import checked

        graph = checked(fuse_patterns(graph))
    return graph


def check_model_shape(proto: onnx.ModelProto) -> None:
    """What every model needs before translation: a graph with outputs, and names that are
    text (protobuf hands invalid UTF-8 in a string field back as bytes). Errors name where."""
    if not proto.HasField("graph"):
        raise ConversionError("ONNX model has no graph (an empty or truncated file?)")
    if not proto.graph.output:
        raise ConversionError(f"ONNX graph {proto.graph.name!r} has no outputs")
    props = [("producer_name", proto.producer_name), ("producer_version", proto.producer_version)]
    for p in proto.metadata_props:
        props += [("metadata key", p.key), (f"metadata {p.key!r} value", p.value)]
    for what, text in props:
        if not isinstance(text, str):
            raise ConversionError(f"ONNX model: {what} {text!r} is not valid UTF-8")
    stack = [("graph", proto.graph)]
    while stack:
        where, g = stack.pop()
        names = [("graph name", g.name)]
        names += [("input", v.name) for v in g.input]
        names += [("output", v.name) for v in g.output]
        names += [("value_info", v.name) for v in g.value_info]
        names += [("initializer", t.name) for t in g.initializer]
        for n in g.node:
            names += [("node name", n.name), ("op type", n.op_type), ("domain", n.domain)]
            names += [("node input", x) for x in n.input] + [("node output", x) for x in n.output]
            for p in n.metadata_props:
                names += [("node metadata key", p.key), (f"node metadata {p.key!r} value", p.value)]
            for a in n.attribute:
                names.append(("attribute name", a.name))
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append((f"{where}/{n.op_type}.{a.name}", a.g))
                stack += [(f"{where}/{n.op_type}.{a.name}", sub) for sub in a.graphs]
        for v in [*g.input, *g.output, *g.value_info]:
            names += [("dim name", d) for d in _dim_params(v.type)]
        for what, name in names:
            if not isinstance(name, str):
                raise ConversionError(f"ONNX {where}: {what} {name!r} is not valid UTF-8")
        for v in g.input:
            if not v.name:
                raise ConversionError(f"ONNX {where}: a graph input has an empty name")


def _dim_params(t: onnx.TypeProto) -> list:
    """The dim_params of a type, its elements' included (sequences, optionals, maps)."""
    out = []
    while t is not None:
        kind = t.WhichOneof("value")
        inner = getattr(t, kind) if kind else None
        if kind in ("tensor_type", "sparse_tensor_type") and inner.HasField("shape"):
            out += [d.dim_param for d in inner.shape.dim if d.HasField("dim_param")]
        t = (
            inner.elem_type
            if kind in ("sequence_type", "optional_type")
            else (inner.value_type if kind == "map_type" else None)
        )
    return out


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
