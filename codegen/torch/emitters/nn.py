"""Emitters and module rules for linear algebra, normalization, softmax, attention,
embedding, resize and pixel shuffle.

# NOTE: high-level ops stay high-level: ``attention`` is ``F.scaled_dot_product_attention``,
# ``layer_norm`` is ``nn.LayerNorm`` or ``F.layer_norm``. A module rule applies only when the
# node's weights are exactly the module's parameters (checked in modules.py) and its attributes
# fit the module's constructor; otherwise the functional emitter runs.

Convolution and pooling:
# NOTE: canonical padding is ONNX-ordered [begins..., ends...]. torch's conv/pool take one
# symmetric pad per dim, so asymmetric padding becomes an explicit ``F.pad`` (conv), a crop of
# the result (conv_transpose), or the window helper ``_msc_pool`` (pools, which also covers
# what torch's pools refuse: pads over half the kernel, dilated average pools, 4-d+ pools).
"""

from __future__ import annotations

import ast
from typing import Any

import torch
import torch.nn.functional as F

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import fn_nd, norm_axis, symmetric, torch_pads
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import emitter, module_rule
from msc.errors import ConversionError
from msc.ir.dtype import DType


def _dtype_kw(w: Arg) -> dict[str, Any]:
    return {} if w.dtype is DType.FLOAT32 else {"dtype": w.dtype}


# ---------------------------------------------------------------- linear algebra
@emitter("matmul")
def matmul(e: NodeEmit, a: Arg, b: Arg) -> ast.expr:
    return expr("a @ b", a=a, b=b)


@emitter("linear")
def linear(e: NodeEmit, x: Arg, weight: Arg, bias: Arg | None = None) -> ast.expr:
    return call("F.linear", x, weight) if bias is None else call("F.linear", x, weight, bias)


@module_rule("linear")
def linear_module(x: Arg, weight: Arg, bias: Arg | None = None):
    if weight.rank != 2:
        return None
    out_f, in_f = weight.shape
    kw = {"bias": False} if bias is None else {}
    return call("nn.Linear", in_f, out_f, **kw, **_dtype_kw(weight)), [x]


@emitter("gemm")
def gemm(e, a, b, c=None, *, alpha, beta, trans_a, trans_b) -> ast.expr:
    a2 = expr("a.t()", a=a) if trans_a else a
    b2 = expr("b.t()", b=b) if trans_b else b
    if c is not None and beta != 0.0:
        kw = {}
        if beta != 1.0:
            kw["beta"] = beta
        if alpha != 1.0:
            kw["alpha"] = alpha
        return call("torch.addmm", c, a2, b2, **kw)
    prod = expr("a @ b", a=a2, b=b2)
    return prod if alpha == 1.0 else expr("p * s", p=prod, s=alpha)


@emitter("einsum")
def einsum(e: NodeEmit, xs: list[Arg], *, equation: str) -> ast.expr:
    return call("torch.einsum", equation, *xs)


# ---------------------------------------------------------------- normalization
@emitter("batch_norm")
def batch_norm(e, x, weight=None, bias=None, running_mean=None, running_var=None, *, eps):
    kw: dict[str, Any] = {}
    if weight is not None:
        kw["weight"] = weight
    if bias is not None:
        kw["bias"] = bias
    return call("F.batch_norm", x, running_mean, running_var, **kw, eps=eps)


@module_rule(
    "batch_norm",
    roles=("weight", "bias", "running_mean", "running_var"),
    extras=("num_batches_tracked",),
)
def batch_norm_module(x, weight=None, bias=None, running_mean=None, running_var=None, *, eps):
    cls = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}
    if x.rank not in cls or (weight is None) != (bias is None):
        return None
    if running_mean.weight is None or running_var.weight is None:
        return None
    kw: dict[str, Any] = {} if eps == 1e-5 else {"eps": eps}
    if weight is None:
        kw["affine"] = False
    return call(cls[x.rank], running_mean.shape[0], **kw, **_dtype_kw(running_mean)), [x]


