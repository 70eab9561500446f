"""Relax emitters of the signal family: DFT and STFT as products with constant cos/sin
matrices (Relax has no Fourier transform).

# NOTE: the matrices are computed in float64 with numpy at emission and cast to the input's
# dtype, so the only rounding is the product's (an FFT rounds differently: expect differences
# of a few ulps of the largest output). The transform length must be static; the frame count
# of an STFT may be symbolic (the frames are a strided conv1d over the signal).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op


def _static(e: Emit, t, what: str) -> int | None:
    """The value of a 0-d / [1] integer input that must be a constant (None when absent)."""
    if t is None:
        return None
    e.require(isinstance(t, tvm.ir.GenericConst), f"a {what} computed at run time")
    return int(t.value.numpy().reshape(-1)[0])


def dft_matrix(n_in: int, channels: int, n: int, *, inverse: bool, onesided: bool) -> np.ndarray:
    """W [n_in, channels, bins, 2 | 1] (float64): the DFT of length ``n`` of a signal of
    ``n_in`` samples of ``channels`` (1 real, 2 real and imaginary) parts is
    ``x.reshape(n_in * channels) @ W.reshape(n_in * channels, -1)``; samples past ``n`` are
    dropped (zero rows), missing ones are zeros. Forward onesided keeps n//2+1 bins; inverse
    divides by n, and inverse onesided reads n//2+1 bins of a Hermitian spectrum and gives
    the n real samples (trailing dim 1)."""
    if inverse and onesided:
        k = np.arange(min(n_in, n // 2 + 1))[:, None]
        t = np.arange(n)[None, :]
        theta = 2 * np.pi * ((k * t) % n) / n
        weight = np.full((len(k), 1), 2.0)
        weight[0] = 1.0
        if n % 2 == 0 and n // 2 < n_in:
            weight[n // 2] = 1.0
        w = np.zeros((n_in, channels, n, 1))
        w[: len(k), 0, :, 0] = weight * np.cos(theta) / n
        if channels == 2:
            w[: len(k), 1, :, 0] = -weight * np.sin(theta) / n
        return w
    bins = n // 2 + 1 if onesided else n
    j = np.arange(min(n_in, n))[:, None]
    theta = 2 * np.pi * ((j * np.arange(bins)[None, :]) % n) / n
    s = 1.0 if inverse else -1.0
    cos, sin = np.cos(theta), s * np.sin(theta)
    w = np.zeros((n_in, channels, bins, 2))
    w[: len(j), 0, :, 0], w[: len(j), 0, :, 1] = cos, sin
    if channels == 2:
        w[: len(j), 1, :, 0], w[: len(j), 1, :, 1] = -sin, cos
    return w / n if inverse else w


@emitter("dft")
def dft(e: Emit, x, axis_in=None, length_in=None, *, axis, inverse, onesided, length):
    shape = e.shape(x)
    r = len(shape)
    a = _static(e, axis_in, "DFT axis")
    a = axis if a is None else a
    a = a + r if a < 0 else a
    e.require(0 <= a < r - 1, "a DFT along the trailing (real, imaginary) dim")
    n_in, channels = shape[a], shape[-1]
    e.require(isinstance(n_in, int), "a DFT over a dim of run-time size")
    e.require(channels in (1, 2), "a DFT input whose trailing dim is not 1 or 2")
    n = _static(e, length_in, "DFT length")
    n = length if n is None else n
    if n is None:
        n = 2 * (n_in - 1) if inverse and onesided else n_in
    e.require(n >= 1, "a DFT of length < 1")
    w = dft_matrix(n_in, channels, n, inverse=inverse, onesided=onesided)
    bins, parts = w.shape[2], w.shape[3]
    # x with the transformed and trailing dims last, flattened together: one matmul
    order = [i for i in range(r - 1) if i != a] + [a, r - 1]
    xt = x if a == r - 2 else e.emit(R.permute_dims(x, order))
    rest = [shape[i] for i in order[:-2]]
    flat = e.emit(R.reshape(xt, [*rest, n_in * channels]))
    mat = e.const(w.reshape(n_in * channels, bins * parts), e.dtype(x))
    y = e.emit(R.reshape(e.emit(R.matmul(flat, mat)), [*rest, bins, parts]))
    if a == r - 2:
        return y
    back = list(range(r - 2))
    back.insert(a, r - 2)
    return e.emit(R.permute_dims(y, [*back, r - 1]))


@emitter("stft")
def stft(e: Emit, signal, window=None, step_in=None, length_in=None, *, frame_step,
         frame_length, onesided):  # fmt: skip
    shape = e.shape(signal)
    e.require(len(shape) == 3 and shape[2] in (1, 2), "an STFT signal that is not [B, L, 1|2]")
    channels = shape[2]
    step = _static(e, step_in, "STFT frame step")
    step = frame_step if step is None else step
    n = _static(e, length_in, "STFT frame length")
    n = frame_length if n is None else n
    if window is not None:
        wn = e.shape(window)
        e.require(len(wn) == 1 and isinstance(wn[0], int), "an STFT window of run-time size")
        e.require(n is None or n == wn[0], "an STFT window whose length is not frame_length")
        n = wn[0]
    e.require(n is not None, "an STFT without a frame length or a window")
    e.require(step >= 1, "an STFT frame step < 1")
    # rows (bin, part) of a conv1d whose kernel is one frame and whose stride is the step
    w = dft_matrix(n, channels, n, inverse=False, onesided=onesided)  # [n, C, bins, 2]
    bins = w.shape[2]
    if isinstance(window, tvm.ir.GenericConst):
        w = w * window.value.numpy().astype(np.float64).reshape(n, 1, 1, 1)
    # [n, C, bins * 2] as conv1d's WIO kernel: frames in, [B, frames, bins * 2] out, with no
    # transpose of the run-time length (TVM's RewriteDataflowReshape fails on some)
    kernel = e.const(w.reshape(n, channels, bins * 2), e.dtype(signal))
    if window is not None and not isinstance(window, tvm.ir.GenericConst):
        kernel = e.emit(R.multiply(kernel, R.reshape(window, [n, 1, 1])))
    y = e.emit(R.nn.conv1d(signal, kernel, strides=[step], data_layout="NWC",
                           kernel_layout="WIO", out_layout="NWC"))  # fmt: skip
    frames = e.shape(y)[1]
    return e.emit(R.reshape(y, [shape[0], frames, bins, 2]))
