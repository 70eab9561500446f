"""Signal-processing ONNX ops: DFT and STFT.

# NOTE: DFT's axis and dft_length (inputs from opset 20 / 17) and STFT's frame_step and
# frame_length must be constant at import; they become attributes of ``dft`` / ``stft``. The
# ONNX real layout of complex tensors (trailing dim 1 or 2) is kept as is.
"""

from __future__ import annotations

from msc.frontend.onnx.importer import Ctx
from msc.frontend.onnx.registry import converter


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
