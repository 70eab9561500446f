"""Keras reshaping layers: Flatten, Reshape, Permute, Concatenate, ZeroPadding, Cropping."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ir import Value


@converter("Flatten")
def flatten(ctx: Ctx, layer, x):
    if getattr(layer, "data_format", "channels_last") != "channels_last" and x.type.rank > 2:
        raise Unsupported("data_format='channels_first'")
    if x.type.rank == 1:
        return ctx.op("reshape", x, shape=[-1, 1])
    return ctx.op("flatten", x, start_axis=1, end_axis=-1)


@converter("Reshape")
def reshape(ctx: Ctx, layer, x):
    target = [int(d) for d in layer.target_shape]
    if -1 in target:
        rest = x.type.shape[1:]
        if not all(isinstance(d, int) for d in rest):
            raise Unsupported("a -1 target dim of a symbolic input")
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        target[target.index(-1)] = int(np.prod(rest, dtype=np.int64)) // max(known, 1)
    batch = x.type.shape[0]
    return ctx.op("reshape", x, shape=[batch if isinstance(batch, int) else -1, *target])


@converter("Permute")
def permute(ctx: Ctx, layer, x):
    return ctx.op("transpose", x, perm=[0, *(int(d) for d in layer.dims)])


@converter("Concatenate")
def concatenate(ctx: Ctx, layer, *xs):
    return ctx.op("concat", *xs, axis=int(layer.axis))


@converter("ops.Concatenate")
def concatenate_op(ctx: Ctx, op, xs, *rest, **kw):
    if not all(isinstance(x, Value) for x in xs):
        raise Unsupported("a constant among the tensors")
    return ctx.op("concat", *xs, axis=int(op.axis))


def _pairs(padding, n: int) -> list[tuple[int, int]]:
    if isinstance(padding, int):
        return [(padding, padding)] * n
    if n == 1 and len(padding) == 2 and all(isinstance(p, int) for p in padding):
        return [(int(padding[0]), int(padding[1]))]
    out = []
    for p in padding:
        out.append((int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])))
    return out


@converter("ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D")
def zero_padding(ctx: Ctx, layer, x):
    n = x.type.rank - 2
    pairs = _pairs(layer.padding, n)
    if getattr(layer, "data_format", "channels_last") == "channels_first":
        begins = [0, 0, *(p[0] for p in pairs)]
        ends = [0, 0, *(p[1] for p in pairs)]
    else:
        begins = [0, *(p[0] for p in pairs), 0]
        ends = [0, *(p[1] for p in pairs), 0]
    return ctx.op("pad", x, pads=begins + ends, mode="constant", value=0.0)


@converter("Cropping1D", "Cropping2D", "Cropping3D")
def cropping(ctx: Ctx, layer, x):
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise Unsupported("data_format='channels_first'")
    n = x.type.rank - 2
    pairs = _pairs(layer.cropping, n)
    sizes = x.type.shape[1:-1]
    if not all(isinstance(s, int) for s in sizes):
        raise Unsupported("cropping a symbolic size")
    starts = [p[0] for p in pairs]
    ends = [s - p[1] for s, p in zip(sizes, pairs)]
    return ctx.op("slice", x, starts=starts, ends=ends, axes=list(range(1, n + 1)))


# ---------------------------------------------------------------- keras.ops calls
@converter("ops.Transpose")
def transpose_op(ctx: Ctx, op, x):
    axes = op.axes
    perm = list(range(x.type.rank))[::-1] if axes is None else [int(a) for a in axes]
    return ctx.op("transpose", x, perm=perm)


@converter("ops.Reshape")
def reshape_op(ctx: Ctx, op, x):
    return ctx.op("reshape", x, shape=[int(d) for d in op.newshape])


@converter("ops.Pad")
def pad_op(ctx: Ctx, op, x, constant_values=None):
    width = [(int(a), int(b)) for a, b in op.pad_width]
    pads = [a for a, _ in width] + [b for _, b in width]
    if op.mode in ("reflect", "edge", "wrap"):
        return ctx.op("pad", x, pads=pads, mode=op.mode)
    if op.mode != "constant":
        raise Unsupported(f"mode={op.mode!r}")
    value = 0.0 if constant_values is None else float(constant_values)
    return ctx.op("pad", x, pads=pads, mode="constant", value=value)


@converter("ops.Split")
def split_op(ctx: Ctx, op, x):
    axis = int(op.axis)
    cut = op.indices_or_sections
    dim = x.type.shape[axis]
    if isinstance(cut, int):
        if not isinstance(dim, int):
            raise Unsupported("splitting a symbolic dim into sections")
        sizes = [dim // cut] * cut
    else:
        if not isinstance(dim, int):
            raise Unsupported("splitting a symbolic dim")
        edges = [0, *(int(c) for c in cut), dim]
        sizes = [b - a for a, b in zip(edges[:-1], edges[1:])]
    return tuple(ctx.multi("split", x, axis=axis, sizes=sizes))


@converter("ops.Slice")
def slice_op(ctx: Ctx, op, x, start, shape=None):
    if isinstance(start, Value):
        raise Unsupported("start indices computed at run time")
    sizes = op.shape if shape is None else shape
    starts, ends, axes = [], [], []
    for ax, (st, n) in enumerate(zip(start, sizes)):
        st, n = int(st), int(n)
        if st == 0 and n == -1:
            continue
        starts.append(st)
        ends.append(2**62 if n == -1 else st + n)
        axes.append(ax)
    if not axes:
        return ctx.op("identity", x)
    return ctx.op("slice", x, starts=starts, ends=ends, axes=axes)


@converter("ops.ExpandDims")
def expand_dims_op(ctx: Ctx, op, x):
    axis = op.axis
    axes = [int(a) for a in (axis if isinstance(axis, list | tuple) else [axis])]
    return ctx.op("unsqueeze", x, axes=axes)


@converter("ops.Squeeze")
def squeeze_op(ctx: Ctx, op, x):
    axis = op.axis
    if axis is None:
        return ctx.op("squeeze", x)
    axes = [int(a) for a in (axis if isinstance(axis, list | tuple) else [axis])]
    return ctx.op("squeeze", x, axes=axes)


@converter("RepeatVector")
def repeat_vector(ctx: Ctx, layer, x):
    """[batch, features] -> [batch, n, features]."""
    y = ctx.op("unsqueeze", x, axes=[1])
    return ctx.op("expand", y, shape=[-1, int(layer.n), -1])


@converter("TimeDistributed")
def time_distributed(ctx: Ctx, layer, x, mask=None):
    """The inner layer on [batch * steps, ...] (its own converter), reshaped back to
    [batch, steps, ...]. A mask does not change Keras' result (it applies the layer to every
    step), so it is only passed on to an inner layer that reads one."""
    shape = list(x.type.shape)
    if not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported("a symbolic step or feature size")
    steps = shape[1]
    flat = ctx.op("reshape", x, shape=[-1, *shape[2:]])
    inner = layer.layer
    if mask is not None and "mask" in _call_args(inner):
        raise Unsupported(f"a mask for its {type(inner).__name__} (msc does not pass it on)")
    y = ctx.sublayer(inner, flat)
    if not isinstance(y, Value):
        raise Unsupported(f"its {type(inner).__name__} gives several outputs")
    return ctx.op("reshape", y, shape=[-1, steps, *y.type.shape[1:]])


def _call_args(layer) -> set[str]:
    import inspect

    return set(inspect.signature(layer.call).parameters)


@converter("ops.Flip")
def flip_op(ctx: Ctx, op, x):
    axis = op.axis
    axes = list(range(x.type.rank)) if axis is None else _ints(axis)
    return ctx.op("flip", x, axes=axes)


@converter("ops.Repeat")
def repeat_op(ctx: Ctx, op, x):
    """``ops.repeat`` of one count along one axis: a broadcast of a length-1 axis; of a
    longer one, each element repeated in a row (a new axis after it broadcast, the two
    flattened: the spelling of transformers' repeat_kv)."""
    if op.axis is None or not isinstance(op.repeats, int):
        raise Unsupported("repeats other than one count along one axis")
    rank = x.type.rank
    axis = int(op.axis) % rank
    if x.type.shape[axis] == 1:
        shape = [-1] * rank
        shape[axis] = int(op.repeats)
        return ctx.op("expand", x, shape=shape)
    shape = [-1] * (rank + 1)
    shape[axis + 1] = int(op.repeats)
    y = ctx.op("expand", ctx.op("unsqueeze", x, axes=[axis + 1]), shape=shape)
    return ctx.op("flatten", y, start_axis=axis, end_axis=axis + 1)


@converter("ops.Tile")
def tile_op(ctx: Ctx, op, x):
    """numpy.tile: a count per dim (fewer counts than dims repeat the trailing ones)."""
    repeats = op.repeats
    if not isinstance(repeats, int | list | tuple) or not all(
        isinstance(r, int) for r in ([repeats] if isinstance(repeats, int) else repeats)
    ):
        raise Unsupported("repeats that are not integers known when the model is built")
    reps = [repeats] if isinstance(repeats, int) else [int(r) for r in repeats]
    return ctx.op("tile", x, repeats=reps)


@converter("ops.TakeAlongAxis")
def take_along_axis_op(ctx: Ctx, op, x, indices):
    if op.axis is None:
        raise Unsupported("axis=None")
    return ctx.op("gather_elements", x, indices, axis=int(op.axis))


@converter("ops.OneHot")
def one_hot_op(ctx: Ctx, op, x):
    from msc.frontend.keras.importer import DTYPES

    if op.sparse:
        raise Unsupported("sparse=True")
    dt = DTYPES.get(str(op.dtype or "float32"))
    if dt is None:
        raise Unsupported(f"dtype {op.dtype}")
    return ctx.op("one_hot", x, depth=int(op.num_classes), axis=int(op.axis), dtype=dt)


def _ints(axis) -> list[int]:
    return [int(a) for a in (axis if isinstance(axis, list | tuple) else [axis])]


@converter("ops.Take")
def take_op(ctx: Ctx, op, x, indices):
    """``ops.take`` along one axis: a run of constant indices is a slice, any other a gather."""
    if op.axis is None:
        raise Unsupported("axis=None (a take from the flattened tensor)")
    axis = int(op.axis) % x.type.rank
    if isinstance(indices, Value):
        return ctx.op("gather", x, indices, axis=axis)
    idx = np.asarray(indices).astype(np.int64)
    if idx.ndim == 1 and idx.size and np.all(idx >= 0) and np.all(np.diff(idx) == 1):
        out = ctx.op("slice", x, starts=[int(idx[0])], ends=[int(idx[-1]) + 1], axes=[axis])
        shape = out.type.shape
        if shape is not None and not isinstance(shape[axis], int):
            # as many as it takes: a dim too short for them fails when the model runs
            # (a slice's type, not knowing the dim, leaves the size open)
            from msc.ir import TensorType

            out.type = TensorType(out.type.dtype, [*shape[:axis], idx.size, *shape[axis + 1 :]])
        return out
    from msc.ir import DType

    return ctx.op("gather", x, ctx.const(idx, DType.INT64), axis=axis)


def _sized_dim(ctx: Ctx, size, tensors: list[Value]) -> tuple[Value, object]:
    """One size of msc's Sized layer: its value (i64[1]) and its dim (an int, or the sum of
    products of the tensors' dims it names)."""
    from msc.ir import DType
    from msc.ir.symexpr import add, mul

    i64 = DType.INT64
    if isinstance(size, int):
        return ctx.const([size], i64), size
    value, dim = None, 0
    for c, axes in size:
        term, tdim = ctx.const([int(c)], i64), int(c)
        for i, axis in axes:
            t = tensors[int(i)]
            term = ctx.op("mul", term, ctx.op("shape", t, start=int(axis), end=int(axis) + 1))
            tdim = mul(tdim, t.type.shape[int(axis)])
        value = term if value is None else ctx.op("add", value, term)
        dim = add(dim, tdim)
    return value, dim


@converter("Sized")
def sized(ctx: Ctx, layer, x, *others):
    """codegen.keras' Sized layer (registered as msc>Sized): reshape, broadcast_to, slice,
    arange or a size, the sizes read from its tensors' shapes when the graph runs."""
    from msc.frontend.keras.importer import DTYPES
    from msc.ir import TensorType

    values, dims = zip(*(_sized_dim(ctx, s, [x, *others]) for s in layer.shape))
    op = layer.op
    if op in ("arange", "size"):
        dt = DTYPES[layer.value_dtype]
        scalars = [ctx.cast(ctx.op("squeeze", v, axes=[0]), dt) for v in values]
        if op == "size":
            return scalars[0]
        out = ctx.op("range", *scalars)
        step = dims[2]
        from msc.ir.symexpr import sub

        n = sub(dims[1], dims[0]) if step == 1 else None
        out.type = TensorType(dt, [n])
        return out
    if op == "slice":
        half = len(values) // 2
        # the axes it cuts: one from 0 to its whole size is no cut (a position table's
        # leading 1 of [1, 512] sliced to [1, seq_len])
        axes = [
            a
            for a in range(half)
            if not (layer.shape[a] == 0 and dims[half + a] == x.type.shape[a])
        ] or [0]
        starts = ctx.op("concat", *(values[a] for a in axes), axis=0)
        ends = ctx.op("add", starts, ctx.op("concat", *(values[half + a] for a in axes), axis=0))
        out = ctx.op("slice", x, starts, ends, axes=axes)
        out.type = TensorType(x.dtype, list(dims[half:]))
        return out
    shape = ctx.op("concat", *values, axis=0)
    out = ctx.op("expand" if op == "broadcast_to" else "reshape", x, shape)
    out.type = TensorType(x.dtype, list(dims))
    return out


@converter("ops.GetItem")
def get_item(ctx: Ctx, op, x, key):
    """``x[:, 1:]``, ``x[:, 0]``, ``x[..., None]``: Python slices of static bounds (steps > 0),
    ints (the axis dropped), None (an axis added) and one Ellipsis; a tensor index is refused."""
    key = list(key) if isinstance(key, tuple | list) else [key]  # a list as read from a file
    if any(k is not None and k is not Ellipsis and not isinstance(k, slice | int) for k in key):
        raise Unsupported("a tensor index (only slices, ints, None and Ellipsis)")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if key.count(Ellipsis) > 1 or used > x.type.rank:
        raise Unsupported(f"the index {tuple(key)} for a rank-{x.type.rank} tensor")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key[at : at + 1] = [slice(None)] * (x.type.rank - used)
    starts, ends, axes, steps, dropped, added = [], [], [], [], [], []
    axis = out = 0
    for k in key:
        if k is None:
            added.append(out)
            out += 1
            continue
        if isinstance(k, int):
            n = x.type.shape[axis]
            if isinstance(n, int) and not -n <= k < n:
                raise Unsupported(f"the index {k} for a dim of {n}")
            bounds = (k, (1 << 63) - 1 if k == -1 else k + 1, 1)
            dropped.append(axis)
        elif k == slice(None):
            axis, out = axis + 1, out + 1
            continue
        else:
            bounds = (k.start or 0, (1 << 63) - 1 if k.stop is None else k.stop, k.step or 1)
            if not all(isinstance(b, int) for b in bounds) or bounds[2] <= 0:
                raise Unsupported(f"the slice {k} (bounds not constant, or a step below 1)")
            out += 1
        starts.append(bounds[0])
        ends.append(bounds[1])
        axes.append(axis)
        steps.append(bounds[2])
        axis += 1
    y = ctx.op("slice", x, starts=starts, ends=ends, axes=axes, steps=steps) if axes else x
    if dropped:
        y = ctx.op("squeeze", y, axes=dropped)
    if added:
        y = ctx.op("unsqueeze", y, axes=added)
    return ctx.op("identity", x) if y is x else y
