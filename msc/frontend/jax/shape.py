"""StableHLO shape ops: reshape (static and dynamic), transpose, broadcast_in_dim, slice,
concatenate, pad, reverse, iota; and indexing: gather (jnp indexing, take, take_along_axis),
scatter (``.at[].set / .add``), dynamic_slice, dynamic_update_slice."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter
from msc.ir import DType, TensorType


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
    """A reshape to a run-time shape (what jax.export writes under symbolic dims): a squeeze
    or unsqueeze where it only takes out or puts in size-1 dims (jnp.squeeze of a symbolic
    shape), else the static form when the result has at most one run-time size, else the
    shape operand itself."""
    out = ctx.out_type().shape
    unit = _unit_dims(x.type.shape, known_sizes(shape))
    if unit is not None:
        return ctx.op(unit[0], x, axes=unit[1])
    if out is not None and sum(not isinstance(d, int) for d in out) <= 1:
        y = ctx.op("reshape", x, shape=[d if isinstance(d, int) else -1 for d in out])
    else:
        y = ctx.op("reshape", x, ctx.cast(shape, DType.INT64))
    return with_dims(y, known_sizes(shape))


def _unit_dims(have, want) -> tuple[str, list[int]] | None:
    """("squeeze", the dims of ``have`` to take out) or ("unsqueeze", the dims of ``want`` to
    put in) when that alone makes ``have`` into ``want`` (sizes known, symbolic ones equal)."""
    if have is None or want is None or None in have or None in want or have == want:
        return None
    long, short, op = (
        (have, want, "squeeze") if len(have) > len(want) else (want, have, "unsqueeze")
    )
    axes, j = [], 0
    for a, d in enumerate(long):
        if j < len(short) and str(short[j]) == str(d):
            j += 1
        elif d == 1:
            axes.append(a)
        else:
            return None
    return (op, axes) if j == len(short) and axes else None


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
            return with_dims(ctx.op("expand", x, ctx.cast(shape, DType.INT64)), known_sizes(shape))
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


# ---------------------------------------------------------------- gather, scatter, dynamic slices
# StableHLO clamps a gather's (and a dynamic slice's) start indices into the operand; msc's
# index ops take in-range indices, so each index is clamped where it is not a constant known
# to be in range. A scatter skips updates whose index is out of range (JAX wraps negative
# indices first, and its size= fills index with the size itself); msc's index_put takes
# in-range indices, so an update that may be out of range goes to one extra slot at the end of
# each indexed axis, which is sliced off again (``_dropping_out_of_range``).


def _in_range(v, n: int) -> bool:
    p = v.producer
    if p is not None and p.op == "constant":
        a = p.attrs["value"]
        return bool(a.size) and bool((a >= 0).all() and (a < n).all())
    return False


def _clamp_index(ctx: Ctx, v, n, x=None, axis: int = 0):
    """``v`` clamped into [0, n); a symbolic ``n`` is read from ``x``'s shape at ``axis``."""
    if isinstance(n, int) and _in_range(v, n):
        return v
    lo = ctx.const(0, v.dtype)
    if isinstance(n, int):
        return ctx.op("clamp", v, lo, ctx.const(max(n - 1, 0), v.dtype))
    size = ctx.op("reshape", ctx.op("shape", x, start=axis, end=axis + 1), shape=[])
    hi = ctx.op("sub", ctx.cast(size, v.dtype), ctx.const(1, v.dtype))
    return ctx.op("clamp", v, lo, hi)


def _index_parts(ctx: Ctx, idx, ivd: int) -> list:
    """The index tensor split into one tensor per index component (the index vector dim
    ``ivd`` taken out); reads through the reshape / concat JAX builds the vector with."""
    r = idx.type.rank
    if ivd == r:
        return [idx]
    k = idx.type.shape[ivd]
    if not isinstance(k, int):
        raise Unsupported("an index vector of run-time length")
    p = idx.producer
    want = [d for i, d in enumerate(idx.type.shape) if i != ivd]
    if k == 1 and p is not None and p.op in ("reshape", "unsqueeze"):
        if list(p.inputs[0].type.shape) == want:
            return [p.inputs[0]]
    if p is not None and p.op == "concat" and p.attrs["axis"] % r == ivd and len(p.inputs) == k:
        parts = [_index_parts(ctx, v, ivd) for v in p.inputs]
        if all(len(q) == 1 for q in parts):
            return [q[0] for q in parts]
    if k == 1:
        return [ctx.op("squeeze", idx, axes=[ivd])]
    pieces = ctx.multi("split", idx, axis=ivd, sizes=[1] * k)
    return [ctx.op("squeeze", q, axes=[ivd]) for q in pieces]


