"""Emitters for shape and data-movement ops, indexing, tensor creation and control flow.

# NOTE: static shapes come from attributes (ints in the graph); a shape computed at run time
# arrives as a 1-d int64 tensor input and is read with ``.tolist()``. Slices print as Python
# subscripts (``x[:, 1:3]``); what torch subscripts cannot do (negative steps) goes through a
# helper.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from codegen.torch.code import call, const, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import (
    int_list,
    int_scalar,
    norm_axis,
    scalar_for,
    size_elements,
    torch_pads,
)
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import emitter
from msc.ir.dtype import DType
from msc.ir.types import SymDim

_BIG = 2**62  # ends at or beyond this are "to the end"


def _shape_list(s: Arg) -> ast.expr:
    """A run-time shape as torch takes it: the Python sizes when the graph computed them
    from shapes (SymInts when traced), a literal, or a tensor's ``tolist()``."""
    if s.is_py:
        return s.s
    if s.literal is not None and s.rank == 1:
        return const(tuple(s.literal))
    return expr("s.tolist()", s=s)


def _py_list(a: Arg) -> bool:
    return a.is_py and a.rank == 1


# ---------------------------------------------------------------- reshaping
@emitter("reshape")
def reshape(e: NodeEmit, x: Arg, shape_in: Arg | None = None, *, shape) -> ast.expr:
    if x.is_py and shape is not None and len(shape) == 1 and shape[0] in (-1, 1):
        return e.py(ast.List([x.s], ast.Load()) if x.rank == 0 else x.s)
    if shape is not None:
        return expr("x.reshape(s)", x=x, s=tuple(shape))
    return expr("x.reshape(s)", x=x, s=_shape_list(shape_in))


@emitter("transpose")
def transpose(e: NodeEmit, x: Arg, *, perm) -> ast.expr:
    return expr("x.permute(p)", x=x, p=tuple(perm))


@emitter("squeeze")
def squeeze(e: NodeEmit, x: Arg, axes_in: Arg | None = None, *, axes) -> ast.expr:
    if axes_in is not None:
        return call(e.helper("_msc_squeeze").id, x, int_list(axes_in))
    if _py_list(x) and x.shape == (1,) and (axes is None or tuple(axes) in ((0,), (-1,))):
        return e.py(expr("v[0]", v=x.s))
    if axes is None:
        return expr("x.squeeze()", x=x)
    if len(axes) == 1:
        return expr("x.squeeze(a)", x=x, a=axes[0])
    return expr("x.squeeze(a)", x=x, a=tuple(axes))


@emitter("unsqueeze")
def unsqueeze(e: NodeEmit, x: Arg, axes_in: Arg | None = None, *, axes) -> ast.expr:
    if axes_in is not None:
        return call(e.helper("_msc_unsqueeze").id, x, int_list(axes_in))
    if x.is_py and x.rank == 0 and tuple(axes) in ((0,), (-1,)):
        return e.py(ast.List([x.s], ast.Load()))
    if len(axes) == 1:
        return expr("x.unsqueeze(a)", x=x, a=axes[0])
    r = (x.rank or 0) + len(axes)
    y: Any = x
    for a in sorted(norm_axis(a, r) for a in axes):
        y = expr("y.unsqueeze(a)", y=y, a=a)
    return y


@emitter("flatten")
def flatten(e: NodeEmit, x: Arg, *, start_axis, end_axis) -> ast.expr:
    if start_axis == 0 and end_axis == -1:
        return call("torch.flatten", x)
    if end_axis == -1:
        return call("torch.flatten", x, start_axis)
    return call("torch.flatten", x, start_axis, end_axis)


def _index(x: Arg, items: dict[int, ast.expr]) -> ast.expr:
    """``x[...]`` with ``items`` at their dims and ``:`` elsewhere (up to the last item)."""
    last = max(items)
    parts = [items.get(i, ast.Slice()) for i in range(last + 1)]
    sl: ast.expr = parts[0] if len(parts) == 1 else ast.Tuple(parts, ast.Load())
    return ast.Subscript(x.expr if isinstance(x, Arg) else x, sl, ast.Load())


