"""Emitters and module rules for convolution and pooling.

# NOTE: canonical padding is ONNX-ordered [begins..., ends...]. torch's conv/pool take one
# symmetric pad per dim, so asymmetric padding becomes an explicit ``F.pad`` (conv), a crop of
# the result (conv_transpose), or the window helper ``_msc_pool`` (pools, which also covers
# what torch's pools refuse: pads over half the kernel, dilated average pools, 4-d+ pools).
"""

from __future__ import annotations

import ast
from typing import Any

from codegen.torch.code import call
from codegen.torch.core import Arg
from codegen.torch.emitters.common import fn_nd, symmetric, torch_pads
from codegen.torch.registry import emitter, module_rule
from msc.errors import ConversionError
from msc.ir.dtype import DType


def _n(x: Arg, what: str) -> int:
    if x.rank is None or x.rank < 3:
        raise ConversionError(f"{what}: input must be [N, C, *spatial] with known rank")
    return x.rank - 2


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
@emitter("conv")
def conv(e, x, weight, bias=None, *, stride, padding, dilation, groups) -> ast.expr:
    n = _n(x, "conv")
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
def conv_module(x, weight, bias=None, *, stride, padding, dilation, groups):
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
    n = _n(x, "conv_transpose")
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
def max_pool(e, x, *, kernel, stride, padding, dilation, ceil_mode, return_indices):
    n = _n(x, "max_pool")
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
def avg_pool(e, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    n = _n(x, "avg_pool")
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
    n = _n(x, "lp_pool")
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
    n = _n(x, "adaptive_avg_pool")
    if fn_nd("", n) is None:
        raise ConversionError(f"adaptive_avg_pool: torch has no {n}-d adaptive pooling")
    return call(f"F.adaptive_avg_pool{n}d", x, _adaptive_size(output_size))


@emitter("adaptive_max_pool")
def adaptive_max_pool(e, x, *, output_size, return_indices) -> ast.expr:
    n = _n(x, "adaptive_max_pool")
    if fn_nd("", n) is None:
        raise ConversionError(f"adaptive_max_pool: torch has no {n}-d adaptive pooling")
    kw = {"return_indices": True} if return_indices else {}
    return call(f"F.adaptive_max_pool{n}d", x, _adaptive_size(output_size), **kw)
