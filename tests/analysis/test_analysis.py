"""Analysis on msc graphs alone: symbolic counts, FLOP/MAC formulas, peak memory, diff, R.

Every expected count below is worked out by hand from the formula in msc.analysis.cost.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import msc
from msc.analysis import cost
from msc.analysis.diff import match
from msc.analysis.inspect import inspect_graph
from msc.analysis.shapes import bind, parse_dynamic, parse_input_shape, specialize
from msc.analysis.symbolic import Poly
from msc.errors import MscError
from msc.examples import small_cnn_graph
from msc.ir import DType, Graph, Provenance, SymDim, TensorType

F32 = DType.FLOAT32
R = sys.modules["msc.analysis.render"]  # the module (msc.analysis.render is the function)


def _w(g: Graph, name: str, *shape: int):
    return g.add_weight(name, np.ones(shape, np.float32))


def _one(build) -> Graph:
    g = Graph("t")
    y = build(g)
    g.set_outputs([y])
    return g


# ---------------------------------------------------------------------------- symbolic
def test_poly_arithmetic_and_format():
    b, s = Poly.of("batch"), Poly.of("seq")
    p = b * s * 2 + b * 3 + 8
    assert str(p) == "2*batch*seq + 3*batch + 8"
    assert p.evaluate({"batch": 2, "seq": 5}) == 20 + 6 + 8
    assert str(p.subs({"seq": 5})) == "13*batch + 8"
    assert p.subs({"batch": 1, "seq": 1}).constant() == 13
    assert str(b * b) == "batch^2"
    assert Poly.of(0) == Poly() and not Poly()
    with pytest.raises(ValueError):
        p.constant()


# ---------------------------------------------------------------------------- FLOPs table
def _x(g: Graph, *shape, name="x"):
    return g.add_input(name, TensorType(F32, shape))


CASES = [
    # (id, builder, MACs, FLOPs) -- counts from the formulas in msc.analysis.cost
    (
        "conv_bias",
        lambda g: g.op(
            "conv", _x(g, 2, 3, 8, 8), _w(g, "w", 4, 3, 3, 3), _w(g, "b", 4), padding=[1] * 4
        ),
        2 * 4 * 8 * 8 * 27,
        2 * (2 * 4 * 8 * 8 * 27) + 2 * 4 * 8 * 8,
    ),
    (
        "conv_grouped_nobias",
        lambda g: g.op("conv", _x(g, 1, 4, 5, 5), _w(g, "w", 4, 1, 3, 3), groups=4),
        4 * 3 * 3 * 9,
        2 * 4 * 3 * 3 * 9,
    ),
    (
        "conv_transpose",
        lambda g: g.op("conv_transpose", _x(g, 1, 2, 3, 3), _w(g, "w", 2, 5, 2, 2), stride=[2, 2]),
        2 * 9 * 5 * 4,
        2 * 2 * 9 * 5 * 4,
    ),
    ("matmul", lambda g: g.op("matmul", _x(g, 2, 5, 7), _w(g, "w", 7, 3)), 210, 420),
    (
        "linear",
        lambda g: g.op("linear", _x(g, 4, 6), _w(g, "w", 5, 6), _w(g, "b", 5)),
        120,
        260,
    ),
    (
        "gemm_trans_b",
        lambda g: g.op("gemm", _x(g, 3, 4), _w(g, "w", 5, 4), _w(g, "c", 5), trans_b=True),
        60,
        135,
    ),
    (
        "einsum",
        lambda g: g.op("einsum", _x(g, 2, 3, 4), _w(g, "w", 2, 4, 5), equation="bij,bjk->bik"),
        120,
        240,
    ),
    (
        "attention",
        lambda g: g.op(
            "attention", _x(g, 2, 4, 6, 8), _w(g, "k", 2, 4, 10, 8), _w(g, "v", 2, 4, 10, 16)
        ),
        48 * 10 * 24,
        2 * 48 * 10 * 24 + 5 * 48 * 10,
    ),
    (
        "layer_norm_affine",
        lambda g: g.op("layer_norm", _x(g, 2, 10), _w(g, "w", 10), _w(g, "b", 10)),
        0,
        7 * 20,
    ),
    ("rms_norm", lambda g: g.op("rms_norm", _x(g, 2, 10), _w(g, "w", 10)), 0, 4 * 20),
    (
        "batch_norm",
        lambda g: g.op(
            "batch_norm",
            _x(g, 2, 3, 4, 4),
            _w(g, "w", 3),
            _w(g, "b", 3),
            _w(g, "m", 3),
            _w(g, "v", 3),
        ),
        0,
        2 * 96,
    ),
    ("softmax", lambda g: g.op("softmax", _x(g, 3, 4)), 0, 60),
    ("relu", lambda g: g.op("relu", _x(g, 3, 4)), 0, 12),
    ("add_broadcast", lambda g: g.op("add", _x(g, 3, 4), _w(g, "b", 4)), 0, 12),
    ("reduce_sum", lambda g: g.op("reduce_sum", _x(g, 3, 4), axes=[1]), 0, 12),
    (
        "max_pool",
        lambda g: g.op("max_pool", _x(g, 1, 1, 4, 4), kernel=[2, 2], stride=[2, 2]),
        0,
        16,
    ),
    ("reshape_is_free", lambda g: g.op("reshape", _x(g, 3, 4), shape=[12]), 0, 0),
    ("transpose_is_free", lambda g: g.op("transpose", _x(g, 3, 4), perm=[1, 0]), 0, 0),
]


@pytest.mark.parametrize("build,macs,flops", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_node_cost(build, macs, flops):
    g = _one(build)
    c = cost.node_cost(g.nodes[-1])
    assert c is not None and c.macs is not None and c.flops is not None
    assert (c.macs.constant(), c.flops.constant()) == (macs, flops)


def test_symbolic_cost_is_a_formula_and_binds():
    def build(g):
        x = g.add_input("x", TensorType(F32, (SymDim("batch", 1, 8), SymDim("seq"), 6)))
        return g.op("linear", x, _w(g, "w", 5, 6))

    g = _one(build)
    c = cost.node_cost(g.nodes[0])
    assert str(c.macs) == "30*batch*seq"
    r = msc.inspect(g, {"x": (2, 7, 6)})
    assert r.macs.constant() == 30 * 14 and r.binding == {"batch": 2, "seq": 7}
    assert msc.inspect(g).to_json()["macs"] == "30*batch*seq"


def test_unknown_dim_gives_unknown_count_not_a_guess():
    g = _one(lambda g: g.op("relu", g.add_input("x", TensorType(F32, (None, 3)))))
    c = cost.node_cost(g.nodes[0])
    assert c.flops is None
    assert msc.inspect(g).flops is None


# ---------------------------------------------------------------------------- inspect
def test_inspect_small_cnn():
    r = msc.inspect(small_cnn_graph(), {"batch": 4})
    j = r.to_json()
    assert j["inputs"][0] == {
        "name": "x",
        "dtype": "f32",
        "shape": ["batch", 3, 16, 16],
        "type": "f32[batch{1..64}, 3, 16, 16]",
    }
    assert j["op_histogram"] == {
        "conv": 1,
        "batch_norm": 1,
        "relu": 1,
        "reduce_mean": 1,
        "linear": 1,
    }
    assert j["params"] == 8 * 27 + 8 + 4 * 8 + 80 + 10
    assert j["params_by_dtype"]["f32"]["bytes"] == 4 * j["params"]
    conv_macs = 4 * 8 * 256 * 27
    assert j["nodes"][0]["macs"] == conv_macs
    assert j["macs"] == conv_macs + 4 * 80
    # Peak: conv output + batch_norm output live together, 2 x 4*8*16*16 f32.
    assert j["peak_activation_bytes"] == 2 * 4 * 8 * 256 * 4
    assert j["peak_at"] == "features.1"
    text = str(r)
    for s in ("inputs", "parameters", "FLOPs", "peak activation memory", "features.0"):
        assert s in text


def test_peak_memory_keeps_values_alive_until_last_use():
    g = Graph("branch")
    x = g.add_input("x", TensorType(F32, (10,)))
    a = g.op("relu", x)
    b = g.op("neg", x)
    c = g.op("add", a, b)
    g.set_outputs([c])
    r = inspect_graph(g)
    # At the neg node: x, a and b are all live (x is freed after its last use, neg).
    assert r.peak_memory.constant() == 3 * 40
    chain = Graph("chain")
    x = chain.add_input("x", TensorType(F32, (10,)))
    chain.set_outputs([chain.op("relu", chain.op("relu", chain.op("relu", x)))])
    assert inspect_graph(chain).peak_memory.constant() == 2 * 40


# ---------------------------------------------------------------------------- shapes
def test_input_shape_and_dynamic_parsing():
    assert parse_input_shape("x=1,3,224,224") == parse_input_shape("x=1x3x224x224")
    s = parse_input_shape("ids=1,128:i64")
    assert s.shape == (1, 128) and s.dtype is DType.INT64
    assert parse_dynamic("x:0=batch") == ("x", 0, SymDim("batch"))
    assert parse_dynamic("x:1=seq{1..512}") == ("x", 1, SymDim("seq", 1, 512))
    for bad in ("x", "x=a,b", "x=1:f99"):
        with pytest.raises(MscError):
            parse_input_shape(bad)
    # Dim names from model files need not be identifiers (paddle2onnx writes these).
    assert parse_dynamic("x:0=p2o.DynamicDimension.0")[2] == SymDim("p2o.DynamicDimension.0")
    for bad in ("x=batch", "x:a=batch", "x:0=12", "x:0=b c", "x:0=b{2..1}"):
        with pytest.raises(MscError):
            parse_dynamic(bad)


def test_bind_errors_name_the_problem():
    g = small_cnn_graph()
    with pytest.raises(MscError, match="fixed at 3"):
        bind(g, [parse_input_shape("x=2,4,16,16")])
    with pytest.raises(MscError, match="outside its range"):
        bind(g, [parse_input_shape("x=100,3,16,16")])
    with pytest.raises(MscError, match="no such input"):
        bind(g, [parse_input_shape("y=1")])
    assert bind(g, [parse_input_shape("batch=5")]) == {"batch": 5}


def test_specialize_evaluates_symbolic_dims():
    g = Graph("img")
    x = g.add_input("x", TensorType(F32, (1, 3, SymDim("h"), SymDim("w"))))
    y = g.op("conv", x, _w(g, "w", 4, 3, 3, 3), stride=[2, 2])
    g.set_outputs([y])
    # floor((h - 3) / 2) + 1, kept as an expression over h in canonical form.
    assert str(g.outputs[0].type.shape[2]) == "floordiv(h + 1, 2) - 1"
    s = specialize(g, {"h": 9, "w": 9})
    assert s.outputs[0].type.shape == (1, 4, 4, 4)
    assert inspect_graph(g, {"h": 9, "w": 9}).macs.constant() == 16 * 4 * 27


# ---------------------------------------------------------------------------- diff
def _mutated(text_edit=None, build_edit=None) -> Graph:
    g = small_cnn_graph()
    if text_edit:
        g2 = msc.from_text(text_edit(msc.to_text(g)))
        for w in g2.weights.values():
            w.set_data(g.weights[w.name].numpy())
        return g2
    build_edit(g)
    return g


def _insert_neg(g: Graph) -> None:
    relu = g.nodes[2]
    neg = g.add_node("neg", [relu.output], name="extra")
    g.nodes.remove(neg)
    g.nodes.insert(3, neg)
    g.nodes[4].inputs = [neg.output]


def _drop_relu(g: Graph) -> None:
    relu = g.nodes[2]
    g.nodes[3].inputs = [relu.inputs[0]]
    g.remove_node(relu)


def _new_weights(g: Graph) -> None:
    w = g.weights["classifier.weight"]
    w.set_data(w.numpy() + 1)


DIFF_CASES = [
    (
        "eps",
        lambda: _mutated(lambda t: t.replace("eps = 1e-05", "eps = 0.001")),
        {"changed": 1, "added": 0, "removed": 0},
        "attr eps: 1e-05 -> 0.001",
    ),
    (
        "op",
        lambda: _mutated(lambda t: t.replace("= relu(", "= sigmoid(")),
        {"changed": 1, "added": 0, "removed": 0},
        "op relu -> sigmoid",
    ),
    (
        "insert",
        lambda: _mutated(build_edit=_insert_neg),
        {"changed": 1, "added": 1, "removed": 0},
        "rewired",
    ),
    (
        "remove",
        lambda: _mutated(build_edit=_drop_relu),
        {"changed": 1, "added": 0, "removed": 1},
        "rewired",
    ),
    (
        "weights",
        lambda: _mutated(build_edit=_new_weights),
        {"changed": 1, "added": 0, "removed": 0},
        "values differ",
    ),
]


@pytest.mark.parametrize(
    "make,counts,needle", [c[1:] for c in DIFF_CASES], ids=[c[0] for c in DIFF_CASES]
)
def test_diff_finds_each_kind_of_change(make, counts, needle):
    r = msc.diff(small_cnn_graph(), make())
    assert not r.equal and r.first_difference
    got = {"changed": len(r.changed), "added": len(r.added), "removed": len(r.removed)}
    assert got == counts
    assert needle in str(r)


def test_diff_equal_graphs_and_renamed_nodes_match_by_structure():
    a = small_cnn_graph()
    assert msc.diff(a, small_cnn_graph()).equal
    b = _mutated(lambda t: t.replace('name = "features.1"', 'name = "bn"'))
    r = msc.diff(a, b)
    assert r.equal  # names do not count for structural equality
    assert len(r.matched) == 5 and not r.changed


def test_match_pairs_by_provenance_across_different_structure():
    a = small_cnn_graph()
    b = _mutated(build_edit=_insert_neg)
    m = match(a, b)
    assert len(m.nodes) == 5
    by = {n.name: m.how[id(n)] for n in a.nodes if n.name}
    assert by["features.0"] == "name" and by["classifier"] == "name"


def _two_layers(names: tuple[str, str]) -> Graph:
    """Two layers each multiplying by one shared table (rotary's cos, read by every layer's
    attention); the layers' ``mul`` nodes named ``names`` (a re-export numbers them anew)."""
    g = Graph("t")
    x = g.add_input("x", TensorType(F32, (1, 2, 4, 4)))
    table = g.add_weight("cos", np.ones((1, 2, 4, 4), np.float32))
    for layer, name in enumerate(names):
        x = g.add_node(
            "relu", [x], {}, provenance=Provenance("torch", "aten.relu", f"relu_{layer}")
        ).output
        prov = Provenance("torch", "aten.mul", name, f"layers.{layer}.attn")
        x = g.add_node("mul", [x, table], {}, name=name, provenance=prov).output
    g.set_outputs([x])
    return g


