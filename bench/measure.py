"""Measuring helpers shared by the benchmark workers: resident memory, timing, output checks.

# NOTE: invariants
# - Memory is read from /proc/self/status. ``reset_peak`` writes "5" to /proc/self/clear_refs,
#   which resets VmHWM (the peak resident set) to the current RSS, so a peak can be taken
#   around one call in a process that did other work before; where that is not allowed the
#   lifetime peak (ru_maxrss) is used and the result says so.
# - A peak counts every resident page: anonymous memory and file pages mapped by the process
#   (memory-mapped weights that were read). ``AnonSampler`` tracks anonymous memory alone.
"""

from __future__ import annotations

import resource
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def status() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile in bytes."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter to the current RSS; False if not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """The peak resident set since the last ``reset_peak`` (or process start)."""
    s = status()
    return s.get("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class AnonSampler:
    """Samples RssAnon every few milliseconds in a thread; ``peak`` is the largest seen."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, status().get("RssAnon", 0))
            time.sleep(self.interval)

    def __enter__(self) -> AnonSampler:
        self.peak = status().get("RssAnon", 0)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, status().get("RssAnon", 0))


def race(
    fns: dict[str, Callable[[], Any]],
    n: int,
    warmup: int = 2,
    faults: dict[str, float] | None = None,
    cpu: dict[str, float] | None = None,
) -> dict[str, float]:
    """Median seconds per call of each function, calls interleaved so load noise hits all.
    ``faults``, when given, receives each function's minor page faults per call (memory the
    allocator gave back to the OS and touched again: a cost a wall time hides the cause of).
    ``cpu``, when given, receives each function's median CPU seconds of the calling thread
    per call (``time.thread_time``): on a shared machine the wall time counts the time other
    processes held the core, the thread's CPU time does not (with torch at one thread, all of
    a call's work runs on the calling thread)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpus: dict[str, list[float]] = {k: [] for k in fns}
    faulted = dict.fromkeys(fns, 0)
    keys = list(fns)
    for i in range(n):
        for k in keys[i % len(keys) :] + keys[: i % len(keys)]:
            f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            c = time.thread_time()
            t = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t)
            cpus[k].append(time.thread_time() - c)
            faulted[k] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f
    if faults is not None:
        faults.update({k: v / max(n, 1) for k, v in faulted.items()})
    if cpu is not None:
        cpu.update({k: statistics.median(v) for k, v in cpus.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def compare(ref: list[np.ndarray], got: list[np.ndarray], rtol: float = 1e-3) -> dict:
    """Check outputs against the reference: ok when max |got - ref| <= 1e-4 + rtol * max |ref|
    for every output, shapes equal and counts equal."""
    res: dict[str, Any] = {"ok": True, "max_abs_err": 0.0, "note": ""}
    if len(ref) != len(got):
        res["ok"] = False
        res["note"] = f"{len(got)} outputs, expected {len(ref)}"
    for i, (r, g) in enumerate(zip(ref, got)):
        r = np.asarray(r, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        if r.shape != g.shape:
            res["ok"] = False
            res["note"] = f"output {i}: shape {g.shape}, expected {r.shape}"
            continue
        if r.size == 0:
            continue
        err = float(np.max(np.abs(r - g)))
        res["max_abs_err"] = max(res["max_abs_err"], err)
        if not err <= 1e-4 + rtol * float(np.max(np.abs(r))):
            res["ok"] = False
            res["note"] = res["note"] or f"output {i}: max abs err {err:.3g}"
    return res


def scratch(prefix: str = "msc-bench-"):
    """A new temporary directory, removed when the process exits (however a bench script
    ends short of a kill): a bench writes GBs of model files and must not leave them."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, d, True)
    return d


def commit() -> str:
    """The short hash of the checkout's HEAD (the commit a bench result is from)."""
    import subprocess
    from pathlib import Path

    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
