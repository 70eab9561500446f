"""Save and load a graph: a directory with ``graph.msc`` (text), ``weights.safetensors`` and,
when the graph has str weights, ``strings.json``.

# NOTE: saving is atomic per directory: everything is written into a temporary sibling
# directory that replaces the target only when complete, so a failure leaves no half-written
# output. Loading gives each weight a file region of weights.safetensors (nothing read, no
# pickle); saving copies regions file to file and stores sub-byte types packed. safetensors
# holds numbers only: str weights go to strings.json as {name: {"shape": [...], "data":
# [text, ...]}} (data flat, row-major), plain JSON read back with every field checked (data,
# never code); str constants in node attributes are text and travel in graph.msc.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from msc.errors import MscError
from msc.io import files, marker, safetensors
from msc.ir.bulk import paused
from msc.ir.graph import Graph, GraphError, Weight
from msc.text import from_text, to_text

__all__ = [
    "save",
    "load",
    "source",
    "atomic_dir",
    "replace_dir",
    "own_file",
    "GRAPH_FILE",
    "WEIGHTS_FILE",
    "STRINGS_FILE",
]

GRAPH_FILE = "graph.msc"
WEIGHTS_FILE = "weights.safetensors"
STRINGS_FILE = "strings.json"


def _all_weights(g: Graph) -> list[Weight]:
    out = list(g.weights.values())
    for n in g.nodes:
        for sub in n.subgraphs():
            out.extend(_all_weights(sub))
    return out


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` only if the block succeeds, with
    msc's marker listing what the block wrote (msc.io.marker). ``target`` must be new, empty,
    or a directory msc wrote (``files.check_output``)."""
    files.check_output(target, "dir")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with files.uninterrupted():
            tmp = files.mkdtemp(target.parent, prefix=f".{target.name}.")
        yield tmp
        marker.write_marker(tmp)
        replace_dir(tmp, target)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(staged: Path, target: Path) -> None:
    """Put the complete directory ``staged`` at ``target`` (a sibling), replacing a directory
    msc wrote there before: renamed aside, the new one renamed in, the old one removed (all
    of it, a signal notwithstanding: files.uninterrupted)."""
    with files.uninterrupted():
        _replace_dir(staged, target)


def _replace_dir(staged: Path, target: Path) -> None:
    if target.exists():
        files.check_output(target, "dir")
        old = files.mkdtemp(target.parent, prefix=f".{target.name}.old.")
        os.rename(target, old / "x")
        os.rename(staged, target)
        shutil.rmtree(old)
    else:
        os.rename(staged, target)


def save(graph: Graph, directory: str | os.PathLike) -> Path:
    """Write ``graph`` to ``directory`` (created or replaced atomically). Returns the path."""
    target = Path(directory)
    weights = _all_weights(graph)
    names = [w.name for w in weights]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"cannot save: weight names used by more than one weight: {dup}")
    text = to_text(graph)
    stored = [w for w in weights if w.has_data and not w.type.dtype.is_string]
    strings = {
        w.name: {"shape": list(w.type.shape or ()), "data": w.numpy().reshape(-1).tolist()}
        for w in weights
        if w.has_data and w.type.dtype.is_string
    }
    with atomic_dir(target) as tmp:
        (tmp / GRAPH_FILE).write_text(text, encoding="utf-8")
        if strings:
            (tmp / STRINGS_FILE).write_text(json.dumps(strings, sort_keys=True), encoding="ascii")
        safetensors.write_lazy(
            tmp / WEIGHTS_FILE,
            [(w.name, w.type.dtype, w.type.shape, source(w)) for w in stored],
            metadata={"format": "msc"},
            pack_sub_byte=True,
        )
    _repoint(stored, target)
    return target


def source(w: Weight) -> safetensors.Source:
    """What a writer reads a weight's data from: its region or packed bytes as they are
    (copied, not read), else its array or loader."""
    data = w.storage
    return data if data is not None and not callable(data) else w.numpy


