"""codegen.tflite: the schema facts it writes with agree with the generated schema classes,
a PyTorch model written to TFLite runs in LiteRT like eager PyTorch, outputs never clobber
what msc did not write, and the layout for models over 2 GB reads back."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")

import torch  # noqa: E402

import codegen.tflite  # noqa: E402
import msc  # noqa: E402
from codegen.tflite import flatbuf  # noqa: E402
from codegen.tflite.schema import BUILTIN, OPTIONS, TABLES  # noqa: E402
from msc.errors import MscError  # noqa: E402
from tests.tflite_cases import run_litert  # noqa: E402


def _slots(cls) -> dict[str, int]:
    """field accessor -> slot, read from the generated class's vtable offsets."""
    import inspect
    import re

    out = {}
    for name, fn in vars(cls).items():
        if not callable(fn) or name.endswith(("Length", "AsNumpy", "IsNone")):
            continue
        m = re.search(r"_tab\.Offset\((\d+)\)", inspect.getsource(fn))
        if m:
            out[name] = (int(m.group(1)) - 4) // 2
    return out


@pytest.mark.parametrize("table", sorted(TABLES))
def test_schema_tables_match_the_generated_classes(table):
    import tflite

    from msc.frontend.tflite.reader import _snake

    got = {_snake(k): v for k, v in _slots(getattr(tflite, table)).items()}
    deprecated = {"new_height", "new_width", "deprecated_tag"}  # no accessor is generated
    slot = 0
    for name, kind, _ in TABLES[table]:
        key = name.replace("_2", "2")  # builtin_options_2 is BuiltinOptions2 there
        if kind == "union":  # its type, then its value, in consecutive slots
            assert got.get(f"{key}_type") == slot, (table, name)
            slot += 2
            continue
        assert name in deprecated or got.get(key) == slot, (table, name, got)
        slot += 1


def test_op_codes_and_options_match_the_generated_enums():
    import tflite

    for name, code in BUILTIN.items():
        assert getattr(tflite.BuiltinOperator, name, code) == code
    for name, index in OPTIONS.items():
        assert getattr(tflite.BuiltinOptions, name) == index


def test_pytorch_cnn_runs_in_litert_like_eager():
    from msc.examples import TinyCNN

    m = TinyCNN().eval()
    x = torch.randn(2, 3, 32, 32)
    g = msc.from_torch(m, (x,))
    out = run_litert(codegen.tflite.to_bytes(g), [x.numpy()])
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(out[0], ref, atol=1e-5, rtol=1e-5)


class _Positions(torch.nn.Module):
    """arange: the position ids a transformer adds (a constant in the file)."""

    def forward(self, x):
        return x + torch.arange(x.shape[-1], dtype=torch.float32) * 0.5


class _LeadingIndex(torch.nn.Module):
    """x[i, j] of broadcasting index tensors, a negative one among them (GPT-2's and Llama's
    mask code indexes so)."""

    def forward(self, x, i, j):
        return x[i[:, None], j[None, :]] * 2


class _GatherElements(torch.nn.Module):
    """torch.gather along the last dim (BERT reads token type ids so)."""

    def forward(self, x, i):
        return torch.gather(x, 1, i) + 1


_INDEXING = {
    "arange": (_Positions, lambda: [torch.randn(2, 5)]),
    "index": (
        _LeadingIndex,
        lambda: [torch.randn(4, 6, 3), torch.tensor([0, 3, -1]), torch.tensor([5, -2, 0, 1])],
    ),
    "gather_elements": (
        _GatherElements,
        lambda: [torch.randn(3, 7), torch.randint(0, 7, (3, 4))],
    ),
}


