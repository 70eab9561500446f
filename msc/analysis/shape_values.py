"""Shape computations, resolved: what the small integer tensors built from ``shape`` hold, as
dims, and one canonical way to compute each from the graph inputs' shapes.

Exporters compute the same sizes many ways. torch.export writes a view's target as
``concat(reshape(squeeze(shape(mask){0..1})), ...)``; torch.onnx's dynamo exporter as a
``Shape`` of another tensor sliced and concatenated; the legacy exporter with ``Gather`` of a
``Shape``; a static export has the numbers. The values are the same: ``[batch, seq, 2, 16]``.
``contents`` works them out (symbolically, from value types and constants), and
``resolve_shape_values`` -- a pass of ``msc.analysis.canonical`` -- replaces every such value a
computation reads by one built the same way in both graphs: slices of the graph inputs'
shapes where their symbols first appear, integer constants, and arithmetic for expressions. It
also writes the dims it learns into value types an importer left unknown (``f32[?, ?, 32]``).

# NOTE: invariants. Exact: a canonical shape computation yields the value it replaces for
# every size of the inputs (a dim is read where the graph's own input carries that symbol).
# Contents are object arrays of dims (ints, SymDims, SymExprs; None where an element is not
# known), rank 0 or 1, at most ``MAX_ELEMENTS`` elements; only a content with every element
# known replaces a value. A symbolic dim is taken to be a size of at least 1 unless its range
# says otherwise (``eq(seq, 0)`` is false): an empty input is not a case this covers. Value
# types are only refined: a known dim is never changed, an unknown one may become known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from msc.ir import symexpr
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight, dead_nodes
from msc.ir.types import Dim, SymDim, SymExpr, TensorType
from msc.ops import registry

__all__ = ["contents", "content_of", "resolve_shape_values", "MAX_ELEMENTS"]

MAX_ELEMENTS = 16  # a shape, a few sizes: larger integer tensors are data

Content = np.ndarray  # dtype object: ints and symbolic dims


def _int_type(v: Value | None) -> bool:
    t = None if v is None else v.type
    return (
        isinstance(t, TensorType)
        and t.dtype.is_integer
        and t.shape is not None
        and len(t.shape) <= 1
        and all(isinstance(d, int) for d in t.shape)
        and (not t.shape or t.shape[0] <= MAX_ELEMENTS)
    )


def _as_content(a: np.ndarray) -> Content:
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = [int(x) for x in a.reshape(-1)]
    return out


def _dims(c: Content) -> list[Dim]:
    return list(c.reshape(-1))


def _obj(items: list, shape: tuple | None = None) -> Content:
    """An object array of ``items`` (dims stay whole: numpy does not look inside them),
    1-d or of ``shape``."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out if shape is None else out.reshape(shape)


def _full(c: Content | None) -> bool:
    """Every element known."""
    return c is not None and all(d is not None for d in c.reshape(-1))


# ------------------------------------------------------------------------------ evaluation
Eval = Callable[[Node, list], "Content | None"]
_EVAL: dict[str, Eval] = {}


def _evaluates(*ops: str) -> Callable[[Eval], Eval]:
    def deco(fn: Eval) -> Eval:
        for op in ops:
            if op in _EVAL:
                raise ValueError(f"shape-value evaluation for {op!r} registered twice")
            _EVAL[op] = fn
        return fn

    return deco


@_evaluates("shape")
def _shape(n: Node, ins: list) -> Content | None:
    x = n.inputs[0]
    t = None if x is None else x.type
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    dims = list(t.shape)
    start, end = n.attrs["start"], n.attrs["end"]
    return _obj(dims[slice(start, end)])


@_evaluates("constant")
def _constant(n: Node, ins: list) -> Content | None:
    v = np.asarray(n.attrs["value"])
    return _as_content(v) if v.dtype.kind in "iu" and v.ndim <= 1 else None


