"""What one Relax function per block type (codegen.relax.blocks) changes: script lines, compile
time, run time, against the flat ``main`` (``flat=True``).

    python bench/relax_blocks.py [--quick] [--models gpt2,resnet50] [--json FILE]

For each bench model (bench/models.py, seeded random weights), exported once with torch.export
and read once by msc: the TVMScript's lines (``codegen.relax.to_script``), ``tvm.compile`` of
the module with its weights bound (``codegen.relax.build``, llvm, CPU), and the best of
``--runs`` runs on the example inputs (TVM's default schedules, untuned: slow at full size);
the two outputs are compared with each other and with eager.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run_one(name: str, quick: bool, runs: int = 1) -> dict:
    import numpy as np
    import torch

    import codegen.relax as cr
    import msc
    from bench.models import build, leaves

    b = build(name, quick)
    g = msc.from_exported_program(torch.export.export(b.model, b.args))
    with torch.no_grad():
        want = leaves(b.model(*b.args))
    row: dict = {"model": name, "nodes": len(g.nodes)}
    outs = {}
    for kind, flat in (("flat", True), ("blocks", False)):
        text = cr.to_script(g, flat=flat)
        t = time.perf_counter()
        f = cr.build(g, flat=flat)
        compile_s = time.perf_counter() - t
        run_s = float("inf")
        for _ in range(runs):
            t = time.perf_counter()
            got = leaves(f(*b.args))
            run_s = min(run_s, time.perf_counter() - t)
        outs[kind] = got
        err = max(float(np.max(np.abs(a.numpy() - w.numpy()))) for a, w in zip(got, want))
        functions = [gv.name_hint for gv in f.module.get_global_vars()]
        row[kind] = {
            "script_lines": len(text.splitlines()),
            "functions": len(functions),
            "compile_s": round(compile_s, 2),
            "run_s": round(run_s, 4),
            "max_abs_err_vs_eager": err,
        }
    row["max_abs_diff_flat_vs_blocks"] = max(
        float(np.max(np.abs(a.numpy() - c.numpy()))) for a, c in zip(outs["flat"], outs["blocks"])
    )
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the bench models' small sizes")
    p.add_argument("--models", default="gpt2,resnet50")
    p.add_argument("--runs", type=int, default=1, help="timed runs per module (best kept)")
    p.add_argument("--json", help="write the rows here too")
    a = p.parse_args()
    rows = []
    for name in a.models.split(","):
        row = run_one(name, a.quick, a.runs)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
