"""JAX -> ONNX: msc against jax2onnx on the same JAX models (issue 33).

    pip install jax2onnx            # its own extra dependencies (flax, equinox, orbax, ...)
    python bench/jax2onnx_compare.py [--models mlp cnn ...] [--json bench/results/jax2onnx.json]

Per model (a pure JAX function over a params pytree, or a Flax module with random weights,
from the tests' own model builders): each tool converts it to an ONNX ModelProto (msc:
``msc.from_jax`` then ``codegen.onnx.to_model``; jax2onnx: ``to_onnx``), timed (median of 3,
each in this process after one warm-up conversion); the file's node count and initializers;
onnxruntime (one thread) runs it and its outputs are compared with JAX's on CPU
(|a - b| <= 1e-4 + 1e-3 max |ref|); run time is the median of interleaved calls. A tool
that raises is recorded with its error. Prints a table; ``--json`` writes the figures
(bench/results/jax2onnx.json, from which bench/report.py builds docs/performance.md's
section).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _models() -> dict[str, Callable[[], tuple[Callable, tuple, str]]]:
    """name -> builder of (fn of the inputs only, example inputs, description)."""

    def pure(name: str):
        def build():
            import tests.frontend.test_jax as t

            fn, params, x = {
                "mlp": (t._mlp, t.MLP_PARAMS, t.f32(3, 8)),
                "cnn": (t._cnn, t.CNN_PARAMS, t.f32(2, 8, 8, 3)),
            }[name]
            return (lambda x: fn(params, x)), (x,), f"pure JAX {name} over a params pytree"

        return build

    out: dict[str, Callable[[], tuple[Callable, tuple, str]]] = {
        "mlp": pure("mlp"),
        "cnn": pure("cnn"),
    }
    try:
        import jax

        import tests.frontend.test_flax as tf
    except Exception:  # noqa: BLE001 - flax not installed: the pure JAX models only
        return out

    def flax(make: Callable, *inputs: np.ndarray, stats: bool = False, seed: int = 0):
        def build():
            model = make()
            variables = model.init(jax.random.key(seed), *inputs)
            if stats:
                variables = tf.randomize_stats(variables)
            fn = lambda *xs: model.apply(variables, *xs)  # noqa: E731 - weights as constants
            return fn, inputs, f"Flax linen {type(model).__name__}, random init"

        return build

    out["flax-cnn"] = flax(tf.CNN, tf.f32(2, 16, 16, 3), stats=True)
    out["flax-resnet"] = flax(tf.ResNet, tf.f32(2, 16, 16, 3), stats=True, seed=1)
    out["flax-encoder"] = flax(tf.Encoder, tf.ids(2, 8), seed=2)
    out["flax-decoder-rotary"] = flax(tf.Decoder, tf.ids(2, 8), seed=4)
    out["flax-whisper-style"] = flax(tf.Whisper, tf.f32(2, 20, 8), tf.ids(2, 6), seed=5)
    return out


def _ort(model: Any):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = o.inter_op_num_threads = 1
    o.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])


def _msc(fn: Callable, args: tuple) -> Any:
    import codegen.onnx
    import msc

    return codegen.onnx.to_model(msc.from_jax(fn, *args))


def _jax2onnx(fn: Callable, args: tuple) -> Any:
    from jax2onnx import to_onnx

    return to_onnx(fn, [a for a in args])


TOOLS = {"msc": _msc, "jax2onnx": _jax2onnx}


def bench_model(name: str, build: Callable, repeat: int, iters: int) -> dict[str, Any]:
    import jax
    import measure

    fn, args, description = build()
    ref = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    row: dict[str, Any] = {"description": description, "tools": {}}
    sessions: dict[str, Any] = {}
    feeds: dict[str, dict] = {}
    for tool, convert in TOOLS.items():
        r: dict[str, Any] = {}
        row["tools"][tool] = r
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = convert(fn, args)  # warm-up (imports, tracing caches)
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    model = convert(fn, args)
                    times.append(time.perf_counter() - t)
            s = _ort(model)
            feed = {i.name: np.asarray(a) for i, a in zip(s.get_inputs(), args)}
            got = s.run(None, feed)
        except Exception as e:  # noqa: BLE001 - the tool's failure is a result
            r["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            continue
        r["convert_s"] = statistics.median(times)
        r["nodes"] = len(model.graph.node)
        r["initializers"] = len(model.graph.initializer)
        r["check"] = measure.compare(ref, got)
        sessions[tool], feeds[tool] = s, feed
    if sessions:
        runs = measure.race(
            {k: (lambda s=s, f=feeds[k]: s.run(None, f)) for k, s in sessions.items()}, iters
        )
        for k, v in runs.items():
            row["tools"][k]["run_s"] = v
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", help="default: all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", help="write the figures here (bench/results/jax2onnx.json)")
    a = ap.parse_args(argv)
    from importlib import metadata

    import jax
    import measure
    import onnxruntime
    import report

    try:
        j2o = metadata.version("jax2onnx")
    except metadata.PackageNotFoundError:
        j2o = "not installed"
    models = _models()
    names = a.models or list(models)
    results: dict[str, Any] = {
        "environment": {
            "date": time.strftime("%Y-%m-%d"),
            "commit": measure.commit(),
            "jax": jax.__version__,
            "jax2onnx": j2o,
            "onnxruntime": onnxruntime.__version__,
        },
        "models": {},
    }
    for name in names:
        row = results["models"][name] = bench_model(name, models[name], a.repeat, a.iters)
        for tool, r in row["tools"].items():
            print(f"{name:22s} {tool:9s} " + "  ".join(report.jax2onnx_cells(r)), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
