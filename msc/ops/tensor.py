"""Tensor ops with data-dependent results or bit-level meaning: bitcast, unique, range,
determinant, sequence reversal, cache scatter.

# NOTE: ``unique`` and ``range`` have output lengths known only at run time (None dims);
# ``range`` takes its bounds as tensors (the static case is ``arange``).
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known, same_dtype
from msc.ops.infer import axis as norm_axis
from msc.ops.schema import Attr


@registry.op("bitcast", ["x"], {"to": Attr.dtype()}, category="elementwise")
def bitcast(x, *, to):
    """Reinterpret the bytes of each element as dtype ``to`` of the same width."""
    if x.dtype.itemsize != to.itemsize:
        raise InferError(f"bitcast: {x.dtype.short} and {to.short} differ in width")
    return TensorType(to, x.shape)


@registry.op(
    "unique",
    ["x"],
    {"axis": Attr.int(None, doc="none = over the flattened input"), "sorted": Attr.bool(True)},
    outputs=4,
    category="index",
)
def unique(x, *, axis, sorted):  # noqa: A002 - ONNX's name
    """Unique elements (or slices along axis), sorted or in order of first occurrence; with
    the index of each one's first occurrence, each input element's index into them, and the
    counts (ONNX Unique). Lengths are data-dependent."""
    i64 = DType.INT64
    if x.shape is None:
        return [TensorType(x.dtype, None)] + [TensorType(i64, (None,))] * 3
    if axis is None:
        n = 1
        for d in x.shape:
            n = n * d if known(d) and known(n) else None
        return [
            TensorType(x.dtype, (None,)),
            TensorType(i64, (None,)),
            TensorType(i64, (n,)),
            TensorType(i64, (None,)),
        ]
    a = norm_axis(axis, len(x.shape))
    shape = list(x.shape)
    shape[a] = None
    return [
        TensorType(x.dtype, shape),
        TensorType(i64, (None,)),
        TensorType(i64, (x.shape[a],)),
        TensorType(i64, (None,)),
    ]


@registry.op("range", ["start", "limit", "delta"], category="create")
def range_(start, limit, delta):
    """[start, start+delta, ...) up to limit from 0-d tensors (ONNX Range); its length,
    max(ceil((limit - start) / delta), 0), is known at run time."""
    dt = same_dtype(start, limit, delta)
    return TensorType(dt, (None,))


@registry.op("det", ["x"], category="linear")
def det(x):
    """Determinant of the square matrices in the last two dims."""
    if x.shape is None:
        return x
    if len(x.shape) < 2:
        raise InferError("det: input must have rank >= 2")
    return TensorType(x.dtype, x.shape[:-2])


@registry.op(
    "reverse_sequence",
    ["x", "sequence_lens"],
    {"batch_axis": Attr.int(1), "time_axis": Attr.int(0)},
    category="shape",
)
def reverse_sequence(x, sequence_lens, *, batch_axis, time_axis):
    """Reverse the first sequence_lens[b] steps along time_axis of each batch entry."""
    if sequence_lens.dtype is not DType.INT64:
        raise InferError("reverse_sequence: sequence_lens must be i64")
    return x


@registry.op(
    "tensor_scatter",
    ["past_cache", "update", "write_indices?"],
    {"axis": Attr.int(-2), "mode": Attr.str("linear", doc="linear | circular")},
    category="index",
)
def tensor_scatter(past_cache, update, write_indices, *, axis, mode):
    """Write update into past_cache along axis from write_indices[b] (per batch entry, 0 when
    absent); circular wraps around the cache length (ONNX TensorScatter)."""
    if mode not in ("linear", "circular"):
        raise InferError(f"tensor_scatter: mode {mode!r}")
    same_dtype(past_cache, update)
    return past_cache