@_evaluates("squeeze", "unsqueeze", "reshape", "flatten", "identity", "cast")
def _same_data(n: Node, ins: list) -> Content | None:
    c = ins[0]
    out = n.outputs[0].type
    if c is None or not _int_type(n.outputs[0]) or int(np.prod(out.shape)) != c.size:
        return None
    return c.reshape(out.shape)


@_evaluates("concat")
def _concat(n: Node, ins: list) -> Content | None:
    if any(c is None or c.ndim != 1 for c in ins):
        return None
    return np.concatenate(ins) if ins else None


@_evaluates("gather")
def _gather(n: Node, ins: list) -> Content | None:
    c, idx = ins
    if c is None or idx is None or c.ndim != 1 or n.attrs["axis"] not in (0, -1):
        return None
    if not all(isinstance(i, int) and -c.size <= i < c.size for i in idx.reshape(-1)):
        return None
    return _obj([c[int(i)] for i in idx.reshape(-1)], idx.shape)


@_evaluates("slice")
def _slice(n: Node, ins: list) -> Content | None:
    c = ins[0]
    if c is None or c.ndim != 1:
        return None
    a = n.attrs

    def ints(i: int, attr):
        if attr is not None:
            return list(attr)
        got = ins[i] if i < len(ins) else None
        if got is None or not all(isinstance(x, int) for x in got.reshape(-1)):
            return None
        return [int(x) for x in got.reshape(-1)]

    starts, ends = ints(1, a["starts"]), ints(2, a["ends"])
    axes = ints(3, a["axes"]) if a["axes"] is not None or len(ins) > 3 else [0]
    steps = ints(4, a["steps"] or None) if a["steps"] or len(ins) > 4 else [1]
    if None in (starts, ends, axes, steps) or axes not in ([0], [-1]) or steps == [0]:
        return None
    return c[slice(starts[0], ends[0], steps[0])]  # Python's clamping, as the op's


def _binary(f: Callable[[Dim, Dim], object]) -> Eval:
    """Elementwise over two contents (broadcast); an unknown element stays unknown."""

    def ev(n: Node, ins: list) -> Content | None:
        if len(ins) != 2 or ins[0] is None or ins[1] is None:
            return None
        try:
            a, b = np.broadcast_arrays(ins[0], ins[1])
        except ValueError:
            return None
        out = [None if x is None or y is None else f(x, y) for x, y in zip(a.flat, b.flat)]
        return _obj(out, a.shape)

    return ev


def _nonzero(d: Dim) -> bool:
    lo, _ = symexpr.bounds(d)
    if isinstance(d, SymDim) and d.min is None:
        return True  # a size: at least 1 (see the NOTE)
    return lo is not None and lo >= 1


def _eq(x: Dim, y: Dim) -> bool | None:
    if x == y:
        return True
    if isinstance(x, int) and isinstance(y, int):
        return False
    for a, b in ((x, y), (y, x)):
        if isinstance(b, int) and b <= 0 and _nonzero(a):
            return False  # a size is never 0 or negative
    return None


@_evaluates("where")
def _where(n: Node, ins: list) -> Content | None:
    if len(ins) != 3 or any(c is None for c in ins):
        return None
    try:
        c, a, b = np.broadcast_arrays(*ins)
    except ValueError:
        return None
    out = [
        (x if x == y else None) if k is None else (x if k else y)
        for k, x, y in zip(c.flat, a.flat, b.flat)
    ]
    return _obj(out, c.shape)


def _div(x: Dim, y: Dim) -> Dim | None:
    """Integer division of sizes (truncation is floor for the non-negative dims here)."""
    if isinstance(x, int) and isinstance(y, int):
        return None if y == 0 else int(x / y)
    if isinstance(y, int) and y > 0 and symexpr.at_least(x, 0):
        return symexpr.floordiv(x, y)
    return None


_evaluates("add")(_binary(symexpr.add))
_evaluates("sub")(_binary(symexpr.sub))
_evaluates("mul")(_binary(symexpr.mul))
_evaluates("div", "floor_divide")(_binary(_div))
_evaluates("maximum")(_binary(lambda x, y: symexpr.maximum(x, y)))
_evaluates("eq")(_binary(_eq))
_evaluates("minimum")(_binary(lambda x, y: symexpr.minimum(x, y)))


