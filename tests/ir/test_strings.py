"""The ``str`` element type: dtype facts, text round trips, equality, analysis, save."""

from __future__ import annotations

import numpy as np
import pytest

import msc
from msc import DType, Graph, GraphError, Node, TensorType
from msc.analysis.inspect import target_support
from msc.errors import MscError
from msc.ir.validate import non_numeric_values
from msc.ops.custom import custom_op

S = DType.STRING

# Text a model may carry: quotes, escapes, code, control characters, non-ASCII, empty.
HOSTILE = [
    "",
    'quote"inside',
    "back\\slash",
    "new\nline",
    '");__import__("os").system("echo pwned")#',
    "\x00nul\x7f",
    "ünïcødé-名前 😀",
]


def _text(items, shape=None) -> np.ndarray:
    a = np.empty(len(items), object)
    a[:] = items
    return a.reshape(shape if shape is not None else (len(items),))


def _graph() -> Graph:
    """A string input, a string weight, a string constant, eq on strings, and a custom op
    with a string tensor attribute."""
    g = Graph("strings")
    x = g.add_input("x", TensorType(S, [2, 3]))
    c = g.op("constant", value=_text(HOSTILE[:6], (2, 3)))
    w = g.add_weight("vocab", _text(["a", "b", "c"], (1, 3)))
    e = g.op("eq", x, c)
    e2 = g.op("eq", x, w)
    n = Node(
        custom_op("ai.onnx.ml", "LabelEncoder", 4),
        [x],
        {"keys_tensor": _text(HOSTILE), "default_string": "?"},
        output_types=[TensorType(S, [2, 3])],
    )
    g.add_node(n)
    g.set_outputs([e, e2, n.outputs[0]])
    return g


def test_string_dtype_facts():
    assert DType.from_short("str") is S and S.short == "str"
    assert S.to_numpy() == np.dtype(object) and DType.from_numpy(np.dtype(object)) is S
    assert S.is_string and not (S.is_floating or S.is_integer or S.is_bool or S.is_complex)
    assert not S.is_signed
    # no fixed byte size: itemsize and bits refuse, byte counts are None, elements still count
    with pytest.raises(ValueError, match="str has no fixed size"):
        S.itemsize  # noqa: B018
    with pytest.raises(ValueError, match="str has no fixed size"):
        S.bits  # noqa: B018
    t = TensorType(S, [2, 3])
    assert str(t) == "str[2, 3]" and t.numel() == 6
    assert t.nbytes() is None and t.storage_bytes() is None
    # numpy's fixed-width unicode is not taken silently: it converts with astype(object)
    with pytest.raises(ValueError, match="no msc DType"):
        DType.from_numpy(np.dtype("U3"))


def test_str_tensors_hold_python_str_only():
    with pytest.raises(GraphError, match="holds Python str only, found bytes"):
        Graph("g").add_weight("w", _text([b"x"]))
    with pytest.raises(GraphError, match="holds Python str only, found int"):
        Graph("g").add_weight("w", _text([1]))
    g = Graph("g")
    with pytest.raises(Exception, match="holds Python str only, found bytes"):
        g.op("constant", value=_text([b"x"]))
    w = Graph("g").add_weight("w", _text(["ab", "é"]))
    assert w.nbytes == 4  # as stored: UTF-8 bytes


def test_text_round_trip_and_equality():
    g = _graph()
    text = msc.to_text(g)
    assert "input %x: str[2, 3]" in text and "weight @vocab: str[1, 3]" in text
    assert "tensor(str[2, 3], [" in text
    again = msc.from_text(text)
    assert msc.to_text(again) == text
    assert msc.structural_equal(g, again, weights="types")
    const = [n for n in again.nodes if n.op == "constant"][0].attrs["value"]
    assert const.dtype == object and const.tolist() == _text(HOSTILE[:6], (2, 3)).tolist()
    assert [type(x) for x in const.flat] == [str] * 6
    # equality and hashing compare the text, not the object pointers
    other = _graph()
    assert msc.structural_equal(g, other)
    assert msc.structural_hash(g) == msc.structural_hash(other)
    changed = _graph()
    changed.weights["vocab"].set_data(_text(["a", "b", "d"], (1, 3)))
    assert not msc.structural_equal(g, changed)
    assert msc.structural_hash(g) != msc.structural_hash(changed)


