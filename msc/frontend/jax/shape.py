"""StableHLO shape ops: reshape (static and dynamic), transpose, broadcast_in_dim, slice,
concatenate, pad, reverse, iota."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter
from msc.ir import DType


def _static(shape, what: str) -> list[int]:
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise Unsupported(f"{what} to a shape msc does not know statically ({shape})")
    return list(shape)


@converter("stablehlo.reshape")
def reshape(ctx: Ctx, sop: ShloOp, x):
    shape = ctx.out_type().shape
    if shape is not None and sum(not isinstance(d, int) for d in shape) == 1:
        shape = [d if isinstance(d, int) else -1 for d in shape]  # one run-time size
    return ctx.op("reshape", x, shape=_static(shape, "reshape"))


@converter("stablehlo.dynamic_reshape")
def dynamic_reshape(ctx: Ctx, sop: ShloOp, x, shape):
    """A reshape to a run-time shape (what jax.export writes under symbolic dims): the static
    form when the result has at most one run-time size, else the shape operand itself."""
    out = ctx.out_type().shape
    if out is not None and sum(not isinstance(d, int) for d in out) <= 1:
        return ctx.op("reshape", x, shape=[d if isinstance(d, int) else -1 for d in out])
    return ctx.op("reshape", x, ctx.cast(shape, DType.INT64))


@converter("stablehlo.get_dimension_size")
def get_dimension_size(ctx: Ctx, sop: ShloOp, x):
    d = sop.attr("dimension")
    size = ctx.op("shape", x, start=d, end=d + 1)
    return ctx.cast(ctx.op("reshape", size, shape=[]), ctx.out_type().dtype)


@converter("stablehlo.dynamic_broadcast_in_dim")
def dynamic_broadcast_in_dim(ctx: Ctx, sop: ShloOp, x, shape):
    """A broadcast to a run-time shape: size-1 dims put in, then an expand to the sizes the op
    states (a run-time size that is the input's own stays symbolic, -1 in the expand)."""
    dims = list(sop.attr("broadcast_dimensions"))
    out = ctx.out_type().shape
    rank = len(out)
    if dims != sorted(dims):
        raise Unsupported("a dynamic broadcast that permutes dims")
    missing = [a for a in range(rank) if a not in dims]
    if missing:
        x = ctx.op("unsqueeze", x, axes=missing)
    target: list[int] = []
    for a in range(rank):
        have = x.type.shape[a]
        if isinstance(out[a], int):
            target.append(out[a])
        elif a in dims and not isinstance(have, int) and have is not None:
            target.append(-1)
        else:  # the size comes from the run-time shape operand
            return ctx.op("expand", x, ctx.cast(shape, DType.INT64))
    if list(x.type.shape) == target:
        return ctx.op("identity", x)
    return ctx.op("expand", x, shape=target)


@converter("stablehlo.transpose")
def transpose(ctx: Ctx, sop: ShloOp, x):
    return ctx.op("transpose", x, perm=sop.attr("permutation"))


def broadcast(ctx: Ctx, x, dims: list[int], out_shape: list[int]):
    """``x`` with its axis i at output axis dims[i], broadcast to ``out_shape``."""
    if dims != sorted(dims):
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        x = ctx.op("transpose", x, perm=order)
        dims = sorted(dims)
    in_shape = list(x.type.shape)
    if len(in_shape) != len(out_shape):
        shape = [1] * len(out_shape)
        for i, d in enumerate(dims):
            shape[d] = in_shape[i]
        if in_shape:
            x = ctx.op("reshape", x, shape=shape)
        else:
            x = ctx.op("reshape", x, shape=[1] * len(out_shape)) if out_shape else x
        in_shape = shape
    if in_shape != out_shape:
        x = ctx.op("expand", x, shape=out_shape)
    return x


@converter("stablehlo.broadcast_in_dim")
def broadcast_in_dim(ctx: Ctx, sop: ShloOp, x):
    out = _static(ctx.out_type().shape, "broadcast_in_dim")
    y = broadcast(ctx, x, list(sop.attr("broadcast_dimensions")), out)
    return y if y is not x else ctx.op("identity", x)


@converter("stablehlo.slice")
def slice_(ctx: Ctx, sop: ShloOp, x):
    starts = sop.attr("start_indices")
    ends = sop.attr("limit_indices")
    steps = sop.attr("strides")
    return ctx.op("slice", x, starts=starts, ends=ends, axes=list(range(len(starts))), steps=steps)


@converter("stablehlo.concatenate")
def concatenate(ctx: Ctx, sop: ShloOp, *xs):
    return ctx.op("concat", *xs, axis=sop.attr("dimension"))


@converter("stablehlo.pad")
def pad(ctx: Ctx, sop: ShloOp, x, value):
    lo, hi = sop.attr("edge_padding_low"), sop.attr("edge_padding_high")
    if any(sop.attr("interior_padding")):
        raise Unsupported("interior padding")
    return ctx.op("pad", x, None, value, pads=lo + hi, mode="constant")


@converter("stablehlo.reverse")
def reverse(ctx: Ctx, sop: ShloOp, x):
    return ctx.op("flip", x, axes=sop.attr("dimensions"))


@converter("stablehlo.iota")
def iota(ctx: Ctx, sop: ShloOp):
    out = ctx.out_type()
    shape = _static(out.shape, "iota")
    axis = sop.attr("iota_dimension")
    dt = out.dtype
    n = shape[axis]
    r = ctx.op("arange", start=0.0, end=float(n), step=1.0, dtype=DType.INT64)
    if dt is not DType.INT64:
        r = ctx.op("cast", r, to=dt)
    y = broadcast(ctx, r, [axis], shape)
    return y
