"""Custom ops in the graph core: spelling, text, equality, hashing, save/load, validation."""

from __future__ import annotations

import numpy as np
import pytest

import msc
from msc.analysis.inspect import format_report
from msc.ir import DType, Graph, GraphError, TensorType
from msc.ops.custom import CustomOp, custom_op, parse_custom
from msc.ops.schema import OpError
from msc.text.parser import ParseError

F32 = DType.from_numpy(np.float32)


def _graph(alpha: float = 1.5) -> Graph:
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (2, 3)))
    w = g.add_weight("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    n = g.add_node(
        custom_op("com.example", "Mix", 3),
        [x, None, w],
        {"alpha": alpha, "mode": "fast", "sizes": [1, 2], "to": DType.from_numpy(np.int8)},
        output_types=[TensorType(F32, (2, 3)), TensorType(F32, (3,))],
        name="mix",
    )
    g.set_outputs([g.op("relu", n.outputs[0]), n.outputs[1]])
    return g.validate()


def test_spelling_round_trips_and_bad_names_are_refused():
    assert custom_op("com.microsoft", "Inverse") == "com.microsoft::Inverse@1"
    assert parse_custom("transformers::grouped_mm_fallback@1") == CustomOp(
        "transformers", "grouped_mm_fallback", 1
    )
    assert parse_custom("relu") is None
    for bad in ("a::b", "::b@1", "a::@1", "a::b@x", "a::b@1@2"):
        with pytest.raises(OpError):
            parse_custom(bad)
    with pytest.raises(OpError):
        CustomOp("a@b", "c")


def test_custom_node_needs_its_output_types():
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (2,)))
    with pytest.raises(OpError, match="cannot infer"):
        g.add_node(custom_op("d", "op"), [x])
    with pytest.raises(OpError, match="at least one output"):
        g.add_node(custom_op("d", "op"), [x], output_types=[])


def test_custom_node_prints_parses_and_compares_like_any_node():
    g = _graph()
    text = msc.to_text(g)
    assert '"com.example::Mix@3"(%x, _, @w)' in text
    h = msc.from_text(text)
    node = h.nodes[0]
    assert node.op == "com.example::Mix@3"
    assert node.attrs == g.nodes[0].attrs
    assert [v.type for v in node.outputs] == [v.type for v in g.nodes[0].outputs]
    assert msc.to_text(h) == text
    # A different attribute value is a different graph, by equality and by hash.
    other = _graph(alpha=2.0)
    assert not msc.structural_equal(g, other)
    assert msc.structural_hash(g) != msc.structural_hash(other)
    assert msc.structural_hash(g) == msc.structural_hash(_graph())


def test_custom_node_saves_and_loads(tmp_path):
    g = _graph()
    msc.save(g, tmp_path / "m")
    back = msc.load(tmp_path / "m")
    assert msc.structural_equal(g, back)
    assert msc.structural_hash(g) == msc.structural_hash(back)


def test_malformed_custom_op_in_text_is_a_parse_error():
    text = msc.to_text(_graph()).replace("com.example::Mix@3", "com.example::Mix")
    with pytest.raises(ParseError, match="domain::name@version"):
        msc.from_text(text)


def test_validate_checks_custom_node_outputs():
    g = _graph()
    g.nodes[0].outputs[0].producer = None
    with pytest.raises(GraphError, match="producer"):
        g.validate()


def test_inspect_lists_custom_ops_apart():
    r = msc.inspect(_graph())
    assert r.custom_ops == {"com.example::Mix@3": 1}
    assert "com.example::Mix@3" not in r.op_histogram
    assert "relu" in r.op_histogram
    text = format_report(r)
    assert "custom ops" in text and "com.example::Mix@3  x1" in text