def test_a_shared_weight_does_not_anchor_nodes_by_their_positional_names():
    # A's layer 0 mul is named mul_5, B's layer 1 mul is: the name and the weight agree, but
    # the weight is read by both layers, so it identifies neither; the nodes pair by module.
    a, b = _two_layers(("mul_5", "mul_14")), _two_layers(("mul", "mul_5"))
    m = match(a, b)
    muls = [n for n in a.nodes if n.op == "mul"]
    assert [m.nodes[id(n)].provenance.module for n in muls] == ["layers.0.attn", "layers.1.attn"]
    assert msc.diff(a, b).equivalent


# ---------------------------------------------------------------------------- canonical form
# Each row: one computation spelled two ways (diff: equivalent, naming the known rewrite), and
# a real difference that looks alike (diff: a real change, never explained away).
X4 = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)


def _graph(body) -> Graph:
    g = Graph("t")
    x = g.add_input("x", TensorType(F32, (1, 2, 4, 4)))
    g.set_outputs([body(g, x)])
    return g


def _op(g: Graph, op: str, *ins, **attrs):
    return g.add_node(op, list(ins), attrs).output


def _attention(mask):
    def body(g, x):
        m = None if mask is None else g.add_weight("mask", mask)
        return _op(g, "attention", x, _op(g, "relu", x), x, m, scale=0.5)

    return body


