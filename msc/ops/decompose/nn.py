"""Decompositions of linear layers, normalizations, softmax, variance and attention.

# NOTE: rules that need a dim (a reshape target, a count to divide by, a mask size) read it
# from the input types and raise ``NotDecomposable`` when it is symbolic; a reshape target may
# keep one unknown dim as -1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Value
from msc.ir.types import Dim
from msc.ops.decompose import Builder, NotDecomposable, registry


def _rank(x: Value, what: str) -> int:
    if x.shape is None:
        raise NotDecomposable(f"{what}: input rank is unknown")
    return len(x.shape)


def _static(d: Dim, what: str) -> int:
    if not isinstance(d, int):
        raise NotDecomposable(f"{what}: needs a static dim, got {d}")
    return d


def _target(dims: Sequence[Dim], what: str) -> list[int]:
    """A reshape target from dims, with at most one non-static dim turned into -1."""
    out = [d if isinstance(d, int) else -1 for d in dims]
    if out.count(-1) > 1:
        raise NotDecomposable(f"{what}: more than one symbolic dim in {list(dims)}")
    return out


def _channel_view(b: Builder, w: Value, rank: int) -> Value:
    """A per-channel [C] tensor viewed as [C, 1, ..., 1] to broadcast over [N, C, *spatial]."""
    if rank <= 2:
        return w
    return b.op("unsqueeze", w, axes=list(range(1, rank - 1)))


def _normalize(b: Builder, x: Value, axes: list[int], eps: float) -> Value:
    mean = b.op("reduce_mean", x, axes=axes, keepdims=True)
    d = b.op("sub", x, mean)
    var = b.op("reduce_mean", b.op("mul", d, d), axes=axes, keepdims=True)
    return b.op("div", d, b.op("sqrt", b.op("add", var, b.scalar(eps, x))))


def _affine(b: Builder, y: Value, weight: Value | None, bias: Value | None) -> Value:
    if weight is not None:
        y = b.op("mul", y, weight)
    if bias is not None:
        y = b.op("add", y, bias)
    return y


@registry("linear")
def linear(b: Builder, x: Value, weight: Value, bias: Value | None) -> Value:
    """matmul(x, weight^T) + bias."""
    w = weight if weight.type.rank == 1 else b.op("transpose", weight, perm=[1, 0])
    return _affine(b, b.op("matmul", x, w), None, bias)


@registry("layer_norm")
def layer_norm(b: Builder, x: Value, weight, bias, *, axis: int, eps: float) -> Value:
    """(x - mean) / sqrt(var + eps) * weight + bias over dims [axis, rank)."""
    r = _rank(x, "layer_norm")
    return _affine(b, _normalize(b, x, list(range(axis % r, r)), eps), weight, bias)


@registry("rms_norm")
def rms_norm(b: Builder, x: Value, weight, *, axis: int, eps: float) -> Value:
    """x / sqrt(mean(x^2) + eps) * weight over dims [axis, rank)."""
    r = _rank(x, "rms_norm")
    ms = b.op("reduce_mean", b.op("mul", x, x), axes=list(range(axis % r, r)), keepdims=True)
    y = b.op("div", x, b.op("sqrt", b.op("add", ms, b.scalar(eps, x))))
    return _affine(b, y, weight, None)


@registry("instance_norm")
def instance_norm(b: Builder, x: Value, weight, bias, *, eps: float) -> Value:
    """Normalize each (sample, channel) over the spatial dims; per-channel affine."""
    r = _rank(x, "instance_norm")
    y = _normalize(b, x, list(range(2, r)), eps)
    w = None if weight is None else _channel_view(b, weight, r)
    bb = None if bias is None else _channel_view(b, bias, r)
    return _affine(b, y, w, bb)


@registry("group_norm")
def group_norm(b: Builder, x: Value, weight, bias, *, num_groups: int, eps: float) -> Value:
    """Reshape to [N, G, rest], normalize over rest, reshape back; per-channel affine."""
    r = _rank(x, "group_norm")
    c = _static(x.shape[1], "group_norm channels")
    rest = [_static(d, "group_norm spatial") for d in x.shape[2:]]
    per_group = c // num_groups * int(np.prod(rest, dtype=np.int64))
    grouped = b.op("reshape", x, shape=_target([x.shape[0], num_groups, per_group], "group_norm"))
    y = _normalize(b, grouped, [2], eps)
    y = b.op("reshape", y, shape=_target(x.shape, "group_norm"))
    w = None if weight is None else _channel_view(b, weight, r)
    bb = None if bias is None else _channel_view(b, bias, r)
    return _affine(b, y, w, bb)


@registry("batch_norm")
def batch_norm(b: Builder, x, weight, bias, running_mean, running_var, *, eps) -> Value:
    """(x - mean) / sqrt(var + eps) * weight + bias with per-channel running statistics."""
    r = _rank(x, "batch_norm")
    mean, var = _channel_view(b, running_mean, r), _channel_view(b, running_var, r)
    y = b.op("div", b.op("sub", x, mean), b.op("sqrt", b.op("add", var, b.scalar(eps, x))))
    w = None if weight is None else _channel_view(b, weight, r)
    bb = None if bias is None else _channel_view(b, bias, r)
    return _affine(b, y, w, bb)


@registry("softmax")
def softmax(b: Builder, x: Value, *, axis: int) -> Value:
    """e^(x - max) / sum(e^(x - max)) along axis."""
    m = b.op("reduce_max", x, axes=[axis], keepdims=True)
    e = b.op("exp", b.op("sub", x, m))
    return b.op("div", e, b.op("reduce_sum", e, axes=[axis], keepdims=True))


@registry("log_softmax")
def log_softmax(b: Builder, x: Value, *, axis: int) -> Value:
    """x - max - log(sum(e^(x - max))) along axis."""
    m = b.op("reduce_max", x, axes=[axis], keepdims=True)
    shifted = b.op("sub", x, m)
    lse = b.op("log", b.op("reduce_sum", b.op("exp", shifted), axes=[axis], keepdims=True))
    return b.op("sub", shifted, lse)


@registry("var")
def var(b: Builder, x: Value, *, axes, keepdims: bool, correction: float) -> Value:
    """sum((x - mean)^2) / (N - correction) over axes."""
    r = _rank(x, "var")
    ax = list(range(r)) if axes is None else [a % r for a in axes]
    n = 1
    for a in ax:
        n *= _static(x.shape[a], "var count")
    mean = b.op("reduce_mean", x, axes=ax, keepdims=True)
    d = b.op("sub", x, mean)
    s = b.op("reduce_sum", b.op("mul", d, d), axes=ax, keepdims=keepdims)
    denom = n - correction
    return b.op("div", s, b.scalar(denom if denom > 0 else 0.0, x))


def _repeat_heads(b: Builder, k: Value, rep: int) -> Value:
    """[B, H, S, E] -> [B, H*rep, S, E], each head repeated rep times in place."""
    bsz, h, s, e = k.shape
    x = b.op("unsqueeze", k, axes=[2])
    x = b.op("expand", x, shape=[-1, -1, rep, -1, -1])
    return b.op("reshape", x, shape=_target([bsz, _static(h, "gqa") * rep, s, e], "attention"))


@registry("attention")
def attention(b: Builder, query, key, value, mask, *, is_causal, scale, enable_gqa) -> Value:
    """softmax(q k^T * scale + mask) v; a bool mask keeps True; causal is top-left aligned."""
    rq = _rank(query, "attention")
    if enable_gqa:
        if rq != 4 or _rank(key, "attention") != 4:
            raise NotDecomposable("attention: grouped-query attention needs rank-4 inputs")
        hq, hk = query.shape[1], key.shape[1]
        if hq is None or hq != hk:  # one head count (an int or a symbol): plain attention
            hq, hk = _static(hq, "gqa heads"), _static(hk, "gqa heads")
            if hq % hk:
                raise NotDecomposable(f"attention: {hq} query heads, {hk} kv heads")
            key = _repeat_heads(b, key, hq // hk)
            value = _repeat_heads(b, value, hq // hk)
    if scale is None:
        scale = 1.0 / math.sqrt(_static(query.shape[-1], "attention head dim"))
    rk = _rank(key, "attention")
    kt = b.op("transpose", key, perm=[*range(rk - 2), rk - 1, rk - 2])
    scores = b.op("mul", b.op("matmul", query, kt), b.scalar(scale, query))
    ninf = b.scalar(-math.inf, query)
    if is_causal:
        q_len = _static(query.shape[-2], "causal attention length")
        k_len = _static(key.shape[-2], "causal attention length")
        tri = np.tril(np.ones((q_len, k_len), dtype=bool))
        scores = b.op("where", b.const(tri, DType.BOOL), scores, ninf)
    if mask is not None:
        if mask.dtype is DType.BOOL:
            scores = b.op("where", mask, scores, ninf)
        else:
            scores = b.op("add", scores, mask)
    return b.op("matmul", b.op("softmax", scores, axis=-1), value)


def _adaptive(b: Builder, x: Value, output_size, reduce_op: str, what: str) -> Value:
    """Per spatial dim, torch's windows [floor(i n / o), ceil((i + 1) n / o)), each reduced
    and the results concatenated; means and maxima over a box separate by dim."""
    r = _rank(x, what)
    y = x
    for i, o in enumerate(output_size):
        ax = 2 + i
        n = _static(x.shape[ax], f"{what} spatial")
        if o is None or o < 0 or o == n:
            continue
        if n % o == 0 and n // o == 1:
            continue
        parts = []
        for j in range(o):
            start, end = (j * n) // o, -((-(j + 1) * n) // o)
            piece = b.op("slice", y, starts=[start], ends=[end], axes=[ax])
            parts.append(b.op(reduce_op, piece, axes=[ax], keepdims=True))
        y = parts[0] if len(parts) == 1 else b.op("concat", *parts, axis=ax)
    del r
    return y


@registry("adaptive_avg_pool")
def adaptive_avg_pool(b: Builder, x: Value, *, output_size) -> Value:
    """Means over torch's adaptive windows, one spatial dim at a time."""
    y = _adaptive(b, x, output_size, "reduce_mean", "adaptive_avg_pool")
    return y if y is not x else b.op("identity", x)


@registry("adaptive_max_pool")
def adaptive_max_pool(b: Builder, x: Value, *, output_size, return_indices) -> Value:
    """Maxima over torch's adaptive windows (values only)."""
    if return_indices:
        raise NotDecomposable("adaptive_max_pool: indices are not decomposed")
    y = _adaptive(b, x, output_size, "reduce_max", "adaptive_max_pool")
    return y if y is not x else b.op("identity", x)
