"""Equivalent spellings exporters choose for one computation, for ``msc.analysis.canonical``.

Rules (``msc.rewrite`` matchers, each exact; a rule's label is what ``diff`` counts):

- a conv's or linear's all-zero constant bias, dropped (an untrained BatchNorm folds to it);
- arithmetic that does nothing (``x + 0`` of integers, ``x * 1``, ``x - 0``, ``x / 1``, a
  ``logical_and`` with true) by a constant of any kind (a weight too), dropped;
- ``unsqueeze(unsqueeze(x, a), b)`` as one unsqueeze (and squeezes alike): torch.export writes
  one dim at a time, torch.onnx several at once;
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
- ``x != x`` of a float x -> ``isnan(x)`` (codegen.tflite's spelling: TFLite has no IsNaN);
- a reshape's or expand's run-time int64 target through ``cast`` to int32 and back -> the
  target (TFLite takes it as int32; its entries are dims);
- ``gather(x, range(0, n, 1), axis)`` -> ``slice(x, 0, n, axis)`` where ``n`` is at most the
  dim (torch.export's slice to a symbolic end, against ONNX's Slice);
- gather-style ops' ``negative_indices`` where the indices are known not to be negative;
- ``gather_nd(x, concat([unsqueeze(expand(i_k), -1)...], -1))`` -> ``index(x, i_0, ...)``:
  torch.onnx's spelling of advanced indexing (and codegen.onnx's, without the expand, where
  Concat makes the i_k one shape; codegen.tflite's, its int32 coordinates widened back to
  int64 and each i_k wrapped by ``remainder`` of x's dim, which index does itself);
- ``attention(q, k, v, where(m, 0, -inf))`` -> ``attention(q, k, v, m)``: an additive float
  mask of 0 and -inf is the boolean mask it was made from;
- the guard ``where(reduce_max(mask) == -inf, 0, attention(..., mask))`` -> the attention:
  torch's scaled_dot_product_attention and ONNX Attention give 0 for a query row the mask
  hides everywhere, which is what the guard spells out;
- a resize's attributes its mode ignores at their defaults, pytorch_half_pixel as
  half_pixel where every resized dim is more than 1, constant scales as the sizes they give
  where that is exact;
- ``clamp(x, lo, hi)`` by constant one-element bounds of a float ``x`` -> ``hardtanh``
  (ONNX's Clip takes its bounds as inputs);
- ``x * s + t`` of per-channel float constants (dim 1) -> ``batch_norm(x, s, t, 0, 1,
  eps=0)``: an inference BatchNorm as ``msc.ops.layout.fold_batch_norm`` writes it for a
  target without the op (codegen.tflite's MUL + ADD); as a batch_norm it folds into the conv
  or linear before it (``msc.ops.folds``), as the source's BatchNorm does;
- a ``batch_norm`` of constant statistics -> that normal form (scale ``gamma / sqrt(var +
  eps)``, shift ``beta - mean * scale``, in float64, rounded once: exact up to that rounding,
  as the fold into a conv is), so a BatchNorm no conv absorbed compares with its MUL + ADD;
- ``dequantize(move(q))`` -> ``move(dequantize(q))`` for a move that only rearranges
  elements (transpose, reshape, squeeze, unsqueeze, flatten) and a per-tensor scale, or a
  transpose and a per-axis scale (the axis read through the permutation): codegen.onnx writes
  the move on the integers (the QDQ form onnxruntime expects), frontends dequantize first.
- quantize / dequantize spelled out as their decompositions (``msc.ops.decompose.quant``):
  ``cast(clamp(round(x / s) + z, lo, hi))`` with [lo, hi] the integer type's range ->
  ``quantize(x, s, z)``, ``(cast(q) - z) * s`` -> ``dequantize(q, s, z)``, of constant s and z
  of one per-tensor or per-axis layout (int32 excluded: ``cast(i) * c`` of int32 positions is
  arithmetic). Generated PyTorch runs those decompositions op for op (torch has no
  QuantizeLinear), and any exporter may write the arithmetic; recognizing the spelling on
  whichever side has it, rather than lowering the op on both, keeps the other quantization
  rules (moves of integers) and a diff of two QDQ graphs at the op's level, and a changed
  scale or zero point stays a changed input of the op;
- a quantize's / dequantize's all-zero zero point -> none (``- 0`` spelled out is dropped as a
  no-op).

Graph passes: ``merge_duplicates`` (one node for computations that are the same op of the
same inputs: torch.export repeats an ``arange`` that torch.onnx computes once) and
``drop_dead`` (nodes nothing reads).

# NOTE: every rule is exact for the graphs it matches (the NOTE of msc.analysis.canonical);
# the conditions say why. Pure msc: no torch, no onnx.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from msc.analysis.shape_values import content_of, refines
from msc.ir import symexpr
from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight, dead_nodes
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.folds import batch_norm_scale, batch_norm_shift
from msc.ops.infer import broadcast
from msc.ops.nn import exact_resize_scale
from msc.ops.quant import INT_RANGE
from msc.ops.rewrite import Match, constant_value

__all__ = ["RULES", "merge_duplicates", "drop_dead"]


# ------------------------------------------------------------------------------ no-op arithmetic
# op -> (neutral element, operand positions the constant may take)
_NEUTRAL = {"add": (0, (0, 1)), "sub": (0, (1,)), "mul": (1, (0, 1)), "div": (1, (1,))}


def _find_no_op_arithmetic(n: Node) -> Match | None:
    """``x op c`` that is ``x`` bit for bit: c every element the neutral value, no broadcast
    or promotion; a float ``x + 0.0`` only with -0.0 (``-0.0 + 0.0`` is +0.0)."""
    if n.op == "logical_and" and len(n.inputs) == 2:
        for x, c in (n.inputs, n.inputs[::-1]):
            v = constant_value(c)
            if x is not None and v is not None and v.size and v.all() and x.type == n.output.type:
                return Match(n, [n], {"x": x})
        return None
    rule = _NEUTRAL.get(n.op)
    if rule is None or len(n.inputs) != 2:
        return None
    neutral, slots = rule
    for slot in slots:
        x, c = n.inputs[1 - slot], n.inputs[slot]
        v = constant_value(c)
        if x is None or v is None or v.size == 0 or x.type != n.output.type:
            continue
        if x.type.dtype.is_complex or not np.all(v == neutral):
            continue
        if n.op == "add" and x.type.dtype.is_floating and not np.all(np.signbit(v)):
            continue
        return Match(n, [n], {"x": x})
    return None


_BIASED = ("conv", "conv_transpose", "linear")


def _find_zero_bias(n: Node) -> Match | None:
    """conv / linear with a constant all-zero bias is the op without one (a BatchNorm of
    untrained statistics folds to zeros, which torch.onnx then leaves out)."""
    if n.op not in _BIASED or len(n.inputs) < 3 or n.inputs[2] is None:
        return None
    c = constant_value(n.inputs[2])
    if c is None or c.size == 0 or np.any(c != 0):
        return None
    return Match(n, [n], {"x": n.inputs[0], "w": n.inputs[1]})  # type: ignore[dict-item]


def _without_bias(b: Builder, m: Match) -> Value:
    return b.op(m.root.op, m["x"], m["w"], **m.root.attrs)


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
    if _axes(n, rank) != [axis] or step != 1 or k < 0 or end != k + 1:
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


def _find_int32_shape(n: Node) -> Match | None:
    """A reshape's or expand's run-time target read through an int32 round trip
    (``cast(cast(s, i32), i64)``: codegen.tflite writes the target as RESHAPE and
    BROADCAST_TO take it, its reader widens it back) is ``s``: a target's entries are dims
    (and -1), which int32 holds in any model a target can address."""
    if n.op not in ("reshape", "expand") or len(n.inputs) != 2 or n.inputs[1] is None:
        return None
    wide = n.inputs[1].producer
    if wide is None or wide.op != "cast" or wide.inputs[0] is None:
        return None
    narrow = wide.inputs[0].producer
    if narrow is None or narrow.op != "cast" or narrow.inputs[0] is None:
        return None
    s = narrow.inputs[0]
    if s.type.dtype is not DType.INT64 or n.inputs[1].type.dtype is not DType.INT64:
        return None
    if wide.inputs[0].type.dtype is not DType.INT32:
        return None
    nodes = [narrow, wide, n] if len(wide.inputs[0].uses) == 1 else [wide, n]
    return Match(n, nodes if len(n.inputs[1].uses) == 1 else [n], {"x": n.inputs[0], "s": s})


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


# ------------------------------------------------------------------------------ attention masks
def _find_additive_bool_mask(n: Node) -> Match | None:
    """attention with mask where(m, 0, -inf) of a bool m: that mask is m (a constant of 0
    and -inf: the bool constant of where it is 0). With the dtype's
    lowest value for -inf (torch.onnx writes it) the scores it hides still weigh exactly 0
    (exp underflows) in every row that keeps a key; a row it hides everywhere averages the
    values where the bool mask gives 0: the rule's label says so."""
    if n.op != "attention" or len(n.inputs) < 4 or n.inputs[3] is None:
        return None
    q, k, v = n.inputs[:3]
    c = constant_value(n.inputs[3])
    if c is not None and c.dtype.kind == "f" and c.size:  # folded: a constant of 0 and -inf
        lowest = float(np.finfo(c.dtype).min)
        hidden = c != 0
        fills = set(np.unique(c[hidden]).astype(np.float64).tolist())
        if not hidden.any() or not fills <= {-np.inf, lowest} or len(fills) != 1:
            return None
        info = {"attrs": dict(n.attrs), "exact": fills == {-np.inf}, "const": ~hidden}
        return Match(n, [n], {"q": q, "k": k, "v": v}, info=info)  # type: ignore[dict-item]
    w = n.inputs[3].producer
    if (
        w is None
        or w.op != "where"
        or w.inputs[0] is None
        or w.inputs[0].type.dtype is not DType.BOOL
    ):
        return None
    zero, neg = constant_value(w.inputs[1]), constant_value(w.inputs[2])
    if zero is None or neg is None or zero.size != 1 or neg.size != 1:
        return None
    lowest = float(np.finfo(neg.dtype).min) if neg.dtype.kind == "f" else None
    fill = float(neg.reshape(-1)[0])
    if float(zero.reshape(-1)[0]) != 0.0 or fill not in (-np.inf, lowest):
        return None
    m = w.inputs[0]
    if w.output.type.shape != m.type.shape:
        return None  # where broadcast the mask: the bool one alone has another shape
    info = {"attrs": dict(n.attrs), "exact": fill == -np.inf}
    nodes = [w, n] if len(w.output.uses) == 1 else [n]
    return Match(n, nodes, {"q": q, "k": k, "v": v, "m": m}, info=info)  # type: ignore[dict-item]


