"""Decompositions of data-movement ops into slices, concatenations and masks.

# NOTE: these rules need the static size of the dims they move along (gather_nd: only its
# index depth) and raise ``NotDecomposable`` otherwise.
"""

from __future__ import annotations

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Value
from msc.ops.decompose import Builder, NotDecomposable, registry
from msc.ops.decompose.nn import _rank, _static, _target

INT64_MIN = -(2**63)


@registry("flip")
def flip(b: Builder, x: Value, *, axes) -> Value:
    """A slice with step -1 along each axis."""
    n = len(axes)
    return b.op("slice", x, starts=[-1] * n, ends=[INT64_MIN] * n, axes=list(axes), steps=[-1] * n)


@registry("roll")
def roll(b: Builder, x: Value, *, shifts, axes) -> Value:
    """Per axis: concat(x[n - s:], x[:n - s]) with s = shift mod n."""
    r = _rank(x, "roll")
    if not axes:  # torch: roll the flattened tensor
        total = 1
        for d in x.shape:
            total *= _static(d, "roll")
        flat = b.op("reshape", x, shape=[total])
        rolled = roll(b, flat, shifts=shifts, axes=[0])
        return b.op("reshape", rolled, shape=[_static(d, "roll") for d in x.shape])
    y = x
    for s, a in zip(shifts, axes):
        a %= r
        n = _static(x.shape[a], "roll")
        s = s % n if n else 0
        if s == 0:
            continue
        tail = b.op("slice", y, starts=[n - s], ends=[n], axes=[a])
        head = b.op("slice", y, starts=[0], ends=[n - s], axes=[a])
        y = b.op("concat", tail, head, axis=a)
    return y if y is not x else b.op("identity", x)


@registry("trilu")
def trilu(b: Builder, x: Value, k_in: Value | None = None, *, upper: bool, k: int) -> Value:
    """where(mask, x, 0) with a constant triangular mask over the last two dims."""
    if k_in is not None:
        raise NotDecomposable("trilu: k is only known at run time")
    r = _rank(x, "trilu")
    if r < 2:
        raise NotDecomposable("trilu: input must have rank >= 2")
    m, n = _static(x.shape[-2], "trilu"), _static(x.shape[-1], "trilu")
    ones = np.ones((m, n), dtype=bool)
    mask = np.triu(ones, k) if upper else np.tril(ones, k)
    zero = b.const(np.zeros((), x.dtype.to_numpy()), x.dtype)
    return b.op("where", b.const(mask, DType.BOOL), x, zero)


@registry("cumprod")
def cumprod(
    b: Builder, x: Value, axis_in: Value | None = None, *, axis: int, exclusive=False, reverse=False
) -> Value:
    """A running product unrolled over the (static, at most 1024) length of axis."""
    if axis_in is not None:
        raise NotDecomposable("cumprod: the axis is only known at run time")
    if exclusive or reverse:
        raise NotDecomposable("cumprod: exclusive / reverse (made by run-time axes only)")
    r = _rank(x, "cumprod")
    a = axis % r
    n = _static(x.shape[a], "cumprod")
    if n > 1024:
        raise NotDecomposable(f"cumprod: axis of length {n} is too long to unroll")
    if n <= 1:
        return b.op("identity", x)
    parts = [b.op("slice", x, starts=[0], ends=[1], axes=[a])]
    for i in range(1, n):
        cur = b.op("slice", x, starts=[i], ends=[i + 1], axes=[a])
        parts.append(b.op("mul", parts[-1], cur))
    return b.op("concat", *parts, axis=a)


@registry("pixel_shuffle")
def pixel_shuffle(b: Builder, x: Value, *, upscale_factor: int) -> Value:
    """[*, C r^2, H, W] -> [*, C, r, r, H, W] -> [*, C, H, r, W, r] -> [*, C, H r, W r]."""
    r_ = upscale_factor
    rank = _rank(x, "pixel_shuffle")
    lead = list(x.shape[:-3])
    c, h, w = (_static(d, "pixel_shuffle") for d in x.shape[-3:])
    t = b.op("reshape", x, shape=_target([*lead, c // (r_ * r_), r_, r_, h, w], "pixel_shuffle"))
    p = len(lead)
    t = b.op("transpose", t, perm=[*range(p), p, p + 3, p + 1, p + 4, p + 2])
    del rank
    return b.op("reshape", t, shape=_target([*lead, c // (r_ * r_), h * r_, w * r_], "ps"))


@registry("gather_nd")
def gather_nd(b: Builder, x: Value, indices: Value, *, batch_dims: int) -> Value:
    """Advanced indexing: ``index(x, r_0, ..., i_0, ...)`` of x's leading dims, where
    ``i_j = indices[..., j]`` (split off the last axis, which GatherND's must be static) and
    each batch dim is indexed by its own ``range`` shaped to broadcast along that dim. Both
    count a negative index from the end."""
    r = _rank(indices, "gather_nd")
    k = _static(indices.shape[-1], "gather_nd")
    if k < 1 or batch_dims + k > _rank(x, "gather_nd"):
        raise NotDecomposable(f"gather_nd: {k} index entries past the input's rank")
    last = r - 1
    if k == 1:
        parts: list[Value] = [b.op("squeeze", indices, axes=[last])]
    else:
        pieces = b.multi("split", indices, axis=last, sizes=[1] * k)
        parts = [b.op("squeeze", p, axes=[last]) for p in pieces]
    lead: list[Value] = []
    for j in range(batch_dims):
        d = x.shape[j]
        n = (
            b.const(d, DType.INT64)
            if isinstance(d, int)
            else b.op("squeeze", b.op("shape", x, start=j, end=j + 1), axes=[0])
        )
        ar = b.op("range", b.const(0, DType.INT64), n, b.const(1, DType.INT64))
        shape = [1] * last
        shape[j] = -1
        lead.append(b.op("reshape", ar, shape=shape))
    idx = [*lead, *parts]
    return b.op("index", x, *idx, axes=list(range(len(idx))))
