"""ONNX's two-way broadcasting in generated PyTorch, at sizes known only at run time.

ONNX's Expand broadcasts both ways (a 1 in the target keeps the input's dim), torch's expand
only one way; torch.onnx writes ``x.expand(b, -1, -1)`` as Expand to a target ``[b, 1, 1]``
computed from shapes, and generated code that called ``x.expand`` with it failed for every
size above 1. Every ONNX op that broadcasts two ways runs here on operands shaped
``[n, 1, 3]`` and ``[1, m, 1]`` whose dims are dynamic, at several sizes, against onnxruntime.

Numeric tolerance: rtol=atol=1e-6 for float32; integer and bool results exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the sources are ONNX models")
torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")

from onnx import TensorProto, helper  # noqa: E402

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402

SIZES = [(1, 1), (2, 3), (4, 1), (1, 5)]


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _check(m, feeds_for, sizes=SIZES, tol=1e-6):
    """Generated PyTorch equals onnxruntime at every size; returns the generated source."""
    data = m.SerializeToString()
    sess = ort.InferenceSession(data)
    g = msc.from_onnx(m)
    module = ct.to_module(g)
    for size in sizes:
        feeds = feeds_for(*size)
        want = sess.run(None, feeds)
        with torch.no_grad():
            got = module(*[torch.from_numpy(feeds[v.name]) for v in g.inputs])
        got = got if isinstance(got, tuple | list) else (got,)
        for a, b in zip(got, want):
            assert tuple(a.shape) == b.shape, (size, tuple(a.shape), b.shape)
            np.testing.assert_allclose(a.detach().numpy(), b, rtol=tol, atol=tol)
    return module.msc_source


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def _i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


RNG = np.random.default_rng(0)


def _from_torch(node, module):
    """``node`` with the metadata torch.onnx (dynamo) records: the node then has the
    provenance of torch's aten.expand, though it is ONNX's Expand."""
    props = {
        "pkg.torch.onnx.name_scopes": repr(["", module, "expand"]),
        "pkg.torch.onnx.fx_node": "%expand = call_function[target=torch.ops.aten.expand.default]",
    }
    for k, v in props.items():
        node.metadata_props.add(key=k, value=v)
    return node


def test_expand_to_a_target_of_ones_computed_from_a_shape():
    # torch.onnx (dynamo) writes ViT's cls_token.expand(batch, -1, -1) so: the target is
    # [batch, 1, 1] (a Concat of a Shape slice and initializers), and each 1 keeps x's dim.
    nodes = [
        helper.make_node("Shape", ["y"], ["n"], start=0, end=1),
        helper.make_node("Concat", ["n", "one", "one"], ["target"], axis=0),
        _from_torch(helper.make_node("Expand", ["cls", "target"], ["out"]), "embeddings"),
    ]
    m = _model(
        nodes,
        [_vi("y", TensorProto.FLOAT, ["b", "s"])],
        [_vi("out", TensorProto.FLOAT, ["b", 1, 4])],
        [
            _i64("one", [1]),
            helper.make_tensor("cls", TensorProto.FLOAT, [1, 1, 4], [0.5, 1.5, 2.5, 3.5]),
        ],
    )
    src = _check(m, lambda b, s: {"y": RNG.standard_normal((b, s)).astype(np.float32)})
    assert ".expand([*" in src and ", 1, -1])" in src  # torch's expand, x's last dim kept
    assert "_msc_expand" not in src


def test_expand_of_a_dynamic_vector_to_batch_by_one():
    # BART's positions: arange(seq).expand(batch, -1) arrives as Expand(r, [batch, 1]).
    nodes = [
        helper.make_node("Shape", ["ids"], ["b"], start=0, end=1),
        helper.make_node("Shape", ["ids"], ["s"], start=1, end=2),
        helper.make_node("Squeeze", ["s"], ["s0"]),
        helper.make_node("Range", ["zero", "s0", "step"], ["r"]),
        helper.make_node("Concat", ["b", "one"], ["target"], axis=0),
        helper.make_node("Expand", ["r", "target"], ["out"]),
    ]
    m = _model(
        nodes,
        [_vi("ids", TensorProto.INT64, ["b", "s"])],
        [_vi("out", TensorProto.INT64, ["b", "s"])],
        [
            _i64("one", [1]),
            helper.make_tensor("zero", TensorProto.INT64, [], [0]),
            helper.make_tensor("step", TensorProto.INT64, [], [1]),
        ],
    )
    src = _check(m, lambda b, s: {"ids": RNG.integers(0, 9, (b, s)).astype(np.int64)})
    assert "_msc_expand" not in src


def test_expand_after_the_legacy_exporters_minus_one_replacement():
    # torch.onnx (dynamo=False) writes expand(b, -1, -1) as Where(Equal(t, -1), 1, t) first.
    nodes = [
        helper.make_node("Shape", ["y"], ["n"], start=0, end=1),
        helper.make_node("Concat", ["n", "minus", "minus"], ["t"], axis=0),
        helper.make_node("Equal", ["t", "minus1"], ["is_neg"]),
        helper.make_node("Where", ["is_neg", "ones", "t"], ["target"]),
        helper.make_node("Expand", ["cls", "target"], ["out"]),
    ]
    m = _model(
        nodes,
        [_vi("y", TensorProto.FLOAT, ["b", "s"])],
        [_vi("out", TensorProto.FLOAT, ["b", 1, 4])],
        [
            _i64("minus", [-1]),
            helper.make_tensor("minus1", TensorProto.INT64, [], [-1]),
            _i64("ones", [1, 1, 1]),
            helper.make_tensor("cls", TensorProto.FLOAT, [1, 1, 4], [0.5, 1.5, 2.5, 3.5]),
        ],
    )
    src = _check(m, lambda b, s: {"y": RNG.standard_normal((b, s)).astype(np.float32)})
    assert "_msc_expand" not in src and ".tolist()" not in src  # sizes stay Python ints


def test_expand_to_a_target_read_from_a_tensor_decides_at_run_time():
    # Nothing in the graph says which target sizes are 1: a helper broadcasts both ways.
    m = _model(
        [helper.make_node("Expand", ["x", "t"], ["out"])],
        [_vi("x", TensorProto.FLOAT, ["a", "c"]), _vi("t", TensorProto.INT64, [3])],
        [_vi("out", TensorProto.FLOAT, ["o0", "o1", "o2"])],
    )

    def feeds(a, c):
        x = RNG.standard_normal((a, c)).astype(np.float32)
        return {"x": x, "t": np.array([2, 1 if a > 1 else 3, 1], np.int64)}

    _check(m, feeds)


TWO_WAY = [
    ("Add", TensorProto.FLOAT, {}),
    ("Sub", TensorProto.FLOAT, {}),
    ("Mul", TensorProto.FLOAT, {}),
    ("Div", TensorProto.FLOAT, {}),
    ("Pow", TensorProto.FLOAT, {}),
    ("Max", TensorProto.FLOAT, {}),
    ("Min", TensorProto.FLOAT, {}),
    ("Sum", TensorProto.FLOAT, {}),
    ("Mean", TensorProto.FLOAT, {}),
    ("Mod", TensorProto.INT64, {}),
    ("Mod", TensorProto.FLOAT, {"fmod": 1}),
    ("BitShift", TensorProto.UINT8, {"direction": "LEFT"}),
    ("BitwiseAnd", TensorProto.INT32, {}),
    ("Equal", TensorProto.INT64, {}),
    ("Greater", TensorProto.FLOAT, {}),
    ("LessOrEqual", TensorProto.FLOAT, {}),
    ("And", TensorProto.BOOL, {}),
    ("Xor", TensorProto.BOOL, {}),
    ("Where", TensorProto.FLOAT, {}),
    ("MatMul", TensorProto.FLOAT, {}),
]


def _data(dt, shape):
    if dt == TensorProto.BOOL:
        return RNG.integers(0, 2, shape).astype(bool)
    if dt == TensorProto.UINT8:
        return RNG.integers(0, 4, shape).astype(np.uint8)
    if dt in (TensorProto.INT64, TensorProto.INT32):
        np_dt = np.int64 if dt == TensorProto.INT64 else np.int32
        return RNG.integers(1, 7, shape).astype(np_dt)
    return (RNG.random(shape) + 0.5).astype(np.float32)


@pytest.mark.parametrize(("op", "dt", "attrs"), TWO_WAY, ids=[f"{r[0]}-{r[1]}" for r in TWO_WAY])
def test_two_way_broadcasting_ops_at_run_time_sizes(op, dt, attrs):
    ins = ["a", "b"]
    inputs = [_vi("a", dt, ["n", 1, 3]), _vi("b", dt, [1, "m", 1])]
    if op == "MatMul":  # batch dims broadcast both ways; the matrix dims multiply
        inputs = [_vi("a", dt, ["n", 1, 2, 3]), _vi("b", dt, [1, "m", 3, 2])]
    if op == "Where":
        ins = ["c", "a", "b"]
        inputs.append(_vi("c", TensorProto.BOOL, [1, 1, 3]))
    out_dt = TensorProto.BOOL if op in ("Equal", "Greater", "LessOrEqual") else dt
    out = [_vi("out", out_dt, ["n", "m", 2, 2] if op == "MatMul" else ["n", "m", 3])]
    m = _model([helper.make_node(op, ins, ["out"], **attrs)], inputs, out, opset=18)

    def feeds(n, k):
        shapes = {"a": (n, 1, 3), "b": (1, k, 1), "c": (1, 1, 3)}
        if op == "MatMul":
            shapes = {"a": (n, 1, 2, 3), "b": (1, k, 3, 2)}
        out = {v.name: _data(dt, shapes[v.name]) for v in inputs if v.name != "c"}
        if op == "Where":
            out["c"] = _data(TensorProto.BOOL, shapes["c"])
        return out

    _check(m, feeds, tol=1e-5)
