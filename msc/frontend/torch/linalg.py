"""Converters for torch.linalg: inverse, solves, factorizations, pseudo-inverse.

# NOTE: LAPACK-style outputs are given their meaning: ``info`` (an error code torch only
# checks when asked) is zeros; the LU and pivots a solve or determinant also returns come from
# a ``lu_factor`` node (dropped when unused, as every unused node is).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Value


def _info(ctx: Ctx, x: Value) -> Value:
    """Zeros shaped like x's batch (torch's int32 ``info``)."""
    batch = ctx.op("slice", ctx.op("shape", x), starts=[0], ends=[-2], axes=[0])
    return ctx.op("full", batch, value=0.0, dtype=DType.INT32)


def _lu(ctx: Ctx, x: Value) -> tuple[Value, Value]:
    lu, piv = ctx.multi("lu_factor", x, pivot=True)
    return lu, piv


@converter("aten.linalg_inv.default", "aten.inverse.default")
def inverse(ctx: Ctx, A: Value) -> Value:  # noqa: N803 - the schema's name
    return ctx.op("inverse", A)


@converter("aten.linalg_inv_ex.default")
def inv_ex(ctx: Ctx, A: Value, *, check_errors: bool = False) -> tuple:  # noqa: N803
    return ctx.op("inverse", A), _info(ctx, A)


@converter("aten.linalg_solve.default")
def solve(ctx: Ctx, A: Value, B: Value, *, left: bool = True) -> Value:  # noqa: N803
    a, b = ctx.promote(A, B)
    return ctx.op("solve", a, b, left=left)


@converter("aten._linalg_solve_ex.default")
def solve_ex(ctx: Ctx, A: Value, B: Value, *, left: bool = True, check_errors: bool = False):  # noqa: N803
    return (solve(ctx, A, B, left=left), *_lu(ctx, A), _info(ctx, A))


@converter("aten.linalg_cholesky.default", "aten.cholesky.default")
def cholesky(ctx: Ctx, self: Value, upper: bool = False) -> Value:
    return ctx.op("cholesky", self, upper=upper)


@converter("aten.linalg_cholesky_ex.default")
def cholesky_ex(ctx: Ctx, self: Value, *, upper: bool = False, check_errors: bool = False):
    return ctx.op("cholesky", self, upper=upper), _info(ctx, self)


@converter("aten.cholesky_solve.default")
def cholesky_solve(ctx: Ctx, self: Value, input2: Value, upper: bool = False) -> Value:
    return ctx.op("cholesky_solve", self, input2, upper=upper)


@converter("aten.cholesky_inverse.default")
def cholesky_inverse(ctx: Ctx, self: Value, upper: bool = False) -> Value:
    return ctx.op("cholesky_inverse", self, upper=upper)


@converter("aten.linalg_qr.default")
def qr(ctx: Ctx, A: Value, mode: str = "reduced") -> tuple:  # noqa: N803
    return ctx.multi("qr", A, mode=mode)


@converter("aten._linalg_svd.default")
def svd(
    ctx: Ctx, A: Value, full_matrices: bool = False, compute_uv: bool = True,  # noqa: N803
    *, driver: str | None = None,
) -> tuple:  # fmt: skip
    u, s, vh = ctx.multi("svd", A, full_matrices=full_matrices)
    if not compute_uv:
        empty = ctx.op("full", shape=[0], value=0.0, dtype=A.dtype)
        return empty, s, empty
    return u, s, vh


@converter("aten._linalg_eigh.default")
def eigh(ctx: Ctx, A: Value, UPLO: str = "L", compute_v: bool = True) -> tuple:  # noqa: N803
    w, v = ctx.multi("eigh", A, upper=UPLO.upper() == "U")
    return w, (v if compute_v else ctx.op("full", shape=[0], value=0.0, dtype=A.dtype))


@converter("aten._linalg_slogdet.default")
def slogdet(ctx: Ctx, A: Value) -> tuple:  # noqa: N803
    return (*ctx.multi("slogdet", A), *_lu(ctx, A))


@converter("aten._linalg_det.default")
def det(ctx: Ctx, A: Value) -> tuple:  # noqa: N803
    return (ctx.op("det", A), *_lu(ctx, A))


@converter("aten.linalg_lu_factor_ex.default")
def lu_factor_ex(ctx: Ctx, A: Value, *, pivot: bool = True, check_errors: bool = False):  # noqa: N803
    lu, piv = ctx.multi("lu_factor", A, pivot=pivot)
    return lu, piv, _info(ctx, A)


@converter("aten.linalg_lu_solve.default")
def lu_solve(
    ctx: Ctx, LU: Value, pivots: Value, B: Value, *, left: bool = True, adjoint: bool = False,  # noqa: N803
) -> Value:  # fmt: skip
    return ctx.op("lu_solve", LU, pivots, B, left=left, adjoint=adjoint)


@converter("aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_pinv.atol_rtol_float")
def pinv(
    ctx: Ctx, self: Value, *, atol: Any = None, rtol: Any = None, hermitian: bool = False
) -> Value:
    if atol is not None or isinstance(rtol, Value):
        return _pinv_tolerances(ctx, self, atol, rtol, hermitian)
    return ctx.op("pinv", self, rtol=None if rtol is None else float(rtol), hermitian=hermitian)


@converter("aten.linalg_matrix_exp.default", "aten.matrix_exp.default")
def matrix_exp(ctx: Ctx, self: Value) -> Value:
    return ctx.op("matrix_exp", self)


@converter("aten.linalg_solve_triangular.default")
def solve_triangular(
    ctx: Ctx, self: Value, B: Value, *, upper: bool, left: bool = True,  # noqa: N803
    unitriangular: bool = False,
) -> Value:  # fmt: skip
    return ctx.op("solve_triangular", self, B, upper=upper, left=left,
                  unitriangular=unitriangular)  # fmt: skip


@converter("aten.triangular_solve.default")
def triangular_solve(
    ctx: Ctx, self: Value, A: Value, upper: bool = True, transpose: bool = False,  # noqa: N803
    unitriangular: bool = False,
) -> tuple:  # fmt: skip
    a = A
    if transpose:
        a = ctx.op("transpose", A, perm=_swap_last(ctx.rank(A)))
        upper = not upper
    x = ctx.op("solve_triangular", a, self, upper=upper, left=True, unitriangular=unitriangular)
    return x, ctx.op("identity", A)


def _swap_last(r: int) -> list[int]:
    return list(range(r - 2)) + [r - 1, r - 2]


@converter("aten.linalg_householder_product.default")
def householder_product(ctx: Ctx, input: Value, tau: Value) -> Value:
    return ctx.op("householder_product", input, tau)


@converter("aten.linalg_lu_factor.default")
def lu_factor(ctx: Ctx, A: Value, *, pivot: bool = True) -> tuple:  # noqa: N803
    return ctx.multi("lu_factor", A, pivot=pivot)


@converter("aten._trilinear.default")
def trilinear(
    ctx: Ctx, i1: Value, i2: Value, i3: Value, expand1: list[int], expand2: list[int],
    expand3: list[int], sumdim: list[int], unroll_dim: int = 1,
) -> Value:  # fmt: skip
    # sum over sumdim of i1 * i2 * i3, each input unsqueezed at its expand dims to one common
    # rank (nn.functional.bilinear's form): one einsum, a letter per common dim.
    r = ctx.rank(i1) + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:r]
    if r > 26:
        raise Unsupported(f"_trilinear of rank {r}")
    terms = ["".join(c for k, c in enumerate(letters) if k not in set(e))
             for e in (expand1, expand2, expand3)]  # fmt: skip
    out = "".join(c for k, c in enumerate(letters) if k not in set(sumdim))
    eq = f"{','.join(terms)}->{out}"
    return ctx.op("einsum", *ctx.promote(i1, i2, i3), equation=eq)


@converter("aten.bilinear.default")
def bilinear(
    ctx: Ctx, input1: Value, input2: Value, weight: Value, bias: Value | None = None
) -> Value:
    # y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o]
    a, b, w = ctx.promote(input1, input2, weight)
    y = ctx.op("einsum", a, w, b, equation="...i,oij,...j->...o")
    return y if bias is None else ctx.op("add", y, ctx.cast(bias, y.dtype))


def _pinv_tolerances(ctx: Ctx, a: Value, atol: Any, rtol: Any, hermitian: bool) -> Value:
    # torch's rule: singular values (|eigenvalues| when hermitian) <= max(atol, rtol * the
    # largest) count as zero; rtol defaults to eps * max(m, n) when atol is not given, else 0.
    # The pseudo-inverse from the SVD (A = U S Vh): Vh^T diag(1/S) U^T.
    dt = a.dtype
    m, n = ctx.shape(a)[-2:]
    if rtol is None:
        if atol is None and not (isinstance(m, int) and isinstance(n, int)):
            raise Unsupported("pinv's default rtol of a matrix of symbolic size")
        eps = float(np.finfo(dt.to_numpy()).eps) * max(m, n) if atol is None else 0.0
        rtol = eps
    r = ctx.rank(a)
    swap = [*range(r - 2), r - 1, r - 2]
    if hermitian:
        s, v = ctx.multi("eigh", a, upper=False)
        left, right, mag = v, ctx.op("transpose", v, perm=swap), ctx.op("abs", s)
    else:
        u, s, vh = ctx.multi("svd", a, full_matrices=False)
        left, right, mag = ctx.op("transpose", vh, perm=swap), ctx.op("transpose", u, perm=swap), s
    top = ctx.op("reduce_max", mag, axes=[r - 2], keepdims=True)

    def tol(t: Any) -> Value:
        t = ctx.tensor(float(t) if not isinstance(t, Value) else t, dt)
        return ctx.op("unsqueeze", t, axes=[ctx.rank(t)]) if ctx.rank(t) else t

    cut = ctx.op("mul", tol(rtol), top)
    if atol is not None:
        cut = ctx.op("maximum", tol(atol), cut)
    inv = ctx.op("where", ctx.op("gt", mag, cut), ctx.op("reciprocal", s), ctx.const(0.0, dt))
    scaled = ctx.op("mul", left, ctx.op("unsqueeze", inv, axes=[r - 2]))
    return ctx.op("matmul", scaled, right)


@converter("aten.lu_unpack.default")
def lu_unpack(
    ctx: Ctx, LU_data: Value, LU_pivots: Value, unpack_data: bool = True,  # noqa: N803
    unpack_pivots: bool = True,
) -> tuple:  # fmt: skip
    # A = P L U: L the unit lower triangle of LU's first k = min(m, n) columns, U the upper
    # triangle of its first k rows, P the row swaps LAPACK's 1-based pivots make, applied in
    # order (k static steps).
    if not (unpack_data and unpack_pivots):
        raise Unsupported("lu_unpack without unpacking both the data and the pivots")
    shape = ctx.shape(LU_data)
    m, n = shape[-2:]
    if not (isinstance(m, int) and isinstance(n, int)):
        raise Unsupported("lu_unpack of a matrix of symbolic size")
    k, r, dt, i64 = min(m, n), len(shape), LU_data.dtype, DType.INT64
    cols = ctx.op("slice", LU_data, starts=[0], ends=[k], axes=[r - 1], steps=[1])
    eye = ctx.const(np.eye(m, k), dt)
    lower = ctx.op("add", ctx.op("trilu", cols, upper=False, k=-1), eye)
    rows = ctx.op("slice", LU_data, starts=[0], ends=[k], axes=[r - 2], steps=[1])
    upper = ctx.op("trilu", rows, upper=True, k=0)
    piv = ctx.op("sub", ctx.cast(LU_pivots, i64), ctx.const(1, i64))  # [..., k], 0-based
    batch = ctx.op("slice", ctx.op("shape", LU_pivots), starts=[0], ends=[r - 2], axes=[0])
    full = ctx.op("concat", batch, ctx.const([m], i64), axis=0)
    perm = ctx.op("expand", ctx.const(np.arange(m), i64), full)  # [..., m]
    for i in range(k):
        j = ctx.op("slice", piv, starts=[i], ends=[i + 1], axes=[r - 2], steps=[1])
        here = ctx.op("slice", perm, starts=[i], ends=[i + 1], axes=[r - 2], steps=[1])
        there = ctx.op("gather_elements", perm, j, axis=r - 2)
        at_i = ctx.op("expand", ctx.const([i], i64), ctx.op("shape", j))
        perm = ctx.op("scatter_elements", perm, at_i, there, axis=r - 2)
        perm = ctx.op("scatter_elements", perm, j, here, axis=r - 2)
    onehot = ctx.op("one_hot", perm, depth=m, axis=-1, dtype=dt)  # [..., j, perm[j]]
    swap = [*range(r - 2), r - 1, r - 2]
    return ctx.op("transpose", onehot, perm=swap), lower, upper


@converter("aten.linalg_lu.default")
def linalg_lu(ctx: Ctx, A: Value, *, pivot: bool = True) -> tuple:  # noqa: N803
    if not pivot:
        raise Unsupported("linalg.lu without pivoting")
    lu, piv = _lu(ctx, A)
    return lu_unpack(ctx, lu, piv)
