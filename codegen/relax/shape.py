"""Relax emitters of the shape family: reshaping, slicing, indexing, scattering, creation."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from codegen.relax.registry import Emit, Unsupported, emitter, relax_dtype

R = relax.op
_BIG = 2**62


def _out_shape(e: Emit) -> list:
    e.require(e.out.shape is not None, "an output of unknown rank")
    e.require(_inferred(e), "an output dim msc could not infer")
    return e.dims(e.out.shape)


def _inferred(e: Emit) -> bool:
    """Whether msc inferred every dim of the output (a dim it could not, of an input whose
    dims were read at run time, would be a fresh symbol that nothing binds)."""
    return e.out.shape is not None and all(d is not None for d in e.out.shape)


# ``shape`` is both an optional input and an attribute of reshape, expand and full: the
# attribute arrives as a keyword, the input positionally; the output type holds the target.
@emitter("reshape")
def reshape(e: Emit, x, shape_in=None, **attrs):
    if shape_in is None:
        if _inferred(e):
            return e.emit(R.reshape(x, _out_shape(e)))
        # the target itself, its -1 left for Relax to work out from x's dims
        e.require(attrs.get("shape") is not None, "a reshape without a target")
        return e.emit(R.reshape(e.sized(x), [int(d) for d in attrs["shape"]]))
    # A run-time target (its zeros already made the input's dims): one -1 is the elements
    # left over, worked out in tensors, and the whole target read as dims.
    t = e.int64(shape_in)
    if isinstance(t, tvm.ir.GenericConst):
        return e.emit(R.reshape(x, e.ints(t)))
    x = e.sized(x)  # a value Relax knows the rank of only: its dims read at run time
    known = _known_target(e, x, t)
    if known is not None:
        return e.emit(R.reshape(x, known))
    zero, one = e.const(0, "int64"), e.const(1, "int64")
    minus = e.emit(R.equal(t, e.const(-1, "int64")))
    rest = e.emit(R.prod(R.where(minus, one, t)))
    total = e.emit(R.prod(e.shape_tensor(x)))
    t = e.emit(R.where(minus, R.floor_divide(total, R.maximum(rest, one)), t))
    # As many elements, none made up: the product in int64, and in float64 so that one
    # which wraps around to x's count does not pass.
    same = R.equal(e.emit(R.prod(t)), total)
    f64 = R.equal(e.emit(R.prod(R.astype(t, "float64"))), R.astype(total, "float64"))
    return e.emit(R.reshape(x, e.ints(t, same, f64, R.greater_equal(t, zero))))


def _known_target(e: Emit, x, t) -> list | None:
    """A run-time target whose values follow from shapes Relax knows (Emit.values), with
    its -1 worked out, when it provably keeps x's elements; else None."""
    values = e.values()
    dims = values.values(t)
    if dims is None or not all(str(d.ty) == "int64" for d in dims):
        return None
    total = values.simplify(_prod(e.shape(x)))
    minus = [i for i, d in enumerate(dims) if isinstance(d, tvm.tirx.IntImm) and int(d) == -1]
    if len(minus) > 1:
        return None
    if minus:
        rest = _prod(d for i, d in enumerate(dims) if i != minus[0])
        dims[minus[0]] = values.simplify(tvm.tirx.floordiv(total, rest))
    prove = values.analyzer.can_prove
    if not prove(values.simplify(tvm.tirx.EQ(_prod(dims), total))):
        return None
    have = e.shape(x)  # a dim of x's is a size already; anything else must be provably >= 0
    for d in dims:
        if not (
            prove(values.simplify(tvm.tirx.GE(d, tvm.tirx.IntImm("int64", 0))))
            or any(values.analyzer.can_prove_equal(d, h) for h in have)
        ):
            return None
    return [int(d) if isinstance(d, tvm.tirx.IntImm) else d for d in dims]


def _prod(dims) -> tvm.tirx.PrimExpr:
    out = tvm.tirx.IntImm("int64", 1)
    for d in dims:
        out = out * (tvm.tirx.IntImm("int64", d) if isinstance(d, int) else d)
    return out


@emitter("flatten")
def flatten(e: Emit, x, *, start_axis=0, end_axis=-1):
    if _inferred(e):
        return e.emit(R.reshape(x, _out_shape(e)))
    x = e.sized(x)  # the merged dims from x's own (see _inferred)
    shape = e.shape(x)
    if not shape:
        return e.emit(R.reshape(x, [1]))
    a, b = start_axis % len(shape), end_axis % len(shape)
    return e.emit(R.reshape(x, [*shape[:a], _prod(shape[a : b + 1]), *shape[b + 1 :]]))