def _layout(rank: int, axes: list[int], nb: int) -> list:
    """The dims of x[..., idx on axes, ...] (msc's ``index`` / numpy's rule), as labels:
    ("x", d) for an operand dim kept, ("b", j) for index batch dim j."""
    kept = [("x", d) for d in range(rank) if d not in axes]
    batch = [("b", j) for j in range(nb)]
    if axes == list(range(axes[0], axes[0] + len(axes))):
        head = [("x", d) for d in range(axes[0])]
        return head + batch + [("x", d) for d in range(axes[-1] + 1, rank)]
    return batch + kept


def _indexed(ctx: Ctx, x, parts: list, axes: list[int]):
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    axes, parts = [axes[i] for i in order], [parts[i] for i in order]
    if len(axes) == 1:
        return ctx.op("gather", x, parts[0], axis=axes[0]), axes
    return ctx.op("index", x, *parts, axes=axes), axes


@converter("stablehlo.gather")
def gather(ctx: Ctx, sop: ShloOp, x, idx):
    """Indexing (``x[i]``, ``jnp.take``, ``x[i, j]``) onto gather / index, and
    ``take_along_axis`` onto gather_elements; any other gather (windows smaller than the
    operand, as a vmapped dynamic_slice gives) element by element (``_gather_windows``)."""
    from jaxlib.mlir.dialects import stablehlo as sh

    d = sh.GatherDimensionNumbers(sop.raw("dimension_numbers"))
    offset, collapsed = list(d.offset_dims), list(d.collapsed_slice_dims)
    smap, ivd = list(d.start_index_map), d.index_vector_dim
    ob, ib = list(d.operand_batching_dims), list(d.start_indices_batching_dims)
    sizes = sop.attr("slice_sizes")
    shape = x.type.shape  # symbolic dims only where indexed (one element along them)
    if shape is None or None in shape:
        raise Unsupported(f"gather from a shape msc does not know ({shape})")
    r = len(shape)
    for a in range(r):
        if (sizes[a] != 1) if (a in smap or a in ob) else (sizes[a] != shape[a]):
            return _gather_windows(ctx, sop, x, idx, d, sizes)
    parts = _index_parts(ctx, idx, ivd)
    if len(parts) > 1:  # msc's index takes i64 (torch's advanced indexing, ONNX GatherND)
        parts = [ctx.cast(p, DType.INT64) for p in parts]
    # msc's gathers take i32 / i64 (jnp.searchsorted's indices are u32)
    parts = [
        p if p.dtype in (DType.INT32, DType.INT64) else ctx.cast(p, DType.INT64) for p in parts
    ]
    parts = [_clamp_index(ctx, p, shape[a], x, a) for p, a in zip(parts, smap)]
    out = ctx.out_type().shape
    if ob:  # take_along_axis: every other dim is a batch dim of both
        if len(smap) != 1 or collapsed != smap or offset or sorted(ob + smap) != list(range(r)):
            raise Unsupported("a batched gather that is not take_along_axis")
        nb_dims = [i for i in range(idx.type.rank) if i != ivd]
        if [nb_dims.index(i) for i in ib] != ob:
            raise Unsupported("a batched gather whose batch dims are not the operand's")
        return ctx.op("gather_elements", x, parts[0], axis=smap[0])
    if sorted(smap) != sorted(set(smap)) or not set(collapsed) <= set(smap):
        raise Unsupported("a gather that collapses dims it does not index")
    y, axes = _indexed(ctx, x, parts, smap)
    nb = parts[0].type.rank
    have = _layout(r, axes, nb)
    offs = [a for a in range(r) if a not in collapsed]  # the offset dims, in operand order
    want: list = [None] * len(out)
    for pos, a in zip(offset, offs):
        want[pos] = ("x", a)
    rest = iter(range(nb))
    want = [w if w is not None else ("b", next(rest)) for w in want]
    want_kept = [w for w in want if w in have]
    if want_kept != have:
        y = ctx.op("transpose", y, perm=[have.index(w) for w in want_kept])
    if len(want_kept) != len(want):  # indexed dims kept as size-1 offset dims
        y = ctx.op("reshape", y, shape=_static(out, "gather"))
    return y


