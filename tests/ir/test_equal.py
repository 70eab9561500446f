"""Structural equality: each field can make two graphs differ, and the diff names it."""

from __future__ import annotations

import numpy as np
import pytest

import msc
from msc import DType, Graph, SymDim, TensorType
from tests import graphs

F32 = DType.FLOAT32


def base(
    *,
    op="relu",
    stride=(1, 1),
    groups=1,
    swap=False,
    in_order=("x", "y"),
    out_order=(0, 1),
    dtype=F32,
    shape=(1, 4, 8, 8),
    wval=1.0,
    names=("x", "y"),
    node_name="conv",
    sym="batch",
):
    g = Graph("g")
    ins = {}
    for n in in_order:
        t = TensorType(dtype, shape) if n == "x" else TensorType(dtype, (1, 4, 1, 1))
        ins[n] = g.add_input(names[0] if n == "x" else names[1], t)
    x, y = ins["x"], ins["y"]
    w = g.add_weight("w", np.full((4, 4, 3, 3), wval, dtype=dtype.to_numpy()))
    a = g.op(op, x)
    c = g.add_node(
        "conv",
        [a, w, None],
        {"stride": list(stride), "padding": [1, 1, 1, 1], "groups": groups},
        name=node_name,
    ).output
    s = g.op("sub", y, c) if swap else g.op("sub", c, y)
    m = g.op("reduce_sum", s, axes=[1], keepdims=True)
    outs = [s, m]
    g.set_outputs([outs[i] for i in out_order])
    g.meta["sym"] = sym
    return g


def test_equal_graphs_and_hash():
    a, b = base(), base()
    assert msc.structural_equal(a, b)
    assert msc.structural_hash(a) == msc.structural_hash(b)


DIFFERENT = {
    "op": (dict(op="sigmoid"), "op differs: expected relu, found sigmoid"),
    "attribute stride": (dict(stride=(2, 2)), "attrs.stride"),
    "attribute groups": (dict(groups=2, shape=(1, 8, 8, 8)), None),
    "edge swapped": (dict(swap=True), "edge"),
    "input order": (dict(in_order=("y", "x")), None),
    "output order": (dict(out_order=(1, 0)), "outputs[0]"),
    "dtype": (dict(dtype=DType.FLOAT64), "dtype differs"),
    "shape": (dict(shape=(1, 4, 8, 9)), "shape differs"),
    "weight value": (dict(wval=2.0), "weight values differ"),
}


@pytest.mark.parametrize("case", sorted(DIFFERENT))
def test_each_field_can_differ(case):
    kwargs, expect = DIFFERENT[case]
    a, b = base(), base(**kwargs)
    r = msc.structural_equal(a, b)
    assert not r, f"{case}: graphs compared equal"
    assert r.diff
    if expect:
        assert expect in r.diff, r.diff
    assert msc.structural_hash(a) != msc.structural_hash(b)
    with pytest.raises(AssertionError, match="graphs differ"):
        msc.assert_structural_equal(a, b)


def test_input_order_diff_points_at_the_first_input():
    # x is 1x4x8x9, y is 1x4x1x1: swapping their order is a shape difference at inputs[0].
    a = base(shape=(1, 4, 8, 9))
    b = base(shape=(1, 4, 8, 9), in_order=("y", "x"))
    r = msc.structural_equal(a, b)
    assert not r and "inputs[0]" in r.diff


def test_names_ignored_by_default_and_compared_on_request():
    a, b = base(), base(names=("p", "q"), node_name="other", sym="other")
    assert msc.structural_equal(a, b)
    r = msc.structural_equal(a, b, names=True)
    assert not r and "meta.sym" in r.diff
    for kwargs, where in [
        (dict(names=("p", "y")), "inputs[0] %x: name differs"),
        (dict(node_name="other"), "node name differs"),
    ]:
        r = msc.structural_equal(a, base(**kwargs), names=True)
        assert not r and where in r.diff, r.diff
    assert msc.structural_hash(a) == msc.structural_hash(b)
    assert msc.structural_hash(a, names=True) != msc.structural_hash(b, names=True)


def test_weights_by_type_only():
    a, b = base(), base(wval=3.0)
    assert not msc.structural_equal(a, b)
    assert msc.structural_equal(a, b, weights="types")
    assert msc.structural_hash(a, weights="types") == msc.structural_hash(b, weights="types")


def test_weight_used_twice_vs_two_equal_weights_differ():
    def make(shared: bool):
        g = Graph()
        x = g.add_input("x", TensorType(F32, (2,)))
        w1 = g.add_weight("a", np.ones(2, np.float32))
        w2 = w1 if shared else g.add_weight("b", np.ones(2, np.float32))
        g.set_outputs([g.op("mul", g.op("add", x, w1), w2)])
        return g

    r = msc.structural_equal(make(True), make(False))
    assert not r and "edge" in r.diff