@pytest.mark.parametrize("op", sorted(_INDEXING))
def test_index_ops_transformers_use_run_in_litert_like_eager(op):
    """arange, advanced indexing of leading dims and gather_elements (GATHER_ND at the
    broadcast coordinates) are written, and LiteRT gives eager's values exactly."""
    from msc.analysis.convert import _structural

    make, inputs = _INDEXING[op]
    m, args = make().eval(), inputs()
    g = msc.from_torch(m, tuple(args))
    assert op in {n.op for n in g.nodes}
    data = codegen.tflite.to_bytes(g)
    got = run_litert(data, [a.numpy() for a in args])
    with torch.no_grad():
        np.testing.assert_allclose(got[0], m(*args).numpy(), atol=1e-6, rtol=0)
    if op != "gather_elements":  # its coordinates of aranges read back as GATHER_ND's
        # the wrapped coordinates and the RESHAPEs of size-1 dims read as index's own
        _, summary, verdict, equivalent = _structural(g, msc.from_tflite(data))
        assert equivalent, (verdict, summary)


def test_a_real_fft_is_written_as_rfft2d():
    # torch.fft.rfft along a middle axis: msc's dft of a real signal, written as RFFT2D on the
    # innermost axis with REAL / IMAG / PACK into msc's (real, imaginary) pair
    class Spectrum(torch.nn.Module):
        def forward(self, x):
            return torch.view_as_real(torch.fft.rfft(x, n=16, dim=1)) * 2.0

    m, x = Spectrum().eval(), torch.randn(2, 12, 3)
    g = msc.from_torch(m, (x,))
    out = run_litert(codegen.tflite.to_bytes(g), [x.numpy()])
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(out[0], ref, atol=1e-4, rtol=1e-4)


def test_save_replaces_only_what_msc_wrote(tmp_path):
    from msc.examples import small_cnn_graph

    g = small_cnn_graph()
    p = tmp_path / "m.tflite"
    p.write_bytes(b"not msc's")
    with pytest.raises(MscError, match="not a file msc wrote"):
        codegen.tflite.save(g, p)
    assert p.read_bytes() == b"not msc's"
    p.unlink()
    codegen.tflite.save(g, p)
    codegen.tflite.save(g, p)  # its own output: replaced
    assert msc.from_tflite(p).inputs[0].name == g.inputs[0].name


def test_buffers_after_the_flatbuffer_read_back(tmp_path):
    from msc.examples import small_cnn_graph

    g = small_cnn_graph()
    inline = codegen.tflite.to_bytes(g)
    outside = codegen.tflite.to_bytes(g, external=True)
    x = (
        np.random.default_rng(0)
        .standard_normal([d if isinstance(d, int) else 2 for d in g.inputs[0].type.shape])
        .astype(np.float32)
    )
    np.testing.assert_array_equal(run_litert(inline, [x])[0], run_litert(outside, [x])[0])
    p = tmp_path / "ext.tflite"
    p.write_bytes(outside)
    assert len(msc.from_tflite(p).weights) == len(msc.from_tflite(inline).weights)


def test_weights_are_written_once():
    from msc.ir import Graph, TensorType

    g = Graph("tied")
    x = g.add_input("x", TensorType(msc.DType.FLOAT32, (2, 3)))
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = g.add_weight("a", w)
    b = g.add_weight("b", w.copy())
    g.set_outputs([g.op("add", g.op("add", x, a), b)])
    model = codegen.tflite.to_records(g)
    sizes = [len(np.ascontiguousarray(bf).tobytes()) for bf in model.buffers]
    assert sizes.count(24) == 1
    assert isinstance(flatbuf.write(model), bytes)


# Average pools whose divisor TFLite's AVERAGE_POOL_2D does not compute itself: written as the
# sum over explicit zeros, scaled per output position (codegen.tflite.nn._divided_avg_pool).
_AVG_POOLS = {
    "efficientnet-pooler": (dict(kernel_size=1280, ceil_mode=True), 7),  # one window, clipped
    "ceil": (dict(kernel_size=3, stride=2, ceil_mode=True), 8),
    "ceil-padded": (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), 8),
    "ceil-pad-excluded": (
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        8,
    ),
    "pad-excluded-not-same": (dict(kernel_size=3, stride=2, padding=1, count_include_pad=False), 8),
    "divisor-override": (dict(kernel_size=2, stride=2, divisor_override=3), 6),
    "ceil-rectangular": (
        dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True),
        11,
    ),
}