def _guarded(cond):
    def body(g, x):
        y = _op(g, "relu", x)
        c = g.add_weight("dead", np.array(cond).reshape(1, 1, -1, 1))
        return _op(g, "neg", _op(g, "where", c, g.add_weight("zero", np.zeros((), np.float32)), y))

    return body


def _transposed(perm):
    def body(g, x):
        return _op(g, "relu", _op(g, "transpose", _op(g, "relu", x), perm=perm))

    return body


def _sliced(end, axis=3):
    def body(g, x):
        cut = _op(g, "slice", _op(g, "relu", x), starts=[0], ends=[end], axes=[axis], steps=[1])
        return _op(g, "relu", cut)

    return body


def _norm(weight):
    def body(g, x):
        w = None if weight is None else g.add_weight("ln.weight", np.full(4, weight, np.float32))
        return _op(g, "layer_norm", x, w, axis=-1, eps=1e-5)

    return body


def _weight_t(scale, spelled):
    wt = np.arange(16, dtype=np.float32).reshape(4, 4) / 16

    def body(g, x):
        if spelled:  # matmul(x, transpose(W)): W stored as linear's [out, in]
            w = g.add_weight("fc.weight", wt * scale)
            return _op(g, "matmul", x, _op(g, "transpose", w, perm=[1, 0]))
        return _op(g, "linear", x, g.add_weight("fc.weight", wt))

    return body


def _select(k, spelled):
    """x[:, k]: torch.export's select (slice + squeeze) or ONNX's Gather of a 0-d index."""

    def body(g, x):
        if spelled:
            y = _op(g, "slice", x, starts=[k], ends=[k + 1], axes=[1], steps=[1])
            return _op(g, "relu", _op(g, "squeeze", y, axes=[1]))
        i = g.add_weight("i", np.array(1, np.int64))
        return _op(g, "relu", _op(g, "gather", x, i, axis=1))

    return body


def _unit_dims(spelled, last=(2, 4, 1, 4)):
    """x [1, 2, 4, 4] without its 1 and with a 1 before the last dim: squeeze and unsqueeze,
    or the RESHAPEs codegen.tflite writes for both at static shapes."""

    def body(g, x):
        if spelled:
            y = _op(g, "reshape", x, shape=[2, 4, 4])
            return _op(g, "relu", _op(g, "reshape", y, shape=list(last)))
        y = _op(g, "squeeze", x, axes=[0])
        return _op(g, "relu", _op(g, "unsqueeze", y, axes=[2]))

    return body


