"""Relax emitters of the reduce family: reductions, arg-reductions, scans, sorting."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, Unsupported, emitter, static_only

R = relax.op


def _axes(axes):
    return None if axes is None else list(axes)


def _simple(fn):
    def emit(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
        static_only(axes_in)
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
    static_only(axes_in)
    y = e.emit(R.min(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_any")
def reduce_any(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    static_only(axes_in)
    y = e.emit(R.max(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_l1")
def reduce_l1(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    static_only(axes_in)
    return e.emit(R.sum(R.abs(x), _axes(axes), keepdims))


@emitter("reduce_l2")
def reduce_l2(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    static_only(axes_in)
    return e.emit(R.sqrt(R.sum(R.multiply(x, x), _axes(axes), keepdims)))


@emitter("reduce_sum_square")
def reduce_sum_square(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    static_only(axes_in)
    return e.emit(R.sum(R.multiply(x, x), _axes(axes), keepdims))


@emitter("reduce_log_sum")
def reduce_log_sum(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    static_only(axes_in)
    return e.emit(R.log(R.sum(x, _axes(axes), keepdims)))


@emitter("reduce_log_sum_exp")
def reduce_log_sum_exp(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    static_only(axes_in)
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


@emitter("cumsum")
def cumsum(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    static_only(axis_in)
    if reverse:
        x = e.emit(R.flip(x, axis))
    y = e.emit(R.cumsum(x, axis, None, exclusive))
    return e.emit(R.flip(y, axis)) if reverse else y


@emitter("cumprod")
def cumprod(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    static_only(axis_in)
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
def topk(e: Emit, x, k_in=None, *, k, axis=-1, largest=True, sorted=True, stable=False):  # noqa: A002
    # ``stable`` holds: Relax's topk puts the lower index first among equal values (on llvm,
    # its kernel sorts stably; tests/codegen/test_codegen_relax.py checks it with ties).
    static_only(k_in)
    return e.emit(R.topk(x, k, axis, "both", largest, "int64"))
