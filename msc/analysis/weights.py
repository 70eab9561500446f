"""``inspect --weights-only``: the weights of a model directory or a safetensors file, read
from the safetensors header alone: no model.py imported, no tensor data read.

A generated PyTorch directory (model.py + model.safetensors) is Python code: inspecting it
whole runs model.py. Its weights, and those of a Relax directory or a saved msc graph, are
data: this reads ``model.safetensors`` / ``weights.safetensors`` (or a ``.safetensors`` file
given directly) with msc's own reader (msc.io.safetensors), which checks every entry of the
header against the file.

# NOTE: the report is plain data (``WeightsReport.to_json()`` is what ``--json`` prints).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msc.analysis.symbolic import human
from msc.errors import MscError
from msc.io import own_file, safetensors
from msc.io.marker import generated_source
from msc.ir.dtype import DType
from msc.ir.tensor import FileRegion

__all__ = ["WeightsReport", "inspect_weights", "format_weights", "WEIGHT_FILES"]

# The weight file of each kind of model directory msc writes, in the order looked for.
WEIGHT_FILES = ("model.safetensors", "weights.safetensors")


@dataclass
class WeightsReport:
    """Every tensor of a safetensors file: name, dtype, shape, element count, bytes."""

    source: str
    tensors: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def params(self) -> int:
        return sum(t["count"] for t in self.tensors)

    @property
    def param_bytes(self) -> int:
        return sum(t["bytes"] for t in self.tensors)

    def by_dtype(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for t in self.tensors:
            d = out.setdefault(t["dtype"], {"tensors": 0, "count": 0, "bytes": 0})
            d["tensors"] += 1
            d["count"] += t["count"]
            d["bytes"] += t["bytes"]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "weights_only": True,
            "params": self.params,
            "param_bytes": self.param_bytes,
            "params_by_dtype": self.by_dtype(),
            "metadata": self.metadata,
            "tensors": self.tensors,
        }


def weight_file(path: str | os.PathLike) -> Path:
    """The safetensors file of ``path``: itself, the weight file of a model directory (a
    symbolic link out of the directory is refused), or the one beside a generated model.py
    (known by its first line: not imported)."""
    p = Path(path)
    if p.suffix.lower() == ".py" and generated_source(p) in ("torch", "jax"):
        p = p.parent
    if p.is_dir():
        for name in WEIGHT_FILES:
            f = own_file(p, name)
            if f.is_file():
                return f
        raise MscError(f"{p}: no {' or '.join(WEIGHT_FILES)} in it; no weights to show")
    if not p.is_file():
        raise MscError(f"{p}: no such file or directory")
    if p.suffix.lower() != ".safetensors":
        raise MscError(
            f"{p}: --weights-only reads a .safetensors file or a model directory holding one"
        )
    return p


def inspect_weights(path: str | os.PathLike) -> WeightsReport:
    """The weights of ``path`` (a .safetensors file or a model directory), nothing run."""
    f = weight_file(path)
    header, _ = safetensors.read_header(f)
    regions = safetensors.regions(f)  # every entry checked against the file: nothing read
    meta = header.get("__metadata__")
    r = WeightsReport(str(f), metadata=meta if isinstance(meta, dict) else {})
    for name, data in regions.items():
        dt = data.dtype if isinstance(data, FileRegion) else DType.from_numpy(data.dtype)
        shape = [int(d) for d in data.shape]
        r.tensors.append(
            {
                "name": name,
                "dtype": dt.short,
                "shape": shape,
                "count": math.prod(shape),
                "bytes": int(data.nbytes),
            }
        )
    return r


def format_weights(r: WeightsReport, top: int = 0) -> str:
    """The text ``msc inspect --weights-only`` prints (``top``: tensors listed, 0 all)."""
    lines = [f"{r.source}  (weights only: nothing run, no tensor data read)"]
    lines.append(
        f"parameters  {human(r.params)} ({r.params:,}), {human(r.param_bytes, 'B')}, "
        f"{len(r.tensors)} tensors"
    )
    for dt, d in r.by_dtype().items():
        lines.append(f"  {dt}  {d['count']:,}  {human(d['bytes'], 'B')}  {d['tensors']} tensors")
    if r.metadata:
        lines.append("metadata")
        lines += [f"  {k}: {v}" for k, v in sorted(r.metadata.items())]
    shown = r.tensors if top <= 0 else r.tensors[:top]
    note = "" if len(shown) == len(r.tensors) else f", first {len(shown)} of {len(r.tensors)}"
    lines.append(f"tensors{note}")
    rows = [["name", "dtype", "shape", "count"]]
    rows += [[t["name"], t["dtype"], str(t["shape"]), f"{t['count']:,}"] for t in shown]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
    return "\n".join(line.rstrip() for line in lines) + "\n"
