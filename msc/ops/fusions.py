"""Fusions: the spelled-out forms of high-level ops, found and put back together.

ONNX files (and other lowered sources) spell linear as MatMul + Add (or Gemm), an embedding
as Gather, GELU as its erf or tanh formula, LayerNorm and RMSNorm as reductions, softmax as
exp over a sum (after the max is taken off), attention as two matmuls around a softmax (a
mask added, or a bool mask's hidden scores set to -inf by a where; the key and value heads
copied to the query's count for grouped-query attention). These patterns (``msc.rewrite``
patterns) find them and put the canonical op back, so the code
generated from such a file reads, and runs, like the model it came from.

# NOTE: invariants
# - A fusion fires only where the high-level op computes the same function: constants must
#   have the formula's values (relative tolerance 1e-6; 1e-4 for the GELU constants, which
#   exporters round), axes must be trailing, shapes must fit the op's broadcasting, and
#   intermediates must have no other use (msc.rewrite's rule).
# - ``linear`` takes a weight [out, in]: MatMul's constant 2-d [in, out] weight is transposed
#   into a new weight (the old one is replaced when nothing else uses it, keeping its name).
# - Pure msc: no torch, no onnx.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import TensorType
from msc.ops.rewrite import Match, Pattern, constant_value, rewrite

__all__ = ["FUSIONS", "fuse", "transposed_weight", "PRETRANSPOSED", "causal_mask_value"]


def _near(v: Value | None, want: float, rtol: float = 1e-6) -> bool:
    c = constant_value(v)
    if c is None or c.size != 1:
        return False
    x = float(np.asarray(c, np.float64).reshape(-1)[0])
    return math.isclose(x, want, rel_tol=rtol, abs_tol=0.0)


def _scalar(v: Value | None) -> float | None:
    """A one-element constant as the shortest decimal of its own dtype (a float32 1e-5 is
    1e-05, not 9.99999974e-06), as the frontends read float attributes."""
    c = constant_value(v)
    if c is None or c.size != 1:
        return None
    x = np.asarray(c).reshape(-1)[0]
    return float(str(x)) if np.issubdtype(x.dtype, np.floating) else float(x)


def _is_const(v: Value | None) -> bool:
    return constant_value(v) is not None


class _Walk:
    """Collects the nodes and constants a matcher function walks through."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self.nodes: list[Node] = [root]
        self.constants: list[Node] = []
        self.info: dict[str, object] = {}

    def node(self, v: Value | None, *ops: str) -> Node | None:
        """The producer of ``v`` when it is one of ``ops`` (and records it)."""
        if v is None or v.producer is None or v.producer.op not in ops:
            return None
        if v.producer not in self.nodes:
            self.nodes.append(v.producer)
        return v.producer

    def const(self, v: Value | None) -> bool:
        if v is not None and v.producer is not None and v.producer.op == "constant":
            self.constants.append(v.producer)
            return True
        return isinstance(v, Weight) and v.has_data

    def factors(self, v: Value, top: bool = False) -> list[Value]:
        """``v`` as a flat product: single-use mul nodes are opened, anything else is a leaf."""
        p = v.producer
        if p is not None and p.op == "mul" and (top or len(v.uses) == 1):
            if p not in self.nodes:
                self.nodes.append(p)
            return self.factors(p.inputs[0]) + self.factors(p.inputs[1])
        return [v]

    def match(self, values: dict[str, Value]) -> Match:
        return Match(self.root, self.nodes, values, constants=self.constants, info=self.info)


Finder = Callable[[_Walk], "dict[str, Value] | None"]


def _walking(name: str, find: Finder, replace: Callable[[Builder, Match], Value]) -> Pattern:
    """A pattern found by walking back from each node with ``find``."""

    def matcher(node: Node) -> Match | None:
        w = _Walk(node)
        found = find(w)
        return None if found is None else w.match(found)

    return Pattern(name, matcher=matcher, replace=replace)


# ---------------------------------------------------------------------- linear
# linear's weight is [out, in], MatMul's [in, out]: fusing transposes the weight, one copy in
# memory at a time as writers read it. A weight still in its file and larger than this stays
# under matmul + add, so converting a model bigger than memory keeps copying file to file.
TRANSPOSE_LIMIT = 256 << 20


