"""Shape and data-movement ops, and ops that make tensors (constant, arange, full).

# NOTE: static shapes live in attributes (``reshape`` shape, ``slice`` starts/ends) so analyses
# can read them; ``-1`` in a reshape target means "infer this dim". Dynamic targets computed at
# run time come through the optional tensor input of ``reshape``/``expand``.
"""

from __future__ import annotations

import numpy as np

from msc.ir import symexpr
from msc.ir.dtype import DType
from msc.ir.types import Dim, TensorType
from msc.ops import registry
from msc.ops.infer import InferError, broadcast, dim_add, dim_mul, known, same_dtype
from msc.ops.infer import axes as norm_axes
from msc.ops.infer import axis as norm_axis
from msc.ops.schema import Attr

INT_MAX = 2**63 - 1


def _prod(dims) -> Dim:
    return dim_mul(*dims)


@registry.op(
    "reshape",
    ["x", "shape?"],
    {"shape": Attr.ints(None, doc="target; one -1 = inferred. None: from the shape input")},
    category="shape",
)
def reshape(x, shape_in, *, shape):
    """Same data in a new shape (row-major)."""
    if shape is None:
        if shape_in is None:
            raise InferError("reshape: needs a shape attribute or a shape input")
        if shape_in.shape is None or not known(shape_in.shape[0]):
            return TensorType(x.dtype, None)
        return TensorType(x.dtype, (None,) * shape_in.shape[0])
    if shape_in is not None:
        raise InferError("reshape: give the shape as an attribute or an input, not both")
    if sum(1 for d in shape if d == -1) > 1:
        raise InferError(f"reshape: more than one -1 in {list(shape)}")
    if any(d < -1 for d in shape):
        raise InferError(f"reshape: bad target {list(shape)}")
    total = _prod(x.shape) if x.shape is not None else None
    out: list[Dim] = []
    for d in shape:
        out.append(d if d != -1 else None)
    if -1 in shape:
        rest = _prod(d for d in shape if d != -1)
        if total is not None and rest:
            if known(total) and total % rest:
                raise InferError(f"reshape: cannot view {x.shape} as {list(shape)}")
            # Exact when rest divides the symbolic total (b*s*768 / 768 = b*s).
            out[shape.index(-1)] = symexpr.floordiv(total, rest)
    elif known(total) and _prod(shape) != total:
        raise InferError(f"reshape: {total} elements cannot take shape {list(shape)}")
    return TensorType(x.dtype, out)


@registry.op("transpose", ["x"], {"perm": Attr.ints()}, category="shape")
def transpose(x, *, perm):
    """Permute dims: out.shape[i] = x.shape[perm[i]]."""
    if x.shape is None:
        return x
    if sorted(perm) != list(range(len(x.shape))):
        raise InferError(
            f"transpose: perm {list(perm)} is not a permutation of rank {len(x.shape)}"
        )
    return TensorType(x.dtype, [x.shape[p] for p in perm])


def _runtime_list(t: TensorType | None, op: str, what: str) -> Dim:
    """The length of a run-time 1-d integer input (axes, pads, repeats, ...), or None."""
    if t is None:
        return None
    if t.rank != 1 or not (t.dtype.is_integer):
        raise InferError(f"{op}: run-time {what} must be a 1-d integer tensor, got {t}")
    return t.shape[0]  # type: ignore[index]


def _runtime_int(t: TensorType | None, op: str, what: str) -> None:
    if t is not None and (t.rank not in (0, 1) or t.numel() not in (1, None)):
        raise InferError(f"{op}: run-time {what} must hold one integer, got {t}")


def _one_source(op: str, what: str, attr, given) -> None:
    if (attr is None) == (given is None):
        raise InferError(f"{op}: give {what} as an attribute or a run-time input (one of them)")


