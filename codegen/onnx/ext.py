"""ONNX emitters for the vision, signal, sequence-model and data-dependent ops
(msc/ops/vision.py, signal.py, transformer.py, tensor.py): each is the ONNX op it came from.

# NOTE: attributes the canonical op holds but ONNX takes as inputs (sizes, shapes, axis,
# frame sizes) become Constant nodes. ``max_unpool`` indices are per channel over the output
# size; ONNX's count over the whole [N, C, *inferred] tensor, so the emitter converts them
# back (needs the input's static shape). Ops newer than the target opset are Unsupported here
# (the driver then tries a decomposition).
"""

from __future__ import annotations

import numpy as np

from codegen.onnx.registry import ONNX_DTYPE, Emit, Ref, emitter
from msc.ir.dtype import DType


# ---------------------------------------------------------------- vision
@emitter("grid_sample", since=16)
def grid_sample_16(e: Emit, x: Ref, grid: Ref, *, mode, padding_mode, align_corners):
    e.require(x.rank == 4, "GridSample before opset 20 samples 4-d inputs only")
    old = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return e.op(
        "GridSample", x, grid, mode=old, padding_mode=padding_mode, align_corners=int(align_corners)
    )


@emitter("grid_sample", since=20)
def grid_sample(e: Emit, x: Ref, grid: Ref, *, mode, padding_mode, align_corners):
    return e.op(
        "GridSample",
        x,
        grid,
        mode=mode,
        padding_mode=padding_mode,
        align_corners=int(align_corners),
    )


@emitter("affine_grid", since=20)
def affine_grid(e: Emit, theta: Ref, *, size, align_corners):
    return e.op("AffineGrid", theta, e.ints(size), align_corners=int(align_corners))


@emitter("col2im", since=18)
def col2im(e: Emit, x: Ref, *, image_shape, block_shape, dilation, padding, stride):
    return e.op(
        "Col2Im",
        x,
        e.ints(image_shape),
        e.ints(block_shape),
        dilations=dilation,
        pads=padding,
        strides=stride,
    )


@emitter("deform_conv", since=19)
def deform_conv(
    e: Emit, x, weight, offset, bias, mask, *, stride, padding, dilation, groups, offset_groups
):
    kernel = [int(d) for d in weight.static_shape("DeformConv kernel")[2:]]
    return e.op(
        "DeformConv",
        x,
        weight,
        offset,
        bias,
        mask,
        kernel_shape=kernel,
        strides=stride,
        pads=padding,
        dilations=dilation,
        group=groups,
        offset_group=offset_groups,
    )


def _roi_align(e: Emit, x, rois, batch_indices, mode, oh, ow, sampling_ratio, scale, **extra):
    return e.op(
        "RoiAlign",
        x,
        rois,
        batch_indices,
        mode=mode,
        output_height=oh,
        output_width=ow,
        sampling_ratio=sampling_ratio,
        spatial_scale=scale,
        **extra,
    )


@emitter("roi_align", since=10)
def roi_align_10(
    e: Emit,
    x,
    rois,
    batch_indices,
    *,
    mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
    half_pixel,
):
    e.require(not half_pixel, "RoiAlign half_pixel needs opset 16")
    return _roi_align(
        e, x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale
    )


@emitter("roi_align", since=16)
def roi_align(
    e: Emit,
    x,
    rois,
    batch_indices,
    *,
    mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
    half_pixel,
):
    ctm = "half_pixel" if half_pixel else "output_half_pixel"
    return _roi_align(
        e,
        x,
        rois,
        batch_indices,
        mode,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
        coordinate_transformation_mode=ctm,
    )


@emitter("non_max_suppression", since=10)
def non_max_suppression(e: Emit, boxes, scores, max_out, iou, score, *, center_point_box):
    return e.op(
        "NonMaxSuppression",
        boxes,
        scores,
        max_out,
        iou,
        score,
        center_point_box=int(center_point_box),
    )


