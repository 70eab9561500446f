"""Relax emitters of the nn family: convolution, matrix products, normalization, pooling,
softmax, attention, embedding."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op
_LAYOUT = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}
_T_LAYOUT = {1: ("NCW", "IOW"), 2: ("NCHW", "IOHW"), 3: ("NCDHW", "IODHW")}


def _fill(v, n, default):
    v = list(v or ())
    return v if v else [default] * n


def _ranked(e: Emit, x):
    """``x`` of the output's rank when Relax does not know its own (an If's value whose
    branches differ in rank: msc takes the spatial rank from the weight or attributes)."""
    if e.rank(x) < 0:
        e.require(e.out.shape is not None, "an input and output of unknown rank")
        x = e.ranked(x, len(e.out.shape))
    return x


def _spatial(e: Emit, x) -> int:
    n = e.rank(x) - 2
    e.require(n in (1, 2, 3), f"{n}-d spatial input (Relax has 1-d to 3-d)")
    return n


def _bias(e: Emit, y, bias, n: int):
    if bias is None:
        return y
    b = R.reshape(bias, [1, -1] + [1] * n)
    return e.emit(R.add(y, b))


def _channels_first(e: Emit, data_layout: str, kernel_layout: str = "OIHW") -> None:
    """Other layouts are brought to channels first (``msc.ops.layout.to_layout``) before
    emission."""
    e.require(
        data_layout == "NCHW" and kernel_layout == "OIHW",
        f"a {data_layout}/{kernel_layout} node (convert with to_layout(g, 'NCHW') first)",
    )


@emitter("conv")
def conv(
    e: Emit, x, weight, bias=None, *, stride=(), padding=(), dilation=(), groups=1,
    data_layout="NCHW", kernel_layout="OIHW",
):  # fmt: skip
    _channels_first(e, data_layout, kernel_layout)
    x = _ranked(e, x)
    n = _spatial(e, x)
    data, kernel = _LAYOUT[n]
    fn = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}[n]
    y = e.emit(
        fn(
            x,
            weight,
            strides=_fill(stride, n, 1),
            padding=_fill(padding, 2 * n, 0),
            dilation=_fill(dilation, n, 1),
            groups=groups,
            data_layout=data,
            kernel_layout=kernel,
            out_layout=data,
            out_dtype=e.out_dtype(x),
        )
    )
    return _bias(e, y, bias, n)


@emitter("conv_transpose")
def conv_transpose(
    e: Emit, x, weight, bias=None, *, stride=(), padding=(), dilation=(), groups=1,
    output_padding=(),
):  # fmt: skip
    x = _ranked(e, x)
    n = _spatial(e, x)
    e.require(n in (1, 2), "3-d transposed convolution (Relax has 1-d and 2-d)")
    data, kernel = _T_LAYOUT[n]
    fn = {1: R.nn.conv1d_transpose, 2: R.nn.conv2d_transpose}[n]
    y = e.emit(
        fn(
            x,
            weight,
            strides=_fill(stride, n, 1),
            padding=_fill(padding, 2 * n, 0),
            output_padding=_fill(output_padding, n, 0),
            dilation=_fill(dilation, n, 1),
            groups=groups,
            data_layout=data,
            kernel_layout=kernel,
            out_layout=data,
            out_dtype=e.out_dtype(x),
        )
    )
    return _bias(e, y, bias, n)


@emitter("linear")
def linear(e: Emit, x, weight, bias=None):
    # As TVM's torch frontend writes torch's decomposition: a 2-d matmul with the transposed
    # weight, the bias added first-operand, and a flatten/unflatten around it for rank > 2.
    shape = e.shape(x)
    flat = len(shape) > 2 and all(isinstance(d, int) for d in shape)
    lead = shape[:-1] if flat else None
    if bias is None:  # torch's decomposition orders the transpose first without a bias
        wt = e.emit(R.permute_dims(weight, [1, 0]))
    if lead is not None:
        x = e.emit(R.reshape(x, [int(np.prod(lead)), shape[-1]]))
    if bias is not None:
        wt = e.emit(R.permute_dims(weight, [1, 0]))
    y = e.emit(R.matmul(x, wt, out_dtype=e.out_dtype(x)))
    if bias is not None:
        y = e.emit(R.add(bias, y))
    if lead is not None:
        y = e.emit(R.reshape(y, [*lead, e.shape(y)[-1]]))
    return y


@emitter("matmul")
def matmul(e: Emit, a, b):
    call = R.matmul(a, b, out_dtype=e.out_dtype(a))
    if e.bb.normalize(call).ty.shape is not None or min(e.rank(a), e.rank(b)) < 1:
        return e.emit(call)
    # Relax cannot tell that the contracted dims (or the batch dims) agree, each read from a
    # different run-time shape: b takes a's, which the VM checks when it runs.
    a, b = e.sized(a), e.sized(b)
    sa, sb = list(a.ty.shape.values), list(b.ty.shape.values)
    want: list = [None] * len(sb)
    want[-2 if len(sb) >= 2 else 0] = sa[-1]
    same = tvm.sym.Analyzer().can_prove_equal
    for i in range(3, min(len(sa), len(sb)) + 1):  # batch dims, aligned from the right
        da, db = sa[-i], sb[-i]
        ones = [isinstance(d, tvm.tirx.IntImm) and int(d) == 1 for d in (da, db)]
        if not any(ones) and not same(da, db):
            want[-i] = da
    return e.emit(R.matmul(a, e.agree(b, want), out_dtype=e.out_dtype(a)))


@emitter("gemm")
def gemm(e: Emit, a, b, c=None, *, alpha=1.0, beta=1.0, trans_a=False, trans_b=False):
    if trans_a:
        a = e.emit(R.permute_dims(a, [1, 0]))
    if trans_b:
        b = e.emit(R.permute_dims(b, [1, 0]))
    y = e.emit(R.matmul(a, b, out_dtype=e.out_dtype(a)))
    dt = e.dtype(y)
    if alpha != 1.0:
        y = e.emit(R.multiply(y, e.const(alpha, dt)))
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = e.emit(R.multiply(c, e.const(beta, dt)))
    return e.emit(R.add(y, c))


@emitter("einsum")
def einsum(e: Emit, *xs, equation):
    return e.emit(R.einsum(list(xs), equation))


@emitter("embedding")
def embedding(e: Emit, weight, indices, *, padding_idx=None):
    # As TVM's frontends write it: int32 indices, flattened, taken, reshaped back.
    idx = e.emit(R.astype(indices, "int32"))
    shape = e.shape(idx)
    if len(shape) == 1:
        return e.emit(R.take(weight, idx, axis=0))
    flat = e.emit(R.reshape(idx, [-1]))
    rows = e.emit(R.take(weight, flat, axis=0))
    return e.emit(R.reshape(rows, [*shape, e.shape(weight)[-1]]))


@emitter("batch_norm")
def batch_norm(e: Emit, x, weight, bias, running_mean, running_var, *, eps=1e-5):
    c = e.shape(x)[1]
    dt = e.dtype(x)
    e.require(isinstance(c, int), "batch_norm over a symbolic channel count")
    scale, center = weight is not None, bias is not None
    weight = weight if weight is not None else e.const(np.ones(c), dt)
    bias = bias if bias is not None else e.const(np.zeros(c), dt)
    out = e.emit(
        R.nn.batch_norm(
            x, weight, bias, running_mean, running_var, axis=1, epsilon=eps,
            center=center, scale=scale, momentum=0.1, training=False,
        )
    )  # fmt: skip
    return e.emit(relax.TupleGetItem(out, 0))


def _affine(e: Emit, x, weight, bias, shape):
    dt = e.dtype(x)
    if weight is None:
        weight = e.const(np.ones(shape), dt)
    if bias is None:
        bias = e.const(np.zeros(shape), dt)
    return weight, bias


@emitter("layer_norm")
def layer_norm(e: Emit, x, weight=None, bias=None, *, axis=-1, eps=1e-5):
    r = e.rank(x)
    axis = axis % r
    shape = e.shape(x)[axis:]
    e.require(all(isinstance(d, int) for d in shape), "layer_norm over symbolic dims")
    weight, bias = _affine(e, x, weight, bias, shape)
    axes = list(range(axis - r, 0))
    return e.emit(R.nn.layer_norm(x, weight, bias, axes=axes, epsilon=eps))


@emitter("group_norm")
def group_norm(e: Emit, x, weight=None, bias=None, *, num_groups, eps=1e-5):
    c = e.shape(x)[1]
    e.require(isinstance(c, int), "group_norm over a symbolic channel count")
    weight, bias = _affine(e, x, weight, bias, [c])
    axes = list(range(2, e.rank(x)))
    return e.emit(R.nn.group_norm(x, weight, bias, num_groups, 1, axes, eps))


@emitter("instance_norm")
def instance_norm(e: Emit, x, weight=None, bias=None, *, eps=1e-5):
    c = e.shape(x)[1]
    e.require(isinstance(c, int), "instance_norm over a symbolic channel count")
    weight, bias = _affine(e, x, weight, bias, [c])
    axes = list(range(2, e.rank(x)))
    return e.emit(R.nn.instance_norm(x, weight, bias, 1, axes, eps))


@emitter("rms_norm")
def rms_norm(e: Emit, x, weight=None, *, axis=-1, eps=1e-6):
    r = e.rank(x)
    axis = axis % r
    shape = e.shape(x)[axis:]
    if weight is None:
        e.require(all(isinstance(d, int) for d in shape), "rms_norm over symbolic dims")
        weight = e.const(np.ones(shape), e.dtype(x))
    return e.emit(R.nn.rms_norm(x, weight, axes=list(range(axis - r, 0)), epsilon=eps))


@emitter("softmax")
def softmax(e: Emit, x, *, axis=-1):
    return e.emit(R.nn.softmax(x, axis))


@emitter("log_softmax")
def log_softmax(e: Emit, x, *, axis=-1):
    return e.emit(R.nn.log_softmax(x, axis))


def _pool_args(e: Emit, x, kernel, stride, padding, dilation):
    n = _spatial(e, x)
    return (
        n,
        list(kernel),
        _fill(stride, n, 1) if stride else list(kernel),
        _fill(padding, 2 * n, 0),
        _fill(dilation, n, 1),
    )


_MAX = {1: R.nn.max_pool1d, 2: R.nn.max_pool2d, 3: R.nn.max_pool3d}
_AVG = {1: R.nn.avg_pool1d, 2: R.nn.avg_pool2d, 3: R.nn.avg_pool3d}
_ADAPTIVE = {1: R.nn.adaptive_avg_pool1d, 2: R.nn.adaptive_avg_pool2d, 3: R.nn.adaptive_avg_pool3d}


@emitter("max_pool")
def max_pool(
    e: Emit, x, *, kernel, stride=(), padding=(), dilation=(), ceil_mode=False,
    return_indices=False, data_layout="NCHW",
):  # fmt: skip
    _channels_first(e, data_layout)
    e.require(not return_indices, "max_pool with indices (Relax pools return values only)")
    x = _ranked(e, x)
    n, k, s, p, d = _pool_args(e, x, kernel, stride, padding, dilation)
    return e.emit(
        _MAX[n](x, k, s, p, d, ceil_mode=ceil_mode, count_include_pad=False,
                layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )  # fmt: skip


@emitter("avg_pool")
def avg_pool(
    e: Emit, x, *, kernel, stride=(), padding=(), ceil_mode=False, count_include_pad=True,
    divisor_override=None, data_layout="NCHW",
):  # fmt: skip
    _channels_first(e, data_layout)
    x = _ranked(e, x)
    if divisor_override is not None:  # every window's sum over the one divisor
        total = _window_sum(e, x, kernel, stride, padding, (), ceil_mode)
        return e.emit(R.divide(total, e.const(divisor_override, e.dtype(x))))
    n, k, s, p, d = _pool_args(e, x, kernel, stride, padding, ())
    return e.emit(
        _AVG[n](x, k, s, p, d, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )  # fmt: skip


def _window_sum(e: Emit, x, kernel, stride, padding, dilation, ceil_mode):
    """The sum over each pooling window: a depthwise convolution with a kernel of ones, the
    end padded further (with zeros, which add nothing) to reach the windows ceil_mode adds;
    the output type holds the window counts."""
    n, k, s, p, d = _pool_args(e, x, kernel, stride, padding, dilation)
    shape = e.shape(x)
    e.require(all(isinstance(v, int) for v in shape[1:]), "pooling over symbolic channels or dims")
    out = e.out.shape[2:]
    e.require(all(isinstance(v, int) for v in out), "pooling to a symbolic size")
    ends = [
        max(p[n + i], (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - shape[2 + i] - p[i])
        for i in range(n)
    ]
    c = shape[1]
    ones = e.const(np.ones([c, 1, *k]), e.dtype(x))
    fn = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}[n]
    data, layout = _LAYOUT[n]
    return e.emit(
        fn(x, ones, strides=s, padding=p[:n] + ends, dilation=d, groups=c,
           data_layout=data, kernel_layout=layout, out_layout=data)
    )  # fmt: skip


@emitter("lp_pool")
def lp_pool(e: Emit, x, *, kernel, stride=(), padding=(), dilation=(), ceil_mode=False, p=2.0):
    # (sum |x|^p)^(1/p) over each window, as ONNX LpPool (torch's lp_pool agrees for even p).
    x = _ranked(e, x)
    dt = e.dtype(x)
    xp = e.emit(R.power(R.abs(x), e.const(p, dt)))
    total = _window_sum(e, xp, kernel, stride, padding, dilation, ceil_mode)
    return e.emit(R.power(total, e.const(1.0 / p, dt)))


@emitter("lrn")
def lrn(e: Emit, x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    # ONNX LRN: x / (bias + alpha / size * sum of x^2 over channels
    # [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta. The channel window is an average
    # pool (zeros padded and counted, so it is the sum / size) over [N, 1, C, rest].
    shape = e.shape(x)
    e.require(len(shape) >= 3, "lrn of an input without spatial dims")
    rest = 1
    for v in shape[2:]:
        rest = rest * v
    dt = e.dtype(x)
    sq = e.emit(R.reshape(R.multiply(x, x), [shape[0], 1, shape[1], rest]))
    before, after = (size - 1) // 2, size // 2
    mean = e.emit(
        R.nn.avg_pool2d(sq, [size, 1], [1, 1], [before, 0, after, 0], count_include_pad=True)
    )
    mean = e.emit(R.reshape(mean, shape))
    den = e.emit(R.power(R.add(R.multiply(mean, e.const(alpha, dt)), e.const(bias, dt)),
                         e.const(beta, dt)))  # fmt: skip
    return e.emit(R.divide(x, den))


_RESIZE_METHOD = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_RESIZE_COORD = (
    "half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
)  # fmt: skip
_ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@emitter("resize")
def resize(
    e: Emit, x, scales_in=None, sizes_in=None, roi_in=None, *, sizes=None, scales=None,
    mode="nearest", coordinate_transformation_mode="half_pixel",
    nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, antialias=False,
    exclude_outside=False, roi=None, extrapolation_value=0.0,
):  # fmt: skip
    e.require(not exclude_outside or mode == "cubic", "exclude_outside with a non-cubic mode")
    e.require(mode in _RESIZE_METHOD, f"resize mode {mode!r}")
    coord = coordinate_transformation_mode
    e.require(coord in _RESIZE_COORD + _MATRIX_COORD, f"resize coordinate transformation {coord!r}")
    e.require(mode != "nearest" or nearest_mode in _ROUNDING, f"nearest mode {nearest_mode!r}")
    e.require(not (antialias and mode == "nearest"), "an antialiased nearest resize")
    e.require(e.rank(x) >= 0, "a resize of an input of unknown rank")
    x = e.sized(x)
    shape = e.shape(x)
    r = len(shape)
    if sizes_in is not None:  # run-time sizes (every dim): the spatial ones read as dims
        t = e.int64(sizes_in)
        have = R.strided_slice(e.shape_tensor(x), [0], [0], [2])
        lead = R.equal(R.strided_slice(t, [0], [0], [2]), have)  # N and C stay
        out = e.ints(t, lead, R.greater_equal(t, e.const(0, "int64")))[2:]
        e.require(len(out) == r - 2, "resize sizes not one per dim")
        scale = [None] * (r - 2)
    elif scales_in is not None:
        # Run-time scales (every dim): each size is floor(dim * scale), and the coordinates
        # map through the scale, which the per-axis matrices follow for any scale.
        t = e.emit(R.astype(scales_in, "float64"))
        size = e.emit(R.multiply(R.astype(e.shape_tensor(x), "float64"), t))
        size = e.emit(R.minimum(R.floor(size), e.const(2.0**62, "float64")))  # int64-castable
        ok = R.greater_equal(size, e.const(0.0, "float64"))
        lead = R.equal(R.strided_slice(t, [0], [0], [2]), e.const(1.0, "float64"))  # N, C stay
        out = e.ints(e.emit(R.astype(size, "int64")), ok, lead)[2:]
        e.require(len(out) == r - 2, "resize scales not one per dim")
        scale = [e.emit(R.take(t, e.const(d, "int64"), axis=0, mode="clip")) for d in range(2, r)]
    else:
        out = _resize_size(e, shape[2:], scales)
        scale = [None] * (r - 2) if scales is None else list(scales)
    # ONNX maps coordinates through the scale; image.resize through out / in, which agree
    # when each size is the dim times its scale (a symbolic dim: by a whole number).
    whole = scales_in is None and (
        scales is None
        or all(
            o == n * s if isinstance(n, int) else float(s).is_integer()
            for n, o, s in zip(shape[2:], out, scales)
        )
    )
    simple = not antialias and coord in _RESIZE_COORD and roi is None and roi_in is None
    if not (whole and simple and r in (3, 4, 5)):
        return _resize_by_axis(
            e, x, out, scale, roi, roi_in, mode=mode, coord=coord, nearest_mode=nearest_mode,
            a=cubic_coeff_a, antialias=antialias, exclude_outside=exclude_outside,
            extrapolation_value=extrapolation_value,
        )  # fmt: skip
    kw = dict(
        method=_RESIZE_METHOD[mode],
        coordinate_transformation_mode=coord,
        rounding_method=nearest_mode if mode == "nearest" else "",
        cubic_alpha=cubic_coeff_a,
        cubic_exclude=int(exclude_outside),
    )
    if r == 3:  # one spatial dim: resize [N, C, 1, W] along W
        y = e.emit(R.image.resize2d(R.expand_dims(x, [2]), [1, out[0]], **kw))
        return e.emit(R.squeeze(y, [2]))
    if r == 4:
        return e.emit(R.image.resize2d(x, out, **kw))
    return e.emit(R.image.resize3d(x, out, **kw))


def _resize_size(e: Emit, dims: list, scales) -> list:
    """The spatial output sizes of a resize by constant sizes or scales: the output type's
    where static (sizes always are), else (a symbolic dim) the dim times its scale when that
    is a whole number, which keeps out / in the scale, as image.resize maps coordinates."""
    have = e.out.shape[2:] if e.out.shape is not None else [None] * len(dims)
    out = []
    for i, (n, o) in enumerate(zip(dims, have)):
        s = None if scales is None else float(scales[i])
        if isinstance(o, int):
            out.append(o)
        else:
            whole = s is not None and s.is_integer() and s >= 1
            e.require(whole, "resize of a symbolic dim by a fractional scale")
            out.append(n * int(s))
    return out


# --------------------------------------------------------------- resize, one axis at a time
# What image.resize cannot express (antialias, half_pixel_symmetric, tf_crop_and_resize,
# coordinates mapped through a scale that does not give a whole size) resizes each spatial
# axis in turn, as ONNX's Resize is separable: linear and cubic multiply the axis by a
# [in, out] weight matrix, nearest takes the source indices. Both come from the output
# positions by ONNX's formulas, in float64 like its reference, inside the function, so a
# scale, size or region read at run time serves as well as a constant.
_MATRIX_COORD = ("half_pixel_symmetric", "tf_crop_and_resize")
_F64 = "float64"


def _resize_by_axis(e: Emit, x, out, scale, roi, roi_in, **kw):
    shape = e.shape(x)
    r = len(shape)
    e.require(
        all(isinstance(n, int) for n in shape[2:]),
        "a symbolic spatial dim resized by axis (its weights need the input length)",
    )
    e.require(kw["mode"] == "nearest" or e.dtype(x).startswith(("float", "bfloat")),
              "an interpolating resize of a non-float input")  # fmt: skip
    for d in range(2, r):
        n, m, s = shape[d], out[d - 2], scale[d - 2]
        same = s is None or (not isinstance(s, relax.Expr) and s == 1.0)
        if isinstance(m, int) and m == n and same and roi is None and roi_in is None:
            continue  # an axis that keeps its size and coordinates
        if roi_in is not None:
            box = [e.emit(R.take(roi_in, e.const(i, "int64"), axis=0, mode="clip"))
                   for i in (d, d + r)]  # fmt: skip
        elif roi is not None:
            box = [roi[d - 2], roi[d - 2 + r - 2]]
            # A region read from a float32 tensor computes in float32, as ONNX's reference
            # does: the float64 span of two float32 values may round the other way.
            dt = "float32" if all(np.float32(v) == v for v in box) else _F64
            box = [e.const(v, dt) for v in box]
        else:
            box = None
        x = _resize_axis(e, x, d, n, m, s, box, **kw)
    return x


def _resize_axis(e: Emit, x, axis, n, m, s, box, *, mode, coord, nearest_mode, a, antialias,
                 exclude_outside, extrapolation_value):  # fmt: skip
    """x resized along ``axis`` (n elements) to ``m`` (an int or a dim), ``s`` the scale (a
    float, a 0-d float64 tensor, or None for m / n), ``box`` the region's [start, end]."""
    c = lambda v: e.const(v, _F64)  # noqa: E731
    mf = e.emit(R.astype(R.reshape(e.emit(R.shape_to_tensor(relax.ShapeExpr([m]))), []), _F64))
    if s is None:
        s = e.emit(R.divide(mf, c(float(n))))
    elif not isinstance(s, relax.Expr):
        s = c(float(s))
    width = e.emit(R.multiply(s, c(float(n))))  # the output width, as a float
    y = e.emit(R.arange(0, m, 1, _F64))
    src = _source(e, y, s, n, mf, width, box, coord)
    if mode == "nearest":
        idx = _nearest(e, src, nearest_mode)
        idx = e.emit(R.astype(R.clip(idx, 0.0, float(n - 1)), "int64"))
        y = e.emit(R.take(x, idx, axis=axis, mode="clip"))
    else:  # the axis moved last, times the [n, m] weights, moved back
        wt = _weights(e, src, s, n, mode, a, antialias, exclude_outside)
        wt = e.emit(R.astype(wt, e.dtype(x)))
        perm = [d for d in range(e.rank(x)) if d != axis] + [axis]
        moved = perm != list(range(e.rank(x)))
        y = e.emit(R.matmul(e.emit(R.permute_dims(x, perm)) if moved else x, wt))
        if moved:
            y = e.emit(R.permute_dims(y, [perm.index(d) for d in range(e.rank(x))]))
    if box is None:
        return y
    # tf_crop_and_resize: a sample outside the input is the extrapolation value
    outside = R.logical_or(R.less(src, c(0.0)), R.greater(src, c(float(n - 1))))
    outside = e.emit(R.reshape(outside, [m] + [1] * (e.rank(x) - axis - 1)))
    return e.emit(R.where(outside, e.const(extrapolation_value, e.dtype(x)), y))


