"""Relax converters of the nn family."""

from __future__ import annotations

from msc.frontend.relax.importer import Ctx, Unused, converter

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


for _n in ("conv1d", "conv2d", "conv3d"):
    converter(f"relax.nn.{_n}")(_conv(False))
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
    ctx.require(bool(attrs.center) and bool(attrs.scale), "batch_norm without affine")
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
