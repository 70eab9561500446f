"""Decompositions of linear algebra into matmuls and elementwise ops, for targets without it
(ONNX has Det alone): LU with partial pivoting, triangular and general solves, inverse,
slogdet, Cholesky and its solves, Householder QR and householder_product.

# NOTE: each rule unrolls its algorithm over the matrix size, so it needs static matrix dims
# (the batch may be symbolic) and refuses sizes above ``MAX_N`` (the graph grows as n, each
# step a handful of nodes; iterative ones -- svd, eigh, pinv, matrix_exp -- are left out:
# their iteration count depends on the data). Work is done in float64 and cast back, so
# results agree with LAPACK's float32 ones to well inside float32 tolerance on
# well-conditioned inputs. Row exchanges are products with 0/1 permutation matrices built
# from the pivot index (argmax of |column| as LAPACK's getrf chooses it), so the pivots,
# the packed LU and the signs of det follow LAPACK's conventions; QR follows geqrf's
# reflectors (R's diagonal is -sign(a_jj) * norm), as torch.linalg.qr returns them.
"""

from __future__ import annotations

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Value
from msc.ops.decompose import Builder, NotDecomposable, registry

F64 = DType.FLOAT64
MAX_N = 64


def _dims(x: Value, op: str) -> tuple[int, int]:
    shape = x.type.shape
    if shape is None or len(shape) < 2:
        raise NotDecomposable(f"{op}: needs a matrix of known rank")
    m, n = shape[-2], shape[-1]
    if not (isinstance(m, int) and isinstance(n, int)):
        raise NotDecomposable(f"{op}: the matrix dims must be static (got {m} x {n})")
    if max(m, n) > MAX_N:
        raise NotDecomposable(f"{op}: unrolled only up to {MAX_N} x {MAX_N} (got {m} x {n})")
    return m, n


def _c(b: Builder, a: np.ndarray | float) -> Value:
    return b.const(np.asarray(a, np.float64), F64)


def _rows(b: Builder, x: Value, lo: int, hi: int) -> Value:
    return b.op("slice", x, starts=[lo], ends=[hi], axes=[-2])


def _cols(b: Builder, x: Value, lo: int, hi: int) -> Value:
    return b.op("slice", x, starts=[lo], ends=[hi], axes=[-1])


def _t(b: Builder, x: Value) -> Value:
    r = len(x.type.shape)
    return b.op("transpose", x, perm=[*range(r - 2), r - 1, r - 2])


def _span(m: int, lo: int, hi: int) -> np.ndarray:
    """An [m, 1] bool column: true on the rows lo <= i < hi."""
    return ((np.arange(m) >= lo) & (np.arange(m) < hi)).reshape(m, 1)


def _keep(b: Builder, x: Value, mask: np.ndarray) -> Value:
    """x where mask (a 0/1 or bool array broadcasting against x), else 0 (not x * mask: the
    entries dropped may be inf or NaN, as in the triangle a solve does not read)."""
    return b.op("where", b.const(np.asarray(mask) != 0, DType.BOOL), x, _c(b, 0.0))


def _eye(n: int) -> np.ndarray:
    return np.eye(n)


def _swap(b: Builder, p: Value, k: int, m: int) -> Value:
    """The [..., m, m] permutation matrix exchanging rows k and p (p: i64 [..., 1, 1])."""
    ar = b.const(np.arange(m, dtype=np.int64).reshape(m, 1), DType.INT64)
    kk = b.const(np.int64(k), DType.INT64)
    src = b.op("where", b.op("eq", ar, kk), p, b.op("where", b.op("eq", ar, p), kk, ar))
    cols = b.const(np.arange(m, dtype=np.int64).reshape(1, m), DType.INT64)
    return b.cast(b.op("eq", src, cols), F64)  # row i picks row src[i]


