"""Run-time helpers for the vision, signal, sequence-model and data-dependent ops.

# NOTE: invariants (as in helpers.py, whose ``HELPERS`` table these join on import)
# - Each helper is a top-level ``_msc_*`` function using only ``torch``, ``F`` and other
#   ``_msc_*`` helpers; its source is pasted into generated modules.
# - Each implements the canonical op's documented semantics exactly (ONNX's): shapes are read
#   at run time, data-dependent outputs (unique, non_max_suppression) are built at run time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from codegen.torch.helpers import HELPERS

__all__ = ["EXT_HELPERS"]


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


def _msc_unique(x, axis, sorted):
    """Unique values (or slices), first-occurrence indices, inverse indices and counts;
    sorted ascending or in order of first occurrence."""
    data, dim = (x.reshape(-1), 0) if axis is None else (x, axis % x.dim())
    work = data.float() if data.dtype in (torch.bfloat16, torch.float16) else data
    u, inv, counts = torch.unique(
        work, sorted=True, return_inverse=True, return_counts=True, dim=dim
    )
    u = u.to(x.dtype)
    n = inv.shape[0]
    ar = torch.arange(n, device=x.device)
    first = torch.full((counts.shape[0],), n, dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inv, ar, "amin")
    if not sorted:
        order = torch.argsort(first)
        u, first, counts = u.index_select(dim, order), first[order], counts[order]
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.shape[0], device=x.device)
        inv = rank[inv]
    return u, first, inv, counts


def _msc_reverse_sequence(x, lens, batch_axis, time_axis):
    """Reverse the first lens[b] steps along time_axis of each batch entry."""
    xm = x.movedim((batch_axis, time_axis), (0, 1))
    t = torch.arange(xm.shape[1], device=x.device).unsqueeze(0)
    n = lens.reshape(-1, 1)
    idx = torch.where(t < n, n - 1 - t, t)
    idx = idx.reshape(*idx.shape, *[1] * (xm.dim() - 2)).expand(xm.shape)
    return xm.gather(1, idx).movedim((0, 1), (batch_axis, time_axis))


def _msc_tensor_scatter(past, update, write_indices, axis, mode):
    """Write update into past along axis from write_indices[b] (circular: modulo its size)."""
    a = axis % past.dim()
    b, s = past.shape[0], update.shape[a]
    start = write_indices if write_indices is not None else past.new_zeros(b, dtype=torch.int64)
    idx = start.reshape(b, 1) + torch.arange(s, device=past.device).reshape(1, s)
    if mode == "circular":
        idx = idx % past.shape[a]
    shape = [1] * past.dim()
    shape[0], shape[a] = b, s
    return past.scatter(a, idx.reshape(shape).expand(update.shape), update)


def _msc_dft(x, axis, inverse, onesided, length):
    """ONNX DFT on the real layout [..., 1|2] -> [..., 2] ([..., 1] for a onesided inverse),
    computed in float64 (as the ONNX reference does) and cast back."""
    a = axis % x.dim()
    work = x.double()
    z = torch.view_as_complex(work.contiguous()) if x.shape[-1] == 2 else work[..., 0]
    if inverse and onesided:
        return torch.fft.irfft(z, n=length, dim=a).unsqueeze(-1).to(x.dtype)
    if inverse:
        y = torch.fft.ifft(z, n=length, dim=a)
    else:
        y = torch.fft.fft(z, n=length, dim=a)
        if onesided:
            y = y.narrow(a, 0, y.shape[a] // 2 + 1)
    return torch.view_as_real(y).to(x.dtype)


def _msc_stft(signal, window, frame_step, frame_length, onesided):
    """ONNX STFT: windowed frames of signal [B, L, 1|2] -> [B, frames, bins, 2]."""
    frames = signal.unfold(1, frame_length, frame_step).movedim(-1, 2)
    if window is not None:
        frames = frames * window.reshape(1, 1, frame_length, 1)
    return _msc_dft(frames, 2, False, onesided, None)


def _msc_rotary_embedding(
    x, cos_cache, sin_cache, position_ids, interleaved, rotary_dim, num_heads
):
    """ONNX RotaryEmbedding on [B, H, S, D] or [B, S, H*D]."""
    shape = x.shape
    t = x.transpose(1, 2) if x.dim() == 4 else x.reshape(shape[0], shape[1], num_heads, -1)
    r = rotary_dim or t.shape[-1]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    rot, rest = t[..., :r], t[..., r:]
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : r // 2], rot[..., r // 2 :]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rot = torch.stack([real, imag], -1).reshape(rot.shape)
    else:
        rot = torch.cat([real, imag], -1)
    out = torch.cat([rot, rest], -1)
    return out.transpose(1, 2) if x.dim() == 4 else out.reshape(shape)


def _msc_linear_attention(q, k, v, past_state, decay, beta, update_rule, hq, hkv, scale):
    """ONNX LinearAttention: the step recurrence in float32; (output, present state)."""
    b, t = q.shape[0], q.shape[1]
    f32 = torch.float32

    def heads(a, h):
        return a.reshape(b, t, h, -1).transpose(1, 2).to(f32)

    q4, k4, v4 = heads(q, hq), heads(k, hkv), heads(v, hkv)
    dk, dv = k4.shape[-1], v4.shape[-1]
    gated = update_rule in ("gated", "gated_delta")
    delta = update_rule in ("delta", "gated_delta")
    g = None
    if gated:
        g = (
            heads(decay, hkv)
            if decay.shape[-1] != hkv
            else decay.to(f32).transpose(1, 2).unsqueeze(-1)
        )
    be = beta.to(f32).transpose(1, 2).unsqueeze(-1) if delta else None
    if past_state is not None:
        state = past_state.to(f32)
    else:
        state = torch.zeros(b, hkv, dk, dv, dtype=f32, device=q.device)
    s = scale if scale else dk**-0.5
    outs = []
    for i in range(t):
        if gated:
            state = state * torch.exp(g[:, :, i]).unsqueeze(-1)
        kt, vt = k4[:, :, i], v4[:, :, i]
        if delta:
            vt = be[:, :, i] * (vt - torch.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(hq // hkv, dim=1) if hq != hkv else state
        outs.append(s * torch.einsum("bhd,bhdm->bhm", q4[:, :, i], read))
    out = torch.stack(outs, 2).transpose(1, 2).reshape(b, t, hq * dv).to(q.dtype)
    return out, state.to(q.dtype if past_state is None else past_state.dtype)


def _msc_causal_conv_with_state(x, weight, bias, past_state, activation):
    """Depthwise causal conv1d left-padded by past_state (zeros when absent); optional SiLU;
    returns (output, the last k-1 positions of the padded input)."""
    k = weight.shape[2]
    if past_state is None:
        past_state = x.new_zeros(x.shape[0], x.shape[1], k - 1)
    padded = torch.cat([past_state, x], 2)
    y = F.conv1d(padded, weight, bias, groups=x.shape[1])
    if activation in ("silu", "swish"):
        y = F.silu(y.float()).to(x.dtype)
    return y, padded[:, :, padded.shape[2] - (k - 1) :]


EXT_HELPERS = {
    fn.__name__: fn
    for fn in (
        _msc_deform_conv,
        _msc_roi_align,
        _msc_non_max_suppression,
        _msc_unique,
        _msc_reverse_sequence,
        _msc_tensor_scatter,
        _msc_dft,
        _msc_stft,
        _msc_rotary_embedding,
        _msc_linear_attention,
        _msc_causal_conv_with_state,
    )
}
_clash = set(EXT_HELPERS) & set(HELPERS)
if _clash:
    raise ValueError(f"torch helpers defined twice: {sorted(_clash)}")
HELPERS.update(EXT_HELPERS)
