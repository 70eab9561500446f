"""Keras signal layers: STFTSpectrogram and MelSpectrogram, their frames' DFT as a strided
1-d convolution (STFTSpectrogram's kernels are weights of the layer; MelSpectrogram's are
torch.stft's, computed here), then the magnitudes, mel matrix and dB scale Keras applies."""

from __future__ import annotations

import numpy as np

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


def _window(kind, length: int) -> np.ndarray:
    """torch's periodic hann / hamming window (Keras' stft on the torch backend)."""
    i = np.arange(length, dtype=np.float64)
    if kind is None:
        return np.ones(length)
    if kind == "hann":
        return 0.5 - 0.5 * np.cos(2 * np.pi * i / length)
    if kind == "hamming":
        return 0.54 - 0.46 * np.cos(2 * np.pi * i / length)
    raise Unsupported(f"window={kind!r}")


@converter("MelSpectrogram")
def mel_spectrogram(ctx: Ctx, layer, x):
    """Keras' computation on the torch backend: torch.stft (centred: reflect padding of
    fft_length // 2, the window centred in the frame) as a strided conv1d with the DFT of
    the windowed frame, the magnitude to ``mag_exp``, the layer's own mel matrix, and its
    dB scale (clipped at the batch's maximum minus ``top_db``); [batch, mels, frames]."""
    if x.type.rank != 2:
        raise Unsupported(f"an input of rank {x.type.rank} (msc reads [batch, samples])")
    n, hop, length = int(layer.fft_length), int(layer.sequence_stride), int(layer.sequence_length)
    win = np.zeros(n)
    start = (n - length) // 2
    win[start : start + length] = _window(layer.window, length)
    bins = n // 2 + 1
    angle = 2 * np.pi * np.arange(bins)[:, None] * np.arange(n)[None, :] / n
    kernel = np.concatenate([win * np.cos(angle), -win * np.sin(angle)])[:, None, :]
    y = ctx.op("unsqueeze", x, axes=[1])  # [batch, 1, samples]
    y = ctx.op("pad", y, pads=[0, 0, n // 2, 0, 0, n // 2], mode="reflect")
    w = ctx.f32(kernel, x)
    y = ctx.op("conv", y, w, None, stride=[hop], padding=[0, 0], dilation=[1], groups=1)
    re, im = ctx.multi("split", y, axis=1, sizes=[bins, bins])
    spec = ctx.op("sqrt", ctx.op("add", ctx.op("mul", re, re), ctx.op("mul", im, im)))
    if float(layer.mag_exp) != 1.0:
        spec = ctx.op("pow", spec, ctx.f32(float(layer.mag_exp), spec))
    from msc.frontend.keras.importer import to_numpy

    mel = to_numpy(
        layer.linear_to_mel_weight_matrix(
            num_mel_bins=layer.num_mel_bins,
            num_spectrogram_bins=bins,
            sampling_rate=layer.sampling_rate,
            lower_edge_hertz=layer.min_freq,
            upper_edge_hertz=layer.max_freq,
        )
    )
    out = ctx.op("matmul", ctx.op("transpose", spec, perm=[0, 2, 1]), ctx.f32(mel, spec))
    if layer.power_to_db:
        floor = float(layer.min_power)
        db = ctx.op("log10", ctx.op("maximum", out, ctx.f32(floor, out)))
        ref = 10.0 * np.log10(max(abs(float(layer.ref_power)), floor))
        db = ctx.op("sub", ctx.op("mul", db, ctx.f32(10.0, db)), ctx.f32(ref, db))
        top = ctx.op("reduce_max", db, keepdims=False)
        db = ctx.op("maximum", db, ctx.op("sub", top, ctx.f32(float(layer.top_db), db)))
        out = db
    return ctx.op("transpose", out, perm=[0, 2, 1])
