"""Neural-network ONNX ops: MatMul/Gemm/Einsum, Conv, pooling, normalization, softmax, Dropout,
Resize.

# NOTE: ``auto_pad`` is resolved to explicit ``padding`` at import (SAME_* needs the spatial
# input dims, which must then be static). Gemm keeps transA/transB/alpha/beta exactly (canonical
# ``gemm``); normalization ops stay high-level (``layer_norm``, ``rms_norm``, ``group_norm``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from msc.frontend.onnx.importer import Ctx, Slot, Unsupported
from msc.frontend.onnx.registry import converter
from msc.ir import DType, Weight
from msc.ops.infer import pool_out


# ---------------------------------------------------------------------------- linear algebra
@converter("MatMul", since=1)
def matmul(ctx: Ctx, A, B):  # noqa: N803
    return ctx.op("matmul", A, B)


@converter("Gemm", since=7)
def gemm(ctx: Ctx, A, B, C=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    return ctx.op(
        "gemm", A, B, C, alpha=alpha, beta=beta, trans_a=bool(transA), trans_b=bool(transB)
    )


@converter("Einsum", since=12)
def einsum(ctx: Ctx, *Inputs, equation):  # noqa: N803
    return ctx.op("einsum", *Inputs, equation=equation)


# ---------------------------------------------------------------------------- padding
def _auto_pads(
    ctx: Ctx, x, auto_pad: str, kernel, strides, dilations, pads, what: str, fill=0.0
) -> tuple[Any, list[int]]:
    """The input and the padding attribute for ``auto_pad``. SAME padding of a dim known at
    run time only, with a stride over 1 (its amount depends on the size), becomes an explicit
    pad of the input by amounts computed from its shape, with ``fill`` (None: refused, for
    a pool whose padding is not a value), and no padding attribute."""
    n = len(kernel)
    if auto_pad in ("NOTSET", ""):
        return x, list(pads) if pads else [0] * (2 * n)
    if auto_pad == "VALID":
        return x, [0] * (2 * n)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto_pad!r}")
    spatial = ctx.shape(x)[2:]
    upper = auto_pad == "SAME_UPPER"
    begin, end = [], []
    runtime = False
    for i in range(n):
        size, span = spatial[i], (kernel[i] - 1) * dilations[i] + 1
        if not isinstance(size, int) and strides[i] != 1:
            runtime = True
            continue
        if strides[i] == 1:  # out = size, so the total is span - 1 whatever the size
            total = span - 1
        else:
            total = max(0, (-(-size // strides[i]) - 1) * strides[i] + span - size)
        small, big = total // 2, total - total // 2
        begin.append(small if upper else big)
        end.append(big if upper else small)
    if not runtime:
        return x, begin + end
    if fill is None:
        raise Unsupported(f"{what} auto_pad={auto_pad} over a dim only known at run time")
    return _same_pad(ctx, x, kernel, strides, dilations, upper, fill), [0] * (2 * n)


def _same_pad(ctx: Ctx, x, kernel, strides, dilations, upper: bool, fill: float):
    """``x`` padded as SAME_UPPER / SAME_LOWER asks, the amounts computed at run time from its
    spatial sizes: total = max(0, (ceil(size / s) - 1) s + span - size), the odd one at the
    end (upper) or the start (lower)."""
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    begin, end = [], []
    for i in range(len(kernel)):
        size = ctx.op("shape", x, start=2 + i, end=3 + i)  # [1]
        s, span = strides[i], (kernel[i] - 1) * dilations[i] + 1
        out = ctx.op("div", ctx.op("add", size, i64([s - 1])), i64([s]))  # ceil, sizes >= 0
        total = ctx.op("sub", ctx.op("add", ctx.op("mul", out, i64([s])), i64([span - s])), size)
        total = ctx.op("maximum", total, i64([0]))
        small = ctx.op("div", total, i64([2]))
        big = ctx.op("sub", total, small)
        begin.append(small if upper else big)
        end.append(big if upper else small)
    pads = ctx.op("concat", i64([0, 0]), *begin, i64([0, 0]), *end, axis=0)
    return ctx.op("pad", x, pads, None, pads=None, mode="constant", value=fill)


def _kernel(ctx: Ctx, W, kernel_shape) -> list[int]:
    if kernel_shape:
        return list(kernel_shape)
    s = ctx.shape(W)[2:]
    if not all(isinstance(d, int) for d in s):
        raise Unsupported("kernel size only known at run time")
    return list(s)


# ---------------------------------------------------------------------------- convolution
@converter("Conv", since=1)
def conv(
    ctx: Ctx,
    X,  # noqa: N803
    W,  # noqa: N803
    B=None,  # noqa: N803
    *,
    auto_pad="NOTSET",
    dilations=None,
    group=1,
    kernel_shape=None,
    pads=None,
    strides=None,
):
    k = _kernel(ctx, W, kernel_shape)
    n = len(k)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    X, pads = _auto_pads(ctx, X, auto_pad, k, strides, dilations, pads, "Conv")  # noqa: N806
    return ctx.op("conv", X, W, B, stride=strides, padding=pads, dilation=dilations, groups=group)


@converter("ConvTranspose", since=1)
def conv_transpose(
    ctx: Ctx,
    X,  # noqa: N803
    W,  # noqa: N803
    B=None,  # noqa: N803
    *,
    auto_pad="NOTSET",
    dilations=None,
    group=1,
    kernel_shape=None,
    output_padding=None,
    output_shape=None,
    pads=None,
    strides=None,
):
    k = _kernel(ctx, W, kernel_shape)
    n = len(k)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    out_pad = list(output_padding or [0] * n)
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        spatial = ctx.shape(X)[2:]
        if not all(isinstance(d, int) for d in spatial):
            raise Unsupported("ConvTranspose auto_pad over a dim only known at run time")
        output_shape = [d * s for d, s in zip(spatial, strides)]
    if output_shape is not None:
        output_shape = list(output_shape)[-n:]
        spatial = ctx.shape(X)[2:]
        if not all(isinstance(d, int) for d in spatial):
            raise Unsupported("ConvTranspose output_shape with a dim only known at run time")
        begin, end = [], []
        for i in range(n):
            total = (
                strides[i] * (spatial[i] - 1)
                + out_pad[i]
                + (k[i] - 1) * dilations[i]
                + 1
                - output_shape[i]
            )
            if total < 0:
                out_pad[i] -= total
                total = 0
            if auto_pad == "SAME_LOWER":
                begin.append(total - total // 2)
                end.append(total // 2)
            else:
                begin.append(total // 2)
                end.append(total - total // 2)
        pads = begin + end
    elif auto_pad == "VALID" or not pads:
        pads = [0] * (2 * n)
    return ctx.op(
        "conv_transpose",
        X,
        W,
        B,
        stride=strides,
        padding=list(pads),
        dilation=dilations,
        groups=group,
        output_padding=out_pad,
    )


# ---------------------------------------------------------------------------- pooling
def _pool_common(ctx, X, auto_pad, kernel_shape, strides, dilations, pads, what, fill):  # noqa: N803
    n = len(kernel_shape)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    X, pads = _auto_pads(ctx, X, auto_pad, kernel_shape, strides, dilations, pads, what, fill)  # noqa: N806
    return X, strides, dilations, pads


@converter("MaxPool", since=1)
def max_pool(
    ctx: Ctx,
    X,  # noqa: N803
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    dilations=None,
    kernel_shape,
    pads=None,
    storage_order=0,
    strides=None,
):
    want_indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    # padding a max pool takes is never the maximum; indices would count the padded input
    fill = None if want_indices or not ctx.dtype(X).is_floating else float("-inf")
    X, strides, dilations, pads = _pool_common(  # noqa: N806
        ctx, X, auto_pad, kernel_shape, strides, dilations, pads, "MaxPool", fill
    )
    attrs = dict(
        kernel=list(kernel_shape),
        stride=strides,
        padding=pads,
        dilation=dilations,
        ceil_mode=bool(ceil_mode),
    )
    if not want_indices:
        return ctx.op("max_pool", X, **attrs)
    y, idx = ctx.ops("max_pool", X, return_indices=True, **attrs)
    # ONNX indices are flat over the whole input; the canonical ones over each channel.
    s = ctx.static_shape(X)
    if s is None:
        raise Unsupported("MaxPool indices of an input with a shape only known at run time")
    if storage_order:
        idx = _column_major(ctx, idx, list(s[2:]))
    per = math.prod(s[2:])
    ctx.check_size(s[0] * s[1], "MaxPool index offsets")
    offset = (np.arange(s[0] * s[1], dtype=np.int64) * per).reshape(
        (s[0], s[1]) + (1,) * (len(s) - 2)
    )
    return [y, ctx.op("add", idx, offset)]


def _column_major(ctx: Ctx, idx, spatial: list[int]):
    """Row-major flat indices over ``spatial`` as column-major ones (storage_order=1): the
    coordinates i_d = idx // prod(spatial[d+1:]) % spatial[d], weighted by prod(spatial[:d])."""
    flat = None
    for d, size in enumerate(spatial):
        i_d = idx
        if (inner := math.prod(spatial[d + 1 :])) != 1:
            i_d = ctx.op("floor_divide", i_d, np.array(inner, np.int64))
        if d:  # the first coordinate is below spatial[0] already
            i_d = ctx.op("remainder", i_d, np.array(size, np.int64))
        if (outer := math.prod(spatial[:d])) != 1:
            i_d = ctx.op("mul", i_d, np.array(outer, np.int64))
        flat = i_d if flat is None else ctx.op("add", flat, i_d)
    return flat