@registry.op(
    "squeeze",
    ["x", "axes?"],
    {"axes": Attr.ints(None, doc="none = every size-1 dim (or the run-time axes input)")},
    category="shape",
)
def squeeze(x, axes_in, *, axes):
    """Drop size-1 dims (``axes``, or a 1-d i64 input read at run time)."""
    if x.shape is None:
        return x
    if axes_in is not None:
        if axes is not None:
            raise InferError("squeeze: give the axes as an attribute or an input, not both")
        n = _runtime_list(axes_in, "squeeze", "axes")
        if not known(n):
            return TensorType(x.dtype, None)
        if n == 0:  # every size-1 dim
            return squeeze(x, None, axes=None)
        left = [d for d in x.shape if d != 1]
        if (
            all(known(d) for d in x.shape) and len(left) == len(x.shape) - n
        ):  # the known size-1 dims are the squeezed ones
            return TensorType(x.dtype, left)
        return TensorType(x.dtype, (None,) * (len(x.shape) - n))
    if axes is None:
        if not all(known(d) for d in x.shape):
            return TensorType(x.dtype, None)
        return TensorType(x.dtype, [d for d in x.shape if d != 1])
    ax = set(norm_axes(axes, len(x.shape)))
    for a in ax:
        if known(x.shape[a]) and x.shape[a] != 1:
            raise InferError(f"squeeze: dim {a} has size {x.shape[a]}, not 1")
    return TensorType(x.dtype, [d for i, d in enumerate(x.shape) if i not in ax])


@registry.op(
    "unsqueeze",
    ["x", "axes?"],
    {"axes": Attr.ints(None, doc="None: from the run-time axes input")},
    category="shape",
)
def unsqueeze(x, axes_in, *, axes):
    """Insert size-1 dims at ``axes`` (positions in the output; or a run-time 1-d i64 input)."""
    _one_source("unsqueeze", "the axes", axes, axes_in)
    if x.shape is None:
        return x
    if axes_in is not None:
        n = _runtime_list(axes_in, "unsqueeze", "axes")
        if not known(n):
            return TensorType(x.dtype, None)
        if all(d == 1 for d in x.shape):
            return TensorType(x.dtype, (1,) * (len(x.shape) + n))
        return TensorType(x.dtype, (None,) * (len(x.shape) + n))
    r = len(x.shape) + len(axes)
    ax = set(norm_axes(axes, r))
    it = iter(x.shape)
    return TensorType(x.dtype, [1 if i in ax else next(it) for i in range(r)])


@registry.op(
    "flatten", ["x"], {"start_axis": Attr.int(0), "end_axis": Attr.int(-1)}, category="shape"
)
def flatten(x, *, start_axis, end_axis):
    """Merge dims start_axis..end_axis (inclusive) into one (torch.flatten)."""
    if x.shape is None:
        return x
    r = len(x.shape)
    if r == 0:
        return TensorType(x.dtype, (1,))
    s, e = norm_axis(start_axis, r), norm_axis(end_axis, r)
    if s > e:
        raise InferError(f"flatten: start {start_axis} is after end {end_axis}")
    return TensorType(x.dtype, (*x.shape[:s], _prod(x.shape[s : e + 1]), *x.shape[e + 1 :]))


def _slice_len(d: Dim, start: int, end: int, step: int) -> Dim:
    if d is None:
        return None
    if known(d):
        return len(range(*slice(start, end, step).indices(d)))  # type: ignore[arg-type]
    if step < 1:
        return None
    # A symbolic size: exact where its range says no bound is clamped.
    lo = start if start >= 0 else symexpr.add(d, start)
    hi = d if end >= _end_of(d) else (end if end >= 0 else symexpr.add(d, end))
    if start < 0 and not symexpr.at_least(d, -start):
        return None
    if end >= 0 and end < _end_of(d) and not symexpr.at_least(d, end):
        return None
    if end < 0 and not symexpr.at_least(d, -end):
        return None
    n = symexpr.sub(hi, lo)
    if not symexpr.at_least(n, 0):
        return None
    return symexpr.ceildiv(n, step) if step > 1 else n


def _end_of(d: Dim) -> int:
    """An end at or past which a slice of ``d`` runs to the end: its largest value, or any
    end from 2**31 (what exporters write for "to the end") when unbounded."""
    _, hi = symexpr.bounds(d)
    return min(hi, 2**31 - 1) if hi is not None else 2**31 - 1


