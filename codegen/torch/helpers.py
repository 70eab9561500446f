"""Run-time helpers copied into generated modules where torch has no single call for an op.

# NOTE: invariants
# - Each helper is a top-level function named ``_msc_*`` that uses only ``torch`` and ``F``
#   (torch.nn.functional) and other ``_msc_*`` helpers: its source (``inspect.getsource``) is
#   pasted into the generated module, which therefore imports nothing but torch.
# - Helpers implement the canonical op semantics documented in msc/ops exactly (ONNX ordering
#   of pads, ONNX Resize coordinate modes, ...); emitters use a direct torch call instead when
#   it computes the same thing.
# - Sizes are read from tensors at run time, so helpers work with symbolic dims.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["HELPERS"]


def _msc_load_weights(model, state):
    """Load ``state`` (state_dict key -> tensor) into ``model`` by assignment (no copy).

    Buffers a torch module has but the graph did not keep (BatchNorm's num_batches_tracked)
    are set to zero; any other missing or unexpected key is an error. A tensor registered
    under several names (tied weights) is loaded once and stays shared.
    """
    state = dict(state)
    names = {}  # id(tensor) -> its names, for tied tensors
    for key, t in [*model.named_parameters(remove_duplicate=False),
                   *model.named_buffers(remove_duplicate=False)]:  # fmt: skip
        names.setdefault(id(t), []).append(key)
    tied = {}  # alias -> the name whose tensor it shares
    for keys in names.values():
        first = next((k for k in keys if k in state), keys[0])
        tied.update({k: first for k in keys if k != first})
    for key in tied:
        state.pop(key, None)
    persistent = set(model.state_dict())
    for key in [k for k in state if k not in persistent]:  # constants: non-persistent buffers
        owner, _, leaf = key.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._buffers:
            module._buffers[leaf] = state.pop(key)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    bad = [k for k in missing if not k.endswith("num_batches_tracked") and k not in tied]
    if bad or unexpected:
        raise KeyError(f"weights do not fit the model: missing {bad}, unexpected {unexpected}")
    for key in missing:
        if key not in tied:
            owner, _, leaf = key.rpartition(".")
            model.get_submodule(owner).register_buffer(leaf, torch.zeros((), dtype=torch.int64))
    for alias, key in tied.items():  # assign=True replaced the tensor under one name only
        owner, _, leaf = key.rpartition(".")
        module = model.get_submodule(owner)
        t = module._parameters[leaf] if leaf in module._parameters else module._buffers[leaf]
        owner, _, leaf = alias.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._parameters:
            module._parameters[leaf] = t
        else:
            module._buffers[leaf] = t
    return model


def _msc_torch_pads(pads):
    """ONNX pads [b0, b1, ..., e0, e1, ...] to F.pad's order (last dim first)."""
    n = len(pads) // 2
    out = []
    for i in reversed(range(n)):
        out += [pads[i], pads[n + i]]
    return out


def _msc_pad(x, pads, mode, value):
    """ONNX Pad: pads [begins..., ends...] per dim; negative pads crop; modes constant,
    reflect, edge, wrap on any dim."""
    if mode == "constant":
        return F.pad(x, _msc_torch_pads(pads), value=value)
    n = x.dim()
    for d in range(n):
        b, e = pads[d], pads[n + d]
        if b == 0 and e == 0:
            continue
        size = x.shape[d]
        i = torch.arange(-b, size + e, device=x.device)
        if mode == "edge":
            i = i.clamp(0, size - 1)
        elif mode == "wrap":
            i = torch.remainder(i, size)
        elif mode == "reflect":
            period = 2 * (size - 1) if size > 1 else 1
            i = torch.remainder(i, period)
            i = torch.where(i >= size, period - i, i)
        else:
            raise ValueError(f"pad mode {mode!r}")
        x = x.index_select(d, i)
    return x


def _msc_slice(x, dim, start, end, step):
    """x[start:end:step] along ``dim`` with Python semantics, including negative steps."""
    idx = range(*slice(start, end, step).indices(x.shape[dim]))
    return x.index_select(dim, torch.tensor(list(idx), dtype=torch.int64, device=x.device))


def _msc_expand(x, shape):
    """numpy-style broadcast of x to ``shape``; -1 keeps x's dim; either side may be 1."""
    r = max(len(shape), x.dim())
    have = [1] * (r - x.dim()) + list(x.shape)
    want = [1] * (r - len(shape)) + list(shape)
    out = [h if w == -1 else (h if w == 1 else w) for h, w in zip(have, want)]
    return x.reshape(have).expand(out)


def _msc_cumsum(x, dim, exclusive, reverse):
    """Running sum along ``dim``; ``exclusive`` shifts by one, ``reverse`` runs backwards."""
    if reverse:
        x = x.flip(dim)
    y = torch.cumsum(x, dim, dtype=x.dtype)
    if exclusive:
        y = y.narrow(dim, 0, x.shape[dim] - 1)
        y = torch.cat([torch.zeros_like(x.narrow(dim, 0, 1)), y], dim)
    return y.flip(dim) if reverse else y


def _msc_reduce_prod(x, dims, keepdim):
    """Product over several dims (torch.prod takes one), keeping x's dtype."""
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        x = torch.prod(x, d, keepdim=keepdim, dtype=x.dtype)
    return x


def _msc_arg_last(x, dim, keepdim, largest):
    """Index of the last max (or min) along ``dim``."""
    n = x.shape[dim]
    flipped = x.flip(dim)
    i = torch.argmax(flipped, dim, keepdim) if largest else torch.argmin(flipped, dim, keepdim)
    return (n - 1) - i


def _msc_gather_nd(x, indices, batch_dims):
    """ONNX GatherND."""
    b = batch_dims
    k = indices.shape[-1]
    batch = x.shape[:b]
    xf = x.reshape(-1, *x.shape[b:])
    nb = xf.shape[0]
    idx = indices.reshape(nb, -1, k)
    sizes = torch.tensor(x.shape[b : b + k], device=x.device)
    idx = torch.where(idx < 0, idx + sizes, idx)
    bi = torch.arange(nb, device=x.device).view(nb, 1).expand(nb, idx.shape[1])
    out = xf[(bi, *idx.unbind(-1))]
    return out.reshape(*batch, *indices.shape[b:-1], *x.shape[b + k :])


def _msc_scatter_nd(x, indices, updates, reduction):
    """ONNX ScatterND: a copy of x with ``updates`` written (or reduced) at index tuples."""
    k = indices.shape[-1]
    lead = x.shape[:k]
    flat = x.reshape(-1, *x.shape[k:]).clone()
    sizes = torch.tensor(lead, device=x.device)
    idx = indices.reshape(-1, k)
    idx = torch.where(idx < 0, idx + sizes, idx)
    strides = torch.ones(k, dtype=torch.int64, device=x.device)
    for i in range(k - 2, -1, -1):
        strides[i] = strides[i + 1] * lead[i + 1]
    lin = (idx * strides).sum(-1)
    upd = updates.reshape(lin.shape[0], *x.shape[k:])
    if reduction == "none":
        flat[lin] = upd
    else:
        lin = lin.view(-1, *([1] * (flat.dim() - 1))).expand_as(upd)
        how = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}[reduction]
        flat = flat.scatter_reduce(0, lin, upd, how, include_self=True)
    return flat.reshape(x.shape)


