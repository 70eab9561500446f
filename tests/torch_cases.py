"""PyTorch test cases shared by the frontend and codegen tests (data, not tests).

``OP_CASES``: one row per op use: ``OpCase(id, module, args, tol, skip)``. ``module`` is an
nn.Module (callables are wrapped in ``Fn``); ``args`` the example inputs; ``tol`` the numeric
tolerance (atol = rtol) for comparing a translation's outputs with PyTorch's; ``skip`` a reason
when the case cannot run.

``MODEL_CASES``: name -> builder returning ``(module, example_args)`` or
``(module, example_args, dynamic_shapes)``; builders raise ``MissingDependency(reason)`` when an
optional package is absent. No downloads: weights are random (seeded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["OpCase", "Fn", "wrap", "OP_CASES", "MODEL_CASES", "MissingDependency"]


class MissingDependency(RuntimeError):
    """An optional package a case needs is not installed."""


def build_model(name: str) -> tuple[Any, tuple, Any]:
    """(module, args, dynamic_shapes or None) of MODEL_CASES[name]; a visible skip naming the
    optional package when it is not installed."""
    import pytest

    try:
        built = MODEL_CASES[name]()
    except MissingDependency as e:
        pytest.skip(str(e))
    return built[0], built[1], (built[2] if len(built) > 2 else None)


class OpCase(NamedTuple):
    id: str
    module: nn.Module
    args: tuple
    tol: float = 1e-5
    skip: str | None = None


class Fn(nn.Module):
    """A callable of one tensor as a module: ``Fn(torch.relu)`` (Fn2..Fn4 take more)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Any:
        return self.fn(x)


class Fn2(Fn):
    def forward(self, x: Any, y: Any) -> Any:  # type: ignore[override]
        return self.fn(x, y)


class Fn3(Fn):
    def forward(self, x: Any, y: Any, z: Any) -> Any:  # type: ignore[override]
        return self.fn(x, y, z)


class Fn4(Fn):
    def forward(self, x: Any, y: Any, z: Any, w: Any) -> Any:  # type: ignore[override]
        return self.fn(x, y, z, w)


def wrap(fn: Callable[..., Any], nargs: int) -> nn.Module:
    """``fn`` as a module whose forward takes ``nargs`` tensors (fx needs a fixed arity)."""
    return (Fn, Fn2, Fn3, Fn4)[nargs - 1](fn)


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def r(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=_g(seed)).to(dtype)