@registry.op(
    "slice",
    ["x", "starts?", "ends?", "axes?", "steps?"],
    {
        "starts": Attr.ints(None, doc="None: starts and ends are run-time inputs"),
        "ends": Attr.ints(None),
        "axes": Attr.ints(None, doc="None with run-time bounds: the axes input, else 0, 1, ..."),
        "steps": Attr.ints(()),
    },
    category="shape",
)
def slice_(x, starts_in, ends_in, axes_in, steps_in, *, starts, ends, axes, steps):
    """x[start:end:step] along each axis (Python slice semantics, clamped; ends may be huge).
    Bounds computed at run time come as 1-d i64 inputs (starts and ends together; axes and
    steps as attributes when known, else as inputs too)."""
    if starts_in is not None or ends_in is not None:
        return _runtime_slice(x, starts_in, ends_in, axes_in, steps_in, starts, ends, axes, steps)
    if axes_in is not None or steps_in is not None or axes is None or starts is None:
        raise InferError("slice: static starts/ends/axes with run-time axes or steps")
    if not len(starts) == len(ends) == len(axes) or (steps and len(steps) != len(axes)):
        raise InferError("slice: starts, ends, axes (and steps) must have one length")
    if x.shape is None:
        return x
    steps = steps or (1,) * len(axes)
    if 0 in steps:
        raise InferError("slice: step 0")
    shape = list(x.shape)
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        a = norm_axis(ax, len(shape))
        shape[a] = _slice_len(shape[a], st, en, sp)
    return TensorType(x.dtype, shape)


def _runtime_slice(x, starts_in, ends_in, axes_in, steps_in, starts, ends, axes, steps):
    if starts_in is None or ends_in is None or starts is not None or ends is not None:
        raise InferError("slice: give starts and ends both as attributes or both as inputs")
    if axes is not None and axes_in is not None or steps and steps_in is not None:
        raise InferError("slice: axes and steps as an attribute or an input, not both")
    n = _runtime_list(starts_in, "slice", "starts")
    _runtime_list(ends_in, "slice", "ends")
    _runtime_list(axes_in, "slice", "axes")
    _runtime_list(steps_in, "slice", "steps")
    if x.shape is None:
        return x
    r = len(x.shape)
    if axes is not None:
        cut = set(norm_axes(axes, r))
    elif axes_in is None and known(n):
        cut = set(range(n))  # type: ignore[arg-type]
    else:
        cut = set(range(r))
    return TensorType(x.dtype, [None if i in cut else d for i, d in enumerate(x.shape)])


@registry.op("concat", ["*xs"], {"axis": Attr.int()}, category="shape")
def concat(xs, *, axis):
    """Join along ``axis``."""
    dt = same_dtype(*xs)
    if any(x.shape is None for x in xs):
        return TensorType(dt, None)
    r = len(xs[0].shape)
    if any(len(x.shape) != r for x in xs):
        raise InferError("concat: inputs differ in rank")
    a = norm_axis(axis, r)
    shape = list(xs[0].shape)
    sizes = [x.shape[a] for x in xs]
    shape[a] = dim_add(*sizes)
    return TensorType(dt, shape)


def _split_outputs(a) -> int:
    return len(a["sizes"]) if a.get("sizes") is not None else int(a["num_outputs"] or 0)


