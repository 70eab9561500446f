"""Converters for neural-network ATen ops: matmul/linear, convolution, pooling, normalization,
softmax, attention, embedding, resize, padding.

# NOTE: high-level ops stay high-level: aten.conv2d becomes one ``conv`` with its strides,
# aten.layer_norm one ``layer_norm``, sdpa one ``attention``. The decomposed forms torch.export
# produces after run_decompositions (aten.convolution, native_layer_norm, _native_batch_norm_*)
# map onto the same canonical ops. Torch's symmetric per-dim padding becomes the canonical
# [begin..., end...] layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import Ctx, Unsupported, converter, dims_tuple
from msc.ir import DType, Value

# ----------------------------------------------------------------------- linear algebra


@converter("aten.linear.default")
def linear(ctx: Ctx, input: Value, weight: Value, bias: Value | None = None) -> Value:
    return ctx.op("linear", input, weight, bias)


@converter("aten.addmm.default")
def addmm(
    ctx: Ctx, self: Value, mat1: Value, mat2: Value, *, beta: Any = 1, alpha: Any = 1
) -> Value:
    return ctx.op("gemm", mat1, mat2, self, alpha=float(alpha), beta=float(beta))


@converter("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def matmul(ctx: Ctx, self: Value, **kw: Value) -> Value:
    (other,) = kw.values()  # other (matmul) or mat2 (mm, bmm)
    return ctx.op("matmul", self, other)


@converter("aten.baddbmm.default")
def baddbmm(
    ctx: Ctx, self: Value, batch1: Value, batch2: Value, *, beta: Any = 1, alpha: Any = 1
) -> Value:
    return _scaled_sum(ctx, self, ctx.op("matmul", batch1, batch2), beta, alpha)


def _scaled_sum(ctx: Ctx, self: Value, p: Value, beta: Any, alpha: Any) -> Value:
    """beta * self + alpha * p (self left out when beta is 0, as torch does)."""
    if alpha != 1:
        p = ctx.op("mul", p, ctx.const(alpha, p.dtype))
    if beta == 0:
        return p
    s = self if beta == 1 else ctx.op("mul", self, ctx.const(beta, self.dtype))
    return ctx.op("add", s, p)


@converter("aten.addbmm.default")
def addbmm(
    ctx: Ctx, self: Value, batch1: Value, batch2: Value, *, beta: Any = 1, alpha: Any = 1
) -> Value:
    # beta * self + alpha * the sum over the batch of batch1 @ batch2.
    p = ctx.op("reduce_sum", ctx.op("matmul", batch1, batch2), axes=[0], keepdims=False)
    return _scaled_sum(ctx, self, p, beta, alpha)


def _grouped_mm(ctx: Ctx, a: Value, w: Value, offs: Value | None, bias: Value | None) -> Value:
    # Rows of a [S, K] are sorted by group; offs [G] are the groups' cumulative row ends;
    # out[r] = a[r] @ w[group(r)] (+ bias[group(r)]), zero for rows past the last end. Computed
    # densely (every group's product, then each row picks its own): exact, G times the
    # arithmetic of the grouped kernel.
    if offs is None or ctx.rank(a) != 2 or ctx.rank(w) != 3:
        raise Unsupported("grouped matmul other than 2-d rows by 3-d group weights with offsets")
    i64 = DType.INT64
    s = ctx.op("gather", ctx.op("shape", a), ctx.const([0], i64), axis=0)
    rows = ctx.op("range", ctx.const(0, i64), ctx.op("reshape", s, shape=[]), ctx.const(1, i64))
    ends = ctx.cast(offs, i64)
    past = ctx.op("le", ctx.op("unsqueeze", ends, axes=[0]), ctx.op("unsqueeze", rows, axes=[1]))
    group = ctx.op("reduce_sum", ctx.cast(past, i64), axes=[1], keepdims=False)  # [S]
    last = ctx.op("sub", ctx.op("gather", ctx.op("shape", w), ctx.const([0], i64), axis=0),
                  ctx.const(1, i64))  # fmt: skip
    valid = ctx.op("lt", group, ctx.op("add", last, ctx.const(1, i64)))
    group = ctx.op("minimum", group, ctx.op("reshape", last, shape=[]))
    every = ctx.op("matmul", ctx.op("unsqueeze", a, axes=[0]), w)  # [G, S, N]
    every = ctx.op("transpose", every, perm=[1, 0, 2])  # [S, G, N]
    n = ctx.op("gather", ctx.op("shape", w), ctx.const([2], i64), axis=0)
    idx_shape = ctx.op("concat", s, ctx.const([1], i64), n, axis=0)
    idx = ctx.op("expand", ctx.op("reshape", group, shape=[-1, 1, 1]), idx_shape)
    out = ctx.op("squeeze", ctx.op("gather_elements", every, idx, axis=1), axes=[1])  # [S, N]
    if bias is not None:
        out = ctx.op("add", out, ctx.op("gather", bias, group, axis=0))
    zero = ctx.const(0.0, out.dtype)
    return ctx.op("where", ctx.op("unsqueeze", valid, axes=[1]), out, zero)


@converter("transformers.grouped_mm_fallback.default")
def grouped_mm_fallback(ctx: Ctx, input: Value, weight: Value, offs: Value) -> Value:
    """transformers' mixture-of-experts grouped matmul (a torch.library op)."""
    return _grouped_mm(ctx, input, weight, offs, None)