def _spread(ctx: Ctx, v, at: list[int], shape: list[int]):
    """``v``, whose dims are ``shape``'s dims ``at``, broadcast to ``shape`` (the general
    gather's output, the general scatter's updates)."""
    view = [1] * len(shape)
    for p, n in zip(at, v.type.shape):
        view[p] = n
    if list(v.type.shape) != view:
        v = ctx.op("reshape", v, shape=view)
    return v if view == list(shape) else ctx.op("expand", v, shape=shape)


def _iota(ctx: Ctx, p: int, shape: list[int]):
    """The positions along ``shape``'s dim ``p``, broadcast to ``shape``."""
    n = shape[p]
    return _spread(
        ctx, ctx.op("arange", start=0.0, end=float(n), step=1.0, dtype=DType.INT64), [p], shape
    )


def _gather_windows(ctx: Ctx, sop: ShloOp, x, idx, d, sizes: list[int]):
    """The general gather, element by element: every output element reads the operand at
    its window's start (clamped so the window fits, as StableHLO does; zero on dims the index
    does not map) plus its offset in the window, a batching dim at the position along it;
    one ``index`` over every operand dim reads them (a vmapped dynamic_slice)."""
    offset, collapsed = list(d.offset_dims), list(d.collapsed_slice_dims)
    smap, ivd = list(d.start_index_map), d.index_vector_dim
    xb, ib = list(d.operand_batching_dims), list(d.start_indices_batching_dims)
    shape = _static(x.type.shape, "gather")
    out = _static(ctx.out_type().shape, "gather")
    r, orank = len(shape), len(out)
    bo = [p for p in range(orank) if p not in offset]  # the output's batch dims
    wdims = [a for a in range(r) if a not in collapsed and a not in xb]  # in offset's order
    bdims = [i for i in range(idx.type.rank) if i != ivd]
    if len(bdims) != len(bo) or len(wdims) != len(offset):
        raise Unsupported("a gather whose output does not match its index and windows")
    parts = [ctx.cast(p, DType.INT64) for p in _index_parts(ctx, idx, ivd)] if smap else []

    def spread(v, at: list[int]):
        return _spread(ctx, v, at, out)

    def iota(p: int):
        return _iota(ctx, p, out)

    starts = {a: _clamp_index(ctx, q, shape[a] - sizes[a] + 1) for a, q in zip(smap, parts)}
    index = []
    for a in range(r):
        if a in xb:
            index.append(iota(bo[bdims.index(ib[xb.index(a)])]))
        elif a in collapsed:
            start = starts.get(a)
            index.append(
                spread(start, bo)
                if start is not None
                else spread(ctx.const(np.zeros([1] * orank), DType.INT64), [])
            )
        else:
            off = iota(offset[wdims.index(a)])
            index.append(ctx.op("add", spread(starts[a], bo), off) if a in starts else off)
    return ctx.op("index", x, *index, axes=list(range(r)))


def _scatter_body(sop: ShloOp) -> bool:
    """True for an add (``.at[].add``), False for a set (``.at[].set``)."""
    block = sop.op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    args = list(block.arguments)
    if len(args) == 2 and len(ops) == 1 and list(ops[0].operands) == [args[1]]:
        return False
    from msc.frontend.jax.nn import body_op

    kind = body_op(sop)
    if kind == "stablehlo.add":
        return True
    raise Unsupported(f"a scatter applying {kind or 'a body msc does not recognize'}")