@converter("AveragePool", since=1)
def average_pool(
    ctx: Ctx,
    X,  # noqa: N803
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    count_include_pad=0,
    dilations=None,
    kernel_shape,
    pads=None,
    strides=None,
):
    # padding an average counts only with count_include_pad (zeros); else it is no value
    X, strides, dilations, pads = _pool_common(  # noqa: N806
        ctx, X, auto_pad, kernel_shape, strides, dilations, pads, "AveragePool",
        0.0 if count_include_pad else None,
    )  # fmt: skip
    if any(d != 1 for d in dilations):
        return _dilated_average_pool(
            ctx, X, list(kernel_shape), strides, dilations, pads, ceil_mode, count_include_pad
        )
    return ctx.op(
        "avg_pool",
        X,
        kernel=list(kernel_shape),
        stride=strides,
        padding=pads,
        ceil_mode=bool(ceil_mode),
        count_include_pad=bool(count_include_pad),
    )


def _dilated_average_pool(ctx: Ctx, X, kernel, strides, dilations, pads, ceil_mode, with_pad):  # noqa: N803
    """A dilated window's sum as a depthwise convolution with a ones kernel, divided by how
    many of its taps fall on the input (or on the input and its pads, with count_include_pad).
    A window is a box, so that count is the product of per-dim counts, known at import."""
    shape = ctx.shape(X)
    n = len(kernel)
    channels, spatial = shape[1], shape[2:]
    if not (isinstance(channels, int) and all(isinstance(d, int) for d in spatial)):
        raise Unsupported("dilated AveragePool over run-time channel or spatial sizes")
    padding, counts = [], []
    for i in range(n):
        size, k, st, d = spatial[i], kernel[i], strides[i], dilations[i]
        begin, end = pads[i], pads[n + i]
        out = pool_out(size, k, st, begin, end, d, bool(ceil_mode))
        # ceil_mode's last window may reach past the end pad: zeros there, never counted.
        padding.append((begin, max(end, (out - 1) * st + d * (k - 1) + 1 - size - begin)))
        taps = np.arange(out)[:, None] * st - begin + np.arange(k)[None, :] * d
        lo, hi = (-begin, size + end) if with_pad else (0, size)
        counts.append(((taps >= lo) & (taps < hi)).sum(axis=1))
    divisor = counts[0]
    for c in counts[1:]:
        divisor = np.multiply.outer(divisor, c)
    ctx.check_size(divisor.size, "the dilated AveragePool divisor")
    dt = ctx.dtype(X).to_numpy()
    ones = np.ones((channels, 1, *kernel), dt)
    total = ctx.op(
        "conv",
        X,
        ones,
        None,
        stride=list(strides),
        padding=[b for b, _ in padding] + [e for _, e in padding],
        dilation=list(dilations),
        groups=channels,
    )
    return ctx.op("div", total, divisor.astype(dt))


