"""Emitters of the tensor family (bitcast, det, range, unique, reverse_sequence,
tensor_scatter), with their run-time helpers.

# NOTE: a run-time helper (``_msc_*``) uses only ``torch``, ``F`` and other helpers: its
# source is pasted into generated modules.
"""

from __future__ import annotations

import ast

import torch

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import forward_to_helper
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS, emitter


@emitter("bitcast")
def bitcast(e: NodeEmit, x: Arg, *, to) -> ast.expr:
    return expr("x.view(d)", x=x, d=to)


@emitter("det")
def det(e: NodeEmit, x: Arg) -> ast.expr:
    return call("torch.linalg.det", x)


@emitter("range")
def range_(e: NodeEmit, start: Arg, limit: Arg, delta: Arg) -> ast.expr:
    def item(a: Arg):
        return a.s if a.is_scalar else expr("a.item()", a=a)

    return call("torch.arange", item(start), item(limit), item(delta), dtype=start.dtype)


# Ops computed by one run-time helper taking the node's inputs and attributes in order.
EMITTERS("unique")(forward_to_helper("_msc_unique", __name__))
EMITTERS("reverse_sequence")(forward_to_helper("_msc_reverse_sequence", __name__))
EMITTERS("tensor_scatter")(forward_to_helper("_msc_tensor_scatter", __name__))


def _msc_unique(x, axis, sorted):
    """Unique values (or slices), first-occurrence indices, inverse indices and counts;
    sorted ascending or in order of first occurrence."""
    data, dim = (x.reshape(-1), 0) if axis is None else (x, axis % x.dim())
    work = data.float() if data.dtype in (torch.bfloat16, torch.float16) else data
    u, inv, counts = torch.unique(
        work, sorted=True, return_inverse=True, return_counts=True, dim=dim
    )
    u = u.to(x.dtype)
    n = inv.shape[0]
    ar = torch.arange(n, device=x.device)
    first = torch.full((counts.shape[0],), n, dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inv, ar, "amin")
    if not sorted:
        order = torch.argsort(first)
        u, first, counts = u.index_select(dim, order), first[order], counts[order]
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.shape[0], device=x.device)
        inv = rank[inv]
    return u, first, inv, counts


def _msc_reverse_sequence(x, lens, batch_axis, time_axis):
    """Reverse the first lens[b] steps along time_axis of each batch entry."""
    xm = x.movedim((batch_axis, time_axis), (0, 1))
    t = torch.arange(xm.shape[1], device=x.device).unsqueeze(0)
    n = lens.reshape(-1, 1)
    idx = torch.where(t < n, n - 1 - t, t)
    idx = idx.reshape(*idx.shape, *[1] * (xm.dim() - 2)).expand(xm.shape)
    return xm.gather(1, idx).movedim((0, 1), (batch_axis, time_axis))


def _msc_tensor_scatter(past, update, write_indices, axis, mode):
    """Write update into past along axis from write_indices[b] (circular: modulo its size)."""
    a = axis % past.dim()
    b, s = past.shape[0], update.shape[a]
    start = write_indices if write_indices is not None else past.new_zeros(b, dtype=torch.int64)
    idx = start.reshape(b, 1) + torch.arange(s, device=past.device).reshape(1, s)
    if mode == "circular":
        idx = idx % past.shape[a]
    shape = [1] * past.dim()
    shape[0], shape[a] = b, s
    return past.scatter(a, idx.reshape(shape).expand(update.shape), update)


runtime_helpers(_msc_unique, _msc_reverse_sequence, _msc_tensor_scatter)