def pos(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(shape, generator=_g(seed)) + 0.5


def ints(*shape: int, high: int = 10, dtype: torch.dtype = torch.int64, seed: int = 0):
    return torch.randint(0, high, shape, generator=_g(seed), dtype=dtype)


def mask(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(shape, generator=_g(seed)) > 0.5


def seeded(m: nn.Module) -> nn.Module:
    """``m`` in eval mode with small seeded parameters and BatchNorm statistics that are not
    the identity (running mean near 0, running variance in [0.5, 1.5])."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape) * 0.1)
        for name, b in m.named_buffers():
            if name.endswith("running_var"):
                b.copy_(torch.rand(b.shape) + 0.5)
            elif name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape) * 0.1)
    return m.eval()


def _seed(m: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    for p in m.parameters():
        p.data = torch.randn(p.shape, generator=_g(len(p.shape)))
    return m.eval()


def _cases() -> list[OpCase]:
    C: list[OpCase] = []

    def add(id: str, fn: Any, *args: Any, tol: float = 1e-5, skip: str | None = None) -> None:
        m = fn if isinstance(fn, nn.Module) else wrap(fn, len(args))
        C.append(OpCase(id, m, args, tol, skip))

    x = r(2, 3, 4)
    # unary math
    for name in ("abs", "neg", "exp", "expm1", "sin", "cos", "tan", "tanh", "sinh", "cosh",
                 "atan", "asinh", "erf", "sigmoid", "floor", "ceil", "trunc", "round", "sign",
                 "relu", "reciprocal", "bitwise_not", "exp2", "erfinv"):  # fmt: skip
        arg = ints(2, 3) if name == "bitwise_not" else x
        if name == "erfinv":
            arg = torch.rand(2, 3) * 1.8 - 0.9
        add(name, getattr(torch, name), arg)
    for name in ("log", "log2", "log10", "log1p", "sqrt", "rsqrt", "acosh"):
        add(name, getattr(torch, name), pos(3, 4) + (1.0 if name == "acosh" else 0.0))
    for name in ("asin", "acos", "atanh"):
        add(name, getattr(torch, name), torch.rand(3, 4) * 1.8 - 0.9)
    add("sqrt_int", torch.sqrt, ints(3, 4))
    add("sin_int_to_float", torch.sin, ints(5))
    add("isnan", torch.isnan, torch.tensor([1.0, float("nan"), float("inf")]))
    add("isinf", torch.isinf, torch.tensor([1.0, float("nan"), float("-inf")]))
    add("isfinite", torch.isfinite, torch.tensor([1.0, float("nan"), float("-inf")]))
    add("logical_not", torch.logical_not, mask(3, 4))
    add("round_decimals", lambda a: torch.round(a, decimals=2), x)
    # activations
    add("gelu", F.gelu, x)
    add("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), x)
    add("silu", F.silu, x)
    add("mish", F.mish, x)
    add("selu", F.selu, x)
    add("celu", lambda a: F.celu(a, alpha=0.5), x)
    add("elu", lambda a: F.elu(a, alpha=0.7), x)
    add("leaky_relu", lambda a: F.leaky_relu(a, 0.2), x)
    add("hardtanh", lambda a: F.hardtanh(a, -0.5, 0.5), x)
    add("relu6", F.relu6, x * 4)
    add("hardswish", F.hardswish, x * 4)
    add("hardsigmoid", F.hardsigmoid, x * 4)
    add("softplus", lambda a: F.softplus(a, beta=2.0, threshold=5.0), x)
    add("logsigmoid", F.logsigmoid, x)
    add("hardshrink", F.hardshrink, x)
    add("softshrink", F.softshrink, x)
    add("softsign", F.softsign, x)
    add("threshold", lambda a: F.threshold(a, 0.1, 20.0), x)
    add("prelu", _seed(nn.PReLU(3)), r(2, 3, 4))
    add("glu", lambda a: F.glu(a, -1), x)
    add("relu_inplace", lambda a: torch.relu_(a * 1), x)
    # binary arithmetic and promotion
    y = r(2, 3, 4, seed=1)
    add("add", torch.add, x, y)
    add("add_alpha", lambda a, b: torch.add(a, b, alpha=2), x, y)
    add("add_scalar", lambda a: a + 1.5, x)
    add("add_broadcast", torch.add, x, r(4, seed=2))
    add("add_int_float_promote", torch.add, ints(2, 3), r(2, 3))
    add("add_int_scalar_float", lambda a: a + 0.5, ints(2, 3))
    add("add_f16_f32_0d", lambda a, b: a + b, r(2, 3, dtype=torch.float16), r())
    add(
        "add_bf16", lambda a, b: a + b, r(2, 3, dtype=torch.bfloat16), r(2, 3, dtype=torch.bfloat16)
    )
    add("add_f64", lambda a: a * 2 + 1, r(2, 3, dtype=torch.float64))
    add("add_bool", lambda a, b: a + b, mask(3), mask(3, seed=1))
    add("sub", torch.sub, x, y)
    add("sub_alpha", lambda a, b: torch.sub(a, b, alpha=0.5), x, y)
    add("rsub", lambda a: 1 - a, x)
    add("mul", torch.mul, x, y)
    add("mul_int", lambda a: a * 3, ints(2, 3))
    add("div", torch.div, x, pos(2, 3, 4))
    add("div_int_true", lambda a, b: a / b, ints(4) + 1, ints(4, seed=1) + 1)
    add("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), x, pos(2, 3, 4))
    add("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), x, pos(2, 3, 4))
    add("div_trunc_int", lambda a, b: torch.div(a, b, rounding_mode="trunc"), ints(4) - 5,
        ints(4, seed=1) + 1)  # fmt: skip
    add("floor_divide", torch.floor_divide, ints(4) - 5, ints(4, seed=1) + 1)
    add("pow_tensor", torch.pow, pos(3, 4), y[0])
    add("pow_scalar", lambda a: a**3, x)
    add("pow_square", lambda a: a**2, x)
    add("pow_scalar_base", lambda a: 2.0**a, x)
    add("pow_int_float", lambda a: a**0.5, ints(4) + 1)
    add("remainder", torch.remainder, x, pos(2, 3, 4))
    add("fmod", torch.fmod, x, pos(2, 3, 4))
    add("atan2", torch.atan2, x, y)
    add("maximum", torch.maximum, x, y)
    add("minimum", torch.minimum, x, y)
    add("max_other", torch.max, x, y)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        add(name, getattr(torch, name), ints(6), ints(6, seed=1))
        add(name + "_scalar", lambda a, n=name: getattr(torch, n)(a, 3), ints(6))
    for name in ("logical_and", "logical_or", "logical_xor"):
        add(name, getattr(torch, name), mask(6), mask(6, seed=1))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        add(name, getattr(torch, name), x, y)
        add(name + "_scalar", lambda a, n=name: getattr(torch, n)(a, 0.1), x)
    add("eq_int_float", torch.eq, ints(4), r(4))
    add("where", torch.where, mask(2, 3, 4), x, y)
    add("where_scalar", lambda c, a: torch.where(c, a, 0.0), mask(2, 3, 4), x)
    add("clamp", lambda a: torch.clamp(a, -0.5, 0.5), x)
    add("clamp_min", lambda a: torch.clamp(a, min=0.1), x)
    add("clamp_tensor", lambda a, lo, hi: torch.clamp(a, lo, hi), x, -pos(4), pos(4))
    add("clamp_int", lambda a: torch.clamp(a, 2, 5), ints(6))
    add("masked_fill", lambda a, m: a.masked_fill(m, -1e9), x, mask(2, 3, 4))
    add("lerp", lambda a, b: torch.lerp(a, b, 0.3), x, y)
    add("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), x, y, x)
    add("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), x, y, pos(2, 3, 4))
    # casts and copies
    add("to_f16", lambda a: a.to(torch.float16), x)
    add("to_i32", lambda a: a.to(torch.int32), x * 5)
    add("to_bool", lambda a: a.bool(), x)
    add("float_of_long", lambda a: a.float() / 3, ints(5))
    add("type_as", lambda a, b: a.type_as(b), ints(4), r(4))
    add("clone_contiguous", lambda a: a.transpose(0, 1).contiguous().clone(), x)
    add("copy_", lambda a, b: a.clone().copy_(b), x, r(4, seed=3))
    add("fill_", lambda a: a.clone().fill_(2.0), x)
    add("dropout_eval", nn.Dropout(0.5).eval(), x)
    add("detach", lambda a: a.detach() + 1, x)
    # linear algebra
    add("linear", _seed(nn.Linear(4, 5)), x)
    add("linear_nobias", _seed(nn.Linear(4, 5, bias=False)), x)
    add("matmul", torch.matmul, x, r(4, 6, seed=1))
    add("matmul_batched_bcast", torch.matmul, r(2, 1, 3, 4), r(5, 4, 2, seed=1))
    add("matmul_vec", torch.matmul, r(3, 4), r(4, seed=1))
    add("mm", torch.mm, r(3, 4), r(4, 5, seed=1))
    add("bmm", torch.bmm, r(2, 3, 4), r(2, 4, 5, seed=1))
    add("addmm", lambda a, b, c: torch.addmm(a, b, c, beta=0.5, alpha=2.0), r(5), r(3, 4),
        r(4, 5, seed=1))  # fmt: skip
    add("baddbmm", lambda a, b, c: torch.baddbmm(a, b, c, alpha=0.5), r(2, 3, 5), r(2, 3, 4),
        r(2, 4, 5))  # fmt: skip
    add("einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), r(2, 3, 4), r(2, 4, 5))
    add("einsum_trace_like", lambda a: torch.einsum("ii->i", a), r(4, 4))
    add("outer", torch.outer, r(3), r(4, seed=1))
    add("bilinear", _seed(nn.Bilinear(3, 4, 5)), r(2, 3), r(2, 4, seed=1))
    add("bilinear_nobias_3d", lambda a, b, w: F.bilinear(a, b, w), r(2, 6, 3), r(2, 6, 4),
        r(5, 3, 4, seed=2))  # fmt: skip
    add("dot", torch.dot, r(4), r(4, seed=1))
    # convolution
    img = r(2, 3, 9, 9)
    add("conv1d", _seed(nn.Conv1d(3, 4, 3, stride=2, padding=1)), r(2, 3, 10))
    add("conv2d", _seed(nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=1)), img)
    add("conv2d_groups_dilation", _seed(nn.Conv2d(4, 8, 3, groups=2, dilation=2)), r(1, 4, 9, 9))
    add("conv2d_same", _seed(nn.Conv2d(3, 4, 4, padding="same")), img)
    add("conv2d_reflect", _seed(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")), img)
    add("conv2d_unbatched", _seed(nn.Conv2d(3, 4, 3)), r(3, 9, 9))
    add("conv3d", _seed(nn.Conv3d(2, 3, 3, padding=1)), r(1, 2, 5, 5, 5))
    add("conv_transpose1d", _seed(nn.ConvTranspose1d(3, 2, 3, stride=2)), r(1, 3, 6))
    add("conv_transpose2d", _seed(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1,
        output_padding=1)), img)  # fmt: skip
    add("conv_transpose3d", _seed(nn.ConvTranspose3d(2, 2, 2, stride=2)), r(1, 2, 3, 3, 3))
    # pooling
    add("max_pool1d", nn.MaxPool1d(3, 2), r(2, 3, 10))
    add("max_pool2d", nn.MaxPool2d(3, 2, padding=1), img)
    add("max_pool2d_ceil", nn.MaxPool2d(2, ceil_mode=True), img)
    add("max_pool2d_indices", nn.MaxPool2d(2, return_indices=True), img)
    add("max_pool3d", nn.MaxPool3d(2), r(1, 2, 4, 4, 4))

    def unpool(pool: Callable, unpool: Callable) -> Callable:  # no *-unpacking: fx traces it
        return lambda a: (lambda p: unpool(p[0], p[1]))(pool(a))

    add("max_unpool2d", unpool(lambda a: F.max_pool2d(a, 2, return_indices=True),
        lambda v, i: F.max_unpool2d(v, i, 2)), r(2, 3, 8, 8))  # fmt: skip
    add("max_unpool2d_output_size", unpool(lambda a: F.max_pool2d(a, 3, 2, return_indices=True),
        lambda v, i: F.max_unpool2d(v, i, 3, 2, output_size=(9, 10))), img)  # fmt: skip
    add("max_unpool1d_unbatched", unpool(lambda a: F.max_pool1d(a, 2, return_indices=True),
        lambda v, i: F.max_unpool1d(v, i, 2)), r(3, 8))  # fmt: skip
    add("max_unpool3d", unpool(lambda a: F.max_pool3d(a, 2, return_indices=True),
        lambda v, i: F.max_unpool3d(v, i, 2, stride=2)), r(1, 2, 4, 4, 4))  # fmt: skip
    add("avg_pool1d", nn.AvgPool1d(3, 2), r(2, 3, 10))
    add("avg_pool2d", nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), img)
    add("avg_pool3d", nn.AvgPool3d(2), r(1, 2, 4, 4, 4))
    # ceil_mode with a window wider than the input (EfficientNet's pooler), and one whose
    # last window runs past the end
    add("avg_pool2d_ceil_wide", nn.AvgPool2d(7, ceil_mode=True), r(1, 3, 2, 3))
    add("avg_pool2d_ceil_tail", nn.AvgPool2d(4, 3, ceil_mode=True), r(1, 3, 5, 5))
    add("max_pool2d_ceil_wide", nn.MaxPool2d(7, ceil_mode=True), r(1, 3, 2, 3))
    add("adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), r(2, 3, 10))
    add("adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 2)), img)
    add("adaptive_avg_pool2d_global", nn.AdaptiveAvgPool2d(1), img)
    add("adaptive_avg_pool3d", nn.AdaptiveAvgPool3d(2), r(1, 2, 4, 4, 4))
    add("adaptive_max_pool2d", nn.AdaptiveMaxPool2d(3), img)
    add("adaptive_max_pool2d_uneven_indices", nn.AdaptiveMaxPool2d((4, 2), return_indices=True),
        r(2, 3, 7, 5))  # fmt: skip
    add("adaptive_max_pool1d_uneven", nn.AdaptiveMaxPool1d(3), r(3, 4, 4))
    # normalization
    add("batch_norm", _seed(nn.BatchNorm2d(3)), img)
    add("batch_norm1d", _seed(nn.BatchNorm1d(3)), r(4, 3))
    add("batch_norm_no_stats", nn.BatchNorm2d(3, track_running_stats=False).eval(), img)
    add("layer_norm", _seed(nn.LayerNorm(4)), x)
    add("layer_norm_2d", _seed(nn.LayerNorm([3, 4], eps=1e-12)), x)
    add("layer_norm_noaffine", nn.LayerNorm(4, elementwise_affine=False), x)
    add("group_norm", _seed(nn.GroupNorm(2, 4)), r(2, 4, 5, 5))
    add("instance_norm", _seed(nn.InstanceNorm2d(3, affine=True)), img)
    add("rms_norm", _seed(nn.RMSNorm(4, eps=1e-6)), x)
    add("rms_norm_default_eps", _seed(nn.RMSNorm(4)), x)
    add("local_response_norm", nn.LocalResponseNorm(3), r(2, 4, 5, 5))
    add("normalize", lambda a: F.normalize(a, dim=-1), x)
    # softmax, attention
    add("softmax", lambda a: torch.softmax(a, -1), x)
    add("softmax_dim0", nn.Softmax(0), x)
    add("log_softmax", lambda a: F.log_softmax(a, 1), x)
    add("softmax_f16_to_f32", lambda a: torch.softmax(a, -1, dtype=torch.float32),
        r(2, 3, dtype=torch.float16))  # fmt: skip
    q, k, v = r(2, 4, 5, 8), r(2, 4, 6, 8, seed=1), r(2, 4, 6, 8, seed=2)
    add("sdpa", F.scaled_dot_product_attention, q, k, v)
    add("sdpa_causal", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
        q, r(2, 4, 5, 8), r(2, 4, 5, 8))  # fmt: skip
    add("sdpa_bool_mask", lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, m),
        q, k, v, mask(5, 6))  # fmt: skip
    add("sdpa_float_mask_scale", lambda a, b, c, m: F.scaled_dot_product_attention(
        a, b, c, m, scale=0.3), q, k, v, r(5, 6))  # fmt: skip
    add("mha", _seed(nn.MultiheadAttention(8, 2, batch_first=True)), r(2, 5, 8), r(2, 5, 8),
        r(2, 5, 8))  # fmt: skip
    # embedding
    add("embedding", _seed(nn.Embedding(10, 4)), ints(2, 5))
    add("embedding_padding_idx", _seed(nn.Embedding(10, 4, padding_idx=0)), ints(2, 5))
    add("embedding_i32", _seed(nn.Embedding(10, 4)), ints(3, dtype=torch.int32))
    add("one_hot", lambda a: F.one_hot(a, 10), ints(4))
    table = r(10, 4)
    bag_idx, bag_offs = torch.tensor([1, 0, 3, 3, 9, 2, 0]), torch.tensor([0, 2, 2, 5])
    add(
        "embedding_bag_sum_weighted",
        lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        table,
        bag_idx,
        bag_offs,
        r(7, seed=2),
    )
    add("embedding_bag_mean_padding", lambda w, i, o: F.embedding_bag(
        i, w, o, mode="mean", padding_idx=3), table, bag_idx, bag_offs)  # fmt: skip
    add(
        "embedding_bag_max_last_offset",
        lambda w, i, o: F.embedding_bag(i, w, o, mode="max", include_last_offset=True),
        table,
        bag_idx,
        torch.tensor([0, 2, 2, 7]),
    )
    add("embedding_bag_2d", _seed(nn.EmbeddingBag(10, 4, mode="mean")), ints(3, 4))
    # resize, padding
    add("upsample_nearest", nn.Upsample(scale_factor=2, mode="nearest"), img)
    add("upsample_bilinear", nn.Upsample(size=(12, 14), mode="bilinear"), img)
    add("upsample_bilinear_ac", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
        img)  # fmt: skip
    add(
        "interpolate_bicubic",
        lambda a: F.interpolate(a, size=(5, 7), mode="bicubic"),
        img,
        tol=1e-4,
    )
    big = r(2, 3, 10, 20)
    add("interpolate_bilinear_antialias", lambda a: F.interpolate(a, size=(3, 7),
        mode="bilinear", antialias=True), big)  # fmt: skip
    add("interpolate_bilinear_antialias_ac_scale", lambda a: F.interpolate(a, scale_factor=0.35,
        mode="bilinear", antialias=True, align_corners=True), big)  # fmt: skip
    add("interpolate_bilinear_antialias_scale", lambda a: F.interpolate(a, scale_factor=0.35,
        mode="bilinear", antialias=True), big)  # fmt: skip
    add("interpolate_bicubic_antialias", lambda a: F.interpolate(a, size=(13, 6),
        mode="bicubic", antialias=True), big, tol=1e-4)  # fmt: skip
    add("interpolate_nearest1d", lambda a: F.interpolate(a, scale_factor=2.0), r(2, 3, 5))
    add("interpolate_trilinear", lambda a: F.interpolate(a, size=(4, 4, 4), mode="trilinear"),
        r(1, 2, 3, 3, 3))  # fmt: skip
    add("nearest_exact_down", lambda a: F.interpolate(a, size=(5, 7), mode="nearest-exact"),
        r(1, 2, 9, 11))  # fmt: skip
    add("nearest_exact_up1d", lambda a: F.interpolate(a, scale_factor=1.7, mode="nearest-exact"),
        r(2, 3, 5))  # fmt: skip
    add("nearest_exact_3d", lambda a: F.interpolate(a, size=(3, 5, 2), mode="nearest-exact"),
        r(1, 2, 4, 3, 5))  # fmt: skip
    grid = torch.rand(2, 4, 5, 2, generator=_g(3)) * 2.4 - 1.2
    for gm, pm, ac in (
        ("bilinear", "zeros", False),
        ("nearest", "border", True),
        ("bicubic", "reflection", False),
        ("bilinear", "reflection", True),
    ):
        add(f"grid_sample_{gm}_{pm}",
            lambda a, g, gm=gm, pm=pm, ac=ac: F.grid_sample(a, g, gm, pm, align_corners=ac),
            r(2, 3, 6, 7), grid, tol=1e-4)  # fmt: skip
    add("grid_sample_3d", lambda a, g: F.grid_sample(a, g, align_corners=False),
        r(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3, generator=_g(4)) * 2 - 1)  # fmt: skip
    add("fold", lambda a: F.fold(a, (5, 6), (2, 3), padding=1, stride=(1, 2)), r(2, 12, 18))
    add("fold_unbatched", lambda a: F.fold(a, (4, 4), 2, dilation=2), r(8, 4))
    add("pad_constant", lambda a: F.pad(a, (1, 2, 0, 1), value=0.5), img)
    add("pad_reflect", lambda a: F.pad(a, (1, 2, 2, 1), mode="reflect"), img)
    add("pad_replicate", lambda a: F.pad(a, (1, 2, 2, 1), mode="replicate"), img)
    add("pad_circular", lambda a: F.pad(a, (1, 2, 2, 1), mode="circular"), img)
    add("pad_replicate_negative", lambda a: F.pad(a, (-4, 5, 1, -2), mode="replicate"), img)
    add("pad_circular_1d_empty_batch", lambda a: F.pad(a, (1, 2), mode="circular"), r(0, 3, 3))
    add("reflection_pad1d", nn.ReflectionPad1d(2), r(2, 3, 6))
    add("replication_pad3d", nn.ReplicationPad3d(1), r(1, 2, 3, 3, 3))
    add("zero_pad2d", nn.ZeroPad2d((1, 0, 2, 1)), img)
    add("pixel_shuffle", nn.PixelShuffle(2), r(1, 8, 3, 3))
    add("pixel_unshuffle", nn.PixelUnshuffle(2), r(1, 2, 4, 6))
    add("channel_shuffle", nn.ChannelShuffle(2), r(1, 4, 3, 3))
    # reductions
    add("sum", lambda a: a.sum(), x)
    ties = torch.tensor([[3.0, 1, 3, 1, 2, 1, 3], [5, 5, 4, 4, 0, 0, 0]])
    add("logsumexp_0d", lambda a: torch.logsumexp(a, 0, keepdim=True), torch.tensor(0.7))
    add("mode_ties", torch.mode, ties)
    seg = torch.tensor([1.0, 5, -2, 3, 0.5])
    for how in ("sum", "mean", "max", "min", "prod"):
        add(f"segment_reduce_{how}", lambda a, n, how=how: torch.segment_reduce(
            a, how, lengths=n), seg, torch.tensor([2, 0, 2, 1]))  # fmt: skip
    add(
        "segment_reduce_mean_initial_offsets",
        lambda a, o: torch.segment_reduce(a, "mean", offsets=o, initial=1.0),
        r(5, 3),
        torch.tensor([0, 2, 2, 5]),
    )
    add("mode_dim0_keepdim", lambda a: torch.mode(a, 0, keepdim=True), ints(6, 3, high=3))
    add("sum_dim", lambda a: a.sum(dim=(0, 2), keepdim=True), x)
    add("sum_int", lambda a: a.sum(-1), ints(3, 4, dtype=torch.int32))
    add("sum_bool", lambda a: a.sum(), mask(3, 4))
    add("sum_dtype", lambda a: a.sum(1, dtype=torch.float64), x)
    add("mean", lambda a: a.mean(), x)
    add("mean_dim", lambda a: a.mean(-1, keepdim=True), x)
    add("prod", lambda a: a.prod(), pos(3))
    add("prod_dim", lambda a: a.prod(1), pos(3, 4))
    add("amax", lambda a: a.amax((1, 2)), x)
    add("amin", lambda a: a.amin(0), x)
    add("max_all", torch.max, x)
    add("min_all", torch.min, x)
    add("max_dim", lambda a: torch.max(a, 1), x)
    add("min_dim_keepdim", lambda a: torch.min(a, -1, keepdim=True), x)
    add("argmax", lambda a: a.argmax(-1), x)
    add("argmin", lambda a: a.argmin(), x)
    add("any", lambda a: a.any(), mask(3, 4))
    add("any_dim", lambda a: a.any(1), mask(3, 4))
    add("any_float", lambda a: (a > 0).any((0, 1)), x)
    add("all_dim", lambda a: a.all(0), mask(3, 4))
    add("var", lambda a: a.var(1), x)
    add("var_unbiased_false", lambda a: torch.var(a, 1, unbiased=False, keepdim=True), x)
    add("var_correction", lambda a: torch.var(a, (0, 2), correction=0), x)
    add("std", lambda a: a.std(-1), x)
    add("var_mean", lambda a: torch.var_mean(a, 1), x)
    add("logsumexp", lambda a: torch.logsumexp(a, 1), x)
    add("cumsum", lambda a: a.cumsum(1), x)
    add("cumsum_int", lambda a: a.cumsum(0), ints(5, dtype=torch.int32))
    add("cumprod", lambda a: a.cumprod(-1), pos(3, 4))
    add("topk", lambda a: torch.topk(a, 2), x)
    add("topk_smallest", lambda a: torch.topk(a, 2, dim=1, largest=False), x)
    add("sort", lambda a: torch.sort(a, -1, descending=True), x)
    add("sort_stable", lambda a: torch.sort(a, dim=0, stable=True), x)
    add("argsort", lambda a: torch.argsort(a, 1), x)
    add("norm", lambda a: a.norm(dim=-1), x)
    add("norm_p1", lambda a: torch.linalg.vector_norm(a, 1, dim=(1, 2)), x)
    add("norm_inf", lambda a: torch.linalg.vector_norm(a, float("inf")), x)
    add("norm_p3", lambda a: torch.linalg.vector_norm(a, 3, dim=-1), x, tol=1e-4)
    add("cdist", torch.cdist, r(2, 3, 4), r(2, 5, 4, seed=1), tol=1e-4)
    add("cdist_p1", lambda a, b: torch.cdist(a, b, p=1), r(3, 4), r(5, 4, seed=1), tol=1e-4)
    add("pdist", F.pdist, r(4, 3), tol=1e-4)
    # shapes
    add("view", lambda a: a.view(6, 4), x)
    add("view_infer", lambda a: a.view(-1, 2), x)
    add("reshape", lambda a: a.reshape(4, 3, 2), x)
    add("flatten", lambda a: torch.flatten(a, 1), x)
    add("flatten_module", nn.Flatten(), x)
    add("unflatten", lambda a: a.unflatten(-1, (2, 2)), x)
    add("permute", lambda a: a.permute(2, 0, 1), x)
    add("transpose", lambda a: a.transpose(-1, 0), x)
    add("t", lambda a: a.t(), r(3, 4))
    add("movedim", lambda a: torch.movedim(a, 0, -1), x)
    add("expand", lambda a: a.expand(5, 3, 4), r(3, 1))
    add("expand_keep", lambda a: a.expand(2, -1, -1), r(1, 3, 4))
    add("expand_as", lambda a, b: a.expand_as(b), r(1, 4), x)
    add("unsqueeze", lambda a: a.unsqueeze(-1), x)
    add("squeeze", lambda a: a.squeeze(), r(1, 3, 1, 4))
    add("squeeze_dim", lambda a: a.squeeze(2), r(1, 3, 1, 4))
    add("squeeze_dims", lambda a: torch.squeeze(a, (0, 2)), r(1, 3, 1, 4))
    add("cat", lambda a, b: torch.cat([a, b], 1), x, y)
    add("cat_promote", lambda a, b: torch.cat([a, b], 0), ints(2, 3), r(2, 3))
    add("stack", lambda a, b: torch.stack([a, b], -1), x, y)
    add("split", lambda a: torch.split(a, 2, dim=2), x)
    add("split_sizes", lambda a: a.split([1, 3], -1), x)
    add("chunk", lambda a: a.chunk(3, 1), r(2, 7))
    add("unbind", lambda a: a.unbind(1), x)
    add("slice", lambda a: a[:, 1:3, ::2], x)
    add("slice_negative", lambda a: a[..., -2:], x)
    add("select", lambda a: a[:, 0], x)
    add("select_last", lambda a: a[-1], x)
    add("index_none_ellipsis", lambda a: a[None, ..., 1], x)
    add("narrow", lambda a: a.narrow(2, 1, 2), x)
    add("repeat", lambda a: a.repeat(2, 1, 3), r(3, 4))
    add("tile", lambda a: a.tile((2,)), r(3))
    add("flip", lambda a: a.flip(0, 2), x)
    add("roll", lambda a: a.roll(1, 2), x)
    add("roll_flat", lambda a: a.roll(3), x)
    add("tril", lambda a: a.tril(), r(4, 4))
    add("triu_k", lambda a: a.triu(1), r(3, 4, 4))
    add("diagonal", lambda a: torch.diagonal(a, 1), r(4, 5))
    add("diagonal_dims", lambda a: torch.diagonal(a, -1, 1, 2), r(2, 4, 3))
    add("unfold", lambda a: a.unfold(1, 3, 2), r(2, 7))
    # indexing, scatter
    idx = torch.tensor([2, 0, 1])
    add("index_tensor", lambda a, i: a[i], x, torch.tensor([1, 0, 1]))
    add("index_tensor_neg", lambda a, i: a[:, i], x, torch.tensor([[-1, 0], [2, -3]]))
    add("index_two_tensors", lambda a, i, j: a[:, i, j], x, idx, torch.tensor([3, 0, 1]))
    add("index_mask", lambda a, m: a[m], x, mask(2, 3, 4), skip=None)
    add("index_select", lambda a, i: torch.index_select(a, 1, i), x, idx)
    add("gather", lambda a, i: torch.gather(a, 1, i), x, ints(2, 2, 4, high=3))
    add("take_along_dim", lambda a, i: torch.take_along_dim(a, i, 2), x, ints(2, 3, 2, high=4))
    add("index_put", lambda a, i, v: a.index_put((i,), v), x, torch.tensor([0, 1]), r(2, 3, 4))
    add("index_put_acc", lambda a, i, v: a.index_put((i,), v, accumulate=True), x,
        torch.tensor([1, 1]), r(2, 3, 4))  # fmt: skip
    add("setitem", lambda a: _setitem(a), x)
    add("scatter_src", lambda a, i, s: a.scatter(1, i, s), x, torch.tensor([[[0, 1, 2, 0]]]),
        r(1, 1, 4))  # fmt: skip
    add("scatter_value", lambda a, i: a.scatter(2, i, 7.0), x, ints(2, 3, 1, high=4))
    add("scatter_add", lambda a, i, s: a.scatter_add(0, i, s), r(3, 4), ints(2, 4, high=3),
        r(2, 4))  # fmt: skip
    add("scatter_reduce_amax", lambda a, i, s: a.scatter_reduce(0, i, s, "amax"), r(3, 4),
        ints(2, 4, high=3), r(2, 4))  # fmt: skip
    sidx = torch.tensor([[0, 2, 0, 1], [0, 2, 2, 1]])
    add("scatter_reduce_mean", lambda a, i, s: a.scatter_reduce(0, i, s, "mean"), r(3, 4), sidx,
        r(2, 4))  # fmt: skip
    add("scatter_reduce_mean_int",
        lambda a, i, s: a.scatter_reduce(1, i, s, "mean", include_self=False),
        ints(4, 3, high=20), sidx.T.contiguous(), ints(4, 2, high=20, seed=1))  # fmt: skip
    for how in ("sum", "prod", "amax", "amin"):
        add(f"scatter_reduce_{how}_no_self",
            lambda a, i, s, how=how: a.scatter_reduce(0, i, s, how, include_self=False),
            r(3, 4), sidx, r(2, 4))  # fmt: skip
    add("slice_scatter", lambda a, s: torch.slice_scatter(a, s, 1, 0, 4, 2), r(3, 4), r(3, 2))
    add("select_scatter", lambda a, s: torch.select_scatter(a, s, 0, 1), r(3, 4), r(4))
    add("masked_scatter", lambda a, m, s: a.masked_scatter(m, s), r(3, 4), mask(3, 4),
        r(12, seed=3))  # fmt: skip
    add("put_accumulate", lambda a, i, s: a.put(i, s, accumulate=True), r(3, 4),
        torch.tensor([0, -1, 5, 0]), r(4, seed=2))  # fmt: skip
    add("put", lambda a, i, s: a.put(i, s), r(3, 4), torch.tensor([7, -12, 2]), r(3, seed=2))
    add("nonzero", torch.nonzero, mask(3, 4))
    add("histogram_range_density", lambda a: torch.histogram(a, 3, range=(-1.0, 1.0),
        density=True), r(4, 5))  # fmt: skip
    add("histogram_weighted", lambda a, w: torch.histogram(a, 4, weight=w), r(7), pos(7))
    add("histogram_one_value", lambda a: torch.histogram(a, 2), torch.full((3,), 2.5))
    # creation
    add("zeros_like", torch.zeros_like, x)
    add("ones_like_dtype", lambda a: torch.ones_like(a, dtype=torch.int32), x)
    add("full_like", lambda a: torch.full_like(a, 3.5), x)
    add("new_zeros", lambda a: a.new_zeros(2, 5), x)
    add("new_full", lambda a: a.new_full((2,), 4), ints(3))
    add("zeros", lambda a: a + torch.zeros(3, 4), r(3, 4))
    add("ones_int", lambda a: a + torch.ones(4, dtype=torch.int64), ints(4))
    add("full", lambda a: a * torch.full((3, 4), 2.0), r(3, 4))
    add("empty", lambda a: torch.empty(3).fill_(1.0) + a, r(3))
    add("arange", lambda a: a + torch.arange(4), r(3, 4))
    add("arange_float", lambda a: a + torch.arange(0.0, 2.0, 0.5), r(4))
    add("scalar_tensor", lambda a: a + torch.tensor(2.0), r(3))
    add("lifted_constant", lambda a: a * torch.tensor([1.0, 2.0, 3.0]), r(2, 3))
    add("lifted_constant_large", lambda a: a + torch.tensor([float(i) for i in range(80)]),
        r(2, 80))  # fmt: skip
    add("round_decimals_neg", lambda a: torch.round(a * 1000, decimals=-2), x)
    _signal_cases(add)
    return C


def _signal_cases(add: Callable[..., None]) -> None:
    """Complex tensors, the FFT family, stft/istft and windows. A complex result is compared
    as ``view_as_real`` of it: the layout msc graphs carry complex tensors in."""

    def vr(t: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(t.resolve_conj())  # some inverses return a lazy conjugate

    fft = torch.fft
    s1, s2, s3 = r(2, 8), r(2, 6, 8, seed=1), r(3, 5, seed=2)
    # complex arithmetic, as torch.export gives it
    add("complex_rotary", lambda a, f: vr(torch.view_as_complex(a.reshape(2, 6, 4, 2))
        * torch.polar(torch.ones_like(f), f)).flatten(-2), s2, r(6, 4, seed=3))  # fmt: skip
    add("complex_of_parts", lambda a, b: vr(torch.complex(a, b).conj() * 2 - 1), s3,
        r(3, 5, seed=3))  # fmt: skip
    add("complex_div_add", lambda a, b: vr(torch.complex(a, b) / torch.complex(b, a) + a), s3,
        r(3, 5, seed=3))  # fmt: skip

    def parts(a: torch.Tensor, b: torch.Tensor) -> tuple:
        z = torch.complex(a, b)
        return z.abs(), z.angle(), torch.real(z), torch.imag(z)

    add("complex_abs_angle_real_imag", parts, s3, r(3, 5, seed=3))
    add("angle_of_real", torch.angle, torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.5]))
    add("angle_of_int", torch.angle, torch.tensor([-2, 0, 3]))
    add("complex_shape_ops", lambda a: vr(torch.cat([fft.fft(a).unsqueeze(0).transpose(1, 2)
        .reshape(1, 4, 4)[:, 1:], fft.fft(a.flip(1)).reshape(1, 4, 4)[:, :1]], 1)), s1)  # fmt: skip
    add("complex_to_double", lambda a: vr(fft.fft(a).to(torch.complex128)), s1)
    # the FFT family (norm modes, signal lengths n / s)
    add("fft", lambda a: vr(fft.fft(a)), s1)
    add("fft_n_dim_ortho", lambda a: vr(fft.fft(a, n=4, dim=1, norm="ortho")), s2)
    add("fft_of_complex", lambda a: vr(fft.fft(fft.fft(a), n=10, norm="forward")), s1)
    add("ifft", lambda a: vr(fft.ifft(fft.fft(a))), s1)
    add("ifft_real_forward", lambda a: vr(fft.ifft(a, norm="forward")), s1)
    add("rfft", lambda a: vr(fft.rfft(a)), s1)
    add("rfft_n_ortho", lambda a: vr(fft.rfft(a, n=11, norm="ortho")), s1)
    add("irfft", lambda a: fft.irfft(fft.rfft(a)), s1)
    add("irfft_n_forward", lambda a: fft.irfft(fft.rfft(a), n=7, norm="forward"), s1)
    add("hfft", lambda a: fft.hfft(fft.rfft(a), n=8), s1, tol=1e-4)
    add("ihfft_ortho", lambda a: vr(fft.ihfft(a, norm="ortho")), s1)
    add("fft2", lambda a: vr(fft.fft2(a)), s2, tol=1e-4)
    add("ifft2_s", lambda a: vr(fft.ifft2(a, s=(4, 10))), s2)
    add("rfft2", lambda a: vr(fft.rfft2(a)), s2, tol=1e-4)
    add("irfft2_s", lambda a: fft.irfft2(fft.rfft2(a), s=(6, 8)), s2)
    add("hfft2", lambda a: fft.hfft2(fft.ihfft2(a)), s2, tol=1e-4)
    add("fftn_forward", lambda a: vr(fft.fftn(a, norm="forward")), s2)
    add("ifftn_dim", lambda a: vr(fft.ifftn(a, dim=(0, 2))), s2)
    add("rfftn_dim", lambda a: vr(fft.rfftn(a, dim=(0, 2))), s2, tol=1e-4)
    add("irfftn", lambda a: fft.irfftn(fft.rfftn(a)), s2)
    add("ihfftn", lambda a: vr(fft.ihfftn(a)), s2)
    add("hfftn_s", lambda a: fft.hfftn(fft.rfftn(a), s=(6, 8)), s2, tol=1e-3)
    add("hfft_of_real", lambda a: fft.hfft(a, n=10), s1)
    add("fftshift_ifftshift", lambda a: (vr(fft.fftshift(fft.fft2(a), dim=(-2, -1))),
        fft.ifftshift(a)), s2, tol=1e-4)  # fmt: skip
    # windows and the short-time transforms
    add("hann_window", lambda a: a * torch.hann_window(8), s1)
    add("hamming_window_alpha_beta",
        lambda a: a * torch.hamming_window(8, periodic=False, alpha=0.5, beta=0.4), s1)  # fmt: skip
    add("blackman_window", lambda a: a * torch.blackman_window(8, periodic=False), s1)
    add("bartlett_window", lambda a: a * torch.bartlett_window(8), s1)
    add("kaiser_window", lambda a: a * torch.kaiser_window(8, True, 5.0), s1)
    sig = r(2, 40, seed=4)
    add("stft", lambda a: vr(torch.stft(a, 16, hop_length=4, window=torch.hann_window(16),
        return_complex=True)), sig)  # fmt: skip
    add("stft_1d_short_window_normalized", lambda a: torch.stft(a, 16, hop_length=5,
        win_length=10, window=torch.hann_window(10), center=False, normalized=True,
        return_complex=True).abs(), sig[0])  # fmt: skip
    add("stft_two_sided_constant_pad", lambda a: vr(torch.stft(a, 8, center=True,
        pad_mode="constant", onesided=False, return_complex=True)), sig)  # fmt: skip
    add("istft", lambda a: torch.istft(torch.stft(a, 16, hop_length=4,
        window=torch.hann_window(16), return_complex=True), 16, hop_length=4,
        window=torch.hann_window(16)), sig)  # fmt: skip
    add("istft_length", lambda a: torch.istft(torch.stft(a, 16, hop_length=8,
        window=torch.hann_window(16), return_complex=True), 16, hop_length=8,
        window=torch.hann_window(16), length=36), sig[0])  # fmt: skip


def _setitem(a: torch.Tensor) -> torch.Tensor:
    b = a.clone()
    b[:, 1] = 0.0
    b[0, :, 2:] += 1.0
    return b


OP_CASES: list[OpCase] = _cases()


# ----------------------------------------------------------------------- models
class SmallCNN(nn.Module):
    """conv/bn/relu, a residual block, pooling and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.Conv2d(8, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
        )
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(self.pool(x))


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, 32), nn.GELU(), nn.Linear(32, tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MLPMixer(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 32, depth: int = 2) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.blocks = nn.ModuleList([MixerBlock(tokens, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x).mean(1))


class DynamicOps(nn.Module):
    """Ops on symbolic sizes: slice bounds from another input's size, arange, a split with a
    symbolic piece, squeeze() with dynamic dims."""

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        t = x.shape[1]
        a = y[:, : t - 1].sum(1) + y[:, 1:t].sum(1) + y[:, :-1].mean(1)
        h = x + torch.arange(t)[None, :, None].to(x.dtype)
        left, right = torch.split(h, [t - 2, 2], dim=1)
        return a, left.mean(1) + right.mean(1), h[:, :1].squeeze()


def dynamic_ops():
    from torch.export import Dim

    b, t, s = Dim("batch", min=2, max=8), Dim("seq", min=4, max=32), Dim("mem", min=4, max=64)
    dyn = {"x": {0: b, 1: t}, "y": {0: b, 1: s}}
    return DynamicOps(), (r(2, 6, 8), r(2, 9, 8, seed=1)), dyn


def small_cnn():
    torch.manual_seed(0)
    from torch.export import Dim

    return SmallCNN().eval(), (r(2, 3, 16, 16),), {"x": {0: Dim("batch", min=1, max=32)}}


def transformer():
    torch.manual_seed(0)
    m = nn.Transformer(
        d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=128,
        dropout=0.1, batch_first=True,
    ).eval()  # fmt: skip
    return m, (r(2, 7, 64), r(2, 5, 64, seed=1))


def mlp_mixer():
    torch.manual_seed(0)
    return MLPMixer().eval(), (r(2, 3, 16, 16),)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise MissingDependency("transformers is not installed") from None
    transformers.logging.set_verbosity_error()
    return transformers


def bert():
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    m = tf.BertModel(cfg).eval()
    ids = ints(2, 8, high=100)
    return m, (ids, torch.ones(2, 8, dtype=torch.int64))


def gpt2():
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                        use_cache=False)  # fmt: skip
    return tf.GPT2LMHeadModel(cfg).eval(), (ints(2, 8, high=100),)


def llama():
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, use_cache=False)  # fmt: skip
    return tf.LlamaForCausalLM(cfg).eval(), (ints(2, 8, high=100),)


class RotaryAttention(nn.Module):
    """Llama-style attention with rotary embeddings written with complex numbers (Meta's
    reference code): ``view_as_complex(x.float().reshape(..., -1, 2)) * freqs_cis``."""

    def __init__(self, dim: int = 32, heads: int = 4, max_seq: int = 16) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        freqs = 1.0 / (10000.0 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        angles = torch.outer(torch.arange(max_seq).float(), freqs)
        cis = torch.polar(torch.ones_like(angles), angles)
        self.register_buffer("freqs_cis", cis, persistent=False)

    def _rotate(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        f = freqs_cis.view(1, xc.shape[1], 1, xc.shape[-1])
        return torch.view_as_real(xc * f).flatten(3).type_as(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.hd)
        k = self.wk(x).view(b, s, self.heads, self.hd)
        v = self.wv(x).view(b, s, self.heads, self.hd)
        f = self.freqs_cis[:s]
        q, k = self._rotate(q, f), self._rotate(k, f)
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


def rotary_complex():
    torch.manual_seed(0)
    return _seed(RotaryAttention()), (r(2, 10, 32),)


def t5_encoder():
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      use_cache=False)  # fmt: skip
    return tf.T5EncoderModel(cfg).eval(), (ints(2, 8, high=100),)


def vit():
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.ViTConfig(
        image_size=16,
        patch_size=4,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
    )
    return tf.ViTModel(cfg).eval(), (r(2, 3, 16, 16),)


MODEL_CASES: dict[str, Callable[[], tuple]] = {
    "small_cnn": small_cnn,
    "transformer": transformer,
    "mlp_mixer": mlp_mixer,
    "dynamic_ops": dynamic_ops,
    "rotary_complex": rotary_complex,
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
    "t5_encoder": t5_encoder,
    "vit": vit,
}
