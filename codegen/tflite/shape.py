"""TFLite emitters for shape ops: reshape, transpose, concat, slice, squeeze / unsqueeze,
pad, gather (and index / gather_elements as GATHER_ND), split, expand, tile, shape,
constants (arange, full)."""

from __future__ import annotations

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.dtype import DType
from msc.ir.types import TensorType

I32 = DType.INT32
BIG = (1 << 31) - 1


def _static_or_minus_one(t: TensorType) -> list[int] | None:
    """The dims of ``t`` with at most one symbolic dim as -1; None when more are symbolic."""
    dims = [d if isinstance(d, int) else -1 for d in t.shape]
    return dims if dims.count(-1) <= 1 else None


@emitter("reshape")
def reshape(e: Emit, x: Ref, shape_in: Ref | None = None, *, shape) -> Ref:
    t = e.out_type()
    if shape_in is not None:
        s = e.cast(shape_in, I32)
        return e.op("RESHAPE", [x, s], t)
    dims = [int(d) for d in shape]
    if dims.count(-1) > 1 or 0 in dims:
        dims = _static_or_minus_one(t)
        e.require(dims is not None, f"reshape to {list(shape)}")
    return e.reshape(x, dims, t)


@emitter("flatten", "squeeze", "unsqueeze")
def reshape_like(e: Emit, x: Ref, axes_in: Ref | None = None, **attrs) -> Ref:
    t = e.out_type()
    e.require(axes_in is None, "run-time axes")
    dims = _static_or_minus_one(t)
    op = e.node.op
    # a static shape is a RESHAPE; a symbolic one keeps the op where TFLite has it
    # (EXPAND_DIMS, SQUEEZE), which reads back as itself, not as a reshape to a -1
    if dims is not None and (-1 not in dims or op == "flatten"):
        return e.reshape(x, dims, t)
    if op == "unsqueeze":
        y = x
        for a in sorted(int(a) % t.rank for a in attrs["axes"]):
            y = e.expand_dims(y, a)
        return y
    if op == "squeeze":
        return e.squeeze(x, [int(a) % x.rank for a in attrs["axes"] or ()], t)
    return e.require(False, f"{op} with several symbolic dims")


@emitter("transpose")
def transpose(e: Emit, x: Ref, *, perm) -> Ref:
    return e.transpose(x, perm)


@emitter("concat")
def concat(e: Emit, *xs: Ref, axis: int) -> Ref:
    return e.op("CONCATENATION", list(xs), e.out_type(), axis=int(axis) % xs[0].rank)


@emitter("slice")
def slice_(
    e: Emit,
    x: Ref,
    starts_in=None,
    ends_in=None,
    axes_in=None,
    steps_in=None,
    *,
    starts,
    ends,
    axes,
    steps,
) -> Ref:
    if starts_in is not None or ends_in is not None:
        return _runtime_slice(e, x, starts_in, ends_in, axes_in, steps_in, axes, steps)
    r = x.rank
    begin, end, stride = [0] * r, [0] * r, [1] * r
    begin_mask = end_mask = (1 << r) - 1
    for st, en, ax, sp in zip(starts, ends, axes, steps or [1] * len(axes)):
        a = int(ax) % r
        bit = 1 << a
        clip = lambda v: max(min(int(v), BIG), -BIG)  # noqa: E731
        begin[a], stride[a] = clip(st), int(sp)
        begin_mask &= ~bit
        big = en >= BIG if sp > 0 else en <= -BIG
        if not big:
            end[a] = clip(en)
            end_mask &= ~bit
    return e.op(
        "STRIDED_SLICE",
        [x, e.ints(begin), e.ints(end), e.ints(stride)],
        e.out_type(),
        begin_mask=begin_mask,
        end_mask=end_mask,
    )