@emitter("expand")
def expand(e: Emit, x, shape_in=None, **attrs):
    if shape_in is None:
        if _inferred(e) or attrs.get("shape") is None:
            return e.emit(R.broadcast_to(x, _out_shape(e)))
        # numpy's rule on x's own dims (see _inferred): a 1 or -1 keeps x's dim
        x = e.sized(x)
        t, have = [int(d) for d in attrs["shape"]], e.shape(x)
        m = max(len(t), len(have))
        t, have = [1] * (m - len(t)) + t, [1] * (m - len(have)) + have
        return e.emit(R.broadcast_to(x, [h if d in (1, -1) else d for d, h in zip(t, have)]))
    # A run-time target broadcasts with x's shape (numpy's rule, aligned at the right): a 1
    # or -1 in it takes x's dim, anything else is the dim.
    t = e.int64(shape_in)
    n, r = e.shape(t)[0], e.rank(x)
    e.require(isinstance(n, int), "expand to a run-time shape of run-time length")
    m = max(n, r)
    have = e.shape_tensor(x)
    if m > r:
        have = e.emit(R.concat([e.const(np.ones(m - r, np.int64), "int64"), have], 0))
    if m > n:
        t = e.emit(R.concat([e.const(np.ones(m - n, np.int64), "int64"), t], 0))
    one = e.const(1, "int64")
    keep = R.logical_or(R.equal(t, one), R.equal(t, e.const(-1, "int64")))
    out = e.emit(R.where(keep, have, t))
    fits = R.logical_or(R.equal(have, one), R.equal(out, have))  # numpy's broadcasting rule
    return e.emit(R.broadcast_to(x, e.ints(out, fits, R.greater_equal(out, e.const(0, "int64")))))


@emitter("transpose")
def transpose(e: Emit, x, *, perm):
    return e.emit(R.permute_dims(x, list(perm)))


@emitter("squeeze")
def squeeze(e: Emit, x, axes_in=None, *, axes=None):
    if axes_in is None:
        return e.emit(R.squeeze(x, None if axes is None else list(axes)))
    # Run-time axes: the kept dims, in order, read out of x's shape into a reshape target.
    r = e.rank(x)
    hit, named = e.axes_hit(axes_in, r)
    have = e.shape_tensor(x)
    ones = R.logical_or(R.logical_not(hit), R.equal(have, e.const(1, "int64")))
    m = r - (e.shape(axes_in)[0] if e.shape(axes_in) else 1)
    return e.emit(R.reshape(x, e.ints(e.kept_dims(hit, have, m), named, ones)))


@emitter("unsqueeze")
def unsqueeze(e: Emit, x, axes_in=None, *, axes):
    if axes_in is None:
        return e.emit(R.expand_dims(x, list(axes)))
    # Run-time axes (positions in the output): 1 there, x's dims in order elsewhere.
    r = e.rank(x)
    m = r + (e.shape(axes_in)[0] if e.shape(axes_in) else 1)
    if r == 0:
        return e.emit(R.reshape(x, [1] * m))
    hit, named = e.axes_hit(axes_in, m)
    keep = e.emit(R.astype(R.logical_not(hit), "int64"))
    pos = e.emit(R.maximum(R.subtract(R.cumsum(keep, 0), e.const(1, "int64")), e.const(0, "int64")))
    dims = e.emit(
        R.where(hit, e.const(1, "int64"), R.take(e.shape_tensor(x), pos, axis=0, mode="clip"))
    )
    return e.emit(R.reshape(x, e.ints(dims, named)))


@emitter("concat")
def concat(e: Emit, *xs, axis):
    # the other dims as the first input's, where Relax cannot prove them equal (it infers an
    # unknown shape that LegalizeOps leaves to CodeGenVM)
    first = e.sized(xs[0])
    dims = list(first.ty.shape.values)
    a = axis % len(dims) if dims else 0
    keep = [None if i == a else d for i, d in enumerate(dims)]
    return e.emit(R.concat([first, *(e.agree(x, keep) for x in xs[1:])], axis))


