"""Relax emitters of the reduce family: reductions, arg-reductions, scans, sorting."""

from __future__ import annotations

import numpy as np
from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op


def _axes(axes):
    return None if axes is None else list(axes)


def _runtime_axes(e: Emit, x, axes_in, keepdims, noop, fn, pre=None, post=None, ident=None):
    """A reduction over axes read at run time: ``post(fn(pre(x)))`` over those dims.

    A Relax reduction's result type says which dims it removes, so each dim is reduced in turn
    (keeping it as 1, broadcast back) and the result picked where the axes name that dim;
    x's shape holds throughout, but for a dim that may be empty, which gets its reduction (the
    identity) appended. The first element along the reduced dims is then read into the
    run-time result shape (1 there with keepdims, else the other dims in order). ``ident``
    (max / min) gives the value of a reduction over an empty dim.
    """
    k = (e.shape(axes_in) or [1])[0]
    e.require(isinstance(k, int), "run-time reduction axes of run-time length")
    y = e.emit(pre(x)) if pre else x
    if k == 0:  # no axes: the identity with noop_with_empty_axes, else every dim
        if not noop:
            y = _empty_to_identity(e, y, e.emit(fn(y, None, keepdims)), range(e.rank(y)), ident)
        return e.emit(post(y)) if post else y
    r = e.rank(x)
    hit, once = e.axes_hit(axes_in, r)
    for d in range(r):
        part = _empty_to_identity(e, y, e.emit(fn(y, [d], True)), [d], ident)
        here = e.emit(R.take(hit, e.const(d, "int64"), axis=0, mode="clip"))
        y = e.emit(R.where(here, e.emit(R.broadcast_to(part, e.shape(y))), y))
        n = e.shape(x)[d]
        if not (isinstance(n, int) and n > 0):
            y = e.emit(R.concat([y, part], d))
    have = e.shape_tensor(x)
    ends = e.emit(R.where(hit, e.const(1, "int64"), have))
    first = e.emit(R.dynamic_strided_slice(y, e.const(np.zeros(r, np.int64), "int64"), ends,
                                           e.const(np.ones(r, np.int64), "int64")))  # fmt: skip
    dims = ends if keepdims else e.kept_dims(hit, have, r - k)
    out = e.emit(R.reshape(e.sized(first), e.ints(dims, once)))
    return e.emit(post(out)) if post else out


def _simple(fn):
    def emit(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
        if axes_in is not None:
            return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, fn)
        # a value Relax knows the rank of only (an If's result) gets dims to legalize with
        return e.emit(fn(e.sized(x), _axes(axes), keepdims))

    return emit


for _op, _fn in {
    "reduce_sum": R.sum,
    "reduce_mean": R.mean,
    "reduce_prod": R.prod,
}.items():
    emitter(_op)(_simple(_fn))


def _int8(x):
    return R.astype(x, "int8")


def _uint8(x):
    return R.astype(x, "uint8")


def _identity(largest: bool):
    """The identity of max (``largest``) / min in a dtype: -inf / inf, the dtype's lowest /
    highest int (uint8's 0 / 255 is bool's false / true)."""

    def value(dt: str):
        if dt.startswith(("float", "bfloat")):
            return -np.inf if largest else np.inf
        info = np.iinfo(dt)
        return info.min if largest else info.max

    return value


def _empty_to_identity(e: Emit, x, y, dims, ident):
    """``y``, a reduction of ``x`` over ``dims``, as ``ident``'s value where those dims hold
    no elements (TVM's max / min of none is the dtype's lowest / highest finite value)."""
    sizes = [e.shape(x)[d] for d in dims]
    maybe = [n for n in sizes if not (isinstance(n, int) and n > 0)]
    if ident is None or not maybe:
        return y
    dt = e.dtype(y)
    value = e.const(ident(dt), dt)
    if 0 in maybe:
        return e.emit(R.broadcast_to(value, e.shape(y)))
    picked = R.take(e.shape_tensor(x), e.const(list(dims), "int64"), axis=0)
    empty = e.emit(R.equal(R.prod(picked), e.const(0, "int64")))
    return e.emit(R.where(empty, value, y))


