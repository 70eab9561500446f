"""ONNX models with sequence and optional values: ONNX -> msc (custom_ops="keep") -> ONNX.

Every ONNX backend node case over sequences or optionals imports with its sequence/optional
ops kept as custom nodes (a Loop or If carrying one kept whole, its body imported), the
regenerated model declares the same sequence_type / optional_type values, re-imports
structurally equal, and agrees with onnxruntime on the original (or with onnx's reference
evaluator on it where onnxruntime does not run the original), tolerance max(case's, 1e-5).
"""

from __future__ import annotations

import warnings

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime", reason="onnxruntime runs the regenerated models")

import codegen.onnx as conx  # noqa: E402
import msc  # noqa: E402
from msc import OptionalType, SequenceType  # noqa: E402

# Backend cases whose values include sequences or optionals (inputs, outputs or inside).
CASES = [
    "test_identity_sequence",
    "test_identity_opt",
    "test_if_seq",
    "test_if_opt",
    "test_loop13_seq",
    "test_loop16_seq_none",
    "test_optional_get_element_optional_sequence",
    "test_optional_get_element_optional_tensor",
    "test_optional_get_element_sequence",
    "test_optional_get_element_tensor",
    "test_optional_has_element_empty_no_input_name_optional_input",
    "test_optional_has_element_empty_no_input_name_tensor_input",
    "test_optional_has_element_empty_no_input_optional_input",
    "test_optional_has_element_empty_no_input_tensor_input",
    "test_optional_has_element_empty_optional_input",
    "test_optional_has_element_optional_input",
    "test_optional_has_element_tensor_input",
    "test_sequence_insert_at_back",
    "test_sequence_insert_at_front",
    "test_sequence_map_add_1_sequence_1_tensor",
    "test_sequence_map_add_1_sequence_1_tensor_expanded",
    "test_sequence_map_add_2_sequences",
    "test_sequence_map_add_2_sequences_expanded",
    "test_sequence_map_extract_shapes",
    "test_sequence_map_extract_shapes_expanded",
    "test_sequence_map_identity_1_sequence",
    "test_sequence_map_identity_1_sequence_1_tensor",
    "test_sequence_map_identity_1_sequence_1_tensor_expanded",
    "test_sequence_map_identity_1_sequence_expanded",
    "test_sequence_map_identity_2_sequences",
    "test_sequence_map_identity_2_sequences_expanded",
    "test_split_to_sequence_1",
    "test_split_to_sequence_2",
    "test_split_to_sequence_nokeepdims",
]


@pytest.fixture(scope="module")
def cases():
    import tests.onnx_cases as oc

    return {c.name: c for c in oc.backend_cases()}


def _kinds(g) -> list[str]:
    """The type kind of every value a graph and its subgraphs declare, in order."""
    out = []
    for vi in [*g.input, *g.output, *g.value_info]:
        out.append(vi.type.WhichOneof("value"))
    for n in g.node:
        for a in n.attribute:
            for sub in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                out += _kinds(sub)
    return out


def test_the_table_is_every_sequence_or_optional_case(cases) -> None:
    """A backend case with a sequence or optional value anywhere is in CASES, and back."""
    have = {
        name
        for name, c in cases.items()
        if {"sequence_type", "optional_type"} & set(_kinds(c.model.graph))
        or any(op.startswith(("Sequence", "Optional")) for op in c.op_types)
        or "SplitToSequence" in c.op_types
    }
    assert have == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_sequence_case_round_trips_through_onnx(cases, name: str) -> None:
    from tests.codegen.test_codegen_onnx_roundtrip import _gaps, _kept_case, _ort_original

    c = cases[name]
    want, _ = _ort_original(c)
    outcome, detail = _kept_case(c, want, _gaps(conx.default_opset()))
    assert outcome == "pass", detail
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = msc.from_onnx(c.model, custom_ops="keep")
    m = conx.to_model(g)
    # the boundary's sequence/optional types are written back as such
    assert [vi.type.WhichOneof("value") for vi in [*m.graph.input, *m.graph.output]] == [
        vi.type.WhichOneof("value") for vi in [*c.model.graph.input, *c.model.graph.output]
    ]
    # and the graph holds them as SequenceType / OptionalType, printed and parsed back
    text = msc.to_text(g)
    assert msc.structural_equal(msc.from_text(text), g, names=True)
    if {"sequence_type", "optional_type"} & set(_kinds(c.model.graph)):
        assert any(isinstance(v.type, SequenceType | OptionalType) for sg in _all(g) for v in sg)


def _all(g):
    yield list(g.values())
    for n in g.nodes:
        for sub in n.subgraphs():
            yield from _all(sub)


def test_without_keep_the_ops_are_reported_not_the_types(cases) -> None:
    """The default import names the sequence ops msc has no converter for; sequence and
    optional inputs themselves import."""
    with pytest.raises(msc.errors.UnsupportedOpsError) as e:
        msc.from_onnx(cases["test_sequence_map_add_1_sequence_1_tensor_expanded"].model)
    msg = str(e.value)
    assert "SequenceLength" in msg and "SequenceEmpty" in msg and "graph input" not in msg
    with pytest.raises(msc.errors.UnsupportedOpsError, match="Identity: input 'x'"):
        msc.from_onnx(cases["test_identity_sequence"].model)