def _bool_mask_attention(b: Builder, m: Match) -> Value:
    mask = m.values.get("m")
    if mask is None:
        mask = b.op("constant", value=m.info["const"])
    return b.op("attention", m["q"], m["k"], m["v"], mask, **m.info["attrs"])


def _find_masked_row_guard(n: Node) -> Match | None:
    """where(eq(reduce_max(mask, -1, keepdims), -inf), 0, attention(q, k, v, mask)): the
    attention's own value for a row the mask hides everywhere."""
    if n.op != "where" or len(n.inputs) != 3:
        return None
    cond, zero, y = n.inputs
    att = y.producer if y is not None else None
    eq = cond.producer if cond is not None else None
    if att is None or att.op != "attention" or eq is None or eq.op != "eq":
        return None
    z = constant_value(zero)
    if z is None or z.size != 1 or float(z.reshape(-1)[0]) != 0.0 or len(y.uses) != 1:
        return None
    top, ninf = eq.inputs
    if constant_value(top) is not None:
        top, ninf = ninf, top
    c = constant_value(ninf)
    red = top.producer if top is not None else None
    if c is None or c.size != 1 or float(c.reshape(-1)[0]) != -np.inf or red is None:
        return None
    if red.op != "reduce_max" or not red.attrs["keepdims"] or len(att.inputs) < 4:
        return None
    mask = att.inputs[3]
    rank = None if mask is None else mask.type.rank
    if red.inputs[0] is not mask or rank is None or _axes(red, rank) != [rank - 1]:
        return None
    if not refines(y.type, n.output.type):  # the guard's broadcast may know more dims
        return None
    return Match(n, [eq, red, n], {"y": y})


