"""ONNX tensors and types -> numpy arrays and msc types, without copying data.

# NOTE: invariants
# - ``raw_data`` becomes a numpy view (``np.frombuffer``) of the bytes protobuf hands us;
#   external data becomes a FileRegion (path, offset, length): nothing is read at import, a use
#   maps it read-only, a re-export copies it file to file.
# - An external data location must be a relative path that stays inside the model's directory
#   (a model file cannot make msc open ``/etc/passwd`` or ``../../secret``).
# - 4-bit and 2-bit types (INT4, UINT4, INT2, UINT2, FLOAT4E2M1), which ONNX packs low bits
#   first, stay packed (Packed bytes, or a packed FileRegion) and unpack to one element per
#   byte (ml_dtypes' layout) only when used.
# - ONNX element types msc has no DType for raise ``UnsupportedType`` naming the type; callers
#   report it with the node or value name.
# - STRING tensors (``string_data``, bytes that ONNX requires to be UTF-8) become ``str``
#   object arrays; bytes that are not UTF-8 are refused, never replaced, so a round trip is
#   exact. ONNX has no raw or external form for strings.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from msc.errors import BadModelError, ConversionError
from msc.ir import DType, SymDim, TensorType
from msc.ir.tensor import FileRegion, Packed, packed_size
from msc.ir.types import Dim, OptionalType, SequenceType, ShapeError, SymExpr, ValueType
from msc.text import ParseError, parse_dim

__all__ = [
    "UnsupportedType",
    "dtype_from_onnx",
    "dtype_to_onnx",
    "tensor_to_numpy",
    "tensor_data",
    "type_from_onnx",
    "value_type_from_onnx",
]


class UnsupportedType(ConversionError):
    """An ONNX type msc cannot hold (strings, sequences, optionals, 4-bit types, ...)."""


_FROM_ONNX: dict[int, DType] = {
    TensorProto.FLOAT: DType.FLOAT32,
    TensorProto.UINT8: DType.UINT8,
    TensorProto.INT8: DType.INT8,
    TensorProto.UINT16: DType.UINT16,
    TensorProto.INT16: DType.INT16,
    TensorProto.INT32: DType.INT32,
    TensorProto.INT64: DType.INT64,
    TensorProto.BOOL: DType.BOOL,
    TensorProto.FLOAT16: DType.FLOAT16,
    TensorProto.DOUBLE: DType.FLOAT64,
    TensorProto.UINT32: DType.UINT32,
    TensorProto.UINT64: DType.UINT64,
    TensorProto.COMPLEX64: DType.COMPLEX64,
    TensorProto.COMPLEX128: DType.COMPLEX128,
    TensorProto.BFLOAT16: DType.BFLOAT16,
    TensorProto.FLOAT8E4M3FN: DType.FLOAT8_E4M3FN,
    TensorProto.FLOAT8E4M3FNUZ: DType.FLOAT8_E4M3FNUZ,
    TensorProto.FLOAT8E5M2: DType.FLOAT8_E5M2,
    TensorProto.FLOAT8E5M2FNUZ: DType.FLOAT8_E5M2FNUZ,
    TensorProto.FLOAT8E8M0: DType.FLOAT8_E8M0,
    TensorProto.FLOAT4E2M1: DType.FLOAT4_E2M1,
    TensorProto.INT4: DType.INT4,
    TensorProto.UINT4: DType.UINT4,
    TensorProto.INT2: DType.INT2,
    TensorProto.UINT2: DType.UINT2,
    TensorProto.STRING: DType.STRING,
}
# Bits per element of the types ONNX packs several to a byte (low bits first); msc holds them
# unpacked, one element per byte, so their data is always a converted copy.
_PACKED_BITS = {
    TensorProto.FLOAT4E2M1: 4,
    TensorProto.INT4: 4,
    TensorProto.UINT4: 4,
    TensorProto.INT2: 2,
    TensorProto.UINT2: 2,
}
_TO_ONNX = {v: k for k, v in _FROM_ONNX.items()}


def _type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type #{elem_type}"


def dtype_from_onnx(elem_type: int) -> DType:
    """The msc DType of an ONNX ``TensorProto.DataType``; raises UnsupportedType."""
    try:
        return _FROM_ONNX[elem_type]
    except KeyError:
        raise UnsupportedType(f"element type {_type_name(elem_type)} has no msc dtype") from None


def dtype_to_onnx(dtype: DType) -> int:
    return _TO_ONNX[dtype]


def dim_from_param(param: str) -> Dim:
    """An ONNX dim_param as a dim: an expression when it is one in msc's exact spelling
    (``2*s0 + 1``, as codegen.onnx writes it), else a symbol of that name (``batch``,
    ``unk__12``, ``batch-size``)."""
    if any(c in param for c in "+-*(") and len(param) <= 512:
        try:
            d = parse_dim(param)
        except ParseError:
            d = None
        if isinstance(d, SymExpr) and d.name == param:
            return d
    return SymDim(param)


def type_from_onnx(tp: onnx.TypeProto, what: str = "value") -> TensorType:
    """A tensor TypeProto as a TensorType: dim_value -> int, dim_param -> SymDim, else None.
    The dim_param ``?`` is None too: exporters (paddle2onnx) write it for "unknown", and as a
    symbol it would make every such dim the same size."""
    kind = tp.WhichOneof("value")
    if kind != "tensor_type":
        raise UnsupportedType(f"{what} has type {kind or 'undefined'}, msc holds tensors only")
    tt = tp.tensor_type
    dtype = dtype_from_onnx(tt.elem_type)
    if not tt.HasField("shape"):
        return TensorType(dtype, None)
    dims: list[int | SymDim | None] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value" and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif which == "dim_param" and d.dim_param and d.dim_param != "?":
            dims.append(dim_from_param(d.dim_param))
        else:
            dims.append(None)
    try:
        return TensorType(dtype, dims)
    except ShapeError as e:
        raise ConversionError(f"{what}: {e}") from None


def value_type_from_onnx(tp: onnx.TypeProto, what: str = "value") -> ValueType:
    """A TypeProto as an msc value type: a tensor as ``type_from_onnx`` reads it, a
    sequence_type as a SequenceType of its element's tensor type, an optional_type as an
    OptionalType of a tensor or sequence type. Anything else raises UnsupportedType."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        elem = tp.sequence_type.elem_type
        if elem.WhichOneof("value") != "tensor_type":
            inner = elem.WhichOneof("value") or "undefined"
            raise UnsupportedType(
                f"{what} is a sequence of {inner}, msc holds sequences of tensors"
            )
        return SequenceType(type_from_onnx(elem, what))
    if kind == "optional_type":
        elem = tp.optional_type.elem_type
        if elem.WhichOneof("value") not in ("tensor_type", "sequence_type"):
            inner = elem.WhichOneof("value") or "undefined"
            raise UnsupportedType(
                f"{what} is an optional {inner}, msc holds optional tensors and sequences"
            )
        return OptionalType(value_type_from_onnx(elem, what))  # type: ignore[arg-type]
    return type_from_onnx(tp, what)


