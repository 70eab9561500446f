"""Vision ops: sampling grids, im2col inverse, deformable convolution, RoI pooling, box
suppression, max unpooling.

# NOTE: semantics follow the ONNX operators of the same name (GridSample, AffineGrid, Col2Im,
# DeformConv, RoiAlign, NonMaxSuppression); where torch and ONNX disagree on a layout the op
# states which one it keeps (``max_unpool`` indices are per channel over the output's spatial
# size, as ``max_pool`` returns them). ``non_max_suppression`` has a data-dependent row count.
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import Dim, TensorType
from msc.ops import registry
from msc.ops.infer import InferError, conv_out, known, same_dtype
from msc.ops.schema import Attr


def _prod(dims) -> Dim:
    n = 1
    for d in dims:
        if not known(d):
            return None
        n *= d
    return n


@registry.op(
    "grid_sample",
    ["x", "grid"],
    {
        "mode": Attr.str("linear", doc="linear | nearest | cubic"),
        "padding_mode": Attr.str("zeros", doc="zeros | border | reflection"),
        "align_corners": Attr.bool(False),
    },
    category="vision",
)
def grid_sample(x, grid, *, mode, padding_mode, align_corners):
    """Sample x [N, C, *in] at grid [N, *out, n] (normalized coordinates in [-1, 1], last
    coordinate first: x, y, z) -> [N, C, *out] (ONNX GridSample, torch grid_sample)."""
    if mode not in ("linear", "nearest", "cubic"):
        raise InferError(f"grid_sample: mode {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise InferError(f"grid_sample: padding_mode {padding_mode!r}")
    dt = same_dtype(x, grid)
    if x.shape is None or grid.shape is None:
        return TensorType(dt, None)
    if len(grid.shape) != len(x.shape) or (
        known(grid.shape[-1]) and grid.shape[-1] != len(x.shape) - 2
    ):
        raise InferError(f"grid_sample: grid {grid.shape} does not fit input {x.shape}")
    return TensorType(dt, (x.shape[0], x.shape[1], *grid.shape[1:-1]))


@registry.op(
    "affine_grid",
    ["theta", "size?"],
    {
        "size": Attr.ints(None, doc="[N, C, *spatial]; None: the run-time size input"),
        "align_corners": Attr.bool(False),
    },
    category="vision",
)
def affine_grid(theta, size_in, *, size, align_corners):
    """Sampling grid [N, *spatial, n] of the affine maps theta [N, n, n+1] (ONNX AffineGrid,
    torch affine_grid); the size may be a 1-d i64 input read at run time."""
    if (size is None) == (size_in is None):
        raise InferError("affine_grid: give the size as an attribute or an input (one of them)")
    if size_in is not None:
        if theta.shape is None or len(theta.shape) != 3 or not known(theta.shape[1]):
            return TensorType(theta.dtype, None)
        n = theta.shape[1]
        return TensorType(theta.dtype, (theta.shape[0], *(None,) * n, n))
    n = len(size) - 2
    if n < 1:
        raise InferError(f"affine_grid: size {list(size)} needs [N, C, *spatial]")
    return TensorType(theta.dtype, (size[0], *size[2:], n))


@registry.op(
    "col2im",
    ["x", "image_shape?", "block_shape?"],
    {
        "image_shape": Attr.ints(None, doc="None: the run-time image_shape input"),
        "block_shape": Attr.ints(None, doc="None: the run-time block_shape input"),
        "dilation": Attr.ints(()),
        "padding": Attr.ints((), doc="[begin..., end...]"),
        "stride": Attr.ints(()),
    },
    category="vision",
)
def col2im(x, image_in, block_in, *, image_shape, block_shape, dilation, padding, stride):
    """Sum sliding blocks [N, C*prod(block), L] back into images [N, C, *image_shape]
    (ONNX Col2Im, torch fold); either shape may be a 1-d i64 input read at run time."""
    if (image_shape is None) == (image_in is None) or (block_shape is None) == (block_in is None):
        raise InferError("col2im: give each shape as an attribute or an input (one of them)")
    if image_in is not None or block_in is not None:
        n = len(image_shape) if image_shape is not None else image_in.shape[0]  # type: ignore[union-attr]
        c = None
        if block_shape is not None and x.shape is not None and known(x.shape[1]):
            c = x.shape[1] // _prod(block_shape)
        if x.shape is None or not known(n):
            return TensorType(x.dtype, None)
        image = image_shape if image_shape is not None else (None,) * n
        return TensorType(x.dtype, (x.shape[0], c, *image))
    if len(image_shape) != len(block_shape):
        raise InferError("col2im: image_shape and block_shape differ in length")
    if x.shape is None:
        return TensorType(x.dtype, None)
    k = _prod(block_shape)
    c = x.shape[1] // k if known(x.shape[1]) else None
    return TensorType(x.dtype, (x.shape[0], c, *image_shape))


@registry.op(
    "deform_conv",
    ["x", "weight", "offset", "bias?", "mask?"],
    {
        "stride": Attr.ints(()),
        "padding": Attr.ints(()),
        "dilation": Attr.ints(()),
        "groups": Attr.int(1),
        "offset_groups": Attr.int(1),
    },
    category="conv",
)
def deform_conv(x, weight, offset, bias, mask, *, stride, padding, dilation, groups, offset_groups):
    """2-d deformable convolution (ONNX DeformConv, torchvision deform_conv2d): each kernel tap
    samples x bilinearly at its position plus a learned offset [N, og*kh*kw*2, oh, ow]
    ((dy, dx) per tap), optionally scaled by mask [N, og*kh*kw, oh, ow]."""
    dt = same_dtype(x, weight, offset, bias, mask)
    if x.shape is None or weight.shape is None or offset.shape is None:
        return TensorType(dt, None)
    n = len(x.shape) - 2
    st = stride or (1,) * n
    dil = dilation or (1,) * n
    pads = padding or (0,) * (2 * n)
    spatial = [
        conv_out(x.shape[2 + i], weight.shape[2 + i], st[i], pads[i] + pads[n + i], dil[i])
        for i in range(n)
    ]
    return TensorType(dt, (x.shape[0], weight.shape[0], *spatial))


@registry.op(
    "roi_align",
    ["x", "rois", "batch_indices"],
    {
        "mode": Attr.str("avg", doc="avg | max"),
        "output_height": Attr.int(1),
        "output_width": Attr.int(1),
        "sampling_ratio": Attr.int(0, doc="0 = adaptive"),
        "spatial_scale": Attr.float(1.0),
        "half_pixel": Attr.bool(True, doc="ONNX coordinate_transformation_mode half_pixel"),
    },
    category="vision",
)
def roi_align(x, rois, batch_indices, *, mode, output_height, output_width, **_):
    """Bilinear RoI pooling of x [N, C, H, W] over rois [R, 4] (x1, y1, x2, y2) of images
    batch_indices [R] -> [R, C, oh, ow] (ONNX RoiAlign)."""
    if mode not in ("avg", "max"):
        raise InferError(f"roi_align: mode {mode!r}")
    dt = same_dtype(x, rois)
    r = rois.shape[0] if rois.shape is not None else None
    c = x.shape[1] if x.shape is not None else None
    return TensorType(dt, (r, c, output_height, output_width))


@registry.op(
    "non_max_suppression",
    [
        "boxes",
        "scores",
        "max_output_boxes_per_class?",
        "iou_threshold?",
        "score_threshold?",
    ],
    {"center_point_box": Attr.bool(False)},
    category="vision",
)
def non_max_suppression(boxes, scores, max_out, iou, score, *, center_point_box):
    """Greedy per-class box suppression (ONNX NonMaxSuppression): rows (batch, class, box) of
    the kept boxes, best score first within each class. The row count is data-dependent."""
    same_dtype(boxes, scores)
    return TensorType(DType.INT64, (None, 3))


@registry.op(
    "max_unpool",
    ["x", "indices", "output_size?"],
    {
        "kernel": Attr.ints(),
        "stride": Attr.ints(()),
        "padding": Attr.ints(()),
        "output_size": Attr.ints(None, doc="spatial output size; none = inferred or the input"),
    },
    category="pool",
)
def max_unpool(x, indices, output_size_in, *, kernel, stride, padding, output_size):
    """Scatter x into zeros of spatial size output_size (default: the inferred
    (in - 1) * stride - pads + kernel) at indices flat per channel over that output
    (torch max_unpool; max_pool returns such indices). ``output_size?``: the spatial size as
    a 1-d i64 tensor read at run time (the attribute stays None)."""
    if indices.dtype is not DType.INT64:
        raise InferError("max_unpool: indices must be i64")
    n = len(kernel)
    if output_size_in is not None:
        if output_size is not None:
            raise InferError("max_unpool: give output_size as an attribute or an input, not both")
        m = output_size_in.shape[0] if output_size_in.rank == 1 else None  # type: ignore[index]
        if output_size_in.rank != 1 or (known(m) and m != n):
            raise InferError(f"max_unpool: output_size must be 1-d of {n}, got {output_size_in}")
    if x.shape is None:
        return x
    if output_size_in is not None:
        return TensorType(x.dtype, (*x.shape[:2], *(None,) * n))
    if output_size is not None:
        return TensorType(x.dtype, (*x.shape[:2], *output_size))
    st = stride or (1,) * n
    pads = padding or (0,) * (2 * n)
    sp = [
        (d - 1) * st[i] - pads[i] - pads[n + i] + kernel[i] if known(d) else None
        for i, d in enumerate(x.shape[2:])
    ]
    return TensorType(x.dtype, (*x.shape[:2], *sp))
