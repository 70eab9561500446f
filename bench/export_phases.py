"""msc's own part of torch -> ONNX against torch.export, in CPU time, in one process.

    python bench/export_phases.py [--models bert-base gpt2] [--repeat 3] [--quick]

Per model and run: ``torch.export.export`` (non-strict), ``msc.from_exported_program`` on its
result, and ``codegen.onnx.save`` with external data (the fsyncs included), each timed in
process CPU time (user + system, every thread) and wall time; the medians, and msc's part
(translate + save) as a multiple of torch.export's. Issue 16's target is at most 0.5x. Torch
runs on one thread, as in bench/run.py, so no idle worker threads' spinning counts as CPU.
bench/run.py measures the same in wall time in fresh processes; on a shared machine wall time
also measures the other processes, so CPU time is what to compare between commits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import models  # noqa: E402

PHASES = ("export", "translate", "save")


def measure(name: str, repeat: int, quick: bool, out: Path) -> dict[str, tuple[float, float]]:
    """Median (cpu, wall) seconds of each phase over ``repeat`` runs."""
    import torch

    import codegen.onnx
    import msc

    b = models.build(name, quick)
    runs: dict[str, list[tuple[float, float]]] = {p: [] for p in PHASES}
    for _ in range(repeat):
        for p in out.glob(f"{name}.onnx*"):  # a new file each run, as bench/worker.py writes
            p.unlink()
        marks = [(time.process_time(), time.perf_counter())]
        ep = torch.export.export(b.model, b.args, strict=False)
        marks.append((time.process_time(), time.perf_counter()))
        g = msc.from_exported_program(ep)
        marks.append((time.process_time(), time.perf_counter()))
        codegen.onnx.save(g, out / f"{name}.onnx", external_data=True)
        marks.append((time.process_time(), time.perf_counter()))
        for p, (c0, w0), (c1, w1) in zip(PHASES, marks, marks[1:]):
            runs[p].append((c1 - c0, w1 - w0))
    return {
        p: (statistics.median(c for c, _ in r), statistics.median(w for _, w in r))
        for p, r in runs.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(models.MODELS), choices=models.MODELS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small configs")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    import codegen.onnx
    import msc

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=HERE / "results") as d:
        tm, targs = models.tiny()  # warm-up: imports and caches
        codegen.onnx.save(msc.from_torch(tm, targs), Path(d) / "tiny.onnx", external_data=True)
        print("model        export        translate     save          own/export")
        print("             cpu   wall    cpu   wall    cpu   wall    cpu    wall")
        for name in a.models:
            m = measure(name, a.repeat, a.quick, Path(d))
            own_c = m["translate"][0] + m["save"][0]
            own_w = m["translate"][1] + m["save"][1]
            cells = "  ".join(f"{c:5.2f} {w:5.2f}" for c, w in (m[p] for p in PHASES))
            ratio = f"{own_c / m['export'][0]:5.2f}x {own_w / m['export'][1]:5.2f}x"
            print(f"{name:<12} {cells}  {ratio}", flush=True)


if __name__ == "__main__":
    main()