@converter("LpPool", since=1)
def lp_pool(
    ctx: Ctx,
    X,  # noqa: N803
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    dilations=None,
    kernel_shape,
    p=2,
    pads=None,
    strides=None,
):
    X, strides, dilations, pads = _pool_common(  # noqa: N806
        ctx, X, auto_pad, kernel_shape, strides, dilations, pads, "LpPool", 0.0
    )  # zeros add nothing to the sum of |x|^p
    return ctx.op(
        "lp_pool",
        X,
        kernel=list(kernel_shape),
        stride=strides,
        padding=pads,
        dilation=dilations,
        ceil_mode=bool(ceil_mode),
        p=float(p),
    )


def _spatial_axes(ctx: Ctx, X) -> list[int]:  # noqa: N803
    return list(range(2, ctx.rank(X)))


@converter("GlobalAveragePool", since=1)
def global_average_pool(ctx: Ctx, X):  # noqa: N803
    return ctx.op("reduce_mean", X, axes=_spatial_axes(ctx, X), keepdims=True)


@converter("GlobalMaxPool", since=1)
def global_max_pool(ctx: Ctx, X):  # noqa: N803
    return ctx.op("reduce_max", X, axes=_spatial_axes(ctx, X), keepdims=True)


@converter("GlobalLpPool", since=2)
def global_lp_pool(ctx: Ctx, X, *, p=2):  # noqa: N803
    axes = _spatial_axes(ctx, X)
    if p == 1:
        return ctx.op("reduce_l1", X, axes=axes, keepdims=True)
    if p == 2:
        return ctx.op("reduce_l2", X, axes=axes, keepdims=True)
    dt = ctx.dtype(X).to_numpy()
    s = ctx.op(
        "reduce_sum", ctx.op("pow", ctx.op("abs", X), np.array(p, dt)), axes=axes, keepdims=True
    )
    return ctx.op("pow", s, np.array(1.0 / p, dt))


# ---------------------------------------------------------------------------- normalization
@converter("BatchNormalization", since=7)
def batch_norm(
    ctx: Ctx,
    X,  # noqa: N803
    scale,
    B,  # noqa: N803
    input_mean,
    input_var,
    *,
    epsilon=1e-5,
    momentum=0.9,
    spatial=1,
    training_mode=0,
):
    if training_mode:
        return _batch_norm_training(ctx, X, scale, B, input_mean, input_var, epsilon, momentum)
    if any(o for o in ctx.node.output[1:]):
        raise Unsupported("BatchNormalization running-statistics outputs (training)")
    if not spatial:
        raise Unsupported("BatchNormalization with spatial=0")
    dt = ctx.dtype(X)
    return ctx.op(
        "batch_norm",
        X,
        ctx.cast(scale, dt),
        ctx.cast(B, dt),
        ctx.cast(input_mean, dt),
        ctx.cast(input_var, dt),
        eps=epsilon,
    )


