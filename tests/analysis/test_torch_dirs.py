"""What ``convert --to torch`` writes is read back by every command: the check re-imports it,
``verify`` and ``inspect`` open the directory, and inputs of every rank reach the module as
the source model takes them.

Numeric tolerance: the convert check's defaults (rtol 1e-4, atol 1e-5) against onnxruntime.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the sources here are ONNX files")
pytest.importorskip("torch", reason="the target is generated PyTorch")
pytest.importorskip("onnxruntime", reason="the source runs in onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import msc  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx"):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = tmp_path / name
    onnx.save(m, path)
    return path


def test_a_scalar_input_reaches_the_module_as_a_scalar(tmp_path):
    # numpy's ascontiguousarray made the 0-d index [1]: the generated module's Gather then
    # kept the axis, and the convert check reported a mismatch (shapes [2] vs [2, 1]) for a
    # conversion that was right (torch.onnx writes Llama's logits_to_keep so).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    src = _save(tmp_path, [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [x, i], [y])
    report = msc.convert(src, tmp_path / "out", to="torch")
    assert report.ok, report.numeric