# ------------------------------------------------------------------------------ resize
def _resize_spelling(n: Node) -> dict:
    """A resize's attributes with those its mode ignores at their defaults, and
    pytorch_half_pixel as half_pixel where every resized dim is more than 1 (ONNX defines
    the two alike there: they differ only for an output of length 1)."""
    a = dict(n.attrs)
    default = {k: s.default for k, s in registry.get("resize").attrs.items()}
    if a["mode"] != "nearest":
        a["nearest_mode"] = default["nearest_mode"]
    if a["mode"] != "cubic":
        a["cubic_coeff_a"] = default["cubic_coeff_a"]
    if a["coordinate_transformation_mode"] != "tf_crop_and_resize":
        a["extrapolation_value"] = default["extrapolation_value"]
    sizes = _exact_sizes(n)
    if sizes is not None:
        a["sizes"], a["scales"] = sizes, None
    out = n.outputs[0].type.shape
    if (
        a["coordinate_transformation_mode"] == "pytorch_half_pixel"
        and out is not None
        and all(d is not None and symexpr.at_least(d, 2) for d in out[2:])
    ):
        a["coordinate_transformation_mode"] = "half_pixel"
    return a


def _exact_sizes(n: Node) -> list[int] | None:
    """A resize by constant ``scales`` as the ``sizes`` it gives, where each static spatial
    dim times its scale is an integer n whose n / dim rounds (float32) to the scale: ONNX
    then maps coordinates by the same scale either way (codegen.onnx writes sizes so when N
    or C is known only at run time)."""
    scales = n.attrs.get("scales")
    x = n.inputs[0].type if n.inputs else None
    if scales is None or n.attrs.get("sizes") is not None or not isinstance(x, TensorType):
        return None
    spatial = x.shape[2:] if x.shape is not None else None
    if spatial is None or len(spatial) != len(scales):
        return None
    out = []
    for d, s in zip(spatial, scales, strict=True):
        if not isinstance(d, int) or d <= 0:
            return None
        size = np.float32(d) * np.float32(s)
        if size != np.floor(size) or exact_resize_scale(d, int(size)) != float(np.float32(s)):
            return None
        out.append(int(size))
    return out


