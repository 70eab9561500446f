"""The TFLite / LiteRT frontend: ``from_tflite(path_or_bytes)`` -> msc Graph.

The .tflite flatbuffer is read field by field (the ``tflite`` package's generated schema
classes; no TensorFlow): every offset and size checked, nothing in the file run. One converter
per builtin op (``@converter("CONV_2D")``), grouped by op family in this package.

# NOTE: invariants
# - Tensor names are the graph's value and weight names; the signature's names (when the model
#   has a SignatureDef for the subgraph) name the graph's inputs and outputs.
# - A ``shape_signature`` -1 is a symbolic dim: axis 0 of every input is ``batch``; any other is
#   named after its input and axis.
# - Fused activations become their own nodes; quantized tensors keep their integer dtype, with
#   dequantize / quantize around the float ops that read and write them.
# - Every unsupported op is reported at once (UnsupportedOpsError), or kept as a custom node
#   ``tflite::<OP>@<version>`` with ``custom_ops="keep"``.
"""

from __future__ import annotations

import os

import numpy as np

from msc.errors import ConversionError
from msc.frontend.tflite.coverage import coverage_markdown, supported_ops, unsupported_ops
from msc.frontend.tflite.importer import Importer
from msc.frontend.tflite.reader import TfModel, read_model
from msc.frontend.tflite.registry import CONVERTERS, REASONS, ConverterRegistry, converter
from msc.ir import Graph
from msc.ops import import_families

__all__ = [
    "from_tflite",
    "initial_state",
    "read_model",
    "converter",
    "CONVERTERS",
    "ConverterRegistry",
    "REASONS",
    "coverage_markdown",
    "supported_ops",
    "unsupported_ops",
]


def from_tflite(
    model: str | os.PathLike | bytes | TfModel,
    *,
    subgraph: int | None = None,
    registry: ConverterRegistry = CONVERTERS,
    custom_ops: str = "error",
    name: str = "",
) -> Graph:
    """Translate a TFLite model into an msc Graph.

    Args:
        model: a path to a ``.tflite`` file (constant tensors stay in the file, mapped when
            used), the file's bytes, or a model ``read_model`` returned.
        subgraph: which subgraph is the graph (default: the first signature's, else 0).
        registry: the converter registry (tests may pass their own).
        custom_ops: "error" reports every op msc cannot translate at once; "keep" keeps each
            as a custom node ``tflite::<OP>@<version>`` with its options as attributes (a
            custom op's options as bytes) and the output types the model declares.
        name: the graph's name (default: the subgraph's, else "main").

    Returns:
        The graph.

    Raises:
        UnsupportedOpsError: every op (with its output tensor's name) msc cannot translate.
        BadModelError: the file is not a well-formed .tflite model (the message says where).
    """
    if custom_ops not in ("error", "keep"):
        raise ValueError(f"custom_ops must be 'error' or 'keep', got {custom_ops!r}")
    m = model if isinstance(model, TfModel) else read_model(model)
    try:
        index = subgraph
        if index is None:
            index = m.signatures[0].subgraph if m.signatures else 0
        if not 0 <= index < len(m.subgraphs):
            raise ConversionError(f"the model has {len(m.subgraphs)} subgraphs, not {index + 1}")
        from msc.text.check import checked

        return checked(Importer(m, index, registry, custom_ops, name).run())
    finally:
        if not isinstance(model, TfModel):
            m.close()


def initial_state(
    model: str | os.PathLike | bytes | TfModel, *, subgraph: int | None = None
) -> dict[str, np.ndarray]:
    """The first run's values of a model's resource variables: what the init subgraphs its
    CALL_ONCE ops run assign, by variable name (the names of ``from_tflite``'s state inputs),
    as stored (a quantized variable as its integers). Empty for a model without variables.

    Raises:
        Unsupported: an init subgraph assigns a value it computes (only constants are read).
    """
    from msc.errors import Unsupported

    m = model if isinstance(model, TfModel) else read_model(model)
    try:
        index = subgraph
        if index is None:
            index = m.signatures[0].subgraph if m.signatures else 0
        out: dict[str, np.ndarray] = {}
        for op in m.subgraphs[index].operators:
            init = op.options.get("init_subgraph_index") if op.op == "CALL_ONCE" else None
            if init is None or not 0 <= init < len(m.subgraphs):
                continue
            imp = Importer(m, init)
            imp._state_inputs()  # names the init subgraph's variables
            for o in imp.sg.operators:
                if o.op != "ASSIGN_VARIABLE":
                    continue
                var = imp.variables.get(o.inputs[0])
                t = imp.sg.tensors[o.inputs[1]]
                if var is None or not imp.has_data(t):
                    raise Unsupported(f"an init subgraph assigns {t.name!r}, not a constant")
                out[var] = imp.array(t)
        return out
    finally:
        if not isinstance(model, TfModel):
            m.close()


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
