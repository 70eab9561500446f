"""String tensors through ONNX: import (inputs, initializers, Constant, Equal, text ops kept as
custom nodes), codegen.onnx writing them back (STRING, string_data), onnxruntime agreeing with
the original, and the codegens without string tensors refusing them by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the regenerated models")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import codegen.onnx as conx  # noqa: E402
import msc  # noqa: E402
from msc import DType  # noqa: E402
from msc.errors import (  # noqa: E402
    BadModelError,
    NonNumericValuesError,
    UnsupportedOpsError,
)

# Text a model may carry: code, quotes, escapes, control characters, non-ASCII, empty.
HOSTILE = ['");__import__("os").system("echo pwned")#', "", "new\nline", "\x00q\"'", "名前😀"]


def _model(nodes, inputs, outputs, inits=(), opset=20, extra=()) -> onnx.ModelProto:
    g = h.make_graph(nodes, "strings", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset), *extra])
    onnx.checker.check_model(m, full_check=True)
    return m


def _run(m, feeds) -> list:
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _same(got, want) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tolist() == b.tolist()


def _text_model() -> onnx.ModelProto:
    """A string input, a string initializer, a Constant string, Equal on strings, and a
    StringConcat (no canonical op: kept with custom_ops="keep")."""
    vocab = h.make_tensor("vocab", T.STRING, [5], [s.encode() for s in HOSTILE])
    const = h.make_tensor("cv", T.STRING, [1], ["\u00e9".encode()])
    nodes = [
        h.make_node("Constant", [], ["c"], value=const),
        h.make_node("Equal", ["x", "vocab"], ["hit"]),
        h.make_node("StringConcat", ["x", "c"], ["joined"]),
    ]
    return _model(
        nodes,
        [h.make_tensor_value_info("x", T.STRING, [5])],
        [
            h.make_tensor_value_info("hit", T.BOOL, [5]),
            h.make_tensor_value_info("joined", T.STRING, [5]),
        ],
        [vocab],
    )


def _feeds() -> dict:
    x = np.empty(5, object)
    x[:] = [HOSTILE[0], "a", "new\nline", "b", "名前😀"]
    return {"x": x}


def test_strings_import_and_regenerate_exactly():
    m = _text_model()
    with pytest.raises(UnsupportedOpsError, match="StringConcat"):
        msc.from_onnx(m)  # a text op has no canonical op: reported unless kept
    g = msc.from_onnx(m, custom_ops="keep")
    assert g.inputs[0].type.dtype is DType.STRING
    vocab = g.weights["vocab"].numpy()
    assert vocab.dtype == object and vocab.tolist() == HOSTILE
    assert {n.op for n in g.nodes} >= {"eq", "ai.onnx::StringConcat@20"}
    text = msc.to_text(g)
    assert msc.to_text(msc.from_text(text)) == text  # the text format holds it all
    out = conx.to_model(g)
    onnx.checker.check_model(out, full_check=True)
    (init,) = out.graph.initializer
    assert init.data_type == T.STRING and list(init.string_data) == [s.encode() for s in HOSTILE]
    assert not init.HasField("raw_data")
    _same(_run(out, _feeds()), _run(m, _feeds()))
    assert msc.structural_equal(g, msc.from_onnx(out, custom_ops="keep"))


def test_equal_on_strings_is_canonical_eq():
    m = _model(
        [h.make_node("Equal", ["x", "y"], ["z"])],
        [h.make_tensor_value_info(n, T.STRING, [2, 1]) for n in "xy"],
        [h.make_tensor_value_info("z", T.BOOL, [2, 1])],
        opset=19,
    )
    g = msc.from_onnx(m)  # no custom op: eq is elementwise equality, whatever the dtype
    assert [n.op for n in g.nodes] == ["eq"]
    x = np.array([["a"], ["b"]], object)
    y = np.array([["a"], ["c"]], object)
    _same(_run(conx.to_model(g), {"x": x, "y": y}), _run(m, {"x": x, "y": y}))


def test_canonical_ops_carry_strings():
    """Constant value_strings / value_string, Cast to and from STRING, Concat and Reshape on
    str tensors import as canonical ops and regenerate to what onnxruntime computes."""
    nodes = [
        h.make_node("Constant", [], ["c"], value_strings=HOSTILE[:2]),
        h.make_node("Constant", [], ["one"], value_string=HOSTILE[4]),
        h.make_node("Cast", ["f"], ["fs"], to=T.STRING),
        h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
        h.make_node("Concat", ["c", "fs"], ["cat"], axis=0),
        h.make_node("Reshape", ["cat", "shape"], ["r"]),
        h.make_node("Equal", ["r", "one"], ["hit"]),
    ]
    m = _model(
        nodes,
        [h.make_tensor_value_info("f", T.FLOAT, [2]), h.make_tensor_value_info("s", T.STRING, [2])],
        [
            h.make_tensor_value_info("r", T.STRING, [2, 2]),
            h.make_tensor_value_info("sf", T.FLOAT, [2]),
            h.make_tensor_value_info("hit", T.BOOL, [2, 2]),
        ],
        [h.make_tensor("shape", T.INT64, [2], [2, 2])],
    )
    g = msc.from_onnx(m)
    assert {n.op for n in g.nodes} >= {"cast", "concat", "reshape", "eq", "constant"}
    feeds = {"f": np.array([1.5, -2], np.float32), "s": np.array(["3.25", "-1e3"], object)}
    _same(_run(conx.to_model(g), feeds), _run(m, feeds))


def test_text_attributes_survive_a_kept_node():
    """LabelEncoder's string keys (a list and a tensor attribute) travel as data."""
    keys = h.make_tensor("keys", T.STRING, [3], [s.encode() for s in HOSTILE[:3]])
    vals = h.make_tensor("vals", T.INT64, [3], [1, 2, 3])
    node = h.make_node(
        "LabelEncoder",
        ["x"],
        ["y"],
        domain="ai.onnx.ml",
        keys_tensor=keys,
        values_tensor=vals,
        default_int64=-1,
    )
    m = _model(
        [node],
        [h.make_tensor_value_info("x", T.STRING, [4])],
        [h.make_tensor_value_info("y", T.INT64, [4])],
        extra=[h.make_opsetid("ai.onnx.ml", 4)],
    )
    g = msc.from_onnx(m, custom_ops="keep")
    attr = g.nodes[0].attrs["keys_tensor"]
    assert attr.dtype == object and attr.tolist() == HOSTILE[:3]
    out = conx.to_model(g)
    x = np.array([HOSTILE[0], "z", HOSTILE[2], ""], object)
    _same(_run(out, {"x": x}), _run(m, {"x": x}))
    assert _run(out, {"x": x})[0].tolist() == [1, -1, 3, 2]