def _entry(a: Arg, k: int, n: int) -> ast.expr | None:
    """Entry ``k`` of a 1-d run-time integer input of ``n`` entries as a Python int
    expression (a literal, or an item of the Python list of sizes the graph computed); None
    for a tensor's values."""
    lit = a.literal
    if lit is not None and a.rank == 1 and len(lit) == n:
        return const(int(lit[k]))
    if not _py_list(a):
        return None
    s = a.s
    if isinstance(s, ast.List):
        if len(s.elts) != n or any(isinstance(v, ast.Starred) for v in s.elts):
            return None
        return s.elts[k]
    return ast.Subscript(s, const(k), ast.Load())


def _static_ints(a: Arg | None, attr: Any, n: int) -> list[int] | None:
    if a is not None:
        lit = a.literal
        return [int(v) for v in lit] if lit is not None and len(lit) == n else None
    if attr is None or not attr:
        return None
    return [int(v) for v in attr] if len(attr) == n else None


def _runtime_subscript(x, starts_in, ends_in, axes_in, steps_in, axes, steps) -> Any:
    """A slice with run-time bounds as the plain subscript ``x[:, lo:hi]`` (torch counts a
    negative bound from the end and clamps, as the op does) where its axes and positive steps
    are known and its bounds are Python ints; None otherwise (the helper reads them)."""
    if axes is not None:
        n = len(axes)
    elif axes_in is not None and axes_in.literal is not None:
        n = len(axes_in.literal)
    else:
        return None
    ax = _static_ints(axes_in, axes, n)
    sp = _static_ints(steps_in, steps, n) if steps_in is not None or steps else [1] * n
    if not n or ax is None or sp is None or min(sp) < 1 or x.rank is None:
        return None
    items: dict[int, ast.expr] = {}
    for k in range(n):
        lo, hi = _entry(starts_in, k, n), _entry(ends_in, k, n)
        a = norm_axis(ax[k], x.rank)
        if lo is None or hi is None or a in items:
            return None
        if isinstance(lo, ast.Constant) and lo.value == 0:
            lo = None
        if isinstance(hi, ast.Constant) and hi.value >= _BIG:
            hi = None
        items[a] = ast.Slice(lo, hi, None if sp[k] == 1 else const(sp[k]))
    return _index(x, items)


@emitter("slice")
def slice_(
    e: NodeEmit,
    x: Arg,
    starts_in: Arg | None = None,
    ends_in: Arg | None = None,
    axes_in: Arg | None = None,
    steps_in: Arg | None = None,
    *,
    starts,
    ends,
    axes,
    steps,
) -> ast.expr:
    if starts_in is not None:  # bounds read at run time
        sub = _runtime_subscript(x, starts_in, ends_in, axes_in, steps_in, axes, steps)
        if sub is not None:
            return sub
        ax = int_list(axes_in) if axes_in is not None else None if axes is None else list(axes)
        sp = int_list(steps_in) if steps_in is not None else list(steps) if steps else None
        args = [int_list(starts_in), int_list(ends_in), ax, sp]  # type: ignore[arg-type]
        return call(e.helper("_msc_slice_rt").id, x, *args)
    r = x.rank
    steps = steps or (1,) * len(axes)
    if _py_list(x) and len(axes) == 1 and steps[0] > 0:
        lo = None if starts[0] == 0 else const(starts[0])
        hi = None if ends[0] >= _BIG else const(ends[0])
        sl = ast.Slice(lo, hi, None if steps[0] == 1 else const(steps[0]))
        return e.py(ast.Subscript(x.s, sl, ast.Load()))
    items: dict[int, ast.expr] = {}
    negative = []
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        a = norm_axis(ax, r)
        if sp < 0:
            negative.append((a, st, en, sp))
            continue
        lo = None if st == 0 else const(st)
        hi = None if en >= _BIG else const(en)
        items[a] = ast.Slice(lo, hi, None if sp == 1 else const(sp))
    y: Any = _index(x, items) if items else x
    for a, st, en, sp in negative:
        y = call(e.helper("_msc_slice").id, y, a, st, en, sp)
    return y if (items or negative) else expr("x.clone()", x=x)