@converter("aten._grouped_mm.default")
def grouped_mm(
    ctx: Ctx, self: Value, mat2: Value, offs: Value | None = None, bias: Value | None = None,
    out_dtype: Any = None,
) -> Value:  # fmt: skip
    out = _grouped_mm(ctx, self, mat2, offs, bias)
    return out if out_dtype is None else ctx.cast(out, to_msc(out_dtype))


@converter("aten.einsum.default")
def einsum(ctx: Ctx, equation: str, tensors: list[Value], *, path: Any = None) -> Value:
    return ctx.op("einsum", *ctx.promote(*tensors), equation=equation)


@converter("aten.dot.default", "aten.vdot.default", "aten.mv.default")
def dot(ctx: Ctx, self: Value, **kw: Value) -> Value:
    (other,) = kw.values()
    return ctx.op("matmul", self, other)


@converter("aten.outer.default")
def outer(ctx: Ctx, self: Value, vec2: Value) -> Value:
    a = ctx.op("unsqueeze", self, axes=[1])
    return ctx.op("mul", *ctx.promote(a, vec2))


# ----------------------------------------------------------------------- convolution
def _conv(
    ctx: Ctx,
    input: Value,
    weight: Value,
    bias: Value | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> Value:
    n = ctx.rank(weight) - 2
    unbatched = ctx.rank(input) == n + 1
    if unbatched:
        input = ctx.op("unsqueeze", input, axes=[0])
    stride, dilation = dims_tuple(stride, n), dims_tuple(dilation, n)
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * n)
        elif padding == "same":
            ks = ctx.shape(weight)[2:]
            total = [d * (k - 1) for d, k in zip(dilation, ks)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            raise Unsupported(f"padding={padding!r}")
    else:
        p = dims_tuple(padding, n)
        pads = list(p) + list(p)
    if transposed:
        y = ctx.op(
            "conv_transpose",
            input,
            weight,
            bias,
            stride=stride,
            padding=pads,
            dilation=dilation,
            groups=groups,
            output_padding=dims_tuple(output_padding, n),
        )
    else:
        y = ctx.op(
            "conv",
            input,
            weight,
            bias,
            stride=stride,
            padding=pads,
            dilation=dilation,
            groups=groups,
        )
    return ctx.op("squeeze", y, axes=[0]) if unbatched else y


@converter("aten.convolution.default", "aten._convolution.default")
def convolution(
    ctx: Ctx,
    input: Value,
    weight: Value,
    bias: Value | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
    **_: Any,
) -> Value:
    return _conv(
        ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
    )


@converter(
    "aten.conv1d.default",
    "aten.conv2d.default",
    "aten.conv3d.default",
    "aten.conv1d.padding",
    "aten.conv2d.padding",
    "aten.conv3d.padding",
)
def conv_nd(
    ctx: Ctx,
    input: Value,
    weight: Value,
    bias: Value | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Value:
    return _conv(ctx, input, weight, bias, stride, padding, dilation, False, 0, groups)


@converter(
    "aten.conv_transpose1d.default",
    "aten.conv_transpose2d.input",
    "aten.conv_transpose3d.input",
)
def conv_transpose_nd(
    ctx: Ctx,
    input: Value,
    weight: Value,
    bias: Value | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Value:
    return _conv(ctx, input, weight, bias, stride, padding, dilation, True, output_padding, groups)


# ----------------------------------------------------------------------- pooling
def _pool_args(ctx: Ctx, x: Value, kernel_size: Any, stride: Any, padding: Any, n: int):
    k = dims_tuple(kernel_size, n)
    s = dims_tuple(stride, n) if stride not in (None, [], ()) else k
    p = dims_tuple(padding, n)
    return k, s, list(p) + list(p)


def _batched(ctx: Ctx, x: Value, n: int) -> tuple[Value, bool]:
    if ctx.rank(x) == n + 1:
        return ctx.op("unsqueeze", x, axes=[0]), True
    return x, False


def _unbatch(ctx: Ctx, ys: Any, unbatched: bool) -> Any:
    if not unbatched:
        return ys
    if isinstance(ys, Value):
        return ctx.op("squeeze", ys, axes=[0])
    return tuple(ctx.op("squeeze", y, axes=[0]) for y in ys)


def _max_pool(n: int, with_indices: bool):
    def convert(
        ctx: Ctx,
        self: Value,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> Any:
        x, unb = _batched(ctx, self, n)
        k, s, p = _pool_args(ctx, x, kernel_size, stride, padding, n)
        outs = ctx.node(
            "max_pool",
            [x],
            dict(
                kernel=k,
                stride=s,
                padding=p,
                dilation=dims_tuple(dilation, n),
                ceil_mode=ceil_mode,
                return_indices=with_indices,
            ),
        )
        return _unbatch(ctx, tuple(outs) if with_indices else outs[0], unb)

    return convert


for _n in (1, 2, 3):
    converter(f"aten.max_pool{_n}d.default")(_max_pool(_n, False))
    converter(f"aten.max_pool{_n}d_with_indices.default")(_max_pool(_n, True))


def _avg_pool(n: int):
    def convert(
        ctx: Ctx,
        self: Value,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Value:
        x, unb = _batched(ctx, self, n)
        k, s, p = _pool_args(ctx, x, kernel_size, stride, padding, n)
        y = ctx.op(
            "avg_pool",
            x,
            kernel=k,
            stride=s,
            padding=p,
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
            divisor_override=divisor_override,
        )
        return _unbatch(ctx, y, unb)

    return convert


for _n in (1, 2, 3):
    converter(f"aten.avg_pool{_n}d.default")(_avg_pool(_n))


def _adaptive(n: int, op: str):
    def convert(ctx: Ctx, self: Value, output_size: Any) -> Any:
        x, unb = _batched(ctx, self, n)
        size = [-1 if o is None else o for o in dims_tuple(output_size, n)]
        if op == "adaptive_max_pool":
            outs = ctx.node(op, [x], dict(output_size=size, return_indices=True))
            return _unbatch(ctx, tuple(outs), unb)
        return _unbatch(ctx, ctx.op(op, x, output_size=size), unb)

    return convert


for _n in (1, 2, 3):
    _keys = [f"aten.adaptive_avg_pool{_n}d.default"]
    if _n > 1:
        _keys.append(f"aten._adaptive_avg_pool{_n}d.default")
    converter(*_keys)(_adaptive(_n, "adaptive_avg_pool"))
    converter(f"aten.adaptive_max_pool{_n}d.default")(_adaptive(_n, "adaptive_max_pool"))


# ----------------------------------------------------------------------- normalization
def _bn_stats(ctx: Ctx, x: Value, eps: float, weight, bias) -> Value:
    """Batch norm with the batch's own statistics (training-mode math, no state update)."""
    axes = [0] + list(range(2, ctx.rank(x)))
    mean = ctx.op("reduce_mean", x, axes=axes, keepdims=True)
    var = ctx.op("var", x, axes=axes, keepdims=True, correction=0.0)
    y = ctx.op("div", ctx.op("sub", x, mean),
               ctx.op("sqrt", ctx.op("add", var, ctx.const(eps, x.dtype))))  # fmt: skip
    shape = [-1] + [1] * (ctx.rank(x) - 2)
    if weight is not None:
        y = ctx.op("mul", y, ctx.op("reshape", weight, shape=shape))
    if bias is not None:
        y = ctx.op("add", y, ctx.op("reshape", bias, shape=shape))
    return y


@converter("aten.batch_norm.default")
def batch_norm(
    ctx: Ctx,
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Value:
    if training or running_mean is None or running_var is None:
        return _bn_stats(ctx, input, eps, weight, bias)
    return ctx.op("batch_norm", input, weight, bias, running_mean, running_var, eps=float(eps))


def _stat_dtype(ctx: Ctx, i: int, x: Value) -> DType:
    """The dtype torch gives output ``i`` of the node (a norm's statistics may be wider)."""
    meta = ctx.meta
    if isinstance(meta, (tuple, list)) and len(meta) > i and isinstance(meta[i], torch.Tensor):
        return to_msc(meta[i].dtype)
    return x.dtype


def _mean_rstd(ctx: Ctx, x: Value, axes: list[int], eps: float, shape: Any = None) -> tuple:
    """(mean, 1 / sqrt(biased var + eps)) of ``x`` over ``axes`` (kept), reshaped to
    ``shape`` when given, in the dtypes torch gives a native norm's outputs 1 and 2."""
    mean = ctx.op("reduce_mean", x, axes=axes, keepdims=True)
    var = ctx.op("var", x, axes=axes, keepdims=True, correction=0.0)
    rstd = ctx.op("rsqrt", ctx.op("add", var, ctx.const(eps, x.dtype)))
    out = []
    for i, v in ((1, mean), (2, rstd)):
        if shape is not None:
            v = ctx.op("reshape", v, shape=shape)
        dt = _stat_dtype(ctx, i, x)
        out.append(v if dt is v.dtype else ctx.cast(v, dt))
    return tuple(out)


def _empty_stats(ctx: Ctx, x: Value) -> tuple:
    """The empty statistics eval-mode native batch norm returns."""
    return tuple(ctx.op("full", shape=[0], value=0.0, dtype=_stat_dtype(ctx, i, x)) for i in (1, 2))


@converter("aten._native_batch_norm_legit_no_training.default")
def native_bn_no_training(
    ctx: Ctx, input, weight, bias, running_mean, running_var, momentum, eps
) -> tuple:
    y = ctx.op("batch_norm", input, weight, bias, running_mean, running_var, eps=float(eps))
    return (y, *_empty_stats(ctx, input))


def _bn_with_stats(ctx: Ctx, x: Value, eps: float, weight, bias) -> tuple:
    axes = [0] + list(range(2, ctx.rank(x)))
    return (_bn_stats(ctx, x, eps, weight, bias), *_mean_rstd(ctx, x, axes, eps, shape=[-1]))


@converter("aten._native_batch_norm_legit.default", "aten.native_batch_norm.default")
def native_bn(ctx: Ctx, input, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        return native_bn_no_training(
            ctx, input, weight, bias, running_mean, running_var, momentum, eps
        )
    return _bn_with_stats(ctx, input, eps, weight, bias)


@converter("aten._native_batch_norm_legit.no_stats")
def native_bn_no_stats(ctx: Ctx, input, weight, bias, training, momentum, eps) -> tuple:
    return _bn_with_stats(ctx, input, eps, weight, bias)


@converter("aten.layer_norm.default")
def layer_norm(
    ctx: Ctx,
    input: Value,
    normalized_shape: Any,
    weight: Value | None = None,
    bias: Value | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Value:
    n = len(normalized_shape)
    return ctx.op("layer_norm", input, weight, bias, axis=-n, eps=float(eps))


@converter("aten.native_layer_norm.default")
def native_layer_norm(ctx: Ctx, input, normalized_shape, weight, bias, eps) -> tuple:
    r, n = ctx.rank(input), len(normalized_shape)
    y = layer_norm(ctx, input, normalized_shape, weight, bias, eps)
    return (y, *_mean_rstd(ctx, input, list(range(r - n, r)), float(eps)))


@converter("aten.rms_norm.default")
def rms_norm(
    ctx: Ctx,
    input: Value,
    normalized_shape: Any,
    weight: Value | None = None,
    eps: float | None = None,
) -> Value:
    if eps is None:
        eps = torch.finfo(_torch_dtype(input.dtype)).eps
    return ctx.op("rms_norm", input, weight, axis=-len(normalized_shape), eps=float(eps))


@converter("aten._fused_rms_norm.default")
def fused_rms_norm(ctx: Ctx, input, normalized_shape, weight, eps) -> tuple:
    return rms_norm(ctx, input, normalized_shape, weight, eps), None


def _torch_dtype(dt: DType) -> torch.dtype:
    from msc.frontend.torch.dtypes import to_torch

    return to_torch(dt)


@converter("aten.group_norm.default")
def group_norm(
    ctx: Ctx,
    input: Value,
    num_groups: int,
    weight: Value | None = None,
    bias: Value | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Value:
    return ctx.op("group_norm", input, weight, bias, num_groups=num_groups, eps=float(eps))


@converter("aten.native_group_norm.default")
def native_group_norm(ctx: Ctx, input, weight, bias, N, C, HxW, group, eps) -> tuple:
    y = group_norm(ctx, input, group, weight, bias, eps)
    dims = list(input.type.shape or [None])
    if all(isinstance(d, int) for d in dims[1:]):
        rest = 1
        for d in dims[1:]:
            rest *= d
        grouped = ctx.op("reshape", input, shape=[-1, group, rest // group])
    elif isinstance(dims[0], int):
        grouped = ctx.op("reshape", input, shape=[dims[0], group, -1])
    else:
        raise Unsupported("group norm statistics with dynamic batch and spatial dims")
    return (y, *_mean_rstd(ctx, grouped, [2], float(eps), shape=[-1, group]))


@converter("aten.instance_norm.default")
def instance_norm(
    ctx: Ctx,
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Value:
    if not use_input_stats and running_mean is not None and running_var is not None:
        return ctx.op("batch_norm", input, weight, bias, running_mean, running_var, eps=eps)
    return ctx.op("instance_norm", input, weight, bias, eps=float(eps))


@converter("aten.local_response_norm.default")
def lrn(ctx: Ctx, input: Value, size: int, alpha: float, beta: float, k: float) -> Value:
    return ctx.op("lrn", input, size=size, alpha=alpha, beta=beta, bias=k)


# ----------------------------------------------------------------------- softmax, attention
def _softmax(op: str):
    def convert(ctx: Ctx, self: Value, dim: int, *args: Any, dtype: Any = None, **_: Any):
        x = self
        if dtype is not None:
            x = ctx.cast(x, to_msc(dtype))
        elif args and args[0] is True and x.dtype in (DType.FLOAT16, DType.BFLOAT16):
            x = ctx.cast(x, DType.FLOAT32)  # _softmax(half_to_float=True)
        return ctx.op(op, x, axis=dim)

    return convert


converter("aten.softmax.int", "aten._softmax.default")(_softmax("softmax"))
converter("aten.log_softmax.int", "aten._log_softmax.default")(_softmax("log_softmax"))


@converter("aten._safe_softmax.default")
def safe_softmax(ctx: Ctx, self: Value, dim: int, dtype: Any = None) -> Value:
    """softmax, but rows that are entirely -inf give 0 instead of NaN."""
    x = self if dtype is None else ctx.cast(self, to_msc(dtype))
    y = ctx.op("softmax", x, axis=dim)
    dead = ctx.op("eq", x, ctx.const(float("-inf"), x.dtype))
    dead = ctx.op("reduce_all", dead, axes=[dim], keepdims=True)
    return ctx.op("where", dead, ctx.const(0.0, y.dtype), y)


@converter("aten.scaled_dot_product_attention.default")
def sdpa(
    ctx: Ctx,
    query: Value,
    key: Value,
    value: Value,
    attn_mask: Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Value:
    if dropout_p:
        raise Unsupported("attention dropout (random); export in eval mode")
    if attn_mask is not None and attn_mask.dtype is not DType.BOOL:
        attn_mask = ctx.cast(attn_mask, query.dtype)
    return ctx.op(
        "attention",
        query,
        key,
        value,
        attn_mask,
        is_causal=is_causal,
        scale=None if scale is None else float(scale),
        enable_gqa=enable_gqa,
    )


# ----------------------------------------------------------------------- embedding
@converter("aten.embedding.default")
def embedding(
    ctx: Ctx,
    weight: Value,
    indices: Value,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Value:
    if indices.dtype not in (DType.INT32, DType.INT64):
        indices = ctx.cast(indices, DType.INT64)
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return ctx.op("embedding", weight, indices, padding_idx=pad)


# ----------------------------------------------------------------------- resize
def _resize(ctx: Ctx, x: Value, n: int, output_size, scale_factors, mode: str, align) -> Value:
    """``mode``: nearest | nearest-exact | linear | cubic."""
    attrs: dict[str, Any] = {"mode": "nearest" if mode == "nearest-exact" else mode}
    if output_size is not None:
        attrs["sizes"] = ctx.ints(output_size, "resize sizes")
    elif scale_factors is not None:
        attrs["scales"] = [float(s) for s in dims_tuple_f(scale_factors, n)]
    else:
        raise Unsupported("resize needs output_size or scale_factors")
    if mode == "nearest":  # src = floor(dst / scale)
        attrs["coordinate_transformation_mode"] = "asymmetric"
        attrs["nearest_mode"] = "floor"
    elif mode == "nearest-exact":  # src = floor((dst + 0.5) / scale)
        attrs["coordinate_transformation_mode"] = "half_pixel"
        attrs["nearest_mode"] = "round_prefer_ceil"
    else:
        attrs["coordinate_transformation_mode"] = "align_corners" if align else "pytorch_half_pixel"
    return ctx.op("resize", x, **attrs)


def dims_tuple_f(v: Any, n: int) -> tuple:
    if isinstance(v, int | float):
        return (v,) * n
    return tuple(v)


def _upsample(n: int, mode: str, has_align: bool):
    def vec(ctx: Ctx, input: Value, output_size: Any, **kw: Any) -> Value:
        align = kw.get("align_corners", False) if has_align else False
        return _resize(ctx, input, n, output_size, kw.get("scale_factors"), mode, align)

    return vec


for _n, _mode, _names in (
    (1, "nearest", ("upsample_nearest1d",)),
    (2, "nearest", ("upsample_nearest2d",)),
    (3, "nearest", ("upsample_nearest3d",)),
    (1, "nearest-exact", ("_upsample_nearest_exact1d",)),
    (2, "nearest-exact", ("_upsample_nearest_exact2d",)),
    (3, "nearest-exact", ("_upsample_nearest_exact3d",)),
    (1, "linear", ("upsample_linear1d",)),
    (2, "linear", ("upsample_bilinear2d",)),
    (3, "linear", ("upsample_trilinear3d",)),
    (2, "cubic", ("upsample_bicubic2d",)),
):
    for _name in _names:
        converter(f"aten.{_name}.vec")(_upsample(_n, _mode, not _mode.startswith("nearest")))


def _upsample_default(n: int, mode: str, has_align: bool):
    def convert(ctx: Ctx, self: Value, output_size: Any, *rest: Any, **kw: Any) -> Value:
        align = kw.get("align_corners", False) if has_align else False
        return _resize(ctx, self, n, output_size, None, mode, align)

    return convert


converter("aten.upsample_nearest2d.default")(_upsample_default(2, "nearest", False))
converter("aten.upsample_bilinear2d.default")(_upsample_default(2, "linear", True))


def _aa_filter(mode: str, d: np.ndarray) -> np.ndarray:
    d = np.abs(d)
    if mode == "linear":
        return np.where(d < 1, 1 - d, 0.0)
    a = -0.5  # Keys' cubic, as torch's antialiased bicubic uses
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d < 1, near, np.where(d < 2, far, 0.0))


def _aa_weights(mode: str, size_in: int, size_out: int, align: bool, sf: float | None):
    """[size_out, size_in] weights of torch's antialiased interpolation along one axis: the
    filter stretched by the scale when downsampling, taps outside the input dropped and the
    rest normalized (ONNX Resize's antialias keeps them at the edge instead)."""
    if align:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = 1.0 / sf if sf else size_in / size_out
    half = 1.0 if mode == "linear" else 2.0
    support = half * scale if scale >= 1.0 else half
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((size_out, size_in))
    for i in range(size_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size_in)
        taps = _aa_filter(mode, (np.arange(lo, hi) - center + 0.5) * inv)
        total = taps.sum()
        w[i, lo:hi] = taps / total if total != 0 else taps
    return w


def _upsample_aa(mode: str):
    def convert(ctx: Ctx, input: Value, output_size: Any, align_corners: bool,  # noqa: A002
                scale_factors: Any = None) -> Value:  # fmt: skip
        # Two matmuls with constant interpolation matrices (H, then W): static sizes only.
        h, w = ctx.shape(input)[-2:]
        if not (isinstance(h, int) and isinstance(w, int)):
            raise Unsupported("antialiased interpolation of symbolic spatial size")
        sf = dims_tuple_f(scale_factors, 2) if scale_factors is not None else (None, None)
        if output_size is not None:
            oh, ow = ctx.ints(output_size, "interpolation sizes")
        else:
            oh, ow = int(h * sf[0]), int(w * sf[1])
        dt = input.dtype
        wh = ctx.const(_aa_weights(mode, h, oh, align_corners, sf[0]), dt)
        ww = ctx.const(_aa_weights(mode, w, ow, align_corners, sf[1]).T, dt)
        return ctx.op("matmul", ctx.op("matmul", wh, input), ww)

    return convert


def _upsample_aa_default(mode: str):
    vec = _upsample_aa(mode)

    def convert(ctx: Ctx, self: Value, output_size: Any, align_corners: bool,
                scales_h: float | None = None, scales_w: float | None = None) -> Value:  # fmt: skip
        given = scales_h is not None or scales_w is not None
        return vec(ctx, self, output_size, align_corners, [scales_h, scales_w] if given else None)

    return convert


for _mode, _name in (("linear", "bilinear"), ("cubic", "bicubic")):
    converter(f"aten._upsample_{_name}2d_aa.vec")(_upsample_aa(_mode))
    converter(f"aten._upsample_{_name}2d_aa.default")(_upsample_aa_default(_mode))


# ----------------------------------------------------------------------- padding
def torch_pads(ctx: Ctx, x: Value, pad: Any) -> list[int]:
    """Torch's (last-dim-first begin/end pairs) padding as [begin per dim..., end per dim...]."""
    pad = ctx.ints(pad, "padding")
    r = ctx.rank(x)
    if len(pad) % 2 or len(pad) // 2 > r:
        raise Unsupported(f"padding {pad} for rank {r}")
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begins[r - 1 - i] = pad[2 * i]
        ends[r - 1 - i] = pad[2 * i + 1]
    return begins + ends


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@converter("aten.pad.default")
def pad(ctx: Ctx, self: Value, pad: Any, mode: str = "constant", value: float | None = None):
    if mode not in _PAD_MODES:
        raise Unsupported(f"pad mode {mode!r}")
    return ctx.op(
        "pad",
        self,
        pads=torch_pads(ctx, self, pad),
        mode=_PAD_MODES[mode],
        value=float(value or 0.0),
    )


@converter("aten.constant_pad_nd.default")
def constant_pad_nd(ctx: Ctx, self: Value, pad: Any, value: Any = 0) -> Value:
    return ctx.op("pad", self, pads=torch_pads(ctx, self, pad), value=float(value))


def _mode_pad(mode: str):
    def convert(ctx: Ctx, self: Value, padding: Any) -> Value:
        return ctx.op("pad", self, pads=torch_pads(ctx, self, padding), mode=mode)

    return convert


for _n in (1, 2, 3):
    converter(f"aten.reflection_pad{_n}d.default")(_mode_pad("reflect"))
    converter(f"aten.replication_pad{_n}d.default")(_mode_pad("edge"))
converter("aten._pad_circular.default")(_mode_pad("wrap"))


@converter("aten.pixel_shuffle.default")
def pixel_shuffle(ctx: Ctx, self: Value, upscale_factor: int) -> Value:
    return ctx.op("pixel_shuffle", self, upscale_factor=upscale_factor)


@converter("aten.pixel_unshuffle.default")
def pixel_unshuffle(ctx: Ctx, self: Value, downscale_factor: int) -> Value:
    r = downscale_factor
    *batch, c, h, w = ctx.ints(ctx.shape(self), "pixel_unshuffle shape")
    b = len(batch)
    x = ctx.op("reshape", self, shape=[*batch, c, h // r, r, w // r, r])
    perm = list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3]
    x = ctx.op("transpose", x, perm=perm)
    return ctx.op("reshape", x, shape=[*batch, c * r * r, h // r, w // r])


@converter("aten.channel_shuffle.default", "aten.native_channel_shuffle.default")
def channel_shuffle(ctx: Ctx, self: Value, groups: int) -> Value:
    n, c, *rest = ctx.ints(ctx.shape(self), "channel_shuffle shape")
    x = ctx.op("reshape", self, shape=[n, groups, c // groups, *rest])
    x = ctx.op("transpose", x, perm=[0, 2, 1, *range(3, 3 + len(rest))])
    return ctx.op("reshape", x, shape=[n, c, *rest])


@converter("aten.glu.default")
def glu(ctx: Ctx, self: Value, dim: int = -1) -> Value:
    d = ctx.shape(self)[dim]
    if not isinstance(d, int):
        raise Unsupported("glu over a symbolic dim")
    a, b = ctx.node("split", [self], {"axis": dim, "sizes": [d // 2, d // 2]})
    return ctx.op("mul", a, ctx.op("sigmoid", b))


# ----------------------------------------------------------------------- distances
def _pnorm(ctx: Ctx, diff: Value, p: float, axis: int) -> Value:
    if p == 2:
        return ctx.op("reduce_l2", diff, axes=[axis])
    if p == 1:
        return ctx.op("reduce_l1", diff, axes=[axis])
    if p == float("inf"):
        return ctx.op("reduce_max", ctx.op("abs", diff), axes=[axis])
    if p == 0:
        nz = ctx.cast(ctx.op("ne", diff, ctx.const(0, diff.dtype)), diff.dtype)
        return ctx.op("reduce_sum", nz, axes=[axis])
    s = ctx.op("reduce_sum", ctx.op("pow", ctx.op("abs", diff), ctx.const(p, diff.dtype)),
               axes=[axis])  # fmt: skip
    return ctx.op("pow", s, ctx.const(1.0 / p, diff.dtype))


@converter("aten._cdist_forward.default", "aten.cdist.default")
def cdist(ctx: Ctx, x1: Value, x2: Value, p: float = 2.0, compute_mode: Any = None) -> Value:
    a = ctx.op("unsqueeze", x1, axes=[ctx.rank(x1) - 1])  # [..., P, 1, M]
    b = ctx.op("unsqueeze", x2, axes=[ctx.rank(x2) - 2])  # [..., 1, R, M]
    return _pnorm(ctx, ctx.op("sub", a, b), float(p), -1)


@converter("aten._pdist_forward.default", "aten.pdist.default")
def pdist(ctx: Ctx, self: Value, p: float = 2.0) -> Value:
    (n, _m) = ctx.ints(ctx.shape(self), "pdist shape")
    d = cdist(ctx, self, self, p)
    rows = [i * n + j for i in range(n) for j in range(i + 1, n)]
    flat = ctx.op("reshape", d, shape=[n * n])
    return ctx.op("gather", flat, ctx.const(rows, DType.INT64), axis=0)
