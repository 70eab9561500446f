"""Emitters of the signal family (dft, stft), with their run-time helpers.

# NOTE: a run-time helper (``_msc_*``) uses only ``torch``, ``F`` and other helpers: its
# source is pasted into generated modules.
"""

from __future__ import annotations

import torch

from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import forward_to_helper, helper_call, int_scalar
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS
from msc.errors import ConversionError


@EMITTERS("stft")
def stft(
    e: NodeEmit,
    signal: Arg,
    window: Arg | None = None,
    step_in: Arg | None = None,
    length_in: Arg | None = None,
    *,
    frame_step,
    frame_length,
    onesided,
):
    step = int_scalar(step_in) if step_in is not None else frame_step
    n = int_scalar(length_in) if length_in is not None else frame_length
    if n is None:
        if window is None or window.shape is None or not isinstance(window.shape[0], int):
            raise ConversionError("stft: frame length unknown (no frame_length, no static window)")
        n = window.shape[0]
    return helper_call(e, "_msc_stft", signal, window, step, n, onesided)


# Ops computed by one run-time helper taking the node's inputs and attributes in order.
EMITTERS("dft")(forward_to_helper("_msc_dft", __name__))


def _msc_dft(x, axis_in, length_in, axis, inverse, onesided, length):
    """ONNX DFT on the real layout [..., 1|2] -> [..., 2] ([..., 1] for a onesided inverse),
    computed in float64 (as the ONNX reference does) and cast back; the axis and length
    tensors, when given, are read at run time."""
    axis = axis if axis_in is None else int(axis_in)
    length = length if length_in is None else int(length_in)
    a = axis % x.dim()
    work = x.double()
    z = torch.view_as_complex(work.contiguous()) if x.shape[-1] == 2 else work[..., 0]
    if inverse and onesided:
        return torch.fft.irfft(z, n=length, dim=a).unsqueeze(-1).to(x.dtype)
    if inverse:
        y = torch.fft.ifft(z, n=length, dim=a)
    else:
        y = torch.fft.fft(z, n=length, dim=a)
        if onesided:
            y = y.narrow(a, 0, y.shape[a] // 2 + 1)
    # torch computes some inverses of a real input as a lazy conjugate, which view_as_real
    # refuses until it is resolved.
    return torch.view_as_real(y.resolve_conj()).to(x.dtype)


def _msc_stft(signal, window, frame_step, frame_length, onesided):
    """ONNX STFT: windowed frames of signal [B, L, 1|2] -> [B, frames, bins, 2]."""
    frames = signal.unfold(1, frame_length, frame_step).movedim(-1, 2)
    if window is not None:
        frames = frames * window.reshape(1, 1, frame_length, 1)
    return _msc_dft(frames, None, None, 2, False, onesided, None)


runtime_helpers(_msc_dft, _msc_stft)
