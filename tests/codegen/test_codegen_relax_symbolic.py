"""codegen.relax on inputs of symbolic size: the patterns of the wheels' models
(bench/pip_models.py) that need a dim Relax works out from another (FPN upsampling, targets
read from shapes), each a small ONNX model compiled once for the Relax VM and compared with
onnxruntime at two input sizes."""

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


def _img(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _const(name: str, values, dtype=F32):
    arr = np.asarray(values)
    return helper.make_tensor(name, dtype, arr.shape, arr.reshape(-1).tolist())


# -------------------------------------------------------------- resize to a symbolic size
@pytest.mark.parametrize(
    "mode, coord, scale",
    [
        ("nearest", "asymmetric", 2.0),  # PP-OCR's and YOLOv8's FPN upsampling
        ("nearest", "asymmetric", 8.0),
        ("linear", "half_pixel", 2.0),
        ("nearest", "half_pixel", 3.0),
    ],
)
def test_resize_by_a_whole_scale_of_symbolic_dims(mode: str, coord: str, scale: float) -> None:
    """A stride-2 convolution of an image of any height and width, upsampled by a constant
    whole scale: the output size is the (symbolic) dims times the scale, which image.resize
    maps as ONNX does (out / in is the scale)."""
    x = helper.make_tensor_value_info("x", F32, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    w = _const("w", _img(4, 3, 3, 3, seed=1))
    scales = _const("scales", [1.0, 1.0, scale, scale])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Resize", ["c", "", "scales"], ["y"], mode=mode,
            coordinate_transformation_mode=coord, nearest_mode="floor",
        ),
    ]  # fmt: skip
    model = _model(nodes, [x], [y], [w, scales])
    _check(model, {"x": _img(1, 3, 16, 16)}, {"x": _img(2, 3, 13, 22)})


def test_resize_by_a_fractional_scale_of_a_symbolic_dim_is_refused() -> None:
    """A fractional scale of a symbolic dim (floor(h * 1.5)) is no whole size image.resize
    maps by that scale: a clear refusal, not a wrong answer."""
    x = helper.make_tensor_value_info("x", F32, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    scales = _const("scales", [1.0, 1.0, 1.5, 1.5])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    model = _model([node], [x], [y], [scales])
    with pytest.raises(msc.errors.UnsupportedOpsError, match="fractional scale"):
        cr.build(msc.from_onnx(model))


def test_resize_to_the_size_of_another_tensor() -> None:
    """An FPN top-down path: the coarse map resized to the fine map's H and W, read with
    Shape and joined to the coarse map's N and C."""
    x = helper.make_tensor_value_info("x", F32, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", F32, [None] * 4)
    w = _const("w", _img(3, 3, 3, 3, seed=1))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["cs"], end=2),
        helper.make_node("Shape", ["x"], ["xs"], start=2),
        helper.make_node("Concat", ["cs", "xs"], ["sizes"], axis=0),
        helper.make_node("Resize", ["c", "", "", "sizes"], ["r"], mode="nearest"),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ]
    model = _model(nodes, [x], [y], [w])
    _check(model, {"x": _img(1, 3, 16, 16)}, {"x": _img(1, 3, 15, 9)})


