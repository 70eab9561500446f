"""Reductions, scans, arg-reductions, top-k and sorting.

# NOTE: ``axes=None`` reduces over every dim; ``keepdims`` keeps reduced dims as size 1.
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known
from msc.ops.infer import axes as norm_axes
from msc.ops.infer import axis as norm_axis
from msc.ops.schema import Attr

REDUCTIONS = {
    "reduce_sum": "sum",
    "reduce_mean": "mean",
    "reduce_max": "maximum (NaN propagates; of no elements: -inf, the lowest int, false)",
    "reduce_min": "minimum (NaN propagates; of no elements: inf, the highest int, true)",
    "reduce_prod": "product",
    "reduce_l1": "sum of |x|",
    "reduce_l2": "sqrt of sum of x^2",
    "reduce_sum_square": "sum of x^2",
    "reduce_log_sum": "log of sum",
    "reduce_log_sum_exp": "log of sum of e^x (stable)",
    "reduce_any": "logical or (bool)",
    "reduce_all": "logical and (bool)",
}

REDUCE_ATTRS = {"axes": Attr.ints(None, doc="none = all dims"), "keepdims": Attr.bool(False)}
# With the run-time axes input only: an empty axes tensor leaves x as it is (ONNX's
# noop_with_empty_axes) instead of reducing every dim.
NOOP_ATTR = {"noop_with_empty_axes": Attr.bool(False, doc="axes input only: empty = no-op")}


def _reduced(x: TensorType, axes, keepdims: bool):
    if x.shape is None:
        return None
    ax = set(norm_axes(axes, len(x.shape)))
    if keepdims:
        return tuple(1 if i in ax else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in ax)


def _runtime_reduced(x: TensorType, axes_in: TensorType, keepdims: bool, noop: bool):
    """The result shape when the axes are a run-time tensor: the rank is known when the
    number of axes is (an empty axes tensor reduces every dim, or none with ``noop``); the
    reduced dims are not."""
    if axes_in.rank != 1:
        raise InferError(f"reductions: axes must be 1-d, got rank {axes_in.rank}")
    if x.shape is None:
        return None
    n = axes_in.shape[0]  # type: ignore[index]
    if noop and n == 0:
        return x.shape
    if noop and not known(n):  # x unchanged, or reduced over some dims
        return tuple(1 if d == 1 else None for d in x.shape) if keepdims else None
    if keepdims:
        return tuple(1 if d == 1 or n == 0 else None for d in x.shape)
    if not known(n):
        return None
    return () if n == 0 else (None,) * max(len(x.shape) - n, 0)


def _reduce(
    x: TensorType, axes_in: TensorType | None, *, axes, keepdims, noop_with_empty_axes
) -> TensorType:
    if axes_in is not None:
        if axes is not None:
            raise InferError("reductions: give the axes as an attribute or an input, not both")
        return TensorType(x.dtype, _runtime_reduced(x, axes_in, keepdims, noop_with_empty_axes))
    if noop_with_empty_axes:
        raise InferError("reductions: noop_with_empty_axes applies to the axes input only")
    return TensorType(x.dtype, _reduced(x, axes, keepdims))


# ``axes?``: the axes as a 1-d i64 tensor computed at run time (the attribute stays None);
# an empty tensor reduces every dim (none with ``noop_with_empty_axes``).
for _name, _doc in REDUCTIONS.items():
    registry.op(_name, ["x", "axes?"], {**REDUCE_ATTRS, **NOOP_ATTR}, category="reduce", doc=_doc)(
        _reduce
    )


@registry.op(
    "var",
    ["x"],
    {**REDUCE_ATTRS, "correction": Attr.float(1.0, doc="1 = unbiased (Bessel)")},
    category="reduce",
)
def var(x, *, axes, keepdims, correction):
    """Variance: sum((x - mean)^2) / (N - correction)."""
    return TensorType(x.dtype, _reduced(x, axes, keepdims))


def _arg(x, *, axis, keepdims, select_last_index):
    ax = None if axis is None else [axis]
    return TensorType(DType.INT64, _reduced(x, ax, keepdims))


ARG_ATTRS = {
    "axis": Attr.int(None, doc="none = over the flattened input"),
    "keepdims": Attr.bool(False),
    "select_last_index": Attr.bool(False),
}
registry.op("argmax", ["x"], ARG_ATTRS, category="reduce", doc="index of the max (i64)")(_arg)
registry.op("argmin", ["x"], ARG_ATTRS, category="reduce", doc="index of the min (i64)")(_arg)


def _max_with_index(x, *, axis, keepdims):
    shape = _reduced(x, [axis], keepdims)
    return [TensorType(x.dtype, shape), TensorType(DType.INT64, shape)]


_WITH_INDEX = {"axis": Attr.int(), "keepdims": Attr.bool(False)}
registry.op(
    "max_dim",
    ["x"],
    _WITH_INDEX,
    outputs=2,
    category="reduce",
    doc="(values, indices) of the max along axis (torch.max(x, dim))",
)(_max_with_index)
registry.op(
    "min_dim",
    ["x"],
    _WITH_INDEX,
    outputs=2,
    category="reduce",
    doc="(values, indices) of the min along axis (torch.min(x, dim))",
)(_max_with_index)


def _runtime_scalar(t: TensorType | None, what: str) -> None:
    if t is not None and (t.shape is None or len(t.shape) > 1 or t.numel() not in (1, None)):
        raise InferError(f"{what} must be one integer, got {t}")


@registry.op(
    "cumsum",
    ["x", "axis?"],
    {
        "axis": Attr.int(None, doc="None: from the run-time axis input"),
        "exclusive": Attr.bool(False),
        "reverse": Attr.bool(False),
    },
    category="reduce",
)
def cumsum(x, axis_in, *, axis, exclusive, reverse):
    """Running sum along axis (the attribute, or a 0-d integer input read at run time)."""
    if (axis is None) == (axis_in is None):
        raise InferError("cumsum: give the axis as an attribute or an input (one of them)")
    _runtime_scalar(axis_in, "cumsum: axis")
    if x.shape is not None and axis is not None:
        norm_axis(axis, len(x.shape))
    return x


@registry.op(
    "cumprod",
    ["x", "axis?"],
    {
        "axis": Attr.int(None, doc="None: from the run-time axis input"),
        "exclusive": Attr.bool(False),
        "reverse": Attr.bool(False),
    },
    category="reduce",
)
def cumprod(x, axis_in, *, axis, exclusive, reverse):
    """Running product along axis (the attribute, or a 0-d integer input read at run time);
    ``exclusive`` shifts by one (a leading 1), ``reverse`` runs from the end."""
    if (axis is None) == (axis_in is None):
        raise InferError("cumprod: give the axis as an attribute or an input (one of them)")
    _runtime_scalar(axis_in, "cumprod: axis")
    return x


@registry.op(
    "topk",
    ["x", "k?"],
    {
        "k": Attr.int(None, doc="None: from the run-time k input (one integer)"),
        "axis": Attr.int(-1),
        "largest": Attr.bool(True),
        "sorted": Attr.bool(True),
        "stable": Attr.bool(
            False, doc="equal values in index order (ONNX TopK); False: any order (torch.topk)"
        ),
    },
    outputs=2,
    category="reduce",
)
def topk(x, k_in, *, k, axis, largest, sorted, stable):
    """(values, i64 indices) of the k largest (or smallest) along axis."""
    if (k is None) == (k_in is None):
        raise InferError("topk: give k as an attribute or an input (one of them)")
    _runtime_scalar(k_in, "topk: k")
    if x.shape is None:
        return [TensorType(x.dtype, None), TensorType(DType.INT64, None)]
    a = norm_axis(axis, len(x.shape))
    shape = tuple(k if i == a else d for i, d in enumerate(x.shape))
    return [TensorType(x.dtype, shape), TensorType(DType.INT64, shape)]


@registry.op(
    "sort",
    ["x"],
    {"axis": Attr.int(-1), "descending": Attr.bool(False), "stable": Attr.bool(False)},
    outputs=2,
    category="reduce",
)
def sort(x, *, axis, descending, stable):
    """(sorted values, i64 indices) along axis."""
    return [x, TensorType(DType.INT64, x.shape)]


@registry.op(
    "argsort",
    ["x"],
    {"axis": Attr.int(-1), "descending": Attr.bool(False), "stable": Attr.bool(False)},
    category="reduce",
)
def argsort(x, *, axis, descending, stable):
    """i64 indices that sort x along axis."""
    return TensorType(DType.INT64, x.shape)