def _find_resize_spelling(n: Node) -> Match | None:
    if n.op != "resize" or _resize_spelling(n) == dict(n.attrs):
        return None
    ins = {f"in{i}": v for i, v in enumerate(n.inputs) if v is not None}
    return Match(n, [n], ins, info={"n": len(n.inputs)})  # type: ignore[arg-type]


def _respell_resize(b: Builder, m: Match) -> Value:
    ins = [m.values.get(f"in{i}") for i in range(m.info["n"])]
    return b.op("resize", *ins, **_resize_spelling(m.root))


# ------------------------------------------------------------------------------ batch norm
def _channel_vector(c: np.ndarray | None, x: TensorType) -> np.ndarray | None:
    """A float constant that broadcasts against ``x`` as one value per channel (dim 1, a
    static size over 1, every other dim 1), as a 1-d array; else None."""
    shape = x.shape
    if c is None or c.dtype.kind != "f" or shape is None or len(shape) < 2 or c.ndim > len(shape):
        return None
    channels = shape[1]
    full = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    if not isinstance(channels, int) or channels < 2 or full[1] != channels:
        return None
    if any(d != 1 for k, d in enumerate(full) if k != 1):
        return None
    return c.reshape(channels)


def _find_spelled_batch_norm(n: Node) -> Match | None:
    """``x * s + t`` with s and t one float constant per channel (dim 1): an inference
    batch_norm of mean 0, variance 1 and eps 0, the form ``msc.ops.layout.fold_batch_norm``
    writes for a target without a batch norm op (codegen.tflite's MUL + ADD). As a
    batch_norm it folds into the conv or linear before it as any BatchNorm does."""
    if n.op != "add" or len(n.inputs) != 2:
        return None
    for y, tv in (n.inputs, n.inputs[::-1]):
        mul = y.producer if y is not None else None
        if mul is None or mul.op != "mul" or len(mul.inputs) != 2 or len(y.uses) != 1:
            continue
        for x, sv in (mul.inputs, mul.inputs[::-1]):
            if x is None or constant_value(x) is not None:
                continue
            t = x.type
            if not t.dtype.is_floating or t != y.type or t != n.output.type:
                continue
            scale = _channel_vector(constant_value(sv), t)
            shift = _channel_vector(constant_value(tv), t)
            if scale is None or shift is None or scale.dtype != t.dtype.to_numpy():
                continue
            return Match(n, [mul, n], {"x": x}, info={"scale": scale, "shift": shift})
    return None