@emitter("split")
def split(e: Emit, x, sizes_in=None, *, axis, sizes, num_outputs=None):
    if sizes_in is not None or sizes is None:
        # Sizes read at run time, or num_outputs even pieces of a dim only known at run
        # time (ceil(dim / n) each, the last one short): a slice per piece, by dims.
        if sizes_in is not None:
            t = e.int64(sizes_in)
            dim = R.take(e.shape_tensor(x), e.const(axis % e.rank(x), "int64"), mode="clip")
            dim = e.emit(dim)
            whole = R.equal(e.emit(R.sum(t)), dim)  # each at most dim: the sum cannot wrap
            each = R.logical_and(R.greater_equal(t, e.const(0, "int64")), R.less_equal(t, dim))
            sizes = e.ints(t, whole, each)
        else:
            e.require(num_outputs is not None, "split with neither sizes nor num_outputs")
            n = e.shape(x)[axis]
            chunk = (n + num_outputs - 1) // num_outputs
            lo, hi = (min, max) if isinstance(n, int) else (tvm.tirx.min, tvm.tirx.max)
            sizes = [lo(chunk, hi(n - i * chunk, 0)) for i in range(num_outputs)]
        out, at = [], 0
        for size in sizes:
            out.append(e.emit(R.strided_slice(x, [axis], [at], [at + size])))
            at = at + size
        return out
    cuts = list(np.cumsum(sizes)[:-1].astype(int))
    if len(sizes) == 1:
        return [x]
    out = e.emit(R.split(x, [int(c) for c in cuts], axis))
    return [e.emit(relax.TupleGetItem(out, i)) for i in range(len(sizes))]


@emitter("slice")
def slice_(e: Emit, x, *runtime, starts, ends, axes, steps=()):
    if any(v is not None for v in runtime):
        return _runtime_slice(e, x, *runtime, starts=starts, ends=ends, axes=axes, steps=steps)
    steps = list(steps) or [1] * len(axes)
    if e.source_op == "relax.strided_slice":  # read from Relax: its bounds, as they were
        return e.emit(R.strided_slice(x, list(axes), list(starts), list(ends), steps))
    shape = e.shape(x)
    begin, end = [], []
    for a, s, t, st in zip(axes, starts, ends, steps):
        n = shape[a]
        begin.append(max(min(int(s), _BIG), -_BIG))
        # Past either end (ONNX writes INT64_MAX / MIN): bounds from the dim itself, so the
        # result's size has no 2**62 in it even where n is symbolic (TVM's memory planner
        # multiplies such a bound by the element size, past int64).
        if st < 0 and t < -_BIG // 2:
            end.append(-n - 1)  # "to the front": one before index 0
        elif st > 0 and t >= _BIG // 2:
            end.append(n)
        else:
            end.append(max(min(int(t), _BIG), -_BIG))
    return e.emit(R.strided_slice(x, list(axes), begin, end, steps))


def _runtime_slice(e: Emit, x, starts_in, ends_in, axes_in, steps_in, *, starts, ends, axes,
                   steps):  # fmt: skip
    """Bounds read at run time: scattered onto every dim's defaults (0, the dim, 1), clamped
    as Python's slices are, and each sliced dim read by a gather of start + i * step for i below its
    length (dynamic_strided_slice overflows on extreme bounds into negative or huge dims)."""
    r = e.rank(x)
    i64 = "int64"

    def given(t, values):
        if t is not None:
            return e.emit(R.reshape(e.int64(t), [-1]))
        return e.const(np.asarray(values, np.int64), i64)

    def c(v):
        return e.const(v, i64)

    begin, end = given(starts_in, starts), given(ends_in, ends)
    n = e.shape(begin)[0]
    e.require(isinstance(n, int), "slice bounds of run-time length")
    where = given(axes_in, list(range(n)) if axes is None else axes)
    known = where.value.numpy().tolist() if isinstance(where, tvm.ir.GenericConst) else None
    where = e.emit(R.where(R.less(where, c(0)), R.add(where, c(r)), where))
    in_range = R.logical_and(R.greater_equal(where, c(0)), R.less(where, c(r)))
    step = given(steps_in, list(steps) or [1] * n)
    valid = [e.emit(in_range), e.emit(R.not_equal(step, c(0)))]
    where = e.emit(R.clip(where, 0, r - 1))  # in range whatever the check says
    dims = e.shape_tensor(x)
    b = R.scatter_elements(e.const(np.zeros(r, np.int64), i64), where, begin, 0)
    t = R.scatter_elements(dims, where, end, 0)
    st = R.scatter_elements(e.const(np.ones(r, np.int64), i64), where, step, 0)
    st = e.emit(R.clip(e.emit(st), -(2**62), 2**62))  # |step| past any dim acts alike
    st = e.emit(R.where(R.equal(st, c(0)), c(1), st))  # a 0 (refused below) divides nothing
    up = e.emit(R.greater(st, c(0)))
    last = e.emit(R.subtract(dims, c(1)))
    b = e.emit(R.where(R.less(b, c(0)), R.add(b, dims), b))
    t = e.emit(R.where(R.less(t, c(0)), R.add(t, dims), t))
    lo, hi = e.emit(R.where(up, c(0), c(-1))), e.emit(R.where(up, dims, last))
    b = e.emit(R.minimum(R.maximum(b, lo), hi))  # Python's clamping, as canonical slice
    t = e.emit(R.minimum(R.maximum(t, lo), hi))
    span = e.emit(R.subtract(t, b))
    length = R.where(up, R.floor_divide(R.add(span, R.subtract(st, c(1))), st),
                     R.floor_divide(R.add(span, R.add(st, c(1))), st))  # fmt: skip
    length = e.emit(R.maximum(length, c(0)))
    sizes = e.ints(length, *valid)
    for d in range(r) if known is None else sorted({a % r for a in known}):
        start = e.emit(R.take(b, c(d), axis=0))
        stride = e.emit(R.take(st, c(d), axis=0))
        idx = e.emit(R.add(R.multiply(e.emit(R.arange(0, sizes[d], 1, i64)), stride), start))
        x = e.emit(R.take(x, idx, axis=d, mode="clip"))
    return x


