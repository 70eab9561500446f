"""Symbolic dim expressions: canonical form, arithmetic, the text spelling."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msc
from msc.ir import DType, Graph, SymDim, SymExpr, TensorType, symexpr
from msc.ir.types import ShapeError
from msc.text import ParseError, parse_dim

B = SymDim("batch", 1, 64)
S = SymDim("seq")
F32 = DType.from_numpy("float32")


def test_equal_expressions_are_equal_values_with_equal_hashes():
    a = symexpr.add(symexpr.mul(2, B), symexpr.mul(B, S))
    b = symexpr.add(symexpr.mul(S, B), symexpr.add(B, B))
    assert a == b and hash(a) == hash(b) and str(a) == str(b)
    assert symexpr.sub(symexpr.add(S, 1), 1) == S  # back to the symbol itself
    assert symexpr.sub(S, S) == 0 and isinstance(symexpr.sub(S, S), int)
    assert symexpr.add(B, B) != symexpr.add(SymDim("batch"), SymDim("batch"))  # ranges count


def test_spelling():
    assert str(symexpr.add(symexpr.mul(2, B), 1)) == "2*batch{1..64} + 1"
    assert symexpr.add(symexpr.mul(2, B), 1).name == "2*batch + 1"
    assert str(symexpr.sub(5, S)) == "-seq + 5"
    assert str(symexpr.ceildiv(S, 2)) == "floordiv(seq + 1, 2)"
    assert str(symexpr.minimum(S, B)) == "min(batch{1..64}, seq)"


def test_exact_simplifications():
    assert symexpr.floordiv(symexpr.add(symexpr.mul(4, S), 3), 2) == symexpr.add(
        symexpr.mul(2, S), 1
    )
    assert symexpr.mod(symexpr.add(symexpr.mul(4, S), 3), 2) == 1
    assert symexpr.floordiv(symexpr.mul(768, symexpr.mul(B, S)), 768) == symexpr.mul(B, S)
    assert symexpr.minimum(S, symexpr.add(S, 2), 100) == symexpr.minimum(S, 100)
    assert symexpr.maximum(S, symexpr.add(S, 2)) == symexpr.add(S, 2)
    assert symexpr.minimum(symexpr.minimum(S, B), 3) == symexpr.minimum(B, S, 3)
    assert symexpr.floordiv(S, S) == 1 and symexpr.mod(S, S) == 0
    # ranges order dims too: a sequence of at most 16 cut to a table of 16 is the sequence
    short = SymDim("seq", max=16)
    assert symexpr.minimum(16, short) == short and symexpr.maximum(16, short) == 16
    assert symexpr.minimum(B, 64) == B and symexpr.maximum(B, 1) == B
    assert symexpr.minimum(16, S) == symexpr.minimum(S, 16)  # unbounded: not known
    assert symexpr.minimum(15, short) == symexpr.minimum(short, 15)


def test_subs_and_bounds():
    e = symexpr.add(symexpr.floordiv(symexpr.sub(S, 1), 2), B)
    assert symexpr.subs(e, {"seq": 9, "batch": 3}) == 7
    assert symexpr.subs(e, {"batch": 3}) == symexpr.add(symexpr.floordiv(symexpr.sub(S, 1), 2), 3)
    assert symexpr.bounds(symexpr.add(symexpr.mul(2, B), 1)) == (3, 129)
    assert symexpr.bounds(symexpr.mul(B, S)) == (0, None)
    assert symexpr.at_least(symexpr.sub(B, 1), 0)
    assert not symexpr.at_least(symexpr.sub(S, 1), 0)


def test_a_hostile_expression_is_refused_not_expanded():
    wide = SymDim("a")
    for i in range(70):
        wide = symexpr.add(wide, SymDim(f"s{i}"))
    with pytest.raises(ShapeError, match="terms"):
        symexpr.mul(wide, symexpr.mul(wide, wide))


_SYMS = [SymDim("a", 0, 50), SymDim("b", 1, 9), SymDim("c")]
_OPS = {
    "add": (symexpr.add, operator.add),
    "sub": (symexpr.sub, operator.sub),
    "mul": (symexpr.mul, operator.mul),
}


def _exprs():
    leaf = st.one_of(st.integers(-5, 12), st.sampled_from(_SYMS))

    def extend(children):
        binop = st.tuples(st.sampled_from(sorted(_OPS)), children, children)
        div = st.tuples(st.sampled_from(["floordiv", "mod"]), children, st.integers(1, 7))
        ext = st.tuples(st.sampled_from(["min", "max"]), children, children)
        return st.one_of(binop, div, ext)

    return st.recursive(leaf, extend, max_leaves=8)


def _build(t):
    if not isinstance(t, tuple):
        return t, (lambda env, t=t: t if isinstance(t, int) else env[t.name])
    op, a, b = t
    (da, fa), (db, fb) = _build(a), _build(b)
    if op in _OPS:
        f, py = _OPS[op]
        return f(da, db), lambda env: py(fa(env), fb(env))
    if op == "floordiv":
        return symexpr.floordiv(da, db), lambda env: fa(env) // fb(env)
    if op == "mod":
        return symexpr.mod(da, db), lambda env: fa(env) % fb(env)
    f = symexpr.minimum if op == "min" else symexpr.maximum
    py = min if op == "min" else max
    return f(da, db), lambda env: py(fa(env), fb(env))


@settings(max_examples=300, deadline=None)
@given(_exprs(), st.integers(0, 50), st.integers(1, 9), st.integers(0, 40))
def test_canonical_form_computes_what_the_expression_computes(tree, a, b, c):
    """Whatever the simplifications do, the canonical dim evaluates like the expression it
    came from; and its spelling parses back to itself."""
    d, py = _build(tree)
    env = {"a": a, "b": b, "c": c}
    assert symexpr.subs(d, env) == py(env)
    if not isinstance(d, int) or d >= 0:
        assert parse_dim(symexpr.spell(d)) == d


def test_text_format_round_trips_expressions():
    g = Graph("g")
    dims = (B, symexpr.add(symexpr.mul(2, S), 1), symexpr.floordiv(symexpr.sub(S, 1), 2))
    x = g.add_input("x", TensorType(F32, dims))
    g.set_outputs([g.op("relu", x)])
    text = msc.to_text(g)
    assert "f32[batch{1..64}, 2*seq + 1, floordiv(seq + 1, 2) - 1]" in text
    back = msc.from_text(text)
    assert back.inputs[0].type == x.type and msc.to_text(back) == text
    assert isinstance(back.inputs[0].type.shape[1], SymExpr)


@pytest.mark.parametrize(
    "bad, why",
    [
        ("f32[s -]", "a dim"),
        ("f32[floordiv(s)]", "floordiv takes 2 arguments"),
        ("f32[min(s)]", "min takes at least 2 arguments"),
        ("f32[2 - 5]", "a dim must be >= 0"),
        ("f32[mod(s, 0)]", "by 0"),
    ],
)
def test_malformed_expressions_are_parse_errors(bad, why):
    with pytest.raises(ParseError, match=why):
        msc.from_text(f"graph g {{\n  input %x: {bad}\n  output %x\n}}\n")


def test_exact_div_of_a_polynomial_by_one_term():
    two_b_s = symexpr.mul(32, symexpr.mul(B, S))
    assert symexpr.exact_div(two_b_s, symexpr.mul(16, S)) == symexpr.mul(2, B)
    assert symexpr.exact_div(64, 16) == 4
    assert symexpr.exact_div(B, S) is None  # S does not divide batch
    assert symexpr.exact_div(symexpr.add(B, 1), B) is None  # nor every term
    assert symexpr.exact_div(B, symexpr.add(B, S)) is None  # a sum is no single term


def test_renaming_pairs_symbols_one_to_one():
    s77, s12 = SymDim("s77", 1, 64), SymDim("s12")
    r = symexpr.Renaming(ranges=False)
    assert r.equal(s77, SymDim("batch"))  # ranges aside
    assert r.fwd == {"s77": "batch"}
    assert not r.equal(s12, SymDim("batch"))  # batch is taken by s77
    assert r.equal(symexpr.mul(2, s77), symexpr.mul(2, SymDim("batch")))
    # Two new symbols in one expression pair by trying each assignment.
    assert r.equal(
        symexpr.add(symexpr.mul(2, s12), SymDim("h")),
        symexpr.add(SymDim("w"), symexpr.mul(2, SymDim("seq"))),
    )
    assert r.fwd["s12"] == "seq" and r.fwd["h"] == "w"
    # A failed comparison leaves the renaming as it was.
    before = dict(r.fwd)
    assert not r.shapes_equal((SymDim("k"), 3), (SymDim("m"), 4))
    assert r.fwd == before
    # With ranges, a symbol's range must agree too.
    assert not symexpr.Renaming().equal(s77, SymDim("batch", 1, 32))
