"""Value types: tensor types (a dtype and a shape whose dims are ints, named symbols,
expressions over symbols, or unknown), and the two non-tensor types a graph value may have:
a sequence of tensors and an optional value (ONNX's sequence_type and optional_type).

# NOTE: invariants
# - ``TensorType.shape is None`` means unknown rank, stated explicitly; ``()`` is a 0-d tensor.
# - A dim is an ``int`` in [0, MAX_DIM], a ``SymDim`` (a named symbol, optionally with a
#   range), a ``SymExpr`` (an expression over symbols in canonical form, msc.ir.symexpr), or
#   ``None`` (a dim of known position but unknown size, e.g. an ONNX dim with neither
#   value nor param).
# - Leaf values are frozen, hashable and compared by value.
# - ``SequenceType(element)``: a run-time list of tensors of one dtype (``element`` a
#   TensorType whose shape the elements share, with unknown dims where they differ).
#   ``OptionalType(element)``: a value that may be absent (``element`` a TensorType or a
#   SequenceType). Neither has a dtype or shape: code that reads ``.dtype`` of a value assumes
#   a tensor, and only custom ops (and graph boundaries) make or take the others.
# - ``TensorType`` stays the one class of the common path: nothing checks "is this a tensor"
#   per node where a tensor is all there can be; the few places that must tell them apart use
#   ``is_tensor_type`` or ``tensor_of``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from msc.errors import MscError
from msc.ir.dtype import DType

__all__ = [
    "SymDim",
    "SymExpr",
    "Func",
    "Dim",
    "TensorType",
    "SequenceType",
    "OptionalType",
    "ValueType",
    "NON_TENSOR_TYPES",
    "VALUE_TYPES",
    "is_tensor_type",
    "tensor_of",
    "map_tensor",
    "ShapeError",
    "MAX_DIM",
]

# The largest size a dim may have: 2**40 elements along one axis is beyond any tensor a
# machine holds, so a larger dim is a corrupt or hostile model, refused here rather than
# ending in an overflow or a MemoryError wherever its size is first computed.
MAX_DIM = 1 << 40


class ShapeError(MscError, ValueError):
    """A dim that cannot be: negative, or larger than MAX_DIM."""


@dataclass(frozen=True, slots=True)
class SymDim:
    """A named symbolic dimension, e.g. ``batch`` with range [1, 64]. ``None`` bounds are open."""

    name: str
    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"symbol name must be str, got {type(self.name).__name__}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"symbol {self.name!r}: min {self.min} > max {self.max}")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Func:
    """An integer function in a dim expression: floordiv(a, b), mod(a, b), min(...), max(...);
    ``args`` are canonical dims (see msc.ir.symexpr)."""

    op: str
    args: tuple

    def __str__(self) -> str:
        from msc.ir.symexpr import spell

        return f"{self.op}(" + ", ".join(spell(a) for a in self.args) + ")"


@dataclass(frozen=True, slots=True)
class SymExpr:
    """A dim that is an expression over symbols (``2*s0``, ``seq + 1``) in canonical form:
    monomials over atoms (SymDims, Funcs) with non-zero integer coefficients. Build it with the
    arithmetic of msc.ir.symexpr (or these operators), which keeps the form canonical, so
    equal expressions compare and hash equal."""

    terms: tuple

    def __str__(self) -> str:
        from msc.ir.symexpr import spell

        return spell(self)

    def __repr__(self) -> str:
        return f"SymExpr({self})"

    @property
    def name(self) -> str:
        """The spelling without symbol ranges (an ONNX dim_param, a docstring)."""
        from msc.ir.symexpr import spell

        return spell(self, ranges=False)

    def __add__(self, o):
        from msc.ir.symexpr import add

        return add(self, o)

    __radd__ = __add__

    def __sub__(self, o):
        from msc.ir.symexpr import sub

        return sub(self, o)

    def __rsub__(self, o):
        from msc.ir.symexpr import sub

        return sub(o, self)

    def __mul__(self, o):
        from msc.ir.symexpr import mul

        return mul(self, o)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        from msc.ir.symexpr import floordiv

        return floordiv(self, o)


Dim = int | SymDim | SymExpr | None


def _check_dim(d: object) -> Dim:
    if d is None or isinstance(d, SymDim | SymExpr):
        return d
    if isinstance(d, bool) or not isinstance(d, int):
        # numpy integers are accepted and normalized.
        try:
            import numpy as np

            if isinstance(d, np.integer):
                d = int(d)
            else:
                raise TypeError
        except TypeError:
            raise TypeError(f"a dim must be int, SymDim or None, got {d!r}") from None
    if d < 0:
        raise ShapeError(f"a dim must be >= 0, got {d}")
    if d > MAX_DIM:
        raise ShapeError(f"a dim of {d} is larger than any tensor can be (at most {MAX_DIM})")
    return d


@dataclass(frozen=True, slots=True)
class TensorType:
    """dtype + shape. ``shape=None`` is unknown rank."""

    dtype: DType
    shape: tuple[Dim, ...] | None
    # The text spelling, computed on first use (msc.ir.spelling.format_type): a type is
    # printed, hashed and compared many times, and its fields never change.
    _text: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __init__(self, dtype: DType, shape: Iterable[Dim] | None) -> None:
        if not isinstance(dtype, DType):
            raise TypeError(f"dtype must be msc DType, got {dtype!r}")
        object.__setattr__(self, "dtype", dtype)
        if shape is not None:
            shape = tuple(shape)
            # Plain in-range ints (the common case) need no per-dim call.
            if not all(type(d) is int and 0 <= d <= MAX_DIM for d in shape):
                shape = tuple(_check_dim(d) for d in shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_text", None)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def numel(self) -> int | None:
        """Element count when every dim is known, else None."""
        if not self.is_static:
            return None
        n = 1
        for d in self.shape:  # type: ignore[union-attr]
            n *= d  # type: ignore[operator]
        return n

    def nbytes(self) -> int | None:
        """Bytes in memory (one byte per element for sub-byte types); None when the shape is
        not static or the dtype has no fixed size (str)."""
        n = self.numel()
        return None if n is None or self.dtype.is_string else n * self.dtype.itemsize

    def storage_bytes(self) -> int | None:
        """Bytes as files store the tensor: sub-byte types packed (two int4 per byte); None as
        for ``nbytes``."""
        n = self.numel()
        return None if n is None or self.dtype.is_string else -(-n * self.dtype.bits // 8)

    def with_shape(self, shape: Iterable[Dim] | None) -> TensorType:
        return TensorType(self.dtype, shape)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape)

    def __str__(self) -> str:
        from msc.ir.spelling import format_type

        return format_type(self)


@dataclass(frozen=True, slots=True)
class SequenceType:
    """A sequence of tensors (ONNX sequence_type): ``seq<f32[?, 3]>``. ``element`` is the
    type every element fits (dims that differ between elements are unknown)."""

    element: TensorType
    _text: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if type(self.element) is not TensorType:
            raise TypeError(f"a sequence's element must be a TensorType, got {self.element!r}")

    def __str__(self) -> str:
        from msc.ir.spelling import format_type

        return format_type(self)


@dataclass(frozen=True, slots=True)
class OptionalType:
    """A value that may be absent (ONNX optional_type): ``opt<f32[2]>``, ``opt<seq<i64[?]>>``.
    ``element`` is a TensorType or a SequenceType."""

    element: TensorType | SequenceType
    _text: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if type(self.element) not in (TensorType, SequenceType):
            raise TypeError(
                f"an optional's element must be a TensorType or SequenceType, got {self.element!r}"
            )

    def __str__(self) -> str:
        from msc.ir.spelling import format_type

        return format_type(self)


ValueType = TensorType | SequenceType | OptionalType
NON_TENSOR_TYPES = (SequenceType, OptionalType)
VALUE_TYPES = (TensorType, SequenceType, OptionalType)


def is_tensor_type(t: object) -> bool:
    """True for a TensorType, False for a sequence or optional type."""
    return t.__class__ is TensorType


def tensor_of(t: ValueType) -> TensorType:
    """The tensor type inside ``t``: ``t`` itself, a sequence's element, an optional's
    (innermost) element. Symbols, dtypes and ranges of a value are those of this type."""
    while t.__class__ is not TensorType:
        t = t.element  # type: ignore[union-attr]
    return t  # type: ignore[return-value]


def map_tensor(t: ValueType, fn: Callable[[TensorType], TensorType]) -> ValueType:
    """``t`` with its tensor type (``t`` itself, or the one inside a sequence or optional)
    replaced by ``fn`` of it: substituting symbols in a value's type, whatever its kind."""
    if t.__class__ is TensorType:
        return fn(t)  # type: ignore[arg-type]
    return type(t)(map_tensor(t.element, fn))  # type: ignore[union-attr, arg-type]