def _infinite(e: Emit, fn, largest: bool):
    """``fn`` (max / min) giving -inf / inf where every element reduced is -inf / inf: TVM
    starts a float max at the dtype's lowest finite value, so the max of -infs (a query row
    an attention mask hides everywhere) came out as -3.4e38 instead of -inf."""

    def reduce(y, axes, keepdims):
        call = fn(y, axes, keepdims)
        dt = e.dtype(y)
        # A max read from Relax keeps Relax's meaning (and spelling) when written back.
        if not dt.startswith(("float", "bfloat")) or e.source_op in ("relax.max", "relax.min"):
            return call
        m = e.emit(call)
        import ml_dtypes

        info = ml_dtypes.finfo(dt)
        edge = e.const(info.min if largest else info.max, dt)  # TVM's start value
        at_edge = e.emit(R.max(R.astype(R.equal(y, edge), "int8"), axes, keepdims))
        wrong = R.logical_and(R.equal(m, edge), R.equal(at_edge, e.const(0, "int8")))
        return R.where(wrong, e.const(-np.inf if largest else np.inf, dt), m)

    return reduce


def _extreme(fn, largest: bool):
    # Bool reduces as uint8 (TVM's max / min have no bool identity); over no elements the
    # result is ONNX's identity.
    ident = _identity(largest)

    def emit(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
        pre, post = (_uint8, _bool) if e.dtype(x) == "bool" else (None, None)
        red = _infinite(e, fn, largest)
        if axes_in is not None:
            return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, red, pre, post,
                                 ident)  # fmt: skip
        y = e.emit(pre(x)) if pre else x
        r = e.rank(x)
        dims = range(r) if axes is None else [a % r for a in axes]
        y = _empty_to_identity(e, x, e.emit(red(y, _axes(axes), keepdims)), dims, ident)
        return e.emit(post(y)) if post else y

    return emit


emitter("reduce_max")(_extreme(R.max, True))
emitter("reduce_min")(_extreme(R.min, False))


def _bool(x):
    return R.astype(x, "bool")


def _square(x):
    return R.multiply(x, x)