def _normalized_shape(x: Arg, axis: int, weight: Arg | None) -> tuple[Any, bool]:
    """(normalized_shape code, whether ``weight`` has exactly that shape)."""
    r = x.rank
    a = norm_axis(axis, r)
    dims = x.shape[a:]
    if (
        weight is not None
        and weight.rank == r - a
        and all(isinstance(w, int) for w in weight.shape)
    ):
        if all(not isinstance(d, int) or d == w for d, w in zip(dims, weight.shape)):
            return tuple(weight.shape), True
    if all(isinstance(d, int) for d in dims):
        return tuple(dims), False
    return expr("x.shape[a:]", x=x, a=a), False


@emitter("layer_norm")
def layer_norm(e, x, weight=None, bias=None, *, axis: int, eps: float) -> ast.expr:
    shape, fits = _normalized_shape(x, axis, weight)
    static = shape if isinstance(shape, tuple) else None
    w_in = weight is not None and fits
    b_in = (
        bias is not None
        and static is not None
        and tuple(bias.shape) == static
        and (weight is None or w_in)
    )
    args: list[Any] = [x, shape]
    kw: dict[str, Any] = {}
    if w_in:
        args.append(weight)
    if b_in:
        if w_in:
            args.append(bias)
        else:
            kw["bias"] = bias
    y = call("F.layer_norm", *args, **kw, eps=eps)
    if weight is not None and not w_in:  # a weight that only broadcasts
        y = expr("y * w", y=y, w=weight)
    if bias is not None and not b_in:
        y = expr("y + b", y=y, b=bias)
    return y


@module_rule("layer_norm")
def layer_norm_module(x, weight=None, bias=None, *, axis: int, eps: float):
    if weight is None or x.rank is None:
        return None
    shape, fits = _normalized_shape(x, axis, weight)
    if not fits or (bias is not None and bias.shape != weight.shape):
        return None
    kw: dict[str, Any] = {} if eps == 1e-5 else {"eps": eps}
    if bias is None:
        kw["bias"] = False
    return call("nn.LayerNorm", shape, **kw, **_dtype_kw(weight)), [x]


@emitter("rms_norm")
def rms_norm(e, x, weight=None, *, axis: int, eps: float) -> ast.expr:
    shape, fits = _normalized_shape(x, axis, weight)
    if weight is None or fits:
        args = [x, shape] + ([weight] if weight is not None else [])
        return call("F.rms_norm", *args, eps=eps)
    return expr("y * w", y=call("F.rms_norm", x, shape, eps=eps), w=weight)


@module_rule("rms_norm", roles=("weight",))
def rms_norm_module(x, weight=None, *, axis: int, eps: float):
    if weight is None:
        return None
    shape, fits = _normalized_shape(x, axis, weight)
    if not fits:
        return None
    return call("nn.RMSNorm", shape, eps=eps, **_dtype_kw(weight)), [x]


@emitter("group_norm")
def group_norm(e, x, weight=None, bias=None, *, num_groups: int, eps: float) -> ast.expr:
    kw: dict[str, Any] = {}
    if weight is not None:
        kw["weight"] = weight
    if bias is not None:
        kw["bias"] = bias
    return call("F.group_norm", x, num_groups, **kw, eps=eps)


@module_rule("group_norm")
def group_norm_module(x, weight=None, bias=None, *, num_groups: int, eps: float):
    if weight is None or bias is None or weight.rank != 1:
        return None
    kw = {} if eps == 1e-5 else {"eps": eps}
    return call("nn.GroupNorm", num_groups, weight.shape[0], **kw, **_dtype_kw(weight)), [x]


@emitter("instance_norm")
def instance_norm(e, x, weight=None, bias=None, *, eps: float) -> ast.expr:
    kw: dict[str, Any] = {}
    if weight is not None:
        kw["weight"] = weight
    if bias is not None:
        kw["bias"] = bias
    return call("F.instance_norm", x, **kw, eps=eps)


