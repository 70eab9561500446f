"""Relax converters of the shape family."""

from __future__ import annotations

import numpy as np

from msc.frontend.relax.importer import Ctx, ShapeValue, converter
from msc.ir.graph import Value, Weight
from msc.ir.types import SymDim, SymExpr


@converter("relax.permute_dims")
def permute_dims(ctx: Ctx, x, *, attrs):
    rank = len(x.type.shape)
    perm = list(range(rank))[::-1] if attrs.axes is None else [int(a) for a in attrs.axes]
    return ctx.op("transpose", x, perm=perm)


@converter("relax.reshape")
def reshape(ctx: Ctx, x, shape, *, attrs=None):
    dims = _dims(ctx, shape)
    sym = [i for i, d in enumerate(dims) if isinstance(d, SymDim | SymExpr)]
    if len(sym) > 1:  # the target computed at run time from where its dims come from
        return ctx.op("reshape", x, ctx.shape_value(dims))
    target = [-1 if i in sym else int(d) for i, d in enumerate(dims)]
    return ctx.op("reshape", x, None, shape=target)


def _dims(ctx: Ctx, shape) -> list:
    """A shape argument's dims: a ShapeExpr's, or those a match_cast named for a
    tensor_to_shape (ints and shape variables either way)."""
    ctx.require(not isinstance(shape, ShapeValue), "a shape read at run time and not named")
    return list(shape)


@converter("relax.expand_dims")
def expand_dims(ctx: Ctx, x, *, attrs):
    return ctx.op("unsqueeze", x, axes=[int(a) for a in attrs.axis])


@converter("relax.squeeze")
def squeeze(ctx: Ctx, x, *, attrs):
    axes = None if attrs.axis is None else [int(a) for a in attrs.axis]
    return ctx.op("squeeze", x, axes=axes)


@converter("relax.flatten")
def flatten(ctx: Ctx, x, *, attrs=None):
    return ctx.op("flatten", x)


@converter("relax.broadcast_to")
def broadcast_to(ctx: Ctx, x, shape, *, attrs=None):
    dims = _dims(ctx, shape)
    if not all(isinstance(d, int) for d in dims):
        return ctx.op("expand", x, ctx.shape_value(dims))
    return ctx.op("expand", x, None, shape=[int(d) for d in dims])


@converter("relax.concat")
def concat(ctx: Ctx, xs, *, attrs):
    return ctx.op("concat", *xs, axis=int(attrs.axis))


