"""ONNX control flow (If, Loop, Scan), recurrent layers (RNN, GRU, LSTM) and sub-byte dtypes:
ONNX -> msc -> generated PyTorch (and -> ONNX again) against onnxruntime on the source model.

Each row builds a small model whose attributes the backend node cases leave out (outer-scope
reads, subgraph initializers, shape-changing carried values, reverse scans, non-default
activations, clip, shorter sequences, batch-first layout). Tolerances: 1e-5 (float32
arithmetic in a different order); casts are compared exactly.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import msc

torch = pytest.importorskip("torch", reason="the generated modules run on torch")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
import codegen.onnx as codegen_onnx  # noqa: E402
import codegen.torch as codegen_torch  # noqa: E402
from codegen.torch import lowbit  # noqa: E402

RTOL, ATOL = 1e-5, 1e-5
rng = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = oh.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, dt, shape):
    return oh.make_tensor_value_info(name, dt, shape)


def _ort(model, feeds):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _torch_run(g, feeds):
    module = codegen_torch.to_module(g)
    args = [torch.from_numpy(np.array(feeds[v.name], order="C")) for v in g.inputs]
    with torch.no_grad():
        out = module(*args)
    return [o.numpy() for o in (out if isinstance(out, tuple | list) else [out])]


def _check(model, feeds, *, roundtrip=True):
    """msc's torch module (and regenerated ONNX) against onnxruntime on ``model``."""
    want = _ort(model, feeds)
    g = msc.from_onnx(model)
    assert msc.structural_equal(g, msc.from_text(msc.to_text(g)), names=True, weights="types")
    got = _torch_run(g, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    if roundtrip:
        m2 = codegen_onnx.to_model(g)
        onnx.checker.check_model(m2)
        for a, b in zip(_ort(m2, feeds), want):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
        eq = msc.structural_equal(g, msc.from_onnx(m2))
        assert eq, eq.diff
    return g


# ------------------------------------------------------------------------------ If
def _if_model():
    """An If reading an outer value and, in one branch, its own initializer (a weight)."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "then_w")
    then_b = oh.make_graph(
        [oh.make_node("Mul", ["x", "then_w"], ["t_out"])],
        "then", [], [_vi("t_out", TP.FLOAT, [2, 3])], initializer=[w],
    )  # fmt: skip
    else_b = oh.make_graph(
        [oh.make_node("Neg", ["x"], ["e_out"])], "else", [], [_vi("e_out", TP.FLOAT, [2, 3])]
    )
    nodes = [
        oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        oh.make_node("Greater", ["s", "zero"], ["c"]),
        oh.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
    ]
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    return _model(nodes, [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.FLOAT, [2, 3])], [zero])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_branches_outer_values_and_hoisted_weights(sign):
    x = (np.abs(rng.standard_normal((2, 3))) * sign).astype(np.float32)
    g = _check(_if_model(), {"x": x})
    assert [n.op for n in g.nodes][-1] == "if"
    assert "then_w" in g.weights  # a subgraph initializer lives at top level
    then_g = g.nodes[-1].attrs["then_branch"]
    assert not then_g.weights


def test_if_with_a_constant_condition_is_inlined():
    then_b = oh.make_graph([oh.make_node("Relu", ["x"], ["a"])], "t", [], [_vi("a", TP.FLOAT, [3])])
    else_b = oh.make_graph([oh.make_node("Neg", ["x"], ["b"])], "e", [], [_vi("b", TP.FLOAT, [3])])
    c = numpy_helper.from_array(np.array(False), "c")
    m = _model(
        [oh.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)],
        [_vi("x", TP.FLOAT, [3])], [_vi("y", TP.FLOAT, [3])], [c],
    )  # fmt: skip
    g = _check(m, {"x": np.array([1, -2, 3], np.float32)})
    assert "if" not in {n.op for n in g.nodes} and "neg" in {n.op for n in g.nodes}


def test_unsupported_node_in_a_branch_is_reported_with_the_others():
    then_b = oh.make_graph(
        [oh.make_node("StringNormalizer", ["x"], ["a"])], "t", [], [_vi("a", TP.FLOAT, [3])]
    )
    else_b = oh.make_graph([oh.make_node("Neg", ["x"], ["b"])], "e", [], [_vi("b", TP.FLOAT, [3])])
    m = oh.make_model(
        oh.make_graph(
            [
                oh.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
                oh.make_node("Foo", ["y"], ["z"], name="foo"),
            ],
            "m", [_vi("c", TP.BOOL, []), _vi("x", TP.FLOAT, [3])], [_vi("z", TP.FLOAT, [3])],
        ),
        opset_imports=[oh.make_opsetid("", 17)],
    )  # fmt: skip
    with pytest.raises(msc.errors.UnsupportedOpsError) as e:
        msc.from_onnx(m)
    text = str(e.value)
    assert "StringNormalizer" in text and "Foo" in text and "If" in text


# ------------------------------------------------------------------------------ Loop
def _loop_body(grow: bool):
    """Carried: acc (adds x * i; or grows by concatenation), a count; scan output: acc."""
    nodes = [
        oh.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
        oh.make_node("Mul", ["x", "fi"], ["xi"]),
        oh.make_node("Concat", ["acc", "xi"], ["acc2"], axis=0)
        if grow
        else oh.make_node("Add", ["acc", "xi"], ["acc2"]),
        oh.make_node("Add", ["n", "one"], ["n2"]),
        oh.make_node("Less", ["n2", "limit"], ["c2"]),
        oh.make_node("ReduceSum", ["acc2"], ["total"], keepdims=0),
    ]
    shape = [None] if grow else [3]
    return oh.make_graph(
        nodes, "body",
        [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _vi("acc", TP.FLOAT, shape),
         _vi("n", TP.INT64, [])],
        [_vi("c2", TP.BOOL, []), _vi("acc2", TP.FLOAT, shape), _vi("n2", TP.INT64, []),
         _vi("total", TP.FLOAT, [])],
    )  # fmt: skip


@pytest.mark.parametrize(
    "trip, cond, grow",
    [(5, True, False), (5, None, False), (None, True, False), (4, True, True), (0, True, False)],
)
def test_loop(trip, cond, grow):
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    limit = numpy_helper.from_array(np.array(3, np.int64), "limit")
    ins = [("M", TP.INT64, trip), ("cond", TP.BOOL, cond)]
    names = [n if v is not None else "" for n, _, v in ins]
    node = oh.make_node(
        "Loop", [*names, "acc0", "n0"], ["acc", "n", "totals"], body=_loop_body(grow)
    )
    inputs = [_vi(n, t, []) for n, t, v in ins if v is not None]
    inputs += [_vi("x", TP.FLOAT, [3]), _vi("acc0", TP.FLOAT, [3]), _vi("n0", TP.INT64, [])]
    outs = [_vi("acc", TP.FLOAT, None), _vi("n", TP.INT64, []), _vi("totals", TP.FLOAT, None)]
    m = _model([node], inputs, outs, [one, limit])
    feeds = {
        n: np.array(v, dtype=np.int64 if t == TP.INT64 else bool)
        for n, t, v in ins
        if v is not None
    }
    feeds |= {"x": np.array([1, 2, 3], np.float32), "acc0": np.ones(3, np.float32),
              "n0": np.array(0, np.int64)}  # fmt: skip
    _check(m, feeds)


# ------------------------------------------------------------------------------ Scan
def accumulating_scan(**attrs) -> onnx.NodeProto:
    """Scan s0 [2] over x [., 2]: s += x_t, y_t = s * w (w read from the outer scope), its
    outputs s and ys; ``attrs``: its axes and directions."""
    body = oh.make_graph(
        [oh.make_node("Add", ["s", "xt"], ["s2"]), oh.make_node("Mul", ["s2", "w"], ["y"])],
        "body", [_vi("s", TP.FLOAT, [2]), _vi("xt", TP.FLOAT, [2])],
        [_vi("s2", TP.FLOAT, [2]), _vi("y", TP.FLOAT, [2])],
    )  # fmt: skip
    return oh.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1, **attrs)


@pytest.mark.parametrize(
    "in_axis, in_dir, out_axis, out_dir",
    [(0, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (-1, 1, -1, 0)],
)
def test_scan_axes_and_directions(in_axis, in_dir, out_axis, out_dir):
    node = accumulating_scan(
        scan_input_axes=[in_axis], scan_input_directions=[in_dir],
        scan_output_axes=[out_axis], scan_output_directions=[out_dir],
    )  # fmt: skip
    xshape = [4, 2] if in_axis == 0 else [2, 4]
    w = numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "w")
    m = _model(
        [node], [_vi("s0", TP.FLOAT, [2]), _vi("x", TP.FLOAT, xshape)],
        [_vi("s", TP.FLOAT, [2]), _vi("ys", TP.FLOAT, None)], [w],
    )  # fmt: skip
    feeds = {"s0": np.zeros(2, np.float32), "x": rng.standard_normal(xshape).astype(np.float32)}
    _check(m, feeds)


def nested_if_loop_model() -> onnx.ModelProto:
    """A Loop whose body's If reads ``bias`` from the outermost scope: i = 0 subtracts it,
    every later iteration adds it."""
    then_b = oh.make_graph(
        [oh.make_node("Add", ["a", "bias"], ["t"])], "t", [], [_vi("t", TP.FLOAT, [2])]
    )
    else_b = oh.make_graph(
        [oh.make_node("Sub", ["a", "bias"], ["e"])], "e", [], [_vi("e", TP.FLOAT, [2])]
    )
    body = oh.make_graph(
        [
            oh.make_node("Cast", ["i"], ["odd_i"], to=TP.BOOL),
            oh.make_node("If", ["odd_i"], ["a2"], then_branch=then_b, else_branch=else_b),
            oh.make_node("Identity", ["c"], ["c2"]),
        ],
        "body", [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _vi("a", TP.FLOAT, [2])],
        [_vi("c2", TP.BOOL, []), _vi("a2", TP.FLOAT, [2])],
    )  # fmt: skip
    return _model(
        [oh.make_node("Loop", ["M", "", "a0"], ["a"], body=body)],
        [_vi("M", TP.INT64, []), _vi("a0", TP.FLOAT, [2]), _vi("bias", TP.FLOAT, [2])],
        [_vi("a", TP.FLOAT, [2])],
    )  # fmt: skip


def test_loop_body_with_a_nested_if_reading_the_outermost_scope():
    m = nested_if_loop_model()
    feeds = {"M": np.array(3, np.int64), "a0": np.zeros(2, np.float32),
             "bias": np.array([1.0, 10.0], np.float32)}  # fmt: skip
    _check(m, feeds)


# ------------------------------------------------------------------------------ RNN, GRU, LSTM
def _recurrent_model(op, *, hidden=3, direction="forward", layout=0, lens=None, peep=False,
                     **attrs):  # fmt: skip
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    nd = 2 if direction == "bidirectional" else 1
    seq, batch, inp = 4, 2, 5
    xshape = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    sshape = [nd, batch, hidden] if layout == 0 else [batch, nd, hidden]

    def rand(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = [
        numpy_helper.from_array(rand((nd, gates * hidden, inp), 0.5), "W"),
        numpy_helper.from_array(rand((nd, gates * hidden, hidden), 0.5), "R"),
        numpy_helper.from_array(rand((nd, 2 * gates * hidden), 0.1), "B"),
    ]
    ins = ["X", "W", "R", "B", "", "h0"]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        ins[4] = "L"
    inputs = [_vi("X", TP.FLOAT, xshape), _vi("h0", TP.FLOAT, sshape)]
    outputs = [_vi("Y", TP.FLOAT, None), _vi("Yh", TP.FLOAT, None)]
    outs = ["Y", "Yh"]
    if op == "LSTM":
        ins.append("c0")
        inputs.append(_vi("c0", TP.FLOAT, sshape))
        outs.append("Yc")
        outputs.append(_vi("Yc", TP.FLOAT, None))
        if peep:
            p = rng.standard_normal((nd, 3 * hidden)).astype(np.float32) * 0.3
            inits.append(numpy_helper.from_array(p, "P"))
            ins.append("P")
    node = oh.make_node(op, ins, outs, hidden_size=hidden, direction=direction, layout=layout,
                        **attrs)  # fmt: skip
    m = _model([node], inputs, outputs, inits, opset=14)
    feeds = {"X": rng.standard_normal(xshape).astype(np.float32),
             "h0": rng.standard_normal(sshape).astype(np.float32) * 0.1}  # fmt: skip
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal(sshape).astype(np.float32) * 0.1
    return m, feeds


RECURRENT_ROWS = [
    ("RNN", {}),
    ("RNN", {"direction": "bidirectional", "activations": ["Relu", "LeakyRelu"],
             "activation_alpha": [0.2]}),
    ("RNN", {"direction": "reverse", "lens": [4, 2]}),
    ("GRU", {"linear_before_reset": 1}),
    ("GRU", {"direction": "bidirectional", "lens": [3, 1], "clip": 0.7}),
    ("GRU", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3],
             "activation_beta": [0.4]}),
    ("LSTM", {"peep": True, "input_forget": 1}),
    ("LSTM", {"direction": "bidirectional", "lens": [2, 4], "peep": True}),
    ("LSTM", {"clip": 0.5, "activations": ["Sigmoid", "Tanh", "Relu"]}),
]  # fmt: skip


@pytest.mark.parametrize("op, attrs", RECURRENT_ROWS, ids=lambda v: str(v)[:60])
def test_recurrent(op, attrs):
    m, feeds = _recurrent_model(op, **attrs)
    _check(m, feeds)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_batch_first_matches_layout_0(op):
    """onnxruntime runs layout 0 only: layout 1 is checked against the transposed layout 0."""
    rng_state = rng.bit_generator.state
    m0, f0 = _recurrent_model(op, direction="bidirectional", layout=0)
    rng.bit_generator.state = rng_state
    m1, _ = _recurrent_model(op, direction="bidirectional", layout=1)
    want = _ort(m0, f0)
    f1 = {k: np.ascontiguousarray(v.swapaxes(0, 1)) for k, v in f0.items()}
    g = msc.from_onnx(m1)
    got = _torch_run(g, f1)
    np.testing.assert_allclose(got[0], want[0].transpose(2, 0, 1, 3), rtol=RTOL, atol=ATOL)
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, b.swapaxes(0, 1), rtol=RTOL, atol=ATOL)
    regenerated = _ort(codegen_onnx.to_model(g), f1)  # transposes around a layout-0 node
    for a, b in zip(regenerated, got):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------ sub-byte dtypes
EDGES = np.array(
    [0, 0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6.5, -9, 8, 15, 16, -1.6, 1e6,
     -np.inf, np.inf, np.nan, -0.0], np.float32,
)  # fmt: skip
SUBBYTE = [
    (TP.INT4, ml_dtypes.int4),
    (TP.UINT4, ml_dtypes.uint4),
    (TP.INT2, ml_dtypes.int2),
    (TP.UINT2, ml_dtypes.uint2),
    (TP.FLOAT4E2M1, ml_dtypes.float4_e2m1fn),
]


def _cast_model(src, dst, n, **attrs):
    return _model(
        [oh.make_node("Cast", ["x"], ["y"], to=dst, **attrs)],
        [_vi("x", src, [n])], [_vi("y", dst, [n])], opset=25,
    )  # fmt: skip


def _run_lowbit(model, x):
    g = msc.from_onnx(model)
    module = codegen_torch.to_module(g)
    arg = lowbit.to_torch(x) if x.dtype not in (np.float32, np.float16) else torch.from_numpy(x)
    with torch.no_grad():
        out = module(arg)
    dt = g.outputs[0].dtype
    return lowbit.from_torch(out, dt) if dt in lowbit.TORCH_NAMES else out.numpy()


@pytest.mark.parametrize("onnx_t, np_t", SUBBYTE, ids=lambda v: getattr(v, "__name__", str(v)))
def test_cast_into_and_out_of_sub_byte_types(onnx_t, np_t):
    x = EDGES if np_t is ml_dtypes.float4_e2m1fn else EDGES[np.isfinite(EDGES) & (abs(EDGES) < 100)]
    want = x.astype(np_t)  # ml_dtypes is ONNX's reference for these casts
    got = _run_lowbit(_cast_model(TP.FLOAT, onnx_t, x.size), x)
    assert got.dtype == want.dtype
    assert got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
    back = _run_lowbit(_cast_model(onnx_t, TP.FLOAT, x.size), want)
    np.testing.assert_array_equal(back, want.astype(np.float32))


@pytest.mark.parametrize("mode", ["up", "down"])
def test_cast_to_float8_e8m0_rounds_as_asked(mode):
    x = np.array([0, 0.124, 0.125, 0.126, 1.1, 1.5, 3, 3e38, np.inf, np.nan], np.float32)
    got = _run_lowbit(_cast_model(TP.FLOAT, TP.FLOAT8E8M0, x.size, round_mode=mode), x)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        e = np.ceil(np.log2(x64)) if mode == "up" else np.floor(np.log2(x64))
        want = np.exp2(np.clip(e, -127, 127)).astype(np.float32)
    want[x == 0] = 2.0**-127
    want[np.isnan(x)] = np.nan
    np.testing.assert_array_equal(got.astype(np.float32), want)


def test_packed_initializers_are_unpacked_odd_sizes_included(tmp_path):
    """A 4-bit weight (5 elements: the last byte half used) inline and as external data,
    run through torch (loaded into its int8 carrier) and written back packed."""
    vals = np.array([1, -2, 7, -8, 3], ml_dtypes.int4)
    nodes = [
        oh.make_node("Gather", ["w", "i"], ["wi"]),  # run-time indices: w stays a weight
        oh.make_node("Cast", ["wi"], ["y"], to=TP.FLOAT),
        oh.make_node("Add", ["y", "x"], ["z"]),
    ]
    m = _model(
        nodes, [_vi("x", TP.FLOAT, [5]), _vi("i", TP.INT64, [5])], [_vi("z", TP.FLOAT, [5])],
        [numpy_helper.from_array(vals, "w")], opset=25,
    )  # fmt: skip
    ext = onnx.ModelProto()
    ext.CopyFrom(m)
    onnx.save_model(ext, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0,
                    all_tensors_to_one_file=True, location="w.bin")  # fmt: skip
    x = np.arange(5, dtype=np.float32)
    for g in (msc.from_onnx(m), msc.from_onnx(tmp_path / "m.onnx")):
        w = g.weights["w"].numpy()
        assert w.dtype == vals.dtype and w.tolist() == vals.tolist()
        got = _torch_run(g, {"x": x, "i": np.array([4, 3, 2, 1, 0])})[0]
        np.testing.assert_array_equal(got, x + vals[::-1].astype(np.float32))
        again = msc.from_onnx(codegen_onnx.to_model(g))  # written back packed
        assert again.weights["w"].numpy().tolist() == vals.tolist()
