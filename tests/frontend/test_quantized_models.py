"""Quantized models from onnxruntime's own tools through msc: QDQ kept as quantize /
dequantize ops and written back as QuantizeLinear / DequantizeLinear, outputs equal in
onnxruntime; the generated PyTorch computes the same values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import codegen.onnx
import codegen.torch
import msc
from msc.analysis.inspect import inspect_graph
from msc.ir import DType, Graph, TensorType
from msc.ops.decompose import decompose
from msc.ops.infer import InferError
from tests.torch_cases import MODEL_CASES, MissingDependency

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs and quantizes the models")
quantization = pytest.importorskip("onnxruntime.quantization", reason="onnxruntime.quantization")

QDQ = ("QuantizeLinear", "DequantizeLinear")


def _float_model(case: str, tmp_path) -> tuple[str, tuple]:
    try:
        module, args = MODEL_CASES[case]()[:2]
    except MissingDependency as e:
        pytest.skip(str(e))
    path = tmp_path / f"{case}.onnx"
    codegen.onnx.save(msc.from_torch(module, args), path, opset=17)
    return str(path), args


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self, args: tuple, names: list[str]) -> None:
        gen = torch.Generator().manual_seed(1)
        batches = []
        for _ in range(3):
            feed = {}
            for n, a in zip(names, args):
                if a.dtype.is_floating_point:
                    feed[n] = torch.randn(a.shape, generator=gen).numpy()
                else:
                    feed[n] = a.numpy()
            batches.append(feed)
        self._it = iter(batches)

    def get_next(self):
        return next(self._it, None)


def _feeds(path, args) -> dict:
    names = [i.name for i in ort.InferenceSession(path).get_inputs()]
    return {n: a.numpy() for n, a in zip(names, args)}


def _first(out) -> np.ndarray:
    if isinstance(out, dict):
        out = next(iter(out.values()))
    elif not isinstance(out, torch.Tensor):
        out = out[0]
    return out.detach().numpy()


def _run(model, feeds, fused: bool = True) -> np.ndarray:
    """onnxruntime's output; ``fused=False`` runs every node as written (QDQ in float), the
    semantics of the file, where the default fuses QDQ patterns into integer kernels whose
    requantization may round an element one step differently."""
    data = model if isinstance(model, str) else model.SerializeToString()
    so = ort.SessionOptions()
    if not fused:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, so).run(None, feeds)[0]


@pytest.mark.parametrize("case", ["small_cnn", "bert"])
def test_static_qdq_model_keeps_its_qdq_and_outputs(case, tmp_path):
    src, args = _float_model(case, tmp_path)
    qpath = str(tmp_path / "q.onnx")
    names = [i.name for i in ort.InferenceSession(src).get_inputs()]
    quantization.quantize_static(
        src, qpath, _Calibration(args, names), quant_format=quantization.QuantFormat.QDQ
    )
    q = onnx.load(qpath)
    want_counts = Counter(n.op_type for n in q.graph.node if n.op_type in QDQ)
    assert want_counts["QuantizeLinear"] > 0

    g = msc.from_onnx(qpath)
    ops = Counter(n.op for n in g.nodes)
    assert ops["quantize"] == want_counts["QuantizeLinear"]
    assert ops["dequantize"] == want_counts["DequantizeLinear"]
    out = codegen.onnx.to_model(g, opset=17)
    assert Counter(n.op_type for n in out.graph.node if n.op_type in QDQ) == want_counts

    feeds = _feeds(qpath, args)
    np.testing.assert_array_equal(_run(out, feeds), _run(qpath, feeds))
    np.testing.assert_array_equal(_run(out, feeds, fused=False), _run(qpath, feeds, fused=False))
    got = _first(codegen.torch.to_module(g)(*args))
    np.testing.assert_allclose(got, _run(qpath, feeds, fused=False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["small_cnn", "bert"])
def test_dynamic_quantized_model_runs_through_both_codegens(case, tmp_path):
    src, args = _float_model(case, tmp_path)
    qpath = str(tmp_path / "dq.onnx")
    quantization.quantize_dynamic(src, qpath, weight_type=quantization.QuantType.QInt8)
    assert any(n.op_type == "DynamicQuantizeLinear" for n in onnx.load(qpath).graph.node)
    g = msc.from_onnx(qpath)
    assert "quantize" in {n.op for n in g.nodes} and "dequantize" in {n.op for n in g.nodes}
    feeds = _feeds(qpath, args)
    want = _run(qpath, feeds)
    np.testing.assert_allclose(_run(codegen.onnx.to_model(g, opset=17), feeds), want, atol=1e-6)
    got = _first(codegen.torch.to_module(g)(*args))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------- quantize_dynamic against onnxruntime
# What msc's reading of quantize_dynamic's ops was found to get wrong, node by node against
# onnxruntime: MatMulInteger summed its int products in float32, which holds integers only up
# to 2**24 (a few units off past it: full-scale 8-bit operands pass it after ~260 terms); and
# DynamicQuantizeLinear of an all-zero tensor gave scale 1/255 where onnxruntime gives 1.
# DynamicQuantizeLinear's rounding and saturation agree bit for bit. What remains is not in
# these ops: a float op before a DynamicQuantizeLinear (LayerNorm, GELU, softmax) that
# onnxruntime and PyTorch compute an ulp apart moves the tensor's max, hence its scale, and
# rounds some elements one step apart; onnxruntime's own fused (default) and unfused runs of
# one file differ the same way.


def _run_dq(model, feeds, names=None, fused=False) -> list[np.ndarray]:
    data = model if isinstance(model, str) else model.SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not fused:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(names, feeds)


def test_matmul_integer_is_exact_past_float32_integers():
    k = 3072  # a BERT-base FFN's inner width
    gen = np.random.default_rng(0)
    b = gen.integers(0, 128, (k, 16)).astype(np.int8)  # products of one sign: sums past 2**24
    a = gen.integers(128, 256, (8, k)).astype(np.uint8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, ["m", k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["m", 16])],
        initializer=[numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.uint8(3), "az")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    exact = (a.astype(np.int64) - 3) @ b.astype(np.int64)  # the ONNX definition
    assert np.abs(exact).max() > 2**24
    want = _run_dq(model, {"a": a})[0]
    np.testing.assert_array_equal(want, exact)
    g = msc.from_onnx(model)
    np.testing.assert_array_equal(codegen.torch.to_module(g)(torch.from_numpy(a)).numpy(), want)
    np.testing.assert_array_equal(_run_dq(codegen.onnx.to_model(g), {"a": a})[0], want)


def test_dynamic_quantize_linear_matches_onnxruntime_bit_for_bit():
    graph = helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [
            helper.make_tensor_value_info("y", TensorProto.UINT8, ["n"]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("z", TensorProto.UINT8, []),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    module = codegen.torch.to_module(msc.from_onnx(model))
    gen = np.random.default_rng(0)
    cases = [np.zeros(5), np.full(5, 3.0), np.full(5, -2.0), [0.5, 255.5, 1.5], [-0.5, 254.5]]
    cases += [gen.standard_normal(int(gen.integers(1, 4000))) * 7 + 0.5 for _ in range(40)]
    for x in cases:
        x = np.asarray(x, np.float32)
        want = _run_dq(model, {"x": x})
        got = [t.numpy() for t in module(torch.from_numpy(x))]
        for g_, w in zip(got, want):
            np.testing.assert_array_equal(g_, w, err_msg=f"{x[:4]}")


def _export(module: torch.nn.Module, args: tuple, names: list[str], path: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, dynamo=False, input_names=names,
                          dynamic_axes={n: {0: "batch"} for n in names})  # fmt: skip


def test_quantize_dynamic_mlp_is_bit_exact(tmp_path):
    # A wide layer whose products share a sign (as trained layers' outlier features do): its
    # int32 sums pass 2**24. ReLU and Add are exact in both, so the outputs are equal.
    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(32, 4096)
            self.fc2 = torch.nn.Linear(4096, 16)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(0)
    mlp = MLP().eval()
    with torch.no_grad():
        mlp.fc1.bias.add_(6.0)  # fc2's int32 sums reach 5e7
        mlp.fc2.weight.abs_()
    x = torch.randn(4, 32)
    src, qpath = str(tmp_path / "mlp.onnx"), str(tmp_path / "mlp_dq.onnx")
    _export(mlp, (x,), ["x"], src)
    quantization.quantize_dynamic(src, qpath, weight_type=quantization.QuantType.QInt8)
    feeds = {"x": x.numpy()}
    want = _run_dq(qpath, feeds)[0]
    np.testing.assert_array_equal(_run_dq(qpath, feeds, fused=True)[0], want)
    g = msc.from_onnx(qpath)
    with torch.no_grad():
        np.testing.assert_array_equal(codegen.torch.to_module(g)(x).numpy(), want)
    np.testing.assert_array_equal(_run_dq(codegen.onnx.to_model(g), feeds)[0], want)


def test_quantize_dynamic_bert_is_as_close_as_onnxruntime_to_itself(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers builds BERT")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=2048,
                                  max_position_embeddings=64)  # fmt: skip
    bert = transformers.BertForMaskedLM(cfg).eval()
    with torch.no_grad():  # FFN sums near 2**24, as in a trained model's outlier features
        for layer in bert.bert.encoder.layer:
            layer.output.dense.weight.abs_()
            layer.intermediate.dense.bias.add_(4.0)
    ids = torch.randint(0, 64, (2, 16))
    mask = torch.ones_like(ids)
    src, qpath = str(tmp_path / "bert.onnx"), str(tmp_path / "bert_dq.onnx")
    _export(bert, (ids, {"attention_mask": mask}), ["input_ids", "attention_mask"], src)
    quantization.quantize_dynamic(src, qpath, weight_type=quantization.QuantType.QInt8)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    want = _run_dq(qpath, feeds)[0]
    spread = np.abs(_run_dq(qpath, feeds, fused=True)[0] - want).max()
    g = msc.from_onnx(qpath)
    with torch.no_grad():
        got = _first(codegen.torch.to_module(g)(ids, mask))
    # The tolerance: how far onnxruntime's fused run of the file is from its unfused run
    # (one rounding step here and there, see above), and float32 rounding where no step moved.
    assert np.abs(got - want).max() <= max(spread, 1e-5), (np.abs(got - want).max(), spread)
    np.testing.assert_array_equal(_run_dq(codegen.onnx.to_model(g), feeds)[0], want)


def _blockwise_model() -> onnx.ModelProto:
    """A block-wise int4 weight (block_size 32 along K, int4 zero points) feeding a MatMul:
    the layout of blockwise-quantized LLM exports."""
    rng = np.random.default_rng(0)
    k, n, block = 64, 16, 32
    w = rng.integers(-8, 8, size=(k, n)).astype(np.int8)
    scale = (rng.random((k // block, n)) * 0.1 + 0.01).astype(np.float32)
    zp = rng.integers(-2, 3, size=(k // block, n)).astype(np.int8)
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=block),
        helper.make_node("MatMul", ["x", "wf"], ["y"]),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.INT4, [k, n], w.ravel().tolist()),
        numpy_helper.from_array(scale, "s"),
        helper.make_tensor("z", TensorProto.INT4, [k // block, n], zp.ravel().tolist()),
    ]
    g = helper.make_graph(
        nodes,
        "blockwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])],
        initializer=inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_blockwise_dequantize_through_onnx_and_torch():
    src = _blockwise_model()
    g = msc.from_onnx(src)
    (dq,) = [n for n in g.nodes if n.op == "dequantize"]
    assert dq.attrs == {"axis": 0, "block_size": 32}
    out = codegen.onnx.to_model(g, opset=21)
    assert [n.op_type for n in out.graph.node] == ["DequantizeLinear", "MatMul"]
    x = np.random.default_rng(1).random((2, 64), dtype=np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(src.SerializeToString(), so).run(None, {"x": x})[0]
    got = ort.InferenceSession(out.SerializeToString(), so).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(_run_exact_fused(out, {"x": x}), want, rtol=1e-6, atol=1e-5)
    t = codegen.torch.to_module(g)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(t, want, rtol=1e-6, atol=1e-6)


def _run_exact_fused(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    """onnxruntime with its optimizations, which fuse DequantizeLinear (4/8-bit, block-wise)
    + MatMul into MatMulNBits; the fused kernel quantizes the activations to int8 unless
    the session asks for accuracy level 0 (its default is 4), so the float result is kept."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    return ort.InferenceSession(model.SerializeToString(), so).run(None, feeds)[0]


