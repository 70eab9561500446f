"""msc.rewrite: patterns as source graphs (built or parsed) and as matcher functions.

Every rewrite is checked numerically: the original and the rewritten graph run through
codegen.torch on the same random inputs and must agree. The negative cases (an intermediate
that escapes, a constant that differs, a dtype that differs) must leave the graph as it was.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import msc
from msc.ir import DType, Graph, TensorType, Value
from msc.ir.builder import Builder
from msc.ops.rewrite import Match, Pattern, constant_value, node_of, rewrite

torch = pytest.importorskip("torch", reason="the rewrites are checked by running generated code")
import codegen.torch as ctorch  # noqa: E402

F32 = DType.FLOAT32


def run(g: Graph, feeds: list[np.ndarray]) -> list[np.ndarray]:
    m = ctorch.to_module(g)
    with torch.no_grad():
        out = m(*[torch.from_numpy(a) for a in feeds])
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in out]


def same_outputs(a: Graph, b: Graph, tol: float = 1e-5, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(v.type.shape).astype(np.float32) for v in a.inputs]
    for x, y in zip(run(a, feeds), run(b, feeds)):
        np.testing.assert_allclose(y, x, rtol=tol, atol=tol)


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


# ---------------------------------------------------------------------- patterns
def silu_pattern() -> Pattern:
    """x * sigmoid(x) -> silu(x), the replacement written as a graph."""
    b = Builder()
    x = Value("x", TensorType(F32, None))
    y = b.op("mul", x, b.op("sigmoid", x))
    rep = Graph("silu")
    rx = rep.add_input("x", TensorType(F32, None))
    rep.set_outputs([rep.op("silu", rx)])
    return Pattern("silu", [x], [y], replace=rep)


GELU_TEXT = """msc format 1, ops 1
graph gelu {
  input %x: f32[*]
  %half: f32[] = constant() {value = tensor(f32[], [0.5])}
  %one: f32[] = constant() {value = tensor(f32[], [1.0])}
  %rsqrt2: f32[] = constant() {value = tensor(f32[], [0.70710678])}
  %a: f32[*] = mul(%x, %rsqrt2)
  %e: f32[*] = erf(%a)
  %p: f32[*] = add(%e, %one)
  %h: f32[*] = mul(%x, %half)
  %y: f32[*] = mul(%h, %p)
  output %y
}
"""


def gelu_pattern() -> Pattern:
    """The erf GELU as parsed text; its constants must match."""
    return Pattern.from_graph(
        "gelu", msc.from_text(GELU_TEXT), replace=lambda b, m: b.op("gelu", m["x"])
    )


def linear_pattern() -> Pattern:
    """matmul(x, w) + bias -> linear(x, w^T, bias) when w is a 2-d constant."""
    b = Builder()
    x, w, bias = (Value(n, TensorType(F32, None)) for n in ("x", "w", "bias"))
    y = b.op("add", b.op("matmul", x, w), bias)

    def check(m: Match) -> bool:
        w = m.const("w")
        return w is not None and w.ndim == 2 and m["bias"].type.shape == (w.shape[1],)

    def replace(b: Builder, m: Match) -> Value:
        wt = np.ascontiguousarray(m.const("w").T)
        weight = m.graph.add_weight(m["w"].name + ".T", wt)
        return b.op("linear", m["x"], weight, m["bias"])

    return Pattern("linear", [x, w, bias], [y], replace=replace, check=check)


def double_relu_matcher() -> Pattern:
    """relu(relu(x)) -> relu(x), found by a matcher function."""

    def matcher(node):
        inner = node_of(node.inputs[0], "relu") if node.op == "relu" else None
        if inner is None:
            return None
        return Match(node, [node, inner], {"x": inner.inputs[0]})

    return Pattern("relu_relu", matcher=matcher, replace=lambda b, m: b.op("relu", m["x"]))


# ---------------------------------------------------------------------- graphs
def gelu_graph(half: float = 0.5, escape: bool = False) -> Graph:
    g = Graph("mlp")
    x = g.add_input("x", TensorType(F32, (3, 8)))
    w = g.add_weight("fc.weight", np.random.default_rng(1).standard_normal((8, 16), np.float32))
    bias = g.add_weight("fc.bias", np.random.default_rng(2).standard_normal(16, np.float32))
    h = g.op("add", g.op("matmul", x, w), bias)
    c = lambda v: g.op("constant", value=np.array(v, np.float32))  # noqa: E731
    e = g.op("erf", g.op("mul", h, c(1 / math.sqrt(2))))
    # Written the other way round from the pattern: 1 + e, and 0.5 * x.
    y = g.op("mul", g.op("mul", c(half), h), g.op("add", c(1.0), e))
    g.set_outputs([y, e] if escape else [y])
    return g.validate()


def test_source_graph_pattern_with_constants() -> None:
    g = gelu_graph()
    before = msc.to_text(g)
    out = rewrite(g, [gelu_pattern()])
    assert msc.to_text(g) == before, "rewrite changed its input graph"
    assert ops(out) == ["matmul", "add", "gelu"]
    assert out.outputs[0].name == g.outputs[0].name
    same_outputs(g, out)


def test_patterns_compose_and_weights_transpose() -> None:
    g = gelu_graph()
    out = rewrite(g, [linear_pattern(), gelu_pattern()])
    assert ops(out) == ["linear", "gelu"]
    lin = out.nodes[0]
    assert lin.inputs[1].type.shape == (16, 8)
    assert "fc.weight" not in out.weights, "a weight nothing uses is left behind"
    same_outputs(g, out)


def test_no_match_when_a_constant_differs() -> None:
    g = gelu_graph(half=0.6)
    out = rewrite(g, [gelu_pattern()])
    assert "gelu" not in ops(out)
    assert msc.to_text(out) == msc.to_text(g)


def test_no_match_when_an_intermediate_escapes() -> None:
    g = gelu_graph(escape=True)  # erf(...) is also a graph output
    out = rewrite(g, [gelu_pattern()])
    assert "gelu" not in ops(out)
    same_outputs(g, out)


def test_no_match_when_an_intermediate_has_another_use() -> None:
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (4,)))
    s = g.op("sigmoid", x)
    g.set_outputs([g.op("add", g.op("mul", x, s), g.op("exp", s))])
    assert "silu" not in ops(rewrite(g, [silu_pattern()]))


def test_commutative_inputs_and_graph_output_names() -> None:
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (2, 5)))
    a = g.op("mul", g.op("sigmoid", x), x)  # sigmoid(x) * x: the pattern swapped
    g.set_outputs([a, g.op("mul", x, g.op("sigmoid", x))])
    out = rewrite(g, [silu_pattern()])
    assert ops(out) == ["silu", "silu"]
    assert [v.name for v in out.outputs] == [v.name for v in g.outputs]
    same_outputs(g, out)


def test_types_constrain_wildcards() -> None:
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT64, (3,)))
    g.set_outputs([g.op("mul", x, g.op("sigmoid", x))])
    assert "silu" not in ops(rewrite(g, [silu_pattern()]))
    p = silu_pattern()
    p.any_dtype = True
    p.replace = lambda b, m: b.op("silu", m["x"])
    assert ops(rewrite(g, [p])) == ["silu"]


def test_wildcard_binds_one_value() -> None:
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (3,)))
    y = g.add_input("y", TensorType(F32, (3,)))
    g.set_outputs([g.op("mul", x, g.op("sigmoid", y))])  # not x * sigmoid(x)
    assert "silu" not in ops(rewrite(g, [silu_pattern()]))


def test_matcher_function_pattern_and_rounds() -> None:
    g = Graph("g")
    x = g.add_input("x", TensorType(F32, (6,)))
    g.set_outputs([g.op("relu", g.op("relu", g.op("relu", x)))])
    out = rewrite(g, [double_relu_matcher()])
    assert ops(out) == ["relu"]
    assert out.outputs[0].name == g.outputs[0].name
    same_outputs(g, out)


def test_declining_replacement_leaves_the_graph() -> None:
    g = gelu_graph()
    p = Pattern.from_graph("gelu", msc.from_text(GELU_TEXT), replace=lambda b, m: None)
    assert msc.to_text(rewrite(g, [p])) == msc.to_text(g)


def test_replacement_of_another_dtype_is_an_error() -> None:
    g = gelu_graph()
    bad = Pattern.from_graph(
        "gelu",
        msc.from_text(GELU_TEXT),
        replace=lambda b, m: b.op("cast", m["x"], to=DType.FLOAT64),
    )
    with pytest.raises(msc.GraphError, match="gelu"):
        rewrite(g, [bad])


def test_constant_value() -> None:
    g = gelu_graph()
    assert constant_value(g.weights["fc.bias"]).shape == (16,)
    assert constant_value(g.inputs[0]) is None
