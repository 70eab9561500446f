"""``verify`` on models whose inputs and outputs are sequences, optionals and str tensors:
random inputs of those kinds, .npz inputs for them, feeding onnxruntime, and element-wise
comparison of sequence / optional outputs. The reference for every run is onnxruntime on the
original ONNX model; B is what codegen.onnx wrote back (or the msc graph itself)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime", reason="verify runs ONNX models with onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import codegen.onnx as conx  # noqa: E402
import msc  # noqa: E402
from msc.analysis.model import Model, load_model  # noqa: E402
from msc.analysis.verify import (  # noqa: E402
    SEQUENCE_LENGTH,
    compare,
    format_verify,
    load_inputs,
    make_inputs,
    verify_models,
)
from msc.errors import MscError  # noqa: E402
from tests.analysis.test_cli import run  # noqa: E402


def _opt(elem_type: int, shape: list) -> onnx.TypeProto:
    return h.make_optional_type_proto(h.make_tensor_type_proto(elem_type, shape))


def _model(path, *, neg: bool = False, twice: bool = False, drop_optional: bool = False):
    """xs: seq<f32[N, 3]>, t: f32[N, 3], o: opt<f32[2]>, p: opt<seq<i64[3]>>, s: str[2].
    ``neg`` negates t before it joins the sequence, ``twice`` inserts it twice,
    ``drop_optional`` gives an empty optional for o2 whatever o holds (the variants B
    differs by)."""
    inputs = [
        h.make_tensor_sequence_value_info("xs", T.FLOAT, ["N", 3]),
        h.make_tensor_value_info("t", T.FLOAT, ["N", 3]),
        h.make_value_info("o", _opt(T.FLOAT, [2])),
        h.make_value_info(
            "p", h.make_optional_type_proto(h.make_sequence_type_proto(
                h.make_tensor_type_proto(T.INT64, [3])))),
        h.make_tensor_value_info("s", T.STRING, [2]),
    ]  # fmt: skip
    nodes = [
        h.make_node("Neg" if neg else "Identity", ["t"], ["t2"], name="t2"),
        h.make_node("SequenceInsert", ["xs", "t2"], ["ys"], name="insert"),
    ]
    if twice:
        nodes[-1].output[0] = "ys0"
        nodes.append(h.make_node("SequenceInsert", ["ys0", "t2"], ["ys"], name="insert2"))
    nodes += [
        h.make_node("SequenceLength", ["ys"], ["n"], name="length"),
        h.make_node("ConcatFromSequence", ["ys"], ["cat"], axis=0, name="concat"),
        h.make_node("OptionalHasElement", ["o"], ["has"], name="has"),
        h.make_node("OptionalHasElement", ["p"], ["has_p"], name="has_p"),
        h.make_node("Optional", [], ["o2"], type=h.make_tensor_type_proto(T.FLOAT, [2]))
        if drop_optional
        else h.make_node("Identity", ["o"], ["o2"], name="o2"),
        h.make_node("Identity", ["s"], ["s2"], name="s2"),
    ]
    outputs = [
        h.make_tensor_value_info("n", T.INT64, []),
        h.make_tensor_value_info("cat", T.FLOAT, [None, 3]),
        h.make_tensor_sequence_value_info("ys", T.FLOAT, ["N", 3]),
        h.make_tensor_value_info("has", T.BOOL, []),
        h.make_tensor_value_info("has_p", T.BOOL, []),
        h.make_value_info("o2", _opt(T.FLOAT, [2])),
        h.make_tensor_value_info("s2", T.STRING, [2]),
    ]
    m = h.make_model(
        h.make_graph(nodes, "values", inputs, outputs), opset_imports=[h.make_opsetid("", 18)]
    )
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return path


@pytest.fixture
def models(tmp_path):
    a = _model(tmp_path / "a.onnx")
    back = tmp_path / "back.onnx"
    conx.save(msc.from_onnx(a, custom_ops="keep"), back)
    return {"a": a, "back": back, "dir": tmp_path}


def _keep(path) -> Model:
    return load_model(path, custom_ops="keep")


def test_random_inputs_follow_the_stated_rules(models) -> None:
    g = _keep(models["a"]).graph
    feeds = make_inputs(g, 0, {"N": 4})
    xs = feeds["xs"]
    assert isinstance(xs, list) and len(xs) == SEQUENCE_LENGTH
    assert all(x.dtype == np.float32 and x.shape == (4, 3) for x in xs)  # N bound, 3 kept
    assert feeds["t"].shape == (4, 3)
    assert feeds["o"].dtype == np.float32 and feeds["o"].shape == (2,)  # seed 0: all present
    assert [p.dtype for p in feeds["p"]] == [np.int64] * SEQUENCE_LENGTH
    assert feeds["s"].dtype == object and all(isinstance(w, str) for w in feeds["s"])
    # bit i of the seed empties the i-th optional input (o is the first, p the second)
    present = {seed: [make_inputs(g, seed)[k] is not None for k in "op"] for seed in range(4)}
    assert present == {0: [True, True], 1: [False, True], 2: [True, False], 3: [False, False]}
    # with k = 2 optionals, bit 2 + j empties the j-th sequence (xs, then the one in p)
    lengths = {seed: [len(make_inputs(g, seed)[k]) for k in ("xs", "p")] for seed in (0, 4, 8)}
    assert lengths == {0: [3, 3], 4: [0, 3], 8: [3, 0]}
    again = make_inputs(g, 5)
    assert all(np.array_equal(x, y) for x, y in zip(make_inputs(g, 5)["xs"], again["xs"]))


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 8])
def test_verify_original_against_codegen_onnx(models, seed) -> None:
    r = verify_models(_keep(models["a"]), _keep(models["back"]), seed=seed)
    assert r.ok, format_verify(r)
    got = {o.name: o.shape for o in r.outputs}
    n = 0 if seed & 4 else 3  # bit 2 (after the two optionals' bits) empties xs
    assert got["ys"] == f"seq[{n + 1}] of float32[2, 3]"  # the random elements + the inserted one
    assert got["o2"] == ("none" if seed & 1 else "float32[2]")
    assert got["s2"] == "str[2]"
    assert f"o {'none' if seed & 1 else 'float32[2]'}" in r.inputs
    p = "none" if seed & 2 else ("seq[0]" if seed & 8 else "seq[3] of int64[3]")
    assert f"p {p}" in r.inputs, r.inputs


def test_verify_against_the_msc_graph_itself(models) -> None:
    """An msc graph with sequences runs through codegen.onnx (torch cannot hold them)."""
    r = verify_models(_keep(models["a"]), Model.of(msc.from_onnx(models["a"], custom_ops="keep")))
    assert r.ok, format_verify(r)


def test_onnxruntime_really_ran_on_the_feeds(models) -> None:
    """The feeds reach onnxruntime as given: the sequence's length and the optionals'
    presence come out of the model."""
    m = _keep(models["a"])
    for seed in (0, 3):
        feeds = make_inputs(m.graph, seed)
        outs, _ = m.run(feeds)
        n, cat, ys, has, has_p, o2, s2 = outs
        assert int(n) == SEQUENCE_LENGTH + 1 and cat.shape == (2 * (SEQUENCE_LENGTH + 1), 3)
        assert np.array_equal(ys[-1], feeds["t"]) and np.array_equal(ys[0], feeds["xs"][0])
        assert bool(has) == (seed == 0) and bool(has_p) == (seed == 0)
        assert (o2 is None) == (seed == 3) and list(s2) == list(feeds["s"])


@pytest.mark.parametrize(
    "variant, output, note",
    [
        ({"neg": True}, "ys", "element(s) 3 differ"),
        ({"twice": True}, "ys", "sequence lengths differ: 4 vs 5"),
        ({"drop_optional": True}, "o2", "B's optional is empty, the other's holds float32[2]"),
    ],
)
def test_mismatches_of_sequences_and_optionals_are_named(models, variant, output, note) -> None:
    b = _model(models["dir"] / "b.onnx", **variant)
    r = verify_models(_keep(models["a"]), _keep(b))
    assert not r.ok
    bad = {o.name: o for o in r.outputs if not o.ok}
    assert output in bad and note in bad[output].note, format_verify(r)
    if variant == {"neg": True}:  # localised to the node that changed, inside the sequence
        assert r.divergence is not None and r.divergence.node == "t2", format_verify(r)


def test_compare_values() -> None:
    x = np.ones((2, 2), np.float32)
    assert compare("v", [x, x], [x, x + 1e-7], 1e-4, 1e-5).ok
    c = compare("v", [x, x], [x, x + 1], 1e-4, 1e-5)
    assert not c.ok and c.max_abs == 1.0 and c.mismatched == 4 and "element(s) 1" in c.note
    c = compare("v", [x], [x, x], 1e-4, 1e-5)
    assert not c.ok and "lengths differ: 1 vs 2" in c.note
    assert compare("v", None, None, 0, 0).ok
    assert "A's optional is empty" in compare("v", None, x, 0, 0).note
    assert not compare("v", [x], x, 0, 0).ok  # a sequence is not a tensor
    assert compare("v", [], [], 0, 0).ok


def test_npz_inputs_for_sequences_and_optionals(models) -> None:
    g = _keep(models["a"]).graph
    d = models["dir"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = np.array(["a", "bc"])
    np.savez(d / "in.npz", **{"xs[0]": x, "xs[1]": x + 1, "t": x, "p[]": np.zeros(0), "s": s})
    got = load_inputs(d / "in.npz", g)
    assert [e.tolist() for e in got["xs"]] == [x.tolist(), (x + 1).tolist()]
    assert got["o"] is None and got["p"] == [] and got["s"].dtype == object
    r = verify_models(_keep(models["a"]), _keep(models["back"]), d / "in.npz")
    assert r.ok and "xs seq[2] of float32[2, 3]" in r.inputs and "o none" in r.inputs
    np.savez(d / "bad.npz", xs=x, t=x, s=s)
    with pytest.raises(MscError, match=r"no arrays for sequence input 'xs': give .*xs\[0\]"):
        load_inputs(d / "bad.npz", g)
    np.savez(d / "bad2.npz", **{"xs[0]": x.astype(np.int32), "t": x, "s": s})
    with pytest.raises(MscError, match="element 0 of input 'xs' is int32, the model takes f"):
        load_inputs(d / "bad2.npz", g)


def test_cli_verify_with_sequences(models) -> None:
    p = run("verify", models["a"], models["back"], "--custom-ops", "keep", "--seed", "1")
    assert "xs seq[3] of float32[2, 3]" in p.stdout and "o none" in p.stdout
    assert "result: match" in p.stdout
    b = _model(models["dir"] / "b.onnx", twice=True)
    p = run("verify", models["a"], b, "--custom-ops", "keep", ok=1)
    assert "sequence lengths differ: 4 vs 5" in p.stdout


def test_unknown_element_rank_is_a_clear_error(tmp_path) -> None:
    g = msc.Graph("g")
    xs = g.add_input("xs", msc.SequenceType(msc.TensorType(msc.DType.FLOAT32, None)))
    g.set_outputs([xs])
    with pytest.raises(MscError, match=r"input 'xs' \(seq<f32\[\*\]>\): its elements' rank"):
        make_inputs(g)
