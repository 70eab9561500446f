"""One benchmark measurement in a fresh process; bench/run.py starts these. Writes JSON.

    python bench/worker.py export --model M --tool msc|torch.onnx --out DIR --json FILE
    python bench/worker.py import --model M --tool msc|onnx2torch --src FILE.onnx --json FILE
    python bench/worker.py ort --model M --onnx NAME=FILE ... --json FILE

Each conversion runs once on a tiny model first (imports and caches warm for both tools), then
``--repeat`` times on the model; the first measured run also gives the peak memory (the RSS
peak during the call minus the RSS just before it, the model already loaded).

# NOTE: invariants
# - A failure is a result: the JSON carries the exception's type and message and the run
#   continues with what can still be measured; the process exits 0.
# - onnx2torch imports torchvision only for its NMS and RoiAlign converters; torchvision does
#   not import beside this CPU torch, so a stand-in module that has neither is installed first.
#   No benchmark model uses those two ops.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402
import models  # noqa: E402

warnings.filterwarnings("ignore")


def error(e: BaseException) -> dict:
    msg = str(e).strip()
    return {
        "type": type(e).__name__,
        "message": msg[:4000],
        "summary": f"{type(e).__name__}: {msg.splitlines()[0] if msg else ''}"[:300],
        "traceback": traceback.format_exc()[-3000:],
    }


def timed_runs(fn, repeat: int, *, memory: bool = True, setup=None) -> dict:
    """Run ``fn`` ``repeat`` times; times, and the first run's peak memory above the start.
    ``setup()``, when given, runs before each run, untimed."""
    out: dict[str, Any] = {"times": []}
    for i in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        before = measure.status()["VmRSS"]
        exact = measure.reset_peak()
        t = time.perf_counter()
        result = fn()
        out["times"].append(time.perf_counter() - t)
        if i == 0 and memory:
            out["rss_before"] = before
            out["peak_extra"] = measure.peak_rss() - before
            out["peak_exact"] = exact
        if i < repeat - 1:
            del result
    out["median"] = statistics.median(out["times"])
    out["result"] = result
    return out


# ----------------------------------------------------------------------------- torch -> ONNX
def task_export(a: argparse.Namespace) -> dict:
    import torch

    import codegen.onnx
    import codegen.torch
    import msc

    b = models.build(a.model, a.quick)
    res: dict[str, Any] = {"model": a.model, "tool": a.tool, "description": b.description}
    res["weight_bytes"] = models.weight_bytes(b.model)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    phases: dict[str, list[float]] = {"from_torch": [], "save": []}
    if a.tool == "msc":

        def convert(model, args, path):
            t = time.perf_counter()
            g = msc.from_torch(model, args)
            t1 = time.perf_counter()
            codegen.onnx.save(g, path, external_data=True)
            phases["from_torch"].append(t1 - t)
            phases["save"].append(time.perf_counter() - t1)
            return g
    else:

        def convert(model, args, path, opset=None):
            torch.onnx.export(
                model,
                args,
                path,
                dynamo=True,
                external_data=True,
                opset_version=opset,
                verbose=False,
            )

    tmp = measure.scratch("msc-worker-")
    tm, targs = models.tiny()
    convert(tm, targs, str(tmp / "tiny.onnx"))  # warm-up
    path = out / f"{a.tool}.onnx"

    def fresh() -> None:
        # Each timed run writes a new file (both tools): the previous run's output is deleted
        # before the clock starts. Replacing a file of BERT's 418 MB costs ~0.07 s of the
        # file system freeing its blocks (in msc's rename, in torch.onnx's truncate), which
        # is not conversion work.
        for p in path.parent.glob(path.name + "*"):
            p.unlink()

    try:
        runs = timed_runs(lambda: convert(b.model, b.args, str(path)), a.repeat, setup=fresh)
    except Exception as e:  # noqa: BLE001
        res["error"] = error(e)
        return res
    result = runs.pop("result")
    res.update(runs)
    if a.tool == "msc":
        res["phases"] = {k: statistics.median(v[1:]) for k, v in phases.items()}
        t = time.perf_counter()  # torch.export alone, once: the floor under both tools
        torch.export.export(b.model, b.args, strict=False)
        res["capture_s"] = time.perf_counter() - t
    res["file"] = str(path)
    res["opset"] = _opset(path)

    # An opset-17 file for ONNX -> PyTorch (not timed).
    p17 = out / f"{a.tool}-opset17.onnx"
    try:
        if a.tool == "msc":
            codegen.onnx.save(result, p17, opset=17, external_data=True)
        else:
            convert(b.model, b.args, str(p17), opset=17)
        res["opset17_file"] = str(p17)
        res["opset17_actual"] = _opset(p17)
    except Exception as e:  # noqa: BLE001
        res["opset17_error"] = error(e)

    if a.tool == "msc":  # the round trip torch -> msc -> torch: numerics and run time
        res["roundtrip"] = _torch_runtime(b, lambda: codegen.torch.to_module(result), a.iters)
    return res


def _opset(path: Path) -> int | None:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)


def _torch_runtime(b: models.Built, make, iters: int) -> dict:
    """Numerics of a generated module against the eager model, and both run times."""
    import torch

    out: dict[str, Any] = {}
    try:
        mod = make()
        with torch.inference_mode():
            ref = [t.numpy() for t in models.leaves(b.model(*b.args))]
            got = [t.numpy() for t in models.leaves(mod(*b.args))]
            out["check"] = measure.compare(ref, got)
            if iters == 0:
                return out
            faults: dict[str, float] = {}
            cpu: dict[str, float] = {}
            t = measure.race(
                {"eager": lambda: b.model(*b.args), "generated": lambda: mod(*b.args)},
                iters,
                faults=faults,
                cpu=cpu,
            )
        out["eager_s"], out["generated_s"] = t["eager"], t["generated"]
        out["eager_cpu_s"], out["generated_cpu_s"] = cpu["eager"], cpu["generated"]
        out["faults_per_call"] = faults
        out["ratio"] = t["generated"] / t["eager"]
        out["cpu_ratio"] = cpu["generated"] / cpu["eager"]
    except Exception as e:  # noqa: BLE001
        out["error"] = error(e)
    return out


# ----------------------------------------------------------------------------- ONNX -> PyTorch
def _stub_torchvision() -> None:
    import importlib.machinery
    import types

    if "torchvision" in sys.modules:
        return
    tv = types.ModuleType("torchvision")
    tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    tv.ops = types.ModuleType("torchvision.ops")  # type: ignore[attr-defined]
    tv.ops.__spec__ = importlib.machinery.ModuleSpec("torchvision.ops", None)
    tv.ops.roi_align = None  # type: ignore[attr-defined]
    sys.modules["torchvision"] = tv
    sys.modules["torchvision.ops"] = tv.ops  # type: ignore[attr-defined]


def _tiny_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def task_import(a: argparse.Namespace) -> dict:
    res: dict[str, Any] = {"model": a.model, "tool": a.tool, "src": a.src}
    try:
        if a.tool == "msc":
            import codegen.torch
            import msc

            def convert(src):
                return codegen.torch.to_module(msc.from_onnx(src))
        else:
            _stub_torchvision()
            import onnx2torch

            def convert(src):
                return onnx2torch.convert(
                    src
                ).eval()  # its BatchNorm modules start in training mode
    except Exception as e:  # noqa: BLE001
        res["error"] = error(e)
        return res

    tmp = measure.scratch("msc-worker-")
    _tiny_onnx(tmp / "tiny.onnx")
    try:
        convert(str(tmp / "tiny.onnx"))
    except Exception:  # noqa: BLE001
        pass  # the real model's error is the one to report
    try:
        runs = timed_runs(lambda: convert(a.src), a.repeat)
    except Exception as e:  # noqa: BLE001
        res["error"] = error(e)
        return res
    mod = runs.pop("result")
    res.update(runs)
    b = models.build(a.model, a.quick)
    res["weight_bytes"] = models.weight_bytes(b.model)
    res["runtime"] = _torch_runtime(b, lambda: mod, a.iters if not a.no_timing else 0)
    return res


# ----------------------------------------------------------------------------- onnxruntime
def task_ort(a: argparse.Namespace) -> dict:
    import onnxruntime as ort
    import torch

    b = models.build(a.model, a.quick)
    with torch.inference_mode():
        ref = [t.numpy() for t in models.leaves(b.model(*b.args))]
    feeds = [t.numpy() for t in b.args]
    res: dict[str, Any] = {"model": a.model, "files": {}}
    runners = {}
    for spec in a.onnx:
        name, _, path = spec.partition("=")
        r: dict[str, Any] = {"file": path}
        res["files"][name] = r
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 3
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            feed = {i.name: x for i, x in zip(sess.get_inputs(), feeds)}
            got = sess.run(None, feed)
            r["check"] = measure.compare(ref, got)
            runners[name] = lambda s=sess, f=feed: s.run(None, f)
        except Exception as e:  # noqa: BLE001
            r["error"] = error(e)
    if runners:
        for name, s in measure.race(runners, a.iters).items():
            res["files"][name]["latency_s"] = s
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=["export", "import", "ort"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tool")
    ap.add_argument("--out")
    ap.add_argument("--src")
    ap.add_argument("--onnx", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch and onnxruntime threads")
    ap.add_argument("--no-timing", action="store_true", help="import: check outputs, skip run time")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    os.environ.pop("MSC_CHECK", None)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    try:
        res = {"export": task_export, "import": task_import, "ort": task_ort}[a.task](a)
    except Exception as e:  # noqa: BLE001
        res = {"model": a.model, "tool": a.tool, "error": error(e)}
    Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
