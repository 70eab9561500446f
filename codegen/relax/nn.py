"""Relax emitters of the nn family: convolution, matrix products, normalization, pooling,
softmax, attention, embedding."""

from __future__ import annotations

import numpy as np
from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op
_LAYOUT = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}
_T_LAYOUT = {1: ("NCW", "IOW"), 2: ("NCHW", "IOHW"), 3: ("NCDHW", "IODHW")}


def _fill(v, n, default):
    v = list(v or ())
    return v if v else [default] * n


def _spatial(e: Emit, x) -> int:
    n = e.rank(x) - 2
    e.require(n in (1, 2, 3), f"{n}-d spatial input (Relax has 1-d to 3-d)")
    return n


def _bias(e: Emit, y, bias, n: int):
    if bias is None:
        return y
    b = R.reshape(bias, [1, -1] + [1] * n)
    return e.emit(R.add(y, b))


@emitter("conv")
def conv(e: Emit, x, weight, bias=None, *, stride=(), padding=(), dilation=(), groups=1):
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
    return e.emit(R.matmul(a, b, out_dtype=e.out_dtype(a)))


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
    return_indices=False,
):  # fmt: skip
    e.require(not return_indices, "max_pool with indices (Relax pools return values only)")
    n, k, s, p, d = _pool_args(e, x, kernel, stride, padding, dilation)
    return e.emit(
        _MAX[n](x, k, s, p, d, ceil_mode=ceil_mode, count_include_pad=False,
                layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )  # fmt: skip


@emitter("avg_pool")
def avg_pool(
    e: Emit, x, *, kernel, stride=(), padding=(), ceil_mode=False, count_include_pad=True,
    divisor_override=None,
):  # fmt: skip
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
    e.require(roi_in is None, "a tf_crop_and_resize region computed at run time")
    e.require(not antialias, "an antialiased resize (image.resize has no antialias)")
    e.require(roi is None, "a tf_crop_and_resize region (not mapped onto image.resize's roi)")
    e.require(not exclude_outside or mode == "cubic", "exclude_outside with a non-cubic mode")
    e.require(mode in _RESIZE_METHOD, f"resize mode {mode!r}")
    coord = coordinate_transformation_mode
    e.require(coord in _RESIZE_COORD, f"resize coordinate transformation {coord!r}")
    e.require(mode != "nearest" or nearest_mode in _ROUNDING, f"nearest mode {nearest_mode!r}")
    shape = e.shape(x)
    r = len(shape)
    e.require(r in (3, 4, 5), f"resize of a rank-{r} input (image.resize takes 1-d to 3-d)")
    if sizes_in is not None:  # run-time sizes (every dim): the spatial ones read as dims
        t = e.int64(sizes_in)
        have = R.strided_slice(e.shape_tensor(x), [0], [0], [2])
        lead = R.equal(R.strided_slice(t, [0], [0], [2]), have)  # N and C stay
        out = e.ints(t, lead, R.greater_equal(t, e.const(0, "int64")))[2:]
        e.require(len(out) == r - 2, "resize sizes not one per dim")
    elif scales_in is not None:
        # Run-time scales (every dim): ONNX maps coordinates through the scale, image.resize
        # through out / in, which agree when each size times its scale is whole; checked at
        # run time (the VM stops on other scales, as a constant one is refused when built).
        t = e.emit(R.astype(scales_in, "float64"))
        size = e.emit(R.multiply(R.astype(e.shape_tensor(x), "float64"), t))
        size = e.emit(R.minimum(size, e.const(2.0**62, "float64")))  # castable to int64
        whole = R.logical_and(
            R.equal(R.floor(size), size), R.greater_equal(size, e.const(0.0, "float64"))
        )
        lead = R.equal(R.strided_slice(t, [0], [0], [2]), e.const(1.0, "float64"))  # N, C stay
        out = e.ints(e.emit(R.astype(size, "int64")), whole, lead)[2:]
        e.require(len(out) == r - 2, "resize scales not one per dim")
    else:
        out = list(e.out.shape[2:])
        e.require(all(isinstance(v, int) for v in out), "resize to a symbolic size")
    if scales is not None:
        # ONNX maps coordinates through the given scale; image.resize through out / in.
        e.require(
            all(isinstance(n, int) and o == n * s for n, o, s in zip(shape[2:], out, scales)),
            "resize by scales that do not give whole sizes",
        )
    method = _RESIZE_METHOD[mode]
    kw = dict(
        method=method,
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


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(e: Emit, x, *, output_size):
    n = _spatial(e, x)
    if n == 2 and list(output_size) == [1, 1]:  # a global mean, as torch decomposes it
        return e.emit(R.mean(x, [-1, -2], keepdims=True))
    return e.emit(
        _ADAPTIVE[n](x, list(output_size), layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )


@emitter("attention")
def attention(e: Emit, query, key, value, mask=None, *, is_causal=False, scale=None,
              enable_gqa=False):  # fmt: skip
    # torch's layout is [batch, heads, seq, dim]; nn.attention's is [batch, seq, heads, dim].
    r = e.rank(query)
    e.require(r == 4, f"attention of rank {r} (nn.attention takes 4-d)")
    qh, kh = e.shape(query)[1], e.shape(key)[1]
    e.require(enable_gqa is False or qh == kh, "grouped-query attention")
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
    b, h, _, d = query.ty.shape.values
    sk = e.named_dim(e.sized(key).ty.shape.values[2])
    key = e.agree(key, [b, h, sk, d])
    value = e.agree(value, [b, h, sk, None])
    perm = [0, 2, 1, 3]
    q, k, v = (e.emit(R.permute_dims(t, perm)) for t in (query, key, value))
    causal = "TopLeft" if is_causal else None
    out = e.emit(R.nn.attention(q, k, v, bias=mask, scale=scale, causal_mask=causal))
    return e.emit(R.permute_dims(out, perm))