def test_text_refuses_non_string_elements():
    text = msc.to_text(_graph())
    assert 'tensor(str[7], ["",' in text
    with pytest.raises(msc.ParseError, match="str tensor's elements are strings"):
        msc.from_text(text.replace('tensor(str[7], ["",', "tensor(str[7], [1,"))
    with pytest.raises(msc.ParseError):  # text has no byte form
        msc.from_text(text.replace('tensor(str[7], ["",', 'tensor(str[7], b64 "",'))


def test_inspect_and_non_numeric_values():
    g = _graph()
    text = str(msc.inspect(g))
    assert "str  3  3 B  1 tensors" in text  # the str weight counted by its UTF-8 bytes
    assert "lower bound: some sizes unknown" in text  # str values have no byte size
    support = target_support(g)
    found = non_numeric_values(g)
    if "torch" in support:  # torch codegen installed: it cannot hold strings at all
        assert support["torch"][0] == f"{len(found)} str, sequence or optional value(s)"
    assert "input %x: str[2, 3]" in found and "weight @vocab: str[1, 3]" in found
    assert "attribute 'keys_tensor' of node #3 (ai.onnx.ml::LabelEncoder@4): str[7]" in found
    assert "%0: str[2, 3] (output of node #0 (constant))" in found


def test_save_load_keeps_string_weights_and_constants(tmp_path):
    g = _graph()
    out = msc.save(g, tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == [
        ".msc-output.json",
        "graph.msc",
        "strings.json",
        "weights.safetensors",
    ]
    again = msc.load(out)
    assert msc.structural_equal(g, again)  # weights compared by value: the text itself
    vocab = again.weights["vocab"].numpy()
    assert vocab.dtype == object and vocab.tolist() == [["a", "b", "c"]]
    msc.save(again, out)  # over itself
    assert msc.structural_equal(g, msc.load(out))


@pytest.mark.parametrize(
    "text, error",
    [
        ("[1]", "expected an object"),
        ('{"vocab": {"shape": [1, 3], "data": ["a", "b", 3]}}', "'vocab' is not"),
        ('{"vocab": {"shape": [1, 2], "data": ["a", "b", "c"]}}', "'vocab' has 3 strings"),
        ('{"vocab": {"shape": [-1], "data": []}}', "'vocab' is not"),
        ("{", "not a JSON file"),
        ('{"vocab": ' + "[" * 100_000 + "]" * 100_000 + "}", "strings.json: not a JSON file"),
        (
            '{"vocab": {"shape": [1, 3], "data": ["a", "b", "c"]}, "x": '
            '{"shape": [], "data": ["?"]}}',
            "strings.json: tensors not declared in the graph",
        ),
    ],
)
def test_bad_strings_file_is_a_clear_error(tmp_path, text, error):
    out = msc.save(_graph(), tmp_path / "out")
    (out / "strings.json").write_text(text)
    with pytest.raises(MscError, match=error):
        msc.load(out)


def test_non_numeric_values_look_inside_sequences_and_optionals():
    """A sequence or optional of str is named once, with its type; a sequence of numbers is
    named too (no numeric-tensor target holds it), and numeric tensors are not."""
    from msc import OptionalType, SequenceType

    g = Graph("seq_of_text")
    xs = g.add_input("xs", SequenceType(TensorType(S, [None])))
    n = Node(custom_op("ai.onnx", "SequenceLength", 11), [xs],
             output_types=[TensorType(DType.INT64, ())])  # fmt: skip
    g.add_node(n)
    o = Node(custom_op("ai.onnx", "Optional", 15), [xs],
             output_types=[OptionalType(SequenceType(TensorType(S, [None])))])  # fmt: skip
    g.add_node(o)
    g.set_outputs([n.outputs[0], o.outputs[0]])
    assert non_numeric_values(g) == [
        "input %xs: seq<str[?]>",
        "%1: opt<seq<str[?]>> (output of node #1 (ai.onnx::Optional@15))",
    ]
    numbers = Graph("seq_of_numbers")
    ys = numbers.add_input("ys", SequenceType(TensorType(DType.FLOAT32, [None])))
    zs = numbers.add_input("zs", TensorType(DType.FLOAT32, [None]))
    numbers.set_outputs([ys, zs])
    assert non_numeric_values(numbers) == ["input %ys: seq<f32[?]>"]