@emitter("concat")
def concat(e: NodeEmit, xs: list[Arg], *, axis) -> ast.expr:
    fits = all(_py_list(x) or (x.literal is not None and x.rank == 1) for x in xs)
    if fits and any(x.is_py for x in xs):  # sizes: a Python list
        items: list[ast.expr] = []
        for x in xs:
            if x.is_py:
                s = x.s
                items += s.elts if isinstance(s, ast.List) else [ast.Starred(s, ast.Load())]
            else:
                items += [const(v) for v in x.literal]
        return e.py(ast.List(items, ast.Load()))
    return call("torch.cat", list(xs), axis)


@emitter("split")
def split(e: NodeEmit, x: Arg, sizes_in: Arg | None = None, *, axis, sizes, num_outputs):
    if sizes is None and sizes_in is not None:
        return call("torch.split", x, int_list(sizes_in), axis)
    if sizes is None:  # num_outputs pieces of ceil(dim / num_outputs)
        n = const(num_outputs)
        return call("torch.split", x, expr("-(-x.shape[a] // n)", x=x, a=axis, n=n), axis)
    y = call("torch.split", x, list(sizes), axis)
    return y if len(sizes) > 1 else expr("y[0]", y=y)


@emitter("pad")
def pad(e: NodeEmit, x: Arg, pads_in=None, value_in=None, *, pads, mode, value) -> ast.expr:
    if pads_in is not None or value_in is not None:
        p = int_list(pads_in) if pads_in is not None else list(pads)
        v = expr("v.item()", v=value_in) if value_in is not None else value
        return call(e.helper("_msc_pad").id, x, p, mode, v)
    r = x.rank
    tp = torch_pads(pads)
    while len(tp) > 2 and tp[-1] == 0 and tp[-2] == 0:
        tp = tp[:-2]
    k = len(tp) // 2
    if mode == "constant":
        kw = {"value": scalar_for(x.dtype, value)} if value != 0 else {}
        return call("F.pad", x, tuple(tp), **kw)
    tmode = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
    if all(p >= 0 for p in pads) and k <= 3 and r in (k + 1, k + 2):
        return call("F.pad", x, tuple(tp), mode=tmode)
    return call(e.helper("_msc_pad").id, x, list(pads), mode, value)


@emitter("expand")
def expand(e: NodeEmit, x: Arg, shape_in: Arg | None = None, *, shape) -> ast.expr:
    # ONNX's Expand broadcasts both ways (a 1 in the target keeps x's dim); torch's expand
    # only widens x's size-1 dims (-1 keeps one). Where the graph shows which target sizes
    # must keep x's dim, they are written -1 and torch's expand does it; where that depends
    # on sizes only known at run time, a helper decides.
    known = list(shape) if shape is not None else size_elements(shape_in.value)
    keep = _expand_keeps(x.shape, known)
    if keep is None:
        sizes = list(shape) if shape is not None else _shape_list(shape_in)
        return call(e.helper("_msc_expand").id, x, sizes)
    if shape is not None:
        sizes = [-1 if i in keep else t for i, t in enumerate(_padded(shape, x.rank))]
        return expr("x.expand(s)", x=x, s=tuple(sizes))
    target = _shape_list(shape_in)
    lead = max(0, (x.rank or 0) - len(known))  # type: ignore[arg-type]
    if not keep:
        return expr("x.expand(s)", x=x, s=target)
    keep = {i - lead for i in keep}
    sizes = _kept(target, len(known), keep)
    if sizes is None and (parts := _concat_parts(shape_in)) is not None:
        sizes = _kept(parts, len(known), keep)
    if sizes is None:
        t = e.let("size", target)
        sizes = [const(-1) if i in keep else expr("t[i]", t=t, i=i) for i in range(len(known))]
    sizes = [const(-1)] * lead + sizes
    return expr("x.expand(s)", x=x, s=ast.List(sizes, ast.Load()))


