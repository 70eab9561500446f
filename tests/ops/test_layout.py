"""Layout attributes, ``to_layout`` and ``sink_transposes``: outputs kept, transposes counted.

Every model is checked two ways: numerically (the rewritten graph, emitted by codegen.torch or
run in onnxruntime through codegen.onnx, against the source's eager outputs) and by counting
transposes (with the pass the count is at the boundary; without it, higher)."""

from __future__ import annotations

import numpy as np
import pytest

import msc
from msc.ir.dtype import DType
from msc.ir.graph import Graph
from msc.ir.types import TensorType
from msc.ops.layout import (
    channels_first,
    count_transposes,
    fold_batch_norm,
    sink_transposes,
    to_layout,
)

torch = pytest.importorskip("torch")
nn = torch.nn


class TinyCNN(nn.Module):
    """conv-bn-relu-pool-linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(x.mean((2, 3)))


class Branchy(nn.Module):
    """A depthwise conv, a residual add with a scaled branch, a concat, an avg pool, a
    channel-wise constant and an image output."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.b = nn.Conv2d(16, 6, 1)
        self.pool = nn.AvgPool2d(2)
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 6).reshape(6, 1, 1))

    def forward(self, x):
        y = torch.relu(self.a(x))
        z = torch.sigmoid(self.dw(y)) * 2.0 + y
        c = torch.cat([y, z], dim=1)
        return self.pool(torch.tanh(self.b(c)) * self.gain)


class Conv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv1d(3, 5, 3, stride=2)

    def forward(self, x):
        return torch.relu(self.c(x)).sum(-1)


class TfPadded(nn.Module):
    """TF-style "same" padding written as an explicit asymmetric pad before a strided conv and
    a depthwise conv (transformers' MobileNetV2 with tf_padding)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 1)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, groups=8)
        self.b = nn.Conv2d(8, 6, 3)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.a(x))
        y = torch.nn.functional.relu6(self.dw(torch.nn.functional.pad(y, (0, 1, 0, 1))))
        y = self.b(torch.nn.functional.pad(y, (1, 1, 1, 1), value=0.5))
        return y.mean((2, 3))


class Conv3d(nn.Module):
    """Video-style 3-d convs: a padded one (SAME for its size), a strided dilated one with
    explicit pads (a PAD before CONV_3D in TFLite), and a volume output."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv3d(3, 6, 3, padding=1)
        self.b = nn.Conv3d(6, 4, (1, 3, 3), stride=(1, 2, 2), padding=(0, 2, 2), dilation=2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * 0.5


MODELS = {
    "tiny_cnn": (TinyCNN, (2, 3, 16, 16), 1),  # one changed input, a [N, 10] output
    "tf_padded": (TfPadded, (1, 3, 16, 16), 1),  # pads sink with the transposes
    "branchy": (Branchy, (1, 4, 8, 8), 2),  # one changed input, one changed output
    "conv1d": (Conv1d, (2, 3, 11), 1),
    "conv3d": (Conv3d, (2, 3, 4, 9, 10), 2),  # one changed input, one changed output
}


def _model(key: str):
    cls, shape, _ = MODELS[key]
    torch.manual_seed(0)
    m = cls().eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-1, 1)
                mod.running_var.uniform_(0.5, 2.0)
    x = torch.randn(*shape)
    return m, x


@pytest.mark.parametrize("key", sorted(MODELS))
def test_nhwc_keeps_outputs_and_leaves_only_boundary_transposes(key):
    m, x = _model(key)
    g = msc.from_torch(m, (x,))
    unsunk = to_layout(fold_batch_norm(g), "NHWC")
    h = sink_transposes(unsunk)
    boundary = MODELS[key][2]
    assert count_transposes(h) <= boundary
    assert count_transposes(unsunk) > boundary  # without the sinking, more
    for n in h.nodes:  # none inside: every transpose reads a graph input or feeds an output
        if n.op == "transpose":
            assert n.inputs[0] in h.inputs or n.output in h.outputs
    assert all(n.attrs["data_layout"] == "NHWC" for n in h.nodes if n.op == "conv")
    # the NHWC graph, emitted as torch (brought back to NCHW there), computes the same
    import codegen.torch

    want = m(x).detach().numpy()
    got = codegen.torch.to_module(h)(x).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert count_transposes(channels_first(h)) == 0
    assert msc.structural_equal(msc.from_text(msc.to_text(h)), h, weights="types")


@pytest.mark.parametrize("kernel_layout", ["OHWI", "IHWO"])
@pytest.mark.parametrize("key", sorted(MODELS))
def test_nhwc_graph_runs_in_onnxruntime(key, kernel_layout):
    ort = pytest.importorskip("onnxruntime")
    import codegen.onnx

    m, x = _model(key)
    g = fold_batch_norm(msc.from_torch(m, (x,)))
    h = sink_transposes(to_layout(g, "NHWC", kernel_layout=kernel_layout))
    assert all(n.attrs["data_layout"] == "NHWC" for n in h.nodes if n.op == "conv")
    proto = codegen.onnx.to_model(h)
    assert sum(n.op_type == "Transpose" for n in proto.graph.node) == 0
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, m(x).detach().numpy(), atol=1e-5, rtol=1e-5)


def test_defaults_not_printed_and_layouts_round_trip():
    m, x = _model("tiny_cnn")
    g = msc.from_torch(m, (x,))
    text = msc.to_text(g)
    assert "data_layout" not in text and "kernel_layout" not in text
    h = to_layout(g, "NHWC")
    t2 = msc.to_text(h)
    assert 'data_layout = "NHWC"' in t2 and 'kernel_layout = "OHWI"' in t2
    assert msc.to_text(msc.from_text(t2)) == t2


