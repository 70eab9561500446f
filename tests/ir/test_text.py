"""The text format: exact round trips for every name and value, golden files, parse errors."""

from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import msc
from msc import DType, Graph, ParseError, SymDim, TensorType
from tests import graphs

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

HOSTILE_NAMES = [
    "encoder.layers.0.self_attn.in_proj_weight",
    "with space",
    'quote"inside',
    "back\\slash",
    "new\nline",
    "tab\there",
    "ünïcødé-名前",
    "0leading_digit",
    "123",
    "",
    "graph",
    "true",
    "%percent",
    "@at",
    '");__import__("os").system("echo pwned")#',
    "\x00nul\x7f",
    "emoji😀",
    "-1",
    "1e5",
]


def roundtrip(g: Graph) -> Graph:
    text = msc.to_text(g)
    again = msc.from_text(text)
    assert msc.to_text(again) == text, "print -> parse -> print is not byte-identical"
    msc.assert_structural_equal(g, again, names=True, weights="types")
    return again


@pytest.mark.parametrize("name", sorted(graphs.ALL))
def test_builtin_graphs_roundtrip(name):
    roundtrip(graphs.ALL[name]())


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_any_name_roundtrips(name):
    g = Graph(name)
    x = g.add_input(name, TensorType(DType.FLOAT32, (SymDim(name or "s", 1, None), 2)))
    w = g.add_weight(name, np.ones(2, np.float32))
    n = g.add_node("add", [x, w], name=name, output_names=[name + "!out"])
    n.provenance = msc.Provenance(name, name, name, name)
    g.meta[name or "k"] = name
    g.set_outputs([n.output])
    again = roundtrip(g)
    assert again.inputs[0].name == name
    assert list(again.weights) == [name]
    assert again.nodes[0].name == name
    assert again.nodes[0].provenance.module == name
    assert again.inputs[0].shape[0].name == (name or "s")


def test_positional_names_print_bare():
    g = graphs.two_outputs()
    text = msc.to_text(g)
    assert "%0: f32[2, 2], %1: f32[2, 4] = split(%x)" in text


@pytest.mark.parametrize(
    "value",
    [1e-12, 1e-45, 5e-324, 1.7976931348623157e308, -0.0, 0.1, 1 / 3, math.inf, -math.inf],
)
def test_float_attributes_are_exact(value):
    g = Graph()
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    g.set_outputs([g.op("layer_norm", x, None, None, eps=value)])
    again = roundtrip(g)
    got = again.nodes[0].attrs["eps"]
    assert got == value and math.copysign(1, got) == math.copysign(1, value)


def test_nan_attribute_roundtrips():
    g = Graph()
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    g.set_outputs([g.op("pad", x, pads=[1, 1], value=math.nan)])
    assert math.isnan(roundtrip(g).nodes[0].attrs["value"])


@pytest.mark.parametrize(
    "array",
    [
        np.array(0.5, np.float32),
        np.array([1.5, -2.25, np.inf, -np.inf], np.float64),
        np.array([np.nan, -np.nan], np.float32),  # the sign of a NaN survives
        np.array([[1, -2], [3, 2**62]], np.int64),
        np.array([2**64 - 1], np.uint64),
        np.array([True, False]),
        np.array([1.0, 3.14159, -65504], ml_dtypes.bfloat16),
        np.array([0.5, -448.0], ml_dtypes.float8_e4m3fn),
        np.array([1 + 2j, -3.5j], np.complex64),
        np.array([-8, 7, 0], ml_dtypes.int4),
        np.array([0.5, -6.0], ml_dtypes.float4_e2m1fn),
        np.array([2.0, 0.25], ml_dtypes.float8_e8m0fnu),
        np.arange(200, dtype=np.float16).reshape(10, 20),  # large: base64 form
        np.zeros((0, 3), np.float32),
    ],
    ids=lambda a: f"{a.dtype}{list(a.shape)}",
)
def test_tensor_attributes_are_exact(array):
    g = Graph()
    g.set_outputs([g.op("constant", value=array)])
    got = roundtrip(g).nodes[0].attrs["value"]
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()