def _nan_guard(spelled, other=False):
    """where(isnan(x), 0, x) as ONNX writes it, or with x != x (codegen.tflite's IsNaN)."""

    def body(g, x):
        y = _op(g, "relu", x)
        nan = _op(g, "ne", y, x if other else y) if spelled else _op(g, "isnan", y)
        return _op(g, "where", nan, g.add_weight("zero", np.zeros((), np.float32)), y)

    return body


def _runtime_target(spelled, end=None, start=0):
    """x reshaped to its own shape's first two dims and -1, the target computed at run time:
    read through an int32 round trip (codegen.tflite) or not, its shape's end spelled out."""

    def body(g, x):
        dims = _op(g, "shape", x, start=0, end=end)
        lead = _op(g, "slice", dims, starts=[start], ends=[2], axes=[0], steps=[1])
        minus = g.add_weight("minus", np.array([-1], np.int64))
        target = _op(g, "concat", lead, minus, axis=0)
        if spelled:
            target = _op(g, "cast", _op(g, "cast", target, to=DType.INT32), to=DType.INT64)
        return _op(g, "relu", _op(g, "reshape", _op(g, "relu", x), target))

    return body


def _take(k, spelled):
    """x[:, [k, 0]]: ONNX's index (GatherND) or torch.export's gather of one index tensor."""

    def body(g, x):
        i = g.add_weight("i", np.array([k, 0], np.int64))
        if spelled:
            return _op(g, "relu", _op(g, "index", x, i, axes=[1]))
        return _op(g, "relu", _op(g, "gather", x, i, axis=1))

    return body


def _embedding_clamp(hi):
    """Rows of a [4, 3] table at argmax(x) (0..3), the ids clamped into [0, hi] or not (JAX's
    gather clamps its starts; the JAX frontend writes the clamp back)."""

    def body(g, x):
        ids = _op(g, "argmax", x, axis=3, keepdims=False)
        if hi is not None:
            lo, top = (g.add_weight(n, np.array(v, np.int64)) for n, v in (("lo", 0), ("hi", hi)))
            ids = _op(g, "clamp", ids, lo, top)
        w = g.add_weight("table", np.arange(12, dtype=np.float32).reshape(4, 3))
        return _op(g, "relu", _op(g, "embedding", w, ids))

    return body


def _take_fill(hi):
    """Rows of a [4, 3] table at argmax(x) (0..3): the gather, or jnp.take's default mode as
    JAX re-exports it (the index wrapped from the end, its int32 index vectors tested in [0,
    hi], clamped, the gather's rows kept where in bounds and NaN elsewhere); ``hi`` 2 tests
    and clamps below the last row: a change."""

    def body(g, x):
        def c(name, v, dt=np.int64):
            return g.add_weight(name, np.array(v, dt))

        i = _op(g, "argmax", x, axis=3, keepdims=False)
        w = g.add_weight("table", np.arange(12, dtype=np.float32).reshape(4, 3))
        if hi is None:
            return _op(g, "relu", _op(g, "gather", w, i, axis=0))
        wrapped = _op(g, "where", _op(g, "lt", i, c("zero", 0)), _op(g, "add", i, c("d", 4)), i)
        u = _op(g, "cast", _op(g, "unsqueeze", wrapped, axes=[3]), to=DType.INT32)
        lo, top = c("lo", 0, np.int32), c("hi", hi, np.int32)
        both = _op(g, "logical_and", _op(g, "ge", u, lo), _op(g, "le", u, top))
        ok = _op(g, "unsqueeze", _op(g, "reduce_all", both, axes=[3], keepdims=False), axes=[3])
        rows = _op(g, "clamp", _op(g, "squeeze", u, axes=[3]), lo, top)
        kept = _op(g, "where", ok, _op(g, "gather", w, rows, axis=0), c("nan", np.nan, np.float32))
        return _op(g, "relu", kept)

    return body


def _unsqueezed(spelled, back=2):
    """x, or x with a dim put in at 2 and taken out at ``back`` (JAX's gather index vectors;
    ``back`` 0 takes out x's own first dim: a change)."""

    def body(g, x):
        if spelled:
            x = _op(g, "squeeze", _op(g, "unsqueeze", x, axes=[2]), axes=[back])
        return _op(g, "relu", x)

    return body


def _causal(k):
    """Causal attention as the flag, or as a constant mask (JAX's lowering of is_causal):
    np.tri(4, 4, k), k 0 the causal one."""

    def body(g, x):
        if k is None:
            return _op(g, "attention", x, _op(g, "relu", x), x, None, scale=0.5, is_causal=True)
        m = g.add_weight("mask", np.tri(4, 4, k, dtype=bool).reshape(1, 1, 4, 4))
        return _op(g, "attention", x, _op(g, "relu", x), x, m, scale=0.5)

    return body


def _leading_ones(shape, view=False):
    """x * c of a constant c [4] (or relu(x)'s row sums), with leading size-1 dims before it
    (``shape``; None: as it is): numpy's broadcasting aligns from the right."""

    def body(g, x):
        if view:
            c = _op(g, "reduce_sum", _op(g, "relu", x), axes=[0, 1, 2], keepdims=False)
            c = c if shape is None else _op(g, "reshape", c, shape=list(shape))
        else:
            data = np.arange(1, 5, dtype=np.float32)
            c = g.add_weight("c", data if shape is None else data.reshape(shape))
        return _op(g, "mul", x, c)

    return body


def _split_pieces(spelled, at=2):
    """x cut along dim 2 into [2, 2]: a split, or the slices JAX re-exports jnp.split as."""

    def body(g, x):
        if spelled:
            a = _op(g, "slice", x, starts=[0], ends=[at], axes=[2], steps=[1])
            b = _op(g, "slice", x, starts=[at], ends=[4], axes=[2], steps=[1])
        else:
            a, b = g.add_node("split", [x], {"axis": 2, "sizes": [2, 2]}).outputs
        return _op(g, "concat", b, a, axis=2)

    return body


def _topk_indices(spelled, narrow=DType.INT32):
    """The indices of the 2 largest along the last axis, read through an int32 round trip
    (Keras' top_k) or not; ``narrow`` int8 cannot hold every index of a wider axis: a change."""

    def body(g, x):
        i = g.add_node("topk", [x], {"k": 2, "axis": -1, "stable": True}).outputs[1]
        if spelled:
            i = _op(g, "cast", _op(g, "cast", i, to=narrow), to=DType.INT64)
        return _op(g, "neg", i)

    return body