@converter("stablehlo.scatter")
def scatter(ctx: Ctx, sop: ShloOp, *args):
    """``x.at[idx].set(v)`` / ``.add(v)`` onto index_put."""
    from jaxlib.mlir.dialects import stablehlo as sh

    if len(args) != 3:
        raise Unsupported(f"a scatter of {len(args) // 2} operands together")
    x, idx, upd = args
    d = sh.ScatterDimensionNumbers(sop.raw("scatter_dimension_numbers"))
    uw, inserted = list(d.update_window_dims), list(d.inserted_window_dims)
    smap, ivd = list(d.scattered_dims_to_operand_dims), d.index_vector_dim
    accumulate = _scatter_body(sop)
    shape = _static(x.type.shape, "scatter")
    ushape = _static(upd.type.shape, "scatter")
    r = len(shape)
    window = [a for a in range(r) if a not in inserted]
    if (
        list(d.input_batching_dims)
        or not smap
        or sorted(inserted) != sorted(smap)
        or len(set(smap)) != len(smap)
        or [ushape[p] for p in uw] != [shape[a] for a in window]
    ):
        return _scatter_windows(ctx, x, idx, upd, d, shape, ushape, accumulate)
    parts = [ctx.cast(p, DType.INT64) for p in _index_parts(ctx, idx, ivd)]
    order = sorted(range(len(smap)), key=lambda i: smap[i])
    axes, parts = [smap[i] for i in order], [parts[i] for i in order]
    nb = parts[0].type.rank
    # the updates' dims as labels, put into the layout of x[idx]
    have: list = [None] * len(ushape)
    for p, a in zip(uw, window):
        have[p] = ("x", a)
    rest = iter(range(nb))
    have = [h if h is not None else ("b", next(rest)) for h in have]
    want = _layout(r, axes, nb)
    if have != want:
        upd = ctx.op("transpose", upd, perm=[have.index(w) for w in want])
    if all(_in_range(q, shape[a]) for q, a in zip(parts, axes)):
        return ctx.op("index_put", x, upd, *parts, axes=axes, accumulate=accumulate)
    return _dropping_out_of_range(ctx, x, upd, parts, axes, shape, accumulate)


def _dropping_out_of_range(
    ctx: Ctx, x, upd, parts: list, axes: list[int], shape, accumulate, ok=None, checked=None
):
    """index_put that skips the updates whose index is out of range, as StableHLO's scatter
    does: ``x`` padded by one slot at the end of each indexed axis, every component of an
    out-of-range index sent to that slot, and the slot sliced off again. ``ok`` (where the
    caller knows better: a whole window is in range or skipped) marks the updates kept, and
    ``checked`` the axes that can be out of range (default: every indexed axis)."""
    r = len(shape)
    checked = axes if checked is None else checked
    pads = [0] * r + [1 if a in checked else 0 for a in range(r)]
    zero = ctx.const(0, x.dtype)
    padded = ctx.op("pad", x, None, zero, pads=pads, mode="constant")
    if ok is None:
        for q, a in zip(parts, axes):
            lo, hi = ctx.const(0, q.dtype), ctx.const(shape[a], q.dtype)
            here = ctx.op("logical_and", ctx.op("ge", q, lo), ctx.op("lt", q, hi))
            ok = here if ok is None else ctx.op("logical_and", ok, here)
    slots = [
        ctx.op("where", ok, q, ctx.const(shape[a], q.dtype)) if a in checked else q
        for q, a in zip(parts, axes)
    ]
    out = ctx.op("index_put", padded, upd, *slots, axes=axes, accumulate=accumulate)
    return ctx.op(
        "slice", out, starts=[0] * len(checked), ends=[shape[a] for a in checked], axes=checked
    )


