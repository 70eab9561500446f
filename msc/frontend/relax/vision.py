"""Relax converters of the vision family."""

from __future__ import annotations

from msc.frontend.relax.importer import Ctx, converter
from msc.ir.dtype import DType

# image.grid_sample's methods by the names msc's grid_sample takes (ONNX GridSample's).
_GRID_MODE = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


@converter("relax.image.grid_sample")
def grid_sample(ctx: Ctx, x, grid, *, attrs):
    r = len(x.type.shape or ())
    layout = {4: "NCHW", 5: "NCDHW"}.get(r)
    ctx.require(str(attrs.layout) == layout, f"grid_sample in layout {attrs.layout}")
    mode = _GRID_MODE.get(str(attrs.method))
    ctx.require(mode is not None, f"grid_sample method {attrs.method}")
    # TOPI reads the grid as [N, k, *out]; msc's (ONNX's, torch's) is [N, *out, k].
    grid = ctx.op("transpose", grid, perm=[0, *range(2, r), 1])
    return ctx.op("grid_sample", x, grid, mode=mode, padding_mode=str(attrs.padding_mode),
                  align_corners=bool(attrs.align_corners))  # fmt: skip


@converter("relax.vision.roi_align")
def roi_align(ctx: Ctx, x, rows, *, attrs):
    # vision.roi_align's rows are [R, 5]: the batch index, then x1, y1, x2, y2.
    ctx.require(str(attrs.layout) == "NCHW", f"roi_align in layout {attrs.layout}")
    ctx.require(not bool(attrs.aligned), "roi_align aligned (msc's half_pixel differs)")
    height, width = (int(v) for v in attrs.pooled_size)
    rois = ctx.op("slice", rows, starts=[1], ends=[5], axes=[1], steps=[1])
    index = ctx.op("slice", rows, starts=[0], ends=[1], axes=[1], steps=[1])
    index = ctx.op("cast", ctx.op("squeeze", index, axes=[1]), to=DType.INT64)
    return ctx.op("roi_align", x, rois, index, mode=str(attrs.mode), output_height=height,
                  output_width=width, sampling_ratio=int(attrs.sample_ratio),
                  spatial_scale=float(attrs.spatial_scale), half_pixel=False)  # fmt: skip
