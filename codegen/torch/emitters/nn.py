"""Emitters and module rules for linear algebra, normalization, softmax, attention,
embedding, resize and pixel shuffle.

# NOTE: high-level ops stay high-level: ``attention`` is ``F.scaled_dot_product_attention``,
# ``layer_norm`` is ``nn.LayerNorm`` or ``F.layer_norm``. A module rule applies only when the
# node's weights are exactly the module's parameters (checked in modules.py) and its attributes
# fit the module's constructor; otherwise the functional emitter runs.
"""

from __future__ import annotations

import ast
from typing import Any

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import norm_axis
from codegen.torch.registry import emitter, module_rule
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
    if weight is not None and weight.rank == r - a:
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
    *,
    sizes,
    scales,
    mode,
    coordinate_transformation_mode,
    nearest_mode,
    cubic_coeff_a,
    antialias,
) -> ast.expr:
    coord = coordinate_transformation_mode
    fast = _torch_interp_mode(x, sizes, scales, mode, coord, nearest_mode, cubic_coeff_a, antialias)
    if fast is not None:
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
    )


@emitter("pixel_shuffle")
def pixel_shuffle(e: NodeEmit, x: Arg, *, upscale_factor: int) -> ast.expr:
    return call("F.pixel_shuffle", x, upscale_factor)
