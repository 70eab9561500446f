"""codegen.relax on the patterns of the ONNX files other projects ship in their wheels
(bench/pip_models.py): each a small model built here, compiled for the Relax VM and compared
with onnxruntime (or ONNX's reference where onnxruntime lacks the op)."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")

from onnx import TensorProto, helper  # noqa: E402

import codegen.relax as cr  # noqa: E402
import msc  # noqa: E402
from tests.codegen.relax_vs_ort import check as _check  # noqa: E402
from tests.codegen.relax_vs_ort import model as _model  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


# ----------------------------------------------------------- broadcasts of two symbols
@pytest.mark.parametrize("op", ["Where", "Add", "Less", "Div"])
def test_broadcast_of_two_run_time_dims(op: str) -> None:
    """onnx-asr's resamplers mask a [batch, n] result with a mask built from another input's
    length: two symbols Relax cannot prove equal, a where of unknown shape that LegalizeOps
    left to CodeGenVM. The emitter matches them at run time."""
    x = helper.make_tensor_value_info("x", F32, ["a", "n"])
    y = helper.make_tensor_value_info("y", F32, ["b", "m"])
    out = helper.make_tensor_value_info("z", TensorProto.BOOL if op == "Less" else F32, ["a", "n"])
    if op == "Where":
        nodes = [
            helper.make_node("Greater", ["y", "zero"], ["c"]),
            helper.make_node("Where", ["c", "x", "zero"], ["z"]),
        ]
        inits = [helper.make_tensor("zero", F32, [], [0.0])]
    else:
        nodes, inits = [helper.make_node(op, ["x", "y"], ["z"])], []
    model = _model(nodes, [x, y], [out], inits)
    rng = np.random.default_rng(0)
    feeds = {k: rng.normal(size=(2, 5)).astype(np.float32) for k in "xy"}
    _check(model, feeds)


# ------------------------------------------------------------------------ STFT and DFT
def _window(n: int) -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)


@pytest.mark.parametrize("onesided", [1, 0])
@pytest.mark.parametrize("window", [True, False])
def test_stft_of_a_run_time_length(onesided: int, window: bool) -> None:
    """The speech front ends' STFT: a signal of run-time length, a constant step and window
    (or frame_length); frames are a strided conv1d with the window times cos / sin."""
    n, step = 64, 16
    sig = helper.make_tensor_value_info("x", F32, ["b", "L"])
    out = helper.make_tensor_value_info("y", F32, ["b", "f", "k", 2])
    inits = [helper.make_tensor("step", I64, [], [step])]
    ins = ["x3", "step"]
    if window:
        inits.append(helper.make_tensor("w", F32, [n], _window(n)))
        ins.append("w")
    else:
        inits.append(helper.make_tensor("n", I64, [], [n]))
        ins += ["", "n"]
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["x3"]),
        helper.make_node("STFT", ins, ["y"], onesided=onesided),
    ]
    inits.append(helper.make_tensor("ax", I64, [1], [2]))
    model = _model(nodes, [sig], [out], inits)
    rng = np.random.default_rng(1)
    for length in (200, 131):
        _check(model, {"x": rng.uniform(-0.5, 0.5, (2, length)).astype(np.float32)}, atol=2e-6)


def test_stft_of_a_complex_signal() -> None:
    n = 32
    sig = helper.make_tensor_value_info("x", F32, [1, "L", 2])
    out = helper.make_tensor_value_info("y", F32, [1, "f", n, 2])
    inits = [
        helper.make_tensor("step", I64, [], [8]),
        helper.make_tensor("w", F32, [n], _window(n)),
    ]
    node = helper.make_node("STFT", ["x", "step", "w"], ["y"], onesided=0)
    model = _model([node], [sig], [out], inits)
    x = np.random.default_rng(2).normal(size=(1, 100, 2)).astype(np.float32)
    _check(model, {"x": x}, atol=2e-6)


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((2, 5, 40, 1), {"onesided": 1, "dft_length": 64}),  # wespeaker: zero-padded rfft
        ((2, 5, 40, 1), {"onesided": 1, "dft_length": 30}),  # trimmed
        ((2, 5, 40, 2), {}),
        ((2, 5, 40, 2), {"inverse": 1}),
        ((2, 40, 5, 2), {"axis": 1, "inverse": 1}),
        ((3, 21, 4, 2), {"axis": 1, "inverse": 1, "onesided": 1}),  # irfft: 40 real samples
    ],
)
def test_dft(shape, attrs) -> None:
    """DFT along a static axis (other dims symbolic) as one matmul with a cos / sin matrix."""
    attrs = {"axis": 2, **attrs}
    length = attrs.pop("dft_length", None)
    inits, ins = [], ["x"]
    if length is not None:
        inits.append(helper.make_tensor("n", I64, [], [length]))
        ins.append("n")
    x = helper.make_tensor_value_info("x", F32, ["a", *shape[1:]])
    y = helper.make_tensor_value_info("y", F32, ["a", "p", "q", "r"])
    model = _model([helper.make_node("DFT", ins, ["y"], **attrs)], [x], [y], inits)
    feed = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    # onnxruntime's DFT of a length that is not a power of two rounds to ~3e-6 of the largest
    # output (the matmul to ~2e-7 of it, against numpy's float64 FFT)
    _check(model, {"x": feed}, atol=1e-5)


# ------------------------------------------------------- reshape targets built from shapes
def test_reshape_of_a_strided_conv_by_a_target_with_zeros() -> None:
    """GigaAM v3's front end: a stride-160 conv1d (frames = N // 160 - 1), reshaped by
    [0, 2, 161, -1] (the zero copies the batch). Read at run time the target gave fresh dims
    and TVM's RewriteDataflowReshape failed ("padding factor ... not divisible"); its values
    follow from the conv's shape, so the reshape is emitted to them."""
    x = helper.make_tensor_value_info("x", F32, ["b", "n"])
    y = helper.make_tensor_value_info("y", F32, ["b", "f", 3])
    rng = np.random.default_rng(4)
    inits = [
        helper.make_tensor("ax", I64, [1], [1]),
        helper.make_tensor("w", F32, [6, 1, 8], rng.normal(size=48).astype(np.float32)),
        helper.make_tensor("t", I64, [4], [0, 2, 3, -1]),
        helper.make_tensor("one", I64, [1], [1]),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["x3"]),
        helper.make_node("Conv", ["x3", "w"], ["c"], strides=[4]),
        helper.make_node("Reshape", ["c", "t"], ["r"]),
        helper.make_node("ReduceSumSquare", ["r", "one"], ["s"], keepdims=0),
        helper.make_node("Transpose", ["s"], ["y"], perm=[0, 2, 1]),
    ]
    model = _model(nodes, [x], [y], inits, opset=18)
    for n in (64, 83):
        _check(model, {"x": rng.normal(size=(2, n)).astype(np.float32)})