def _linear_pattern() -> Pattern:
    b = Builder()
    x, w, bias = (Value(n, TensorType(DType.FLOAT32, None)) for n in ("x", "w", "bias"))
    y = b.op("add", b.op("matmul", x, w), bias)

    def check(m: Match) -> bool:
        w, bias = m["w"], m["bias"]
        if not isinstance(w, Weight) or not w.has_data or w.type.rank != 2:
            return False
        if not isinstance(w.storage, np.ndarray) and w.nbytes > TRANSPOSE_LIMIT:
            return False  # a weight in a file stays where it is (no transposed copy in memory)
        return bias.type.shape == (w.type.shape[1],) and m["x"].type.rank not in (None, 0)

    def replace(b: Builder, m: Match) -> Value:
        return b.op("linear", m["x"], transposed_weight(m.graph, m["w"], m.nodes), m["bias"])

    return Pattern("linear", [x, w, bias], [y], replace=replace, check=check, any_dtype=True)


def _pretransposed_pattern() -> Pattern:
    """``matmul(x, W~T)`` -> ``linear(x, W)``: a bias-free linear whose weight the file stores
    transposed and says so by its name (``PRETRANSPOSED``)."""
    b = Builder()
    x, w = (Value(n, TensorType(DType.FLOAT32, None)) for n in ("x", "w"))
    y = b.op("matmul", x, w)

    def check(m: Match) -> bool:
        w = m["w"]
        if not isinstance(w, Weight) or not w.name.endswith(PRETRANSPOSED):
            return False
        if not w.has_data or w.type.rank != 2 or m["x"].type.rank in (None, 0):
            return False
        return isinstance(w.storage, np.ndarray) or w.nbytes <= TRANSPOSE_LIMIT

    def replace(b: Builder, m: Match) -> Value:
        return b.op("linear", m["x"], transposed_weight(m.graph, m["w"], m.nodes))

    return Pattern(
        "linear_pretransposed", [x, w], [y], replace=replace, check=check, any_dtype=True
    )


def _gemm_pattern() -> Pattern:
    """``gemm(x, W, b, trans_b=1)`` -> ``linear(x, W, b)``: torch.onnx writes a 2-d linear as
    Gemm with the weight as linear holds it ([out, in], transB), so the weight keeps its name
    and layout. A Gemm of an [in, out] weight (GPT-2's Conv1D, ``torch.addmm``) stays: as
    linear its weight would be a transposed copy, no longer the source's tensor."""

    def matcher(n: Node) -> Match | None:
        if n.op != "gemm" or n.attrs["trans_a"] or not n.attrs["trans_b"]:
            return None
        if n.attrs["alpha"] != 1.0 or isinstance(n.inputs[0], Weight):
            return None
        w = n.inputs[1]
        if not isinstance(w, Weight) or w.type.rank != 2:
            return None
        c = n.inputs[2] if len(n.inputs) > 2 else None
        if c is not None and (n.attrs["beta"] != 1.0 or c.type.shape != w.type.shape[:1]):
            return None
        return Match(n, [n], {"x": n.inputs[0], "w": w} | ({"bias": c} if c is not None else {}))

    def replace(b: Builder, m: Match) -> Value:
        return b.op("linear", m["x"], m["w"], m.values.get("bias"))

    return Pattern("gemm", matcher=matcher, replace=replace)


# The ops an exporter lowers ``embedding`` from (torch.onnx's aten.embedding) and the module
# types that run one: a lookup whose provenance names either is the source's embedding.
EMBEDDING_SOURCES = ("aten.embedding", "aten::embedding")
EMBEDDING_MODULES = ("Embedding",)


def _embedding_pattern() -> Pattern:
    """``gather(W, ids, axis=0)`` of a 2-d weight -> ``embedding(W, ids)`` where the source
    computed an embedding there (the node's provenance: the op it was lowered from, or the
    module type it ran in). The two differ only on a negative index, which gather counts
    from the end and the source's embedding refuses, so on the source's inputs they agree."""

    def matcher(n: Node) -> Match | None:
        if n.op != "gather" or n.attrs["axis"] not in (0, -2):
            return None
        w, ids = n.inputs
        if not isinstance(w, Weight) or w.type.rank != 2 or ids is None:
            return None
        prov = n.provenance
        stack = prov.stack
        from_op = prov.op.startswith(EMBEDDING_SOURCES)
        in_module = bool(stack) and stack[-1][0] == prov.module
        in_module = in_module and stack[-1][1] in EMBEDDING_MODULES
        if not (from_op or in_module):
            return None
        return Match(n, [n], {"w": w, "ids": ids})

    return Pattern(
        "embedding", matcher=matcher, replace=lambda b, m: b.op("embedding", m["w"], m["ids"])
    )