def _content_type(v: Value) -> bool:
    """A value small enough to follow: integer or bool, rank <= 1, static length."""
    t = v.type
    return (
        isinstance(t, TensorType)
        and (t.dtype.is_integer or t.dtype is DType.BOOL)
        and t.shape is not None
        and len(t.shape) <= 1
        and all(isinstance(d, int) for d in t.shape)
        and (not t.shape or t.shape[0] <= MAX_ELEMENTS)
    )


def _evaluated(n: Node, ins: list) -> Content | None:
    """``n``'s output content from its inputs' (None where not known)."""
    ev = _EVAL.get(n.op)
    if ev is None or len(n.outputs) != 1 or not _content_type(n.outputs[0]):
        return None
    if n.op not in ("shape", "constant") and ins and ins[0] is None:
        return None
    try:
        c = ev(n, ins)
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError):
        c = None
    t = n.outputs[0].type
    return c if c is not None and c.shape == tuple(t.shape) else None  # type: ignore[arg-type]


def _evaluate(n: Node, out: dict[int, Content]) -> None:
    c = _evaluated(n, [None if v is None else out.get(id(v)) for v in n.inputs])
    if c is not None:
        out[id(n.outputs[0])] = c


def _weight_contents(g: Graph) -> dict[int, Content]:
    return {
        id(w): _as_content(w.numpy()) for w in g.weights.values() if w.has_data and _int_type(w)
    }


def contents(g: Graph, refine: bool = False) -> dict[int, Content]:
    """What each small integer value of ``g`` holds, as far as it is known: id(value) -> an
    object array of dims (None for an unknown element): the values of weights and
    constants, and of what is computed from them and from shapes. With ``refine``, unknown
    dims of value types are filled in on the way (in place), so a shape read later sees
    them."""
    out = _weight_contents(g)
    for n in g.nodes:
        if refine:
            _refine(n, out)
        _evaluate(n, out)
    return out


def content_of(v: Value | None, depth: int = 12) -> Content | None:
    """What the small integer value ``v`` holds, worked out from its own producers (up to
    ``depth`` of them deep): ``contents`` for one value, for a rule that has no graph."""
    if v is None or depth < 0:
        return None
    if isinstance(v, Weight):
        return _as_content(v.numpy()) if v.has_data and _int_type(v) else None
    n = v.producer
    if n is None or n.op not in _EVAL or not _content_type(v):
        return None
    return _evaluated(n, [content_of(x, depth - 1) for x in n.inputs])


# ------------------------------------------------------------------------------ building
def _same_ints(w: Weight, xs: Sequence[int]) -> bool:
    return (
        w.has_data and w.type == TensorType(DType.INT64, (len(xs),)) and list(w.numpy()) == list(xs)
    )


