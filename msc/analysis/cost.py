"""FLOPs and MACs per node, with one documented formula per op family.

A MAC is one multiply-accumulate; a FLOP is one floating-point operation, so an op built from
MACs costs 2 FLOPs per MAC. Shapes below are the node's input/output shapes; ``numel(y)`` is
the output element count, ``prod(k)`` the kernel volume. Symbolic dims stay symbols, so a count
reads ``2*batch*...`` until dims are bound.

==========================  ==========================================  =====================
op                          MACs                                        FLOPs
==========================  ==========================================  =====================
conv                        numel(y) * C_in/groups * prod(k)            2*MACs (+ numel(y)
                                                                        with bias)
conv_transpose              numel(x) * C_out/groups * prod(k)           2*MACs (+ numel(y)
                                                                        with bias)
matmul [.., M, K]x[.., K,N] prod(batch) * M * K * N                     2*MACs
linear  x[.., K], W[N, K]   prod(x.shape[:-1]) * K * N                  2*MACs (+ numel(y))
gemm   [M, K] x [K, N]      M * K * N                                   2*MACs (+ M*N with c)
einsum                      product of the sizes of every index letter  2*MACs
attention q[..,L,E],        prod(batch) * L * S * (E + Ev)              2*MACs + 5*prod(batch)
  k[..,S,E], v[..,S,Ev]     (q @ k^T, then probabilities @ v)           *L*S (scale, softmax)
batch_norm                  0                                           2*numel(x) (inference:
                                                                        one scale, one shift)
layer/group/instance_norm   0                                           5*numel(x) (mean, sub,
                                                                        square, var, scale)
                                                                        + numel(x) per affine
                                                                        weight and bias
rms_norm                    0                                           3*numel(x) (+ numel(x)
                                                                        with weight)
softmax, log_softmax        0                                           5*numel(x) (max, sub,
                                                                        exp, sum, divide)
elementwise, activations,   0                                           numel(y)
  binary, compare
reductions (reduce_*, var,  0                                           numel(x)
  cumsum, arg*, topk, sort)
max/avg/lp_pool             0                                           numel(y) * prod(k)
adaptive pools              0                                           numel(x)
lrn                         0                                           numel(x) * size
resize                      0                                           numel(y) (0 when
                                                                        nearest)
shape, index, create ops    0                                           0 (data movement)
if (control flow)           the costlier branch                         the costlier branch
==========================  ==========================================  =====================

A causal or masked attention is counted in full (masked scores are still computed by the
usual kernels); ``alpha``/``beta`` scaling of gemm is not counted.

# NOTE: a formula that meets an unknown dim (``None``) gives an unknown count (``None``), never
# a guess; an op with no formula is reported as "not counted" rather than as zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from msc.analysis.symbolic import Poly, dim_poly, numel, product
from msc.ir.graph import Graph, Node
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.nn import kernel_perm

__all__ = ["Cost", "node_cost", "ZERO_COST_CATEGORIES"]


@dataclass(frozen=True, slots=True)
class Cost:
    """FLOPs and MACs of one node; ``None`` where a dim is unknown."""

    flops: Poly | None
    macs: Poly | None


ZERO = Cost(Poly(), Poly())
UNKNOWN = Cost(None, None)
ZERO_COST_CATEGORIES = frozenset({"shape", "index", "create"})
_PER_OUTPUT = frozenset({"elementwise", "activation", "binary", "compare"})

_Fn = Callable[[Node], Cost]
_FORMULAS: dict[str, _Fn] = {}


def _formula(*ops: str) -> Callable[[_Fn], _Fn]:
    def deco(fn: _Fn) -> _Fn:
        for op in ops:
            if op in _FORMULAS:
                raise ValueError(f"cost formula for {op!r} is registered twice")
            _FORMULAS[op] = fn
        return fn

    return deco


def _t(node: Node, i: int) -> TensorType | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None else v.type


def _mul(*xs: Poly | None) -> Poly | None:
    out = Poly.of(1)
    for x in xs:
        if x is None:
            return None
        out = out * x
    return out


def _flops_from_macs(macs: Poly | None, extra: Poly | None = None) -> Cost:
    if macs is None:
        return UNKNOWN
    flops = macs * 2
    if extra is not None:
        flops = flops + extra
    return Cost(flops, macs)


def _per_elem(t: TensorType | None, k: int) -> Cost:
    n = None if t is None else numel(t)
    return UNKNOWN if n is None else Cost(n * k, Poly())


@_formula("conv")
def _conv(node: Node) -> Cost:
    y, w = node.outputs[0].type, _t(node, 1)
    if w is None or w.shape is None:
        return UNKNOWN
    # every filter dim but the output channels' (first, or where its kernel layout puts them)
    o = kernel_perm(node.attrs.get("kernel_layout", "OIHW"), len(w.shape)).index(0)
    per = [d for i, d in enumerate(w.shape) if i != o]
    macs = _mul(numel(y), product(per))
    bias = numel(y) if _t(node, 2) is not None else None
    return _flops_from_macs(macs, bias)


@_formula("conv_transpose")
def _conv_transpose(node: Node) -> Cost:
    x, w, y = _t(node, 0), _t(node, 1), node.outputs[0].type
    if x is None or w is None or w.shape is None:
        return UNKNOWN
    macs = _mul(numel(x), product(w.shape[1:]))
    bias = numel(y) if _t(node, 2) is not None else None
    return _flops_from_macs(macs, bias)


@_formula("matmul")
def _matmul(node: Node) -> Cost:
    a, y = _t(node, 0), node.outputs[0].type
    if a is None or a.shape is None or not a.shape:
        return UNKNOWN
    # numel(y) covers batch * M * N; one more factor of K.
    return _flops_from_macs(_mul(numel(y), dim_poly(a.shape[-1])))


@_formula("linear")
def _linear(node: Node) -> Cost:
    x, y = _t(node, 0), node.outputs[0].type
    if x is None or x.shape is None or not x.shape:
        return UNKNOWN
    macs = _mul(numel(y), dim_poly(x.shape[-1]))
    return _flops_from_macs(macs, numel(y) if _t(node, 2) is not None else None)


@_formula("gemm")
def _gemm(node: Node) -> Cost:
    a, y = _t(node, 0), node.outputs[0].type
    if a is None or a.shape is None or len(a.shape) != 2:
        return UNKNOWN
    k = a.shape[0] if node.attrs["trans_a"] else a.shape[1]
    macs = _mul(numel(y), dim_poly(k))
    return _flops_from_macs(macs, numel(y) if _t(node, 2) is not None else None)


@_formula("einsum")
def _einsum(node: Node) -> Cost:
    eq = node.attrs["equation"].replace(" ", "")
    lhs = eq.partition("->")[0]
    sizes: dict[str, Poly | None] = {}
    for term, v in zip(lhs.split(","), node.inputs):
        if v is None or v.shape is None or "..." in term:
            return UNKNOWN
        for letter, d in zip(term, v.shape):
            if sizes.get(letter) is None or d != 1:
                sizes[letter] = dim_poly(d)
    macs = _mul(*sizes.values()) if len(node.inputs) > 1 else Poly()
    return _flops_from_macs(macs)


@_formula("attention")
def _attention(node: Node) -> Cost:
    q, k, v = _t(node, 0), _t(node, 1), _t(node, 2)
    if any(t is None or t.shape is None or len(t.shape) < 2 for t in (q, k, v)):
        return UNKNOWN
    # Output [..., L, Ev]: batch*L from it; S from key, E from query, Ev from value.
    batch_l = product(q.shape[:-1])  # type: ignore[union-attr]
    s, e, ev = dim_poly(k.shape[-2]), dim_poly(q.shape[-1]), dim_poly(v.shape[-1])  # type: ignore[union-attr]
    if batch_l is None or s is None or e is None or ev is None:
        return UNKNOWN
    macs = batch_l * s * (e + ev)
    return Cost(macs * 2 + batch_l * s * 5, macs)


@_formula("batch_norm")
def _batch_norm(node: Node) -> Cost:
    return _per_elem(_t(node, 0), 2)


@_formula("layer_norm", "group_norm", "instance_norm")
def _norm(node: Node) -> Cost:
    affine = sum(1 for i in (1, 2) if _t(node, i) is not None)
    return _per_elem(_t(node, 0), 5 + affine)


@_formula("rms_norm")
def _rms_norm(node: Node) -> Cost:
    return _per_elem(_t(node, 0), 3 + (1 if _t(node, 1) is not None else 0))


@_formula("softmax", "log_softmax")
def _softmax(node: Node) -> Cost:
    return _per_elem(_t(node, 0), 5)


@_formula("max_pool", "avg_pool", "lp_pool")
def _pool(node: Node) -> Cost:
    n = numel(node.outputs[0].type)
    k = product(node.attrs["kernel"])
    return UNKNOWN if n is None or k is None else Cost(n * k, Poly())


@_formula("adaptive_avg_pool", "adaptive_max_pool")
def _adaptive_pool(node: Node) -> Cost:
    return _per_elem(_t(node, 0), 1)


@_formula("lrn")
def _lrn(node: Node) -> Cost:
    return _per_elem(_t(node, 0), node.attrs["size"])


@_formula("resize")
def _resize(node: Node) -> Cost:
    if node.attrs["mode"] == "nearest":
        return ZERO
    return _per_elem(node.outputs[0].type, 1)


@_formula("embedding", "pixel_shuffle")
def _data_movement(node: Node) -> Cost:
    return ZERO


@_formula("if")
def _if(node: Node) -> Cost:
    best: Cost | None = None
    for sub in node.subgraphs():
        c = graph_cost(sub)
        if c.flops is None:
            return UNKNOWN
        if best is None or c.flops.evaluate({}) > best.flops.evaluate({}):  # type: ignore[union-attr]
            best = c
    return best or ZERO


def graph_cost(g: Graph) -> Cost:
    """The total over a graph's nodes (unknown if any node's count is unknown)."""
    flops, macs = Poly(), Poly()
    for n in g.nodes:
        c = node_cost(n)
        if c is None or c.flops is None or c.macs is None:
            return UNKNOWN
        flops, macs = flops + c.flops, macs + c.macs
    return Cost(flops, macs)


def node_cost(node: Node) -> Cost | None:
    """The cost of ``node``: a ``Cost`` (fields None if a dim is unknown), or None when the op
    has no formula ("not counted")."""
    fn = _FORMULAS.get(node.op)
    if fn is not None:
        return fn(node)
    category = registry.get(node.op).category if node.op in registry else ""
    if category in ZERO_COST_CATEGORIES:
        return ZERO
    if category in _PER_OUTPUT:
        # identity and cast move data; count them as zero work.
        if node.op in ("identity", "cast"):
            return ZERO
        return _per_elem(node.outputs[0].type, 1)
    if category == "reduce":
        return _per_elem(_t(node, 0), 1)
    return None