def test_shape_inference_honours_layouts():
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (1, 10, 12, 3)))
    w = g.add_weight("w", np.zeros((8, 3, 3, 3), np.float32))  # OHWI
    y = g.op("conv", x, w, None, stride=[2, 2], data_layout="NHWC", kernel_layout="OHWI")
    assert y.type.shape == (1, 4, 5, 8)
    p = g.op("max_pool", y, kernel=[2, 2], data_layout="NHWC")
    assert p.type.shape == (1, 2, 2, 8)
    a = g.op("avg_pool", x, kernel=[3, 3], stride=[1, 1], data_layout="NHWC")
    assert a.type.shape == (1, 8, 10, 3)
    with pytest.raises(msc.errors.MscError):
        g.op("conv", x, w, None, data_layout="NWHC")


PERMS = [[0, 2, 3, 1], [0, 3, 1, 2], [3, 2, 1, 0], [1, 0, 3, 2]]


@pytest.mark.parametrize("p", PERMS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sinking_through_elementwise_concat_reduce(p, keepdims):
    """transpose -> unary -> add(constant) -> concat -> reduce -> transpose back: the
    transposes move to the end (or vanish) and the outputs are unchanged."""
    import codegen.torch

    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3, 4, 5)))
    t = g.op("transpose", x, perm=p)
    shape = [(2, 3, 4, 5)[i] for i in p]
    c = np.arange(shape[-1], dtype=np.float32).reshape(1, shape[-1])
    k = g.op("constant", value=c)
    a = g.op("add", g.op("relu", t), k)
    cat = g.op("concat", a, g.op("exp", t), axis=1)
    r = g.op("reduce_sum", cat, axes=[2], keepdims=keepdims)
    g.set_outputs([r])
    h = sink_transposes(g)
    assert count_transposes(h) <= 1
    assert all(n.op != "transpose" or n.output in h.outputs for n in h.nodes)
    xs = torch.randn(2, 3, 4, 5)
    want = codegen.torch.to_module(g)(xs)
    got = codegen.torch.to_module(h)(xs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("p", PERMS)
def test_inverse_pairs_cancel(p):
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3, 4, 5)))
    inv = [p.index(i) for i in range(4)]
    y = g.op("transpose", g.op("sigmoid", g.op("transpose", x, perm=p)), perm=inv)
    g.set_outputs([y])
    assert count_transposes(g) == 2
    h = sink_transposes(g)
    assert count_transposes(h) == 0
    assert [n.op for n in h.nodes] == ["sigmoid"]


@pytest.mark.parametrize("key", ["tiny_cnn", "branchy"])
def test_nhwc_graph_builds_in_relax(key):
    pytest.importorskip("tvm", reason="TVM (the relax extra) is not installed")
    import codegen.relax

    m, x = _model(key)
    h = sink_transposes(to_layout(fold_batch_norm(msc.from_torch(m, (x,))), "NHWC"))
    f = codegen.relax.build(h, target="llvm")
    out = f(x.numpy())
    got = out[0] if isinstance(out, (list, tuple)) else out
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    np.testing.assert_allclose(got, m(x).detach().numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel_layout", ["OHWI", "IHWO"])
def test_conv_cost_does_not_depend_on_layout(kernel_layout):
    from msc.analysis.cost import node_cost

    m, x = _model("branchy")
    g = msc.from_torch(m, (x,))
    h = to_layout(g, "NHWC", kernel_layout=kernel_layout)
    want = [str(node_cost(n)) for n in g.nodes if n.op == "conv"]
    got = [str(node_cost(n)) for n in h.nodes if n.op == "conv"]
    assert got == want


def _numpy_run(g: Graph, x: np.ndarray) -> np.ndarray:
    """The few ops the property test builds, in numpy (independent of every codegen)."""
    env = {id(g.inputs[0]): x}
    for n in g.nodes:
        a = [env[id(v)] if id(v) in env else None for v in n.inputs]
        if n.op == "transpose":
            y = np.transpose(a[0], n.attrs["perm"])
        elif n.op == "constant":
            y = np.asarray(n.attrs["value"])
        elif n.op == "relu":
            y = np.maximum(a[0], 0)
        elif n.op == "add":
            y = a[0] + a[1]
        elif n.op == "reshape":
            y = a[0].reshape(n.attrs["shape"])
        elif n.op == "reduce_sum":
            y = a[0].sum(tuple(n.attrs["axes"]), keepdims=n.attrs["keepdims"])
        else:  # pragma: no cover
            raise AssertionError(n.op)
        env[id(n.output)] = y
    return env[id(g.outputs[0])]


def test_sinking_keeps_values_for_any_permutations():
    """Random chains of transposes, relu, constant adds and reductions: the sunk graph
    computes the same (numpy), and holds at most one transpose, at the output."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    perms = st.permutations(list(range(4)))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(perms, st.booleans()), min_size=1, max_size=4), st.booleans())
    def check(steps, keepdims):
        g = Graph("g")
        v = g.add_input("x", TensorType(DType.FLOAT32, (2, 3, 4, 5)))
        for perm, with_const in steps:
            v = g.op("relu", g.op("transpose", v, perm=list(perm)))
            if with_const:
                c = np.arange(v.type.shape[-1], dtype=np.float32)
                v = g.op("add", v, g.op("constant", value=c))
        v = g.op("reduce_sum", v, axes=[1], keepdims=keepdims)
        g.set_outputs([v])
        h = sink_transposes(g)
        assert count_transposes(h) <= 1
        assert all(n.op != "transpose" or n.output in h.outputs for n in h.nodes)
        x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
        np.testing.assert_allclose(_numpy_run(h, x), _numpy_run(g, x), rtol=1e-6, atol=1e-6)

    check()
