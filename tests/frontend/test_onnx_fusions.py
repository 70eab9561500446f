"""The ONNX frontend's fusions (msc.ops.fusions, applied by from_onnx unless fuse=False).

Each spelled-out form, in a small ONNX model, must become its high-level op; the generated
PyTorch must agree with onnxruntime running the original; and the fused graph must convert
back to ONNX as the standard op at an opset that has it (LayerNormalization 17,
Gelu 20, RMSNormalization / Attention 23) and as its decomposition below, both running in
onnxruntime to the same outputs. The negative cases must stay unfused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import msc

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the original models")
torch = pytest.importorskip("torch", reason="the generated PyTorch runs the fused ops")
import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 5, 8)).astype(np.float32)


@dataclass
class Case:
    id: str
    nodes: list  # (op, inputs, outputs, attrs)
    consts: dict[str, np.ndarray]
    fused: str | None  # the op the fusion must produce (None: must stay unfused)
    # ONNX op written back at the opset that has it; below it the decomposition runs.
    onnx_op: tuple[str, int] | None = None
    inputs: dict[str, np.ndarray] = field(default_factory=lambda: {"x": X})
    outputs: tuple[str, ...] = ("y",)


def c(v) -> np.ndarray:
    return np.asarray(v, np.float32)


W = rng.standard_normal((8, 6)).astype(np.float32)
X2 = rng.standard_normal((4, 8)).astype(np.float32)
B = rng.standard_normal(6).astype(np.float32)
G = rng.standard_normal(8).astype(np.float32)
BETA = rng.standard_normal(8).astype(np.float32)
AX = np.array([-1], np.int64)
ERF_GELU = [
    ("Div", ["x", "sqrt2"], ["a"]),
    ("Erf", ["a"], ["e"]),
    ("Add", ["e", "one"], ["p"]),
    ("Mul", ["x", "p"], ["h"]),
    ("Mul", ["h", "half"], ["y"]),
]
TANH_GELU = [
    ("Pow", ["x", "three"], ["x3"]),
    ("Mul", ["k", "x3"], ["kx3"]),
    ("Add", ["x", "kx3"], ["s"]),
    ("Mul", ["s", "c"], ["u"]),
    ("Tanh", ["u"], ["t"]),
    ("Add", ["one", "t"], ["p"]),
    ("Mul", ["half", "x"], ["h"]),
    ("Mul", ["h", "p"], ["y"]),
]
LAYER_NORM = [
    ("ReduceMean", ["x", "axes"], ["m"]),
    ("Sub", ["x", "m"], ["d"]),
    ("Pow", ["d", "two"], ["sq"]),
    ("ReduceMean", ["sq", "axes"], ["var"]),
    ("Add", ["var", "eps"], ["ve"]),
    ("Sqrt", ["ve"], ["sd"]),
    ("Div", ["d", "sd"], ["n"]),
    ("Mul", ["n", "g"], ["ng"]),
    ("Add", ["ng", "beta"], ["y"]),
]
RMS_NORM = [
    ("Pow", ["x", "two"], ["sq"]),
    ("ReduceMean", ["sq", "axes"], ["ms"]),
    ("Add", ["ms", "eps"], ["t"]),
    ("Sqrt", ["t"], ["s"]),
    ("Reciprocal", ["s"], ["r"]),
    ("Mul", ["x", "r"], ["n"]),
    ("Mul", ["g", "n"], ["y"]),
]
Q, K, V = (rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(3))
MASK = np.where(rng.random((2, 1, 5, 5)) < 0.2, -np.inf, 0).astype(np.float32)
ATTENTION = [
    ("Transpose", ["k"], ["kt"], {"perm": [0, 1, 3, 2]}),
    ("MatMul", ["q", "kt"], ["s"]),
    ("Div", ["s", "sqrtd"], ["ss"]),
    ("Add", ["ss", "mask"], ["sm"]),
    ("Softmax", ["sm"], ["p"], {"axis": -1}),
    ("MatMul", ["p", "v"], ["y"]),
]
# A bool mask as msc's attention decomposition spells it (what codegen.tflite writes): the
# hidden scores set to -inf. Every query keeps its own key, so no row is hidden everywhere.
BOOL_MASK = (np.random.default_rng(1).random((2, 1, 5, 5)) < 0.7) | np.eye(5, dtype=bool)
ATTENTION_BOOL = [*ATTENTION[:3],
    ("Where", ["mask", "ss", "ninf"], ["sm"]),
    *ATTENTION[4:],
]  # fmt: skip
# The legacy torch.onnx exporter's attention (BERT): K^T as one transpose of [B, S, H, D] to
# [B, H, D, S], the scale split over Q and K^T as sqrt(sqrt(1/d)) each, no mask.
KS = rng.standard_normal((2, 5, 2, 4)).astype(np.float32)
ATTENTION_LEGACY = [
    ("Transpose", ["k"], ["kt"], {"perm": [0, 2, 3, 1]}),
    ("Mul", ["q", "c"], ["qs"]),
    ("Mul", ["kt", "c"], ["kts"]),
    ("MatMul", ["qs", "kts"], ["s"]),
    ("Softmax", ["s"], ["p"], {"axis": -1}),
    ("MatMul", ["p", "v"], ["y"]),
]


def _repeat_kv(axis: int, target: list[int]) -> list:
    """k and v [2, 2, 5, 4] unsqueezed at ``axis``, expanded to ``target``, reshaped to 4 heads."""
    return [
        n
        for t in ("k", "v")
        for n in (
            ("Unsqueeze", [f"{t}0", "ax"], [f"{t}u"]),
            ("Expand", [f"{t}u", "target"], [f"{t}e"]),
            ("Reshape", [f"{t}e", "heads"], [t]),
        )
    ]


GQA_CONSTS = {
    "sqrtd": c(2.0),
    "heads": np.array([2, 4, 5, 4], np.int64),
}
QG = rng.standard_normal((2, 4, 5, 4)).astype(np.float32)
KG, VG = (rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(2))
GQA_INPUTS = {"q": QG, "k0": KG, "v0": VG, "mask": MASK}

GELU_CONSTS = {"sqrt2": c(math.sqrt(2)), "one": c(1.0), "half": c(0.5)}
TANH_CONSTS = {
    "three": c(3.0),
    "k": c(0.044715),
    "c": c(math.sqrt(2 / math.pi)),
    "one": c(1.0),
    "half": c(0.5),
}
NORM_CONSTS = {"axes": AX, "two": c(2.0), "eps": c(1e-5), "g": G, "beta": BETA}

CASES = [
    Case("linear", [("MatMul", ["x", "w"], ["mm"]), ("Add", ["mm", "b"], ["y"])],
         {"w": W, "b": B}, "linear"),
    Case("linear_bias_first", [("MatMul", ["x", "w"], ["mm"]), ("Add", ["b", "mm"], ["y"])],
         {"w": W, "b": B}, "linear"),
    Case("gelu_erf", ERF_GELU, GELU_CONSTS, "gelu", ("Gelu", 20)),
    Case("gelu_tanh", TANH_GELU, TANH_CONSTS, "gelu", ("Gelu", 20)),
    Case("layer_norm", LAYER_NORM, NORM_CONSTS, "layer_norm", ("LayerNormalization", 17)),
    Case("rms_norm", RMS_NORM, NORM_CONSTS, "rms_norm", ("RMSNormalization", 23)),
    Case("attention", ATTENTION, {"sqrtd": c(2.0)}, "attention", ("Attention", 23),
         inputs={"q": Q, "k": K, "v": V, "mask": MASK}),
    Case("attention_bool_mask", ATTENTION_BOOL, {"sqrtd": c(2.0), "ninf": c(-np.inf)},
         "attention", ("Attention", 23), inputs={"q": Q, "k": K, "v": V, "mask": BOOL_MASK}),
    Case("attention_legacy", ATTENTION_LEGACY, {"c": c(0.25 ** 0.5)}, "attention",
         ("Attention", 23), inputs={"q": Q, "k": KS, "v": V}),
    Case("attention_gqa", _repeat_kv(2, [2, 2, 2, 5, 4]) + ATTENTION,
         {**GQA_CONSTS, "ax": np.array([2], np.int64), "target": np.array([2, 2, 2, 5, 4])},
         "attention", ("Attention", 23), inputs=GQA_INPUTS),
    # torch.onnx's linear of a 2-d input: Gemm of the [out, in] weight (transB).
    Case("gemm", [("Gemm", ["x", "w", "b"], ["y"], {"transB": 1})], {"w": W.T.copy(), "b": B},
         "linear", inputs={"x": X2}),
    Case("gemm_no_bias", [("Gemm", ["x", "w"], ["y"], {"transB": 1})], {"w": W.T.copy()},
         "linear", inputs={"x": X2}),
    # Negative cases.
    Case("gemm_in_out_weight", [("Gemm", ["x", "w", "b"], ["y"])], {"w": W, "b": B}, None,
         inputs={"x": X2}),  # an [in, out] weight (torch.addmm, GPT-2's Conv1D) stays its own
    Case("gemm_alpha", [("Gemm", ["x", "w", "b"], ["y"], {"transB": 1, "alpha": 0.5})],
         {"w": W.T.copy(), "b": B}, None, inputs={"x": X2}),
    Case("matmul_weight", [("MatMul", ["x", "w"], ["y"])], {"w": W}, None),  # no ~T: stays
    Case("linear_runtime_weight", [("MatMul", ["x", "w"], ["mm"]), ("Add", ["mm", "b"], ["y"])],
         {"b": B}, None, inputs={"x": X, "w": W}),
    Case("gelu_other_constant", ERF_GELU, {**GELU_CONSTS, "half": c(0.6)}, None),
    Case("gelu_escaping_erf", ERF_GELU, GELU_CONSTS, None, outputs=("y", "e")),
    Case("layer_norm_other_axes", LAYER_NORM, {**NORM_CONSTS, "axes": np.array([1], np.int64)},
         None),
]  # fmt: skip


def model(case: Case, opset: int = 18) -> onnx.ModelProto:
    nodes = [
        helper.make_node(n[0], n[1], n[2], name=f"n{i}", **(n[3] if len(n) > 3 else {}))
        for i, n in enumerate(case.nodes)
    ]
    ins = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for k, a in case.inputs.items()
    ]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in case.outputs]
    inits = [numpy_helper.from_array(a, k) for k, a in case.consts.items()]
    g = helper.make_graph(nodes, case.id, ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return onnx.shape_inference.infer_shapes(m)


def run_ort(m: onnx.ModelProto, feeds) -> list[np.ndarray]:
    return ort.InferenceSession(m.SerializeToString()).run(None, feeds)


def run_torch(g: msc.Graph, feeds) -> list[np.ndarray]:
    with torch.no_grad():
        out = codegen.torch.to_module(g)(*[torch.from_numpy(feeds[v.name]) for v in g.inputs])
    return [o.numpy() for o in (out if isinstance(out, tuple | list) else (out,))]


def close(got, want) -> None:
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fusion(case: Case) -> None:
    m = model(case)
    want = run_ort(m, case.inputs)
    g = msc.from_onnx(m)
    ops = [n.op for n in g.nodes if n.op != "constant"]
    unfused = [n.op for n in msc.from_onnx(m, fuse=False).nodes if n.op != "constant"]
    if case.fused is None:
        assert ops == unfused, f"fused where it must not: {ops}"
    else:
        assert ops.count(case.fused) == 1 and case.fused not in unfused, ops
        assert len(ops) <= len(unfused)  # fewer nodes, or one respelled (gemm)
    close(run_torch(g, case.inputs), want)
    opsets = [17] if case.onnx_op is None else sorted({17, case.onnx_op[1]})
    for opset in opsets:
        out = codegen.onnx.to_model(g, opset=opset)
        written = {n.op_type for n in out.graph.node}
        if case.onnx_op is not None:
            assert (case.onnx_op[0] in written) == (opset >= case.onnx_op[1]), (opset, written)
        close(run_ort(out, case.inputs), want)


def test_fusion_keeps_a_shared_weight() -> None:
    """A MatMul weight another node also reads is transposed into a new weight; the old one
    stays for the other reader."""
    case = CASES[0]
    m = model(case)
    m.graph.node.append(helper.make_node("MatMul", ["x", "w"], ["z"], name="other"))
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    g = msc.from_onnx(m)
    assert sorted(g.weights) == ["b", "w", "w.T"]
    assert g.weights["w.T"].type.shape == (6, 8)
    close(run_torch(g, case.inputs), run_ort(m, case.inputs))


def test_fused_weight_keeps_its_name() -> None:
    g = msc.from_onnx(model(CASES[0]))
    assert g.weights["w"].type.shape == (6, 8)
    np.testing.assert_array_equal(g.weights["w"].numpy(), W.T)


def test_a_pretransposed_weight_is_its_source_weight_again() -> None:
    """``W~T`` transposed back is ``W`` (its name and linear's layout), or the graph's ``W``
    itself when that holds the same values: a tied weight the file stored twice."""
    case = Case("pretransposed", [("MatMul", ["x", "lin.weight~T"], ["y"])],
                {"lin.weight~T": W}, "linear")  # fmt: skip
    g = msc.from_onnx(model(case))
    assert [n.op for n in g.nodes] == ["linear"] and sorted(g.weights) == ["lin.weight"]
    np.testing.assert_array_equal(g.weights["lin.weight"].numpy(), W.T)
    close(run_torch(g, case.inputs), run_ort(model(case), case.inputs))
    z = rng.standard_normal((6, 8)).astype(np.float32)
    tied = Case("tied", [("Add", ["z", "lin.weight"], ["s"]),
                         ("MatMul", ["x", "lin.weight~T"], ["y"])],
                {"lin.weight": W.T, "lin.weight~T": W}, "linear", inputs={"x": X, "z": z},
                outputs=("y", "s"))  # fmt: skip
    g = msc.from_onnx(model(tied))
    assert sorted(g.weights) == ["lin.weight"]
    assert len(g.weights["lin.weight"].uses) == 2
    close(run_torch(g, tied.inputs), run_ort(model(tied), tied.inputs))


def test_a_large_weight_in_its_file_is_not_transposed(tmp_path, monkeypatch) -> None:
    """Fusing MatMul + Add into linear transposes the weight; a weight still in its file and
    over fusions.TRANSPOSE_LIMIT stays under matmul + add (copied file to file, never held in
    memory), with the same outputs."""
    from msc.ops import fusions

    case = CASES[0]
    path = tmp_path / "m.onnx"
    onnx.save(model(case), path, save_as_external_data=True, size_threshold=0)
    fused = msc.from_onnx(path)
    assert "linear" in {n.op for n in fused.nodes}
    monkeypatch.setattr(fusions, "TRANSPOSE_LIMIT", 0)
    kept = msc.from_onnx(path)
    assert "linear" not in {n.op for n in kept.nodes}
    assert not isinstance(kept.weights["w"].storage, np.ndarray)  # still a region of the file
    np.testing.assert_array_equal(kept.weights["w"].numpy(), W)
    close(run_torch(kept, case.inputs), run_torch(fused, case.inputs))


def _causal_case(mask: np.ndarray) -> Case:
    return Case("attention_causal", ATTENTION, {"sqrtd": c(2.0), "mask": mask}, "attention",
                inputs={"q": Q, "k": K, "v": V})  # fmt: skip


@pytest.mark.parametrize("hidden", [-np.inf, np.finfo(np.float32).min], ids=["inf", "lowest"])
def test_a_constant_causal_mask_becomes_the_causal_flag(hidden) -> None:
    """Exporters spell causal attention as a constant additive mask (transformers fills with
    the dtype's lowest value); the fused op takes is_causal instead, so kernels need no mask,
    and no fully-masked-row guard follows. Outputs agree with onnxruntime on the original."""
    mask = np.where(np.tri(5, dtype=bool), 0, hidden).astype(np.float32)[None, None]
    case = _causal_case(mask)
    m = model(case)
    want = run_ort(m, case.inputs)
    g = msc.from_onnx(m)
    (att,) = [n for n in g.nodes if n.op == "attention"]
    assert att.attrs["is_causal"] and (len(att.inputs) < 4 or att.inputs[3] is None)
    assert not [n.op for n in g.nodes if n.op in ("reduce_max", "where", "add")]
    close(run_torch(g, case.inputs), want)
    for opset in (17, 23):
        close(run_ort(codegen.onnx.to_model(g, opset=opset), case.inputs), want)


def test_a_mask_that_is_not_exactly_causal_stays_a_mask() -> None:
    mask = np.where(np.tri(5, dtype=bool), 0, -np.inf).astype(np.float32)[None, None]
    mask[0, 0, 3, 1] = -np.inf  # one more key hidden from query 3
    case = _causal_case(mask)
    m = model(case)
    g = msc.from_onnx(m)
    (att,) = [n for n in g.nodes if n.op == "attention"]
    assert not att.attrs["is_causal"] and att.inputs[3] is not None
    close(run_torch(g, case.inputs), run_ort(m, case.inputs))


# Attention as exporters write it when a query row may be masked everywhere: softmax's NaN
# row (all -inf) replaced by 0 before the second MatMul.
ATTENTION_GUARDED = [*ATTENTION[:-1],
    ("IsNaN", ["p"], ["nan"]),
    ("Where", ["nan", "zero", "p"], ["pg"]),
    ("MatMul", ["pg", "v"], ["y"]),
]  # fmt: skip


def _masks() -> dict[str, np.ndarray]:
    some = np.where(rng.random((1, 1, 5, 5)) < 0.4, -np.inf, 0).astype(np.float32)
    some[..., 0] = 0  # every query sees key 0
    dead = some.copy()
    dead[0, 0, 2] = -np.inf  # query 2 sees no key
    return {"zeros": np.zeros((1, 1, 5, 5), np.float32), "some": some, "dead_row": dead}


@pytest.mark.parametrize("which", ["zeros", "some", "dead_row"])
def test_a_constant_mask_is_dropped_or_unguarded_where_it_can_be(which) -> None:
    """A constant mask of zeros hides nothing: the fused attention reads no mask (BERT without
    an attention mask exports one). A constant mask that leaves every query a key needs no
    fully-masked-row guard. Only a mask with a row hidden everywhere keeps the guard. Each
    agrees with onnxruntime on the original (the dead row is 0 there, as the source says)."""
    mask = _masks()[which]
    case = Case("attention_guarded", ATTENTION_GUARDED,
                {"sqrtd": c(2.0), "mask": mask, "zero": c(0.0)}, "attention",
                inputs={"q": Q, "k": K, "v": V})  # fmt: skip
    m = model(case)
    want = run_ort(m, case.inputs)
    if which == "dead_row":
        assert np.all(want[0][:, :, 2] == 0)
    g = msc.from_onnx(m)
    (att,) = [n for n in g.nodes if n.op == "attention"]
    has_mask = len(att.inputs) > 3 and att.inputs[3] is not None
    guarded = any(n.op == "where" for n in g.nodes)
    assert (has_mask, guarded) == {
        "zeros": (False, False),
        "some": (True, False),
        "dead_row": (True, True),
    }[which]
    close(run_torch(g, case.inputs), want)
    for opset in (17, 23):
        close(run_ort(codegen.onnx.to_model(g, opset=opset), case.inputs), want)


def _gqa_model(axis: int, target: list[int]) -> onnx.ModelProto:
    consts = {**GQA_CONSTS, "ax": np.array([axis], np.int64), "target": np.array(target)}
    return model(Case("gqa", _repeat_kv(axis, target) + ATTENTION, consts, "attention",
                      inputs=GQA_INPUTS))  # fmt: skip


def test_repeated_key_and_value_heads_become_grouped_query_attention() -> None:
    # Heads repeated in a row (query head j reads key head j // 2): the attention reads the
    # unrepeated keys and values with enable_gqa, no copies of them left.
    m = _gqa_model(2, [2, 2, 2, 5, 4])
    g = msc.from_onnx(m)
    (a,) = [n for n in g.nodes if n.op == "attention"]
    assert a.attrs["enable_gqa"] and [v.name for v in a.inputs[1:3]] == ["k0", "v0"]
    assert not {"expand", "unsqueeze", "reshape"} & {n.op for n in g.nodes}
    assert "enable_gqa=True" in codegen.torch.generate(g)
    close(run_torch(g, GQA_INPUTS), run_ort(m, GQA_INPUTS))


def test_attention_grouped_over_repeated_heads_reads_them_unrepeated() -> None:
    # ONNX Attention groups 8 query heads over the 4 repeated key / value heads by itself
    # (query head j reads repeated head j // 2, which is head j // 4 of the 2 unrepeated):
    # grouped-query attention over k0 and v0, as onnxruntime computes it.
    nodes = [helper.make_node(op, i, o) for op, i, o in _repeat_kv(2, [2, 2, 2, 5, 4])]
    nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["y"]))
    q = rng.standard_normal((2, 8, 5, 4)).astype(np.float32)
    inputs = {"q": q, "k0": KG, "v0": VG}
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, x.shape) for k, x in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2], np.int64), "ax"),
         numpy_helper.from_array(np.array([2, 2, 2, 5, 4], np.int64), "target"),
         numpy_helper.from_array(GQA_CONSTS["heads"], "heads")],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    g = msc.from_onnx(m)
    (a,) = [n for n in g.nodes if n.op == "attention"]
    assert a.attrs["enable_gqa"] and [v.name for v in a.inputs[1:3]] == ["k0", "v0"]
    assert not {"expand", "unsqueeze", "reshape"} & {n.op for n in g.nodes}
    close(run_torch(g, inputs), run_ort(m, inputs))


def test_heads_tiled_rather_than_repeated_stay_explicit() -> None:
    # Unsqueezed at 1, the copies are tiled (query head j reads key head j % 2): not the
    # grouped-query pairing, so the repeat stays in the graph.
    m = _gqa_model(1, [2, 2, 2, 5, 4])
    g = msc.from_onnx(m)
    (a,) = [n for n in g.nodes if n.op == "attention"]
    assert not a.attrs["enable_gqa"] and "expand" in {n.op for n in g.nodes}
    close(run_torch(g, GQA_INPUTS), run_ort(m, GQA_INPUTS))


@pytest.mark.parametrize("source", ["op", "module", None])
def test_a_lookup_the_source_ran_as_an_embedding_is_one(source) -> None:
    # torch.onnx writes nn.Embedding as Gather and records what it lowered (the FX node's
    # target, the module types): that Gather is the embedding again, so the generated
    # PyTorch has the nn.Embedding. A Gather with no such record stays a gather (it counts
    # a negative index from the end, which embedding refuses).
    table = rng.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 9, 0]], np.int64)
    node = helper.make_node("Gather", ["emb.weight", "ids"], ["y"], name="node_embedding")
    fx = "call_function[target=torch.ops.aten.embedding.default](args = (%p_emb_weight, %ids))"
    props = {
        "op": {"pkg.torch.onnx.name_scopes": "['', 'emb', 'embedding']",
               "pkg.torch.onnx.fx_node": fx},
        "module": {"pkg.torch.onnx.name_scopes": "['', 'emb', 'getitem']",
                   "pkg.torch.onnx.class_hierarchy":
                       "['M', 'torch.nn.modules.sparse.Embedding', 'aten.index']"},
    }.get(source or "", {"pkg.torch.onnx.name_scopes": "['', 'emb', 'getitem']"})  # fmt: skip
    for k, v in props.items():
        node.metadata_props.add(key=k, value=v)
    g = helper.make_graph(
        [node],
        "lookup",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ids.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(table, "emb.weight")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    graph = msc.from_onnx(m)
    assert [n.op for n in graph.nodes] == ["embedding" if source else "gather"]
    src = codegen.torch.generate(graph)
    assert ("self.emb = nn.Embedding(10, 4)" in src) is bool(source), src
    gen = codegen.torch.to_module(graph)
    assert list(gen.state_dict()) == ["emb.weight"]
    with torch.no_grad():
        got = gen(torch.from_numpy(ids)).numpy()
    np.testing.assert_allclose(got, run_ort(m, {"ids": ids})[0], rtol=0, atol=0)
