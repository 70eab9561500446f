"""ONNX models whose shape-setting operands (shape, sizes, scales, axes, pads, repeats, k,
limits) are graph inputs, with feeds, for the run-time forms of codegen.relax (data, not
tests; tests/codegen/test_codegen_relax.py runs them against onnx.reference)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "RUNTIME_FORMS",
    "RUNTIME_MISFITS",
    "EXTREME_SLICES",
    "drop_empty_inputs",
    "rt_model",
    "i64",
]

_RNG = np.random.default_rng(0)


def f32(*shape):
    return _RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def rt_model(op, inputs, n_out=1, opset=21, **attrs):
    """One ONNX node whose inputs are all graph inputs: (name, TensorProto type, shape)."""
    from onnx import helper as oh

    outs = [f"y{i}" for i in range(n_out)]
    node = oh.make_node(op, [n for n, _, _ in inputs], outs, **attrs)
    graph = oh.make_graph(
        [node], op.lower(), [oh.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [oh.make_empty_tensor_value_info(o) for o in outs],
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def i64(*v):
    return np.array(v, np.int64)


_F, _L = 1, 7  # TensorProto.FLOAT, TensorProto.INT64
_X234 = f32(2, 3, 4)
# One row per run-time form: the model, then feeds that give different output shapes from
# one compiled function (so the shape is read at run time, not folded in).
RUNTIME_FORMS = {
    "reshape": (
        rt_model("Reshape", [("x", _F, [2, 3, 4]), ("s", _L, [3])]),
        [{"x": _X234, "s": i64(4, 3, 2)}, {"x": _X234, "s": i64(-1, 2, 2)},
         {"x": _X234, "s": i64(0, -1, 1)}],
    ),
    "expand": (
        rt_model("Expand", [("x", _F, [3, 1]), ("s", _L, [3])]),
        [{"x": f32(3, 1), "s": i64(2, 3, 4)}, {"x": f32(3, 1), "s": i64(1, 1, 1)}],
    ),
    "constantofshape": (
        rt_model("ConstantOfShape", [("s", _L, [2])]),
        [{"s": i64(2, 3)}, {"s": i64(0, 5)}],
    ),
    "range_int": (
        rt_model("Range", [("a", _L, []), ("b", _L, []), ("d", _L, [])]),
        [{"a": i64(1)[0], "b": i64(10)[0], "d": i64(3)[0]},
         {"a": i64(10)[0], "b": i64(1)[0], "d": i64(-2)[0]},
         {"a": i64(4)[0], "b": i64(4)[0], "d": i64(1)[0]}],
    ),
    "range_float": (
        rt_model("Range", [("a", _F, []), ("b", _F, []), ("d", _F, [])]),
        [{"a": np.float32(0.5), "b": np.float32(3.0), "d": np.float32(0.75)},
         {"a": np.float32(2.0), "b": np.float32(-1.0), "d": np.float32(-1.5)}],
    ),
    "slice": (
        rt_model("Slice", [("x", _F, [4, 5]), ("b", _L, [2]), ("e", _L, [2]),
                            ("a", _L, [2]), ("s", _L, [2])]),
        [{"x": f32(4, 5), "b": i64(1, 0), "e": i64(3, 5), "a": i64(0, 1), "s": i64(1, 2)},
         {"x": f32(4, 5), "b": i64(-1, 9), "e": i64(-2**63, -9), "a": i64(-1, 0),
          "s": i64(-1, -2)}],
    ),
    **{
        f"pad_empty_{mode}": (  # a dim of size 0: constant fills it, edge leaves it be
            rt_model("Pad", [("x", _F, [2, 0]), ("p", _L, [4])], mode=mode),
            [{"x": f32(2, 0), "p": i64(*first)}, {"x": f32(2, 0), "p": i64(0, 0, 1, 0)}],
        )
        for mode, first in (("constant", (1, 2, 0, 1)), ("edge", (1, 0, 2, 0)))
    },
    "tile": (
        rt_model("Tile", [("x", _F, [2, 3]), ("r", _L, [2])]),
        [{"x": f32(2, 3), "r": i64(2, 1)}, {"x": f32(2, 3), "r": i64(1, 3)},
         {"x": f32(2, 3), "r": i64(0, 2)}],
    ),
    **{
        f"pad_{mode}": (
            rt_model("Pad", [("x", _F, [3, 4]), ("p", _L, [4]), ("v", _F, [])], mode=mode),
            [{"x": f32(3, 4), "p": i64(1, 2, 0, 1), "v": np.float32(-2.5)},
             {"x": f32(3, 4), "p": i64(0, 1, 2, 0), "v": np.float32(7.0)},
             {"x": f32(3, 4), "p": i64(2, 0, 0, 3), "v": np.float32(0.0)}],
        )
        for mode in ("constant", "reflect", "edge", "wrap")
    },
    **{
        f"topk_{'largest' if big else 'smallest'}": (
            rt_model("TopK", [("x", _F, [3, 5]), ("k", _L, [1])], 2, largest=big),
            [{"x": f32(3, 5), "k": i64(1)}, {"x": f32(3, 5), "k": i64(5)},
             {"x": f32(3, 5), "k": i64(0)}],
        )
        for big in (1, 0)
    },
    "split": (
        rt_model("Split", [("x", _F, [6, 2]), ("s", _L, [3])], 3),
        [{"x": f32(6, 2), "s": i64(1, 2, 3)}, {"x": f32(6, 2), "s": i64(0, 6, 0)}],
    ),
    "squeeze": (
        rt_model("Squeeze", [("x", _F, [1, 3, 1, 2]), ("a", _L, [1])]),
        [{"x": f32(1, 3, 1, 2), "a": i64(0)}, {"x": f32(1, 3, 1, 2), "a": i64(-2)}],
    ),
    "unsqueeze": (
        rt_model("Unsqueeze", [("x", _F, [3, 2]), ("a", _L, [2])]),
        [{"x": f32(3, 2), "a": i64(0, 3)}, {"x": f32(3, 2), "a": i64(-1, 1)}],
    ),
    "onehot": (
        rt_model("OneHot", [("i", _L, [4]), ("d", _L, []), ("v", _F, [2])], axis=0),
        [{"i": i64(0, 2, -1, 1), "d": i64(3)[0], "v": np.array([-1, 4], np.float32)},
         {"i": i64(0, 2, -1, 7), "d": i64(5)[0], "v": np.array([0, 1], np.float32)}],
    ),
    **{
        f"trilu_{'upper' if up else 'lower'}": (
            rt_model("Trilu", [("x", _F, [4, 5]), ("k", _L, [])], upper=up),
            [{"x": f32(4, 5), "k": i64(k)[0]} for k in (-1, 0, 2)],
        )
        for up in (1, 0)
    },
    "cumsum_exclusive_reverse": (
        rt_model("CumSum", [("x", _F, [2, 3]), ("a", _L, [])], exclusive=1, reverse=1),
        [{"x": f32(2, 3), "a": i64(a)[0]} for a in (0, 1, -1)],
    ),
    **{
        f"{op.lower()}_keepdims{keep}": (
            rt_model(op, [("x", _F, [2, 3, 4]), ("a", _L, [2])], keepdims=keep),
            [{"x": _X234, "a": i64(0, 2)}, {"x": _X234, "a": i64(-1, 1)},
             {"x": _X234, "a": i64(1, 0)}],
        )
        for op, keep in (("ReduceSum", 1), ("ReduceMean", 0), ("ReduceMax", 0),
                         ("ReduceLogSumExp", 1), ("ReduceL2", 0))
    },
    **{
        f"reducesumsquare_empty_axes_noop{noop}": (  # no axes: x squared, or the whole sum
            rt_model("ReduceSumSquare", [("x", _F, [2, 3, 4]), ("a", _L, [0])],
                      noop_with_empty_axes=noop),
            [{"x": _X234, "a": i64()}],
        )
        for noop in (1, 0)
    },
    "reducesum_empty_dim": (
        rt_model("ReduceSum", [("x", _F, [2, 0, 4]), ("a", _L, [1])], keepdims=1),
        [{"x": f32(2, 0, 4), "a": i64(1)}, {"x": f32(2, 0, 4), "a": i64(0)}],
    ),
    "resize_scales": (
        rt_model("Resize", [("x", _F, [1, 1, 3, 4]), ("", _F, None), ("s", _F, [4])],
                  mode="cubic"),
        [{"x": f32(1, 1, 3, 4), "s": np.array([1, 1, 2, 0.5], np.float32)},
         {"x": f32(1, 1, 3, 4), "s": np.array([1, 1, 1, 3], np.float32)},
         # sizes floor(3 x 1.5) = 4, floor(4 x 0.6) = 2: coordinates mapped by the scale
         {"x": f32(1, 1, 3, 4), "s": np.array([1, 1, 1.5, 0.6], np.float32)}],
    ),
    "cumprod": (
        rt_model("CumProd", [("x", _F, [2, 3]), ("a", _L, [])], opset=26),
        [{"x": f32(2, 3), "a": i64(a)[0]} for a in (0, 1, -2)],
    ),
    "resize_sizes": (
        rt_model("Resize", [("x", _F, [1, 1, 3, 4]), ("", _F, None), ("", _F, None),
                             ("s", _L, [4])], mode="linear"),
        [{"x": f32(1, 1, 3, 4), "s": i64(1, 1, 6, 8)},
         {"x": f32(1, 1, 3, 4), "s": i64(1, 1, 2, 3)}],
    ),
    "affine_grid": (
        rt_model("AffineGrid", [("t", _F, [2, 2, 3]), ("s", _L, [4])], align_corners=0),
        [{"t": f32(2, 2, 3), "s": i64(2, 1, 3, 4)}, {"t": f32(2, 2, 3), "s": i64(2, 1, 5, 2)}],
    ),
}  # fmt: skip


def drop_empty_inputs(model):
    """Resize's skipped optional inputs ("") are not graph inputs."""
    graph = model.graph
    keep = [v for v in graph.input if v.name]
    del graph.input[:]
    graph.input.extend(keep)
    return model


