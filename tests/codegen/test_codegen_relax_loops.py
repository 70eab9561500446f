"""Recurrent ops and Scan over a sequence whose length is known only at run time (an ONNX
dim_param) through codegen.relax, each compared with onnxruntime at two or more lengths:
the steps run in one Relax loop (a recursive function) rather than unrolled. Also: lengths
computed from the input, a run-time batch, and static lengths past the unrolling limit."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm", reason="apache-tvm is needed for codegen.relax")
pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from tests.codegen.relax_vs_ort import check, model  # noqa: E402
from tests.frontend.test_onnx_control import accumulating_scan  # noqa: E402

LENGTHS = (1, 4, 9)
BATCH, INPUT, HIDDEN = 3, 5, 4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _vi(name, dtype, shape):
    return oh.make_tensor_value_info(name, dtype, shape)


def _recurrent(op: str, direction: str, *, layout=0, lens=False, states=False, **attrs):
    """One ``op`` node on x of dim_param length "T": a model and its feeds per length."""
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    rng = np.random.default_rng(7)

    def f32(*shape, scale=0.5):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    inits = {"w": f32(nd, g * HIDDEN, INPUT), "r": f32(nd, g * HIDDEN, HIDDEN),
             "b": f32(nd, 2 * g * HIDDEN)}  # fmt: skip
    names = ["x", "w", "r", "b", "lens" if lens else "", "h0" if states else ""]
    outs = ["y", "y_h"]
    x_shape = ["T", BATCH, INPUT] if layout == 0 else [BATCH, "T", INPUT]
    s_shape = [nd, BATCH, HIDDEN] if layout == 0 else [BATCH, nd, HIDDEN]
    y_shape = ["T", nd, BATCH, HIDDEN] if layout == 0 else [BATCH, "T", nd, HIDDEN]
    inputs = [_vi("x", TP.FLOAT, x_shape)]
    if lens:
        inputs.append(_vi("lens", TP.INT32, [BATCH]))
    if states:
        inputs.append(_vi("h0", TP.FLOAT, s_shape))
    outputs = [_vi("y", TP.FLOAT, y_shape), _vi("y_h", TP.FLOAT, s_shape)]
    if op == "LSTM":
        names.append("c0" if states else "")
        inits["p"] = f32(nd, 3 * HIDDEN)
        names.append("p")
        if states:
            inputs.append(_vi("c0", TP.FLOAT, s_shape))
        outputs.append(_vi("y_c", TP.FLOAT, s_shape))
        outs.append("y_c")
    while names[-1] == "":
        names.pop()
    node = oh.make_node(op, names, outs, hidden_size=HIDDEN, direction=direction,
                        layout=layout, **attrs)  # fmt: skip
    inits_t = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    m = model([node], inputs, outputs, inits_t, opset=14)

    feeds = []
    for t in LENGTHS:
        feed = {"x": f32(*[t if d == "T" else d for d in x_shape], scale=1.0)}
        if lens:  # every length from 1 to t, the longest at most t
            feed["lens"] = np.minimum(np.array([t, max(1, t - 2), 1]), t).astype(np.int32)
        if states:
            feed["h0"] = f32(*s_shape, scale=1.0)
            if op == "LSTM":
                feed["c0"] = f32(*s_shape, scale=1.0)
        feeds.append(feed)
    return m, feeds


def _loops(f) -> int:
    return sum(gv.name_hint.startswith("loop") for gv in f.module.functions)


CASES = {
    "lstm_forward": ("LSTM", "forward", {}),
    "lstm_reverse": ("LSTM", "reverse", {}),
    "lstm_bidirectional": ("LSTM", "bidirectional", {}),
    "lstm_lens": ("LSTM", "bidirectional", {"lens": True}),
    "lstm_states": ("LSTM", "reverse", {"states": True, "lens": True}),
    "lstm_input_forget_clip": ("LSTM", "forward", {"input_forget": 1, "clip": 0.9}),
    "gru_forward": ("GRU", "forward", {"states": True}),
    "gru_linear_before_reset": (
        "GRU", "bidirectional", {"linear_before_reset": 1, "lens": True, "states": True}
    ),
    "gru_reset_before": ("GRU", "bidirectional", {"linear_before_reset": 0, "lens": True}),
    "rnn_bidirectional": ("RNN", "bidirectional", {"lens": True, "states": True}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_recurrent_over_a_run_time_length(name: str) -> None:
    op, direction, kw = CASES[name]
    m, feeds = _recurrent(op, direction, **kw)
    f = check(m, *feeds)
    assert _loops(f) == 1  # every direction steps in one loop


LAYOUT1 = {
    "lstm": ("LSTM", "bidirectional", {"lens": True, "states": True}),
    "gru": ("GRU", "reverse", {"linear_before_reset": 1, "states": True}),
    "rnn": ("RNN", "bidirectional", {"activations": ["Relu", "Tanh"], "lens": True}),
}


@pytest.mark.parametrize("name", sorted(LAYOUT1))
def test_recurrent_layout1_over_a_run_time_length(name: str) -> None:
    """Batch-major (layout 1) through Relax against onnxruntime on the same op in layout 0
    (onnxruntime refuses layout 1), inputs and outputs transposed."""
    import onnxruntime as ort

    import codegen.relax as cr
    import msc

    op, direction, kw = LAYOUT1[name]
    m1, feeds1 = _recurrent(op, direction, layout=1, **kw)
    m0, _ = _recurrent(op, direction, layout=0, **kw)
    sess = ort.InferenceSession(m0.SerializeToString(), providers=["CPUExecutionProvider"])
    g = msc.from_onnx(m1)
    f = cr.build(g)
    assert _loops(f) == 1
    for feed in feeds1:
        feed0 = {k: np.swapaxes(v, 0, 1) if v.ndim == 3 else v for k, v in feed.items()}
        y, *states = sess.run(None, feed0)
        want = [np.transpose(y, (2, 0, 1, 3)), *[np.swapaxes(s, 0, 1) for s in states]]
        got = f(*[feed[v.name] for v in g.inputs])
        for a, b in zip(got, want, strict=True):
            assert a.numpy().shape == b.shape
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-5)


def _scan(direction: int, out_axis: int):
    """Scan over x [T, 2] (dim_param T): s += x_t; y_t = s * w (w from the outer scope)."""
    node = accumulating_scan(
        scan_input_directions=[direction], scan_output_directions=[direction],
        scan_output_axes=[out_axis],
    )  # fmt: skip
    ys = ["T", 2] if out_axis == 0 else [2, "T"]
    w = numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "w")
    return model(
        [node], [_vi("s0", TP.FLOAT, [2]), _vi("x", TP.FLOAT, ["T", 2])],
        [_vi("s", TP.FLOAT, [2]), _vi("ys", TP.FLOAT, ys)], [w],
    )  # fmt: skip


@pytest.mark.parametrize("direction, out_axis", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_over_a_run_time_length(direction: int, out_axis: int) -> None:
    rng = np.random.default_rng(3)
    feeds = [
        {"s0": rng.standard_normal(2).astype(np.float32),
         "x": rng.standard_normal((t, 2)).astype(np.float32)}
        for t in LENGTHS
    ]  # fmt: skip
    f = check(_scan(direction, out_axis), *feeds)
    assert _loops(f) == 1


def test_lstm_over_a_length_computed_from_the_input() -> None:
    """The sequence is x twice (length 2T, an expression of T): the loop function reads its
    parameters' dims as fresh symbols, as it cannot solve 2T for T."""
    m0, feeds = _recurrent("LSTM", "bidirectional", lens=False)
    g = m0.graph
    g.node[0].input[0] = "xx"
    g.node.insert(0, oh.make_node("Concat", ["x", "x"], ["xx"], axis=0))
    g.output[0].type.tensor_type.shape.dim[0].dim_param = "T2"
    f = check(model(list(g.node), list(g.input), list(g.output), list(g.initializer), 14), *feeds)
    assert _loops(f) == 1


