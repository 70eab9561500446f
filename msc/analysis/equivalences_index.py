"""Equivalent spellings of shapes, views, indexing and sorting, for ``msc.analysis.equivalences``.

Rules (``msc.rewrite`` matchers, each exact; a rule's label is what ``diff`` counts; ``RULES``
here is one block of ``msc.analysis.equivalences.RULES``, in its priority order):

- ``unsqueeze(unsqueeze(x, a), b)`` as one unsqueeze (and squeezes alike): torch.export writes
  one dim at a time, torch.onnx several at once;
- ``squeeze(unsqueeze(x, a), a)`` -> ``x`` (JAX's gather reads its index vectors so);
- ``transpose(transpose(x, p), q)`` as one transpose, or ``x`` where the two undo each
  other: a codegen moving a layout into a library call and back (Keras'
  ``dot_product_attention`` takes [batch, length, heads, dim]) writes transposes the source
  did not;
- ``squeeze(slice(x, k, k + 1, axis), axis)`` -> ``gather(x, k, axis)`` of a 0-d ``k``:
  torch.export's ``select`` against ONNX's Gather of a scalar index;
- ``index(x, i)`` on one axis -> ``gather(x, i, axis)`` (torch.export's ``x[i]``);
- ``topk`` sorted and stable (ONNX's TopK) -> the first k of a stable ``sort`` (generated
  PyTorch's spelling: torch.topk has no stable order); a sorted topk whose indices nothing
  reads alike, stable or not (equal values are equal in any order); a topk of the whole axis
  (k the dim, or read from x's shape) -> the sort itself: ONNX's TopK orders ties by index,
  lower first, for largest and smallest alike (the spec's tiebreak), which is a stable
  sort's order ascending or descending (msc's and torch's ``stable``; JAX's jnp.sort /
  argsort give it too), so codegen.onnx's TopK spelling of a sort reads back as the sort;
- ``argsort(x)`` -> the indices of ``sort(x)`` of the same attributes;
- ``cast(cast(i, int32), int64)`` of a topk's, sort's, argsort's, argmax's or argmin's
  indices along a static axis -> ``i`` (they lie in [0, dim); Keras' top_k gives int32);
- ``x != x`` of a float x -> ``isnan(x)`` (codegen.tflite's spelling: TFLite has no IsNaN);
- a reshape's or expand's run-time int64 target through ``cast`` to int32 and back -> the
  target (TFLite takes it as int32; its entries are dims);
- ``embedding(W, clamp(i, 0, rows - 1))`` -> ``embedding(W, i)``: JAX's gather clamps its
  starts (the JAX frontend writes the clamp), and an embedding's indices are W's rows;
- ``split(x, sizes, axis)`` of constant sizes -> one ``slice`` per piece (jnp.split's
  re-export; ONNX's Split against slices alike);
- ``gather(x, range(0, n, 1), axis)`` -> ``slice(x, 0, n, axis)`` where ``n`` is at most the
  dim (torch.export's slice to a symbolic end, against ONNX's Slice);
- gather-style ops' ``negative_indices`` where the indices are known not to be negative;
- ``gather_nd(x, concat([unsqueeze(expand(i_k), -1)...], -1))`` -> ``index(x, i_0, ...)``:
  torch.onnx's spelling of advanced indexing (and codegen.onnx's, without the expand, where
  Concat makes the i_k one shape; codegen.tflite's, its int32 coordinates widened back to
  int64 and each i_k wrapped by ``remainder`` of x's dim, which index does itself);
- ``gather(flatten(x), i_1 % d_1 + (i_0 % d_0) * d_1)`` (codegen.keras' take of a flat
  index in Horner form, each index wrapped into its dim unless never negative) -> ``index(x,
  i_0, i_1)``, which wraps a negative index itself;
- gather_nd of constant indices -> gather; an index of leading dims -> a gather of their
  linear index; a gather of an unsqueezed tensor -> the unsqueeze of the gather; a reshape
  of a view -> one reshape; views back to the shape they began with, dropped.

# NOTE: every rule is exact for the graphs it matches (the NOTE of msc.analysis.canonical);
# the conditions say why. Pure msc: no torch, no onnx.
"""

from __future__ import annotations

import numpy as np

from msc.analysis.shape_values import content_of
from msc.ir import symexpr
from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Node, Value
from msc.ops.infer import broadcast
from msc.ops.rewrite import Match, constant_value

__all__ = ["RULES"]


# ------------------------------------------------------------------------------ (un)squeeze chains
def _axes(n: Node, rank: int) -> list[int] | None:
    axes = n.attrs.get("axes")
    if axes is None or len(n.inputs) > 1 and n.inputs[1] is not None:
        return None
    return sorted(a % rank for a in axes)


