"""nn.LSTM / nn.GRU / nn.RNN through the torch codegen: written as the module again (not the
``_msc_recurrent`` helper), with the source's state_dict keys, outputs equal to eager, and
``convert``'s check structurally equal (no ``--allow-changes``)."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

import msc  # noqa: E402

# torch.export itself warns about nn.LSTM's _flat_weights (the source and the generated module)
pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes self.rnn._flat_weights")

ATOL = 1e-5  # float32; the generated module runs the same torch kernels as the source


class Net(torch.nn.Module):
    """``rnn`` then a Linear head; returns the head's output and the final state(s)."""

    def __init__(self, rnn: torch.nn.Module, states: bool) -> None:
        super().__init__()
        self.rnn = rnn
        out = rnn.hidden_size * (2 if rnn.bidirectional else 1)
        self.fc = torch.nn.Linear(out, 3)
        self.states = states

    def forward(self, x, *hx):
        y, h = self.rnn(x, (hx if isinstance(self.rnn, torch.nn.LSTM) else hx[0])
                        if hx else None)  # fmt: skip
        return (self.fc(y), *(h if isinstance(h, tuple) else (h,)))


# (module, initial states given)
CASES = {
    "lstm_batch_first": (lambda: torch.nn.LSTM(5, 8, batch_first=True), False),
    "lstm_states_seq_first": (lambda: torch.nn.LSTM(5, 8), True),
    "lstm_2layers_bidirectional": (
        lambda: torch.nn.LSTM(5, 6, num_layers=2, bidirectional=True), True),
    "gru_bidirectional": (lambda: torch.nn.GRU(5, 8, batch_first=True, bidirectional=True), False),
    "gru_2layers_states": (lambda: torch.nn.GRU(5, 8, num_layers=2, batch_first=True), True),
    "rnn_tanh_2layers": (lambda: torch.nn.RNN(5, 8, num_layers=2), False),
    "rnn_relu_states": (lambda: torch.nn.RNN(
        5, 8, nonlinearity="relu", batch_first=True, bidirectional=True), True),
    "lstm_no_bias": (lambda: torch.nn.LSTM(5, 8, bias=False, batch_first=True), False),
}  # fmt: skip


def _inputs(rnn: torch.nn.Module, states: bool) -> tuple:
    torch.manual_seed(0)
    b, s = 2, 7
    x = torch.randn(b, s, 5) if rnn.batch_first else torch.randn(s, b, 5)
    if not states:
        return (x,)
    n = rnn.num_layers * (2 if rnn.bidirectional else 1)
    hx = [torch.randn(n, b, rnn.hidden_size)]
    if isinstance(rnn, torch.nn.LSTM):
        hx.append(torch.randn(n, b, rnn.hidden_size))
    return (x, *hx)


def _load(directory):
    spec = importlib.util.spec_from_file_location("generated_rnn", directory / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load()


@pytest.mark.parametrize("case", list(CASES))
def test_torch_recurrent_module_round_trip(case, tmp_path):
    make, states = CASES[case]
    torch.manual_seed(0)
    model = Net(make(), states).eval()
    args = _inputs(model.rnn, states)
    pt2 = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(model, args), pt2)
    report = msc.convert(pt2, tmp_path / "out")
    assert report.ok and report.equivalent, (report.structural, report.changes)
    assert report.verdict == "equal", report.verdict  # not merely equivalent: the same graph
    text = (tmp_path / "out" / "model.py").read_text()
    cls = type(model.rnn).__name__
    assert f"self.rnn = nn.{cls}(" in text and "_msc_recurrent" not in text
    generated = _load(tmp_path / "out")
    assert set(generated.state_dict()) == set(model.state_dict())  # rnn.weight_ih_l0 ...
    with torch.no_grad():
        want, got = model(*args), generated(*args)
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=ATOL)


def test_torch_recurrent_dynamic_batch(tmp_path):
    """A batch dim torch.export keeps symbolic: the module's zero states come from x's shape
    (passed to the module as the source computed them); the check is still equal."""
    torch.manual_seed(0)
    model = Net(torch.nn.LSTM(5, 8, batch_first=True), False).eval()
    x = torch.randn(2, 7, 5)
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    torch.export.save(ep, tmp_path / "m.pt2")
    report = msc.convert(tmp_path / "m.pt2", tmp_path / "out")
    assert report.ok and report.verdict == "equal", (report.verdict, report.changes)
    assert "self.rnn = nn.LSTM(5, 8, batch_first=True)" in (tmp_path / "out/model.py").read_text()
    x3 = torch.randn(3, 7, 5)  # another batch size than the export's
    with torch.no_grad():
        for w, g in zip(model(x3), _load(tmp_path / "out")(x3), strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=ATOL)