class _Builder:
    """Canonical computations of contents from the graph inputs' shapes, shared by content."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.made: dict[tuple, Value] = {}
        self.new: list[Node] = []
        self.source: dict[str, tuple[int, int]] = {}  # symbol -> (input position, dim)
        for i, v in enumerate(g.inputs):
            shape = v.type.shape if isinstance(v.type, TensorType) else None
            for j, d in enumerate(shape or ()):
                if isinstance(d, SymDim):
                    self.source.setdefault(d.name, (i, j))
        self._adopt()

    def _adopt(self) -> None:
        """Take the canonical computations the graph already has (an earlier pass built
        them) as made, so building them again finds them: a pass over a canonical graph
        changes nothing."""
        made = self.made
        ids = {id(v) for v in made.values()}
        for k, w in self.g.weights.items():
            if k.startswith("sizes[") and w.has_data and w.type.rank == 1:
                made.setdefault(("ints", tuple(int(x) for x in w.numpy())), w)
        ids |= {id(v) for v in made.values()}
        position = {id(v): i for i, v in enumerate(self.g.inputs)}
        for n in self.g.nodes:
            ins, a = n.inputs, n.attrs
            key: tuple | None = None
            if n.op == "shape" and ins and id(ins[0]) in position and a["end"] is not None:
                key = ("shape", position[id(ins[0])], a["start"], a["end"])
            elif not ins or not all(v is not None and id(v) in ids for v in ins):
                continue
            elif n.op == "concat" and a["axis"] == 0:
                key = ("concat", *map(id, ins))
            elif n.op in ("mul", "add") and len(ins) == 2:
                key = (n.op, id(ins[0]), id(ins[1]))
            elif n.op == "cast":
                key = ("cast", id(ins[0]), a["to"])
            elif n.op == "reshape" and len(ins) == 1 and a["shape"] is not None and not a["shape"]:
                key = ("scalar", id(ins[0]))
            if key is not None and key not in made:
                made[key] = n.outputs[0]
                ids.add(id(n.outputs[0]))

    def _node(self, key: tuple, op: str, *ins: Value | None, **attrs) -> Value:
        v = self.made.get(key)
        if v is None:
            node = self.g.add_node(op, ins, attrs)
            self.new.append(node)
            v = self.made[key] = node.outputs[0]
        return v

    def _ints(self, xs: Sequence[int]) -> Value:
        key = ("ints", tuple(xs))
        v = self.made.get(key)
        if v is None:
            # Named by value: the same constant of the other graph has the same name.
            base = name = "sizes[" + ",".join(map(str, xs)) + "]"
            k = 1
            while name in self.g.weights and not _same_ints(self.g.weights[name], xs):
                name, k = f"{base}_{k}", k + 1
            v = self.g.weights.get(name) or self.g.add_weight(
                name, np.asarray(xs, np.int64), role="buffer"
            )
            self.made[key] = v
        return v

    def _dims_of(self, i: int, start: int, end: int) -> Value:
        return self._node(("shape", i, start, end), "shape", self.g.inputs[i], start=start, end=end)

    def _order(self, a: object) -> tuple:
        """Atoms in the order their symbols first appear in the inputs (not by name: another
        graph may name them otherwise)."""
        if isinstance(a, SymDim):
            return self.source.get(a.name, (1 << 30, 0))
        return (1 << 30, 1)

    def _expr(self, d: Dim) -> Value | None:
        """A one-element i64 tensor computing ``d``."""
        if isinstance(d, int):
            return self._ints([d])
        if isinstance(d, SymDim):
            src = self.source.get(d.name)
            return None if src is None else self._dims_of(src[0], src[1], src[1] + 1)
        assert isinstance(d, SymExpr)
        terms = sorted(d.terms, key=lambda t: (not t[0], [self._order(a) for a in t[0]]))
        total: Value | None = None
        for mono, coef in terms:
            term: Value | None = None
            for atom in sorted(mono, key=self._order):
                if not isinstance(atom, SymDim):
                    return None  # floordiv, mod, min, max of dims: left as computed
                f = self._expr(atom)
                if f is None:
                    return None
                term = f if term is None else self._node(("mul", id(term), id(f)), "mul", term, f)
            if term is None:
                term = self._ints([coef])
            elif coef != 1:
                c = self._ints([coef])
                term = self._node(("mul", id(term), id(c)), "mul", term, c)
            total = (
                term
                if total is None
                else self._node(("add", id(total), id(term)), "add", total, term)
            )
        return total

    def build(self, c: Content, like: TensorType) -> Value | None:
        """A value of type ``like`` holding ``c``, computed canonically."""
        dims = _dims(c)
        pieces: list[Value] = []
        run: list[int] = []  # ints not yet emitted
        k = 0
        while k < len(dims):
            d = dims[k]
            if isinstance(d, int):
                run.append(d)
                k += 1
                continue
            if run:
                pieces.append(self._ints(run))
                run = []
            src = self.source.get(d.name) if isinstance(d, SymDim) else None
            if src is not None:  # the longest run of one input's consecutive dims
                i, j = src
                shape = self.g.inputs[i].type.shape
                end = k + 1
                while (
                    end < len(dims)
                    and j + end - k < len(shape)
                    and isinstance(dims[end], SymDim)
                    and self.source.get(dims[end].name) == (i, j + end - k)
                ):
                    end += 1
                pieces.append(self._dims_of(i, j, j + end - k))
                k = end
                continue
            v = self._expr(d)
            if v is None:
                return None
            pieces.append(v)
            k += 1
        if run:
            pieces.append(self._ints(run))
        if not pieces:
            pieces.append(self._ints([]))
        out = pieces[0]
        if len(pieces) > 1:
            out = self._node(("concat", *map(id, pieces)), "concat", *pieces, axis=0)
        if like.dtype is not DType.INT64:
            out = self._node(("cast", id(out), like.dtype), "cast", out, to=like.dtype)
        if like.shape == ():
            out = self._node(("scalar", id(out)), "reshape", out, shape=[])
        return out


def _inferred_sizes(n: Node, slot: int, c: Content) -> Content:
    """A reshape target's -1 as the size it stands for (the result's dim there, when known):
    ``[b, s, -1, 16]`` and ``[b, s, 2, 16]`` are one target."""
    if n.op != "reshape" or slot != 1 or c.ndim != 1 or -1 not in list(c):
        return c
    shape = n.outputs[0].type.shape
    if shape is None or len(shape) != c.size:
        return c
    k = list(c).index(-1)
    if shape[k] is None:
        return c
    out = c.copy()
    out[k] = shape[k]
    return out


# ------------------------------------------------------------------------------ the pass
def resolve_shape_values(g: Graph, done: Counter[str]) -> None:
    """Replace, in place, every computed shape value a node reads (not one only other shape
    computations read) by its canonical computation, drop what no longer has a use, and
    refine value types with the dims learned. Counted per value replaced."""
    known = contents(g, refine=True)
    computed = {
        id(v): v
        for n in g.nodes
        if n.op != "constant"
        for v in n.outputs
        if id(v) in known and _full(known[id(v)]) and v.type.dtype.is_integer
    }
    if not computed:
        return
    b = _Builder(g)
    outputs = {id(v) for v in g.outputs}
    replaced = 0
    for n in list(g.nodes):
        if any(id(v) in computed for v in n.outputs):
            continue
        ins = list(n.inputs)
        changed = False
        for i, v in enumerate(ins):
            if v is None or id(v) not in computed or id(v) in outputs:
                continue
            c = _inferred_sizes(n, i, known[id(v)])
            new = b.build(c, v.type)  # type: ignore[arg-type]
            if new is not None and new is not v:
                ins[i], changed = new, True
                known[id(new)] = known[id(v)]
                replaced += 1
        if changed:
            n.inputs = ins
    for n in g.nodes:
        form = _ATTR.get(n.op)
        if form is None or any(id(v) in computed for v in n.outputs):
            continue
        full = [
            None if v is None or not _full(known.get(id(v))) else known[id(v)] for v in n.inputs
        ]
        got = form(n, full)
        if got is not None:
            ins, attrs = got
            n.inputs = ins
            n.attrs = registry.get(n.op).normalize_attrs({**n.attrs, **attrs})
            replaced += 1
    if b.new:
        g.sort()
    dead = dead_nodes(g)
    if dead:
        g.remove_nodes(dead)
    for k in [k for k, w in g.weights.items() if not w.uses and k.startswith("sizes[")]:
        del g.weights[k]
    if replaced:
        done["shape computation re-derived from the inputs' shapes"] += replaced
    contents(g, refine=True)


# ------------------------------------------------------------------------------ attributes
# A run-time shape operand whose content is known, as the op's attribute (the form a static
# export or an importer that folded it writes): op -> (node, input contents) -> (inputs,
# attributes) or None.
AttrForm = Callable[[Node, list], "tuple[list, dict] | None"]
_ATTR: dict[str, AttrForm] = {}


def _attr_form(op: str) -> Callable[[AttrForm], AttrForm]:
    def deco(fn: AttrForm) -> AttrForm:
        if op in _ATTR:
            raise ValueError(f"attribute form for {op!r} registered twice")
        _ATTR[op] = fn
        return fn

    return deco


def _all_ints(c: Content | None) -> list[int] | None:
    if c is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in _dims(c)):
        return None
    return [int(d) for d in _dims(c)]


@_attr_form("reshape")
def _reshape_attr(n: Node, ins: list) -> tuple[list, dict] | None:
    """All sizes known, or one symbolic size among numbers: -1 (the element count fixes it)."""
    c = ins[1] if len(ins) > 1 else None
    if c is None:
        return None
    dims = _dims(c)
    if any(isinstance(d, int) and d <= 0 for d in dims):
        return None  # 0 and -1 spell "copy" and "infer" in the run-time form
    sym = [k for k, d in enumerate(dims) if not isinstance(d, int)]
    if len(sym) > 1:
        return None
    shape = [-1 if k in sym else int(d) for k, d in enumerate(dims)]
    return [n.inputs[0]], {"shape": shape}


@_attr_form("expand")
def _expand_attr(n: Node, ins: list) -> tuple[list, dict] | None:
    """Numbers, and -1 where the target keeps the input's own (symbolic) dim."""
    c = ins[1] if len(ins) > 1 else None
    xs = _known_shape(n.inputs[0])
    if c is None or xs is None:
        return None
    dims = _dims(c)
    lead = len(dims) - len(xs)
    shape = []
    for k, d in enumerate(dims):
        if isinstance(d, int):
            shape.append(d)
        elif k >= lead and xs[k - lead] == d:
            shape.append(-1)
        else:
            return None
    return [n.inputs[0]], {"shape": shape}


