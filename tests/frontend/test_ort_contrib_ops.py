"""onnxruntime's com.microsoft transformer ops (and SimplifiedLayerNormalization) through msc.

Each op, in a one-node model, becomes canonical ops: the generated PyTorch agrees with
onnxruntime running the original, and ONNX -> msc -> ONNX (standard ops only) runs in
onnxruntime to the same outputs. The models onnxruntime's transformer optimizer writes for a
small BERT, GPT-2 and Llama are in test_ort_optimized_models.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import msc

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the contrib ops")
torch = pytest.importorskip("torch", reason="the generated PyTorch runs the converted ops")
import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402

MS = "com.microsoft"
F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def r(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@dataclass
class Case:
    id: str
    op: str
    inputs: dict[str, np.ndarray]  # graph inputs, fed at run time
    inits: dict[str, np.ndarray] = field(default_factory=dict)  # initializers
    attrs: dict = field(default_factory=dict)
    outputs: tuple[str, ...] = ("y",)
    order: tuple[str, ...] = ()  # the node's inputs in order ("" = absent)
    domain: str = MS
    canonical: tuple[str, ...] = ()  # ops the conversion must hold
    opsets: tuple[int, ...] = (17, 23)  # ONNX -> msc -> ONNX at these opsets
    ref: Callable[..., list[np.ndarray]] | None = None  # when onnxruntime has no CPU kernel


def _ids(b, s, hi):
    return rng.integers(0, hi, (b, s)).astype(np.int32)


def _cos_sin(max_pos: int, half: int):
    ang = np.arange(max_pos)[:, None] * (1e-2 * (np.arange(half) + 1))[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


COS, SIN = _cos_sin(16, 4)


def _gqa_cases():
    """GroupQueryAttention: 4 query heads over 2 KV heads of size 16 (onnxruntime takes a
    multi-token step after a past in batches of 1 only). Rows:
    (id, fed inputs, initializers, attributes, node inputs in order, canonical ops)."""
    n, kvn, h = 4, 2, 16
    cos, sin = _cos_sin(32, 8)  # rotary over the whole head

    def step(s, past, seqlens, total, packed=False, const_total=False, **extra):
        b = len(seqlens)
        feeds = (
            {"q": r(b, s, (n + 2 * kvn) * h)}
            if packed
            else {"q": r(b, s, n * h), "k": r(b, s, kvn * h), "v": r(b, s, kvn * h)}
        )
        order = ["q", "", ""] if packed else ["q", "k", "v"]
        if past:
            feeds.update(pk=r(b, kvn, past, h), pv=r(b, kvn, past, h))
        order += ["pk", "pv"] if past else ["", ""]
        feeds["seqlens"] = np.array(seqlens, np.int32)
        feeds["total"] = np.array(total, np.int32)
        order += ["seqlens", "total"]
        for i, name in enumerate(["cos", "sin", "pos", "bias", "sink"], start=7):
            if name in extra:
                order += [""] * (i - len(order)) + [name]
        inits = {k: extra.pop(k) for k in ("cos", "sin") if k in extra}
        if const_total:
            inits["total"] = feeds.pop("total")
        return {**feeds, **extra}, inits, tuple(order)

    rows = []
    for id_, (feeds, inits, order), attrs, canonical in [
        ("prompt", step(5, 0, [4, 4], 5), {}, ("attention",)),
        ("prompt_packed", step(5, 0, [4, 4], 5, packed=True), {}, ("attention",)),
        # decoding one token: the second entry has 2 cached tokens of the 4 the cache holds
        ("decode_ragged", step(1, 4, [4, 2], 5), {}, ("attention", "gather_elements")),
        # past and present share a max-length buffer (8 rows, 5 in use)
        ("decode_shared_buffer", step(1, 8, [4, 2], 5), {}, ("attention",)),
        ("chunk", step(3, 4, [6], 7), {}, ("attention",)),
        (
            "chunk_shared_buffer_constant_total",
            step(3, 8, [6], 7, const_total=True),
            {},
            ("attention",),
        ),
        (
            "prompt_rotary",
            step(5, 0, [4, 4], 5, cos=cos, sin=sin),
            {"do_rotary": 1},
            ("attention", "rotary_embedding"),
        ),
        (
            "decode_rotary_interleaved_packed",
            step(1, 4, [4, 2], 5, True, cos=cos, sin=sin),
            {"do_rotary": 1, "rotary_interleaved": 1},
            ("rotary_embedding",),
        ),
        (
            "decode_rotary_position_ids",
            step(1, 4, [4, 2], 5, cos=cos, sin=sin, pos=np.array([[7], [9]], np.int64)),
            {"do_rotary": 1},
            ("rotary_embedding",),
        ),
        ("prompt_local_window", step(6, 0, [5, 5], 6), {"local_window_size": 2}, ("attention",)),
        ("prompt_bidirectional", step(5, 0, [4, 4], 5), {"causal": 0}, ("attention",)),
        (
            "chunk_bidirectional_rotary",
            step(3, 4, [6], 7, cos=cos, sin=sin),
            {"causal": 0, "do_rotary": 1},
            ("attention", "rotary_embedding"),
        ),
        ("decode_bidirectional_ragged", step(1, 4, [4, 2], 5), {"causal": 0}, ("attention",)),
        ("decode_local_window", step(1, 6, [6, 3], 7), {"local_window_size": 2}, ("attention",)),
        (
            "prompt_softcap_scale",
            step(5, 0, [4, 4], 5),
            {"softcap": 0.5, "scale": 0.7},
            ("softmax", "tanh"),
        ),
        ("decode_smooth_softmax", step(1, 4, [4, 2], 5), {"smooth_softmax": 1}, ("softmax",)),
        (
            "chunk_head_sink_bias",
            step(3, 4, [6], 7, bias=r(1, 4, 3, 7), sink=r(4)),
            {},
            ("softmax",),
        ),
    ]:
        rows.append((id_, feeds, inits, attrs, order, canonical))
    return rows


MASK = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], np.int32)

CASES = [
    Case("skip_layer_norm", "SkipLayerNormalization", {"x": r(2, 3, 8), "skip": r(2, 3, 8)},
         {"gamma": r(8), "beta": r(8), "bias": r(8)}, {"epsilon": 1e-5}, ("y", "", "", "sum"),
         ("x", "skip", "gamma", "beta", "bias"), canonical=("layer_norm",)),
    Case("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
         {"x": r(2, 3, 8), "skip": r(2, 3, 8)}, {"gamma": r(8)}, {"epsilon": 1e-6},
         ("y", "", "", "sum"), ("x", "skip", "gamma"), canonical=("rms_norm",)),
    Case("simplified_layer_norm", "SimplifiedLayerNormalization", {"x": r(2, 3, 8)},
         {"scale": r(8)}, {"epsilon": 1e-6, "axis": -1}, order=("x", "scale"), domain="",
         canonical=("rms_norm",)),
    Case("gelu", "Gelu", {"x": r(2, 3, 8)}, canonical=("gelu",)),
    Case("bias_gelu", "BiasGelu", {"x": r(2, 3, 8)}, {"bias": r(8)}, canonical=("gelu",)),
    Case("fast_gelu", "FastGelu", {"x": r(2, 3, 8)}, {"bias": r(8)}, canonical=("gelu",)),
    Case("quick_gelu", "QuickGelu", {"x": r(2, 3, 8)}, attrs={"alpha": 1.702}),
    Case("quick_gelu_silu", "QuickGelu", {"x": r(2, 3, 8)}, attrs={"alpha": 1.0},
         canonical=("silu",)),
    Case("bias_add", "BiasAdd", {"x": r(2, 3, 8), "skip": r(2, 3, 8)}, {"bias": r(8)},
         order=("x", "bias", "skip"), ref=lambda x, skip, bias: [x + bias + skip]),
    Case("fused_matmul", "FusedMatMul", {"a": r(2, 5, 3), "b": r(2, 4, 5)},
         attrs={"alpha": 0.5, "transA": 1, "transB": 1}, canonical=("matmul",)),
    Case("rotary_embedding", "RotaryEmbedding", {"x": r(2, 2, 3, 8)},
         {"pos": np.array([[0, 1, 2], [3, 4, 5]], np.int64), "cos": COS, "sin": SIN},
         order=("x", "pos", "cos", "sin"), canonical=("rotary_embedding",), opsets=(23,)),
    Case("rotary_embedding_offset_3d", "RotaryEmbedding", {"x": r(2, 3, 16)},
         {"pos": np.array([2], np.int64), "cos": COS, "sin": SIN}, {"interleaved": 1},
         order=("x", "pos", "cos", "sin"), canonical=("rotary_embedding",), opsets=(23,)),
    Case("attention", "Attention", {"x": r(2, 6, 8), "mask": MASK},
         {"w": r(8, 24) * 0.5, "b": r(24)}, {"num_heads": 2}, order=("x", "w", "b", "mask"),
         canonical=("attention",)),
    Case("attention_causal", "Attention", {"x": r(2, 6, 8)}, {"w": r(8, 24) * 0.5, "b": r(24)},
         {"num_heads": 2, "unidirectional": 1}, order=("x", "w", "b"), canonical=("attention",)),
    Case("multi_head_attention", "MultiHeadAttention",
         {"q": r(2, 4, 8), "k": r(2, 6, 8), "v": r(2, 6, 8), "mask": MASK}, {"b": r(24)},
         {"num_heads": 2}, order=("q", "k", "v", "b", "mask"), canonical=("attention",)),
    Case("embed_layer_norm", "EmbedLayerNormalization",
         {"ids": _ids(2, 6, 20), "seg": _ids(2, 6, 2), "mask": MASK},
         {"word": r(20, 8), "pos": r(16, 8), "segw": r(2, 8), "gamma": r(8), "beta": r(8)},
         {"epsilon": 1e-5}, ("y", "mask_index", "sum"),
         ("ids", "seg", "word", "pos", "segw", "gamma", "beta", "mask"),
         canonical=("layer_norm", "embedding")),
    *[
        Case(f"group_query_attention_{id_}", "GroupQueryAttention", feeds, inits,
             {"num_heads": 4, "kv_num_heads": 2, **attrs}, ("y", "present_k", "present_v"),
             order, canonical=canonical,
             opsets=(23,) if "rotary_embedding" in canonical else (17, 23))
        for id_, feeds, inits, attrs, order, canonical in _gqa_cases()
    ],
]  # fmt: skip


def model(case: Case) -> onnx.ModelProto:
    order = case.order or (*case.inputs, *case.inits)
    node = helper.make_node(
        case.op, list(order), list(case.outputs), domain=case.domain, name=case.id, **case.attrs
    )
    ins = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in case.inputs.items()
    ]
    first = next(iter(case.inputs.values()))
    ft = helper.np_dtype_to_tensor_dtype(first.dtype) if first.dtype.kind == "f" else F
    outs = [
        helper.make_tensor_value_info(o, TensorProto.INT32 if o == "mask_index" else ft, None)
        for o in case.outputs
        if o
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in case.inits.items()]
    g = helper.make_graph([node], case.id, ins, outs, inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)], ir_version=8
    )
    # The outputs' types, from onnxruntime itself (shape inference does not know contrib ops).
    got = reference(case, m)
    del m.graph.output[:]
    m.graph.output.extend(
        helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for o, a in zip([o for o in case.outputs if o], got)
    )
    return m


def reference(case: Case, m: onnx.ModelProto) -> list[np.ndarray]:
    if case.ref is not None:
        return case.ref(**case.inputs, **case.inits)
    return run_ort(m, case.inputs)


def run_ort(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(m.SerializeToString()).run(None, feeds)


def run_torch(g: msc.Graph, feeds: dict) -> list[np.ndarray]:
    mod = codegen.torch.to_module(g)
    with torch.no_grad():
        out = mod(*[torch.from_numpy(feeds[v.name]) for v in g.inputs])
    out = out if isinstance(out, tuple | list) else (out,)
    return [o.numpy() for o in out]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_contrib_op_through_both_codegens(case: Case) -> None:
    m = model(case)
    want = reference(case, m)
    g = msc.from_onnx(m)
    ops = {n.op for n in g.nodes}
    assert not any("::" in op for op in ops), ops
    assert set(case.canonical) <= ops, ops
    for got, w in zip(run_torch(g, case.inputs), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    for opset in case.opsets:
        out = codegen.onnx.to_model(g, opset=opset)
        assert all(n.domain in ("", "ai.onnx") for n in out.graph.node)
        for got, w in zip(run_ort(out, case.inputs), want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_unconverted_contrib_op_is_kept_in_its_domain() -> None:
    """An op msc has no converter for (here DecoderMaskedMultiHeadAttention) is kept as a custom
    node on request, and ONNX -> msc -> ONNX writes it back in com.microsoft."""
    case = CASES[[c.id for c in CASES].index("attention")]
    m = model(case)
    m.graph.node[0].op_type = "DecoderMaskedMultiHeadAttention"  # an op msc does not translate
    m.graph.node[0].ClearField("attribute")
    m.graph.node[0].attribute.extend([helper.make_attribute("num_heads", 2)])
    with pytest.raises(msc.errors.UnsupportedOpsError, match="DecoderMaskedMultiHeadAttention"):
        msc.from_onnx(m)
    g = msc.from_onnx(m, custom_ops="keep")
    assert [n.op for n in g.nodes] == ["com.microsoft::DecoderMaskedMultiHeadAttention@1"]
    out = codegen.onnx.to_model(g)
    assert [(n.domain, n.op_type) for n in out.graph.node] == [
        (MS, "DecoderMaskedMultiHeadAttention")
    ]


@pytest.mark.parametrize(
    ("attrs", "extra_inputs", "reason"),
    [
        ({"causal": 0, "local_window_size": 2}, {}, "causal=0"),
        ({"qk_output": 1}, {}, "output_qk"),
        ({"sliding_window_cache": 1, "local_window_size": 2}, {}, "sliding_window_cache"),
        ({}, {16: np.array([5, 5], np.int32)}, "query_seqlens"),
        ({}, {13: np.ones(1, np.float32)}, "quantized KV cache"),
    ],
    ids=["bidirectional", "qk_output", "window_cache", "query_seqlens", "kv_scale"],
)
def test_group_query_attention_refuses_what_it_does_not_read(attrs, extra_inputs, reason):
    """Each GroupQueryAttention variant msc does not translate is reported with its reason."""
    case = CASES[[c.id for c in CASES].index("group_query_attention_prompt")]
    node = helper.make_node(
        "GroupQueryAttention", list(case.order), ["y"], domain=MS, num_heads=4, kv_num_heads=2,
        **attrs,
    )  # fmt: skip
    inits = []
    for i, arr in extra_inputs.items():
        node.input.extend([""] * (i - len(node.input)) + [f"in{i}"])
        inits.append(numpy_helper.from_array(arr, f"in{i}"))
    ins = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in case.inputs.items()
    ]
    g = helper.make_graph([node], "gqa", ins, [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    )
    with pytest.raises(msc.errors.UnsupportedOpsError, match=reason):
        msc.from_onnx(m)


@pytest.mark.parametrize(
    "cid", ["chunk", "decode_rotary_interleaved_packed", "decode_local_window"]
)
def test_group_query_attention_over_runtime_lengths(cid: str) -> None:
    """Sequence and cache lengths named, not fixed (as in exported decoders): the positions
    and the cache layout are computed at run time, with the same outputs as onnxruntime."""
    case = CASES[[c.id for c in CASES].index(f"group_query_attention_{cid}")]
    m = model(case)
    want = run_ort(m, case.inputs)
    for vi in m.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name in ("q", "k", "v"):
            dims[1].dim_param = "seq"
        if vi.name in ("pk", "pv"):
            dims[2].dim_param = "past"
    for vi in m.graph.output:
        vi.type.tensor_type.ClearField("shape")
    g = msc.from_onnx(m)
    for got, w in zip(run_torch(g, case.inputs), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    for got, w in zip(run_ort(codegen.onnx.to_model(g, opset=23), case.inputs), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "cid", ["prompt", "decode_ragged", "prompt_softcap_scale", "decode_rotary_interleaved_packed"]
)
def test_group_query_attention_in_float16(cid: str) -> None:
    """float16 in and out (onnxruntime's CPU kernel computes in float32): within 4e-3, a few
    float16 steps at the outputs' size."""
    case = CASES[[c.id for c in CASES].index(f"group_query_attention_{cid}")]
    half = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in case.inputs.items()}
    case = replace(
        case,
        inputs=half,
        inits={k: v.astype(np.float16) for k, v in case.inits.items()},
    )
    m = model(case)
    want = run_ort(m, case.inputs)
    g = msc.from_onnx(m)
    for got, w in zip(run_torch(g, case.inputs), want):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got, w, rtol=4e-3, atol=4e-3)
    for got, w in zip(run_ort(codegen.onnx.to_model(g, opset=23), case.inputs), want):
        np.testing.assert_allclose(got, w, rtol=4e-3, atol=4e-3)


def test_contrib_op_without_a_required_attribute_is_reported():
    """GroupQueryAttention without kv_num_heads (no ONNX schema checks other domains): an
    unsupported-op report naming it, not a crash inside the converter."""
    case = CASES[[c.id for c in CASES].index("group_query_attention_prompt")]
    m = model(case)
    del m.graph.node[0].attribute[:]
    m.graph.node[0].attribute.extend([helper.make_attribute("num_heads", 4)])
    with pytest.raises(msc.errors.UnsupportedOpsError, match="kv_num_heads"):
        msc.from_onnx(m)
