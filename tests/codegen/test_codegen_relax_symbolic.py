"""codegen.relax on inputs of symbolic size: the patterns of the wheels' models
(bench/pip_models.py) that need a dim Relax works out from another (FPN upsampling, targets
read from shapes), each a small ONNX model compiled once for the Relax VM and compared with
onnxruntime at two input sizes."""

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


def _check(model, *feeds, atol=1e-5, rtol=1e-5):
    """One build, run on each of ``feeds``: Relax's outputs equal onnxruntime's
    (|a - b| <= atol max(1, max |ref|) + rtol |ref|). Returns the build."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    g = msc.from_onnx(model)
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


def _img(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _const(name: str, values, dtype=F32):
    arr = np.asarray(values)
    return helper.make_tensor(name, dtype, arr.shape, arr.reshape(-1).tolist())


# -------------------------------------------------------------- resize to a symbolic size
@pytest.mark.parametrize(
    "mode, coord, scale",
    [
        ("nearest", "asymmetric", 2.0),  # PP-OCR's and YOLOv8's FPN upsampling
        ("nearest", "asymmetric", 8.0),
        ("linear", "half_pixel", 2.0),
        ("nearest", "half_pixel", 3.0),
    ],
)
def test_resize_by_a_whole_scale_of_symbolic_dims(mode: str, coord: str, scale: float) -> None:
    """A stride-2 convolution of an image of any height and width, upsampled by a constant
    whole scale: the output size is the (symbolic) dims times the scale, which image.resize
    maps as ONNX does (out / in is the scale)."""
    x = helper.make_tensor_value_info("x", F32, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    w = _const("w", _img(4, 3, 3, 3, seed=1))
    scales = _const("scales", [1.0, 1.0, scale, scale])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Resize", ["c", "", "scales"], ["y"], mode=mode,
            coordinate_transformation_mode=coord, nearest_mode="floor",
        ),
    ]  # fmt: skip
    model = _model(nodes, [x], [y], [w, scales])
    _check(model, {"x": _img(1, 3, 16, 16)}, {"x": _img(2, 3, 13, 22)})


def test_resize_by_a_fractional_scale_of_a_symbolic_dim_is_refused() -> None:
    """A fractional scale of a symbolic dim (floor(h * 1.5)) is no whole size image.resize
    maps by that scale: a clear refusal, not a wrong answer."""
    x = helper.make_tensor_value_info("x", F32, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    scales = _const("scales", [1.0, 1.0, 1.5, 1.5])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    model = _model([node], [x], [y], [scales])
    with pytest.raises(msc.errors.UnsupportedOpsError, match="fractional scale"):
        cr.build(msc.from_onnx(model))


def test_resize_to_the_size_of_another_tensor() -> None:
    """An FPN top-down path: the coarse map resized to the fine map's H and W, read with
    Shape and joined to the coarse map's N and C."""
    x = helper.make_tensor_value_info("x", F32, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    w = _const("w", _img(3, 3, 3, 3, seed=1))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["cs"], end=2),
        helper.make_node("Shape", ["x"], ["xs"], start=2),
        helper.make_node("Concat", ["cs", "xs"], ["sizes"], axis=0),
        helper.make_node("Resize", ["c", "", "", "sizes"], ["r"], mode="nearest"),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ]
    model = _model(nodes, [x], [y], [w])
    _check(model, {"x": _img(1, 3, 16, 16)}, {"x": _img(1, 3, 15, 9)})
