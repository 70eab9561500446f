"""Layout through TFLite: a PyTorch CNN written to .tflite keeps a transpose only where a
graph input or output changes layout (none inside), and runs in LiteRT like eager PyTorch; a
.tflite CNN read and emitted as PyTorch or ONNX keeps at most two transposes in all."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")

import torch  # noqa: E402

import codegen.tflite  # noqa: E402
import msc  # noqa: E402
from codegen.tflite.model import Writer, channels_last  # noqa: E402
from codegen.tflite.passes import count_ops, simplify  # noqa: E402
from codegen.tflite.registry import EMITTERS  # noqa: E402
from tests.ops.test_layout import MODELS, _model  # noqa: E402


def _written(g, layout_pass: bool = True):
    """The records codegen.tflite writes (``layout_pass=False``: without ``channels_last``)."""
    return simplify(Writer(channels_last(g) if layout_pass else g, EMITTERS).run())


def _transposes(g, layout_pass: bool) -> int:
    return count_ops(_written(g, layout_pass)).get("TRANSPOSE", 0)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_pytorch_cnn_to_tflite_has_boundary_transposes_only(key):
    m, x = _model(key)
    g = msc.from_torch(m, (x,))
    boundary = MODELS[key][2]
    assert _transposes(g, True) <= boundary
    assert _transposes(g, False) > boundary  # each conv / pool between its own transposes
    data = codegen.tflite.to_bytes(g)
    (sg,) = _written(g).subgraphs
    for op in sg.ops:  # none inside: a transpose reads a graph input or writes an output
        if op.op == "TRANSPOSE":
            assert op.inputs[0] in sg.inputs or op.outputs[0] in sg.outputs
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")
    from tests.tflite_cases import run_litert

    (got,) = run_litert(data, [x.numpy()])
    np.testing.assert_allclose(got, m(x).detach().numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_tflite_cnn_read_back_to_torch_and_onnx_has_at_most_two_transposes(key):
    import codegen.onnx
    import codegen.torch
    from msc.ops.layout import channels_first, count_transposes

    m, x = _model(key)
    data = codegen.tflite.to_bytes(msc.from_torch(m, (x,)))
    g = msc.from_tflite(data)
    want = m(x).detach().numpy()
    nchw = channels_first(g)  # what codegen.torch and codegen.onnx emit
    assert count_transposes(nchw) <= 2
    src = codegen.torch.generate(g)
    assert src.count(".permute(") + src.count("transpose(") <= 2
    got = codegen.torch.to_module(g)(torch.from_numpy(x.numpy()))
    np.testing.assert_allclose(got.detach().numpy(), want, atol=1e-5, rtol=1e-5)
    proto = codegen.onnx.to_model(g)
    assert sum(n.op_type == "Transpose" for n in proto.graph.node) <= 2
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


NHWC_OPS = ["CONV_2D-same", "CONV_2D-valid-stride-relu", "DEPTHWISE_CONV_2D", "MAX_POOL_2D-same"]


@pytest.mark.parametrize("case_id", NHWC_OPS)
def test_native_nhwc_ops_read_without_transposes(case_id):
    """A one-op .tflite (NHWC in and out) reads as one NHWC node; as PyTorch or ONNX it holds
    one transpose at the input and one at the output, and agrees with LiteRT."""
    from msc.ops.layout import channels_first, count_transposes
    from tests.frontend.test_frontend_tflite import CASES
    from tests.tflite_cases import build, feeds, run_onnx, run_torch

    (case,) = [c for c in CASES if c.id == case_id]
    g = msc.from_tflite(build(case))
    assert count_transposes(g) == 0
    assert [n.attrs["data_layout"] for n in g.nodes if n.op in ("conv", "max_pool")] == ["NHWC"]
    assert count_transposes(channels_first(g)) == 2
    pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")
    from tests.tflite_cases import run_litert

    arrays = feeds(case)
    want = run_litert(build(case), arrays)
    for got in (run_torch(g, arrays), run_onnx(g, arrays)):
        np.testing.assert_allclose(got[0], want[0], atol=case.atol, rtol=case.rtol)