@module_rule("instance_norm")
def instance_norm_module(x, weight=None, bias=None, *, eps: float):
    cls = {3: "nn.InstanceNorm1d", 4: "nn.InstanceNorm2d", 5: "nn.InstanceNorm3d"}
    if weight is None or bias is None or weight.rank != 1 or x.rank not in cls:
        return None
    kw = {} if eps == 1e-5 else {"eps": eps}
    return call(cls[x.rank], weight.shape[0], **kw, affine=True, **_dtype_kw(weight)), [x]


@emitter("lrn")
def lrn(e, x, *, size: int, alpha: float, beta: float, bias: float) -> ast.expr:
    # torch averages over size//2 channels before and (size-1)//2 after; ONNX agrees for odd
    # sizes (the usual case).
    return call("F.local_response_norm", x, size, alpha=alpha, beta=beta, k=bias)


# ---------------------------------------------------------------- softmax, attention
@emitter("softmax")
def softmax(e: NodeEmit, x: Arg, *, axis: int) -> ast.expr:
    return call("F.softmax", x, dim=axis)


@emitter("log_softmax")
def log_softmax(e: NodeEmit, x: Arg, *, axis: int) -> ast.expr:
    return call("F.log_softmax", x, dim=axis)


@module_rule("softmax", roles=(), types=("Softmax",))
def softmax_module(x: Arg, *, axis: int, module_type: str):
    return call("nn.Softmax", dim=axis), [x]


@module_rule("log_softmax", roles=(), types=("LogSoftmax",))
def log_softmax_module(x: Arg, *, axis: int, module_type: str):
    return call("nn.LogSoftmax", dim=axis), [x]


@emitter("attention")
def attention(e, query, key, value, mask=None, *, is_causal, scale, enable_gqa) -> ast.expr:
    kw: dict[str, Any] = {}
    if mask is not None and is_causal:
        # SDPA takes one or the other: fold the causal (top-left) triangle into the mask.
        tri = expr(
            "torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()",
            q=query,
            k=key,
        )
        if mask.dtype is DType.BOOL:
            m = expr("m & t", m=mask, t=tri)
        else:
            m = expr("m.masked_fill(~t, float('-inf'))", m=mask, t=tri)
        kw["attn_mask"] = e.let("mask", m)
    elif mask is not None:
        kw["attn_mask"] = mask
    elif is_causal:
        kw["is_causal"] = True
    if scale is not None:
        kw["scale"] = scale
    if enable_gqa:
        kw["enable_gqa"] = True
    return call("F.scaled_dot_product_attention", query, key, value, **kw)


# ---------------------------------------------------------------- embedding
@emitter("embedding")
def embedding(e: NodeEmit, weight: Arg, indices: Arg, *, padding_idx) -> ast.expr:
    if padding_idx is None:
        return call("F.embedding", indices, weight)
    return call("F.embedding", indices, weight, padding_idx=padding_idx)


@module_rule("embedding", roles=("weight",))
def embedding_module(weight: Arg, indices: Arg, *, padding_idx):
    if weight.rank != 2:
        return None
    kw = {} if padding_idx is None else {"padding_idx": padding_idx}
    return call("nn.Embedding", *weight.shape, **kw, **_dtype_kw(weight)), [indices]


# ---------------------------------------------------------------- resize, pixel shuffle
_TORCH_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _out_above_one(x: Arg, sizes, scales) -> bool:
    """Every output spatial size is known to be > 1 (pytorch_half_pixel = half_pixel then)."""
    if sizes is not None:
        return all(s > 1 for s in sizes)
    dims = x.shape[2:]
    return all(isinstance(d, int) and int(d * s) > 1 for d, s in zip(dims, scales))


