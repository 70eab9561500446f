"""Read and write the safetensors format with numpy only: streamed writes, memory-mapped reads.

# NOTE: the safetensors library serializes from in-memory bytes (a full copy of every weight)
# and its numpy loader copies into RAM. A hub that converts models larger than memory needs
# neither, so this module writes the same file format (8-byte little-endian header length,
# JSON header, raw little-endian data) in chunks and reads it back with ``np.memmap``.
# Files written here load with ``safetensors.torch.load_file``.
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

__all__ = ["write", "write_lazy", "read", "read_header", "SafetensorsError", "SAFETENSORS_DTYPES"]


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
_FROM_ST = {v: k for k, v in SAFETENSORS_DTYPES.items()}
_CHUNK = 64 << 20


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
    specs: Iterable[tuple[str, DType, tuple[int, ...], Callable[[], np.ndarray]]],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write tensors known by (name, dtype, shape) whose data loads on demand, atomically.

    A loader runs when its tensor is written, so at most one lazily loaded tensor is in memory
    at a time.
    """
    specs = list(specs)
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, dt, shape, _ in specs:
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[dt],
            "shape": list(shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    _write(path, header, ((name, load) for name, _, _, load in specs))


def _write(path: Path, header: dict, items: Iterable) -> None:
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # align the data to 8 bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = files.mkstemp(path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(len(raw).to_bytes(8, "little"))
            f.write(raw)
            for name, t in items:
                arr = t if isinstance(t, np.ndarray) else t()
                spec = header[name]
                dt = _FROM_ST[spec["dtype"]]  # type: ignore[index]
                if DType.from_numpy(arr.dtype) is not dt or list(arr.shape) != spec["shape"]:  # type: ignore[index]
                    raise SafetensorsError(
                        f"tensor {name!r}: data does not match its declared type"
                    )
                flat = arr.reshape(-1)
                if flat.dtype.byteorder == ">":
                    flat = flat.astype(flat.dtype.newbyteorder("<"))
                step = max(1, _CHUNK // max(1, flat.itemsize))
                for i in range(0, flat.size, step):
                    chunk = np.ascontiguousarray(flat[i : i + step])
                    f.write(chunk.view(np.uint8).data)  # no copy
                    files.drop_pages(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


def read(path: str | os.PathLike, mmap: bool = True) -> dict[str, np.ndarray]:
    """Tensors by name; memory-mapped read-only views when ``mmap`` (no copy)."""
    header, start = read_header(path)
    size = os.path.getsize(path)
    out: dict[str, np.ndarray] = {}
    whole = np.memmap(path, dtype=np.uint8, mode="r") if mmap and size > start else None
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dt = _FROM_ST[spec["dtype"]]
            shape = tuple(int(d) for d in spec["shape"])
            lo, hi = (int(x) for x in spec["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(
                f"{path}: tensor {name!r} has a bad header entry {spec!r}"
            ) from None
        if any(d < 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor {name!r} has a negative dim {list(shape)}")
        n = math.prod(shape) * dt.itemsize
        if hi - lo != n or start + hi > size or lo < 0:
            raise SafetensorsError(f"{path}: tensor {name!r} data is out of bounds or mis-sized")
        npdt = dt.to_numpy().newbyteorder("<")
        if whole is not None and n:
            arr = whole[start + lo : start + hi].view(npdt).reshape(shape)
        else:
            with open(path, "rb") as f:
                f.seek(start + lo)
                arr = np.frombuffer(f.read(n), dtype=npdt).reshape(shape)
        out[name] = arr
    return out