# The suffix of the name of a 2-d weight stored transposed: codegen.onnx's folded Transpose of
# ``W`` is ``W~T``, and msc.frontend.onnx names torch.onnx's transposed linear weights so.
# Transposed back (linear's layout) it is ``W`` again.
PRETRANSPOSED = "~T"


def transposed_weight(g: Graph, w: Weight, matched: list[Node]) -> Weight:
    """``w`` transposed as a weight: replacing ``w`` under its name when only the match uses
    it, else a new weight ``<name>.T``. A 2-d ``W~T`` (``PRETRANSPOSED``) becomes ``W``, or
    the graph's ``W`` itself when that holds the same values (a tied weight the file stored
    twice: GPT-2's embedding and, transposed, its head)."""
    data = w.storage
    if isinstance(data, np.ndarray):
        new_data = np.ascontiguousarray(data.T)
    else:
        new_data = lambda: np.ascontiguousarray(w.numpy().T)  # noqa: E731 - read on use
    shape = tuple(reversed(w.type.shape))
    t = TensorType(w.type.dtype, shape)
    only_here = all(u in matched for u, _ in w.uses)
    if only_here and w.name.endswith(PRETRANSPOSED) and len(shape) == 2:
        name = w.name.removesuffix(PRETRANSPOSED)
        same = g.weights.get(name)
        if same is None:
            del g.weights[w.name]
            return g.add_weight(name, new_data, t, role=w.role, aliases=w.aliases)
        if same.type == t and same.has_data and np.array_equal(same.numpy(), w.numpy().T):
            del g.weights[w.name]
            return same
    if only_here:
        del g.weights[w.name]
        return g.add_weight(w.name, new_data, t, role=w.role, aliases=w.aliases)
    name, k = f"{w.name}.T", 1
    while name in g.weights:
        k += 1
        name = f"{w.name}.T{k}"
    return g.add_weight(name, new_data, t, role=w.role)


# ---------------------------------------------------------------------- gelu
INV_SQRT2 = 1 / math.sqrt(2)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _split_half_x(w: _Walk, leaves: list[Value], inner_op: str) -> tuple[Value, Node] | None:
    """Leaves {x, 0.5, add(1, inner_op(...))} -> (x, the inner node)."""
    if len(leaves) != 3:
        return None
    half = [v for v in leaves if _near(v, 0.5, 1e-4)]
    adds = [v for v in leaves if v.producer is not None and v.producer.op == "add"]
    if len(half) != 1 or len(adds) != 1:
        return None
    rest = [v for v in leaves if v is not half[0] and v is not adds[0]]
    if len(rest) != 1 or _is_const(rest[0]):
        return None
    w.const(half[0])
    add = w.node(adds[0], "add")
    one, inner = add.inputs
    if not _near(one, 1.0):
        one, inner = inner, one
    node = w.node(inner, inner_op)
    if not _near(one, 1.0) or node is None:
        return None
    w.const(one)
    return rest[0], node


def _gelu_erf(w: _Walk) -> dict[str, Value] | None:
    """x * 0.5 * (1 + erf(x / sqrt(2))), the factors in any order and grouping."""
    if w.root.op != "mul":
        return None
    found = _split_half_x(w, w.factors(w.root.output, top=True), "erf")
    if found is None:
        return None
    x, erf = found
    z = erf.inputs[0]
    n = w.node(z, "mul", "div")
    if n is None:
        return None
    a, c = n.inputs
    if n.op == "mul" and a is not x:
        a, c = c, a
    want = INV_SQRT2 if n.op == "mul" else math.sqrt(2)
    if a is not x or not _near(c, want, 1e-4):
        return None
    w.const(c)
    return {"x": x}


def _gelu_tanh(w: _Walk) -> dict[str, Value] | None:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    if w.root.op != "mul":
        return None
    found = _split_half_x(w, w.factors(w.root.output, top=True), "tanh")
    if found is None:
        return None
    x, tanh = found
    u = tanh.inputs[0]
    if u.producer is None or u.producer.op != "mul" or len(u.uses) != 1:
        return None
    leaves = w.factors(u, top=True)
    cs = [v for v in leaves if _near(v, SQRT_2_OVER_PI, 1e-4)]
    adds = [v for v in leaves if w.node(v, "add") is not None] if len(leaves) == 2 else []
    if len(cs) != 1 or len(adds) != 1:
        return None
    w.const(cs[0])
    a, cube_term = adds[0].producer.inputs
    if a is not x:
        a, cube_term = cube_term, a
    if a is not x or cube_term.producer is None or len(cube_term.uses) != 1:
        return None
    terms = w.factors(cube_term, top=True)
    k = [v for v in terms if _near(v, 0.044715, 1e-4)]
    xs = [v for v in terms if v is not (k[0] if k else None)]
    if len(k) != 1:
        return None
    w.const(k[0])
    if len(xs) == 3 and all(v is x for v in xs):
        return {"x": x}
    if len(xs) == 1 and (p := w.node(xs[0], "pow")) is not None:
        if p.inputs[0] is x and _near(p.inputs[1], 3.0):
            w.const(p.inputs[1])
            return {"x": x}
    return None