def _torch_interp_mode(
    x: Arg, sizes, scales, mode, coord, nearest_mode, a, antialias
) -> tuple | None:
    """(mode, align_corners) when F.interpolate computes exactly this resize, else None."""
    n = x.rank - 2
    if coord == "pytorch_half_pixel" and _out_above_one(x, sizes, scales):
        coord = "half_pixel"
    if antialias:  # torch's antialias weights are not ONNX's (a test compares them)
        return None
    if mode == "nearest":
        if coord == "asymmetric" and nearest_mode == "floor":
            return "nearest", None
        if coord == "half_pixel" and nearest_mode == "round_prefer_ceil":
            return "nearest-exact", None
        return None
    if mode == "linear" and n in _TORCH_MODES:
        if coord == "half_pixel":
            return _TORCH_MODES[n], False
        if coord == "align_corners":
            return _TORCH_MODES[n], True
        return None
    if mode == "cubic" and n == 2 and a == -0.75:
        if coord == "half_pixel":
            return "bicubic", False
        if coord == "align_corners":
            return "bicubic", True
    return None


@emitter("resize")
def resize(
    e,
    x,
    scales_in=None,
    sizes_in=None,
    roi_in=None,
    *,
    sizes,
    scales,
    mode,
    coordinate_transformation_mode,
    nearest_mode,
    cubic_coeff_a,
    antialias,
    exclude_outside,
    roi,
    extrapolation_value,
) -> ast.expr:
    coord = coordinate_transformation_mode
    # ONNX-only options go to the helper as keywords (full-rank roi: [starts, ends] of x).
    extra: dict[str, Any] = {}
    if roi_in is not None:
        extra["roi"] = expr("v.reshape(-1).tolist()", v=roi_in)
    elif roi is not None:
        n = len(roi) // 2
        extra["roi"] = [0.0, 0.0, *roi[:n], 1.0, 1.0, *roi[n:]]
    if roi is not None or roi_in is not None:
        extra["extrapolation"] = extrapolation_value
    if exclude_outside and mode != "nearest":
        extra["exclude_outside"] = True
    if scales_in is not None or sizes_in is not None:  # full-rank lists read at run time
        t = scales_in if scales_in is not None else sizes_in
        spatial = expr("v.reshape(-1).tolist()[2:]", v=t)
        return call(
            e.helper("_msc_resize").id,
            x,
            spatial if sizes_in is not None else None,
            spatial if scales_in is not None else None,
            mode,
            coord,
            nearest_mode,
            cubic_coeff_a,
            antialias,
            **extra,
        )
    fast = _torch_interp_mode(x, sizes, scales, mode, coord, nearest_mode, cubic_coeff_a, antialias)
    if fast is not None and not extra:
        tmode, align = fast
        kw: dict[str, Any] = {"size": tuple(sizes)} if sizes is not None else {}
        if scales is not None:
            kw["scale_factor"] = tuple(scales)
        kw["mode"] = tmode
        if align is not None:
            kw["align_corners"] = align
        return call("F.interpolate", x, **kw)
    return call(
        e.helper("_msc_resize").id,
        x,
        None if sizes is None else list(sizes),
        None if scales is None else list(scales),
        mode,
        coord,
        nearest_mode,
        cubic_coeff_a,
        antialias,
        **extra,
    )


@emitter("pixel_shuffle")
def pixel_shuffle(e: NodeEmit, x: Arg, *, upscale_factor: int) -> ast.expr:
    return call("F.pixel_shuffle", x, upscale_factor)


def _n(e: NodeEmit, x: Arg, what: str) -> int:
    """Spatial dims: the input's rank less 2, else the output's (an input of unknown rank,
    from an If whose branches differ, gets it from the weight or the attributes)."""
    rank = x.rank if x.rank is not None else e.output_types[0].rank
    if rank is None or rank < 3:
        raise ConversionError(f"{what}: input must be [N, C, *spatial] with known rank")
    return rank - 2


def _nondefault(n: int, stride=(), padding=(), dilation=(), groups=1) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if stride and any(s != 1 for s in stride):
        kw["stride"] = tuple(stride)
    if padding and any(p != 0 for p in padding):
        kw["padding"] = tuple(padding)
    if dilation and any(d != 1 for d in dilation):
        kw["dilation"] = tuple(dilation)
    if groups != 1:
        kw["groups"] = groups
    return kw


