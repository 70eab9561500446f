"""The ONNX frontend: converter choice by opset, canonical attributes, names, types, weights
without copies (external data memory-mapped, over 2 GB), unsupported ops reported at once.

Numerics of every op are covered by tests/frontend/test_onnx_conformance.py; this file checks
what the frontend promises about the graph it builds. (MSC_CHECK=1 from conftest also
round-trips every graph through the text format.)
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import msc
from msc.errors import ConversionError, UnsupportedOpsError
from msc.frontend.onnx import (
    ConverterRegistry,
    OnnxUnsupportedOpsError,
    coverage_markdown,
    from_onnx,
    supported_ops,
    unsupported_ops,
)
from msc.ir import DType, SymDim, TensorType, Weight


def model(nodes, inputs, outputs, inits=(), opset=18, ir=None):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir is not None:
        m.ir_version = ir
    return m


def vi(name, shape, elem=T.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def only(g, op):
    nodes = [n for n in g.nodes if n.op == op]
    assert len(nodes) == 1, [n.op for n in g.nodes]
    return nodes[0]


# ---------------------------------------------------------------------------- op table
# (id, node, inputs, initializers, opset, canonical op, expected attributes)
OP_ROWS = [
    (
        "conv_same_upper",
        helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]),
        [vi("x", [1, 3, 7, 7])],
        [init("w", np.zeros((4, 3, 4, 4), np.float32))],
        11,
        "conv",
        {"padding": (1, 1, 2, 2), "stride": (2, 2), "dilation": (1, 1), "groups": 1},
    ),
    (
        "conv_same_lower",
        helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER"),
        [vi("x", [1, 3, 6, 6])],
        [init("w", np.zeros((4, 3, 4, 4), np.float32))],
        11,
        "conv",
        {"padding": (2, 2, 1, 1)},
    ),
    (
        "gemm_exact",
        helper.make_node("Gemm", ["a", "b"], ["y"], alpha=0.5, beta=2.0, transA=1, transB=1),
        [vi("a", [3, 2]), vi("b", [4, 3])],
        [],
        13,
        "gemm",
        {"alpha": 0.5, "beta": 2.0, "trans_a": True, "trans_b": True},
    ),
    (
        "resize_modes",
        helper.make_node(
            "Resize",
            ["x", "", "scales"],
            ["y"],
            mode="linear",
            coordinate_transformation_mode="align_corners",
        ),
        [vi("x", [1, 1, 4, 4])],
        [init("scales", np.array([1, 1, 2, 2], np.float32))],
        19,
        "resize",
        {"mode": "linear", "coordinate_transformation_mode": "align_corners", "scales": (2.0, 2.0)},
    ),
    (
        "reshape_const_shape",
        helper.make_node("Reshape", ["x", "s"], ["y"]),
        [vi("x", ["N", 6])],
        [init("s", np.array([0, 2, 3], np.int64))],
        14,
        "reshape",
        {"shape": (-1, 2, 3)},
    ),
    (
        "slice_inputs",
        helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]),
        [vi("x", [4, 5])],
        [init("st", np.array([1])), init("en", np.array([-1])), init("ax", np.array([1]))],
        13,
        "slice",
        {"starts": (1,), "ends": (-1,), "axes": (1,), "steps": (1,)},
    ),
    (
        "reduce_sum_axes_input",
        helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0),
        [vi("x", [2, 3, 4])],
        [init("ax", np.array([-1, 1]))],
        13,
        "reduce_sum",
        {"axes": (-1, 1), "keepdims": False},
    ),
    (
        "reduce_mean_axes_attr",
        helper.make_node("ReduceMean", ["x"], ["y"], axes=[1]),
        [vi("x", [2, 3, 4])],
        [],
        13,
        "reduce_mean",
        {"axes": (1,), "keepdims": True},
    ),
    (
        "layer_norm_high_level",
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-12),
        [vi("x", [2, 3, 4])],
        [init("g", np.ones(4, np.float32)), init("b", np.zeros(4, np.float32))],
        17,
        "layer_norm",
        {"eps": 1e-12, "axis": 2},
    ),
    (
        "gelu_high_level",
        helper.make_node("Gelu", ["x"], ["y"], approximate="tanh"),
        [vi("x", [2, 3])],
        [],
        20,
        "gelu",
        {"approximate": "tanh"},
    ),
    (
        "rms_norm_high_level",
        helper.make_node("RMSNormalization", ["x", "g"], ["y"], epsilon=1e-6),
        [vi("x", [2, 3, 4])],
        [init("g", np.ones(4, np.float32))],
        23,
        "rms_norm",
        {"eps": 1e-6, "axis": 2},
    ),
    (
        "attention_high_level",
        helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1),
        [vi("q", [1, 2, 4, 8]), vi("k", [1, 2, 4, 8]), vi("v", [1, 2, 4, 8])],
        [],
        23,
        "attention",
        {"is_causal": True, "enable_gqa": False},
    ),
    (
        # ONNX groups kv heads implicitly: 2 query heads read 1 key / value head
        "attention_fewer_kv_heads_grouped",
        helper.make_node("Attention", ["q", "k", "v"], ["y"]),
        [vi("q", [1, 2, 4, 8]), vi("k", [1, 1, 4, 8]), vi("v", [1, 1, 4, 8])],
        [],
        23,
        "attention",
        {"is_causal": False, "enable_gqa": True},
    ),
    (
        # heads only known at run time: grouped, as ONNX computes it (equal heads = plain)
        "attention_unknown_heads_grouped",
        helper.make_node("Attention", ["q", "k", "v"], ["y"]),
        [vi("q", [1, None, 4, 8]), vi("k", [1, None, 4, 8]), vi("v", [1, None, 4, 8])],
        [],
        23,
        "attention",
        {"is_causal": False, "enable_gqa": True},
    ),
    (
        # one named head count on both sides: known equal, plain attention
        "attention_same_symbolic_heads_plain",
        helper.make_node("Attention", ["q", "k", "v"], ["y"]),
        [vi("q", [1, "h", 4, 8]), vi("k", [1, "h", 4, 8]), vi("v", [1, "h", 4, 8])],
        [],
        23,
        "attention",
        {"is_causal": False, "enable_gqa": False},
    ),
    (
        "topk_k_input",
        helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0),
        [vi("x", [3, 5])],
        [init("k", np.array([2]))],
        11,
        "topk",
        {"k": 2, "largest": False, "axis": -1, "stable": True},  # ONNX orders ties by index
    ),
    (
        "gather_elements_runtime_indices",  # may be negative: wrapped by the codegens
        helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1),
        [vi("x", [2, 3]), vi("i", [2, 2], T.INT64)],
        [],
        13,
        "gather_elements",
        {"axis": 1, "negative_indices": True},
    ),
    (
        "gather_elements_constant_indices",  # negatives resolved at import
        helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1),
        [vi("x", [2, 3])],
        [init("i", np.array([[-1, 0], [2, -3]]))],
        13,
        "gather_elements",
        {"axis": 1, "negative_indices": False},
    ),
    (
        "scatter_elements_runtime_indices",
        helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0),
        [vi("x", [2, 3]), vi("i", [1, 3], T.INT64), vi("u", [1, 3])],
        [],
        18,
        "scatter_elements",
        {"axis": 0, "negative_indices": True},
    ),
    (
        "pad_inputs",
        helper.make_node("Pad", ["x", "p", "c"], ["y"], mode="constant"),
        [vi("x", [2, 3])],
        [init("p", np.array([0, 1, 0, 2])), init("c", np.array(1.5, np.float32))],
        13,
        "pad",
        {"pads": (0, 1, 0, 2), "value": 1.5, "mode": "constant"},
    ),
    (
        "softmax_opset11_last_axis",
        helper.make_node("Softmax", ["x"], ["y"], axis=1),
        [vi("x", [2, 3])],
        [],
        11,
        "softmax",
        {"axis": -1},
    ),
]


@pytest.mark.parametrize("row", OP_ROWS, ids=[r[0] for r in OP_ROWS])
def test_op_maps_to_canonical_with_typed_attrs(row):
    _, node, inputs, inits, opset, canon, attrs = row
    outs = [vi(o, None) for o in node.output]
    g = from_onnx(model([node], inputs, outs, inits, opset))
    n = only(g, canon)
    for k, v in attrs.items():
        assert n.attrs[k] == v, (k, n.attrs[k], v)
    assert n.provenance.framework == "onnx" and n.provenance.op == node.op_type
    # Shape-setting initializers became attributes: no weight is left behind for them.
    assert not any(w.dtype is DType.INT64 for w in g.weights.values())


def test_dynamic_reshape_uses_the_tensor_input():
    nodes = [
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["out"]),
    ]
    g = from_onnx(model(nodes, [vi("x", ["N", 6]), vi("y", ["N", 2, 3])], [vi("out", None)]))
    n = only(g, "reshape")
    assert n.attrs["shape"] is None and n.inputs[1] is not None
    # allowzero=0: a 0 in the run-time target copies the input's dim, spelled out as a where.
    assert n.inputs[1].producer.op == "where"
    g2 = from_onnx(
        model(
            [nodes[0], helper.make_node("Reshape", ["x", "s"], ["out"], allowzero=1)],
            [vi("x", ["N", 6]), vi("y", ["N", 2, 3])],
            [vi("out", None)],
        )
    )
    assert only(g2, "reshape").inputs[1].producer.op == "shape"


def test_static_shape_arithmetic_is_folded():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write it.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=init("", np.array(0))),
        helper.make_node("Gather", ["s", "i0"], ["d0"]),
        helper.make_node("Constant", [], ["ax"], value=init("", np.array([0]))),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Constant", [], ["m1"], value=init("", np.array([-1]))),
        helper.make_node("Concat", ["d0u", "m1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    g = from_onnx(model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)], opset=13))
    assert [n.op for n in g.nodes] == ["reshape"]
    assert g.nodes[0].attrs["shape"] == (2, -1)


def test_runtime_axes_become_an_input_of_the_canonical_op():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    m = model([node], [vi("x", [2, 3]), vi("axes", [1], T.INT64)], [vi("y", None)], opset=13)
    g = from_onnx(m)
    n = only(g, "reduce_sum")
    assert [v.name for v in n.inputs] == ["x", "axes"] and n.attrs["axes"] is None
    assert g.outputs[0].type.rank == 1  # one axis reduced: the rank is known, the dim is not


def test_runtime_axes_with_noop_with_empty_axes_stay_an_input():
    # An empty run-time axes tensor means "no reduction" here: the canonical op's flag says so.
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], noop_with_empty_axes=1)
    m = model([node], [vi("x", [2, 3]), vi("axes", [1], T.INT64)], [vi("y", None)], opset=13)
    n = only(from_onnx(m), "reduce_sum")
    assert [v.name for v in n.inputs] == ["x", "axes"] and n.attrs["noop_with_empty_axes"]


def test_runtime_inputs_are_reported_with_the_input_to_bind():
    # Dropout's training_mode decides between a random op and identity: it must be bound.
    node = helper.make_node("Dropout", ["x", "ratio", "mode"], ["y"])
    ins = [vi("x", [2, 3]), vi("ratio", [], T.FLOAT), vi("mode", [], T.BOOL)]
    m = model([node], ins, [vi("y", None)], opset=13)
    with pytest.raises(OnnxUnsupportedOpsError) as e:
        from_onnx(m)
    assert e.value.runtime_inputs == ["mode"] and "computed at run time" in str(e.value)
    g = from_onnx(m, constant_inputs={"mode": np.array(False)})
    assert [v.name for v in g.inputs] == ["x", "ratio"] and [n.op for n in g.nodes] == ["identity"]


# ---------------------------------------------------------------------------- registry
def test_converter_chosen_by_newest_since_and_older_opset_is_an_error():
    reg = ConverterRegistry()
    reg.converter("Foo", since=7)(lambda ctx, x: ("v7", x))
    reg.converter("Foo", since=13)(lambda ctx, x: ("v13", x))
    assert reg.lookup("Foo", 12).since == 7
    assert reg.lookup("Foo", 13).since == 13
    assert reg.lookup("Foo", 21).since == 13
    reg.converter("Bar", since=11)(lambda ctx, x: x)
    with pytest.raises(LookupError, match=r"opset 9 .*Bar.*since 11"):
        reg.lookup("Bar", 9)
    with pytest.raises(ValueError, match="registered twice"):
        reg.converter("Foo", since=13)(lambda ctx, x: x)


def test_real_registry_picks_per_opset_semantics():
    # Squeeze took axes as an attribute before opset 13 and as an input since.
    n11 = helper.make_node("Squeeze", ["x"], ["y"], axes=[0])
    g = from_onnx(model([n11], [vi("x", [1, 3])], [vi("y", None)], opset=11))
    assert only(g, "squeeze").attrs["axes"] == (0,)
    n13 = helper.make_node("Squeeze", ["x", "a"], ["y"])
    g = from_onnx(model([n13], [vi("x", [1, 3])], [vi("y", None)], [init("a", [0])], opset=13))
    assert only(g, "squeeze").attrs["axes"] == (0,)


def test_opset_older_than_every_converter_names_both():
    node = helper.make_node("Gelu", ["x"], ["y"])
    m = model([node], [vi("x", [2])], [vi("y", None)], opset=17)
    with pytest.raises(UnsupportedOpsError, match=r"opset 17 is older .*Gelu.*since 20"):
        from_onnx(m)


# ---------------------------------------------------------------------------- unsupported
def test_every_unsupported_op_is_reported_at_once_with_node_names():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("FusedGelu", ["a"], ["b"], name="ms_gelu", domain="com.microsoft"),
        helper.make_node("StringNormalizer", ["b"], ["c"], name="strings"),
        helper.make_node("NoSuchOp", ["c"], ["d"], name="bogus"),
        helper.make_node("Relu", ["d"], ["e"], name="after"),
    ]
    m = model(nodes, [vi("x", [4])], [vi("e", None)])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOpsError) as e:
        from_onnx(m)
    got = {(o.op, o.node) for o in e.value.ops}
    assert got == {
        ("com.microsoft::FusedGelu", "ms_gelu"),
        ("StringNormalizer", "strings"),
        ("NoSuchOp", "bogus"),
    }
    assert "com.microsoft" in str(e.value) and "3 unsupported" in str(e.value)


def test_unsupported_attribute_value_is_reported():
    node = helper.make_node(
        "Resize",
        ["x", "", "s"],
        ["y"],
        name="r",
        coordinate_transformation_mode="tf_crop_and_resize",
    )
    m = model(
        [node],
        [vi("x", [1, 1, 2, 2])],
        [vi("y", None)],
        [init("s", np.array([1, 1, 2, 2], np.float32))],
        opset=13,
    )
    with pytest.raises(UnsupportedOpsError, match="tf_crop_and_resize") as e:
        from_onnx(m)
    assert e.value.ops[0].node == "r"


def test_unknown_element_types_are_reported_not_crashed():
    node = helper.make_node("Identity", ["s"], ["y"])
    g = from_onnx(model([node], [vi("s", [2], T.STRING)], [vi("y", None)]))
    assert str(g.outputs[0].type) == "str[2]"  # strings are an msc dtype (tests: *strings*)
    with pytest.raises(UnsupportedOpsError, match="type #99 has no msc dtype"):
        from_onnx(model([node], [vi("s", [2], 99)], [vi("y", None)]))


# ---------------------------------------------------------------------------- names and types
def test_names_and_symbolic_dims_are_kept():
    nodes = [
        helper.make_node(
            "MatMul", ["input.1", "decoder.layers.0.weight"], ["mm:out"], name="/l/MatMul"
        ),
        helper.make_node("Relu", ["mm:out"], ["out put"], name="/l/Relu"),
    ]
    w = init("decoder.layers.0.weight", np.ones((4, 5), np.float32))
    g = from_onnx(model(nodes, [vi("input.1", ["batch", None, 4])], [vi("out put", None)], [w]))
    assert [v.name for v in g.inputs] == ["input.1"]
    assert list(g.weights) == ["decoder.layers.0.weight"]
    assert [n.name for n in g.nodes] == ["/l/MatMul", "/l/Relu"]
    assert [v.name for n in g.nodes for v in n.outputs] == ["mm:out", "out put"]
    assert g.inputs[0].type.shape == (SymDim("batch"), None, 4)
    assert g.outputs[0].type == TensorType(DType.FLOAT32, (SymDim("batch"), None, 5))


def test_generated_names_avoid_every_model_name():
    # Flatten(axis=0) needs an intermediate value; the model already uses "0".
    nodes = [
        helper.make_node("Flatten", ["x"], ["0"], axis=0),
        helper.make_node("Relu", ["0"], ["1"]),
    ]
    g = from_onnx(model(nodes, [vi("x", [2, 3])], [vi("1", None)], opset=13))
    names = [v.name for n in g.nodes for v in n.outputs]
    assert "0" in names and "1" in names and len(set(names)) == len(names)


def test_input_types_override():
    node = helper.make_node("Relu", ["x"], ["y"])
    g = from_onnx(
        model([node], [vi("x", ["N", 3])], [vi("y", None)]),
        input_types={"x": TensorType(DType.FLOAT32, (8, 3))},
    )
    assert g.outputs[0].type.shape == (8, 3)
    with pytest.raises(ConversionError, match="unknown graph input"):
        from_onnx(model([node], [vi("x", [1])], [vi("y", None)]), input_types={"z": None})


def test_opset8_initializers_listed_as_inputs_are_weights():
    w = init("w", np.ones((3,), np.float32))
    node = helper.make_node("Add", ["x", "w"], ["y"])
    m = model([node], [vi("x", [3]), vi("w", [3])], [vi("y", None)], [w], opset=8, ir=3)
    g = from_onnx(m)
    assert [v.name for v in g.inputs] == ["x"] and list(g.weights) == ["w"]


def test_constant_nodes_small_become_constants_large_become_weights():
    small = helper.make_node("Constant", [], ["c"], value=init("", np.arange(4, dtype=np.float32)))
    big = helper.make_node("Constant", [], ["C"], value=init("", np.ones((32, 32), np.float32)))
    nodes = [
        small,
        big,
        helper.make_node("Add", ["x", "c"], ["a"]),
        helper.make_node("Add", ["X", "C"], ["b"]),
    ]
    g = from_onnx(model(nodes, [vi("x", [4]), vi("X", [32, 32])], [vi("a", None), vi("b", None)]))
    const = only(g, "constant")
    assert const.outputs[0].name == "c" and const.attrs["value"].tolist() == [0, 1, 2, 3]
    assert list(g.weights) == ["C"]


# ---------------------------------------------------------------------------- weights
def test_initializers_are_views_not_copies():
    w = init("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    g = from_onnx(model([node], [vi("x", [2, 3])], [vi("y", None)], [w]))
    arr = g.weights["w"].numpy()
    base = arr
    while isinstance(base, np.ndarray):
        assert not base.flags.owndata
        base = base.base
    assert isinstance(base, bytes | memoryview)
    assert arr.tolist() == np.arange(12).reshape(3, 4).tolist()


def test_external_data_written_by_onnx_is_memory_mapped(tmp_path):
    w = init("enc.weight", np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    node = helper.make_node("MatMul", ["x", "enc.weight"], ["y"])
    m = model([node], [vi("x", [2, 64])], [vi("y", None)], [w])
    path = tmp_path / "m.onnx"
    onnx.save_model(
        m,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="m.data",
        size_threshold=0,
    )
    g = from_onnx(path)
    arr = g.weights["enc.weight"].numpy()
    assert isinstance(arr, np.memmap) and not arr.flags.writeable
    np.testing.assert_array_equal(arr, numpy_helper.to_array(w))


def test_model_over_2gb_loads_memory_mapped(tmp_path):
    # External data in a sparse file: 2 GiB of zeros, then the tensor; nothing is read at import.
    n = 2**29 + 16  # float32 elements: just over 2 GiB
    data = tmp_path / "big.data"
    with open(data, "wb") as f:
        f.truncate(n * 4)
        f.seek(n * 4 - 16)
        f.write(np.arange(4, dtype=np.float32).tobytes())
    t = onnx.TensorProto(name="big", data_type=T.FLOAT, dims=[n])
    t.data_location = T.EXTERNAL
    for k, v in (("location", "big.data"), ("offset", "0"), ("length", str(n * 4))):
        t.external_data.add(key=k, value=v)
    node = helper.make_node("Mul", ["x", "big"], ["y"])
    m = model([node], [vi("x", [n])], [vi("y", None)], [t])
    onnx.save_model(m, tmp_path / "big.onnx")
    g = from_onnx(tmp_path / "big.onnx")
    arr = g.weights["big"].numpy()
    assert isinstance(arr, np.memmap) and arr.nbytes > 2**31
    assert arr[-4:].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd"])
def test_external_data_may_not_leave_the_model_directory(tmp_path, location):
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1])
    t.data_location = T.EXTERNAL
    t.external_data.add(key="location", value=location)
    node = helper.make_node("Add", ["x", "w"], ["y"])
    (tmp_path / "d").mkdir()
    onnx.save_model(model([node], [vi("x", [1])], [vi("y", None)], [t]), tmp_path / "d" / "m.onnx")
    with pytest.raises(ConversionError, match="external data location"):
        from_onnx(tmp_path / "d" / "m.onnx")


def test_onnx_silent_attributes_are_attributes_of_their_ops():
    from msc.ops import ONNX_SILENT_ATTRS
    from msc.ops import registry as ops

    for op, names in ONNX_SILENT_ATTRS.items():
        assert set(names) <= set(ops.get(op).attrs), op


def _with_props(node, props):
    for key, value in props.items():
        p = node.metadata_props.add()
        p.key, p.value = key, value
    return node


def _topk_recorded(props):
    n = _with_props(helper.make_node("TopK", ["x", "k"], ["v", "i"]), props)
    m = model([n], [vi("x", [3, 5])], [vi("v", None), vi("i", None)], [init("k", [2])], 11)
    return only(from_onnx(m), "topk")


def test_recorded_attribute_restores_what_onnx_cannot_say():
    # msc's ONNX codegen records a torch topk's stable=False; ONNX's TopK alone means True.
    assert _topk_recorded({}).attrs["stable"] is True
    assert _topk_recorded({"msc.attr.stable": "false"}).attrs["stable"] is False


@pytest.mark.parametrize(
    "props",
    [
        {"msc.attr.stable": "0"},  # an int, not a bool
        {"msc.attr.stable": '"false"'},  # a string
        {"msc.attr.stable": "[false]"},
        {"msc.attr.stable": "fals"},  # not JSON
        {"msc.attr.stable": "[" * 100_000},  # deeper than the JSON decoder goes
        {"msc.attr.negative_indices": "false"},  # an attribute topk does not have
        {"msc.attr.sorted": "false"},  # ONNX's TopK says this one: not taken from metadata
        {"msc.attr.__class__": "true"},
    ],
    ids=["int", "str", "list", "not_json", "deep", "other_op", "spelled", "dunder"],
)
def test_recorded_attribute_junk_is_ignored(props):
    n = _topk_recorded(props)
    assert n.attrs["stable"] is True and n.attrs["sorted"] is True


def test_recorded_attribute_on_an_op_without_it_is_ignored():
    n = _with_props(helper.make_node("Relu", ["x"], ["y"]), {"msc.attr.stable": "false"})
    g = from_onnx(model([n], [vi("x", [2])], [vi("y", [2])]))
    assert [(n.op, n.attrs) for n in g.nodes] == [("relu", {})]


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(ConversionError, match="does not exist"):
        from_onnx(tmp_path / "nope.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"\x00not a model\xff" * 10)
    with pytest.raises(ConversionError):
        from_onnx(tmp_path / "bad.onnx")


# ---------------------------------------------------------------------------- coverage
def test_coverage_lists_supported_and_unsupported_with_reasons():
    sup = dict(supported_ops())
    assert sup["Squeeze"] == [1, 13] and "Conv" in sup and "Attention" in sup
    missing = unsupported_ops()
    assert "ImageDecoder" in missing and missing["SequenceAt"].startswith("sequence")
    assert not set(sup) & set(missing)
    md = coverage_markdown()
    assert "## ONNX frontend" in md and "| `Conv` |" in md and "| `ImageDecoder` |" in md


# ---------------------------------------------------------------------------- torch.onnx.export
torch = pytest.importorskip("torch")


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)
        self.ln = torch.nn.LayerNorm(5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = y.mean(dim=(2, 3))
        y = self.ln(torch.nn.functional.gelu(self.fc(y)))
        return torch.softmax(y.reshape(y.shape[0], -1), dim=-1)


class TinyAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, s, 16)


# (id, module class, input shape, oldest opset the legacy exporter can write it in)
TORCH_CASES = [
    ("small_net", SmallNet, (2, 3, 8, 8), 11),
    ("tiny_attention", TinyAttention, (2, 5, 16), 14),
]


def _export(module, x, path, dynamo: bool, opset: int):
    kwargs = {"dynamo": dynamo, "opset_version": opset, "input_names": ["x"], "output_names": ["y"]}
    try:
        torch.onnx.export(module, (x,), str(path), **kwargs)
    except ImportError as e:  # the dynamo exporter needs onnxscript
        pytest.skip(f"torch.onnx.export(dynamo={dynamo}) unavailable: {e}")


def _check_numerics(g, module, x):
    import codegen.torch as cg

    got = cg.to_module(g)(x)  # a graph codegen.torch cannot run is a failure, not a skip
    torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "dynamo,opset", [(False, 11), (False, 17), (True, 18)], ids=["legacy11", "legacy17", "dynamo18"]
)
@pytest.mark.parametrize("case", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_torch_exported_models_import(tmp_path, case, dynamo, opset):
    _, cls, shape, oldest = case
    opset = max(opset, oldest) if not dynamo else opset
    torch.manual_seed(0)
    module = cls().eval()
    x = torch.randn(*shape)
    path = tmp_path / "m.onnx"
    with torch.no_grad():
        _export(module, x, path, dynamo, opset)
    proto = onnx.load(path)
    g = msc.from_onnx(path)
    assert [v.name for v in g.inputs] == ["x"]
    assert [v.name for v in g.outputs] == [o.name for o in proto.graph.output]
    inits = {t.name for t in proto.graph.initializer}
    assert all(isinstance(w, Weight) for w in g.weights.values())
    # Every weight is an initializer, or one the exporter named (onnx::Conv_45) renamed after
    # its module and role (msc.frontend.onnx.scopes).
    renamed = set(g.weights) - inits
    assert len(g.weights) <= len(inits)
    assert all(re.search(r"\.(weight|bias|weight~T)(_\d+)?$", k) for k in renamed), renamed
    with torch.no_grad():
        _check_numerics(g, module, x)


def _fx_node(name, module, fx):
    """A node as torch.onnx's dynamo exporter writes it: module scopes and its FX node."""
    op, ins, outs = name
    n = helper.make_node(op, ins, outs, name=outs[0])
    scopes = ["", *([module] if module else []), outs[0]]
    helper.set_metadata_props(
        n, {"pkg.torch.onnx.name_scopes": repr(scopes), "pkg.torch.onnx.fx_node": fx}
    )
    return n