def _affine_batch_norm(b: Builder, m: Match) -> Value:
    s, t = m.info["scale"], m.info["shift"]
    dt = DType.from_numpy(s.dtype)
    mean, var = b.const(np.zeros_like(s), dt), b.const(np.ones_like(s), dt)
    return b.op("batch_norm", m["x"], b.const(s, dt), b.const(t, dt), mean, var, eps=0.0)


def _find_batch_norm_statistics(n: Node) -> Match | None:
    """batch_norm(x, gamma, beta, mean, var, eps) of constants, not yet of mean 0, variance 1
    and eps 0: that form with scale ``gamma / sqrt(var + eps)`` and shift ``beta - mean *
    scale`` (computed in float64, rounded once), so a BatchNorm no conv absorbed compares
    with its statistics folded into a MUL and an ADD."""
    if n.op != "batch_norm" or n.inputs[0] is None or len(n.inputs) < 5:
        return None
    gamma, beta, mean, var = (constant_value(v) if v is not None else None for v in n.inputs[1:5])
    if mean is None or var is None or mean.dtype.kind != "f" or mean.shape != var.shape:
        return None
    if any(v is not None and c is None for v, c in zip(n.inputs[1:3], (gamma, beta))):
        return None
    if n.attrs["eps"] == 0.0 and not np.any(mean) and np.all(var == 1):
        return None
    scale = batch_norm_scale(gamma, var, n.attrs["eps"])
    shift = batch_norm_shift(None, mean, scale, beta)
    dt = n.output.type.dtype.to_numpy()
    return Match(
        n, [n], {"x": n.inputs[0]}, info={"scale": scale.astype(dt), "shift": shift.astype(dt)}
    )


# ------------------------------------------------------------------------------ quantization
_MOVES = ("transpose", "reshape", "squeeze", "unsqueeze", "flatten")


def _find_dequantize_of_moved(n: Node) -> Match | None:
    """dequantize(move(q)) is move(dequantize(q)): the move only rearranges elements, and a
    per-tensor scale and zero point apply to each alike; a per-axis scale follows its axis
    through a transpose (axis a of the transposed integers is axis perm[a] of q)."""
    if n.op != "dequantize" or n.inputs[0] is None or n.attrs["block_size"]:
        return None
    move, scale = n.inputs[0].producer, n.inputs[1]
    if move is None or move.op not in _MOVES or move.inputs[0] is None or scale is None:
        return None
    if scale.type.shape is None or move.outputs[0].type.rank is None:
        return None
    axis = n.attrs["axis"]
    if not (len(scale.type.shape) <= 1 and scale.type.numel() == 1):
        if move.op != "transpose":
            return None
        axis = move.attrs["perm"][axis % move.outputs[0].type.rank]
    ins = {"q": move.inputs[0], "s": scale}
    if len(n.inputs) > 2 and n.inputs[2] is not None:
        ins["z"] = n.inputs[2]
    ins |= {f"m{i}": v for i, v in enumerate(move.inputs) if i and v is not None}
    nodes = [move, n] if len(move.outputs[0].uses) == 1 else [n]
    info = {"op": move.op, "attrs": dict(move.attrs), "n": len(move.inputs), "axis": axis}
    return Match(n, nodes, ins, info=info)  # type: ignore[arg-type]


def _move_dequantized(b: Builder, m: Match) -> Value:
    d = b.op("dequantize", m["q"], m["s"], m.values.get("z"), axis=m.info["axis"], block_size=0)
    ins = [m.values.get(f"m{i}") for i in range(1, m.info["n"])]
    return b.op(m.info["op"], d, *ins, **m.info["attrs"])


