"""Relax converters of the nn family."""

from __future__ import annotations

from msc.frontend.relax.importer import Ctx, Unused, converter
from msc.ir import symexpr

_LAYOUTS = {("NCW", "OIW"), ("NCHW", "OIHW"), ("NCDHW", "OIDHW")}
_T_LAYOUTS = {("NCW", "IOW"), ("NCHW", "IOHW")}


def _ints(v):
    return [int(x) for x in v]


def _conv(transpose: bool):
    def convert(ctx: Ctx, x, w, *, attrs):
        layouts = _T_LAYOUTS if transpose else _LAYOUTS
        ctx.require(
            (str(attrs.data_layout), str(attrs.kernel_layout)) in layouts
            and str(attrs.out_layout) == str(attrs.data_layout),
            f"layout {attrs.data_layout}/{attrs.kernel_layout}",
        )
        kw = dict(
            stride=_ints(attrs.strides),
            padding=_ints(attrs.padding),
            dilation=_ints(attrs.dilation),
            groups=int(attrs.groups),
        )
        if transpose:
            kw["output_padding"] = _ints(attrs.output_padding)
        return ctx.op("conv_transpose" if transpose else "conv", x, w, None, **kw)

    return convert


for _n in ("conv2d", "conv3d"):
    converter(f"relax.nn.{_n}")(_conv(False))


@converter("relax.nn.conv1d")
def conv1d(ctx: Ctx, x, w, *, attrs):
    # codegen.relax's DFT and STFT convolve frames in NWC / WIO: transposed to msc's layout.
    layouts = (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout))
    if layouts[:2] in _LAYOUTS:
        return _conv(False)(ctx, x, w, attrs=attrs)
    ctx.require(layouts == ("NWC", "WIO", "NWC"), f"layout {'/'.join(layouts)}")
    x = ctx.op("transpose", x, perm=[0, 2, 1])
    w = ctx.op("transpose", w, perm=[2, 1, 0])
    y = ctx.op(
        "conv",
        x,
        w,
        None,
        stride=_ints(attrs.strides),
        padding=_ints(attrs.padding),
        dilation=_ints(attrs.dilation),
        groups=int(attrs.groups),
    )
    return ctx.op("transpose", y, perm=[0, 2, 1])


for _n in ("conv1d_transpose", "conv2d_transpose"):
    converter(f"relax.nn.{_n}")(_conv(True))


@converter("relax.matmul")
def matmul(ctx: Ctx, a, b, *, attrs=None):
    return ctx.op("matmul", a, b)


def _pool(op):
    def convert(ctx: Ctx, x, *, attrs):
        ctx.require(str(attrs.layout) in ("NCW", "NCHW", "NCDHW"), f"layout {attrs.layout}")
        kw = dict(
            kernel=_ints(attrs.pool_size),
            stride=_ints(attrs.strides),
            padding=_ints(attrs.padding),
            ceil_mode=bool(attrs.ceil_mode),
        )
        if op == "max_pool":
            kw["dilation"] = _ints(attrs.dilation)
        else:
            ctx.require(all(d == 1 for d in _ints(attrs.dilation)), "dilated average pool")
            kw["count_include_pad"] = bool(attrs.count_include_pad)
        return ctx.op(op, x, **kw)

    return convert


for _d in (1, 2, 3):
    converter(f"relax.nn.max_pool{_d}d")(_pool("max_pool"))
    converter(f"relax.nn.avg_pool{_d}d")(_pool("avg_pool"))


def _adaptive(ctx: Ctx, x, *, attrs):
    ctx.require(attrs.output_size is not None, "adaptive pool without an output size")
    return ctx.op("adaptive_avg_pool", x, output_size=_ints(attrs.output_size))


for _d in (1, 2, 3):
    converter(f"relax.nn.adaptive_avg_pool{_d}d")(_adaptive)


@converter("relax.nn.softmax")
def softmax(ctx: Ctx, x, *, attrs):
    return ctx.op("softmax", x, axis=int(attrs.axis))


@converter("relax.nn.log_softmax")
def log_softmax(ctx: Ctx, x, *, attrs):
    return ctx.op("log_softmax", x, axis=int(attrs.axis))


@converter("relax.nn.batch_norm")
def batch_norm(ctx: Ctx, x, gamma, beta, mean, var, *, attrs):
    ctx.require(int(attrs.axis) == 1 and not bool(attrs.training), "batch_norm in training")
    gamma = gamma if bool(attrs.scale) else None  # codegen.relax passes ones, unused
    beta = beta if bool(attrs.center) else None
    y = ctx.op("batch_norm", x, gamma, beta, mean, var, eps=float(attrs.epsilon))
    return (y, Unused("batch_norm's mean"), Unused("batch_norm's variance"))


@converter("relax.nn.layer_norm")
def layer_norm(ctx: Ctx, x, gamma, beta, *, attrs):
    rank = len(ctx.out_type().shape or ())
    axes = sorted(int(a) % rank for a in attrs.axes)
    ctx.require(axes == list(range(axes[0], rank)), f"layer_norm over axes {axes}")
    ctx.require(bool(attrs.center) and bool(attrs.scale), "layer_norm without affine")
    return ctx.op("layer_norm", x, gamma, beta, axis=axes[0] - rank, eps=float(attrs.epsilon))