def test_scan_whose_steps_have_a_run_time_batch() -> None:
    """Scan over x [T, B, 2] with dim_params T and B: each step's output is [B, 2], so the
    stacked outputs start empty with B unknown and take the steps' B."""
    body = oh.make_graph(
        [oh.make_node("Add", ["s", "xt"], ["s2"]), oh.make_node("Mul", ["s2", "s2"], ["y"])],
        "body", [_vi("s", TP.FLOAT, ["B", 2]), _vi("xt", TP.FLOAT, ["B", 2])],
        [_vi("s2", TP.FLOAT, ["B", 2]), _vi("y", TP.FLOAT, ["B", 2])],
    )  # fmt: skip
    node = oh.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                        scan_input_directions=[1])  # fmt: skip
    m = model(
        [node], [_vi("s0", TP.FLOAT, ["B", 2]), _vi("x", TP.FLOAT, ["T", "B", 2])],
        [_vi("s", TP.FLOAT, ["B", 2]), _vi("ys", TP.FLOAT, ["T", "B", 2])],
    )  # fmt: skip
    rng = np.random.default_rng(5)
    feeds = [
        {"s0": rng.standard_normal((b, 2)).astype(np.float32),
         "x": rng.standard_normal((t, b, 2)).astype(np.float32)}
        for t, b in [(3, 1), (5, 4), (1, 2)]
    ]  # fmt: skip
    f = check(m, *feeds)
    assert _loops(f) == 1