def _short() -> onnx.TensorProto:
    t = h.make_tensor("bad", T.STRING, [1], [b"a"])
    t.dims[0] = 2
    return t


def _raw() -> onnx.TensorProto:
    t = h.make_tensor("bad", T.STRING, [1], [b"a"])
    t.ClearField("string_data")
    t.raw_data = b"a"
    return t


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: h.make_tensor("bad", T.STRING, [1], [b"\xff\xfe"]), "string 0 is not UTF-8"),
        (_short, "1 strings, STRING\\[2\\] needs 2"),
        (_raw, "a STRING tensor keeps its data in string_data"),
    ],
)
def test_bad_string_initializers_are_named(make, error):
    tensor = make()
    m = h.make_model(
        h.make_graph(
            [h.make_node("Identity", ["bad"], ["y"])],
            "g",
            [],
            [h.make_tensor_value_info("y", T.STRING, None)],
            [tensor],
        ),
        opset_imports=[h.make_opsetid("", 20)],
    )
    with pytest.raises(BadModelError, match=f"tensor 'bad': {error}"):
        msc.from_onnx(m)


def _attr_model(node: onnx.NodeProto, opset: int = 20, *, branch: bool = False):
    """x: f32[2, 3] -> node -> y (inside an If's then-branch when ``branch``)."""
    pads = h.make_tensor("pads", T.INT64, [4], [0, 0, 0, 0])
    ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 3])]
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    nodes = [node]
    if branch:
        then = h.make_graph([node], "then", [], [y])
        other = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "else", [], [y])
        ins.append(h.make_tensor_value_info("c", T.BOOL, []))
        nodes = [h.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other)]
        y = h.make_tensor_value_info("out", T.FLOAT, [2, 3])
    g = h.make_graph(nodes, "g", ins, [y], [pads])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset), h.make_opsetid("my", 1)])