@_attr_form("resize")
def _resize_attr(n: Node, ins: list) -> tuple[list, dict] | None:
    """Run-time sizes of every dim whose first two are the input's own: spatial sizes."""
    c = ins[2] if len(ins) > 2 else None
    xs = _known_shape(n.inputs[0])
    if c is None or xs is None or len(xs) != c.size or len(xs) < 3:
        return None
    dims = _dims(c)
    if list(xs[:2]) != dims[:2] or not all(isinstance(d, int) for d in dims[2:]):
        return None
    roi = n.inputs[3] if len(n.inputs) > 3 else None
    return [n.inputs[0], None, None, roi], {"sizes": [int(d) for d in dims[2:]]}


def _operand_attr(op: str, *slots: tuple[int, str]) -> None:
    """An op whose run-time operands (slot, attribute) become attributes when every one of
    them given is all numbers (slice takes its starts and ends both one way)."""

    def form(n: Node, ins: list) -> tuple[list, dict] | None:
        new, attrs = list(n.inputs), {}
        for slot, attr in slots:
            if slot >= len(n.inputs) or n.inputs[slot] is None:
                continue
            ints = _all_ints(ins[slot] if slot < len(ins) else None)
            if ints is None:
                return None
            new[slot], attrs[attr] = None, ints
        if not attrs:
            return None
        while new and new[-1] is None:
            new.pop()
        return new, attrs

    _attr_form(op)(form)


