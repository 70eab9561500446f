"""Sequence and optional value types: spelling, text round trip, equality and hashing, what
refuses them (weights, canonical ops, codegen.torch), and analysis over them."""

from __future__ import annotations

import pytest

import msc
from msc import DType, Graph, OptionalType, SequenceType, SymDim, TensorType
from msc.errors import NonNumericValuesError
from msc.ir.validate import non_numeric_values
from msc.ops.custom import custom_op
from msc.ops.schema import OpError

F32, I64 = DType.FLOAT32, DType.INT64
BATCH = SymDim("batch", 1, 8)

# (type, its spelling)
TYPES = [
    (SequenceType(TensorType(F32, (None, 3))), "seq<f32[?, 3]>"),
    (SequenceType(TensorType(DType.BOOL, None)), "seq<bool[*]>"),
    (OptionalType(TensorType(F32, (2, BATCH))), "opt<f32[2, batch{1..8}]>"),
    (OptionalType(SequenceType(TensorType(I64, (None,)))), "opt<seq<i64[?]>>"),
    (OptionalType(TensorType(I64, ())), "opt<i64[]>"),
]


def _graph(t) -> Graph:
    """A graph whose input has type ``t``, read by a custom node that gives ``t`` and a
    tensor, and whose attribute is ``t`` as well."""
    g = Graph("g")
    x = g.add_input("x", t)
    n = g.add_node(
        custom_op("ai.onnx", "Op", 1),
        [x],
        {"type": t},
        output_types=[t, TensorType(F32, (BATCH,))],
        name="n",
    )
    g.set_outputs([n.outputs[0], n.outputs[1], x])
    return g.validate()


@pytest.mark.parametrize("t, text", TYPES, ids=[s for _, s in TYPES])
def test_type_spelling_round_trips_through_text(t, text: str) -> None:
    assert str(t) == text
    g = _graph(t)
    printed = msc.to_text(g)
    assert f"input %x: {text}" in printed and f"type({text})" in printed
    again = msc.from_text(printed)
    assert again.inputs[0].type == t and again.nodes[0].attrs["type"] == t
    assert msc.to_text(again) == printed
    assert msc.structural_equal(g, again, names=True)
    assert msc.structural_hash(g) == msc.structural_hash(again)


def test_types_compare_and_hash_by_value() -> None:
    a = SequenceType(TensorType(F32, (None, 3)))
    b = SequenceType(TensorType(F32, [None, 3]))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != SequenceType(TensorType(F32, (None, 4)))
    assert a != OptionalType(a.element) and a != a.element
    assert OptionalType(a) == OptionalType(b) and hash(OptionalType(a)) == hash(OptionalType(b))
    with pytest.raises(AttributeError):
        a.element = TensorType(I64, ())  # type: ignore[misc]  # frozen


def test_structural_equal_and_hash_see_the_element_type() -> None:
    base = _graph(SequenceType(TensorType(F32, (None, 3))))
    other = _graph(SequenceType(TensorType(F32, (None, 4))))
    eq = msc.structural_equal(base, other)
    assert not eq and "type differs" in str(eq.diff) and "seq<f32[?, 4]>" in str(eq.diff)
    assert msc.structural_hash(base) != msc.structural_hash(other)
    opt = _graph(OptionalType(TensorType(F32, (None, 3))))
    assert not msc.structural_equal(base, opt)
    assert msc.structural_hash(base) != msc.structural_hash(opt)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SequenceType(SequenceType(TensorType(F32, (2,)))),
        lambda: SequenceType(OptionalType(TensorType(F32, (2,)))),
        lambda: OptionalType(OptionalType(TensorType(F32, (2,)))),
        lambda: SequenceType(F32),
    ],
    ids=["seq-of-seq", "seq-of-opt", "opt-of-opt", "seq-of-dtype"],
)
def test_element_types_are_checked(make) -> None:
    with pytest.raises(TypeError, match="element"):
        make()


