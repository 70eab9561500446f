"""Knowing what msc wrote: a marker file in each output directory, and a signature in each
output file, so an output replaces only what msc itself wrote there and nothing else.

A directory msc writes (``msc.save``, ``codegen.torch.save``, ``codegen.relax.save``) holds
``MARKER``, a JSON list of the files written beside it with their sizes and, for files up to
HASHED_MAX bytes (code, graph text, small weights), their sha256. A later output replaces the
directory only when everything in it is such a file, unchanged, or Python's bytecode cache of
one of its .py files (``__pycache__/model.cpython-312.pyc``). A user's file there (named
``model.py`` or anything else), a file changed since msc wrote it, or a directory without a
marker is the user's: the output is refused.

A file msc writes carries its kind's signature near its start (SIGNATURES): an HTML page its
generator meta tag, an .svg or .dot its comment, JSON its key, an ONNX model its producer name
(read from the protobuf's leading fields, not searched for). A file is replaced only by an
output of the same kind whose signature it holds.

# NOTE: invariants
# - Nothing here follows a symbolic link out of a directory: a symlink in an output directory
#   is the user's.
# - Files larger than HASHED_MAX (weights) are recognised by size and modification time, not
#   hashed: hashing gigabytes on every save and every overwrite costs seconds; a weight file
#   rewritten with its size and time kept on purpose is not caught (a user edits model.py, not
#   a safetensors file, by hand).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from msc.errors import MscError

__all__ = ["MARKER", "write_marker", "check_dir", "check_file", "SIGNATURES", "HASHED_MAX"]

MARKER = ".msc-output.json"
HASHED_MAX = 16 << 20
_MARKER_MAX = 1 << 20  # a marker lists a handful of files
_HEAD = 4096  # signatures are within a file's first bytes
_PYC = re.compile(r"(?P<stem>[^.]+)\.[A-Za-z0-9_-]+(?:\.opt-[12])?\.pyc\Z")

# The mark of each kind of file msc writes, within its first _HEAD bytes. (ONNX: see _onnx.)
SIGNATURES: dict[str, bytes] = {
    "html": b'<meta name="generator" content="msc">',
    "svg": b"<!-- generator: msc -->",
    "dot": b"// generator: msc",
    "node-data": b'"generator": "msc"',
    "batch-report": b'"msc_batch":',
    "tflite": b"generator: msc",  # the model description codegen.tflite writes
    "keras": b'{"generator": "msc codegen.keras"',  # a .keras file's metadata.json, its start
}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _entry(path: Path) -> dict:
    st = path.stat()
    e: dict = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if st.st_size <= HASHED_MAX:
        e["sha256"] = _sha256(path)
    return e


def write_marker(directory: Path) -> None:
    """Record the files now in ``directory`` (msc's staged output) in its marker."""
    listed = {}
    for p in sorted(directory.iterdir()):
        if p.name != MARKER and p.is_file() and not p.is_symlink():
            listed[p.name] = _entry(p)
    data = {"msc_output": 1, "files": listed}
    (directory / MARKER).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _read_marker(directory: Path) -> dict[str, dict] | None:
    m = directory / MARKER
    if m.is_symlink() or not m.is_file() or m.stat().st_size > _MARKER_MAX:
        return None
    try:
        data = json.loads(m.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("msc_output") else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        return None
    return files


def _unchanged(path: Path, e: dict) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    st = path.stat()
    if st.st_size != e.get("size"):
        return False
    if "sha256" in e:
        return _sha256(path) == e["sha256"]
    return st.st_mtime_ns == e.get("mtime_ns")


def check_dir(directory: Path) -> None:
    """MscError unless ``directory`` is empty or holds only what msc wrote there, unchanged."""
    names = sorted(os.listdir(directory))
    if not names:
        return
    listed = _read_marker(directory)
    if listed is None:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise MscError(
            f"{directory}: exists and holds files msc did not write ({shown}); "
            "choose another path or empty it"
        )
    stems = {Path(n).stem for n in listed if n.endswith(".py")}
    foreign, changed = [], []
    for name in names:
        p = directory / name
        if name == MARKER:
            continue
        if name == "__pycache__" and p.is_dir() and not p.is_symlink():
            for c in sorted(os.listdir(p)):
                m = _PYC.match(c)
                q = p / c
                if m is None or m["stem"] not in stems or q.is_symlink() or not q.is_file():
                    foreign.append(f"__pycache__/{c}")
        elif name not in listed:
            foreign.append(name)
        elif not _unchanged(p, listed[name]):
            changed.append(name)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise MscError(
            f"{directory}: exists and holds files msc did not write ({shown}); "
            "choose another path or empty it"
        )
    if changed:
        raise MscError(
            f"{directory}: {', '.join(changed)} changed since msc wrote it; "
            "choose another path, or remove the directory to replace it"
        )


def check_file(path: Path, kind: str) -> None:
    """MscError unless the existing file ``path`` is an output of ``kind`` msc wrote."""
    if not _is_kind(path, kind):
        raise MscError(
            f"{path}: exists and is not a file msc wrote ({kind}); choose another path or remove it"
        )


def _is_kind(path: Path, kind: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return False
    if kind == "onnx":
        return _onnx_producer(head) == b"msc"
    sig = SIGNATURES.get(kind)
    return sig is not None and sig in head


def _varint(b: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated")
        c = b[i]
        n |= (c & 0x7F) << shift
        i += 1
        if not c & 0x80:
            return n, i
        shift += 7


def _onnx_producer(head: bytes) -> bytes | None:
    """ModelProto.producer_name (field 2) from a serialized model's first bytes: protobuf
    writes fields in number order, so it follows ir_version (1) and precedes the graph (7)."""
    i = 0
    try:
        while i < len(head):
            tag, i = _varint(head, i)
            field, wire = tag >> 3, tag & 7
            if wire == 0:
                _, i = _varint(head, i)
            elif wire == 2:
                n, i = _varint(head, i)
                if field == 2:
                    return head[i : i + n]
                i += n
            else:
                return None
            if field >= 2:
                return None
    except ValueError:
        return None
    return None