# ---------------------------------------------------------------- ONNX and Keras sources
# Their recurrent nodes are ONNX-form: where torch's module computes them exactly, they are
# rewritten into its call (weights in torch's gate order); where not (clip), the code runs
# _msc_recurrent, which torch.export unrolls, and the check says so (an advisory naming the
# nodes) instead of failing on the unrolled steps; the outputs decide.
def _run(directory, *args):
    with torch.no_grad():
        out = _load(directory)(*[torch.from_numpy(a) for a in args])
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("cls,bidirectional", [("LSTM", False), ("GRU", False), ("LSTM", True)])
def test_onnx_recurrent_to_torch_is_the_module(cls, bidirectional, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    rnn = getattr(torch.nn, cls)(5, 8, batch_first=True, bidirectional=bidirectional)
    model = Net(rnn, False).eval()
    x = torch.randn(2, 7, 5)
    path = tmp_path / "m.onnx"
    torch.onnx.export(model, (x,), path, input_names=["x"], dynamo=False)
    report = msc.convert(path, tmp_path / "out")
    assert report.ok and report.equivalent and not report.advisory, report.verdict
    text = (tmp_path / "out" / "model.py").read_text()
    assert f"= nn.{cls}(5, 8" in text and "_msc_recurrent" not in text
    want = ort.InferenceSession(str(path)).run(None, {"x": x.numpy()})
    for w, g in zip(want, _run(tmp_path / "out", x.numpy()), strict=True):
        assert abs(w - g).max() <= ATOL


def test_onnx_lstm_with_clip_runs_the_helper(tmp_path):
    """A non-exact node (clip): still converts, and matches onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("W", (1, 32, 5)), ("R", (1, 32, 8)), ("B", (1, 64)))]  # fmt: skip
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=8, clip=0.5)
    graph = helper.make_graph(
        [node], "clipped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, 1, 2, 8])], inits,
    )  # fmt: skip
    path = tmp_path / "clip.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    report = msc.convert(path, tmp_path / "out")
    assert report.ok and report.numeric.ok
    assert "_msc_recurrent" in report.advisory  # the unrolled helper, named as the reason
    assert "_msc_recurrent" in (tmp_path / "out" / "model.py").read_text()
    x = rng.standard_normal((7, 2, 5)).astype(np.float32)
    (want,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    (got,) = _run(tmp_path / "out", x)
    assert abs(want - got).max() <= ATOL


def test_unrolled_advisory_excuses_only_the_unrolled_nodes(tmp_path, monkeypatch):
    """The advisory covers the recurrent node torch.export unrolls, nothing else: a change
    elsewhere in the graph (here the check told to expect a sigmoid where the code has a relu)
    still blocks writing."""
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import codegen.torch

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("W", (1, 32, 5)), ("R", (1, 32, 8)), ("B", (1, 64)))]  # fmt: skip
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=8, clip=0.5),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "clipped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 2, 5])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [7, 1, 2, 8])], inits,
    )  # fmt: skip
    path = tmp_path / "clip.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    report = msc.convert(path, tmp_path / "out")
    assert report.ok and "_msc_recurrent" in report.advisory  # only the unrolled node differs

    real = codegen.torch.as_generated

    def expecting_sigmoid(g, **kw):
        out = real(g, **kw)
        for n in out.nodes:
            if n.op == "relu":
                n.op = "sigmoid"
        return out

    monkeypatch.setattr(codegen.torch, "as_generated", expecting_sigmoid)
    report = msc.convert(path, tmp_path / "out2")
    assert not report.ok and not report.advisory and not report.equivalent
    assert not (tmp_path / "out2").exists()  # nothing written


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_keras_recurrent_to_torch_is_the_module(layer, tmp_path, monkeypatch):
    import os

    if os.environ.get("KERAS_BACKEND", "torch") != "torch":
        pytest.skip("Keras tests run on the torch backend (KERAS_BACKEND=torch)")
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="keras is not installed")
    import numpy as np

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((7, 5)),
                              getattr(keras.layers, layer)(8, return_sequences=True),
                              keras.layers.Dense(3)])  # fmt: skip
    path = tmp_path / "m.keras"
    model.save(path)
    report = msc.convert(path, tmp_path / "out")
    assert report.ok and report.equivalent and not report.advisory, report.verdict
    text = (tmp_path / "out" / "model.py").read_text()
    assert f"= nn.{layer}(5, 8, batch_first=True)" in text and "_msc_recurrent" not in text
    x = np.random.default_rng(0).standard_normal((2, 7, 5)).astype(np.float32)
    want = np.asarray(model(x).detach().cpu())
    (got,) = _run(tmp_path / "out", x)
    assert abs(want - got).max() <= ATOL
