"""torch -> msc -> Relax against TVM's own torch frontend, timed in the same run.

    python bench/relax.py [--quick] [--models bert-base,gpt2] [--repeat 3] [--json FILE]

For each bench model (bench/models.py, seeded random weights), the model is exported once
with torch.export; then, best of ``--repeat``:

- msc: ``codegen.relax.to_module(msc.from_exported_program(ep))`` (parameters as inputs);
- tvm: ``tvm.relax.frontend.torch.from_exported_program(ep, keep_params_as_input=True)``
  (which runs torch's decompositions on the program first).

Both translate the same ExportedProgram, so the export time is not in either figure. The
module msc writes is then compiled and run on the example inputs and compared with eager
PyTorch, so a fast but wrong translation would show.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def run_one(name: str, quick: bool, repeat: int) -> dict:
    import numpy as np
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    import codegen.relax as cr
    import msc
    from bench.models import build, leaves

    b = build(name, quick)
    t = time.perf_counter()
    ep = torch.export.export(b.model, b.args)
    export_s = time.perf_counter() - t
    msc_s, mod = _best(lambda: cr.to_module(msc.from_exported_program(ep)), repeat)
    row: dict = {"model": name, "export_s": round(export_s, 3), "msc_s": round(msc_s, 3)}
    try:
        tvm_s, _ = _best(lambda: from_exported_program(ep, keep_params_as_input=True), repeat)
        row["tvm_s"] = round(tvm_s, 3)
    except Exception as e:  # TVM's frontend does not convert every model
        row["tvm_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    f = cr.build(msc.from_exported_program(ep))
    with torch.no_grad():
        want = leaves(b.model(*b.args))
    got = leaves(f(*b.args))
    row["max_abs_diff"] = float(
        max(np.abs(g.float().numpy() - w.float().numpy()).max() for g, w in zip(got, want))
    )
    row["bindings"] = sum(len(blk.bindings) for blk in mod["main"].body.blocks)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small configurations of each model")
    ap.add_argument("--models", default="bert-base,gpt2,llama-100m")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the rows to this file")
    a = ap.parse_args(argv)
    rows = []
    print(f"{'model':12} {'export':>8} {'msc':>8} {'tvm':>8}  max|diff|")
    for name in a.models.split(","):
        r = run_one(name, a.quick, a.repeat)
        rows.append(r)
        tvm = f"{r['tvm_s']:8.3f}" if "tvm_s" in r else "  failed"
        print(f"{name:12} {r['export_s']:8.3f} {r['msc_s']:8.3f} {tvm}  {r['max_abs_diff']:.2e}")
        if "tvm_error" in r:
            print(f"  tvm: {r['tvm_error']}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