@converter("relax.split")
def split(ctx: Ctx, x, *, attrs):
    axis = int(attrs.axis)
    n = x.type.shape[axis]
    ctx.require(isinstance(n, int), "a split of a symbolic dim")
    ind = attrs.indices_or_sections
    if isinstance(ind, int) or hasattr(ind, "value"):
        k = int(ind)
        sizes = [n // k] * k
    else:
        cuts = [0] + [int(c) for c in ind] + [n]
        sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    return tuple(ctx.multi("split", x, axis=axis, sizes=sizes))


@converter("relax.strided_slice")
def strided_slice(ctx: Ctx, x, axes, begin, end, strides=None, *, attrs=None):
    def ints(v, what):
        ctx.require(all(isinstance(i, int) for i in v), f"a run-time or symbolic slice {what}")
        return [int(i) for i in v]

    axes = ints(axes, "axis")
    steps = ints(strides, "step") if strides is not None else [1] * len(axes)
    if all(isinstance(i, int) for i in [*begin, *end]):
        return ctx.op(
            "slice", x, starts=ints(begin, "start"), ends=ints(end, "end"), axes=axes, steps=steps
        )
    # starts or ends of shape variables: the run-time form, every list a tensor
    const = lambda v: ctx.op("constant", value=np.asarray(v, np.int64))  # noqa: E731
    return ctx.op("slice", x, ctx.shape_value(list(begin)), ctx.shape_value(list(end)),
                  const(axes), const(steps))  # fmt: skip


@converter("relax.dynamic_strided_slice")
def dynamic_strided_slice(ctx: Ctx, x, begin, end, strides, *, attrs=None):
    rank = x.type.rank
    ctx.require(rank is not None, "a slice of a tensor of unknown rank")
    axes = ctx.op("constant", value=np.arange(rank, dtype=np.int64))
    return ctx.op("slice", x, begin, end, axes, strides)


@converter("relax.take")
def take(ctx: Ctx, x, indices, *, attrs):
    axis = attrs.axis
    if axis is None:  # from the flattened tensor
        x, axis = ctx.op("reshape", x, None, shape=[-1]), 0
    axis = int(axis)
    mode = str(attrs.mode)
    if mode == "wrap":  # the same as "fast" for constant indices already in range
        arr = _known(indices)
        n = x.type.shape[axis] if x.type.shape is not None else None
        ctx.require(
            arr is not None and isinstance(n, int) and bool(((arr >= 0) & (arr < n)).all()),
            "take mode wrap with indices that may be out of range",
        )
    elif mode == "clip":  # indices clamped into the dim (codegen.relax reads dims this way)
        n = x.type.shape[axis] if x.type.shape is not None else None
        if n is None:  # msc's inference left it open: Relax's name for it
            shape = ctx.arg_type(0).shape
            n = shape[axis] if shape is not None else None
        ctx.require(n is not None, "take mode clip along a dim of unknown size")
        arr = _known(indices)
        if not isinstance(n, int) or arr is None or not bool(((arr >= 0) & (arr < n)).all()):
            dt = indices.type.dtype
            last = (
                ctx.scalar(n - 1, dt)
                if isinstance(n, int)
                else ctx.op("sub", ctx.op("cast", ctx.dim_scalar(n), to=dt), ctx.scalar(1, dt))
            )
            indices = ctx.op("clamp", indices, ctx.scalar(0, dt), last)
    else:
        ctx.require(mode == "fast", f"take mode {mode}")
    return ctx.op("gather", x, indices, axis=axis)


def _known(v) -> np.ndarray | None:
    """The data of a bound constant (a constant weight, or a constant node), else None."""
    if isinstance(v, Weight):
        return v.numpy() if v.has_data and v.role == "constant" else None
    node = getattr(v, "producer", None)
    return np.asarray(node.attrs["value"]) if node is not None and node.op == "constant" else None


@converter("relax.tril")
def tril(ctx: Ctx, x, k=0, *, attrs=None):
    return ctx.op("trilu", x, upper=False, k=int(k))


@converter("relax.triu")
def triu(ctx: Ctx, x, k=0, *, attrs=None):
    return ctx.op("trilu", x, upper=True, k=int(k))


@converter("relax.tile")
def tile(ctx: Ctx, x, *, attrs):
    return ctx.op("tile", x, repeats=[int(r) for r in attrs.repeats])


@converter("relax.flip")
def flip(ctx: Ctx, x, *, attrs):
    return ctx.op("flip", x, axes=[int(attrs.axis)])


def _full(ctx: Ctx, shape, value: float) -> Value:
    t = ctx.out_type()
    if t.is_static:
        return ctx.op("full", None, shape=list(t.shape), value=value, dtype=t.dtype)
    return ctx.op("full", ctx.shape_value(_dims(ctx, shape)), value=value, dtype=t.dtype)


@converter("relax.zeros")
def zeros(ctx: Ctx, shape, *, attrs):
    return _full(ctx, shape, 0.0)


@converter("relax.ones")
def ones(ctx: Ctx, shape, *, attrs):
    return _full(ctx, shape, 1.0)


@converter("relax.full_like")
def full_like(ctx: Ctx, x, value, *, attrs):
    v = value.producer.attrs["value"] if value.producer is not None else None
    ctx.require(v is not None, "full_like with a run-time value")
    return ctx.op("full_like", x, value=float(np.asarray(v)), dtype=ctx.out_type().dtype)


def _const_value(ctx: Ctx, v, what: str) -> float:
    node = getattr(v, "producer", None)
    ctx.require(node is not None and node.op == "constant", f"{what} computed at run time")
    return float(np.asarray(node.attrs["value"]))


@converter("relax.zeros_like")
def zeros_like(ctx: Ctx, x, *, attrs):
    return ctx.op("full_like", x, value=0.0, dtype=ctx.out_type().dtype)


@converter("relax.ones_like")
def ones_like(ctx: Ctx, x, *, attrs):
    return ctx.op("full_like", x, value=1.0, dtype=ctx.out_type().dtype)


@converter("relax.full")
def full(ctx: Ctx, shape, value, *, attrs):
    return _full(ctx, shape, _const_value(ctx, value, "the fill value"))


@converter("relax.arange")
def arange(ctx: Ctx, start, end, step, *, attrs):
    dt = ctx.out_type().dtype
    if all(isinstance(v, int | float) for v in (start, end, step)):
        return ctx.op("arange", start=float(start), end=float(end), step=float(step), dtype=dt)
    # a limit (or start, step) of shape variables: ONNX's Range of 0-d tensors
    ends = [
        ctx.scalar(v, dt)
        if isinstance(v, int | float)
        else ctx.op("cast", ctx.dim_scalar(v), to=dt)
        for v in (start, end, step)
    ]
    return ctx.op("range", *ends)


@converter("relax.gather_elements")
def gather_elements(ctx: Ctx, x, indices, *, attrs):
    return ctx.op("gather_elements", x, indices, axis=int(attrs.axis))


@converter("relax.index_tensor")
def index_tensor(ctx: Ctx, x, indices, *, attrs=None):
    return ctx.op("index", x, *indices, axes=list(range(len(indices))))


class ShapeOf(list):
    """``R.shape_of(x)``: its dims (what a reshape or broadcast_to reads), remembering ``x`` for
    a ``shape_to_tensor`` of it."""

    def __init__(self, x) -> None:
        super().__init__(x.type.shape)
        self.of = x


@converter("relax.shape_of")
def shape_of(ctx: Ctx, x, *, attrs=None):
    ctx.require(x.type.shape is not None, "the shape of a tensor of unknown rank")
    return ShapeOf(x)


@converter("relax.shape_to_tensor")
def shape_to_tensor(ctx: Ctx, shape, *, attrs=None):
    if isinstance(shape, ShapeOf):
        return ctx.op("shape", shape.of)
    if isinstance(shape, ShapeValue):
        return shape.tensor
    if not all(isinstance(d, int) for d in shape):
        return ctx.shape_value(list(shape))
    return ctx.op("constant", value=np.asarray(shape, dtype=np.int64))


@converter("relax.tensor_to_shape")
def tensor_to_shape(ctx: Ctx, t, *, attrs=None):
    ctx.require(t.type.rank == 1, "a shape from a tensor that is not 1-d")
    return ShapeValue(t)


# nn.pad's modes by the names msc's pad takes (ONNX Pad's).
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@converter("relax.nn.pad")
def pad(ctx: Ctx, x, *, attrs):
    mode = _PAD_MODES.get(str(attrs.pad_mode))
    ctx.require(mode is not None, f"pad mode {attrs.pad_mode}")
    width = [int(w) for w in attrs.pad_width]
    pads = width[0::2] + width[1::2]  # [before..., after...]
    return ctx.op("pad", x, None, None, pads=pads, mode=mode, value=float(attrs.pad_value))


@converter("relax.one_hot")
def one_hot(ctx: Ctx, indices, on, off, *, attrs):
    ctx.require((on, off) == (1, 0), f"one_hot with on/off values {on}/{off} (msc's are 1/0)")
    dtype = ctx.out_type().dtype
    return ctx.op("one_hot", indices, None, depth=int(attrs.depth), axis=int(attrs.axis),
                  dtype=dtype)  # fmt: skip


@converter("relax.gather_nd")
def gather_nd(ctx: Ctx, x, indices, *, attrs):
    return ctx.op("gather_nd", x, indices, batch_dims=int(attrs.batch_dims))


# Relax's reductions by the names msc's scatters take.
_REDUCTION = {"update": "none", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@converter("relax.scatter_elements")
def scatter_elements(ctx: Ctx, x, indices, updates, *, attrs):
    red = _REDUCTION.get(str(attrs.reduction))
    ctx.require(red is not None, f"scatter_elements reduction {attrs.reduction}")
    # Relax's scatter_elements counts a negative index from the end, as msc's does when told.
    return ctx.op("scatter_elements", x, indices, updates, axis=int(attrs.axis), reduction=red,
                  negative_indices=True)  # fmt: skip


@converter("relax.scatter_nd")
def scatter_nd(ctx: Ctx, x, indices, updates, *, attrs):
    red = _REDUCTION.get(str(attrs.reduction))
    ctx.require(red is not None, f"scatter_nd reduction {attrs.reduction}")
    return ctx.op("scatter_nd", x, indices, updates, reduction=red)


@converter("relax.index_put")
def index_put(ctx: Ctx, x, indices, values, *, attrs):
    # One index tensor per leading dim of x, broadcast together: torch's x[i, j, ...] = v.
    return ctx.op("index_put", x, values, *indices, axes=list(range(len(indices))),
                  accumulate=bool(attrs.accumulate))  # fmt: skip


@converter("relax.nonzero")
def nonzero(ctx: Ctx, x, *, attrs=None):
    # Relax's nonzero is [rank, count] (ONNX's); msc's is [count, rank] (torch's).
    return ctx.op("transpose", ctx.op("nonzero", x), perm=[1, 0])


@converter("relax.repeat")
def repeat(ctx: Ctx, x, *, attrs):
    # Each element repeated r times in a row along an axis: a new axis after it, expanded to
    # r, merged back.
    shape = x.type.shape
    ctx.require(attrs.axis is not None, "repeat of the flattened tensor")
    ctx.require(shape is not None and all(isinstance(d, int) for d in shape),
                "repeat of symbolic dims")  # fmt: skip
    r, a = int(attrs.repeats), int(attrs.axis) % len(shape)
    y = ctx.op("unsqueeze", x, axes=[a + 1])
    y = ctx.op("expand", y, None, shape=[*shape[: a + 1], r, *shape[a + 1 :]])
    return ctx.op("reshape", y, None, shape=[*shape[:a], shape[a] * r, *shape[a + 1 :]])


@converter("relax.stack")
def stack(ctx: Ctx, xs, *, attrs):
    axis = 0 if attrs.axis is None else int(attrs.axis)
    rank = len(ctx.out_type().shape or ())
    ctx.require(rank > 0, "stack of values of unknown rank")
    return ctx.op("concat", *(ctx.op("unsqueeze", x, axes=[axis % rank]) for x in xs), axis=axis)
