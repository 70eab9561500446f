"""Run time of the module codegen.torch writes against the eager model, per bench model.

    python bench/torch_speed.py [--models resnet50,gpt2] [--iters 20] [--repeat 3] [--quick]

For each model: ``msc.from_torch`` then ``codegen.torch.to_module`` (the round trip of
``bench/run.py``'s column "generated PyTorch / eager"), outputs checked against eager, then
``--repeat`` interleaved races (``measure.race``) of ``--iters`` calls each at ``--threads``
torch threads. Prints eager ms, generated ms and their ratio per race (wall and thread CPU)
and the load average, so a figure taken on a shared machine says how loaded it was.
``--source DIR`` writes each generated module's source there, to read or profile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402
import models  # noqa: E402

warnings.filterwarnings("ignore")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(models.MODELS))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--source", help="directory to write each generated module's source to")
    a = ap.parse_args()

    import torch

    import codegen.torch
    import msc

    torch.set_num_threads(a.threads)
    print(f"load average at start: {os.getloadavg()}")
    print(f"{'model':<12} {'eager ms':>9} {'gen ms':>9} {'ratio':>6} {'cpu ratio':>9}  races")
    for name in a.models.split(","):
        b = models.build(name, a.quick)
        mod = codegen.torch.to_module(msc.from_torch(b.model, b.args))
        if a.source:
            Path(a.source).mkdir(parents=True, exist_ok=True)
            (Path(a.source) / f"{name}.py").write_text(mod.msc_source)
        with torch.inference_mode():
            ref = [t.numpy() for t in models.leaves(b.model(*b.args))]
            got = [t.numpy() for t in models.leaves(mod(*b.args))]
            check = measure.compare(ref, got)
            races = []
            for _ in range(a.repeat):
                cpu: dict[str, float] = {}
                t = measure.race(
                    {
                        "eager": lambda b=b: b.model(*b.args),
                        "generated": lambda m=mod, b=b: m(*b.args),
                    },
                    a.iters,
                    cpu=cpu,
                )
                races.append((t["eager"], t["generated"], cpu["generated"] / cpu["eager"]))
        eager = statistics.median(r[0] for r in races)
        gen = statistics.median(r[1] for r in races)
        ratios = " ".join(f"{g / e:.3f}" for e, g, _ in races)
        cpu_ratio = statistics.median(r[2] for r in races)
        ok = "" if check["ok"] else f"  CHECK FAILED {check}"
        print(
            f"{name:<12} {eager * 1e3:9.2f} {gen * 1e3:9.2f} {gen / eager:6.3f} "
            f"{cpu_ratio:9.3f}  {ratios}  load {os.getloadavg()[0]:.2f}{ok}",
            flush=True,
        )


if __name__ == "__main__":
    main()