_MIN, _MAX, _HUGE = -(2**63), 2**63 - 1, 2**62
# Bounds and steps at the int64 extremes (dynamic_strided_slice turned some into negative or
# huge dims): starts, ends, axes, steps.
EXTREME_SLICES = [
    ((_MIN, _MAX), (_MAX, _MIN), (0, 1), (1, -1)),
    ((-7, 4), (-7, -4), (1, 0), (-_HUGE, _HUGE)),
    ((-7, _MIN), (3, _MIN), (-1, -2), (1, -1)),
    ((9, _MIN), (-4, -7), (-1, -2), (-3, -3)),
    ((4, -5), (-4, -7), (-1, -2), (_HUGE, -_HUGE)),
    ((_MAX, _MAX), (_MIN, _MIN), (0, 1), (_MIN, -1)),
    ((2, 1), (_MAX, _MAX), (1, 0), (_MAX, 2)),
]


# A shape that does not fit the data stops the VM (Relax's shape ops trust their dims: a
# reshape to more elements than x has would read past its buffer).
RUNTIME_MISFITS = [
    ("reshape", {"s": i64(100, 100, 100)}),
    ("reshape", {"s": i64(2**62 + 6, 4, 1)}),  # the int64 product wraps around to 24
    ("reshape", {"s": i64(-1, 5, 1)}),  # 24 elements do not make rows of 5
    ("reshape", {"s": i64(-2, -12, 1)}),  # negative dims whose product is right
    ("expand", {"s": i64(2, 5, 4)}),
    ("tile", {"r": i64(-1, 2)}),
    ("constantofshape", {"s": i64(-3, 2)}),
    ("squeeze", {"a": i64(1)}),  # a dim of 3
    ("unsqueeze", {"a": i64(0, 7)}),
    ("unsqueeze", {"a": i64(1, 1)}),
    ("split", {"s": i64(1, 2, 4)}),
    ("split", {"s": i64(-1, 4, 3)}),
    ("split", {"s": i64(2**63 - 1, 2**63 - 1, 8)}),  # the sum wraps around to 6
    ("topk_largest", {"k": i64(6)}),
    ("slice", {"s": i64(0, 1)}),
    ("pad_constant", {"p": i64(-2, 0, -2, 0)}),
    ("pad_constant", {"p": i64(-(2**63), 0, 2**63 - 1, 0)}),  # the size wraps around to 2
    ("range_int", {"d": i64(0)[0]}),
    ("range_int", {"a": i64(-(2**63))[0], "b": i64(2**63 - 1)[0]}),  # past int64
    ("pad_empty_edge", {"p": i64(0, 1, 0, 0)}),  # edge of an empty dim
    ("cumsum_exclusive_reverse", {"a": i64(2)[0]}),
    ("resize_sizes", {"s": i64(2, 1, 6, 8)}),
    ("affine_grid", {"s": i64(3, 1, 3, 4)}),
    ("reducesum_keepdims1", {"a": i64(1, 1)}),  # one dim named twice
    ("resize_scales", {"s": np.array([2, 1, 2, 2], np.float32)}),  # N scaled
    ("cumprod", {"a": i64(-3)[0]}),
    ("reducemean_keepdims0", {"a": i64(0, 3)}),
]