def _find_unsqueeze_chain(n: Node) -> Match | None:
    """unsqueeze(unsqueeze(x, a), b) -> unsqueeze(x, c): a's positions (in the middle
    result) are the final positions b left free, in order."""
    if n.op != "unsqueeze" or n.inputs[0] is None or n.inputs[0].producer is None:
        return None
    inner = n.inputs[0].producer
    if inner.op != "unsqueeze":
        return None
    x = inner.inputs[0]
    rank = n.output.type.rank
    mid = inner.output.type.rank
    if x is None or rank is None or mid is None:
        return None
    b, a = _axes(n, rank), _axes(inner, mid)
    if a is None or b is None:
        return None
    free = [k for k in range(rank) if k not in b]
    # The inner unsqueeze stays for its other readers: chains merge alike whether or not an
    # exporter shared their first steps.
    nodes = [inner, n] if len(inner.output.uses) == 1 else [n]
    return Match(n, nodes, {"x": x}, info={"axes": sorted(b + [free[k] for k in a])})


def _find_squeeze_chain(n: Node) -> Match | None:
    """squeeze(squeeze(x, a), b) -> squeeze(x, c): b's positions are those of the middle
    result, the dims of x that a left."""
    if n.op != "squeeze" or n.inputs[0] is None or n.inputs[0].producer is None:
        return None
    inner = n.inputs[0].producer
    if inner.op != "squeeze":
        return None
    x = inner.inputs[0]
    rank = None if x is None else x.type.rank
    mid = inner.output.type.rank
    if rank is None or mid is None:
        return None
    a, b = _axes(inner, rank), _axes(n, mid)
    if a is None or b is None:
        return None
    left = [k for k in range(rank) if k not in a]
    nodes = [inner, n] if len(inner.output.uses) == 1 else [n]
    return Match(n, nodes, {"x": x}, info={"axes": sorted(a + [left[k] for k in b])})


def _find_unsqueeze_undone(n: Node) -> Match | None:
    """squeeze(unsqueeze(x, a), a) -> x: the dims put in taken out again, whatever x's sizes
    (JAX's gather reads its index vectors so: a trailing dim put in, squeezed back)."""
    inner = n.inputs[0].producer if n.op == "squeeze" and n.inputs[0] is not None else None
    if inner is None or inner.op != "unsqueeze" or inner.inputs[0] is None:
        return None
    rank = inner.output.type.rank
    a = None if rank is None else _axes(inner, rank)
    if a is None or a != _axes(n, rank):
        return None
    nodes = [inner, n] if len(inner.output.uses) == 1 else [n]
    return Match(n, nodes, {"x": inner.inputs[0]})


def _find_transpose_chain(n: Node) -> Match | None:
    """transpose(transpose(x, p), q) -> transpose(x, r), r[j] = p[q[j]]; x itself where r is
    the identity: a codegen that moves a layout into a library call and back (Keras'
    dot_product_attention takes [batch, length, heads, dim]) writes transposes the source
    did not."""
    if n.op != "transpose" or n.inputs[0] is None or n.inputs[0].producer is None:
        return None
    inner = n.inputs[0].producer
    if inner.op != "transpose" or inner.inputs[0] is None:
        return None
    p, q = inner.attrs.get("perm"), n.attrs.get("perm")
    if p is None or q is None or len(p) != len(q):
        return None
    nodes = [inner, n] if len(inner.output.uses) == 1 else [n]
    r = [int(p[j]) for j in q]
    return Match(n, nodes, {"x": inner.inputs[0]}, info={"perm": r})


def _transposed(b: Builder, m: Match) -> Value:
    r = m.info["perm"]
    return m["x"] if r == list(range(len(r))) else b.op("transpose", m["x"], perm=r)


# ------------------------------------------------------------------------------ indexing
def _non_negative(v: Value | None, depth: int = 0) -> bool:
    """Values known never negative: constants that are not, ranges counting up from 0,
    shapes, and what only moves or selects such values."""
    if v is None or depth > 16:
        return False
    c = constant_value(v)
    if c is not None:
        return bool(c.dtype.kind in "iub" and (c.size == 0 or c.min() >= 0))
    p = v.producer
    if p is None:
        return False
    if p.op == "shape":
        return True
    if p.op == "range":
        start, step = constant_value(p.inputs[0]), constant_value(p.inputs[2])
        return start is not None and step is not None and start.min() >= 0 and step.min() > 0
    if p.op in ("reshape", "expand", "unsqueeze", "squeeze", "transpose", "flatten", "slice"):
        return _non_negative(p.inputs[0], depth + 1)
    if p.op in ("gather", "gather_elements"):
        return _non_negative(p.inputs[0], depth + 1)
    if p.op == "add":
        return all(_non_negative(x, depth + 1) for x in p.inputs)
    return False


_INDEX_SLOT = {"gather": 1, "gather_elements": 1, "gather_nd": 1, "scatter_elements": 1}


def _find_negative_indices(n: Node) -> Match | None:
    """``negative_indices`` on indices that are never negative: it changes nothing."""
    slot = _INDEX_SLOT.get(n.op)
    if slot is None or not n.attrs.get("negative_indices") or not _non_negative(n.inputs[slot]):
        return None
    return Match(n, [n], {f"in{i}": v for i, v in enumerate(n.inputs) if v is not None})


def _no_negative_indices(b: Builder, m: Match) -> Value:
    n = m.root
    ins = [m.values.get(f"in{i}") for i in range(len(n.inputs))]
    return b.op(n.op, *ins, **{**n.attrs, "negative_indices": False})