def _lu(b: Builder, a: Value, m: int, n: int) -> tuple[Value, list[Value]]:
    """Packed LU of a float64 [..., m, n] with partial pivoting, and the 0-based pivot of each
    step (i64 [..., 1, 1]): LAPACK getrf's result."""
    lu, pivots = a, []
    for k in range(min(m, n)):
        col = _cols(b, lu, k, k + 1)
        rows_left = b.const(_span(m, k, m), DType.BOOL)
        cand = b.op("where", rows_left, b.op("abs", col), _c(b, -1.0))
        p = b.op("argmax", cand, axis=-2, keepdims=True)
        pivots.append(p)
        lu = b.op("matmul", _swap(b, p, k, m), lu)
        col = _cols(b, lu, k, k + 1)
        pivot = _rows(b, col, k, k + 1)
        below = _keep(b, b.op("div", col, pivot), _span(m, k + 1, m))
        row = _keep(b, _rows(b, lu, k, k + 1), (np.arange(n) > k).reshape(1, n))
        lu = b.op("sub", lu, b.op("matmul", below, row))
        at = np.zeros((m, n), bool)
        at[k + 1 :, k] = True
        lu = b.op("where", b.const(at, DType.BOOL), below, lu)
    return lu, pivots


def _forward(b: Builder, l: Value, y: Value, n: int, unit: bool) -> Value:  # noqa: E741
    """L^-1 y for a lower-triangular l [..., n, n] (only its lower triangle read)."""
    for k in range(n):
        yk = _rows(b, y, k, k + 1)
        if not unit:
            yk = b.op("div", yk, _rows(b, _cols(b, l, k, k + 1), k, k + 1))
            y = b.op("where", b.const(_span(n, k, k + 1), DType.BOOL), yk, y)
        if k + 1 < n:
            lk = _keep(b, _cols(b, l, k, k + 1), _span(n, k + 1, n))
            y = b.op("sub", y, b.op("matmul", lk, yk))
    return y


def _backward(b: Builder, u: Value, y: Value, n: int, unit: bool) -> Value:
    """U^-1 y for an upper-triangular u [..., n, n] (only its upper triangle read)."""
    for k in reversed(range(n)):
        yk = _rows(b, y, k, k + 1)
        if not unit:
            yk = b.op("div", yk, _rows(b, _cols(b, u, k, k + 1), k, k + 1))
            y = b.op("where", b.const(_span(n, k, k + 1), DType.BOOL), yk, y)
        if k > 0:
            uk = _keep(b, _cols(b, u, k, k + 1), _span(n, 0, k))
            y = b.op("sub", y, b.op("matmul", uk, yk))
    return y


def _pivot_rows(b: Builder, y: Value, pivots: list[Value], n: int, reverse: bool) -> Value:
    for k in reversed(range(len(pivots))) if reverse else range(len(pivots)):
        y = b.op("matmul", _swap(b, pivots[k], k, n), y)
    return y


def _as_matrix(b: Builder, a: Value, rhs: Value, left: bool) -> tuple[Value, bool]:
    """rhs as a float64 [..., n, k] (a vector gets a trailing dim: True when it did)."""
    vector = left and len(rhs.type.shape) == len(a.type.shape) - 1
    r = b.cast(rhs, F64)
    return (b.op("unsqueeze", r, axes=[-1]) if vector else r), vector


def _result(b: Builder, x: Value, vector: bool, like: Value) -> Value:
    if vector:
        x = b.op("squeeze", x, axes=[-1])
    return b.cast(x, like.dtype)


@registry("lu_factor")
def lu_factor(b: Builder, x: Value, *, pivot: bool) -> list[Value]:
    """LU with partial pivoting, unrolled (LAPACK getrf's packed LU and 1-based pivots)."""
    if not pivot:
        raise NotDecomposable("lu_factor without pivoting")
    m, n = _dims(x, "lu_factor")
    if min(m, n) == 0:
        raise NotDecomposable("lu_factor of an empty matrix")
    lu, pivots = _lu(b, b.cast(x, F64), m, n)
    piv = b.op("concat", *pivots, axis=-1) if len(pivots) > 1 else pivots[0]
    piv = b.op("squeeze", b.op("add", piv, b.const(np.int64(1), DType.INT64)), axes=[-2])
    return [b.cast(lu, x.dtype), b.cast(piv, DType.INT32)]


