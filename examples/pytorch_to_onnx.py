"""Migrate a PyTorch model to ONNX and verify it.

A small transformer (token embedding, causal self-attention, GELU MLP) with a dynamic batch
goes PyTorch -> msc graph -> ONNX. The ONNX file is then run with onnxruntime against eager
PyTorch on the same random token ids, and inspected.

    python examples/pytorch_to_onnx.py [--out DIR] [--opset N]

The same from the command line, on a saved ExportedProgram:

    msc convert model.pt2 -o model.onnx        # writes, re-imports and verifies
    msc verify model.pt2 model.onnx
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import codegen.onnx
import msc
from msc.analysis import Model
from msc.examples import example_module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="directory for the files (default: a temporary one)")
    ap.add_argument("--opset", type=int, default=None, help="ONNX opset (default: newest)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)

        # 1. PyTorch -> msc. The batch dim stays symbolic (batch in 1..64).
        module, example_args, dynamic_shapes = example_module("transformer")
        src = Model.from_torch(module, example_args, dynamic_shapes)
        print(f"imported {src.label}: {len(src.graph.nodes)} nodes, input", src.graph.inputs[0])

        # 2. msc -> ONNX (weights inline here; external data is used for large models).
        path = out / "transformer.onnx"
        codegen.onnx.save(src.graph, path, opset=args.opset)
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")

        # 3. Verify: eager PyTorch vs onnxruntime on the same seeded random token ids, with a
        #    batch of 3 (not the export's 2) to exercise the dynamic dim.
        report = msc.verify(src, path, shapes={"batch": 3})
        print(report)

        # 4. What is in it.
        print(msc.inspect(path, {"batch": 1}))
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
