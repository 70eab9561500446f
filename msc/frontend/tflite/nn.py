"""TFLite neural-network ops: convolutions, pooling, fully connected, batch matmul, softmax,
normalizations, resize.

TFLite's images are NHWC and its filters OHWI (depthwise: 1HW(C*M)). Convolutions and pools
are read as canonical ops in that layout (``data_layout = "NHWC"``, ``kernel_layout`` OHWI,
IHWO or, for CONV_3D's DHWIO filter, HWIO), so a read graph holds no transposes of its own; a
channels-first target brings them to its layout with ``msc.ops.layout`` (a transpose per
changed graph input / output). Ops whose canonical form is channels first only (SAME padding
of a run-time size, L2 pooling) go through ``nchw`` / ``nhwc`` transposes at their boundary.
"""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.tflite.importer import Ctx
from msc.frontend.tflite.registry import converter, not_read
from msc.ir import DType, Value
from msc.ops.nn import same_pads

_CONV_SAME, _POOL_SAME = "convolution: SAME padding", "pooling: SAME padding"

SAME, VALID = 0, 1


def nchw(ctx: Ctx, x: Value) -> Value:
    r = x.type.rank
    return ctx.op("transpose", x, perm=[0, r - 1, *range(1, r - 1)])


def nhwc(ctx: Ctx, y: Value) -> Value:
    r = y.type.rank
    return ctx.op("transpose", y, perm=[0, *range(2, r), 1])


def _spatial(x: Value) -> list:
    return list(x.type.shape[1:-1])


def _static_same(sizes, strides) -> bool:
    return all(isinstance(d, int) or s == 1 for d, s in zip(sizes, strides))


def runtime_same_pad(ctx: Ctx, x: Value, kernel, strides, dilations, value: float) -> Value:
    """``x`` (channels first) padded as SAME pads it, the amounts computed from its run-time
    spatial sizes (a symbolic size with a stride above 1)."""
    i64 = DType.INT64
    n = len(kernel)
    dims = ctx.op("shape", x)
    begins, ends = [], []
    for i in range(n):
        span = (kernel[i] - 1) * dilations[i] + 1
        s = strides[i]
        size = ctx.op("slice", dims, starts=[2 + i], ends=[3 + i], axes=[0])
        out = ctx.op(
            "floor_divide", ctx.op("add", size, ctx.const([s - 1], i64)), ctx.const([s], i64)
        )
        need = ctx.op(
            "add",
            ctx.op("mul", ctx.op("sub", out, ctx.const([1], i64)), ctx.const([s], i64)),
            ctx.const([span], i64),
        )
        total = ctx.op("maximum", ctx.op("sub", need, size), ctx.const([0], i64))
        before = ctx.op("floor_divide", total, ctx.const([2], i64))
        begins.append(before)
        ends.append(ctx.op("sub", total, before))
    zeros = ctx.const([0, 0], i64)
    pads = ctx.op("concat", zeros, *begins, zeros, *ends, axis=0)
    fill = ctx.const(np.asarray(value, x.dtype.to_numpy()), x.dtype)
    return ctx.op("pad", x, pads, fill, mode="constant")


def _conv(
    ctx: Ctx, x, w: Value, bias, *, padding, strides, dilations, groups, kernel, layout="OIHW"
):
    """A convolution of NHWC ``x`` by ``w`` (in ``layout``), NHWC out."""
    xv = ctx.value(x)
    if xv.type.rank != len(kernel) + 2:
        raise Unsupported(f"input of rank {xv.type.rank} for a {len(kernel)}-d convolution")
    b = None if bias is None else ctx.value(bias)
    lay = {"kernel_layout": layout} if layout != "OIHW" else {}
    if layout != "OIHW" and (padding != SAME or _static_same(_spatial(xv), strides)):
        pads = []
        if padding == SAME:
            pads = same_pads(_spatial(xv), kernel, strides, dilations, _CONV_SAME)
            pads = pads if any(pads) else []
        return ctx.op("conv", xv, w, b, stride=strides, padding=pads, dilation=dilations,
                      groups=groups, data_layout="NHWC", **lay)  # fmt: skip
    xc = nchw(ctx, xv)
    pads: list[int] = []
    if padding == SAME and _static_same(_spatial(xv), strides):
        pads = same_pads(_spatial(xv), kernel, strides, dilations, _CONV_SAME)
        pads = pads if any(pads) else []
    elif padding == SAME:
        xc = runtime_same_pad(ctx, xc, kernel, strides, dilations, 0.0)
    y = ctx.op(
        "conv", xc, w, b, stride=strides, padding=pads, dilation=dilations, groups=groups, **lay
    )
    return nhwc(ctx, y)