def _find_embedding_clamp(n: Node) -> Match | None:
    """``embedding(W, clamp(i, 0, rows - 1))``: an embedding's indices are rows of W (the
    source refuses any other), which the clamp leaves as they are. JAX's gather clamps its
    starts, so the frontend writes the clamp back where generated code takes rows; a gather
    (which counts a negative index from the end) or other bounds keep theirs."""
    if n.op != "embedding" or n.inputs[1] is None or n.inputs[1].producer is None:
        return None
    c, w = n.inputs[1].producer, n.inputs[0]
    if c.op != "clamp" or len(c.inputs) != 3 or c.inputs[0] is None or w.type.shape is None:
        return None
    rows = w.type.shape[0]
    lo, hi = constant_value(c.inputs[1]), constant_value(c.inputs[2])
    if not isinstance(rows, int) or lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return None
    if int(lo.reshape(-1)[0]) != 0 or int(hi.reshape(-1)[0]) != rows - 1:
        return None
    nodes = [c, n] if len(c.output.uses) == 1 else [n]
    return Match(n, nodes, {"w": w, "i": c.inputs[0]})


def _find_static_split(n: Node) -> Match | None:
    """split(x, sizes, axis) of sizes it holds as attributes: each piece is the slice of x
    between the sizes' running sums (jnp.split re-exports as those slices)."""
    if n.op != "split" or n.attrs["sizes"] is None or len(n.inputs) != 1 or n.inputs[0] is None:
        return None
    rank = n.inputs[0].type.rank
    if rank is None:
        return None
    ends = np.cumsum(n.attrs["sizes"]).tolist()
    starts = [0, *ends[:-1]]
    bounds = list(zip(starts, ends))
    return Match(n, [n], {"x": n.inputs[0]}, info={"axis": n.attrs["axis"] % rank, "at": bounds})


def _split_to_slices(b: Builder, m: Match) -> tuple[Value, ...]:
    axis = m.info["axis"]
    return tuple(
        b.op("slice", m["x"], starts=[s], ends=[e], axes=[axis], steps=[1]) for s, e in m.info["at"]
    )


def _find_gather_range(n: Node) -> Match | None:
    """gather(x, range(0, n, 1), axis) is x[start:n] along axis when n never exceeds the
    dim (past it, gather fails where slice clamps)."""
    if n.op != "gather" or n.inputs[1] is None or n.inputs[1].producer is None:
        return None
    r = n.inputs[1].producer
    x = n.inputs[0]
    if r.op != "range" or x is None or x.type.shape is None or len(n.inputs[1].uses) != 1:
        return None
    start, step = constant_value(r.inputs[0]), constant_value(r.inputs[2])
    if start is None or step is None or start.size != 1 or step.size != 1:
        return None
    if int(start.reshape(-1)[0]) != 0 or int(step.reshape(-1)[0]) != 1:
        return None
    axis = n.attrs["axis"] % len(x.type.shape)
    dim, count = x.type.shape[axis], n.inputs[1].type.shape[0]
    if dim is None or count is None:
        return None
    _, hi = symexpr.bounds(count)
    if not (count == dim or isinstance(dim, int) and hi is not None and hi <= dim):
        return None
    limit = r.inputs[1]
    return Match(n, [r, n], {"x": x, "limit": limit}, info={"axis": axis})  # type: ignore[dict-item]


def _gather_range_to_slice(b: Builder, m: Match) -> Value:
    end = b.op("unsqueeze", m["limit"], axes=[0])  # a 1-d end, as Slice reads it
    start = b.const([0], DType.INT64)
    return b.op("slice", m["x"], start, end, axes=[m.info["axis"]], steps=[1])


def _find_slice_squeezed(n: Node) -> Match | None:
    """squeeze(slice(x, k, k + 1, axis), axis) is gather(x, k, axis) of a 0-d index: the one
    element ``x[:, k]`` picks (torch.export's select, ONNX's Gather of a scalar)."""
    s = n.inputs[0].producer if n.op == "squeeze" and n.inputs[0] is not None else None
    if s is None or s.op != "slice" or len(s.inputs) != 1 or len(s.output.uses) != 1:
        return None
    x, a = s.inputs[0], s.attrs
    rank = None if x is None else x.type.rank
    if rank is None or _axes(n, rank) is None or len(a.get("axes") or ()) != 1:
        return None
    axis = a["axes"][0] % rank
    k, end, step = a["starts"][0], a["ends"][0], (a.get("steps") or [1])[0]
    dim = x.type.shape[axis]  # type: ignore[index]
    last = isinstance(dim, int) and k == dim - 1 and end >= dim  # the end spelled "to the end"
    if _axes(n, rank) != [axis] or step != 1 or k < 0 or (end != k + 1 and not last):
        return None
    if not (isinstance(dim, int) and k < dim):  # past the end, slice clamps, gather fails
        return None
    return Match(n, [s, n], {"x": x}, info={"axis": axis, "k": k})  # type: ignore[dict-item]


def _select(b: Builder, m: Match) -> Value:
    index = b.const(np.array(m.info["k"], np.int64), DType.INT64)
    return b.op("gather", m["x"], index, axis=m.info["axis"])


