"""Relax emitters of the special family. The special functions with a series or rational
approximation go through ``msc.ops.decompose.special``; the ones below have neither a Relax
op nor a decomposition."""

from __future__ import annotations

from codegen.relax.registry import unsupported
from msc.ops.special import POLYNOMIALS

for _op in POLYNOMIALS:
    unsupported(
        _op,
        "Relax has no orthogonal polynomials, and the recurrence runs n steps with n a tensor "
        "(data-dependent); msc has no decomposition",
    )
for _op, _what in {
    "airy_ai": "Airy function",
    "zeta": "Hurwitz zeta function",
    "igamma": "incomplete gamma function",
    "igammac": "incomplete gamma function",
    "polygamma": "polygamma function",
}.items():
    unsupported(_op, f"Relax has no {_what} and msc has no decomposition for it")
unsupported("nextafter", "Relax has no nextafter nor a bit reinterpretation to build it from")