# ------------------------------------------------------------------------------ clamp by constants
def _find_constant_clamp(n: Node) -> Match | None:
    """``clamp(x, lo, hi)`` of a float ``x`` by constant one-element bounds of its dtype is
    ``hardtanh(x, lo, hi)``: ONNX's Clip takes its bounds as inputs (a ReLU6 is written
    ``Clip(x, 0, 6)``), the frontends that know the bounds give them as attributes."""
    if n.op != "clamp" or len(n.inputs) != 3 or n.inputs[0] is None:
        return None
    x = n.inputs[0]
    if not x.type.dtype.is_floating or x.type.dtype.is_complex:
        return None
    bounds = []
    for v in n.inputs[1:]:
        c = constant_value(v)
        if c is None or c.size != 1 or c.ndim > x.type.rank or v.type.dtype != x.type.dtype:
            return None
        bounds.append(float(c.reshape(())))
    if x.type != n.output.type or any(np.isnan(b) for b in bounds):
        return None
    if any(u.op == "cast" and not u.output.type.dtype.is_floating for u, _ in n.output.uses):
        return None  # the saturation of a spelled-out quantize (its own rule reads it)
    return Match(n, [n], {"x": x}, info={"min": bounds[0], "max": bounds[1]})


# The integer types whose spelled-out (de)quantization is recognized: an int32 ``cast(i) * c``
# (positions times a frequency) is arithmetic, not a quantized tensor.
_SPELLED_QUANT = {t: r for t, r in INT_RANGE.items() if t is not DType.INT32}


def _quant_layout(c: np.ndarray, out: tuple | None) -> tuple[int, int] | None:
    """(axis, elements) of a constant scale or zero point spelled to broadcast against a value
    of shape ``out`` (``msc.ops.decompose.quant``'s spread): one element is per tensor (axis
    -1), a shape of ones but one dim that is ``out``'s there is per axis; else None."""
    if out is None or c.ndim > len(out) or any(not isinstance(d, int) for d in out):
        return None
    shape = (1,) * (len(out) - c.ndim) + tuple(c.shape)
    wide = [k for k, d in enumerate(shape) if d != 1]
    if not wide:
        return (-1, 1)
    if len(wide) == 1 and shape[wide[0]] == out[wide[0]]:
        return (wide[0], shape[wide[0]])
    return None


def _quant_params(s: np.ndarray, z: np.ndarray | None, out: tuple | None, qt: DType) -> dict | None:
    """The scale and zero point of a spelled-out (de)quantization as the op takes them (a 0-d
    per-tensor or a 1-d per-axis scale; the zero point in the quantized type, of the scale's
    shape), or None: a scale that is not float or not of one layout, a zero point of another
    axis or not whole numbers in ``qt``'s range."""
    if s.dtype.kind != "f" or not s.size:
        return None
    ls = _quant_layout(s, out)
    lz = (-1, 1) if z is None else _quant_layout(z, out)
    if ls is None or lz is None or (lz[0] != -1 and lz != ls):
        return None
    axis, size = ls
    shape = () if axis == -1 else (size,)
    scale = s.reshape(shape)
    zp = None
    if z is not None:
        lo, hi = _SPELLED_QUANT[qt]
        zv = np.broadcast_to(z.reshape(() if lz[0] == -1 else (size,)), shape)
        if np.any(zv != np.round(zv)) or np.any(zv < lo) or np.any(zv > hi):
            return None
        zp = np.array(zv, dtype=qt.to_numpy())  # (ascontiguousarray makes a 0-d array 1-d)
    default = registry.get("dequantize").attrs["axis"].default
    return {"scale": scale, "zp": zp, "axis": default if axis == -1 else axis}


def _find_spelled_dequantize(n: Node) -> Match | None:
    """``(cast(q) - z) * s`` (or ``cast(q) * s``) of an integer q to s's float dtype, with a
    constant s and z of one per-tensor or per-axis layout: dequantize(q, s, z) by the op's
    definition, as ``msc.ops.decompose.quant`` spells it (generated PyTorch's helper; any
    exporter that writes the arithmetic)."""
    if n.op != "mul" or len(n.inputs) != 2:
        return None
    for d, sv in (n.inputs, n.inputs[::-1]):
        s = constant_value(sv)
        p = d.producer if d is not None else None
        if s is None or p is None or d.type != n.output.type:
            continue
        z, c, nodes = None, p, [p]
        if p.op == "sub" and p.inputs[0] is not None and p.inputs[0].producer is not None:
            z, c = constant_value(p.inputs[1]), p.inputs[0].producer
            if z is None:
                continue
            nodes = [c, p] if len(c.output.uses) == 1 else [p]
        if c.op != "cast" or c.inputs[0] is None or (p is not c and len(d.uses) != 1):
            continue
        q = c.inputs[0]
        if q.type.dtype not in _SPELLED_QUANT or c.output.type.dtype.to_numpy() != s.dtype:
            continue
        if p is c and len(c.output.uses) != 1:
            nodes = []
        params = _quant_params(s, z, n.output.type.shape, q.type.dtype)
        if params is None:
            continue
        return Match(n, [*nodes, n], {"q": q}, info=params)
    return None