def _find_one_index(n: Node) -> Match | None:
    """index(x, i) on one axis is gather(x, i, axis): numpy's take, the form torch.export
    gives ``x[i]`` and index_select (both wrap negative indices alike)."""
    if n.op != "index" or len(n.inputs) != 2 or len(n.attrs["axes"]) != 1:
        return None
    x, i = n.inputs
    if x is None or i is None or x.type.rank is None:
        return None
    if i.type.dtype not in (DType.INT32, DType.INT64):
        return None
    axis = n.attrs["axes"][0] % x.type.rank
    return Match(n, [n], {"x": x, "i": i}, info={"axis": axis})


def _full_length(n: Node, x: Value, axis: int) -> bool:
    """The topk ``n`` keeps every element along ``axis``: k is the dim (a constant k of a
    static dim, or k read from x's shape at run time, as codegen.onnx writes a sort of a
    symbolic dim)."""
    dim = x.type.shape[axis]  # type: ignore[index]
    k = n.attrs["k"]
    if k is not None:
        return isinstance(dim, int) and k == dim
    kv = n.inputs[1]
    c = constant_value(kv)
    if c is not None:
        return c.size == 1 and isinstance(dim, int) and int(c.reshape(-1)[0]) == dim
    p = kv.producer if kv is not None else None
    if p is not None and p.op in ("reshape", "squeeze", "unsqueeze") and p.inputs[0] is not None:
        p = p.inputs[0].producer  # a [1] k or a scalar one, of the same value
    return p is not None and _dim_read(p, x) == axis


def _dim_read(p: Node, x: Value) -> int | None:
    """The axis of ``x`` whose size ``p`` computes from x's shape (``shape(x)[a]`` as a gather
    of the whole shape, or ``shape(x, a, a + 1)``), else None."""
    rank = x.type.rank
    if rank is None:
        return None
    if p.op == "gather" and p.attrs["axis"] == 0 and p.inputs[0] is not None:
        s, i = p.inputs[0].producer, constant_value(p.inputs[1])
        if s is None or s.op != "shape" or s.inputs[0] is not x or i is None or i.size != 1:
            return None
        if s.attrs.get("start") or s.attrs.get("end") is not None:
            return None
        return int(i.reshape(-1)[0]) % rank
    if p.op == "shape" and p.inputs[0] is x:
        start, end = p.attrs.get("start") or 0, p.attrs.get("end")
        a = start % rank
        return a if (end if end is not None else rank) % (rank + 1) == a + 1 else None
    return None


def _find_stable_topk(n: Node) -> Match | None:
    """topk(x, k) that is sorted and stable (ties in index order, ONNX's TopK) is the first k
    of a stable sort: what generated PyTorch writes, torch.topk having no stable order. One
    whose indices nothing reads needs no stable order (equal values are equal whatever order
    ties take); one of the whole axis is the sort itself (JAX's jnp.sort, written to ONNX as
    TopK of k = the dim)."""
    a = n.attrs if n.op == "topk" else {}
    x = n.inputs[0] if a else None
    if x is None or x.type.rank is None or not a["sorted"]:
        return None
    stable = a["stable"] or not n.outputs[1].uses
    axis = a["axis"] % x.type.rank
    full = _full_length(n, x, axis)
    runtime_k = len(n.inputs) > 1 and n.inputs[1] is not None
    if not stable or not (full or (a["k"] is not None and not runtime_k)):
        return None
    return Match(n, [n], {"x": x}, info={"axis": axis, "full": full, "stable": a["stable"]})


def _topk_label(m: Match) -> str:
    if m.info["full"]:
        return "topk of the whole axis -> sort"
    return "stable topk -> sort + slice" if m.info["stable"] else "topk's values -> sort + slice"


def _sorted_first_k(b: Builder, m: Match) -> list[Value]:
    a, axis = m.root.attrs, m.info["axis"]
    out = b.multi("sort", m["x"], axis=a["axis"], descending=a["largest"], stable=True)
    if m.info["full"]:
        return list(out)
    cut = {"starts": [0], "ends": [a["k"]], "axes": [axis], "steps": [1]}
    return [b.op("slice", v, **cut) for v in out]


def _int32_round_trip(wide: Node | None) -> tuple[Node, Value] | None:
    """``wide = cast(cast(s, int32), int64)`` of an int64 ``s``: the inner cast and ``s``."""
    if wide is None or wide.op != "cast" or wide.inputs[0] is None:
        return None
    if wide.output.type.dtype is not DType.INT64 or wide.inputs[0].type.dtype is not DType.INT32:
        return None
    narrow = wide.inputs[0].producer
    if narrow is None or narrow.op != "cast" or narrow.inputs[0] is None:
        return None
    s = narrow.inputs[0]
    return (narrow, s) if s.type.dtype is DType.INT64 else None


def _find_int32_shape(n: Node) -> Match | None:
    """A reshape's or expand's run-time target read through an int32 round trip
    (``cast(cast(s, i32), i64)``: codegen.tflite writes the target as RESHAPE and
    BROADCAST_TO take it, its reader widens it back) is ``s``: a target's entries are dims
    (and -1), which int32 holds in any model a target can address."""
    if n.op not in ("reshape", "expand") or len(n.inputs) != 2 or n.inputs[1] is None:
        return None
    wide = n.inputs[1].producer
    trip = _int32_round_trip(wide)
    if trip is None:
        return None
    narrow, s = trip
    nodes = [narrow, wide, n] if len(narrow.output.uses) == 1 else [wide, n]
    return Match(n, nodes if len(n.inputs[1].uses) == 1 else [n], {"x": n.inputs[0], "s": s})


