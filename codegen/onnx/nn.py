"""Emitters for linear algebra, convolution, pooling, normalization, softmax, attention,
embedding and resize.

# NOTE: canonical spatial padding is already ONNX-ordered ([begins..., ends...]), so pads pass
# through. ONNX's required scale/bias inputs that the canonical op leaves out are filled with
# constant ones/zeros of the channel count, which must then be static.
"""

from __future__ import annotations

import numpy as np

from codegen.onnx.registry import Emit, Ref, Unsupported, emitter
from msc.ir.dtype import DType
from msc.ops.nn import exact_resize_scale


@emitter("matmul", since=9)
def matmul(e: Emit, a: Ref, b: Ref) -> Ref:
    return e.op("MatMul", a, b)


@emitter("gemm", since=9)
def gemm(e: Emit, a: Ref, b: Ref, c: Ref | None, *, alpha, beta, trans_a, trans_b) -> Ref:
    if c is None and e.opset < 11:
        c = e.scalar(0, a.dtype)
    return e.op("Gemm", a, b, c, alpha=alpha, beta=beta, transA=int(trans_a), transB=int(trans_b))


@emitter("linear", since=9)
def linear(e: Emit, x: Ref, weight: Ref, bias: Ref | None) -> Ref:
    """Gemm with transB for a 2-d input and weight; other ranks use the decomposition."""
    e.require(x.rank == 2 and weight.rank == 2, "Gemm takes 2-d operands only")
    if bias is None and e.opset < 11:
        bias = e.scalar(0, x.dtype)
    return e.op("Gemm", x, weight, bias, transB=1)


@emitter("einsum", since=12)
def einsum(e: Emit, *xs: Ref, equation: str) -> Ref:
    return e.op("Einsum", *xs, equation=equation)


def _kernel(weight: Ref) -> list[int]:
    return (
        [int(d) for d in weight.shape[2:]]
        if all(isinstance(d, int) for d in weight.shape[2:])
        else []
    )


def _channels_first(e: Emit, data_layout: str, kernel_layout: str = "OIHW") -> None:
    """ONNX's Conv and pools are channels first: other layouts are brought to them
    (``msc.ops.layout.to_layout``) before emission."""
    e.require(
        data_layout == "NCHW" and kernel_layout == "OIHW",
        f"a {data_layout}/{kernel_layout} node (convert with to_layout(g, 'NCHW') first)",
    )


@emitter("conv", since=1)
def conv(
    e: Emit, x: Ref, weight: Ref, bias: Ref | None, *, stride, padding, dilation, groups,
    data_layout="NCHW", kernel_layout="OIHW",
):  # fmt: skip
    _channels_first(e, data_layout, kernel_layout)
    return e.op(
        "Conv",
        x,
        weight,
        bias,
        kernel_shape=_kernel(weight),
        strides=stride,
        pads=padding,
        dilations=dilation,
        group=groups,
    )


@emitter("conv_transpose", since=1)
def conv_transpose(
    e: Emit, x, weight, bias, *, stride, padding, dilation, groups, output_padding
) -> Ref:
    return e.op(
        "ConvTranspose",
        x,
        weight,
        bias,
        kernel_shape=_kernel(weight),
        strides=stride,
        pads=padding,
        dilations=dilation,
        group=groups,
        output_padding=output_padding,
    )


def _pool_attrs(e: Emit, kernel, stride, padding, dilation, ceil_mode) -> dict:
    attrs = {"kernel_shape": list(kernel), "strides": list(stride or kernel), "pads": padding}
    if any(d != 1 for d in dilation or ()):
        e.require(e.opset >= 10, "pool dilations need opset 10")
        attrs["dilations"] = dilation
    if ceil_mode:
        e.require(e.opset >= 10, "pool ceil_mode needs opset 10")
        attrs["ceil_mode"] = 1
    return attrs


def _torch_indices(e: Emit, x: Ref, idx: Ref) -> Ref:
    """ONNX MaxPool indices count over the whole NC... tensor; torch's over each channel."""
    shape = x.static_shape("max_pool indices")
    n, c, spatial = shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64))
    offset = (np.arange(n * c, dtype=np.int64) * spatial).reshape(n, c, *[1] * (len(shape) - 2))
    return e.op("Sub", idx, e.const(offset))


@emitter("max_pool", since=8)
def max_pool(
    e: Emit, x, *, kernel, stride, padding, dilation, ceil_mode, return_indices,
    data_layout="NCHW",
):  # fmt: skip
    _channels_first(e, data_layout)
    attrs = _pool_attrs(e, kernel, stride, padding, dilation, ceil_mode)
    if not return_indices:
        return e.op("MaxPool", x, **attrs)
    y, idx = e.op("MaxPool", x, outputs=2, **attrs)
    return y, _torch_indices(e, x, idx)