# ---------------------------------------------------------------- convolution
def _channels_first(data_layout: str, kernel_layout: str = "OIHW") -> None:
    """torch's convolutions and pools are channels first: a graph with other layouts is
    brought to them (``msc.ops.layout.to_layout``) before emission."""
    if data_layout != "NCHW" or kernel_layout != "OIHW":
        raise ConversionError(
            f"a {data_layout}/{kernel_layout} node reached the torch emitter (convert the graph"
            " with msc.ops.layout.to_layout(g, 'NCHW') first)"
        )


@emitter("conv")
def conv(
    e,
    x,
    weight,
    bias=None,
    *,
    stride,
    padding,
    dilation,
    groups,
    data_layout="NCHW",
    kernel_layout="OIHW",
) -> ast.expr:
    _channels_first(data_layout, kernel_layout)
    n = _n(e, x, "conv")
    fn = fn_nd("F.conv", n)
    if fn is None:
        raise ConversionError(f"conv: torch has no {n}-d convolution")
    sym = symmetric(padding, n)
    args = [x, weight] + ([bias] if bias is not None else [])
    if sym is None and _is_same(weight, stride, padding, dilation, n):
        return call(fn, *args, padding="same", **_nondefault(n, (), (), dilation, groups))
    if sym is None:
        args[0] = call("F.pad", x, tuple(torch_pads(padding)))
        sym = (0,) * n
    return call(fn, *args, **_nondefault(n, stride, sym, dilation, groups))


def _is_same(weight: Arg, stride, padding, dilation, n: int) -> bool:
    """torch's padding="same" (stride 1): total d*(k-1), the smaller half first."""
    if any(s != 1 for s in stride) or weight.shape is None or not padding:
        return False
    for i in range(n):
        k = weight.shape[2 + i]
        if not isinstance(k, int):
            return False
        total = (dilation[i] if dilation else 1) * (k - 1)
        if padding[i] != total // 2 or padding[n + i] != total - total // 2:
            return False
    return True


@module_rule("conv")
def conv_module(
    x,
    weight,
    bias=None,
    *,
    stride,
    padding,
    dilation,
    groups,
    data_layout="NCHW",
    kernel_layout="OIHW",
):
    if data_layout != "NCHW" or kernel_layout != "OIHW":
        return None
    if x.rank is None or weight.rank is None:
        return None
    n = x.rank - 2
    sym = symmetric(padding, n)
    same = sym is None and weight.rank == n + 2 and _is_same(weight, stride, padding, dilation, n)
    if fn_nd("", n) is None or (sym is None and not same) or weight.rank != n + 2:
        return None
    cout, cin_g, *kernel = weight.shape
    kw = _nondefault(n, stride, sym or (), dilation, groups)
    if same:
        kw["padding"] = "same"
    if bias is None:
        kw["bias"] = False
    if weight.dtype is not DType.FLOAT32:
        kw["dtype"] = weight.dtype
    return call(f"nn.Conv{n}d", cin_g * groups, cout, tuple(kernel), **kw), [x]


@emitter("conv_transpose")
def conv_transpose(
    e, x, weight, bias=None, *, stride, padding, dilation, groups, output_padding
) -> ast.expr:
    n = _n(e, x, "conv_transpose")
    fn = fn_nd("F.conv_transpose", n)
    if fn is None:
        raise ConversionError(f"conv_transpose: torch has no {n}-d transposed convolution")
    pads = padding or (0,) * (2 * n)
    common = tuple(min(pads[i], pads[n + i]) for i in range(n))
    kw = _nondefault(n, stride, common)
    if output_padding and any(output_padding):
        kw["output_padding"] = tuple(output_padding)
    kw.update(_nondefault(n, groups=groups, dilation=dilation))
    args = [x, weight] + ([bias] if bias is not None else [])
    y = call(fn, *args, **kw)
    if all(pads[i] == pads[n + i] for i in range(n)):
        return y
    # torch pads symmetrically: crop what remains of the larger side.
    index: list[ast.expr] = [ast.Slice(), ast.Slice()]
    for i in range(n):
        lo, hi = pads[i] - common[i], pads[n + i] - common[i]
        index.append(
            ast.Slice(
                ast.Constant(lo) if lo else None,
                ast.UnaryOp(ast.USub(), ast.Constant(hi)) if hi else None,
            )
        )
    return ast.Subscript(e.let("full", y), ast.Tuple(index, ast.Load()), ast.Load())


