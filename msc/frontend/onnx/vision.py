"""Vision ONNX ops: GridSample, AffineGrid, Col2Im, DeformConv, RoiAlign, NonMaxSuppression,
MaxUnpool, CenterCropPad.

# NOTE: shape-setting inputs (AffineGrid size, Col2Im image/block shapes, MaxUnpool
# output_shape, CenterCropPad shape) become attributes when constant at import, else the
# canonical op's run-time input.
# MaxUnpool indices are made per channel over the output's spatial size (the canonical, torch
# layout), which needs the input's static shape. CenterCropPad maps onto ``slice`` and ``pad``.
"""

from __future__ import annotations

import math

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.registry import converter
from msc.ir import DType

_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}


@converter("GridSample", since=16)
def grid_sample(ctx: Ctx, X, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):  # noqa: N803
    return ctx.op(
        "grid_sample",
        X,
        ctx.cast(grid, ctx.dtype(X)),
        mode=_GRID_MODES.get(mode, mode),
        padding_mode=padding_mode,
        align_corners=bool(align_corners),
    )


@converter("AffineGrid", since=20)
def affine_grid(ctx: Ctx, theta, size, *, align_corners=0):
    if ctx.known(size) is None:
        s = ctx.cast(size, DType.INT64)
        return ctx.op("affine_grid", theta, s, size=None, align_corners=bool(align_corners))
    return ctx.op(
        "affine_grid", theta, size=ctx.ints(size, "size"), align_corners=bool(align_corners)
    )


@converter("Col2Im", since=18)
def col2im(ctx: Ctx, input, image_shape, block_shape, *, dilations=None, pads=None, strides=None):  # noqa: A002
    run = [ctx.known(v) is None for v in (image_shape, block_shape)]
    return ctx.op(
        "col2im",
        input,
        ctx.cast(image_shape, DType.INT64) if run[0] else None,
        ctx.cast(block_shape, DType.INT64) if run[1] else None,
        image_shape=None if run[0] else ctx.ints(image_shape, "image_shape"),
        block_shape=None if run[1] else ctx.ints(block_shape, "block_shape"),
        dilation=list(dilations or ()),
        padding=list(pads or ()),
        stride=list(strides or ()),
    )


@converter("DeformConv", since=19)
def deform_conv(
    ctx: Ctx,
    X,  # noqa: N803
    W,  # noqa: N803
    offset,
    B=None,  # noqa: N803
    mask=None,
    *,
    dilations=None,
    group=1,
    kernel_shape=None,
    offset_group=1,
    pads=None,
    strides=None,
):
    if ctx.rank(X) != 4:
        raise Unsupported("DeformConv over other than 2 spatial dims")
    return ctx.op(
        "deform_conv",
        X,
        W,
        offset,
        B,
        mask,
        stride=list(strides or ()),
        padding=list(pads or ()),
        dilation=list(dilations or ()),
        groups=group,
        offset_groups=offset_group,
    )


@converter("RoiAlign", since=10)
def roi_align(
    ctx: Ctx,
    X,  # noqa: N803
    rois,
    batch_indices,
    *,
    coordinate_transformation_mode=None,
    mode="avg",
    output_height=1,
    output_width=1,
    sampling_ratio=0,
    spatial_scale=1.0,
):
    # The default was output_half_pixel until opset 16, half_pixel since.
    ctm = coordinate_transformation_mode or (
        "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
    )
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise Unsupported(f"RoiAlign coordinate_transformation_mode={ctm!r}")
    return ctx.op(
        "roi_align",
        X,
        ctx.cast(rois, ctx.dtype(X)),
        ctx.cast(batch_indices, DType.INT64),
        mode=mode,
        output_height=output_height,
        output_width=output_width,
        sampling_ratio=sampling_ratio,
        spatial_scale=spatial_scale,
        half_pixel=ctm == "half_pixel",
    )


@converter("NonMaxSuppression", since=10)
def non_max_suppression(
    ctx: Ctx,
    boxes,
    scores,
    max_output_boxes_per_class=None,
    iou_threshold=None,
    score_threshold=None,
    *,
    center_point_box=0,
):
    return ctx.op(
        "non_max_suppression",
        boxes,
        scores,
        max_output_boxes_per_class,
        iou_threshold,
        score_threshold,
        center_point_box=bool(center_point_box),
    )