def _topk(k, spelled, stable=True):
    """The k largest along the last axis, in a stable order: ONNX's TopK, or generated
    PyTorch's stable sort and slice (``stable`` False: torch.topk, whose values alone are
    read)."""

    def body(g, x):
        if spelled:
            values, _ = g.add_node(
                "sort", [x], {"axis": -1, "descending": True, "stable": True}
            ).outputs
            y = _op(g, "slice", values, starts=[0], ends=[k], axes=[3], steps=[1])
        else:
            y = g.add_node("topk", [x], {"k": k, "axis": -1, "stable": stable}).outputs[0]
        return _op(g, "relu", y)

    return body


def _clip(lo, hi):
    """ReLU6: the source's hardtanh, or ONNX's Clip of constant bounds (``hi`` None: the op)."""

    def body(g, x):
        if hi is None:
            return _op(g, "relu", _op(g, "hardtanh", x, min=0.0, max=6.0))
        c = lambda n, v: g.add_weight(n, np.array(v, np.float32))  # noqa: E731
        return _op(g, "relu", _op(g, "clamp", x, c("lo", lo), c("hi", hi)))

    return body


def _gelu(half):
    def body(g, x):
        if half is None:
            return _op(g, "gelu", x)
        c = lambda v: g.add_weight(f"c{v}", np.array(v, np.float32))  # noqa: E731
        e = _op(g, "erf", _op(g, "div", x, c(2**0.5)))
        return _op(g, "mul", _op(g, "mul", x, _op(g, "add", e, c(1.0))), c(half))

    return body


def _spelled_attention(mask):
    """softmax(x relu(x)^T * 0.5 + mask) x with the NaN guard exporters add: attention(x,
    relu(x), x, mask, scale=0.5)."""

    def body(g, x):
        kt = _op(g, "transpose", _op(g, "relu", x), perm=[0, 1, 3, 2])
        s = _op(g, "mul", _op(g, "matmul", x, kt), g.add_weight("scale", np.array(0.5, np.float32)))
        p = _op(g, "softmax", _op(g, "add", s, g.add_weight("mask", mask)), axis=-1)
        zero = g.add_weight("zero", np.zeros((), np.float32))
        return _op(g, "matmul", _op(g, "where", _op(g, "isnan", p), zero, p), x)

    return body


def _spelled_layer_norm(eps):
    def body(g, x):
        if eps is None:
            return _op(g, "layer_norm", x, axis=3, eps=1e-5)
        d = _op(g, "sub", x, _op(g, "reduce_mean", x, axes=[-1], keepdims=True))
        two = g.add_weight("two", np.array(2.0, np.float32))
        var = _op(g, "reduce_mean", _op(g, "pow", d, two), axes=[-1], keepdims=True)
        e = g.add_weight("eps", np.array(eps, np.float32))
        return _op(g, "div", d, _op(g, "sqrt", _op(g, "add", var, e)))

    return body


def _sorted(via_topk, largest=False, stable=True, indices=False):
    """x sorted along the last axis (4 elements), ascending unless ``largest``: a stable sort
    (JAX's jnp.sort, ``indices``: jnp.argsort), or a TopK of k = 4 as codegen.onnx writes one
    (ONNX's TopK orders ties by index: ``stable``)."""

    def body(g, x):
        if via_topk:
            attrs = {"k": 4, "axis": -1, "largest": largest, "stable": stable}
            values, idx = g.add_node("topk", [x], attrs).outputs
        elif indices:
            idx = _op(g, "argsort", x, axis=-1, descending=largest, stable=True)
        else:
            attrs = {"axis": -1, "descending": largest, "stable": True}
            values, idx = g.add_node("sort", [x], attrs).outputs
        if indices:
            return _op(g, "relu", _op(g, "cast", idx, to=F32))
        return _op(g, "relu", values)

    return body


ALL_TRUE, ONE_FALSE = np.ones((1, 1, 4, 4), bool), np.eye(4, dtype=bool).reshape(1, 1, 4, 4)
CANONICAL_CASES = [
    # id, A, B (the same computation), B' (a real change), the rewrite diff names
    ("mask", _attention(None), _attention(ALL_TRUE), _attention(ONE_FALSE),
     "attention's no-op mask dropped"),
    ("zero_mask", _attention(None), _attention(np.zeros((1, 1, 4, 4), np.float32)),
     _attention(np.where(ONE_FALSE, 0, -1).astype(np.float32)), "attention's no-op mask dropped"),
    ("spelled_attention", _attention(None),
     _spelled_attention(np.zeros((1, 1, 4, 4), np.float32)),
     _spelled_attention(np.where(ONE_FALSE, 0, -1).astype(np.float32)),
     "spelled-out attention fused"),
    ("layer_norm", _spelled_layer_norm(None), _spelled_layer_norm(1e-5),
     _spelled_layer_norm(1e-3), "spelled-out layer_norm fused"),
    ("where", lambda g, x: _op(g, "neg", _op(g, "relu", x)),
     _guarded([False] * 4), _guarded([False, True, False, False]),
     "where of a constant condition dropped"),
    ("transpose", lambda g, x: _op(g, "relu", _op(g, "relu", x)), _transposed([0, 1, 2, 3]),
     _transposed([0, 1, 3, 2]), "no-op transpose dropped"),
    ("whole slice", lambda g, x: _op(g, "relu", _op(g, "relu", x)), _sliced(4), _sliced(3),
     "no-op slice dropped"),
    ("norm_weight", _norm(None), _norm(1.0), _norm(1.5), "layer_norm's default weight/bias"),
    ("weight_transposed", _weight_t(1.0, False), _weight_t(1.0, True), _weight_t(1.5, True),
     "transpose absorbed into linear"),
    ("gelu", _gelu(None), _gelu(0.5), _gelu(0.6), "spelled-out gelu_erf fused"),
    ("select", _select(1, False), _select(1, True), _select(0, True),
     "slice of one element, squeezed -> gather"),
    ("index", _take(1, False), _take(1, True), _take(0, True), "index of one axis -> gather"),
    ("unit dims", _unit_dims(False), _unit_dims(True), _unit_dims(True, (2, 4, 4, 1)),
     "reshape of size-1 dims -> unsqueeze"),
    ("isnan", _nan_guard(False), _nan_guard(True), _nan_guard(True, other=True),
     "x != x -> isnan"),
    ("topk", _topk(2, False), _topk(2, True), _topk(3, True), "stable topk -> sort + slice"),
    ("int32 indices", _topk_indices(False), _topk_indices(True),
     _topk_indices(True, DType.INT8), "indices through int32 and back dropped"),
    ("clip", _clip(0, None), _clip(0.0, 6.0), _clip(0.0, 5.0),
     "clamp by constant bounds -> hardtanh"),
    ("topk values", _topk(2, True), _topk(2, False, False), _topk(3, False, False),
     "topk's values -> sort + slice"),
    ("sort as topk", _sorted(False), _sorted(True), _sorted(True, largest=True),
     "topk of the whole axis -> sort"),
    ("descending sort as topk", _sorted(False, True), _sorted(True, True), _sorted(True),
     "topk of the whole axis -> sort"),
    # the indices: a TopK that does not order ties is no argsort
    ("argsort as topk", _sorted(False, indices=True), _sorted(True, indices=True),
     _sorted(True, stable=False, indices=True), "topk of the whole axis -> sort"),
    # a clamp below the last row is a real change
    ("embedding clamp", _embedding_clamp(None), _embedding_clamp(3), _embedding_clamp(2),
     "embedding's clamp into its rows dropped"),
    ("unsqueeze undone", _unsqueezed(False), _unsqueezed(True), _unsqueezed(True, 0),
     "squeeze of an unsqueeze's dims dropped"),
    ("take's fill", _take_fill(None), _take_fill(3), _take_fill(2),
     "jnp.take's in-bounds fill around a gather dropped"),
    # a mask that also shows the next key is no causal one
    ("causal mask", _causal(None), _causal(0), _causal(1),
     "attention's causal constant mask -> is_causal"),
    # ones before the last dim broadcast c along another axis: a real change
    ("leading ones", _leading_ones(None), _leading_ones((1, 1, 1, 4)),
     _leading_ones((1, 1, 4, 1)), "a broadcast operand's leading size-1 dims dropped"),
    ("leading ones of a view", _leading_ones(None, True), _leading_ones((1, 1, 4), True),
     _leading_ones((1, 1, 4, 1), True), "a broadcast operand's leading size-1 dims dropped"),
    # pieces cut at another place
    ("split as slices", _split_pieces(False), _split_pieces(True), _split_pieces(True, 1),
     "split -> slices"),
]  # fmt: skip


