"""Output types of nodes the model does not type, as onnxruntime infers them.

Optimizers (onnxruntime's transformer optimizer among them) write com.microsoft ops with no
value_info for their outputs, and ONNX's own shape inference knows nothing of those ops. A node
msc keeps as a custom op needs its output types; onnxruntime knows them, from the type and shape
inference of its contrib op schemas. This module asks it: the model's graph, with the wanted
values made graph outputs, is loaded in a session with every graph optimization off, and the
session reports the outputs' types.

# NOTE: invariants
# - Nothing of the model runs: the session is only created (graph optimizations, constant
#   folding included, are off), never run. Initializers larger than ``_KEEP`` elements, or
#   stored outside the model, become graph inputs of their type first, so no weight is read or
#   copied (and external data is never opened); small ones stay, since shapes are computed
#   from them (a Reshape's target).
# - A dim comes back as the model's own symbol only when a graph input of the model names it;
#   a name onnxruntime made up stands for an unknown dim.
# - Without onnxruntime, or when it cannot load the model (an op of a domain it does not
#   know), the answer is empty: the caller reports the missing type as before.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

__all__ = ["runtime_types"]

_KEEP = 1024  # initializers up to this many elements stay: the shape arithmetic reads them


def runtime_types(model: onnx.ModelProto, names: Iterable[str]) -> dict[str, onnx.TypeProto]:
    """The tensor types onnxruntime infers for the top-level values ``names`` of ``model``
    (those it can type; the model itself is left unchanged)."""
    wanted = [n for n in dict.fromkeys(names) if n]
    if not wanted:
        return {}
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    probe = _probe(model, wanted)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(
            probe.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
    except Exception:  # noqa: BLE001 - onnxruntime cannot load it: no types from it
        return {}
    symbols = {
        d.dim_param
        for vi in model.graph.input
        if vi.type.HasField("tensor_type")
        for d in vi.type.tensor_type.shape.dim
        if d.dim_param
    }
    out: dict[str, onnx.TypeProto] = {}
    want = set(wanted)
    for arg in sess.get_outputs():
        if arg.name in want:
            t = _type_proto(arg.type, arg.shape, symbols)
            if t is not None:
                out[arg.name] = t
    return out


def _probe(model: onnx.ModelProto, wanted: list[str]) -> onnx.ModelProto:
    """``model`` without its large or external initializers (graph inputs instead: their
    bytes are not copied) and with ``wanted`` as extra graph outputs."""
    probe = onnx.ModelProto()
    probe.ir_version = model.ir_version
    probe.opset_import.extend(model.opset_import)
    probe.functions.extend(model.functions)
    src, g = model.graph, probe.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    g.sparse_initializer.extend(src.sparse_initializer)
    listed = {vi.name for vi in src.input}
    for t in src.initializer:
        if _kept(t):
            g.initializer.append(t)
        elif t.name not in listed:
            vi = g.input.add()
            vi.name = t.name
            tt = vi.type.tensor_type
            tt.elem_type = t.data_type
            tt.shape.SetInParent()
            for d in t.dims:
                tt.shape.dim.add().dim_value = d
    outs = {vi.name for vi in src.output}
    for name in wanted:
        if name not in outs:
            g.output.add().name = name
    return probe


def _kept(t: onnx.TensorProto) -> bool:
    n = 1
    for d in t.dims:
        n *= d
    return n <= _KEEP and t.data_location != onnx.TensorProto.EXTERNAL


def _type_proto(kind: str, shape: list | None, symbols: set[str]) -> onnx.TypeProto | None:
    """onnxruntime's ``tensor(float)`` and shape list as a TypeProto (None: not a tensor)."""
    if not kind.startswith("tensor(") or not kind.endswith(")"):
        return None
    try:  # onnxruntime spells element types as ONNX does, in lower case
        elem = onnx.TensorProto.DataType.Value(kind[len("tensor(") : -1].upper())
    except ValueError:
        return None
    tp = onnx.TypeProto()
    tt = tp.tensor_type
    tt.elem_type = elem
    if shape is not None:
        tt.shape.SetInParent()
        for d in shape:
            dim = tt.shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str) and d in symbols:
                dim.dim_param = d
    return tp
