"""Emitters for shape and data-movement ops, indexing, and ops that make tensors.

# NOTE: static attributes (reshape targets, slice bounds, pads, axes) become int64 Constant
# inputs from the opset where ONNX moved them from attributes to inputs; a dynamic target the
# graph computes (the optional shape input) passes through unchanged.
"""

from __future__ import annotations

import numpy as np

from codegen.onnx.registry import ONNX_DTYPE, Emit, Ref, Unsupported, emitter
from msc.ir.dtype import DType
from msc.ops.infer import broadcast

INT64_MAX = 2**63 - 1


@emitter("reshape", since=5)
def reshape(e: Emit, x: Ref, shape_in: Ref | None, *, shape) -> Ref:
    if shape is None:
        # A runtime target: 0 means a zero-size dim (canonical), which is allowzero=1. Before
        # opset 14 ONNX would copy the input's dim instead; targets rarely hold 0 at run time.
        return e.op("Reshape", x, shape_in, allowzero=1 if e.opset >= 14 else None)
    if 0 in shape:
        e.require(e.opset >= 14, "Reshape to a zero-size dim needs allowzero (opset 14)")
        return e.op("Reshape", x, e.ints(shape), allowzero=1)
    return e.op("Reshape", x, e.ints(shape))


@emitter("transpose", since=1)
def transpose(e: Emit, x: Ref, *, perm) -> Ref:
    return e.op("Transpose", x, perm=list(perm))


def _axes_op(onnx_op: str, as_input: bool):
    def emit(e: Emit, x: Ref, axes_in: Ref | None = None, *, axes) -> Ref:
        if axes_in is not None:
            e.require(as_input, f"{onnx_op} with run-time axes needs opset 13")
            return e.op(onnx_op, x, axes_in)
        if axes is None:
            return e.op(onnx_op, x)
        if as_input:
            return e.op(onnx_op, x, e.ints(axes))
        return e.op(onnx_op, x, axes=list(axes))

    return emit


for _op, _onnx in (("squeeze", "Squeeze"), ("unsqueeze", "Unsqueeze")):
    emitter.register(_op, 1, _axes_op(_onnx, as_input=False))
    emitter.register(_op, 13, _axes_op(_onnx, as_input=True))


def _shape_slice(e: Emit, shape: Ref, start: int, end: int) -> Ref:
    if e.opset >= 10:
        return e.op("Slice", shape, e.ints([start]), e.ints([end]), e.ints([0]))
    return e.op("Slice", shape, starts=[start], ends=[end], axes=[0])


@emitter("flatten", since=5)
def flatten(e: Emit, x: Ref, *, start_axis, end_axis) -> Ref:
    r = x.rank
    if r == 0:
        return e.op("Reshape", x, e.ints([1]))
    s, t = start_axis % r, end_axis % r
    if (s, t) in ((1, r - 1), (0, r - 2)):  # a 2-d result: ONNX's own Flatten
        return e.op("Flatten", x, axis=1 if s == 1 else r - 1)
    after = x.shape[t + 1 :]
    if all(isinstance(d, int) for d in after):
        return e.op("Reshape", x, e.ints([0] * s + [-1] + list(after)))
    shape = e.op("Shape", x)
    parts = [_shape_slice(e, shape, 0, s)] if s else []
    parts += [e.ints([-1]), _shape_slice(e, shape, t + 1, r)]
    return e.op("Reshape", x, e.op("Concat", *parts, axis=0))


@emitter("slice", since=1)
def slice_1(e: Emit, x: Ref, *runtime: Ref | None, starts, ends, axes, steps) -> Ref:
    e.require(not any(r is not None for r in runtime), "Slice with run-time bounds needs 10")
    e.require(all(s == 1 for s in steps), "Slice steps need opset 10")
    return e.op("Slice", x, starts=list(starts), ends=list(ends), axes=list(axes))


@emitter("slice", since=10)
def slice_10(
    e: Emit,
    x: Ref,
    starts_in: Ref | None = None,
    ends_in: Ref | None = None,
    axes_in: Ref | None = None,
    steps_in: Ref | None = None,
    *,
    starts,
    ends,
    axes,
    steps,
) -> Ref:
    if starts_in is not None:  # run-time bounds pass through
        ax = axes_in if axes_in is not None else None if axes is None else e.ints(axes)
        st = steps_in if steps_in is not None else e.ints(steps) if steps else None
        if st is not None and ax is None:
            ax = e.op(
                "Range", e.scalar(0, DType.INT64), e.op("Size", starts_in), e.scalar(1, DType.INT64)
            )
        return e.op("Slice", x, starts_in, ends_in, ax, st)
    st = e.ints(steps) if steps and any(s != 1 for s in steps) else None
    return e.op("Slice", x, e.ints(starts), e.ints(ends), e.ints(axes), st)


