"""Converters for torch.special's functions (and the prims PyTorch's decompositions use).

# NOTE: integer inputs compute in the default float type, as torch promotes them; scalar
# operands of the binary functions become constants of the tensor operand's dtype.
"""

from __future__ import annotations

from typing import Any

from msc.frontend.torch.registry import Ctx, converter
from msc.ir import Value
from msc.ops.special import POLYNOMIALS

# canonical op -> the ATen and prims overloads that compute it
UNARY = {
    "lgamma": ("aten.lgamma.default", "prims.lgamma.default"),
    "digamma": ("aten.digamma.default", "aten.special_digamma.default", "prims.digamma.default"),
    "erfc": ("aten.erfc.default", "aten.special_erfc.default", "prims.erfc.default"),
    "erfcx": ("aten.special_erfcx.default", "prims.erfcx.default"),
    "ndtri": ("aten.special_ndtri.default", "prims.ndtri.default"),
    "log_ndtr": ("aten.special_log_ndtr.default",),
    "i0": ("aten.i0.default", "aten.special_i0.default", "prims.bessel_i0.default"),
    "i0e": ("aten.special_i0e.default", "prims.bessel_i0e.default"),
    "i1": ("aten.special_i1.default", "prims.bessel_i1.default"),
    "i1e": ("aten.special_i1e.default", "prims.bessel_i1e.default"),
    "bessel_j0": ("aten.special_bessel_j0.default", "prims.bessel_j0.default"),
    "bessel_j1": ("aten.special_bessel_j1.default", "prims.bessel_j1.default"),
    "bessel_y0": ("aten.special_bessel_y0.default",),
    "bessel_y1": ("aten.special_bessel_y1.default",),
    "modified_bessel_i0": ("aten.special_modified_bessel_i0.default",),
    "modified_bessel_i1": ("aten.special_modified_bessel_i1.default",),
    "modified_bessel_k0": ("aten.special_modified_bessel_k0.default",),
    "modified_bessel_k1": ("aten.special_modified_bessel_k1.default",),
    "scaled_modified_bessel_k0": ("aten.special_scaled_modified_bessel_k0.default",),
    "scaled_modified_bessel_k1": ("aten.special_scaled_modified_bessel_k1.default",),
    "spherical_bessel_j0": (
        "aten.special_spherical_bessel_j0.default",
        "prims.spherical_bessel_j0.default",
    ),
    "airy_ai": ("aten.special_airy_ai.default",),
}

BINARY = {
    "zeta": ("aten.special_zeta", "prims.zeta.default"),
    "igamma": ("aten.igamma.default", "aten.special_gammainc.default", "prims.igamma.default"),
    "igammac": (
        "aten.igammac.default",
        "aten.special_gammaincc.default",
        "prims.igammac.default",
    ),
    "nextafter": ("aten.nextafter.default", "prims.nextafter.default"),
    **{
        p: (f"aten.special_{p}",)
        for p in POLYNOMIALS
    },
}  # fmt: skip

# The Tensor-Scalar overloads torch.special's binary functions have.
_OVERLOADS = {
    "zeta": ("default", "self_scalar", "other_scalar"),
    "polynomial": ("default", "x_scalar", "n_scalar"),
}


def _unary(canonical: str):
    def convert(ctx: Ctx, *args: Any, **kwargs: Any) -> Value:
        (x,) = ctx.promote((list(args) + list(kwargs.values()))[0], kind="int_to_float")
        return ctx.op(canonical, x)

    return convert


def _binary(canonical: str):
    def convert(ctx: Ctx, *args: Any, **kwargs: Any) -> Value:
        a, b = (list(args) + list(kwargs.values()))[:2]
        x, y = ctx.promote(a, b, kind="int_to_float")
        return ctx.op(canonical, x, y)

    return convert


for _canonical, _keys in UNARY.items():
    converter(*_keys)(_unary(_canonical))

for _canonical, _keys in BINARY.items():
    _all: list[str] = []
    for _k in _keys:
        if _k.count(".") == 2:
            _all.append(_k)
        else:
            _ovs = _OVERLOADS["zeta" if _canonical == "zeta" else "polynomial"]
            _all += [f"{_k}.{ov}" for ov in _ovs]
    converter(*_all)(_binary(_canonical))


@converter("aten.polygamma.default", "aten.special_polygamma.default")
def polygamma(ctx: Ctx, n: int, self: Value) -> Value:
    (x,) = ctx.promote(self, kind="int_to_float")
    return ctx.op("digamma", x) if n == 0 else ctx.op("polygamma", x, n=int(n))