# index outputs: (op, output) -> the attribute naming the axis their values index
_INDEX_OUTPUTS = {("topk", 1): "axis", ("sort", 1): "axis", ("argsort", 0): "axis",
                  ("argmax", 0): "axis", ("argmin", 0): "axis"}  # fmt: skip


def _find_int32_indices(n: Node) -> Match | None:
    """``cast(cast(i, i32), i64)`` of the indices a topk, sort, argsort, argmax or argmin
    gives along a static axis is ``i``: they lie in [0, dim), which int32 holds (Keras'
    top_k gives int32 indices; a reader widens them back)."""
    trip = _int32_round_trip(n)
    if trip is None:
        return None
    narrow, i = trip
    p = i.producer
    key = None if p is None else (p.op, i.index)
    if key not in _INDEX_OUTPUTS or p.inputs[0] is None:
        return None
    shape, rank = p.inputs[0].type.shape, p.inputs[0].type.rank
    axis = p.attrs.get(_INDEX_OUTPUTS[key])
    if shape is None or rank is None or not isinstance(axis, int):
        return None
    dim = shape[axis % rank] if rank else 1
    if not isinstance(dim, int) or dim > 2**31 - 1:
        return None
    nodes = [narrow, n] if len(narrow.output.uses) == 1 else [n]
    return Match(n, nodes, {"i": i})


def _find_self_unequal(n: Node) -> Match | None:
    """``x != x`` of a float x is isnan(x) (NaN is the one value unequal to itself): TFLite
    has no IsNaN, codegen.tflite writes NOT_EQUAL through the op's decomposition."""
    if n.op != "ne" or len(n.inputs) != 2 or n.inputs[0] is None:
        return None
    x = n.inputs[0]
    if n.inputs[1] is not x or not x.type.dtype.is_floating:
        return None
    return Match(n, [n], {"x": x})


def _find_argsort(n: Node) -> Match | None:
    """argsort(x) is the indices output of sort(x) of the same attributes: one spelling for
    both (a full-length TopK read back is a sort, whichever output was read)."""
    if n.op != "argsort" or n.inputs[0] is None:
        return None
    return Match(n, [n], {"x": n.inputs[0]})


def _sort_indices(b: Builder, m: Match) -> Value:
    return b.multi("sort", m["x"], **m.root.attrs)[1]


def _integer_zeros(v: Value | None, depth: int = 0) -> bool:
    """``v`` is integer zeros by construction: ``i * 0``, or a sum of such (codegen.onnx's
    zero of the indices' broadcast shape)."""
    p = v.producer if v is not None else None
    if p is None or depth > 8 or not v.type.dtype.is_integer:  # type: ignore[union-attr]
        return False
    if p.op == "mul":
        return any(
            (c := constant_value(x)) is not None and c.size and not np.any(c) for x in p.inputs
        )
    return p.op == "add" and all(_integer_zeros(x, depth + 1) for x in p.inputs)


def _index_component(v: Value | None, target: tuple) -> Value | None:
    """The index tensor ``i`` of ``unsqueeze(expand(i, target), -1)`` or of
    ``unsqueeze(i + zeros, -1)`` (the zeros of the broadcast shape)."""
    u = v.producer if v is not None else None
    if u is None or u.op != "unsqueeze" or u.output.type.rank is None:
        return None
    if _axes(u, u.output.type.rank) != [u.output.type.rank - 1]:
        return None
    e = u.inputs[0].producer if u.inputs[0] is not None else None
    if e is None or tuple(e.output.type.shape or ()) != target:
        return None
    if e.op == "expand":
        return e.inputs[0]
    if e.op == "add":
        for i, z in (e.inputs, e.inputs[::-1]):
            if _integer_zeros(z) and not _integer_zeros(i):
                return i
    return None


def _widened(v: Value | None) -> Value | None:
    """``x`` of ``cast(x)`` to an integer type that holds every value of x's, else ``v``."""
    p = v.producer if v is not None else None
    if p is None or p.op != "cast" or p.inputs[0] is None:
        return v
    src, dst = p.inputs[0].type.dtype, v.type.dtype  # type: ignore[union-attr]
    if not (src.is_integer and dst.is_integer):
        return v
    return p.inputs[0] if np.can_cast(src.to_numpy(), dst.to_numpy(), "safe") else v


