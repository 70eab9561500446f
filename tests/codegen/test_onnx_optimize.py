"""The ONNX codegen's export-time optimization pass (``codegen.onnx.optimize``, issue 34).

Each property is asserted of the optimized file and its opposite of the file written node for
node (``optimize=False``), so every assertion fails without the pass.
"""

from __future__ import annotations

import io
import warnings
from collections import Counter

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import codegen.onnx as conx  # noqa: E402
import msc  # noqa: E402
from codegen.onnx.model import ModelBuilder  # noqa: E402
from msc.cli import main  # noqa: E402


class _CNN(torch.nn.Module):
    """Conv + BatchNorm (with and without a conv bias), Linear + BatchNorm1d."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, bias=False)
        self.b2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        return self.bn(self.fc(x.flatten(2).mean(2)))


def _cnn():
    torch.manual_seed(0)
    m = _CNN().eval()
    for b in (m.b1, m.b2, m.bn):  # statistics that are not the identity
        b.running_mean.uniform_(-1, 1)
        b.running_var.uniform_(0.5, 2)
        b.weight.data.uniform_(0.5, 1.5)
        b.bias.data.uniform_(-0.5, 0.5)
    return m, (torch.randn(2, 3, 8, 8),)


def _llama(tied: bool = False):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        use_cache=False,
    )
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg).eval()
    return m, (torch.randint(0, 64, (1, 8)),)


def _graph(m, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return msc.from_torch(m, args)


def _ops(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node)


def _transposed_initializers(model: onnx.ModelProto) -> list[str]:
    inits = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "Transpose" and n.input[0] in inits]


def _bn_after_conv(model: onnx.ModelProto) -> list[str]:
    made = {o: n.op_type for n in model.graph.node for o in n.output}
    return [
        n.name
        for n in model.graph.node
        if n.op_type == "BatchNormalization" and made.get(n.input[0]) in ("Conv", "Gemm")
    ]


def _run(model: onnx.ModelProto, args) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # Without onnxruntime's own folding: the file as written is what runs.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(s.get_inputs(), args)}
    return s.run(None, feeds)[0]


def _eager(m, args) -> np.ndarray:
    with torch.no_grad():
        out = m(*args)
    return (out.logits if hasattr(out, "logits") else out).numpy()


def _check(m, args, plain: onnx.ModelProto, opt: onnx.ModelProto, weights=()) -> None:
    onnx.checker.check_model(opt, full_check=True)
    ops, raw = _ops(opt), _ops(plain)
    assert raw["Constant"] > 0 and ops["Constant"] == 0
    assert len(opt.graph.node) < len(plain.graph.node)
    # Constants became initializers; weights nothing reads any more are gone: the file holds
    # fewer tensors than it did as nodes and initializers, no constant twice, none unread
    # (the graph's weights stay apart even when equal: two zero biases are two parameters).
    inits = opt.graph.initializer
    assert len(inits) < len(plain.graph.initializer) + raw["Constant"]
    consts = [t for t in inits if t.name not in weights]
    assert len({(t.data_type, tuple(t.dims), t.raw_data) for t in consts}) == len(consts)
    read = {i for n in opt.graph.node for i in n.input}
    assert [t.name for t in inits if t.name not in read] == []
    want = _eager(m, args)
    np.testing.assert_allclose(_run(plain, args), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(opt, args), want, rtol=1e-5, atol=1e-5)


def test_cnn_batch_norms_fold_into_conv_and_gemm() -> None:
    m, args = _cnn()
    g = _graph(m, args)
    plain, opt = conx.to_model(g, optimize=False), conx.to_model(g)
    assert len(_bn_after_conv(plain)) == 3 and _bn_after_conv(opt) == []
    assert _ops(opt)["BatchNormalization"] == 0
    # The folded conv keeps its weight's name (torch.onnx's), the BatchNorm's output name.
    names = {t.name for t in opt.graph.initializer}
    assert {"c1.weight", "c1.bias", "c2.weight"} <= names
    assert not any(n.startswith(("b1.", "b2.", "bn.")) for n in names)
    assert {o.name for o in opt.graph.output} == {o.name for o in plain.graph.output}
    _check(m, args, plain, opt, set(g.weights))
    # Fewer initializers than the weights themselves: BatchNorm's four are gone.
    assert len(opt.graph.initializer) < len(plain.graph.initializer)


def test_llama_weights_pretransposed_square_as_pow_constants_folded() -> None:
    m, args = _llama()
    g = _graph(m, args)
    plain, opt = conx.to_model(g, optimize=False), conx.to_model(g)
    assert len(_transposed_initializers(plain)) >= 14 and _transposed_initializers(opt) == []
    sq = lambda p: [  # noqa: E731
        n for n in p.graph.node if n.op_type == "Mul" and n.input[0] == n.input[1]
    ]
    # RMSNorm's square (2 layers x 2 norms + the final one) as onnxruntime's matcher wants it.
    assert len(sq(plain)) == 5 and _ops(plain)["Pow"] == 0
    assert sq(opt) == [] and _ops(opt)["Pow"] == 5
    # The causal mask and the rotary tables are computed at export time (static sequence).
    for op in ("Range", "CumSum", "Cos", "Sin", "ConstantOfShape", "LessOrEqual"):
        assert _ops(plain)[op] > 0 and _ops(opt)[op] == 0, op
    _check(m, args, plain, opt, set(g.weights))


def test_tied_embedding_is_stored_once() -> None:
    m, args = _llama(tied=True)
    g = _graph(m, args)
    opt = conx.to_model(g)
    emb = m.model.embed_tokens.weight.detach().numpy()
    same = [
        t.name
        for t in opt.graph.initializer
        if tuple(t.dims) in (emb.shape, emb.shape[::-1])
        and np.array_equal(
            onnx.numpy_helper.to_array(t).reshape(-1),
            (emb if tuple(t.dims) == emb.shape else emb.T).reshape(-1),
        )
    ]
    assert len(same) == 1, same
    np.testing.assert_allclose(_run(opt, args), _eager(m, args), rtol=1e-5, atol=1e-5)


def test_equal_constants_are_shared_equal_weights_are_not() -> None:
    g = msc.Graph("g")
    x = g.add_input("x", msc.TensorType(msc.DType.FLOAT32, (2, 3)))
    a = g.add_weight("a", np.zeros(3, np.float32))
    b = g.add_weight("b", np.zeros(3, np.float32))
    c1 = g.op("constant", value=np.full(3, 5.0, np.float32))
    c2 = g.op("constant", value=np.full(3, 5.0, np.float32))
    y = g.op("add", g.op("mul", g.op("add", x, a), c1), g.op("mul", g.op("add", x, b), c2))
    g.set_outputs([y])
    opt = conx.to_model(g)
    names = [t.name for t in opt.graph.initializer]
    assert "a" in names and "b" in names and len(names) == 3, names
    assert _ops(opt)["Constant"] == 0 and _ops(conx.to_model(g, optimize=False))["Constant"] == 2


def test_optimize_false_writes_node_for_node() -> None:
    m, args = _cnn()
    g = _graph(m, args)
    plain = conx.to_model(g, optimize=False)
    builder = ModelBuilder(g)
    built = builder.run()
    assert builder.optimized == {}
    assert plain.SerializeToString() == built.SerializeToString()
    assert {t.name for t in plain.graph.initializer} == {w.name for w in conx.written_weights(g)}
    # Read back, it has the graph's nodes, one for one (the optimized file does not).
    ops = lambda graph: Counter(n.op for n in graph.nodes)  # noqa: E731
    written, again = ops(conx.as_written(g)), ops(msc.from_onnx(plain))
    assert again["batch_norm"] == written["batch_norm"] == 3
    assert again.total() == written.total()
    assert ops(msc.from_onnx(conx.to_model(g)))["batch_norm"] == 0


def test_save_with_external_data_writes_the_optimized_weights(tmp_path) -> None:
    m, args = _llama()
    g = _graph(m, args)
    p = conx.save(g, tmp_path / "opt.onnx", external_data=True)
    q = conx.save(g, tmp_path / "plain.onnx", external_data=True, optimize=False)
    model = onnx.load(str(p))
    assert _transposed_initializers(onnx.load(str(p), load_external_data=False)) == []
    assert (tmp_path / "opt.onnx.data").stat().st_size <= (
        tmp_path / "plain.onnx.data"
    ).stat().st_size
    want = _eager(m, args)
    np.testing.assert_allclose(_run(model, args), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(onnx.load(str(q)), args), want, rtol=1e-5, atol=1e-5)


def test_convert_checks_the_optimized_file_and_no_optimize_flag(tmp_path) -> None:
    m, args = _cnn()
    g = _graph(m, args)
    src = msc.save(g, tmp_path / "cnn.msc")
    r = msc.convert(src, tmp_path / "opt.onnx")
    assert r.ok and r.equivalent and r.structural is not None  # equivalent, not equal
    assert r.optimized["batch norms folded"] == 3
    assert _ops(onnx.load(str(tmp_path / "opt.onnx")))["BatchNormalization"] == 0

    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        code = main(["convert", str(src), "-o", str(tmp_path / "plain.onnx"), "--no-optimize"])
    assert code == 0, out.getvalue()
    assert _ops(onnx.load(str(tmp_path / "plain.onnx")))["BatchNormalization"] == 3
    with pytest.raises(msc.errors.MscError, match="onnx and tflite targets only"):
        msc.convert(src, tmp_path / "t", to="torch", optimize=False)


def test_pretransposed_weight_is_named_after_its_weight() -> None:
    m, args = _llama()
    g = _graph(m, args)
    opt = conx.to_model(g)
    names = {t.name for t in opt.graph.initializer}
    assert "model.layers.0.self_attn.q_proj.weight~T" in names, sorted(names)
    assert "model.layers.0.self_attn.q_proj.weight" not in names  # stored once, transposed
    read = {i for n in opt.graph.node for i in n.input}
    assert {n for n in names if n.endswith("~T")} <= read
    np.testing.assert_allclose(_run(opt, args), _eager(m, args), rtol=1e-5, atol=1e-5)


class _Wide(torch.nn.Module):
    """Eight 1 MiB Linear weights and eight 1 MiB conv weights, each under a BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.fcs = torch.nn.ModuleList(torch.nn.Linear(512, 512) for _ in range(8))
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(256, 256, 2, padding=1) for _ in range(8))
        self.bns = torch.nn.ModuleList(torch.nn.BatchNorm2d(256) for _ in range(8))

    def forward(self, x, y):
        for fc in self.fcs:
            x = torch.relu(fc(x))
        for conv, bn in zip(self.convs, self.bns):
            y = bn(conv(y))
        return x, y.mean((2, 3))


