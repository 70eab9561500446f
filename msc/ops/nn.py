"""Neural-network ops: matmul/linear/gemm, convolution, pooling, normalization, softmax,
attention, embedding, resize.

# NOTE: high-level ops stay high-level (a node is ``conv`` with its strides, ``layer_norm`` with
# its axis and eps); a codegen that lacks one lowers it through a registered decomposition.
# Spatial padding is ONNX-ordered: [x1_begin, x2_begin, ..., x1_end, x2_end].
"""

from __future__ import annotations

import re

import numpy as np

from msc.ir.dtype import DType
from msc.ir.types import Dim, TensorType
from msc.ops import registry
from msc.ops.infer import (
    InferError,
    broadcast,
    conv_out,
    known,
    pool_out,
    same_dtype,
)
from msc.ops.infer import axis as check_axis
from msc.ops.schema import Attr


def _matmul_shape(a: TensorType, b: TensorType) -> tuple[Dim, ...] | None:
    if a.shape is None or b.shape is None:
        return None
    sa, sb = list(a.shape), list(b.shape)
    if not sa or not sb:
        raise InferError("matmul: inputs must have rank >= 1")
    va, vb = len(sa) == 1, len(sb) == 1
    if va:
        sa = [1] + sa
    if vb:
        sb = sb + [1]
    k1, k2 = sa[-1], sb[-2]
    if known(k1) and known(k2) and k1 != k2:
        raise InferError(f"matmul: inner dims differ ({k1} vs {k2})")
    batch = broadcast(TensorType(a.dtype, sa[:-2]), TensorType(b.dtype, sb[:-2])) or ()
    out = list(batch) + [sa[-2], sb[-1]]
    if va:
        out.pop(-2)
    if vb:
        out.pop(-1)
    return tuple(out)


@registry.op("matmul", ["a", "b"], category="linear")
def matmul(a: TensorType, b: TensorType) -> TensorType:
    """numpy.matmul: batched, broadcasting, 1-d operands promoted and squeezed."""
    return TensorType(same_dtype(a, b), _matmul_shape(a, b))


@registry.op("linear", ["x", "weight", "bias?"], category="linear")
def linear(x: TensorType, weight: TensorType, bias: TensorType | None) -> TensorType:
    """x @ weight^T + bias, weight [out_features, in_features] (torch.nn.Linear)."""
    dt = same_dtype(x, weight, bias)
    if weight.shape is not None and len(weight.shape) not in (1, 2):
        raise InferError(f"linear: weight must be 1-d or 2-d, got rank {len(weight.shape)}")
    if x.shape is None or weight.shape is None:
        return TensorType(dt, None)
    wt = TensorType(dt, tuple(reversed(weight.shape)))
    return TensorType(dt, _matmul_shape(x, wt))


@registry.op(
    "gemm",
    ["a", "b", "c?"],
    {
        "alpha": Attr.float(1.0),
        "beta": Attr.float(1.0),
        "trans_a": Attr.bool(False),
        "trans_b": Attr.bool(False),
    },
    category="linear",
)
def gemm(a, b, c, *, alpha, beta, trans_a, trans_b) -> TensorType:
    """alpha * op(a) @ op(b) + beta * c, with 2-d a and b (ONNX Gemm, torch addmm)."""
    dt = same_dtype(a, b, c)
    if a.shape is None or b.shape is None:
        return TensorType(dt, None)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise InferError("gemm: a and b must be 2-d")
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    return TensorType(dt, (m, n))


