"""diff's SAME_ATTRS rules: attribute values that differ without changing what two paired
nodes compute, each counted as a named known rewrite, and a near miss of each still a real
change."""

from __future__ import annotations

import pytest

from msc.analysis.diff import SAME_ATTRS, diff_graphs
from msc.ir import DType, Graph, SymDim, TensorType

F32 = DType.FLOAT32
GQA = SAME_ATTRS["attention", "enable_gqa"][0]


def _attention(q_heads, kv_heads, enable_gqa: bool) -> Graph:
    """attention over [2, heads, 5, 8] query, key and value with the given head counts
    (None: unknown, a str: a named symbol)."""

    def dim(h):
        return SymDim(h) if isinstance(h, str) else h

    g = Graph("t")
    q = g.add_input("q", TensorType(F32, (2, dim(q_heads), 5, 8)))
    k = g.add_input("k", TensorType(F32, (2, dim(kv_heads), 5, 8)))
    v = g.add_input("v", TensorType(F32, (2, dim(kv_heads), 5, 8)))
    g.set_outputs([g.op("attention", q, k, v, None, enable_gqa=enable_gqa)])
    return g


# (id, A's (q heads, kv heads, enable_gqa), B's, equivalent, the side the rule counts)
GQA_ROWS = [
    # an ONNX Attention read back with heads unknown (a Reshape to -1 heads): grouped, as
    # ONNX computes it; A's heads are known equal, so both compute plain attention
    ("known_equal_vs_unknown", (4, 4, False), (None, None, True), True, "B"),
    ("grouped_known_equal_vs_plain", (4, 4, True), (4, 4, False), True, "A"),
    ("one_symbol_both_sides", ("h", "h", False), ("h", "h", True), True, "B"),
    # the plain node runs only on equal heads, and B reads the same values
    ("unknown_on_both_sides", (None, None, False), (None, None, True), True, "B"),
    ("two_symbols", ("h", "g", False), ("h", "g", True), True, "B"),
    # near misses: heads known unequal (B must group to read them) on either side
    ("known_unequal_vs_unknown", (4, 2, True), (None, None, False), False, None),
    ("unknown_vs_known_unequal", (None, None, False), (8, 2, True), False, None),
]


@pytest.mark.parametrize(
    ("a", "b", "equivalent", "side"), [r[1:] for r in GQA_ROWS], ids=[r[0] for r in GQA_ROWS]
)
def test_enable_gqa_agrees_over_heads_known_equal(a, b, equivalent, side):
    r = diff_graphs(_attention(*a), _attention(*b))
    assert not r.equal
    assert r.equivalent is equivalent, r.verdict()
    if equivalent:
        assert r.rewrites == [(side, GQA, 1)], r.rewrites
    else:
        assert r.real_changes == 1 and "attr enable_gqa" in " ".join(r.changed[0].changes)
