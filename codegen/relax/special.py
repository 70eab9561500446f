"""Relax emitters of the special family. The special functions with a series or rational
approximation go through ``msc.ops.decompose.special`` (the orthogonal polynomials as their
recurrence in a loop, zeta and polygamma by Euler-Maclaurin summation); the ones below have
neither a Relax op nor a decomposition."""

from __future__ import annotations

from codegen.relax.registry import unsupported

for _op, _what in {
    "airy_ai": "Airy function",
    "igamma": "incomplete gamma function",
    "igammac": "incomplete gamma function",
}.items():
    unsupported(_op, f"Relax has no {_what} and msc has no decomposition for it")
unsupported("nextafter", "Relax has no nextafter nor a bit reinterpretation to build it from")
