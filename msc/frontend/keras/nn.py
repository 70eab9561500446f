"""Keras neural-network layers: Dense, EinsumDense, Dot, Embedding, convolutions (Conv1D-3D,
depthwise, separable, transposed), pooling (adaptive too), normalizations, the attention
layers (MultiHeadAttention, Attention, AdditiveAttention) with their masks.

Keras images are channels_last and its conv kernels [*kernel, in, out] (depthwise:
[*kernel, in, multiplier]). The canonical ops take channels first: ``first`` / ``last`` put
the transposes at the op's boundary, which msc.ops' transpose sinking cancels between ops.
Kernels stay weights in Keras' layout, transposed by a node.
"""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.keras.elementwise import activate
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ir import Value
from msc.ops.nn import same_pads


def first(ctx: Ctx, x: Value) -> Value:
    """channels_last -> channels first (nothing for a channels_first layer)."""
    if _cf(ctx):
        return x
    r = x.type.rank
    return ctx.op("transpose", x, perm=[0, r - 1, *range(1, r - 1)])


def last(ctx: Ctx, y: Value) -> Value:
    """channels first -> channels_last (nothing for a channels_first layer)."""
    if _cf(ctx):
        return y
    r = y.type.rank
    return ctx.op("transpose", y, perm=[0, *range(2, r), 1])


def _cf(ctx: Ctx) -> bool:
    return getattr(ctx.layer, "data_format", "channels_last") == "channels_first"


def _channels_last(layer) -> None:
    """The layer's data_format is one msc reads (channels_last, or channels_first)."""
    fmt = getattr(layer, "data_format", "channels_last")
    if fmt not in ("channels_last", "channels_first"):
        raise Unsupported(f"data_format={fmt!r}")


def _spatial(ctx: Ctx, x: Value) -> list:
    return list(x.type.shape[2:] if _cf(ctx) else x.type.shape[1:-1])


def _pads(ctx: Ctx, layer, x: Value, kernel, strides, dilations) -> list[int]:
    padding = layer.padding
    n = len(kernel)
    if padding == "valid":
        return [0] * (2 * n)
    if padding == "same":
        pads = same_pads(_spatial(ctx, x), kernel, strides, dilations, 'padding="same"')
    elif padding == "causal" and n == 1:
        pads = [(kernel[0] - 1) * dilations[0], 0]
    else:
        raise Unsupported(f"padding={padding!r}")
    return pads


def _tuple(v, n: int) -> list[int]:
    return [int(a) for a in v] if isinstance(v, list | tuple) else [int(v)] * n


def _conv(ctx: Ctx, layer, x: Value, w_oi: Value, groups: int, n: int, bias=None) -> Value:
    kernel = _tuple(layer.kernel_size, n)
    strides = _tuple(layer.strides, n)
    dilations = _tuple(layer.dilation_rate, n)
    if x.type.rank != n + 2:
        raise Unsupported(f"input of rank {x.type.rank} for a {n}-d convolution")
    pads = _pads(ctx, layer, x, kernel, strides, dilations)
    y = ctx.op(
        "conv",
        first(ctx, x),
        w_oi,
        bias,
        stride=strides,
        padding=pads,
        dilation=dilations,
        groups=groups,
    )
    return last(ctx, y)


def _kernel_oi(ctx: Ctx, kernel: Value, n: int) -> Value:
    """[*k, in, out] -> [out, in, *k]."""
    return ctx.op("transpose", kernel, perm=[n + 1, n, *range(n)])


def _bias(ctx: Ctx, layer) -> Value | None:
    return ctx.weight(layer.bias) if getattr(layer, "use_bias", False) else None


