"""Helpers shared by the type-inference functions.

# NOTE: dims are ints, SymDims, SymExprs or None (unknown). Arithmetic on dims goes through
# msc.ir.symexpr (``dim_add``, ``dim_mul``, ...), which keeps symbols as canonical expressions;
# anything involving an unknown dim gives None.
"""

from __future__ import annotations

from collections.abc import Sequence

from msc.errors import MscError
from msc.ir import symexpr
from msc.ir.dtype import DType
from msc.ir.types import Dim, SymDim, TensorType

__all__ = [
    "InferError",
    "broadcast",
    "same_dtype",
    "axis",
    "axes",
    "rank_of",
    "conv_out",
    "pool_out",
    "known",
    "dim_add",
    "dim_mul",
]


class InferError(MscError, ValueError):
    """Inputs that the op cannot take (wrong dtype, incompatible shapes, bad axis)."""


def known(d: Dim) -> bool:
    """Whether ``d`` is a concrete size."""
    return isinstance(d, int)


def dim_add(*ds: Dim) -> Dim:
    """The sum of dims (None if any is unknown)."""
    out: Dim = 0
    for d in ds:
        if d is None:
            return None
        out = symexpr.add(out, d)
    return out


def dim_mul(*ds: Dim) -> Dim:
    """The product of dims (None if any is unknown)."""
    out: Dim = 1
    for d in ds:
        if d is None:
            return None
        out = symexpr.mul(out, d)
    return out


def rank_of(t: TensorType, what: str = "input") -> int:
    if t.shape is None:
        raise InferError(f"{what} has unknown rank")
    return len(t.shape)


def axis(a: int, rank: int, what: str = "axis") -> int:
    if not -rank <= a < max(rank, 1):
        raise InferError(f"{what} {a} is out of range for rank {rank}")
    return a % rank if rank else 0


def axes(a: Sequence[int] | None, rank: int) -> list[int]:
    if a is None:
        return list(range(rank))
    out = sorted({axis(x, rank) for x in a})
    if len(out) != len(a):
        raise InferError(f"repeated axes {list(a)}")
    return out


def _bdim(a: Dim, b: Dim) -> Dim:
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if known(a) and known(b):
        raise InferError(f"cannot broadcast {a} with {b}")
    # One side is a symbol or unknown: the known non-1 size wins, else keep the symbol.
    if known(a):
        return a
    if known(b):
        return b
    if isinstance(a, SymDim):
        return a
    return b


def broadcast(*types: TensorType | None) -> tuple[Dim, ...] | None:
    shapes = [t.shape for t in types if t is not None]
    if any(s is None for s in shapes):
        return None
    r = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Dim] = [1] * r
    for s in shapes:
        padded = [1] * (r - len(s)) + list(s)  # type: ignore[arg-type]
        out = [_bdim(x, y) for x, y in zip(out, padded)]
    return tuple(out)


def same_dtype(*types: TensorType | None, what: str = "inputs") -> DType:
    dts = {t.dtype for t in types if t is not None}
    if len(dts) != 1:
        names = ", ".join(sorted(d.short for d in dts))
        raise InferError(f"{what} must share one dtype, got {names} (insert a cast)")
    return dts.pop()


def conv_out(size: Dim, k: Dim, stride: int, pad_total: int, dilation: int) -> Dim:
    if size is None or not known(k):
        return None
    span = dilation * (k - 1) + 1  # type: ignore[operator]
    if not known(size):
        # floor((size + pads - span) / stride) + 1, valid where the window fits.
        return symexpr.add(symexpr.floordiv(symexpr.add(size, pad_total - span), stride), 1)
    num = size + pad_total - span  # type: ignore[operator]
    if num < 0:
        raise InferError(f"kernel span {span} is larger than padded size {size + pad_total}")
    return num // stride + 1


def pool_out(
    size: Dim, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil: bool
) -> Dim:
    if size is None:
        return None
    span = dilation * (k - 1) + 1
    if not known(size):
        if ceil:
            return None  # the last-window rule depends on the size's value
        return conv_out(size, k, stride, pad_begin + pad_end, dilation)
    num = size + pad_begin + pad_end - span  # type: ignore[operator]
    if not ceil:
        if num < 0:
            raise InferError(f"pool window {span} is larger than padded size")
        return num // stride + 1
    # With ceil_mode a window may run past the end (EfficientNet's pooler: a window wider
    # than the whole input), as long as one window starts inside: the last one is cut there.
    out = -(-num // stride) + 1
    # The last window must start inside the input or the begin padding (torch and ONNX agree).
    if (out - 1) * stride >= size + pad_begin:  # type: ignore[operator]
        out -= 1
    if out < 1:
        raise InferError(f"pool window {span} leaves no output of padded size")
    return out