def _scatter_windows(ctx: Ctx, x, idx, upd, d, shape, ushape, accumulate):
    """The general scatter, element by element: every update element's operand index is its
    window's start (zero on dims the index does not map) plus its offset in the window, and a
    batching dim's index is the position along it; one index_put over every operand dim
    takes them. A window that does not fit whole is skipped, as StableHLO says (``x.at[1:4]``
    as jnp writes it, ``jnp.unique``'s and ``polydiv``'s window updates, argpartition's
    batched scatter)."""
    uw, inserted = list(d.update_window_dims), list(d.inserted_window_dims)
    smap, ivd = list(d.scattered_dims_to_operand_dims), d.index_vector_dim
    xb, ib = list(d.input_batching_dims), list(d.scatter_indices_batching_dims)
    r, ur = len(shape), len(ushape)
    us = [p for p in range(ur) if p not in uw]  # the update's scatter (batch) dims
    wdims = [a for a in range(r) if a not in inserted and a not in xb]  # in uw's order
    bdims = [i for i in range(idx.type.rank) if i != ivd]  # the index's batch dims
    if len(bdims) != len(us) or len(wdims) != len(uw):
        raise Unsupported("a scatter whose updates do not match its index and windows")
    parts = [ctx.cast(p, DType.INT64) for p in _index_parts(ctx, idx, ivd)] if smap else []

    def spread(v, at: list[int]):
        return _spread(ctx, v, at, ushape)

    def iota(p: int):
        return _iota(ctx, p, ushape)

    starts = {a: spread(q, us) for a, q in zip(smap, parts)}
    index, ok, checked = [], None, []
    for a in range(r):
        if a in xb:
            index.append(iota(us[bdims.index(ib[xb.index(a)])]))
            continue
        if a in inserted:
            size, v = 1, starts.get(a)
            v = v if v is not None else spread(ctx.const(np.zeros([1] * ur), DType.INT64), [])
        else:
            p = uw[wdims.index(a)]
            size, off = ushape[p], iota(p)
            v = ctx.op("add", starts[a], off) if a in starts else off
        index.append(v)
        if a in starts and not _in_range(parts[smap.index(a)], shape[a] - size + 1):
            lo, hi = ctx.const(0, DType.INT64), ctx.const(shape[a] - size, DType.INT64)
            q = starts[a]
            here = ctx.op("logical_and", ctx.op("ge", q, lo), ctx.op("le", q, hi))
            ok = here if ok is None else ctx.op("logical_and", ok, here)
            checked.append(a)
    axes = list(range(r))
    if ok is None:
        return ctx.op("index_put", x, upd, *index, axes=axes, accumulate=accumulate)
    return _dropping_out_of_range(ctx, x, upd, index, axes, shape, accumulate, ok, checked)


def _start(ctx: Ctx, s, n: int):
    """A run-time start clamped into [0, n] as a 1-element i64 tensor."""
    s = _clamp_index(ctx, ctx.cast(s, DType.INT64), n + 1)
    return ctx.op("reshape", s, shape=[1])


def _const_int(v) -> int | None:
    p = v.producer
    if p is not None and p.op == "constant" and p.attrs["value"].size == 1:
        return int(p.attrs["value"].reshape(-1)[0])
    return None


def known_sizes(v, depth: int = 0) -> list | None:
    """The elements of an integer value computed from shapes and constants (what jax.export
    writes for the operands of an op at symbolic shapes), flat in row-major order: each an int,
    a symbolic dim (an input's ``b``, ``s - 1``), or None where only the run time knows it.
    None when the value is none of these."""
    from msc.ir import symexpr

    p = v.producer if v is not None else None
    if p is None or depth > 64 or v.type.shape is None or not v.dtype.is_integer:
        return None
    ins = p.inputs
    if p.op == "constant":
        return [int(x) for x in np.asarray(p.attrs["value"]).reshape(-1)]
    if p.op == "shape" and ins[0].type.shape is not None:
        return list(ins[0].type.shape)[p.attrs.get("start", 0) : p.attrs.get("end")]
    if p.op in ("reshape", "squeeze", "unsqueeze", "identity", "cast") and ins[0] is not None:
        return known_sizes(ins[0], depth + 1)
    if p.op == "concat" and p.attrs["axis"] == 0 and all(u is not None for u in ins):
        parts = [known_sizes(u, depth + 1) for u in ins]
        return None if any(x is None for x in parts) else [d for x in parts for d in x]  # type: ignore[union-attr]
    if p.op in ("add", "sub") and len(ins) == 2:
        a, b = (known_sizes(u, depth + 1) for u in ins)
        if a is None or b is None or len(a) != len(b) and 1 not in (len(a), len(b)):
            return None
        n = max(len(a), len(b))
        a, b = (x * n if len(x) == 1 else x for x in (a, b))
        f = symexpr.add if p.op == "add" else symexpr.sub
        return [None if x is None or y is None else f(x, y) for x, y in zip(a, b)]
    return None


def with_dims(y, dims: list | None):
    """``y`` with the dims its type leaves unknown taken from ``dims`` (sizes the shape operand
    of a dynamic op gives, ``known_sizes``): a symbolic size stays known downstream."""
    t = y.type
    if dims is None or t.shape is None or len(dims) != len(t.shape):
        return y
    y.type = TensorType(t.dtype, [d if d is not None else w for d, w in zip(t.shape, dims)])
    return y