def test_save_writes_each_made_weight_as_it_is_made(tmp_path) -> None:
    # The pass hands each pre-transposed and BatchNorm-scaled weight to the data file as it
    # makes it: the 16 MiB it makes are never in memory together (holding them all was
    # stop 41's regression: BERT's save took 700 MB above the model).
    import tracemalloc

    torch.manual_seed(0)
    m = _Wide().eval()
    for b in m.bns:
        b.running_var.uniform_(0.5, 2)
    args = (torch.randn(1, 2, 512), torch.randn(1, 256, 3, 3))  # 3-d: MatMul, not Gemm
    g = _graph(m, args)
    conx.save(g, tmp_path / "warm.onnx", external_data=True)  # imports, caches
    tracemalloc.start()
    try:
        p = conx.save(g, tmp_path / "opt.onnx", external_data=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB traced while saving"

    model = onnx.load(str(p), load_external_data=False)
    names = {t.name: t for t in model.graph.initializer}
    made = [n for n in names if n.endswith("~T")] + [f"convs.{i}.weight" for i in range(8)]
    assert len(made) == 16
    for n in made:  # written out, not inline
        assert names[n].data_location == onnx.TensorProto.EXTERNAL and not names[n].raw_data
    assert _ops(model)["BatchNormalization"] == 0 and _transposed_initializers(model) == []
    loaded = onnx.load(str(p))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(loaded.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    got = s.run(None, {i.name: a.numpy() for i, a in zip(s.get_inputs(), args)})
    with torch.no_grad():
        want = m(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-4)


def test_a_stored_weight_read_by_a_later_fold_is_computed_again() -> None:
    # optimize_model's store takes a weight the pass made; a later rewrite that reads it
    # (here the BatchNorm fold of a Gemm whose weight was a folded Transpose) computes it
    # again instead of keeping it.
    from onnx import helper

    from codegen.onnx.optimize import optimize_model

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 8).astype(np.float32), np.zeros(8, np.float32)
    mean, var = rng.standard_normal(8).astype(np.float32), rng.uniform(0.5, 2, 8).astype(np.float32)
    inits = [
        onnx.numpy_helper.from_array(a, n)
        for a, n in ((w, "w"), (gamma, "g"), (beta, "b"), (mean, "m"), (var, "v"))
    ]
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("Gemm", ["x", "wt"], ["y"]),
        helper.make_node("BatchNormalization", ["y", "g", "b", "m", "v"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plain = model.SerializeToString()
    stored: list[np.ndarray] = []

    def store(arr):
        stored.append(np.array(arr))
        t = onnx.TensorProto()
        t.data_type = onnx.TensorProto.FLOAT
        t.dims.extend(arr.shape)
        t.data_location = onnx.TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", f"{len(stored) - 1}"
        return t

    done = optimize_model(model, store=store)
    assert done["nodes folded"] == 1 and done["batch norms folded"] == 1
    np.testing.assert_array_equal(stored[0], w.T)  # the Transpose, stored as it was made
    gemm = model.graph.node[0]
    final = {t.name: t for t in model.graph.initializer}[gemm.input[1]]
    k = int(final.external_data[0].value)
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    np.testing.assert_allclose(stored[k], w.T * scale, rtol=1e-6)  # read back: w.T again
    x = rng.standard_normal((2, 4)).astype(np.float32)
    ref = ort.InferenceSession(plain, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    b = {t.name: t for t in model.graph.initializer}[gemm.input[2]]
    got = x @ stored[k] + onnx.numpy_helper.to_array(b)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


PER_AXIS_SHARED = """msc format 1, ops 1
graph main {
  input %x: i8[1, 6, 6, 3]
  weight @w: f32[4, 3, 3, 3]
  %s: f32[3] = constant() {value = tensor(f32[3], [0.02, 0.05, 0.03])}
  %z: i8[3] = constant() {value = tensor(i8[3], [0, 4, -2])}
  %d: f32[1, 6, 6, 3] = dequantize(%x, %s, %z) {axis = 3}
  %c: f32[1, 4, 4, 4] = conv(%d, @w, _) {data_layout = "NHWC", dilation = [1, 1],
    kernel_layout = "OHWI", stride = [1, 1]}
  %r: f32[1, 6, 6, 3] = relu(%d)
  output %c, %r
}
"""


def test_a_per_axis_dequantize_moves_behind_its_transpose_with_its_axis() -> None:
    """An NHWC conv's input, dequantized per channel and read by a relu too: the layout
    Transpose goes onto the integers, its DequantizeLinear's axis 3 becomes 1, and the
    relu keeps the original dequantize. onnxruntime (all optimizations) agrees with the
    generated PyTorch; the re-import is the written graph up to that named rewrite."""
    from msc.analysis.diff import diff_graphs
    from tests.tflite_cases import run_torch

    g = msc.from_text(PER_AXIS_SHARED)
    rng = np.random.default_rng(0)
    g.weights["w"].set_data(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = ModelBuilder(g, conx.choose_opset(g)[0], optimize=True)
    proto = b.run()
    assert b.optimized["moves before dequantize"] == 1
    dq = {n.output[0]: n for n in proto.graph.node if n.op_type == "DequantizeLinear"}
    (t,) = [n for n in proto.graph.node if n.op_type == "Transpose" and n.input[0] == "x"]
    (moved,) = [n for n in dq.values() if n.input[0] == t.output[0]]
    assert [a.i for a in moved.attribute if a.name == "axis"] == [1]
    assert [a.i for a in dq["d"].attribute if a.name == "axis"] == [3]  # the relu's
    x = rng.integers(-128, 128, (1, 6, 6, 3)).astype(np.int8)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(sess.run(None, {"x": x}), run_torch(g, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    d = diff_graphs(conx.as_written(g), msc.from_onnx(proto))
    assert d.equivalent, d.verdict()
    assert "move of quantized integers -> move of the dequantized values x1 (B)" in d.verdict()


class _Pooled(torch.nn.Module):
    """A conv with a fresh BatchNorm and no bias, a squeeze-and-excitation gate (a pool a conv
    reads), and the features returned beside their global average (ResNetModel's outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(16)
        self.se = torch.nn.Conv2d(16, 16, 1)
        self.out = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = y * torch.sigmoid(self.se(torch.nn.functional.adaptive_avg_pool2d(y, 1)))
        y = torch.relu(self.out(y))
        return y, torch.nn.functional.adaptive_avg_pool2d(y, 1)


def _session_graph(model: onnx.ModelProto, path) -> onnx.ModelProto:
    """The graph onnxruntime's session runs (all its optimizations), as it writes it."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    opts.optimized_model_filepath = str(path)
    ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return onnx.load(str(path))


def test_zero_folded_bias_dropped_and_returned_value_pooled_as_reduce_mean(tmp_path) -> None:
    torch.manual_seed(0)
    m, args = _Pooled().eval(), (torch.randn(1, 3, 8, 8),)
    g = _graph(m, args)
    plain, opt = conx.to_model(g, optimize=False), conx.to_model(g)
    # A fresh BatchNorm shifts by zero: the folded conv has no bias (torch.onnx's has none).
    conv = next(n for n in opt.graph.node if n.op_type == "Conv" and n.input[0] == "x")
    assert list(conv.input) == ["x", "conv.weight"]
    # The pool of a returned value is ReduceMean; the gate's pool, read by a conv, is not.
    assert _ops(plain)["GlobalAveragePool"] == 2
    assert _ops(opt)["GlobalAveragePool"] == 1 and _ops(opt)["ReduceMean"] == 1
    s = ort.InferenceSession(opt.SerializeToString(), providers=["CPUExecutionProvider"])
    got = s.run(None, {s.get_inputs()[0].name: args[0].numpy()})
    with torch.no_grad():
        want = [t.numpy() for t in m(*args)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    r = msc.convert(msc.save(g, tmp_path / "pooled.msc"), tmp_path / "pooled.onnx")
    assert r.ok and r.equivalent
    assert r.optimized["returned values pooled as ReduceMean"] == 1

    # In onnxruntime's NCHWc layout the returned value is reordered to NCHW anyway; a pool on
    # the blocked layout took a second ReorderOutput of its own.
    ran = {k: _session_graph(f, tmp_path / f"{k}.ort.onnx") for k, f in [("p", plain), ("o", opt)]}
    reorders = {k: _ops(v)["ReorderOutput"] for k, v in ran.items()}
    if not any(n.domain == "com.microsoft.nchwc" for n in ran["p"].graph.node):
        pytest.skip("onnxruntime uses no NCHWc layout on this CPU")
    assert reorders["o"] == reorders["p"] - 1, reorders
    assert len(ran["o"].graph.node) < len(ran["p"].graph.node)