@converter("relax.nn.group_norm")
def group_norm(ctx: Ctx, x, gamma, beta, *, attrs):
    ctx.require(int(attrs.channel_axis) == 1, "group_norm over a non-1 channel axis")
    return ctx.op(
        "group_norm", x, gamma, beta, num_groups=int(attrs.num_groups), eps=float(attrs.epsilon)
    )


@converter("relax.nn.rms_norm")
def rms_norm(ctx: Ctx, x, weight, *, attrs):
    rank = len(ctx.out_type().shape or ())
    axes = sorted(int(a) % rank for a in attrs.axes)
    ctx.require(axes == list(range(axes[0], rank)), f"rms_norm over axes {axes}")
    return ctx.op("rms_norm", x, weight, axis=axes[0] - rank, eps=float(attrs.epsilon))


@converter("relax.nn.instance_norm")
def instance_norm(ctx: Ctx, x, gamma, beta, *, attrs):
    rank = len(x.type.shape or ())
    axes = sorted(int(a) % rank for a in attrs.axes)
    ctx.require(int(attrs.channel_axis) == 1, "instance_norm over a non-1 channel axis")
    ctx.require(axes == list(range(2, rank)), f"instance_norm over axes {axes}")
    return ctx.op(
        "instance_norm",
        x,
        gamma if bool(attrs.scale) else None,
        beta if bool(attrs.center) else None,
        eps=float(attrs.epsilon),
    )


@converter("relax.einsum")
def einsum(ctx: Ctx, xs, *, attrs):
    return ctx.op("einsum", *xs, equation=str(attrs.subscripts))


_BSHD = [0, 2, 1, 3]  # nn.attention's [batch, seq, heads, dim] <-> msc's [batch, heads, seq, dim]


def _attention(ctx: Ctx, q, k, v, bias=None, *, attrs):
    causal = attrs.causal_mask
    causal = None if causal is None else str(causal)
    sq, sk = (t.type.shape[1] if t.type.shape else None for t in (q, k))
    ctx.require(
        causal in (None, "TopLeft") or (causal == "BottomRight" and sq == sk),
        f"attention with causal mask {causal}",
    )
    ctx.require(attrs.window_size is None, "attention over a sliding window")
    ctx.require(bias is None or bias.type.rank == 4, "an attention bias that is not 4-d")
    scale = attrs.scale
    q, k, v = (ctx.op("transpose", t, perm=_BSHD) for t in (q, k, v))
    out = ctx.op(
        "attention",
        q,
        k,
        v,
        bias,
        is_causal=causal is not None,
        scale=None if scale is None else float(getattr(scale, "value", scale)),
    )
    return ctx.op("transpose", out, perm=_BSHD)


converter("relax.nn.attention")(_attention)
converter("relax.nn.attention_bias")(_attention)

# image.resize's method and rounding by the names msc's resize takes (ONNX Resize's).
_RESIZE_MODE = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
_ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize(rank: int):
    layout = {4: "NCHW", 5: "NCDHW"}[rank]

    def convert(ctx: Ctx, x, size, *, attrs):
        ctx.require(str(attrs.layout) == layout, f"resize in layout {attrs.layout}")
        mode = _RESIZE_MODE.get(str(attrs.method))
        ctx.require(mode is not None, f"resize method {attrs.method}")
        coord = str(attrs.coordinate_transformation_mode)
        ctx.require(coord != "tf_crop_and_resize", "resize with a crop box")
        rounding = str(attrs.rounding_method) if mode == "nearest" else "round_prefer_floor"
        ctx.require(rounding in _ROUNDING, f"resize rounding {rounding!r}")
        cast = attrs.out_dtype is not None and str(attrs.out_dtype) not in ("", x.type.dtype.value)
        ctx.require(not cast, "a resize that casts")
        kw: dict = {}
        dims = list(size)
        ctx.require(x.type.shape is not None, "a resize of an input of unknown rank")
        if all(isinstance(d, int) for d in dims):
            kw["sizes"] = [int(d) for d in dims]
        sizes_in = None
        if "sizes" not in kw:  # a symbolic size: the input's dim times a whole scale, or
            scales = [_whole_scale(n, d) for n, d in zip(x.type.shape[2:], dims)]
            if None not in scales:
                kw["scales"] = [float(s) for s in scales]
            else:  # every size at run time (N and C as they are)
                sizes_in = ctx.op("concat", ctx.op("shape", x, start=0, end=2),
                                  ctx.shape_value(dims), axis=0)  # fmt: skip
        return ctx.op(
            "resize",
            x,
            None,
            sizes_in,
            None,
            mode=mode,
            coordinate_transformation_mode=coord,
            nearest_mode=rounding,
            cubic_coeff_a=float(attrs.cubic_alpha),
            exclude_outside=bool(int(attrs.cubic_exclude)),
            **kw,
        )

    return convert


def _whole_scale(n, d) -> int | None:
    """k where the output dim ``d`` is the input dim ``n`` times k, else None."""
    if isinstance(n, int) and isinstance(d, int):
        return d // n if n and d % n == 0 else None
    names = {s.name: 1 for s in symexpr.symbols(n)}  # k is d's value where n's symbols are 1
    one = symexpr.subs(n, names)
    k = symexpr.subs(d, names)
    if not (isinstance(one, int) and isinstance(k, int)) or one <= 0 or k % one:
        return None
    k //= one
    return k if k > 0 and symexpr.mul(n, k) == d else None


converter("relax.image.resize2d")(_resize(4))
converter("relax.image.resize3d")(_resize(5))