_operand_attr("full", (0, "shape"))
_operand_attr("slice", (1, "starts"), (2, "ends"), (3, "axes"), (4, "steps"))
_operand_attr("tile", (1, "repeats"))
_operand_attr("squeeze", (1, "axes"))
_operand_attr("unsqueeze", (1, "axes"))


# ------------------------------------------------------------------------------ types
Fill = Callable[[Node, list], "tuple | None"]
_FILL: dict[str, Fill] = {}


def _fills(op: str) -> Callable[[Fill], Fill]:
    def deco(fn: Fill) -> Fill:
        if op in _FILL:
            raise ValueError(f"shape fill for {op!r} registered twice")
        _FILL[op] = fn
        return fn

    return deco


def _known_shape(v: Value | None) -> tuple | None:
    t = None if v is None else v.type
    return t.shape if isinstance(t, TensorType) else None


@_fills("reshape")
def _fill_reshape(n: Node, ins: list) -> tuple | None:
    """The target's sizes; its one -1 is the element count over the rest, where that
    divides exactly (``32*b*s / 16*s``)."""
    c = ins[1] if len(ins) > 1 else None
    if c is None:
        return None
    dims = _dims(c)
    if -1 in dims:
        xs = _known_shape(n.inputs[0])
        k = dims.index(-1)
        dims[k] = None
        rest = [d for d in dims if d is not None]
        if xs is not None and None not in xs and len(rest) == len(dims) - 1:
            total: Dim = 1
            for d in xs:
                total = symexpr.mul(total, d)
            div: Dim = 1
            for d in rest:
                div = symexpr.mul(div, d)
            dims[k] = symexpr.exact_div(total, div) if div != 0 else None
    if any(isinstance(d, int) and d < 0 for d in dims):
        return None
    return tuple(dims)