def _batch_norm_training(ctx: Ctx, x, scale, bias, mean, var, epsilon, momentum) -> list:
    """ONNX's training mode (opset 14+): normalised by the batch's own mean and (biased)
    variance over every axis but the channel's; the running statistics come out updated as
    mean * momentum + batch_mean * (1 - momentum), and likewise the variance."""
    r = ctx.rank(x)
    if r < 2:
        raise Unsupported("BatchNormalization of an input of rank < 2")
    dt = ctx.dtype(x)
    axes = [0, *range(2, r)]
    bmean = ctx.op("reduce_mean", x, axes=axes, keepdims=True)
    d = ctx.op("sub", x, bmean)
    bvar = ctx.op("reduce_mean", ctx.op("mul", d, d), axes=axes, keepdims=True)
    along = [1, -1] + [1] * (r - 2)  # a per-channel vector broadcast over x

    def chan(v):
        return ctx.op("reshape", ctx.cast(v, dt), shape=along)

    nd = dt.to_numpy()
    inv = ctx.op("reciprocal", ctx.op("sqrt", ctx.op("add", bvar, np.array(epsilon, nd))))
    y = ctx.op("add", ctx.op("mul", ctx.op("mul", d, inv), chan(scale)), chan(bias))
    flat_mean = ctx.op("reshape", bmean, shape=[-1])
    flat_var = ctx.op("reshape", bvar, shape=[-1])
    m, keep = np.array(momentum, nd), np.array(1.0 - momentum, nd)

    def running(old, new):
        return ctx.op("add", ctx.op("mul", ctx.cast(old, dt), m), ctx.op("mul", new, keep))

    return [y, running(mean, flat_mean), running(var, flat_var)]


@converter("InstanceNormalization", since=6)
def instance_norm(ctx: Ctx, input, scale, B, *, epsilon=1e-5):  # noqa: A002, N803
    return ctx.op("instance_norm", input, scale, B, eps=epsilon)


def _unless_default(t, fill: float):
    """None for a Constant-node scale of all ones / bias of all zeros (the op's default, which
    msc's ONNX codegen writes for a norm without weight), else ``t``. An initializer is a
    parameter and is kept whatever it holds."""
    if isinstance(t, Slot) and t.known and not isinstance(t.value, Weight):
        c = t.const
        if c is not None and c.size and np.all(c == fill):
            return None
    return t


def _affine_fits(ctx: Ctx, w, x, axis: int) -> bool:
    if w is None:
        return True
    ws, xs = ctx.type(w).shape, ctx.type(x).shape
    return ws is not None and xs is not None and tuple(ws) == tuple(xs[axis:])


def _layer_norm(ctx: Ctx, X, Scale, B, a: int, epsilon: float):  # noqa: N803
    if _affine_fits(ctx, Scale, X, a) and _affine_fits(ctx, B, X, a):
        ins = [X, Scale, B]
        while ins[-1] is None:  # absent trailing inputs are left off, as builders do
            ins.pop()
        return ctx.op("layer_norm", *ins, axis=a, eps=epsilon)
    # Scale/B broadcast against the normalized dims: apply them after
    y = ctx.op("layer_norm", X, axis=a, eps=epsilon)
    if Scale is not None:
        y = ctx.op("mul", y, Scale)
    return y if B is None else ctx.op("add", y, B)


@converter("LayerNormalization", since=17)
def layer_norm(ctx: Ctx, X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):  # noqa: N803
    r = ctx.rank(X)
    a = axis % r
    y = _layer_norm(ctx, X, _unless_default(Scale, 1.0), _unless_default(B, 0.0), a, epsilon)
    outs = ctx.node.output
    if len(outs) == 1 or not any(outs[1:]):
        return y
    # Mean and InvStdDev are asked for: compute them beside the high-level op.
    axes = list(range(a, r))
    xs = ctx.cast(X, DType.FLOAT32) if stash_type == 1 else X
    mean = ctx.op("reduce_mean", xs, axes=axes, keepdims=True)
    var = ctx.op("var", xs, axes=axes, keepdims=True, correction=0.0)
    eps = np.array(epsilon, ctx.dtype(xs).to_numpy())
    inv = ctx.op("rsqrt", ctx.op("add", var, eps))
    return [y, mean, inv]


@converter("RMSNormalization", since=23)
def rms_norm(ctx: Ctx, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):  # noqa: N803
    a = axis % ctx.rank(X)
    scale = _unless_default(scale, 1.0)
    if scale is None:
        return ctx.op("rms_norm", X, axis=a, eps=epsilon)
    if _affine_fits(ctx, scale, X, a):
        return ctx.op("rms_norm", X, scale, axis=a, eps=epsilon)
    return ctx.op("mul", ctx.op("rms_norm", X, axis=a, eps=epsilon), scale)


# ------------------------------------------------------------- onnxruntime's fused norms
# onnxruntime's transformer optimizer writes these (SimplifiedLayerNormalization in the default
# domain, the rest in com.microsoft); each is the canonical norm of a sum.
MS = "com.microsoft"


def _skip_sum(ctx: Ctx, x, skip, bias):
    s = ctx.op("add", x, skip)
    return s if bias is None else ctx.op("add", s, bias)