def _padded(shape: Any, rank: int | None) -> list[Any]:
    """A target shorter than x's rank, with leading 1s (ONNX broadcasts it up)."""
    return [1] * max(0, (rank or 0) - len(shape)) + list(shape)


def _expand_keeps(xshape: tuple | None, known: list[Any] | None) -> set[int] | None:
    """Positions (in the padded target) where x's dim must be kept (written -1), so that
    torch's one-way expand computes ONNX's two-way one; None when that cannot be decided from
    the graph. ``known``: the target's elements as far as the graph knows them (an int, a
    symbol, or None for a size only known at run time)."""
    if xshape is None or known is None:
        return None
    target = _padded(known, len(xshape))
    lead = len(target) - len(xshape)
    keep: set[int] = set()
    for i, d in enumerate(xshape):
        t = target[lead + i]
        if t == -1 or (isinstance(d, int) and d == 1) or (t is not None and _same(t, d)):
            continue  # kept already; a size-1 dim takes any target; the same size
        if isinstance(t, int) and t != 1:
            continue  # x's dim must be 1 or t, in both semantics
        if t == 1 or isinstance(d, int):
            keep.add(lead + i)  # a 1 keeps x's dim; a static k > 1 admits only a 1 or k
        elif getattr(t, "min", None) is not None and t.min >= 2:
            continue  # a symbol that is never 1: x's dim must be 1 or it
        else:
            return None  # a run-time size against a symbolic dim: either may be 1
    return keep


def _same(a: Any, b: Any) -> bool:
    """The same static size: equal ints, or the same symbol (by name) or expression."""
    if isinstance(a, SymDim) and isinstance(b, SymDim):
        return a.name == b.name
    return a is not None and b is not None and type(a) is type(b) and a == b


def _concat_parts(a: Arg) -> ast.List | None:
    """A run-time size list that a ``concat`` of sizes and literals made, as a list literal of
    its parts (a part of several sizes starred), so single sizes in it can be replaced."""
    p = a.value.producer
    if p is None or p.op != "concat" or a.cg is None:
        return None
    items: list[ast.expr] = []
    for u in p.inputs:
        if u is None or u.type.shape is None or len(u.type.shape) != 1:
            return None
        part = Arg(a.cg, u)
        lit = part.literal
        if lit is not None:
            items += [const(v) for v in lit]
        elif part.is_py:
            s = part.s
            items += s.elts if isinstance(s, ast.List) else [ast.Starred(s, ast.Load())]
        else:
            items.append(ast.Starred(expr("v.tolist()", v=part), ast.Load()))
    return ast.List(items, ast.Load())


def _kept(target: ast.expr, n: int, keep: set[int]) -> list[ast.expr] | None:
    """The items of ``target``, a Python list literal of ``n`` sizes, with those at ``keep``
    written -1; a starred part (``*x.shape[:1]``) stays whole. None when ``target`` is not
    such a literal or a kept position falls in a starred part."""
    if not isinstance(target, ast.List | ast.Tuple):
        return None
    elts = list(target.elts)
    starred = [x for x in elts if isinstance(x, ast.Starred)]
    if len(starred) > 1:
        return None
    span = n - (len(elts) - len(starred))  # the starred part's length
    out, pos = [], 0
    for x in elts:
        width = span if isinstance(x, ast.Starred) else 1
        hit = any(pos <= k < pos + width for k in keep)
        if hit and isinstance(x, ast.Starred):
            return None
        out.append(const(-1) if hit else x)
        pos += width
    return out if pos == n else None


@emitter("tile")
def tile(e: NodeEmit, x: Arg, repeats_in: Arg | None = None, *, repeats) -> ast.expr:
    if repeats_in is not None:
        return expr("x.repeat(r)", x=x, r=int_list(repeats_in))
    if x.rank is not None and len(repeats) >= x.rank:
        return expr("x.repeat(r)", x=x, r=tuple(repeats))
    return call("torch.tile", x, tuple(repeats))