@converter("Conv1D", "Conv2D", "Conv3D")
def conv(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = layer.rank
    groups = int(getattr(layer, "groups", 1))
    y = _conv(
        ctx, layer, x, _kernel_oi(ctx, ctx.weight(layer.kernel), n), groups, n, _bias(ctx, layer)
    )
    return activate(ctx, y, layer.activation)


def _depthwise_oi(ctx: Ctx, kernel: Value, n: int) -> Value:
    """[*k, in, mult] -> [in * mult, 1, *k] (output channel c * mult + m, as Keras orders)."""
    k = list(kernel.type.shape[:n])
    cin, mult = kernel.type.shape[n], kernel.type.shape[n + 1]
    t = ctx.op("transpose", kernel, perm=[n, n + 1, *range(n)])
    return ctx.op("reshape", t, shape=[cin * mult, 1, *k])


@converter("DepthwiseConv1D", "DepthwiseConv2D")
def depthwise_conv(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = layer.rank
    kernel = ctx.weight(layer.kernel)
    cin = kernel.type.shape[n]
    y = _conv(ctx, layer, x, _depthwise_oi(ctx, kernel, n), int(cin), n, _bias(ctx, layer))
    return activate(ctx, y, layer.activation)


@converter("SeparableConv1D", "SeparableConv2D")
def separable_conv(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = layer.rank
    dw = ctx.weight(layer.depthwise_kernel)
    cin = dw.type.shape[n]
    y = _conv(ctx, layer, x, _depthwise_oi(ctx, dw, n), int(cin), n)
    pw = _kernel_oi(ctx, ctx.weight(layer.pointwise_kernel), n)
    y = ctx.op(
        "conv",
        first(ctx, y),
        pw,
        _bias(ctx, layer),
        stride=[1] * n,
        padding=[0] * (2 * n),
        dilation=[1] * n,
        groups=1,
    )
    return activate(ctx, last(ctx, y), layer.activation)


@converter("Dense")
def dense(ctx: Ctx, layer, x):
    w = ctx.op("transpose", ctx.weight(layer.kernel), perm=[1, 0])  # [in, out] -> [out, in]
    y = ctx.op("linear", x, w, _bias(ctx, layer))
    return activate(ctx, y, layer.activation)


@converter("Embedding")
def embedding(ctx: Ctx, layer, ids):
    if ids.dtype.is_floating:  # Keras casts float ids to int32
        from msc.ir import DType

        ids = ctx.cast(ids, DType.INT32)
    return ctx.op("embedding", ctx.weight(layer.embeddings), ids)


def _pool_args(layer, n: int):
    kernel = _tuple(layer.pool_size, n)
    strides = _tuple(layer.strides if layer.strides is not None else kernel, n)
    return kernel, strides


@converter("MaxPooling1D", "MaxPooling2D", "MaxPooling3D")
def max_pool(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = x.type.rank - 2
    kernel, strides = _pool_args(layer, n)
    pads = _pads(ctx, layer, x, kernel, strides, [1] * n)
    y = ctx.op(
        "max_pool", first(ctx, x), kernel=kernel, stride=strides, padding=pads, dilation=[1] * n
    )
    return last(ctx, y)


@converter("AveragePooling1D", "AveragePooling2D", "AveragePooling3D")
def avg_pool(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = x.type.rank - 2
    kernel, strides = _pool_args(layer, n)
    pads = _pads(ctx, layer, x, kernel, strides, [1] * n)
    y = ctx.op(
        "avg_pool",
        first(ctx, x),
        kernel=kernel,
        stride=strides,
        padding=pads,
        count_include_pad=False,
    )
    return last(ctx, y)


def _global(ctx: Ctx, layer, x: Value, op: str) -> Value:
    _channels_last(layer)
    r = x.type.rank
    axes = list(range(2, r)) if _cf(ctx) else list(range(1, r - 1))
    return ctx.op(op, x, axes=axes, keepdims=bool(layer.keepdims))


@converter("GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D")
def global_avg_pool(ctx: Ctx, layer, x, mask=None):
    if mask is None:
        return _global(ctx, layer, x, "reduce_mean")
    # Keras: the mean over the unmasked steps, sum(where(mask, x, 0)) / count
    _channels_last(layer)
    if x.type.rank != 3:
        raise Unsupported(f"a mask on an input of rank {x.type.rank}")
    axis = 2 if _cf(ctx) else 1
    m = ctx.op("unsqueeze", _bool(ctx, mask), axes=[3 - axis])
    zeros = ctx.f32(0.0, x)
    total = ctx.op("reduce_sum", ctx.op("where", m, x, zeros), axes=[axis], keepdims=layer.keepdims)
    count = ctx.op(
        "reduce_sum", ctx.op("cast", m, to=x.dtype), axes=[axis], keepdims=layer.keepdims
    )
    return ctx.op("div", total, count)


def _bool(ctx: Ctx, mask: Value) -> Value:
    from msc.ir import DType

    return mask if mask.dtype is DType.BOOL else ctx.op("cast", mask, to=DType.BOOL)


@converter("GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D")
def global_max_pool(ctx: Ctx, layer, x):
    return _global(ctx, layer, x, "reduce_max")


def _axis_to_1(ctx: Ctx, x: Value, axis: int) -> tuple[Value, list[int] | None]:
    r = x.type.rank
    axis = axis % r
    if axis == 1:
        return x, None
    perm = [0, axis, *[a for a in range(1, r) if a != axis]]
    inv = [perm.index(a) for a in range(r)]
    return ctx.op("transpose", x, perm=perm), inv


@converter("BatchNormalization")
def batch_norm(ctx: Ctx, layer, x):
    axis = layer.axis
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            raise Unsupported(f"axis={list(axis)}")
        axis = axis[0]
    if getattr(layer, "renorm", False):
        raise Unsupported("renorm=True")
    xt, inv = _axis_to_1(ctx, x, int(axis))
    gamma = ctx.weight(layer.gamma) if layer.scale else None
    beta = ctx.weight(layer.beta) if layer.center else None
    y = ctx.op(
        "batch_norm",
        xt,
        gamma,
        beta,
        ctx.weight(layer.moving_mean),
        ctx.weight(layer.moving_variance),
        eps=float(layer.epsilon),
    )
    return y if inv is None else ctx.op("transpose", y, perm=inv)


@converter("LayerNormalization")
def layer_norm(ctx: Ctx, layer, x):
    r = x.type.rank
    axes = layer.axis if isinstance(layer.axis, list | tuple) else [layer.axis]
    axes = sorted(int(a) % r for a in axes)
    if axes != list(range(axes[0], r)):
        raise Unsupported(f"axis={list(layer.axis)} (msc normalizes trailing dims)")
    if getattr(layer, "rms_scaling", False):
        raise Unsupported("rms_scaling=True")
    gamma = ctx.weight(layer.gamma) if layer.scale else None
    beta = ctx.weight(layer.beta) if layer.center else None
    if len(axes) > 1 and (gamma is not None or beta is not None):
        shape = list(x.type.shape[axes[0] :])
        gamma = None if gamma is None else ctx.op("reshape", gamma, shape=shape)
        beta = None if beta is None else ctx.op("reshape", beta, shape=shape)
    return ctx.op("layer_norm", x, gamma, beta, axis=axes[0] - r, eps=float(layer.epsilon))


def merged_mask(ctx: Ctx, q_mask, v_mask, k_mask, mask, causal: bool, tq, ts):
    """Keras' attention mask [B, T, S] (bool) from the inputs' masks, an explicit mask and
    the causal one, merged with logical and (``MultiHeadAttention._compute_attention_mask``);
    None when there is none."""
    parts = []
    if q_mask is not None:
        parts.append(ctx.op("unsqueeze", _bool(ctx, q_mask), axes=[2]))
    for m in (v_mask, k_mask):
        if m is not None:
            parts.append(ctx.op("unsqueeze", _bool(ctx, m), axes=[1]))
    if mask is not None:
        parts.append(_bool(ctx, mask))
    if causal:
        if not (isinstance(tq, int) and isinstance(ts, int)):
            raise Unsupported("a causal mask over a symbolic length")
        tri = np.tril(np.ones((tq, ts), dtype=bool))[None]
        from msc.ir import DType

        parts.append(ctx.const(tri, DType.BOOL))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = ctx.op("logical_and", out, p)
    return out


def additive_mask(ctx: Ctx, mask: Value, like: Value) -> Value:
    """A bool mask as the additive float mask Keras' torch backend gives
    scaled_dot_product_attention: 0 where kept, a large negative number where masked (a row
    masked whole attends uniformly, as in Keras, instead of giving NaN)."""
    big = float(np.finfo(like.dtype.to_numpy()).min) * 0.7
    return ctx.op("where", mask, ctx.f32(0.0, like), ctx.f32(big, like))


def softmax_path_zeros(ctx: Ctx, dropout: float, a: Value, mask: Value) -> Value:
    """With dropout > 0 Keras computes attention through its Softmax layer, not
    dot_product_attention, and that layer zeroes a query row whose keys are all masked
    (dot_product_attention gives it a uniform average); the same here, at inference."""
    if float(dropout) <= 0.0:
        return a
    keep = ctx.op("reduce_any", mask, axes=[-1], keepdims=True)  # [B, 1, T, 1]
    return ctx.op("where", keep, a, ctx.f32(0.0, a))


@converter("MultiHeadAttention")
def multi_head_attention(
    ctx: Ctx,
    layer,
    query,
    value,
    key=None,
    attention_mask=None,
    query_mask=None,
    value_mask=None,
    key_mask=None,
):
    flags = ctx.call_kwargs
    if flags.get("return_attention_scores"):
        raise Unsupported("return_attention_scores=True")
    causal = bool(flags.get("use_causal_mask", False))
    if key is value:
        key_mask = None
    if layer._attention_axes not in (None, (1,), [1]) and query.type.rank != 3:
        raise Unsupported(f"attention_axes={layer._attention_axes}")
    if query.type.rank != 3 or value.type.rank != 3:
        raise Unsupported("inputs of rank other than 3")
    key = value if key is None else key
    heads, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim

    def project(x: Value, dense, d: int) -> Value:
        # EinsumDense kernel [in, heads, d] (+ bias [heads, d]) -> [B, heads, T, d]
        k = dense.kernel
        w = ctx.op("reshape", ctx.weight(k), shape=[int(k.shape[0]), heads * d])
        w = ctx.op("transpose", w, perm=[1, 0])
        b = None
        if dense.bias is not None:
            b = ctx.op("reshape", ctx.weight(dense.bias), shape=[heads * d])
        y = ctx.op("linear", x, w, b)
        y = _split(ctx, y, heads, d)
        return ctx.op("transpose", y, perm=[0, 2, 1, 3])

    q = project(query, layer._query_dense, dk)
    k = project(key, layer._key_dense, dk)
    v = project(value, layer._value_dense, dv)
    scale = float(1.0 / np.sqrt(dk))
    tq, ts = query.type.shape[1], value.type.shape[1]
    m = merged_mask(ctx, query_mask, value_mask, key_mask, attention_mask, False, tq, ts)
    if m is None:
        a = ctx.op("attention", q, k, v, is_causal=causal, scale=scale)  # [B, H, T, dv]
    else:
        if causal:  # Keras merges the causal mask into the others
            m = merged_mask(ctx, None, None, None, m, True, tq, ts)
        m = ctx.op("unsqueeze", m, axes=[1])
        a = ctx.op("attention", q, k, v, additive_mask(ctx, m, q), scale=scale)
        a = softmax_path_zeros(ctx, layer._dropout, a, m)
    a = ctx.op("transpose", a, perm=[0, 2, 1, 3])
    a = ctx.op("flatten", a, start_axis=2, end_axis=3)
    out = layer._output_dense
    kw = out.kernel  # [heads, dv, out]
    w = ctx.op("reshape", ctx.weight(kw), shape=[heads * dv, int(kw.shape[-1])])
    w = ctx.op("transpose", w, perm=[1, 0])
    b = None if out.bias is None else ctx.weight(out.bias)
    return ctx.op("linear", a, w, b)


def _split(ctx: Ctx, y: Value, heads: int, d: int) -> Value:
    """[B, T, heads * d] -> [B, T, heads, d] (batch and length may be symbolic)."""
    shape = list(y.type.shape)
    if all(isinstance(s, int) for s in shape[:2]):
        return ctx.op("reshape", y, shape=[shape[0], shape[1], heads, d])
    if isinstance(shape[1], int):
        return ctx.op("reshape", y, shape=[-1, shape[1], heads, d])
    raise Unsupported("a symbolic sequence length with a symbolic batch")


@converter("ops.DotProductAttention")
def dot_product_attention_op(ctx: Ctx, op, q, k, v, bias=None, mask=None, scale=None):
    """[batch, length, heads, dim] operands: transposed to the canonical heads-first form;
    a bias (added to the scores) or a bool mask, both [batch, heads, length, source]; one
    computed without the model's inputs (a causal mask) is a constant of the graph."""
    if bias is not None and mask is not None:
        raise Unsupported("both a bias and a mask")
    extra = bias if bias is not None else mask
    if extra is not None and not isinstance(extra, Value):
        from msc.frontend.keras.importer import to_numpy
        from msc.ir import DType

        a = to_numpy(extra)
        extra = ctx.const(a, DType.from_numpy(a.dtype))
    if getattr(op, "attn_logits_soft_cap", None) is not None:
        raise Unsupported("attn_logits_soft_cap")
    if any(t.type.rank != 4 for t in (q, k, v)):
        raise Unsupported("operands of rank other than 4")
    perm = [0, 2, 1, 3]
    q, k, v = (ctx.op("transpose", t, perm=perm) for t in (q, k, v))
    kw = {} if scale is None else {"scale": float(scale)}
    # Keras groups query heads over fewer key / value heads itself (GQA when N is a multiple
    # of K): grouped unless the head counts are known equal
    qh, kh = q.type.shape[1], k.type.shape[1]
    if qh is None or qh != kh:
        kw["enable_gqa"] = True
    y = ctx.op("attention", q, k, v, extra, is_causal=bool(op.is_causal), **kw)
    return ctx.op("transpose", y, perm=perm)


@converter("ops.Einsum")
def einsum_op(ctx: Ctx, op, *xs):
    return ctx.op("einsum", *xs, equation=str(op.subscripts))


@converter("ops.Matmul")
def matmul_op(ctx: Ctx, op, a, b):
    from msc.frontend.keras.elementwise import operand

    like = a if isinstance(a, Value) else b
    if not isinstance(like, Value):
        raise Unsupported("no tensor operand")
    return ctx.op("matmul", operand(ctx, a, like), operand(ctx, b, like))


@converter("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
def conv_transpose(ctx: Ctx, layer, x):
    _channels_last(layer)
    n = layer.rank
    if layer.padding not in ("valid", "same"):
        raise Unsupported(f"padding={layer.padding!r}")
    strides = _tuple(layer.strides, n)
    dilations = _tuple(layer.dilation_rate, n)
    kernel = _tuple(layer.kernel_size, n)
    given = getattr(layer, "output_padding", None)
    given = None if given is None else _tuple(given, n)
    begins, ends, extra = [], [], []
    for i, (k, s, d) in enumerate(zip(kernel, strides, dilations)):
        b, e, x_ = transpose_padding(k, s, d, layer.padding, None if given is None else given[i])
        begins.append(b)
        ends.append(e)
        extra.append(x_)
    # Keras' kernel [*k, out, in] -> [in, out, *k] (torch's ConvTranspose weight)
    w = ctx.op("transpose", ctx.weight(layer.kernel), perm=[n + 1, n, *range(n)])
    y = ctx.op(
        "conv_transpose",
        first(ctx, x),
        w,
        _bias(ctx, layer),
        stride=strides,
        padding=begins + ends,
        dilation=dilations,
        groups=1,
        output_padding=extra,
    )
    return activate(ctx, last(ctx, y), layer.activation)


def transpose_padding(k: int, s: int, d: int, padding: str, out_pad: int | None):
    """One axis of a Keras transposed convolution as the canonical op's (crop at the start,
    crop at the end, output_padding), as Keras computes it
    (``compute_conv_transpose_output_crops_for_torch``: the full (in - 1) * s + k output
    cropped to the window JAX's padding gives, a negative crop at the end is zeros added):
    "valid" gives (in - 1) * s + max(k, s), "same" gives in * s."""
    k = (k - 1) * d + 1
    if padding == "valid":
        extra = max(k, s) - k if out_pad is None else out_pad
        left, right = k - 1, k - 1 + extra
    else:
        pad_len = s + k - 2 if out_pad is None else k + k % 2 - 2 + out_pad
        left = min(pad_len // 2 + pad_len % 2, k - 1)
        right = pad_len - left
    begin, end = k - 1 - left, k - 1 - right
    return begin, max(end, 0), max(-end, 0)


def _resize_to(sizes, scales) -> dict:
    """The output sizes when the input's are static (what every target reads best), else
    the scales."""
    if all(isinstance(d, int) for d in sizes):
        return {"sizes": [int(d) * int(s) for d, s in zip(sizes, scales)]}
    return {"scales": [float(s) for s in scales]}


@converter("UpSampling1D")
def upsampling_1d(ctx: Ctx, layer, x):
    # repeats each step along axis 1: a nearest resize of [batch, channels, length]
    s = int(layer.size)
    y = ctx.op(
        "resize",
        ctx.op("transpose", x, perm=[0, 2, 1]),
        **_resize_to(x.type.shape[1:2], [s]),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    return ctx.op("transpose", y, perm=[0, 2, 1])


@converter("UpSampling3D")
def upsampling_3d(ctx: Ctx, layer, x):
    _channels_last(layer)
    sizes = _tuple(layer.size, 3)
    y = ctx.op(
        "resize",
        first(ctx, x),
        **_resize_to(_spatial(ctx, x), sizes),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    return last(ctx, y)


@converter("UpSampling2D")
def upsampling_2d(ctx: Ctx, layer, x):
    _channels_last(layer)
    sh, sw = _tuple(layer.size, 2)
    interp = layer.interpolation
    if interp == "nearest":
        kw = {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        }
    elif interp == "bilinear":
        kw = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    else:
        raise Unsupported(f"interpolation={interp!r}")
    y = ctx.op("resize", first(ctx, x), **_resize_to(x.type.shape[1:3], [sh, sw]), **kw)
    return last(ctx, y)


@converter("UnitNormalization")
def unit_normalization(ctx: Ctx, layer, x):
    """Keras' ``ops.normalize(x, axis, epsilon=1e-12)``: x * min(rsqrt(sum(x^2)), 1e12)."""
    r = x.type.rank
    axes = layer.axis if isinstance(layer.axis, list | tuple) else [layer.axis]
    axes = sorted(int(a) % r for a in axes)
    s = ctx.op("reduce_sum", ctx.op("mul", x, x), axes=axes, keepdims=True)
    inv = ctx.op("minimum", ctx.op("rsqrt", s), ctx.f32(1e12, x))
    return ctx.op("mul", x, inv)


@converter("RMSNormalization")
def rms_normalization(ctx: Ctx, layer, x):
    r = x.type.rank
    axes = layer.axis if isinstance(layer.axis, list | tuple) else [layer.axis]
    axes = sorted(int(a) % r for a in axes)
    if axes != list(range(axes[0], r)):
        raise Unsupported(f"axis={layer.axis} (msc normalizes trailing dims)")
    scale = ctx.weight(layer.scale)
    if len(axes) > 1:
        scale = ctx.op("reshape", scale, shape=list(x.type.shape[axes[0] :]))
    return ctx.op("rms_norm", x, scale, axis=axes[0] - r, eps=float(layer.epsilon))


@converter("GroupNormalization")
def group_normalization(ctx: Ctx, layer, x):
    """The canonical group_norm (channels at axis 1): the channel axis moved there and back."""
    xt, inv = _axis_to_1(ctx, x, int(layer.axis))
    gamma = ctx.weight(layer.gamma) if layer.scale else None
    beta = ctx.weight(layer.beta) if layer.center else None
    y = ctx.op(
        "group_norm", xt, gamma, beta, num_groups=int(layer.groups), eps=float(layer.epsilon)
    )
    return y if inv is None else ctx.op("transpose", y, perm=inv)


def _adaptive(ctx: Ctx, layer, x, op: str) -> Value:
    _channels_last(layer)
    n = x.type.rank - 2
    size = _tuple(layer.output_size, n)
    return last(ctx, ctx.op(op, first(ctx, x), output_size=size))


@converter("AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D")
def adaptive_avg_pool(ctx: Ctx, layer, x):
    return _adaptive(ctx, layer, x, "adaptive_avg_pool")


@converter("AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D")
def adaptive_max_pool(ctx: Ctx, layer, x):
    return _adaptive(ctx, layer, x, "adaptive_max_pool")


def _scores_masked(ctx: Ctx, scores: Value, keep: Value | None) -> Value:
    """Keras' ``_apply_scores``: masked scores lowered by 1e9, then softmax."""
    if keep is not None:
        lowered = ctx.op("sub", scores, ctx.f32(1e9, scores))
        scores = ctx.op("where", keep, scores, lowered)
    return ctx.op("softmax", scores, axis=-1)


def _attention_layer(ctx: Ctx, layer, xs, mask, scores_fn) -> Value:
    flags = ctx.call_kwargs
    if flags.get("return_attention_scores"):
        raise Unsupported("return_attention_scores=True")
    if len(xs) not in (2, 3):
        raise Unsupported(f"{len(xs)} inputs (Keras takes [query, value] or [query, value, key])")
    q, v = xs[0], xs[1]
    k = xs[2] if len(xs) > 2 else v
    q_mask, v_mask = (list(mask) + [None, None])[:2] if mask else (None, None)
    scores = scores_fn(q, k)  # [B, Tq, Tv]
    keep = None if v_mask is None else ctx.op("unsqueeze", _bool(ctx, v_mask), axes=[1])
    if flags.get("use_causal_mask"):
        tq, tv = scores.type.shape[1], scores.type.shape[2]
        keep = merged_mask(ctx, None, None, None, keep, True, tq, tv)
    out = ctx.op("matmul", _scores_masked(ctx, scores, keep), v)
    if q_mask is not None:
        qm = ctx.op("unsqueeze", _bool(ctx, q_mask), axes=[2])
        out = ctx.op("where", qm, out, ctx.f32(0.0, out))
    return out


@converter("Attention")
def attention_layer(ctx: Ctx, layer, *xs, mask=None):
    """Luong-style attention: dot scores (times ``scale`` with use_scale), or "concat"
    scores ``concat_score_weight * sum(tanh(scale * (q + k)))``."""

    def scores(q: Value, k: Value) -> Value:
        if layer.score_mode == "dot":
            s = ctx.op("matmul", q, ctx.op("transpose", k, perm=[0, 2, 1]))
            return s if layer.scale is None else ctx.op("mul", s, ctx.weight(layer.scale))
        if layer.score_mode != "concat":
            raise Unsupported(f"score_mode={layer.score_mode!r}")
        t = ctx.op("add", ctx.op("unsqueeze", q, axes=[2]), ctx.op("unsqueeze", k, axes=[1]))
        if layer.scale is not None:
            t = ctx.op("mul", t, ctx.weight(layer.scale))
        s = ctx.op("reduce_sum", ctx.op("tanh", t), axes=[-1], keepdims=False)
        return ctx.op("mul", s, ctx.weight(layer.concat_score_weight))

    return _attention_layer(ctx, layer, xs, mask, scores)


@converter("AdditiveAttention")
def additive_attention(ctx: Ctx, layer, *xs, mask=None):
    """Bahdanau-style attention: scores ``sum(scale * tanh(q + k))``."""

    def scores(q: Value, k: Value) -> Value:
        t = ctx.op("add", ctx.op("unsqueeze", q, axes=[2]), ctx.op("unsqueeze", k, axes=[1]))
        t = ctx.op("tanh", t)
        if layer.use_scale:
            t = ctx.op("mul", t, ctx.weight(layer.scale))
        return ctx.op("reduce_sum", t, axes=[-1], keepdims=False)

    return _attention_layer(ctx, layer, xs, mask, scores)


# ---------------------------------------------------------------- contractions (einsum)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@converter("EinsumDense")
def einsum_dense(ctx: Ctx, layer, x):
    """``einsum(equation, x, kernel) + bias``, then the activation (Keras' own order)."""
    if getattr(layer, "lora_enabled", False):
        raise Unsupported("lora_rank (merge the LoRA weights into the kernel first)")
    y = ctx.op("einsum", x, ctx.weight(layer.kernel), equation=str(layer.equation))
    if layer.bias is not None:
        y = ctx.op("add", y, ctx.weight(layer.bias))
    return activate(ctx, y, layer.activation)


def _l2_normalize(ctx: Ctx, x: Value, axis: int) -> Value:
    """Keras' ``ops.normalize(x, axis)``: x * min(rsqrt(sum(x^2)), 1 / epsilon)."""
    s = ctx.op("reduce_sum", ctx.op("mul", x, x), axes=[axis], keepdims=True)
    inv = ctx.op("minimum", ctx.op("rsqrt", s), ctx.f32(1.0 / 1e-7, x))
    return ctx.op("mul", x, inv)


@converter("Dot")
def dot(ctx: Ctx, layer, a, b):
    """Keras' batch_dot over ``axes``: the output holds a's other axes, then b's; a rank-2
    pair gives [batch, 1]."""
    axes = layer.axes if isinstance(layer.axes, list | tuple) else [layer.axes] * 2
    ra, rb = a.type.rank, b.type.rank
    ax = [int(axes[0]) % ra, int(axes[1]) % rb]
    if 0 in ax:
        raise Unsupported("a dot over the batch axis")
    if layer.normalize:
        a, b = _l2_normalize(ctx, a, ax[0]), _l2_normalize(ctx, b, ax[1])
    if ra + rb - 1 > len(_LETTERS):
        raise Unsupported("operands of too high a rank")
    sa = ["a"] + [_LETTERS[1 + i] for i in range(ra - 1)]
    sb = ["a"] + [_LETTERS[ra + i] for i in range(rb - 1)]
    sb[ax[1]] = sa[ax[0]]
    out = ["a"] + [c for i, c in enumerate(sa) if i not in (0, ax[0])]
    out += [c for i, c in enumerate(sb) if i not in (0, ax[1])]
    y = ctx.op("einsum", a, b, equation=f"{''.join(sa)},{''.join(sb)}->{''.join(out)}")
    if len(out) == 1:
        y = ctx.op("unsqueeze", y, axes=[1])
    return y


@converter("GroupedQueryAttention")
def grouped_query_attention(
    ctx: Ctx,
    layer,
    query,
    value,
    key=None,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
):
    """Keras' GroupedQueryAttention: its EinsumDense projections (their own converter), each
    key/value head repeated for its group of query heads (``ops.repeat`` on axis 2), scaled
    dot-product attention with the masks merged as MultiHeadAttention merges them, the
    optional sigmoid gate, and the output projection."""
    flags = ctx.call_kwargs
    if flags.get("return_attention_scores"):
        raise Unsupported("return_attention_scores=True")
    if getattr(layer, "sliding_window", None) is not None:
        raise Unsupported("sliding_window")
    causal = bool(flags.get("use_causal_mask", False))
    if key is None:
        key, key_mask = value, None
    q = ctx.sublayer(layer._query_dense, query)  # [B, T, heads, dim]
    k = ctx.sublayer(layer._key_dense, key)  # [B, S, kv heads, dim]
    v = ctx.sublayer(layer._value_dense, value)
    n = int(layer.num_repeats)
    if n > 1:
        k, v = (_repeat_heads(ctx, t, n) for t in (k, v))
    perm = [0, 2, 1, 3]
    q, k, v = (ctx.op("transpose", t, perm=perm) for t in (q, k, v))
    scale = float(1.0 / np.sqrt(int(layer.head_dim)))
    tq, ts = query.type.shape[1], value.type.shape[1]
    m = merged_mask(ctx, query_mask, value_mask, key_mask, attention_mask, False, tq, ts)
    if m is None:
        a = ctx.op("attention", q, k, v, is_causal=causal, scale=scale)
    else:
        if causal:
            m = merged_mask(ctx, None, None, None, m, True, tq, ts)
        m = ctx.op("unsqueeze", m, axes=[1])
        a = ctx.op("attention", q, k, v, additive_mask(ctx, m, q), scale=scale)
        a = softmax_path_zeros(ctx, layer.dropout, a, m)
    a = ctx.op("transpose", a, perm=perm)  # [B, T, heads, dim]
    if getattr(layer, "use_gate", False):
        a = ctx.op("mul", a, ctx.sublayer(layer._gate_dense, query))
    return ctx.sublayer(layer._output_dense, a)


def _repeat_heads(ctx: Ctx, t: Value, n: int) -> Value:
    """[B, S, kv, d] -> [B, S, kv * n, d], each head n times in a row (``ops.repeat``)."""
    b, s, kv, d = t.type.shape
    if not isinstance(s, int):
        raise Unsupported("a symbolic sequence length")
    y = ctx.op("expand", ctx.op("unsqueeze", t, axes=[3]), shape=[-1, -1, -1, n, -1])
    return ctx.op("reshape", y, shape=[b if isinstance(b, int) else -1, s, int(kv) * n, int(d)])


@converter("SpectralNormalization")
def spectral_normalization(ctx: Ctx, layer, x):
    """At inference the wrapped layer as it is (its kernel is renormalized only in
    training), through its own converter."""
    return ctx.sublayer(layer.layer, x)