def test_lstm_whose_initial_state_names_the_batch_apart() -> None:
    """x's batch is dim_param B, the initial state's N: the loop's state is cast to x's
    batch (checked at run time), so every step's state has one shape."""
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * HIDDEN, INPUT)).astype("f4"), "w")
    r = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * HIDDEN, HIDDEN)).astype("f4"), "r")
    node = oh.make_node("LSTM", ["x", "w", "r", "", "", "h0"], ["y", "y_h"], hidden_size=HIDDEN)
    m = model(
        [node], [_vi("x", TP.FLOAT, ["T", "B", INPUT]), _vi("h0", TP.FLOAT, [1, "N", HIDDEN])],
        [_vi("y", TP.FLOAT, ["T", 1, "B", HIDDEN]), _vi("y_h", TP.FLOAT, [1, "B", HIDDEN])],
        [w, r], 14,
    )  # fmt: skip
    feeds = [
        {"x": rng.standard_normal((t, b, INPUT)).astype(np.float32),
         "h0": rng.standard_normal((1, b, HIDDEN)).astype(np.float32)}
        for t, b in [(2, 3), (5, 1)]
    ]  # fmt: skip
    assert _loops(check(m, *feeds)) == 1


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_a_long_static_sequence_is_looped_too(op: str) -> None:
    """Past UNROLL static steps the loop is used as well (unrolling compiles in time that
    grows with the length); both lengths against onnxruntime."""
    from codegen.relax.recurrent import UNROLL

    rng = np.random.default_rng(2)
    g = GATES[op]
    for steps, loops in [(UNROLL, 0), (UNROLL + 3, 1)]:
        shapes = {"w": (2, g * HIDDEN, INPUT), "r": (2, g * HIDDEN, HIDDEN)}
        inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, s).astype("f4"), n)
                 for n, s in shapes.items()]  # fmt: skip
        node = oh.make_node(op, ["x", "w", "r"], ["y", "y_h"], hidden_size=HIDDEN,
                            direction="bidirectional")  # fmt: skip
        m = model(
            [node], [_vi("x", TP.FLOAT, [steps, BATCH, INPUT])],
            [_vi("y", TP.FLOAT, [steps, 2, BATCH, HIDDEN]),
             _vi("y_h", TP.FLOAT, [2, BATCH, HIDDEN])], inits, 14,
        )  # fmt: skip
        f = check(m, {"x": rng.standard_normal((steps, BATCH, INPUT)).astype(np.float32)})
        assert _loops(f) == loops