@pytest.mark.parametrize(
    "a,b,changed,rewrite", [c[1:] for c in CANONICAL_CASES], ids=[c[0] for c in CANONICAL_CASES]
)
def test_canonical_form_explains_spellings_and_keeps_real_changes(a, b, changed, rewrite):
    from msc.analysis.diff import diff_graphs

    r = diff_graphs(_graph(a), _graph(b))
    assert r.equivalent and rewrite in r.verdict(), r.verdict() + str(r)
    r = diff_graphs(_graph(a), _graph(changed))
    assert not r.equivalent and r.real_changes >= 1, r.verdict()


@pytest.mark.parametrize("case", CANONICAL_CASES, ids=[c[0] for c in CANONICAL_CASES])
def test_canonical_form_computes_what_the_graph_did(case):
    pytest.importorskip("torch", reason="run_graph runs msc graphs through codegen.torch")
    from msc.analysis.canonical import canonicalize
    from msc.analysis.model import run_graph

    for body in case[1:4]:
        g = _graph(body)
        c = canonicalize(g)
        (want,), _ = run_graph(g, [X4])
        (got,), _ = run_graph(c.graph, [X4])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _slice(starts, ends, axes):
    return lambda g, x: _op(g, "relu", _op(g, "slice", x, starts=starts, ends=ends, axes=axes,
                                           steps=[1] * len(axes)))  # fmt: skip


def _split(axis):
    def body(g, x):
        a, b = g.add_node("split", [x], {"axis": axis, "sizes": [2, 2]}).outputs
        return _op(g, "sub", a, b)

    return body


def _expand(shape):
    return lambda g, x: _op(g, "relu", _op(g, "expand", x, shape=shape))


def _slice_of_shape(end, start):
    """x reshaped to [-1, two of its dims], read through shape(x)[start:][:2]."""

    def body(g, x):
        last = _op(g, "slice", _op(g, "shape", x, start=0, end=end), starts=[start],
                   ends=[_MAX], axes=[0], steps=[1])  # fmt: skip
        tail = _op(g, "slice", last, starts=[0], ends=[2], axes=[0], steps=[1])
        target = _op(g, "concat", g.add_weight("minus", np.array([-1], np.int64)), tail, axis=0)
        return _op(g, "relu", _op(g, "reshape", _op(g, "relu", x), target))

    return body


_END, _MAX = 2**62, 2**63 - 1
# One computation as two readers spell it (not rewrites: no count), and a real change.
SPELLING_CASES = [
    # TFLite's STRIDED_SLICE names every axis, "to the end" is 2**62; torch.export's one axis
    ("slice of one axis", _slice([0, 0, 1, 0], [_END] * 4, [0, 1, 2, 3]),
     _slice([1], [_MAX], [2]), _slice([2], [_MAX], [2])),
    # a slice that keeps every element (x[:, -2:] of 2 rows): a copy, however it is written
    ("slice of everything", _slice([0, -2, 0, 0], [_END] * 4, [0, 1, 2, 3]),
     _slice([-2], [_MAX], [1]), _slice([-1], [_MAX], [1])),
    ("split axis -1", _split(-1), _split(3), _split(2)),
    # an expand's 1 where the input has its own 1 (TFLite's BROADCAST_TO) keeps that dim: -1
    ("expand keeps a 1", _expand([3, -1, -1, -1]), _expand([3, 2, 4, -1]),
     _expand([4, 2, 4, -1])),
]  # fmt: skip


@pytest.mark.parametrize("a,b,changed", [c[1:] for c in SPELLING_CASES],
                         ids=[c[0] for c in SPELLING_CASES])  # fmt: skip
def test_readers_spellings_are_equal(a, b, changed):
    from msc.analysis.diff import diff_graphs

    r = diff_graphs(_graph(a), _graph(b))
    assert r.equivalent and r.real_changes == 0, r.verdict() + str(r)
    r = diff_graphs(_graph(a), _graph(changed))
    assert not r.equivalent and r.real_changes >= 1, r.verdict()