@emitter("avg_pool", since=7)
def avg_pool(
    e: Emit, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
    data_layout="NCHW",
):  # fmt: skip
    _channels_first(e, data_layout)
    attrs = _pool_attrs(e, kernel, stride, padding, (), ceil_mode)
    if divisor_override is not None:
        y = e.op("AveragePool", x, count_include_pad=1, **attrs)
        k = float(np.prod(kernel))
        return e.op("Mul", y, e.scalar(k / divisor_override, x.dtype))
    return e.op("AveragePool", x, count_include_pad=int(count_include_pad), **attrs)


@emitter("lp_pool", since=11)
def lp_pool(e: Emit, x, *, kernel, stride, padding, dilation, ceil_mode, p):
    e.require(float(p).is_integer(), "ONNX LpPool takes an integer p")
    attrs = _pool_attrs(e, kernel, stride, padding, dilation, ceil_mode)
    e.require(
        e.opset >= 18 or ("dilations" not in attrs and "ceil_mode" not in attrs),
        "LpPool takes dilations and ceil_mode from opset 18",
    )
    return e.op("LpPool", x, p=int(p), **attrs)


def _adaptive_kernel(e: Emit, x: Ref, output_size) -> list[int] | None:
    """Kernel for an adaptive pool whose windows are all equal, or None for a global one."""
    spatial = x.shape[2:]
    if all(o == 1 for o in output_size):
        return None
    kernel = []
    for d, o in zip(spatial, output_size):
        if o is None or o < 0:
            o = d
        if not isinstance(d, int) or d % o:
            raise Unsupported("adaptive pool windows differ in size")
        kernel.append(d // o)
    return kernel


@emitter("adaptive_avg_pool", since=7)
def adaptive_avg_pool(e: Emit, x: Ref, *, output_size) -> Ref:
    k = _adaptive_kernel(e, x, output_size)
    if k is None:
        return e.op("GlobalAveragePool", x)
    return e.op("AveragePool", x, kernel_shape=k, strides=k)


@emitter("adaptive_max_pool", since=8)
def adaptive_max_pool(e: Emit, x: Ref, *, output_size, return_indices):
    try:
        k = _adaptive_kernel(e, x, output_size)
    except Unsupported:
        return _adaptive_max_by_windows(e, x, output_size, return_indices)
    if k is None and not return_indices:
        return e.op("GlobalMaxPool", x)
    if k is None:
        k = [d for d in x.static_shape("adaptive_max_pool")[2:]]
    if not return_indices:
        return e.op("MaxPool", x, kernel_shape=k, strides=k)
    y, idx = e.op("MaxPool", x, outputs=2, kernel_shape=k, strides=k)
    return y, _torch_indices(e, x, idx)


def _adaptive_max_by_windows(e: Emit, x: Ref, output_size, return_indices: bool):
    """Adaptive max pooling whose windows differ in size (torch's window i of an axis of d
    over o outputs: [floor(i*d/o), ceil((i+1)*d/o))): the spatial plane flattened, a constant
    [outputs, positions] window mask, ArgMax per output (the first maximum, and its index
    in the plane as torch counts it), GatherElements for the value."""
    spatial = x.shape[2:]
    e.require(all(isinstance(d, int) for d in spatial), "adaptive pool of unknown spatial size")
    e.require(x.dtype.is_floating, "adaptive max pool with unequal windows of an integer tensor")
    e.require(e.opset >= 11, "adaptive max pool with unequal windows needs GatherElements (11)")
    outs = [d if o is None or o < 0 else o for d, o in zip(spatial, output_size)]
    mask = np.ones((1, 1), dtype=bool)
    for d, o in zip(spatial, outs):
        m = np.zeros((o, d), dtype=bool)
        for i in range(o):
            m[i, (i * d) // o : -((-(i + 1) * d) // o)] = True
        mask = (mask[:, None, :, None] & m[None, :, None, :]).reshape(
            mask.shape[0] * o, mask.shape[1] * d
        )
    flat = e.op("Reshape", x, e.ints([0, 0, 1, -1]))  # [N, C, 1, positions]
    masked = e.op("Where", e.const(mask), flat, e.scalar(float("-inf"), x.dtype))
    idx = e.op("ArgMax", masked, axis=3, keepdims=1)  # [N, C, outputs, 1]
    y = e.op("Reshape", e.op("GatherElements", masked, idx, axis=3), e.ints([0, 0, *outs]))
    if not return_indices:
        return y
    return y, e.op("Reshape", idx, e.ints([0, 0, *outs]))


def _fill(e: Emit, v: Ref | None, like: Ref, value: float, shape, what: str) -> Ref:
    if v is not None:
        return v
    if not all(isinstance(d, int) for d in shape):
        raise Unsupported(f"{what}: filling an absent affine input needs static dims")
    return e.const(np.full(tuple(shape), value, dtype=like.dtype.to_numpy()))


@emitter("batch_norm", since=9)
def batch_norm(e: Emit, x, weight, bias, running_mean, running_var, *, eps) -> Ref:
    c = running_mean.shape
    w = _fill(e, weight, x, 1.0, c, "batch_norm")
    b = _fill(e, bias, x, 0.0, c, "batch_norm")
    return e.op("BatchNormalization", x, w, b, running_mean, running_var, epsilon=eps)


@emitter("instance_norm", since=6)
def instance_norm(e: Emit, x, weight, bias, *, eps) -> Ref:
    c = x.shape[1:2]
    w = _fill(e, weight, x, 1.0, c, "instance_norm")
    b = _fill(e, bias, x, 0.0, c, "instance_norm")
    return e.op("InstanceNormalization", x, w, b, epsilon=eps)


@emitter("layer_norm", since=17)
def layer_norm(e: Emit, x, weight, bias, *, axis, eps) -> Ref:
    w = _fill(e, weight, x, 1.0, x.shape[axis % x.rank :], "layer_norm")
    return e.op("LayerNormalization", x, w, bias, axis=axis, epsilon=eps)


@emitter("rms_norm", since=23)
def rms_norm(e: Emit, x, weight, *, axis, eps) -> Ref:
    w = _fill(e, weight, x, 1.0, x.shape[axis % x.rank :], "rms_norm")
    return e.op("RMSNormalization", x, w, axis=axis, epsilon=eps)


@emitter("group_norm", since=21)
def group_norm(e: Emit, x, weight, bias, *, num_groups, eps) -> Ref:
    c = x.shape[1:2]
    w = _fill(e, weight, x, 1.0, c, "group_norm")
    b = _fill(e, bias, x, 0.0, c, "group_norm")
    return e.op("GroupNormalization", x, w, b, num_groups=num_groups, epsilon=eps)


@emitter("lrn", since=1)
def lrn(e: Emit, x, *, size, alpha, beta, bias) -> Ref:
    return e.op("LRN", x, size=size, alpha=alpha, beta=beta, bias=bias)


def _softmax_family(onnx_op: str):
    def since_13(e: Emit, x: Ref, *, axis: int) -> Ref:
        return e.op(onnx_op, x, axis=axis)

    def before_13(e: Emit, x: Ref, *, axis: int) -> Ref:
        # Before 13 the op coerces to 2-d at axis; on the last axis that is the same thing.
        r = x.rank
        a = axis % r
        if a == r - 1:
            return e.op(onnx_op, x, axis=a)
        perm = list(range(r))
        perm[a], perm[-1] = perm[-1], perm[a]
        t = e.op("Transpose", x, perm=perm)
        return e.op("Transpose", e.op(onnx_op, t, axis=r - 1), perm=perm)

    return since_13, before_13


for _op, _onnx in (("softmax", "Softmax"), ("log_softmax", "LogSoftmax")):
    _new, _old = _softmax_family(_onnx)
    emitter.register(_op, 1, _old)
    emitter.register(_op, 13, _new)


@emitter("attention", since=23)
def attention(e: Emit, query, key, value, mask, *, is_causal, scale, enable_gqa) -> Ref:
    r = query.rank
    e.require(r in (3, 4) and key.rank == r and value.rank == r, "Attention takes rank 3 or 4")
    # ONNX's causal mask is top-left aligned when L != S, as torch's is.
    attrs = {"is_causal": int(is_causal), "scale": scale}
    if r == 3:  # [B, L, E] is one head
        attrs.update(q_num_heads=1, kv_num_heads=1)
    elif not enable_gqa:
        e.require(query.shape[1] == key.shape[1], "query and key heads differ without gqa")
    if mask is not None and mask.type is not None and mask.type.shape is not None:
        # onnxruntime wants the mask's query dim spelled out (a [B, 1, 1, S] key-padding
        # bias broadcast over queries is refused): expand it when the lengths are static.
        ms, ql, kl = mask.shape, query.shape[-2], key.shape[-2]
        if len(ms) >= 2 and ms[-2] == 1 and ql != 1 and isinstance(ql, int):
            if isinstance(kl, int):
                mask = e.op("Expand", mask, e.ints([1] * (len(ms) - 2) + [ql, kl]))
    return e.op("Attention", query, key, value, mask, **attrs)


@emitter("embedding", since=1)
def embedding(e: Emit, weight: Ref, indices: Ref, *, padding_idx) -> Ref:
    return e.op("Gather", weight, indices, axis=0)


def _resize_attrs(e: Emit, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a):
    """Every attribute the graph has, also one its mode ignores (a linear resize's
    nearest_mode, as torch.onnx writes it), so the file reads back as the same graph."""
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode}
    if mode == "nearest" or nearest_mode != "round_prefer_floor":
        attrs["nearest_mode"] = nearest_mode
    if mode == "cubic" or cubic_coeff_a != -0.75:
        attrs["cubic_coeff_a"] = cubic_coeff_a
    return attrs


@emitter("resize", since=11)
def resize(
    e: Emit,
    x: Ref,
    scales_in: Ref | None = None,
    sizes_in: Ref | None = None,
    roi_in: Ref | None = None,
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
) -> Ref:
    attrs = _resize_attrs(e, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a)
    if exclude_outside:
        attrs["exclude_outside"] = 1
    if roi is not None or roi_in is not None:
        attrs["extrapolation_value"] = extrapolation_value

    def full_roi():  # ONNX's roi over every dim of x: [starts, ends]
        if roi_in is not None:
            return roi_in
        if roi is None:
            return e.const(np.zeros((0,), np.float32)) if e.opset < 13 else None
        n = len(roi) // 2
        return e.const(np.asarray([0, 0, *roi[:n], 1, 1, *roi[n:]], np.float32))

    if scales_in is not None or sizes_in is not None:  # full-rank, computed at run time
        if antialias:
            e.require(e.opset >= 18, "Resize antialias needs opset 18")
            attrs["antialias"] = 1
        if sizes_in is not None:
            empty = e.const(np.zeros((0,), np.float32)) if e.opset < 13 else None
            return e.op("Resize", x, full_roi(), empty, sizes_in, **attrs)
        return e.op("Resize", x, full_roi(), scales_in, **attrs)
    # NOTE: Resize is written full-rank, never with opset 18's ``axes``: onnxruntime's layout
    # transformer (ORT_ENABLE_EXTENDED and up, 1.32) moves the Transposes of a channels-last
    # model through a Resize and drops its ``sizes`` when ``axes`` is set, then refuses the
    # session ("Number of elements of input 'sizes' (0) does not match the number of axes").
    if antialias:
        e.require(e.opset >= 18, "Resize antialias needs opset 18")
        attrs["antialias"] = 1
    empty = e.const(np.zeros((0,), np.float32)) if e.opset < 13 else None
    roi_ref = full_roi()
    if sizes is not None:
        lead = x.shape[:2]
        if all(isinstance(d, int) for d in lead):
            return e.op("Resize", x, roi_ref, empty, e.ints([*lead, *sizes]), **attrs)
        exact = _exact_scales(x.shape[2:], sizes)
        if exact is None:  # N or C known only at run time: Shape(x)[:2] ++ sizes
            e.require(e.opset >= 15, "Resize to sizes with a run-time N or C needs opset 15")
            lead_ref = e.op("Shape", x, start=0, end=2)
            full_sizes = e.op("Concat", lead_ref, e.ints(list(sizes)), axis=0)
            return e.op("Resize", x, roi_ref, empty, full_sizes, **attrs)
        scales = exact
    full = np.asarray([1.0, 1.0, *scales], np.float32)
    return e.op("Resize", x, roi_ref, e.const(full), **attrs)


def _exact_scales(spatial, sizes) -> list[float] | None:
    """The float32 scales that give exactly ``sizes`` from the static ``spatial`` dims (see
    msc.ops.nn.exact_resize_scale), or None."""
    if not all(isinstance(d, int) and d > 0 for d in spatial):
        return None
    out = []
    for d, n in zip(spatial, sizes, strict=True):
        scale = exact_resize_scale(d, n)
        if scale is None:
            return None
        out.append(scale)
    return out


@emitter("pixel_shuffle", since=11)
def pixel_shuffle(e: Emit, x: Ref, *, upscale_factor) -> Ref:
    e.require(x.rank == 4, "DepthToSpace takes rank 4")
    return e.op("DepthToSpace", x, blocksize=upscale_factor, mode="CRD")


_ = DType  # re-exported type used in annotations of sibling modules
