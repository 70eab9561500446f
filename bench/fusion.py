"""ONNX -> PyTorch run time with and without the ONNX frontend's fusions (msc.ops.fusions).

    python bench/fusion.py [--quick] [--models bert-base gpt2 llama-100m] [--iters 20]

Each model (bench/models.py) is exported with torch.onnx (dynamo, opset 17 as bench/run.py
does, else the exporter's own opset when onnx cannot convert it down), read by msc.from_onnx
with fuse=True and fuse=False, generated as PyTorch, checked against the eager model, and
timed against it (interleaved calls, median, one thread).
Prints generated / eager time ratios and the fused op counts.
"""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", nargs="*", default=["bert-base", "gpt2", "llama-100m"])
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()

    import measure
    import models
    import torch

    import codegen.torch
    import msc

    torch.set_num_threads(1)
    for name in a.models:
        b = models.build(name, a.quick)
        path = measure.scratch("msc-fusion-") / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.onnx.export(b.model, b.args, str(path), dynamo=True, opset_version=17)
            except Exception:  # noqa: BLE001 - onnx's down-converter; keep the exporter's opset
                torch.onnx.export(b.model, b.args, str(path), dynamo=True)
        mods, counts = {}, {}
        for fuse in (True, False):
            g = msc.from_onnx(str(path), fuse=fuse)
            c = collections.Counter(n.op for n in g.nodes)
            counts[fuse] = {k: c[k] for k in ("linear", "gelu", "layer_norm", "rms_norm",
                                              "silu", "attention", "matmul") if c[k]}  # fmt: skip
            mods[fuse] = codegen.torch.to_module(g)
        with torch.inference_mode():
            ref = [t.numpy() for t in models.leaves(b.model(*b.args))]
            for fuse, mod in mods.items():
                got = [t.numpy() for t in models.leaves(mod(*b.args))]
                chk = measure.compare(ref, got)
                assert chk["ok"], (name, fuse, chk)
            t = measure.race(
                {
                    "eager": lambda b=b: b.model(*b.args),
                    "fused": lambda b=b, m=mods[True]: m(*b.args),
                    "unfused": lambda b=b, m=mods[False]: m(*b.args),
                },
                a.iters,
            )
        print(
            f"{name}: eager {t['eager'] * 1e3:.1f} ms; generated fused "
            f"{t['fused'] / t['eager']:.3f}x, unfused {t['unfused'] / t['eager']:.3f}x; "
            f"ops fused {counts[True]}, unfused {counts[False]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
