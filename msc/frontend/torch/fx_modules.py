"""fx call_module nodes: common torch.nn layers call the ATen converters with their weights;
any other leaf module is exported with torch.export and its ATen graph inlined.

# NOTE: a handler is ``handler(ctx, module, weight, *args, **kwargs)`` where ``weight(name)``
# returns the graph weight of the module's attribute ``name`` (state_dict-named), or None.
# Inlined modules name their values ``<fx node>.<inner node>`` so they cannot collide with the
# outer graph's names, and their weights keep their full state_dict names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from msc.frontend.torch.registry import Ctx, Unsupported
from msc.ir import Value

__all__ = ["MODULES", "export_inline"]

MODULES: dict[type, Callable[..., Any]] = {}


def module(*types: type):
    def deco(fn):
        for t in types:
            if t in MODULES:
                raise ValueError(f"module handler for {t.__name__} is registered twice")
            MODULES[t] = fn
        return fn

    return deco


@module(nn.Linear)
def linear(ctx: Ctx, m: nn.Linear, w, x: Value) -> Value:
    return ctx.call("aten.linear.default", x, w("weight"), w("bias"))


@module(nn.Conv1d, nn.Conv2d, nn.Conv3d)
def conv(ctx: Ctx, m: nn.Conv2d, w, x: Value) -> Value:
    n = len(m.kernel_size)
    padding: Any = m.padding
    if m.padding_mode != "zeros":
        mode = {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}
        x = ctx.call("aten.pad.default", x, list(m._reversed_padding_repeated_twice),
                     mode[m.padding_mode])  # fmt: skip
        padding = [0] * n
    key = f"aten.conv{n}d.padding" if isinstance(padding, str) else f"aten.conv{n}d.default"
    return ctx.call(key, x, w("weight"), w("bias"), list(m.stride), padding if isinstance(
        padding, str) else list(padding), list(m.dilation), m.groups)  # fmt: skip


@module(nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
def conv_transpose(ctx: Ctx, m: nn.ConvTranspose2d, w, x: Value, output_size=None) -> Value:
    if output_size is not None:
        raise Unsupported("ConvTranspose with output_size")
    n = len(m.kernel_size)
    key = "aten.conv_transpose1d.default" if n == 1 else f"aten.conv_transpose{n}d.input"
    return ctx.call(key, x, w("weight"), w("bias"), list(m.stride), list(m.padding),
                    list(m.output_padding), m.groups, list(m.dilation))  # fmt: skip


@module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def batch_norm(ctx: Ctx, m: nn.BatchNorm2d, w, x: Value) -> Value:
    rm, rv = w("running_mean"), w("running_var")
    training = rm is None or rv is None
    return ctx.call("aten.batch_norm.default", x, w("weight"), w("bias"), rm, rv, training,
                    m.momentum or 0.0, m.eps, True)  # fmt: skip


@module(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def instance_norm(ctx: Ctx, m: nn.InstanceNorm2d, w, x: Value) -> Value:
    rm, rv = w("running_mean"), w("running_var")
    use_input = not m.track_running_stats or rm is None
    return ctx.call("aten.instance_norm.default", x, w("weight"), w("bias"), rm, rv, use_input,
                    m.momentum or 0.0, m.eps, True)  # fmt: skip


@module(nn.LayerNorm)
def layer_norm(ctx: Ctx, m: nn.LayerNorm, w, x: Value) -> Value:
    return ctx.call("aten.layer_norm.default", x, list(m.normalized_shape), w("weight"),
                    w("bias"), m.eps)  # fmt: skip


@module(nn.GroupNorm)
def group_norm(ctx: Ctx, m: nn.GroupNorm, w, x: Value) -> Value:
    return ctx.call("aten.group_norm.default", x, m.num_groups, w("weight"), w("bias"), m.eps)


@module(nn.RMSNorm)
def rms_norm(ctx: Ctx, m: nn.RMSNorm, w, x: Value) -> Value:
    return ctx.call("aten.rms_norm.default", x, list(m.normalized_shape), w("weight"), m.eps)


@module(nn.Embedding)
def embedding(ctx: Ctx, m: nn.Embedding, w, x: Value) -> Value:
    if m.max_norm is not None:
        raise Unsupported("Embedding with max_norm (renormalizes the table in place)")
    pad = -1 if m.padding_idx is None else m.padding_idx
    return ctx.call("aten.embedding.default", w("weight"), x, pad)


def _simple(key: str, *attrs: str):
    def handler(ctx: Ctx, m: nn.Module, w, x: Value) -> Value:
        return ctx.call(key, x, *[getattr(m, a) for a in attrs])

    return handler


for _t, _key, _attrs in (
    (nn.ReLU, "aten.relu.default", ()),
    (nn.SiLU, "aten.silu.default", ()),
    (nn.Sigmoid, "aten.sigmoid.default", ()),
    (nn.Tanh, "aten.tanh.default", ()),
    (nn.Hardswish, "aten.hardswish.default", ()),
    (nn.Hardsigmoid, "aten.hardsigmoid.default", ()),
    (nn.Mish, "aten.mish.default", ()),
    (nn.SELU, "aten.selu.default", ()),
    (nn.LogSigmoid, "aten.log_sigmoid.default", ()),
    (nn.ELU, "aten.elu.default", ("alpha",)),
    (nn.CELU, "aten.celu.default", ("alpha",)),
    (nn.LeakyReLU, "aten.leaky_relu.default", ("negative_slope",)),
    (nn.Softplus, "aten.softplus.default", ("beta", "threshold")),
    (nn.Hardtanh, "aten.hardtanh.default", ("min_val", "max_val")),
    (nn.Threshold, "aten.threshold.default", ("threshold", "value")),
    (nn.Hardshrink, "aten.hardshrink.default", ("lambd",)),
    (nn.Softshrink, "aten.softshrink.default", ("lambd",)),
    (nn.Softmax, "aten.softmax.int", ("dim",)),
    (nn.LogSoftmax, "aten.log_softmax.int", ("dim",)),
    (nn.Flatten, "aten.flatten.using_ints", ("start_dim", "end_dim")),
    (nn.PixelShuffle, "aten.pixel_shuffle.default", ("upscale_factor",)),
    (nn.PixelUnshuffle, "aten.pixel_unshuffle.default", ("downscale_factor",)),
    (nn.GLU, "aten.glu.default", ("dim",)),
):
    module(_t)(_simple(_key, *_attrs))


@module(nn.GELU)
def gelu(ctx: Ctx, m: nn.GELU, w, x: Value) -> Value:
    return ctx.call("aten.gelu.default", x, approximate=m.approximate)


@module(nn.PReLU)
def prelu(ctx: Ctx, m: nn.PReLU, w, x: Value) -> Value:
    return ctx.call("aten.prelu.default", x, w("weight"))


@module(nn.Softsign)
def softsign(ctx: Ctx, m: nn.Module, w, x: Value) -> Value:
    return ctx.op("softsign", x)


@module(nn.ReLU6)
def relu6(ctx: Ctx, m: nn.Module, w, x: Value) -> Value:
    return ctx.call("aten.hardtanh.default", x, 0.0, 6.0)


@module(nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
def identity(ctx: Ctx, m: nn.Module, w, x: Value, *args: Any, **kw: Any) -> Value:
    return x


def _pool(kind: str, n: int):
    def handler(ctx: Ctx, m: nn.Module, w, x: Value) -> Any:
        if kind == "max":
            key = f"aten.max_pool{n}d_with_indices.default" if m.return_indices else (
                f"aten.max_pool{n}d.default")  # fmt: skip
            return ctx.call(key, x, m.kernel_size, m.stride or [], m.padding, m.dilation,
                            m.ceil_mode)  # fmt: skip
        if kind == "avg":
            extra = [m.divisor_override] if n > 1 else []
            return ctx.call(f"aten.avg_pool{n}d.default", x, m.kernel_size, m.stride or [],
                            m.padding, m.ceil_mode, m.count_include_pad, *extra)  # fmt: skip
        if kind == "adaptive_avg":
            return ctx.call(f"aten.adaptive_avg_pool{n}d.default", x, m.output_size)
        out = ctx.call(f"aten.adaptive_max_pool{n}d.default", x, m.output_size)
        return out if m.return_indices else out[0]

    return handler


for _n, (_mx, _av, _aa, _am) in {
    1: (nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d),
    2: (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d),
    3: (nn.MaxPool3d, nn.AvgPool3d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool3d),
}.items():
    module(_mx)(_pool("max", _n))
    module(_av)(_pool("avg", _n))
    module(_aa)(_pool("adaptive_avg", _n))
    module(_am)(_pool("adaptive_max", _n))


@module(nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d)
def upsample(ctx: Ctx, m: nn.Upsample, w, x: Value) -> Value:
    from msc.frontend.torch.nn import _resize

    modes = {"nearest": "nearest", "bilinear": "linear", "linear": "linear",
             "trilinear": "linear", "bicubic": "cubic"}  # fmt: skip
    if m.mode not in modes:
        raise Unsupported(f"Upsample mode {m.mode!r}")
    n = ctx.rank(x) - 2
    size = [m.size] * n if isinstance(m.size, int) else m.size
    scale = m.scale_factor
    if scale is not None and isinstance(scale, int | float):
        scale = [float(scale)] * n
    if scale is not None and m.recompute_scale_factor:
        size, scale = [int(d * s) for d, s in zip(ctx.shape(x)[2:], scale)], None
    return _resize(ctx, x, n, size, scale, modes[m.mode], bool(m.align_corners))


def _pad(mode: str):
    def handler(ctx: Ctx, m: nn.Module, w, x: Value) -> Value:
        value = getattr(m, "value", 0.0) if mode == "constant" else None
        return ctx.call("aten.pad.default", x, list(m.padding), mode, value)

    return handler


for _t in (nn.ZeroPad1d, nn.ZeroPad2d, nn.ZeroPad3d, nn.ConstantPad1d, nn.ConstantPad2d,
           nn.ConstantPad3d):  # fmt: skip
    module(_t)(_pad("constant"))
for _t in (nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReflectionPad3d):
    module(_t)(_pad("reflect"))
for _t in (nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d):
    module(_t)(_pad("replicate"))
for _t in (nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d):
    module(_t)(_pad("circular"))


def export_inline(
    ctx: Ctx,
    mod: nn.Module,
    path: str,
    real_args: tuple,
    real_kwargs: dict,
    fxsrc: Any,
    args: tuple,
    kwargs: dict,
) -> Any:
    """Export leaf module ``mod`` on the inputs it saw and translate its graph in place."""
    from torch.export.graph_signature import InputKind, OutputKind

    from msc.frontend.torch.export import ExportSource, _module_path, _module_stack
    from msc.frontend.torch.translate import Translator

    was = mod.training
    mod.eval()
    try:
        ep = torch.export.export(mod, tuple(real_args), kwargs=dict(real_kwargs), strict=False)
    except Exception as e:  # noqa: BLE001 - reported as this node's problem
        raise Unsupported(f"module {type(mod).__name__} could not be exported: {e}") from None
    finally:
        mod.train(was)
    prefix = f"{ctx.node_name}."

    class _Inner(ExportSource):
        def module_path(self, node: torch.fx.Node) -> str:
            inner = _module_path(node)
            return ".".join(p for p in (path, inner) if p)

        def module_stack(self, node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
            own = ((path, type(mod).__name__),) if path else ()
            inner = _module_stack(node)
            return own + tuple((f"{path}.{p}" if path else p, t) for p, t in inner)

    src = _Inner(ep, ctx.graph, overrides=not fxsrc.refine_shapes())
    flat_vals = [a for a in pytree.tree_leaves((list(args), dict(kwargs)))]
    flat_real = pytree.tree_leaves((list(real_args), dict(real_kwargs)))
    tensor_vals = [v for v, r in zip(flat_vals, flat_real) if isinstance(r, torch.Tensor)]
    user = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    it = iter(tensor_vals)
    for s in user:
        node = next(n for n in ep.graph.nodes if n.name == s.arg.name)
        if isinstance(node.meta.get("val"), torch.Tensor):
            src.inputs[s.arg.name] = next(it)
        else:
            src.constants[s.arg.name] = node.meta.get("val")
    for s in ep.graph_signature.input_specs:
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            full = f"{path}.{s.target}"
            if full not in fxsrc.weights:
                t = ep.state_dict.get(s.target) if s.target in ep.state_dict else (
                    ep.constants[s.target])  # fmt: skip
                fxsrc._add(full, t)
            src.weights[s.arg.name] = fxsrc.weights[full]
    tr = Translator(ctx.graph, src)
    tr.prefix = prefix
    out = tr.run(ep.graph)
    flat = list(out) if isinstance(out, list | tuple) else [out]
    keep = [i for i, s in enumerate(ep.graph_signature.output_specs)
            if s.kind == OutputKind.USER_OUTPUT] or list(range(len(flat)))  # fmt: skip
    leaves = [tr.resolve(flat[i]) for i in keep]
    return pytree.tree_unflatten(leaves, ep.call_spec.out_spec)