def _runtime_slice(e: Emit, x: Ref, starts_in, ends_in, axes_in, steps_in, axes, steps) -> Ref:
    """Bounds computed at run time on the leading axes: STRIDED_SLICE with them as its begin
    and end (clamped to int32, which STRIDED_SLICE reads; it clamps to the dim as msc does)."""
    n = starts_in.shape[0] if starts_in.shape else None
    e.require(
        isinstance(n, int) and axes_in is None and steps_in is None,
        "a slice with run-time bounds of unknown length, axes or steps",
    )
    e.require(
        axes is None or [int(a) % x.rank for a in axes] == list(range(n)),
        "a slice with run-time bounds on axes other than the leading ones",
    )

    def bound(v: Ref) -> Ref:
        if v.dtype is not I32:
            lo, hi = (
                e.const(np.array(-BIG, v.dtype.to_numpy())),
                e.const(np.array(BIG, v.dtype.to_numpy())),
            )
            v = e.op("MINIMUM", [v, hi], v.type)
            v = e.op("MAXIMUM", [v, lo], v.type)
        return e.cast(v, I32)

    stride = [int(d) for d in steps] if steps else [1] * n
    return e.op(
        "STRIDED_SLICE", [x, bound(starts_in), bound(ends_in), e.ints(stride)], e.out_type()
    )


@emitter("pad")
def pad(e: Emit, x: Ref, pads_in=None, value_in=None, *, pads, mode, value) -> Ref:
    r = x.rank
    t = e.out_type()
    if pads_in is not None:  # [begins..., ends...] at run time -> TFLite's [rank, 2]
        p2 = e.reshape(e.cast(pads_in, I32), [2, r])
        spec = e.transpose(p2, [1, 0])
    else:
        e.require(all(p >= 0 for p in pads), "negative pads (a crop)")
        spec = e.const(np.asarray([[pads[i], pads[r + i]] for i in range(r)], np.int32))
    if mode == "reflect":
        return e.op("MIRROR_PAD", [x, spec], t, mode=0)
    e.require(mode == "constant", f"{mode} padding")
    if value_in is not None:
        return e.op("PADV2", [x, spec, value_in], t)
    if value == 0.0:
        return e.op("PAD", [x, spec], t)
    return e.op("PADV2", [x, spec, e.const(np.asarray(value, x.dtype.to_numpy()))], t)


@emitter("gather")
def gather(e: Emit, x: Ref, indices: Ref, *, axis: int) -> Ref:
    return e.op("GATHER", [x, indices], e.out_type(), axis=int(axis) % x.rank)


@emitter("gather_nd")
def gather_nd(e: Emit, x: Ref, indices: Ref, *, batch_dims: int) -> Ref:
    e.require(batch_dims == 0, "gather_nd with batch dims")
    return e.op("GATHER_ND", [x, indices], e.out_type())


def _static(t: TensorType, what: str, e: Emit) -> list[int]:
    e.require(t.shape is not None and all(isinstance(d, int) for d in t.shape), what)
    return [int(d) for d in t.shape]


def _wrapped(e: Emit, i: Ref, dim: int | Ref) -> Ref:
    """Indices as int32, a negative one counted from the end (FLOOR_MOD by the dim: a number,
    or a symbolic dim's run-time size as a one-element int32 tensor)."""
    i = e.cast(i, I32)
    d = e.ints([dim]) if isinstance(dim, int) else dim
    return e.op("FLOOR_MOD", [i, d], TensorType(I32, i.type.shape))


def _dim_sizes(e: Emit, x: Ref, k: int) -> list[int | Ref]:
    """The sizes of ``x``'s first ``k`` dims: a number where static, else the run-time size
    (a one-element int32 slice of SHAPE)."""
    dims = list(x.shape)[:k]
    if all(isinstance(d, int) for d in dims):
        return [int(d) for d in dims]
    full = e.op("SHAPE", [x], TensorType(I32, [x.rank]), out_type=2)
    return [
        int(d)
        if isinstance(d, int)
        else e.op(
            "STRIDED_SLICE",
            [full, e.ints([a]), e.ints([a + 1]), e.ints([1])],
            TensorType(I32, [1]),
        )
        for a, d in enumerate(dims)
    ]