def _external_path(base_dir: str | os.PathLike | None, location: str, name: str) -> Path:
    if base_dir is None:
        raise ConversionError(
            f"tensor {name!r} keeps its data in external file {location!r}; load the model "
            f"from its path (not a ModelProto) so the file can be found"
        )
    base = Path(base_dir).resolve()
    if not location or Path(location).is_absolute():
        raise ConversionError(
            f"tensor {name!r}: external data location {location!r} is not relative"
        )
    path = (base / location).resolve()
    if base != path and base not in path.parents:
        raise ConversionError(
            f"tensor {name!r}: external data location {location!r} leaves the model directory"
        )
    if not path.is_file():
        raise ConversionError(f"tensor {name!r}: external data file {str(path)!r} does not exist")
    return path


def tensor_to_numpy(t: TensorProto, base_dir: str | os.PathLike | None = None) -> np.ndarray:
    """The data of ``t`` as a numpy array: a view of raw_data, a read-only memmap of external
    data, or (for the typed fields and packed sub-byte types) a converted copy."""
    data = tensor_data(t, base_dir)
    return data if isinstance(data, np.ndarray) else data.array()


def tensor_data(
    t: TensorProto, base_dir: str | os.PathLike | None = None
) -> np.ndarray | FileRegion | Packed:
    """The data of ``t`` as a weight holds it: external data as a FileRegion (nothing read),
    packed sub-byte raw_data as Packed bytes, else an array (a view of raw_data where
    possible)."""
    dt = dtype_from_onnx(t.data_type)
    if dt is DType.STRING:
        return _strings(t)
    dtype = dt.to_numpy()
    shape = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in shape):
        raise ConversionError(f"tensor {t.name!r}: negative dim in {list(shape)}")
    packed = t.data_type in _PACKED_BITS
    nbytes = packed_size(dt, shape) if packed else math.prod(shape) * dtype.itemsize
    if t.data_location == TensorProto.EXTERNAL:
        info = {e.key: e.value for e in t.external_data}
        path = _external_path(base_dir, info.get("location", ""), t.name)
        try:
            offset = int(info.get("offset", 0) or 0)
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise ConversionError(
                f"tensor {t.name!r}: external data offset/length are not integers"
            ) from None
        if offset < 0 or (length is not None and length < 0):
            raise ConversionError(
                f"tensor {t.name!r}: negative external data offset or length "
                f"(offset {offset}, length {length})"
            )
        if length is not None and length < nbytes:
            raise ConversionError(
                f"tensor {t.name!r}: external data has {info['length']} bytes, needs {nbytes}"
            )
        if offset + nbytes > path.stat().st_size:
            raise ConversionError(
                f"tensor {t.name!r}: external file {str(path)!r} is too short "
                f"for {nbytes} bytes at offset {offset}"
            )
        if nbytes == 0:
            return np.zeros(shape, dtype)
        return FileRegion.at(path, offset, nbytes, dt, shape, packed=packed)
    if t.HasField("raw_data"):
        raw = t.raw_data
        if len(raw) != nbytes:
            raise ConversionError(
                f"tensor {t.name!r}: raw_data has {len(raw)} bytes, "
                f"{_type_name(t.data_type)}{list(shape)} needs {nbytes}"
            )
        if packed:
            return Packed(np.frombuffer(raw, dtype=np.uint8), dt, shape)
        # ONNX raw_data is little-endian, as every host msc runs on.
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    arr = numpy_helper.to_array(t)
    if arr.dtype != dtype:
        arr = arr.view(dtype) if arr.dtype.itemsize == dtype.itemsize else arr.astype(dtype)
    arr = arr.reshape(shape)
    return Packed.of(arr) if packed else arr


def _strings(t: TensorProto) -> np.ndarray:
    """A STRING tensor's ``string_data`` as a ``str`` object array."""
    shape = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in shape):
        raise ConversionError(f"tensor {t.name!r}: negative dim in {list(shape)}")
    if t.data_location == TensorProto.EXTERNAL or t.HasField("raw_data"):
        raise BadModelError(f"tensor {t.name!r}: a STRING tensor keeps its data in string_data")
    if len(t.string_data) != math.prod(shape):
        raise BadModelError(
            f"tensor {t.name!r}: {len(t.string_data)} strings, STRING{list(shape)} needs "
            f"{math.prod(shape)}"
        )
    out = np.empty(len(t.string_data), object)
    for i, b in enumerate(t.string_data):
        try:
            out[i] = b.decode("utf-8")
        except UnicodeDecodeError:
            raise BadModelError(
                f"tensor {t.name!r}: string {i} is not UTF-8 (ONNX strings are UTF-8)"
            ) from None
    return out.reshape(shape)