@pytest.mark.parametrize("size", [1, 4])
def test_broadcast_of_a_run_time_dim_against_a_static_one(size: int) -> None:
    """Magika: a dim known only at run time (1 there) broadcast against a static 4: the
    operand is gathered to 4, so a run-time 1 broadcasts as ONNX says."""
    x = helper.make_tensor_value_info("x", F32, [3, "n"])
    z = helper.make_tensor_value_info("z", F32, [3, 4])
    w = helper.make_tensor("w", F32, [3, 4], np.arange(12, dtype=np.float32))
    model = _model([helper.make_node("Mul", ["x", "w"], ["z"])], [x], [z], [w])
    _check(model, {"x": np.random.default_rng(5).normal(size=(3, size)).astype(np.float32)})


def test_concat_of_run_time_dims() -> None:
    """Concatenated inputs whose other dims are different symbols (PP-OCRv4's recognizer):
    Relax inferred an unknown shape, left to CodeGenVM; the emitter matches them."""
    x = helper.make_tensor_value_info("x", F32, ["a", "n"])
    y = helper.make_tensor_value_info("y", F32, ["b", "m"])
    z = helper.make_tensor_value_info("z", F32, ["a", "k"])
    model = _model([helper.make_node("Concat", ["x", "y"], ["z"], axis=1)], [x, y], [z])
    rng = np.random.default_rng(6)
    _check(model, {"x": rng.normal(size=(2, 3)).astype(np.float32),
                   "y": rng.normal(size=(2, 5)).astype(np.float32)})  # fmt: skip


def test_attention_over_a_computed_length() -> None:
    """Attention whose key and value lengths are computed (a concat of two run-time lengths)
    and read from different inputs: Relax must see them equal, and TOPI's attention compares
    them by identity, so they become one symbol."""

    def info(name, s):
        return helper.make_tensor_value_info(name, F32, [1, 2, s, 4])

    ins = [info("q", "sq"), info("k1", "s1"), info("k2", "s2"), info("v1", "t1"),
           info("v2", "t2")]  # fmt: skip
    out = helper.make_tensor_value_info("y", F32, [1, 2, "sq", 4])
    nodes = [
        helper.make_node("Concat", ["k1", "k2"], ["k"], axis=2),
        helper.make_node("Concat", ["v1", "v2"], ["v"], axis=2),
        helper.make_node("Attention", ["q", "k", "v"], ["y"]),
    ]
    model = _model(nodes, ins, [out], opset=23)
    rng = np.random.default_rng(7)
    sizes = {"q": 3, "k1": 2, "k2": 5, "v1": 4, "v2": 3}
    feeds = {k: rng.normal(size=(1, 2, n, 4)).astype(np.float32) for k, n in sizes.items()}
    _check(model, feeds)