def _gather_at(e: Emit, x: Ref, coords: list[Ref], target: list) -> Ref:
    """GATHER_ND of ``x`` at the coordinates ``coords`` (one int32 tensor per leading dim of
    x, each broadcast to ``target``; where ``target`` has a symbolic dim, by adding zeros of
    every coordinate's shape, integer arithmetic that broadcasts at run time)."""
    if not all(isinstance(d, int) for d in target):
        zero = e.ints([0])
        zeros = None
        for c in coords:
            z = e.op("MUL", [c, zero], c.type)
            zeros = z if zeros is None else e.op("ADD", [zeros, z], TensorType(I32, target))
        coords = [
            c if list(c.shape) == list(target) else e.op("ADD", [c, zeros], TensorType(I32, target))
            for c in coords
        ]
    cols = []
    for c in coords:
        if list(c.shape) != target:
            c = e.op("BROADCAST_TO", [c, e.ints(target)], TensorType(I32, target))
        cols.append(e.expand_dims(c, len(target)))
    at = e.op("CONCATENATION", cols, TensorType(I32, [*target, len(cols)]), axis=len(target))
    return e.op("GATHER_ND", [x, at], e.out_type())


@emitter("index")
def index(e: Emit, x: Ref, *indices: Ref, axes) -> Ref:
    """x[i0, i1, ...] on x's leading dims: GATHER_ND at the broadcast indices (symbolic dims
    read from the shapes at run time)."""
    k = len(indices)
    e.require(x.type.shape is not None, "index of a tensor of unknown rank")
    e.require([int(a) % x.rank for a in axes] == list(range(k)), "index of dims after others")
    dims = _dim_sizes(e, x, k)
    out = list(e.out_type().shape)
    target = out[: len(out) - (x.rank - k)]
    return _gather_at(e, x, [_wrapped(e, i, d) for i, d in zip(indices, dims)], target)


@emitter("gather_elements")
def gather_elements(e: Emit, x: Ref, indices: Ref, *, axis, negative_indices) -> Ref:
    """out[p] = x[p with indices[p] on axis]: GATHER_ND at every position's coordinates (an
    arange on each other dim, the indices on axis)."""
    dims = _static(x.type, "gather_elements of a symbolic shape", e)
    target = _static(indices.type, "gather_elements of symbolic indices", e)
    a = int(axis) % x.rank
    coords = []
    for d, n in enumerate(target):
        if d == a:
            wrap = _wrapped if negative_indices else lambda e, i, _: e.cast(i, I32)
            coords.append(wrap(e, indices, dims[a]))
            continue
        shape = [n if j == d else 1 for j in range(len(target))]
        coords.append(e.const(np.arange(n, dtype=np.int32).reshape(shape)))
    return _gather_at(e, x, coords, target)


@emitter("split")
def split(e: Emit, x: Ref, sizes_in=None, *, axis, sizes, num_outputs):
    """SPLIT_V of the sizes; num_outputs pieces of a dim not known until run time are
    SPLIT's even parts (LiteRT refuses a dim they do not divide, where the op's last piece
    would be smaller: an error, never other values)."""
    e.require(sizes_in is None, "a split with run-time sizes")
    a = int(axis) % x.rank
    types = [v.type for v in e.node.outputs]
    if sizes is None:
        return e.op("SPLIT", [e.ints([a]), x], types, num_splits=int(num_outputs))
    return e.op(
        "SPLIT_V",
        [x, e.ints(sizes), e.ints([a])],
        types,
        num_splits=len(sizes),
    )


