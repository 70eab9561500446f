"""Shape and data-movement ONNX ops, indexing, and ops that make tensors.

# NOTE: shape-like inputs (Reshape's shape, Slice's starts/ends, Pad's pads, ...) become
# attributes when they are known at import (initializer, Constant node, or folded shape
# arithmetic on static shapes). When only known at run time they become the canonical op's
# optional tensor input (reshape, expand, full, squeeze/unsqueeze axes, slice bounds, split
# sizes, pad pads, tile repeats, trilu k, one_hot depth), which the codegens read at run time.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.registry import converter
from msc.ir import DType


def _norm_axes(axes, rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in axes]


# ---------------------------------------------------------------------------- reshaping
@converter("Reshape", since=5)
def reshape(ctx: Ctx, data, shape, *, allowzero=0):
    target = ctx.known(shape)
    if target is None:
        n = ctx.shape(shape)[0]
        r = ctx.type(data).rank
        if allowzero or not isinstance(n, int) or r is None:
            return ctx.op("reshape", data, shape)
        # A 0 in a run-time target copies the input's dim (allowzero=0): say so explicitly.
        zero = ctx.op("eq", shape, np.array(0, np.int64))
        now = ctx.op("shape", data, start=0, end=min(n, r))
        if n > r:
            now = ctx.op("concat", now, np.zeros(n - r, np.int64), axis=0)
        return ctx.op("reshape", data, ctx.op("where", zero, now, shape))
    t = [int(v) for v in target.reshape(-1)]
    if allowzero or 0 not in t:
        return ctx.op("reshape", data, shape=t)
    dims = ctx.shape(data)
    out = list(t)
    for i, v in enumerate(t):
        if v == 0:
            if i >= len(dims):
                raise Unsupported(f"shape {t} copies dim {i} of a rank-{len(dims)} input")
            out[i] = dims[i] if isinstance(dims[i], int) else None
    unknown = [i for i, v in enumerate(out) if v is None]
    if not unknown:
        return ctx.op("reshape", data, shape=out)
    if len(unknown) == 1 and -1 not in out:
        out[unknown[0]] = -1
        return ctx.op("reshape", data, shape=out)
    # Copied dims are only known at run time: build the target from the input's shape (its
    # first dims, up to the last one copied: the target may be longer than the input's rank).
    k = max(i for i, v in enumerate(t) if v == 0) + 1
    now = ctx.op("shape", data, start=0, end=k)
    if len(t) > k:
        now = ctx.op("concat", now, np.zeros(len(t) - k, np.int64), axis=0)
    mask = np.array([v == 0 for v in t])
    target_v = ctx.op("where", mask, now, np.array(t, np.int64))
    return ctx.op("reshape", data, target_v)


@converter("Transpose", since=1)
def transpose(ctx: Ctx, data, *, perm=None):
    if perm is None:
        perm = list(reversed(range(ctx.rank(data))))
    return ctx.op("transpose", data, perm=perm)


@converter("Squeeze", since=1)
def squeeze_1(ctx: Ctx, data, *, axes=None):
    return ctx.op("squeeze", data, axes=axes)


@converter("Squeeze", since=13)
def squeeze(ctx: Ctx, data, axes=None):
    if axes is not None and ctx.known(axes) is None:
        return ctx.op("squeeze", data, _i64(ctx, axes))
    ax = None if axes is None else ctx.ints(axes, "axes")
    return ctx.op("squeeze", data, axes=ax)


@converter("Unsqueeze", since=1)
def unsqueeze_1(ctx: Ctx, data, *, axes):
    return ctx.op("unsqueeze", data, axes=axes)


@converter("Unsqueeze", since=13)
def unsqueeze(ctx: Ctx, data, axes):
    if ctx.known(axes) is None:
        return ctx.op("unsqueeze", data, _i64(ctx, axes))
    return ctx.op("unsqueeze", data, axes=ctx.ints(axes, "axes"))


def _i64(ctx: Ctx, x):
    """A run-time integer input as the 1-d i64 tensor the canonical ops take."""
    x = ctx.cast(x, DType.INT64)
    return ctx.op("reshape", x, shape=[-1]) if ctx.type(x).rank == 0 else x


@converter("Flatten", since=1)
def flatten(ctx: Ctx, input, *, axis=1):  # noqa: A002
    r = ctx.rank(input)
    a = axis + r if axis < 0 else axis
    if a == 0:
        return ctx.op("unsqueeze", ctx.op("flatten", input, start_axis=0, end_axis=-1), axes=[0])
    if a == r:
        return ctx.op("unsqueeze", ctx.op("flatten", input, start_axis=0, end_axis=-1), axes=[1])
    inner = ctx.op("flatten", input, start_axis=a, end_axis=-1) if a < r - 1 else input
    return ctx.op("flatten", inner, start_axis=0, end_axis=a - 1) if a > 1 else inner


# ---------------------------------------------------------------------------- slicing
def _slice(ctx: Ctx, data, starts, ends, axes, steps):
    r = ctx.rank(data)
    axes = list(range(len(starts))) if axes is None else _norm_axes(axes, r)
    steps = steps or [1] * len(axes)
    return ctx.op("slice", data, starts=starts, ends=ends, axes=axes, steps=steps)


@converter("Slice", since=1)
def slice_1(ctx: Ctx, data, *, starts, ends, axes=None):
    return _slice(ctx, data, starts, ends, axes, None)


@converter("Slice", since=10)
def slice_(ctx: Ctx, data, starts, ends, axes=None, steps=None):
    if ctx.known(starts) is None or ctx.known(ends) is None:
        # Bounds computed at run time; axes and steps stay attributes when they are known.
        ax = None if axes is None or ctx.known(axes) is None else ctx.ints(axes, "axes")
        sp = None if steps is None or ctx.known(steps) is None else ctx.ints(steps, "steps")
        return ctx.op(
            "slice",
            data,
            _i64(ctx, starts),
            _i64(ctx, ends),
            _i64(ctx, axes) if axes is not None and ax is None else None,
            _i64(ctx, steps) if steps is not None and sp is None else None,
            axes=None if ax is None else _slice_axes(ctx, data, ax),
            steps=sp or [],
        )
    if any(v is not None and ctx.known(v) is None for v in (axes, steps)):
        raise Unsupported("Slice with constant bounds but run-time axes or steps")
    return _slice(
        ctx,
        data,
        ctx.ints(starts, "starts"),
        ctx.ints(ends, "ends"),
        None if axes is None else ctx.ints(axes, "axes"),
        None if steps is None else ctx.ints(steps, "steps"),
    )


def _slice_axes(ctx: Ctx, data, axes: list[int]) -> list[int]:
    """Slice axes, counted from the front: a data value of unknown rank (a Loop's carried
    value that starts as a placeholder scalar, as paddle2onnx writes) needs none counted from
    the end."""
    if ctx.type(data).rank is None and all(a >= 0 for a in axes):
        return list(axes)
    return _norm_axes(axes, ctx.rank(data))


@converter("Concat", since=4)
def concat(ctx: Ctx, *inputs, axis):
    return ctx.op("concat", *inputs, axis=axis)


def _split_sizes(ctx: Ctx, x, axis: int, n: int, split, num_outputs=None) -> list[int] | None:
    """The static sizes of the pieces, or None for an even split of a run-time dim (or of an
    input whose rank is only known at run time)."""
    if split is not None:
        return list(split)
    shape = ctx.type(x).shape
    dim = None if shape is None else shape[axis]
    if not isinstance(dim, int):
        return None
    if num_outputs is not None:
        chunk = -(-dim // num_outputs)
        sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
        if len(sizes) != n:
            raise Unsupported(f"num_outputs={num_outputs} gives {len(sizes)} pieces of {dim}")
        return sizes
    if dim % n:
        raise Unsupported(f"dim {dim} does not split evenly into {n}")
    return [dim // n] * n


def _split(ctx: Ctx, x, axis, sizes, sizes_in=None):
    # sizes None and no sizes_in: ONNX's even split of a dim only known at run time.
    n = len(ctx.node.output)
    outs = ctx.ops("split", x, sizes_in, axis=axis, sizes=sizes, num_outputs=None if sizes else n)
    return list(outs)


@converter("Split", since=2)
def split_2(ctx: Ctx, input, *, axis=0, split=None):  # noqa: A002
    n = len(ctx.node.output)
    return _split(ctx, input, axis, _split_sizes(ctx, input, axis, n, split))


@converter("Split", since=13)
def split_13(ctx: Ctx, input, split=None, *, axis=0, num_outputs=None):  # noqa: A002
    # num_outputs is opset 18's, but torch.onnx's version converter leaves it in opset-17
    # files (GPT-2 exports): read it wherever it appears.
    n = len(ctx.node.output)
    if split is not None and ctx.known(split) is None:
        return _split(ctx, input, axis, None, _i64(ctx, split))
    sizes = None if split is None else ctx.ints(split, "split")
    return _split(ctx, input, axis, _split_sizes(ctx, input, axis, n, sizes, num_outputs))


# ---------------------------------------------------------------------------- indexing
def _indices(ctx: Ctx, indices, dim):
    """Constant indices with negatives resolved against a known dim; others as they are."""
    c = ctx.known(indices)
    if c is not None and isinstance(dim, int) and (c < 0).any():
        return np.where(c < 0, c + dim, c).astype(c.dtype)
    return indices


def _elements_indices(ctx: Ctx, data, indices, axis) -> tuple:
    """GatherElements/ScatterElements indices (constant negatives resolved), and whether they
    may still be negative (ONNX allows [-dim, dim)): the canonical ``negative_indices``, so
    only run-time (or unresolvable) indices are wrapped, by the codegens, at run time."""
    if ctx.known(indices) is None:
        return indices, True
    idx = _indices(ctx, indices, ctx.shape(data)[axis])
    return idx, bool((ctx.known(idx) < 0).any())


@converter("Gather", since=1)
def gather(ctx: Ctx, data, indices, *, axis=0):
    dim = ctx.shape(data)[axis]
    return ctx.op("gather", data, _indices(ctx, indices, dim), axis=axis)


@converter("GatherElements", since=11)
def gather_elements(ctx: Ctx, data, indices, *, axis=0):
    idx, negative = _elements_indices(ctx, data, indices, axis)
    return ctx.op("gather_elements", data, idx, axis=axis, negative_indices=negative)


@converter("GatherND", since=11)
def gather_nd(ctx: Ctx, data, indices, *, batch_dims=0):
    return ctx.op("gather_nd", data, indices, batch_dims=batch_dims)


@converter("Scatter", since=9)
def scatter(ctx: Ctx, data, indices, updates, *, axis=0):
    return scatter_elements(ctx, data, indices, updates, axis=axis)


@converter("ScatterElements", since=11)
def scatter_elements(ctx: Ctx, data, indices, updates, *, axis=0, reduction="none"):
    idx, negative = _elements_indices(ctx, data, indices, axis)
    return ctx.op(
        "scatter_elements",
        data,
        idx,
        updates,
        axis=axis,
        reduction=reduction,
        negative_indices=negative,
    )


@converter("ScatterND", since=11)
def scatter_nd(ctx: Ctx, data, indices, updates, *, reduction="none"):
    return ctx.op("scatter_nd", data, indices, updates, reduction=reduction)


@converter("Compress", since=11)
def compress(ctx: Ctx, input, condition, *, axis=None):  # noqa: A002
    x = input
    if axis is None:
        x, axis = ctx.op("reshape", input, shape=[-1]), 0
    idx = ctx.op("reshape", ctx.op("nonzero", condition), shape=[-1])
    return ctx.op("gather", x, idx, axis=axis)


@converter("NonZero", since=9)
def nonzero(ctx: Ctx, X):  # noqa: N803
    return ctx.op("transpose", ctx.op("nonzero", X), perm=[1, 0])


# ---------------------------------------------------------------------------- pad, tile
@converter("Pad", since=2)
def pad_2(ctx: Ctx, data, *, pads, mode="constant", value=0.0):
    return ctx.op("pad", data, pads=pads, mode=mode, value=value)


@converter("Pad", since=11)
def pad(ctx: Ctx, data, pads, constant_value=None, axes=None, *, mode="constant"):
    r = ctx.rank(data)
    cv = None if constant_value is None else ctx.known(constant_value)
    runtime_axes = axes is not None and ctx.known(axes) is None
    if ctx.known(pads) is None or (constant_value is not None and cv is None) or runtime_axes:
        return _runtime_pad(ctx, data, pads, constant_value, axes, mode, r)
    p = ctx.ints(pads, "pads")
    if axes is not None:
        ax = _norm_axes(ctx.ints(axes, "axes"), r)
        full = [0] * (2 * r)
        for i, a in enumerate(ax):
            full[a], full[r + a] = p[i], p[len(ax) + i]
        p = full
    value = 0.0 if constant_value is None else float(ctx.scalar(constant_value, "constant_value"))
    return ctx.op("pad", data, pads=p, mode=mode, value=value)


def _runtime_pad(ctx: Ctx, data, pads, constant_value, axes, mode: str, r: int):
    """Pad with pads or a fill value computed at run time: the canonical op's inputs (pads
    for a subset of axes are spread over every dim first)."""
    p = _i64(ctx, pads)
    if axes is not None and ctx.known(axes) is None:
        # Axes at run time too: scatter the pads into [begins..., ends...] of every dim.
        a = _i64(ctx, axes)
        a = ctx.op(
            "where",
            ctx.op("lt", a, np.array(0, np.int64)),
            ctx.op("add", a, np.array(r, np.int64)),
            a,
        )
        idx = ctx.op("concat", a, ctx.op("add", a, np.array(r, np.int64)), axis=0)
        p = ctx.op("scatter_elements", np.zeros(2 * r, np.int64), idx, p, axis=0)
    elif axes is not None:
        ax = _norm_axes(ctx.ints(axes, "axes"), r)
        k = len(ax)
        zero = np.zeros(1, np.int64)
        pieces = []
        for half in (0, 1):
            for d in range(r):
                if d in ax:
                    j = half * k + ax.index(d)
                    pieces.append(ctx.op("slice", p, starts=[j], ends=[j + 1], axes=[0], steps=[1]))
                else:
                    pieces.append(zero)
        p = ctx.op("concat", *pieces, axis=0)
    if ctx.known(pads) is not None and axes is None:
        p = np.asarray(ctx.known(pads), np.int64).reshape(-1)
        p = ctx.constant(p)
    v = None
    if constant_value is not None and mode == "constant":
        v = ctx.cast(constant_value, ctx.dtype(data))
        v = v if ctx.type(v).rank == 0 else ctx.op("reshape", v, shape=[])
    return ctx.op("pad", data, p, v, pads=None, mode=mode, value=0.0)


@converter("Expand", since=8)
def expand(ctx: Ctx, input, shape):  # noqa: A002
    target = ctx.known(shape)
    if target is None:
        return ctx.op("expand", input, shape)
    t = [int(v) for v in target.reshape(-1)]
    dims = ctx.shape(input)
    n = max(len(t), len(dims))
    t = [1] * (n - len(t)) + t
    lead = n - len(dims)
    # A 1 in the target keeps the input's dim (bidirectional broadcasting): say so with -1.
    out = [-1 if v == 1 and i >= lead else v for i, v in enumerate(t)]
    return ctx.op("expand", input, shape=out)


@converter("Tile", since=6)
def tile(ctx: Ctx, input, repeats):  # noqa: A002
    if ctx.known(repeats) is None:
        return ctx.op("tile", input, _i64(ctx, repeats))
    return ctx.op("tile", input, repeats=ctx.ints(repeats, "repeats"))


# ---------------------------------------------------------------------------- shapes
@converter("Shape", since=1)
def shape(ctx: Ctx, data, *, start=0, end=None):
    dims = ctx.type(data).shape
    if dims is not None:
        part = dims[start:end]
        if all(isinstance(d, int) for d in part):
            return np.array(part, np.int64)
    return ctx.op("shape", data, start=start, end=end)


@converter("Size", since=1)
def size(ctx: Ctx, data):
    n = ctx.type(data).numel()
    if n is not None:
        return np.array(n, np.int64)
    return ctx.op("reduce_prod", ctx.op("shape", data), axes=None, keepdims=False)


# ---------------------------------------------------------------------------- making tensors
@converter("Constant", since=1)
def constant(
    ctx: Ctx,
    *,
    value=None,
    value_float=None,
    value_floats=None,
    value_int=None,
    value_ints=None,
    value_string=None,
    value_strings=None,
    sparse_value=None,
):
    if value is not None:
        return value
    if value_float is not None:
        return np.array(value_float, np.float32)
    if value_floats is not None:
        return np.array(value_floats, np.float32)
    if value_int is not None:
        return np.array(value_int, np.int64)
    if value_ints is not None:
        return np.array(value_ints, np.int64)
    if value_string is not None or value_strings is not None:  # str tensors: object arrays
        text = [value_string] if value_strings is None else value_strings
        arr = np.empty(len(text), object)
        arr[:] = text
        return arr[0, ...] if value_strings is None else arr
    raise Unsupported("sparse constants are not supported")


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx: Ctx, input, *, value=None):  # noqa: A002
    v = np.zeros(1, np.float32) if value is None else value
    dtype = DType.from_numpy(v.dtype)
    fill = v.reshape(-1)[0].item()
    if isinstance(fill, complex):
        raise Unsupported("complex fill value")
    s = ctx.known(input)
    if s is not None:
        return ctx.op("full", shape=[int(d) for d in s.reshape(-1)], value=float(fill), dtype=dtype)
    return ctx.op("full", input, value=float(fill), dtype=dtype)


@converter("Range", since=11)
def range_(ctx: Ctx, start, limit, delta):
    if any(ctx.known(v) is None for v in (start, limit, delta)):
        return ctx.op("range", start, limit, delta)  # bounds known at run time
    s = ctx.scalar(start, "start")
    e = ctx.scalar(limit, "limit")
    d = ctx.scalar(delta, "delta")
    return ctx.op("arange", start=s, end=e, step=d, dtype=ctx.dtype(start))


@converter("EyeLike", since=9)
def eye_like(ctx: Ctx, input, *, dtype=None, k=0):  # noqa: A002
    s = ctx.static_shape(input)
    if s is None:
        raise Unsupported("EyeLike of a shape only known at run time")
    from msc.frontend.onnx.initializers import dtype_from_onnx

    dt = ctx.dtype(input) if dtype is None else dtype_from_onnx(dtype)
    return np.eye(s[0], s[1], k=k).astype(dt.to_numpy())


@converter("OneHot", since=9)
def one_hot(ctx: Ctx, indices, depth, values, *, axis=-1):
    if ctx.known(depth) is None:
        # Depth computed at run time (any numeric type, truncated like ONNX's cast to int).
        d = ctx.op("reshape", ctx.cast(depth, DType.INT64), shape=[])
        dep = {"depth": None}
        extra = [d]
    else:
        d = np.array(int(ctx.scalar(depth, "depth")), np.int64)
        dep = {"depth": int(d)}
        extra = []
    idx = indices
    if not ctx.dtype(idx).is_integer or ctx.dtype(idx) is not DType.INT64:
        idx = ctx.op("cast", idx, to=DType.INT64)
    # Negative indices count from the end (ONNX); torch's one_hot rejects them. One still
    # negative after that (below -depth) is out of range, an all-off row: say so with depth.
    wrapped = ctx.op("add", idx, d)
    wrapped = ctx.op("where", ctx.op("lt", wrapped, np.array(0, np.int64)), d, wrapped)
    idx = ctx.op("where", ctx.op("lt", idx, np.array(0, np.int64)), wrapped, idx)
    vals = ctx.known(values)
    vdt = ctx.dtype(values)
    hot = ctx.op("one_hot", idx, *extra, **dep, axis=axis, dtype=vdt)
    if vals is not None and vals.reshape(-1).tolist() == [0, 1]:
        return hot
    off = ctx.op("gather", values, np.array(0, np.int64), axis=0)
    on = ctx.op("gather", values, np.array(1, np.int64), axis=0)
    return ctx.op("add", ctx.op("mul", hot, ctx.op("sub", on, off)), off)


@converter("Trilu", since=14)
def trilu(ctx: Ctx, input, k=None, *, upper=1):  # noqa: A002
    if k is not None and ctx.known(k) is None:
        kv = ctx.int_input(k)
        return ctx.op("trilu", input, kv, upper=bool(upper), k=0)
    kk = 0 if k is None else int(ctx.scalar(k, "k"))
    return ctx.op("trilu", input, upper=bool(upper), k=kk)


@converter("DepthToSpace", since=1)
def depth_to_space(ctx: Ctx, input, *, blocksize, mode="DCR"):  # noqa: A002
    if mode == "CRD":
        return ctx.op("pixel_shuffle", input, upscale_factor=blocksize)
    return ctx.op("depth_to_space", input, blocksize=blocksize, mode=mode)


@converter("SpaceToDepth", since=1)
def space_to_depth(ctx: Ctx, input, *, blocksize, mode="DCR"):  # noqa: A002
    if mode == "CRD":  # channel c * b * b + (row * b + col) in the block: torch's pixel_unshuffle
        _, c, h, w = ctx.shape(input)
        if not all(isinstance(d, int) for d in (c, h, w)):
            raise Unsupported("SpaceToDepth mode='CRD' over run-time channel or spatial sizes")
        b = blocksize
        y = ctx.op("reshape", input, shape=[-1, c, h // b, b, w // b, b])
        y = ctx.op("transpose", y, perm=[0, 1, 3, 5, 2, 4])
        return ctx.op("reshape", y, shape=[-1, c * b * b, h // b, w // b])
    if mode != "DCR":
        raise Unsupported(f"SpaceToDepth mode={mode!r}")
    return ctx.op("space_to_depth", input, blocksize=blocksize)


def _window(ctx: Ctx, size, periodic: int, output_datatype: int, coeffs: tuple[float, ...]):
    from msc.frontend.onnx.initializers import dtype_from_onnx

    if ctx.known(size) is None:
        return _runtime_window(ctx, size, periodic, dtype_from_onnx(output_datatype), coeffs)
    n = int(ctx.scalar(size, "size"))
    ctx.check_size(n, "the window")
    denom = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    w = np.zeros(n)
    for i, a in enumerate(coeffs):
        w += a * np.cos(2 * np.pi * i * k / denom) * (-1) ** i
    return w.astype(dtype_from_onnx(output_datatype).to_numpy())


def _runtime_window(ctx: Ctx, size, periodic: int, dt: DType, coeffs: tuple[float, ...]):
    """A cosine-sum window whose length is only known at run time, in float64 then cast:
    sum_i a_i (-1)^i cos(2 pi i k / N) over k = range(size), N = size (periodic) or size - 1."""
    f64 = DType.FLOAT64
    n = ctx.op("reshape", ctx.cast(size, DType.INT64), shape=[])
    k = ctx.cast(ctx.op("range", np.array(0, np.int64), n, np.array(1, np.int64)), f64)
    denom = ctx.cast(n, f64)
    if not periodic:
        denom = ctx.op("sub", denom, np.array(1.0))
    phase = ctx.op("div", ctx.op("mul", k, np.array(2 * np.pi)), denom)
    w = None
    for i, a in enumerate(coeffs):
        term = ctx.op("cos", ctx.op("mul", phase, np.array(float(i))))
        term = ctx.op("mul", term, np.array(a * (-1) ** i))
        w = term if w is None else ctx.op("add", w, term)
    return ctx.cast(w, dt)


@converter("HannWindow", since=17)
def hann_window(ctx: Ctx, size, *, output_datatype=1, periodic=1):
    return _window(ctx, size, periodic, output_datatype, (0.5, 0.5))


@converter("HammingWindow", since=17)
def hamming_window(ctx: Ctx, size, *, output_datatype=1, periodic=1):
    return _window(ctx, size, periodic, output_datatype, (25 / 46, 21 / 46))


@converter("BlackmanWindow", since=17)
def blackman_window(ctx: Ctx, size, *, output_datatype=1, periodic=1):
    return _window(ctx, size, periodic, output_datatype, (0.42, 0.5, 0.08))
