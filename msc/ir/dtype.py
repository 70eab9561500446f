"""msc's own dtype enum.

# NOTE: invariants
# - Framework dtype objects and strings ("float", "long") never travel inside the graph:
#   frontends map them to ``DType`` at once, codegens map back.
# - Every member has a short text name (``f32``, ``i64``, ``bf16``) used by the text format;
#   the short names are unique and are bare identifiers.
# - numpy conversion lives here because weights are numpy arrays; bf16 and the float8 family
#   come from ml_dtypes.
# - ``STRING`` (``str``) is text: numpy holds it as object arrays whose every element is a
#   Python ``str`` (``check_strings`` is where arrays enter the graph). Object dtype rather
#   than numpy's StringDType: the project supports numpy >= 1.24 (StringDType is 2.0+), and
#   onnx and onnxruntime hand string tensors over as object arrays. A string has no fixed
#   byte size, so ``itemsize`` and ``bits`` raise for it and byte counts are None.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

__all__ = ["DType", "check_strings", "shortest"]


class DType(enum.Enum):
    """An element type. The value is the text-format short name."""

    BOOL = "bool"
    INT8 = "i8"
    INT16 = "i16"
    INT32 = "i32"
    INT64 = "i64"
    UINT8 = "u8"
    UINT16 = "u16"
    UINT32 = "u32"
    UINT64 = "u64"
    FLOAT16 = "f16"
    BFLOAT16 = "bf16"
    FLOAT32 = "f32"
    FLOAT64 = "f64"
    COMPLEX64 = "c64"
    COMPLEX128 = "c128"
    FLOAT8_E4M3FN = "f8e4m3fn"
    FLOAT8_E4M3FNUZ = "f8e4m3fnuz"
    FLOAT8_E5M2 = "f8e5m2"
    FLOAT8_E5M2FNUZ = "f8e5m2fnuz"
    FLOAT8_E8M0 = "f8e8m0"
    FLOAT4_E2M1 = "f4e2m1"
    INT4 = "i4"
    UINT4 = "u4"
    INT2 = "i2"
    UINT2 = "u2"
    STRING = "str"

    # Members are singletons compared by identity: hash by identity too (Enum's own __hash__
    # is a Python-level call, paid for every dict lookup and every TensorType hash).
    __hash__ = object.__hash__

    @property
    def short(self) -> str:
        return self.value

    @classmethod
    def from_short(cls, name: str) -> DType:
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown dtype {name!r}") from None

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (a sub-byte type takes a whole byte there). A string
        has none: ValueError (check ``is_string`` or use TensorType.nbytes, which is None)."""
        if self is DType.STRING:
            raise ValueError("dtype str has no fixed size per element")
        return self.to_numpy().itemsize

    @property
    def bits(self) -> int:
        """Bits per element as files store it: 4 for int4 / uint4 / float4, 2 for int2 / uint2
        (packed, as ONNX and safetensors' sub-byte types are), else 8 * itemsize."""
        return _SUB_BYTE_BITS.get(self) or 8 * self.itemsize

    @property
    def is_string(self) -> bool:
        return self is DType.STRING

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def is_floating(self) -> bool:
        return self in _FLOATING

    @property
    def is_complex(self) -> bool:
        return self in (DType.COMPLEX64, DType.COMPLEX128)

    @property
    def is_integer(self) -> bool:
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_signed(self) -> bool:
        return self in _SIGNED or self.is_floating or self.is_complex

    def to_numpy(self) -> np.dtype:
        return _TO_NUMPY[self]

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        dt = np.dtype(dtype)
        try:
            return _FROM_NUMPY[dt]
        except KeyError:
            raise ValueError(f"numpy dtype {dt} has no msc DType") from None

    def __repr__(self) -> str:
        return f"DType.{self.name}"


_SIGNED = frozenset({DType.INT2, DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT64})
_UNSIGNED = frozenset(
    {DType.UINT2, DType.UINT4, DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64}
)
_FLOATING = frozenset(
    {
        DType.FLOAT16,
        DType.BFLOAT16,
        DType.FLOAT32,
        DType.FLOAT64,
        DType.FLOAT8_E4M3FN,
        DType.FLOAT8_E4M3FNUZ,
        DType.FLOAT8_E5M2,
        DType.FLOAT8_E5M2FNUZ,
        DType.FLOAT8_E8M0,
        DType.FLOAT4_E2M1,
    }
)

_TO_NUMPY: dict[DType, np.dtype] = {
    DType.BOOL: np.dtype(np.bool_),
    DType.INT8: np.dtype(np.int8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64),
    DType.UINT8: np.dtype(np.uint8),
    DType.UINT16: np.dtype(np.uint16),
    DType.UINT32: np.dtype(np.uint32),
    DType.UINT64: np.dtype(np.uint64),
    DType.FLOAT16: np.dtype(np.float16),
    DType.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DType.FLOAT32: np.dtype(np.float32),
    DType.FLOAT64: np.dtype(np.float64),
    DType.COMPLEX64: np.dtype(np.complex64),
    DType.COMPLEX128: np.dtype(np.complex128),
    DType.FLOAT8_E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FLOAT8_E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    DType.FLOAT8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
    DType.FLOAT8_E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    # Sub-byte types are stored one element per byte (ml_dtypes' layout); ONNX packs them.
    DType.FLOAT8_E8M0: np.dtype(ml_dtypes.float8_e8m0fnu),
    DType.FLOAT4_E2M1: np.dtype(ml_dtypes.float4_e2m1fn),
    DType.INT4: np.dtype(ml_dtypes.int4),
    DType.UINT4: np.dtype(ml_dtypes.uint4),
    DType.INT2: np.dtype(ml_dtypes.int2),
    DType.UINT2: np.dtype(ml_dtypes.uint2),
    DType.STRING: np.dtype(object),
}
_FROM_NUMPY: dict[np.dtype, DType] = {v: k for k, v in _TO_NUMPY.items()}


def check_strings(arr: np.ndarray, what: str = "tensor") -> np.ndarray:
    """``arr``, checked to be what a ``str`` tensor holds: an object array of Python ``str``.
    Anything else (bytes, numbers, arbitrary objects; numpy's ``<U5``, which
    ``arr.astype(object)`` converts) is refused with a ValueError naming ``what``."""
    if arr.dtype != object:
        raise ValueError(f"{what}: {arr.dtype} is not a string dtype")
    for x in arr.flat:
        if type(x) is not str:
            raise ValueError(
                f"{what}: a str tensor holds Python str only, found {type(x).__name__}"
            )
    return arr


_SUB_BYTE_BITS = {
    DType.INT4: 4,
    DType.UINT4: 4,
    DType.FLOAT4_E2M1: 4,
    DType.INT2: 2,
    DType.UINT2: 2,
}


def shortest(v: float, dtype: np.dtype) -> float:
    """``v``, a value of float type ``dtype``, as the shortest decimal that rounds back to it in
    that type (``1e-06``, not ``9.999999974752427e-07``): a framework rounds a Python scalar to
    the tensor's type, so code written with it computes the same. Other types: ``v``."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float16) or not np.isfinite(v):
        return v
    short = float(str(dtype.type(v)))
    top = float(np.finfo(dtype).max)  # '3.4028235e+38' is past float32's largest: torch refuses it
    return short if dtype.type(short) == dtype.type(v) and abs(short) <= top else v
