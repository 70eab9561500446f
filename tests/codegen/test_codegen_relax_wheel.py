"""codegen.relax on the patterns of the ONNX files other projects ship in their wheels
(bench/pip_models.py): each a small model built here, compiled for the Relax VM and compared
with onnxruntime (or ONNX's reference where onnxruntime lacks the op)."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import codegen.relax as cr  # noqa: E402
import msc  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _check(model, feeds, *, atol=1e-5, rtol=1e-5):
    """Relax's outputs equal onnxruntime's: |a - b| <= atol max(1, max |ref|) + rtol |ref|.
    Returns the largest error relative to that scale."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    g = msc.from_onnx(model)
    got = cr.build(g)(*[feeds[v.name] for v in g.inputs])
    got = list(got) if isinstance(got, tuple | list) else [got]
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        a = np.asarray(a.numpy())
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale)
        if b.size:
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b))) / scale)
    return worst


# ----------------------------------------------------------- broadcasts of two symbols
@pytest.mark.parametrize("op", ["Where", "Add", "Less"])
def test_broadcast_of_two_run_time_dims(op: str) -> None:
    """onnx-asr's resamplers mask a [batch, n] result with a mask built from another input's
    length: two symbols Relax cannot prove equal, a where of unknown shape that LegalizeOps
    left to CodeGenVM. The emitter matches them at run time."""
    x = helper.make_tensor_value_info("x", F32, ["a", "n"])
    y = helper.make_tensor_value_info("y", F32, ["b", "m"])
    out = helper.make_tensor_value_info("z", TensorProto.BOOL if op == "Less" else F32, ["a", "n"])
    if op == "Where":
        nodes = [
            helper.make_node("Greater", ["y", "zero"], ["c"]),
            helper.make_node("Where", ["c", "x", "zero"], ["z"]),
        ]
        inits = [helper.make_tensor("zero", F32, [], [0.0])]
    else:
        nodes, inits = [helper.make_node(op, ["x", "y"], ["z"])], []
    model = _model(nodes, [x, y], [out], inits)
    rng = np.random.default_rng(0)
    feeds = {k: rng.normal(size=(2, 5)).astype(np.float32) for k in "xy"}
    _check(model, feeds)
