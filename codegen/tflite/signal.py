"""TFLite emitters for signal ops: a forward real DFT as RFFT2D.

# NOTE: msc's complex values are its real layout (a trailing dim of 2); TFLite's are
# complex64 tensors, so a DFT's output is unpacked from RFFT2D's with REAL and IMAG, then
# PACK on a new innermost axis. Only this op writes complex64 tensors.
"""

from __future__ import annotations

from codegen.tflite.registry import Emit, Ref, emitter
from msc.ir.dtype import DType
from msc.ir.types import TensorType


@emitter("dft")
def dft(e: Emit, x: Ref, axis_in=None, length_in=None, *, axis, inverse, onesided, length) -> Ref:
    r = x.rank
    a = int(axis) % r
    n = length if length is not None else x.shape[a]
    e.require(
        axis_in is None and length_in is None and isinstance(n, int),
        "a DFT with a run-time axis or length",
    )
    e.require(
        not inverse and onesided and x.shape[-1] == 1 and x.dtype is DType.FLOAT32,
        "a DFT other than the forward one-sided DFT of a float32 signal (RFFT2D)",
    )
    # the signal's axis innermost, below a size-1 axis: RFFT2D's two innermost dims
    perm = [d for d in range(r - 1) if d != a] + [a]
    sig = e.squeeze(x, [r - 1], TensorType(x.dtype, list(x.shape[:-1])))
    sig = e.transpose(sig, perm)
    sig = e.expand_dims(sig, sig.rank - 1)
    m = n // 2 + 1
    spec_shape = [*sig.shape[:-1], m]
    spec = e.op("RFFT2D", [sig, e.ints([1, n])], TensorType(DType.COMPLEX64, spec_shape))
    parts = [e.op(p, [spec], TensorType(DType.FLOAT32, spec_shape)) for p in ("REAL", "IMAG")]
    pair = e.op(
        "PACK",
        parts,
        TensorType(DType.FLOAT32, [*spec_shape, 2]),
        values_count=2,
        axis=len(spec_shape),
    )
    pair = e.squeeze(
        pair, [len(spec_shape) - 2], TensorType(DType.FLOAT32, [*spec_shape[:-2], m, 2])
    )
    # back: the frequency axis to where the signal's was
    k = len(perm)
    back = list(range(k - 1))
    back.insert(a, k - 1)
    return e.transpose(pair, [*back, k])