@module_rule("conv_transpose")
def conv_transpose_module(x, weight, bias=None, **attrs):
    if x.rank is None or weight.rank is None:
        return None
    n = x.rank - 2
    sym = symmetric(attrs["padding"], n)
    if fn_nd("", n) is None or sym is None or weight.rank != n + 2:
        return None
    cin, cout_g, *kernel = weight.shape
    kw = _nondefault(n, attrs["stride"], sym)
    if attrs["output_padding"] and any(attrs["output_padding"]):
        kw["output_padding"] = tuple(attrs["output_padding"])
    kw.update(_nondefault(n, groups=attrs["groups"], dilation=attrs["dilation"]))
    if bias is None:
        kw["bias"] = False
    if weight.dtype is not DType.FLOAT32:
        kw["dtype"] = weight.dtype
    groups = attrs["groups"]
    return call(f"nn.ConvTranspose{n}d", cin, cout_g * groups, tuple(kernel), **kw), [x]


# ---------------------------------------------------------------- pooling
def _pool_helper(e, x, kind, kernel, stride, padding, dilation, ceil_mode, cip, div, p, ri):
    return call(
        e.helper("_msc_pool").id,
        x,
        kind,
        list(kernel),
        list(stride),
        list(padding),
        list(dilation),
        ceil_mode,
        cip,
        div,
        p,
        ri,
    )


def _pool_kw(stride, padding, dilation) -> dict[str, Any]:
    """Pool keywords: a pool's stride defaults to its kernel, so a given stride is kept."""
    kw: dict[str, Any] = {"stride": tuple(stride)} if stride else {}
    kw.update(_nondefault(0, (), padding, dilation))
    return kw


def _torch_pool_pad(padding, kernel, dilation, n) -> tuple[int, ...] | None:
    sym = symmetric(padding, n)
    if sym is None:
        return None
    dil = dilation or (1,) * n
    for p, k, d in zip(sym, kernel, dil):
        if 2 * p > d * (k - 1) + 1:  # torch: pad at most half the effective kernel
            return None
    return sym


@emitter("max_pool")
def max_pool(
    e, x, *, kernel, stride, padding, dilation, ceil_mode, return_indices, data_layout="NCHW"
):
    _channels_first(data_layout)
    n = _n(e, x, "max_pool")
    sym = _torch_pool_pad(padding, kernel, dilation, n)
    if fn_nd("", n) is None or sym is None:
        return _pool_helper(
            e, x, "max", kernel, stride, padding, dilation, ceil_mode, True, None, 2.0,
            return_indices,
        )  # fmt: skip
    kw = _pool_kw(stride, sym, dilation)
    if ceil_mode:
        kw["ceil_mode"] = True
    if return_indices:
        kw["return_indices"] = True
    return call(f"F.max_pool{n}d", x, tuple(kernel), **kw)


@emitter("avg_pool")
def avg_pool(
    e, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
    data_layout="NCHW",
):  # fmt: skip
    _channels_first(data_layout)
    n = _n(e, x, "avg_pool")
    sym = _torch_pool_pad(padding, kernel, (), n)
    if fn_nd("", n) is None or sym is None or (n == 1 and divisor_override):
        return _pool_helper(
            e, x, "avg", kernel, stride, padding, (), ceil_mode, count_include_pad,
            divisor_override, 2.0, False,
        )  # fmt: skip
    kw = _pool_kw(stride, sym, ())
    if ceil_mode:
        kw["ceil_mode"] = True
    if not count_include_pad:
        kw["count_include_pad"] = False
    if divisor_override:
        kw["divisor_override"] = divisor_override
    return call(f"F.avg_pool{n}d", x, tuple(kernel), **kw)


