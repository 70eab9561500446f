"""Read and write the safetensors format with numpy only: streamed writes, memory-mapped reads.

# NOTE: the safetensors library serializes from in-memory bytes (a full copy of every weight)
# and its numpy loader copies into RAM. A hub that converts models larger than memory needs
# neither, so this module writes the same file format (8-byte little-endian header length,
# JSON header, raw little-endian data) in chunks and reads it back as file regions, mapped
# when used. A tensor whose data is already a region of a file is copied file to file.
# Files written here load with ``safetensors.torch.load_file``, except sub-byte types, which
# the format has no names for: msc writes them under its own tags, one element per byte
# (``I4_UNPACKED``) or packed two to a byte, low bits first (``I4_PACKED``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from msc.errors import MscError
from msc.io import files
from msc.ir.dtype import DType
from msc.ir.tensor import SUB_BYTE_BITS, FileRegion, Packed, pack, packed_size

__all__ = [
    "write",
    "write_lazy",
    "read",
    "regions",
    "read_header",
    "SafetensorsError",
    "SAFETENSORS_DTYPES",
    "Source",
]


class SafetensorsError(MscError, ValueError):
    """A safetensors file that is truncated, corrupt, or not what its header says."""


SAFETENSORS_DTYPES: dict[DType, str] = {
    DType.BOOL: "BOOL",
    DType.UINT8: "U8",
    DType.INT8: "I8",
    DType.UINT16: "U16",
    DType.INT16: "I16",
    DType.UINT32: "U32",
    DType.INT32: "I32",
    DType.UINT64: "U64",
    DType.INT64: "I64",
    DType.FLOAT16: "F16",
    DType.BFLOAT16: "BF16",
    DType.FLOAT32: "F32",
    DType.FLOAT64: "F64",
    DType.FLOAT8_E4M3FN: "F8_E4M3",
    DType.FLOAT8_E5M2: "F8_E5M2",
    # Not in the safetensors spec; written so msc can read them back, rejected by other readers.
    DType.FLOAT8_E4M3FNUZ: "F8_E4M3FNUZ",
    DType.FLOAT8_E5M2FNUZ: "F8_E5M2FNUZ",
    DType.COMPLEX64: "C64",
    DType.COMPLEX128: "C128",
    DType.FLOAT8_E8M0: "F8_E8M0",
    DType.FLOAT4_E2M1: "F4_E2M1_UNPACKED",
    DType.INT4: "I4_UNPACKED",
    DType.UINT4: "U4_UNPACKED",
    DType.INT2: "I2_UNPACKED",
    DType.UINT2: "U2_UNPACKED",
}
_PACKED_TAGS = {dt: SAFETENSORS_DTYPES[dt].replace("_UNPACKED", "_PACKED") for dt in SUB_BYTE_BITS}
_FROM_ST = {v: k for k, v in SAFETENSORS_DTYPES.items()}
_FROM_PACKED = {v: k for k, v in _PACKED_TAGS.items()}
_CHUNK = 64 << 20

# Where a tensor's data comes from when it is written: an array, a loader, a file region
# (copied file to file) or packed sub-byte bytes.
Source = np.ndarray | Callable[[], np.ndarray] | FileRegion | Packed


def write(
    path: str | os.PathLike,
    tensors: Mapping[str, np.ndarray],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write numpy arrays to ``path`` atomically (temp file + rename), in chunks."""
    specs = [
        (name, DType.from_numpy(a.dtype), tuple(a.shape), (lambda a=a: a))
        for name, a in tensors.items()
    ]
    write_lazy(path, specs, metadata)


