"""Complex tensors and the FFT family in the PyTorch frontend, beyond the op-case table:
dynamic shapes, complex graph inputs, what is reported when a complex use has no converter."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402
from msc.errors import UnsupportedOpsError  # noqa: E402
from msc.frontend.torch.coverage import UNSUPPORTED, supported_ops  # noqa: E402
from tests.torch_cases import RotaryAttention, _seed  # noqa: E402


def test_complex_rotary_with_dynamic_batch_and_sequence() -> None:
    """Llama-style complex rotary embeddings with symbolic batch and sequence: the graph
    carries the complex tensors as real pairs; generated PyTorch and onnxruntime match eager
    (atol = rtol = 1e-4: the attention's float32 sums are ordered differently) at sizes other
    than the example's."""
    ort = pytest.importorskip("onnxruntime")
    from torch.export import Dim

    import codegen.onnx as conx

    m = _seed(RotaryAttention())
    dyn = {"x": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=16)}}
    g = msc.from_torch(m, (torch.randn(2, 10, 32),), dynamic_shapes=dyn)
    complex_dtypes = (msc.DType.COMPLEX64, msc.DType.COMPLEX128)
    assert not any(v.dtype in complex_dtypes for n in g.nodes for v in n.outputs)
    gen = ct.to_module(g)
    sess = ort.InferenceSession(conx.to_model(g).SerializeToString())
    for shape in [(3, 7, 32), (1, 16, 32)]:
        x = torch.randn(shape)
        with torch.no_grad():
            want = m(x).numpy()
            got = gen(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], want, rtol=1e-4, atol=1e-4)


class _ComplexIO(torch.nn.Module):
    def forward(self, z: torch.Tensor, w: torch.Tensor):
        return z * w + 1, torch.fft.ifft(z).abs()


def test_complex_graph_inputs_and_outputs_are_real_pairs() -> None:
    z, w = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4)
    g = msc.from_torch(_ComplexIO(), (z, w))
    assert [str(v.type) for v in g.inputs] == ["f32[3, 4, 2]", "f32[3, 4]"]
    assert [str(v.type) for v in g.outputs] == ["f32[3, 4, 2]", "f32[3, 4]"]
    got = ct.to_module(g)(torch.view_as_real(z), w)
    want = _ComplexIO()(z, w)
    torch.testing.assert_close(got[0], torch.view_as_real(want[0]), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got[1], want[1], rtol=1e-6, atol=1e-6)


def test_complex_weights_are_stored_as_pairs() -> None:
    g = msc.from_torch(_seed(RotaryAttention()), (torch.randn(2, 10, 32),))
    w = g.weights["freqs_cis"]
    assert str(w.type) == "f32[16, 4, 2]"


class _ComplexMatmul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.fft.fft(a) @ torch.fft.fft(b))


def test_complex_use_without_converter_is_reported() -> None:
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_torch(_ComplexMatmul(), (torch.randn(3, 3), torch.randn(3, 3)))
    assert "no converter for complex tensors" in str(e.value)


def test_fft_ops_are_listed_as_supported() -> None:
    ops = set(supported_ops())
    keys = ("aten.fft_rfft.default", "aten.fft_irfftn.default", "aten._fft_r2c.default",
            "aten._fft_c2r.default", "aten._fft_c2c.default", "aten.stft.default",
            "aten.view_as_complex.default", "aten.polar.default",
            "aten.hann_window.default")  # fmt: skip
    for k in keys:
        assert k in ops, k
        assert k not in UNSUPPORTED, k