@emitter("flip")
def flip(e: NodeEmit, x: Arg, *, axes) -> ast.expr:
    return call("torch.flip", x, tuple(axes))


@emitter("roll")
def roll(e: NodeEmit, x: Arg, *, shifts, axes) -> ast.expr:
    return call("torch.roll", x, tuple(shifts), tuple(axes))


@emitter("trilu")
def trilu(e: NodeEmit, x: Arg, k_in: Arg | None = None, *, upper, k) -> ast.expr:
    fn = "torch.triu" if upper else "torch.tril"
    if k_in is not None:
        return call(fn, x, int_scalar(k_in))
    return call(fn, x) if k == 0 else call(fn, x, k)


@emitter("depth_to_space")
def depth_to_space(e: NodeEmit, x: Arg, *, blocksize, mode) -> ast.expr:
    if mode == "CRD":
        return call("F.pixel_shuffle", x, blocksize)
    return call(e.helper("_msc_depth_to_space").id, x, blocksize, mode)


@emitter("space_to_depth")
def space_to_depth(e: NodeEmit, x: Arg, *, blocksize) -> ast.expr:
    return call(e.helper("_msc_space_to_depth").id, x, blocksize)


# ---------------------------------------------------------------- indexing
@emitter("gather")
def gather(e: NodeEmit, x: Arg, indices: Arg, *, axis) -> ast.expr:
    a = norm_axis(axis, x.rank)
    c = indices.const
    if _py_list(x) and indices.literal is not None:
        if indices.rank == 0:
            return e.py(expr("v[i]", v=x.s, i=indices.literal))
        return e.py(ast.List([expr("v[i]", v=x.s, i=i) for i in indices.literal], ast.Load()))
    if c is not None and c.ndim == 0:
        return _index(x, {a: const(int(c))})
    if indices.rank == 1 and c is not None and (c >= 0).all():
        return call("torch.index_select", x, a, indices)
    return _index(x, {a: indices.expr})


def _from_end(x: Arg, indices: Arg, axis: int, negative: bool) -> Any:
    """Indices counted from the end where the node says they may be (torch.gather and
    torch.scatter refuse a negative index): ``i + dim`` where ``i < 0``, at run time."""
    c = indices.const
    if not negative or (c is not None and (c >= 0).all()):
        return indices
    return expr("torch.where(i < 0, i + x.shape[a], i)", i=indices, x=x, a=const(axis))


@emitter("gather_elements")
def gather_elements(e: NodeEmit, x: Arg, indices: Arg, *, axis, negative_indices) -> ast.expr:
    return call("torch.gather", x, axis, _from_end(x, indices, axis, negative_indices))


@emitter("scatter_elements")
def scatter_elements(e, x, indices, updates, *, axis, reduction, negative_indices) -> ast.expr:
    indices = _from_end(x, indices, axis, negative_indices)
    if reduction == "none":
        return call("torch.scatter", x, axis, indices, updates)
    if reduction == "add":
        return call("torch.scatter_add", x, axis, indices, updates)
    how = {"mul": "prod", "max": "amax", "min": "amin"}[reduction]
    return call("torch.scatter_reduce", x, axis, indices, updates, how)


@emitter("scatter_nd")
def scatter_nd(e, x, indices, updates, *, reduction) -> ast.expr:
    return call(e.helper("_msc_scatter_nd").id, x, indices, updates, reduction)


@emitter("index")
def index(e: NodeEmit, x: Arg, indices: list[Arg], *, axes) -> ast.expr:
    r = x.rank
    return _index(x, {norm_axis(a, r): i.expr for a, i in zip(axes, indices)})


@emitter("index_put")
def index_put(e, x, values, indices, *, axes, accumulate) -> ast.expr:
    r = x.rank
    at = {norm_axis(a, r): i for a, i in zip(axes, indices)}
    idx = [at.get(i) for i in range(max(at) + 1)]
    # aten.index_put takes None for the dims that are not indexed (x[:, i] = v).
    return call("torch.ops.aten.index_put", x, idx, values, accumulate)


