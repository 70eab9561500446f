"""Converters for shape and data-movement ATen ops, and for symbolic-int arithmetic.

# NOTE: view ops become their functional meaning (view/reshape -> ``reshape``, permute ->
# ``transpose``, select -> ``slice`` + ``squeeze``). A size list with symbolic entries becomes
# a static target with one ``-1`` when it can, else a shape tensor built from ``shape`` nodes.
# Symbolic ints (``aten.sym_size.int`` and Python arithmetic on it) are 0-d i64 values. A
# symbolic slice bound that is the dim's own size minus a constant becomes a static bound from
# the end (as does a split with one symbolic piece); any other is a run-time input of
# ``slice``, whose clamping is torch's (the same op an ONNX Slice of computed bounds reads as).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter, scalar_dtype
from msc.ir import DType, TensorType, Value

INT_MAX = 2**63 - 1


def _axis(d: int, rank: int) -> int:
    return d % rank if rank else 0


def reshape_to(ctx: Ctx, x: Value, sizes: Any) -> Value:
    if isinstance(sizes, int | Value):
        sizes = [sizes]
    sizes = list(sizes)
    dyn = [i for i, s in enumerate(sizes) if isinstance(s, Value)]
    if not dyn:
        return ctx.op("reshape", x, shape=[int(s) for s in sizes])
    if len(dyn) == 1 and -1 not in sizes:
        sizes[dyn[0]] = -1
        return ctx.op("reshape", x, shape=sizes)
    if -1 in sizes:
        # The inferred size as torch proved it, when it is a number (``[b, s, -1, 64]`` with
        # -1 = 12); else -1 stays in the run-time target, which torch and ONNX both resolve.
        out = ctx.meta
        i = sizes.index(-1)
        if isinstance(out, torch.Tensor) and len(out.shape) == len(sizes):
            n = out.shape[i]
            if isinstance(n, int):
                sizes[i] = n
    return ctx.op("reshape", x, ctx.shape_tensor(sizes))


@converter(
    "aten.view.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.view_copy.default",
    "aten._reshape_alias.default",
)
def view(ctx: Ctx, self: Value, **kw: Any) -> Value:
    size = kw["size"] if "size" in kw else kw["shape"]
    return reshape_to(ctx, self, size)


@converter("aten.view_as.default", "aten.reshape_as.default")
def view_as(ctx: Ctx, self: Value, other: Value) -> Value:
    shape = ctx.shape(other)
    if all(isinstance(d, int) for d in shape):
        return ctx.op("reshape", self, shape=list(shape))
    return ctx.op("reshape", self, ctx.op("shape", other))


@converter("aten.view.dtype")
def view_dtype(ctx: Ctx, self: Value, dtype: Any) -> Value:
    raise Unsupported("reinterpreting bits as another dtype (Tensor.view(dtype))")


@converter("aten.flatten.using_ints")
def flatten(ctx: Ctx, self: Value, start_dim: int = 0, end_dim: int = -1) -> Value:
    if ctx.rank(self) == 0:
        return ctx.op("reshape", self, shape=[1])
    return ctx.op("flatten", self, start_axis=start_dim, end_axis=end_dim)


@converter("aten.unflatten.int")
def unflatten(ctx: Ctx, self: Value, dim: int, sizes: Any) -> Value:
    shape = list(ctx.shape(self))
    d = _axis(dim, len(shape))
    keep = [x if isinstance(x, int) else None for x in shape]
    if any(x is None for i, x in enumerate(keep) if i != d):
        raise Unsupported("unflatten of a tensor with symbolic dims")
    return reshape_to(ctx, self, keep[:d] + list(sizes) + keep[d + 1 :])


@converter("aten.permute.default", "aten.permute_copy.default")
def permute(ctx: Ctx, self: Value, dims: Any) -> Value:
    r = ctx.rank(self)
    return ctx.op("transpose", self, perm=[_axis(d, r) for d in dims])


@converter("aten.transpose.int", "aten.swapaxes.default", "aten.swapdims.default")
def transpose(ctx: Ctx, self: Value, **kw: int) -> Value:
    d0, d1 = kw.values()
    r = ctx.rank(self)
    if r < 2:
        return self
    perm = list(range(r))
    a, b = _axis(d0, r), _axis(d1, r)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("transpose", self, perm=perm)


@converter("aten.t.default", "aten.numpy_T.default")
def t(ctx: Ctx, self: Value) -> Value:
    r = ctx.rank(self)
    return self if r < 2 else ctx.op("transpose", self, perm=list(reversed(range(r))))


@converter("aten.mT.default", "aten.mH.default", "aten.adjoint.default")
def matrix_t(ctx: Ctx, self: Value) -> Value:
    # The last two dims swapped (mH/adjoint conjugate too, which is nothing for real dtypes).
    if self.dtype.is_complex:
        raise Unsupported("conjugate transpose of a complex tensor")
    r = ctx.rank(self)
    return ctx.op("transpose", self, perm=list(range(r - 2)) + [r - 1, r - 2])


@converter("aten.movedim.int", "aten.movedim.intlist", "aten.moveaxis.int")
def movedim(ctx: Ctx, self: Value, source: Any, destination: Any) -> Value:
    r = ctx.rank(self)
    src = [_axis(s, r) for s in ([source] if isinstance(source, int) else source)]
    dst = [_axis(d, r) for d in ([destination] if isinstance(destination, int) else destination)]
    perm: list[int | None] = [None] * r
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(r) if i not in src)
    return ctx.op("transpose", self, perm=[p if p is not None else next(rest) for p in perm])


def _sym_matches(ctx: Ctx, s: Value, x: Value, i: int) -> bool:
    """Is symbolic size ``s`` the same expression as dim ``i`` of ``x``?"""
    shape = ctx.torch_shapes.get(id(x))
    if shape is None or i >= len(shape):
        return False
    d = shape[i]
    expr = getattr(getattr(d, "node", None), "expr", d)
    return ctx.sym_exprs.get(id(s)) == expr


@converter("aten.expand.default", "aten.expand_copy.default")
def expand(ctx: Ctx, self: Value, size: Any, *, implicit: bool = False) -> Value:
    size = list(size)
    off = len(size) - ctx.rank(self)
    out: list[Any] = []
    for i, s in enumerate(size):
        if isinstance(s, Value) and i >= off and _sym_matches(ctx, s, self, i - off):
            s = -1
        out.append(s)
    if any(isinstance(s, Value) for s in out):
        keep = [ctx.op("squeeze", ctx.op("shape", self, start=i - off, end=i - off + 1),
                       axes=[0]) if s == -1 and i >= off else s
                for i, s in enumerate(out)]  # fmt: skip
        return ctx.op("expand", self, ctx.shape_tensor(keep))
    return ctx.op("expand", self, shape=[int(s) for s in out])


@converter("aten.expand_as.default")
def expand_as(ctx: Ctx, self: Value, other: Value) -> Value:
    shape = ctx.shape(other)
    if all(isinstance(d, int) for d in shape):
        return ctx.op("expand", self, shape=list(shape))
    return ctx.op("expand", self, ctx.op("shape", other))


@converter("aten.broadcast_to.default")
def broadcast_to(ctx: Ctx, self: Value, size: Any) -> Value:
    return expand(ctx, self, size)


@converter("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(ctx: Ctx, self: Value, dim: int) -> Value:
    return ctx.op("unsqueeze", self, axes=[_axis(dim, ctx.rank(self) + 1)])


@converter("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def squeeze(ctx: Ctx, self: Value, dim: Any = None) -> Value:
    shape = ctx.shape(self)
    r = len(shape)
    if r == 0:
        return self
    dims = range(r) if dim is None else [dim] if isinstance(dim, int) else dim
    axes = sorted({_axis(d, r) for d in dims if shape[_axis(d, r)] == 1})
    # A symbolic dim is never squeezed: torch.export takes dynamic dims to be >= 2 (what it
    # recorded for the result says so; a different rank would be an error).
    out = ctx.meta
    if isinstance(out, torch.Tensor) and out.dim() != r - len(axes):
        raise Unsupported("squeeze of a symbolic dim that is 1")
    return ctx.op("squeeze", self, axes=axes) if axes else self


@converter("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def cat(ctx: Ctx, tensors: list[Value], dim: int = 0) -> Value:
    # Legacy torch skips 1-d empty tensors in cat.
    xs = [t for t in tensors if not (t.type.shape == (0,))] or list(tensors)[:1]
    xs = ctx.promote(*xs)
    if len(xs) == 1:
        return xs[0]
    return ctx.op("concat", *xs, axis=dim)


@converter("aten.stack.default")
def stack(ctx: Ctx, tensors: list[Value], dim: int = 0) -> Value:
    xs = ctx.promote(*tensors)
    a = _axis(dim, ctx.rank(xs[0]) + 1)
    xs = [ctx.op("unsqueeze", x, axes=[a]) for x in xs]
    return xs[0] if len(xs) == 1 else ctx.op("concat", *xs, axis=a)


@converter("aten.hstack.default", "aten.vstack.default")
def hvstack(ctx: Ctx, tensors: list[Value]) -> Value:
    raise Unsupported("hstack/vstack (decomposed by torch.export)")


def _dim_size(ctx: Ctx, x: Value, dim: int) -> int:
    d = ctx.shape(x)[dim]
    if not isinstance(d, int):
        raise Unsupported("split of a symbolic dim")
    return d


@converter("aten.split.Tensor", "aten.split.sizes", "aten.split_with_sizes.default")
def split(ctx: Ctx, self: Value, split_size: Any = None, dim: int = 0, **kw: Any) -> tuple:
    if "split_sizes" in kw:
        split_size = kw["split_sizes"]
    if not isinstance(split_size, int) and any(isinstance(v, Value) for v in split_size):
        return _split_symbolic(ctx, self, list(split_size), dim)
    n = _dim_size(ctx, self, dim)
    if isinstance(split_size, int):
        sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        sizes = sizes or [0]
    else:
        sizes = ctx.ints(split_size, "split sizes")
    if len(sizes) == 1:
        return (self,)
    return ctx.node("split", [self], {"axis": dim, "sizes": sizes})


def _split_symbolic(ctx: Ctx, x: Value, sizes: list[Any], dim: int) -> tuple:
    """Sizes with one symbolic entry (the rest of the dim): static slices, counted from the
    start before it and from the end after it."""
    sym = [i for i, v in enumerate(sizes) if isinstance(v, Value)]
    d = _axis(dim, ctx.rank(x))
    if len(sym) != 1:
        return _split_ranges(ctx, x, sizes, d)
    k = sym[0]
    bounds: list[tuple[int, int]] = []
    at = 0
    for v in sizes[:k]:
        bounds.append((at, at + int(v)))
        at += int(v)
    tail = [int(v) for v in sizes[k + 1 :]]
    left = -sum(tail)
    bounds.append((at, left if left else INT_MAX))
    for v in tail:
        bounds.append((left, left + v if left + v else INT_MAX))
        left += v
    return tuple(ctx.op("slice", x, starts=[s], ends=[e], axes=[d], steps=[1]) for s, e in bounds)


def _split_ranges(ctx: Ctx, x: Value, sizes: list[Any], d: int) -> tuple:
    """Several pieces of symbolic size (a mixture-of-experts split by per-expert token
    counts): each piece gathers range(start, start + size) along ``d``, its start the sum of
    the sizes before it, computed at run time; the pieces' sizes are torch's symbols."""
    i64 = DType.INT64
    metas = ctx.meta if isinstance(ctx.meta, list | tuple) else None
    out, at = [], 0
    for i, size in enumerate(sizes):
        if isinstance(at, Value) or isinstance(size, Value):
            end = ctx.op("add", ctx.tensor(at, i64), ctx.tensor(size, i64))
            idx = ctx.op("range", ctx.tensor(at, i64), end, ctx.tensor(1, i64))
            n = ctx.dim_of(metas[i].shape[d]) if metas is not None else None
            if n is not None and idx.type.shape == (None,):
                idx.type = idx.type.with_shape((n,))
            out.append(ctx.op("gather", x, idx, axis=d))
        else:
            end = at + int(size)
            out.append(ctx.op("slice", x, starts=[at], ends=[end], axes=[d], steps=[1]))
        at = end
    return tuple(out)


@converter("aten.chunk.default")
def chunk(ctx: Ctx, self: Value, chunks: int, dim: int = 0) -> tuple:
    n = _dim_size(ctx, self, dim)
    each = -(-n // chunks)
    return split(ctx, self, each, dim)


@converter("aten.unbind.int")
def unbind(ctx: Ctx, self: Value, dim: int = 0) -> tuple:
    n = _dim_size(ctx, self, dim)
    parts = ctx.node("split", [self], {"axis": dim, "sizes": [1] * n}) if n > 1 else (self,)
    return tuple(ctx.op("squeeze", p, axes=[_axis(dim, ctx.rank(self))]) for p in parts)


def _expr(x: Any) -> Any:
    """The sympy expression of a torch size (an int stays an int)."""
    return getattr(getattr(x, "node", None), "expr", x)


def _from_end(ctx: Ctx, v: Value, x: Value, dim: int) -> int | None:
    """``c`` when symbolic ``v`` is dim ``dim`` of ``x`` plus a constant ``c <= 0``."""
    shape = ctx.torch_shapes.get(id(x))
    e = ctx.sym_exprs.get(id(v))
    if shape is None or dim >= len(shape) or e is None:
        return None
    try:
        c = e - _expr(shape[dim])
    except TypeError:
        return None
    return int(c) if getattr(c, "is_Integer", False) and int(c) <= 0 else None


def _slice_bound(ctx: Ctx, v: Any, x: Value, dim: int, default: int) -> int | Value:
    """A static bound (a symbolic one that is the dim's size minus a constant becomes a
    negative one), else the symbolic value."""
    if v is None:
        return default
    if isinstance(v, Value):
        c = _from_end(ctx, v, x, dim)
        if c is None:
            return v
        return INT_MAX if c == 0 else c
    return int(v)


@converter("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(
    ctx: Ctx, self: Value, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Value:
    r = ctx.rank(self)
    d = _axis(dim, r)
    s = _slice_bound(ctx, start, self, d, 0)
    e = _slice_bound(ctx, end, self, d, INT_MAX)
    if isinstance(s, Value) or isinstance(e, Value):
        return _runtime_slice(ctx, self, d, s, e, step)
    if s == 0 and e >= INT_MAX and step == 1:
        return self
    e = min(e, INT_MAX)
    return ctx.op("slice", self, starts=[s], ends=[e], axes=[d], steps=[step])


def _runtime_slice(ctx: Ctx, x: Value, d: int, start: Any, end: Any, step: int) -> Value:
    """x[start:end:step] along ``d`` with a bound known at run time: msc's slice with its
    bounds as 1-d inputs, which counts a negative bound from the end and clamps as torch does
    (the output's size is torch's, which the translator sets)."""
    i64 = DType.INT64

    def bound(b: Any) -> Value:
        if isinstance(b, Value):
            return ctx.op("unsqueeze", ctx.tensor(b, i64), axes=[0])
        return ctx.const(np.array([min(int(b), INT_MAX)], np.int64), i64)

    return ctx.op("slice", x, bound(start), bound(end), axes=[d], steps=[step])


@converter("aten.narrow.default")
def narrow(ctx: Ctx, self: Value, dim: int, start: Any, length: Any) -> Value:
    s, n = ctx.ints([start, length], "narrow bounds")
    r = ctx.rank(self)
    if s < 0:
        s += _dim_size(ctx, self, dim)
    return ctx.op("slice", self, starts=[s], ends=[s + n], axes=[_axis(dim, r)], steps=[1])


@converter("aten.select.int", "aten.select_copy.int")
def select(ctx: Ctx, self: Value, dim: int, index: Any) -> Value:
    r = ctx.rank(self)
    d = _axis(dim, r)
    if isinstance(index, Value):  # an index only known at run time (a tensor's .item())
        return ctx.op("gather", self, ctx.cast(index, DType.INT64), axis=d)
    (i,) = ctx.ints([index], "select index")
    end = i + 1 if i != -1 else INT_MAX
    y = ctx.op("slice", self, starts=[i], ends=[end], axes=[d], steps=[1])
    return ctx.op("squeeze", y, axes=[d])


@converter("aten.repeat.default", "aten.tile.default")
def repeat(ctx: Ctx, self: Value, **kw: Any) -> Value:
    (repeats,) = kw.values()
    reps = ctx.ints(repeats, "repeats")
    x = self
    if len(reps) > ctx.rank(x):
        x = reshape_to(ctx, x, [1] * (len(reps) - ctx.rank(x)) + _sizes(ctx, x))
    return ctx.op("tile", x, repeats=reps)


def _sizes(ctx: Ctx, x: Value) -> list[int]:
    out = []
    for d in ctx.shape(x):
        if not isinstance(d, int):
            raise Unsupported("this op needs static sizes")
        out.append(d)
    return out


@converter("aten.flip.default")
def flip(ctx: Ctx, self: Value, dims: Any) -> Value:
    r = ctx.rank(self)
    return ctx.op("flip", self, axes=[_axis(d, r) for d in dims])


@converter("aten.roll.default")
def roll(ctx: Ctx, self: Value, shifts: Any, dims: Any = ()) -> Value:
    shifts = ctx.ints(shifts, "shifts")
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        flat = ctx.op("reshape", self, shape=[-1])
        y = ctx.op("roll", flat, shifts=shifts, axes=[0])
        return ctx.op("reshape", y, shape=_sizes(ctx, self))
    return ctx.op("roll", self, shifts=shifts, axes=[_axis(d, ctx.rank(self)) for d in dims])


def _trilu(upper: bool):
    def convert(ctx: Ctx, self: Value, diagonal: int = 0) -> Value:
        return ctx.op("trilu", self, upper=upper, k=diagonal)

    return convert


converter("aten.tril.default")(_trilu(False))
converter("aten.triu.default")(_trilu(True))


@converter("aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(ctx: Ctx, self: Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
    shape = _sizes(ctx, self)
    r = len(shape)
    a, b = _axis(dim1, r), _axis(dim2, r)
    rest = [i for i in range(r) if i not in (a, b)]
    x = ctx.op("transpose", self, perm=rest + [a, b]) if rest + [a, b] != list(range(r)) else self
    n, m = shape[a], shape[b]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    batch = [shape[i] for i in rest]
    flat = ctx.op("reshape", x, shape=batch + [n * m])
    start = offset if offset >= 0 else -offset * m
    idx = [start + i * (m + 1) for i in range(length)]
    return ctx.op("gather", flat, ctx.const(idx, DType.INT64), axis=len(batch))


@converter("aten.unfold.default")
def unfold(ctx: Ctx, self: Value, dimension: int, size: int, step: int) -> Value:
    r = ctx.rank(self)
    if r == 0:
        return ctx.op("reshape", self, shape=[1])
    d = _axis(dimension, r)
    n = _dim_size(ctx, self, d)
    windows = (n - size) // step + 1
    idx = [[w * step + k for k in range(size)] for w in range(windows)]
    y = ctx.op("gather", self, ctx.const(idx, DType.INT64), axis=d)  # [..., W, size, ...]
    perm = list(range(r + 1))
    perm.pop(d + 1)
    return ctx.op("transpose", y, perm=perm + [d + 1])


@converter("aten.diff.default")
def diff(ctx: Ctx, self: Value, n: int = 1, dim: int = -1, prepend=None, append=None) -> Value:
    x = self
    d = _axis(dim, ctx.rank(x))
    if prepend is not None or append is not None:
        x = cat(ctx, [t for t in (prepend, x, append) if t is not None], d)
    for _ in range(n):
        hi = ctx.op("slice", x, starts=[1], ends=[INT_MAX], axes=[d], steps=[1])
        lo = ctx.op("slice", x, starts=[0], ends=[-1], axes=[d], steps=[1])
        x = ctx.op("logical_xor", hi, lo) if x.dtype is DType.BOOL else ctx.op("sub", hi, lo)
    return x


@converter("aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(ctx: Ctx, self: Value, size: Any, stride: Any, storage_offset: Any = None):
    raise Unsupported("as_strided reads memory by strides; msc graphs have no memory layout")


# ----------------------------------------------------------------------- symbolic ints
@converter("aten.sym_size.int")
def sym_size(ctx: Ctx, self: Value, dim: int) -> Value:
    d = _axis(dim, ctx.rank(self))
    return ctx.op("squeeze", ctx.op("shape", self, start=d, end=d + 1), axes=[0])


@converter("aten.sym_numel.default")
def sym_numel(ctx: Ctx, self: Value) -> Value:
    return ctx.op("reduce_prod", ctx.op("shape", self), keepdims=False)


def _sym_binary(op: str):
    def convert(ctx: Ctx, a: Any, b: Any) -> Any:
        if not isinstance(a, Value) and not isinstance(b, Value):
            raise Unsupported("arithmetic on non-tensor values")
        kind = "int_to_float" if op == "div" else "default"
        x, y = ctx.promote(a, b, kind=kind)
        return ctx.op(op, x, y)

    return convert


for _name, _op in (
    ("add", "add"),
    ("sub", "sub"),
    ("mul", "mul"),
    ("floordiv", "floor_divide"),
    ("mod", "remainder"),
    ("truediv", "div"),
    ("eq", "eq"),
    ("ne", "ne"),
    ("lt", "lt"),
    ("le", "le"),
    ("gt", "gt"),
    ("ge", "ge"),
):
    converter(f"operator.{_name}")(_sym_binary(_op))


@converter("operator.neg")
def sym_neg(ctx: Ctx, a: Value) -> Value:
    return ctx.op("neg", a)


@converter("aten.scalar_tensor.default")
def scalar_tensor(ctx: Ctx, s: Any, *, dtype: Any = None, **_: Any) -> Value:
    from msc.frontend.torch.dtypes import to_msc
    from msc.frontend.torch.registry import scalar_dtype

    dt = to_msc(dtype) if dtype is not None else None
    if isinstance(s, Value):
        return ctx.cast(s, dt or ctx.result_dtype(s))
    return ctx.const(s, dt or (scalar_dtype(s) if not isinstance(s, float) else DType.FLOAT32))


# ---------------------------------------------------------------- indexing
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
