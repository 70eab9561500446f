"""Patterns from ONNX files other projects ship in their wheels (bench/pip_models.py found each
one failing: silero-vad, onnx-asr's speech front ends).

Each model here is the pattern alone. It runs through generated PyTorch and regenerated ONNX
at two input sizes from one import, compared with onnxruntime on the original file (or with
numpy where onnxruntime has no kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402
import msc  # noqa: E402
from msc.errors import MscError  # noqa: E402

FLT, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
rng = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def _ort(model_or_path, feeds):
    data = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    s = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: feeds[i.name] for i in s.get_inputs()})


def _check(m, feeds_list, tmp_path, reference=None, atol=1e-5):
    """Import once; generated PyTorch and regenerated ONNX equal the reference on each feed."""
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    g = msc.from_onnx(str(path))
    mod = codegen.torch.to_module(g)
    out = tmp_path / "out.onnx"
    codegen.onnx.save(g, out)
    for feeds in feeds_list:
        want = reference(feeds) if reference else _ort(m, feeds)
        with torch.no_grad():
            got = mod(*[torch.from_numpy(np.asarray(feeds[v.name])) for v in g.inputs])
        got = list(got) if isinstance(got, tuple | list) else [got]
        for w, a in zip(want, got, strict=True):
            np.testing.assert_allclose(a.numpy(), w, atol=atol, rtol=1e-5)
        for w, a in zip(want, _ort(str(out), feeds), strict=True):
            np.testing.assert_allclose(a, w, atol=atol, rtol=1e-5)
    return g


def test_reshape_copying_dims_into_a_longer_shape(tmp_path):
    """Reshape [0, -1, 4] of a rank-2 input of unknown dims: the 0 copies dim 0 at run time
    and the target is longer than the input's rank (it read past the input's shape)."""
    m = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_vi("x", FLT, ["b", "n"])],
        [_vi("y", FLT, None)],
        [numpy_helper.from_array(np.array([0, -1, 4], np.int64), "s")],
    )
    feeds = [{"x": rng.standard_normal(s).astype(np.float32)} for s in [(2, 12), (3, 8)]]
    g = _check(m, feeds, tmp_path)
    assert g.outputs[0].type.rank == 3


def test_conv_of_a_value_of_unknown_rank(tmp_path):
    """An If whose branches give different ranks has an output of unknown rank (silero-vad
    picks a batched or unbatched state this way); a Conv of it takes its rank from the
    weight, and so does the result's type."""
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"])], "then", [], [_vi("t", FLT, None)]
    )
    other = helper.make_graph(
        [helper.make_node("Unsqueeze", ["x", "zero"], ["e"])], "else", [], [_vi("e", FLT, None)]
    )
    w = rng.standard_normal((4, 2, 3)).astype(np.float32)
    m = _model(
        [
            helper.make_node("If", ["c"], ["v"], then_branch=then, else_branch=other),
            helper.make_node("Conv", ["v", "w"], ["y"], pads=[1, 1]),
        ],
        [_vi("x", FLT, ["b", 2, "n"]), _vi("c", BOOL, [])],
        [_vi("y", FLT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([0]), "zero")],
    )
    feeds = [
        {"x": rng.standard_normal(s).astype(np.float32), "c": np.array(True)}
        for s in [(1, 2, 8), (3, 2, 5)]
    ]
    g = _check(m, feeds, tmp_path)
    conv = next(n for n in g.nodes if n.op == "conv")
    assert conv.inputs[0].type.shape is None
    assert g.outputs[0].type.rank == 3 and g.outputs[0].type.shape[1] == 4


def test_stft_of_a_rank_2_signal(tmp_path):
    """STFT of [batch, length] (onnxruntime reads it as a real [batch, length, 1]; onnxscript
    writes it): the frontend makes the signal [B, L, 1], so every codegen sees one form."""
    win = np.hanning(8).astype(np.float32)
    m = _model(
        [helper.make_node("STFT", ["x", "step", "win"], ["y"], onesided=1)],
        [_vi("x", FLT, ["b", "n"])],
        [_vi("y", FLT, None)],
        [
            numpy_helper.from_array(np.array(4, np.int64), "step"),
            numpy_helper.from_array(win, "win"),
        ],
        opset=17,
    )
    feeds = [{"x": rng.standard_normal(s).astype(np.float32)} for s in [(2, 32), (1, 21)]]
    g = _check(m, feeds, tmp_path, atol=1e-4)
    assert g.outputs[0].type.rank == 4


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_edge_and_wrap_padding_of_an_axis_of_unknown_size(tmp_path, mode):
    """Edge padding with a negative pad (kaldi's pre-emphasis shift: [0, 1, 0, -1]) and wrap
    padding of an axis known at run time only: regenerated ONNX gathers with indices
    computed from the size (it refused before). onnxruntime has no wrap kernel: numpy is the
    reference there, cropping a negative pad after padding as torch does."""
    pads = [0, 1, 0, -1] if mode == "edge" else [0, 2, 0, 3]
    m = _model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)],
        [_vi("x", FLT, ["b", "n"])],
        [_vi("y", FLT, None)],
        [numpy_helper.from_array(np.array(pads, np.int64), "p")],
        opset=19,
    )

    def numpy_pad(feeds):
        x = feeds["x"]
        y = np.pad(x, [(0, 0), (pads[1], max(pads[3], 0))], mode=mode)
        return [y[:, : y.shape[1] + min(pads[3], 0)]]

    feeds = [{"x": rng.standard_normal(s).astype(np.float32)} for s in [(2, 7), (1, 3)]]
    _check(m, feeds, tmp_path, reference=None if mode == "edge" else numpy_pad)