BAD_TEXT_ATTRS = {
    # an op msc converts: decoded with replacement, the mode would have been reported as an
    # unknown pad mode (or, spelt validly around the byte, taken as something else)
    "converted": (
        lambda: _attr_model(h.make_node("Pad", ["x", "pads"], ["y"], name="p", mode=b"e\xffdge")),
        "node 'p' (Pad): attribute 'mode' is not UTF-8 text (invalid start byte at byte 1)",
    ),
    # a custom op kept as it came: the list would have been kept with U+FFFD in it
    "kept": (
        lambda: _attr_model(
            h.make_node("Foo", ["x"], ["y"], name="f", domain="my", tags=[b"ok", b"\xc3"])
        ),
        "node 'f' (my::Foo): attribute 'tags' is not UTF-8 text (string 1: unexpected end",
    ),
    # an op older than its converters, kept with custom_ops="keep"; unnamed
    "unnamed": (
        lambda: _attr_model(h.make_node("Gelu", ["x"], ["y"], approximate=b"\xfftanh"), 18),
        "the unnamed Gelu node giving 'y': attribute 'approximate' is not UTF-8",
    ),
    "tensor attribute": (
        lambda: _attr_model(
            h.make_node(
                "Foo",
                ["x"],
                ["y"],
                name="f",
                domain="my",
                keys=h.make_tensor("", T.STRING, [2], [b"a", b"\x80"]),
            )
        ),  # fmt: skip
        "node 'f' (my::Foo): attribute 'keys' is not UTF-8 text (string 1: invalid start byte",
    ),
    "in a branch": (
        lambda: _attr_model(
            h.make_node("Pad", ["x", "pads"], ["y"], name="inner", mode=b"\xff"), branch=True
        ),
        "node 'inner' (Pad): attribute 'mode' is not UTF-8",
    ),
    # an op ONNX defines and msc keeps (no canonical op): its schema says text
    "ONNX's own op": (
        lambda: _attr_model(
            h.make_node("StringNormalizer", ["x"], ["y"], name="s", locale=b"\xff")
        ),
        "node 's' (StringNormalizer): attribute 'locale' is not UTF-8",
    ),
    # an op of another domain that msc converts: its canonical op takes text
    "converted custom domain": (
        lambda: _attr_model(
            h.make_node("FastGelu", ["x"], ["y"], name="g", domain="com.microsoft", note=b"\xff")
        ),
        "node 'g' (com.microsoft::FastGelu): attribute 'note' is not UTF-8",
    ),
}


@pytest.mark.parametrize("custom_ops", ["error", "keep"])
@pytest.mark.parametrize("case", sorted(BAD_TEXT_ATTRS))
def test_non_utf8_text_attributes_are_a_bad_model(case, custom_ops):
    """A string attribute that is not UTF-8 breaks ONNX's rule: refused at once as a bad
    model naming node, op and attribute, whether the node is converted or kept (not
    collected as an unsupported op, not kept with replacement characters). Only a lone
    string of an op no schema describes may be binary (test_binary_string_..._as_bytes)."""
    make, message = BAD_TEXT_ATTRS[case]
    with pytest.raises(BadModelError) as e:
        msc.from_onnx(make(), custom_ops=custom_ops)
    assert message in str(e.value) and "ONNX strings are UTF-8" in str(e.value)
    assert not isinstance(e.value, UnsupportedOpsError)


def test_cli_names_a_non_utf8_attribute_without_a_traceback(tmp_path):
    from tests.security import run_cli

    path = tmp_path / "bad.onnx"
    onnx.save(BAD_TEXT_ATTRS["kept"][0](), path)
    code, _, err = run_cli("inspect", str(path), "--custom-ops", "keep")
    assert code == 2 and "Traceback" not in err
    assert err.startswith("msc: error: node 'f' (my::Foo): attribute 'tags' is not UTF-8")


