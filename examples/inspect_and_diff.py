"""Inspect and diff two versions of a model.

Version 1 is ``msc.examples.TinyCNN``; version 2 widens the classifier's input by adding a
third conv block and swaps ReLU for SiLU in the first block. Both are saved as ONNX (as a
model registry would hold them), inspected (parameters, FLOPs, memory), and compared node by
node: what was added, removed and changed, and where outputs diverge on the same inputs.

    python examples/inspect_and_diff.py [--out DIR]

The same from the command line:

    msc inspect v1.onnx
    msc diff v1.onnx v2.onnx
    msc verify v1.pt2 v2.onnx
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

import codegen.onnx
import msc
from msc.examples import TinyCNN


class TinyCNNv2(TinyCNN):
    """v2: SiLU in the first block, one more conv block before pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.features[2] = nn.SiLU()
        self.features.append(nn.Conv2d(32, 32, 3, padding=1))
        self.features.append(nn.ReLU())


def _export(module: nn.Module, out: Path, name: str) -> None:
    """Save the model as a torch.export program (.pt2) and as ONNX (.onnx)."""
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(
        module.eval(), (torch.randn(2, 3, 32, 32),), dynamic_shapes={"x": {0: batch}}
    )
    torch.export.save(ep, out / f"{name}.pt2")
    codegen.onnx.save(msc.from_exported_program(ep, name=name), out / f"{name}.onnx")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="directory for the files (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        v1 = TinyCNN()
        torch.manual_seed(0)
        v2 = TinyCNNv2()
        _export(v1, out, "v1")
        _export(v2, out, "v2")

        r1 = msc.inspect(out / "v1.onnx", {"batch": 1})
        r2 = msc.inspect(out / "v2.onnx", {"batch": 1})
        print(r1)
        print(
            f"v1 -> v2: parameters {r1.params:,} -> {r2.params:,}, "
            f"MACs at batch 1 {r1.macs.constant():,} -> {r2.macs.constant():,}"
        )
        print()

        d = msc.diff(out / "v1.onnx", out / "v2.onnx")
        print(d)
        # The same first block, then different: verify names where outputs first diverge. The
        # .pt2 side knows module paths, so the divergence is located in the source model.
        v = msc.verify(out / "v1.pt2", out / "v2.onnx")
        print(v)
        found = v.divergence is not None and v.divergence.op in ("relu", "silu", "sigmoid", "mul")
        return 0 if (not d.equal and d.added and found) else 1


if __name__ == "__main__":
    sys.exit(main())
