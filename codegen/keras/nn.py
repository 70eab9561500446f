"""Keras emitters of the nn family: linear, conv, pooling, normalizations, embedding,
softmax. Inputs are channels first (as the canonical ops are); the layers are written with
``data_format="channels_first"``, their kernels in Keras' layout."""

from __future__ import annotations

import numpy as np

from codegen.keras.model import Emit
from codegen.keras.registry import emitter
from msc.errors import Unsupported
from msc.ir import DType


@emitter("linear")
def linear(e: Emit, node):
    w = e.weight(1, "the weight")  # [out, in]
    if w.ndim != 2:
        raise Unsupported(f"a weight of rank {w.ndim}")
    b = e.weight(2, "the bias") if e.has(2) else None
    ws = [w.T] + ([b] if b is not None else [])
    layer = e.layer("Dense", int(w.shape[0]), use_bias=b is not None, weights=ws)
    return f"{layer}({e.arg(0)})"


def _pads(pads, n: int) -> list[tuple[int, int]]:
    pads = [int(p) for p in pads or ()]
    if not pads:
        return [(0, 0)] * n
    if len(pads) == n:
        return [(p, p) for p in pads]
    if len(pads) == 2 * n:
        return list(zip(pads[:n], pads[n:]))
    raise Unsupported(f"padding {pads} for {n} spatial dims")


def _tuple(v, n: int, default: int) -> tuple[int, ...]:
    v = list(v or ())
    return tuple(int(a) for a in v) if v else (default,) * n


@emitter("conv")
def conv(e: Emit, node):
    t = e.type(0)
    n = t.rank - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"a {n}-d convolution")
    w = e.weight(1, "the kernel")  # [O, I/g, *k]
    b = e.weight(2, "the bias") if e.has(2) else None
    a = node.attrs
    x = e.x()
    pairs = _pads(a.get("padding"), n)
    strides = _tuple(a.get("stride"), n, 1)
    dilations = _tuple(a.get("dilation"), n, 1)
    k = tuple(int(d) for d in w.shape[2:])
    span = [(kk - 1) * d + 1 for kk, d in zip(k, dilations)]
    padding = "valid"
    if any(p != (0, 0) for p in pairs):
        if pairs == _same(list(t.shape[2:]), span, strides):
            padding = "same"
        else:
            pad = pairs[0] if n == 1 else tuple(pairs)
            pad_layer = f"layers.ZeroPadding{n}D({pad!r}, data_format={e.data_format!r})"
            x = e.stmt(f"{pad_layer}({x})", f"{node.name or 'conv'}_pad")
    kernel = np.transpose(w, [*range(2, n + 2), 1, 0])  # [*k, I/g, O]
    ws = [kernel] + ([b] if b is not None else [])
    layer = e.layer(
        f"Conv{n}D",
        int(w.shape[0]),
        k,
        strides=strides,
        padding=padding,
        dilation_rate=dilations,
        groups=int(a.get("groups", 1)),
        use_bias=b is not None,
        data_format=e.data_format,
        weights=ws,
    )
    return f"{layer}({x})"