def _only_first_and_last(ctx: Ctx, what: str) -> None:
    outs = list(ctx.node.output)
    if any(outs[1:3]):
        raise Unsupported(f"{what}'s mean / inv_std_var outputs (training)")


@converter("SimplifiedLayerNormalization", since=1)
def simplified_layer_norm(ctx: Ctx, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):  # noqa: N803
    """RMSNorm (onnxruntime's contrib op in the default domain)."""
    if any(ctx.node.output[1:]):
        raise Unsupported("SimplifiedLayerNormalization's inv_std_var output")
    return rms_norm(ctx, X, scale, axis=axis, epsilon=epsilon, stash_type=stash_type)


@converter("SimplifiedLayerNormalization", since=1, domain=MS)
def ms_simplified_layer_norm(ctx: Ctx, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):  # noqa: N803
    return simplified_layer_norm(ctx, X, scale, axis=axis, epsilon=epsilon, stash_type=stash_type)


@converter("LayerNormalization", since=1, domain=MS)
def ms_layer_norm(ctx: Ctx, X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):  # noqa: N803
    if any(ctx.node.output[1:]):
        raise Unsupported("LayerNormalization's mean / inv_std_var outputs")
    return layer_norm(ctx, X, Scale, B, axis=axis, epsilon=epsilon, stash_type=stash_type)


@converter("SkipLayerNormalization", since=1, domain=MS)
def skip_layer_norm(ctx: Ctx, input, skip, gamma, beta=None, bias=None, *, epsilon=1e-12):  # noqa: A002
    """layer_norm(input + skip + bias) * gamma + beta over the last dim; output 3 is the sum."""
    _only_first_and_last(ctx, "SkipLayerNormalization")
    s = _skip_sum(ctx, input, skip, bias)
    return [_layer_norm(ctx, s, gamma, beta, ctx.rank(s) - 1, epsilon), None, None, s]


@converter("SkipSimplifiedLayerNormalization", since=1, domain=MS)
def skip_simplified_layer_norm(ctx: Ctx, input, skip, gamma, bias=None, *, epsilon=1e-12):  # noqa: A002
    """rms_norm(input + skip + bias) * gamma over the last dim; output 3 is the sum."""
    _only_first_and_last(ctx, "SkipSimplifiedLayerNormalization")
    s = _skip_sum(ctx, input, skip, bias)
    return [rms_norm(ctx, s, gamma, axis=-1, epsilon=epsilon), None, None, s]


@converter("EmbedLayerNormalization", since=1, domain=MS)
def embed_layer_norm(
    ctx: Ctx,
    input_ids,
    segment_ids,
    word_embedding,
    position_embedding,
    segment_embedding=None,
    gamma=None,
    beta=None,
    mask=None,
    position_ids=None,
    *,
    epsilon=1e-12,
    mask_index_type=1,
):
    """layer_norm(word[ids] + position[pos] + segment[segment_ids]); mask_index is the count of
    ones per row of the mask (int32), output 2 the embedding sum."""
    y = ctx.op("embedding", word_embedding, ctx.cast(input_ids, DType.INT64))
    if position_ids is None:
        seq = ctx.shape(input_ids)[1]
        if not isinstance(seq, int):
            raise Unsupported("EmbedLayerNormalization without position_ids over a run-time length")
        position_ids = np.arange(seq, dtype=np.int64).reshape(1, seq)
    y = ctx.op(
        "add", y, ctx.op("embedding", position_embedding, ctx.cast(position_ids, DType.INT64))
    )
    if segment_ids is not None and segment_embedding is not None:
        seg = ctx.op("embedding", segment_embedding, ctx.cast(segment_ids, DType.INT64))
        y = ctx.op("add", y, seg)
    out = _layer_norm(ctx, y, gamma, beta, ctx.rank(y) - 1, epsilon)
    mask_index = None
    outs = list(ctx.node.output)
    if len(outs) > 1 and outs[1]:
        if mask_index_type == 0 or mask is None:
            if mask is None and mask_index_type:
                b = ctx.shape(input_ids)[0]
                if not isinstance(b, int):
                    raise Unsupported("EmbedLayerNormalization mask_index over a run-time batch")
                mask_index = np.zeros((b,), np.int32)
        else:
            m = ctx.cast(mask, DType.INT32)
            mask_index = ctx.op("reduce_sum", m, axes=[1], keepdims=False)
    return [out, mask_index, y]


@converter("FusedMatMul", since=1, domain=MS)
def fused_matmul(
    ctx: Ctx,
    A,
    B,
    *,
    alpha=1.0,
    transA=0,
    transB=0,
    transBatchA=0,
    transBatchB=0,  # noqa: N803
):
    """alpha * op(A) @ op(B), op swapping the last two dims when trans is set."""
    if transBatchA or transBatchB:
        raise Unsupported("FusedMatMul with transBatchA / transBatchB")

    def t(x, on):
        if not on:
            return x
        r = ctx.rank(x)
        perm = list(range(r))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return ctx.op("transpose", x, perm=perm)

    y = ctx.op("matmul", t(A, transA), t(B, transB))
    if alpha != 1.0:
        y = ctx.op("mul", y, np.array(alpha, ctx.dtype(y).to_numpy()))
    return y