def _lu_solve(b: Builder, lu: Value, pivots: list[Value], y: Value, n: int, adjoint: bool) -> Value:
    if not adjoint:  # A = P L U: x = U^-1 L^-1 P^T y
        y = _pivot_rows(b, y, pivots, n, reverse=False)
        return _backward(b, lu, _forward(b, lu, y, n, unit=True), n, unit=False)
    # A^T = U^T L^T P^T: x = P L^-T U^-T y
    ut = _t(b, lu)
    y = _backward(b, ut, _forward(b, ut, y, n, unit=False), n, unit=True)
    return _pivot_rows(b, y, pivots, n, reverse=True)


@registry("solve")
def solve(b: Builder, a: Value, rhs: Value, *, left: bool) -> Value:
    """LU with partial pivoting, then forward and back substitution, unrolled."""
    n, n2 = _dims(a, "solve")
    if n != n2:
        raise NotDecomposable("solve: a must be square")
    y, vector = _as_matrix(b, a, rhs, left)
    lu, pivots = _lu(b, b.cast(a, F64), n, n)
    if left:
        return _result(b, _lu_solve(b, lu, pivots, y, n, adjoint=False), vector, rhs)
    # X a = rhs  <=>  a^T X^T = rhs^T
    return _result(b, _t(b, _lu_solve(b, lu, pivots, _t(b, y), n, adjoint=True)), False, rhs)


@registry("inverse")
def inverse(b: Builder, x: Value) -> Value:
    """solve(x, I)."""
    n, n2 = _dims(x, "inverse")
    if n != n2:
        raise NotDecomposable("inverse: x must be square")
    lu, pivots = _lu(b, b.cast(x, F64), n, n)
    return b.cast(_lu_solve(b, lu, pivots, _c(b, _eye(n)), n, adjoint=False), x.dtype)


@registry("lu_solve")
def lu_solve(
    b: Builder, lu: Value, pivots: Value, rhs: Value, *, left: bool, adjoint: bool
) -> Value:
    """The pivots' row exchanges, then forward and back substitution, unrolled."""
    n, n2 = _dims(lu, "lu_solve")
    if n != n2:
        raise NotDecomposable("lu_solve: lu must be square")
    piv = b.op("sub", b.cast(pivots, DType.INT64), b.const(np.int64(1), DType.INT64))
    steps = [b.op("unsqueeze", _cols(b, piv, k, k + 1), axes=[-1]) for k in range(n)]
    f = b.cast(lu, F64)
    y = b.cast(rhs, F64)
    if left:
        return b.cast(_lu_solve(b, f, steps, y, n, adjoint), rhs.dtype)
    # X A = rhs  <=>  A^T X^T = rhs^T (and X A^T = rhs  <=>  A X^T = rhs^T)
    return b.cast(_t(b, _lu_solve(b, f, steps, _t(b, y), n, not adjoint)), rhs.dtype)


