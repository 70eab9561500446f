"""Signal-processing ops: discrete Fourier transforms.

# NOTE: complex tensors use the ONNX real layout: a trailing dim of 2 (real, imaginary), or of
# 1 for a real input. ``axis`` counts dims of that tensor (the trailing dim included), so it is
# never the trailing dim itself.
"""

from __future__ import annotations

from msc.ir import symexpr
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known
from msc.ops.infer import axis as norm_axis
from msc.ops.schema import Attr


@registry.op(
    "dft",
    ["x", "axis?", "length?"],
    {
        "axis": Attr.int(-2),
        "inverse": Attr.bool(False),
        "onesided": Attr.bool(False),
        "length": Attr.int(None, doc="none = the input's length (2*(n-1) for onesided inverse)"),
    },
    category="signal",
)
def dft(x, axis_in, length_in, *, axis, inverse, onesided, length):
    """Discrete Fourier transform along ``axis`` of x [..., 1|2] -> [..., 2]; onesided keeps
    the n//2+1 non-negative frequencies (forward) or takes them and returns a real [..., 1]
    signal (inverse). The inverse divides by the length (ONNX DFT)."""
    if x.shape is None:
        return x
    r = len(x.shape)
    if axis_in is not None or length_in is not None:  # read at run time (0-d integers)
        same = length is None and length_in is None and not onesided
        last = 1 if inverse and onesided else 2
        if axis_in is None:
            a = norm_axis(axis, r)
            return TensorType(
                x.dtype, [None if i == a else d for i, d in enumerate(x.shape[:-1])] + [last]
            )
        return TensorType(x.dtype, [*(x.shape[:-1] if same else (None,) * (r - 1)), last])
    a = norm_axis(axis, r)
    if a == r - 1:
        raise InferError("dft: axis is the trailing (real, imaginary) dim")
    shape = list(x.shape)
    n = length
    if n is None and known(shape[a]):
        n = 2 * (shape[a] - 1) if inverse and onesided else shape[a]
    if inverse and onesided:
        shape[a], shape[-1] = n, 1
    else:
        shape[a] = (n // 2 + 1 if onesided else n) if n is not None else None
        shape[-1] = 2
    return TensorType(x.dtype, shape)


@registry.op(
    "stft",
    ["signal", "window?", "frame_step?", "frame_length?"],
    {
        "frame_step": Attr.int(None, doc="None: the run-time frame_step input"),
        "frame_length": Attr.int(None, doc="none = the window's length"),
        "onesided": Attr.bool(True),
    },
    category="signal",
)
def stft(signal, window, step_in, length_in, *, frame_step, frame_length, onesided):
    """Short-time Fourier transform of signal [B, L, 1|2] -> [B, frames, bins, 2], frames =
    1 + (L - frame_length) // frame_step, each frame times the window (ONNX STFT). The step
    and length may be 0-d integer inputs read at run time instead."""
    if (frame_step is None) == (step_in is None):
        raise InferError("stft: give frame_step as an attribute or an input (one of them)")
    if length_in is not None and frame_length is not None:
        raise InferError("stft: give frame_length as an attribute or an input, not both")
    if signal.shape is not None and (len(signal.shape) != 3 or signal.shape[2] not in (1, 2)):
        if len(signal.shape) != 3 or known(signal.shape[2]):
            raise InferError(f"stft: signal must be [B, L, 1|2], got {signal}")
    n = frame_length
    if length_in is not None:
        n = window.shape[0] if window is not None and window.shape is not None else None
        if signal.shape is None:
            return TensorType(signal.dtype, None)
        bins = (n // 2 + 1 if onesided else n) if known(n) else None
        return TensorType(signal.dtype, (signal.shape[0], None, bins, 2))
    if n is None and window is not None and window.shape is not None:
        n = window.shape[0]
    if signal.shape is None:
        return TensorType(signal.dtype, None)
    b, length = signal.shape[0], signal.shape[1]
    frames = None
    if frame_step is not None and length is not None and known(n):  # symbolic with L
        frames = symexpr.add(symexpr.floordiv(symexpr.sub(length, n), frame_step), 1)
    bins = (n // 2 + 1 if onesided else n) if known(n) else None
    return TensorType(signal.dtype, (b, frames, bins, 2))
