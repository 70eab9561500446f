"""Where a weight's data lives when it is not an array in memory: a region of a file, or
sub-byte values packed in memory.

# NOTE: invariants
# - A FileRegion names bytes in a file (path, offset, length) holding a tensor (dtype, shape),
#   little-endian, sub-byte types packed when ``packed``. It keeps no data and no mapping:
#   ``array()`` maps the bytes read-only for the caller's use (a fresh np.memmap, released
#   when the caller drops it), ``copy_to()`` copies them into another file in the kernel
#   (copy_file_range) or in bounded chunks, never whole in memory.
# - Sub-byte types (int4 / uint4 / float4 and int2 / uint2) pack low bits first: element i of
#   a byte sits at bits [i * bits, (i + 1) * bits), the layout of ONNX and of msc's own files.
#   ``Packed`` holds such bytes in memory; its ``nbytes`` is the packed size.
# - Both are immutable values: data that changes is a new array.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from msc.ir.dtype import DType

__all__ = [
    "FileRegion",
    "Packed",
    "SUB_BYTE_BITS",
    "pack",
    "unpack",
    "packed_size",
    "content_bytes",
]

# Bits per element of the types stored several to a byte.
SUB_BYTE_BITS = {
    DType.INT4: 4,
    DType.UINT4: 4,
    DType.FLOAT4_E2M1: 4,
    DType.INT2: 2,
    DType.UINT2: 2,
}
_CHUNK = 64 << 20


def _stamp(path: str) -> tuple[int, ...]:
    # The change time too: a file rewritten in place with its size and modification time put
    # back (os.utime) still gets a new ctime, which no one can set.
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def content_bytes(arr: np.ndarray) -> bytes:
    """The bytes that identify an array's values (what equality and hashing compare): its
    little-endian data, or for a str tensor each element's UTF-8 length and bytes (an object
    array's own bytes are pointers)."""
    if arr.dtype == object:
        out = bytearray()
        for x in arr.flat:
            b = x.encode("utf-8")
            out += len(b).to_bytes(8, "little") + b
        return bytes(out)
    return np.ascontiguousarray(arr).tobytes()