# ---------------------------------------------------------------------- norms
def _trailing_axis(x: Value, axes) -> int | None:
    """The first axis when ``axes`` are the trailing dims of ``x``, as a negative index."""
    r = x.type.rank
    if r is None or not axes:
        return None
    ax = sorted(a % r for a in axes)
    if ax != list(range(ax[0], r)):
        return None
    return ax[0] - r


def _mean(w: _Walk, v: Value) -> tuple[Value, int] | None:
    n = w.node(v, "reduce_mean")
    if n is None or not n.attrs["keepdims"]:
        return None
    axis = _trailing_axis(n.inputs[0], n.attrs["axes"])
    return None if axis is None else (n.inputs[0], axis)


def _square_of(w: _Walk, v: Value) -> Value | None:
    n = w.node(v, "pow", "mul")
    if n is None:
        return None
    if n.op == "mul":
        return n.inputs[0] if n.inputs[0] is n.inputs[1] else None
    if _near(n.inputs[1], 2.0):
        w.const(n.inputs[1])
        return n.inputs[0]
    return None


def _normalized(w: _Walk) -> tuple[Value, Value, float, int] | None:
    """root = num / sqrt(mean(sq(num)) + eps) in its spellings (div by sqrt, mul by rsqrt,
    reciprocal of sqrt or 1 / sqrt); returns (num, the mean's input's square base, eps,
    axis)."""
    root = w.root
    if root.op not in ("mul", "div"):
        return None
    num, den = root.inputs
    if root.op == "mul":
        for a, b in ((num, den), (den, num)):
            r = w.node(b, "rsqrt", "reciprocal", "div")
            if r is None:
                continue
            t = r.inputs[0]
            if r.op == "div":  # 1 / sqrt(v): the legacy exporter's reciprocal
                t = r.inputs[1] if _near(r.inputs[0], 1.0) else None
                if t is not None:
                    w.const(r.inputs[0])
            if r.op in ("reciprocal", "div") and t is not None:
                s = w.node(t, "sqrt")
                t = s.inputs[0] if s is not None else None
            if t is not None:
                num, inner = a, t
                break
            w.nodes.remove(r)
        else:
            return None
    elif root.op == "div":
        s = w.node(den, "sqrt")
        if s is None:
            return None
        inner = s.inputs[0]
    else:
        return None
    add = w.node(inner, "add")
    if add is None:
        return None
    m, eps = add.inputs
    if not _is_const(eps):
        m, eps = eps, m
    e = _scalar(eps)
    if e is None or e < 0:
        return None
    w.const(eps)
    found = _mean(w, m)
    if found is None:
        return None
    sq, axis = found
    base = _square_of(w, sq)
    if base is not num:
        return None
    return num, base, e, axis


def _rms_norm(w: _Walk) -> dict[str, Value] | None:
    found = _normalized(w)
    if found is None:
        return None
    x, _, eps, axis = found
    if x.producer is not None and x.producer.op == "sub":
        return None  # centred first: a layer norm
    w.info.update(eps=eps, axis=axis)
    return {"x": x}


def _layer_norm(w: _Walk) -> dict[str, Value] | None:
    found = _normalized(w)
    if found is None:
        return None
    d, _, eps, axis = found
    sub = w.node(d, "sub")
    if sub is None:
        return None
    x, mean = sub.inputs
    got = _mean(w, mean)
    if got is None or got[0] is not x or got[1] != axis:
        return None
    w.info.update(eps=eps, axis=axis)
    return {"x": x}


def _norm_pattern(op: str, find: Finder) -> Pattern:
    def replace(b: Builder, m: Match) -> Value:
        x = m["x"]
        axis = int(m.info["axis"]) % x.type.rank  # as the frontends write it: non-negative
        return b.op(op, x, eps=float(m.info["eps"]), axis=axis)

    return _walking(op, find, replace)