def _per_channel(ctx: Ctx, t, channels, groups):
    """A per-group [G] tensor as per-channel [C] (GroupNormalization before opset 21)."""
    if not isinstance(channels, int):
        raise Unsupported("GroupNormalization-18 with a channel count only known at run time")
    idx = np.arange(channels, dtype=np.int64) // (channels // groups)
    return ctx.op("gather", t, idx, axis=0)


@converter("GroupNormalization", since=18)
def group_norm_18(ctx: Ctx, X, scale, bias, *, epsilon=1e-5, num_groups):  # noqa: N803
    c = ctx.shape(X)[1]
    s = _per_channel(ctx, scale, c, num_groups)
    b = _per_channel(ctx, bias, c, num_groups)
    return ctx.op("group_norm", X, s, b, num_groups=num_groups, eps=epsilon)


@converter("GroupNormalization", since=21)
def group_norm(ctx: Ctx, X, scale, bias, *, epsilon=1e-5, num_groups, stash_type=1):  # noqa: N803
    return ctx.op("group_norm", X, scale, bias, num_groups=num_groups, eps=epsilon)


@converter("LRN", since=1)
def lrn(ctx: Ctx, X, *, size, alpha=1e-4, beta=0.75, bias=1.0):  # noqa: N803
    return ctx.op("lrn", X, size=size, alpha=alpha, beta=beta, bias=bias)


@converter("LpNormalization", since=1)
def lp_normalization(ctx: Ctx, input, *, axis=-1, p=2):  # noqa: A002
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization with p={p}")
    norm = ctx.op("reduce_l2" if p == 2 else "reduce_l1", input, axes=[axis], keepdims=True)
    # A zero norm means an all-zero slice: divided by 1 it stays 0 (onnxruntime's result)
    # instead of 0 / 0.
    dt = ctx.dtype(input).to_numpy()
    zero = ctx.op("eq", norm, np.array(0, dt))
    return ctx.op("div", input, ctx.op("where", zero, np.array(1, dt), norm))


@converter("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx: Ctx, X, *, axes=(0, 2, 3)):  # noqa: N803
    dt = ctx.dtype(X).to_numpy()
    mean = ctx.op("reduce_mean", X, axes=list(axes), keepdims=True)
    sq_mean = ctx.op("reduce_mean", ctx.op("mul", X, X), axes=list(axes), keepdims=True)
    var = ctx.op("sub", sq_mean, ctx.op("mul", mean, mean))
    std = ctx.op("add", ctx.op("sqrt", var), np.array(1e-9, dt))
    return ctx.op("div", ctx.op("sub", X, mean), std)


# ---------------------------------------------------------------------------- softmax
def _softmax_2d(ctx: Ctx, canon: str, x, axis: int):
    """Before opset 13 softmax sees the input as 2-d [prod(dims[:axis]), prod(dims[axis:])]."""
    r = ctx.rank(x)
    a = axis % r if r else 0
    if a == r - 1:
        return ctx.op(canon, x, axis=-1)
    flat = ctx.op("flatten", x, start_axis=a, end_axis=-1)
    if a > 1:
        flat = ctx.op("flatten", flat, start_axis=0, end_axis=a - 1)
    elif a == 0:
        flat = ctx.op("unsqueeze", flat, axes=[0])
    y = ctx.op(canon, flat, axis=-1)
    s = ctx.static_shape(x)
    if s is not None:
        return ctx.op("reshape", y, shape=list(s))
    return ctx.op("reshape", y, ctx.op("shape", x))


@converter("Softmax", since=1)
def softmax_1(ctx: Ctx, input, *, axis=1):  # noqa: A002
    return _softmax_2d(ctx, "softmax", input, axis)


@converter("Softmax", since=13)
def softmax(ctx: Ctx, input, *, axis=-1):  # noqa: A002
    return ctx.op("softmax", input, axis=axis)


@converter("LogSoftmax", since=1)
def log_softmax_1(ctx: Ctx, input, *, axis=1):  # noqa: A002
    return _softmax_2d(ctx, "log_softmax", input, axis)


@converter("LogSoftmax", since=13)
def log_softmax(ctx: Ctx, input, *, axis=-1):  # noqa: A002
    return ctx.op("log_softmax", input, axis=axis)


# ---------------------------------------------------------------------------- dropout
def _dropout(ctx: Ctx, data, train: bool, ratio: float):
    if train and ratio > 0:
        raise Unsupported("Dropout in training mode (random)")
    y = ctx.op("identity", data)
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return [y, ctx.op("full_like", data, value=1.0, dtype=DType.BOOL)]
    return y


@converter("Dropout", since=7)
def dropout_7(ctx: Ctx, data, *, ratio=0.5):
    return _dropout(ctx, data, False, ratio)


@converter("Dropout", since=12)
def dropout(ctx: Ctx, data, ratio=None, training_mode=None, *, seed=0):
    train = False if training_mode is None else bool(ctx.scalar(training_mode, "training_mode"))
    if not train:  # inference: the ratio, which may be computed at run time, does not matter
        return _dropout(ctx, data, False, 0.0)
    r = 0.5 if ratio is None else float(ctx.scalar(ratio, "ratio"))
    return _dropout(ctx, data, train, r)


# ---------------------------------------------------------------------------- resize
def _resize(ctx: Ctx, X, scales, sizes, mode, ctm, nearest_mode, cubic_coeff_a, antialias, **onnx):  # noqa: N803
    """``onnx``: exclude_outside, and roi (spatial [starts, ends]) with extrapolation_value
    for tf_crop_and_resize."""
    r = ctx.rank(X)
    dims = ctx.shape(X)
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode!r}")
    if sizes is not None:
        if len(sizes) != r:
            raise Unsupported(f"{len(sizes)} sizes for a rank-{r} input")
        if any(isinstance(d, int) and d != s for d, s in zip(dims[:2], sizes[:2])):
            raise Unsupported("resizing the batch or channel dim")
        sizes, scales = [int(s) for s in sizes[2:]], None
    else:
        if len(scales) != r:
            raise Unsupported(f"{len(scales)} scales for a rank-{r} input")
        if any(s != 1.0 for s in scales[:2]):
            raise Unsupported("resizing the batch or channel dim")
        scales = [float(s) for s in scales[2:]]
    return ctx.op(
        "resize",
        X,
        sizes=sizes,
        scales=scales,
        mode=mode,
        coordinate_transformation_mode=ctm,
        nearest_mode=nearest_mode,
        cubic_coeff_a=cubic_coeff_a,
        antialias=bool(antialias),
        **onnx,
    )


