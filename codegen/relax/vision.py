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
    # every element): those follow ONNX's formulas below, for a fixed sampling ratio.
    if mode == "max" or half_pixel:
        e.require(sampling_ratio > 0, "roi_align with half_pixel or max and an adaptive "
                  "sampling ratio (a sample count per roi computed at run time)")  # fmt: skip
        return _roi_align_onnx(e, x, rois, batch_indices, mode, output_height, output_width,
                               sampling_ratio, spatial_scale, half_pixel)  # fmt: skip
    idx = e.emit(R.expand_dims(R.astype(batch_indices, e.dtype(rois)), [1]))
    rows = e.emit(R.concat([idx, rois], 1))
    return e.emit(
        R.vision.roi_align(x, rows, [output_height, output_width], spatial_scale,
                           sampling_ratio, False, "NCHW", mode)
    )  # fmt: skip


def _roi_axis(e: Emit, rois, col: int, n: int, pooled: int, s: int, scale, half_pixel):
    """ONNX RoiAlign's samples along one axis (y: col 1, x: col 0) of every roi: the low and
    high input indices [R, pooled, s] and their bilinear weights (0 for a sample off the
    input), in x's dtype as ONNX's reference computes them."""
    dt = e.dtype(rois)
    c = lambda v: e.const(v, dt)  # noqa: E731
    off = 0.5 if half_pixel else 0.0

    def edge(k):
        v = R.take(rois, e.const(k, "int64"), axis=1, mode="clip")
        return e.emit(R.subtract(R.multiply(v, c(scale)), c(off)))

    start, end = edge(col), edge(col + 2)
    size = e.emit(R.subtract(end, start))
    if not half_pixel:  # a malformed roi is 1 x 1
        size = e.emit(R.maximum(size, c(1.0)))
    step = e.emit(R.reshape(e.emit(R.divide(size, c(float(pooled)))), [-1, 1, 1]))
    p = c(np.arange(pooled, dtype=np.float64).reshape(1, -1, 1))
    i = c((np.arange(s) + 0.5).reshape(1, 1, -1))
    at = R.add(R.add(R.reshape(start, [-1, 1, 1]), R.multiply(p, step)),
               R.divide(R.multiply(i, step), c(float(s))))  # fmt: skip
    at = e.emit(at)  # [R, pooled, s]
    valid = R.logical_not(R.logical_or(R.less(at, c(-1.0)), R.greater(at, c(float(n)))))
    valid = e.emit(R.astype(valid, dt))
    y = e.emit(R.maximum(at, c(0.0)))
    lo = e.emit(R.floor(y))
    last = e.emit(R.greater_equal(lo, c(float(n - 1))))  # past the last: both on it
    lo = e.emit(R.where(last, c(float(n - 1)), lo))
    hi = e.emit(R.where(last, lo, R.add(lo, c(1.0))))
    frac = e.emit(R.subtract(R.where(last, lo, y), lo))
    w_lo = e.emit(R.multiply(R.subtract(c(1.0), frac), valid))
    w_hi = e.emit(R.multiply(frac, valid))
    return [(e.emit(R.astype(lo, "int64")), w_lo), (e.emit(R.astype(hi, "int64")), w_hi)]


def _roi_align_onnx(e: Emit, x, rois, batch, mode, ph, pw, s, scale, half_pixel):
    n, ch, h, w = e.shape(x)
    e.require(all(isinstance(v, int) for v in (n, ch, h, w)), "roi_align of symbolic dims")
    nr = e.shape(rois)[0]
    dt = e.dtype(x)
    ys = _roi_axis(e, rois, 1, h, ph, s, scale, half_pixel)
    xs = _roi_axis(e, rois, 0, w, pw, s, scale, half_pixel)
    batch = e.int64(batch)
    if mode == "avg":
        # Separable: each roi's [ph, h] and [pw, w] weight matrices (samples summed), on
        # either side of its image, one image at a time (rois of other images weigh 0).
        def matrix(pairs, size, pooled):
            grid = e.const(np.arange(size).reshape(1, 1, 1, -1), "int64")
            parts = [R.multiply(R.astype(R.equal(R.expand_dims(i, [3]), grid), dt),
                                R.expand_dims(wt, [3])) for i, wt in pairs]  # fmt: skip
            return e.emit(R.sum(R.add(*parts), [2]))  # [R, pooled, size]

        wy, wxt = matrix(ys, h, ph), e.emit(R.permute_dims(matrix(xs, w, pw), [0, 2, 1]))
        total = None
        for b in range(n):
            mine = e.emit(R.astype(R.equal(batch, e.const(b, "int64")), dt))
            wyb = e.emit(R.multiply(wy, R.reshape(mine, [-1, 1, 1])))
            img = R.reshape(R.permute_dims(R.take(x, e.const(b, "int64"), axis=0), [1, 0, 2]),
                            [h, ch * w])  # fmt: skip
            rows = e.emit(R.matmul(R.reshape(wyb, [nr * ph, h]), e.emit(img)))
            part = e.emit(R.matmul(R.reshape(rows, [nr, ph * ch, w]), wxt))  # [R, ph*C, pw]
            total = part if total is None else e.emit(R.add(total, part))
        out = e.emit(R.permute_dims(R.reshape(total, [nr, ph, ch, pw]), [0, 2, 1, 3]))
        return e.emit(R.divide(out, e.const(float(s * s), dt)))
    # max: the largest weighted corner of every sample (ONNX's max), gathered per channel
    flat = e.emit(R.reshape(x, [-1]))
    base = R.multiply(R.reshape(batch, [-1, 1, 1]), e.const(ch, "int64"))
    chan = e.const(np.arange(ch).reshape(1, -1, 1), "int64")
    base = e.emit(R.multiply(R.add(base, chan), e.const(h * w, "int64")))  # [R, C, 1]
    best = None
    for iy, wy in ys:
        for ix, wx in xs:
            pos = R.add(R.multiply(R.reshape(iy, [-1, ph, 1, s, 1]), e.const(w, "int64")),
                        R.reshape(ix, [-1, 1, pw, 1, s]))  # fmt: skip
            pos = e.emit(R.reshape(pos, [nr, 1, ph * pw * s * s]))
            wt = R.multiply(R.reshape(wy, [-1, ph, 1, s, 1]), R.reshape(wx, [-1, 1, pw, 1, s]))
            wt = e.emit(R.reshape(wt, [nr, 1, ph * pw * s * s]))
            v = e.emit(R.multiply(wt, R.take(flat, R.add(base, pos), axis=0, mode="clip")))
            best = v if best is None else e.emit(R.maximum(best, v))
    best = e.emit(R.reshape(best, [nr, ch, ph, pw, s * s]))
    return e.emit(R.max(best, [4]))


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
