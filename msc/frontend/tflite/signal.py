"""TFLite signal ops: RFFT2D and its consumers (the parts and magnitude of a complex tensor).

# NOTE: a complex tensor is msc's real layout (msc.ops.signal): floats with a trailing dim of
# 2 (real, imaginary); ``Importer`` types it so, and only the ops in ``COMPLEX_READERS`` read
# one.
"""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.tflite.importer import Ctx, complex_part
from msc.frontend.tflite.registry import converter
from msc.frontend.tflite.shape import _ints


@converter("RFFT2D")
def rfft2d(ctx: Ctx, x, fft_length):
    """The 2-D real FFT of the two innermost dims, each zero-padded or cut to its
    ``fft_length``; the innermost keeps its fw // 2 + 1 non-negative frequencies."""
    xv = ctx.value(x)
    fh, fw = (_ints(ctx, fft_length, "the FFT lengths") + [0, 0])[:2]
    r = xv.type.rank
    if r < 2 or len(_ints(ctx, fft_length, "the FFT lengths")) != 2 or fh < 1 or fw < 1:
        raise Unsupported(f"RFFT2D of rank {r} with FFT lengths {[fh, fw]}")
    y = ctx.op("unsqueeze", xv, axes=[r])
    y = ctx.op("dft", y, axis=r - 1, onesided=True, length=fw)
    if not (fh == 1 and xv.type.shape[r - 2] == 1):
        y = ctx.op("dft", y, axis=r - 2, onesided=False, length=fh)
    return y


@converter("REAL")
def real(ctx: Ctx, x):
    return complex_part(ctx, ctx.value(x), 0)


@converter("IMAG")
def imag(ctx: Ctx, x):
    return complex_part(ctx, ctx.value(x), 1)


@converter("COMPLEX_ABS")
def complex_abs(ctx: Ctx, x):
    v = ctx.value(x)
    re, im = complex_part(ctx, v, 0), complex_part(ctx, v, 1)
    return ctx.op("sqrt", ctx.op("add", ctx.op("mul", re, re), ctx.op("mul", im, im)))
