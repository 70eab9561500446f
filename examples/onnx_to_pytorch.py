"""Bring an ONNX model to editable PyTorch source.

An ONNX model as another exporter writes it (``/stem/conv/Conv`` node names, a dynamic ``N``
batch; or pass your own with ``--model``) becomes a directory with ``model.py`` (a readable
``nn.Module`` that imports only torch) and ``model.safetensors``. The generated module is
loaded back from those files with its own ``load()`` and checked against onnxruntime.

    python examples/onnx_to_pytorch.py [--model model.onnx] [--out DIR]

The same from the command line:

    msc convert model.onnx -o model_torch/ --to torch
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

import codegen.torch
import msc
from msc.analysis.verify import make_inputs
from msc.examples import onnx_example


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="an .onnx file (default: a built-in example)")
    ap.add_argument("--out", help="directory for the files (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        src = Path(args.model) if args.model else out / "foreign.onnx"
        if not args.model:
            onnx.save(onnx_example(), src)

        # 1. ONNX -> msc graph -> PyTorch source + safetensors.
        g = msc.from_onnx(src)
        target = out / "model_torch"
        codegen.torch.save(g, target)
        source = (target / "model.py").read_text()
        print(f"wrote {target}/model.py ({source.count(chr(10))} lines) and model.safetensors")
        start = source.rindex("\nclass ") + 1  # the model's class: after its blocks' classes
        print(source[start : source.index("\n\n\n", start)])

        # 2. Load the generated file as a user would, and run it next to onnxruntime.
        spec = importlib.util.spec_from_file_location("generated_model", target / "model.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        model = mod.load()  # the generated file's own loader (reads model.safetensors)
        feeds = make_inputs(g, seed=0, binding={"N": 4})
        with torch.no_grad():
            got = model(*(torch.from_numpy(a) for a in feeds.values()))
        got = [got] if isinstance(got, torch.Tensor) else list(got)
        sess = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
        ok = True
        for name, a, b in zip((v.name for v in g.outputs), got, want):
            err = float(np.max(np.abs(a.numpy() - b)))
            ok &= err <= 1e-5
            print(f"{name}: generated PyTorch vs onnxruntime, max abs err {err:.2g}")
        print("result:", "match" if ok else "MISMATCH")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
