"""The BYTES attribute kind: binary data (an ONNX custom node's non-UTF-8 string, such as
onnxruntime's EPContext blob) kept byte for byte through normalize, text, save/load, equality
and hashing, never confused with text and refused by canonical ops' schemas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msc
from msc import DType, Graph, Node, ParseError, TensorType
from msc.ir.attrs import AttrKind, attr_equal, infer_kind, normalize
from msc.ops.custom import custom_op
from msc.ops.schema import OpError

# Every byte, NUL, a lone 0xFF, a truncated sequence, an encoded surrogate, an overlong "/".
BLOB = bytes(range(256)) + b"\x00\xff\xc3\xed\xa0\x80\xc0\xaf"
BLOBS = [b"", b"\x00", b"\xff", b"a", b'"\\', b"\xc3(", BLOB, BLOB * 40]


def _graph(value, meta=None) -> Graph:
    """x -> a custom node whose ``ep_cache_context`` attribute is ``value``."""
    g = Graph("ep")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    n = Node(
        custom_op("com.microsoft", "EPContext", 1),
        [x],
        {"ep_cache_context": value, "embed_mode": 1, "source": "QNN"},
        output_types=[TensorType(DType.FLOAT32, (2, 3))],
        name="ep",
    )
    g.add_node(n)
    if meta is not None:
        g.meta["blob"] = meta
    g.set_outputs([n.outputs[0]])
    return g


def test_bytes_kind_normalizes_and_compares_apart_from_text():
    assert infer_kind(b"\xff") is AttrKind.BYTES and AttrKind.BYTES.value == "bytes"
    assert infer_kind(bytearray(b"a")) is AttrKind.BYTES
    got = normalize(AttrKind.BYTES, bytearray(b"\x00\xff"))
    assert type(got) is bytes and got == b"\x00\xff"
    assert type(normalize(AttrKind.BYTES, np.bytes_(b"a"))) is bytes  # exactly bytes
    with pytest.raises(TypeError, match="expected bytes, got str"):
        normalize(AttrKind.BYTES, "a")
    with pytest.raises(TypeError, match="expected str, got bytes"):
        normalize(AttrKind.STR, b"a")
    with pytest.raises(TypeError, match=r"got bytes b'\\x00.{60,80}\.\.\.$"):  # cut short
        normalize(AttrKind.STR, BLOB)
    assert attr_equal(b"a", b"a") and not attr_equal(b"a", "a") and not attr_equal(b"a", b"b")
    with pytest.raises(TypeError, match="expected a list"):
        normalize(AttrKind.STRS, b"ab")  # bytes are not a list of anything


def test_canonical_ops_refuse_bytes_for_their_text_attributes():
    g = Graph()
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    with pytest.raises(OpError, match="expected str, got bytes"):
        g.op("pad", x, pads=[0, 0, 0, 0], mode=b"constant")


@pytest.mark.parametrize("blob", BLOBS, ids=lambda b: f"{len(b)}B")
def test_bytes_print_parse_exactly(blob):
    g = _graph(blob)
    text = msc.to_text(g)
    assert 'ep_cache_context = bytes(b64 "' in text and "\\x" not in text
    again = msc.from_text(text)
    assert msc.to_text(again) == text
    got = again.nodes[0].attrs["ep_cache_context"]
    assert type(got) is bytes and got == blob
    assert again.nodes[0].attrs["source"] == "QNN"  # text stays text
    msc.assert_structural_equal(g, again, names=True)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_roundtrip_through_text(blob):
    again = msc.from_text(msc.to_text(_graph(blob, meta=blob)))
    assert again.nodes[0].attrs["ep_cache_context"] == blob
    assert again.meta["blob"] == blob and type(again.meta["blob"]) is bytes


@pytest.mark.parametrize(
    "spelling, message",
    [
        ('bytes(b64 "AP8")', "not base64 data"),  # missing padding
        ('bytes(b64 "AP8=!")', "not base64 data"),  # not the alphabet
        ('bytes(b64 "AP9=")', "not spelt as msc writes it"),  # same bytes, stray low bits
        ('bytes(b64 "A P8=")', "not base64 data"),
        ('bytes(b64 "é")', "not base64 data"),
        ('bytes("AP8=")', "expected 'b64'"),
        ('bytes(b64 "AP8="', "expected ')'"),
        ('bytes b64 "AP8="', "expected '('"),
        ('b"\\xff"', "expected a value"),  # no Python literals: never evaluated
        ('bytes(b64 "AP8=") + 1', "expected"),
    ],
)
def test_bad_bytes_spellings_are_parse_errors(spelling, message):
    text = msc.to_text(_graph(b"\x00\xff")).replace('bytes(b64 "AP8=")', spelling)
    assert spelling in text
    with pytest.raises(ParseError) as e:
        msc.from_text(text)
    assert e.value.line == 4 and message in str(e.value)


def test_a_value_named_bytes_is_quoted():
    g = Graph("bytes")
    x = g.add_input("bytes", TensorType(DType.FLOAT32, (2,)))
    g.set_outputs([g.op("relu", x)])
    text = msc.to_text(g)
    assert 'input %"bytes"' in text and 'graph "bytes"' in text
    assert msc.from_text(text).inputs[0].name == "bytes"


def test_save_load_keeps_bytes(tmp_path):
    g = _graph(BLOB * 40, meta=b"\xff\x00")
    msc.save(g, tmp_path / "m")
    again = msc.load(tmp_path / "m")
    assert again.nodes[0].attrs["ep_cache_context"] == BLOB * 40
    assert again.meta["blob"] == b"\xff\x00"
    msc.assert_structural_equal(g, again, names=True)
    assert msc.structural_hash(g, names=True) == msc.structural_hash(again, names=True)


def test_equality_and_hash_tell_bytes_from_text():
    as_bytes, as_text = _graph(b"a"), _graph("a")
    assert not msc.structural_equal(as_bytes, as_text)
    assert msc.structural_hash(as_bytes) != msc.structural_hash(as_text)
    one, other = _graph(BLOB), _graph(BLOB[:-1] + b"\x00")
    r = msc.structural_equal(one, other)
    assert not r and "bytes, blake2b" in r.diff  # a blob is summarised, not printed whole
    assert msc.structural_hash(one) != msc.structural_hash(other)
    assert msc.structural_hash(_graph(BLOB)) == msc.structural_hash(one)


def test_graph_view_summarises_a_blob():
    from msc.analysis.graphview import attr_rows

    rows = {k: (kind, text) for k, kind, text in attr_rows(_graph(BLOB).nodes[0])}
    assert rows["ep_cache_context"] == ("bytes", f"<{len(BLOB)} bytes>")
    rows = {k: (kind, text) for k, kind, text in attr_rows(_graph(b"\x01").nodes[0])}
    assert rows["ep_cache_context"] == ("bytes", 'bytes(b64 "AQ==")')
