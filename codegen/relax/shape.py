"""Relax emitters of the shape family: reshaping, slicing, indexing, scattering, creation."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from codegen.relax.registry import Emit, Unsupported, emitter, relax_dtype, static_only

R = relax.op
_BIG = 2**62


def _out_shape(e: Emit) -> list:
    e.require(e.out.shape is not None, "an output of unknown rank")
    return e.dims(e.out.shape)


# ``shape`` is both an optional input and an attribute of reshape, expand and full: the
# attribute arrives as a keyword, the input positionally; the output type holds the target.
@emitter("reshape")
def reshape(e: Emit, x, shape_in=None, **attrs):
    return e.emit(R.reshape(x, _out_shape(e)))


@emitter("flatten")
def flatten(e: Emit, x, *, start_axis=0, end_axis=-1):
    return e.emit(R.reshape(x, _out_shape(e)))


@emitter("expand")
def expand(e: Emit, x, shape_in=None, **attrs):
    return e.emit(R.broadcast_to(x, _out_shape(e)))


@emitter("transpose")
def transpose(e: Emit, x, *, perm):
    return e.emit(R.permute_dims(x, list(perm)))


@emitter("squeeze")
def squeeze(e: Emit, x, axes_in=None, *, axes=None):
    static_only(axes_in)
    return e.emit(R.squeeze(x, None if axes is None else list(axes)))


@emitter("unsqueeze")
def unsqueeze(e: Emit, x, axes_in=None, *, axes):
    static_only(axes_in)
    return e.emit(R.expand_dims(x, list(axes)))


@emitter("concat")
def concat(e: Emit, *xs, axis):
    return e.emit(R.concat(list(xs), axis))


@emitter("split")
def split(e: Emit, x, sizes_in=None, *, axis, sizes, num_outputs=None):
    static_only(sizes_in)
    if sizes is None:
        raise Unsupported("split: an even split of a dim only known at run time")
    cuts = list(np.cumsum(sizes)[:-1].astype(int))
    if len(sizes) == 1:
        return [x]
    out = e.emit(R.split(x, [int(c) for c in cuts], axis))
    return [e.emit(relax.TupleGetItem(out, i)) for i in range(len(sizes))]


@emitter("slice")
def slice_(e: Emit, x, *runtime, starts, ends, axes, steps=()):
    static_only(*runtime)
    steps = list(steps) or [1] * len(axes)
    if e.source_op == "relax.strided_slice":  # read from Relax: its bounds, as they were
        return e.emit(R.strided_slice(x, list(axes), list(starts), list(ends), steps))
    shape = e.shape(x)
    begin, end = [], []
    for a, s, t, st in zip(axes, starts, ends, steps):
        n = shape[a]
        if st < 0 and t < -_BIG // 2 and isinstance(n, int):
            t = -n - 1  # "to the front": one before index 0
        begin.append(max(min(int(s), _BIG), -_BIG))
        end.append(max(min(int(t), _BIG), -_BIG))
    return e.emit(R.strided_slice(x, list(axes), begin, end, steps))


@emitter("tile")
def tile(e: Emit, x, repeats_in=None, *, repeats):
    static_only(repeats_in)
    return e.emit(R.tile(x, list(repeats)))


@emitter("flip")
def flip(e: Emit, x, *, axes):
    out = x
    for a in axes:
        out = e.emit(R.flip(out, a))
    return out


@emitter("trilu")
def trilu(e: Emit, x, k_in=None, *, upper, k=0):
    static_only(k_in)
    return e.emit((R.triu if upper else R.tril)(x, k))


@emitter("pad")
def pad(e: Emit, x, pads_in=None, value_in=None, *, pads, mode="constant", value=0.0):
    static_only(pads_in, value_in)
    n = len(pads) // 2
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}
    e.require(mode in modes, f"pad mode {mode!r}")
    if any(p < 0 for p in pads):  # a negative pad crops: slice first, then pad the rest
        crop = [a for a in range(n) if pads[a] < 0 or pads[n + a] < 0]
        shape = e.shape(x)
        ends = [pads[n + a] if pads[n + a] < 0 else _BIG for a in crop]
        ends = [v + shape[a] if v < 0 and isinstance(shape[a], int) else v
                for v, a in zip(ends, crop)]  # fmt: skip
        begins = [max(-pads[a], 0) for a in crop]
        x = e.emit(R.strided_slice(x, crop, begins, ends, [1] * len(crop)))
        pads = [max(p, 0) for p in pads]
        if not any(pads):
            return x
    width = [int(v) for i in range(n) for v in (pads[i], pads[n + i])]
    return e.emit(R.nn.pad(x, width, modes[mode], value))


@emitter("depth_to_space")
def depth_to_space(e: Emit, x, *, blocksize, mode="DCR"):
    n, c, h, w = e.shape(x)
    b = blocksize
    if mode == "DCR":
        y = e.emit(R.reshape(x, [n, b, b, c // b // b, h, w]))
        y = e.emit(R.permute_dims(y, [0, 3, 4, 1, 5, 2]))
    else:
        y = e.emit(R.reshape(x, [n, c // b // b, b, b, h, w]))
        y = e.emit(R.permute_dims(y, [0, 1, 4, 2, 5, 3]))
    return e.emit(R.reshape(y, [n, c // b // b, h * b, w * b]))


@emitter("space_to_depth")
def space_to_depth(e: Emit, x, *, blocksize):
    n, c, h, w = e.shape(x)
    b = blocksize
    y = e.emit(R.reshape(x, [n, c, h // b, b, w // b, b]))
    y = e.emit(R.permute_dims(y, [0, 3, 5, 1, 2, 4]))
    return e.emit(R.reshape(y, [n, c * b * b, h // b, w // b]))


def _norm_index(e: Emit, idx, n):
    """Negative indices counted from the end (ONNX allows them; Relax's take does not)."""
    if isinstance(idx, tvm.ir.GenericConst):
        arr = idx.value.numpy()
        if isinstance(n, int) and (arr < 0).any():
            return relax.const(np.where(arr < 0, arr + n, arr).astype(arr.dtype), str(arr.dtype))
        return idx
    if e.dtype(idx).startswith("uint"):
        return idx
    dt = e.dtype(idx)
    size = e.const(n, dt) if isinstance(n, int) else None
    if size is None:
        return idx
    return e.emit(R.where(R.less(idx, e.const(0, dt)), R.add(idx, size), idx))


@emitter("gather")
def gather(e: Emit, x, indices, *, axis=0):
    if e.source_op == "relax.take":  # read from Relax's take: its indices are not negative
        return e.emit(R.take(x, indices, axis=axis))
    n = e.shape(x)[axis]
    return e.emit(R.take(x, _norm_index(e, indices, n), axis=axis))


def _elements_index(e: Emit, x, indices, axis: int, negative: bool):
    """GatherElements indices, counted from the end where the node says they may be negative
    (Relax's gather_elements reads past the data; its scatter_elements wraps them itself)."""
    if not negative:
        return indices
    n = e.shape(x)[axis]
    if not isinstance(n, int):
        raise Unsupported(
            f"indices that may be negative (counted from the end) along axis {axis}, whose "
            "size is only known at run time"
        )
    return _norm_index(e, indices, n)


@emitter("gather_elements")
def gather_elements(e: Emit, x, indices, *, axis, negative_indices=False):
    indices = _elements_index(e, x, indices, axis, negative_indices)
    return e.emit(R.gather_elements(x, indices, axis))


def _nd_index(e: Emit, x, indices, batch_dims: int):
    """GatherND/ScatterND index tuples with negative entries counted from the end (the
    canonical ops take them, as ONNX's do; Relax's read past the data)."""
    if isinstance(indices, tvm.ir.GenericConst) and (indices.value.numpy() >= 0).all():
        return indices
    dt = e.dtype(indices)
    k = e.shape(indices)[-1]
    if not isinstance(k, int):
        raise Unsupported("index tuples of a length only known at run time")
    dims = e.shape(x)[batch_dims : batch_dims + k]
    if all(isinstance(d, int) for d in dims):
        sizes = e.const(dims, dt)
    else:  # sizes known at run time: from the data's shape
        whole = e.emit(R.shape_to_tensor(R.shape_of(x)))
        sizes = e.emit(R.astype(R.strided_slice(whole, [0], [batch_dims], [batch_dims + k]), dt))
    return e.emit(R.where(R.less(indices, e.const(0, dt)), R.add(indices, sizes), indices))


@emitter("gather_nd")
def gather_nd(e: Emit, x, indices, *, batch_dims=0):
    return e.emit(R.gather_nd(x, _nd_index(e, x, indices, batch_dims), batch_dims))


_REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@emitter("scatter_elements")
def scatter_elements(
    e: Emit, x, indices, updates, *, axis, reduction="none", negative_indices=False
):
    # Relax's scatter_elements counts a negative index from the end (the op table's
    # scatter_elements_*negative rows check it).
    return e.emit(R.scatter_elements(x, indices, updates, axis, _REDUCTION[reduction]))


@emitter("scatter_nd")
def scatter_nd(e: Emit, x, indices, updates, *, reduction="none"):
    indices = _nd_index(e, x, indices, 0)
    return e.emit(R.scatter_nd(x, indices, updates, _REDUCTION[reduction]))


@emitter("index")
def index(e: Emit, x, *indices, axes):
    # index_tensor indexes the leading dims: bring ``axes`` to the front, index, and (torch's
    # rule) put the index dims back where the indexed axes were when those are adjacent.
    r, k = e.rank(x), len(axes)
    axes = [a % r for a in axes]
    rest = [a for a in range(r) if a not in axes]
    shape = e.shape(x)
    if e.source_op != "relax.index_tensor":  # Relax's own indices are not negative
        indices = tuple(_norm_index(e, i, shape[a]) for i, a in zip(indices, axes))
    if axes != list(range(k)):
        x = e.emit(R.permute_dims(x, axes + rest))
    y = e.emit(R.index_tensor(x, relax.Tuple(list(indices))))
    a0 = axes[0]
    if a0 == 0 or axes != list(range(a0, a0 + k)):
        return y
    nb = e.rank(y) - len(rest)
    perm = [nb + i for i in range(a0)] + list(range(nb)) + [nb + i for i in range(a0, len(rest))]
    return e.emit(R.permute_dims(y, perm))


@emitter("index_put")
def index_put(e: Emit, x, values, *indices, axes, accumulate=False):
    # Relax's index_put takes one index tensor per dim of x: the given indices on ``axes``
    # and an arange on each other dim, all broadcast to [*index dims, *other dims]. torch's
    # x[indices] puts the index dims where the indexed axes were when those are adjacent
    # (else first); the values broadcast against that shape and are moved into this order.
    r, k = e.rank(x), len(axes)
    axes = [a % r for a in axes]
    shape = e.shape(x)
    indices = [_norm_index(e, i, shape[a]) for i, a in zip(indices, axes)]
    if r == k:
        return e.emit(R.index_put(x, relax.Tuple(indices), values, accumulate))
    rest = [a for a in range(r) if a not in axes]
    shapes = [e.shape(i) for i in indices] + [shape]
    e.require(all(isinstance(d, int) for s in shapes for d in s), "index_put over symbolic dims")
    batch = list(np.broadcast_shapes(*[tuple(e.shape(i)) for i in indices]))
    nb, nr = len(batch), len(rest)
    full = batch + [shape[a] for a in rest]
    a0 = axes[0]
    if a0 > 0 and axes == list(range(a0, a0 + k)):  # torch's order: rest[:a0], batch, rest
        where = [shape[a] for a in rest[:a0]] + batch + [shape[a] for a in rest[a0:]]
        values = e.emit(R.broadcast_to(values, where))
        perm = [a0 + i for i in range(nb)] + list(range(a0))
        perm += [a0 + nb + i for i in range(nr - a0)]
        values = e.emit(R.permute_dims(values, perm))
    else:
        values = e.emit(R.broadcast_to(values, full))
    per_axis = {}
    for i, a in zip(indices, axes):
        i = e.emit(R.astype(i, "int64")) if e.dtype(i) != "int64" else i
        per_axis[a] = e.emit(R.reshape(i, e.shape(i) + [1] * nr))
    for j, a in enumerate(rest):
        ar = e.emit(R.arange(0, shape[a], 1, "int64"))
        ar = e.emit(R.reshape(ar, [1] * (nb + j) + [shape[a]] + [1] * (nr - j - 1)))
        per_axis[a] = ar
    tup = relax.Tuple([per_axis[a] for a in range(r)])
    return e.emit(R.index_put(x, tup, values, accumulate))


@emitter("nonzero")
def nonzero(e: Emit, x):
    return e.emit(R.permute_dims(R.nonzero(x), [1, 0]))


@emitter("shape")
def shape(e: Emit, x, *, start=0, end=None):
    if e.source_op == "relax.shape_to_tensor" and (start, end) == (0, None):
        return e.emit(R.shape_to_tensor(e.emit(R.shape_of(x))))  # as it was read
    dims = e.shape(x)[start:end]
    if all(isinstance(d, int) for d in dims):
        return relax.const(np.asarray(dims, np.int64), "int64")
    whole = e.emit(R.shape_to_tensor(R.shape_of(x)))
    r = e.rank(x)
    lo, hi = start % r if start < 0 else start, r if end is None else (end % r if end < 0 else end)
    return e.emit(R.strided_slice(whole, [0], [lo], [hi]))


@emitter("constant")
def constant(e: Emit, *, value):
    arr = np.array(value, order="C")
    const = relax.const(arr, relax_dtype(e.out.dtype))
    # Read from a binding of its own (``lv = R.const(...)``): bound again; else inline.
    return e.emit(const) if e.source_op == "relax.const" else const


@emitter("arange")
def arange(e: Emit, *, start=0.0, end, step=1.0, dtype):
    dt = relax_dtype(dtype)
    if dt.startswith(("int", "uint")):
        start, end, step = int(start), int(end), int(step)
    return e.emit(R.arange(start, end, step, dt))


@emitter("full")
def full(e: Emit, shape_in=None, *, shape=None, value=0.0, dtype):
    e.require(shape_in is None, "full with a run-time shape")
    filled = _FILLED.get((e.source_op, value))
    if filled is not None:
        return e.emit(filled(_out_shape(e), relax_dtype(dtype)))
    return e.emit(R.full(_out_shape(e), e.const(value, dtype), relax_dtype(dtype)))


# Relax's zeros / ones (and their _like forms): read as full (full_like) with the value.
_FILLED = {
    ("relax.zeros", 0.0): R.zeros,
    ("relax.ones", 1.0): R.ones,
    ("relax.zeros_like", 0.0): R.zeros_like,
    ("relax.ones_like", 1.0): R.ones_like,
}


@emitter("full_like")
def full_like(e: Emit, x, *, value=0.0, dtype=None):
    dt = dtype or e.out.dtype
    same = relax_dtype(dt) == e.dtype(x)  # unset, as TVM's frontends leave it
    out_dtype = None if same else relax_dtype(dt)
    filled = _FILLED.get((e.source_op, value))
    if filled is not None:
        return e.emit(filled(x, out_dtype))
    return e.emit(R.full_like(x, e.const(value, dt), out_dtype))


@emitter("one_hot")
def one_hot(e: Emit, indices, depth_in=None, *, depth, axis=-1, dtype):
    static_only(depth_in)
    dt = relax_dtype(dtype)
    on = relax.prim_value(tvm.tirx.const(1, dt))
    off = relax.prim_value(tvm.tirx.const(0, dt))
    return e.emit(R.one_hot(indices, on, off, depth, axis))