@emitter("nonzero")
def nonzero(e: NodeEmit, x: Arg) -> ast.expr:
    return call("torch.nonzero", x)


@emitter("shape")
def shape(e: NodeEmit, x: Arg, *, start, end) -> ast.expr:
    # Sizes stay Python ints (SymInts when traced); a tensor is made only where one is needed.
    if start == 0 and end is None:
        return e.py(expr("x.shape", x=x))
    sl = ast.Slice(None if start == 0 else const(start), None if end is None else const(end))
    return e.py(ast.Subscript(expr("x.shape", x=x), sl, ast.Load()))


# ---------------------------------------------------------------- creation
def _values(arr: np.ndarray) -> Any:
    dt = DType.from_numpy(arr.dtype)
    if dt.is_floating:
        return arr.astype(np.float64).tolist()
    return arr.tolist()


@emitter("constant")
def constant(e: NodeEmit, *, value: np.ndarray) -> ast.expr:
    dt = DType.from_numpy(value.dtype)
    if value.size == 0:
        return call("torch.zeros", tuple(value.shape), dtype=dt)
    return call("torch.tensor", _values(value), dtype=dt)


def _num(dt: DType, v: float) -> Any:
    return scalar_for(dt, v)


@emitter("arange")
def arange(e: NodeEmit, *, start, end, step, dtype) -> ast.expr:
    ints = dtype.is_integer and all(float(v).is_integer() for v in (start, end, step))
    conv = int if ints else float
    args: list[Any] = [conv(end)] if start == 0 and step == 1 else [conv(start), conv(end)]
    if step != 1:
        args.append(conv(step))
    return call("torch.arange", *args, dtype=dtype)


@emitter("full")
def full(e: NodeEmit, shape_in: Arg | None = None, *, shape, value, dtype) -> ast.expr:
    size: Any = tuple(shape) if shape is not None else _shape_list(shape_in)
    return call("torch.full", size, _num(dtype, value), dtype=dtype)


@emitter("full_like")
def full_like(e: NodeEmit, x: Arg, *, value, dtype) -> ast.expr:
    dt = dtype or x.dtype
    kw = {} if dtype is None else {"dtype": dtype}
    return call("torch.full_like", x, _num(dt, value), **kw)


@emitter("one_hot")
def one_hot(e: NodeEmit, indices: Arg, depth_in: Arg | None = None, *, depth, axis, dtype):
    if depth_in is not None:
        return call(e.helper("_msc_one_hot").id, indices, int_scalar(depth_in), axis, dtype)
    if axis == -1 and dtype is DType.INT64 and indices.dtype is DType.INT64:
        return call("F.one_hot", indices, depth)
    return call(e.helper("_msc_one_hot").id, indices, depth, axis, dtype)


# ---------------------------------------------------------------- run-time helpers
# Pasted into the generated modules that use them: only torch, F and other _msc_* helpers.
def _msc_torch_pads(pads):
    """ONNX pads [b0, b1, ..., e0, e1, ...] to F.pad's order (last dim first)."""
    n = len(pads) // 2
    out = []
    for i in reversed(range(n)):
        out += [pads[i], pads[n + i]]
    return out


def _msc_pad(x, pads, mode, value):
    """ONNX Pad: pads [begins..., ends...] per dim; negative pads crop; modes constant,
    reflect, edge, wrap on any dim."""
    if mode == "constant":
        return F.pad(x, _msc_torch_pads(pads), value=value)
    n = x.dim()
    for d in range(n):
        b, e = pads[d], pads[n + d]
        if b == 0 and e == 0:
            continue
        size = x.shape[d]
        i = torch.arange(-b, size + e, device=x.device)
        if mode == "edge":
            i = i.clamp(0, size - 1)
        elif mode == "wrap":
            i = torch.remainder(i, size)
        elif mode == "reflect":
            period = 2 * (size - 1) if size > 1 else 1
            i = torch.remainder(i, period)
            i = torch.where(i >= size, period - i, i)
        else:
            raise ValueError(f"pad mode {mode!r}")
        x = x.index_select(d, i)
    return x


