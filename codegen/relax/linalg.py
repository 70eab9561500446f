"""Relax emitters of the linalg family: none. Relax has no matrix factorizations or solvers.
The direct ones (LU and the solves, inverse, slogdet, Cholesky, QR, householder_product) go
through ``msc.ops.decompose.linalg`` (unrolled over static matrix sizes); the iterative ones
below have neither a Relax op nor a decomposition."""

from __future__ import annotations

from codegen.relax.registry import unsupported

for _op, _what in {
    "eigh": "an eigendecomposition",
    "matrix_exp": "a matrix exponential",
    "pinv": "a pseudo-inverse (it needs an SVD)",
    "svd": "a singular value decomposition",
}.items():
    unsupported(
        _op,
        f"Relax has no {_what}, and msc has no decomposition for it (its iteration count "
        "depends on the data)",
    )