def _repoint(weights: list[Weight], target: Path) -> None:
    """Weights whose regions were in the files just replaced now read the new files (the
    same bytes at new offsets), so the graph stays usable after saving over its source."""
    stale = [w for w in weights if w.region is not None and _inside(w.region.path, target)]
    if not stale:
        return
    fresh = safetensors.regions(target / WEIGHTS_FILE)
    for w in stale:
        w.set_data(fresh[w.name])


def _inside(path: str, directory: Path) -> bool:
    p, d = Path(path).resolve(), directory.resolve()
    return d in p.parents


def load(directory: str | os.PathLike, mmap: bool = True) -> Graph:
    """Read a graph saved by ``save``; weights are file regions, mapped when used (read into
    memory with ``mmap=False``)."""
    with paused():  # many objects, no garbage cycles (msc.ir.bulk)
        return _load(Path(directory), mmap)


def own_file(d: Path, name: str) -> Path:
    """``d / name``, refused when it is a symbolic link leading out of ``d``: a saved model's
    files are its own (a link out could make msc read any file as the model's weights)."""
    p = d / name
    if p.is_symlink() and d.resolve() not in p.resolve().parents:
        raise MscError(f"{p}: a symbolic link out of {d} ({os.readlink(p)}); not read")
    return p


def _load(d: Path, mmap: bool) -> Graph:
    gfile = own_file(d, GRAPH_FILE)
    if not gfile.is_file():
        raise FileNotFoundError(f"{d}: no {GRAPH_FILE} (not a saved msc graph)")
    try:
        graph = from_text(gfile.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise MscError(f"{gfile}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    wfile = own_file(d, WEIGHTS_FILE)
    weights = _all_weights(graph)
    if any(not w.type.dtype.is_string for w in weights) and not wfile.is_file():
        raise MscError(
            f"{d}: the graph declares {len(weights)} weights but {WEIGHTS_FILE} is missing"
        )
    data: dict = {}
    if wfile.is_file():
        data = safetensors.regions(wfile) if mmap else safetensors.read(wfile, mmap=False)
    sfile = own_file(d, STRINGS_FILE)
    strings: dict = {}
    if sfile.is_file():
        strings = _read_strings(sfile)
        if clash := sorted(set(strings) & set(data)):
            raise MscError(f"{sfile}: weights also in {WEIGHTS_FILE}: {clash[:5]}")
        data.update(strings)
    missing = []
    for w in weights:
        if w.name not in data:
            missing.append(w.name)
            continue
        try:
            w.set_data(data.pop(w.name))
        except GraphError as e:
            raise MscError(f"{wfile}: {e}") from None
    if missing:
        shown = ", ".join(repr(n) for n in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise MscError(f"{wfile}: {len(missing)} weight(s) of the graph are missing: {shown}")
    if data:
        where = sfile if set(data) & set(strings) else wfile
        raise MscError(f"{where}: tensors not declared in the graph: {sorted(data)[:5]}")
    return graph


def _read_strings(path: Path) -> dict[str, np.ndarray]:
    """strings.json's str weights as object arrays; MscError naming the file and the weight
    for anything that is not ``{name: {"shape": [ints], "data": [strs]}}`` with matching
    sizes."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        # RecursionError: arrays nested deeper than the decoder goes (no weight is nested)
        raise MscError(f"{path}: not a JSON file of string weights ({e})") from None
    if not isinstance(raw, dict):
        raise MscError(f"{path}: expected an object of string weights")
    out: dict[str, np.ndarray] = {}
    for name, entry in raw.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        items = entry.get("data") if isinstance(entry, dict) else None
        if (
            not isinstance(shape, list)
            or not all(type(d) is int and d >= 0 for d in shape)
            or not isinstance(items, list)
            or not all(type(x) is str for x in items)
        ):
            raise MscError(f"{path}: weight {name!r} is not {{shape: [ints], data: [strings]}}")
        n = 1
        for d in shape:
            n *= d
        if n != len(items):
            raise MscError(f"{path}: weight {name!r} has {len(items)} strings, shape {shape}")
        arr = np.empty(len(items), object)
        arr[:] = items
        out[name] = arr.reshape(shape)
    return out