@_fills("expand")
def _fill_expand(n: Node, ins: list) -> tuple | None:
    c = ins[1] if len(ins) > 1 else None
    xs = _known_shape(n.inputs[0])
    if c is None or xs is None:
        return None
    dims = _dims(c)
    r = max(len(dims), len(xs))
    a = [1] * (r - len(xs)) + list(xs)
    b = [1] * (r - len(dims)) + dims
    out: list[Dim] = []
    for x, y in zip(a, b):
        if y == 1 or y == -1:
            out.append(x)
        elif x == 1 or (x == y and x is not None):
            out.append(y)
        else:
            out.append(None)
    return tuple(out)


@_fills("full")
def _fill_full(n: Node, ins: list) -> tuple | None:
    c = ins[0] if ins else None
    return None if c is None else tuple(_dims(c))


@_fills("resize")
def _fill_resize(n: Node, ins: list) -> tuple | None:
    c = ins[2] if len(ins) > 2 else None
    return None if c is None else tuple(_dims(c))


@_fills("range")
def _fill_range(n: Node, ins: list) -> tuple | None:
    if len(ins) != 3 or any(c is None or c.size != 1 for c in ins):
        return None
    start, limit, delta = (_dims(c)[0] for c in ins)
    if delta != 1 or start is None or limit is None:
        return None
    n = symexpr.sub(limit, start)
    return (n,) if isinstance(n, int) and n >= 0 or not isinstance(n, int) and _nonzero(n) else None


def _merge(old: TensorType, new: TensorType | tuple | None) -> TensorType:
    """``old`` with its unknown dims (or rank) taken from ``new``."""
    shape = new.shape if isinstance(new, TensorType) else new
    if shape is None or (isinstance(new, TensorType) and new.dtype is not old.dtype):
        return old
    if old.shape is None:
        return old.with_shape(shape)
    if len(old.shape) != len(shape) or None not in old.shape:
        return old
    return old.with_shape(o if o is not None else s for o, s in zip(old.shape, shape))


def _refine(n: Node, known: dict[int, Content]) -> None:
    """Fill unknown dims of ``n``'s output from the contents of its shape operands
    (``_FILL``), else from the op's own inference over its (refined) input types."""
    if len(n.outputs) != 1 or any(True for _ in n.subgraphs()):
        return
    out = n.outputs[0]
    t = out.type
    if not isinstance(t, TensorType) or (t.shape is not None and None not in t.shape):
        return
    new: TensorType | tuple | None = None
    fill = _FILL.get(n.op)
    if fill is not None:
        try:
            new = fill(n, [None if v is None else known.get(id(v)) for v in n.inputs])
        except (ValueError, TypeError, ZeroDivisionError):
            new = None
    if new is None and n.op in registry:
        try:
            new = registry.get(n.op).infer(n)[0]
        except Exception:  # an op that cannot infer from what is known: left as it is
            new = None
    if new is not None:
        out.type = _merge(t, new)


def refines(old: object, new: object) -> bool:
    """``new`` is ``old`` or ``old`` with unknown dims filled in (what ``contents(g,
    refine=True)`` does)."""
    if old == new:
        return True
    if not isinstance(old, TensorType) or not isinstance(new, TensorType):
        return False
    return _merge(old, new) == new
