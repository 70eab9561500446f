"""Emitters of the vision family (grid_sample, affine_grid, max_unpool, col2im,
deform_conv, roi_align, non_max_suppression), with their run-time helpers.

# NOTE: a run-time helper (``_msc_*``) uses only ``torch``, ``F`` and other helpers: its
# source is pasted into generated modules.
"""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import fn_nd, forward_to_helper, helper_call, int_list
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS, emitter
from msc.errors import ConversionError


@EMITTERS("deform_conv")
def deform_conv(
    e, x, weight, offset, bias=None, mask=None, *, stride, padding, dilation, groups, offset_groups
):
    return helper_call(
        e,
        "_msc_deform_conv",
        x,
        weight,
        offset,
        bias,
        mask,
        list(stride),
        list(padding),
        list(dilation),
        groups,
        offset_groups,
    )


@emitter("affine_grid")
def affine_grid(e: NodeEmit, theta: Arg, size_in: Arg | None = None, *, size, align_corners):
    s = int_list(size_in) if size_in is not None else list(size)
    return call("F.affine_grid", theta, s, align_corners=align_corners)


@emitter("grid_sample")
def grid_sample(e, x, grid, *, mode: str, padding_mode: str, align_corners: bool) -> ast.expr:
    tmode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}[mode]
    return call(
        "F.grid_sample", x, grid, mode=tmode, padding_mode=padding_mode, align_corners=align_corners
    )


@emitter("max_unpool")
def max_unpool(e, x, indices, output_in=None, *, kernel, stride, padding, output_size) -> ast.expr:
    n = len(kernel)
    fn = fn_nd("F.max_unpool", n)
    if fn is None or (padding and tuple(padding[:n]) != tuple(padding[n:])):
        raise ConversionError("max_unpool: torch takes 1-3 spatial dims and symmetric padding")
    if output_in is not None or not _torch_takes(x, kernel, stride, padding, output_size):
        # A run-time size, or one torch's max_unpool refuses (it takes sizes within a stride
        # of the inferred one): the scatter it does, written out.
        size = int_list(output_in) if output_in is not None else tuple(output_size)
        return call(e.helper("_msc_max_unpool").id, x, indices, size)
    kw = {"stride": tuple(stride)} if stride else {}
    if padding and any(padding):
        kw["padding"] = tuple(padding[:n])
    if output_size is not None:
        kw["output_size"] = tuple(output_size)
    return call(fn, x, indices, tuple(kernel), **kw)


def _torch_takes(x: Arg, kernel, stride, padding, output_size) -> bool:
    """Whether F.max_unpool accepts ``output_size``: each dim strictly within one stride of
    the inferred size (unknown input dims: assume it does)."""
    if output_size is None or x.shape is None:
        return True
    n = len(kernel)
    st = stride or (1,) * n
    pads = padding or (0,) * (2 * n)
    for i, d in enumerate(x.shape[2:]):
        if not isinstance(d, int):
            return True
        inferred = (d - 1) * st[i] - 2 * pads[i] + kernel[i]
        if not inferred - st[i] < output_size[i] < inferred + st[i]:
            return False
    return True


@emitter("col2im")
def col2im(
    e, x, image_in=None, block_in=None, *, image_shape, block_shape, dilation, padding, stride
) -> ast.expr:
    n = len(block_shape) if block_shape is not None else (block_in.shape or (None,))[0]
    image = int_list(image_in) if image_in is not None else tuple(image_shape)
    block = int_list(block_in) if block_in is not None else tuple(block_shape)
    if n != 2 or (padding and tuple(padding[:n]) != tuple(padding[n:])):
        # torch's fold takes 2-d blocks and symmetric padding
        args = (tuple(dilation), tuple(padding), tuple(stride))
        return helper_call(e, "_msc_col2im", x, image, block, *args)
    kw = {}
    if dilation:
        kw["dilation"] = tuple(dilation)
    if padding:
        kw["padding"] = tuple(padding[:n])
    if stride:
        kw["stride"] = tuple(stride)
    return call("F.fold", x, image, block, **kw)


# Ops computed by one run-time helper taking the node's inputs and attributes in order.
EMITTERS("roi_align")(forward_to_helper("_msc_roi_align", __name__))
EMITTERS("non_max_suppression")(forward_to_helper("_msc_non_max_suppression", __name__))


