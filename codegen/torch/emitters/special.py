"""Emitters of the special family: each op is one torch.special (or torch) function."""

from __future__ import annotations

import ast

from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.registry import emitter
from msc.ops.special import POLYNOMIALS

# canonical op -> torch function (unary and binary alike: inputs in schema order)
_FUNCTIONS = {
    "lgamma": "torch.lgamma",
    "digamma": "torch.digamma",
    "erfc": "torch.special.erfc",
    "erfcx": "torch.special.erfcx",
    "ndtri": "torch.special.ndtri",
    "log_ndtr": "torch.special.log_ndtr",
    "i0": "torch.special.i0",
    "i0e": "torch.special.i0e",
    "i1": "torch.special.i1",
    "i1e": "torch.special.i1e",
    "bessel_j0": "torch.special.bessel_j0",
    "bessel_j1": "torch.special.bessel_j1",
    "bessel_y0": "torch.special.bessel_y0",
    "bessel_y1": "torch.special.bessel_y1",
    "modified_bessel_i0": "torch.special.modified_bessel_i0",
    "modified_bessel_i1": "torch.special.modified_bessel_i1",
    "modified_bessel_k0": "torch.special.modified_bessel_k0",
    "modified_bessel_k1": "torch.special.modified_bessel_k1",
    "scaled_modified_bessel_k0": "torch.special.scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1": "torch.special.scaled_modified_bessel_k1",
    "spherical_bessel_j0": "torch.special.spherical_bessel_j0",
    "airy_ai": "torch.special.airy_ai",
    "zeta": "torch.special.zeta",
    "igamma": "torch.special.gammainc",
    "igammac": "torch.special.gammaincc",
    "nextafter": "torch.nextafter",
    **{
        p: f"torch.special.{p}"
        for p in POLYNOMIALS
    },
}  # fmt: skip


def _make(fn: str):
    def emit(e: NodeEmit, *xs: Arg) -> ast.expr:
        return call(fn, *xs)

    return emit


for _op, _fn in _FUNCTIONS.items():
    emitter(_op)(_make(_fn))


@emitter("polygamma")
def polygamma(e: NodeEmit, x: Arg, *, n: int) -> ast.expr:
    return call("torch.special.polygamma", n, x)
