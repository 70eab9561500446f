"""Beyond RAM: a multi-GB ONNX model with external data converted, with peak memory far
below the weight size, to PyTorch source + safetensors (msc.from_onnx + codegen.torch.save),
back to ONNX with external data (codegen.onnx.save) and to a saved msc graph (msc.save).

    python bench/beyond_ram.py [--gb 4] [--dir DIR] [--json FILE] [--keep]

A wide MLP (MatMul, Add, Relu per layer) is written with onnx.helper, its weights streamed to
the external data file in 64 MiB pieces. Each conversion runs in a fresh process that reports
its peak RSS and peak anonymous memory above the RSS before the call (the weights load as
file regions and are copied file to file). Then every written weight is compared with the
ONNX data byte for byte, and the generated module's ``load()`` is run on an input against a
numpy reference computed piecewise from the ONNX data.

# NOTE: invariants
# - The free disk space is checked first (ONNX data + safetensors + 10%); the directory is
#   removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

CHUNK = 1 << 26


def shape_for(gb: float) -> tuple[int, int]:
    """(layers, width) of square fp32 weights adding up to about ``gb`` GiB."""
    width = 16384 if gb >= 1 else 4096
    layers = max(1, round(gb * 2**30 / (width * width * 4)))
    return layers, width


def write_model(d: Path, layers: int, width: int) -> Path:
    """The MLP as ``d/mlp.onnx`` + ``d/mlp.onnx.data``; weights written piecewise."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    rows = max(1, CHUNK // (width * 4))
    block = (rng.random((rows, width), dtype=np.float32) - 0.5) * np.float32(2 * np.sqrt(3 / width))
    inits, nodes, offset = [], [], 0
    data = d / "mlp.onnx.data"
    with open(data, "wb") as f:
        for i in range(layers):
            for r0 in range(0, width, rows):
                n = min(rows, width - r0)
                f.write((block[:n] * np.float32(1 + 0.001 * (i * width + r0) / rows)).tobytes())
            t = TensorProto()
            t.name, t.data_type = f"layers.{i}.weight", TensorProto.FLOAT
            t.dims.extend([width, width])
            t.data_location = TensorProto.EXTERNAL
            length = width * width * 4
            for k, v in (("location", data.name), ("offset", str(offset)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += length
            inits.append(t)
            bias = numpy_helper.from_array(
                np.full(width, 0.01 * (i + 1), np.float32), f"layers.{i}.bias"
            )
            inits.append(bias)
            x = "x" if i == 0 else f"h{i - 1}"
            nodes += [
                helper.make_node("MatMul", [x, t.name], [f"mm{i}"], name=f"layers.{i}.matmul"),
                helper.make_node("Add", [f"mm{i}", bias.name], [f"add{i}"], name=f"layers.{i}.add"),
                helper.make_node("Relu", [f"add{i}"], [f"h{i}"], name=f"layers.{i}.relu"),
            ]
    graph = helper.make_graph(
        nodes,
        "wide_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(f"h{layers - 1}", TensorProto.FLOAT, [1, width])],
        inits,
    )
    path = d / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def convert(kind: str, src: str, out: str) -> dict:
    """The measured conversion (run in a fresh process): ``kind`` is torch, onnx or msc."""
    import gc

    import measure

    import codegen.onnx
    import codegen.torch
    import msc

    gc.collect()
    before = measure.status()
    measure.reset_peak()
    t = time.perf_counter()
    with measure.AnonSampler() as anon:
        g = msc.from_onnx(src)
        if kind == "torch":
            codegen.torch.save(g, out)
        elif kind == "onnx":
            Path(out).mkdir(parents=True, exist_ok=True)
            codegen.onnx.save(g, Path(out) / "mlp.onnx", external_data=True)
        else:
            msc.save(g, out)
    seconds = time.perf_counter() - t
    return {
        "seconds": seconds,
        "peak_rss": measure.peak_rss() - before["VmRSS"],
        "peak_anon": anon.peak - before["RssAnon"],
        "rss_before": before["VmRSS"],
    }


def same_bytes(src: Path, layers: int, got_regions: dict) -> bool:
    """Every layer's weight in ``got_regions`` (name -> (path, offset)) equals the source's
    ONNX data, compared piecewise."""
    data = np.memmap(src.parent / "mlp.onnx.data", dtype=np.uint8, mode="r")
    equal, off = True, 0
    for i in range(layers):
        path, start, n = got_regions[f"layers.{i}.weight"]
        got = np.memmap(path, dtype=np.uint8, mode="r")
        for p in range(0, n, CHUNK):
            k = min(CHUNK, n - p)
            equal &= bool(
                np.array_equal(data[off + p : off + p + k], got[start + p : start + p + k])
            )
        off += n
        del got
    return equal


def regions_of(kind: str, out: Path) -> dict:
    """name -> (file, offset, length) of each weight a conversion wrote."""
    from msc.io import safetensors as st

    if kind == "onnx":
        import msc

        g = msc.from_onnx(out / "mlp.onnx")
        return {
            n: (w.region.path, w.region.offset, w.region.length)
            for n, w in g.weights.items()
            if w.region is not None
        }
    f = out / ("model.safetensors" if kind == "torch" else "weights.safetensors")
    header, start = st.read_header(f)
    return {
        n: (str(f), start + h["data_offsets"][0], h["data_offsets"][1] - h["data_offsets"][0])
        for n, h in header.items()
        if n != "__metadata__"
    }


def verify(onnx_path: Path, out: Path, layers: int, width: int) -> dict:
    """Bytes of every weight equal; the generated module's output against numpy."""
    import importlib.util

    import torch

    res: dict[str, Any] = {}
    res["weights_equal"] = same_bytes(onnx_path, layers, regions_of("torch", out))

    x = np.random.default_rng(1).standard_normal((1, width)).astype(np.float32)
    ref, off = x.astype(np.float64), 0
    w = np.memmap(onnx_path.parent / "mlp.onnx.data", dtype=np.float32, mode="r")
    for i in range(layers):
        acc = np.zeros((1, width))
        for r0 in range(0, width, 2048):
            rows = w[off + r0 * width : off + (r0 + 2048) * width].reshape(-1, width)
            acc += ref[:, r0 : r0 + rows.shape[0]] @ rows.astype(np.float64)
        ref = np.maximum(acc + 0.01 * (i + 1), 0)
        off += width * width
    spec = importlib.util.spec_from_file_location("msc_beyond_ram_model", out / "model.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    model = mod.load()
    with torch.inference_mode():
        y = model(torch.from_numpy(x)).numpy()
    err = float(np.max(np.abs(y - ref)))
    ok = err <= 1e-4 + 1e-3 * float(np.max(np.abs(ref)))
    res["output"] = {"ok": ok, "max_abs_err": err, "note": "" if ok else f"max abs err {err:.3g}"}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default="bench/results/beyond_ram.json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--convert", nargs=3, metavar=("KIND", "SRC", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.convert:
        Path(a.json).write_text(json.dumps(convert(*a.convert)))
        return
    layers, width = shape_for(a.gb)
    d = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="msc-beyond-ram-"))
    d.mkdir(parents=True, exist_ok=True)
    nbytes = layers * width * width * 4
    res: dict[str, Any] = {"layers": layers, "width": width, "weight_bytes": nbytes}
    try:
        free = shutil.disk_usage(d).free
        # the source, the PyTorch output, and one other output at a time
        if free < 3.3 * nbytes:
            raise OSError(f"{free / 2**30:.1f} GiB free in {d}, need {3.3 * nbytes / 2**30:.1f}")
        t = time.perf_counter()
        src = write_model(d, layers, width)
        res["write_s"] = time.perf_counter() - t
        for kind in ("torch", "onnx", "msc"):
            out = d / kind
            conv_json = d / f"convert-{kind}.json"
            cmd = [sys.executable, __file__, "--convert", kind, str(src), str(out)]
            proc = subprocess.run([*cmd, "--json", str(conv_json)], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"{kind} conversion failed: {proc.stderr.strip()[-1500:]}")
            r = json.loads(conv_json.read_text())
            if kind == "torch":
                res.update(r)  # the headline figures: ONNX -> PyTorch
                res.update(verify(src, out, layers, width))
            else:
                r["weights_equal"] = same_bytes(src, layers, regions_of(kind, out))
            res[f"to_{kind}"] = r
            if kind != "torch":
                shutil.rmtree(out, ignore_errors=True)
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip()
        res["error"] = {
            "type": type(e).__name__,
            "message": msg,
            "summary": f"{type(e).__name__}: {msg.splitlines()[-1] if msg else ''}"[:300],
        }
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items()}, indent=1))


if __name__ == "__main__":
    main()