@emitter("tile")
def tile(e: Emit, x, repeats_in=None, *, repeats):
    if repeats_in is None:
        return e.emit(R.tile(x, list(repeats)))
    # Run-time repeats: [d0, d1, ...] -> [1, d0, 1, d1, ...] -> broadcast to [r0, d0, r1, d1,
    # ...] -> [r0 * d0, r1 * d1, ...].
    reps = e.ints(repeats_in, R.greater_equal(e.int64(repeats_in), e.const(0, "int64")))
    dims = e.shape(x)
    e.require(len(reps) == len(dims), "tile with repeats not one per dim")
    y = e.emit(R.reshape(x, [v for d in dims for v in (1, d)]))
    y = e.emit(R.broadcast_to(y, [v for r, d in zip(reps, dims) for v in (r, d)]))
    return e.emit(R.reshape(y, [r * d for r, d in zip(reps, dims)]))


@emitter("flip")
def flip(e: Emit, x, *, axes):
    out = x
    for a in axes:
        out = e.emit(R.flip(out, a))
    return out


@emitter("trilu")
def trilu(e: Emit, x, k_in=None, *, upper, k=0):
    if k_in is None:
        return e.emit((R.triu if upper else R.tril)(x, k))
    # A run-time k: keep where col - row >= k (upper) or <= k (lower).
    h, w = e.shape(x)[-2:]
    k_t = e.emit(R.reshape(e.int64(k_in), []))
    rows = e.emit(R.reshape(e.emit(R.arange(0, h, 1, "int64")), [h, 1]))
    diff = e.emit(R.subtract(e.emit(R.arange(0, w, 1, "int64")), rows))  # [h, w]
    keep = e.emit((R.greater_equal if upper else R.less_equal)(diff, k_t))
    return e.emit(R.where(keep, x, R.zeros([], e.dtype(x))))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@emitter("pad")
def pad(e: Emit, x, pads_in=None, value_in=None, *, pads, mode="constant", value=0.0):
    e.require(mode in _PAD_MODES, f"pad mode {mode!r}")
    if pads_in is not None or (value_in is not None and mode == "constant"):
        return _runtime_pad(e, x, pads_in, value_in, pads=pads, mode=mode, value=value)
    n = len(pads) // 2
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
    return e.emit(R.nn.pad(x, width, _PAD_MODES[mode], value))


