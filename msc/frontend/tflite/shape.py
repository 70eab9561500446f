"""TFLite shape ops: reshape, transpose, concatenation, slicing, padding, packing, splitting,
gather and scatter, tiling and broadcasting, depth <-> space."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.tflite.importer import Ctx, is_complex
from msc.frontend.tflite.nn import nchw, nhwc
from msc.frontend.tflite.registry import converter, not_read
from msc.ir import DType

BIG = 1 << 62  # a slice end past any dim (msc's slice clamps, as Python does)


def _ints(ctx: Ctx, t, what: str) -> list[int]:
    return [int(v) for v in np.asarray(ctx.array(t, what)).reshape(-1)]


def _axis(ctx: Ctx, t, what: str) -> int:
    vals = _ints(ctx, t, what)
    if len(vals) != 1:
        raise Unsupported(f"{what} of {len(vals)} values")
    return vals[0]


@converter("RESHAPE")
def reshape(ctx: Ctx, x, shape=None, *, new_shape=None):
    xv = ctx.moved(x)
    if shape is not None and ctx.is_const(shape):
        target = _ints(ctx, shape, "the shape")
    elif shape is not None:
        s = ctx.op("cast", ctx.value(shape), to=DType.INT64)
        return ctx.op("reshape", xv, s)
    elif new_shape:
        target = [int(d) for d in new_shape]
    else:
        target = [int(d) for d in ctx.out(0).shape]
    return ctx.op("reshape", xv, shape=target)


@converter("TRANSPOSE")
def transpose(ctx: Ctx, x, perm):
    return ctx.op("transpose", ctx.value(x), perm=_ints(ctx, perm, "the permutation"))


@converter("CONCATENATION")
def concatenation(ctx: Ctx, *xs, axis=0):
    return ctx.op("concat", *[ctx.value(x) for x in xs], axis=int(axis))


@converter("SQUEEZE")
def squeeze(ctx: Ctx, x, *, squeeze_dims=()):
    xv = ctx.moved(x)
    axes = [int(a) for a in squeeze_dims or ()]
    if is_complex(x):  # msc's real layout: the axes count the complex dims only
        axes = [a + xv.type.rank - 1 if a < 0 else a for a in axes]
        if not axes:
            raise Unsupported("SQUEEZE of every size-1 dim of a complex tensor")
    if not axes:
        if xv.type.shape is None or not all(isinstance(d, int) for d in xv.type.shape):
            raise Unsupported("SQUEEZE of every size-1 dim needs a static shape")
        axes = [i for i, d in enumerate(xv.type.shape) if d == 1]
    return ctx.op("squeeze", xv, axes=axes)


@converter("EXPAND_DIMS")
def expand_dims(ctx: Ctx, x, axis):
    xv = ctx.moved(x)
    a = _axis(ctx, axis, "the axis")
    if a < 0:
        a += xv.type.rank + 1
    return ctx.op("unsqueeze", xv, axes=[a])


@converter("PACK")
def pack(ctx: Ctx, *xs, values_count=0, axis=0):
    vals = [ctx.value(x) for x in xs]
    a = int(axis)
    if a < 0:
        a += vals[0].type.rank + 1
    return ctx.op("concat", *[ctx.op("unsqueeze", v, axes=[a]) for v in vals], axis=a)


@converter("UNPACK")
def unpack(ctx: Ctx, x, *, num=0, axis=0):
    xv = ctx.value(x)
    n = len(ctx.operator.outputs)
    parts = ctx.multi("split", xv, axis=int(axis), sizes=[1] * n)
    return [ctx.op("squeeze", p, axes=[int(axis)]) for p in parts]


@converter("SPLIT")
def split(ctx: Ctx, axis, x, *, num_splits=0):
    xv = ctx.value(x)
    n = len(ctx.operator.outputs)
    a = _axis(ctx, axis, "the axis")
    d = xv.type.shape[a] if xv.type.shape is not None else None
    if not isinstance(d, int):  # even parts of a size known at run time (LiteRT checks it)
        return list(ctx.multi("split", xv, axis=a, num_outputs=n))
    if d % n:
        raise Unsupported(f"SPLIT of a dim of {d} into {n}")
    return list(ctx.multi("split", xv, axis=a, sizes=[d // n] * n))


@converter("SPLIT_V")
def split_v(ctx: Ctx, x, size_splits, axis, *, num_splits=0):
    xv = ctx.value(x)
    sizes = _ints(ctx, size_splits, "the sizes")
    a = _axis(ctx, axis, "the axis")
    if -1 in sizes:
        d = xv.type.shape[a] if xv.type.shape is not None else None
        if not isinstance(d, int):
            raise Unsupported("SPLIT_V with an inferred size needs a static dim")
        sizes[sizes.index(-1)] = d - (sum(sizes) + 1)
    return list(ctx.multi("split", xv, axis=a, sizes=sizes))


@converter("SLICE")
def slice_(ctx: Ctx, x, begin, size):
    xv = ctx.value(x)
    starts = _ints(ctx, begin, "the begins")
    sizes = _ints(ctx, size, "the sizes")
    ends = [BIG if n == -1 else s + n for s, n in zip(starts, sizes)]
    return ctx.op("slice", xv, starts=starts, ends=ends, axes=list(range(len(starts))))


@converter("STRIDED_SLICE")
def strided_slice(
    ctx: Ctx,
    x,
    begin,
    end,
    strides=None,
    *,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
    offset=False,
):
    xv = ctx.value(x)
    if not (ctx.is_const(begin) and ctx.is_const(end)):
        return _runtime_strided_slice(
            ctx,
            xv,
            begin,
            end,
            strides,
            begin_mask,
            end_mask,
            ellipsis_mask | new_axis_mask,
            shrink_axis_mask,
            offset,
        )
    b = _ints(ctx, begin, "the begins")
    e = _ints(ctx, end, "the ends")
    s = _ints(ctx, strides, "the strides") if strides is not None else [1] * len(b)
    if not len(b) == len(e) == len(s):
        raise Unsupported("begins, ends and strides of different lengths")
    rank = xv.type.rank
    n_new = bin(new_axis_mask & ((1 << len(b)) - 1)).count("1")
    starts, ends, steps, axes, shrink, new_at = [], [], [], [], [], []
    dim = 0  # the input dim the next spec entry reads
    out = 0  # the output dim it writes (before shrinking)
    for j in range(len(b)):
        bit = 1 << j
        if ellipsis_mask & bit:
            span = rank - (len(b) - 1 - n_new)
            dim += span
            out += span
            continue
        if new_axis_mask & bit:
            new_at.append(out)
            out += 1
            continue
        if dim >= rank:
            raise Unsupported(f"a slice spec of {len(b)} entries for rank {rank}")
        st, en, sp = b[j], e[j], s[j]
        if sp == 0:
            raise Unsupported("a stride of 0")
        if offset:
            en = st + en
        if shrink_axis_mask & bit:
            en = st + 1 if st != -1 else BIG
            sp = 1
        else:
            if begin_mask & bit:
                st = 0 if sp > 0 else -1
            if end_mask & bit:
                en = BIG if sp > 0 else -BIG
        starts.append(st)
        ends.append(en)
        steps.append(sp)
        axes.append(dim)
        if shrink_axis_mask & bit:
            shrink.append(dim)
        else:
            out += 1
        dim += 1
    y = ctx.op("slice", xv, starts=starts, ends=ends, axes=axes, steps=steps)
    if shrink:
        y = ctx.op("squeeze", y, axes=shrink)
    if new_at:
        y = ctx.op("unsqueeze", y, axes=new_at)
    return y


def _runtime_strided_slice(
    ctx, xv, begin, end, strides, begin_mask, end_mask, other, shrink, offset
):
    """STRIDED_SLICE whose begins or ends are computed at run time (tf.signal.frame's, from
    a SHAPE): a slice with run-time bounds on the first len(begin) axes, the masked entries
    replaced by their full-range values. Strides must be constants; ellipsis, new and shrunk
    axes and offset bounds need the values and are not read."""
    s = _ints(ctx, strides, "the strides") if strides is not None else None
    if s is None:
        n = ctx.value(begin).type.shape[0] if ctx.value(begin).type.shape else None
        if not isinstance(n, int):
            raise Unsupported("run-time bounds of unknown length")
        s = [1] * n
    n = len(s)
    if other or shrink or offset:
        raise Unsupported("run-time bounds with ellipsis, new, shrunk axes or offset bounds")
    if 0 in s:
        raise Unsupported("a stride of 0")

    def bound(t, mask: int, full: list[int]):
        v = ctx.op("cast", ctx.value(t), to=DType.INT64)
        if mask & ((1 << n) - 1):
            bits = np.array([bool(mask >> j & 1) for j in range(n)])
            v = ctx.op("where", ctx.const(bits, DType.BOOL), ctx.const(full, DType.INT64), v)
        return v

    starts = bound(begin, begin_mask, [0 if d > 0 else -1 for d in s])
    ends = bound(end, end_mask, [BIG if d > 0 else -BIG for d in s])
    return ctx.op("slice", xv, starts, ends, axes=list(range(n)), steps=s)


def _pads(ctx: Ctx, paddings) -> list[int]:
    p = np.asarray(ctx.array(paddings, "the paddings"))
    if p.ndim != 2 or p.shape[1] != 2:
        raise Unsupported(f"paddings of shape {list(p.shape)}")
    return [int(v) for v in p[:, 0]] + [int(v) for v in p[:, 1]]


def _runtime_pads(ctx: Ctx, paddings):
    """TFLite's run-time [rank, 2] paddings as msc's 1-d [begins..., ends...] (i64)."""
    p = ctx.op("transpose", ctx.value(paddings), perm=[1, 0])
    return ctx.op("cast", ctx.op("reshape", p, shape=[-1]), to=DType.INT64)


@converter("PAD")
def pad(ctx: Ctx, x, paddings):
    if not ctx.is_const(paddings):
        zero = ctx.const(np.zeros((), ctx.value(x).dtype.to_numpy()), ctx.value(x).dtype)
        return ctx.op("pad", ctx.value(x), _runtime_pads(ctx, paddings), zero, mode="constant")
    return ctx.op("pad", ctx.value(x), pads=_pads(ctx, paddings), mode="constant", value=0.0)


@converter("PADV2")
def padv2(ctx: Ctx, x, paddings, constant_values=None):
    xv = ctx.value(x)
    if not ctx.is_const(paddings):
        fill = (
            ctx.op("reshape", ctx.value(constant_values), shape=[])
            if constant_values is not None
            else ctx.const(np.zeros((), xv.dtype.to_numpy()), xv.dtype)
        )
        return ctx.op("pad", xv, _runtime_pads(ctx, paddings), fill, mode="constant")
    pads = _pads(ctx, paddings)
    if constant_values is None:
        return ctx.op("pad", xv, pads=pads, mode="constant", value=0.0)
    if ctx.is_const(constant_values) and constant_values.quant is None:
        value = float(np.asarray(ctx.array(constant_values)).reshape(-1)[0])
        return ctx.op("pad", xv, pads=pads, mode="constant", value=value)
    fill = ctx.op("reshape", ctx.value(constant_values), shape=[])
    return ctx.op("pad", xv, None, fill, pads=pads, mode="constant")


@converter("MIRROR_PAD")
def mirror_pad(ctx: Ctx, x, paddings, *, mode=0):
    if mode != 0:
        raise Unsupported("SYMMETRIC mirror padding (the edge repeated) has no canonical mode")
    return ctx.op("pad", ctx.value(x), pads=_pads(ctx, paddings), mode="reflect")


@converter("GATHER")
def gather(ctx: Ctx, x, indices, *, axis=0, batch_dims=0):
    if batch_dims:
        raise Unsupported(f"GATHER with batch_dims={batch_dims}")
    return ctx.op("gather", ctx.value(x), ctx.value(indices), axis=int(axis))


@converter("GATHER_ND")
def gather_nd(ctx: Ctx, x, indices):
    idx = ctx.op("cast", ctx.value(indices), to=DType.INT64)
    return ctx.op("gather_nd", ctx.value(x), idx)


@converter("SCATTER_ND")
def scatter_nd(ctx: Ctx, indices, updates, shape):
    dims = _ints(ctx, shape, "the shape")
    u = ctx.value(updates)
    zeros = ctx.op("full", shape=dims, value=0.0, dtype=u.dtype)
    idx = ctx.op("cast", ctx.value(indices), to=DType.INT64)
    return ctx.op("scatter_nd", zeros, idx, u, reduction="add")


@converter("TILE")
def tile(ctx: Ctx, x, multiples):
    return ctx.op("tile", ctx.value(x), repeats=_ints(ctx, multiples, "the multiples"))


@converter("BROADCAST_TO")
def broadcast_to(ctx: Ctx, x, shape):
    if not ctx.is_const(shape):  # a shape computed at run time (symbolic sizes)
        return ctx.op("expand", ctx.value(x), ctx.op("cast", ctx.value(shape), to=DType.INT64))
    return ctx.op("expand", ctx.value(x), shape=_ints(ctx, shape, "the shape"))


@converter("SHAPE")
def shape(ctx: Ctx, x, *, out_type=2):
    return ctx.as_out(ctx.op("shape", ctx.raw(x)))


@converter("RANK")
def rank(ctx: Ctx, x):
    return ctx.const(np.int32(ctx.raw(x).type.rank), DType.INT32)


@converter("FILL")
def fill(ctx: Ctx, dims, value):
    v = ctx.value(value)
    if ctx.is_const(dims):
        target = _ints(ctx, dims, "the dims")
        if ctx.is_const(value) and value.quant is None and v.dtype.is_floating | v.dtype.is_integer:
            x = float(np.asarray(ctx.array(value)).reshape(-1)[0])
            return ctx.op("full", shape=target, value=x, dtype=v.dtype)
        return ctx.op("expand", ctx.op("reshape", v, shape=[]), shape=target)
    d = ctx.op("cast", ctx.value(dims), to=DType.INT64)
    return ctx.op("expand", ctx.op("reshape", v, shape=[]), d)


@converter("RANGE")
def range_(ctx: Ctx, start, limit, delta):
    return ctx.op("range", ctx.value(start), ctx.value(limit), ctx.value(delta))


@converter("REVERSE_V2")
def reverse_v2(ctx: Ctx, x, axis):
    return ctx.op("flip", ctx.value(x), axes=_ints(ctx, axis, "the axes"))


@converter("DEPTH_TO_SPACE")
def depth_to_space(ctx: Ctx, x, *, block_size=1):
    y = ctx.op("depth_to_space", nchw(ctx, ctx.value(x)), blocksize=int(block_size), mode="DCR")
    return nhwc(ctx, y)


@converter("SPACE_TO_DEPTH")
def space_to_depth(ctx: Ctx, x, *, block_size=1):
    y = ctx.op("space_to_depth", nchw(ctx, ctx.value(x)), blocksize=int(block_size))
    return nhwc(ctx, y)


@converter("ONE_HOT")
def one_hot(ctx: Ctx, indices, depth, on_value, off_value, *, axis=-1):
    d = _axis(ctx, depth, "the depth")
    on, off = ctx.value(on_value), ctx.value(off_value)
    if all(ctx.is_const(t) and t.quant is None for t in (on_value, off_value)):
        a, b = np.asarray(ctx.array(on_value)), np.asarray(ctx.array(off_value))
        if a.size == 1 and b.size == 1 and a.reshape(-1)[0] == 1 and b.reshape(-1)[0] == 0:
            # ones and zeros: the one-hot tensor itself, in their dtype
            return ctx.op("one_hot", ctx.value(indices), depth=d, axis=int(axis), dtype=on.dtype)
    hot = ctx.op("one_hot", ctx.value(indices), depth=d, axis=int(axis), dtype=DType.BOOL)
    return ctx.op("where", hot, on, off)


@converter("WHERE")
def where(ctx: Ctx, cond, x=None, y=None):
    if x is not None or y is not None:
        return ctx.op("where", ctx.value(cond), ctx.value(x), ctx.value(y))
    idx = ctx.op("nonzero", ctx.value(cond))  # [rank, n]
    return ctx.op("transpose", idx, perm=[1, 0])


not_read(
    "space <-> batch rearrangements (TF 1's dilated convolutions) are not read yet",
    "SPACE_TO_BATCH_ND",
    "BATCH_TO_SPACE_ND",
)
not_read(
    "segment and sparse ops have no canonical op",
    "SEGMENT_SUM",
    "UNSORTED_SEGMENT_PROD",
    "UNSORTED_SEGMENT_MAX",
    "UNSORTED_SEGMENT_MIN",
    "UNSORTED_SEGMENT_SUM",
    "SPARSE_TO_DENSE",
)
not_read("diagonal matrices have no canonical op", "MATRIX_DIAG", "MATRIX_SET_DIAG")