def test_torch_onnx_signature_gives_source_names_roles_and_ties():
    # torch.onnx's file renames what it rewrote (val_N) and keeps one name of a tied weight;
    # its graph signature and each node's FX node say which source tensor each one is.
    rng = np.random.default_rng(0)
    head, fc, table, scale = (rng.standard_normal(s).astype(np.float32) for s in
                              [(10, 4), (4, 4), (1, 3, 4), (10,)])  # fmt: skip
    nodes = [
        _fx_node(("Gather", ["head.weight", "ids"], ["embedding"]), "emb",
                 "%embedding = call_function[target=torch.ops.aten.embedding.default]"
                 "(args = (%p_head_weight, %ids), kwargs = {})"),
        _fx_node(("MatMul", ["embedding", "val_3"], ["linear"]), "fc",
                 "%linear = call_function[target=torch.ops.aten.linear.default]"
                 "(args = (%embedding, %p_fc_weight), kwargs = {})"),
        _fx_node(("Add", ["linear", "val_7"], ["add"]), "",
                 "%add = call_function[target=torch.ops.aten.add.Tensor]"
                 "(args = (%linear, %embedding_1), kwargs = {})"),
        _fx_node(("MatMul", ["add", "val_9"], ["linear_1"]), "head",
                 "%linear_1 = call_function[target=torch.ops.aten.linear.default]"
                 "(args = (%add, %p_head_weight), kwargs = {})"),
        _fx_node(("Mul", ["linear_1", "val_11"], ["mul"]), "",
                 "%mul = call_function[target=torch.ops.aten.mul.Tensor]"
                 "(args = (%linear_1, %p_scale), kwargs = {})"),
    ]  # fmt: skip
    inits = [init("head.weight", head), init("val_3", fc.T), init("val_7", table),
             init("val_9", head.T), init("val_11", scale)]  # fmt: skip
    m = model(nodes, [vi("ids", [1, 3], T.INT64)], [vi("mul", [1, 3, 10])], inits)
    signature = """
# inputs
p_emb_weight: PARAMETER target='emb.weight'
p_fc_weight: PARAMETER target='fc.weight'
p_head_weight: PARAMETER target='head.weight'
p_scale: PARAMETER target='scale'
b_pos: BUFFER target='pos' persistent=False
ids: USER_INPUT
"""
    helper.set_metadata_props(
        m.graph, {"pkg.torch.export.ExportedProgram.graph_signature": signature}
    )
    g = from_onnx(m)
    assert sorted(g.weights) == ["fc.weight", "head.weight", "scale", "val_7"]
    # val_3 and val_9: the linear weights stored transposed, as linear's weights again (the
    # head's is the embedding's, stored twice); val_11: the parameter under a new name.
    np.testing.assert_array_equal(g.weights["fc.weight"].numpy(), fc)
    assert [n.inputs[1].name for n in g.nodes if n.op == "linear"] == ["fc.weight", "head.weight"]
    np.testing.assert_array_equal(g.weights["scale"].numpy(), scale)
    roles = {k: w.role for k, w in g.weights.items()}
    assert roles == {"fc.weight": "parameter", "head.weight": "parameter",
                     "scale": "parameter", "val_7": "constant"}  # fmt: skip
    assert g.weights["head.weight"].aliases == ("emb.weight",)
    # Without the signature: names after their uses, no roles, no ties.
    del m.graph.metadata_props[:]
    g = from_onnx(m)
    assert sorted(g.weights) == ["fc.weight", "head.weight", "val_11", "val_7"]
    assert {w.role for w in g.weights.values()} == {""}


def test_split_num_outputs_in_an_opset17_file():
    """torch.onnx's opset-17 GPT-2 export carries Split's opset-18 num_outputs attribute."""
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
    outs = [vi(n, None) for n in "abc"]
    g = from_onnx(model([node], [vi("x", [2, 7])], outs, opset=17))
    assert only(g, "split").attrs["sizes"] == (3, 3, 1)