# A run-time target that no rule can work out (the input's first dim is unknown): how
# codegen.tflite writes it (int32, SHAPE without an end, int32's min as a start) and back.
RUNTIME_TARGET_CASES = [
    ("int32 round trip", _runtime_target(False), _runtime_target(True),
     _runtime_target(True, start=1)),
    ("shape to its end", _slice_of_shape(4, -(2**63)), _slice_of_shape(None, -(2**31 - 1)),
     _slice_of_shape(None, 1)),
]  # fmt: skip


@pytest.mark.parametrize("a,b,changed", [c[1:] for c in RUNTIME_TARGET_CASES],
                         ids=[c[0] for c in RUNTIME_TARGET_CASES])  # fmt: skip
def test_run_time_targets_of_unknown_dims_compare_as_written(a, b, changed):
    from msc.analysis.diff import diff_graphs

    def graph(body) -> Graph:
        g = Graph("t")
        x = g.add_input("x", TensorType(F32, (None, 2, 4, 4)))
        g.set_outputs([body(g, x)])
        return g

    r = diff_graphs(graph(a), graph(b))
    assert not r.equal and r.equivalent and r.real_changes == 0, r.verdict() + str(r)
    r = diff_graphs(graph(a), graph(changed))
    assert not r.equivalent and r.real_changes >= 1, r.verdict()


# ---------------------------------------------------------------------------- render
def _hostile() -> Graph:
    g = Graph('evil "graph"')
    x = g.add_input('in"put\\', TensorType(F32, (2, 3)))
    y = g.add_node(
        "relu",
        [x],
        name='</script><b>"n"',
        provenance=Provenance("torch", "aten.relu", "relu", 'blk."0"'),
    ).output
    g.set_outputs([y])
    return g


def test_render_dot_clusters_and_escaping(tmp_path):
    dot = R.to_dot(small_cnn_graph())
    # One-node modules are not boxed; clusters per module call: tests/analysis/test_page.py
    assert "conv\\nfeatures.0" in dot
    hostile = R.to_dot(_hostile())
    assert 'label="in\\"put\\\\' in hostile
    page = R.to_html(_hostile())
    # Model strings travel only as JSON data, with "<" escaped so nothing ends the script.
    assert "</script><b>" not in page and "\\u003c/script\\u003e\\u003cb\\u003e" in page
    with pytest.raises(MscError, match=".svg, .dot or .html"):
        msc.render(small_cnn_graph(), tmp_path / "g.png")


def test_render_svg_with_graphviz(tmp_path):
    if not R.have_graphviz():
        pytest.skip("graphviz `dot` is not installed (apt-get install graphviz)")
    p = msc.render(small_cnn_graph(), tmp_path / "g.svg")
    svg = p.read_text()
    assert "<svg" in svg and "features.0" in svg
    assert "<svg" in R.to_svg(_hostile())