@converter("Upsample", since=7)
def upsample_7(ctx: Ctx, X, *, mode="nearest", scales):  # noqa: N803
    m = "linear" if mode in ("linear", "bilinear") else mode
    return _resize(ctx, X, list(scales), None, m, "asymmetric", "floor", -0.75, 0)


def _runtime_resize(ctx: Ctx, X, t, is_sizes: bool, axes, mode, ctm, nearest_mode, a, aa, **onnx):  # noqa: N803
    """Resize by scales or sizes computed at run time: the canonical op's run-time input, one
    entry per dim of X (dims outside ``axes`` keep their size). ``onnx`` as for _resize, its
    roi either spatial floats or a run-time full-rank input."""
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode!r}")
    r = ctx.rank(X)
    dt = DType.INT64 if is_sizes else DType.FLOAT32
    t = ctx.cast(t, dt)
    if axes is not None:
        ax = [v % r for v in axes]
        pieces = []
        for i in range(r):
            if i in ax:
                j = ax.index(i)
                pieces.append(ctx.op("slice", t, starts=[j], ends=[j + 1], axes=[0], steps=[1]))
            elif is_sizes and isinstance(ctx.shape(X)[i], int):
                pieces.append(np.array([ctx.shape(X)[i]], np.int64))
            elif is_sizes:
                pieces.append(ctx.op("shape", X, start=i, end=i + 1))
            else:
                pieces.append(np.ones(1, np.float32))
        t = ctx.op("concat", *pieces, axis=0)
    roi_in = onnx.pop("roi_in", None)
    return ctx.op(
        "resize",
        X,
        None if is_sizes else t,
        t if is_sizes else None,
        roi_in,
        mode=mode,
        coordinate_transformation_mode=ctm,
        nearest_mode=nearest_mode,
        cubic_coeff_a=a,
        antialias=bool(aa),
        **onnx,
    )


def _roi(ctx: Ctx, roi, axes, r: int, crop: bool) -> dict:
    """tf_crop_and_resize's box as the canonical op takes it: spatial [starts, ends] when known
    at import, else a full-rank run-time [starts, ends] (dims outside ``axes`` uncropped)."""
    if not crop:
        return {}
    if roi is None or ctx.type(roi).shape == (0,):
        raise Unsupported("tf_crop_and_resize without roi")
    ax = list(range(r)) if axes is None else [a % r for a in axes]
    k = len(ax)
    known = ctx.known(roi)
    if known is not None:
        v = [float(x) for x in np.asarray(known).reshape(-1)]
        if len(v) != 2 * k:
            raise Unsupported(f"roi of {len(v)} values for {k} axes")
        starts, ends = [0.0] * r, [1.0] * r
        for j, a in enumerate(ax):
            starts[a], ends[a] = v[j], v[k + j]
        if starts[:2] != [0.0, 0.0] or ends[:2] != [1.0, 1.0]:
            raise Unsupported("tf_crop_and_resize cropping the batch or channel dim")
        return {"roi": starts[2:] + ends[2:]}
    t = ctx.cast(roi, DType.FLOAT32)
    if axes is not None:
        pieces = []
        for half, fill in ((0, 0.0), (1, 1.0)):
            for i in range(r):
                if i in ax:
                    j = half * k + ax.index(i)
                    pieces.append(ctx.op("slice", t, starts=[j], ends=[j + 1], axes=[0], steps=[1]))
                else:
                    pieces.append(np.full(1, fill, np.float32))
        t = ctx.op("concat", *pieces, axis=0)
    return {"roi_in": t}