def _runtime_pad(e: Emit, x, pads_in, value_in, *, pads, mode, value):
    """Pads (or a fill value) read at run time: nn.pad takes constants, so each dim is read
    through a gather of x at the padded positions' source indices (clamped, reflected or
    wrapped by the mode; for a constant pad, x with one fill element appended, at its index
    outside x). A negative pad crops the same way."""
    r = e.rank(x)
    if pads_in is None:
        width = list(pads)
    else:  # every padded size at least 0; edge, reflect and wrap read a dim of at least 1
        t = e.int64(pads_in)
        e.require(e.shape(t) == [2 * r], "pads not two per dim")
        head = e.emit(R.strided_slice(t, [0], [0], [r]))
        tail = e.emit(R.strided_slice(t, [0], [r], [2 * r]))
        zero = e.const(0, "int64")
        big = e.const(2**62, "int64")  # a pad past any size acts alike: no sum wraps
        valid = [R.greater_equal(R.add(R.add(e.shape_tensor(x), head), tail), zero),
                 R.less_equal(t, big), R.greater_equal(t, R.negative(big))]  # fmt: skip
        if mode != "constant":  # a dim padded by them is not empty
            still = R.logical_and(R.equal(head, zero), R.equal(tail, zero))
            valid.append(R.logical_or(R.greater(e.shape_tensor(x), zero), still))
        width = e.ints(t, *valid)
    e.require(len(width) == 2 * r, "pads not two per dim")
    fill = value_in if value_in is not None else e.const(value, e.dtype(x))
    if value_in is not None:
        fill = e.emit(R.reshape(fill, []))
    i64, zero = "int64", e.const(0, "int64")
    for a in range(r):
        before, after = width[a], width[r + a]
        if isinstance(before, int) and isinstance(after, int) and before == after == 0:
            continue
        n = e.shape(x)[a]
        if isinstance(n, int):
            size = e.const(n, i64)
        else:
            size = e.emit(R.take(e.shape_tensor(x), e.const(a, i64), axis=0, mode="clip"))
        one = e.const(1, i64)
        last = e.emit(R.maximum(R.subtract(size, one), zero))
        idx = e.emit(R.arange(-before, n + after, 1, i64))  # source index of each position
        if mode == "constant":
            block = list(e.shape(x))
            block[a] = 1
            x = e.emit(R.concat([x, e.emit(R.broadcast_to(fill, block))], a))
            inside = R.logical_and(R.greater_equal(idx, zero), R.less(idx, size))
            src = e.emit(R.where(inside, idx, size))  # outside: the fill at index n
        elif mode == "reflect":
            period = e.emit(R.maximum(R.add(last, last), one))
            j = e.emit(R.floor_mod(idx, period))
            src = e.emit(R.where(R.greater_equal(j, size), R.subtract(period, j), j))
        elif mode == "wrap":
            src = e.emit(R.floor_mod(idx, R.maximum(size, one)))
        else:
            src = e.emit(R.minimum(R.maximum(idx, zero), last))
        x = e.emit(R.take(x, src, axis=a, mode="clip"))
    return x


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
    return e.emit(R.where(R.less(idx, e.const(0, dt)), R.add(idx, _size(e, n, dt)), idx))


def _size(e: Emit, n, dt: str):
    """The dim ``n`` as a 0-d tensor of ``dt`` (a run-time dim through a shape tensor)."""
    if isinstance(n, int):
        return e.const(n, dt)
    size = e.emit(R.reshape(R.shape_to_tensor(relax.ShapeExpr([n])), []))
    return size if dt == "int64" else e.emit(R.astype(size, dt))


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
    return _norm_index(e, indices, e.shape(x)[axis])


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
    if shape_in is not None:  # a run-time shape, read as dims
        dims = e.ints(shape_in, R.greater_equal(e.int64(shape_in), e.const(0, "int64")))
        return e.emit(R.full(dims, e.const(value, dtype), relax_dtype(dtype)))
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
    dt = relax_dtype(dtype)
    if depth_in is not None:
        # A run-time depth: compare the indices (negatives counted from the end) with an
        # arange of depth on the new axis.
        d = e.emit(R.reshape(e.int64(depth_in), []))
        (n,) = e.ints(d, R.greater_equal(d, e.const(0, "int64")))
        i = e.int64(indices)
        i = e.emit(R.where(R.less(i, e.const(0, "int64")), R.add(i, d), i))
        r = e.rank(indices) + 1
        a = axis % r
        i = e.emit(R.expand_dims(i, [a]))
        shape = [1] * r
        shape[a] = n
        ar = e.emit(R.reshape(e.emit(R.arange(0, n, 1, "int64")), shape))
        return e.emit(R.astype(R.equal(i, ar), dt))
    on = relax.prim_value(tvm.tirx.const(1, dt))
    off = relax.prim_value(tvm.tirx.const(0, dt))
    return e.emit(R.one_hot(indices, on, off, depth, axis))