def _unwrapped(i: Value, x: Value, k: int) -> Value:
    """``i`` of ``remainder(cast(i, i32), d)`` with ``d`` x's dim k: codegen.tflite's index
    coordinate (TFLite's GATHER_ND reads no negative index), which index wraps itself. The
    int32 narrowing keeps every index in range (a dim is at most 2**31 - 1)."""
    p = i.producer
    if p is None or p.op != "remainder" or x.type.shape is None or k >= len(x.type.shape):
        return i
    d = content_of(p.inputs[1])
    if d is None or d.size != 1 or d.reshape(-1)[0] is None:
        return i
    if d.reshape(-1)[0] != x.type.shape[k]:
        return i
    c = p.inputs[0].producer if p.inputs[0] is not None else None
    if c is not None and c.op == "cast" and c.inputs[0] is not None:
        src = c.inputs[0].type.dtype
        if src.is_integer and c.output.type.dtype in (DType.INT32, DType.INT64):
            return c.inputs[0]
    return p.inputs[0]  # type: ignore[return-value]


def _find_gather_nd_index(n: Node) -> Match | None:
    """gather_nd(x, concat(unsqueeze(expand(i_k, S), -1)..., axis=-1)) with S the broadcast
    of the i_k: advanced indexing of x's leading dims by the i_k (index broadcasts them
    itself; both read a negative index from the end). The coordinates may be widened to
    int64 (a TFLite file's int32 ones read back) and each i_k wrapped by x's dim k."""
    if n.op != "gather_nd" or n.attrs["batch_dims"] != 0 or n.inputs[1] is None:
        return None
    at = _widened(n.inputs[1])
    cat = at.producer if at is not None else None
    if cat is None or cat.op != "concat" or cat.output.type.rank is None:
        return None
    if cat.attrs["axis"] % cat.output.type.rank != cat.output.type.rank - 1:
        return None
    target = tuple(cat.output.type.shape[:-1])
    if None in target:
        return _find_concatenated_index(n, cat)
    idx = [_index_component(v, target) for v in cat.inputs]
    if any(i is None for i in idx) or len(idx) > (n.inputs[0].type.rank or 0):
        return None
    types = [i.type for i in idx]  # type: ignore[union-attr]
    if any(t.shape is None for t in types) or broadcast(*types) != target:
        return None
    nodes = [cat] if at is n.inputs[1] else [cat, n.inputs[1].producer]
    for v in cat.inputs:
        nodes += [v.producer, v.producer.inputs[0].producer]  # type: ignore[union-attr]
    idx = [_unwrapped(i, n.inputs[0], k) for k, i in enumerate(idx)]  # type: ignore[arg-type]
    found = {"x": n.inputs[0]} | {f"i{k}": v for k, v in enumerate(idx)}
    return Match(n, [*nodes, n], found, info={"k": len(idx)})  # type: ignore[arg-type]


def _find_concatenated_index(n: Node, cat: Node) -> Match | None:
    """gather_nd(x, concat(unsqueeze(i_k, -1)..., axis=-1)) where the i_k's shape is not
    known: Concat accepts only i_k of one shape, which index takes as they are (so the two
    agree on every input the model accepts)."""
    rank = cat.output.type.rank
    idx, nodes = [], [cat]
    for v in cat.inputs:
        u = v.producer if v is not None else None
        if u is None or u.op != "unsqueeze" or _axes(u, rank) != [rank - 1]:  # type: ignore[arg-type]
            return None
        i = u.inputs[0]
        if i is None or i.type.rank != rank - 1 or not i.type.dtype.is_integer:  # type: ignore[operator]
            return None
        idx.append(i)
        nodes.append(u)
    if len(idx) > (n.inputs[0].type.rank or 0):  # type: ignore[union-attr]
        return None
    found = {"x": n.inputs[0]} | {f"i{k}": v for k, v in enumerate(idx)}
    return Match(n, [*nodes, n], found, info={"k": len(idx)})  # type: ignore[arg-type]


def _find_constant_gather_nd(n: Node) -> Match | None:
    """gather_nd(x, C) of constant indices (an export with the index folded) is a gather of
    x's indexed leading dims flattened, at the row-major positions C names (negative
    entries counted from the end, as gather_nd does)."""
    if n.op != "gather_nd" or n.attrs["batch_dims"] != 0 or n.inputs[0] is None:
        return None
    c = constant_value(n.inputs[1])
    x = n.inputs[0]
    if c is None or c.ndim < 1 or c.dtype.kind not in "iu" or x.type.shape is None:
        return None
    k = c.shape[-1]
    dims = x.type.shape[:k]
    if k < 1 or k > len(x.type.shape) or not all(isinstance(d, int) for d in dims):
        return None
    c = c.astype(np.int64)
    if np.any(c < -np.asarray(dims)) or np.any(c >= np.asarray(dims)):
        return None
    lin = np.ravel_multi_index(tuple(np.moveaxis(c % np.asarray(dims), -1, 0)), dims)
    return Match(n, [n], {"x": x}, info={"k": k, "lin": lin.astype(np.int64)})


def _constant_gather_nd_to_gather(b: Builder, m: Match) -> Value:
    x, k = m["x"], m.info["k"]
    flat = b.op("flatten", x, start_axis=0, end_axis=k - 1) if k > 1 else x
    return b.op("gather", flat, b.op("constant", value=m.info["lin"]), axis=0)


def _gather_nd_to_index(b: Builder, m: Match) -> Value:
    k = m.info["k"]
    return b.op("index", m["x"], *(m[f"i{j}"] for j in range(k)), axes=list(range(k)))


_VIEWS = ("reshape", "unsqueeze", "squeeze", "flatten")