def _source(e: Emit, y, s, n: int, mf, width, box, coord: str):
    """The source coordinate of each output position ``y`` (ONNX Resize's formulas)."""
    c = lambda v: e.const(v, _F64)  # noqa: E731
    half = R.subtract(R.divide(R.add(y, c(0.5)), s), c(0.5))
    if coord in ("half_pixel", "pytorch_half_pixel"):
        src = half
        if coord == "pytorch_half_pixel":  # one output sits at -0.5
            src = R.where(R.equal(width, c(1.0)), c(-0.5), half)
    elif coord == "half_pixel_symmetric":
        # The region's center stays the output's: offset by the part the whole size drops.
        offset = R.multiply(c(n / 2), R.subtract(c(1.0), R.divide(mf, width)))
        src = R.add(offset, half)
    elif coord == "align_corners":
        src = R.divide(R.multiply(y, c(float(n - 1))), R.subtract(width, c(1.0)))
        src = R.where(R.equal(width, c(1.0)), c(0.0), src)
    elif coord == "asymmetric":
        src = R.divide(y, s)
    elif coord == "tf_half_pixel_for_nn":
        src = R.divide(R.add(y, c(0.5)), s)
    else:  # tf_crop_and_resize: the box [start, end] (fractions of n - 1) spread over out
        # The span, its middle and the start's offset in the region's own dtype (as ONNX's
        # reference computes them), the rest in float64.
        start, end = box
        dt = e.dtype(start)
        span = e.emit(R.subtract(end, start))
        one = R.astype(R.divide(R.multiply(span, e.const(n - 1, dt)), e.const(2, dt)), _F64)
        first = R.astype(R.multiply(start, e.const(n - 1, dt)), _F64)
        span = e.emit(R.astype(span, _F64))
        many = R.divide(R.multiply(R.multiply(y, span), c(float(n - 1))),
                        R.subtract(width, c(1.0)))  # fmt: skip
        src = R.add(R.where(R.equal(width, c(1.0)), one, many), first)
    return e.emit(src)