def _keep_aspect(ctx: Ctx, X, sizes, axes, r: int, policy: str):  # noqa: N803
    """Run-time sizes scaled by one factor (the smallest or largest of sizes / dims over the
    axes), as ONNX Resize's keep_aspect_ratio_policy computes them."""
    ax = list(range(r)) if axes is None else [a % r for a in axes]
    f32 = DType.FLOAT32
    dims = ctx.shape(X)
    if all(isinstance(dims[a], int) for a in ax):
        have = np.array([dims[a] for a in ax], np.float32)
    else:
        have = ctx.op("concat", *[ctx.op("shape", X, start=a, end=a + 1) for a in ax], axis=0)
        have = ctx.cast(have, f32)
    ratio = ctx.op("div", ctx.cast(sizes, f32), have)
    pick = "reduce_min" if policy == "not_larger" else "reduce_max"
    k = ctx.op(pick, ratio, axes=[0], keepdims=True)
    scaled = ctx.op("floor", ctx.op("add", ctx.op("mul", have, k), np.array(0.5, np.float32)))
    return ctx.cast(scaled, DType.INT64)


@converter("Upsample", since=9)
def upsample(ctx: Ctx, X, scales, *, mode="nearest"):  # noqa: N803
    m = "linear" if mode in ("linear", "bilinear") else mode
    if ctx.known(scales) is None:
        return _runtime_resize(ctx, X, scales, False, None, m, "asymmetric", "floor", -0.75, 0)
    s = [float(v) for v in ctx.need(scales, "scales").reshape(-1)]
    return _resize(ctx, X, s, None, m, "asymmetric", "floor", -0.75, 0)


@converter("Resize", since=10)
def resize_10(ctx: Ctx, X, scales, *, mode="nearest"):  # noqa: N803
    return upsample(ctx, X, scales, mode=mode)


@converter("Resize", since=11)
def resize(
    ctx: Ctx,
    X,  # noqa: N803
    roi=None,
    scales=None,
    sizes=None,
    *,
    antialias=0,
    axes=None,
    coordinate_transformation_mode="half_pixel",
    cubic_coeff_a=-0.75,
    exclude_outside=0,
    extrapolation_value=0.0,
    keep_aspect_ratio_policy="stretch",
    mode="nearest",
    nearest_mode="round_prefer_floor",
):
    r = ctx.rank(X)
    dims = ctx.shape(X)
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    onnx = _roi(ctx, roi, axes, r, crop)
    if crop:
        onnx["extrapolation_value"] = float(extrapolation_value)
    if exclude_outside and mode != "nearest":
        onnx["exclude_outside"] = True
    for t, is_sizes in ((scales, False), (sizes, True)):
        if t is not None and ctx.known(t) is None and ctx.type(t).shape != (0,):
            if is_sizes and keep_aspect_ratio_policy != "stretch":
                t = _keep_aspect(ctx, X, t, axes, r, keep_aspect_ratio_policy)
            args = (mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, antialias)
            return _runtime_resize(ctx, X, t, is_sizes, axes, *args, **onnx)
    if "roi_in" in onnx:  # a run-time box: sizes or scales known at import go in as inputs too
        if keep_aspect_ratio_policy != "stretch":
            raise Unsupported("keep_aspect_ratio_policy with a run-time roi")
        sz = None if sizes is None else ctx.known(sizes)
        is_sizes = sz is not None and np.asarray(sz).size > 0
        args = (mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, antialias)
        t = sizes if is_sizes else scales
        return _runtime_resize(ctx, X, t, is_sizes, axes, *args, **onnx)
    sc = None if scales is None else ctx.known(scales)
    sz = None if sizes is None else ctx.known(sizes)
    sc = None if sc is None or sc.size == 0 else [float(v) for v in sc.reshape(-1)]
    sz = None if sz is None or sz.size == 0 else [int(v) for v in sz.reshape(-1)]
    if sc is None and sz is None:
        raise Unsupported("neither scales nor sizes given")
    ax = list(range(r)) if axes is None else [a % r for a in axes]
    if sz is not None and keep_aspect_ratio_policy != "stretch":
        if not all(isinstance(dims[a], int) for a in ax):
            raise Unsupported("keep_aspect_ratio_policy over dims only known at run time")
        ratios = [s / dims[a] for s, a in zip(sz, ax)]
        k = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
        sz = [int(np.floor(dims[a] * k + 0.5)) for a in ax]
    if sz is not None:
        full = list(dims)
        for s, a in zip(sz, ax):
            full[a] = s
        if not all(isinstance(d, int) for d in full[:2]):
            full[:2] = [dims[0], dims[1]]
        sizes_full = [d if isinstance(d, int) else -1 for d in full]
        return _resize(
            ctx,
            X,
            None,
            sizes_full,
            mode,
            coordinate_transformation_mode,
            nearest_mode,
            cubic_coeff_a,
            antialias,
            **onnx,
        )
    full_s = [1.0] * r
    for s, a in zip(sc, ax):
        full_s[a] = s
    return _resize(
        ctx,
        X,
        full_s,
        None,
        mode,
        coordinate_transformation_mode,
        nearest_mode,
        cubic_coeff_a,
        antialias,
        **onnx,
    )
