"""PyTorch 2 export quantization (torchao's quantize_pt2e) through msc: the
quantized_decomposed ops become quantize / dequantize, the generated PyTorch computes what the
quantized module computes, and the ONNX file carries one QuantizeLinear / DequantizeLinear per
quantize / dequantize and agrees in onnxruntime."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
import torch

import codegen.onnx
import codegen.torch
import msc
from msc.errors import UnsupportedOpsError
from tests.torch_cases import MODEL_CASES

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported models")
pt2e = pytest.importorskip(
    "torchao.quantization.pt2e.quantize_pt2e", reason="torchao provides quantize_pt2e"
)
x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")

QD = torch.ops.quantized_decomposed


def _quantized(module: torch.nn.Module, args: tuple, dynamic: bool) -> torch.export.ExportedProgram:
    """The module quantized as a user of PT2E does: export, prepare with the x86 quantizer,
    calibrate, convert, export again."""
    gm = torch.export.export(module.eval(), args).module()
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config(is_dynamic=dynamic))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = pt2e.prepare_pt2e(gm, quantizer)
        gen = torch.Generator().manual_seed(3)
        for _ in range(3):
            prepared(*(torch.randn(a.shape, generator=gen) for a in args))
        converted = pt2e.convert_pt2e(prepared)
    return torch.export.export(converted, args)


def _qdq_calls(ep: torch.export.ExportedProgram) -> Counter:
    c = Counter()
    for n in ep.graph.nodes:
        if n.op == "call_function" and str(n.target).startswith("quantized_decomposed."):
            name = str(n.target).split(".")[1]
            if name.startswith(("quantize_", "dequantize_")):
                c[name.split("_")[0]] += 1
    return c


def _ort(model, feeds: dict) -> np.ndarray:
    """onnxruntime running every node as written (no QDQ fusion into integer kernels)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so).run(None, feeds)[0]


def _small_cnn() -> tuple[torch.nn.Module, tuple]:
    module, args = MODEL_CASES["small_cnn"]()[:2]
    return module, args


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


# The x86 quantizer's dynamic mode quantizes linear layers only: no dynamic CNN.
@pytest.mark.parametrize(
    "model, dynamic",
    [("small_cnn", False), ("mlp", False), ("mlp", True)],
    ids=["small_cnn-static", "mlp-static", "mlp-dynamic"],
)
def test_pt2e_model_through_msc(model, dynamic):
    torch.manual_seed(0)
    if model == "small_cnn":
        module, args = _small_cnn()
    else:
        module, args = _Mlp(), (torch.randn(3, 16),)
    ep = _quantized(module, args, dynamic)
    calls = _qdq_calls(ep)
    assert calls["quantize"] >= 1 and calls["dequantize"] >= 2
    expected = ep.module()(*args).detach().numpy()

    g = msc.from_exported_program(ep)
    ops = Counter(n.op for n in g.nodes)
    assert (ops["quantize"], ops["dequantize"]) == (calls["quantize"], calls["dequantize"])

    # Generated PyTorch: the same arithmetic as torch's quantized_decomposed kernels.
    got = codegen.torch.to_module(g)(*args).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)

    model_proto = codegen.onnx.to_model(g)
    onnx_ops = Counter(n.op_type for n in model_proto.graph.node)
    assert onnx_ops["QuantizeLinear"] == calls["quantize"]
    assert onnx_ops["DequantizeLinear"] == calls["dequantize"]
    names = [i.name for i in model_proto.graph.input]
    out = _ort(model_proto, {n: a.numpy() for n, a in zip(names, args)})
    # ONNX quantizes as x / scale, torch as x * (1 / scale): a tie may round one step apart,
    # which moves an output by about one activation step times a weight; 1e-3 covers it here.
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-3)


class _Grouped(torch.nn.Module):
    """Weight-only 4-bit groups held in int8 (the layout of ExecuTorch's 8da4w) and per-token
    activations with a symmetric range, written with the quantized_decomposed ops directly."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(5)
        w = torch.randn(8, 32, generator=gen)
        scales = w.reshape(8, 4, 8).abs().amax(-1) / 7
        self.register_buffer("scales", scales)
        self.register_buffer("zeros", torch.zeros(8, 4, dtype=torch.int64))
        q = QD.quantize_per_channel_group(w, scales, self.zeros, -8, 7, torch.int8, 8)
        self.register_buffer("qweight", q)

    def forward(self, x):
        w = QD.dequantize_per_channel_group(
            self.qweight, self.scales, self.zeros, -8, 7, torch.int8, 8, torch.float32
        )
        s, z = QD.choose_qparams_symmetric.tensor(x, -127, 127, 1e-5, torch.int8)
        xq = QD.quantize_per_tensor.tensor(x, s, z, -127, 127, torch.int8)
        xd = QD.dequantize_per_tensor.tensor(xq, s, z, -127, 127, torch.int8)
        ts = torch.full((x.shape[0], 1), 0.05)
        tz = torch.zeros(x.shape[0], 1, dtype=torch.int64)
        t = QD.quantize_per_token(xd, ts, tz, -128, 127, torch.int8)
        td = QD.dequantize_per_token(t, ts, tz, -128, 127, torch.int8, torch.float32)
        return torch.nn.functional.linear(td, w)


def test_grouped_and_per_token_quantization():
    module, x = _Grouped(), torch.randn(3, 32) * 4
    expected = module(x)
    g = msc.from_torch(module, (x,))
    blocks = [n for n in g.nodes if n.op in ("quantize", "dequantize") and n.attrs["block_size"]]
    assert sorted(n.attrs["block_size"] for n in blocks) == [8, 32, 32]
    # quant range [-127, 127] inside int8's: the quantized integers are clamped to it
    assert any(n.op == "clamp" and n.inputs[0].producer.op == "quantize" for n in g.nodes)
    got = codegen.torch.to_module(g)(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    model = codegen.onnx.to_model(g)
    np.testing.assert_allclose(_ort(model, {"x": x.numpy()}), expected.numpy(), rtol=0, atol=1e-4)


def test_unsupported_quantized_dtype_is_reported():
    class Fp8(torch.nn.Module):
        def forward(self, x):
            return QD.quantize_per_tensor(x, 0.1, 0, -8, 7, torch.float8_e4m3fn)

    with pytest.raises(UnsupportedOpsError, match="quantize_per_tensor.*float8"):
        msc.from_torch(Fp8(), (torch.randn(4),))
