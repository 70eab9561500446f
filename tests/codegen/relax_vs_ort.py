"""Small ONNX models through codegen.relax, compared with onnxruntime (shared by the relax
test files on the wheels' patterns)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

import codegen.relax as cr
import msc


def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def check(m: onnx.ModelProto, *feeds: dict, atol: float = 1e-5, rtol: float = 1e-5):
    """One build, run on each of ``feeds``: Relax's outputs equal onnxruntime's, same shapes
    and dtypes, |a - b| <= atol max(1, max |ref|) + rtol |ref|. Returns the build."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    g = msc.from_onnx(m)
    f = cr.build(g)
    for feed in feeds:
        want = sess.run(None, feed)
        got = f(*[feed[v.name] for v in g.inputs])
        got = list(got) if isinstance(got, tuple | list) else [got]
        for a, b in zip(got, want, strict=True):
            a = np.asarray(a.numpy())
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
            scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale)
    return f