@pytest.mark.parametrize("key", sorted(_AVG_POOLS))
def test_average_pools_of_any_divisor_run_in_litert_like_eager(key):
    import torch.nn.functional as F

    kw, size = _AVG_POOLS[key]

    class Pool(torch.nn.Module):
        def forward(self, x):
            return F.avg_pool2d(x, **kw)

    x = torch.randn(2, 3, size, size)
    data = codegen.tflite.to_bytes(msc.from_torch(Pool(), (x,)))
    (got,) = run_litert(data, [x.numpy()])
    np.testing.assert_allclose(got, Pool()(x).numpy(), atol=1e-6, rtol=1e-6)


def test_a_ceil_mode_pool_of_one_window_reads_back_equivalent():
    """EfficientNet's pooler (a 1280-wide ceil_mode pool over 7 x 7) is written as a 7 x 7
    one; diff reads both as the mean over the input ("avg_pool over its whole input")."""
    import torch.nn.functional as F

    from msc.analysis.convert import _structural

    class Pool(torch.nn.Module):
        def forward(self, x):
            return F.avg_pool2d(x, 1280, ceil_mode=True)

    g = msc.from_torch(Pool(), (torch.randn(1, 3, 7, 7),))
    again = msc.from_tflite(codegen.tflite.to_bytes(g))
    _, summary, verdict, equivalent = _structural(g, again)
    assert equivalent, (verdict, summary)


