"""Equivalent spellings of a gather, for ``msc.analysis.equivalences`` (after the rules of
``msc.analysis.equivalences_index``, in this order):

- ``where(ok, gather(x, clamp(w, 0, d - 1), axis), fill)``, ``w`` the index wrapped from the
  end (``where(i < 0, i + d, i)``) and ``ok`` its in-bounds test laid along the gathered dims
  -> ``gather(x, i, axis)`` (an embedding alike): jnp.take's default mode as JAX lowers it,
  which is the gather on every index a gather takes (it refuses one outside [-d, d)).

# NOTE: every rule is exact for the graphs it matches (the NOTE of msc.analysis.canonical);
# the conditions say why. Pure msc: no torch, no onnx, no jax.
"""

from __future__ import annotations

from msc.analysis.equivalences_index import _axes, _non_negative
from msc.ir.dtype import DType
from msc.ir.graph import Node, Value
from msc.ops.rewrite import Match, constant_value

__all__ = ["RULES"]


def _is(v: Value | None, k: int) -> bool:
    """``v`` is a one-element constant holding ``k``."""
    c = constant_value(v)
    return c is not None and c.size == 1 and c.reshape(-1)[0] == k


def _of(v: Value | None, op: str) -> Node | None:
    p = None if v is None else v.producer
    return p if p is not None and p.op == op and None not in p.inputs else None


def _wrapped(w: Value, d: int) -> Value | None:
    """The index ``i`` of ``w = where(i < 0, i + d, i)`` (jnp.take's wrap), or ``w`` itself
    where it is never negative."""
    p = _of(w, "where")
    lt, add = _of(p.inputs[0], "lt") if p else None, _of(p.inputs[1], "add") if p else None
    if p and lt and add and lt.inputs[0] is p.inputs[2] and _is(lt.inputs[1], 0):
        i = p.inputs[2]
        if i in add.inputs and _is(add.inputs[1 - add.inputs.index(i)], d):
            return i
    return w if _non_negative(w) else None


def _index_vector(u: Value | None) -> Value | None:
    """``w`` of ``u = w[..., None]``, cast to another integer type or not: the gather's index
    vectors (JAX narrows them to int32 where the dims allow, exact for indices in bounds)."""
    cast = _of(u, "cast")
    u = cast.inputs[0] if cast and cast.output.type.dtype in (DType.INT32, DType.INT64) else u
    up = _of(u, "unsqueeze")
    rank = None if up is None else up.inputs[0].type.rank
    return up.inputs[0] if rank is not None and _axes(up, rank + 1) == [rank] else None


def _in_bounds(ok: Value | None, w: Value, d: int) -> bool:
    """``ok = all(0 <= w[..., None] <= d - 1, axis=-1)``: jnp.take's in-bounds test."""
    r = _of(ok, "reduce_all")
    both = _of(r.inputs[0], "logical_and") if r else None
    if not both or r.attrs["keepdims"] or list(r.attrs["axes"] or ()) not in ([w.type.rank], [-1]):
        return False
    tests = {t.op: t for t in (_of(v, "ge") or _of(v, "le") for v in both.inputs) if t}
    if set(tests) != {"ge", "le"} or tests["ge"].inputs[0] is not tests["le"].inputs[0]:
        return False
    u = tests["ge"].inputs[0]
    return (
        _index_vector(u) is w
        and _is(tests["ge"].inputs[1], 0)
        and _is(tests["le"].inputs[1], d - 1)
    )


def _find_take_fill(n: Node) -> Match | None:
    """``where(ok, gather(x, clamp(w, 0, d - 1), axis), fill)`` with ``w`` the index wrapped
    from the end and ``ok`` its in-bounds test, laid along the gathered dims -> ``gather(x,
    i, axis)``: jnp.take's default mode (JAX's gather clamps; fill out of bounds), which is
    the gather on every index it takes (a gather refuses one outside [-d, d), as numpy's
    take and the sources do). An embedding (a gather of a 2-d weight, canonical) alike."""
    if n.op != "where" or None in n.inputs or constant_value(n.inputs[2]) is None:
        return None
    g = _of(n.inputs[1], "gather") or _of(n.inputs[1], "embedding")
    x = g.inputs[0] if g else None
    if g is None or x.type.shape is None or constant_value(n.inputs[2]).size != 1:
        return None
    axis = g.attrs.get("axis", 0) % x.type.rank
    d, w = x.type.shape[axis], g.inputs[1]
    c = _of(w, "clamp")  # an embedding's clamp may be dropped already (its rule)
    if isinstance(d, int) and c and len(c.inputs) == 3 and _is(c.inputs[1], 0):
        w = c.inputs[0] if _is(c.inputs[2], d - 1) else None
    elif g.op == "gather":
        return None
    sq = _of(w, "squeeze")  # the index vectors squeezed back (the frontend's reading)
    last = None if sq is None else sq.inputs[0].type.rank
    if last and _axes(sq, last) == [last - 1] and _index_vector(sq.inputs[0]) is not None:
        w = _index_vector(sq.inputs[0])
    i = None if w is None or w.type.rank is None or not isinstance(d, int) else _wrapped(w, d)
    lay, ok = _of(n.inputs[0], "unsqueeze"), n.inputs[0]
    rank = ok.type.rank
    if i is None or lay is None and (rank is None or rank != w.type.rank):
        return None
    kept = list(range(w.type.rank))
    if lay is not None:
        ok, rank = lay.inputs[0], lay.output.type.rank
        cut = _axes(lay, rank) or []
        kept = [k for k in range(rank) if k not in cut] if cut else []
    at = (n.outputs[0].type.rank or 0) - rank
    if [k + at for k in kept] != list(range(axis, axis + w.type.rank)) or not _in_bounds(ok, w, d):
        return None
    nodes = [g, n] if len(g.output.uses) == 1 else [n]
    return Match(n, nodes, {"x": x, "i": i}, info={"gathered": g})


# (label, matcher, replacement), in priority order
RULES = [
    (
        "jnp.take's in-bounds fill around a gather dropped",
        _find_take_fill,
        lambda b, m: b.op(m.info["gathered"].op, m["x"], m["i"], **m.info["gathered"].attrs),
    ),
]