@emitter("concat", since=4)
def concat(e: Emit, *xs: Ref, axis) -> Ref:
    return e.op("Concat", *xs, axis=axis)


@emitter("split", since=2)
def split_2(e: Emit, x: Ref, sizes_in: Ref | None = None, *, axis, sizes, num_outputs):
    e.require(sizes is not None, "Split with run-time sizes needs opset 13")
    return e.op("Split", x, outputs=len(sizes), axis=axis, split=list(sizes))


@emitter("split", since=13)
def split_13(e: Emit, x: Ref, sizes_in: Ref | None = None, *, axis, sizes, num_outputs):
    if sizes is None and sizes_in is not None:
        return e.op("Split", x, sizes_in, outputs=num_outputs, axis=axis)
    if sizes is None and e.opset >= 18:
        return e.op("Split", x, outputs=num_outputs, axis=axis, num_outputs=num_outputs)
    if sizes is None:  # before 18: the sizes min(chunk, max(dim - i * chunk, 0)) at run time
        i64 = DType.INT64
        dim = e.op("Gather", e.op("Shape", x), e.ints([axis]), axis=0)
        n = e.scalar(num_outputs, i64)
        chunk = e.op("Div", e.op("Add", dim, e.scalar(num_outputs - 1, i64)), n)
        left = e.op("Sub", dim, e.op("Mul", chunk, e.ints(range(num_outputs))))
        sizes_in = e.op("Min", chunk, e.op("Max", left, e.scalar(0, i64)))
        return e.op("Split", x, sizes_in, outputs=num_outputs, axis=axis)
    return e.op("Split", x, e.ints(sizes), outputs=len(sizes), axis=axis)


@emitter("gather", since=1)
def gather(e: Emit, x: Ref, indices: Ref, *, axis) -> Ref:
    return e.op("Gather", x, indices, axis=axis)


# GatherElements/ScatterElements take negative indices whatever ``negative_indices`` says (the
# flag travels in metadata_props: see model.py).
@emitter("gather_elements", since=11)
def gather_elements(e: Emit, x: Ref, indices: Ref, *, axis, negative_indices) -> Ref:
    return e.op("GatherElements", x, indices, axis=axis)


@emitter("gather_nd", since=11)
def gather_nd(e: Emit, x: Ref, indices: Ref, *, batch_dims) -> Ref:
    if batch_dims:
        e.require(e.opset >= 12, "GatherND batch_dims needs opset 12")
        return e.op("GatherND", x, indices, batch_dims=batch_dims)
    return e.op("GatherND", x, indices)


def _reduction_attr(e: Emit, reduction: str) -> dict:
    if reduction == "none":
        return {}
    need = 16 if reduction in ("add", "mul") else 18
    e.require(e.opset >= need, f"scatter reduction {reduction!r} needs opset {need}")
    return {"reduction": reduction}


@emitter("scatter_elements", since=11)
def scatter_elements(e: Emit, x, indices, updates, *, axis, reduction, negative_indices) -> Ref:
    attrs = _reduction_attr(e, reduction)
    return e.op("ScatterElements", x, indices, updates, axis=axis, **attrs)


@emitter("scatter_nd", since=11)
def scatter_nd(e: Emit, x, indices, updates, *, reduction) -> Ref:
    return e.op("ScatterND", x, indices, updates, **_reduction_attr(e, reduction))


