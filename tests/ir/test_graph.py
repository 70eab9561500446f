"""The graph IR: dtypes, types, use/def links, validation errors, ordering, networkx view."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from msc import DType, Graph, GraphError, Node, SymDim, TensorType, Value
from msc.ops import OpError, OpRegistry, registry
from msc.ops.schema import Attr
from tests import graphs

F32 = DType.FLOAT32


@pytest.mark.parametrize("dt", list(DType))
def test_dtype_numpy_roundtrip(dt):
    np_dt = dt.to_numpy()
    assert DType.from_numpy(np_dt) is dt
    if not dt.is_string:  # a str element has no fixed size (see test_string_dtype)
        assert dt.itemsize == np_dt.itemsize
    assert DType.from_short(dt.short) is dt


def test_dtype_families():
    assert DType.BFLOAT16.to_numpy() == np.dtype(ml_dtypes.bfloat16)
    assert DType.BFLOAT16.is_floating and not DType.BFLOAT16.is_integer
    assert DType.UINT8.is_integer and not DType.UINT8.is_signed
    assert DType.COMPLEX64.is_complex and DType.BOOL.is_bool
    with pytest.raises(ValueError, match="no msc DType"):
        DType.from_numpy(np.dtype("U3"))
    with pytest.raises(ValueError, match="unknown dtype 'float'"):
        DType.from_short("float")


def test_tensor_type_checks():
    t = TensorType(F32, (SymDim("b", 1, 4), 3, None))
    assert t.rank == 3 and not t.is_static and t.numel() is None
    assert TensorType(F32, np.array([2, 3])).numel() == 6
    assert TensorType(DType.FLOAT16, (2, 3)).nbytes() == 12
    assert TensorType(F32, None).rank is None
    with pytest.raises(ValueError):
        TensorType(F32, (-1,))
    with pytest.raises(TypeError):
        TensorType("float32", (1,))
    with pytest.raises(ValueError, match="min 5 > max 2"):
        SymDim("n", 5, 2)


def test_uses_are_kept_by_the_inputs_setter():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (2,)))
    y = g.add_input("y", TensorType(F32, (2,)))
    n = g.add_node("add", [x, x])
    assert [(u.op, i) for u, i in x.uses] == [("add", 0), ("add", 1)]
    n.inputs = [x, y]
    assert len(x.uses) == 1 and len(y.uses) == 1
    x.replace_all_uses_with(y)
    assert x.uses == () and len(y.uses) == 2
    g.set_outputs([n.output])
    with pytest.raises(GraphError, match="still used"):
        g.remove_node(n)


def test_positional_names_fill_gaps_and_never_rename():
    g = Graph()
    x = g.add_input("0", TensorType(F32, (2,)))
    a = g.op("relu", x)
    b = g.add_node("neg", [a], output_names=["mine"]).output
    assert (x.name, a.name, b.name) == ("0", "1", "mine")
    with pytest.raises(GraphError, match="used twice"):
        g.add_node("neg", [a], output_names=["mine"])


def test_attributes_checked_against_schema_at_build_time():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (1, 2, 4, 4)))
    with pytest.raises(OpError, match="unknown attribute"):
        g.op("relu", x, alpha=1.0)
    with pytest.raises(OpError, match="'perm'.*required"):
        g.op("transpose", x)
    with pytest.raises(OpError, match="expected int, got str"):
        g.op("softmax", x, axis="1")
    with pytest.raises(OpError, match="expected int, got bool"):
        g.op("softmax", x, axis=True)
    with pytest.raises(OpError, match="takes 1 inputs"):
        g.add_node("relu", [x, x])
    with pytest.raises(OpError, match="unknown op"):
        g.op("frobnicate", x)
    n = g.add_node("transpose", [x], {"perm": np.array([0, 1, 3, 2])})
    assert n.attrs["perm"] == (0, 1, 3, 2) and type(n.attrs["perm"][0]) is int


def test_type_inference_examples():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (SymDim("b"), 3, 32, 32)))
    w = g.add_weight("w", np.zeros((16, 3, 3, 3), np.float32))
    y = g.add_node("conv", [x, w], {"stride": [2, 2], "padding": [1, 1, 1, 1]}).output
    assert y.shape == (SymDim("b"), 16, 16, 16)
    p = g.op("max_pool", y, kernel=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1], ceil_mode=True)
    assert p.shape[2:] == (9, 9)  # torch.nn.functional.max_pool2d gives 9x9 here
    q = g.op(
        "max_pool", g.add_input("s", TensorType(F32, (1, 1, 5, 5))), kernel=[2, 2], ceil_mode=True
    )
    assert q.shape[2:] == (3, 3)
    a = g.add_input("a", TensorType(F32, (5, 1, 4, 6)))
    b = g.add_input("b", TensorType(F32, (3, 6, 2)))
    assert g.op("matmul", a, b).shape == (5, 3, 4, 2)
    r = g.op("reshape", a, shape=[5, -1])
    assert r.shape == (5, 24)
    e = g.op("einsum", a, b, equation="bcij,cjk->bcik")
    assert e.shape == (5, 3, 4, 2)
    with pytest.raises(Exception, match="share one dtype"):
        g.op("add", a, g.add_input("i", TensorType(DType.INT64, (1,))))


def test_validate_reports_node_and_value():
    g = graphs.mlp()
    g.nodes[0].outputs[0].type = TensorType(F32, (SymDim("batch", 1, 32), 9))
    with pytest.raises(GraphError, match=r"node #0 'layers.0' \(linear\).*has type"):
        g.validate()


def test_validate_finds_out_of_order_and_cycles():
    g = graphs.mlp()
    g.nodes.reverse()
    with pytest.raises(GraphError, match="not in topological order"):
        g.validate()
    g.sort()
    g.validate()
    # A real cycle: feed the last node's output back into the first node.
    c = Graph("cyc")
    x = c.add_input("x", TensorType(F32, (2,)))
    a = c.add_node("relu", [x])
    b = c.add_node("neg", [a.output])
    a.inputs = [b.output]
    c.set_outputs([b.output])
    with pytest.raises(GraphError, match="cycle"):
        c.validate()


def test_validate_rejects_undefined_and_duplicate_values():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (2,)))
    stray = Value("stray", TensorType(F32, (2,)))
    g.nodes.append(Node("add", [x, stray]))
    with pytest.raises(GraphError, match="%stray is not defined"):
        g.validate()
    h = Graph()
    h.inputs = [Value("x", TensorType(F32, (2,))), Value("x", TensorType(F32, (2,)))]
    with pytest.raises(GraphError, match="'x' is defined twice"):
        h.validate()
    k = Graph()
    k.outputs = [stray]
    with pytest.raises(GraphError, match="output %stray is not defined"):
        k.validate()


def test_weight_data_must_match_type_and_may_be_lazy_and_is_not_kept():
    g = Graph()
    with pytest.raises(GraphError, match="data is f64"):
        g.add_weight("w", np.zeros(2), type=TensorType(F32, (2,)))
    calls = []

    def loader():
        calls.append(1)
        return np.ones((2,), np.float32)

    w = g.add_weight("lazy", loader, type=TensorType(F32, (2,)))
    assert not calls
    assert w.numpy().sum() == 2 and w.numpy().sum() == 2
    # A loader's result belongs to the caller: the weight keeps the loader, not the array,
    # so walking a large model does not pin its weights in memory.
    assert calls == [1, 1]
    assert w.storage is loader


def test_networkx_view():
    nxg = graphs.mlp().to_networkx()
    assert ("input", "x") in nxg and ("weight", "layers.0.weight") in nxg
    ops = [d["op"] for _, d in nxg.nodes(data=True) if d["kind"] == "node"]
    assert ops == ["linear", "gelu", "linear"]
    import networkx as nx

    assert nx.is_directed_acyclic_graph(nxg)
    assert nx.has_path(nxg, ("input", "x"), ("output", 0))


def test_registry_is_scoped_and_rejects_duplicates():
    reg = OpRegistry()

    @reg.op("double", ["x"], {"k": Attr.int(2)})
    def double(x, *, k):
        return x

    assert "double" in reg and "double" not in registry
    with pytest.raises(ValueError, match="registered twice"):
        reg.op("double", ["x"])(double)


def test_every_op_has_a_doc_and_category():
    for schema in registry:
        assert schema.doc, schema.name
        assert schema.category != "misc", schema.name
