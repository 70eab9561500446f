"""codegen.relax against ONNX's reference implementation (onnx.reference) on single ONNX nodes
the backend cases miss: max / min of bool and over empty dims (static and run-time sizes)."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
onnx = pytest.importorskip("onnx", reason="onnx's reference implementation is the reference")

import codegen.relax as cr  # noqa: E402


def _model(op: str, feeds: dict, consts: dict, attrs: dict, dims: dict | None = None):
    """A one-node ONNX model: ``feeds`` are graph inputs (``dims`` names a symbolic dim of an
    input by position: {"x": {1: "n"}}), ``consts`` initializers, in the order given."""
    from onnx import helper, numpy_helper

    def shape(name, a):
        return [(dims or {}).get(name, {}).get(i, d) for i, d in enumerate(a.shape)]

    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), shape(n, a))
        for n, a in feeds.items()
    ]
    node = helper.make_node(op, [*feeds, *consts], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op.lower(), inputs, [helper.make_tensor_value_info("y", 0, None)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


def _check(model, feeds: dict, rtol=1e-6, atol=1e-6) -> None:
    from onnx.reference import ReferenceEvaluator

    import msc

    (want,) = ReferenceEvaluator(model).run(None, feeds)
    g = msc.from_onnx(model)
    got = cr.build(g)(*[feeds[v.name] for v in g.inputs]).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


_B = np.array([[True, False, True], [False, False, True]])
# (op, x, axes, keepdims, symbolic dims of x)
EXTREMES = {
    "max_bool": ("ReduceMax", _B, [1], 1, None),
    "min_bool_all": ("ReduceMin", _B, None, 0, None),
    "max_bool_empty": ("ReduceMax", np.zeros((2, 0, 3), bool), [1], 0, None),
    "min_bool_empty": ("ReduceMin", np.zeros((2, 0, 3), bool), [1, 2], 1, None),
    "max_f32_empty": ("ReduceMax", np.zeros((0, 3), np.float32), [0], 1, None),
    "min_f64_empty_all": ("ReduceMin", np.zeros((2, 0), np.float64), None, 0, None),
    "max_i32_empty": ("ReduceMax", np.zeros((3, 0), np.int32), [-1], 0, None),
    "min_u8_empty": ("ReduceMin", np.zeros((3, 0), np.uint8), [1], 1, None),
    "max_f32_symbolic_empty": ("ReduceMax", np.zeros((2, 0), np.float32), [1], 1, {1: "n"}),
    "min_bool_symbolic_empty": ("ReduceMin", np.zeros((0, 2), bool), [0], 0, {0: "n"}),
    "max_f32_symbolic": (
        "ReduceMax",
        np.arange(6, dtype=np.float32).reshape(2, 3) - 9,
        [1],
        1,
        {1: "n"},
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
@pytest.mark.parametrize("runtime_axes", [False, True], ids=["axes", "runtime_axes"])
def test_max_min_of_bool_and_of_no_elements(name: str, runtime_axes: bool) -> None:
    """ReduceMax / ReduceMin of bool (reduced as uint8) and over empty dims (ONNX's identity:
    -inf / inf, the dtype's lowest / highest, false / true), with axes as a constant and fed
    at run time, over static and symbolic dims."""
    op, x, axes, keepdims, dims = EXTREMES[name]
    feeds, consts = {"x": x}, {}
    if axes is not None:
        (feeds if runtime_axes else consts)["axes"] = np.array(axes, np.int64)
    elif runtime_axes:
        feeds["axes"] = np.zeros(0, np.int64)
    model = _model(op, feeds, consts, {"keepdims": keepdims}, {"x": dims} if dims else None)
    _check(model, feeds)