def _find_view_chain(n: Node) -> Match | None:
    """reshape(view(x)) for a view that only regroups dims (reshape, unsqueeze, squeeze,
    flatten) is reshape(x) to the same target: row-major order is the same."""
    if n.op != "reshape" or n.inputs[0] is None or n.inputs[0].producer is None:
        return None
    inner = n.inputs[0].producer
    if inner.op not in _VIEWS or len(inner.outputs) != 1 or inner.inputs[0] is None:
        return None
    if len(inner.inputs) > 1 and inner.inputs[1] is not None and inner.op != "reshape":
        return None  # run-time axes
    nodes = [inner, n] if len(inner.output.uses) == 1 else [n]
    found = {"x": inner.inputs[0]}
    if len(n.inputs) > 1 and n.inputs[1] is not None:
        found["shape"] = n.inputs[1]
    return Match(n, nodes, found)


def _find_view_round_trip(n: Node) -> Match | None:
    """A chain of views (reshape, unsqueeze, squeeze, flatten) ending in the shape it began
    with is its source: views keep row-major order."""
    if n.op not in _VIEWS or len(n.outputs) != 1:
        return None
    t = n.output.type
    if t.shape is None or None in t.shape:
        return None
    v, nodes = n.inputs[0], [n]
    for _ in range(4):
        if v is None:
            return None
        if v.type == t:
            return Match(
                n, nodes if all(len(x.output.uses) == 1 for x in nodes[1:]) else [n], {"x": v}
            )
        p = v.producer
        if p is None or p.op not in _VIEWS or len(p.outputs) != 1:
            return None
        nodes.append(p)
        v = p.inputs[0]
    return None


def _reshape_again(b: Builder, m: Match) -> Value:
    return b.op("reshape", m["x"], m.values.get("shape"), **m.root.attrs)


def _find_gather_of_unsqueezed(n: Node) -> Match | None:
    """gather(unsqueeze(x, axes), i, axis=0) with no new dim at 0 is unsqueeze(gather(x, i,
    axis=0)) with the new dims after the gathered ones (gather replaces dim 0 by i's dims)."""
    if n.op != "gather" or n.attrs["axis"] != 0 or n.inputs[0] is None:
        return None
    u = n.inputs[0].producer
    idx = n.inputs[1]
    if u is None or u.op != "unsqueeze" or idx is None or idx.type.rank is None:
        return None
    rank = u.output.type.rank
    axes = None if rank is None else _axes(u, rank)
    if axes is None or 0 in axes:
        return None
    shift = idx.type.rank - 1
    nodes = [u, n] if len(u.output.uses) == 1 else [n]
    return Match(n, nodes, {"x": u.inputs[0], "i": idx}, info={"axes": [a + shift for a in axes]})


def _gather_then_unsqueeze(b: Builder, m: Match) -> Value:
    g = b.op("gather", m["x"], m["i"], axis=0)
    return b.op("unsqueeze", g, axes=m.info["axes"])


def _find_leading_index(n: Node) -> Match | None:
    """index(x, i_0, ..., i_k-1) on x's leading dims with indices never negative is
    gather(flatten(x, 0, k-1), linear index) with the index in Horner form
    (``i_1 + i_0 * d_1``): torch.onnx's legacy spelling, which a folded constant index
    leaves as the only common form."""
    if n.op != "index" or list(n.attrs["axes"]) != list(range(len(n.inputs) - 1)):
        return None
    x, idx = n.inputs[0], list(n.inputs[1:])
    k = len(idx)
    if x is None or x.type.shape is None or k < 2 or None in x.type.shape[:k]:
        return None
    if not all(_non_negative(i) and i.type.dtype is DType.INT64 for i in idx):  # type: ignore[union-attr]
        return None
    return Match(n, [n], {"x": x} | {f"i{j}": v for j, v in enumerate(idx)}, info={"k": k})  # type: ignore[operator]


def _linear_index(b: Builder, m: Match) -> Value:
    x, k = m["x"], m.info["k"]
    lin = m["i0"]
    for j in range(1, k):
        d = x.type.shape[j]
        size = (
            b.const([d], DType.INT64)
            if isinstance(d, int)
            else b.op("shape", x, start=j, end=j + 1)
        )
        lin = b.op("add", m[f"i{j}"], b.op("mul", lin, size))
    flat = b.op("flatten", x, start_axis=0, end_axis=k - 1)
    return b.op("gather", flat, lin, axis=0)


def _is_size(v: Value | None, d) -> bool:
    """``v`` holds the one size ``d`` (a scalar or a 1-element vector)."""
    c = content_of(v)
    return c is not None and c.size == 1 and c.reshape(-1)[0] is not None and c.reshape(-1)[0] == d


def _scaled_by(v: Value | None, d) -> Value | None:
    """``rest`` of ``v = mul(rest, d)`` with ``d`` holding the size d, else None."""
    q = v.producer if v is not None else None
    return q.inputs[0] if q is not None and q.op == "mul" and _is_size(q.inputs[1], d) else None