def _msc_slice(x, dim, start, end, step):
    """x[start:end:step] along ``dim`` with Python semantics, including negative steps."""
    idx = range(*slice(start, end, step).indices(x.shape[dim]))
    return x.index_select(dim, torch.tensor(list(idx), dtype=torch.int64, device=x.device))


def _msc_slice_rt(x, starts, ends, axes, steps):
    """ONNX Slice with bounds read at run time: clamped Python slices, negative steps too."""
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax = ax % x.dim()
        if sp > 0:  # torch's subscript clamps as Python does, and keeps sizes symbolic
            x = x[(slice(None),) * ax + (slice(st, en, sp),)]
        else:
            lo, hi, sp = slice(st, en, sp).indices(x.shape[ax])
            idx = torch.arange(lo, hi, sp, dtype=torch.int64, device=x.device)
            x = x.index_select(ax, idx)
    return x


def _msc_squeeze(x, axes):
    """Drop the size-1 dims ``axes`` (all size-1 dims when empty)."""
    return x.squeeze(tuple(axes)) if axes else x.squeeze()


def _msc_unsqueeze(x, axes):
    """Insert size-1 dims at ``axes`` (positions in the output)."""
    r = x.dim() + len(axes)
    for a in sorted(a % r for a in axes):
        x = x.unsqueeze(a)
    return x


def _msc_expand(x, shape):
    """numpy-style broadcast of x to ``shape``; -1 keeps x's dim; either side may be 1."""
    r = max(len(shape), x.dim())
    have = [1] * (r - x.dim()) + list(x.shape)
    want = [1] * (r - len(shape)) + list(shape)
    out = [h if w == -1 else (h if w == 1 else w) for h, w in zip(have, want)]
    return x.reshape(have).expand(out)


def _msc_scatter_nd(x, indices, updates, reduction):
    """ONNX ScatterND: a copy of x with ``updates`` written (or reduced) at index tuples."""
    k = indices.shape[-1]
    lead = x.shape[:k]
    flat = x.reshape(-1, *x.shape[k:]).clone()
    sizes = torch.tensor(lead, device=x.device)
    idx = indices.reshape(-1, k)
    idx = torch.where(idx < 0, idx + sizes, idx)
    strides = torch.ones(k, dtype=torch.int64, device=x.device)
    for i in range(k - 2, -1, -1):
        strides[i] = strides[i + 1] * lead[i + 1]
    lin = (idx * strides).sum(-1)
    upd = updates.reshape(lin.shape[0], *x.shape[k:])
    if reduction == "none":
        flat[lin] = upd
    else:
        lin = lin.view(-1, *([1] * (flat.dim() - 1))).expand_as(upd)
        how = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}[reduction]
        flat = flat.scatter_reduce(0, lin, upd, how, include_self=True)
    return flat.reshape(x.shape)


def _msc_depth_to_space(x, blocksize, mode):
    """ONNX DepthToSpace (DCR or CRD) on [N, C, H, W]."""
    n, c, h, w = x.shape
    b = blocksize
    if mode == "CRD":
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


def _msc_space_to_depth(x, blocksize):
    """ONNX SpaceToDepth on [N, C, H, W]."""
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def _msc_one_hot(indices, depth, axis, dtype):
    """One-hot along a new ``axis``; negative indices count from depth, others out of range
    give an all-zero row (ONNX OneHot)."""
    i = torch.where(indices < 0, indices + depth, indices).to(torch.int64)
    valid = (i >= 0) & (i < depth)
    y = F.one_hot(torch.where(valid, i, 0), depth) * valid.unsqueeze(-1)
    return torch.movedim(y, -1, axis).to(dtype)


runtime_helpers(
    _msc_torch_pads,
    _msc_pad,
    _msc_slice,
    _msc_slice_rt,
    _msc_squeeze,
    _msc_unsqueeze,
    _msc_expand,
    _msc_scatter_nd,
    _msc_depth_to_space,
    _msc_space_to_depth,
    _msc_one_hot,
)