@registry.op("einsum", ["*xs"], {"equation": Attr.str()}, category="linear")
def einsum(xs, *, equation: str) -> TensorType:
    """Einstein summation (numpy.einsum syntax, explicit or implicit output)."""
    dt = same_dtype(*xs)
    eq = equation.replace(" ", "")
    _check_einsum(eq)
    if any(x.shape is None for x in xs):
        return TensorType(dt, None)
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(xs):
        raise InferError(f"einsum: equation has {len(terms)} operands, got {len(xs)} inputs")
    sizes: dict[str, Dim] = {}
    ell: tuple[Dim, ...] = ()
    for term, x in zip(terms, xs):
        shape = list(x.shape)
        if "..." in term:
            pre, post = term.split("...")
            n_ell = len(shape) - len(pre) - len(post)
            ell_t = TensorType(dt, shape[len(pre) : len(pre) + n_ell])
            ell = broadcast(TensorType(dt, ell), ell_t) or ()
            shape = shape[: len(pre)] + shape[len(pre) + n_ell :]
            term = pre + post
        if len(term) != len(shape):
            raise InferError(f"einsum: term {term!r} does not match rank {len(shape)}")
        for ch, d in zip(term, shape):
            if ch in sizes and sizes[ch] != d and d != 1:
                if sizes[ch] == 1 or not (known(sizes[ch]) and known(d)):
                    sizes[ch] = d if known(d) else sizes[ch]
                else:
                    raise InferError(f"einsum: index {ch!r} has sizes {sizes[ch]} and {d}")
            elif ch not in sizes:
                sizes[ch] = d
    if "->" not in eq:
        letters = "".join(c for c in lhs if c.isalpha())
        rhs = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1)
        )
    out: list[Dim] = []
    if "..." in rhs:
        pre, post = rhs.split("...")
        out = [sizes[c] for c in pre] + list(ell) + [sizes[c] for c in post]
    else:
        out = [sizes[c] for c in rhs]
    return TensorType(dt, out)


_EINSUM_TERM = re.compile(r"[A-Za-z]*(?:\.\.\.)?[A-Za-z]*\Z")


def _check_einsum(eq: str) -> None:
    """An equation as ONNX and numpy spell one: ASCII letters, each term with at most one
    ``...``, at most one ``->``, and an output of distinct letters that the inputs use."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if not all(_EINSUM_TERM.match(t) for t in [*terms, rhs]) or "->" in rhs:
        raise InferError(f"einsum: {eq!r} is not an equation (letters, ',', '...', '->')")
    if arrow:
        letters = rhs.replace("...", "")
        if len(set(letters)) != len(letters) or not set(letters) <= set(lhs):
            raise InferError(f"einsum: output {rhs!r} of {eq!r} repeats or invents an index")
        if "..." in rhs and "..." not in lhs:
            raise InferError(f"einsum: output {rhs!r} of {eq!r} has '...' the inputs lack")


def _spatial(x: TensorType, w: TensorType | None, n_attr: int, what: str) -> int:
    """The number of spatial dims: the input's rank less 2, or, when that rank is unknown (a
    value from an If whose branches differ in rank), the weight's or the attributes'."""
    if x.shape is None:
        n = len(w.shape) - 2 if w is not None and w.shape is not None else n_attr
        if n < 1:
            raise InferError(f"{what} input has unknown rank")
        return n
    r = len(x.shape)
    n = r - 2
    if n < 1:
        raise InferError(f"{what}: input must be [N, C, *spatial], got rank {r}")
    if n_attr and n_attr != n:
        raise InferError(f"{what}: attributes are for {n_attr} spatial dims, input has {n}")
    return n


def _dims(x: TensorType, n: int) -> tuple[Dim, ...]:
    """``x``'s dims, all unknown when its rank is (``_spatial`` found ``n`` elsewhere)."""
    return x.shape if x.shape is not None else (None,) * (n + 2)


def _fill(v: tuple[int, ...], n: int, default: int) -> tuple[int, ...]:
    return v if v else (default,) * n


CONV_ATTRS = {
    "stride": Attr.ints(()),
    "padding": Attr.ints((), doc="[begin..., end...]; empty = no padding"),
    "dilation": Attr.ints(()),
    "groups": Attr.int(1),
}

# Layouts name the roles of the dims whatever the spatial rank ("HW" stands for every spatial
# dim): NCHW = channels at dim 1 (the default), NHWC = channels last. Kernels: OIHW (default),
# OHWI (TFLite's CONV_2D), IHWO (TFLite's DEPTHWISE_CONV_2D, I = C_in / groups), HWIO
# (TensorFlow's, TFLite's CONV_3D: DHWIO).
DATA_LAYOUTS = ("NCHW", "NHWC")
KERNEL_LAYOUTS = ("OIHW", "OHWI", "IHWO", "HWIO")
LAYOUT_ATTR = {
    "data_layout": Attr.str("NCHW", doc="NCHW | NHWC (channels first or last)", quiet=True)
}
KERNEL_ATTR = {"kernel_layout": Attr.str("OIHW", doc="OIHW | OHWI | IHWO | HWIO", quiet=True)}


def exact_resize_scale(size: int, out: int) -> float | None:
    """The float32 scale that resizes ``size`` to exactly ``out`` and maps coordinates as the
    sizes do (ONNX takes the output size as size * scale, and the scale as out / size when
    sizes are given): out / size in float32 when size * it is exactly out, else None."""
    scale = np.float32(out) / np.float32(size)
    return float(scale) if np.float32(size) * scale == np.float32(out) else None