def packed_size(dtype: DType, shape: tuple[int, ...]) -> int:
    """Bytes of ``dtype[shape]`` as stored: packed for sub-byte types."""
    n = _numel(shape)
    bits = SUB_BYTE_BITS.get(dtype)
    return -(-n * bits // 8) if bits else n * dtype.itemsize


def pack(arr: np.ndarray) -> np.ndarray:
    """A sub-byte array (ml_dtypes, one element per byte) as packed bytes (uint8, 1-d)."""
    dtype = DType.from_numpy(arr.dtype)
    bits = SUB_BYTE_BITS[dtype]
    per = 8 // bits
    codes = np.ascontiguousarray(arr).reshape(-1).view(np.uint8) & np.uint8((1 << bits) - 1)
    pad = -codes.size % per
    if pad:
        codes = np.concatenate([codes, np.zeros(pad, np.uint8)])
    groups = codes.reshape(-1, per).astype(np.uint8)
    out = np.zeros(groups.shape[0], np.uint8)
    for i in range(per):
        out |= groups[:, i] << np.uint8(i * bits)
    return out


def unpack(data: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as a ``dtype`` array of ``shape``, one element per byte (a new array)."""
    bits = SUB_BYTE_BITS[dtype]
    per = 8 // bits
    n = _numel(shape)
    raw = np.asarray(data, np.uint8).reshape(-1)
    mask = np.uint8((1 << bits) - 1)
    codes = np.empty((raw.size, per), np.uint8)
    for i in range(per):
        codes[:, i] = (raw >> np.uint8(i * bits)) & mask
    # ml_dtypes keeps a sub-byte value's bit pattern in the low bits of its byte.
    return codes.reshape(-1)[:n].view(dtype.to_numpy()).reshape(shape)


@dataclass(frozen=True, slots=True)
class Packed:
    """Sub-byte values packed in memory (two int4 per byte)."""

    data: np.ndarray  # uint8, packed_size(dtype, shape) bytes
    dtype: DType
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in SUB_BYTE_BITS:
            raise ValueError(f"{self.dtype.short} is not a sub-byte type")
        want = packed_size(self.dtype, self.shape)
        if self.data.dtype != np.uint8 or self.data.size != want:
            raise ValueError(
                f"packed {self.dtype.short}{list(self.shape)} needs {want} bytes, "
                f"got {self.data.size} of {self.data.dtype}"
            )

    @classmethod
    def of(cls, arr: np.ndarray) -> Packed:
        return cls(pack(arr), DType.from_numpy(arr.dtype), tuple(int(d) for d in arr.shape))

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    def array(self) -> np.ndarray:
        return unpack(self.data, self.dtype, self.shape)

    def packed_bytes(self) -> np.ndarray:
        return self.data


@dataclass(frozen=True, slots=True)
class FileRegion:
    """A tensor's bytes in a file, read only when used."""

    path: str
    offset: int
    length: int
    dtype: DType
    shape: tuple[int, ...]
    packed: bool = False  # sub-byte values packed (else one element per byte)
    # The file as it was when the region was made (device, inode, size, mtime, ctime): a file
    # replaced or rewritten since is an error on use, never other bytes read as the tensor.
    stamp: tuple[int, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def at(
        cls,
        path: str | os.PathLike,
        offset: int,
        length: int,
        dtype: DType,
        shape: tuple[int, ...],
        packed: bool = False,
    ) -> FileRegion:
        """A region of the file as it is now (its stamp taken)."""
        return cls(str(path), offset, length, dtype, tuple(shape), packed, _stamp(str(path)))

    def check(self) -> None:
        """Raise OSError when the file is not the one the region was made from."""
        if self.stamp and _stamp(self.path) != self.stamp:
            raise OSError(
                f"{self.path} changed since its tensor regions were recorded; "
                f"reload the model (a {self.dtype.short}{list(self.shape)} at {self.offset})"
            )

    def __post_init__(self) -> None:
        if self.packed and self.dtype not in SUB_BYTE_BITS:
            raise ValueError(f"{self.path}: {self.dtype.short} data cannot be packed")
        want = (
            packed_size(self.dtype, self.shape)
            if self.packed
            else _numel(self.shape) * self.dtype.itemsize
        )
        if self.offset < 0 or self.length != want:
            raise ValueError(
                f"{self.path}: region at {self.offset} of {self.length} bytes, "
                f"{self.dtype.short}{list(self.shape)} needs {want}"
            )

    @property
    def nbytes(self) -> int:
        return self.length

    def array(self) -> np.ndarray:
        """The tensor: a read-only memory map of the region (nothing kept after the caller
        drops it), or for packed data an unpacked copy."""
        if self.length == 0:
            return np.zeros(self.shape, self.dtype.to_numpy())
        self.check()
        if self.packed:
            return unpack(self.read(), self.dtype, self.shape)
        npdt = self.dtype.to_numpy().newbyteorder("<")
        return np.memmap(self.path, dtype=npdt, mode="r", offset=self.offset, shape=self.shape)

    def read(self) -> np.ndarray:
        """The region's bytes in memory (uint8)."""
        self.check()
        return np.fromfile(self.path, dtype=np.uint8, count=self.length, offset=self.offset)

    def packed_bytes(self) -> np.ndarray:
        """The stored bytes of packed data (sub-byte types packed low bits first)."""
        if self.packed:
            return self.read()
        return pack(self.array())

    def copy_to(self, f: BinaryIO) -> int:
        """Append the region's bytes to the open file ``f`` without holding them in memory;
        returns the number of bytes written."""
        self.check()
        f.flush()
        out = f.fileno()
        done = 0
        with open(self.path, "rb") as src:
            fd = src.fileno()
            copy = getattr(os, "copy_file_range", None)
            while copy is not None and done < self.length:
                try:
                    n = copy(fd, out, self.length - done, self.offset + done)
                except OSError:  # another file system, or a kernel without it
                    break
                if n == 0:
                    break
                done += n
            while done < self.length:
                chunk = os.pread(fd, min(_CHUNK, self.length - done), self.offset + done)
                if not chunk:
                    raise OSError(f"{self.path}: file ended inside the region at {self.offset}")
                done += os.write(out, chunk)
        f.seek(0, os.SEEK_END)  # the buffered writer resumes after what the kernel wrote
        return done