@pytest.mark.parametrize("spelled", [False, True], ids=["Attention", "repeat_kv"])
def test_grouped_query_attention(spelled: bool) -> None:
    """Llama-style attention, 4 query heads over 2 key / value heads: ONNX's Attention with
    fewer key heads, or exporters' repeat_kv (unsqueeze, expand, reshape) that the frontend
    fuses into attention with enable_gqa. Each key and value head is repeated in a row."""
    q = helper.make_tensor_value_info("q", F32, [1, 4, "s", 8])
    k, v = (helper.make_tensor_value_info(n, F32, [1, 2, "s", 8]) for n in "kv")
    out = helper.make_tensor_value_info("y", F32, [1, 4, "s", 8])
    nodes, inits = [], []
    if spelled:
        inits = [helper.make_tensor("ax", I64, [1], [2]),
                 helper.make_tensor("to", I64, [5], [1, 2, 2, 1, 8]),
                 helper.make_tensor("heads", I64, [4], [1, 4, -1, 8])]  # fmt: skip
        for t in "kv":
            nodes += [
                helper.make_node("Unsqueeze", [t, "ax"], [f"{t}u"]),
                helper.make_node("Expand", [f"{t}u", "to"], [f"{t}e"]),
                helper.make_node("Reshape", [f"{t}e", "heads"], [f"{t}r"]),
            ]
        nodes.append(helper.make_node("Attention", ["q", "kr", "vr"], ["y"], is_causal=1))
    else:
        nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1))
    model = _model(nodes, [q, k, v], [out], inits, opset=23)
    rng = np.random.default_rng(9)
    feeds = {n: rng.normal(size=(1, 4 if n == "q" else 2, 6, 8)).astype(np.float32) for n in "qkv"}
    _check(model, feeds)


@pytest.mark.parametrize("op", ["GatherElements", "Gather"])
def test_negative_indices_along_a_run_time_dim(op: str) -> None:
    """Kaldi's front end gathers with indices counted from the end along a dim of run-time
    size: they are wrapped by the size read from the data's shape."""
    x = helper.make_tensor_value_info("x", F32, [2, "n"])
    i = helper.make_tensor_value_info("i", I64, [2, 3] if op == "GatherElements" else [3])
    z = helper.make_tensor_value_info("z", F32, [2, 3])
    model = _model([helper.make_node(op, ["x", "i"], ["z"], axis=1)], [x, i], [z])
    rng = np.random.default_rng(8)
    idx = np.array([[-1, 0, -7], [2, -3, 6]] if op == "GatherElements" else [-1, 0, -7])
    _check(model, {"x": rng.normal(size=(2, 7)).astype(np.float32), "i": idx.astype(np.int64)})


def test_slices_past_either_end_of_a_run_time_dim() -> None:
    """openwakeword's silero_vad v4 reflects its input with Slices to INT64_MIN (step -1) and
    INT64_MAX over a run-time length: their bounds come from the dim itself, so no 2**62
    reaches the result's shape (TVM's memory planner multiplied it by 4, past int64)."""
    lo, hi = -(2**63), 2**63 - 1
    x = helper.make_tensor_value_info("x", F32, [1, 1, "n"])
    y = helper.make_tensor_value_info("y", F32, [1, 1, None])
    bounds = {"ax": 2, "m1": -1, "lo": lo, "one": 1, "hi": hi, "s1": -1, "p1": 1}
    inits = [helper.make_tensor(k, I64, [1], [v]) for k, v in bounds.items()]
    nodes = [
        helper.make_node("Slice", ["x", "m1", "lo", "ax", "s1"], ["back"]),  # reversed
        helper.make_node("Slice", ["x", "one", "hi", "ax", "p1"], ["tail"]),  # from 1 on
        helper.make_node("Concat", ["back", "x", "tail"], ["c"], axis=2),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    m = _model(nodes, [x], [y], inits)
    assert str(2**62 - 1) not in cr.to_script(msc.from_onnx(m))
    rng = np.random.default_rng(10)
    _check(m, *({"x": rng.normal(size=(1, 1, n)).astype(np.float32)} for n in (5, 12)))


def test_mean_of_an_if_whose_branches_differ_in_shape() -> None:
    """A reduction of an If's value, whose branches give different shapes of one rank: Relax
    knows its rank only, and the VM could not emit the mean; it gets dims to legalize with."""
    x = helper.make_tensor_value_info("x", F32, [2, "n"])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", F32, [2])

    def branch(name, node):
        out = helper.make_tensor_value_info(f"{name}_out", F32, [2, f"{name}_k"])
        return helper.make_graph([node], name, [], [out])

    then = branch("t", helper.make_node("Identity", ["x"], ["t_out"]))
    other = branch("e", helper.make_node("Concat", ["x", "x"], ["e_out"], axis=1))
    nodes = [
        helper.make_node("If", ["c"], ["v"], then_branch=then, else_branch=other),
        helper.make_node("ReduceMean", ["v"], ["y"], axes=[1], keepdims=0),
    ]
    m = _model(nodes, [x, c], [y])
    rng = np.random.default_rng(11)
    xs = rng.normal(size=(2, 3)).astype(np.float32)
    _check(m, {"x": xs, "c": np.array(True)}, {"x": xs, "c": np.array(False)})