@emitter("max_unpool", since=11)
def max_unpool(e: Emit, x: Ref, indices: Ref, *, kernel, stride, padding, output_size):
    s = x.static_shape("MaxUnpool indices")
    n = len(kernel)
    st = list(stride) or [1] * n
    pads = list(padding) or [0] * (2 * n)
    inferred = [(s[2 + i] - 1) * st[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
    out = list(output_size) if output_size is not None else inferred
    i64 = DType.INT64
    idx: Ref = indices
    if out != inferred:  # re-flatten each position over the inferred size
        flat, rest = None, indices
        for d in reversed(range(n)):
            i_d = e.op("Mod", rest, e.scalar(out[d], i64))
            rest = e.op("Div", rest, e.scalar(out[d], i64))
            term = e.op("Mul", i_d, e.scalar(int(np.prod(inferred[d + 1 :])), i64))
            flat = term if flat is None else e.op("Add", flat, term)
        idx = flat  # type: ignore[assignment]
    per = int(np.prod(inferred))
    offset = (np.arange(s[0] * s[1], dtype=np.int64) * per).reshape(s[0], s[1], *[1] * n)
    idx = e.op("Add", idx, e.const(offset))
    shape = e.ints([s[0], s[1], *out]) if output_size is not None else None
    return e.op("MaxUnpool", x, idx, shape, kernel_shape=list(kernel), strides=st, pads=pads)


# ---------------------------------------------------------------- signal
def _length(e: Emit, length) -> Ref | None:
    return None if length is None else e.scalar(length, DType.INT64)


@emitter("dft", since=17)
def dft_17(e: Emit, x: Ref, *, axis, inverse, onesided, length):
    return e.op(
        "DFT",
        x,
        _length(e, length),
        axis=axis % x.rank,
        inverse=int(inverse),
        onesided=int(onesided),
    )


@emitter("dft", since=20)
def dft(e: Emit, x: Ref, *, axis, inverse, onesided, length):
    return e.op(
        "DFT",
        x,
        _length(e, length),
        e.scalar(axis, DType.INT64),
        inverse=int(inverse),
        onesided=int(onesided),
    )


@emitter("stft", since=17)
def stft(e: Emit, signal: Ref, window: Ref | None, *, frame_step, frame_length, onesided):
    length = None if frame_length is None else e.scalar(frame_length, DType.INT64)
    return e.op(
        "STFT", signal, e.scalar(frame_step, DType.INT64), window, length, onesided=int(onesided)
    )


# ---------------------------------------------------------------- sequence models
@emitter("rotary_embedding", since=23)
def rotary_embedding(
    e: Emit, x, cos_cache, sin_cache, position_ids, *, interleaved, rotary_dim, num_heads
):
    return e.op(
        "RotaryEmbedding",
        x,
        cos_cache,
        sin_cache,
        position_ids,
        interleaved=int(interleaved),
        rotary_embedding_dim=rotary_dim or None,
        num_heads=num_heads or None,
    )


@emitter("linear_attention", since=27)
def linear_attention(
    e: Emit,
    query,
    key,
    value,
    past_state,
    decay,
    beta,
    *,
    update_rule,
    q_num_heads,
    kv_num_heads,
    scale,
):
    return e.op(
        "LinearAttention",
        query,
        key,
        value,
        past_state,
        decay,
        beta,
        outputs=2,
        update_rule=update_rule,
        q_num_heads=q_num_heads,
        kv_num_heads=kv_num_heads,
        scale=scale,
    )


@emitter("causal_conv_with_state", since=27)
def causal_conv_with_state(e: Emit, x, weight, bias, past_state, *, activation):
    return e.op(
        "CausalConvWithState", x, weight, bias, past_state, outputs=2, activation=activation
    )


@emitter("swiglu", since=28)
def swiglu(e: Emit, a: Ref, b: Ref, *, alpha):
    return e.op("SwiGLU", a, b, alpha=alpha if alpha != 1.0 else None)


# ---------------------------------------------------------------- tensor
@emitter("bitcast", since=26)
def bitcast(e: Emit, x: Ref, *, to: DType):
    return e.op("BitCast", x, to=ONNX_DTYPE[to])


@emitter("unique", since=11)
def unique(e: Emit, x: Ref, *, axis, sorted):  # noqa: A002
    return e.op("Unique", x, outputs=4, axis=axis, sorted=int(sorted))


@emitter("range", since=11)
def range_(e: Emit, start: Ref, limit: Ref, delta: Ref):
    return e.op("Range", start, limit, delta)


@emitter("det", since=11)
def det(e: Emit, x: Ref):
    return e.op("Det", x)


@emitter("reverse_sequence", since=10)
def reverse_sequence(e: Emit, x: Ref, sequence_lens: Ref, *, batch_axis, time_axis):
    return e.op("ReverseSequence", x, sequence_lens, batch_axis=batch_axis, time_axis=time_axis)


@emitter("tensor_scatter", since=24)
def tensor_scatter(e: Emit, past_cache, update, write_indices, *, axis, mode):
    return e.op("TensorScatter", past_cache, update, write_indices, axis=axis, mode=mode)
