"""Typed attribute values.

# NOTE: invariants
# - An attribute value is one of: int, float, bool, str, bytes, a tuple of ints / floats / bools /
#   strs, a ``DType``, a value type (``TensorType``, ``SequenceType``, ``OptionalType``), a numpy
#   array (a tensor), a ``Graph`` (a subgraph), or None where the schema allows it. Never a
#   string standing in for a number.
# - ``normalize`` is the one place values are checked and coerced (numpy scalars to Python,
#   lists to tuples, ints to floats for FLOAT kinds); after it, equal values compare equal.
# - ``bytes`` (BYTES) is binary data that is not text: an ONNX string attribute of a custom node
#   that is not UTF-8 (onnxruntime's EPContext keeps a compiled blob there). str and bytes never
#   compare equal, and no canonical op's schema takes BYTES (their strings are text).
"""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from msc.ir.dtype import DType, check_strings
from msc.ir.types import VALUE_TYPES

__all__ = ["AttrKind", "normalize", "infer_kind", "attr_equal"]


class AttrKind(enum.Enum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    BYTES = "bytes"
    INTS = "ints"
    FLOATS = "floats"
    BOOLS = "bools"
    STRS = "strs"
    DTYPE = "dtype"
    TYPE = "type"
    TENSOR = "tensor"
    GRAPH = "graph"


def _show(v: Any) -> str:
    """A value's type and repr for an error message, cut short (a blob may be megabytes)."""
    r = repr(v)
    return f"{type(v).__name__} {r if len(r) <= 80 else r[:77] + '...'}"


def _as_int(v: Any) -> int:
    if isinstance(v, bool | np.bool_):
        raise TypeError(f"expected int, got bool {v!r}")
    if isinstance(v, int | np.integer):
        return int(v)
    raise TypeError(f"expected int, got {_show(v)}")


def _as_float(v: Any) -> float:
    if isinstance(v, bool | np.bool_):
        raise TypeError(f"expected float, got bool {v!r}")
    if isinstance(v, int | float | np.integer | np.floating):
        try:
            return float(v)
        except OverflowError:  # an int past a float's range (1e308)
            raise ValueError(f"expected float, got an int of {len(str(abs(v)))} digits") from None
    raise TypeError(f"expected float, got {_show(v)}")


def _as_bool(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer) and int(v) in (0, 1):
        return bool(v)
    raise TypeError(f"expected bool, got {_show(v)}")


def _as_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise TypeError(f"expected str, got {_show(v)}")


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, bytes | bytearray):
        return bytes(v)  # exactly bytes (not np.bytes_, not mutable), so equal values compare equal
    raise TypeError(f"expected bytes, got {_show(v)}")


def _seq(v: Any, each) -> tuple:
    if isinstance(v, str | bytes) or not hasattr(v, "__iter__"):
        raise TypeError(f"expected a list, got {_show(v)}")
    return tuple(each(x) for x in v)


def normalize(kind: AttrKind, value: Any) -> Any:
    """Check ``value`` against ``kind`` and return its canonical form. Raises TypeError."""
    from msc.ir.graph import Graph

    if kind is AttrKind.INT:
        return _as_int(value)
    if kind is AttrKind.FLOAT:
        return _as_float(value)
    if kind is AttrKind.BOOL:
        return _as_bool(value)
    if kind is AttrKind.STR:
        return _as_str(value)
    if kind is AttrKind.BYTES:
        return _as_bytes(value)
    if kind is AttrKind.INTS:
        return _seq(value, _as_int)
    if kind is AttrKind.FLOATS:
        return _seq(value, _as_float)
    if kind is AttrKind.BOOLS:
        return _seq(value, _as_bool)
    if kind is AttrKind.STRS:
        return _seq(value, _as_str)
    if kind is AttrKind.DTYPE:
        if isinstance(value, DType):
            return value
        raise TypeError(f"expected DType, got {_show(value)}")
    if kind is AttrKind.TYPE:
        if isinstance(value, VALUE_TYPES):
            return value
        raise TypeError(f"expected a value type, got {_show(value)}")
    if kind is AttrKind.TENSOR:
        if isinstance(value, np.ndarray):
            if DType.from_numpy(value.dtype).is_string:  # raises for dtypes msc has no name for
                return check_strings(value, "tensor attribute")
            return value
        raise TypeError(f"expected a numpy array, got {type(value).__name__}")
    if kind is AttrKind.GRAPH:
        if isinstance(value, Graph):
            return value
        raise TypeError(f"expected a Graph, got {type(value).__name__}")
    raise AssertionError(kind)


def infer_kind(value: Any) -> AttrKind:
    """The kind of a value with no schema (graph metadata, parsed text)."""
    from msc.ir.graph import Graph

    if isinstance(value, bool | np.bool_):
        return AttrKind.BOOL
    if isinstance(value, int | np.integer):
        return AttrKind.INT
    if isinstance(value, float | np.floating):
        return AttrKind.FLOAT
    if isinstance(value, str):
        return AttrKind.STR
    if isinstance(value, bytes | bytearray):
        return AttrKind.BYTES
    if isinstance(value, DType):
        return AttrKind.DTYPE
    if isinstance(value, VALUE_TYPES):
        return AttrKind.TYPE
    if isinstance(value, np.ndarray):
        return AttrKind.TENSOR
    if isinstance(value, Graph):
        return AttrKind.GRAPH
    if isinstance(value, list | tuple):
        kinds = {infer_kind(x) for x in value}
        if not kinds or kinds == {AttrKind.INT}:
            return AttrKind.INTS
        if kinds <= {AttrKind.INT, AttrKind.FLOAT}:
            return AttrKind.FLOATS
        if kinds == {AttrKind.BOOL}:
            return AttrKind.BOOLS
        if kinds == {AttrKind.STR}:
            return AttrKind.STRS
    raise TypeError(f"not an attribute value: {_show(value)}")


def _float_equal(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def attr_equal(a: Any, b: Any, graph_equal=None) -> bool:
    """Exact equality of two normalized values (NaN equals NaN, -0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return _float_equal(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(attr_equal(x, y, graph_equal) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        if a.dtype == object:  # str tensors: compare the text, not the object pointers
            return b.dtype == object and a.shape == b.shape and a.tolist() == b.tolist()
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
        )
    if graph_equal is not None and type(a).__name__ == "Graph":
        return bool(graph_equal(a, b))
    return a == b