def _affine(op: str, slot: int) -> Pattern:
    """norm(x) * weight -> norm(x, weight); layer_norm(x, w) + bias -> layer_norm(x, w, bias),
    when the weight / bias has exactly the normalized dims' shape."""
    arith = "mul" if slot == 1 else "add"

    def find(w: _Walk) -> dict[str, Value] | None:
        if w.root.op != arith:
            return None
        for a, p in (w.root.inputs, reversed(w.root.inputs)):
            n = w.node(a, op)
            if n is None:
                continue
            ins = list(n.inputs) + [None] * (3 - len(n.inputs))
            later = ins[slot + 1 :] if op == "layer_norm" else []
            if ins[slot] is not None or any(v is not None for v in later):
                w.nodes.remove(n)
                continue
            x = n.inputs[0]
            r = x.type.rank
            ax = n.attrs["axis"] % r if r else None
            if ax is None or p.type.shape is None or tuple(p.type.shape) != x.type.shape[ax:]:
                w.nodes.remove(n)
                continue
            if p.dtype is not x.dtype:
                return None
            found = {"x": x, "p": p}
            if slot == 2 and ins[1] is not None:
                found["w"] = ins[1]
            return found
        return None

    def replace(b: Builder, m: Match) -> Value:
        norm = next(n for n in m.nodes if n.op == op)
        ins = [m["x"], m.values.get("w"), None][: 3 if op == "layer_norm" else 2]
        ins[slot] = m["p"]
        while ins[-1] is None:
            ins.pop()
        return b.op(op, *ins, **norm.attrs)

    return _walking(f"{op}_{arith}", find, replace)


# ---------------------------------------------------------------------- attention
def _key_of_transposed(w: _Walk, kt: Value) -> Value | None:
    """K from K^T: transpose swapping the last two dims, or the exporters' reshape (or
    flatten) -> 3-d transpose -> reshape spelling of it."""
    t = w.node(kt, "transpose")
    if t is not None:
        perm = [int(p) for p in t.attrs["perm"]]
        if len(perm) >= 2:
            # K^T = transpose(x, perm) makes K = transpose(x, perm with its last two swapped):
            # the legacy exporter's one transpose of [B, S, H, D] to [B, H, D, S] (perm
            # 0, 2, 3, 1) is K = x.transpose(1, 2) transposed.
            k_perm = [*perm[:-2], perm[-1], perm[-2]]
            if k_perm != list(range(len(perm))):
                w.info["k_perm"] = k_perm
            return t.inputs[0]
        w.nodes.remove(t)
        return None
    outer = w.node(kt, "reshape")
    if outer is None:
        return None
    t = w.node(outer.inputs[0], "transpose")
    inner = w.node(t.inputs[0], "reshape", "flatten") if t is not None else None
    if inner is None or list(t.attrs["perm"]) != [0, 2, 1]:
        return None
    # The reshapes' targets may be attributes or computed at run time: their result types
    # (symbolic dims too) say what they did.
    k = inner.inputs[0]
    ks, ms, os = k.type.shape, t.inputs[0].type.shape, kt.type.shape
    if ks is None or ms is None or os is None or len(ks) < 3 or len(ms) != 3 or len(os) < 3:
        return None
    if any(d is None for d in (*ks, *ms, *os)):
        return None
    if tuple(ks[-2:]) != tuple(ms[-2:]) or tuple(os[-2:]) != (ks[-1], ks[-2]):
        return None
    if tuple(ks) != (*os[:-2], os[-1], os[-2]):
        if not all(isinstance(d, int) for d in os):
            return None  # a regrouping of symbolic dims has no attribute to spell it
        # K's leading dims regroup (a grouped-query expand flattened into heads): the fused
        # op reads K reshaped to K^T's leading dims, the same row-major regrouping.
        w.info["k_shape"] = [*os[:-2], os[-1], os[-2]]
    return k