@registry("slogdet")
def slogdet(b: Builder, x: Value) -> list[Value]:
    """From the LU: sign = parity of the row exchanges * prod sign(u_ii), log|det| =
    sum log|u_ii|."""
    n, n2 = _dims(x, "slogdet")
    if n != n2:
        raise NotDecomposable("slogdet: x must be square")
    if n == 0:  # the empty product: det 1, sign 1, log|det| 0 for every matrix of the batch
        one = b.op("reduce_prod", b.cast(x, F64), axes=[-2, -1], keepdims=False)
        return [b.cast(one, x.dtype), b.cast(b.op("sub", one, one), x.dtype)]
    lu, pivots = _lu(b, b.cast(x, F64), n, n)
    diag = b.op("reduce_sum", _keep(b, lu, _eye(n)), axes=[-1], keepdims=False)
    swaps = [
        b.op("where", b.op("eq", p, b.const(np.int64(k), DType.INT64)), _c(b, 1.0), _c(b, -1.0))
        for k, p in enumerate(pivots)
    ]
    parity = b.op("concat", *swaps, axis=-1) if len(swaps) > 1 else swaps[0]
    parity = b.op("reduce_prod", parity, axes=[-2, -1], keepdims=False)
    sign = b.op("mul", parity, b.op("reduce_prod", b.op("sign", diag), axes=[-1], keepdims=False))
    logabs = b.op("reduce_sum", b.op("log", b.op("abs", diag)), axes=[-1], keepdims=False)
    return [b.cast(sign, x.dtype), b.cast(logabs, x.dtype)]


@registry("solve_triangular")
def solve_triangular(
    b: Builder, a: Value, rhs: Value, *, upper: bool, left: bool, unitriangular: bool
) -> Value:
    """Forward or back substitution, unrolled (a's other triangle is not read)."""
    n, n2 = _dims(a, "solve_triangular")
    if n != n2:
        raise NotDecomposable("solve_triangular: a must be square")
    f, y = b.cast(a, F64), b.cast(rhs, F64)
    if not left:  # X a = rhs  <=>  a^T X^T = rhs^T, and a^T is triangular the other way
        f, y, upper = _t(b, f), _t(b, y), not upper
    sub = _backward if upper else _forward
    x = sub(b, f, y, n, unit=unitriangular)
    return b.cast(x if left else _t(b, x), rhs.dtype)


def _cholesky_lower(b: Builder, a: Value, n: int) -> Value:
    """L with L L^T = a (a's lower triangle read), column by column."""
    low = None
    for j in range(n):
        v = _cols(b, a, j, j + 1)
        if low is not None:
            v = b.op("sub", v, b.op("matmul", low, _t(b, _rows(b, low, j, j + 1))))
        d = b.op("sqrt", _rows(b, v, j, j + 1))
        col = _keep(b, b.op("div", v, d), _span(n, j, n))
        placed = _keep(b, col, (np.arange(n) == j).reshape(1, n))
        low = placed if low is None else b.op("add", low, placed)
    return low


@registry("cholesky")
def cholesky(b: Builder, x: Value, *, upper: bool) -> Value:
    """Cholesky-Banachiewicz by columns, unrolled."""
    n, n2 = _dims(x, "cholesky")
    if n != n2:
        raise NotDecomposable("cholesky: x must be square")
    low = _cholesky_lower(b, b.cast(x, F64), n)
    return b.cast(_t(b, low) if upper else low, x.dtype)


def _factor(b: Builder, f: Value, upper: bool) -> tuple[Value, Value]:
    """(L, L^T) of a Cholesky factor given as L (lower) or U = L^T (upper)."""
    return (_t(b, f), f) if upper else (f, _t(b, f))


@registry("cholesky_solve")
def cholesky_solve(b: Builder, rhs: Value, f: Value, *, upper: bool) -> Value:
    """L^-T L^-1 rhs by two substitutions."""
    n, _ = _dims(f, "cholesky_solve")
    low, up = _factor(b, b.cast(f, F64), upper)
    y = _forward(b, low, b.cast(rhs, F64), n, unit=False)
    return b.cast(_backward(b, up, y, n, unit=False), rhs.dtype)


@registry("cholesky_inverse")
def cholesky_inverse(b: Builder, f: Value, *, upper: bool) -> Value:
    """(L L^T)^-1 = L^-T L^-1, with L^-1 by forward substitution on I."""
    n, _ = _dims(f, "cholesky_inverse")
    low, _up = _factor(b, b.cast(f, F64), upper)
    inv = _forward(b, low, _c(b, _eye(n)), n, unit=False)
    return b.cast(b.op("matmul", _t(b, inv), inv), f.dtype)


