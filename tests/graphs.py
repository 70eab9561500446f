"""Small graphs the foundation tests build (importable by other tests)."""

from __future__ import annotations

import numpy as np

from msc import DType, Graph, Provenance, SymDim, TensorType

F32 = DType.FLOAT32


def mlp(hidden: int = 8, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph("mlp")
    x = g.add_input("x", TensorType(F32, (SymDim("batch", 1, 32), 4)))
    w1 = g.add_weight("layers.0.weight", rng.standard_normal((hidden, 4)).astype(np.float32))
    b1 = g.add_weight("layers.0.bias", rng.standard_normal(hidden).astype(np.float32))
    w2 = g.add_weight("layers.2.weight", rng.standard_normal((2, hidden)).astype(np.float32))
    h = g.add_node(
        "linear",
        [x, w1, b1],
        name="layers.0",
        provenance=Provenance("torch", "aten.linear.default", "linear", "layers.0"),
    ).output
    h = g.op("gelu", h, approximate="tanh")
    y = g.add_node("linear", [h, w2, None], name="layers.2", output_names=["y"]).output
    g.set_outputs([y])
    return g.validate()


def two_outputs() -> Graph:
    """split + softmax + a comparison, with bool and int64 values."""
    g = Graph("two_outputs")
    x = g.add_input("x", TensorType(F32, (2, 6)))
    ids = g.add_input("ids", TensorType(DType.INT64, (3,)))
    a, b = g.add_node("split", [x], {"axis": 1, "sizes": [2, 4]}).outputs
    s = g.op("softmax", b, axis=-1)
    m = g.op("gt", a, g.op("constant", value=np.zeros((), np.float32)))
    e = g.add_node("gather", [s, ids], {"axis": 1}, name="pick", output_names=["picked"]).output
    g.set_outputs([e, m])
    return g.validate()


def with_subgraph() -> Graph:
    g = Graph("cond")
    c = g.add_input("c", TensorType(DType.BOOL, ()))
    x = g.add_input("x", TensorType(F32, (2,)))
    t = Graph("then")
    t.set_outputs([t.op("relu", x)])
    e = Graph("else")
    e.set_outputs([e.op("neg", x)])
    n = g.add_node("if", [c], {"then_branch": t, "else_branch": e}, name="branch")
    g.set_outputs(n.outputs)
    return g.validate()


ALL = {"mlp": mlp, "two_outputs": two_outputs, "with_subgraph": with_subgraph}