def _dequantize(b: Builder, m: Match) -> Value:
    s, z = m.info["scale"], m.info["zp"]
    scale = b.const(s, DType.from_numpy(s.dtype))
    zp = None if z is None else b.const(z, DType.from_numpy(z.dtype))
    return b.op("dequantize", m["q"], scale, zp, axis=m.info["axis"], block_size=0)


def _producer(v: Value | None, op: str) -> Node | None:
    """``v``'s producer when it is an ``op`` that only ``v``'s one reader reads."""
    p = v.producer if v is not None else None
    return p if p is not None and p.op == op and len(v.uses) == 1 else None  # type: ignore[union-attr]


def _find_spelled_quantize(n: Node) -> Match | None:
    """``cast(clamp(round(x / s) + z, lo, hi))`` to an integer type whose range is [lo, hi]
    (constant s and z of one layout; no ``+ z`` for no zero point): quantize(x, s, z) by the
    op's definition (round half to even, saturating), as ``msc.ops.decompose.quant`` spells
    it."""
    qt = n.output.type.dtype if n.op == "cast" else None
    cl = _producer(n.inputs[0], "clamp") if qt in _SPELLED_QUANT else None
    if cl is None or len(cl.inputs) != 3:
        return None
    lo, hi = constant_value(cl.inputs[1]), constant_value(cl.inputs[2])
    if lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return None
    if (float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])) != _SPELLED_QUANT[qt]:  # type: ignore[index]
        return None
    nodes, z = [cl, n], None
    r = _producer(cl.inputs[0], "add")
    if r is not None:
        nodes.insert(0, r)
        for y, zv in (r.inputs, r.inputs[::-1]):
            if constant_value(zv) is not None and _producer(y, "round") is not None:
                z, r = constant_value(zv), _producer(y, "round")
                break
        else:
            return None
    else:
        r = _producer(cl.inputs[0], "round")
    dv = _producer(r.inputs[0], "div") if r is not None else None
    s = constant_value(dv.inputs[1]) if dv is not None else None
    if s is None or dv.inputs[0] is None or dv.output.type != cl.output.type:  # type: ignore[union-attr]
        return None
    x = dv.inputs[0]  # type: ignore[union-attr]
    if x.type != dv.output.type or s.dtype != x.type.dtype.to_numpy():  # type: ignore[union-attr]
        return None
    params = _quant_params(s, z, x.type.shape, qt)  # type: ignore[arg-type, union-attr]
    if params is None:
        return None
    return Match(n, [dv, r, *nodes], {"x": x}, info=params | {"dtype": qt})  # type: ignore[list-item]


def _quantize(b: Builder, m: Match) -> Value:
    s, z = m.info["scale"], m.info["zp"]
    scale = b.const(s, DType.from_numpy(s.dtype))
    zp = None if z is None else b.const(z, DType.from_numpy(z.dtype))
    return b.op(
        "quantize", m["x"], scale, zp, dtype=m.info["dtype"], axis=m.info["axis"], block_size=0
    )


def _find_zero_zero_point(n: Node) -> Match | None:
    """quantize / dequantize with a constant zero point of zeros: the op without one (its
    default), whichever way a file spells it (a spelled-out ``- 0`` is dropped as a no-op)."""
    if n.op not in ("quantize", "dequantize") or len(n.inputs) < 3:
        return None
    z = constant_value(n.inputs[2])
    if z is None or np.any(z != 0) or n.inputs[0] is None or n.inputs[1] is None:
        return None
    return Match(n, [n], {"x": n.inputs[0], "s": n.inputs[1]})


def _keep(b: Builder, m: Match) -> Value:
    return m["x"]