def test_valid_text_attributes_still_import():
    """The check passes UTF-8 text as it is, non-ASCII included."""
    m = _attr_model(h.make_node("Foo", ["x"], ["y"], name="f", domain="my", tag="名前😀"))
    (node,) = msc.from_onnx(m, custom_ops="keep").nodes
    assert node.attrs["tag"] == "名前😀"


# Bytes onnxruntime's EPContext may hold: NUL, 0xFF, a truncated sequence, an encoded
# surrogate, an overlong "/", every byte value.
BLOB = b"\x00\xff\xc3(\xed\xa0\x80\xc0\xaf" + bytes(range(256))


def _ep_context(branch: bool = False) -> onnx.ModelProto:
    """An EPContext-like com.microsoft node (embed_mode=1: the compiled blob inside the
    ``ep_cache_context`` string), a text attribute beside it, in a branch when ``branch``."""
    node = h.make_node(
        "EPContext",
        ["x"],
        ["y"],
        name="ep",
        domain="com.microsoft",
        embed_mode=1,
        ep_cache_context=BLOB,
        source="名前",
    )
    m = _attr_model(node, branch=branch)
    m.opset_import.append(h.make_opsetid("com.microsoft", 1))
    return m


@pytest.mark.parametrize("branch", [False, True], ids=["top", "in a branch"])
def test_binary_string_of_a_custom_node_is_kept_as_bytes(branch):
    """A lone non-UTF-8 string of an op no schema describes is binary data: kept as bytes,
    written back by codegen.onnx byte for byte, and read again into an equal graph; UTF-8
    strings stay text."""
    m = _ep_context(branch)
    g = msc.from_onnx(m, custom_ops="keep")
    (node,) = [n for n in _msc_nodes(g) if n.op.startswith("com.microsoft::")]
    assert node.attrs["ep_cache_context"] == BLOB and type(node.attrs["ep_cache_context"]) is bytes
    assert node.attrs["source"] == "名前" and node.attrs["embed_mode"] == 1
    text = msc.to_text(g)
    assert msc.to_text(msc.from_text(text)) == text
    msc.assert_structural_equal(g, msc.from_text(text))
    out = conx.to_model(g)
    onnx.checker.check_model(out)
    (ep,) = [n for n in _onnx_nodes(out.graph) if n.op_type == "EPContext"]
    attrs = {a.name: a for a in ep.attribute}
    assert attrs["ep_cache_context"].type == onnx.AttributeProto.STRING
    assert attrs["ep_cache_context"].s == BLOB  # exactly the bytes that came in
    assert attrs["source"].s == "名前".encode()
    again = msc.from_onnx(out, custom_ops="keep")
    msc.assert_structural_equal(g, again)
    assert msc.structural_hash(g) == msc.structural_hash(again)


def _msc_nodes(g: msc.Graph):
    for n in g.nodes:
        yield n
        for sub in n.subgraphs():
            yield from _msc_nodes(sub)


def _onnx_nodes(g: onnx.GraphProto):
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _onnx_nodes(a.g)


def test_cli_converts_an_ep_context_model_keeping_the_blob(tmp_path):
    from tests.security import run_cli

    src, dst = tmp_path / "ep.onnx", tmp_path / "out.onnx"
    onnx.save(_ep_context(), src)
    # --no-check: no session runs an EPContext node without the execution provider it names
    args = ["convert", str(src), "-o", str(dst), "--custom-ops", "keep", "--no-check"]
    code, _, err = run_cli(*args)
    assert code == 0, err
    (ep,) = [n for n in onnx.load(dst).graph.node if n.op_type == "EPContext"]
    assert {a.name: a.s for a in ep.attribute}["ep_cache_context"] == BLOB


def test_binary_string_of_an_unkept_custom_node_is_just_unsupported():
    """Without custom_ops="keep" the node is reported like any op msc lacks (the model is
    not malformed: no schema says the string is text)."""
    with pytest.raises(UnsupportedOpsError, match="EPContext") as e:
        msc.from_onnx(_ep_context())
    assert not isinstance(e.value, BadModelError)