# -------------------------------------------------- targets msc could not infer a dim of
def test_reshape_of_a_run_time_length_by_a_constant_target() -> None:
    """YOLOv8's anchors: a Range of a length computed from the input's shape, reshaped by a
    constant [-1, 1]. msc leaves the -1 unknown; Relax works it out from the range's dim
    (a fresh symbol there was bound by nothing: TVM failed on it, or crashed)."""
    x = helper.make_tensor_value_info("x", F32, [1, 2, "h"])
    y = helper.make_tensor_value_info("y", F32, [])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=2),
        helper.make_node("Squeeze", ["s"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=F32),
        helper.make_node("Range", ["zero", "nf", "half"], ["r"]),
        helper.make_node("Reshape", ["r", "target"], ["col"]),
        helper.make_node("Flatten", ["col"], ["flat"], axis=0),
        helper.make_node("Expand", ["col", "wide"], ["grid"]),
        helper.make_node("ReduceSum", ["grid", "ax"], ["sum"], keepdims=0),
        helper.make_node("Add", ["sum", "flat_sum"], ["y0"]),
        helper.make_node("ReduceSum", ["flat"], ["flat_sum"], keepdims=0),
        helper.make_node("Mul", ["y0", "one"], ["y"]),
    ]
    inits = [
        _const("zero", 0.0),
        _const("half", 0.5),
        _const("one", 1.0),
        _const("target", [-1, 1], I64),
        _const("wide", [1, 3], I64),
        _const("ax", [1], I64),
    ]
    nodes = nodes[:8] + [nodes[9], nodes[8], nodes[10]]  # flat_sum before its use
    model = _model(nodes, [x], [y], inits)
    _check(model, {"x": _img(1, 2, 5)}, {"x": _img(1, 2, 8)})


def test_reshape_back_to_a_shape_read_before() -> None:
    """magika's dense layers: [b, n, k] flattened to [b n, k] for a MatMul and reshaped back
    by a target read from the input's Shape. The target's zeros would take the [b n, k]
    tensor's dims, which for a target of b is b n exactly when b is 0, so b itself: the
    reshape is by known dims, with no run-time shape read."""
    x = helper.make_tensor_value_info("x", F32, ["b", 6, 4])
    y = helper.make_tensor_value_info("y", F32, [None] * 3)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], end=2),
        helper.make_node("Reshape", ["x", "flat"], ["x2"]),
        helper.make_node("MatMul", ["x2", "w"], ["m"]),
        helper.make_node("Concat", ["s", "k"], ["target"], axis=0),
        helper.make_node("Reshape", ["m", "target"], ["y"]),
    ]
    inits = [_const("flat", [-1, 4], I64), _const("w", _img(4, 5, seed=2)), _const("k", [5], I64)]
    model = _model(nodes, [x], [y], inits)
    f = _check(model, {"x": _img(1, 6, 4)}, {"x": _img(3, 6, 4)})
    assert "tensor_to_shape" not in f.module.script()


