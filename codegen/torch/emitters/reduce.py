"""Emitters for reductions, scans, arg-reductions, top-k and sorting.

# NOTE: canonical reductions keep the input dtype; torch sums and products of small integer
# types promote to int64, so those get an explicit ``dtype=``. ``axes=None`` reduces every dim;
# ``axes=()`` reduces none (a copy), unlike torch's ``dim=()``.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import int_list, int_scalar
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import emitter
from msc.ir.dtype import DType


def _dims(x: Arg, axes) -> tuple[int, ...] | None:
    """The dims as the graph states them (negative ones kept), or None for "all dims"."""
    return None if axes is None else tuple(axes)


def _all(x: Arg) -> tuple[int, ...]:
    return tuple(range(x.rank or 0))


def _keep_dtype(x: Arg) -> dict[str, Any]:
    if x.dtype is not DType.INT64 and (x.dtype.is_integer or x.dtype is DType.BOOL):
        return {"dtype": x.dtype}
    return {}


def _reduce(fn: str, x: Any, dims, keepdims: bool, rank: int, **extra: Any) -> ast.expr:
    if dims is None and not keepdims:
        return call(fn, x, **extra)
    d = tuple(range(rank)) if dims is None else dims
    kw: dict[str, Any] = {"keepdim": True} if keepdims else {}
    return call(fn, x, d, **kw, **extra)


def _simple(fn: str, keep_dtype: bool):
    def emit(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
        dims = _dims(x, axes)
        if dims == ():
            return expr("x.clone()", x=x)
        extra = _keep_dtype(x) if keep_dtype else {}
        return _reduce(fn, x, dims, keepdims, x.rank or 0, **extra)

    return emit


def _reduction(op: str):
    """Register an emitter of reduction ``op``; axes given at run time (the ``axes`` input)
    go through one run-time helper, the static ones through ``fn``."""

    def deco(fn):
        def emit(
            e: NodeEmit,
            x: Arg,
            axes_in: Arg | None = None,
            *,
            axes,
            keepdims,
            noop_with_empty_axes=False,
        ) -> ast.expr:
            if axes_in is not None:
                helper = e.helper("_msc_reduce").id
                noop = {"noop": True} if noop_with_empty_axes else {}
                return call(helper, x, op, int_list(axes_in), keepdims, **noop)
            return fn(e, x, axes=axes, keepdims=keepdims)

        emit.__name__ = emit.__qualname__ = fn.__name__
        emitter(op)(emit)
        return fn

    return deco


_reduction("reduce_sum")(_simple("torch.sum", True))
_reduction("reduce_mean")(_simple("torch.mean", False))


def _extreme(largest: bool):
    """reduce_max / reduce_min: torch.amax / amin, or where a reduced dim is a static 0 (or
    the rank is unknown) a helper that gives the empty set's value (amax raises on one). A
    symbolic dim keeps torch.amax, so a model whose reduced dim is 0 at run time raises as
    in torch rather than every model paying a helper call for it."""
    plain = _simple("torch.amax" if largest else "torch.amin", False)

    def emit(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
        dims = _dims(x, axes)
        shape = x.shape
        if dims == () or (shape is not None and all(shape[d] != 0 for d in dims or _all(x))):
            return plain(e, x, axes=axes, keepdims=keepdims)
        d = list(_all(x) if dims is None else dims)
        return call(e.helper("_msc_extreme").id, x, d, keepdims, largest)

    return emit


_reduction("reduce_max")(_extreme(True))
_reduction("reduce_min")(_extreme(False))


@_reduction("reduce_prod")
def reduce_prod(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return expr("x.clone()", x=x)
    extra = _keep_dtype(x)
    if dims is None and not keepdims:
        return call("torch.prod", x, **extra)
    dims = _all(x) if dims is None else dims
    if len(dims) == 1:
        kw = {"keepdim": True} if keepdims else {}
        return call("torch.prod", x, dims[0], **kw, **extra)
    return call(e.helper("_msc_reduce_prod").id, x, dims, keepdims)


def _with_keep(fn_expr: str, x: Arg, dims, keepdims: bool, **extra: Any) -> ast.expr:
    d = _all(x) if dims is None else dims
    return expr(fn_expr, x=x, d=d, k=keepdims, **extra)


@_reduction("reduce_l1")
def reduce_l1(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return expr("x.abs()", x=x)
    if x.dtype.is_floating:
        return _with_keep("torch.linalg.vector_norm(x, 1, dim=d, keepdim=k)", x, dims, keepdims)
    return _reduce("torch.sum", expr("x.abs()", x=x), dims, keepdims, x.rank, **_keep_dtype(x))


@_reduction("reduce_l2")
def reduce_l2(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return expr("x.abs()", x=x)
    return _with_keep("torch.linalg.vector_norm(x, 2, dim=d, keepdim=k)", x, dims, keepdims)


@_reduction("reduce_sum_square")
def reduce_sum_square(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return expr("x * x", x=x)
    return _reduce("torch.sum", expr("x * x", x=x), dims, keepdims, x.rank, **_keep_dtype(x))


@_reduction("reduce_log_sum")
def reduce_log_sum(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return call("torch.log", x)
    return call("torch.log", _reduce("torch.sum", x, dims, keepdims, x.rank))


@_reduction("reduce_log_sum_exp")
def reduce_log_sum_exp(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
    dims = _dims(x, axes)
    if dims == ():
        return expr("x.clone()", x=x)
    d = _all(x) if dims is None else dims
    return call("torch.logsumexp", x, d, **({"keepdim": True} if keepdims else {}))


def _logical(fn: str):
    def emit(e: NodeEmit, x: Arg, *, axes, keepdims) -> ast.expr:
        dims = _dims(x, axes)
        if dims == ():
            return expr("x.clone()", x=x)
        y = _reduce(fn, x, dims, keepdims, x.rank or 0)
        return y if x.dtype is DType.BOOL else expr("y.to(d)", y=y, d=x.dtype)

    return emit


_reduction("reduce_any")(_logical("torch.any"))
_reduction("reduce_all")(_logical("torch.all"))


@emitter("var")
def var(e: NodeEmit, x: Arg, *, axes, keepdims, correction) -> ast.expr:
    dims = _dims(x, axes)
    kw: dict[str, Any] = {}
    if correction != 1.0:
        kw["correction"] = int(correction) if correction.is_integer() else correction
    if dims is None and not keepdims:
        return call("torch.var", x, **kw)
    d = _all(x) if dims is None else dims
    return call("torch.var", x, d, **kw, **({"keepdim": True} if keepdims else {}))


def _arg(largest: bool):
    fn = "torch.argmax" if largest else "torch.argmin"

    def emit(e: NodeEmit, x: Arg, *, axis, keepdims, select_last_index) -> ast.expr:
        if axis is None:
            flat = expr("x.flatten()", x=x)
            if select_last_index:
                y = call(e.helper("_msc_arg_last").id, flat, 0, False, largest)
            else:
                y = call(fn, x)
            return expr("y.reshape(s)", y=y, s=(1,) * x.rank) if keepdims else y
        kw = {"keepdim": True} if keepdims else {}
        if select_last_index:
            return call(e.helper("_msc_arg_last").id, x, axis, keepdims, largest)
        return call(fn, x, axis, **kw)

    return emit


emitter("argmax")(_arg(True))
emitter("argmin")(_arg(False))


@emitter("max_dim")
def max_dim(e: NodeEmit, x: Arg, *, axis, keepdims) -> ast.expr:
    return call("torch.max", x, axis, **({"keepdim": True} if keepdims else {}))


@emitter("min_dim")
def min_dim(e: NodeEmit, x: Arg, *, axis, keepdims) -> ast.expr:
    return call("torch.min", x, axis, **({"keepdim": True} if keepdims else {}))


@emitter("cumsum")
def cumsum(e: NodeEmit, x: Arg, axis_in: Arg | None = None, *, axis, exclusive, reverse):
    a = int_scalar(axis_in) if axis_in is not None else axis
    if exclusive or reverse:
        return call(e.helper("_msc_cumsum").id, x, a, exclusive, reverse)
    return call("torch.cumsum", x, a, **_keep_dtype(x))


@emitter("cumprod")
def cumprod(e: NodeEmit, x: Arg, axis_in: Arg | None = None, *, axis, exclusive, reverse):
    a = int_scalar(axis_in) if axis_in is not None else axis
    if exclusive or reverse:
        return call(e.helper("_msc_cumprod").id, x, a, exclusive, reverse)
    return call("torch.cumprod", x, a, **_keep_dtype(x))


@emitter("topk")
def topk(e: NodeEmit, x: Arg, k_in: Arg | None = None, *, k, axis, largest, sorted, stable):
    kk = int_scalar(k_in) if k_in is not None else k
    if stable:  # torch.topk orders equal values freely
        return call(e.helper("_msc_stable_topk").id, x, kk, axis, largest)
    kw: dict[str, Any] = {"dim": axis} if axis != -1 else {}
    if not largest:
        kw["largest"] = False
    if not sorted:
        kw["sorted"] = False
    return call("torch.topk", x, kk, **kw)


def _sort_kw(axis: int, descending: bool, stable: bool) -> dict[str, Any]:
    kw: dict[str, Any] = {"dim": axis} if axis != -1 else {}
    if descending:
        kw["descending"] = True
    if stable:
        kw["stable"] = True
    return kw


@emitter("sort")
def sort(e: NodeEmit, x: Arg, *, axis, descending, stable) -> ast.expr:
    return call("torch.sort", x, **_sort_kw(axis, descending, stable))


@emitter("argsort")
def argsort(e: NodeEmit, x: Arg, *, axis, descending, stable) -> ast.expr:
    return call("torch.argsort", x, **_sort_kw(axis, descending, stable))


# ---------------------------------------------------------------- run-time helpers
# Pasted into the generated modules that use them: only torch, F and other _msc_* helpers.
def _msc_cumsum(x, dim, exclusive, reverse):
    """Running sum along ``dim``; ``exclusive`` shifts by one, ``reverse`` runs backwards."""
    if reverse:
        x = x.flip(dim)
    y = torch.cumsum(x, dim, dtype=x.dtype)
    if exclusive:
        y = y.narrow(dim, 0, x.shape[dim] - 1)
        y = torch.cat([torch.zeros_like(x.narrow(dim, 0, 1)), y], dim)
    return y.flip(dim) if reverse else y


def _msc_cumprod(x, dim, exclusive, reverse):
    """Running product along ``dim``; ``exclusive`` shifts by one, ``reverse`` runs backwards."""
    if reverse:
        x = x.flip(dim)
    y = torch.cumprod(x, dim, dtype=x.dtype)
    if exclusive:
        y = y.narrow(dim, 0, x.shape[dim] - 1)
        y = torch.cat([torch.ones_like(x.narrow(dim, 0, 1)), y], dim)
    return y.flip(dim) if reverse else y


def _msc_extreme(x, dims, keepdim, largest):
    """ReduceMax (``largest``) / ReduceMin over ``dims``; over no elements (a reduced dim of
    size 0) the op's identity: -inf / inf, the dtype's lowest / highest value, False / True."""
    dims = sorted({d % x.dim() for d in dims})
    if all(x.shape[d] > 0 for d in dims):
        return torch.amax(x, dims, keepdim) if largest else torch.amin(x, dims, keepdim)
    if x.dtype == torch.bool:
        fill = not largest
    elif x.is_floating_point():
        fill = -float("inf") if largest else float("inf")
    else:
        info = torch.iinfo(x.dtype)
        fill = info.min if largest else info.max
    shape = [1 if i in dims else n for i, n in enumerate(x.shape) if keepdim or i not in dims]
    return torch.full(shape, fill, dtype=x.dtype, device=x.device)


def _msc_reduce_prod(x, dims, keepdim):
    """Product over several dims (torch.prod takes one), keeping x's dtype."""
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        x = torch.prod(x, d, keepdim=keepdim, dtype=x.dtype)
    return x


