"""Keras signal layers: STFTSpectrogram, whose frames are a strided 1-d convolution with its
own DFT kernels (weights of the layer), read as that convolution."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ops.nn import same_pads


@converter("STFTSpectrogram")
def stft_spectrogram(ctx: Ctx, layer, x):
    """Keras' computation: each channel's signal through conv1d with the real and imaginary
    DFT kernels ([frame_length, 1, freqs]) at ``frame_step``, then the ``mode``'s function
    of the two, laid out as ``data_format`` / ``expand_dims`` say."""
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise Unsupported("data_format='channels_first'")
    if x.type.rank != 3:
        raise Unsupported(f"an input of rank {x.type.rank} (Keras takes [batch, time, channels])")
    _, steps, channels = x.type.shape
    if not (isinstance(steps, int) and isinstance(channels, int)):
        raise Unsupported("a symbolic length or channel count")
    step = int(layer._frame_step)
    flat = ctx.op("reshape", ctx.op("transpose", x, perm=[0, 2, 1]), shape=[-1, 1, steps])

    def frames(kernel):  # -> [batch, channels, freqs, frames]
        w = ctx.weight(kernel)
        length = int(w.type.shape[0])
        if layer.padding == "valid":
            pads = [0, 0]
        elif layer.padding == "same":
            pads = same_pads([steps], [length], [step], [1], 'padding="same"')
        else:
            raise Unsupported(f"padding={layer.padding!r}")
        y = ctx.op(
            "conv",
            flat,
            ctx.op("transpose", w, perm=[2, 1, 0]),
            None,
            stride=[step],
            padding=pads,
            dilation=[1],
            groups=1,
        )
        return ctx.op("reshape", y, shape=[-1, channels, *y.type.shape[1:]])

    mode = layer.mode
    real = frames(layer.real_kernel) if mode != "imag" else None
    imag = frames(layer.imag_kernel) if mode != "real" else None
    if mode == "real":
        return _layout(ctx, layer, real)
    if mode == "imag":
        return _layout(ctx, layer, imag)
    if mode == "angle":
        return _layout(ctx, layer, ctx.op("atan2", imag, real))
    if mode == "stft":
        return _layout(ctx, layer, ctx.op("concat", real, imag, axis=2))
    power = ctx.op("add", ctx.op("mul", real, real), ctx.op("mul", imag, imag))
    if mode == "psd":
        inner = ctx.op("slice", power, starts=[1], ends=[-1], axes=[2])
        inner = ctx.op("pad", inner, pads=[0, 0, 1, 0, 0, 0, 1, 0], mode="constant", value=0.0)
        return _layout(ctx, layer, ctx.op("add", power, inner))
    eps = ctx.f32(1e-7, power)  # Keras' backend.epsilon()
    magnitude = _layout(ctx, layer, ctx.op("sqrt", ctx.op("maximum", power, eps)))
    if mode == "magnitude":
        return magnitude
    if mode == "log":
        return ctx.op("log", ctx.op("maximum", magnitude, eps))
    raise Unsupported(f"mode={mode!r}")


def _layout(ctx: Ctx, layer, y):
    """[batch, channels, freqs, frames] -> [batch, frames, freqs, channels] (expand_dims) or
    [batch, frames, channels * freqs]."""
    if layer.expand_dims:
        return ctx.op("transpose", y, perm=[0, 3, 2, 1])
    _, c, f, t = y.type.shape
    y = ctx.op("reshape", y, shape=[-1, int(c) * int(f), int(t)])
    return ctx.op("transpose", y, perm=[0, 2, 1])
