"""ONNX emitters of the vision family (grid_sample, affine_grid, col2im, deform_conv,
roi_align, non_max_suppression, max_unpool)."""

from __future__ import annotations

import numpy as np

from codegen.onnx.registry import Emit, Ref, emitter
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
def affine_grid(e: Emit, theta: Ref, size_in: Ref | None = None, *, size, align_corners):
    s = size_in if size_in is not None else e.ints(size)
    return e.op("AffineGrid", theta, s, align_corners=int(align_corners))


@emitter("col2im", since=18)
def col2im(
    e: Emit,
    x: Ref,
    image_in=None,
    block_in=None,
    *,
    image_shape,
    block_shape,
    dilation,
    padding,
    stride,
):
    return e.op(
        "Col2Im",
        x,
        image_in if image_in is not None else e.ints(image_shape),
        block_in if block_in is not None else e.ints(block_shape),
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
def max_unpool(
    e: Emit,
    x: Ref,
    indices: Ref,
    output_in: Ref | None = None,
    *,
    kernel,
    stride,
    padding,
    output_size,
) -> Ref:
    s = x.static_shape("MaxUnpool indices")
    n = len(kernel)
    st = list(stride) or [1] * n
    pads = list(padding) or [0] * (2 * n)
    inferred = [(s[2 + i] - 1) * st[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
    i64 = DType.INT64
    idx: Ref = indices
    out = list(output_size) if output_size is not None else inferred
    if output_in is not None or out != inferred:  # re-flatten each position over inferred
        if output_in is not None:  # the spatial size computed at run time: 0-d dims
            sizes = [e.op("Gather", output_in, e.scalar(d, i64), axis=0) for d in range(n)]
        else:
            sizes = [e.scalar(o, i64) for o in out]
        flat, rest = None, indices
        for d in reversed(range(n)):
            i_d = e.op("Mod", rest, sizes[d])
            rest = e.op("Div", rest, sizes[d])
            term = e.op("Mul", i_d, e.scalar(int(np.prod(inferred[d + 1 :])), i64))
            flat = term if flat is None else e.op("Add", flat, term)
        idx = flat  # type: ignore[assignment]
    per = int(np.prod(inferred))
    offset = (np.arange(s[0] * s[1], dtype=np.int64) * per).reshape(s[0], s[1], *[1] * n)
    idx = e.op("Add", idx, e.const(offset))
    shape = e.ints([s[0], s[1], *out]) if output_size is not None else None
    if output_in is not None:
        shape = e.op("Concat", e.ints(s[:2]), output_in, axis=0)
    return e.op("MaxUnpool", x, idx, shape, kernel_shape=list(kernel), strides=st, pads=pads)