def _same(sizes, kernel, strides) -> list[tuple[int, int]]:
    out = []
    for size, k, s in zip(sizes, kernel, strides):
        if not isinstance(size, int):
            return []
        o = -(-size // s)
        total = max((o - 1) * s + k - size, 0)
        out.append((total // 2, total - total // 2))
    return out


def _pool(e: Emit, node, cls: str, **extra):
    t = e.type(0)
    n = t.rank - 2
    a = node.attrs
    if a.get("ceil_mode"):
        raise Unsupported("ceil_mode=True")
    if any(d != 1 for d in a.get("dilation", ()) or ()):
        raise Unsupported("dilation")
    kernel = _tuple(a["kernel"], n, 1)
    strides = _tuple(a.get("stride"), n, 1) if a.get("stride") else kernel
    pairs = _pads(a.get("padding"), n)
    padding = "valid"
    x = e.x()
    if any(p != (0, 0) for p in pairs):
        if pairs == _same(list(t.shape[2:]), kernel, strides) and extra.get("same_ok", True):
            padding = "same"
        elif cls.startswith("Average") and a.get("count_include_pad", True):
            pad = pairs[0] if n == 1 else tuple(pairs)
            x = e.stmt(
                f"layers.ZeroPadding{n}D({pad!r}, data_format={e.data_format!r})({x})",
                f"{node.name or 'pool'}_pad",
            )
        elif cls.startswith("Max"):  # padded with -inf, which no window's maximum is
            widths = [(0, 0), *pairs, (0, 0)] if e.channels_last else [(0, 0), (0, 0), *pairs]
            x = e.stmt(
                f"ops.pad({x}, {[list(w) for w in widths]!r}, constant_values=float('-inf'))",
                f"{node.name or 'pool'}_pad",
            )
        else:
            raise Unsupported(f"padding {pairs} that is not Keras' 'same'")
    layer = e.layer(
        f"{cls}{n}D", kernel, strides=strides, padding=padding, data_format=e.data_format
    )
    return f"{layer}({x})"


@emitter("max_pool")
def max_pool(e: Emit, node):
    if node.attrs.get("return_indices"):
        raise Unsupported("return_indices=True")
    return _pool(e, node, "MaxPooling")


@emitter("avg_pool")
def avg_pool(e: Emit, node):
    if node.attrs.get("divisor_override") is not None:
        raise Unsupported("divisor_override")
    same_ok = not node.attrs.get("count_include_pad", True)
    return _pool(e, node, "AveragePooling", same_ok=same_ok)


@emitter("batch_norm")
def batch_norm(e: Emit, node):
    gamma = e.weight(1, "the scale") if e.has(1) else None
    beta = e.weight(2, "the shift") if e.has(2) else None
    ws = [w for w in (gamma, beta) if w is not None]
    ws += [e.weight(3, "the running mean"), e.weight(4, "the running variance")]
    layer = e.layer(
        "BatchNormalization",
        axis=-1 if e.channels_last else 1,
        epsilon=float(node.attrs.get("eps", 1e-5)),
        center=beta is not None,
        scale=gamma is not None,
        weights=ws,
    )
    return f"{layer}({e.x()})"


@emitter("layer_norm")
def layer_norm(e: Emit, node):
    r = e.type(0).rank
    axis = int(node.attrs.get("axis", -1)) % r
    axes = list(range(axis, r))
    shape = tuple(int(d) for d in e.type(0).shape[axis:]) if len(axes) > 1 else None
    gamma = e.weight(1, "the scale") if e.has(1) else None
    beta = e.weight(2, "the shift") if e.has(2) else None
    ws = [w if shape is None else w.reshape(shape) for w in (gamma, beta) if w is not None]
    layer = e.layer(
        "LayerNormalization",
        axis=-1 if len(axes) == 1 else axes,
        epsilon=float(node.attrs.get("eps", 1e-5)),
        center=beta is not None,
        scale=gamma is not None,
        weights=ws,
    )
    return f"{layer}({e.arg(0)})"


@emitter("embedding")
def embedding(e: Emit, node):
    table = e.weight(0, "the table")
    if table.ndim != 2:
        raise Unsupported(f"a table of rank {table.ndim}")
    if not e.symbolic(1):
        # indices computed without the inputs (positions from an arange): an Embedding layer
        # on them would run once in build(), with its initial table; a SourceWeight holding
        # the table is part of the model
        return f"ops.take({e.arg(0)}, {e.arg(1)}, axis=0)"
    layer = e.layer("Embedding", int(table.shape[0]), int(table.shape[1]), weights=[table])
    return f"{layer}({e.arg(1)})"


@emitter("softmax")
def softmax(e: Emit, node):
    return f"{e.layer('Softmax', axis=int(node.attrs.get('axis', -1)))}({e.arg(0)})"


@emitter("log_softmax")
def log_softmax(e: Emit, node):
    return f"ops.log_softmax({e.arg(0)}, axis={int(node.attrs.get('axis', -1))!r})"


@emitter("gemm")
def gemm(e: Emit, node):
    a = node.attrs
    if a.get("trans_a"):
        raise Unsupported("trans_a=1")
    w = e.weight(1, "b")
    w = w.T if a.get("trans_b") else w  # [in, out]
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    kernel = w * np.asarray(alpha, w.dtype) if alpha != 1.0 else w
    bias = None
    if e.has(2):
        c = e.weight(2, "c")
        c = c * np.asarray(beta, c.dtype) if beta != 1.0 else c
        bias = np.broadcast_to(c, (int(kernel.shape[1]),)).copy()
    ws = [kernel] + ([bias] if bias is not None else [])
    layer = e.layer("Dense", int(kernel.shape[1]), use_bias=bias is not None, weights=ws)
    return f"{layer}({e.arg(0)})"


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(e: Emit, node):
    t = e.type(0)
    n = t.rank - 2
    size = [int(s) for s in node.attrs["output_size"]]
    spatial = list(t.shape[2:])
    if all(s == 1 for s in size) and 1 <= n <= 3:
        layer = e.layer(f"GlobalAveragePooling{n}D", data_format=e.data_format, keepdims=True)
        return f"{layer}({e.x()})"
    if not all(isinstance(d, int) and s > 0 and d % s == 0 for d, s in zip(spatial, size)):
        if not 1 <= n <= 3 or any(s <= 0 for s in size):
            raise Unsupported(f"output size {size}")
        layer = e.layer(f"AdaptiveAveragePooling{n}D", tuple(size), data_format=e.data_format)
        return f"{layer}({e.x()})"
    k = tuple(d // s for d, s in zip(spatial, size))
    layer = e.layer(f"AveragePooling{n}D", k, strides=k, padding="valid", data_format=e.data_format)
    return f"{layer}({e.x()})"


@emitter("attention")
def attention(e: Emit, node):
    """keras.ops.dot_product_attention, which takes [batch, length, heads, dim]: the
    canonical [batch, heads, length, dim] operands are transposed around it."""
    a = node.attrs
    extra = ""
    if e.has(3):  # [batch, heads, length, source] in both: a bool mask keeps, a float one adds
        m = node.inputs[3]
        if m.type.rank != 4:
            raise Unsupported(f"a mask of rank {m.type.rank}")
        extra = f"{'mask' if m.dtype is DType.BOOL else 'bias'}={e.arg(3)}, "
    if any(e.type(i).rank != 4 for i in range(3)):
        raise Unsupported("operands of rank other than 4")
    # grouped-query attention: Keras' dot_product_attention groups the query heads over
    # fewer key / value heads itself (query head j reads key head j // (N / K), as torch's
    # enable_gqa), so only heads known not to divide are refused
    qh, kh = e.type(0).shape[1], e.type(1).shape[1]
    if a.get("enable_gqa") and isinstance(qh, int) and isinstance(kh, int) and qh % kh:
        raise Unsupported(f"grouped-query attention of {qh} query heads over {kh} key heads")
    if e.type(2).shape[-1] != e.type(0).shape[-1]:
        return _attention_explicit(e, node)
    scale = a.get("scale")
    kw = f"scale={float(scale)!r}, " if scale is not None else ""
    kw = extra + kw + f"is_causal={bool(a.get('is_causal', False))!r}"
    if e.channels_last:  # the operands were [batch, length, heads, dim] before a transpose
        q, k, v = (e.x(i) for i in range(3))
        return f"ops.dot_product_attention({q}, {k}, {v}, {kw})"
    # every layer named: an unnamed one takes Keras' own name (permute_1), which a source
    # name elsewhere in the model can be (Keras refuses a name used twice)
    base = e.layer_name

    def heads_swapped(x: str, name: str) -> str:  # a long line gets one argument a line
        ctor = f"layers.Permute((2, 1, 3), name={name!r})"
        e.parts = (ctor, ["layers.Permute(", "(2, 1, 3)", f"name={name!r}"])
        return f"{ctor}({x})"

    q, k, v = (
        e.stmt(
            heads_swapped(e.arg(i), e.cg.layers.fresh(f"{base}_{role}")),
            f"{node.name or 'attn'}_{role}",
        )
        for i, role in enumerate(("q", "k", "v"))
    )
    e.parts = None
    pre = e.stmt(f"ops.dot_product_attention({q}, {k}, {v}, {kw})", f"{node.name or 'attn'}_blhd")
    return heads_swapped(pre, base)


def _attention_explicit(e: Emit, node) -> str:
    """softmax(q k^T * scale (+ bias)) v on the canonical [batch, heads, length, dim]
    operands: Keras' dot_product_attention declares its output with the query's last dim,
    which is wrong when the value's differs."""
    a = node.attrs
    if a.get("is_causal"):
        raise Unsupported("is_causal with a value dim other than the query's")
    hint = node.name or "attn"
    if e.channels_last:  # the operands as the source had them, [batch, length, heads, dim]
        q, k, v = (
            e.stmt(f"ops.transpose({e.x(i)}, (0, 2, 1, 3))", f"{hint}_{role}")
            for i, role in enumerate(("q", "k", "v"))
        )
    else:
        q, k, v = (e.arg(i) for i in range(3))
    qh, kh = e.type(0).shape[1], e.type(1).shape[1]
    if a.get("enable_gqa") and qh != kh:  # each key / value head repeated in a row
        if not (isinstance(qh, int) and isinstance(kh, int)):
            raise Unsupported("grouped-query attention over head counts not known")
        k, v = (
            e.stmt(f"ops.repeat({x}, {qh // kh}, axis=1)", f"{hint}_{role}_heads")
            for x, role in ((k, "k"), (v, "v"))
        )
    d = e.type(0).shape[-1]
    scale = a.get("scale")
    if scale is None:
        if not isinstance(d, int):
            raise Unsupported("a symbolic head dim")
        scale = 1.0 / float(np.sqrt(d))
    kt = e.stmt(f"ops.transpose({k}, (0, 1, 3, 2))", f"{hint}_kt")
    scores = e.stmt(
        f"ops.multiply(ops.matmul({q}, {kt}), {float(scale)!r})",
        f"{hint}_scores",
    )
    if e.has(3):
        m = node.inputs[3]
        if m.dtype is DType.BOOL:
            low = float(np.finfo(np.float32).min) * 0.7
            scores = e.stmt(f"ops.where({e.arg(3)}, {scores}, {low!r})", f"{hint}_masked")
        else:
            scores = e.stmt(f"ops.add({scores}, {e.arg(3)})", f"{hint}_masked")
    weights = e.stmt(f"ops.softmax({scores}, axis=-1)", f"{hint}_weights")
    out = f"ops.matmul({weights}, {v})"
    if e.channels_last:
        out = f"ops.transpose({e.stmt(out, f'{hint}_bhld')}, (0, 2, 1, 3))"
    return out


@emitter("matmul")
def matmul(e: Emit, node):
    return f"ops.matmul({e.arg(0)}, {e.arg(1)})"


@emitter("conv_transpose")
def conv_transpose(e: Emit, node):
    t = e.type(0)
    n = t.rank - 2
    a = node.attrs
    if n not in (1, 2, 3):
        raise Unsupported(f"a {n}-d transposed convolution")
    if int(a.get("groups", 1)) != 1:
        raise Unsupported("groups")
    w = e.weight(1, "the kernel")  # [in, out, *k]
    b = e.weight(2, "the bias") if e.has(2) else None
    strides = _tuple(a.get("stride"), n, 1)
    dilations = _tuple(a.get("dilation"), n, 1)
    extra = _tuple(a.get("output_padding"), n, 0)
    pairs = _pads(a.get("padding"), n)
    kernel = np.transpose(w, [*range(2, n + 2), 1, 0])  # [*k, out, in]
    ws = [kernel] + ([b] if b is not None else [])
    layer = e.layer(
        f"Conv{n}DTranspose",
        int(w.shape[1]),
        tuple(int(k) for k in w.shape[2:]),
        strides=strides,
        padding="valid",
        output_padding=extra,
        dilation_rate=dilations,
        use_bias=b is not None,
        data_format=e.data_format,
        weights=ws,
    )
    y = f"{layer}({e.x()})"
    if any(p != (0, 0) for p in pairs):
        y = e.stmt(y, f"{node.name or 'deconv'}_full")
        crop = pairs[0] if n == 1 else tuple(pairs)
        fmt = "" if n == 1 else f", data_format={e.data_format!r}"
        if n == 1 and not e.channels_last:
            raise Unsupported("cropping a channels-first 1-d output")
        return f"layers.Cropping{n}D({crop!r}{fmt})({y})"
    return y


@emitter("resize")
def resize(e: Emit, node):
    a = node.attrs
    if any(v is not None for v in node.inputs[1:]):
        raise Unsupported("sizes or scales computed at run time")
    t = e.type(0)
    n = t.rank - 2
    spatial = list(t.shape[2:])
    out = list(node.outputs[0].type.shape[2:])
    if not all(isinstance(d, int) for d in spatial + out):
        raise Unsupported("symbolic sizes")
    mode, ctm = a.get("mode", "nearest"), a.get("coordinate_transformation_mode")
    resizing = {
        ("nearest", "half_pixel", "round_prefer_ceil"): "nearest",
        ("linear", "pytorch_half_pixel", None): "bilinear",
    }.get((mode, ctm, a.get("nearest_mode") if mode == "nearest" else None))
    if n == 2 and resizing is not None and not a.get("antialias"):
        # layers.Resizing on Keras' torch backend: torch's nearest-exact / bilinear
        layer = e.layer("Resizing", *out, interpolation=resizing, data_format=e.data_format)
        return f"{layer}({e.x()})"
    if any(o % i for o, i in zip(out, spatial)):
        raise Unsupported("a size that is not a whole multiple")
    size = tuple(o // i for o, i in zip(out, spatial))
    if mode == "nearest" and ctm == "asymmetric" and a.get("nearest_mode") == "floor":
        interp = "nearest"
    elif mode == "linear" and ctm == "half_pixel" and n == 2:
        interp = "bilinear"
    else:
        raise Unsupported(f"mode={mode!r} with {ctm!r} (Keras' UpSampling is nearest/bilinear)")
    if n == 1 and e.channels_last:
        return f"{e.layer('UpSampling1D', size[0])}({e.x()})"
    if n == 2:
        layer = e.layer("UpSampling2D", size, data_format=e.data_format, interpolation=interp)
        return f"{layer}({e.x()})"
    if n == 3 and interp == "nearest":
        return f"{e.layer('UpSampling3D', size, data_format=e.data_format)}({e.x()})"
    raise Unsupported(f"a {n}-d resize")


@emitter("einsum")
def einsum(e: Emit, node):
    args = ", ".join(e.arg(i) for i in range(len(node.inputs)))
    return f"ops.einsum({node.attrs['equation']!r}, {args})"


@emitter("adaptive_max_pool")
def adaptive_max_pool(e: Emit, node):
    n = e.type(0).rank - 2
    if node.attrs.get("return_indices") or not 1 <= n <= 3:
        raise Unsupported("return_indices=True" if n in (1, 2, 3) else f"a {n}-d pooling")
    size = tuple(int(s) for s in node.attrs["output_size"])
    if any(s <= 0 for s in size):
        raise Unsupported(f"output size {size}")
    layer = e.layer(f"AdaptiveMaxPooling{n}D", size, data_format=e.data_format)
    return f"{layer}({e.x()})"
