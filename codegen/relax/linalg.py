"""Relax emitters of the linalg family: none. Relax has no matrix factorizations or solvers,
and msc's decompositions do not lower them (each is an iterative or pivoting algorithm)."""

from __future__ import annotations

from codegen.relax.registry import unsupported

for _op, _what in {
    "cholesky": "a Cholesky factorization",
    "cholesky_inverse": "a Cholesky-based inverse",
    "cholesky_solve": "a Cholesky-based solver",
    "eigh": "an eigendecomposition",
    "householder_product": "Householder products",
    "inverse": "a matrix inverse",
    "lu_factor": "an LU factorization",
    "lu_solve": "an LU-based solver",
    "matrix_exp": "a matrix exponential",
    "pinv": "a pseudo-inverse (it needs an SVD)",
    "qr": "a QR factorization",
    "slogdet": "a determinant",
    "solve": "a linear solver",
    "solve_triangular": "a triangular solver",
    "svd": "a singular value decomposition",
}.items():
    unsupported(_op, f"Relax has no {_what} and msc has no decomposition for it")