@converter("CONV_2D")
def conv_2d(
    ctx: Ctx,
    x,
    filter,
    bias=None,
    *,
    padding=SAME,
    stride_w=1,
    stride_h=1,
    dilation_w_factor=1,
    dilation_h_factor=1,
):
    w = ctx.value(filter)  # [O, kh, kw, I/groups]
    if w.type.rank != 4:
        raise Unsupported(f"a filter of rank {w.type.rank}")
    cin = ctx.value(x).type.shape[-1]
    per = w.type.shape[3]
    groups = cin // per if isinstance(cin, int) and isinstance(per, int) and per else 1
    return _conv(
        ctx,
        x,
        w,
        bias,
        layout="OHWI",
        padding=padding,
        strides=[stride_h, stride_w],
        dilations=[dilation_h_factor, dilation_w_factor],
        groups=groups,
        kernel=list(w.type.shape[1:3]),
    )


@converter("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(
    ctx: Ctx,
    x,
    filter,
    bias=None,
    *,
    padding=SAME,
    stride_w=1,
    stride_h=1,
    depth_multiplier=1,
    dilation_w_factor=1,
    dilation_h_factor=1,
):
    w = ctx.value(filter)  # [1, kh, kw, C * M]
    cin = ctx.value(x).type.shape[-1]
    if not isinstance(cin, int):
        raise Unsupported("a depthwise convolution needs a static channel count")
    return _conv(
        ctx,
        x,
        w,
        bias,
        layout="IHWO",
        padding=padding,
        strides=[stride_h, stride_w],
        dilations=[dilation_h_factor, dilation_w_factor],
        groups=cin,
        kernel=list(w.type.shape[1:3]),
    )


@converter("CONV_3D")
def conv_3d(
    ctx: Ctx,
    x,
    filter,
    bias=None,
    *,
    padding=SAME,
    stride_d=1,
    stride_w=1,
    stride_h=1,
    dilation_d_factor=1,
    dilation_w_factor=1,
    dilation_h_factor=1,
):
    w = ctx.value(filter)  # [kd, kh, kw, I, O]
    if w.type.rank != 5:
        raise Unsupported(f"a filter of rank {w.type.rank}")
    return _conv(
        ctx,
        x,
        w,
        bias,
        layout="HWIO",
        padding=padding,
        strides=[stride_d, stride_h, stride_w],
        dilations=[dilation_d_factor, dilation_h_factor, dilation_w_factor],
        groups=1,
        kernel=list(w.type.shape[0:3]),
    )


@converter("TRANSPOSE_CONV")
def transpose_conv(
    ctx: Ctx, output_shape, filter, x, bias=None, *, padding=SAME, stride_w=1, stride_h=1
):
    shape = [int(d) for d in ctx.array(output_shape, "TRANSPOSE_CONV's output shape")]
    return _transpose_conv(ctx, shape, filter, x, bias, padding, stride_w, stride_h)


# MediaPipe's TfLitePadding codes in a custom op's options (kTfLitePaddingSame, ...Valid)
_TFLITE_PADDING = {1: SAME, 2: VALID}


@converter("Convolution2DTransposeBias")
def convolution_2d_transpose_bias(ctx: Ctx, x, filter, bias):
    """MediaPipe's transposed convolution with a bias (a custom op of its segmentation
    models): TRANSPOSE_CONV with its input first, its options as a C struct
    TfLiteTransposeConvParams in the custom options (int32 padding, stride_width,
    stride_height) and its output's shape declared on the output tensor."""
    raw = ctx.operator.custom_options or b""
    if len(raw) < 12:
        raise Unsupported(f"custom options of {len(raw)} bytes, not TfLiteTransposeConvParams")
    code, stride_w, stride_h = (int(v) for v in np.frombuffer(raw[:12], "<i4"))
    if code not in _TFLITE_PADDING or stride_w < 1 or stride_h < 1:
        raise Unsupported(f"padding {code}, strides {stride_w} x {stride_h}")
    out = ctx.out(0)
    if not out.has_rank:
        raise Unsupported("the output's shape is not declared")
    shape = [int(d) for d in out.shape]
    return _transpose_conv(ctx, shape, filter, x, bias, _TFLITE_PADDING[code], stride_w, stride_h)


