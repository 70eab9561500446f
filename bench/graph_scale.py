"""Graph machinery at scale: a synthetic graph of 10k, 125k (and with --million, 1M) nodes
through validate, print, parse, hash, equality and save/load, in µs per node and MB per 1k
nodes (peak traced allocation), next to the same work on the equivalent ONNX ModelProto
(serialize, parse, checker) measured in the same run.

    python bench/graph_scale.py [--sizes 10000 125000] [--million] [--repeat 3] [--json FILE]

Each step is timed after a full garbage collection, so one step does not pay for the garbage
of the one before; "cpu" is process CPU time (steadier than wall time on a shared machine),
"sys" the part of it spent in the kernel (page faults on memory touched for the first time).
Targets (issue 16): parse and load at most 8 µs a node, the rest at most 4 µs, at every size.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msc  # noqa: E402
from msc import DType, Graph, TensorType  # noqa: E402

OPS = ["relu", "tanh", "sigmoid", "neg"]


TARGETS_US = {"parse": 8.0, "load": 8.0}  # µs per node; every other step: 4.0
STEPS = ["validate", "print", "parse", "structural_hash", "structural_equal", "save", "load"]


def build(n: int) -> Graph:
    """A residual chain of ``n`` nodes: every 5th pair adds a skip connection and a small
    weight (a named weight, node names and provenance as frontends give them)."""
    g = Graph("synthetic")
    f32 = DType.FLOAT32
    v = g.add_input("x", TensorType(f32, (1, 16)))
    skip = v
    i = 0
    while len(g.nodes) < n:
        i += 1
        if i % 4 == 3 and len(g.nodes) + 2 <= n:
            w = g.add_weight(f"blocks.{i}.scale", np.full((16,), 1.0 + i % 7, np.float32))
            v = g.add_node("mul", [g.op("add", v, skip), w], name=f"blocks.{i}").output
            skip = v
        else:
            v = g.add_node(OPS[i % 4], [v], name=f"n{i}").output
    g.set_outputs([v])
    return g


def timed_cpu(fn, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn`` over ``repeat`` runs, each after gc.collect()."""
    wall, cpu, _ = timed_sys(fn, repeat)
    return wall, cpu


def timed_sys(fn, repeat: int) -> tuple[float, float, float]:
    """As timed_cpu, and the median of the CPU time spent in the kernel (system time: mostly
    page faults on memory the step touches for the first time)."""
    wall, cpu, kernel = [], [], []
    for _ in range(repeat):
        gc.collect()
        s = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        kernel.append(resource.getrusage(resource.RUSAGE_SELF).ru_stime - s)
    return statistics.median(wall), statistics.median(cpu), statistics.median(kernel)


def peak_mb(fn) -> float:
    """Peak traced allocation (MB) while ``fn`` runs, including what it returns."""
    gc.collect()
    tracemalloc.start()
    keep = fn()  # noqa: F841 - held so the result counts
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del keep
    return peak / (1 << 20)