@converter("stablehlo.real_dynamic_slice")
def real_dynamic_slice(ctx: Ctx, sop: ShloOp, x, start, limit, strides):
    """A slice from run-time starts to run-time limits (``x[..., :32]`` at symbolic shapes,
    ``jnp.split``): msc's slice with run-time starts and ends, unit steps left out; its sizes
    are limit - start where those are known."""
    from msc.ir import symexpr

    r = x.type.rank
    starts, ends = (ctx.cast(v, DType.INT64) for v in (start, limit))
    step = known_sizes(strides)
    if step is None or any(d != 1 for d in step):
        axes = ctx.const(np.arange(r, dtype=np.int64), DType.INT64)
        return ctx.op("slice", x, starts, ends, axes, ctx.cast(strides, DType.INT64))
    y = ctx.op("slice", x, starts, ends, axes=list(range(r)))
    lo, hi = known_sizes(start), known_sizes(limit)
    if lo is None or hi is None:
        return y
    return with_dims(
        y, [None if a is None or b is None else symexpr.sub(b, a) for a, b in zip(lo, hi)]
    )


@converter("stablehlo.dynamic_slice")
def dynamic_slice(ctx: Ctx, sop: ShloOp, x, *starts):
    """``lax.dynamic_slice``: a slice whose starts are clamped so the window fits."""
    sizes = sop.attr("slice_sizes")
    shape = _static(x.type.shape, "dynamic_slice")
    axes = [a for a in range(len(shape)) if sizes[a] != shape[a]]
    if not axes:
        return ctx.op("identity", x)
    known = [_const_int(starts[a]) for a in axes]
    if all(k is not None for k in known):
        lo = [min(max(k, 0), shape[a] - sizes[a]) for k, a in zip(known, axes)]  # type: ignore
        ends = [s + sizes[a] for s, a in zip(lo, axes)]
        return ctx.op("slice", x, starts=lo, ends=ends, axes=axes)
    lo = [_start(ctx, starts[a], shape[a] - sizes[a]) for a in axes]
    begin = lo[0] if len(lo) == 1 else ctx.op("concat", *lo, axis=0)
    end = ctx.op("add", begin, ctx.const(np.array([sizes[a] for a in axes]), DType.INT64))
    return ctx.op("slice", x, begin, end, axes=axes)


def _window_from_zero(ctx: Ctx, x, length):
    """``x[:l0, :l1, ...]`` of run-time lengths (no clamp: a window no longer than its dim
    fits from 0): a slice of the dims the window cuts (its length known not to be the dim),
    by constant ends where the lengths are numbers, else by run-time ones."""
    shape, sizes = x.type.shape, known_sizes(length)
    if shape is None or sizes is None:
        zero = ctx.const(np.zeros(x.type.rank, np.int64), DType.INT64)
        return ctx.op("slice", x, zero, length, axes=list(range(x.type.rank)))
    cut = [a for a, (d, n) in enumerate(zip(shape, sizes)) if d is None or n is None or d != n]
    if not cut:
        return ctx.op("identity", x)
    if all(isinstance(sizes[a], int) for a in cut):
        y = ctx.op("slice", x, starts=[0] * len(cut), ends=[sizes[a] for a in cut], axes=cut)
    else:
        ends = [ctx.op("slice", length, starts=[a], ends=[a + 1], axes=[0]) for a in cut]
        end = ends[0] if len(ends) == 1 else ctx.op("concat", *ends, axis=0)
        zero = ctx.const(np.zeros(len(cut), np.int64), DType.INT64)
        y = ctx.op("slice", x, zero, end, axes=cut)
    return with_dims(y, sizes)


