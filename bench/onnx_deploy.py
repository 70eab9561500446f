"""msc's ONNX files against torch.onnx's, as a deployment engineer sees them (issue 34).

    python bench/onnx_deploy.py [--quick] [--iters 20] [--loads 5]
        [--models resnet50 bert-base gpt2 llama-100m vit-b16 mobilenetv3]

Per model (bench/models.py), the files of one export: msc's optimized file (the default),
msc's written node for node (``optimize=False``), for transformers msc's file for onnxruntime's
transformer optimizer (``msc convert --for ort-optimizer``: attention as MatMul/Softmax, since
the optimizer's shape inference reads ONNX ``Attention`` as com.microsoft's and gives up;
``codegen.onnx.CONSUMERS``), torch.onnx's (dynamo, its own opset). For each, in one process,
one onnxruntime thread, CPU provider:

- nodes: the file's node count, ``Constant`` nodes among them, initializers;
- ort nodes: the node count after onnxruntime's own optimizations (ORT_ENABLE_ALL), read from
  the optimized model onnxruntime writes;
- session fusions: the fused ops in that optimized graph (``session_fusions``): com.microsoft
  ops (FusedConv, FusedGemm, FusedMatMul, SkipLayerNormalization, BiasGelu, FastGelu, ...),
  NCHWc convs that took an activation or a residual add (``FusedConv``), and ONNX's own fused
  kernels where the file has them (``Attention``: one kernel for what torch.onnx spells as
  MatMul/Softmax, where the session fuses the scaled Q K^T into a FusedMatMul);
- load: median session-creation CPU time of the process (``--loads`` sessions each,
  interleaved);
- run: median ``session.run`` CPU time of the calling thread (one onnxruntime thread runs on
  it; calls interleaved across the files, as bench/measure.race); the wall times of both are
  recorded too (``load_wall_s``, ``run_wall_s``): on a shared machine they also count the time
  other processes held the core;
- fusions: onnxruntime.transformers.optimizer's fused-op statistics (model type bert for BERT,
  vit for ViT, gpt2 for GPT-2 and Llama; not run for CNNs), or the error it raised. Its
  "Attention" count includes ONNX's own ``Attention`` op, which it does not fuse but counts.

Outputs are checked against the eager model first (bench/measure.compare). Prints one line per
file and model; ``--json PATH`` also writes the figures there (bench/results/onnx_deploy.json
is what bench/report.py puts in docs/performance.md); nothing else is written outside a
temporary directory.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MODEL_TYPES = {"bert-base": "bert", "gpt2": "gpt2", "llama-100m": "gpt2", "vit-b16": "vit"}


def _options(level=None):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.log_severity_level = 3
    if level is not None:
        o.graph_optimization_level = level
    return o


def _session(path: Path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), _options(), providers=["CPUExecutionProvider"])


def _ort_graph(path: Path, tmp: Path):
    """The graph onnxruntime's session runs (ORT_ENABLE_ALL), as the ModelProto it writes."""
    import onnx
    import onnxruntime as ort

    out = tmp / f"{path.stem}.ort.onnx"
    o = _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    o.optimized_model_filepath = str(out)
    ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
    return onnx.load(str(out), load_external_data=False)


# ONNX ops that are one fused kernel in onnxruntime's session (the file's, not a fusion of its).
_NATIVE_FUSED = ("Attention",)


def session_fusions(model) -> dict[str, int]:
    """The fused ops of a session's optimized graph (an onnx ModelProto), by name: com.microsoft
    ops, NCHWc convs with a fused activation or residual add (as FusedConv), ONNX Attention."""
    found: collections.Counter[str] = collections.Counter()
    for n in model.graph.node:
        if n.domain == "com.microsoft":
            found[n.op_type] += 1
        elif n.domain == "com.microsoft.nchwc" and n.op_type == "Conv":
            if any(a.name == "activation" for a in n.attribute) or len(n.input) > 3:
                found["FusedConv"] += 1
        elif n.domain in ("", "ai.onnx") and n.op_type in _NATIVE_FUSED:
            found[n.op_type] += 1
    return dict(sorted(found.items()))


def _fusions(path: Path, model_type: str | None) -> dict[str, int] | str | None:
    """The optimizer's fused-op counts (non-zero ones), its error as a string, or None."""
    if model_type is None:
        return None
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = optimize_model(str(path), model_type=model_type, opt_level=0)
        stats = m.get_fused_operator_statistics()
    except Exception as e:  # noqa: BLE001 - the optimizer's own failure is a result here
        return f"error: {type(e).__name__}: {str(e)[:80]}"
    return {k: v for k, v in sorted(stats.items()) if v}