def test_pytorch_conv_transpose_3d_is_written_as_conv_3d_transpose():
    # a 3-d upsampling decoder's layer: CONV_3D_TRANSPOSE (filter [kd, kh, kw, O, I]), SAME
    # where PyTorch's pads are TensorFlow's SAME for the output size (the op table has VALID)
    from codegen.tflite.model import to_records
    from codegen.tflite.passes import count_ops

    m = torch.nn.ConvTranspose3d(3, 4, (3, 2, 2), stride=(1, 2, 2), padding=(1, 0, 0)).eval()
    x = torch.randn(2, 3, 3, 4, 5)
    g = msc.from_torch(m, (x,))
    assert count_ops(to_records(g))["CONV_3D_TRANSPOSE"] == 1
    (got,) = run_litert(codegen.tflite.to_bytes(g), [x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(got, m(x).numpy(), atol=1e-5, rtol=1e-5)


class _MaskIndex(torch.nn.Module):
    """transformers' mask construction: ``mask[batch_idx, kv_idx]`` at a symbolic batch and
    sequence (an index of broadcast aranges), expanded to a static size on one axis."""

    def forward(self, x, mask):
        b, s = mask.shape
        bi = torch.arange(b)[:, None, None, None]
        ki = torch.arange(s)[None, None, None, :]
        m = mask[bi, ki]
        return torch.where(m, x[:, None, None, :], 0.0).expand(-1, 3, -1, -1)


def test_index_and_expand_at_symbolic_shapes_run_in_litert():
    """``index`` and ``expand`` read the symbolic sizes at run time (SHAPE), so the model
    writes once and runs at other sizes in LiteRT, equal to eager."""
    b, s = torch.export.Dim("batch"), torch.export.Dim("seq", max=32)
    x, mask = torch.randn(2, 5), torch.rand(2, 5) > 0.5
    ep = torch.export.export(_MaskIndex(), (x, mask), dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    from msc.analysis.convert import _structural

    g = msc.from_exported_program(ep)
    data = codegen.tflite.to_bytes(g)
    _, summary, verdict, equivalent = _structural(g, msc.from_tflite(data))
    assert equivalent, (verdict, summary)  # GATHER_ND of run-time coordinates reads as index
    for n, m in ((1, 3), (4, 7)):
        x, mask = torch.randn(n, m), torch.rand(n, m) > 0.5
        (got,) = run_litert(data, [x.numpy(), mask.numpy()])
        np.testing.assert_array_equal(got, _MaskIndex()(x, mask).numpy())


def test_symbolic_dims_read_back_with_their_names():
    """A .tflite holds a symbolic dim as -1; the msc_symbols metadata names them, so a dynamic
    graph reads back with its own symbols, tied across inputs (without it, from_tflite names
    them per input: batch, mask_1). A malformed entry is ignored, never an error."""
    from msc.frontend.tflite import read_model

    b, s = torch.export.Dim("b"), torch.export.Dim("seq", max=32)
    x, mask = torch.randn(2, 5), torch.rand(2, 5) > 0.5
    ep = torch.export.export(_MaskIndex(), (x, mask), dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    g = msc.from_exported_program(ep)
    want = [str(d) for v in g.inputs for d in v.type.shape]
    data = codegen.tflite.to_bytes(g)
    back = msc.from_tflite(data)
    assert [str(d) for v in back.inputs for d in v.type.shape] == want
    assert len({str(d) for v in back.inputs for d in v.type.shape}) == 2, want
    # the same file with its entry's bytes replaced by junk reads with msc's own names
    m = read_model(data)
    off, size = m.buffers[m.metadata["msc_symbols"]]
    junk = bytearray(data)
    junk[off : off + size] = b"{" * size
    names = [str(d) for v in msc.from_tflite(bytes(junk)).inputs for d in v.type.shape]
    assert names == ["batch", "x_1", "batch", "mask_1"], names


class _Recurrent(torch.nn.Module):
    """A torch recurrent layer and what a row returns of it: the sequence, the final h, the
    final c (an LSTM's), and whether its initial states are inputs."""

    def __init__(self, cls, returns=("y", "h"), states=False, **kw):
        super().__init__()
        self.rnn, self.returns, self.states = cls(5, 6, **kw), returns, states

    def forward(self, x, *states):
        init = None
        if self.states:
            init = tuple(states) if isinstance(self.rnn, torch.nn.LSTM) else states[0]
        y, h = self.rnn(x, init)
        h, c = h if isinstance(h, tuple) else (h, None)
        return tuple({"y": y, "h": h, "c": c}[k] for k in self.returns)


L, G, R = torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN
USL = "UNIDIRECTIONAL_SEQUENCE_LSTM"
# row -> (module, the builtin ops the file holds)
RECURRENT = {
    "lstm_batch_first": (lambda: _Recurrent(L, batch_first=True), {USL: 1}),
    "lstm_bidirectional_two_layers": (
        lambda: _Recurrent(L, bidirectional=True, num_layers=2),
        {USL: 4, "REVERSE_V2": 4},
    ),
    "rnn_relu": (lambda: _Recurrent(R, nonlinearity="relu"), {"UNIDIRECTIONAL_SEQUENCE_RNN": 1}),
    # what the builtins cannot give is decomposed: no GRU builtin, the final cell state, an
    # initial state given at run time
    "gru_bidirectional": (lambda: _Recurrent(G, bidirectional=True), {"LOGISTIC": 28}),
    "lstm_final_cell_state": (lambda: _Recurrent(L, returns=("c",)), {USL: 0}),
    "lstm_initial_states": (lambda: _Recurrent(L, states=True), {USL: 0}),
}  # fmt: skip


def _ops(data: bytes):
    from collections import Counter

    from msc.frontend.tflite import read_model

    m = read_model(data)
    try:
        return Counter(op.op for op in m.subgraphs[0].operators)
    finally:
        m.close()


@pytest.mark.parametrize("name", RECURRENT)
def test_recurrent_layers_run_in_litert_like_eager(name):
    """lstm and rnn as LiteRT's sequence builtins where they fit (a reverse direction through
    REVERSE_V2, the final h as the last step), else through their decompositions (steps
    unrolled); each file runs (a fresh interpreter: the builtins' state variables start at
    zeros) like eager (atol 1e-5)."""
    make, want = RECURRENT[name]
    m = make().eval()
    x = torch.randn(3, 7, 5) if m.rnn.batch_first else torch.randn(7, 3, 5)  # 7 steps
    n_dirs = 2 * m.rnn.num_layers if m.rnn.bidirectional else m.rnn.num_layers
    states = [torch.randn(n_dirs, 3, 6) for _ in range(2 if isinstance(m.rnn, L) else 1)]
    args = (x, *states) if m.states else (x,)
    data = codegen.tflite.to_bytes(msc.from_torch(m, args))
    ops = _ops(data)
    assert {k: ops.get(k, 0) for k in want} == want, ops
    got = run_litert(data, [a.numpy() for a in args])
    with torch.no_grad():
        ref = m(*args)
    assert len(got) == len(ref)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r.numpy(), atol=1e-5, rtol=1e-5)


def _onnx_recurrent(op: str, gates: int):
    """One ONNX ``op`` node (batch 2, input 5, hidden 6, bidirectional) over "T" steps."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)
        for name, shape in (("w", (2, gates * 6, 5)), ("r", (2, gates * 6, 6)),
                            ("b", (2, 2 * gates * 6)))
    ]  # fmt: skip
    node = helper.make_node(op, ["x", "w", "r", "b"], ["y"], hidden_size=6,
                            direction="bidirectional")  # fmt: skip
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 2, 2, 6])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_recurrent_layers_at_a_symbolic_length():
    """An LSTM's builtins run any number of steps (the final h a STRIDED_SLICE from -1),
    checked against onnxruntime at two lengths; a GRU has no builtin and its decomposition
    unrolls the steps: refused, saying why."""
    import onnxruntime as ort

    from msc.errors import UnsupportedOpsError

    model = _onnx_recurrent("LSTM", 4)
    data = codegen.tflite.to_bytes(msc.from_onnx(model))
    assert _ops(data)["UNIDIRECTIONAL_SEQUENCE_LSTM"] == 2
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for steps in (3, 11):
        x = np.random.default_rng(steps).uniform(-1, 1, (steps, 2, 5)).astype(np.float32)
        (got,) = run_litert(data, [x])
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(UnsupportedOpsError, match="gru.*symbolic number of steps"):
        codegen.tflite.to_bytes(msc.from_onnx(_onnx_recurrent("GRU", 3)))


class _LstmHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.fc = torch.nn.LSTM(5, 8, batch_first=True), torch.nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


def test_a_pt2_lstm_converts_to_tflite_with_its_check(tmp_path):
    """``msc convert model.pt2 --to tflite``: the re-import is equivalent (torch.export's
    zero initial states and split biases are known rewrites) and LiteRT agrees."""
    pt2 = tmp_path / "lstm.pt2"
    torch.export.save(torch.export.export(_LstmHead().eval(), (torch.randn(2, 7, 5),)), pt2)
    report = msc.convert(pt2, tmp_path / "lstm.tflite")
    assert report.ok and report.equivalent, report.verdict
    assert "lstm's biases summed" in report.verdict
    assert report.numeric is not None and report.numeric.ok
    assert _ops((tmp_path / "lstm.tflite").read_bytes())["UNIDIRECTIONAL_SEQUENCE_LSTM"] == 1


def test_an_expand_to_a_run_time_shape_and_a_split_of_an_unknown_dim_are_written():
    """What torch.onnx's dynamic exports hold where the frontend cannot tell a size: an
    expand to a target computed at run time (BROADCAST_TO of it) and a split into three
    even parts of an unknown dim (SPLIT): LiteRT runs the file at two sizes like numpy, and
    the file reads back equivalent."""
    from msc.analysis.convert import _structural
    from msc.ir import DType, Graph, SymDim, TensorType

    g = Graph("dyn")
    batch, width = SymDim("batch"), SymDim("width")
    x = g.add_input("x", TensorType(DType.FLOAT32, (batch, 1, width)))
    y = g.add_input("y", TensorType(DType.FLOAT32, (batch, 3, width)))
    wide = g.add_node("expand", [x, g.add_node("shape", [y], {}).output], {}).output
    parts = g.add_node("split", [wide], {"axis": 2, "num_outputs": 3}).outputs
    g.set_outputs([g.add_node("sub", [parts[0], parts[2]], {}).output])
    data = codegen.tflite.to_bytes(g)
    _, summary, verdict, equivalent = _structural(g, msc.from_tflite(data))
    assert equivalent, (verdict, summary)
    rng = np.random.default_rng(0)
    for n in (1, 4):
        a = rng.standard_normal((n, 1, 6), np.float32)
        b = rng.standard_normal((n, 3, 6), np.float32)
        (got,) = run_litert(data, [a, b])
        full = np.broadcast_to(a, b.shape)
        np.testing.assert_array_equal(got, full[..., 0:2] - full[..., 4:6])