def test_render_html_needs_no_graphviz(monkeypatch, tmp_path):
    monkeypatch.setattr(R.shutil, "which", lambda name: None)
    p = msc.render(small_cnn_graph(), tmp_path / "g.html")
    page = p.read_text()
    assert page.count("<svg") == 1 and "reduce_mean" in page and 'id="msc-data"' in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # no network
    with pytest.raises(MscError, match="graphviz"):
        msc.render(small_cnn_graph(), tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


def _relu_of(shape_in, shape_out=None, name="x") -> Graph:
    g = Graph("t")
    x = g.add_input(name, TensorType(F32, shape_in))
    n = g.add_node("relu", [x], output_types=[TensorType(F32, shape_out or shape_in)])
    g.set_outputs([n.output])
    return g


def test_diff_reads_a_slice_s_default_axes_and_steps_as_spelled_out():
    # A slice of run-time bounds with its axes and steps left implied (an ONNX Slice of two
    # inputs) and one that spells them (torch's subscript read back): the same slice, which
    # diff counted as a real change ("attr axes: none -> [0], attr steps: [] -> [1]").
    from msc.analysis.diff import diff_graphs

    def graph(**attrs):
        g = Graph("s")
        x = g.add_input("x", TensorType(F32, (6, 4)))
        s = g.add_input("s", TensorType(DType.INT64, (1,)))
        e = g.add_input("e", TensorType(DType.INT64, (1,)))
        g.set_outputs([g.op("slice", x, s, e, **attrs)])
        return g

    r = diff_graphs(graph(), graph(axes=[0], steps=[1]))
    assert r.equivalent and r.real_changes == 0, r.verdict()
    assert diff_graphs(graph(axes=[-2]), graph(axes=[0], steps=[1])).equivalent
    # Another axis or step is still a change.
    assert not diff_graphs(graph(), graph(axes=[1], steps=[1])).equivalent
    assert not diff_graphs(graph(), graph(axes=[0], steps=[2])).equivalent


def test_diff_reads_a_slice_s_constant_axes_and_steps_inputs_as_attributes():
    # One reader passes an ONNX Slice's constant axes and steps as inputs, another as
    # attributes: the same slice ("inputs: 5 -> 3, attr axes: none -> [3]" was a real change
    # that failed convert of a Llama's Relax directory to ONNX). Run-time axes stay a change.
    from msc.analysis.diff import diff_graphs

    def graph(axes_input=None, steps_input=None, **attrs):
        g = Graph("s")
        x = g.add_input("x", TensorType(F32, (2, 3, 4, 8)))
        s = g.add_input("s", TensorType(DType.INT64, (1,)))
        e = g.add_input("e", TensorType(DType.INT64, (1,)))
        ins = [x, s, e]
        if axes_input is not None:
            ins.append(axes_input(g))
        if steps_input is not None:
            ins.append(steps_input(g))
        g.set_outputs([g.op("slice", *ins, **attrs)])
        return g

    def const(*v):
        return lambda g: g.op("constant", value=np.array(v, np.int64))

    spelled = graph(axes=[3], steps=[1])
    r = diff_graphs(graph(const(3), const(1)), spelled)
    assert r.equivalent and r.real_changes == 0, r.verdict()
    assert diff_graphs(graph(const(-1)), spelled).equivalent
    assert not diff_graphs(graph(const(2), const(1)), spelled).equivalent
    runtime = graph(lambda g: g.add_input("a", TensorType(DType.INT64, (1,))))
    assert not diff_graphs(runtime, spelled).equivalent


def test_diff_reads_gather_nd_of_concatenated_indices_of_unknown_shape_as_index():
    # codegen.onnx writes index(x, i, j) as GatherND(x, Concat(Unsqueeze(i, -1), ...)); read
    # back with the indices' dims unknown, that is still the index (Concat takes only i, j of
    # one shape): "op index -> gather_nd, inputs: 3 -> 2" failed convert of BERT's torch
    # directory to ONNX. Indices read from another axis are still a change.
    from msc.analysis.diff import diff_graphs

    def graph(spelling, axes=(0, 1)):
        g = Graph("i")
        x = g.add_input("x", TensorType(F32, (4, 5, 3)))
        i = g.add_input("i", TensorType(DType.INT64, (None, None)))
        j = g.add_input("j", TensorType(DType.INT64, (None, None)))
        if spelling == "index":
            y = g.op("index", x, i, j, axes=list(axes))
        else:
            ui, uj = g.op("unsqueeze", i, axes=[-1]), g.op("unsqueeze", j, axes=[-1])
            y = g.op("gather_nd", x, g.op("concat", ui, uj, axis=-1))
        g.set_outputs([y])
        return g

    r = diff_graphs(graph("index"), graph("gather_nd"))
    assert r.equivalent and r.real_changes == 0, r.verdict()
    assert not diff_graphs(graph("index", axes=(1, 2)), graph("gather_nd")).equivalent


def test_diff_compares_up_to_symbol_renaming_and_unknown_dims():
    # Two exports of one model name a dim s77{1..32} and batch, and one importer's shape
    # inference left a dim unknown: the same graph (it counted a change on every node).
    from msc.analysis.diff import diff_graphs

    a = _relu_of((SymDim("s77", 1, 32), 4))
    b = _relu_of((SymDim("batch"), 4), (None, 4))
    r = diff_graphs(a, b)
    assert r.equivalent and r.real_changes == 0, r.verdict()
    # A dim that changed is still a change, and a symbol cannot stand for two.
    assert not diff_graphs(a, _relu_of((SymDim("batch"), 5))).equivalent
    two = Graph("t")
    xs = [two.add_input(k, TensorType(F32, (SymDim(k), 4))) for k in ("p", "q")]
    two.set_outputs([two.op("concat", *xs, axis=0)])
    one = Graph("t")
    ys = [one.add_input(k, TensorType(F32, (SymDim("n"), 4))) for k in ("p", "q")]
    one.set_outputs([one.op("concat", *ys, axis=0)])
    r = diff_graphs(two, one)
    assert not r.equivalent and "input 1" in " ".join(r.io_changes), r.io_changes


def test_a_size_read_as_a_vector_is_the_scalar_it_holds():
    # torch.export's linear index multiplies by shape(x)[1:2], a 1-element vector; the code
    # codegen.keras writes reads the size as a scalar (msc's Sized layer): the same product.
    from msc.analysis.diff import diff_graphs

    def graph(spelled: bool, axis: int = 1) -> Graph:
        g = Graph("t")
        x = g.add_input("x", TensorType(DType.INT64, (SymDim("batch"), SymDim("seq"), 4)))
        s = g.op("shape", x, start=axis, end=axis + 1)
        g.set_outputs([g.op("mul", x, g.op("squeeze", s, axes=[0]) if spelled else s)])
        return g

    r = diff_graphs(graph(False), graph(True))
    assert r.equivalent and "leading size-1 dims dropped" in r.verdict(), r.verdict()
    assert not diff_graphs(graph(False), graph(True, axis=0)).equivalent  # another size


def test_diff_pairs_nodes_fed_alike_by_the_weights_they_read():
    # Llama's query and key views: concat(shape(x)[:2], [4, 8]) and concat(..., [8, 4]), one
    # input each, the generated Keras computing them in the other order. Paired by position
    # they swapped ("values differ" on both, every consumer "rewired").
    from msc.analysis.diff import diff_graphs

    def graph(order: tuple[str, str]) -> Graph:
        g = Graph("t")
        x = g.add_input("x", TensorType(F32, (SymDim("batch"), SymDim("seq"), 32)))
        lead = g.op("shape", x, start=0, end=2)
        heads = {"q": [4, 8], "k": [8, 4]}
        cat = {}
        for k in order:
            w = g.add_weight(f"sizes{heads[k]}", np.array(heads[k], np.int64))
            cat[k] = g.op("concat", lead, w, axis=0)
        outs = {}
        for k in ("q", "k"):
            node = g.add_node("reshape", [g.op("relu", x), cat[k]], {"shape": None}, name=k)
            outs[k] = node.output
        g.set_outputs([outs["q"], outs["k"]])
        return g

    r = diff_graphs(graph(("q", "k")), graph(("k", "q")))
    assert r.equivalent and not r.changed, str(r)


def test_a_take_of_a_wrapped_flat_index_is_the_index():
    # codegen.keras writes x[i, j] as one take of the flat index j % seq + (i % batch) * seq
    # (each index wrapped into its dim, as index does with a negative one): the same index.
    # A wrap by another dim is not.
    from msc.analysis.diff import diff_graphs

    def graph(spelled: bool, j_dim: int = 1) -> Graph:
        g = Graph("t")
        x = g.add_input("x", TensorType(F32, (SymDim("batch"), SymDim("seq"), 4)))
        i = g.add_input("i", TensorType(DType.INT64, (3,)))
        j = g.add_input("j", TensorType(DType.INT64, (3,)))
        if not spelled:
            g.set_outputs([g.op("index", x, i, j, axes=[0, 1])])
            return g
        size = [g.op("squeeze", g.op("shape", x, start=a, end=a + 1), axes=[0]) for a in (0, 1)]
        at = g.op(
            "add",
            g.op("remainder", j, size[j_dim]),
            g.op("mul", g.op("remainder", i, size[0]), size[1]),
        )
        flat = g.op("flatten", x, start_axis=0, end_axis=1)
        g.set_outputs([g.op("gather", flat, at, axis=0)])
        return g

    r = diff_graphs(graph(False), graph(True))
    assert r.equivalent and "gather of a wrapped linear index -> index" in r.verdict(), str(r)
    assert not diff_graphs(graph(False), graph(True, j_dim=0)).equivalent