def test_types_print_and_parse():
    cases = {
        TensorType(DType.FLOAT32, None): "f32[*]",
        TensorType(DType.INT64, ()): "i64[]",
        TensorType(DType.BFLOAT16, (SymDim("b", 1, 8), None, 3)): "bf16[b{1..8}, ?, 3]",
        TensorType(DType.BOOL, (SymDim("seq len", None, 512),)): 'bool["seq len"{..512}]',
        TensorType(DType.FLOAT8_E5M2, (SymDim("n", 2),)): "f8e5m2[n{2..}]",
    }
    for t, s in cases.items():
        assert msc.text.format_type(t) == s
        g = Graph()
        g.set_outputs([g.add_input("x", t)])
        assert msc.from_text(msc.to_text(g)).inputs[0].type == t


def test_attributes_print_sorted_and_output_is_deterministic():
    a, b = msc.to_text(graphs.mlp()), msc.to_text(graphs.mlp())
    assert a == b
    line = next(ln for ln in msc.to_text(graphs.two_outputs()).splitlines() if "split(" in ln)
    assert line.index("axis =") < line.index("sizes =")


@pytest.mark.parametrize("name", sorted(graphs.ALL))
def test_golden(name, request):
    """The printed form of the small graphs is pinned; update with --update-golden."""
    path = GOLDEN / f"{name}.msc"
    text = msc.to_text(graphs.ALL[name]())
    if request.config.getoption("--update-golden"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run pytest --update-golden and review it"
    assert text == path.read_text(encoding="utf-8")
    msc.assert_structural_equal(
        msc.from_text(text), graphs.ALL[name](), names=True, weights="types"
    )


@pytest.mark.parametrize("name", sorted(graphs.ALL))
def test_files_from_before_versions_still_load(name):
    """Text written before the format had a version line (format 0) reads as the same graph."""
    old = (GOLDEN / "v0" / f"{name}.msc").read_text(encoding="utf-8")
    assert not old.startswith("msc format")
    msc.assert_structural_equal(msc.from_text(old), graphs.ALL[name](), names=True, weights="types")


@pytest.mark.parametrize("name", sorted(graphs.ALL))
def test_files_of_format_1_still_load(name):
    """Text written by format 1 (no module stacks) reads as the same graph."""
    old = (GOLDEN / "v1" / f"{name}.msc").read_text(encoding="utf-8")
    assert old.startswith("msc format 1, ops 1\n")
    g = msc.from_text(old)
    msc.assert_structural_equal(g, graphs.ALL[name](), names=True, weights="types")
    assert all(not n.provenance.stack for n in g.nodes)


def test_module_stacks_round_trip():
    """A node's module stack (path, type) prints compactly (a path under the one before it
    from its "."), and any path or type survives, spaces, ';', '%' and leading dots too."""
    from msc.ir.graph import Provenance

    llama = (("model", "LlamaModel"), ("model.layers.0", "LlamaDecoderLayer"))
    stacks = [
        (*llama, ("model.layers.0.mlp", "LlamaMLP")),
        (("a b;%", ""), (".x", ".T"), (".x.", "%"), ("", "q"), ("z..y", "T"), ("z..y..", "U")),
        (("enc", "T5Stack"), ("shared", "Embedding")),
    ]
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    for st in stacks:
        x = g.op("relu", x)
        x.producer.provenance = Provenance("torch", module=st[-1][0], stack=st)
    x.producer.provenance = Provenance(stack=stacks[-1])  # a stack and nothing else
    g.set_outputs([x])
    text = msc.to_text(g)
    assert text.startswith("msc format 2, ")
    assert 'stack = "model LlamaModel; .layers.0 LlamaDecoderLayer; .mlp LlamaMLP"' in text
    back = msc.from_text(text)
    assert [n.provenance.stack for n in back.nodes] == stacks
    assert msc.to_text(back) == text
    first = 'stack = "model LlamaModel; .layers.0 LlamaDecoderLayer; .mlp LlamaMLP"'
    for bad in ('"x"', '"x T; .y"', '"%zz T"', '".x T"', '"x T;y U"'):
        with pytest.raises(ParseError, match="module stack"):
            msc.from_text(text.replace(first, f"stack = {bad}"))


def test_newer_format_or_op_set_is_refused_by_name():
    body = msc.to_text(graphs.mlp()).split("\n", 1)[1]
    for header in ("msc format 3, ops 1", "msc format 2, ops 9"):
        with pytest.raises(msc.ParseError, match=r"newer msc \(text format \d, op set \d\).*"):
            msc.from_text(header + "\n" + body)


def test_weight_roles_aliases_and_output_structure_round_trip():
    g = graphs.mlp()
    w = next(iter(g.weights.values()))
    w.role, w.aliases = "buffer", ["tied.b", "tied.a"]
    g.output_tree = {"dict": [["y", {"leaf": 0}], [7, {"list": [{"const": None}, {"leaf": 0}]}]]}
    text = msc.to_text(g)
    assert 'aliases = ["tied.a", "tied.b"], role = "buffer"' in text
    assert 'structure dict("y": leaf 0, 7: list(none, leaf 0))' in text
    back = msc.from_text(text)
    msc.assert_structural_equal(back, g, names=True, weights="types")
    assert msc.to_text(back) == text
    # Compared with names: each field is seen to differ.
    for change in (
        lambda h: setattr(next(iter(h.weights.values())), "role", "parameter"),
        lambda h: setattr(next(iter(h.weights.values())), "aliases", ["other"]),
        lambda h: setattr(h, "output_tree", {"tuple": [{"leaf": 0}]}),
    ):
        h = msc.from_text(text)
        change(h)
        assert not msc.structural_equal(h, g, names=True, weights="types")
        assert msc.structural_equal(h, g, weights="types")
        assert msc.structural_hash(h, names=True) != msc.structural_hash(back, names=True)


@pytest.mark.parametrize(
    "line",
    [
        'weight @w: f32[2] {role = "owner"}',
        "weight @w: f32[2] {color = 1}",
        'weight @w: f32[2] {aliases = ["w"]}',
    ],
)
def test_bad_weight_fields_are_parse_errors(line):
    text = f"graph t {{\n  input %x: f32[2]\n  {line}\n  output %x\n}}\n"
    with pytest.raises(msc.ParseError, match="line 3"):
        msc.from_text(text)


def test_output_structure_beyond_the_outputs_is_invalid():
    text = "graph t {\n  input %x: f32[2]\n  output %x\n  structure tuple(leaf 0, leaf 3)\n}\n"
    with pytest.raises(msc.GraphError, match="names output 3"):
        msc.from_text(text).validate()


BAD = [
    ("graph g {\n  input %x f32[2]\n}", 2, "expected ':'"),
    ("graph g {\n  input %x: f33[2]\n  output %x\n}", 2, "expected a dtype"),
    ("graph g {\n  output %nope\n}", 2, "value %nope is not defined"),
    (
        "graph g {\n  input %x: f32[2]\n  %y: f32[2] = frobnicate(%x)\n  output %y\n}",
        3,
        "unknown op 'frobnicate'",
    ),
    (
        "graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu(%x) {alpha = 1.0}\n  output %y\n}",
        3,
        "unknown attribute",
    ),
    (
        "graph g {\n  input %x: f32[2]\n  %y: f32[2] = softmax(%x) {axis = 1.5}\n  output %y\n}",
        3,
        "expected int",
    ),
    ('graph g {\n  input %"x: f32[2]\n}', 2, "unterminated string"),
    ("graph g {\n  input %x: f32[2] ^\n}", 2, "unexpected character"),
    ("graph g {\n  input %x: f32[2]\n  input %x: f32[2]\n}", 3, "defined twice"),
    ("graph g {\n  input %x: f32[2]\n  output %x\n", 4, "expected"),
    ("graph g {\n  input %x: f32[-2]\n}", 2, "a dim must be >= 0"),
    (
        "graph g {\n  %c: f32[2] = constant() {value = tensor(f32[2], [1.0])}\n}",
        2,
        "tensor has 1 elements",
    ),
    ("graph g {\n  input %x: f32[2]\n  output %x\n} trailing", 4, "expected end of input"),
]


@pytest.mark.parametrize("text,line,message", BAD, ids=[b[2] for b in BAD])
def test_parse_errors_give_line_column_and_expectation(text, line, message):
    with pytest.raises(ParseError) as e:
        msc.from_text(text)
    assert e.value.line == line
    assert f"line {line}, column " in str(e.value)
    assert message in str(e.value)


def test_layer_norm_eps_survives():
    """MSC printed floats with six decimals, so a LayerNorm eps of 1e-12 came back as 0."""
    g = Graph()
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 8)))
    g.set_outputs([g.op("layer_norm", x, None, None, eps=1e-12)])
    assert "eps = 1e-12" in msc.to_text(g)
    assert roundtrip(g).nodes[0].attrs["eps"] == 1e-12