def test_question_mark_dims_are_unknown_not_one_symbol(tmp_path):
    """paddle2onnx writes dim_param "?" for each unknown dim (PP-OCR's classifier input is
    [-1, 3, "?", "?"]): as a symbol it made height and width one size, which TVM's Relax VM
    then enforced (it refused a 48 x 192 image). Each "?" is an unknown dim of its own."""
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [_vi("x", FLT, [-1, 3, "?", "?"])],
        [_vi("y", FLT, [-1, 3, "?", "?"])],
    )
    onnx.save(m, tmp_path / "q.onnx")
    g = msc.from_onnx(str(tmp_path / "q.onnx"))
    assert g.inputs[0].type.shape == (None, 3, None, None)
    feeds = [{"x": rng.standard_normal((1, 3, 4, 6)).astype(np.float32)}]
    _check(m, feeds, tmp_path)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize(
    "op, attrs",
    [
        ("Conv", {"strides": [2, 3]}),
        ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 3]}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "count_include_pad": 1}),
        ("LpPool", {"kernel_shape": [2, 3], "strides": [3, 2]}),
    ],
)
def test_same_padding_of_dims_known_at_run_time(tmp_path, op, attrs, auto_pad):
    """auto_pad SAME with a stride over 1 pads by an amount that depends on the size
    (PP-OCRv6's stem, exported by paddle2onnx, over images of any size): the input is padded
    by amounts computed from its shape. Odd and even sizes, so the amounts differ."""
    inits = []
    ins = ["x"]
    if op == "Conv":
        inits = [numpy_helper.from_array(rng.standard_normal((4, 2, 3, 2)).astype(np.float32), "w")]
        ins.append("w")
    m = _model(
        [helper.make_node(op, ins, ["y"], auto_pad=auto_pad, **attrs)],
        [_vi("x", FLT, ["b", 2, "h", "w_"])],
        [_vi("y", FLT, None)],
        inits,
    )
    feeds = [
        {"x": rng.standard_normal(s).astype(np.float32)}
        for s in [(1, 2, 9, 8), (2, 2, 12, 13), (1, 2, 1, 2)]
    ]
    _check(m, feeds, tmp_path, atol=1e-4)


def test_same_padding_an_average_that_excludes_pads_is_refused(tmp_path):
    """Without count_include_pad the padding is no value an explicit pad could hold."""
    m = _model(
        [
            helper.make_node(
                "AveragePool",
                ["x"],
                ["y"],
                auto_pad="SAME_UPPER",
                kernel_shape=[3, 3],
                strides=[2, 2],
            )
        ],  # fmt: skip
        [_vi("x", FLT, ["b", 2, "h", "w"])],
        [_vi("y", FLT, None)],
    )
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(MscError, match="auto_pad=SAME_UPPER over a dim only known at run"):
        msc.from_onnx(str(tmp_path / "m.onnx"))


def test_layer_norm_with_a_weight_of_unknown_size(tmp_path):
    """LayerNormalization whose scale and bias are computed (their sizes unknown at import,
    as in PP-OCRv3's recognizer): generated PyTorch takes the normalized shape from the input
    at run time (it wrote None into normalized_shape)."""
    m = _model(
        [
            helper.make_node("Shape", ["x"], ["s"], start=-1),
            helper.make_node(
                "ConstantOfShape", ["s"], ["ones"], value=helper.make_tensor("v", FLT, [1], [1.5])
            ),  # fmt: skip
            helper.make_node("Mul", ["ones", "k"], ["w"]),
            helper.make_node("LayerNormalization", ["x", "w", "k"], ["y"], axis=-1),
        ],
        [_vi("x", FLT, ["b", "t", "c"]), _vi("k", FLT, ["c"])],
        [_vi("y", FLT, None)],
    )
    feeds = [
        {"x": rng.standard_normal((b, 3, c)).astype(np.float32),
         "k": rng.standard_normal(c).astype(np.float32)}
        for b, c in [(1, 8), (2, 5)]
    ]  # fmt: skip
    _check(m, feeds, tmp_path, atol=1e-4)


def test_slice_of_a_loop_value_of_unknown_rank(tmp_path):
    """paddle2onnx starts a Loop's carried value as a placeholder scalar the body replaces
    with a tensor (SLANet's table decoder), so after the loop its rank is unknown: a Slice of
    it with axes counted from the front needs no rank (it was refused)."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["f"], to=FLT),
            helper.make_node("Add", ["x", "f"], ["acc_out"]),
            helper.make_node("Identity", ["c"], ["c_out"]),
        ],
        "body",
        [_vi("i", I64, []), _vi("c", BOOL, []), _vi("acc", FLT, None)],
        [_vi("c_out", BOOL, []), _vi("acc_out", FLT, None)],
    )
    m = _model(
        [
            helper.make_node("Loop", ["n", "", "zero"], ["acc_end"], body=body),
            helper.make_node("Slice", ["acc_end", "start", "e", "axis"], ["y"]),
        ],
        [_vi("x", FLT, ["b", 4]), _vi("n", I64, []), _vi("e", I64, [1])],
        [_vi("y", FLT, None)],
        [
            numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "start"),
            numpy_helper.from_array(np.array([1], np.int64), "axis"),
        ],
    )
    feeds = [
        {"x": rng.standard_normal((b, 4)).astype(np.float32), "n": np.array(k),
         "e": np.array([e])}
        for b, k, e in [(2, 3, 3), (1, 1, 4)]
    ]  # fmt: skip
    g = _check(m, feeds, tmp_path)
    assert g.outputs[0].type.shape is None  # honest: no iteration leaves the scalar
