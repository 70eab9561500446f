"""ONNX emitters of the signal family (dft, stft)."""

from __future__ import annotations

from codegen.onnx.registry import Emit, Ref, emitter
from msc.ir.dtype import DType


# ---------------------------------------------------------------- signal
def _length(e: Emit, length) -> Ref | None:
    return None if length is None else e.scalar(length, DType.INT64)


@emitter("dft", since=17)
def dft_17(e: Emit, x: Ref, axis_in=None, length_in=None, *, axis, inverse, onesided, length):
    e.require(axis_in is None, "DFT with a run-time axis needs opset 20")
    return e.op(
        "DFT",
        x,
        length_in if length_in is not None else _length(e, length),
        axis=axis % x.rank,
        inverse=int(inverse),
        onesided=int(onesided),
    )


@emitter("dft", since=20)
def dft(e: Emit, x: Ref, axis_in=None, length_in=None, *, axis, inverse, onesided, length):
    return e.op(
        "DFT",
        x,
        length_in if length_in is not None else _length(e, length),
        axis_in if axis_in is not None else e.scalar(axis, DType.INT64),
        inverse=int(inverse),
        onesided=int(onesided),
    )


@emitter("stft", since=17)
def stft(
    e: Emit,
    signal: Ref,
    window,
    step_in=None,
    length_in=None,
    *,
    frame_step,
    frame_length,
    onesided,
):
    length = None if frame_length is None else e.scalar(frame_length, DType.INT64)
    length = length_in if length_in is not None else length
    step = step_in if step_in is not None else e.scalar(frame_step, DType.INT64)
    return e.op("STFT", signal, step, window, length, onesided=int(onesided))
