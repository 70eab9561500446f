"""codegen.relax against ONNX's reference implementation (onnx.reference) on single ONNX nodes
the backend cases miss: max / min of bool, over empty dims (static and run-time sizes) and of
infinities."""

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
    # TVM starts a float max / min at the dtype's lowest / highest finite value: a row of
    # -infs gave -3.4e38 (BERT's masked attention rows), unless that value is really there.
    "max_f32_neg_inf_rows": (
        "ReduceMax",
        np.array(
            [[-np.inf] * 3, [1, -np.inf, 2], [np.finfo(np.float32).min, -np.inf, -np.inf]],
            np.float32,
        ),
        [1],
        1,
        None,
    ),  # fmt: skip
    "min_f64_inf_all": ("ReduceMin", np.full((2, 3), np.inf), None, 0, None),
    "max_f16_neg_inf_symbolic": (
        "ReduceMax",
        np.full((2, 2), -np.inf, np.float16),
        [0],
        0,
        {1: "n"},
    ),  # fmt: skip
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


def _f32(*shape):
    return np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)


_S = lambda *v: np.array(v, np.float32)  # noqa: E731
_L = lambda *v: np.array(v, np.int64)  # noqa: E731
# Resizes image.resize cannot express, each axis by its own weight matrix (or indices):
# (x, roi, scales, sizes, attributes).
RESIZES = {
    "linear_antialias_rank3": (_f32(2, 3, 11), None, _S(1, 1, 0.45), None,
                               {"mode": "linear", "antialias": 1}),
    "cubic_antialias_rank5": (_f32(1, 2, 6, 5, 7), None, None, _L(1, 2, 3, 5, 2),
                              {"mode": "cubic", "antialias": 1}),
    "cubic_antialias_exclude_outside": (_f32(1, 1, 9, 8), None, _S(1, 1, 0.3, 0.7), None,
                                        {"mode": "cubic", "antialias": 1,
                                         "exclude_outside": 1, "cubic_coeff_a": -0.5}),
    "linear_antialias_upsample_align_corners": (
        _f32(1, 2, 3, 4), None, _S(1, 1, 2.5, 0.5), None,
        {"mode": "linear", "antialias": 1, "coordinate_transformation_mode": "align_corners"}),
    "linear_scales_not_whole_asymmetric": (
        _f32(2, 1, 7, 5), None, _S(1, 1, 0.7, 1.3), None,
        {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}),
    "nearest_half_pixel_symmetric_ceil": (
        _f32(1, 1, 5, 7), None, _S(1, 1, 1.7, 0.45), None,
        {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric",
         "nearest_mode": "ceil"}),
    "cubic_half_pixel_symmetric": (
        _f32(1, 3, 4, 6), None, _S(1, 1, 2.3, 0.8), None,
        {"mode": "cubic", "coordinate_transformation_mode": "half_pixel_symmetric"}),
    "pytorch_half_pixel_to_one": (
        _f32(1, 1, 5, 4), None, None, _L(1, 1, 1, 3),
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel",
         "antialias": 1}),
    "crop_nearest_extrapolate": (
        _f32(1, 2, 6, 5), _S(0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4), None, _L(1, 2, 4, 6),
        {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize",
         "extrapolation_value": 5.0}),
    "crop_cubic_antialias_one": (
        _f32(1, 1, 8, 9), _S(0, 0, 0.1, 0.2, 1, 1, 0.8, 0.6), None, _L(1, 1, 1, 3),
        {"mode": "cubic", "coordinate_transformation_mode": "tf_crop_and_resize",
         "antialias": 1}),
    "int_nearest_not_whole": (
        np.arange(30, dtype=np.int32).reshape(1, 1, 5, 6), None, _S(1, 1, 0.5, 1.4), None,
        {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RESIZES))
@pytest.mark.parametrize("runtime", [False, True], ids=["constant", "runtime"])
def test_resize_by_axis_against_onnx_reference(name: str, runtime: bool) -> None:
    """Antialias (rank 3 to 5, exclude_outside, upsampling where it does nothing), scales
    that give no whole size, half_pixel_symmetric, tf_crop_and_resize with a region and
    extrapolation, nearest of ints: the roi, scales and sizes as constants (static output
    sizes) and fed at run time."""
    x, roi, scales, sizes, attrs = RESIZES[name]
    feeds, consts = {"x": x}, {}
    for key, v in (("roi", roi), ("scales", scales), ("sizes", sizes)):
        v = np.zeros(0, np.float32) if v is None and key != "sizes" else v
        if v is not None:
            (feeds if runtime and v.size else consts)[key] = v
    model = _model("Resize", {"x": x}, {}, attrs)
    del model.graph.node[0].input[1:]
    model.graph.node[0].input.extend(
        ["roi" if roi is not None else "", "scales" if scales is not None else ""]
        + (["sizes"] if sizes is not None else [])
    )
    _check(_with(model, feeds, consts), feeds, rtol=1e-5, atol=1e-5)