# ------------------------------------------------------------- a loop result of no rank
def test_loop_result_whose_rank_changes_is_refused_cleanly() -> None:
    """slanet-plus's decoder loop carries a value that starts 0-d and leaves the body 3-d:
    msc types the result with no rank, and the ops reading it are refused by name (the
    loop's emitter used to fail on the rank-less type with a bare TypeError)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Expand", ["v_in", "two"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", F32, [None]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", F32, [None]),
        ],
    )
    x = helper.make_tensor_value_info("x", F32, [])
    start = helper.make_tensor_value_info("start", I64, [1])
    y = helper.make_tensor_value_info("y", F32, [None])
    nodes = [
        helper.make_node("Loop", ["n", "", "x"], ["v"], body=body),
        helper.make_node("Slice", ["v", "start", "end", "axes"], ["y"]),
    ]
    inits = [
        _const("n", 3, I64),
        _const("two", [2], I64),
        _const("end", [5], I64),
        _const("axes", [0], I64),
    ]
    model = _model(nodes, [x, start], [y], inits)
    g = msc.from_onnx(model)
    assert g.nodes[0].outputs[0].type.shape is None
    with pytest.raises(msc.errors.UnsupportedOpsError, match="slice: emitter: an input of unknown"):
        cr.to_module(g)


# ----------------------------------------------------------- conv of an input of no rank
@pytest.mark.parametrize("op", ["Conv", "MaxPool"])
def test_conv_of_an_if_whose_branches_differ_in_rank(op: str) -> None:
    """silero-vad v4: an If gives a 3-d signal on one branch and a 2-d one on the other,
    so its value has no rank; the Conv (or pool) after it takes the rank of its output (msc
    infers it from the weight / attributes) and the VM checks it at run time."""
    x = helper.make_tensor_value_info("x", F32, [1, 2, "n"])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", F32, [1, None, None])
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", F32, [1, 2, "n"])],
    )  # fmt: skip
    other = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "zero"], ["u"])], "else", [],
        [helper.make_tensor_value_info("u", F32, [2, "n"])],
    )  # fmt: skip
    conv = (
        helper.make_node("Conv", ["s", "w"], ["y"], pads=[1, 1])
        if op == "Conv"
        else helper.make_node("MaxPool", ["s"], ["y"], kernel_shape=[3], strides=[2])
    )
    nodes = [helper.make_node("If", ["c"], ["s"], then_branch=then, else_branch=other), conv]
    inits = [_const("zero", [0], I64)] + (
        [_const("w", _img(1, 2, 3, seed=3))] if op == "Conv" else []
    )
    model = _model(nodes, [x, c], [y], inits)
    yes = np.array(True)
    _check(model, {"x": _img(1, 2, 9), "c": yes}, {"x": _img(1, 2, 14), "c": yes})


# ------------------------------------------------ reshape of a product of run-time shapes
def test_reshape_of_a_matmul_of_run_time_shapes() -> None:
    """torch.onnx's dynamic BERT and Llama: the attention scores are a MatMul of two values
    whose dims were each read from a run-time shape, so Relax cannot tell that they agree and
    knows only the product's rank; the Reshape after it by a run-time target reads its dims
    at run time (it was "reshape emitter: an input of unknown shape")."""
    x = helper.make_tensor_value_info("x", F32, ["n", 8])
    to4 = helper.make_tensor_value_info("to4", I64, [4])
    to2 = helper.make_tensor_value_info("to2", I64, [2])
    y = helper.make_tensor_value_info("y", F32, [None, None])
    nodes = [
        helper.make_node("Reshape", ["x", "to4"], ["q"]),  # [b, s, 2, 4], read at run time
        helper.make_node("Reshape", ["x", "to4"], ["k"]),  # the same, read again
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),  # [b, s, 2, 2]
        helper.make_node("Reshape", ["scores", "to2"], ["y"]),  # [b * s, 4]
    ]
    model = _model(nodes, [x, to4, to2], [y])
    feeds = [
        {"x": _img(6, 8), "to4": np.array([2, 3, 2, 4]), "to2": np.array([-1, 4])},
        {"x": _img(5, 8), "to4": np.array([1, 5, 2, 4]), "to2": np.array([5, -1])},
    ]
    _check(model, *feeds)


# ------------------------------------------------- grouped-query attention of run-time heads
def test_attention_of_run_time_head_counts_groups_them() -> None:
    """ONNX Attention groups query heads over fewer key / value heads by itself; with head
    counts only known at run time (msc's own ONNX of a Llama: a Reshape to -1 heads) it reads
    as enable_gqa, and Relax repeats each key / value head h // kh times in a row: plain
    attention at 4 over 4 heads, grouped at 4 over 2 and 6 over 1, against onnxruntime. A
    head count that does not divide (5 over 2) stops the VM instead of reading memory."""
    q, k, v = (
        helper.make_tensor_value_info(n, F32, [1, h, 3, 8])
        for n, h in (("q", "h"), ("k", "kh"), ("v", "kh"))
    )
    y = helper.make_tensor_value_info("y", F32, [1, None, 3, 8])
    m = _model([helper.make_node("Attention", ["q", "k", "v"], ["y"])], [q, k, v], [y], opset=23)
    assert msc.from_onnx(m).nodes[0].attrs["enable_gqa"]

    def feed(h: int, kh: int) -> dict:
        return {"q": _img(1, h, 3, 8), "k": _img(1, kh, 3, 8, seed=1), "v": _img(1, kh, 3, 8)}

    f = _check(m, feed(4, 4), feed(4, 2), feed(6, 1))
    bad = feed(5, 2)
    with pytest.raises(Exception, match="match_cast"):
        f(bad["q"], bad["k"], bad["v"])