@converter("MaxUnpool", since=9)
def max_unpool(ctx: Ctx, X, I, output_shape=None, *, kernel_shape, pads=None, strides=None):  # noqa: N803, E741
    s = ctx.static_shape(X)
    if s is None:
        raise Unsupported("MaxUnpool of an input with a shape only known at run time")
    n = len(kernel_shape)
    st = list(strides or [1] * n)
    p = list(pads or [0] * (2 * n))
    inferred = [(s[2 + i] - 1) * st[i] - p[i] - p[n + i] + kernel_shape[i] for i in range(n)]
    # ONNX indices count over the whole [N, C, *inferred] tensor; the canonical ones per
    # channel over the output's spatial size.
    per = math.prod(inferred)
    ctx.check_size(s[0] * s[1], "MaxUnpool index offsets")
    offset = (np.arange(s[0] * s[1], dtype=np.int64) * per).reshape(s[0], s[1], *[1] * n)
    idx = ctx.op("sub", ctx.cast(I, DType.INT64), offset)
    attrs = {"kernel": list(kernel_shape), "stride": st, "padding": p}
    if output_shape is not None and ctx.known(output_shape) is None:
        # The output size computed at run time: the canonical op's input (spatial dims), the
        # indices re-flattened over it by run-time arithmetic.
        sizes = _part(ctx, ctx.cast(output_shape, DType.INT64), 2, 2 + n)
        strides_out = [
            ctx.op("reduce_prod", _part(ctx, sizes, d + 1, n), axes=[0], keepdims=False)
            for d in range(n)
        ]
        idx = _reflatten(ctx, idx, inferred, strides_out)
        return ctx.op("max_unpool", X, idx, sizes, output_size=None, **attrs)
    out = None if output_shape is None else ctx.ints(output_shape, "output_shape")[2:]
    if out is not None and out != inferred:
        strides_out = [np.array(math.prod(out[d + 1 :]), np.int64) for d in range(n)]
        idx = _reflatten(ctx, idx, inferred, strides_out)
    return ctx.op("max_unpool", X, idx, output_size=out if out != inferred else None, **attrs)


def _part(ctx: Ctx, v, start: int, end: int):
    """``v[start:end]`` of a 1-d run-time tensor."""
    return ctx.op("slice", v, starts=[start], ends=[end], axes=[0], steps=[1])


def _reflatten(ctx: Ctx, idx, inferred: list[int], strides_out: list):
    """Indices flat over the ``inferred`` spatial size, re-flattened over an output whose
    per-dim strides are ``strides_out`` (constants or 0-d run-time tensors)."""
    flat, rest = None, idx
    for d in reversed(range(len(inferred))):
        i_d = ctx.op("remainder", rest, np.array(inferred[d], np.int64))
        rest = ctx.op("floor_divide", rest, np.array(inferred[d], np.int64))
        term = ctx.op("mul", i_d, strides_out[d])
        flat = term if flat is None else ctx.op("add", flat, term)
    return flat


@converter("CenterCropPad", since=18)
def center_crop_pad(ctx: Ctx, input_data, shape, *, axes=None):
    dims = ctx.shape(input_data)
    r = len(dims)
    ax = [a % r for a in axes] if axes is not None else list(range(r))
    if ctx.known(shape) is None or not all(isinstance(dims[a], int) for a in ax):
        return _runtime_center_crop_pad(ctx, input_data, shape, ax, r)
    target = ctx.ints(shape, "shape")
    starts, ends, sl_axes = [], [], []
    pads = [0] * (2 * r)
    for a, want in zip(ax, target):
        have = dims[a]
        if not isinstance(have, int):
            raise Unsupported("CenterCropPad over a dim only known at run time")
        if want < have:  # crop: the smaller half before
            d = have - want
            starts.append(d // 2)
            ends.append(d // 2 + want)
            sl_axes.append(a)
        elif want > have:  # pad: the smaller half before
            d = want - have
            pads[a], pads[r + a] = d // 2, d - d // 2
    y = input_data
    if sl_axes:
        y = ctx.op("slice", y, starts=starts, ends=ends, axes=sl_axes, steps=[1] * len(starts))
    if any(pads):
        y = ctx.op("pad", y, pads=pads)
    if y is input_data:
        y = ctx.op("identity", y)
    return y


def _runtime_center_crop_pad(ctx: Ctx, x, shape, ax: list[int], r: int):
    """CenterCropPad with a target or dims only known at run time: a slice with run-time
    bounds, then a pad with run-time pads (the smaller half before, as ONNX does; the
    halves are of non-negative sizes, so truncating division is floor division)."""
    i64 = DType.INT64
    zero = np.zeros(1, np.int64)
    target = ctx.cast(shape, i64)
    begins, ends, pad_lo, pad_hi = [], [], [zero] * r, [zero] * r
    for j, a in enumerate(ax):
        d = ctx.shape(x)[a]
        have = (
            np.array([d], np.int64)
            if isinstance(d, int)
            else ctx.op("shape", x, start=a, end=a + 1)
        )
        want = ctx.op("slice", target, starts=[j], ends=[j + 1], axes=[0], steps=[1])
        crop = ctx.op("maximum", ctx.op("sub", have, want), zero)
        grow = ctx.op("maximum", ctx.op("sub", want, have), zero)
        lo = ctx.op("div", crop, np.array([2], np.int64))
        begins.append(lo)
        ends.append(ctx.op("add", lo, ctx.op("minimum", have, want)))
        pad_lo[a] = ctx.op("div", grow, np.array([2], np.int64))
        pad_hi[a] = ctx.op("sub", grow, pad_lo[a])
    y = ctx.op(
        "slice",
        x,
        ctx.op("concat", *begins, axis=0),
        ctx.op("concat", *ends, axis=0),
        None,
        None,
        starts=None,
        ends=None,
        axes=ax,
        steps=[],
    )
    pads = ctx.op("concat", *pad_lo, *pad_hi, axis=0)
    return ctx.op("pad", y, pads, None, pads=None, mode="constant", value=0.0)
