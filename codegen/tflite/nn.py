"""TFLite emitters for neural-network ops: convolutions, pooling, fully connected and batch
matmul, softmax, resize, embedding.

TFLite's kernels take NHWC images and OHWI filters. A conv or pool whose ``data_layout`` is NHWC
is written as it is (``codegen.tflite.to_bytes`` brings a graph to NHWC with
``msc.ops.layout`` first, so transposes are left only where the layout changes at the graph's
inputs and outputs); a channels-first one is transposed to NHWC and back around its operator.
Filters are permuted at write time (they are constants), and ``codegen.tflite.passes`` removes
transposes that cancel between consecutive ops.
"""

from __future__ import annotations

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.types import TensorType
from msc.ops.nn import kernel_perm


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


SAME, VALID = 0, 1


def to_nhwc(e: Emit, x: Ref) -> Ref:
    r = x.rank
    return e.transpose(x, [0, *range(2, r), 1])


def to_nchw(e: Emit, x: Ref) -> Ref:
    r = x.rank
    return e.transpose(x, [0, r - 1, *range(1, r - 1)])


def nhwc_type(t: TensorType) -> TensorType:
    s = list(t.shape)
    return TensorType(t.dtype, [s[0], *s[2:], s[1]])


def _same(sizes, kernel, strides, dilations) -> list[int] | None:
    """TensorFlow's SAME pads [begins..., ends...] for these sizes, None for a symbolic size
    whose pads depend on it."""
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        span = (k - 1) * d + 1
        if not isinstance(size, int):
            if s != 1:
                return None
            total = span - 1
        else:
            total = max((-(-size // s) - 1) * s + span - size, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def _padding(e: Emit, x_nhwc: Ref, pads, kernel, strides, dilations, fill: float):
    """(padding enum, input): VALID or SAME when the pads are those, else an explicit pad of
    the NHWC input followed by VALID."""
    n = len(kernel)
    pads = list(pads) or [0] * (2 * n)
    if not any(pads):
        return VALID, x_nhwc
    if pads == _same(x_nhwc.shape[1:-1], kernel, strides, dilations):
        return SAME, x_nhwc
    e.require(all(p >= 0 for p in pads), "negative padding")
    spec = [[0, 0]] + [[pads[i], pads[n + i]] for i in range(n)] + [[0, 0]]
    shape = list(x_nhwc.shape)
    for i in range(n):
        d = shape[1 + i]
        shape[1 + i] = d + pads[i] + pads[n + i] if isinstance(d, int) else None
    t = TensorType(x_nhwc.dtype, shape)
    paddings = e.const(np.asarray(spec, np.int32))
    if fill == 0.0:
        return VALID, e.op("PAD", [x_nhwc, paddings], t)
    value = e.const(np.asarray(fill, x_nhwc.dtype.to_numpy()))
    return VALID, e.op("PADV2", [x_nhwc, paddings, value], t)


@emitter("conv")
def conv(
    e: Emit,
    x: Ref,
    weight: Ref,
    bias: Ref | None = None,
    *,
    stride,
    padding,
    dilation,
    groups,
    data_layout="NCHW",
    kernel_layout="OIHW",
    _out: TensorType | None = None,
):
    if kernel_layout != "OIHW":  # to OIHW: a constant filter is permuted at write time
        weight = e.transpose(weight, _inverse(kernel_perm(kernel_layout, weight.rank)))
    last = data_layout == "NHWC"
    n = x.rank - 2
    e.require(n in (1, 2, 3), f"a {n}-d convolution (TFLite convolves 1-d to 3-d)")
    e.require(weight.rank == x.rank, "a filter of another rank than the input")
    if n == 3:
        return _conv_3d(e, x, weight, bias, stride, padding, dilation, groups, last, _out)
    if n == 1:  # as 2-d with a height of 1
        w = e.const_value(weight)
        e.require(w is not None, "a 1-d convolution with a run-time filter")
        x4 = e.expand_dims(x, 1 if last else 2)
        w4 = e.const(w[:, :, None, :])
        t = _out or e.out_type()
        t4 = [t.shape[0], 1, *t.shape[1:]] if last else [*t.shape[:2], 1, t.shape[2]]
        out = conv(
            e,
            x4,
            w4,
            bias,
            stride=[1, *(stride or [1])],
            padding=_pads_2d(padding),
            dilation=[1, *(dilation or [1])],
            groups=groups,
            data_layout=data_layout,
            _out=TensorType(t.dtype, t4),
        )
        return e.squeeze(out, [1 if last else 2], t)
    stride = list(stride or [1, 1])
    dilation = list(dilation or [1, 1])
    kernel = [int(k) for k in weight.shape[2:]]
    cin, cout = x.shape[-1 if last else 1], weight.shape[0]
    out_t = _out or e.out_type()
    if not last:
        out_t = nhwc_type(out_t)
    xh = x if last else to_nhwc(e, x)
    pad, xh = _padding(e, xh, padding, kernel, stride, dilation, 0.0)
    if bias is None:
        bias = e.const(np.zeros(int(cout), x.dtype.to_numpy()))
    opts = dict(
        padding=pad,
        stride_h=stride[0],
        stride_w=stride[1],
        dilation_h_factor=dilation[0],
        dilation_w_factor=dilation[1],
    )
    if groups > 1 and groups == cin and weight.shape[1] == 1:
        f = e.transpose(weight, [1, 2, 3, 0])  # [1, kh, kw, C * M]
        y = e.op(
            "DEPTHWISE_CONV_2D",
            [xh, f, bias],
            out_t,
            depth_multiplier=int(cout) // int(cin),
            **opts,
        )
    else:
        f = e.transpose(weight, [0, 2, 3, 1])  # OHWI
        y = e.op("CONV_2D", [xh, f, bias], out_t, **opts)
    return y if last else to_nchw(e, y)


def _conv_3d(e: Emit, x, weight, bias, stride, padding, dilation, groups, last, out):
    """CONV_3D: NDHWC data, a DHWIO filter (``weight`` arrives OIDHW), ungrouped."""
    e.require(groups == 1, "a grouped 3-d convolution (CONV_3D takes groups of 1)")
    stride = list(stride or [1, 1, 1])
    dilation = list(dilation or [1, 1, 1])
    kernel = [int(k) for k in weight.shape[2:]]
    out_t = out or e.out_type()
    if not last:
        out_t = nhwc_type(out_t)
    xh = x if last else to_nhwc(e, x)
    pad, xh = _padding(e, xh, padding, kernel, stride, dilation, 0.0)
    f = e.transpose(weight, [2, 3, 4, 1, 0])  # OIDHW -> DHWIO
    d, h, w = stride
    dd, dh, dw = dilation
    y = e.op("CONV_3D", [xh, f, bias], out_t, padding=pad, stride_d=d, stride_h=h, stride_w=w,
             dilation_d_factor=dd, dilation_h_factor=dh, dilation_w_factor=dw)  # fmt: skip
    return y if last else to_nchw(e, y)


def _pads_2d(pads) -> list[int]:
    if not pads:
        return []
    return [0, pads[0], 0, pads[1]]


@emitter("conv_transpose")
def conv_transpose(
    e: Emit,
    x: Ref,
    weight: Ref,
    bias: Ref | None = None,
    *,
    stride,
    padding,
    dilation,
    groups,
    output_padding,
):
    """TRANSPOSE_CONV (2-d) or CONV_3D_TRANSPOSE (3-d): the output's shape an input, SAME or
    VALID padding, the filter [O, (D,) H, W, I] or, for 3-d, [D, H, W, O, I]."""
    n = x.rank - 2
    e.require(n in (2, 3) and groups == 1, "TFLite's transposed convs are 2-d or 3-d, ungrouped")
    e.require(not dilation or all(d == 1 for d in dilation), "a dilated transposed conv")
    t = e.out_type()
    out_t = nhwc_type(t)
    e.require(all(isinstance(d, int) for d in out_t.shape[1:]), "a symbolic output size")
    stride = list(stride or [1] * n)
    pads = list(padding or [0] * (2 * n))
    kernel = [int(k) for k in weight.shape[2:]]
    want = [int(d) for d in out_t.shape[1:-1]]
    same = _same(want, kernel, stride, [1] * n)
    if any(pads) and pads != same:
        return e.require(False, f"transposed-conv pads {pads} (TFLite has SAME and VALID)")
    pad = SAME if any(pads) else VALID
    batch = out_t.shape[0]
    shape = e.ints([batch if isinstance(batch, int) else 1, *want, int(out_t.shape[-1])])
    if n == 2:
        f = e.transpose(weight, [1, 2, 3, 0])  # [I, O, kh, kw] -> [O, kh, kw, I]
        ins = [shape, f, to_nhwc(e, x)] + ([bias] if bias is not None else [])
        opts = dict(padding=pad, stride_h=stride[0], stride_w=stride[1])
        return to_nchw(e, e.op("TRANSPOSE_CONV", ins, out_t, **opts))
    f = e.transpose(weight, [2, 3, 4, 1, 0])  # [I, O, kd, kh, kw] -> [kd, kh, kw, O, I]
    ins = [shape, f, to_nhwc(e, x)] + ([bias] if bias is not None else [])
    opts = dict(padding=pad, stride_d=stride[0], stride_h=stride[1], stride_w=stride[2])
    return to_nchw(e, e.op("CONV_3D_TRANSPOSE", ins, out_t, **opts))


@emitter("linear")
def linear(e: Emit, x: Ref, weight: Ref, bias: Ref | None = None) -> Ref:
    e.require(weight.rank == 2, "a 1-d linear weight")
    return e.op("FULLY_CONNECTED", [x, weight, bias], e.out_type(), keep_num_dims=True)


@emitter("matmul")
def matmul(e: Emit, a: Ref, b: Ref) -> Ref:
    e.require(a.rank >= 2 and b.rank >= 2, "a matmul of a 1-d operand")
    w = e.const_value(b)
    if w is not None and b.rank == 2:
        return e.op(
            "FULLY_CONNECTED",
            [a, e.const(np.ascontiguousarray(w.T)), None],
            e.out_type(),
            keep_num_dims=True,
        )
    return e.op("BATCH_MATMUL", [a, b], e.out_type())


@emitter("gemm")
def gemm(e: Emit, a: Ref, b: Ref, c: Ref | None = None, *, alpha, beta, trans_a, trans_b):
    e.require(alpha == 1.0 and beta == 1.0 and not trans_a, "gemm with scaling or a transposed a")
    w = e.const_value(b)
    if w is None:  # FULLY_CONNECTED reads a run-time filter too (a dequantized one)
        weight = b if trans_b else e.transpose(b, [1, 0])
    else:
        weight = e.const(np.ascontiguousarray(w if trans_b else w.T))
    bias = c
    if c is not None:
        cv = e.const_value(c)
        e.require(cv is not None and cv.size in (1, weight.shape[0]), "gemm with a 2-d c")
        bias = e.const(np.broadcast_to(cv.reshape(-1), (weight.shape[0],)).copy())
    return e.op("FULLY_CONNECTED", [a, weight, bias], e.out_type())


def _pool(e: Emit, x: Ref, op: str, kernel, stride, padding, ceil_mode, fill, layout="NCHW"):
    e.require(x.rank == 4, f"{op} of rank {x.rank} (TFLite pools 2-d)")
    e.require(not ceil_mode, "ceil_mode pooling")
    stride = list(stride or kernel)
    last = layout == "NHWC"
    xh = x if last else to_nhwc(e, x)
    pad, xh = _padding(e, xh, padding, kernel, stride, [1, 1], fill)
    y = e.op(
        op,
        [xh],
        e.out_type() if last else nhwc_type(e.out_type()),
        padding=pad,
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=kernel[0],
        filter_width=kernel[1],
    )
    return y if last else to_nchw(e, y)


@emitter("max_pool")
def max_pool(
    e: Emit, x: Ref, *, kernel, stride, padding, dilation, ceil_mode, return_indices,
    data_layout="NCHW",
):  # fmt: skip
    e.require(not return_indices, "max pooling indices")
    e.require(not dilation or all(d == 1 for d in dilation), "dilated pooling")
    return _pool(
        e, x, "MAX_POOL_2D", kernel, stride, padding, ceil_mode, float("-inf"), data_layout
    )


@emitter("avg_pool")
def avg_pool(
    e: Emit, x: Ref, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
    data_layout="NCHW",
):  # fmt: skip
    pads = list(padding or [])
    xs = x.shape[1:-1] if data_layout == "NHWC" else x.shape[2:]
    same = pads == _same(xs, kernel, list(stride or kernel), [1, 1])
    excluded = any(pads) and not count_include_pad and not same
    if ceil_mode or divisor_override is not None or excluded:
        # TFLite's SAME average excludes the padding, its VALID one has none: any other
        # divisor is a sum over explicit zeros, scaled per output position
        e.require(x.rank == 4, f"AVERAGE_POOL_2D of rank {x.rank} (TFLite pools 2-d)")
        return _divided_avg_pool(
            e, x, kernel, list(stride or kernel), pads, count_include_pad, divisor_override,
            data_layout,
        )  # fmt: skip
    return _pool(e, x, "AVERAGE_POOL_2D", kernel, stride, pads, ceil_mode, 0.0, data_layout)


def _divided_avg_pool(e, x, kernel, stride, pads, count_include_pad, divisor, layout):
    """An average pool whose divisor TFLite's kernel does not compute (ceil_mode's windows
    past the end, padding counted or not, divisor_override), exactly as PyTorch divides:
    the window's sum is AVERAGE_POOL_2D (VALID) of the input padded with zeros, times the
    window's size, over PyTorch's divisor for that output position (a constant of
    [1, OH, OW, 1]; left out where it is one everywhere). PyTorch's divisor of a window
    [i * s - p, i * s - p + k) is its length clipped to the padded input, or to the input
    itself without ``count_include_pad``."""
    last = layout == "NHWC"
    t = e.out_type() if last else nhwc_type(e.out_type())
    xh = x if last else to_nhwc(e, x)
    sizes, outs = list(xh.shape[1:3]), list(t.shape[1:3])
    e.require(all(isinstance(d, int) for d in sizes + outs), "a symbolic pooled size")
    pads = pads or [0] * 4
    k_eff, spec, counts = [], [[0, 0]], []
    for i in range(2):
        n, o, k, s, pb, pe = sizes[i], outs[i], kernel[i], stride[i], pads[i], pads[2 + i]
        # one window: only what it covers of the input matters (EfficientNet's pooler: a
        # 1280-wide kernel over 7 x 7)
        kk = min(k, pb + n) if o == 1 else k
        end = max(0, (o - 1) * s + kk - pb - n)
        e.require((pb + n + end - kk) // s + 1 == o, "pooling windows TFLite cannot lay out")
        k_eff.append(kk)
        spec.append([pb, end])
        start = np.arange(o) * s - pb
        stop = np.minimum(start + k, n + pe)
        if count_include_pad:
            counts.append(stop - start)
        else:
            counts.append(np.minimum(stop, n) - np.maximum(start, 0))
    spec.append([0, 0])
    if any(any(p) for p in spec):
        shape = [xh.shape[0], *(d + a + b for d, (a, b) in zip(sizes, spec[1:3])), xh.shape[3]]
        xh = e.op("PAD", [xh, e.const(np.asarray(spec, np.int32))], TensorType(xh.dtype, shape))
    y = e.op(
        "AVERAGE_POOL_2D",
        [xh],
        t,
        padding=VALID,
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=k_eff[0],
        filter_width=k_eff[1],
    )
    d = np.outer(counts[0], counts[1]).astype(np.float64)
    if divisor is not None:
        d = np.full_like(d, float(divisor))
    e.require(bool(np.all(d > 0)), "a pooling window over padding alone")
    scale = (k_eff[0] * k_eff[1]) / d
    if not np.all(scale == 1.0):
        c = e.const(scale.reshape(1, *outs, 1).astype(t.dtype.to_numpy()))
        y = e.op("MUL", [y, c], t)
    return y if last else to_nchw(e, y)


def _last(e: Emit, x: Ref, axis: int, op: str, **opts) -> Ref:
    a = axis % x.rank
    if a == x.rank - 1:
        return e.op(op, [x], e.out_type(), **opts)
    perm = [*range(a), *range(a + 1, x.rank), a]
    inv = list(np.argsort(perm))
    xt = e.transpose(x, perm)
    y = e.op(op, [xt], TensorType(x.dtype, xt.shape), **opts)
    return e.transpose(y, inv)


@emitter("softmax")
def softmax(e: Emit, x: Ref, *, axis: int) -> Ref:
    return _last(e, x, axis, "SOFTMAX", beta=1.0)


@emitter("log_softmax")
def log_softmax(e: Emit, x: Ref, *, axis: int) -> Ref:
    return _last(e, x, axis, "LOG_SOFTMAX")


@emitter("embedding")
def embedding(e: Emit, weight: Ref, indices: Ref, *, padding_idx) -> Ref:
    return e.op("GATHER", [weight, indices], e.out_type(), axis=0)


@emitter("resize")
def resize(
    e: Emit,
    x: Ref,
    scales_in=None,
    sizes_in=None,
    roi_in=None,
    *,
    sizes,
    scales,
    mode,
    coordinate_transformation_mode,
    nearest_mode,
    cubic_coeff_a,
    antialias,
    exclude_outside,
    roi,
    extrapolation_value,
):
    e.require(x.rank == 4 and scales_in is None and sizes_in is None, "a run-time resize")
    e.require(not antialias, "antialiased resize")
    t = e.out_type()
    hw = t.shape[2:]
    e.require(all(isinstance(d, int) for d in hw), "a resize to a symbolic size")
    ctm, nm = coordinate_transformation_mode, nearest_mode
    if mode == "linear":
        e.require(
            ctm in ("align_corners", "half_pixel", "asymmetric", "pytorch_half_pixel"),
            f"linear resize with {ctm}",
        )
        if ctm == "pytorch_half_pixel":
            e.require(all(d > 1 for d in hw), "pytorch_half_pixel to a size of 1")
        op, opts = (
            "RESIZE_BILINEAR",
            {
                "align_corners": ctm == "align_corners",
                "half_pixel_centers": ctm in ("half_pixel", "pytorch_half_pixel"),
            },
        )
    elif mode == "nearest":
        if ctm == "asymmetric" and nm == "floor":
            opts = {}
        elif ctm == "align_corners" and nm == "round_prefer_ceil":
            opts = {"align_corners": True}
        elif ctm == "tf_half_pixel_for_nn" and nm == "floor":
            opts = {"half_pixel_centers": True}
        else:
            return e.require(False, f"nearest resize with {ctm} / {nm}")
        op = "RESIZE_NEAREST_NEIGHBOR"
    else:
        return e.require(False, f"{mode} resize")
    y = e.op(op, [to_nhwc(e, x), e.ints(hw)], nhwc_type(t), **opts)
    return to_nchw(e, y)


@emitter("depth_to_space")
def depth_to_space(e: Emit, x: Ref, *, blocksize: int, mode: str) -> Ref:
    e.require(mode == "DCR", "depth_to_space in CRD order (TFLite's is DCR)")
    y = e.op("DEPTH_TO_SPACE", [to_nhwc(e, x)], nhwc_type(e.out_type()), block_size=blocksize)
    return to_nchw(e, y)


@emitter("space_to_depth")
def space_to_depth(e: Emit, x: Ref, *, blocksize: int) -> Ref:
    y = e.op("SPACE_TO_DEPTH", [to_nhwc(e, x)], nhwc_type(e.out_type()), block_size=blocksize)
    return to_nchw(e, y)


@emitter("lrn")
def lrn(e: Emit, x: Ref, *, size: int, alpha: float, beta: float, bias: float) -> Ref:
    e.require(size % 2 == 1, "local response normalization over an even window")
    y = e.op(
        "LOCAL_RESPONSE_NORMALIZATION",
        [to_nhwc(e, x)],
        nhwc_type(e.out_type()),
        radius=(size - 1) // 2,
        alpha=alpha / size,
        beta=beta,
        bias=bias,
    )
    return to_nchw(e, y)