def _nbits_model(k: int, n: int, bits: int, symmetric: bool, hqq: bool) -> onnx.ModelProto:
    """x @ W + b quantized by onnxruntime's MatMulNBitsQuantizer (block size 16)."""
    from onnxruntime.quantization import matmul_nbits_quantizer as mnq

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "bias"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "nbits",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, n])],
        initializer=inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    if hqq:
        q = mnq.MatMulNBitsQuantizer(model, algo_config=mnq.HQQWeightOnlyQuantConfig(16, bits))
    else:
        q = mnq.MatMulNBitsQuantizer(model, bits=bits, block_size=16, is_symmetric=symmetric)
    q.process()
    out = q.model.model
    out.ir_version = 10  # the quantizer stamps onnx's newest IR, which onnxruntime may not read
    return out


@pytest.mark.parametrize(
    "k, bits, symmetric, hqq",
    [(48, 4, False, False), (40, 4, True, False), (40, 8, False, False), (48, 2, False, False),
     (40, 4, False, True)],
    ids=["u4-zp", "u4-sym-ragged", "u8-ragged", "u2", "hqq-float-zp-ragged"],
)  # fmt: skip
def test_matmul_nbits_becomes_blockwise_dequantize(k, bits, symmetric, hqq):
    """com.microsoft MatMulNBits (packed codes, per-block scales, packed or float zero
    points, K a block multiple or not) reads as a block-wise dequantize of an unpacked
    [K, N] weight feeding a matmul; written back it is DequantizeLinear -> MatMul, which
    onnxruntime fuses into MatMulNBits again."""
    src = _nbits_model(k, 24, bits, symmetric, hqq)
    assert [n.op_type for n in src.graph.node][0] == "MatMulNBits"
    g = msc.from_onnx(src)
    (dq,) = [n for n in g.nodes if n.op == "dequantize"]
    assert dq.inputs[0].dtype is {2: DType.UINT2, 4: DType.UINT4, 8: DType.UINT8}[bits]
    assert dq.attrs == {"axis": 0, "block_size": 16}
    x = np.random.default_rng(1).standard_normal((2, 3, k)).astype(np.float32)
    want = ort.InferenceSession(src.SerializeToString()).run(None, {"x": x})[0]
    got = codegen.torch.to_module(g)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out = codegen.onnx.to_model(g)
    assert Counter(n.op_type for n in out.graph.node)["DequantizeLinear"] == 1
    np.testing.assert_allclose(_run(out, {"x": x}, fused=False), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run_exact_fused(out, {"x": x}), want, rtol=1e-5, atol=1e-5)


