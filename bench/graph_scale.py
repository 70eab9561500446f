"""Graph machinery at scale: a synthetic 100k-node graph through print, parse, hash, equality
and save/load, next to the same work on the equivalent ONNX ModelProto (serialize, parse,
checker) measured in the same run.

    python bench/graph_scale.py [--nodes 100000] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msc  # noqa: E402
from msc import DType, Graph, TensorType  # noqa: E402

OPS = ["relu", "tanh", "sigmoid", "neg"]


def build(n: int) -> Graph:
    """A residual chain: every 4th node adds a skip connection and a small weight."""
    g = Graph("synthetic")
    f32 = DType.FLOAT32
    v = g.add_input("x", TensorType(f32, (1, 16)))
    skip = v
    for i in range(n):
        if i % 4 == 3:
            w = g.add_weight(f"blocks.{i}.scale", np.full((16,), 1.0 + i % 7, np.float32))
            v = g.add_node("mul", [g.op("add", v, skip), w], name=f"blocks.{i}").output
            skip = v
        else:
            v = g.add_node(OPS[i % 4], [v], name=f"n{i}").output
    g.set_outputs([v])
    return g


def to_onnx(g: Graph):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    names = {
        "relu": "Relu",
        "tanh": "Tanh",
        "sigmoid": "Sigmoid",
        "neg": "Neg",
        "add": "Add",
        "mul": "Mul",
    }
    nodes = [
        helper.make_node(
            names[n.op], [v.name for v in n.inputs], [v.name for v in n.outputs], name=n.name
        )
        for n in g.nodes
    ]
    inits = [numpy_helper.from_array(w.numpy(), w.name) for w in g.weights.values()]
    graph = helper.make_graph(
        nodes,
        g.name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info(g.outputs[0].name, TensorProto.FLOAT, [1, 16])],
        inits,
    )
    return onnx, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="bench/results/graph_scale.json")
    args = ap.parse_args()

    t = time.perf_counter()
    g = build(args.nodes)
    build_s = time.perf_counter() - t
    g2 = build(args.nodes)
    text = msc.to_text(g)
    onnx, model = to_onnx(g)
    blob = model.SerializeToString()
    tmp = Path(tempfile.mkdtemp())

    rows = [
        ("build (Graph API)", build_s, None, None),
        (
            "validate",
            timed(g.validate, args.repeat),
            "onnx.checker.check_model",
            timed(lambda: onnx.checker.check_model(model), args.repeat),
        ),
        (
            "print (to_text)",
            timed(lambda: msc.to_text(g), args.repeat),
            "ModelProto.SerializeToString",
            timed(model.SerializeToString, args.repeat),
        ),
        (
            "parse (from_text)",
            timed(lambda: msc.from_text(text), args.repeat),
            "onnx.load_from_string",
            timed(lambda: onnx.load_from_string(blob), args.repeat),
        ),
        ("structural_hash", timed(lambda: msc.structural_hash(g), args.repeat), None, None),
        ("structural_equal", timed(lambda: msc.structural_equal(g, g2), args.repeat), None, None),
        (
            "save",
            timed(lambda: msc.save(g, tmp / "g"), args.repeat),
            "onnx.save",
            timed(lambda: onnx.save(model, str(tmp / "m.onnx")), args.repeat),
        ),
        (
            "load",
            timed(lambda: msc.load(tmp / "g"), args.repeat),
            "onnx.load",
            timed(lambda: onnx.load(str(tmp / "m.onnx")), args.repeat),
        ),
    ]
    print(
        f"graph machinery, {len(g.nodes)} nodes, {len(g.weights)} weights, "
        f"median of {args.repeat} runs"
    )
    print(f"{'step':<20} {'msc s':>8}   {'peer':<30} {'peer s':>8} {'msc/peer':>9}")
    out = []
    for step, s, peer, ps in rows:
        ratio = f"{s / ps:9.2f}" if ps else " " * 9
        print(f"{step:<20} {s:8.3f}   {peer or '-':<30} {ps if ps else float('nan'):8.3f} {ratio}")
        out.append(
            {"step": step, "msc_s": s, "peer": peer, "peer_s": ps, "ratio": s / ps if ps else None}
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"nodes": len(g.nodes), "rows": out}, indent=2) + "\n")


if __name__ == "__main__":
    main()