def _reflect(b: Builder, r: Value, j: int, m: int) -> tuple[Value, Value, Value]:
    """LAPACK larfg on column j of r below row j-1: (v with v_j = 1, tau, beta)."""
    x = _keep(b, _cols(b, r, j, j + 1), _span(m, j, m))
    alpha = _rows(b, x, j, j + 1)
    tail = _keep(b, x, _span(m, j + 1, m))
    tail_sq = b.op("reduce_sum", b.op("mul", tail, tail), axes=[-2], keepdims=True)
    norm = b.op("sqrt", b.op("add", b.op("mul", alpha, alpha), tail_sq))
    beta = b.op("where", b.op("ge", alpha, _c(b, 0.0)), b.op("neg", norm), norm)
    trivial = b.op("eq", tail_sq, _c(b, 0.0))  # H = I: nothing below the diagonal
    ej = _c(b, _span(m, j, j + 1) * 1.0)
    denom = b.op("where", trivial, _c(b, 1.0), b.op("sub", alpha, beta))
    v = b.op("add", b.op("div", tail, denom), ej)
    safe_beta = b.op("where", trivial, _c(b, 1.0), beta)
    tau = b.op("where", trivial, _c(b, 0.0), b.op("div", b.op("sub", beta, alpha), safe_beta))
    return v, tau, b.op("where", trivial, alpha, beta)


def _apply_left(b: Builder, v: Value, tau: Value, a: Value) -> Value:
    """(I - tau v v^T) a."""
    return b.op("sub", a, b.op("mul", tau, b.op("matmul", v, b.op("matmul", _t(b, v), a))))


def _apply_right(b: Builder, q: Value, v: Value, tau: Value) -> Value:
    """q (I - tau v v^T)."""
    return b.op("sub", q, b.op("mul", tau, b.op("matmul", b.op("matmul", q, v), _t(b, v))))


@registry("qr")
def qr(b: Builder, x: Value, *, mode: str) -> list[Value]:
    """Householder QR (geqrf's reflectors, Q accumulated as orgqr forms it), unrolled."""
    m, n = _dims(x, "qr")
    k = min(m, n)
    r = b.cast(x, F64)
    q = _c(b, _eye(m))
    for j in range(k):
        v, tau, _beta = _reflect(b, r, j, m)
        r = _apply_left(b, v, tau, r)
        if mode != "r":
            q = _apply_right(b, q, v, tau)
    r = _keep(b, r, np.triu(np.ones((m, n))))  # exact zeros below the diagonal
    if mode != "complete":
        r = _rows(b, r, 0, k)
    if mode == "r":
        empty = b.op("constant", value=np.zeros((0,), x.dtype.to_numpy()))
        return [empty, b.cast(r, x.dtype)]
    if mode != "complete":
        q = _cols(b, q, 0, k)
    return [b.cast(q, x.dtype), b.cast(r, x.dtype)]


@registry("householder_product")
def householder_product(b: Builder, a: Value, tau: Value) -> Value:
    """H_0 H_1 ... H_{k-1} applied to I, its first n columns (LAPACK orgqr), unrolled."""
    m, n = _dims(a, "householder_product")
    ts = tau.type.shape
    if ts is None or not isinstance(ts[-1], int):
        raise NotDecomposable("householder_product: the number of reflectors must be static")
    f = b.cast(a, F64)
    t = b.cast(tau, F64)
    q = _c(b, _eye(m))
    for i in range(ts[-1]):
        v = _keep(b, _cols(b, f, i, i + 1), _span(m, i + 1, m))
        v = b.op("add", v, _c(b, _span(m, i, i + 1) * 1.0))
        ti = b.op("unsqueeze", _cols(b, t, i, i + 1), axes=[-1])
        q = _apply_right(b, q, v, ti)
    return b.cast(_cols(b, q, 0, n), a.dtype)