def test_matmul_nbits_with_act_order_is_reported():
    src = _nbits_model(48, 8, 4, False, False)
    node = src.graph.node[0]
    k = 48
    order = np.arange(k)[::-1] // 16  # a g_idx that permutes K
    src.graph.initializer.append(numpy_helper.from_array(order.astype(np.int32), "g_idx"))
    while len(node.input) < 4:
        node.input.append("")
    node.input.append("g_idx")
    with pytest.raises(msc.errors.MscError, match="MatMulNBits.*g_idx"):
        msc.from_onnx(src)


# ---------------------------------------------------------------------------- the ops
F32 = DType.FLOAT32


def _reference_quantize(x, scale, zp, lo, hi):
    return np.clip(np.round(x / scale) + zp, lo, hi)


@pytest.mark.parametrize("layout", ["tensor", "axis", "block"])
@pytest.mark.parametrize("qtype", [DType.INT8, DType.UINT8, DType.INT4])
def test_decomposition_computes_onnx_semantics(layout, qtype):
    """The arithmetic every target without native QDQ runs is ONNX's, exactly."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    x[0, :3] = [0.5, 1.5, -2.5]  # ties round to even
    lo, hi = {DType.INT8: (-128, 127), DType.UINT8: (0, 255), DType.INT4: (-8, 7)}[qtype]
    shape = {"tensor": (), "axis": (6,), "block": (4, 2)}[layout]
    scale = np.asarray(rng.random(shape) * 0.05 + 0.01, dtype=np.float32)
    zp = np.asarray(rng.integers(lo // 2, hi // 2 + 1, size=shape)).astype(qtype.to_numpy())
    attrs = {"axis": 1, "block_size": 3 if layout == "block" else 0}
    g = Graph("q")
    xv = g.add_input("x", TensorType(F32, x.shape))
    s, z = g.add_weight("s", scale), g.add_weight("z", zp)
    q = g.op("quantize", xv, s, z, dtype=qtype, **attrs)
    g.set_outputs([q, g.op("dequantize", q, s, z, **attrs)])
    spread = lambda t: np.repeat(t, 3, 1) if layout == "block" else t  # noqa: E731
    want_q = _reference_quantize(x, spread(scale), spread(zp).astype(np.float32), lo, hi)
    want_dq = (want_q - spread(zp).astype(np.float32)) * spread(scale)
    lowered = decompose(g)
    assert not {n.op for n in lowered.nodes} & {"quantize", "dequantize"}
    mod = codegen.torch.to_module(g)
    got_q, got_dq = (t.detach().numpy() for t in mod(torch.from_numpy(x)))
    np.testing.assert_array_equal(got_q.astype(np.float32), want_q)
    np.testing.assert_allclose(got_dq, want_dq, rtol=1e-6, atol=1e-7)


def test_schema_checks_the_scale_layout():
    g = Graph("bad")
    x = g.add_input("x", TensorType(F32, (4, 6)))
    with pytest.raises(InferError, match="5 elements for dim 1"):
        g.op("quantize", x, g.add_weight("s", np.ones(5, np.float32)), None, dtype=DType.INT8)
    with pytest.raises(InferError, match="block-wise scale dim 1"):
        g.op(
            "quantize",
            x,
            g.add_weight("b", np.ones((4, 3), np.float32)),
            None,
            dtype=DType.INT8,
            block_size=4,
        )
    with pytest.raises(InferError, match="not a quantized type"):
        g.op("quantize", x, g.add_weight("t", np.ones((), np.float32)), None, dtype=F32)


def test_onnx_opset_without_per_axis_qdq_uses_the_decomposition():
    """Per-axis DequantizeLinear needs opset 13: at 12 the node is lowered, same values."""
    rng = np.random.default_rng(2)
    w = rng.integers(-100, 100, size=(3, 5)).astype(np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=1)]
    nodes.append(helper.make_node("MatMul", ["x", "wf"], ["y"]))
    g = helper.make_graph(
        nodes,
        "axis",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        initializer=[
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array((rng.random(5) * 0.1).astype(np.float32), "s"),
        ],
    )
    src = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    m = msc.from_onnx(src)
    old = codegen.onnx.to_model(m, opset=12)
    assert "DequantizeLinear" not in {n.op_type for n in old.graph.node}
    x = rng.random((2, 3), dtype=np.float32)
    np.testing.assert_allclose(
        _run(old, {"x": x}, fused=False), _run(src, {"x": x}, fused=False), rtol=1e-6
    )


def test_inspect_counts_quantized_weights_by_dtype():
    r = inspect_graph(msc.from_onnx(_blockwise_model()))
    assert r.params_by_dtype["i4"]["count"] == 64 * 16 + 2 * 16
    # int4 is stored two to a byte.
    assert r.params_by_dtype["i4"]["bytes"] == (64 * 16 + 2 * 16) // 2


# The ops onnxruntime's QOperator format writes for each model (beyond Q/DQ at the borders).
QOPERATOR_OPS = {
    "small_cnn": {("", "QLinearConv"), ("com.microsoft", "QLinearAdd")},
    "mlp_mixer": {("", "QLinearMatMul"), ("com.microsoft", "QLinearMul")},
    "transformer": {("", "QLinearMatMul"), ("com.microsoft", "QLinearSoftmax")},
}


@pytest.mark.parametrize("case", sorted(QOPERATOR_OPS))
def test_qoperator_model_becomes_qdq(case, tmp_path):
    """quantize_static's QOperator format (QLinearConv, QLinearMatMul, com.microsoft
    QLinearAdd / QLinearMul / QLinearSoftmax / QLinearGlobalAveragePool / QGemm) reads as
    dequantize -> float op -> quantize and is written back as QDQ, which onnxruntime fuses
    to the same result."""
    src, args = _float_model(case, tmp_path)
    qpath = str(tmp_path / "qop.onnx")
    names = [i.name for i in ort.InferenceSession(src).get_inputs()]
    quantization.quantize_static(
        src, qpath, _Calibration(args, names), quant_format=quantization.QuantFormat.QOperator
    )
    kinds = {(n.domain, n.op_type) for n in onnx.load(qpath).graph.node}
    assert kinds >= QOPERATOR_OPS[case]
    g = msc.from_onnx(qpath)
    assert not any("::" in n.op for n in g.nodes)
    out = codegen.onnx.to_model(g, opset=17)
    assert {n.op_type for n in out.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    feeds = _feeds(qpath, args)
    np.testing.assert_allclose(_run(out, feeds), _run(qpath, feeds), rtol=0, atol=1e-6)
    got = _first(codegen.torch.to_module(g)(*args))
    np.testing.assert_allclose(got, _run(out, feeds, fused=False), rtol=1e-5, atol=1e-5)