@emitter("expand")
def expand(e: Emit, x: Ref, shape_in=None, *, shape) -> Ref:
    """BROADCAST_TO; a run-time target as it is (exporters compute the result's shape: a
    target with a 1 where x is larger, which the op reads as x's dim, LiteRT refuses at run
    time, never giving other values)."""
    t = e.out_type()
    if shape_in is not None:
        return e.op("BROADCAST_TO", [x, e.cast(shape_in, I32)], t)
    if t == x.type:  # every dim kept (-1s, or the sizes it has)
        return x
    dims = [d if isinstance(d, int) else -1 for d in t.shape]
    if -1 not in dims:
        return e.op("BROADCAST_TO", [x, e.ints(dims)], t)
    # a symbolic dim of the result is one x has at that place: its size read at run time
    lead = len(t.shape) - x.rank
    e.require(
        all(
            isinstance(d, int) or (i >= lead and x.shape[i - lead] == d)
            for i, d in enumerate(t.shape)
        ),
        "expand to a symbolic size its input does not have",
    )
    sizes = _dim_sizes(e, x, x.rank)
    parts = [e.ints([d]) if isinstance(d, int) else sizes[i - lead] for i, d in enumerate(t.shape)]
    parts = [p if isinstance(p, Ref) else e.ints([p]) for p in parts]
    shape = e.op("CONCATENATION", parts, TensorType(I32, [len(parts)]), axis=0)
    return e.op("BROADCAST_TO", [x, shape], t)


@emitter("tile")
def tile(e: Emit, x: Ref, repeats_in=None, *, repeats) -> Ref:
    e.require(repeats_in is None, "run-time repeats")
    return e.op("TILE", [x, e.ints(repeats)], e.out_type())


@emitter("shape")
def shape(e: Emit, x: Ref, *, start: int, end) -> Ref:
    t = e.out_type()
    full = e.op("SHAPE", [x], TensorType(DType.INT64, [x.rank]), out_type=4)
    if start == 0 and (end is None or end >= x.rank):
        return full
    stop = x.rank if end is None else int(end) % (x.rank + 1) if end < 0 else min(end, x.rank)
    return e.op(
        "STRIDED_SLICE",
        [full, e.ints([start % x.rank]), e.ints([stop]), e.ints([1])],
        t,
    )


@emitter("full")
def full(e: Emit, shape_in=None, *, shape, value, dtype) -> Ref:
    e.require(shape_in is None, "full of a run-time shape")
    return e.const(np.full([int(d) for d in shape], value, dtype.to_numpy()))


@emitter("arange")
def arange(e: Emit, *, start, end, step, dtype) -> Ref:
    """A constant: its attributes are static (start + k * step, as torch.arange counts)."""
    n = e.out_type().shape[0]
    return e.const((start + step * np.arange(n, dtype=np.float64)).astype(dtype.to_numpy()))


@emitter("flip")
def flip(e: Emit, x: Ref, *, axes) -> Ref:
    return e.op("REVERSE_V2", [x, e.ints([int(a) % x.rank for a in axes])], e.out_type())


@emitter("range")
def range_(e: Emit, start: Ref, limit: Ref, delta: Ref) -> Ref:
    return e.op("RANGE", [start, limit, delta], e.out_type())


@emitter("one_hot")
def one_hot(e: Emit, indices: Ref, depth_in: Ref | None = None, *, depth, axis, dtype) -> Ref:
    """ONE_HOT with on / off values 1 / 0 of the output's dtype (bool included)."""
    if depth_in is not None:
        d = e.cast(depth_in, I32)
        if d.rank:
            d = e.reshape(d, [], TensorType(I32, []))
    else:
        d = e.const(np.asarray(depth, np.int32))
    np_dt = dtype.to_numpy()
    on, off = e.const(np.asarray(1, np_dt)), e.const(np.asarray(0, np_dt))
    return e.op("ONE_HOT", [e.cast(indices, I32), d, on, off], e.out_type(), axis=int(axis))


@emitter("scatter_nd")
def scatter_nd(e: Emit, x: Ref, indices: Ref, updates: Ref, *, reduction: str) -> Ref:
    """SCATTER_ND: the updates summed into zeros at the index tuples, what TFLite's op
    computes; msc's scatter_nd onto a constant of zeros with reduction add (as the TFLite
    reader reads it) is that. Any other base or reduction is refused with the reason."""
    base = e.const_value(x)
    e.require(
        base is not None and not base.any() and reduction == "add",
        "a scatter_nd that is not an add into zeros (TFLite's SCATTER_ND sums into zeros)",
    )
    shape = e.ints([int(d) for d in x.shape])
    return e.op("SCATTER_ND", [e.cast(indices, I32), updates, shape], e.out_type())