class _Advanced:
    """The layout of advanced indexing x[i0, i1, ...] on ``axes`` as one GatherND/ScatterND
    on x transposed so the indexed axes lead."""

    def __init__(self, e: Emit, x: Ref, indices: tuple[Ref, ...], axes) -> None:
        r = x.rank
        self.axes = [a % r for a in axes]
        self.rest = [i for i in range(r) if i not in self.axes]
        self.perm = self.axes + self.rest
        zero = None  # with symbolic shapes: a zero tensor of the broadcast shape, at run time
        if all(i.shape == indices[0].shape for i in indices):  # nothing to broadcast
            self.b = list(indices[0].shape)
        elif all(i.type is not None and i.type.is_static for i in indices):
            self.b = list(np.broadcast_shapes(*[i.shape for i in indices]))
        else:
            if any(i.type is None or i.type.shape is None for i in indices):
                raise Unsupported("advanced indexing with indices of unknown rank")
            self.b = list(broadcast(*[i.type for i in indices]) or ())
            for i in indices:
                i64 = i if i.dtype is DType.INT64 else e.cast(i, DType.INT64)
                z = e.op("Mul", i64, e.scalar(0, DType.INT64))
                zero = z if zero is None else e.op("Add", zero, z)
        nb, lead = len(self.b), self.axes[0]
        contiguous = self.axes == list(range(lead, lead + len(self.axes)))
        # torch keeps the broadcast dims where the indexed axes were when they are adjacent.
        self.lead = lead if contiguous else 0
        n_after = r - len(self.axes) - self.lead
        # result layout -> GatherND layout ([*b, *rest]) and back
        self.to_nd = [
            *range(self.lead, self.lead + nb),
            *range(self.lead),
            *range(self.lead + nb, self.lead + nb + n_after),
        ]
        parts = []
        for i in indices:
            shape = list(i.shape)  # the cast below has no recorded type
            if i.dtype is not DType.INT64:
                i = e.cast(i, DType.INT64)
            if zero is not None:
                i = e.op("Add", i, zero)
            elif shape != self.b:
                i = e.op("Expand", i, e.ints(self.b))  # static here (see above)
            parts.append(
                e.op("Unsqueeze", i, e.ints([-1]))
                if e.opset >= 13
                else e.op("Unsqueeze", i, axes=[-1])
            )
        self.nd = parts[0] if len(parts) == 1 else e.op("Concat", *parts, axis=-1)

    def front(self, e: Emit, x: Ref) -> Ref:
        return x if self.perm == sorted(self.perm) else e.op("Transpose", x, perm=self.perm)

    def back(self, e: Emit, x: Ref) -> Ref:
        if self.perm == sorted(self.perm):
            return x
        inv = list(np.argsort(self.perm))
        return e.op("Transpose", x, perm=[int(i) for i in inv])

    def result_from_nd(self, e: Emit, y: Ref) -> Ref:
        if self.to_nd == sorted(self.to_nd):
            return y
        inv = [int(i) for i in np.argsort(self.to_nd)]
        return e.op("Transpose", y, perm=inv)

    def nd_from_result(self, e: Emit, y: Ref) -> Ref:
        if self.to_nd == sorted(self.to_nd):
            return y
        return e.op("Transpose", y, perm=self.to_nd)


@emitter("index", since=11)
def index(e: Emit, x: Ref, *indices: Ref, axes) -> Ref:
    if len(indices) == 1:
        return e.op("Gather", x, indices[0], axis=axes[0])
    adv = _Advanced(e, x, indices, axes)
    return adv.result_from_nd(e, e.op("GatherND", adv.front(e, x), adv.nd))


@emitter("index_put", since=11)
def index_put(e: Emit, x: Ref, values: Ref, *indices: Ref, axes, accumulate) -> Ref:
    attrs = _reduction_attr(e, "add" if accumulate else "none")
    adv = _Advanced(e, x, indices, axes)
    xs = x.static_shape("index_put")
    rest = [xs[i] for i in adv.rest]
    result_shape = [*rest[: adv.lead], *adv.b, *rest[adv.lead :]]
    upd = values
    if values.type is None or list(values.shape) != result_shape:
        if all(isinstance(d, int) for d in result_shape):
            shape = e.ints(result_shape)
        else:  # the indices' broadcast shape known at run time: nd's shape without its last dim
            b = e.op("Slice", e.op("Shape", adv.nd), e.ints([0]), e.ints([-1]), e.ints([0]))
            parts = [e.ints(rest[: adv.lead]), b, e.ints(rest[adv.lead :])]
            shape = e.op("Concat", *[p for p, n in zip(parts, (adv.lead, 1, len(rest) - adv.lead))
                                     if n], axis=0)  # fmt: skip
        upd = e.op("Expand", values, shape)
    upd = adv.nd_from_result(e, upd)
    y = e.op("ScatterND", adv.front(e, x), adv.nd, upd, **attrs)
    return adv.back(e, y)