def _msc_stable_topk(x, k, dim, largest):
    """torch.topk with equal values in index order (ONNX TopK): a stable sort cut to k; the
    result is sorted, which an unsorted topk allows."""
    values, indices = torch.sort(x, dim=dim, descending=largest, stable=True)
    return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)


def _msc_arg_last(x, dim, keepdim, largest):
    """Index of the last max (or min) along ``dim``."""
    n = x.shape[dim]
    flipped = x.flip(dim)
    i = torch.argmax(flipped, dim, keepdim) if largest else torch.argmin(flipped, dim, keepdim)
    return (n - 1) - i


def _msc_reduce(x, op, axes, keepdim, noop=False):
    """Reduction ``op`` over axes known at run time (empty: every dim, or none with ``noop``),
    keeping x's dtype."""
    if noop and not axes:
        dims = []  # no reduction: only the op's elementwise part (|x|, x*x, log) applies
    else:
        dims = sorted({a % x.dim() for a in axes}) if axes and x.dim() else list(range(x.dim()))
    exact = x.is_floating_point() or x.is_complex()
    kw = {} if exact or x.dtype == torch.int64 else {"dtype": x.dtype}
    if op == "reduce_l1":
        op, x = "reduce_sum", x.abs()
    elif op == "reduce_sum_square":
        op, x = "reduce_sum", x * x
    if not dims:  # a 0-d input or no axes: the reduction of one element
        y = {"reduce_log_sum": torch.log, "reduce_l2": torch.abs}.get(op, torch.clone)(x)
        return y.to(x.dtype)
    if op == "reduce_sum":
        return torch.sum(x, dims, keepdim, **kw)
    if op == "reduce_mean":
        return torch.mean(x, dims, keepdim)
    if op in ("reduce_max", "reduce_min"):
        return _msc_extreme(x, dims, keepdim, op == "reduce_max")
    if op == "reduce_prod":
        return _msc_reduce_prod(x, dims, keepdim)
    if op == "reduce_log_sum":
        return torch.log(torch.sum(x, dims, keepdim, **kw))
    if op == "reduce_log_sum_exp":
        return torch.logsumexp(x, dims, keepdim)
    if op == "reduce_l2":
        if exact:
            return torch.linalg.vector_norm(x, 2, dims, keepdim)
        return torch.sqrt(torch.sum(x * x, dims, keepdim).double()).to(x.dtype)
    fn = torch.any if op == "reduce_any" else torch.all
    return fn(x, dims, keepdim).to(x.dtype)


runtime_helpers(
    _msc_cumprod,
    _msc_cumsum,
    _msc_reduce_prod,
    _msc_stable_topk,
    _msc_arg_last,
    _msc_extreme,
    _msc_reduce,
)