def _msc_depth_to_space(x, blocksize, mode):
    """ONNX DepthToSpace (DCR or CRD) on [N, C, H, W]."""
    n, c, h, w = x.shape
    b = blocksize
    if mode == "CRD":
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


def _msc_space_to_depth(x, blocksize):
    """ONNX SpaceToDepth on [N, C, H, W]."""
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def _msc_one_hot(indices, depth, axis, dtype):
    """One-hot along a new ``axis``; negative indices count from depth, others out of range
    give an all-zero row (ONNX OneHot)."""
    i = torch.where(indices < 0, indices + depth, indices).to(torch.int64)
    valid = (i >= 0) & (i < depth)
    y = F.one_hot(torch.where(valid, i, 0), depth) * valid.unsqueeze(-1)
    return torch.movedim(y, -1, axis).to(dtype)


def _msc_shrink(x, bias, lambd):
    """ONNX Shrink."""
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero))


def _msc_pool(x, kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad,
              divisor_override, p, return_indices):  # fmt: skip
    """N-d pooling by explicit windows: max, avg or lp ((sum |x|^p)^(1/p)), any padding
    (ONNX order), dilation and ceil mode; max can also return flat per-channel indices."""
    n = len(kernel)
    stride = list(stride) or list(kernel)
    dilation = list(dilation) or [1] * n
    padding = list(padding) or [0] * (2 * n)
    spatial = list(x.shape[2:])
    outs, ends = [], []
    for i in range(n):
        span = dilation[i] * (kernel[i] - 1) + 1
        num = spatial[i] + padding[i] + padding[n + i] - span
        o = (-(-num // stride[i]) if ceil_mode else num // stride[i]) + 1
        if ceil_mode and (o - 1) * stride[i] >= spatial[i] + padding[i]:
            o -= 1
        outs.append(o)
        need = (o - 1) * stride[i] + span - spatial[i] - padding[i]
        ends.append(max(padding[n + i], need))
    pads = [v for i in reversed(range(n)) for v in (padding[i], ends[i])]
    real = torch.ones([1, 1, *spatial], dtype=x.dtype, device=x.device)
    declared = F.pad(
        real, [v for i in reversed(range(n)) for v in (padding[i], padding[n + i])], value=1.0
    )
    declared = F.pad(
        declared, [v for i in reversed(range(n)) for v in (0, ends[i] - padding[n + i])]
    )
    if kind == "max":
        lowest = torch.finfo(x.dtype).min if x.is_floating_point() else torch.iinfo(x.dtype).min
        xp = F.pad(x, pads, value=float("-inf") if x.is_floating_point() else lowest)
    elif kind == "lp":
        xp = F.pad(x.abs().pow(p), pads)
    else:
        xp = F.pad(x, pads)
    realp = F.pad(real, pads)

    def windows(t):
        for i in range(n):
            span = dilation[i] * (kernel[i] - 1) + 1
            t = t.unfold(2 + i, span, stride[i])[..., :: dilation[i]]
            t = t.narrow(2 + i, 0, outs[i])
        return t

    last = tuple(range(-n, 0))
    if kind == "max":
        win = windows(xp)
        flat = win.reshape(*win.shape[: 2 + n], -1)
        values, arg = flat.max(-1)
        if not return_indices:
            return values
        pos = torch.arange(real.numel(), dtype=torch.float64, device=x.device)
        posw = windows(F.pad(pos.reshape(real.shape), pads, value=-1.0))
        posw = posw.reshape(*posw.shape[: 2 + n], -1).to(torch.int64).expand_as(flat)
        return values, posw.gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    total = windows(xp).sum(last)
    if kind == "lp":
        return total.pow(1.0 / p)
    if divisor_override:
        return total / divisor_override
    count = windows(declared if count_include_pad else realp).sum(last)
    return total / count


def _msc_resize(x, sizes, scales, mode, coord, nearest_mode, cubic_a, antialias):
    """ONNX Resize over the spatial dims (every dim after the first two), one axis at a time:
    nearest (4 rounding modes), linear and cubic (edge-clamped taps, optional antialias), with
    the coordinate transformations half_pixel, pytorch_half_pixel, half_pixel_symmetric,
    align_corners, asymmetric and tf_half_pixel_for_nn."""
    n = x.dim() - 2
    f64 = torch.float64
    for i in range(n):
        axis = 2 + i
        size_in = x.shape[axis]
        if sizes is not None:
            size_out = int(sizes[i])
            scale = size_out / size_in
        else:
            scale = float(scales[i])
            size_out = int(size_in * scale)
        dst = torch.arange(size_out, dtype=f64, device=x.device)
        if coord == "half_pixel":
            src = (dst + 0.5) / scale - 0.5
        elif coord == "pytorch_half_pixel":
            src = (dst + 0.5) / scale - 0.5 if size_out > 1 else dst - 0.5
        elif coord == "half_pixel_symmetric":
            adjustment = size_out / (scale * size_in)
            offset = size_in / 2 * (1 - adjustment)
            src = offset + (dst + 0.5) / scale - 0.5
        elif coord == "align_corners":
            width = scale * size_in
            src = dst * (size_in - 1) / (width - 1) if width != 1 else dst * 0
        elif coord == "asymmetric":
            src = dst / scale
        elif coord == "tf_half_pixel_for_nn":
            src = (dst + 0.5) / scale
        else:
            raise ValueError(f"resize: coordinate transformation {coord!r} is not supported")
        if mode == "nearest":
            lo = torch.floor(src)
            frac = src - lo
            if nearest_mode == "round_prefer_floor":
                idx = lo + (frac > 0.5)
            elif nearest_mode == "round_prefer_ceil":
                idx = lo + (frac >= 0.5)
            elif nearest_mode == "floor":
                idx = lo
            elif nearest_mode == "ceil":
                idx = torch.ceil(src)
            else:
                raise ValueError(f"resize: nearest_mode {nearest_mode!r}")
            idx = idx.clamp(0, size_in - 1).to(torch.int64)
            x = x.index_select(axis, idx)
            continue
        s = min(scale, 1.0) if antialias else 1.0
        radius = (1.0 if mode == "linear" else 2.0) / s
        first = int(torch.floor(torch.tensor(-radius)).item()) + 1
        taps = torch.arange(first, 2 - first, dtype=f64, device=x.device)
        base = torch.ceil(src) - 1
        pos = base.unsqueeze(1) + taps
        d = (s * (pos - src.unsqueeze(1))).abs()
        if mode == "linear":
            w = (1 - d).clamp(0, 1)
        elif mode == "cubic":
            a = cubic_a
            w = torch.where(
                d <= 1,
                ((a + 2) * d - (a + 3)) * d * d + 1,
                torch.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, d * 0),
            )
        else:
            raise ValueError(f"resize: mode {mode!r}")
        if antialias:
            w = w / w.sum(1, keepdim=True)
        cols = pos.clamp(0, size_in - 1).to(torch.int64)
        rows = torch.arange(size_out, device=x.device).unsqueeze(1).expand_as(cols)
        m = torch.zeros(size_out, size_in, dtype=f64, device=x.device)
        m.index_put_((rows, cols), w, accumulate=True)
        dt = x.dtype if x.is_floating_point() else torch.float32
        y = torch.movedim(x.to(dt), axis, -1) @ m.T.to(dt)
        x = torch.movedim(y, -1, axis).to(x.dtype)
    return x


HELPERS = {
    fn.__name__: fn
    for fn in (
        _msc_load_weights,
        _msc_torch_pads,
        _msc_pad,
        _msc_slice,
        _msc_expand,
        _msc_cumsum,
        _msc_reduce_prod,
        _msc_arg_last,
        _msc_gather_nd,
        _msc_scatter_nd,
        _msc_depth_to_space,
        _msc_space_to_depth,
        _msc_one_hot,
        _msc_shrink,
        _msc_pool,
        _msc_resize,
    )
}


def runtime_helpers(*fns: Any) -> None:
    """Make the ``_msc_*`` functions of an emitter family available to generated code (their
    source is pasted into the module that uses them); a name defined twice is an error."""
    for fn in fns:
        if fn.__name__ in HELPERS:
            raise ValueError(f"torch run-time helper {fn.__name__!r} is defined twice")
        HELPERS[fn.__name__] = fn
