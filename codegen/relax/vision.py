"""Relax emitters of the vision family."""

from __future__ import annotations

import numpy as np
from tvm import relax

from codegen.relax.registry import Emit, emitter, unsupported

R = relax.op
_GRID_MODE = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}

unsupported(
    "non_max_suppression",
    "not mapped yet (relax.op.vision.all_class_non_max_suppression returns padded rows and a "
    "count; the data-dependent slice is not written)",
)
unsupported(
    "deform_conv",
    "Relax has no deformable convolution and msc has no decomposition (bilinear gathers per "
    "kernel tap)",
)
unsupported(
    "col2im", "Relax has no col2im (a scatter-add of sliding blocks) and msc has no decomposition"
)
unsupported(
    "max_unpool",
    "Relax has no unpooling and msc has no decomposition (a scatter of each value into zeros "
    "at its flat index)",
)


@emitter("grid_sample")
def grid_sample(e: Emit, x, grid, *, mode="linear", padding_mode="zeros", align_corners=False):
    r = e.rank(x)
    e.require(r in (4, 5), f"grid_sample of a {r}-d input (image.grid_sample is 2-d or 3-d)")
    e.require(mode in _GRID_MODE, f"grid_sample mode {mode!r}")
    e.require(r == 4 or mode != "cubic", "a 3-d cubic grid_sample")
    e.require(padding_mode in ("zeros", "border", "reflection"), f"padding {padding_mode!r}")
    # TOPI's grid_sample reads the grid as [N, k, *out] (its docstring says [N, *out, k], as
    # ONNX and torch hold it).
    if mode == "nearest" and padding_mode == "reflection" and not align_corners:
        grid = _rounded_first(e, x, grid)
    g = e.emit(R.permute_dims(grid, [0, r - 1, *range(1, r - 1)]))
    layout = "NCHW" if r == 4 else "NCDHW"
    return e.emit(R.image.grid_sample(x, g, _GRID_MODE[mode], layout, padding_mode, align_corners))


def _rounded_first(e: Emit, x, grid):
    """An ONNX nearest grid_sample with reflection (and not align_corners) rounds each source
    coordinate before reflecting it about the borders -0.5 and n - 0.5 (ONNX's reference and
    onnxruntime), TOPI (as torch) after, which differ where a coordinate is a tie at x.5: the
    grid of an ONNX node is moved to its rounded coordinates, which reflect to whole ones."""
    prov = e.node.provenance if e.node is not None else None
    dims = e.shape(x)[2:]
    if prov is None or prov.framework != "onnx" or not all(isinstance(n, int) for n in dims):
        return grid
    dt = e.dtype(grid)
    half = e.const(np.array(dims[::-1], np.float64) / 2, dt)  # x pairs with the last dim
    one, mid = e.const(1.0, dt), e.const(0.5, dt)
    v = R.subtract(R.multiply(R.add(grid, one), half), mid)  # the source coordinate
    v = e.emit(R.round(v))  # to the nearest, ties to even
    return e.emit(R.subtract(R.divide(R.add(v, mid), half), one))


@emitter("affine_grid")
def affine_grid(e: Emit, theta, size_in=None, *, size=None, align_corners=False):
    if size_in is not None:  # read at run time: N is theta's, the rest at least 0
        t = e.int64(size_in)
        n = R.take(t, e.const(0, "int64"), mode="clip")
        batch = R.equal(n, R.take(e.shape_tensor(theta), e.const(0, "int64"), mode="clip"))
        size = e.ints(t, batch, R.greater_equal(t, e.const(0, "int64")))
    else:
        size = list(size)
    e.require(len(size) in (4, 5), f"an affine grid of {len(size) - 2} spatial dims")
    if len(size) == 5 or not all(isinstance(v, int) for v in size[2:]):
        return _affine_grid_matmul(e, theta, size_in, size[2:], align_corners)
    # TOPI's affine_grid gives [N, 2, H, W]; ONNX and torch hold the grid as [N, H, W, 2].
    g = e.emit(R.image.affine_grid(theta, size[2:], align_corners))
    return e.emit(R.permute_dims(g, [0, 2, 3, 1]))


@emitter("roi_align")
def roi_align(
    e: Emit, x, rois, batch_indices, *, mode="avg", output_height=1, output_width=1,
    sampling_ratio=0, spatial_scale=1.0, half_pixel=True,
):  # fmt: skip
    # vision.roi_align takes [R, 5] rows (batch index, x1, y1, x2, y2). Its ``aligned`` and
    # its max mode disagree with ONNX's half_pixel and max (ONNX's backend cases differ in
    # every element), so only ONNX's output_half_pixel averages are emitted.
    e.require(mode == "avg", "roi_align max mode (vision.roi_align's max is not ONNX's)")
    e.require(not half_pixel, "roi_align with half_pixel (vision.roi_align's aligned differs)")
    idx = e.emit(R.expand_dims(R.astype(batch_indices, e.dtype(rois)), [1]))
    rows = e.emit(R.concat([idx, rois], 1))
    return e.emit(
        R.vision.roi_align(x, rows, [output_height, output_width], spatial_scale,
                           sampling_ratio, False, "NCHW", mode)
    )  # fmt: skip


def _affine_grid_matmul(e: Emit, theta, size_in, dims, align_corners: bool):
    """The normalized base grid (x, y[, z], 1) of the points of ``dims`` times each theta, as
    ONNX defines it: for a 3-d grid (image.affine_grid is 2-d) or a size read at run time
    (image.affine_grid's legalization takes a static one)."""
    dt = e.dtype(theta)
    k = len(dims)

    def coords(n, j: int):  # n points over [-1, 1]: centers, or ends with align_corners
        i = e.emit(R.astype(e.emit(R.arange(0, n, 1, "int64")), dt))
        if size_in is None:
            count = e.const(float(n), dt)
        else:
            at = e.const(j + 2, "int64")
            count = e.emit(R.astype(R.take(e.int64(size_in), at, axis=0, mode="clip"), dt))
        one = e.const(1.0, dt)
        if align_corners:
            step = R.divide(e.const(2.0, dt), R.maximum(R.subtract(count, one), one))
            return e.emit(R.subtract(R.multiply(i, step), one))
        twice = R.add(R.multiply(i, e.const(2.0, dt)), one)
        return e.emit(R.subtract(R.divide(twice, count), one))

    points = 1
    for n in dims:
        points = points * n
    cols = []
    for j in reversed(range(k)):  # x runs along the last dim, then y, then z
        along = [1] * k
        along[j] = dims[j]
        v = e.emit(R.broadcast_to(e.emit(R.reshape(coords(dims[j], j), along)), dims))
        cols.append(e.emit(R.reshape(v, [points, 1])))
    cols.append(e.emit(R.ones([points, 1], dt)))
    base = e.emit(R.concat(cols, 1))  # [points, k + 1]
    grid = e.emit(R.matmul(base, e.emit(R.permute_dims(theta, [0, 2, 1]))))  # [N, points, k]
    n = e.shape(theta)[0]
    return e.emit(R.reshape(grid, [n, *dims, k]))