def _msc_col2im(x, image, block, dilation, pads, stride):
    """ONNX Col2Im for any number of spatial dims and begin/end pads: each block position's
    column added into the padded image, which is then cropped."""
    n = len(block)
    dilation = list(dilation) or [1] * n
    stride = list(stride) or [1] * n
    pads = list(pads) or [0] * (2 * n)
    padded = [image[i] + pads[i] + pads[n + i] for i in range(n)]
    counts = [(padded[i] - dilation[i] * (block[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    size = 1
    for b in block:
        size *= b
    cols = x.reshape(x.shape[0], x.shape[1] // size, *block, *counts)
    out = x.new_zeros(x.shape[0], x.shape[1] // size, *padded)
    for flat in range(size):
        at, rest = [], flat
        for b in reversed(block):
            at.insert(0, rest % b)
            rest //= b
        where = [slice(None), slice(None)]
        for i in range(n):
            start = at[i] * dilation[i]
            where.append(slice(start, start + stride[i] * (counts[i] - 1) + 1, stride[i]))
        out[tuple(where)] += cols[(slice(None), slice(None), *at)]
    crop = [slice(None), slice(None)] + [slice(pads[i], pads[i] + image[i]) for i in range(n)]
    return out[tuple(crop)]


def _msc_deform_conv(x, weight, offset, bias, mask, stride, padding, dilation, groups, og):
    """2-d deformable convolution: bilinear samples (zero outside) at offset kernel taps."""
    n, c, h, w = x.shape
    oc, cg, kh, kw = weight.shape
    oh, ow = offset.shape[2], offset.shape[3]
    sh, sw = list(stride) or [1, 1]
    ph, pw = (list(padding) or [0, 0, 0, 0])[:2]
    dh, dw = list(dilation) or [1, 1]
    dev, dt = x.device, offset.dtype
    off = offset.reshape(n, og, kh, kw, 2, oh, ow)
    ys = (torch.arange(oh, device=dev, dtype=dt) * sh - ph).reshape(1, 1, 1, 1, oh, 1)
    ys = ys + (torch.arange(kh, device=dev, dtype=dt) * dh).reshape(1, 1, kh, 1, 1, 1)
    xs = (torch.arange(ow, device=dev, dtype=dt) * sw - pw).reshape(1, 1, 1, 1, 1, ow)
    xs = xs + (torch.arange(kw, device=dev, dtype=dt) * dw).reshape(1, 1, 1, kw, 1, 1)
    gy = (ys + off[:, :, :, :, 0]) / max(h - 1, 1) * 2 - 1
    gx = (xs + off[:, :, :, :, 1]) / max(w - 1, 1) * 2 - 1
    grid = torch.stack([gx, gy], -1).reshape(n * og, kh * kw * oh, ow, 2)
    cols = F.grid_sample(
        x.reshape(n * og, c // og, h, w), grid.to(x.dtype), align_corners=True
    ).reshape(n, og, c // og, kh * kw, oh, ow)
    if mask is not None:
        cols = cols * mask.reshape(n, og, 1, kh * kw, oh, ow)
    cols = cols.reshape(n, groups, cg * kh * kw, oh * ow)
    wg = weight.reshape(groups, oc // groups, cg * kh * kw)
    y = torch.einsum("gok,ngkl->ngol", wg, cols).reshape(n, oc, oh, ow)
    return y if bias is None else y + bias.reshape(1, oc, 1, 1)


def _msc_roi_align(x, rois, batch_indices, mode, oh, ow, sampling_ratio, scale, half_pixel):
    """ONNX RoiAlign: average (or max of weighted corners) of bilinear samples per bin."""
    _, c, h, w = x.shape
    f64 = torch.float64
    dev = x.device
    shift = 0.5 if half_pixel else 0.0
    outs = []
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = [float(v) * scale - shift for v in rois[r].tolist()]
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = sampling_ratio if sampling_ratio > 0 else int(-(-rh // oh))
        gw = sampling_ratio if sampling_ratio > 0 else int(-(-rw // ow))
        count = max(gh * gw, 1)
        iy = (torch.arange(gh, device=dev, dtype=f64) + 0.5) * bh / max(gh, 1)
        ix = (torch.arange(gw, device=dev, dtype=f64) + 0.5) * bw / max(gw, 1)
        yy = (y1 + torch.arange(oh, device=dev, dtype=f64) * bh).reshape(oh, 1, 1, 1)
        xx = (x1 + torch.arange(ow, device=dev, dtype=f64) * bw).reshape(1, 1, ow, 1)
        y = (yy + iy.reshape(1, gh, 1, 1)).expand(oh, gh, ow, gw)
        xv = (xx + ix.reshape(1, 1, 1, gw)).expand(oh, gh, ow, gw)
        valid = ((y >= -1.0) & (y <= h) & (xv >= -1.0) & (xv <= w)).to(f64)
        y, xv = y.clamp(min=0), xv.clamp(min=0)
        y_low, x_low = y.floor().to(torch.int64), xv.floor().to(torch.int64)
        y_top, x_top = y_low >= h - 1, x_low >= w - 1
        y_low, x_low = y_low.clamp(max=h - 1), x_low.clamp(max=w - 1)
        y = torch.where(y_top, y_low.to(f64), y)
        xv = torch.where(x_top, x_low.to(f64), xv)
        y_high = torch.where(y_top, y_low, y_low + 1)
        x_high = torch.where(x_top, x_low, x_low + 1)
        ly, lx = y - y_low, xv - x_low
        hy, hx = 1.0 - ly, 1.0 - lx
        img = x[int(batch_indices[r])].reshape(c, h * w).to(f64)
        terms = [
            img[:, (yi * w + xi).reshape(-1)].reshape(c, oh, gh, ow, gw) * (wt * valid)
            for yi, xi, wt in (
                (y_low, x_low, hy * hx),
                (y_low, x_high, hy * lx),
                (y_high, x_low, ly * hx),
                (y_high, x_high, ly * lx),
            )
        ]
        if mode == "avg":
            v = (terms[0] + terms[1] + terms[2] + terms[3]).sum((2, 4)) / count
        else:
            m = torch.maximum(torch.maximum(terms[0], terms[1]), torch.maximum(terms[2], terms[3]))
            v = m.amax((2, 4)) if gh * gw else m.sum((2, 4))
        outs.append(v.to(x.dtype))
    if not outs:
        return x.new_zeros(0, c, oh, ow)
    return torch.stack(outs, 0)


def _msc_non_max_suppression(boxes, scores, max_out, iou, score, center_point_box):
    """ONNX NonMaxSuppression: greedy per (batch, class), best score first (ties: lower box
    index first); rows [batch, class, box] as int64."""
    k = int(max_out.reshape(-1)[0]) if max_out is not None and max_out.numel() else 0
    thr = iou.reshape(-1)[0] if iou is not None and iou.numel() else boxes.new_zeros(())
    has_score = score is not None and score.numel() > 0
    if center_point_box:
        cx, cy, bw, bh = boxes.unbind(-1)
        x0, x1, y0, y1 = cx - bw / 2, cx + bw / 2, cy - bh / 2, cy + bh / 2
    else:
        a, b, c, d = boxes.unbind(-1)
        y0, y1, x0, x1 = (
            torch.minimum(a, c),
            torch.maximum(a, c),
            torch.minimum(b, d),
            torch.maximum(b, d),
        )
    area = (x1 - x0) * (y1 - y0)
    rows = []
    for bi in range(boxes.shape[0]):
        iw = torch.minimum(x1[bi, :, None], x1[bi, None]) - torch.maximum(
            x0[bi, :, None], x0[bi, None]
        )
        ih = torch.minimum(y1[bi, :, None], y1[bi, None]) - torch.maximum(
            y0[bi, :, None], y0[bi, None]
        )
        inter = iw * ih
        union = area[bi, :, None] + area[bi, None] - inter
        ok = (iw > 0) & (ih > 0) & (area[bi, :, None] > 0) & (area[bi, None] > 0) & (union > 0)
        suppress = (ok & (inter / union > thr)).tolist()
        for ci in range(scores.shape[1]):
            s = scores[bi, ci]
            cand = torch.arange(s.shape[0], device=s.device)
            if has_score:
                cand = cand[s > score.reshape(-1)[0]]
            order = cand[torch.sort(s[cand], descending=True, stable=True).indices].tolist()
            kept = []
            for i in order:
                if len(kept) >= k:
                    break
                if not any(suppress[i][j] for j in kept):
                    kept.append(i)
                    rows.append([bi, ci, i])
    return torch.tensor(rows, dtype=torch.int64, device=boxes.device).reshape(-1, 3)


def _msc_max_unpool(x, indices, output_size):
    """Scatter x into zeros of spatial size ``output_size`` at ``indices`` (flat per channel
    over that size), as F.max_unpool does without its limit on the size."""
    n, c = x.shape[0], x.shape[1]
    numel = 1
    for s in output_size:
        numel *= int(s)
    y = x.new_zeros(n, c, numel)
    y.scatter_(2, indices.reshape(n, c, -1), x.reshape(n, c, -1))
    return y.reshape(n, c, *output_size)


runtime_helpers(
    _msc_deform_conv, _msc_roi_align, _msc_non_max_suppression, _msc_max_unpool, _msc_col2im
)
