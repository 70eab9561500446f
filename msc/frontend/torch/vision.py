"""Converters for sampling, patch and unpooling ATen ops: grid sampling, fold (col2im) and
max_unpool.

# NOTE: all map one-to-one onto canonical ops (``grid_sample``, ``col2im``, ``max_unpool``);
# torch's integer enums become the canonical string attributes, and torch's symmetric padding
# the [begins..., ends...] form.
"""

from __future__ import annotations

from typing import Any

from msc.frontend.torch.registry import Ctx, Unsupported, converter, dims_tuple
from msc.ir import DType, Value

_GRID_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@converter(
    "aten.grid_sampler.default", "aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default"
)
def grid_sampler(
    ctx: Ctx,
    input: Value,  # noqa: A002 - the schema's name
    grid: Value,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
) -> Value:
    if interpolation_mode not in _GRID_MODES or padding_mode not in _GRID_PADDING:
        raise Unsupported(f"grid_sampler modes {interpolation_mode}, {padding_mode}")
    if interpolation_mode == 2 and ctx.rank(input) != 4:
        raise Unsupported("bicubic grid sampling of a non-2-d input")
    return ctx.op(
        "grid_sample",
        input,
        ctx.cast(grid, input.dtype),
        mode=_GRID_MODES[interpolation_mode],
        padding_mode=_GRID_PADDING[padding_mode],
        align_corners=bool(align_corners),
    )


@converter("aten.col2im.default")
def col2im(
    ctx: Ctx,
    self: Value,
    output_size: Any,
    kernel_size: Any,
    dilation: Any,
    padding: Any,
    stride: Any,
) -> Value:
    x = self
    batched = ctx.rank(x) == 3
    if not batched:  # [C*k, L] -> [1, C*k, L]
        x = ctx.op("unsqueeze", x, axes=[0])
    pads = dims_tuple(padding, 2)
    y = ctx.op(
        "col2im",
        x,
        image_shape=ctx.ints(output_size, "fold output_size"),
        block_shape=list(dims_tuple(kernel_size, 2)),
        dilation=list(dims_tuple(dilation, 2)),
        padding=[*pads, *pads],
        stride=list(dims_tuple(stride, 2)),
    )
    return y if batched else ctx.op("squeeze", y, axes=[0])


@converter("aten.max_unpool2d.default", "aten.max_unpool3d.default")
def max_unpool(
    ctx: Ctx,
    self: Value,
    indices: Value,
    output_size: Any,
    stride: Any = None,
    padding: Any = None,
) -> Value:
    """torch's indices count per (batch, channel) over the output's spatial size, as the
    canonical op's do; the ATen op states only that size, so kernel and stride are chosen to
    infer exactly it (stride out // in, kernel the rest): the op keeps its identity instead of
    becoming an index_put."""
    out = ctx.ints(output_size, "max_unpool output_size")
    shape = ctx.shape(self)
    spatial = shape[-len(out) :]
    if any(not isinstance(d, int) for d in spatial):
        raise Unsupported("max_unpool of an input with symbolic spatial dims")
    if 0 in spatial:
        raise Unsupported("max_unpool of an empty input")
    strides = [max(1, o // d) for o, d in zip(out, spatial, strict=True)]
    kernel = [o - (d - 1) * s for o, d, s in zip(out, spatial, strides, strict=True)]
    x, idx = self, indices
    batched = len(shape) == len(out) + 2
    if not batched:  # [C, *spatial] -> [1, C, *spatial]
        x = ctx.op("unsqueeze", x, axes=[0])
        idx = ctx.op("unsqueeze", idx, axes=[0])
    y = ctx.op("max_unpool", x, ctx.cast(idx, DType.INT64), kernel=kernel, stride=strides)
    return y if batched else ctx.op("squeeze", y, axes=[0])
