"""Which opsets the codegen targets, and the IR version that goes with one.

# NOTE: the default opset is the newest one the installed onnxruntime loads, found by loading
# a small probe model at each opset from the newest ``onnx`` knows downwards (cached per
# process; the probe holds the ops a runtime has been seen to lack newest kernels for);
# without onnxruntime it is the newest opset ``onnx`` knows.
"""

from __future__ import annotations

import functools

import onnx
from onnx import helper

__all__ = ["MIN_OPSET", "max_opset", "default_opset", "ir_version_for"]

MIN_OPSET = 9  # the oldest opset the emitters target (Where, Erf, Sign, Shrink, IsNaN: 9)
_MIN_IR = 10  # nodes carry provenance in metadata_props (IR 10, onnx 1.16)


def max_opset() -> int:
    """The newest default-domain opset the installed ``onnx`` defines."""
    return onnx.defs.onnx_opset_version()


def ir_version_for(opset: int) -> int:
    """The IR version to write with ``opset``: what the opset needs, at least IR 10."""
    need = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return max(need, _MIN_IR)


def _probe_model(opset: int) -> bytes:
    """Identity plus the ops whose newest versions onnxruntime has been seen to lack kernels
    for at an opset it otherwise loads (QuantizeLinear, DequantizeLinear and OneHot at 28 in
    onnxruntime 1.32): a default opset that cannot run them is not one the runtime runs."""
    tp = onnx.TensorProto
    x = helper.make_tensor_value_info("x", tp.FLOAT, [1])
    outs = [helper.make_tensor_value_info(n, tp.FLOAT, None) for n in ("y", "d", "h")]
    inits = [
        helper.make_tensor("s", tp.FLOAT, [], [1.0]),
        helper.make_tensor("i", tp.INT64, [1], [0]),
        helper.make_tensor("n", tp.INT64, [], [2]),
        helper.make_tensor("v", tp.FLOAT, [2], [0.0, 1.0]),
    ]
    nodes = [
        helper.make_node("Identity", ["x"], ["y"]),
        helper.make_node("QuantizeLinear", ["x", "s"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s"], ["d"]),
        helper.make_node("OneHot", ["i", "n", "v"], ["h"]),
    ]
    g = helper.make_graph(nodes, "probe", [x], outs, initializer=inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset)
    )
    return m.SerializeToString()


@functools.cache
def default_opset() -> int:
    """The newest opset the installed onnxruntime runs (or ``onnx`` knows, without it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return max_opset()
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    for opset in range(max_opset(), MIN_OPSET - 1, -1):
        try:
            ort.InferenceSession(_probe_model(opset), opts, providers=["CPUExecutionProvider"])
        except Exception:
            continue
        return opset
    return MIN_OPSET