@emitter("pad", since=2)
def pad_2(e: Emit, x: Ref, pads_in=None, value_in=None, *, pads, mode, value) -> Ref:
    e.require(pads_in is None and value_in is None, "Pad with run-time pads needs opset 11")
    e.require(mode != "wrap", "Pad mode wrap needs opset 19")
    return e.op("Pad", x, pads=list(pads), mode=mode, value=value)


@emitter("pad", since=11)
def pad_11(e: Emit, x: Ref, pads_in=None, value_in=None, *, pads, mode, value) -> Ref:
    if pads_in is None and (mode == "wrap" or (mode == "edge" and min(pads) < 0)):
        return _pad_by_gather(e, x, list(pads), mode)
    e.require(mode != "wrap" or e.opset >= 19, "Pad mode wrap needs opset 19")
    cval = e.scalar(value, x.dtype) if mode == "constant" and value != 0 else None
    if value_in is not None and mode == "constant":
        cval = value_in
    return e.op("Pad", x, pads_in if pads_in is not None else e.ints(pads), cval, mode=mode)


def _pad_by_gather(e: Emit, x: Ref, pads: list[int], mode: str) -> Ref:
    """edge or wrap padding as one Gather per padded axis: output position i reads input
    position i - begin, clamped (edge) or taken modulo the size (wrap), at any opset.
    onnxruntime's Pad crops negative pads before edge-padding (torch indexes the uncropped
    input), and its CPU kernel rejects wrap ("Unexpected mode of 3")."""
    r = len(pads) // 2
    sizes = list(x.shape)
    for axis in range(r):
        begin, end = pads[axis], pads[r + axis]
        if begin == 0 and end == 0:
            continue
        n = sizes[axis]
        if not isinstance(n, int):
            x = e.op("Gather", x, _pad_index(e, x, axis, begin, end, mode), axis=axis)
            sizes[axis] = None
            continue
        e.require(n > 0, "edge/wrap padding of an empty axis")
        sizes[axis] = n + begin + end
        src = np.arange(n + begin + end, dtype=np.int64) - begin
        idx = np.clip(src, 0, n - 1) if mode == "edge" else np.mod(src, n)
        x = e.op("Gather", x, e.const(idx), axis=axis)
    return x


def _pad_index(e: Emit, x: Ref, axis: int, begin: int, end: int, mode: str) -> Ref:
    """The Gather indices of ``_pad_by_gather`` for an axis whose size is known at run time
    only: Range(-begin, size + end) clamped to [0, size - 1] (edge) or modulo size (wrap).
    An empty axis gives indices that Gather refuses, as the padding is undefined there."""
    e.require(e.opset >= 12 or mode == "wrap", "edge padding of an axis of unknown size (opset 12)")
    n = e.op("Gather", e.op("Shape", x), e.ints([axis]), axis=0)  # [1]
    n0 = e.op("Squeeze", n, e.ints([0])) if e.opset >= 13 else e.op("Squeeze", n, axes=[0])
    stop = e.op("Add", n0, e.const(np.array(end, np.int64)))
    src = e.op("Range", e.const(np.array(-begin, np.int64)), stop, e.const(np.array(1, np.int64)))
    if mode == "wrap":
        return e.op("Mod", src, n, fmod=0)
    top = e.op("Sub", n, e.ints([1]))
    return e.op("Min", e.op("Max", src, e.ints([0])), top)


@emitter("expand", since=8)
def expand(e: Emit, x: Ref, shape_in: Ref | None, *, shape) -> Ref:
    if shape is None:
        return e.op("Expand", x, shape_in)
    return e.op("Expand", x, e.ints([1 if d == -1 else d for d in shape]))


@emitter("tile", since=6)
def tile(e: Emit, x: Ref, repeats_in: Ref | None = None, *, repeats) -> Ref:
    if repeats_in is not None:
        return e.op("Tile", x, repeats_in)
    r = x.rank
    reps = list(repeats)
    if len(reps) > r:
        extra = list(range(len(reps) - r))
        x = (
            e.op("Unsqueeze", x, e.ints(extra))
            if e.opset >= 13
            else e.op("Unsqueeze", x, axes=extra)
        )
    elif len(reps) < r:
        reps = [1] * (r - len(reps)) + reps
    return e.op("Tile", x, e.ints(reps))


@emitter("trilu", since=14)
def trilu(e: Emit, x: Ref, k_in: Ref | None = None, *, upper, k) -> Ref:
    kk = k_in if k_in is not None else e.scalar(k, DType.INT64)
    return e.op("Trilu", x, kk, upper=int(upper))