def _attention(w: _Walk) -> dict[str, Value] | None:
    """softmax(Q K^T * scale + mask) V, with the NaN guard (rows masked everywhere give 0)
    exporters add after the softmax."""
    if w.root.op != "matmul":
        return None
    p, v = w.root.inputs
    guard = w.node(p, "where")
    if guard is not None:
        isnan = w.node(guard.inputs[0], "isnan")
        if (
            isnan is None
            or not _near(guard.inputs[1], 0.0)
            or isnan.inputs[0] is not guard.inputs[2]
        ):
            return None
        w.const(guard.inputs[1])
        p = guard.inputs[2]
    sm = w.node(p, "softmax")
    if sm is None or sm.inputs[0].type.rank is None:
        return None
    if sm.attrs["axis"] % sm.inputs[0].type.rank != sm.inputs[0].type.rank - 1:
        return None
    s, mask = sm.inputs[0], None
    hide = w.node(s, "where")
    if hide is not None:
        # A bool mask keeps its True scores and sets the others to -inf (the op's own
        # decomposition, what codegen.tflite writes): softmax then weighs them exactly 0.
        keep, kept, hidden = hide.inputs
        if keep is None or keep.dtype is not DType.BOOL or _scalar(hidden) != -math.inf:
            return None
        if guard is not None or kept is None or hide.output.type.shape != kept.type.shape:
            return None  # a guard reads an additive mask; the mask must not broadcast scores
        w.const(hidden)
        s, mask = kept, keep
    elif (add := w.node(s, "add")) is not None:
        for a, b in (add.inputs, reversed(add.inputs)):
            if a.producer is not None and a.producer.op in ("matmul", "mul", "div"):
                s, mask = a, b
                break
        else:
            return None
        if add.output.type.shape != s.type.shape:
            return None  # the mask broadcasts the scores to a larger shape
    scale = 1.0
    post = w.node(s, "mul", "div")
    if post is not None:
        a, c = post.inputs
        if post.op == "mul" and _is_const(a):
            a, c = c, a
        cv = _scalar(c)
        if cv is None or cv == 0:
            return None
        w.const(c)
        scale = cv if post.op == "mul" else 1.0 / cv
        s = a
    qk = w.node(s, "matmul")
    if qk is None:
        return None
    q, kt = qk.inputs
    for side in ("q", "k"):
        val = q if side == "q" else kt
        pre = w.node(val, "mul")
        if pre is None:
            continue
        a, c = pre.inputs
        if _is_const(a):
            a, c = c, a
        cv = _scalar(c)
        if cv is None:
            w.nodes.remove(pre)
            continue
        w.const(c)
        scale *= cv
        if side == "q":
            q = a
        else:
            kt = a
    k = _key_of_transposed(w, kt)
    if k is None:
        return None
    rq, rk, rv = q.type.rank, len(w.info.get("k_shape", k.type.shape or ())), v.type.rank
    if rq is None or rq < 3 or rk != rq or rv != rq:
        return None
    if mask is not None and mask.dtype is not (DType.BOOL if hide is not None else q.dtype):
        return None
    found = {"q": q, "k": k, "v": v}
    if mask is not None:
        found["mask"] = mask
    w.info.update(scale=scale, guard=guard is not None)
    return found


# Largest constant mask examined for the causal pattern (elements of its last two dims).
_CAUSAL_CHECK_LIMIT = 1 << 22


def _is_causal_mask(mask: Value, q: Value, k: Value) -> bool:
    """A constant mask that is exactly causal attention's (``causal_mask_value``), broadcast
    over every leading dim."""
    qs, ks = q.type.shape, k.type.shape
    if qs is None or ks is None or mask.type.shape is None or mask.type.rank < 2:
        return False
    n, s = qs[-2], ks[-2]
    if type(n) is not int or type(s) is not int or tuple(mask.type.shape[-2:]) != (n, s):
        return False
    if any(d != 1 for d in mask.type.shape[:-2]) or n * s > _CAUSAL_CHECK_LIMIT:
        return False
    c = constant_value(mask)
    return c is not None and causal_mask_value(np.asarray(c).reshape(n, s))


def causal_mask_value(c: np.ndarray) -> bool:
    """Whether the [n, s] mask ``c`` is causal attention's (top-left aligned: query i sees
    keys j <= i): a bool mask True exactly there, or a float mask 0 there and -inf or the
    dtype's lowest value elsewhere (with a seen key on every row, the scores those hide get
    weight exp(lowest - max) = 0 either way, and no row is hidden everywhere)."""
    seen = np.tri(*c.shape, dtype=bool)
    if c.dtype == np.bool_:
        return bool(np.array_equal(c, seen))
    if not np.issubdtype(c.dtype, np.floating) or not np.all(c[seen] == 0):
        return False
    hidden = c[~seen]
    return bool(np.all((hidden == -np.inf) | (hidden == np.finfo(c.dtype).min)))


