"""Shape-setting ONNX inputs computed at run time (issue 14, part 1).

Each model takes its axes / k / bounds / pads / repeats / sizes as graph inputs, so nothing can
fold them at import: the canonical ops take them as tensor inputs, the generated PyTorch reads
them at run time and the regenerated ONNX passes them through. Every model runs with two
different values of those inputs (one module, no re-import) and is compared with onnxruntime on
the original model; the result types keep what is known (the rank, untouched dims).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper  # noqa: E402

import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402
import msc  # noqa: E402

FLT, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(node, inputs, outputs, opset=21):
    g = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


X = _vi("x", FLT, ["n", 6, 4])
rng = np.random.default_rng(0)
x_a = rng.standard_normal((3, 6, 4)).astype(np.float32)
x_b = rng.standard_normal((5, 6, 4)).astype(np.float32)

# name: (node, extra inputs, output rank, [(feeds a), (feeds b)])
CASES = {
    "reduce_sum_axes": (
        helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0),
        [_vi("a", I64, [1])],
        2,
        [{"x": x_a, "a": np.array([1])}, {"x": x_b, "a": np.array([-1])}],
    ),
    "reduce_max_axes_keep": (
        helper.make_node("ReduceMax", ["x", "a"], ["y"], keepdims=1),
        [_vi("a", I64, [2])],
        3,
        [{"x": x_a, "a": np.array([0, 2])}, {"x": x_b, "a": np.array([1, 2])}],
    ),
    "reduce_sum_square_noop_axes": (  # empty at run time: x*x, reduced over none
        helper.make_node("ReduceSumSquare", ["x", "a"], ["y"], keepdims=1, noop_with_empty_axes=1),
        [_vi("a", I64, ["k"])],
        3,
        [{"x": x_a, "a": np.array([], np.int64)}, {"x": x_b, "a": np.array([0, -1])}],
    ),
    "topk_k": (
        helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=1),
        [_vi("k", I64, [1])],
        3,
        [{"x": x_a, "k": np.array([2])}, {"x": x_b, "k": np.array([5])}],
    ),
    "slice_bounds": (
        helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"]),
        [_vi("s", I64, [2]), _vi("e", I64, [2]), _vi("ax", I64, [2]), _vi("st", I64, [2])],
        3,
        [
            {"x": x_a, "s": [0, 1], "e": [2, 5], "ax": [0, 1], "st": [1, 2]},
            {"x": x_b, "s": [-1, 3], "e": [-9, 0], "ax": [2, 1], "st": [-1, -1]},
        ],
    ),
    "pad_pads": (
        helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant"),
        [_vi("p", I64, [6]), _vi("v", FLT, [])],
        3,
        [
            {"x": x_a, "p": [0, 1, 2, 0, 0, 1], "v": np.float32(1.5)},
            {"x": x_b, "p": [1, 0, -1, 0, 2, 0], "v": np.float32(-2)},
        ],
    ),
    "tile_repeats": (
        helper.make_node("Tile", ["x", "r"], ["y"]),
        [_vi("r", I64, [3])],
        3,
        [{"x": x_a, "r": [1, 2, 1]}, {"x": x_b, "r": [2, 1, 3]}],
    ),
    "unsqueeze_axes": (
        helper.make_node("Unsqueeze", ["x", "a"], ["y"]),
        [_vi("a", I64, [2])],
        5,
        [{"x": x_a, "a": [0, 4]}, {"x": x_b, "a": [1, -1]}],
    ),
    "split_sizes": (
        helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1),
        [_vi("s", I64, [2])],
        3,
        [{"x": x_a, "s": [2, 4]}, {"x": x_b, "s": [5, 1]}],
    ),
    "split_even_runtime_dim": (  # n = 3 and 5: pieces of ceil(n / 2), the last one smaller
        helper.make_node("Split", ["x"], ["y", "z"], axis=0, num_outputs=2),
        [],
        3,
        [{"x": x_a}, {"x": x_b}],
    ),
    "cumsum_axis": (
        helper.make_node("CumSum", ["x", "a"], ["y"], reverse=1),
        [_vi("a", I64, [])],
        3,
        [{"x": x_a, "a": np.array(1)}, {"x": x_b, "a": np.array(-1)}],
    ),
    "resize_tf_crop_and_resize_roi": (
        helper.make_node(
            "Resize",
            ["x", "roi", "", "sz"],
            ["y"],
            mode="linear",
            axes=[2],
            coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=5.0,
        ),
        [_vi("roi", FLT, [2]), _vi("sz", I64, [1])],
        3,
        [
            {"x": x_a, "roi": np.array([0.2, 0.9]), "sz": np.array([5])},
            {"x": x_b, "roi": np.array([-0.3, 1.4]), "sz": np.array([3])},
        ],
    ),  # fmt: skip
    "trilu_k": (
        helper.make_node("Trilu", ["x", "k"], ["y"], upper=0),
        [_vi("k", I64, [])],
        3,
        [{"x": x_a, "k": np.array(1)}, {"x": x_b, "k": np.array(-2)}],
    ),
}


def _run_ort(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    return s.run(None, {k: np.asarray(feeds[k], dtype=_np(model, k)) for k in names})


def _np(model, name):
    for vi in model.graph.input:
        if vi.name == name:
            return helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
    raise KeyError(name)


@pytest.mark.parametrize("name", list(CASES))
def test_runtime_input_reaches_both_codegens(name):
    node, extra, rank, feeds = CASES[name]
    outs = [_vi(o, FLT if o != "i" else I64, None) for o in node.output]
    model = _model(node, [X, *extra], outs)
    g = msc.from_onnx(model)  # nothing bound: every input stays a graph input
    assert [v.name for v in g.inputs] == ["x", *[e.name for e in extra]]
    assert g.outputs[0].type.rank == rank, g.outputs[0].type
    module = codegen.torch.to_module(g)
    regenerated = codegen.onnx.to_model(g)
    onnx.checker.check_model(regenerated)
    for f in feeds:  # two different run-time values through one module
        want = _run_ort(model, f)
        args = [torch.from_numpy(np.asarray(f[v.name], dtype=_np(model, v.name))) for v in g.inputs]
        with torch.no_grad():
            got = module(*args)
        got = list(got) if isinstance(got, tuple | list) else [got]
        for w, a in zip(want, got):
            np.testing.assert_allclose(a.numpy(), w, rtol=1e-5, atol=1e-6)
        for w, a in zip(want, _run_ort(regenerated, f)):
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)
        # ONNX -> msc -> ONNX -> msc keeps the run-time inputs (node for node: unoptimized)
    assert msc.structural_equal(g, msc.from_onnx(codegen.onnx.to_model(g, optimize=False)))


def test_runtime_types_keep_what_is_known():
    """Untouched dims stay, reduced / sliced ones become unknown, the rank is kept."""
    node = helper.make_node("Slice", ["x", "s", "e"], ["y"])
    g = msc.from_onnx(
        _model(node, [X, _vi("s", I64, [1]), _vi("e", I64, [1])], [_vi("y", FLT, None)])
    )
    y = g.outputs[0].type
    assert y.rank == 3 and y.shape[1:] == (6, 4) and y.shape[0] is None
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")
    g = msc.from_onnx(_model(node, [X, _vi("sc", FLT, [3])], [_vi("y", FLT, None)]))
    assert g.outputs[0].type.rank == 3 and g.outputs[0].type.shape[1] == 6


def test_constant_inputs_still_fold_into_attributes():
    node = helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0)
    m = _model(node, [X, _vi("a", I64, [1])], [_vi("y", FLT, None)])
    g = msc.from_onnx(m, constant_inputs={"a": np.array([1])})
    (n,) = [n for n in g.nodes if n.op == "reduce_sum"]
    assert n.attrs["axes"] == (1,) and len([i for i in n.inputs if i is not None]) == 1
    assert g.outputs[0].type.shape[1] == 4


def test_constant_roi_becomes_an_attribute():
    """tf_crop_and_resize with its box and sizes bound at import: spatial attributes, and both
    codegens agree with onnxruntime."""
    node, extra, _, feeds = CASES["resize_tf_crop_and_resize_roi"]
    model = _model(node, [X, *extra], [_vi("y", FLT, None)])
    f = feeds[1]
    g = msc.from_onnx(model, constant_inputs={"roi": f["roi"], "sz": f["sz"]})
    (n,) = [n for n in g.nodes if n.op == "resize"]
    assert n.attrs["roi"] == pytest.approx((-0.3, 1.4)) and n.attrs["sizes"] == (3,)
    want = _run_ort(model, f)[0]
    got = codegen.torch.to_module(g)(torch.from_numpy(f["x"])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for opset in (18, 21):  # before 18, sizes need a static batch
        regenerated = codegen.onnx.to_model(g, opset=opset)
        np.testing.assert_allclose(_run_ort(regenerated, f)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["ReduceSumSquare", "ReduceL1", "ReduceLogSum", "ReduceSum"])
def test_constant_empty_axes_noop_keeps_the_elementwise_part(op):
    """noop_with_empty_axes with constant empty axes reduces over no dims: ReduceSumSquare
    still squares, ReduceL1 takes |x|, ReduceLogSum the log (as onnxruntime does)."""
    node = helper.make_node(op, ["x", "a"], ["y"], noop_with_empty_axes=1)
    g = helper.make_graph(
        [node], "g", [X], [_vi("y", FLT, None)], [helper.make_tensor("a", I64, [0], [])]
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = np.abs(x_a) + 0.5
    (want,) = _run_ort(model, {"x": x})
    m = msc.from_onnx(model)
    with torch.no_grad():
        got = codegen.torch.to_module(m)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (again,) = _run_ort(codegen.onnx.to_model(m), {"x": x})
    np.testing.assert_allclose(again, want, rtol=1e-6)


def test_even_split_of_a_runtime_dim_before_opset_18():
    """Before opset 18 Split has no num_outputs: the regenerated model computes the sizes
    from the run-time dim, uneven ones included."""
    node, extra, _, feeds = CASES["split_even_runtime_dim"]
    model = _model(node, [X, *extra], [_vi(o, FLT, None) for o in node.output])
    old = codegen.onnx.to_model(msc.from_onnx(model), opset=13)
    (split,) = [n for n in old.graph.node if n.op_type == "Split"]
    assert len(split.input) == 2  # the sizes, computed in the graph
    for f in feeds:
        for w, a in zip(_run_ort(model, f), _run_ort(old, f)):
            np.testing.assert_array_equal(a, w)