@emitter("lp_pool")
def lp_pool(e, x, *, kernel, stride, padding, dilation, ceil_mode, p):
    n = _n(e, x, "lp_pool")
    plain = not any(padding) and not any(d != 1 for d in dilation) and not ceil_mode
    if fn_nd("", n) is None or not plain or p != 2.0:
        return _pool_helper(
            e, x, "lp", kernel, stride, padding, dilation, ceil_mode, True, None, p, False
        )
    kw = {"stride": tuple(stride)} if stride else {}
    return call(f"F.lp_pool{n}d", x, p, tuple(kernel), **kw)


def _adaptive_size(output_size) -> tuple:
    return tuple(None if o is None or o < 0 else o for o in output_size)


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(e, x, *, output_size) -> ast.expr:
    n = _n(e, x, "adaptive_avg_pool")
    if fn_nd("", n) is None:
        raise ConversionError(f"adaptive_avg_pool: torch has no {n}-d adaptive pooling")
    return call(f"F.adaptive_avg_pool{n}d", x, _adaptive_size(output_size))


@emitter("adaptive_max_pool")
def adaptive_max_pool(e, x, *, output_size, return_indices) -> ast.expr:
    n = _n(e, x, "adaptive_max_pool")
    if fn_nd("", n) is None:
        raise ConversionError(f"adaptive_max_pool: torch has no {n}-d adaptive pooling")
    kw = {"return_indices": True} if return_indices else {}
    return call(f"F.adaptive_max_pool{n}d", x, _adaptive_size(output_size), **kw)


# Where the source ran a pool as a module (``self.maxpool = nn.MaxPool2d(3, 2, 1)``, an item
# of an nn.Sequential), the generated code does too, when torch's module computes this pool
# (symmetric padding within half the kernel; else the functional form and its helper run).
def _pool_type(module_type: str, kind: str, n: int) -> bool:
    return module_type == f"{kind}{n}d" and fn_nd("", n) is not None


def _size(t) -> Any:
    """A per-dim size as the source usually writes it: one int when every dim has it."""
    t = tuple(t)
    return t[0] if t and all(v == t[0] for v in t) else t


def _pool_module_kw(kernel, stride, padding, dilation=()) -> dict[str, Any]:
    """nn.*Pool*d keywords beyond the kernel: the stride unless it is the kernel (the
    module's default), padding and dilation unless 0 and 1."""
    kw: dict[str, Any] = {}
    if stride and tuple(stride) != tuple(kernel):
        kw["stride"] = _size(stride)
    if any(padding):
        kw["padding"] = _size(padding)
    if dilation and any(d != 1 for d in dilation):
        kw["dilation"] = _size(dilation)
    return kw


_MAX_POOLS = tuple(f"MaxPool{n}d" for n in (1, 2, 3))
_AVG_POOLS = tuple(f"AvgPool{n}d" for n in (1, 2, 3))


@module_rule("max_pool", roles=(), types=_MAX_POOLS)
def max_pool_module(
    x, *, kernel, stride, padding, dilation, ceil_mode, return_indices, module_type,
    data_layout="NCHW",
):  # fmt: skip
    n = len(kernel)
    sym = _torch_pool_pad(padding, kernel, dilation, n)
    if data_layout != "NCHW" or not _pool_type(module_type, "MaxPool", n) or sym is None:
        return None
    kw = _pool_module_kw(kernel, stride, sym, dilation)
    if ceil_mode:
        kw["ceil_mode"] = True
    if return_indices:
        kw["return_indices"] = True
    return call(f"nn.{module_type}", _size(kernel), **kw), [x]


@module_rule("avg_pool", roles=(), types=_AVG_POOLS)
def avg_pool_module(
    x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
    module_type, data_layout="NCHW",
):  # fmt: skip
    n = len(kernel)
    sym = _torch_pool_pad(padding, kernel, (), n)
    if data_layout != "NCHW" or not _pool_type(module_type, "AvgPool", n) or sym is None:
        return None
    if n == 1 and divisor_override:
        return None
    kw = _pool_module_kw(kernel, stride, sym)
    if ceil_mode:
        kw["ceil_mode"] = True
    if not count_include_pad:
        kw["count_include_pad"] = False
    if divisor_override:
        kw["divisor_override"] = divisor_override
    return call(f"nn.{module_type}", _size(kernel), **kw), [x]