def write_lazy(
    path: str | os.PathLike,
    specs: Iterable[tuple[str, DType, tuple[int, ...], Source]],
    metadata: Mapping[str, str] | None = None,
    *,
    pack_sub_byte: bool = False,
) -> None:
    """Write tensors known by (name, dtype, shape) whose data comes from a Source, atomically.

    A loader runs when its tensor is written, so at most one lazily loaded tensor is in memory
    at a time; a file region is copied without being read into memory. With
    ``pack_sub_byte``, 4-bit and 2-bit tensors are stored packed (``*_PACKED``).
    """
    specs = list(specs)
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, dt, shape, _ in specs:
        packed = pack_sub_byte and dt in SUB_BYTE_BITS
        n = packed_size(dt, shape) if packed else math.prod(shape) * dt.itemsize
        header[name] = {
            "dtype": _PACKED_TAGS[dt] if packed else SAFETENSORS_DTYPES[dt],
            "shape": list(shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    _write(path, header, ((name, src) for name, _, _, src in specs))


def _write(path: Path, header: dict, items: Iterable[tuple[str, Source]]) -> None:
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # align the data to 8 bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with files.uninterrupted():
            fd, tmp = files.mkstemp(path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(len(raw).to_bytes(8, "little"))
            f.write(raw)
            for name, src in items:
                _write_one(f, name, header[name], src)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_one(f, name: str, spec: dict, src: Source) -> None:
    tag = spec["dtype"]
    packed = tag in _FROM_PACKED
    dt = _FROM_PACKED[tag] if packed else _FROM_ST[tag]
    shape = tuple(spec["shape"])
    if isinstance(src, FileRegion | Packed):
        if src.dtype is not dt or tuple(src.shape) != shape:
            raise SafetensorsError(f"tensor {name!r}: data does not match its declared type")
        if isinstance(src, FileRegion) and src.packed == packed:
            src.copy_to(f)  # the stored bytes are the bytes to write
            return
        if packed:
            f.write(src.packed_bytes().data)
            return
        src = src.array
    arr = src if isinstance(src, np.ndarray) else src()
    if DType.from_numpy(arr.dtype) is not dt or tuple(arr.shape) != shape:
        raise SafetensorsError(f"tensor {name!r}: data does not match its declared type")
    if packed:
        f.write(pack(arr).data)
        return
    flat = arr.reshape(-1)
    if flat.dtype.byteorder == ">":
        flat = flat.astype(flat.dtype.newbyteorder("<"))
    if arr.base is None and flat.flags.c_contiguous:  # owns its memory: no mapping to drop
        f.write(flat.view(np.uint8).data)
        return
    step = max(1, _CHUNK // max(1, flat.itemsize))
    for i in range(0, flat.size, step):
        chunk = np.ascontiguousarray(flat[i : i + step])
        f.write(chunk.view(np.uint8).data)  # no copy
        files.drop_pages(chunk)


def read_header(path: str | os.PathLike) -> tuple[dict, int]:
    """The JSON header and the byte offset where tensor data starts."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: not a safetensors file (too short)")
        n = int.from_bytes(head, "little")
        size = os.fstat(f.fileno()).st_size
        if n > size - 8 or n > 100 << 20:
            raise SafetensorsError(f"{path}: not a safetensors file (header length {n})")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SafetensorsError(f"{path}: corrupt safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: corrupt safetensors header")
    return header, 8 + n


def regions(path: str | os.PathLike) -> dict[str, FileRegion | np.ndarray]:
    """Tensors by name as file regions (nothing read; empty tensors as arrays)."""
    header, start = read_header(path)
    size = os.path.getsize(path)
    stamp = FileRegion.at(path, 0, 0, DType.UINT8, (0,)).stamp  # one stat for all tensors
    out: dict[str, FileRegion | np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            tag = spec["dtype"]
            packed = tag in _FROM_PACKED
            dt = _FROM_PACKED[tag] if packed else _FROM_ST[tag]
            shape = tuple(map(int, spec["shape"]))
            lo, hi = map(int, spec["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(
                f"{path}: tensor {name!r} has a bad header entry {spec!r}"
            ) from None
        if shape and min(shape) < 0:
            raise SafetensorsError(f"{path}: tensor {name!r} has a negative dim {list(shape)}")
        n = packed_size(dt, shape) if packed else math.prod(shape) * dt.itemsize
        if hi - lo != n or start + hi > size or lo < 0:
            raise SafetensorsError(f"{path}: tensor {name!r} data is out of bounds or mis-sized")
        if n == 0:
            out[name] = np.zeros(shape, dt.to_numpy())
        else:
            out[name] = FileRegion(str(path), start + lo, n, dt, shape, packed, stamp)
    return out


def read(path: str | os.PathLike, mmap: bool = True) -> dict[str, np.ndarray]:
    """Tensors by name as arrays: memory-mapped read-only views when ``mmap`` (no copy),
    else read into memory."""
    out: dict[str, np.ndarray] = {}
    for name, r in regions(path).items():
        if isinstance(r, np.ndarray):
            out[name] = r
        elif mmap or r.packed:
            out[name] = r.array()
        else:
            arr = np.frombuffer(r.read().data, dtype=r.dtype.to_numpy().newbyteorder("<"))
            out[name] = arr.reshape(r.shape)
    return out
