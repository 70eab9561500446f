"""Special functions: gamma-family, error-function relatives, Bessel functions, orthogonal
polynomials (torch.special's set).

# NOTE: every op here is elementwise and keeps its input's (floating) dtype; binary ones
# broadcast. The polynomial ops take the degree ``n`` as a tensor of the same dtype (as
# torch.special does); a negative degree gives 0. A codegen whose target lacks one lowers it
# through msc.ops.decompose where a decomposition exists (ONNX has none of these ops).
"""

from __future__ import annotations

from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, broadcast, same_dtype
from msc.ops.schema import Attr

__all__ = ["UNARY", "BINARY", "POLYNOMIALS"]

# name -> doc. One floating input; the output has its type.
UNARY = {
    "lgamma": "log |Gamma(x)|",
    "digamma": "d/dx log Gamma(x)",
    "erfc": "1 - erf(x)",
    "erfcx": "exp(x^2) * erfc(x)",
    "ndtri": "inverse of the standard normal CDF",
    "log_ndtr": "log of the standard normal CDF",
    "i0": "modified Bessel function of the first kind, order 0",
    "i0e": "exp(-|x|) * i0(x)",
    "i1": "modified Bessel function of the first kind, order 1",
    "i1e": "exp(-|x|) * i1(x)",
    "bessel_j0": "Bessel function of the first kind, order 0",
    "bessel_j1": "Bessel function of the first kind, order 1",
    "bessel_y0": "Bessel function of the second kind, order 0",
    "bessel_y1": "Bessel function of the second kind, order 1",
    "modified_bessel_i0": "modified Bessel function of the first kind, order 0",
    "modified_bessel_i1": "modified Bessel function of the first kind, order 1",
    "modified_bessel_k0": "modified Bessel function of the second kind, order 0",
    "modified_bessel_k1": "modified Bessel function of the second kind, order 1",
    "scaled_modified_bessel_k0": "exp(x) * modified_bessel_k0(x)",
    "scaled_modified_bessel_k1": "exp(x) * modified_bessel_k1(x)",
    "spherical_bessel_j0": "sin(x) / x (1 at 0)",
    "airy_ai": "Airy function Ai(x)",
}

# name -> doc. Two floating inputs (numpy broadcasting); the output has their dtype.
BINARY = {
    "zeta": "Hurwitz zeta function zeta(x, q)",
    "igamma": "regularized lower incomplete gamma P(a, x)",
    "igammac": "regularized upper incomplete gamma Q(a, x)",
    "nextafter": "the next representable value after a toward b",
}

# The orthogonal polynomials: (x, n) with the degree n a tensor.
POLYNOMIALS = {
    "chebyshev_polynomial_t": "Chebyshev polynomial of the first kind T_n(x)",
    "chebyshev_polynomial_u": "Chebyshev polynomial of the second kind U_n(x)",
    "chebyshev_polynomial_v": "Chebyshev polynomial of the third kind V_n(x)",
    "chebyshev_polynomial_w": "Chebyshev polynomial of the fourth kind W_n(x)",
    "shifted_chebyshev_polynomial_t": "T_n(2x - 1)",
    "shifted_chebyshev_polynomial_u": "U_n(2x - 1)",
    "shifted_chebyshev_polynomial_v": "V_n(2x - 1)",
    "shifted_chebyshev_polynomial_w": "W_n(2x - 1)",
    "hermite_polynomial_h": "physicists' Hermite polynomial H_n(x)",
    "hermite_polynomial_he": "probabilists' Hermite polynomial He_n(x)",
    "laguerre_polynomial_l": "Laguerre polynomial L_n(x)",
    "legendre_polynomial_p": "Legendre polynomial P_n(x)",
}


def _float(x: TensorType, op: str) -> None:
    if not x.dtype.is_floating:
        raise InferError(f"{op}: needs a floating input, got {x.dtype}")


def _unary(name: str):
    def infer(x: TensorType) -> TensorType:
        _float(x, name)
        return x

    return infer


def _binary(name: str):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        same_dtype(a, b)
        _float(a, name)
        return TensorType(a.dtype, broadcast(a, b))

    return infer


for _name, _doc in UNARY.items():
    registry.op(_name, ["x"], category="special", doc=_doc)(_unary(_name))
for _name, _doc in {**BINARY, **POLYNOMIALS}.items():
    registry.op(_name, ["a", "b"], category="special", doc=_doc)(_binary(_name))


@registry.op("polygamma", ["x"], {"n": Attr.int()}, category="special")
def polygamma(x: TensorType, *, n: int) -> TensorType:
    """The n-th derivative of digamma (n = 0 is digamma)."""
    _float(x, "polygamma")
    if n < 0:
        raise InferError(f"polygamma: n must be >= 0, got {n}")
    return x