def _wrapped_term(t: Value | None, d) -> tuple[Value | None, bool]:
    """(i, wrapped) for a term ``remainder(i, d)`` (i wrapped into [0, d)); else (t, False)."""
    p = t.producer if t is not None else None
    if p is not None and p.op == "remainder" and _is_size(p.inputs[1], d):
        return _widened(p.inputs[0]), True
    return t, False


def _find_wrapped_linear_index(n: Node) -> Match | None:
    """gather(flatten(x, a, a + k - 1), t_k-1 + (... + t_0 * d_1) * d_k-1, axis=a), each t_j
    ``remainder(i_j, d_j)`` of x's dim d_j or an i_j never negative, one at least wrapped ->
    index(x, i_0, ..., i_k-1, axes=[a, ...]): codegen.keras' advanced indexing (one take of
    the flat index in Horner form), which wraps a negative index into its dim as index
    does (x[i_0, ...] for every index x accepts)."""
    if n.op != "gather" or n.inputs[0] is None or n.inputs[1] is None:
        return None
    f = n.inputs[0].producer
    if f is None or f.op != "flatten" or f.inputs[0] is None or f.inputs[0].type.shape is None:
        return None
    x = f.inputs[0]
    r = len(x.type.shape)
    a, end = f.attrs["start_axis"] % r, f.attrs["end_axis"] % r
    k = end - a + 1
    if k < 2 or n.attrs["axis"] != a or None in x.type.shape[a : end + 1]:
        return None
    idx: list[Value | None] = [None] * k
    wrapped, lin = False, n.inputs[1]
    for j in range(k - 1, -1, -1):
        d = x.type.shape[a + j]
        t = lin
        if j > 0:  # lin = t_j + rest * d_j
            p = lin.producer if lin is not None else None
            if p is None or p.op != "add":
                return None
            split = [(u, _scaled_by(m, d)) for u, m in (p.inputs, p.inputs[::-1])]
            t, lin = next(((u, rest) for u, rest in split if rest is not None), (None, None))
            if lin is None:
                return None
        i, w = _wrapped_term(t, d)
        if i is None or not i.type.dtype.is_integer or not (w or _non_negative(i)):
            return None
        idx[j], wrapped = i, wrapped or w
    if not wrapped:
        return None
    return Match(n, [n], {"x": x} | {f"i{j}": v for j, v in enumerate(idx)}, info={"a": a, "k": k})  # type: ignore[operator]


def _wrapped_index(b: Builder, m: Match) -> Value:
    a, k = m.info["a"], m.info["k"]
    return b.op("index", m["x"], *(m[f"i{j}"] for j in range(k)), axes=list(range(a, a + k)))


def _keep(b: Builder, m: Match) -> Value:
    return m["x"]


# (label, matcher, replacement), in priority order
RULES = [
    (
        "unsqueezes merged",
        _find_unsqueeze_chain,
        lambda b, m: b.op("unsqueeze", m["x"], axes=m.info["axes"]),
    ),
    (
        "squeezes merged",
        _find_squeeze_chain,
        lambda b, m: b.op("squeeze", m["x"], axes=m.info["axes"]),
    ),
    ("squeeze of an unsqueeze's dims dropped", _find_unsqueeze_undone, lambda b, m: m["x"]),
    ("transposes merged", _find_transpose_chain, _transposed),
    (
        "embedding's clamp into its rows dropped",
        _find_embedding_clamp,
        lambda b, m: b.op("embedding", m["w"], m["i"], **m.root.attrs),
    ),
    ("split -> slices", _find_static_split, _split_to_slices),
    ("indices through int32 and back dropped", _find_int32_indices, lambda b, m: m["i"]),
    ("gather of a range -> slice", _find_gather_range, _gather_range_to_slice),
    ("slice of one element, squeezed -> gather", _find_slice_squeezed, _select),
    (
        "index of one axis -> gather",
        _find_one_index,
        lambda b, m: b.op("gather", m["x"], m["i"], axis=m.info["axis"]),
    ),
    (_topk_label, _find_stable_topk, _sorted_first_k),
    ("argsort -> sort's indices", _find_argsort, _sort_indices),
    ("x != x -> isnan", _find_self_unequal, lambda b, m: b.op("isnan", m["x"])),
    (
        "a target's int32 round trip dropped",
        _find_int32_shape,
        lambda b, m: b.op(m.root.op, m["x"], m["s"], **m.root.attrs),
    ),
    (
        "negative_indices of indices never negative dropped",
        _find_negative_indices,
        _no_negative_indices,
    ),
    ("gather_nd of broadcast indices -> index", _find_gather_nd_index, _gather_nd_to_index),
    (
        "gather_nd of constant indices -> gather",
        _find_constant_gather_nd,
        _constant_gather_nd_to_gather,
    ),
    (
        "gather of a wrapped linear index -> index",
        _find_wrapped_linear_index,
        _wrapped_index,
    ),
    ("index of leading dims -> gather of a linear index", _find_leading_index, _linear_index),
    (
        "gather of an unsqueezed tensor -> unsqueeze of the gather",
        _find_gather_of_unsqueezed,
        _gather_then_unsqueeze,
    ),
    ("reshape of a view -> one reshape", _find_view_chain, _reshape_again),
    ("views back to the shape they began with dropped", _find_view_round_trip, _keep),
]