@registry.op(
    "split",
    ["x", "sizes?"],
    {
        "axis": Attr.int(),
        "sizes": Attr.ints(None, doc="None: the run-time sizes input, or num_outputs even parts"),
        "num_outputs": Attr.int(None, doc="with sizes None: the number of pieces"),
    },
    outputs=_split_outputs,
    category="shape",
)
def split(x, sizes_in, *, axis, sizes, num_outputs):
    """Cut along ``axis`` into pieces of the given sizes; or, when the sizes are only known at
    run time, by a 1-d i64 input, or into num_outputs pieces of ceil(dim / num_outputs) (the
    last one smaller)."""
    if sizes is None:
        if sizes_in is not None and num_outputs is None:
            raise InferError("split: run-time sizes need num_outputs")
        if not num_outputs or num_outputs < 1:
            raise InferError("split: needs sizes, or num_outputs >= 1")
        if sizes_in is not None and known(_runtime_list(sizes_in, "split", "sizes")):
            if sizes_in.shape[0] != num_outputs:  # type: ignore[index]
                raise InferError(f"split: {sizes_in} sizes for {num_outputs} outputs")
        if x.shape is None:
            return [x] * num_outputs
        a = norm_axis(axis, len(x.shape))
        d = x.shape[a]
        if sizes_in is None and known(d):  # an even split of a known dim
            chunk = -(-d // num_outputs)  # type: ignore[operator]
            sizes = [min(chunk, max(d - i * chunk, 0)) for i in range(num_outputs)]
            return split(x, None, axis=axis, sizes=sizes, num_outputs=None)
        return [TensorType(x.dtype, [None if i == a else v for i, v in enumerate(x.shape)])] * (
            num_outputs
        )
    if sizes_in is not None:
        raise InferError("split: give the sizes as an attribute or an input, not both")
    if x.shape is None:
        return [x] * len(sizes)
    a = norm_axis(axis, len(x.shape))
    if known(x.shape[a]) and sum(sizes) != x.shape[a]:
        raise InferError(f"split: sizes {list(sizes)} do not add up to {x.shape[a]}")
    return [TensorType(x.dtype, [s if i == a else d for i, d in enumerate(x.shape)]) for s in sizes]


def _int_index(t: TensorType, what: str) -> None:
    if t.dtype not in (DType.INT32, DType.INT64):
        raise InferError(f"{what}: indices must be i32 or i64, got {t.dtype.short}")


@registry.op("gather", ["x", "indices"], {"axis": Attr.int(0)}, category="index")
def gather(x, indices, *, axis):
    """numpy.take along axis: out = x[..., indices, ...] (ONNX Gather, torch index_select)."""
    _int_index(indices, "gather")
    if x.shape is None or indices.shape is None:
        return TensorType(x.dtype, None)
    a = norm_axis(axis, len(x.shape))
    return TensorType(x.dtype, (*x.shape[:a], *indices.shape, *x.shape[a + 1 :]))


# ONNX's GatherElements and ScatterElements count a negative index from the end; torch.gather
# and torch.scatter refuse one. The flag says which the node's indices may hold, so a codegen
# wraps them at run time only where the source allowed negatives.
NEGATIVE_INDICES = Attr.bool(
    False, doc="indices may be in [-dim, -1], counted from the end (ONNX); False: in [0, dim)"
)


@registry.op(
    "gather_elements",
    ["x", "indices"],
    {"axis": Attr.int(), "negative_indices": NEGATIVE_INDICES},
    category="index",
)
def gather_elements(x, indices, *, axis, negative_indices):
    """`out[i][j] = x[indices[i][j]][j]` for axis 0 (torch.gather, ONNX GatherElements)."""
    _int_index(indices, "gather_elements")
    return TensorType(x.dtype, indices.shape)


@registry.op("gather_nd", ["x", "indices"], {"batch_dims": Attr.int(0)}, category="index")
def gather_nd(x, indices, *, batch_dims):
    """ONNX GatherND (a negative index entry counts from the end, as in ONNX)."""
    _int_index(indices, "gather_nd")
    if x.shape is None or indices.shape is None or not known(indices.shape[-1]):
        return TensorType(x.dtype, None)
    k = indices.shape[-1]
    return TensorType(x.dtype, (*indices.shape[:-1], *x.shape[batch_dims + k :]))


SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


@registry.op(
    "scatter_elements",
    ["x", "indices", "updates"],
    {
        "axis": Attr.int(),
        "reduction": Attr.str("none", doc="none|add|mul|max|min"),
        "negative_indices": NEGATIVE_INDICES,
    },
    category="index",
)
def scatter_elements(x, indices, updates, *, axis, reduction, negative_indices):
    """Copy of x with updates written at indices along axis (torch.scatter, ONNX
    ScatterElements)."""
    _int_index(indices, "scatter_elements")
    if reduction not in SCATTER_REDUCTIONS:
        raise InferError(f"scatter_elements: reduction {reduction!r} not in {SCATTER_REDUCTIONS}")
    same_dtype(x, updates)
    return x


@registry.op(
    "scatter_nd", ["x", "indices", "updates"], {"reduction": Attr.str("none")}, category="index"
)
def scatter_nd(x, indices, updates, *, reduction):
    """ONNX ScatterND: x with updates written at index tuples (negatives count from the end)."""
    _int_index(indices, "scatter_nd")
    same_dtype(x, updates)
    return x


@registry.op(
    "index",
    ["x", "*indices"],
    {"axes": Attr.ints(doc="which dim each index tensor indexes")},
    category="index",
    min_variadic=1,
)
def index(x, indices, *, axes):
    """Advanced indexing x[..., i0, i1, ...] with broadcasting index tensors on ``axes``
    (torch x[idx] / aten.index.Tensor). Bool masks are not accepted: use nonzero first."""
    if len(indices) != len(axes):
        raise InferError(f"index: {len(indices)} index tensors for axes {list(axes)}")
    for t in indices:
        _int_index(t, "index")
    if x.shape is None:
        return TensorType(x.dtype, None)
    r = len(x.shape)
    ax = [norm_axis(a, r) for a in axes]
    b = broadcast(*indices)
    if b is None:
        return TensorType(x.dtype, None)
    rest = [d for i, d in enumerate(x.shape) if i not in ax]
    contiguous = ax == list(range(ax[0], ax[0] + len(ax)))
    if contiguous:
        first = ax[0]
        before = [d for i, d in enumerate(x.shape[:first])]
        after = [d for i, d in enumerate(x.shape) if i > ax[-1]]
        return TensorType(x.dtype, (*before, *b, *after))
    return TensorType(x.dtype, (*b, *rest))


@registry.op(
    "index_put",
    ["x", "values", "*indices"],
    {"axes": Attr.ints(), "accumulate": Attr.bool(False)},
    category="index",
)
def index_put(x, values, indices, *, axes, accumulate):
    """Copy of x with x[indices on axes] = values (or += with accumulate)."""
    same_dtype(x, values)
    return x


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@registry.op(
    "pad",
    ["x", "pads?", "value?"],
    {
        "pads": Attr.ints(None, doc="[begin per dim..., end per dim...]; negative crops"),
        "mode": Attr.str("constant", doc="constant | reflect | edge | wrap"),
        "value": Attr.float(0.0),
    },
    category="shape",
)
def pad(x, pads_in, value_in, *, pads, mode, value):
    """Pad every dim (ONNX Pad layout: all begins, then all ends). Pads computed at run time
    come as a 1-d i64 input, a run-time fill value as a 0-d input of x's dtype."""
    if mode not in PAD_MODES:
        raise InferError(f"pad: mode {mode!r} not in {PAD_MODES}")
    _one_source("pad", "the pads", pads, pads_in)
    if value_in is not None and value_in.numel() not in (1, None):
        raise InferError(f"pad: the run-time value must hold one element, got {value_in}")
    if x.shape is None:
        return x
    if pads_in is not None:
        n = _runtime_list(pads_in, "pad", "pads")
        if known(n) and n != 2 * len(x.shape):
            raise InferError(f"pad: {n} run-time pads for rank {len(x.shape)}")
        return TensorType(x.dtype, (None,) * len(x.shape))
    r = len(x.shape)
    if len(pads) != 2 * r:
        raise InferError(f"pad: {len(pads)} pads for rank {r} (need {2 * r})")
    return TensorType(
        x.dtype,
        [dim_add(d, pads[i] + pads[r + i]) for i, d in enumerate(x.shape)],
    )


@registry.op(
    "expand", ["x", "shape?"], {"shape": Attr.ints(None, doc="-1 keeps a dim")}, category="shape"
)
def expand(x, shape_in, *, shape):
    """Broadcast x to ``shape`` (numpy broadcasting; -1 keeps the input's dim)."""
    if shape is None:
        if shape_in is None or shape_in.shape is None or not known(shape_in.shape[0]):
            return TensorType(x.dtype, None)
        n = shape_in.shape[0]
        if x.shape is not None and len(x.shape) > n:
            n = len(x.shape)
        return TensorType(x.dtype, (None,) * n)
    if x.shape is None:
        return TensorType(x.dtype, [None if d == -1 else d for d in shape])
    if len(shape) < len(x.shape):
        raise InferError(f"expand: target {list(shape)} has lower rank than {x.shape}")
    pad_ = [1] * (len(shape) - len(x.shape)) + list(x.shape)
    out = [p if s == -1 else s for s, p in zip(shape, pad_)]
    return TensorType(x.dtype, broadcast(TensorType(x.dtype, pad_), TensorType(x.dtype, out)))


@registry.op(
    "tile",
    ["x", "repeats?"],
    {"repeats": Attr.ints(None, doc="None: the run-time repeats input (one per dim)")},
    category="shape",
)
def tile(x, repeats_in, *, repeats):
    """Repeat the whole tensor along each dim (numpy.tile, ONNX Tile, torch repeat)."""
    _one_source("tile", "the repeats", repeats, repeats_in)
    if x.shape is None:
        return x
    if repeats_in is not None:
        n = _runtime_list(repeats_in, "tile", "repeats")
        if known(n) and n != len(x.shape):
            raise InferError(f"tile: {n} run-time repeats for rank {len(x.shape)}")
        return TensorType(x.dtype, [0 if d == 0 else None for d in x.shape])
    if len(repeats) < len(x.shape):
        repeats = (1,) * (len(x.shape) - len(repeats)) + tuple(repeats)
    shape = [1] * (len(repeats) - len(x.shape)) + list(x.shape)
    return TensorType(x.dtype, [dim_mul(d, r) for d, r in zip(shape, repeats)])


@registry.op("flip", ["x"], {"axes": Attr.ints()}, category="shape")
def flip(x, *, axes):
    """Reverse the order along axes."""
    return x


@registry.op("roll", ["x"], {"shifts": Attr.ints(), "axes": Attr.ints()}, category="shape")
def roll(x, *, shifts, axes):
    """Rotate elements along axes by shifts."""
    return x


@registry.op("trilu", ["x", "k?"], {"upper": Attr.bool(), "k": Attr.int(0)}, category="shape")
def trilu(x, k_in, *, upper, k):
    """Keep the upper (triu) or lower (tril) triangle of the last two dims, offset k (or a
    one-integer input read at run time, which then replaces the attribute)."""
    _runtime_int(k_in, "trilu", "k")
    return x


@registry.op("shape", ["x"], {"start": Attr.int(0), "end": Attr.int(None)}, category="shape")
def shape_(x, *, start, end):
    """The shape of x as a 1-d i64 tensor (dims start..end)."""
    if x.shape is None:
        return TensorType(DType.INT64, (None,))
    return TensorType(DType.INT64, (len(x.shape[start:end]),))


@registry.op("constant", [], {"value": Attr.tensor()}, category="create")
def constant(*, value: np.ndarray):
    """A tensor held in the node (small constants; large ones are weights)."""
    return TensorType(DType.from_numpy(value.dtype), value.shape)


@registry.op(
    "arange",
    [],
    {"start": Attr.float(0.0), "end": Attr.float(), "step": Attr.float(1.0), "dtype": Attr.dtype()},
    category="create",
)
def arange(*, start, end, step, dtype):
    """[start, start+step, ...) up to end, as dtype."""
    if step == 0:
        raise InferError("arange: step 0")
    n = max(0, int(np.ceil((end - start) / step)))
    return TensorType(dtype, (n,))


@registry.op(
    "full",
    ["shape?"],
    {"shape": Attr.ints(None), "value": Attr.float(0.0), "dtype": Attr.dtype()},
    category="create",
)
def full(shape_in, *, shape, value, dtype):
    """A tensor of ``shape`` filled with ``value`` (shape from the attribute or an i64 input)."""
    if shape is not None:
        return TensorType(dtype, shape)
    if shape_in is None or shape_in.shape is None or not known(shape_in.shape[0]):
        return TensorType(dtype, None)
    return TensorType(dtype, (None,) * shape_in.shape[0])


@registry.op(
    "full_like", ["x"], {"value": Attr.float(0.0), "dtype": Attr.dtype(None)}, category="create"
)
def full_like(x, *, value, dtype):
    """A tensor shaped like x filled with value (dtype defaults to x's)."""
    return TensorType(dtype or x.dtype, x.shape)


@registry.op(
    "one_hot",
    ["indices", "depth?"],
    {
        "depth": Attr.int(None, doc="None: the run-time depth input (one integer)"),
        "axis": Attr.int(-1),
        "dtype": Attr.dtype(DType.INT64),
    },
    category="create",
)
def one_hot(indices, depth_in, *, depth, axis, dtype):
    """One-hot encode integer indices into a new axis of size depth."""
    _one_source("one_hot", "the depth", depth, depth_in)
    _runtime_int(depth_in, "one_hot", "depth")
    if indices.shape is None:
        return TensorType(dtype, None)
    r = len(indices.shape) + 1
    a = norm_axis(axis, r)
    shape = list(indices.shape)
    shape.insert(a, depth)
    return TensorType(dtype, shape)


@registry.op("nonzero", ["x"], category="index")
def nonzero(x):
    """Indices of non-zero elements, [count, rank] i64 (torch.nonzero layout; count is
    data-dependent)."""
    return TensorType(DType.INT64, (None, x.rank))


@registry.op(
    "depth_to_space", ["x"], {"blocksize": Attr.int(), "mode": Attr.str("DCR")}, category="shape"
)
def depth_to_space(x, *, blocksize, mode):
    """ONNX DepthToSpace (DCR or CRD)."""
    b = blocksize
    n, c, h, w = x.shape
    mul = lambda d: dim_mul(d, b)  # noqa: E731
    return TensorType(x.dtype, (n, c // (b * b) if known(c) else None, mul(h), mul(w)))


@registry.op("space_to_depth", ["x"], {"blocksize": Attr.int()}, category="shape")
def space_to_depth(x, *, blocksize):
    """ONNX SpaceToDepth."""
    b = blocksize
    n, c, h, w = x.shape
    div = lambda d: d // b if known(d) else None  # noqa: E731
    return TensorType(x.dtype, (n, c * b * b if known(c) else None, div(h), div(w)))
