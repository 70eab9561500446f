"""Relax emitters of the reduce family: reductions, arg-reductions, scans, sorting."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, Unsupported, emitter

R = relax.op


def _axes(axes):
    return None if axes is None else list(axes)


def _static_axes(axes_in) -> None:
    if axes_in is not None:
        raise Unsupported(
            "reduction axes computed at run time (which dims a Relax reduction removes or "
            "keeps as 1 is part of its result's type, fixed when the module is built)"
        )


def _simple(fn):
    def emit(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
        _static_axes(axes_in)
        return e.emit(fn(x, _axes(axes), keepdims))

    return emit


for _op, _fn in {
    "reduce_sum": R.sum,
    "reduce_mean": R.mean,
    "reduce_max": R.max,
    "reduce_min": R.min,
    "reduce_prod": R.prod,
}.items():
    emitter(_op)(_simple(_fn))


@emitter("reduce_all")
def reduce_all(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    _static_axes(axes_in)
    y = e.emit(R.min(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_any")
def reduce_any(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    _static_axes(axes_in)
    y = e.emit(R.max(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_l1")
def reduce_l1(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    _static_axes(axes_in)
    return e.emit(R.sum(R.abs(x), _axes(axes), keepdims))


@emitter("reduce_l2")
def reduce_l2(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    _static_axes(axes_in)
    return e.emit(R.sqrt(R.sum(R.multiply(x, x), _axes(axes), keepdims)))


@emitter("reduce_sum_square")
def reduce_sum_square(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    _static_axes(axes_in)
    return e.emit(R.sum(R.multiply(x, x), _axes(axes), keepdims))


@emitter("reduce_log_sum")
def reduce_log_sum(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    _static_axes(axes_in)
    return e.emit(R.log(R.sum(x, _axes(axes), keepdims)))


@emitter("reduce_log_sum_exp")
def reduce_log_sum_exp(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    _static_axes(axes_in)
    m = e.emit(R.max(x, _axes(axes), True))
    s = e.emit(R.log(R.sum(R.exp(R.subtract(x, m)), _axes(axes), True)))
    y = e.emit(R.add(s, m))
    return y if keepdims else e.emit(R.squeeze(y, _axes(axes)))


def _arg(fn):
    def emit(e: Emit, x, *, axis=None, keepdims=False, select_last_index=False):
        if select_last_index:  # the last of equal extremes: search the reversed axis
            e.require(axis is not None, "select_last_index over all dims")
            n = e.shape(x)[axis]
            e.require(isinstance(n, int), "select_last_index along a symbolic dim")
            i = e.emit(fn(R.flip(x, axis), axis, keepdims))
            return e.emit(R.subtract(e.const(n - 1, "int64"), i))
        return e.emit(fn(x, axis, keepdims))

    return emit


emitter("argmax")(_arg(R.argmax))
emitter("argmin")(_arg(R.argmin))


def _dim(value_fn, index_fn):
    def emit(e: Emit, x, *, axis, keepdims=False):
        return e.emit(value_fn(x, axis, keepdims)), e.emit(index_fn(x, axis, keepdims))

    return emit


emitter("max_dim")(_dim(R.max, R.argmax))
emitter("min_dim")(_dim(R.min, R.argmin))


def _cumsum(e: Emit, x, axis: int, exclusive: bool, reverse: bool):
    if reverse:
        x = e.emit(R.flip(x, axis))
    y = e.emit(R.cumsum(x, axis, None, exclusive))
    return e.emit(R.flip(y, axis)) if reverse else y


@emitter("cumsum")
def cumsum(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    if axis_in is None:
        return _cumsum(e, x, axis, exclusive, reverse)
    # A run-time axis: the running sum along every dim, the one it names picked (the
    # results share x's shape).
    r = e.rank(x)
    a = e.emit(R.reshape(e.int64(axis_in), []))
    a = e.emit(R.where(R.less(a, e.const(0, "int64")), R.add(a, e.const(r, "int64")), a))
    e.check(R.logical_and(R.greater_equal(a, e.const(0, "int64")), R.less(a, e.const(r, "int64"))))
    out = _cumsum(e, x, r - 1, exclusive, reverse)
    for d in range(r - 1):
        y = _cumsum(e, x, d, exclusive, reverse)
        out = e.emit(R.where(R.equal(a, e.const(d, "int64")), y, out))
    return out


@emitter("cumprod")
def cumprod(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    if axis_in is not None:
        raise Unsupported("cumprod along an axis computed at run time")
    if exclusive or reverse:
        raise Unsupported("cumprod: exclusive / reverse")
    return e.emit(R.cumprod(x, axis, None))


@emitter("argsort")
def argsort(e: Emit, x, *, axis=-1, descending=False, stable=False):
    return e.emit(R.argsort(x, axis, descending, "int64"))


@emitter("sort")
def sort(e: Emit, x, *, axis=-1, descending=False, stable=False):
    return e.emit(R.sort(x, axis, descending)), e.emit(R.argsort(x, axis, descending, "int64"))


@emitter("topk")
def topk(e: Emit, x, k_in=None, *, k, axis=-1, largest=True, sorted=True):  # noqa: A002
    if k_in is None:
        return e.emit(R.topk(x, k, axis, "both", largest, "int64"))
    # A run-time k: topk of every element (k < 1 is all of them, in topk's order), then the
    # first k along the axis.
    a = axis % e.rank(x)
    k_t = e.emit(R.reshape(e.int64(k_in), []))
    dim = R.take(e.shape_tensor(x), e.const(a, "int64"), mode="clip")
    fits = R.logical_and(R.greater_equal(k_t, e.const(0, "int64")), R.less_equal(k_t, dim))
    (n,) = e.ints(k_t, fits)
    both = e.emit(R.topk(x, 0, axis, "both", largest, "int64"))
    return tuple(
        e.emit(R.strided_slice(relax.TupleGetItem(both, i), [a], [0], [n])) for i in (0, 1)
    )
