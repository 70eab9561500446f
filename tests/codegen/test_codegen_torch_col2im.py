"""col2im beyond torch's fold (2-d blocks, symmetric pads): 1-d and 3-d blocks and begin/end
pads through the run-time helper, against ONNX's reference implementation of Col2Im."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402

CASES = {  # image, block, attributes
    "1d": ([9], [3], {"strides": [2], "pads": [1, 2]}),
    "2d_asymmetric": ([5, 6], [2, 3], {"pads": [0, 1, 2, 0], "dilations": [2, 1]}),
    "3d": ([4, 5, 3], [2, 2, 1], {"strides": [1, 2, 1], "pads": [1, 0, 0, 0, 1, 1]}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_col2im_helper(name) -> None:
    image, block, attrs = CASES[name]
    n = len(image)
    pads = attrs.get("pads", [0] * 2 * n)
    dil = attrs.get("dilations", [1] * n)
    st = attrs.get("strides", [1] * n)
    counts = [
        (image[i] + pads[i] + pads[n + i] - dil[i] * (block[i] - 1) - 1) // st[i] + 1
        for i in range(n)
    ]
    x = (
        np.random.default_rng(0)
        .standard_normal((2, 3 * int(np.prod(block)), int(np.prod(counts))))
        .astype(np.float32)
    )
    shapes = [np.array(image, np.int64), np.array(block, np.int64)]
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("image", TensorProto.INT64, [n]),
        helper.make_tensor_value_info("block", TensorProto.INT64, [n]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([node], "col2im", inputs, [out]),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "image": shapes[0], "block": shapes[1]})
    m = ct.to_module(msc.from_onnx(model))
    with torch.no_grad():
        got = m(*[torch.from_numpy(a) for a in (x, *shapes)]).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