# (label, matcher, replacement), in priority order
RULES = [
    ("no-op arithmetic dropped", _find_no_op_arithmetic, _keep),
    (lambda m: f"{m.root.op}'s all-zero bias dropped", _find_zero_bias, _without_bias),
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
    ("index of leading dims -> gather of a linear index", _find_leading_index, _linear_index),
    (
        "gather of an unsqueezed tensor -> unsqueeze of the gather",
        _find_gather_of_unsqueezed,
        _gather_then_unsqueeze,
    ),
    ("reshape of a view -> one reshape", _find_view_chain, _reshape_again),
    ("views back to the shape they began with dropped", _find_view_round_trip, _keep),
    ("attention's fully-masked-row guard dropped", _find_masked_row_guard, lambda b, m: m["y"]),
    (
        lambda m: (
            "attention's 0/-inf float mask -> bool mask"
            if m.info["exact"]
            else "attention's 0/lowest float mask -> bool mask (but in rows it hides everywhere)"
        ),
        _find_additive_bool_mask,
        _bool_mask_attention,
    ),
    ("resize's attributes that do not apply normalized", _find_resize_spelling, _respell_resize),
    (
        "clamp by constant bounds -> hardtanh",
        _find_constant_clamp,
        lambda b, m: b.op("hardtanh", m["x"], min=m.info["min"], max=m.info["max"]),
    ),
    (
        "batch_norm spelled out as mul + add -> batch_norm",
        _find_spelled_batch_norm,
        _affine_batch_norm,
    ),
    (
        "batch_norm's statistics folded into its scale and shift",
        _find_batch_norm_statistics,
        _affine_batch_norm,
    ),
    ("quantize spelled out -> quantize", _find_spelled_quantize, _quantize),
    ("dequantize spelled out -> dequantize", _find_spelled_dequantize, _dequantize),
    (
        lambda m: f"{m.root.op}'s zero zero point dropped",
        _find_zero_zero_point,
        lambda b, m: b.op(m.root.op, m["x"], m["s"], **m.root.attrs),
    ),
    (
        "move of quantized integers -> move of the dequantized values",
        _find_dequantize_of_moved,
        _move_dequantized,
    ),
]


# ------------------------------------------------------------------------------ graph passes
def _key(n: Node) -> tuple | None:
    """What makes two nodes the same computation: op, attributes, inputs (by identity)."""
    if n.op in ("constant",) or "rand" in n.op or any(True for _ in n.subgraphs()):
        return None
    try:
        attrs = tuple(sorted((k, _hashable(v)) for k, v in n.attrs.items()))
    except TypeError:
        return None
    ins = tuple(_operand_key(v) for v in n.inputs)
    return (n.op, attrs, ins, len(n.outputs))


def _operand_key(v: Value | None) -> object:
    """An operand by identity; a small weight by its value (folded constants of one value
    are separate weights)."""
    if v is None:
        return None
    if isinstance(v, Weight) and v.has_data and v.type.numel() is not None and v.type.numel() <= 64:
        a = v.numpy()
        return ("weight", a.dtype.str, a.shape, a.tobytes())
    return id(v)


def _hashable(v: object) -> object:
    if isinstance(v, np.ndarray):
        return ("tensor", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, list | tuple):
        return tuple(_hashable(x) for x in v)
    hash(v)
    return v


def merge_duplicates(g: Graph, done: Counter[str]) -> bool:
    """Nodes computing the same op of the same inputs become one (the first): exact for
    deterministic ops. Returns whether any merged."""
    seen: dict[tuple, Node] = {}
    outs = {id(v) for v in g.outputs}
    gone: list[Node] = []
    for n in g.nodes:
        k = _key(n)
        if k is None:
            continue
        first = seen.get(k)
        if first is None:
            seen[k] = n
            continue
        if any(id(v) in outs for v in n.outputs):
            continue
        if any(a.type != b.type for a, b in zip(first.outputs, n.outputs)):
            continue
        for a, b in zip(first.outputs, n.outputs):
            b.replace_all_uses_with(a)
        gone.append(n)
    if gone:
        g.remove_nodes(gone)
        done["duplicate computations merged"] += len(gone)
    return bool(gone)


def drop_dead(g: Graph) -> None:
    """Nodes nothing reads (what rewrites left of shape computations) go. Not counted."""
    dead = dead_nodes(g)
    if dead:
        g.remove_nodes(dead)