@converter("stablehlo.dynamic_gather")
def dynamic_gather(ctx: Ctx, sop: ShloOp, x, idx, sizes):
    """A gather whose window sizes are run-time values: jax.export writes ``x[:n]`` and
    ``x[:, 0]`` under symbolic dims so (one start vector). That is a slice of every dim from
    its start (the indexed dims' starts clamped, as StableHLO does, so the window fits; the
    others from 0) as long as the window, with the collapsed dims squeezed out."""
    from jaxlib.mlir.dialects import stablehlo as sh

    d = sh.GatherDimensionNumbers(sop.raw("dimension_numbers"))
    smap, collapsed, r = list(d.start_index_map), list(d.collapsed_slice_dims), x.type.rank
    if (
        list(d.operand_batching_dims)
        or idx.type.rank != 1
        or not set(collapsed) <= set(smap)
        or list(d.offset_dims) != list(range(r - len(collapsed)))
    ):
        raise Unsupported("a dynamic_gather that is not one window (a slice of run-time length)")
    if all(k == 0 for k in known_sizes(idx) or [None]):
        y = _window_from_zero(ctx, x, ctx.cast(sizes, DType.INT64))
        return ctx.op("squeeze", y, axes=collapsed) if collapsed else y
    start = ctx.cast(idx, DType.INT64)
    zero = ctx.const(np.zeros(1, np.int64), DType.INT64)
    parts = [
        ctx.op("slice", start, starts=[smap.index(a)], ends=[smap.index(a) + 1], axes=[0])
        if a in smap
        else zero
        for a in range(r)
    ]
    begin = parts[0] if r == 1 else ctx.op("concat", *parts, axis=0)
    length = ctx.cast(sizes, DType.INT64)
    p = idx.producer
    if not (p is not None and p.op == "constant" and not p.attrs["value"].any()):
        room = ctx.op("sub", ctx.op("shape", x), length)  # 0 <= it for the dims not indexed
        begin = ctx.op("minimum", ctx.op("maximum", begin, ctx.const(0, DType.INT64)), room)
    end = ctx.op("add", begin, length)
    y = ctx.op("slice", x, begin, end, axes=list(range(r)))
    return ctx.op("squeeze", y, axes=collapsed) if collapsed else y


@converter("stablehlo.dynamic_iota")
def dynamic_iota(ctx: Ctx, sop: ShloOp, shape):
    """An iota of a run-time shape (``jnp.arange(n)`` with a symbolic ``n``): one dim, the
    range [0, n) (as torch.export's and ONNX's arange); more, a running count of ones along
    the axis, less one."""
    out = ctx.out_type()
    axis = sop.attr("iota_dimension")
    if out.rank == 1:
        n = ctx.op("squeeze", ctx.cast(shape, DType.INT64), axes=[0])
        r = ctx.op("range", ctx.const(0, DType.INT64), n, ctx.const(1, DType.INT64))
        return with_dims(ctx.cast(r, out.dtype), known_sizes(shape))
    ones = ctx.op("full", ctx.cast(shape, DType.INT64), value=1.0, dtype=DType.INT64)
    r = ctx.op("sub", ctx.op("cumsum", ones, axis=axis), ctx.const(1, DType.INT64))
    return with_dims(ctx.cast(r, out.dtype), known_sizes(shape))


@converter("stablehlo.dynamic_update_slice")
def dynamic_update_slice(ctx: Ctx, sop: ShloOp, x, upd, *starts):
    """``lax.dynamic_update_slice`` onto index_put: x[s0:s0+n0, ...] = update, each index a
    range from its (clamped) start."""
    shape = _static(x.type.shape, "dynamic_update_slice")
    ushape = _static(upd.type.shape, "dynamic_update_slice")
    cut = [a for a in range(len(shape)) if ushape[a] != shape[a]]
    if not cut:
        return ctx.op("identity", upd)
    axes = list(range(cut[0], cut[-1] + 1))
    parts = []
    for j, a in enumerate(axes):
        n = ushape[a]
        ar = ctx.op("arange", start=0.0, end=float(n), step=1.0, dtype=DType.INT64)
        if a in cut:
            s = _const_int(starts[a])
            if s is None:
                lo = _clamp_index(ctx, ctx.cast(starts[a], DType.INT64), shape[a] - n + 1)
                ar = ctx.op("add", ar, lo)
            elif min(max(s, 0), shape[a] - n):
                ar = ctx.op("add", ar, ctx.const(min(max(s, 0), shape[a] - n), DType.INT64))
        view = [1] * len(axes)
        view[j] = n
        parts.append(ctx.op("reshape", ar, shape=view) if len(axes) > 1 else ar)
    return ctx.op("index_put", x, upd, *parts, axes=axes, accumulate=False)
