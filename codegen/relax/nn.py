"""Relax emitters of the nn family: convolution, matrix products, normalization, pooling,
softmax, attention, embedding."""

from __future__ import annotations

import numpy as np
from tvm import relax

from codegen.relax.registry import Emit, emitter, unsupported

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
    e.require(divisor_override is None, "avg_pool with a divisor override")
    n, k, s, p, d = _pool_args(e, x, kernel, stride, padding, ())
    return e.emit(
        _AVG[n](x, k, s, p, d, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                layout=_LAYOUT[n][0], out_layout=_LAYOUT[n][0])
    )  # fmt: skip


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
    perm = [0, 2, 1, 3]
    q, k, v = (e.emit(R.permute_dims(t, perm)) for t in (query, key, value))
    causal = "TopLeft" if is_causal else None
    out = e.emit(R.nn.attention(q, k, v, bias=mask, scale=scale, causal_mask=causal))
    return e.emit(R.permute_dims(out, perm))


unsupported("resize", "no emitter yet (image.resize2d's modes not mapped)")
unsupported("lp_pool", "Relax has no Lp pool and msc has no decomposition for it")
unsupported("lrn", "Relax has no local response normalization and msc has no decomposition")
