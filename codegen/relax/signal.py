"""Relax emitters of the signal family: none yet."""

from __future__ import annotations

from codegen.relax.registry import unsupported

unsupported(
    "dft",
    "Relax has no Fourier transform and msc has no decomposition (a DFT as a matmul with a "
    "cos/sin matrix is not written)",
)
unsupported(
    "stft",
    "Relax has no Fourier transform and msc has no decomposition (framing plus a DFT matmul "
    "is not written)",
)