@emitter("shape", since=1)
def shape_1(e: Emit, x: Ref, *, start, end) -> Ref:
    s = e.op("Shape", x)
    if start == 0 and end is None:
        return s
    return _shape_slice(e, s, start, INT64_MAX if end is None else end)


@emitter("shape", since=15)
def shape_15(e: Emit, x: Ref, *, start, end) -> Ref:
    return e.op("Shape", x, start=start if start else None, end=end)


@emitter("constant", since=1)
def constant(e: Emit, *, value) -> Ref:
    return e.const(value)


@emitter("arange", since=11)
def arange(e: Emit, *, start, end, step, dtype) -> Ref:
    ok = (DType.FLOAT32, DType.FLOAT64, DType.INT16, DType.INT32, DType.INT64)
    kind = dtype if dtype in ok else DType.FLOAT32
    conv = (lambda v: v) if kind.is_floating else int
    out = e.op(
        "Range",
        e.scalar(conv(start), kind),
        e.scalar(conv(end), kind),
        e.scalar(conv(step), kind),
    )
    return out if kind is dtype else e.cast(out, dtype)


def _fill_value(value: float, dtype: DType) -> np.ndarray:
    return np.asarray([value], dtype=dtype.to_numpy())


@emitter("full", since=9)
def full(e: Emit, shape_in: Ref | None, *, shape, value, dtype) -> Ref:
    e.require(dtype is not DType.BFLOAT16 or e.opset >= 20, "ConstantOfShape bf16 needs 20")
    target = shape_in if shape is None else e.ints(shape)
    return e.op("ConstantOfShape", target, value=_fill_value(value, dtype))


@emitter("full_like", since=9)
def full_like(e: Emit, x: Ref, *, value, dtype) -> Ref:
    dt = dtype or x.dtype
    e.require(dt is not DType.BFLOAT16 or e.opset >= 20, "ConstantOfShape bf16 needs 20")
    return e.op("ConstantOfShape", e.op("Shape", x), value=_fill_value(value, dt))


@emitter("one_hot", since=11)
def one_hot(e: Emit, indices: Ref, depth_in: Ref | None = None, *, depth, axis, dtype) -> Ref:
    d = depth_in if depth_in is not None else e.scalar(depth, DType.INT64)
    # onnxruntime's kernels take int64 indices with an int64 depth (int32 ones only with an
    # int32 depth): TFLite's int32 indices are widened, exactly.
    if indices.type is not None and indices.type.dtype is not DType.INT64:
        indices = e.cast(indices, DType.INT64)
    if d.type is not None and d.type.dtype is not DType.INT64:
        d = e.cast(d, DType.INT64)
    if dtype in (DType.INT64, DType.FLOAT32):
        values = e.const(np.asarray([0, 1], dtype=dtype.to_numpy()))
        return e.op("OneHot", indices, d, values, axis=axis)
    # onnxruntime's OneHot takes int64 / float32 values (not int32, say): cast after.
    values = e.const(np.asarray([0, 1], dtype=np.int64))
    return e.cast(e.op("OneHot", indices, d, values, axis=axis), dtype)


@emitter("nonzero", since=9)
def nonzero(e: Emit, x: Ref) -> Ref:
    if x.type is not None and x.type.rank == 0:
        # A 0-d input: [count, 0] (count 0 or 1), where ONNX would give one index column.
        flat = e.op("Reshape", x, e.ints([1]))
        rows = e.op("Transpose", e.op("NonZero", flat), perm=[1, 0])
        return e.op("Slice", rows, e.ints([0]), e.ints([0]), e.ints([1]))
    return e.op("Transpose", e.op("NonZero", x), perm=[1, 0])


_ = ONNX_DTYPE


@emitter("depth_to_space", since=1)
def depth_to_space(e: Emit, x: Ref, *, blocksize, mode) -> Ref:
    if e.opset < 11:
        e.require(mode == "DCR", "DepthToSpace mode needs opset 11")
        return e.op("DepthToSpace", x, blocksize=blocksize)
    return e.op("DepthToSpace", x, blocksize=blocksize, mode=mode)


@emitter("space_to_depth", since=1)
def space_to_depth(e: Emit, x: Ref, *, blocksize) -> Ref:
    return e.op("SpaceToDepth", x, blocksize=blocksize)