@converter("CONV_3D_TRANSPOSE")
def conv_3d_transpose(
    ctx: Ctx,
    output_shape,
    filter,
    x,
    bias=None,
    *,
    padding=SAME,
    stride_d=1,
    stride_w=1,
    stride_h=1,
    dilation_d_factor=1,
    dilation_w_factor=1,
    dilation_h_factor=1,
):
    if (dilation_d_factor, dilation_h_factor, dilation_w_factor) != (1, 1, 1):
        raise Unsupported("a dilated CONV_3D_TRANSPOSE")
    shape = [int(d) for d in ctx.array(output_shape, "CONV_3D_TRANSPOSE's output shape")]
    w = ctx.value(filter)  # [kd, kh, kw, O, I]
    if w.type.rank != 5:
        raise Unsupported(f"a filter of rank {w.type.rank}")
    return _transposed(
        ctx, shape, [4, 3, 0, 1, 2], w, x, bias, padding, [stride_d, stride_h, stride_w]
    )


def _transpose_conv(ctx: Ctx, shape, filter, x, bias, padding, stride_w, stride_h):
    w = ctx.value(filter)  # [O, kh, kw, I]
    return _transposed(ctx, shape, [3, 0, 1, 2], w, x, bias, padding, [stride_h, stride_w])