def _constant_mask(mask: Value, q: Value, k: Value) -> tuple[bool, bool] | None:
    """For a constant mask that changes no dim of the scores (each of its dims 1 or the
    scores' own), of at most _CAUSAL_CHECK_LIMIT elements: (it hides nothing, so attention
    without it is the same; no query row is hidden everywhere, so the guard is not needed).
    None for any other mask."""
    qs, ks, ms = q.type.shape, k.type.shape, mask.type.shape
    if qs is None or ks is None or ms is None or len(ms) > len(qs):
        return None
    scores = (*qs[:-1], ks[-2])
    if any(d != 1 and d != sd for d, sd in zip(ms[::-1], scores[::-1])):
        return None
    n = mask.type.numel()
    if n is None or n > _CAUSAL_CHECK_LIMIT:
        return None
    c = constant_value(mask)
    if c is None:
        return None
    c = np.asarray(c).reshape(tuple(ms))
    if c.ndim == 0:
        c = c.reshape(1)
    if c.dtype == np.bool_:
        return bool(c.all()), not bool((~c.any(axis=-1)).any())
    if not np.issubdtype(c.dtype, np.floating):
        return None
    return bool(np.all(c == 0)), not bool(np.any(np.max(c, axis=-1) == -np.inf))


def _attention_replace(b: Builder, m: Match) -> Value:
    q, k, mask = m["q"], m["k"], m.values.get("mask")
    if "k_perm" in m.info:
        k = b.op("transpose", k, perm=m.info["k_perm"])
    if "k_shape" in m.info:
        k = b.op("reshape", k, shape=m.info["k_shape"])
    if mask is not None and _is_causal_mask(mask, q, k):
        # The causal attention spelled with a constant mask: the op's own flag, which kernels
        # run without reading a mask (and no row is masked everywhere, so no guard).
        return b.op("attention", q, k, m["v"], None, is_causal=True, scale=float(m.info["scale"]))
    guard = m.info["guard"]
    if mask is not None and (facts := _constant_mask(mask, q, k)) is not None:
        # A constant mask that hides nothing is left out (kernels then read no mask), and
        # one that leaves every row a key needs no guard.
        if facts[0]:
            mask = None
        guard = guard and not facts[1]
    y = b.op("attention", q, k, m["v"], mask, scale=float(m.info["scale"]))
    if guard and mask is not None:
        # The source gives 0 for a query row masked everywhere (softmax of all -inf).
        npdt = q.dtype.to_numpy()
        top = b.op("reduce_max", mask, axes=[-1], keepdims=True)
        dead = b.op("eq", top, b.op("constant", value=np.array(-np.inf, npdt)))
        y = b.op("where", dead, b.op("constant", value=np.array(0, npdt)), y)
    return y


def _repeated_heads(w: _Walk, v: Value) -> tuple[Value, int] | None:
    """``(x, r)`` where ``v`` is the key or value heads of ``x`` [B, H, S, D] each repeated
    ``r`` times in a row (transformers' repeat_kv: unsqueeze at 2, expand to [B, H, r, S, D],
    reshape to [B, H * r, S, D]). Read from the types, so a shape given as an input or an
    attribute is the same; the row-major regrouping makes head j read x's head j // r."""
    r = w.node(v, "reshape", "flatten")
    e = w.node(r.inputs[0], "expand") if r is not None else None
    u = w.node(e.inputs[0], "unsqueeze") if e is not None else None
    if u is None:
        return None
    x = u.inputs[0]
    xs, us, es, rs = (t.type.shape for t in (x, u.output, e.output, v))
    if xs is None or us is None or es is None or rs is None or len(xs) != 4 or len(es) != 5:
        return None
    heads, rep = xs[1], es[2]
    if type(heads) is not int or type(rep) is not int or rep < 2:
        return None
    if tuple(us) != (*xs[:2], 1, *xs[2:]) or tuple(es) != (*xs[:2], rep, *xs[2:]):
        return None
    if tuple(rs) != (xs[0], heads * rep, *xs[2:]):
        return None
    return x, rep


def _gqa(w: _Walk) -> dict[str, Value] | None:
    """attention over keys and values whose heads were repeated to the query's: the op's own
    grouped-query form reads them unrepeated (torch's enable_gqa: query head j reads key head
    j // r, the same pairing). An attention already grouped over the repeated heads (an ONNX
    Attention groups implicitly; heads only known at run time read as grouped) pairs query
    head j with repeated head j // g, which is head j // (g r) of the unrepeated: the same
    grouped attention again."""
    a = w.root
    if a.op != "attention":
        return None
    q, k, v = a.inputs[:3]
    kr, vr = _repeated_heads(w, k), _repeated_heads(w, v)
    if kr is None or vr is None or kr[1] != vr[1] or q.type.rank != 4:
        return None
    found = {"q": q, "k": kr[0], "v": vr[0]}
    if len(a.inputs) > 3 and a.inputs[3] is not None:
        found["mask"] = a.inputs[3]
    w.info.update(is_causal=a.attrs["is_causal"], scale=a.attrs["scale"])
    return found