def _with(model, feeds: dict, consts: dict):
    from onnx import helper, numpy_helper

    g = model.graph
    for n, a in feeds.items():
        if n != "x":
            g.input.append(
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            )
    g.initializer.extend(numpy_helper.from_array(a, n) for n, a in consts.items())
    return model


@pytest.mark.parametrize("scale, op", [(2.0, "R.image.resize2d"), (1.3, "R.matmul")])
def test_resize_keeps_image_resize_where_it_is_exact(scale: float, op: str) -> None:
    """Constant scales that give whole sizes stay one image.resize; others resize by axis."""
    import msc

    x, s = _f32(1, 1, 4, 6), _S(1, 1, scale, scale)
    model = _with(_model("Resize", {"x": x}, {}, {"mode": "linear"}), {}, {"r": _S(), "s": s})
    model.graph.node[0].input.extend(["r", "s"])
    text = cr.to_script(msc.from_onnx(model))
    assert op in text and ("R.image.resize2d" in text) == (op == "R.image.resize2d")
    _check(model, {"x": x})


# the reference divides by zero for a dim of 1 with align_corners (and arange still gives -1)
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("runtime", [False, True], ids=["constant", "runtime"])
@pytest.mark.parametrize("size", [(2, 1, 3, 4, 5), (2, 1, 1, 6, 2), (2, 3, 4, 7)])
def test_affine_grid_against_onnx_reference(size, runtime: bool, align_corners: int) -> None:
    """A 3-d affine grid (image.affine_grid is 2-d) is its base grid times theta; sizes as
    constants and fed at run time, a dim of 1 (align_corners' single point)."""
    k = len(size) - 2
    theta = _f32(2, k, k + 1)
    s = np.array(size, np.int64)
    feeds = {"theta": theta, **({"size": s} if runtime else {})}
    model = _model("AffineGrid", feeds, {} if runtime else {"size": s},
                   {"align_corners": align_corners})  # fmt: skip
    _check(model, feeds, rtol=1e-5, atol=1e-6)


_U64 = np.array([[2**64 - 1, 0, 2**63, 2**63 - 1, 5, 2**63 + 7],
                 [1, 2**62, 2**64 - 2, 3, 2**63 + 1, 2**63 - 2]], np.uint64)  # fmt: skip
_SORTED = {
    "u64": _U64,
    "u32": np.array([[4000000000, 1, 7, 2**31, 3, 2**32 - 1]], np.uint32),
    "u16": np.array([[65535, 1, 7, 32768, 3, 9]], np.uint16),
    "i16": np.array([[-32768, 1, 7, 32767, -3, 9]], np.int16),
    "i8": np.array([[-128, 1, 7, 127, -3, 9]], np.int8),
    "bool": np.array([[True, False, False, True, True, False]]),
}


def _sort_ref(x, descending: bool, k: int | None):
    """numpy's stable order (equal values keep the lower index first), the first k; the
    values are distinct but for bool, which the test compares by value."""
    idx = np.argsort(-x.astype(np.float64) if descending else x, -1, kind="stable")
    if x.dtype == np.uint64:  # float64 rounds these: order by the values themselves
        idx = np.argsort(x, -1, kind="stable")
        idx = idx[..., ::-1] if descending else idx
    idx = idx[..., :k]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int64)