def test_torch_codegen_refuses_every_string_value():
    ct = pytest.importorskip("codegen.torch")
    g = msc.from_onnx(_text_model(), custom_ops="keep")
    with pytest.raises(NonNumericValuesError, match="codegen.torch holds numeric tensors") as e:
        ct.generate(g)
    msg = str(e.value)
    assert "graph 'strings' has 5 value(s) it cannot hold" in msg
    for what in ("input %x: str[5]", "weight @vocab: str[5]", "%c: str[1] (output of",
                 "%joined: str[5] (output of"):  # fmt: skip
        assert what in msg
    assert "pwned" not in msg  # values are not echoed, only where they are


def test_relax_codegen_refuses_string_values():
    pytest.importorskip("tvm")
    import codegen.relax as cr

    g = msc.from_onnx(_text_model(), custom_ops="keep")
    with pytest.raises(NonNumericValuesError, match="codegen.relax holds(.|\n)*input %x: str"):
        cr.to_module(g)


def test_backend_string_cases_pass_the_round_trip():
    """Every backend case with string tensors that onnxruntime passes on the original passes
    ONNX -> msc -> ONNX in onnxruntime (imported as is, or with custom_ops="keep")."""
    import tests.onnx_cases as oc
    from tests.codegen.test_codegen_onnx_roundtrip import _ort_original
    from tests.frontend.test_onnx_conformance import ort_feeds

    def has_strings(m) -> bool:
        vis = list(m.graph.input) + list(m.graph.output)
        return any(v.type.tensor_type.elem_type == T.STRING for v in vis)

    passed, failed = [], []
    for c in oc.backend_cases():
        if not has_strings(c.model):
            continue
        want, ort_ok = _ort_original(c)
        if not ort_ok:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                g = msc.from_onnx(c.model)
            except UnsupportedOpsError:
                g = msc.from_onnx(c.model, custom_ops="keep")
        got = _run(conx.to_model(g), ort_feeds(c))
        ok = len(got) == len(want) and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            for a, b in zip(got, want)
        )
        (passed if ok else failed).append(c.name)
    assert not failed, failed
    # 4 LabelEncoder, 2 Equal, 3 RegexFullMatch with the onnx this was written against
    assert len(passed) >= 9, passed


@pytest.mark.parametrize("to, out", [("msc", "out"), ("onnx", "out.onnx")])
def test_convert_checks_string_models_through_onnxruntime(tmp_path, to, out):
    """msc convert re-imports the output and runs both on random str inputs (onnxruntime runs
    graphs with strings, as torch cannot); a torch target is refused by name."""
    src = tmp_path / "text.onnx"
    onnx.save(_text_model(), src)
    report = msc.convert(src, tmp_path / out, to=to, custom_ops="keep")
    assert report.ok and report.checked and report.equivalent
    assert [c.shape for c in report.numeric.outputs] == ["bool[5]", "str[5]"]
    if to == "msc":
        assert "strings.json" in {p.name for p in (tmp_path / out).iterdir()}
    with pytest.raises(NonNumericValuesError, match="codegen.torch holds numeric tensors only"):
        msc.convert(src, tmp_path / "torch_out", to="torch", custom_ops="keep")
    assert not (tmp_path / "torch_out").exists()


def test_hostile_text_stays_data_in_every_output(tmp_path):
    """Text from a model is data in the ONNX it regenerates, the saved graph and the HTML
    view: never markup, never code."""
    evil = '</script><script>alert("x")</script>'
    vocab = h.make_tensor("vocab", T.STRING, [2], [evil.encode(), HOSTILE[0].encode()])
    m = _model(
        [
            h.make_node("Constant", [], ["c"], value_strings=[evil]),
            h.make_node("Equal", ["x", "vocab"], ["hit"]),
            h.make_node("Equal", ["x", "c"], ["hit2"]),
        ],
        [h.make_tensor_value_info("x", T.STRING, [2])],
        [h.make_tensor_value_info(n, T.BOOL, [2]) for n in ("hit", "hit2")],
        [vocab],
    )
    g = msc.from_onnx(m)
    page = msc.render(g, tmp_path / "g.html").read_text()
    assert "alert" in page and "<script>alert" not in page  # shown, as text
    saved = msc.save(g, tmp_path / "saved")
    assert msc.load(saved).weights["vocab"].numpy().tolist() == [evil, HOSTILE[0]]
    (init,) = conx.to_model(g).graph.initializer
    assert list(init.string_data) == [evil.encode(), HOSTILE[0].encode()]