@module_rule("adaptive_avg_pool", roles=(), types=tuple(f"AdaptiveAvgPool{n}d" for n in (1, 2, 3)))
def adaptive_avg_pool_module(x, *, output_size, module_type):
    if not _pool_type(module_type, "AdaptiveAvgPool", len(output_size)):
        return None
    return call(f"nn.{module_type}", _size(_adaptive_size(output_size))), [x]


@module_rule("adaptive_max_pool", roles=(), types=tuple(f"AdaptiveMaxPool{n}d" for n in (1, 2, 3)))
def adaptive_max_pool_module(x, *, output_size, return_indices, module_type):
    if not _pool_type(module_type, "AdaptiveMaxPool", len(output_size)):
        return None
    kw = {"return_indices": True} if return_indices else {}
    return call(f"nn.{module_type}", _size(_adaptive_size(output_size)), **kw), [x]


# ---------------------------------------------------------------- run-time helpers
# Pasted into the generated modules that use them: only torch, F and other _msc_* helpers.
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


def _msc_resize(
    x,
    sizes,
    scales,
    mode,
    coord,
    nearest_mode,
    cubic_a,
    antialias,
    roi=None,
    extrapolation=0.0,
    exclude_outside=False,
):
    """ONNX Resize over the spatial dims (every dim after the first two), one axis at a time:
    nearest (4 rounding modes), linear and cubic (edge-clamped taps, optional antialias, or
    taps off the input left out with exclude_outside), with the coordinate transformations
    half_pixel, pytorch_half_pixel, half_pixel_symmetric, align_corners, asymmetric,
    tf_half_pixel_for_nn and tf_crop_and_resize (roi: [starts, ends] of every dim of x;
    samples outside the input are ``extrapolation``)."""
    n = x.dim() - 2
    f64 = torch.float64
    for i in range(n):
        axis = 2 + i
        size_in = x.shape[axis]
        box = 1.0 if roi is None else float(roi[n + 2 + axis]) - float(roi[axis])
        if sizes is not None:
            size_out = int(sizes[i])
            scale = size_out / size_in
        else:
            scale = float(scales[i])
            size_out = int(size_in * box * scale)
        dst = torch.arange(size_out, dtype=f64, device=x.device)
        outside = None
        if coord == "tf_crop_and_resize":
            start, width = float(roi[axis]), scale * size_in
            step = box * (size_in - 1) / (width - 1) if width != 1 else 0.0
            first = start * (size_in - 1) + (box * (size_in - 1) / 2 if width == 1 else 0.0)
            src = first + dst * step
            outside = (src < 0) | (src > size_in - 1)
        elif coord == "half_pixel":
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
            x = _msc_extrapolate(x.index_select(axis, idx), axis, outside, extrapolation)
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
        if exclude_outside:
            w = torch.where((pos < 0) | (pos > size_in - 1), w * 0, w)
        if antialias or exclude_outside:
            w = w / w.sum(1, keepdim=True)
        cols = pos.clamp(0, size_in - 1).to(torch.int64)
        rows = torch.arange(size_out, device=x.device).unsqueeze(1).expand_as(cols)
        m = torch.zeros(size_out, size_in, dtype=f64, device=x.device)
        m.index_put_((rows, cols), w, accumulate=True)
        dt = x.dtype if x.is_floating_point() else torch.float32
        y = torch.movedim(x.to(dt), axis, -1) @ m.T.to(dt)
        x = _msc_extrapolate(torch.movedim(y, -1, axis).to(x.dtype), axis, outside, extrapolation)
    return x


def _msc_extrapolate(x, axis, outside, value):
    """x with ``value`` at the positions along ``axis`` that ``outside`` marks."""
    if outside is None or not bool(outside.any()):
        return x
    shape = [1] * x.dim()
    shape[axis] = -1
    return torch.where(outside.reshape(shape), torch.full_like(x, value), x)


runtime_helpers(_msc_pool, _msc_resize, _msc_extrapolate)
