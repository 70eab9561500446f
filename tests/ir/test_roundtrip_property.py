"""Hypothesis: random valid graphs survive the text format and save/load unchanged."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msc
from msc import DType, Graph, Provenance, SymDim, TensorType

DTYPES = [DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT64]
names = st.text(min_size=0, max_size=12)
UNARY = ["relu", "neg", "exp", "tanh", "sigmoid", "abs", "identity"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@st.composite
def graphs(draw):
    g = Graph(draw(names))
    dt = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    if draw(st.booleans()):
        shape[0] = SymDim(draw(names.filter(bool)), draw(st.sampled_from([None, 1])), None)
    t = TensorType(dt, shape)
    used: set[str] = set()

    def fresh():
        # Digit-only names are what the graph generates for unnamed values; avoid clashes.
        n = draw(names.filter(lambda s: s not in used and not s.isdigit()))
        used.add(n)
        return n

    values = [g.add_input(fresh(), t) for _ in range(draw(st.integers(1, 3)))]
    static = [d if isinstance(d, int) else 1 for d in shape]
    for i in range(draw(st.integers(0, 2))):
        arr = np.asarray(draw(st.lists(st.floats(-4, 4, width=16), min_size=1, max_size=1))[0])
        w = g.add_weight(f"{fresh()}.{i}", np.full(static[-1:], arr, dtype=dt.to_numpy()))
        values.append(w)
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "softmax", "leaky", "const"]))
        out = [fresh() if draw(st.booleans()) else None]
        prov = Provenance(*(draw(names) for _ in range(4)))
        nm = draw(names)
        a = draw(st.sampled_from(values))
        if kind == "unary":
            n = g.add_node(
                draw(st.sampled_from(UNARY)), [a], output_names=out, name=nm, provenance=prov
            )
        elif kind == "binary":
            b = draw(st.sampled_from(values))
            n = g.add_node(draw(st.sampled_from(BINARY)), [a, b], output_names=out, name=nm)
        elif kind == "softmax":
            n = g.add_node(
                "softmax", [a], {"axis": draw(st.integers(-rank, rank - 1))}, output_names=out
            )
        elif kind == "leaky":
            slope = draw(st.floats(allow_nan=True, allow_infinity=True))
            n = g.add_node("leaky_relu", [a], {"negative_slope": slope}, output_names=out)
        else:
            c = draw(st.floats(-6e4, 6e4))
            n = g.add_node(
                "constant", [], {"value": np.array(c, dtype=dt.to_numpy())}, output_names=out
            )
            n = g.add_node("mul", [a, n.output])
        values.append(n.output)
    k = draw(st.integers(1, min(3, len(values))))
    g.set_outputs(draw(st.permutations(values))[:k])
    if draw(st.booleans()):
        g.meta[draw(names)] = draw(
            st.one_of(st.integers(), st.floats(), names, st.lists(st.integers(), max_size=3))
        )
    return g.validate()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_text_roundtrip_is_identity(g):
    text = msc.to_text(g)
    again = msc.from_text(text)
    assert msc.to_text(again) == text
    msc.assert_structural_equal(g, again, names=True, weights="types")
    assert msc.structural_hash(g, names=True, weights="types") == msc.structural_hash(
        again, names=True, weights="types"
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(g=graphs())
def test_save_load_roundtrip_is_identity(tmp_path_factory, g):
    d = tmp_path_factory.mktemp("g") / "saved"
    msc.save(g, d)
    again = msc.load(d)
    msc.assert_structural_equal(g, again, names=True)
    assert msc.structural_hash(g, names=True) == msc.structural_hash(again, names=True)