def _transposed(ctx: Ctx, shape, perm, w: Value, x, bias, padding, strides):
    """conv_transpose of NHWC ``x`` to NHWC ``shape`` by filter ``w``, which ``perm`` takes
    to [I, O, *kernel]."""
    xv = ctx.value(x)
    n = len(strides)
    kernel = [int(w.type.shape[p]) for p in perm[2:]]
    insize = _spatial(xv)
    if len(shape) != n + 2 or not all(isinstance(d, int) for d in insize):
        raise Unsupported(f"a transposed conv needs static spatial sizes (output {shape})")
    out = shape[1:-1]
    pads, extra = [], []
    for i in range(n):
        if padding == SAME:
            total = max((-(-out[i] // strides[i]) - 1) * strides[i] + kernel[i] - out[i], 0)
        else:
            total = 0
        pads.append((total // 2, total - total // 2))
        full = (insize[i] - 1) * strides[i] + kernel[i] - total
        extra.append(out[i] - full)
    if any(e < 0 or e >= strides[i] for i, e in enumerate(extra)):
        raise Unsupported(f"a transposed conv to {shape} from {xv.type}")
    y = ctx.op(
        "conv_transpose",
        nchw(ctx, xv),
        ctx.op("transpose", w, perm=perm),
        None if bias is None else ctx.value(bias),
        stride=strides,
        padding=[p[0] for p in pads] + [p[1] for p in pads],
        output_padding=extra,
    )
    return nhwc(ctx, y)


@converter("FULLY_CONNECTED")
def fully_connected(ctx: Ctx, x, weights, bias=None, *, keep_num_dims=False):
    xv, w = ctx.value(x), ctx.value(weights)
    if w.type.rank != 2:
        raise Unsupported(f"weights of rank {w.type.rank}")
    k = w.type.shape[1]
    if not keep_num_dims and xv.type.rank != 2:
        xv = ctx.op("reshape", xv, shape=[-1, int(k)])
    b = None if bias is None else ctx.value(bias)
    return ctx.op("linear", xv, w, b)


@converter("BATCH_MATMUL")
def batch_matmul(ctx: Ctx, a, b, *, adj_x=False, adj_y=False):
    va, vb = ctx.value(a), ctx.value(b)

    def t(v: Value) -> Value:
        r = v.type.rank
        return ctx.op("transpose", v, perm=[*range(r - 2), r - 1, r - 2])

    return ctx.op("matmul", t(va) if adj_x else va, t(vb) if adj_y else vb)


def _pool(ctx: Ctx, x, op: str, padding, stride_w, stride_h, filter_width, filter_height):
    xv = ctx.value(x)
    kernel, strides = [filter_height, filter_width], [stride_h, stride_w]
    if padding != SAME or _static_same(_spatial(xv), strides):  # NHWC as it is
        pads = (
            same_pads(_spatial(xv), kernel, strides, [1, 1], _POOL_SAME) if padding == SAME else []
        )
        attrs = {"kernel": kernel, "stride": strides, "padding": pads if any(pads) else []}
        if op == "avg_pool":
            attrs["count_include_pad"] = False
        return ctx.op(op, xv, data_layout="NHWC", **attrs)
    xc = nchw(ctx, xv)
    pads: list[int] = []
    if padding == SAME and _static_same(_spatial(xv), strides):
        pads = same_pads(_spatial(xv), kernel, strides, [1, 1], _POOL_SAME)
        pads = pads if any(pads) else []
    elif padding == SAME:
        if op != "max_pool":
            raise Unsupported("average pooling with SAME padding of a symbolic size")
        xc = runtime_same_pad(ctx, xc, kernel, strides, [1, 1], float("-inf"))
    attrs = {"kernel": kernel, "stride": strides, "padding": pads}
    if op == "avg_pool":
        attrs["count_include_pad"] = False
    return nhwc(ctx, ctx.op(op, xc, **attrs))


@converter("AVERAGE_POOL_2D")
def average_pool_2d(
    ctx: Ctx, x, *, padding=SAME, stride_w=1, stride_h=1, filter_width=1, filter_height=1
):
    return _pool(ctx, x, "avg_pool", padding, stride_w, stride_h, filter_width, filter_height)


@converter("MAX_POOL_2D")
def max_pool_2d(
    ctx: Ctx, x, *, padding=SAME, stride_w=1, stride_h=1, filter_width=1, filter_height=1
):
    return _pool(ctx, x, "max_pool", padding, stride_w, stride_h, filter_width, filter_height)


@converter("L2_POOL_2D")
def l2_pool_2d(
    ctx: Ctx, x, *, padding=SAME, stride_w=1, stride_h=1, filter_width=1, filter_height=1
):
    xv = ctx.value(x)
    kernel, strides = [filter_height, filter_width], [stride_h, stride_w]
    pads = same_pads(_spatial(xv), kernel, strides, [1, 1], _POOL_SAME) if padding == SAME else []
    sq = ctx.op("mul", xv, xv)
    avg = ctx.op(
        "avg_pool",
        nchw(ctx, sq),
        kernel=kernel,
        stride=strides,
        padding=pads,
        count_include_pad=False,
    )
    return nhwc(ctx, ctx.op("sqrt", avg))


@converter("SOFTMAX")
def softmax(ctx: Ctx, x, *, beta=1.0):
    xv = ctx.value(x)
    if beta != 1.0:
        xv = ctx.op("mul", xv, ctx.const(np.float32(beta), xv.dtype))
    return ctx.op("softmax", xv, axis=-1)


@converter("LOG_SOFTMAX")
def log_softmax(ctx: Ctx, x):
    return ctx.op("log_softmax", ctx.value(x), axis=-1)


@converter("L2_NORMALIZATION")
def l2_normalization(ctx: Ctx, x):
    xv = ctx.value(x)
    ss = ctx.op("reduce_sum_square", xv, axes=[-1], keepdims=True)
    norm = ctx.op("maximum", ctx.op("sqrt", ss), ctx.const(np.float32(1e-6), xv.dtype))
    return ctx.op("div", xv, norm)


@converter("LOCAL_RESPONSE_NORMALIZATION")
def local_response_normalization(ctx: Ctx, x, *, radius=0, bias=0.0, alpha=0.0, beta=0.0):
    xv = ctx.value(x)
    size = 2 * int(radius) + 1
    y = ctx.op(
        "lrn",
        nchw(ctx, xv),
        size=size,
        alpha=float(alpha) * size,
        beta=float(beta),
        bias=float(bias),
    )
    return nhwc(ctx, y)


def _resize(ctx: Ctx, x, size, mode: str, ctm: str, nearest: str = "round_prefer_floor"):
    xv = ctx.value(x)
    hw = [int(d) for d in ctx.array(size, "the output size")]
    if len(hw) != 2:
        raise Unsupported(f"a resize to {hw}")
    y = ctx.op(
        "resize",
        nchw(ctx, xv),
        sizes=hw,
        mode=mode,
        coordinate_transformation_mode=ctm,
        nearest_mode=nearest,
    )
    return nhwc(ctx, y)


@converter("RESIZE_BILINEAR")
def resize_bilinear(ctx: Ctx, x, size, *, align_corners=False, half_pixel_centers=False):
    if align_corners and half_pixel_centers:
        raise Unsupported("align_corners with half_pixel_centers")
    ctm = "align_corners" if align_corners else "half_pixel" if half_pixel_centers else "asymmetric"
    return _resize(ctx, x, size, "linear", ctm)


@converter("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest_neighbor(ctx: Ctx, x, size, *, align_corners=False, half_pixel_centers=False):
    if align_corners:
        if half_pixel_centers:
            raise Unsupported("align_corners with half_pixel_centers")
        return _resize(ctx, x, size, "nearest", "align_corners", "round_prefer_ceil")
    if half_pixel_centers:
        return _resize(ctx, x, size, "nearest", "tf_half_pixel_for_nn", "floor")
    return _resize(ctx, x, size, "nearest", "asymmetric", "floor")


@converter("EMBEDDING_LOOKUP")
def embedding_lookup(ctx: Ctx, ids, table):
    return ctx.op("gather", ctx.value(table), ctx.value(ids), axis=0)


not_read(
    "hashing and sparse text features (legacy text models) have no canonical op",
    "LSH_PROJECTION",
    "SKIP_GRAM",
    "HASHTABLE_LOOKUP",
    "CONCAT_EMBEDDINGS",
    "EMBEDDING_LOOKUP_SPARSE",
)
