"""Signal-processing ONNX ops: DFT, STFT and MelWeightMatrix.

# NOTE: DFT's axis and dft_length (inputs from opset 20 / 17) and STFT's frame_step and
# frame_length must be constant at import; they become attributes of ``dft`` / ``stft``. The
# ONNX real layout of complex tensors (trailing dim 1 or 2) is kept as is.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx
from msc.frontend.onnx.initializers import dtype_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType


def _length(ctx: Ctx, dft_length) -> int | None:
    return None if dft_length is None else int(ctx.scalar(dft_length, "dft_length"))


@converter("DFT", since=17)
def dft_17(ctx: Ctx, input, dft_length=None, *, axis=1, inverse=0, onesided=0):  # noqa: A002
    return _dft(ctx, input, dft_length, None, axis, inverse, onesided)


def _dft(ctx: Ctx, input, dft_length, axis_in, axis: int, inverse, onesided):  # noqa: A002
    runtime_length = dft_length is not None and ctx.known(dft_length) is None
    length_in = _scalar_i64(ctx, dft_length) if runtime_length else None
    return ctx.op(
        "dft",
        input,
        axis_in,
        length_in,
        axis=axis,
        inverse=bool(inverse),
        onesided=bool(onesided),
        length=None if runtime_length else _length(ctx, dft_length),
    )


def _scalar_i64(ctx: Ctx, x):
    """A run-time integer scalar input as the 0-d i64 tensor the canonical ops read."""
    return ctx.int_input(x)


@converter("DFT", since=20)
def dft(ctx: Ctx, input, dft_length=None, axis=None, *, inverse=0, onesided=0):  # noqa: A002
    if axis is not None and ctx.known(axis) is None:  # read at run time
        ax = _scalar_i64(ctx, axis)
        return _dft(ctx, input, dft_length, ax, -2, inverse, onesided)
    a = -2 if axis is None else int(ctx.scalar(axis, "axis"))
    return dft_17(ctx, input, dft_length, axis=a, inverse=inverse, onesided=onesided)


@converter("STFT", since=17)
def stft(ctx: Ctx, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    run_len = frame_length is not None and ctx.known(frame_length) is None
    run_step = ctx.known(frame_step) is None
    n = None if frame_length is None or run_len else int(ctx.scalar(frame_length, "frame_length"))
    if n is None and window is None and not run_len:
        n = ctx.shape(signal)[1]
    if ctx.type(signal).rank == 2:
        # [B, L]: onnxruntime reads it as a real signal, [B, L, 1] (the spec's form), and
        # exporters write it (onnxscript's speech front ends).
        signal = ctx.op("unsqueeze", signal, axes=[2])
    return ctx.op(
        "stft",
        signal,
        window,
        ctx.int_input(frame_step) if run_step else None,
        ctx.int_input(frame_length) if run_len else None,
        frame_step=None if run_step else int(ctx.scalar(frame_step, "frame_step")),
        frame_length=n,
        onesided=bool(onesided),
    )


@converter("MelWeightMatrix", since=17)
def mel_weight_matrix(
    ctx: Ctx,
    num_mel_bins,
    dft_length,
    sample_rate,
    lower_edge_hertz,
    upper_edge_hertz,
    *,
    output_datatype=1,
):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters, computed in float64 from run-time
    scalars (all constant, the importer folds the node instead). Filter i rises from spectrogram
    bin l = edge[i] to c = edge[i + 1] and falls to h = edge[i + 2] (exclusive), where the
    num_mel_bins + 2 edges are evenly spaced in mel between the two frequencies, each
    floor((dft_length + 1) * hz / sample_rate); a filter with l == c is 1 at c alone."""
    f64, i64 = DType.FLOAT64, DType.INT64
    dt = dtype_from_onnx(output_datatype)

    def scalar(x, dtype):
        return ctx.op("reshape", ctx.cast(x, dtype), shape=[])

    def f(v):
        return np.array(v, np.float64)

    n = scalar(num_mel_bins, i64)
    length = scalar(dft_length, f64)
    ln10 = float(np.log(10.0))

    def mel(hz):
        return ctx.op(
            "mul", ctx.op("log1p", ctx.op("div", scalar(hz, f64), f(700))), f(2595 / ln10)
        )

    low, high = mel(lower_edge_hertz), mel(upper_edge_hertz)
    count = ctx.cast(ctx.op("add", n, np.array(2, np.int64)), f64)
    m = ctx.op("range", f(0), count, f(1))
    step = ctx.op("div", ctx.op("sub", high, low), count)
    hz = ctx.op("add", ctx.op("mul", m, step), low)
    hz = ctx.op("mul", ctx.op("expm1", ctx.op("mul", hz, f(ln10 / 2595))), f(700))
    edges = ctx.op("mul", ctx.op("add", length, f(1)), hz)
    edges = ctx.op("floor", ctx.op("div", edges, scalar(sample_rate, f64)))
    i = ctx.op("range", np.array(0, np.int64), n, np.array(1, np.int64))
    lo, mid, hi = (
        ctx.op(
            "reshape",
            ctx.op("gather", edges, ctx.op("add", i, np.array(k, np.int64))),
            shape=[1, -1],
        )
        for k in range(3)
    )
    bins = ctx.op("add", ctx.op("floor", ctx.op("div", length, f(2))), f(1))
    j = ctx.op("reshape", ctx.op("range", f(0), bins, f(1)), shape=[-1, 1])
    rise = ctx.op("div", ctx.op("sub", j, lo), ctx.op("sub", mid, lo))
    at_mid = ctx.cast(ctx.op("eq", j, mid), f64)
    rise = ctx.op("where", ctx.op("eq", mid, lo), at_mid, rise)
    fall = ctx.op("div", ctx.op("sub", hi, j), ctx.op("sub", hi, mid))
    rising = ctx.op("logical_and", ctx.op("ge", j, lo), ctx.op("le", j, mid))
    falling = ctx.op("logical_and", ctx.op("gt", j, mid), ctx.op("lt", j, hi))
    out = ctx.op("where", rising, rise, ctx.op("where", falling, fall, f(0)))
    return ctx.cast(out, dt)
