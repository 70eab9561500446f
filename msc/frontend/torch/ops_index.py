"""Converters for indexing, scatter, and tensor-creating ATen ops.

# NOTE: bool-mask indices become integer indices through ``nonzero`` (a data-dependent count,
# as in torch). Slice/select scatters become ``scatter_elements`` with constant index tensors,
# so they need static shapes. Creation ops take torch's default dtype rules: an int fill gives
# int64, a float fill the default float dtype, unless ``dtype=`` says otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.ops_shape import INT_MAX, _axis, _sizes
from msc.frontend.torch.registry import Ctx, Unsupported, converter, scalar_dtype
from msc.ir import DType, TensorType, Value


def _int_indices(ctx: Ctx, indices: list[Any], result: Any = None) -> tuple[list[Value], list[int]]:
    """Index tensors and the axes they index; bool masks expand to one index per masked dim.
    ``result``: torch's value for ``self[indices]``, whose size names a lone mask's count."""
    out, axes = [], []
    axis = 0
    for t in indices:
        if t is None:
            axis += 1
            continue
        if t.dtype is DType.BOOL:
            k = ctx.rank(t)
            nz = ctx.op("nonzero", t)  # [count, k]
            if sum(x is not None for x in indices) == 1 and isinstance(result, torch.Tensor):
                # The only index: the result's dim at ``axis`` is the count (torch's symbol).
                nz.type = TensorType(DType.INT64, [ctx.dim_of(result.shape[axis]), k])
            for j in range(k):
                out.append(ctx.call("aten.select.int", nz, 1, j))  # nz[:, j], as torch has it
                axes.append(axis + j)
            axis += k
            continue
        if t.dtype not in (DType.INT32, DType.INT64):
            t = ctx.cast(t, DType.INT64)
        out.append(t)
        axes.append(axis)
        axis += 1
    return out, axes


@converter("aten.index.Tensor", "aten._unsafe_index.Tensor")
def index(ctx: Ctx, self: Value, indices: list[Any]) -> Value:
    given = [i for i, t in enumerate(indices) if t is not None]
    if len(given) == 1 and indices[given[0]].dtype in (DType.INT32, DType.INT64):
        # One integer index tensor is numpy.take along its axis: the form index_select and
        # ``x[:, idx]`` share.
        return ctx.op("gather", self, indices[given[0]], axis=given[0])
    idx, axes = _int_indices(ctx, list(indices), ctx.meta)
    if not idx:
        return self
    return ctx.op("index", self, *idx, axes=axes)


@converter("aten.index_put.default", "aten._unsafe_index_put.default")
def index_put(
    ctx: Ctx, self: Value, indices: list[Any], values: Value, accumulate: bool = False
) -> Value:
    idx, axes = _int_indices(ctx, list(indices))
    return ctx.op(
        "index_put", self, ctx.cast(values, self.dtype), *idx, axes=axes, accumulate=accumulate
    )


@converter("aten.index_select.default")
def index_select(ctx: Ctx, self: Value, dim: int, index: Value) -> Value:
    if ctx.rank(self) == 0:
        return self
    return ctx.op("gather", self, index, axis=dim)


@converter("aten.gather.default")
def gather(ctx: Ctx, self: Value, dim: int, index: Value, *, sparse_grad: bool = False) -> Value:
    return ctx.op("gather_elements", self, index, axis=dim)


@converter("aten.take_along_dim.default")
def take_along_dim(ctx: Ctx, self: Value, indices: Value, dim: int | None = None) -> Value:
    if dim is None:
        return ctx.op("gather_elements", ctx.op("reshape", self, shape=[-1]),
                      ctx.op("reshape", indices, shape=[-1]), axis=0)  # fmt: skip
    return ctx.op("gather_elements", self, indices, axis=dim)


_REDUCE = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max",
           "amin": "min"}  # fmt: skip


def _scatter(ctx: Ctx, self: Value, dim: int, index: Value, src: Any, reduce: str) -> Value:
    if isinstance(src, Value):
        src = ctx.cast(src, self.dtype)
    else:
        src = ctx.op("full_like", index, value=float(src), dtype=self.dtype)
    return ctx.op("scatter_elements", self, index, src, axis=dim, reduction=reduce)


@converter("aten.scatter.src", "aten.scatter.value")
def scatter(ctx: Ctx, self: Value, dim: int, index: Value, **kw: Any) -> Value:
    src = kw.get("src", kw.get("value"))
    return _scatter(ctx, self, dim, index, src, "none")


@converter("aten.scatter.reduce", "aten.scatter.value_reduce")
def scatter_reduce_legacy(ctx: Ctx, self, dim, index, *, reduce: str, **kw) -> Value:
    src = kw.get("src", kw.get("value"))
    return _scatter(ctx, self, dim, index, src, _REDUCE[reduce])


@converter("aten.scatter_add.default")
def scatter_add(ctx: Ctx, self: Value, dim: int, index: Value, src: Value) -> Value:
    return _scatter(ctx, self, dim, index, src, "add")


@converter("aten.scatter_reduce.two")
def scatter_reduce(ctx, self, dim, index, src, reduce, *, include_self=True) -> Value:
    """As torch's kernel: include_self=False first sets the scattered-to positions to the
    reduction's identity; mean sums, then divides by the count of values reduced (at least 1;
    floor division for integers)."""
    if reduce not in _REDUCE and reduce != "mean":
        raise Unsupported(f"scatter_reduce with reduce={reduce!r}")
    how = _REDUCE.get(reduce, "add")
    dt = self.dtype
    base = self
    if not include_self:
        hit = ctx.op("scatter_elements", ctx.op("full_like", self, value=0.0, dtype=DType.BOOL),
                     index, ctx.op("full_like", index, value=1.0, dtype=DType.BOOL), axis=dim,
                     reduction="none")  # fmt: skip
        base = ctx.op("where", hit, ctx.const(_identity(how, dt), dt), self)
    out = _scatter(ctx, base, dim, index, src, how)
    if reduce != "mean":
        return out
    ones = ctx.op("full_like", index, value=1.0, dtype=dt)
    start = ctx.op("full_like", self, value=1.0 if include_self else 0.0, dtype=dt)
    count = ctx.op("scatter_elements", start, index, ones, axis=dim, reduction="add")
    count = ctx.op("clamp", count, ctx.const(1, dt), None)
    if dt.is_floating or dt.is_complex:
        return ctx.op("div", out, count)
    return ctx.call("aten.div.Tensor_mode", out, count, rounding_mode="floor")


def _identity(how: str, dt: DType) -> float | int:
    if how == "add":
        return 0
    if how == "mul":
        return 1
    np_dt = dt.to_numpy()
    if dt.is_floating:
        return float("-inf") if how == "max" else float("inf")
    info = np.iinfo(np_dt) if np.issubdtype(np_dt, np.integer) else None
    if info is None:  # bool
        return how == "min"
    return int(info.min) if how == "max" else int(info.max)


def _slice_positions(n: int, start: Any, end: Any, step: int) -> list[int]:
    s = 0 if start is None else int(start)
    e = INT_MAX if end is None else int(end)
    return list(range(*slice(s, e, step).indices(n)))


def _scatter_along(ctx: Ctx, self: Value, src: Value, dim: int, positions: list[int]) -> Value:
    shape = _sizes(ctx, src)
    d = _axis(dim, len(shape))
    view = [1] * len(shape)
    view[d] = len(positions)
    idx = np.broadcast_to(np.asarray(positions, np.int64).reshape(view), shape)
    return ctx.op(
        "scatter_elements",
        self,
        ctx.const(np.ascontiguousarray(idx), DType.INT64),
        ctx.cast(src, self.dtype),
        axis=d,
    )


@converter("aten.slice_scatter.default")
def slice_scatter(ctx, self, src, dim=0, start=None, end=None, step=1) -> Value:
    n = _sizes(ctx, self)[_axis(dim, ctx.rank(self))]
    return _scatter_along(ctx, self, src, dim, _slice_positions(n, start, end, step))


@converter("aten.select_scatter.default")
def select_scatter(ctx: Ctx, self: Value, src: Value, dim: int, index: int) -> Value:
    r = ctx.rank(self)
    d = _axis(dim, r)
    n = _sizes(ctx, self)[d]
    return _scatter_along(ctx, self, ctx.op("unsqueeze", src, axes=[d]), d, [index % n])


@converter("aten.masked_scatter.default")
def masked_scatter(ctx: Ctx, self: Value, mask: Value, source: Value) -> Value:
    """Masked positions take consecutive elements of ``source`` (row-major)."""
    shape = _sizes(ctx, self)
    m = ctx.op("expand", ctx.cast(mask, DType.BOOL), shape=shape)
    flat_m = ctx.op("reshape", m, shape=[-1])
    # The k-th masked position takes source[k]: k = inclusive cumsum - 1 there (elsewhere
    # the clamped value is taken and discarded by ``where``).
    pos = ctx.op("cumsum", ctx.cast(flat_m, DType.INT64), axis=0)
    pos = ctx.op("sub", pos, ctx.const(1, DType.INT64))
    src = ctx.op("reshape", ctx.cast(source, self.dtype), shape=[-1])
    n_src = _sizes(ctx, src)[0]
    pos = ctx.op("clamp", pos, ctx.const(0, DType.INT64), ctx.const(max(n_src - 1, 0), DType.INT64))
    taken = ctx.op("reshape", ctx.op("gather", src, pos, axis=0), shape=shape)
    return ctx.op("where", m, taken, self)


@converter("aten.nonzero.default")
def nonzero(ctx: Ctx, self: Value) -> Value:
    return ctx.op("nonzero", self)


@converter("aten.one_hot.default")
def one_hot(ctx: Ctx, self: Value, num_classes: int = -1) -> Value:
    if num_classes < 0:
        raise Unsupported("one_hot without num_classes (depends on the data)")
    return ctx.op("one_hot", self, depth=num_classes, dtype=DType.INT64)


# ----------------------------------------------------------------------- creation
def _fill_dtype(value: Any, dtype: Any) -> DType:
    if dtype is not None:
        return to_msc(dtype)
    if isinstance(value, Value):
        return value.dtype
    return scalar_dtype(value)


def _full(ctx: Ctx, size: Any, value: Any, dt: DType) -> Value:
    size = [size] if isinstance(size, int | Value) else list(size)
    if isinstance(value, Value):
        raise Unsupported("fill value from a tensor")
    if any(isinstance(s, Value) for s in size):
        return ctx.op("full", ctx.shape_tensor(size), value=float(value), dtype=dt)
    return ctx.op("full", shape=[int(s) for s in size], value=float(value), dtype=dt)


@converter("aten.full.default")
def full(ctx: Ctx, size: Any, fill_value: Any, *, dtype: Any = None, **_: Any) -> Value:
    return _full(ctx, size, fill_value, _fill_dtype(fill_value, dtype))


def _filled(value: float):
    def convert(ctx: Ctx, size: Any, *, dtype: Any = None, **_: Any) -> Value:
        dt = to_msc(dtype) if dtype is not None else scalar_dtype(1.0)
        return _full(ctx, size, value, dt)

    return convert


converter("aten.zeros.default", "aten.empty.memory_format", "aten.new_empty.default")(_filled(0.0))
converter("aten.ones.default")(_filled(1.0))


@converter("aten.empty_strided.default")
def empty_strided(ctx: Ctx, size: Any, stride: Any, *, dtype: Any = None, **_: Any) -> Value:
    return _filled(0.0)(ctx, size, dtype=dtype)


def _new(value: float | None):
    def convert(ctx: Ctx, self: Value, size: Any, *args: Any, dtype: Any = None, **kw) -> Value:
        fill = kw.get("fill_value", value)
        dt = to_msc(dtype) if dtype is not None else self.dtype
        return _full(ctx, size, fill, dt)

    return convert


converter("aten.new_zeros.default", "aten.new_empty_strided.default")(_new(0.0))
converter("aten.new_ones.default")(_new(1.0))
converter("aten.new_full.default")(_new(None))


def _like(value: float | None):
    def convert(ctx: Ctx, self: Value, *args: Any, dtype: Any = None, **kw: Any) -> Value:
        fill = kw.get("fill_value", value)
        dt = to_msc(dtype) if dtype is not None else self.dtype
        if isinstance(fill, Value):
            raise Unsupported("fill value from a tensor")
        return ctx.op("full_like", self, value=float(fill), dtype=dt)

    return convert


converter("aten.zeros_like.default", "aten.empty_like.default")(_like(0.0))
converter("aten.ones_like.default")(_like(1.0))
converter("aten.full_like.default")(_like(None))


@converter("aten.fill.Scalar")
def fill_scalar(ctx: Ctx, self: Value, value: Any) -> Value:
    if isinstance(value, Value):
        return fill_tensor(ctx, self, value)
    return ctx.op("full_like", self, value=float(value), dtype=self.dtype)


@converter("aten.fill.Tensor")
def fill_tensor(ctx: Ctx, self: Value, value: Value) -> Value:
    shape = ctx.shape(self)
    v = ctx.cast(value, self.dtype)
    if all(isinstance(d, int) for d in shape):
        return ctx.op("expand", v, shape=list(shape))
    return ctx.op("expand", v, ctx.op("shape", self))


@converter("aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def arange(ctx: Ctx, *, dtype: Any = None, **kw: Any) -> Value:
    start, end, step = kw.get("start", 0), kw["end"], kw.get("step", 1)
    if dtype is not None:
        dt = to_msc(dtype)
    elif all(isinstance(v, int) or (isinstance(v, Value) and v.dtype.is_integer)
             for v in (start, end, step)):  # fmt: skip
        dt = DType.INT64
    else:
        dt = scalar_dtype(1.0)
    if not any(isinstance(v, Value) for v in (start, end, step)):
        return ctx.op("arange", start=float(start), end=float(end), step=float(step), dtype=dt)
    # A symbolic bound: ONNX-style range over 0-d tensors of the result dtype.
    return ctx.op("range", *(ctx.tensor(v, dt) for v in (start, end, step)))