def _gqa_replace(b: Builder, m: Match) -> Value:
    return b.op(
        "attention",
        m["q"],
        m["k"],
        m["v"],
        m.values.get("mask"),
        is_causal=m.info["is_causal"],
        scale=m.info["scale"],
        enable_gqa=True,
    )


# ---------------------------------------------------------------------- softmax
def _reduced(w: _Walk, v: Value, op: str) -> tuple[Value, int] | None:
    """(x, axis) when ``v`` is ``op(x, [axis], keepdims=True)`` of one axis."""
    n = w.node(v, op)
    if n is None or not n.attrs.get("keepdims") or len(n.inputs) > 1 and n.inputs[1] is not None:
        return None
    axes = n.attrs.get("axes") or []
    r = n.inputs[0].type.rank
    if len(axes) != 1 or r is None:
        return None
    return n.inputs[0], axes[0] % r


def _shifted(w: _Walk, v: Value) -> tuple[Value, int] | None:
    """(x, axis) when ``v`` is ``x - max(x, axis, keepdims)`` (the stable softmax's shift)."""
    sub = w.node(v, "sub")
    if sub is None:
        return None
    x, m = sub.inputs
    found = _reduced(w, m, "reduce_max")
    if found is None or found[0] is not x:
        return None
    return x, found[1]


def _softmax(w: _Walk) -> dict[str, Value] | None:
    """exp(x - max(x)) / sum(exp(x - max(x))) along one axis."""
    if w.root.op != "div":
        return None
    e, total = w.root.inputs
    ex = w.node(e, "exp")
    found = _reduced(w, total, "reduce_sum")
    if ex is None or found is None or found[0] is not e:
        return None
    shifted = _shifted(w, ex.inputs[0])
    if shifted is None or shifted[1] != found[1]:
        return None
    w.info["axis"] = found[1]
    return {"x": shifted[0]}


def _log_softmax(w: _Walk) -> dict[str, Value] | None:
    """(x - max(x)) - log(sum(exp(x - max(x)))) along one axis."""
    if w.root.op != "sub":
        return None
    s, lg = w.root.inputs
    log = w.node(lg, "log")
    if log is None:
        return None
    found = _reduced(w, log.inputs[0], "reduce_sum")
    if found is None:
        return None
    ex = w.node(found[0], "exp")
    if ex is None or ex.inputs[0] is not s:
        return None
    shifted = _shifted(w, s)
    if shifted is None or shifted[1] != found[1]:
        return None
    w.info["axis"] = found[1]
    return {"x": shifted[0]}


def _silu_pattern() -> Pattern:
    b = Builder()
    x = Value("x", TensorType(DType.FLOAT32, None))
    y = b.op("mul", x, b.op("sigmoid", x))
    return Pattern("silu", [x], [y], replace=lambda b, m: b.op("silu", m["x"]), any_dtype=True)


# In priority order: linear first (its matmul is not attention's), the norms before their
# affine folds, attention last, then its keys and values unrepeated.
FUSIONS: list[Pattern] = [
    _linear_pattern(),
    _pretransposed_pattern(),
    _gemm_pattern(),
    _embedding_pattern(),
    _walking("gelu_erf", _gelu_erf, lambda b, m: b.op("gelu", m["x"])),
    _walking("gelu_tanh", _gelu_tanh, lambda b, m: b.op("gelu", m["x"], approximate="tanh")),
    _norm_pattern("layer_norm", _layer_norm),
    _norm_pattern("rms_norm", _rms_norm),
    _affine("layer_norm", 1),
    _affine("layer_norm", 2),
    _affine("rms_norm", 1),
    _silu_pattern(),
    _walking("softmax", _softmax, lambda b, m: b.op("softmax", m["x"], axis=m.info["axis"])),
    _walking(
        "log_softmax",
        _log_softmax,
        lambda b, m: b.op("log_softmax", m["x"], axis=m.info["axis"]),
    ),
    _walking("attention", _attention, _attention_replace),
    _walking("attention_gqa", _gqa, _gqa_replace),
]


def fuse(graph: Graph, patterns: list[Pattern] | None = None) -> Graph:
    """``graph`` with the spelled-out high-level ops fused (see FUSIONS); a new graph."""
    return rewrite(graph, FUSIONS if patterns is None else patterns)
