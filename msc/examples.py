"""Small built-in examples used by ``msc demo`` and the tests."""

from __future__ import annotations

import tempfile
from typing import TextIO

import numpy as np

from msc.ir import DType, Graph, Provenance, SymDim, TensorType

__all__ = ["small_cnn_graph", "demo"]


def small_cnn_graph(seed: int = 0) -> Graph:
    """conv -> batch_norm -> relu -> global mean -> linear, with a symbolic batch dim and
    PyTorch-style dotted weight names."""
    rng = np.random.default_rng(seed)
    f32 = DType.FLOAT32
    g = Graph("small_cnn")
    x = g.add_input("x", TensorType(f32, (SymDim("batch", 1, 64), 3, 16, 16)))

    def w(name: str, *shape: int) -> object:
        return g.add_weight(name, rng.standard_normal(shape).astype(np.float32))

    conv = g.add_node(
        "conv",
        [x, w("features.0.weight", 8, 3, 3, 3), w("features.0.bias", 8)],
        {"stride": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1},
        name="features.0",
        provenance=Provenance("torch", "aten.conv2d.default", "conv2d", "features.0"),
    ).output
    bn = g.add_node(
        "batch_norm",
        [
            conv,
            w("features.1.weight", 8),
            w("features.1.bias", 8),
            w("features.1.running_mean", 8),
            g.add_weight("features.1.running_var", rng.uniform(0.5, 2, 8).astype(np.float32)),
        ],
        {"eps": 1e-5},
        name="features.1",
    ).output
    act = g.op("relu", bn)
    pooled = g.op("reduce_mean", act, axes=[2, 3], keepdims=False)
    logits = g.add_node(
        "linear",
        [pooled, w("classifier.weight", 10, 8), w("classifier.bias", 10)],
        name="classifier",
        output_names=["logits"],
    ).output
    g.set_outputs([logits])
    g.meta["producer"] = "msc.examples"
    return g.validate()


def demo(out: TextIO) -> int:
    """Build the small CNN graph, print it, save and reload it, and prove it is unchanged."""
    import msc

    g = small_cnn_graph()
    text = msc.to_text(g)
    out.write(text)
    with tempfile.TemporaryDirectory() as d:
        msc.save(g, d + "/small_cnn")
        again = msc.load(d + "/small_cnn")
    r = msc.structural_equal(g, again, names=True)
    same_text = msc.to_text(again) == text
    out.write(
        f"\nsaved and reloaded: structurally equal = {bool(r)}, "
        f"text identical = {same_text}, hash = {msc.structural_hash(g)}\n"
    )
    return 0 if r and same_text else 1