def same_pads(sizes, kernel, strides, dilations, what: str = "SAME padding") -> list[int]:
    """TensorFlow's SAME padding (the extra pixel at the end), as [begins..., ends...], for the
    frontends of formats that write it (TFLite, Keras). A symbolic size is padded only when the
    stride is 1 (the total is then the kernel's span less one)."""
    from msc.errors import Unsupported

    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        span = (k - 1) * d + 1
        if not isinstance(size, int):
            if s != 1:
                raise Unsupported(f"{what} with stride {s} needs a static size")
            total = span - 1
        else:
            out = -(-size // s)
            total = max((out - 1) * s + span - size, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def layout_perm(layout: str, rank: int) -> list[int]:
    """The permutation taking a channels-first tensor of ``rank`` to ``layout``."""
    if layout == "NCHW":
        return list(range(rank))
    if layout == "NHWC":
        return [0, *range(2, rank), 1]
    raise InferError(f"unknown data layout {layout!r} (one of {', '.join(DATA_LAYOUTS)})")


def kernel_perm(layout: str, rank: int) -> list[int]:
    """The permutation taking an OIHW kernel of ``rank`` to ``layout``."""
    sp = list(range(2, rank))
    perms = {"OIHW": [0, 1, *sp], "OHWI": [0, *sp, 1], "IHWO": [1, *sp, 0], "HWIO": [*sp, 1, 0]}
    if layout not in perms:
        raise InferError(f"unknown kernel layout {layout!r} (one of {', '.join(KERNEL_LAYOUTS)})")
    return perms[layout]


def _permuted(t: TensorType | None, perm: list[int] | None) -> TensorType | None:
    if t is None or t.shape is None or perm is None:
        return t
    if len(perm) != len(t.shape):
        raise InferError(f"layout of rank {len(perm)} for a tensor of rank {len(t.shape)}")
    return TensorType(t.dtype, tuple(t.shape[p] for p in perm))


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _first(t: TensorType | None, layout: str) -> TensorType | None:
    """``t`` (in ``layout``) as channels first."""
    if t is None or t.shape is None or layout == "NCHW":
        return t
    return _permuted(t, _inverse(layout_perm(layout, len(t.shape))))


def _back(t: TensorType, layout: str) -> TensorType:
    """A channels-first result ``t`` in ``layout``."""
    if t.shape is None or layout == "NCHW":
        return t
    return _permuted(t, layout_perm(layout, len(t.shape)))


@registry.op(
    "conv",
    ["x", "weight", "bias?"],
    {**CONV_ATTRS, **LAYOUT_ATTR, **KERNEL_ATTR},
    category="conv",
)
def conv(
    x, weight, bias, *, stride, padding, dilation, groups, data_layout="NCHW", kernel_layout="OIHW"
) -> TensorType:
    """N-d convolution (1-3 spatial dims), weight [C_out, C_in/groups, *kernel] (OIHW; the
    ``kernel_layout`` names another order), input and output in ``data_layout``."""
    if data_layout != "NCHW" or kernel_layout != "OIHW":
        if weight.shape is not None:
            weight = _permuted(weight, _inverse(kernel_perm(kernel_layout, len(weight.shape))))
        out = conv(_first(x, data_layout), weight, bias, stride=stride, padding=padding,
                   dilation=dilation, groups=groups)  # fmt: skip
        return _back(out, data_layout)
    dt = same_dtype(x, weight, bias)
    n = _spatial(x, weight, len(stride), "conv")
    stride, dilation = _fill(stride, n, 1), _fill(dilation, n, 1)
    padding = _fill(padding, 2 * n, 0)
    if weight.shape is None:
        return TensorType(dt, None)
    xs, ws = _dims(x, n), weight.shape
    if len(ws) != n + 2:
        raise InferError(f"conv: weight rank {len(ws)} does not match input rank {len(xs)}")
    if known(xs[1]) and known(ws[1]) and xs[1] != ws[1] * groups:
        raise InferError(f"conv: input has {xs[1]} channels, weight expects {ws[1]} x {groups}")
    spatial = [
        conv_out(xs[2 + i], ws[2 + i], stride[i], padding[i] + padding[n + i], dilation[i])
        for i in range(n)
    ]
    return TensorType(dt, (xs[0], ws[0], *spatial))


@registry.op(
    "conv_transpose",
    ["x", "weight", "bias?"],
    {**CONV_ATTRS, "output_padding": Attr.ints(())},
    category="conv",
)
def conv_transpose(x, weight, bias, *, stride, padding, dilation, groups, output_padding):
    """N-d transposed convolution, weight [C_in, C_out/groups, *kernel]."""
    dt = same_dtype(x, weight, bias)
    n = _spatial(x, weight, len(stride), "conv_transpose")
    stride, dilation = _fill(stride, n, 1), _fill(dilation, n, 1)
    padding, output_padding = _fill(padding, 2 * n, 0), _fill(output_padding, n, 0)
    if weight.shape is None:
        return TensorType(dt, None)
    xs, ws = _dims(x, n), weight.shape
    spatial: list[Dim] = []
    for i in range(n):
        s, k = xs[2 + i], ws[2 + i]
        if known(s) and known(k):
            spatial.append(
                (s - 1) * stride[i]
                - padding[i]
                - padding[n + i]
                + dilation[i] * (k - 1)
                + output_padding[i]
                + 1
            )
        else:
            spatial.append(None)
    cout = ws[1] * groups if known(ws[1]) else None
    return TensorType(dt, (xs[0], cout, *spatial))


POOL_ATTRS = {
    "kernel": Attr.ints(),
    "stride": Attr.ints(()),
    "padding": Attr.ints(()),
    "dilation": Attr.ints(()),
    "ceil_mode": Attr.bool(False),
}


def _pool_shape(x: TensorType, kernel, stride, padding, dilation, ceil_mode, what):
    n = _spatial(x, None, len(kernel), what)
    stride = _fill(stride, n, 1) if stride else tuple(kernel)
    dilation, padding = _fill(dilation, n, 1), _fill(padding, 2 * n, 0)
    xs = _dims(x, n)
    sp = [
        pool_out(
            xs[2 + i], kernel[i], stride[i], padding[i], padding[n + i], dilation[i], ceil_mode
        )
        for i in range(n)
    ]
    return (xs[0], xs[1], *sp)


@registry.op(
    "max_pool",
    ["x"],
    {**POOL_ATTRS, "return_indices": Attr.bool(False), **LAYOUT_ATTR},
    outputs=lambda a: 2 if a["return_indices"] else 1,
    category="pool",
)
def max_pool(
    x, *, kernel, stride, padding, dilation, ceil_mode, return_indices, data_layout="NCHW"
):
    """N-d max pooling; stride defaults to the kernel. Indices (optional, i64) are flat over
    each channel's spatial dims, as torch returns them."""
    xf = _first(x, data_layout)
    shape = _pool_shape(xf, kernel, stride, padding, dilation, ceil_mode, "max_pool")
    out = [_back(TensorType(x.dtype, shape), data_layout)]
    if return_indices:
        out.append(_back(TensorType(DType.INT64, shape), data_layout))
    return out


@registry.op(
    "avg_pool",
    ["x"],
    {
        **{k: v for k, v in POOL_ATTRS.items() if k != "dilation"},
        "count_include_pad": Attr.bool(True),
        "divisor_override": Attr.int(None),
        **LAYOUT_ATTR,
    },
    category="pool",
)
def avg_pool(
    x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
    data_layout="NCHW",
):  # fmt: skip
    """N-d average pooling; stride defaults to the kernel."""
    xf = _first(x, data_layout)
    shape = _pool_shape(xf, kernel, stride, padding, (), ceil_mode, "avg_pool")
    return _back(TensorType(x.dtype, shape), data_layout)


@registry.op(
    "lp_pool",
    ["x"],
    {**{k: v for k, v in POOL_ATTRS.items()}, "p": Attr.float(2.0)},
    category="pool",
)
def lp_pool(x, *, kernel, stride, padding, dilation, ceil_mode, p):
    """N-d power-average pooling: (sum x^p)^(1/p) over each window."""
    return TensorType(x.dtype, _pool_shape(x, kernel, stride, padding, dilation, ceil_mode, "lp"))


def _adaptive(x: TensorType, output_size, what: str) -> tuple[Dim, ...]:
    n = _spatial(x, None, len(output_size), what)
    xs = _dims(x, n)
    return (
        xs[0],
        xs[1],
        *[xs[2 + i] if o is None or o < 0 else o for i, o in enumerate(output_size[:n])],
    )


@registry.op("adaptive_avg_pool", ["x"], {"output_size": Attr.ints()}, category="pool")
def adaptive_avg_pool(x, *, output_size):
    """N-d adaptive average pooling (torch semantics; -1 keeps that dim)."""
    return TensorType(x.dtype, _adaptive(x, output_size, "adaptive_avg_pool"))


@registry.op(
    "adaptive_max_pool",
    ["x"],
    {"output_size": Attr.ints(), "return_indices": Attr.bool(False)},
    outputs=lambda a: 2 if a["return_indices"] else 1,
    category="pool",
)
def adaptive_max_pool(x, *, output_size, return_indices):
    """N-d adaptive max pooling (torch semantics)."""
    shape = _adaptive(x, output_size, "adaptive_max_pool")
    out = [TensorType(x.dtype, shape)]
    if return_indices:
        out.append(TensorType(DType.INT64, shape))
    return out


@registry.op(
    "batch_norm",
    ["x", "weight?", "bias?", "running_mean", "running_var"],
    {"eps": Attr.float(1e-5)},
    category="norm",
)
def batch_norm(x, weight, bias, running_mean, running_var, *, eps):
    """Inference batch norm over dim 1 with running statistics."""
    return TensorType(same_dtype(x, weight, bias), x.shape)


@registry.op(
    "layer_norm",
    ["x", "weight?", "bias?"],
    {"axis": Attr.int(-1, doc="normalize over dims [axis, rank)"), "eps": Attr.float(1e-5)},
    category="norm",
)
def layer_norm(x, weight, bias, *, axis: int, eps: float):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing dims from ``axis``."""
    if x.shape is not None:
        check_axis(axis, len(x.shape))
    return TensorType(same_dtype(x, weight, bias), x.shape)


@registry.op(
    "rms_norm",
    ["x", "weight?"],
    {"axis": Attr.int(-1), "eps": Attr.float(1e-6)},
    category="norm",
)
def rms_norm(x, weight, *, axis: int, eps: float):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing dims from ``axis``."""
    return TensorType(same_dtype(x, weight), x.shape)


@registry.op(
    "group_norm",
    ["x", "weight?", "bias?"],
    {"num_groups": Attr.int(), "eps": Attr.float(1e-5)},
    category="norm",
)
def group_norm(x, weight, bias, *, num_groups: int, eps: float):
    """Normalize each of ``num_groups`` channel groups; per-channel affine weight and bias."""
    if x.shape is not None and len(x.shape) >= 2 and known(x.shape[1]):
        if x.shape[1] % num_groups:
            raise InferError(f"group_norm: {x.shape[1]} channels not divisible by {num_groups}")
    return TensorType(same_dtype(x, weight, bias), x.shape)


@registry.op("instance_norm", ["x", "weight?", "bias?"], {"eps": Attr.float(1e-5)}, category="norm")
def instance_norm(x, weight, bias, *, eps: float):
    """Normalize each (sample, channel) over its spatial dims; per-channel affine."""
    return TensorType(same_dtype(x, weight, bias), x.shape)


@registry.op(
    "lrn",
    ["x"],
    {
        "size": Attr.int(),
        "alpha": Attr.float(1e-4),
        "beta": Attr.float(0.75),
        "bias": Attr.float(1.0),
    },
    category="norm",
)
def lrn(x, *, size, alpha, beta, bias):
    """Local response normalization across channels (ONNX LRN, torch local_response_norm)."""
    return x


@registry.op("softmax", ["x"], {"axis": Attr.int(-1)}, category="softmax")
def softmax(x, *, axis):
    """exp(x) / sum(exp(x)) along ``axis``."""
    return x


@registry.op("log_softmax", ["x"], {"axis": Attr.int(-1)}, category="softmax")
def log_softmax(x, *, axis):
    """log(softmax(x)) along ``axis``."""
    return x


@registry.op(
    "attention",
    ["query", "key", "value", "mask?"],
    {
        "is_causal": Attr.bool(False),
        "scale": Attr.float(None, doc="none = 1/sqrt(head_dim)"),
        "enable_gqa": Attr.bool(False),
    },
    category="attention",
)
def attention(query, key, value, mask, *, is_causal, scale, enable_gqa):
    """Scaled dot-product attention over [..., L, E] x [..., S, E] x [..., S, Ev] -> [..., L, Ev].
    A bool mask keeps True positions; a float mask is added to the scores."""
    dt = same_dtype(query, key, value)
    if query.shape is None or value.shape is None:
        return TensorType(dt, None)
    return TensorType(dt, (*query.shape[:-1], value.shape[-1]))


@registry.op("embedding", ["weight", "indices"], {"padding_idx": Attr.int(None)}, category="nn")
def embedding(weight, indices, *, padding_idx):
    """weight[indices]: rows of a [num, dim] table (torch.nn.Embedding)."""
    if indices.dtype not in (DType.INT32, DType.INT64):
        raise InferError(f"embedding: indices must be i32 or i64, got {indices.dtype.short}")
    if weight.shape is None or indices.shape is None:
        return TensorType(weight.dtype, None)
    return TensorType(weight.dtype, (*indices.shape, weight.shape[-1]))


@registry.op(
    "resize",
    ["x", "scales?", "sizes?", "roi?"],
    {
        "sizes": Attr.ints(None, doc="output spatial sizes"),
        "scales": Attr.floats(None, doc="spatial scale factors"),
        "mode": Attr.str("nearest", doc="nearest | linear | cubic"),
        "coordinate_transformation_mode": Attr.str("half_pixel"),
        "nearest_mode": Attr.str("round_prefer_floor"),
        "cubic_coeff_a": Attr.float(-0.75),
        "antialias": Attr.bool(False),
        "exclude_outside": Attr.bool(False, doc="linear/cubic taps off the input weigh 0"),
        "roi": Attr.floats(None, doc="tf_crop_and_resize: spatial [starts..., ends...], 0..1"),
        "extrapolation_value": Attr.float(0.0, doc="tf_crop_and_resize: outside the input"),
    },
    category="nn",
)
def resize(
    x,
    scales_in,
    sizes_in,
    roi_in,
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
):
    """Resize the spatial dims (all dims after the first two) by sizes or scales; ONNX Resize
    semantics, which cover torch's interpolate modes. Scales or sizes computed at run time come
    as a 1-d input with one entry per dim of x (f32 scales, i64 sizes; the first two leave N
    and C as they are) instead of the spatial-only attribute. tf_crop_and_resize samples the
    box ``roi`` (or a run-time f32 roi input of [starts, ends] for every dim of x) and gives
    extrapolation_value where a sample falls outside the input."""
    given = [v is not None for v in (sizes, scales, scales_in, sizes_in)]
    if sum(given) != 1:
        raise InferError("resize: give exactly one of sizes, scales and their run-time inputs")
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    if crop != (roi is not None or roi_in is not None) or (roi is not None and roi_in is not None):
        raise InferError("resize: tf_crop_and_resize takes exactly one roi, other modes none")
    if scales_in is not None or sizes_in is not None:
        n = _spatial(x, None, 0, "resize")
        t = scales_in if scales_in is not None else sizes_in
        if t.rank != 1 or (known(t.shape[0]) and t.shape[0] != n + 2):
            raise InferError(f"resize: run-time scales/sizes must be 1-d of {n + 2}, got {t}")
        return TensorType(x.dtype, (*x.shape[:2], *(None,) * n))
    n = _spatial(x, None, len(sizes or scales), "resize")
    if sizes is not None:
        return TensorType(x.dtype, (*x.shape[:2], *sizes))
    if roi_in is not None:  # the box's size scales the output: known at run time
        return TensorType(x.dtype, (*x.shape[:2], *(None,) * n))
    box = [1.0] * n if roi is None else [e - b for b, e in zip(roi[:n], roi[n:])]
    sp = [int(d * b * s) if known(d) else None for d, b, s in zip(x.shape[2:], box, scales)]
    return TensorType(x.dtype, (*x.shape[:2], *sp))


@registry.op("pixel_shuffle", ["x"], {"upscale_factor": Attr.int()}, category="nn")
def pixel_shuffle(x, *, upscale_factor):
    """[N, C*r^2, H, W] -> [N, C, H*r, W*r] (torch.nn.PixelShuffle, ONNX DepthToSpace CRD)."""
    r = upscale_factor
    if x.shape is None or len(x.shape) < 3:
        raise InferError("pixel_shuffle: input must have rank >= 3")
    c, h, w = x.shape[-3:]
    mul = lambda d, k: d * k if known(d) else None  # noqa: E731
    return TensorType(
        x.dtype, (*x.shape[:-3], c // (r * r) if known(c) else None, mul(h, r), mul(w, r))
    )