def scale_row(n: int, repeat: int, tmp: Path) -> dict:
    """Per-node figures for one size: µs per node (wall, cpu) and MB per 1k nodes."""
    g, g2 = build(n), build(n)
    text = msc.to_text(g)
    d = tmp / f"g{n}"
    msc.save(g, d)
    fns = {
        "validate": g.validate,
        "print": lambda: msc.to_text(g),
        "parse": lambda: msc.from_text(text),
        "structural_hash": lambda: msc.structural_hash(g),
        "structural_equal": lambda: msc.structural_equal(g, g2),
        "save": lambda: msc.save(g, d),
        "load": lambda: msc.load(d),
    }
    nodes = len(g.nodes)
    out: dict = {"nodes": nodes, "steps": {}}
    for step in STEPS:
        wall, cpu, kernel = timed_sys(fns[step], repeat)
        out["steps"][step] = {
            "us_per_node": wall / nodes * 1e6,
            "cpu_us_per_node": cpu / nodes * 1e6,
            "sys_us_per_node": kernel / nodes * 1e6,
            "target_us": TARGETS_US.get(step, 4.0),
        }
    for step in ("parse", "load"):
        out["steps"][step]["mb_per_1k"] = peak_mb(fns[step]) / nodes * 1000
    fns.clear()
    g = g2 = text = None  # free them before measuring the build
    out["steps"]["build"] = {"mb_per_1k": peak_mb(lambda: build(n)) / nodes * 1000}
    return out


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=125_000, help="size of the peer comparison")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 125_000])
    ap.add_argument("--million", action="store_true", help="also 1M nodes (~1 min, ~3 GB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-peer", action="store_true", help="skip the ONNX comparison")
    ap.add_argument("--json", default="bench/results/graph_scale.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="msc-graph-scale-"))
    atexit.register(shutil.rmtree, tmp, True)  # GBs of graphs at a million nodes
    sizes = list(args.sizes) + ([1_000_000] if args.million else [])

    print(f"graph machinery per node (median of {args.repeat}; wall and process CPU)")
    print(
        f"{'step':<18}"
        + "".join(f" {f'{n // 1000}k us':>9} {'cpu':>6} {'sys':>5} {'MB/1k':>6}" for n in sizes)
        + "  target"
    )
    scale = [scale_row(n, args.repeat, tmp) for n in sizes]
    for step in STEPS + ["build"]:
        line = f"{step:<18}"
        for row in scale:
            r = row["steps"][step]
            us = (
                f"{r['us_per_node']:9.2f} {r['cpu_us_per_node']:6.2f} {r['sys_us_per_node']:5.2f}"
                if "us_per_node" in r
                else " " * 22
            )
            mb = f"{r['mb_per_1k']:6.2f}" if "mb_per_1k" in r else " " * 6
            line += f" {us} {mb}"
        tgt = scale[0]["steps"][step].get("target_us")
        print(line + (f"  <= {tgt:g} us" if tgt else ""))

    rows = []
    if not args.no_peer:
        rows = peer_rows(args.nodes, args.repeat, tmp)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps({"nodes": args.nodes, "rows": rows, "scale": scale}, indent=2) + "\n"
    )


def peer_rows(n: int, repeat: int, tmp: Path) -> list[dict]:
    """msc next to onnx on the same graph, in seconds (the table bench/run.py shows)."""
    t = time.perf_counter()
    g = build(n)
    build_s = time.perf_counter() - t
    g2 = build(n)
    text = msc.to_text(g)
    onnx, model = to_onnx(g)
    blob = model.SerializeToString()

    def tm(fn):
        return timed_cpu(fn, repeat)[0]

    rows = [
        ("build (Graph API)", build_s, None, None),
        (
            "validate",
            tm(g.validate),
            "onnx.checker.check_model",
            tm(lambda: onnx.checker.check_model(model)),
        ),
        (
            "print (to_text)",
            tm(lambda: msc.to_text(g)),
            "ModelProto.SerializeToString",
            tm(model.SerializeToString),
        ),
        (
            "parse (from_text)",
            tm(lambda: msc.from_text(text)),
            "onnx.load_from_string",
            tm(lambda: onnx.load_from_string(blob)),
        ),
        ("structural_hash", tm(lambda: msc.structural_hash(g)), None, None),
        ("structural_equal", tm(lambda: msc.structural_equal(g, g2)), None, None),
        (
            "save",
            tm(lambda: msc.save(g, tmp / "g")),
            "onnx.save",
            tm(lambda: onnx.save(model, str(tmp / "m.onnx"))),
        ),
        (
            "load",
            tm(lambda: msc.load(tmp / "g")),
            "onnx.load",
            tm(lambda: onnx.load(str(tmp / "m.onnx"))),
        ),
    ]
    print(
        f"\nnext to onnx: {len(g.nodes)} nodes, {len(g.weights)} weights, median of {repeat} runs"
    )
    print(f"{'step':<20} {'msc s':>8}   {'peer':<30} {'peer s':>8} {'msc/peer':>9}")
    out = []
    for step, s, peer, ps in rows:
        ratio = f"{s / ps:9.2f}" if ps else " " * 9
        print(f"{step:<20} {s:8.3f}   {peer or '-':<30} {ps if ps else float('nan'):8.3f} {ratio}")
        out.append(
            {"step": step, "msc_s": s, "peer": peer, "peer_s": ps, "ratio": s / ps if ps else None}
        )
    return out


if __name__ == "__main__":
    main()
