"""Linear algebra on batches of matrices (the last two dims): inverse, solves, factorizations.

# NOTE: inputs are floating; the leading dims are a batch. Outputs are the mathematical
# results (no LAPACK status codes); a frontend gives a source's ``info`` output as zeros.
# ONNX has none of these but Det (tensor family): codegen.onnx lowers the direct ones (LU and
# the solves, inverse, slogdet, Cholesky, QR, householder_product) through
# msc.ops.decompose.linalg for static matrix sizes and reports the iterative ones (svd, eigh,
# pinv, matrix_exp) unsupported.
"""

from __future__ import annotations

from msc.ir.dtype import DType
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known
from msc.ops.schema import Attr


def _matrix(x: TensorType, op: str) -> tuple:
    if not x.dtype.is_floating:
        raise InferError(f"{op}: needs a floating input, got {x.dtype}")
    if x.shape is not None and len(x.shape) < 2:
        raise InferError(f"{op}: input must have rank >= 2, got {len(x.shape)}")
    return x.shape


def _square(x: TensorType, op: str) -> TensorType:
    _matrix(x, op)
    return x


registry.op("inverse", ["x"], category="linalg", doc="matrix inverse")(
    lambda x: _square(x, "inverse")
)
registry.op("matrix_exp", ["x"], category="linalg", doc="matrix exponential")(
    lambda x: _square(x, "matrix_exp")
)
registry.op(
    "cholesky", ["x"], {"upper": Attr.bool(False)}, category="linalg",
    doc="Cholesky factor L (L L^H = x), or U = L^H when upper",
)(lambda x, *, upper: _square(x, "cholesky"))  # fmt: skip
registry.op(
    "cholesky_inverse", ["l"], {"upper": Attr.bool(False)}, category="linalg",
    doc="inverse of the matrix whose Cholesky factor is given",
)(lambda l, *, upper: _square(l, "cholesky_inverse"))  # noqa: E741  # fmt: skip


def _solved(a: TensorType, b: TensorType, left: bool, op: str) -> TensorType:
    _matrix(a, op)
    if a.dtype is not b.dtype:
        raise InferError(f"{op}: dtypes differ ({a.dtype}, {b.dtype})")
    if a.shape is None or b.shape is None:
        return TensorType(b.dtype, None)
    vector = left and len(b.shape) == len(a.shape) - 1
    if vector:
        return TensorType(b.dtype, b.shape)
    batch = _broadcast(a.shape[:-2], b.shape[:-2])
    return TensorType(b.dtype, (*batch, *b.shape[-2:]))


def _broadcast(x: tuple, y: tuple) -> tuple:
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)
    return tuple(b if a == 1 else a for a, b in zip(x, y))


@registry.op("solve", ["a", "b"], {"left": Attr.bool(True)}, category="linalg")
def solve(a, b, *, left):
    """X with a X = b (left) or X a = b; b may be a batch of vectors."""
    return _solved(a, b, left, "solve")


@registry.op(
    "solve_triangular",
    ["a", "b"],
    {"upper": Attr.bool(), "left": Attr.bool(True), "unitriangular": Attr.bool(False)},
    category="linalg",
)
def solve_triangular(a, b, *, upper, left, unitriangular):
    """solve with a triangular a (its other triangle ignored)."""
    return _solved(a, b, False, "solve_triangular")


@registry.op("cholesky_solve", ["b", "l"], {"upper": Attr.bool(False)}, category="linalg")
def cholesky_solve(b, l, *, upper):  # noqa: E741
    """X with A X = b, A given by its Cholesky factor l."""
    return _solved(l, b, False, "cholesky_solve")


@registry.op("qr", ["x"], {"mode": Attr.str("reduced", doc="reduced|complete|r")}, outputs=2,
             category="linalg")  # fmt: skip
def qr(x, *, mode):
    """Q, R with x = Q R (mode 'r': Q is empty)."""
    shape = _matrix(x, "qr")
    if shape is None:
        return [x, x]
    m, n = shape[-2], shape[-1]
    k = min(m, n) if known(m) and known(n) else None
    if mode == "complete":
        return [TensorType(x.dtype, (*shape[:-2], m, m)), TensorType(x.dtype, shape)]
    q = TensorType(x.dtype, (0,)) if mode == "r" else TensorType(x.dtype, (*shape[:-1], k))
    return [q, TensorType(x.dtype, (*shape[:-2], k, n))]


@registry.op("svd", ["x"], {"full_matrices": Attr.bool(True)}, outputs=3, category="linalg")
def svd(x, *, full_matrices):
    """U, S, Vh with x = U diag(S) Vh; S descending."""
    shape = _matrix(x, "svd")
    if shape is None:
        return [x, TensorType(x.dtype, None), x]
    m, n = shape[-2], shape[-1]
    k = min(m, n) if known(m) and known(n) else None
    b = shape[:-2]
    if full_matrices:
        return [TensorType(x.dtype, (*b, m, m)), TensorType(x.dtype, (*b, k)),
                TensorType(x.dtype, (*b, n, n))]  # fmt: skip
    return [TensorType(x.dtype, (*b, m, k)), TensorType(x.dtype, (*b, k)),
            TensorType(x.dtype, (*b, k, n))]  # fmt: skip


@registry.op("eigh", ["x"], {"upper": Attr.bool(False)}, outputs=2, category="linalg")
def eigh(x, *, upper):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (one triangle read)."""
    shape = _square(x, "eigh").shape
    if shape is None:
        return [TensorType(x.dtype, None), x]
    return [TensorType(x.dtype, shape[:-1]), x]


@registry.op("slogdet", ["x"], outputs=2, category="linalg")
def slogdet(x):
    """sign and log |det| of x."""
    shape = _square(x, "slogdet").shape
    t = TensorType(x.dtype, None if shape is None else shape[:-2])
    return [t, t]


@registry.op("lu_factor", ["x"], {"pivot": Attr.bool(True)}, outputs=2, category="linalg")
def lu_factor(x, *, pivot):
    """LU (L below the diagonal, unit diagonal implied; U on and above) and 1-based int32
    pivots, as LAPACK's getrf."""
    shape = _matrix(x, "lu_factor")
    if shape is None:
        return [x, TensorType(DType.INT32, None)]
    m, n = shape[-2], shape[-1]
    k = min(m, n) if known(m) and known(n) else None
    return [x, TensorType(DType.INT32, (*shape[:-2], k))]


@registry.op(
    "lu_solve", ["lu", "pivots", "b"], {"left": Attr.bool(True), "adjoint": Attr.bool(False)},
    category="linalg",
)  # fmt: skip
def lu_solve(lu, pivots, b, *, left, adjoint):
    """solve with a given by its lu_factor."""
    return _solved(lu, b, False, "lu_solve")


@registry.op(
    "pinv", ["x"], {"rtol": Attr.float(None), "hermitian": Attr.bool(False)}, category="linalg"
)
def pinv(x, *, rtol, hermitian):
    """Moore-Penrose pseudo-inverse (singular values below rtol * largest treated as 0)."""
    shape = _matrix(x, "pinv")
    if shape is None:
        return x
    return TensorType(x.dtype, (*shape[:-2], shape[-1], shape[-2]))


@registry.op("householder_product", ["a", "tau"], category="linalg")
def householder_product(a, tau):
    """The first n columns of the product of Householder reflectors (LAPACK orgqr)."""
    _matrix(a, "householder_product")
    return a