def _nearest(e: Emit, src, nearest_mode: str):
    c = lambda v: e.const(v, _F64)  # noqa: E731
    if nearest_mode == "round_prefer_floor":  # x.5 goes down
        return e.emit(R.ceil(R.subtract(src, c(0.5))))
    if nearest_mode == "round_prefer_ceil":
        return e.emit(R.floor(R.add(src, c(0.5))))
    return e.emit(R.floor(src) if nearest_mode == "floor" else R.ceil(src))


def _weights(e: Emit, src, s, n: int, mode: str, a: float, antialias: bool, exclude: bool):
    """The [n, m] matrix of linear / cubic weights: the kernel at each integer position p
    near the source coordinate (stretched by the scale when antialiasing a downsample),
    normalized where ONNX normalizes, p outside the input folded onto the edge (edge padding)
    or dropped (exclude_outside)."""
    c = lambda v: e.const(v, _F64)  # noqa: E731
    support = 1 if mode == "linear" else 2
    # Positions far enough out that the kernel is zero beyond: a source coordinate lies
    # within [-n / 4 - 1, 5 n / 4 + 1] and an antialiased kernel reaches support / scale <=
    # support * n positions (a scale under 1 / n leaves no output).
    reach = n + 4 + (support * n if antialias else support)
    pos = np.arange(-reach, n + reach)
    p = e.const(pos.reshape(-1, 1).astype(np.float64), _F64)  # [P, 1]
    d = e.emit(R.subtract(p, R.reshape(src, [1, -1])))  # [P, m]
    if antialias:
        d = e.emit(R.multiply(d, R.minimum(s, c(1.0))))
    t = e.emit(R.abs(d))
    if mode == "linear":
        k = e.emit(R.maximum(R.subtract(c(1.0), t), c(0.0)))
    else:
        t2 = e.emit(R.multiply(t, t))
        near = R.add(R.subtract(R.multiply(c(a + 2), R.multiply(t2, t)),
                                R.multiply(c(a + 3), t2)), c(1.0))  # fmt: skip
        far = R.subtract(R.add(R.subtract(R.multiply(c(a), R.multiply(t2, t)),
                                          R.multiply(c(5 * a), t2)),
                               R.multiply(c(8 * a), t)), c(4 * a))  # fmt: skip
        k = e.emit(R.where(R.less_equal(t, c(1.0)), near,
                           R.where(R.less(t, c(2.0)), far, c(0.0))))  # fmt: skip
    if exclude:
        inside = ((pos >= 0) & (pos < n)).astype(np.float64).reshape(-1, 1)
        k = e.emit(R.multiply(k, e.const(inside, _F64)))
    if antialias or exclude:
        total = e.emit(R.sum(k, [0], keepdims=True))
        total = R.where(R.equal(total, c(0.0)), c(1.0), total)
        k = e.emit(R.divide(k, total))
    fold = np.zeros((n, len(pos)))
    fold[np.clip(pos, 0, n - 1), np.arange(len(pos))] = 1.0  # p's weight goes to clip(p)
    return e.emit(R.matmul(e.const(fold, _F64), k))


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(e: Emit, x, *, output_size):
    x = _ranked(e, x)
    n = _spatial(e, x)
    if n == 2 and list(output_size) == [1, 1]:  # a global mean, as torch decomposes it
        return e.emit(R.mean(x, [-1, -2], keepdims=True))
    return e.emit(
        _ADAPTIVE[n](x, list(output_size), layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )


def _mask_to(e: Emit, mask, dims: list):
    """An attention mask made to broadcast against the scores, whose axis ``i`` is axis
    ``dims[i][1]`` of ``dims[i][0]``: an axis of a size read at run time (a symbol that may be
    1, [B, 1, L, S] shared by the heads) is gathered to the scores' size there, index i or 0
    where it is 1, checked to be one of the two. TOPI broadcasts only a static 1 and read such
    a mask's rows of one batch and head for another."""
    mask = e.sized(mask)
    same = tvm.sym.Analyzer().can_prove_equal
    i64 = "int64"
    for axis, (src, a) in enumerate(dims):
        have, want = mask.ty.shape.values[axis], e.sized(src).ty.shape.values[a]
        if same(have, want) or (isinstance(have, tvm.tirx.IntImm) and int(have) == 1):
            continue
        n = e.emit(R.take(e.shape_tensor(mask), e.const(axis, i64), axis=0))
        full = e.emit(R.take(e.shape_tensor(src), e.const(a, i64), axis=0))
        one = e.emit(R.equal(n, e.const(1, i64)))
        e.check(R.logical_or(one, R.equal(n, full)))
        idx = R.multiply(R.arange(0, want, 1, i64), R.astype(R.logical_not(one), i64))
        mask = e.emit(R.take(mask, e.emit(idx), axis=axis, mode="clip"))
    return mask


def _grouped_heads(e: Emit, x: relax.Expr, query: relax.Expr) -> relax.Expr:
    """[B, K, S, D] ``x`` with each head repeated H // K times in a row, H the [B, H, L, D]
    query's head count: [B, H, S, D], H and K symbolic; the VM stops unless K divides H."""
    b, k, s, d = e.shape(x)
    heads = e.shape(query)[1]
    one = e.const(1, "int64")
    hq, hk = (e.emit(R.take(e.shape_tensor(t), one, axis=0)) for t in (query, x))
    e.check(R.equal(R.floor_mod(hq, hk), e.const(0, "int64")))
    y = e.emit(R.broadcast_to(R.expand_dims(x, [2]), [b, k, tvm.tirx.floordiv(heads, k), s, d]))
    return e.emit(R.reshape(y, [b, heads, s, d]))  # K * (H // K) elements are H when K | H


@emitter("attention")
def attention(e: Emit, query, key, value, mask=None, *, is_causal=False, scale=None,
              enable_gqa=False):  # fmt: skip
    # torch's layout is [batch, heads, seq, dim]; nn.attention's is [batch, seq, heads, dim].
    r = e.rank(query)
    e.require(r == 4, f"attention of rank {r} (nn.attention takes 4-d)")
    query, key, value = (e.sized(t) for t in (query, key, value))
    qh, kh = e.shape(query)[1], e.shape(key)[1]
    if enable_gqa and isinstance(qh, int) and isinstance(kh, int):
        # query head j reads key and value head j // (qh / kh): each repeated in a row
        e.require(qh % kh == 0, f"grouped-query attention of {qh} heads over {kh}")
        if qh != kh:
            key, value = (e.emit(R.repeat(t, qh // kh, axis=1)) for t in (key, value))
    elif enable_gqa and not tvm.sym.Analyzer().can_prove_equal(qh, kh):
        # head counts known at run time only (an ONNX Attention after a Reshape to -1
        # heads): each key / value head broadcast to qh // kh in a row, and the VM checks
        # that kh * (qh // kh) is qh (kh divides qh) where the op reads them
        key, value = (_grouped_heads(e, t, query) for t in (key, value))
    if mask is not None:
        e.require(e.dtype(mask) != "bool", "a boolean attention mask (nn.attention adds a bias)")
        e.require(e.rank(mask) == 4, "an attention mask that is not 4-d")
    if is_causal:
        sq, sk = e.shape(query)[2], e.shape(key)[2]
        e.require(sq == sk, "causal attention with different query and key lengths")
    # batch and heads as the query's, and value's length as key's (Relax must see them
    # equal); that length a symbol of its own, since TOPI's attention compares the two by
    # identity and refuses a length computed from other symbols
    query = e.sized(query)
    b, h, sq, d = query.ty.shape.values
    sk = e.named_dim(e.sized(key).ty.shape.values[2])
    key = e.agree(key, [b, h, sk, d])
    value = e.agree(value, [b, h, sk, None])
    if mask is not None:
        mask = _mask_to(e, mask, [(query, 0), (query, 1), (query, 2), (key, 2)])
    perm = [0, 2, 1, 3]
    q, k, v = (e.emit(R.permute_dims(t, perm)) for t in (query, key, value))
    causal = "TopLeft" if is_causal else None
    out = e.emit(R.nn.attention(q, k, v, bias=mask, scale=scale, causal_mask=causal))
    return e.emit(R.permute_dims(out, perm))