@emitter("reduce_all")
def reduce_all(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.min, _int8, _bool)
    y = e.emit(R.min(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_any")
def reduce_any(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.max, _int8, _bool)
    y = e.emit(R.max(R.astype(x, "int8"), _axes(axes), keepdims))
    return e.emit(R.astype(y, "bool"))


@emitter("reduce_l1")
def reduce_l1(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.sum, R.abs)
    return e.emit(R.sum(R.abs(x), _axes(axes), keepdims))


@emitter("reduce_l2")
def reduce_l2(e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.sum, _square,
                             R.sqrt)  # fmt: skip
    return e.emit(R.sqrt(R.sum(R.multiply(x, x), _axes(axes), keepdims)))


@emitter("reduce_sum_square")
def reduce_sum_square(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.sum, _square)
    return e.emit(R.sum(R.multiply(x, x), _axes(axes), keepdims))


@emitter("reduce_log_sum")
def reduce_log_sum(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.sum, None, R.log)
    return e.emit(R.log(R.sum(x, _axes(axes), keepdims)))


@emitter("reduce_log_sum_exp")
def reduce_log_sum_exp(
    e: Emit, x, axes_in=None, *, axes=None, keepdims=False, noop_with_empty_axes=False
):
    if axes_in is not None:
        return _runtime_axes(e, x, axes_in, keepdims, noop_with_empty_axes, R.sum, R.exp, R.log)
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


def _scan(e: Emit, fn, x, axis: int, exclusive: bool, reverse: bool):
    if reverse:
        x = e.emit(R.flip(x, axis))
    y = e.emit(fn(x, axis, None, exclusive))
    return e.emit(R.flip(y, axis)) if reverse else y


@emitter("cumsum")
def cumsum(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    if axis_in is None:
        return _scan(e, R.cumsum, x, axis, exclusive, reverse)
    return _along_runtime_axis(
        e, x, axis_in, lambda d: _scan(e, R.cumsum, x, d, exclusive, reverse)
    )


def _along_runtime_axis(e: Emit, x, axis_in, scan):
    """``scan(d)`` (a result of x's shape) along the dim a run-time axis names: the scan along
    every dim, the one it names picked (checked to be one of x's dims)."""
    r = e.rank(x)
    a = e.emit(R.reshape(e.int64(axis_in), []))
    a = e.emit(R.where(R.less(a, e.const(0, "int64")), R.add(a, e.const(r, "int64")), a))
    e.check(R.logical_and(R.greater_equal(a, e.const(0, "int64")), R.less(a, e.const(r, "int64"))))
    out = scan(r - 1)
    for d in range(r - 1):
        out = e.emit(R.where(R.equal(a, e.const(d, "int64")), scan(d), out))
    return out


@emitter("cumprod")
def cumprod(e: Emit, x, axis_in=None, *, axis, exclusive=False, reverse=False):
    if axis_in is not None:
        scan = lambda d: _scan(e, R.cumprod, x, d, exclusive, reverse)  # noqa: E731
        return _along_runtime_axis(e, x, axis_in, scan)
    if exclusive or reverse:
        return _scan(e, R.cumprod, x, axis, exclusive, reverse)
    return e.emit(R.cumprod(x, axis, None))


# TVM's sort kernels (sort, argsort, topk) take 32- and 64-bit ints and floats only (topk
# also 8-bit ints): other dtypes sort by an order-preserving key they take, and the values
# are gathered from the input by the key's indices (exact, in the input's dtype).
_KEY = {d: "int32" for d in ("bool", "int8", "int16", "uint8", "uint16")} | {"uint32": "int64"}


def _sort_key(e: Emit, x):
    """``x`` when TVM sorts its dtype, else a key in the same order that it sorts: a wider
    int, or for uint64 its bits with the top one flipped read as int64 (0 -> -2^63, 2^64 - 1
    -> 2^63 - 1; Relax has no reinterpret, but a same-width int cast keeps the bits)."""
    dt = e.dtype(x)
    if dt == "uint64":
        flipped = e.emit(R.bitwise_xor(x, e.const(2**63, "uint64")))
        return e.emit(R.astype(flipped, "int64"))
    return e.emit(R.astype(x, _KEY[dt])) if dt in _KEY else x


@emitter("argsort")
def argsort(e: Emit, x, *, axis=-1, descending=False, stable=False):
    return e.emit(R.argsort(_sort_key(e, x), axis, descending, "int64"))


@emitter("sort")
def sort(e: Emit, x, *, axis=-1, descending=False, stable=False):
    key = _sort_key(e, x)
    if key is x:
        return e.emit(R.sort(x, axis, descending)), e.emit(R.argsort(x, axis, descending, "int64"))
    idx = e.emit(R.argsort(key, axis, descending, "int64"))
    return e.emit(R.gather_elements(x, idx, axis)), idx


@emitter("topk")
def topk(e: Emit, x, k_in=None, *, k, axis=-1, largest=True, sorted=True, stable=False):  # noqa: A002
    # ``stable`` holds: Relax's topk puts the lower index first among equal values (on llvm,
    # its kernel sorts stably; tests/codegen/test_codegen_relax.py checks it with ties).
    key = _sort_key(e, x)
    if k_in is None:
        if key is x:
            return e.emit(R.topk(x, k, axis, "both", largest, "int64"))
        idx = e.emit(R.topk(key, k, axis, "indices", largest, "int64"))
        return e.emit(R.gather_elements(x, idx, axis)), idx
    # A run-time k: topk of every element (k < 1 is all of them, in topk's order), then the
    # first k along the axis.
    a = axis % e.rank(x)
    k_t = e.emit(R.reshape(e.int64(k_in), []))
    dim = R.take(e.shape_tensor(x), e.const(a, "int64"), mode="clip")
    fits = R.logical_and(R.greater_equal(k_t, e.const(0, "int64")), R.less_equal(k_t, dim))
    (n,) = e.ints(k_t, fits)
    if key is not x:
        idx = e.emit(R.topk(key, 0, axis, "indices", largest, "int64"))
        idx = e.emit(R.strided_slice(idx, [a], [0], [n]))
        return e.emit(R.gather_elements(x, idx, axis)), idx
    both = e.emit(R.topk(x, 0, axis, "both", largest, "int64"))
    return tuple(
        e.emit(R.strided_slice(relax.TupleGetItem(both, i), [a], [0], [n])) for i in (0, 1)
    )