@pytest.mark.parametrize(
    "text, message",
    [
        ("input %x: seq<seq<f32[2]>>", "element must be a TensorType"),
        ("input %x: opt<opt<f32[2]>>", "element must be a TensorType or SequenceType"),
        ("input %x: seq<f32[2]", "expected '>'"),
        ("weight @w: seq<f32[2]>", "a weight is a tensor"),
    ],
)
def test_bad_type_text_is_a_parse_error(text: str, message: str) -> None:
    src = f"graph g {{\n  {text}\n}}\n"
    with pytest.raises(msc.ParseError, match=message):
        msc.from_text(src)


def test_a_weight_cannot_be_a_sequence() -> None:
    with pytest.raises(TypeError, match="a weight is a tensor"):
        Graph("g").add_weight("w", type=SequenceType(TensorType(F32, (2,))))


def test_canonical_ops_refuse_a_sequence_naming_it() -> None:
    g = Graph("g")
    x = g.add_input("x", SequenceType(TensorType(F32, (None, 3))))
    for op in ("relu", "identity"):
        with pytest.raises(OpError, match=r"takes tensors.*%x: seq<f32\[\?, 3\]>"):
            g.op(op, x)
    # a canonical control op whose body gives a sequence
    body = Graph("then")
    body.set_outputs([x])
    cond = g.add_input("c", TensorType(DType.BOOL, ()))
    with pytest.raises(OpError, match="takes tensors"):
        g.add_node("if", [cond], {"then_branch": body, "else_branch": body})


def _nested() -> Graph:
    """Sequence values at the top and inside a custom loop's body."""
    seq = SequenceType(TensorType(F32, (None,)))
    g = Graph("g")
    s = g.add_input("s", seq)
    n = g.add_input("n", TensorType(I64, ()))
    body = Graph("body")
    body.add_input("i", TensorType(I64, ()))
    body.add_input("c", TensorType(DType.BOOL, ()))
    acc = body.add_input("acc", seq)
    body.set_outputs([body.inputs[1], acc])
    loop = g.add_node(
        custom_op("ai.onnx", "Loop", 16), [n, None, s], {"body": body}, output_types=[seq]
    )
    g.set_outputs([loop.output])
    return g.validate()


def test_non_numeric_values_lists_every_one_with_where() -> None:
    assert non_numeric_values(_nested()) == [
        "input %s: seq<f32[?]>",
        "%0: seq<f32[?]> (output of node #0 (ai.onnx::Loop@16))",
        "input %acc: seq<f32[?]> in body of node #0 (ai.onnx::Loop@16)",
    ]


def test_codegen_torch_refuses_naming_every_value() -> None:
    pytest.importorskip("torch")
    import codegen.torch as ct

    with pytest.raises(NonNumericValuesError) as e:
        ct.generate(_nested())
    msg = str(e.value)
    assert msg.startswith("codegen.torch holds numeric tensors only")
    assert "graph 'g' has 3 value(s) it cannot hold (codegen.onnx writes them)" in msg
    assert all(f"  - {v}\n" in msg + "\n" for v in non_numeric_values(_nested()))
    assert e.value.values == non_numeric_values(_nested()) and e.value.target == "codegen.torch"


def test_codegen_relax_refuses_naming_every_value() -> None:
    pytest.importorskip("tvm")
    import codegen.relax as cr

    for fn in (cr.to_module, cr.to_script):
        with pytest.raises(NonNumericValuesError, match="codegen.relax holds numeric tensors") as e:
            fn(_nested())
        assert e.value.values == non_numeric_values(_nested())


def test_inspect_counts_a_sequence_as_unknown_size() -> None:
    g = _graph(SequenceType(TensorType(F32, (BATCH, 3))))
    report = msc.inspect(g)
    assert report.peak_is_lower_bound
    assert "batch" in {s["name"] if isinstance(s, dict) else s for s in report.to_json()["symbols"]}
    io = report.to_json()["inputs"][0]
    assert io["type"] == "seq<f32[batch{1..8}, 3]>" and io["dtype"] == "f32" and io["shape"] is None
    bound = msc.inspect(g, shapes={"batch": 4})
    assert bound.peak_is_lower_bound