def test_symbolic_dims_compare_by_name_and_range():
    def make(sym):
        g = Graph()
        g.set_outputs([g.op("relu", g.add_input("x", TensorType(F32, (sym, 2))))])
        return g

    assert msc.structural_equal(make(SymDim("b", 1, 8)), make(SymDim("b", 1, 8)))
    assert not msc.structural_equal(make(SymDim("b", 1, 8)), make(SymDim("b", 1, 9)))
    assert not msc.structural_equal(make(SymDim("b")), make(None))
    # A symbol's name is a name: equal modulo names (two exporters call one dim s77 and
    # batch), different with names=True, and hashed alike.
    assert msc.structural_equal(make(SymDim("b")), make(SymDim("n")))
    assert msc.structural_hash(make(SymDim("b"))) == msc.structural_hash(make(SymDim("n")))
    assert not msc.structural_equal(make(SymDim("b")), make(SymDim("n")), names=True)
    assert not msc.structural_equal(make(SymDim("b", 1, 8)), make(SymDim("n", 1, 9)))


def _two_inputs(s1, s2, out=None):
    g = Graph()
    x = g.add_input("x", TensorType(F32, (s1, 4)))
    y = g.add_input("y", TensorType(F32, (s2, 4)))
    z = g.op("concat", x, y, axis=0)
    g.set_outputs([z])
    return g


def test_renaming_symbols_is_one_to_one_and_consistent():
    b, s, n, m = (SymDim(k) for k in ("b", "s", "n", "m"))
    assert msc.structural_equal(_two_inputs(b, s), _two_inputs(n, m))
    assert msc.structural_equal(_two_inputs(b, b), _two_inputs(n, n))
    # One symbol cannot stand for two, nor two for one.
    r = msc.structural_equal(_two_inputs(b, b), _two_inputs(n, m))
    assert not r and "inputs[1]" in r.diff
    assert not msc.structural_equal(_two_inputs(b, s), _two_inputs(n, n))
    # Expressions rename with their symbols: concat's b + s is n + m.
    a, c = _two_inputs(b, s), _two_inputs(n, m)
    assert str(a.outputs[0].type) == "f32[b + s, 4]"
    assert msc.structural_hash(a) == msc.structural_hash(c)
    assert msc.structural_hash(a) != msc.structural_hash(_two_inputs(b, b))


def test_subgraph_differences_are_found():
    a = graphs.with_subgraph()
    b = graphs.with_subgraph()
    b.nodes[0].attrs["else_branch"].nodes[0].op = "abs"
    r = msc.structural_equal(a, b)
    assert not r and "else_branch" in r.diff and "op differs" in r.diff
    assert msc.structural_hash(a) != msc.structural_hash(b)


def test_unused_weights_count():
    a, b = base(), base()
    b.add_weight("extra", np.zeros(1, np.float32))
    assert not msc.structural_equal(a, b)


def test_equality_is_linear_in_size():
    """A 20k-node chain compares and hashes quickly (the walk is linear, not quadratic)."""
    import time

    def chain(n):
        g = Graph()
        v = g.add_input("x", TensorType(F32, (4,)))
        for _ in range(n):
            v = g.op("relu", v)
        g.set_outputs([v])
        return g

    a, b = chain(20000), chain(20000)
    t = time.perf_counter()
    assert msc.structural_equal(a, b)
    msc.structural_hash(a)
    small = time.perf_counter() - t
    a4, b4 = chain(80000), chain(80000)
    t = time.perf_counter()
    assert msc.structural_equal(a4, b4)
    msc.structural_hash(a4)
    big = time.perf_counter() - t
    # 4x the nodes should cost about 4x, far from the 16x of a quadratic walk.
    assert big < 10 * small + 0.5


def test_independent_nodes_in_another_order_are_equal():
    def make(flip: bool):
        g = Graph()
        x = g.add_input("x", TensorType(F32, (2,)))
        first, second = ("exp", "neg") if not flip else ("neg", "exp")
        a = g.op(first, x)
        b = g.op(second, x)
        if flip:
            a, b = b, a
        g.set_outputs([g.op("sub", a, b)])
        return g

    a, b = make(False), make(True)
    assert [n.op for n in a.nodes[:2]] != [n.op for n in b.nodes[:2]]
    assert msc.structural_equal(a, b)
    assert msc.structural_hash(a) == msc.structural_hash(b)
    # ...but swapping the operands of sub is still a difference.
    c = make(False)
    c.nodes[-1].inputs = list(reversed(c.nodes[-1].inputs))
    assert not msc.structural_equal(a, c)