@pytest.mark.parametrize("dt", sorted(_SORTED))
@pytest.mark.parametrize("op", ["topk", "sort", "argsort", "topk_smallest"])
def test_sort_family_of_dtypes_tvm_does_not_sort(op: str, dt: str) -> None:
    """sort / argsort / topk of dtypes TVM's kernels lack (uint64 by its top bit flipped, the
    rest widened): the input's values, in its dtype, with their indices (numpy's order)."""
    from msc.ir import DType, Graph, TensorType

    x = _SORTED[dt]
    g = Graph(f"{op}_{dt}")
    v = g.add_input("x", TensorType(DType.from_numpy(x.dtype), x.shape))
    attrs = {
        "topk": {"k": 4, "largest": True},
        "topk_smallest": {"k": 3, "largest": False},
        "sort": {"descending": True},
        "argsort": {},
    }[op]
    node = g.add_node(op.removesuffix("_smallest"), [v], {**attrs, "axis": -1})
    g.set_outputs(node.outputs)
    got = cr.build(g.validate())(x)
    got = [o.numpy() for o in (got if isinstance(got, (list, tuple)) else [got])]
    desc = attrs.get("largest", attrs.get("descending", False))
    values, idx = _sort_ref(x, desc, attrs.get("k"))
    want = [idx] if op == "argsort" else [values, idx]
    if dt == "bool":  # ties: only the values, and that each index points at its value
        want, got = want[:1], got[:1]
        if op == "argsort":
            want, got = [np.take_along_axis(x, want[0], -1)], [np.take_along_axis(x, got[0], -1)]
    for a, b in zip(got, want):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_array_equal(a, b)


def _grid(k: int) -> np.ndarray:
    """Grid points at quarters (their source coordinates fall on ties at x.5) and random
    ones, some past the borders: [1, points, 1(, 1), k]."""
    q = np.arange(-12, 13) / 4
    ties = np.stack([np.roll(q, 3 * i) for i in range(k)], -1)
    rand = np.random.default_rng(2).uniform(-1.6, 1.6, (15, k))
    return np.concatenate([ties, rand]).reshape(1, -1, *[1] * (k - 1), k).astype(np.float32)


@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("dims", [(4, 5), (3, 4, 5)], ids=["2d", "3d"])
def test_grid_sample_against_onnx_reference(dims, mode, padding, align_corners) -> None:
    """2-d and 3-d grid_sample (TOPI's, the 3-d one NCDHW) with every padding, at ties: an
    ONNX nearest with reflection rounds before reflecting (torch after), so its grid is
    moved to the rounded coordinates first."""
    x = np.random.default_rng(0).uniform(-2, 2, (1, 2, *dims)).astype(np.float32)
    feeds = {"x": x, "grid": _grid(len(dims))}
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align_corners}
    _check(_model("GridSample", feeds, {}, attrs), feeds, rtol=1e-5, atol=1e-5)


# Rois over two images, partly or wholly off the input, past its last pixel, malformed.
_ROIS = np.array([[0.5, 1.0, 6.3, 4.2], [-3.0, -2.5, 2.0, 9.8], [4.0, 3.0, 4.2, 3.1],
                  [7.5, 0.0, 12.0, 7.7], [-9.0, -9.0, -4.0, -5.0], [2.0, 5.0, 1.0, 3.0]],
                 np.float32)  # fmt: skip


@pytest.mark.parametrize("sampling_ratio", [1, 3])
@pytest.mark.parametrize("half_pixel", [True, False], ids=["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_against_onnx_reference(mode: str, half_pixel: bool, sampling_ratio) -> None:
    """RoiAlign's half_pixel and max (vision.roi_align's differ) by ONNX's formulas: rois of
    two images, off the input, past its last pixel, malformed; a spatial scale."""
    x = np.random.default_rng(0).uniform(-2, 2, (2, 3, 6, 8)).astype(np.float32)
    feeds = {"x": x, "rois": _ROIS, "batch": np.array([0, 1, 1, 0, 1, 0], np.int64)}
    attrs = {
        "mode": mode, "output_height": 3, "output_width": 2, "sampling_ratio": sampling_ratio,
        "spatial_scale": 0.75,
        "coordinate_transformation_mode": "half_pixel" if half_pixel else "output_half_pixel",
    }  # fmt: skip
    _check(_model("RoiAlign", feeds, {}, attrs), feeds, rtol=1e-5, atol=1e-5)


def test_roi_align_adaptive_sampling_with_half_pixel_is_refused() -> None:
    import msc
    from msc.errors import UnsupportedOpsError

    feeds = {"x": _f32(1, 1, 4, 4), "rois": _ROIS[:1], "batch": np.zeros(1, np.int64)}
    model = _model("RoiAlign", feeds, {}, {"sampling_ratio": 0})  # half_pixel by default
    with pytest.raises(UnsupportedOpsError, match="adaptive sampling ratio"):
        cr.to_module(msc.from_onnx(model))