def _said(fusions: dict[str, int] | str | None) -> str:
    if fusions is None:
        return "-"
    if isinstance(fusions, str):
        return fusions
    return ", ".join(f"{k} {v}" for k, v in fusions.items()) or "none"


def _counts(path: Path) -> tuple[int, int, int]:
    import onnx

    g = onnx.load(str(path), load_external_data=False).graph
    ops = collections.Counter(n.op_type for n in g.node)
    return len(g.node), ops["Constant"], len(g.initializer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small configurations of each model")
    ap.add_argument(
        "--models",
        nargs="*",
        default=["resnet50", "bert-base", "gpt2", "llama-100m", "vit-b16", "mobilenetv3"],
    )
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()

    import measure
    import models
    import torch

    import codegen.onnx
    import msc

    torch.set_num_threads(1)
    import onnxruntime

    load = [round(v, 2) for v in os.getloadavg()]
    out: dict = {
        "environment": {
            "date": time.strftime("%Y-%m-%d"),
            "commit": measure.commit(),
            "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__,
            "quick": a.quick,
            "iters": a.iters,
            "loads": a.loads,
            "loadavg_start": load,
        },
        "models": {},
    }
    for name in a.models:
        b = models.build(name, a.quick)
        tmp = measure.scratch("msc-deploy-")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = msc.from_torch(b.model, b.args)
            files = {
                "msc": codegen.onnx.save(g, tmp / "msc.onnx"),
                "msc-plain": codegen.onnx.save(g, tmp / "msc_plain.onnx", optimize=False),
            }
            if name in MODEL_TYPES:
                for_optimizer = codegen.onnx.decompose_for("ort-optimizer")
                files["msc-ortopt"] = codegen.onnx.save(
                    g, tmp / "msc_ortopt.onnx", decompose=for_optimizer
                )
            try:
                torch.onnx.export(b.model, b.args, str(tmp / "torch.onnx"), dynamo=True)
                files["torch.onnx"] = tmp / "torch.onnx"
            except Exception as e:  # noqa: BLE001 - compared without it
                print(f"{name}: torch.onnx failed: {type(e).__name__}: {str(e)[:120]}")
        with torch.inference_mode():
            ref = [t.numpy() for t in models.leaves(b.model(*b.args))]
        sessions, feeds = {}, {}
        for key, path in files.items():
            s = _session(path)
            names = [i.name for i in s.get_inputs()]
            feeds[key] = {n: t.numpy() for n, t in zip(names, b.args)}
            got = s.run(None, feeds[key])
            chk = measure.compare(ref[:1], got[:1])
            assert chk["ok"], (name, key, chk)
            sessions[key] = s
        # CPU time (the process's, one onnxruntime thread): on a shared machine the wall time
        # also counts the time other processes held the core; both are recorded.
        loads: dict[str, list[float]] = {k: [] for k in files}
        load_walls: dict[str, list[float]] = {k: [] for k in files}
        for i in range(a.loads):
            keys = list(files)
            for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
                c, t = time.process_time(), time.perf_counter()
                _session(files[key])
                load_walls[key].append(time.perf_counter() - t)
                loads[key].append(time.process_time() - c)
        run_cpu: dict[str, float] = {}
        run_walls = measure.race(
            {k: (lambda s=s, f=feeds[k]: s.run(None, f)) for k, s in sessions.items()},
            a.iters,
            cpu=run_cpu,
        )
        print(f"{name}: {b.description}{' (quick)' if a.quick else ''}", flush=True)
        rows = out["models"][name] = {"description": b.description, "files": {}}
        for key, path in files.items():
            nodes, consts, inits = _counts(path)
            ran = _ort_graph(path, tmp)
            row = rows["files"][key] = {
                "nodes": nodes,
                "constants": consts,
                "initializers": inits,
                "ort_nodes": len(ran.graph.node),
                "session_fusions": session_fusions(ran),
                "load_s": statistics.median(loads[key]),
                "run_s": run_cpu[key],
                "load_wall_s": statistics.median(load_walls[key]),
                "run_wall_s": run_walls[key],
                "fusions": _fusions(path, MODEL_TYPES.get(name)),
            }
            print(
                f"  {key:10s} nodes {nodes:5d} (Constant {consts:3d}, initializers {inits:4d}), "
                f"ort nodes {row['ort_nodes']:5d}, "
                f"load {row['load_s'] * 1e3:8.1f} ms, "
                f"run {row['run_s'] * 1e3:8.2f} ms, "
                f"session: {_said(row['session_fusions'])}; "
                f"optimizer: {_said(row['fusions'])}",
                flush=True,
            )
        out["environment"]["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
