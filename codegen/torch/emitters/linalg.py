"""Emitters of the linalg family: each op is one torch.linalg (or torch) call."""

from __future__ import annotations

import ast

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.registry import emitter


@emitter("inverse")
def inverse(e: NodeEmit, x: Arg) -> ast.expr:
    return call("torch.linalg.inv", x)


@emitter("matrix_exp")
def matrix_exp(e: NodeEmit, x: Arg) -> ast.expr:
    return call("torch.linalg.matrix_exp", x)


@emitter("cholesky")
def cholesky(e: NodeEmit, x: Arg, *, upper: bool) -> ast.expr:
    return (
        call("torch.linalg.cholesky", x, upper=True) if upper else call("torch.linalg.cholesky", x)
    )


@emitter("cholesky_inverse")
def cholesky_inverse(e: NodeEmit, l: Arg, *, upper: bool) -> ast.expr:  # noqa: E741
    return call("torch.cholesky_inverse", l, upper)


@emitter("cholesky_solve")
def cholesky_solve(e: NodeEmit, b: Arg, l: Arg, *, upper: bool) -> ast.expr:  # noqa: E741
    return call("torch.cholesky_solve", b, l, upper)


@emitter("solve")
def solve(e: NodeEmit, a: Arg, b: Arg, *, left: bool) -> ast.expr:
    return (
        call("torch.linalg.solve", a, b) if left else call("torch.linalg.solve", a, b, left=False)
    )


@emitter("solve_triangular")
def solve_triangular(
    e: NodeEmit, a: Arg, b: Arg, *, upper: bool, left: bool, unitriangular: bool
) -> ast.expr:
    return call("torch.linalg.solve_triangular", a, b, upper=upper, left=left,
                unitriangular=unitriangular)  # fmt: skip


@emitter("qr")
def qr(e: NodeEmit, x: Arg, *, mode: str) -> ast.expr:
    return expr("tuple(q)", q=call("torch.linalg.qr", x, mode=mode))


@emitter("svd")
def svd(e: NodeEmit, x: Arg, *, full_matrices: bool) -> ast.expr:
    return expr("tuple(s)", s=call("torch.linalg.svd", x, full_matrices=full_matrices))


@emitter("eigh")
def eigh(e: NodeEmit, x: Arg, *, upper: bool) -> ast.expr:
    return expr("tuple(s)", s=call("torch.linalg.eigh", x, UPLO="U" if upper else "L"))


@emitter("slogdet")
def slogdet(e: NodeEmit, x: Arg) -> ast.expr:
    return expr("tuple(s)", s=call("torch.linalg.slogdet", x))


@emitter("lu_factor")
def lu_factor(e: NodeEmit, x: Arg, *, pivot: bool) -> ast.expr:
    return expr("tuple(s)", s=call("torch.linalg.lu_factor", x, pivot=pivot))


@emitter("lu_solve")
def lu_solve(e: NodeEmit, lu: Arg, pivots: Arg, b: Arg, *, left: bool, adjoint: bool) -> ast.expr:
    return call("torch.linalg.lu_solve", lu, pivots, b, left=left, adjoint=adjoint)


@emitter("pinv")
def pinv(e: NodeEmit, x: Arg, *, rtol: float | None, hermitian: bool) -> ast.expr:
    if rtol is None:
        return call("torch.linalg.pinv", x, hermitian=hermitian)
    return call("torch.linalg.pinv", x, rtol=rtol, hermitian=hermitian)


@emitter("householder_product")
def householder_product(e: NodeEmit, a: Arg, tau: Arg) -> ast.expr:
    return call("torch.linalg.householder_product", a, tau)
