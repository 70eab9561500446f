"""Folds: a node absorbed into the conv or linear next to it, where the result is exact up to
the rounding of the folded constants. Exporters of deployed files make them (torch.onnx and
litert-torch fold BatchNorm; TFLite has no explicit padding for a conv but SAME), and
``msc diff``'s canonical form makes them too, so a file written with them reads back as
equivalent to the graph it came from.

- ``batch_norm(conv|linear(x, W, b))`` with constant statistics and a constant float W ->
  ``conv|linear(x, W * s, (b - mean) * s + beta)``, ``s = gamma / sqrt(var + eps)``
  (computed in float64, rounded once to W's dtype);
- ``conv(pad(x, q), padding=p)`` of a constant-mode pad by zeros of the spatial dims only,
  not negative (a crop), and a constant float filter -> ``conv(x, padding=p + q)``: a conv
  pads with zeros itself; ``max_pool(pad(x, -inf))`` alike (a max pool pads with -inf);
- ``adaptive_avg_pool(x, 1...)`` -> ``reduce_mean`` over those dims (keepdims): one MEAN,
  which the transpose sinking of ``msc.ops.layout`` moves through, where the pool's
  decomposition is a slice and a mean per dim, channels first.

    g2 = fold(g)                      # both, everywhere they apply
    g2 = rewrite(g, [BATCH_NORM])     # one of them

# NOTE: invariants
# - The conv or linear keeps its name, provenance and output value (a folded BatchNorm's
#   output takes its place under the BatchNorm output's name, as ``msc.rewrite`` does).
# - A weight only the folded pair reads keeps its name (``conv.weight`` holds the scaled
#   filter); one read elsewhere too stays, and the scaled copy is a new weight.
# - A conv whose filter comes from a dequantize (a quantized graph) is left alone.
# - Pure msc: no torch, no onnx.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from msc.ir.builder import Builder
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ops.nn import kernel_perm
from msc.ops.rewrite import Match, Pattern, constant_value, rewrite

__all__ = [
    "BATCH_NORM",
    "ZERO_PAD",
    "GLOBAL_POOL",
    "FOLDS",
    "fold",
    "find_batch_norm",
    "fold_batch_norm",
    "batch_norm_scale",
    "batch_norm_shift",
    "find_zero_pad",
    "find_max_pool_pad",
    "fold_pad",
    "fold_zero_pad",
    "MAX_POOL_PAD",
    "find_global_pool",
    "pool_to_mean",
    "find_whole_avg_pool",
    "whole_pool_to_mean",
]


def _float_const(v: Value | None) -> np.ndarray | None:
    c = constant_value(v)
    return c if c is not None and c.dtype.kind == "f" else None


def _out_axis(p: Node, w: np.ndarray) -> int | None:
    """The axis of a conv's / linear's weight that holds its output channels, or None where
    a batch norm's dim 1 is not those channels (a channels-last conv)."""
    if p.op == "linear":
        return 0
    if p.attrs.get("data_layout", "NCHW") != "NCHW":
        return None
    return kernel_perm(p.attrs.get("kernel_layout", "OIHW"), w.ndim).index(0)


def find_batch_norm(bn: Node) -> Match | None:
    """``batch_norm(conv|linear(...))`` that ``fold_batch_norm`` folds, else None."""
    if bn.op != "batch_norm" or bn.inputs[0] is None:
        return None
    p = bn.inputs[0].producer
    if p is None or p.op not in ("conv", "linear"):
        return None
    w, mean, var = (
        _float_const(p.inputs[1]),
        constant_value(bn.inputs[3]),
        constant_value(bn.inputs[4]),
    )
    if w is None or mean is None or var is None:
        return None
    axis = _out_axis(p, w)
    if axis is None or mean.shape != (w.shape[axis],) or var.shape != mean.shape:
        return None
    if p.op == "linear" and len(p.outputs[0].type.shape or ()) != 2:
        return None  # batch_norm normalizes dim 1: a linear's features only for [N, C]
    given = [v for v in (*p.inputs[2:3], *bn.inputs[1:3]) if v is not None]
    if any(constant_value(v) is None for v in given):
        return None
    return Match(bn, [p, bn], {"x": p.inputs[0]}, anchor=p, info={"op": p.op, "axis": axis})


def _new_weight(g: Graph, base: str, data: np.ndarray) -> Weight:
    name, k = base, 1
    while name in g.weights:
        name, k = f"{base}_{k}", k + 1
    return g.add_weight(name, data, role="parameter")


def _weight_in_place(g: Graph, old: Value | None, m: Match, data: np.ndarray, name: str) -> Weight:
    """``data`` as a weight: under ``old``'s name when only the match reads ``old`` (the conv
    whose BatchNorm was folded keeps ``conv.weight``), else a new weight ``name``."""
    if isinstance(old, Weight) and all(u in m.nodes for u, _ in old.uses):
        del g.weights[old.name]
        return g.add_weight(old.name, data, role=old.role, aliases=old.aliases)
    return _new_weight(g, name, data)


def batch_norm_scale(gamma: np.ndarray | None, var: np.ndarray, eps: float) -> np.ndarray:
    """BatchNorm's per-channel factor ``gamma / sqrt(var + eps)``, in float64 (a weight it
    scales is rounded once, to its own dtype)."""
    root = np.sqrt(var.astype(np.float64) + eps)
    return 1.0 / root if gamma is None else gamma.astype(np.float64) / root


def batch_norm_shift(
    bias: np.ndarray | None, mean: np.ndarray, scale: np.ndarray, beta: np.ndarray | None
) -> np.ndarray:
    """The bias of a layer ``y + bias`` with BatchNorm folded in, ``(bias - mean) * scale +
    beta``, in float64 (no bias, no beta: zeros)."""
    b = np.zeros(scale.shape) if bias is None else np.asarray(bias, np.float64)
    out = (b - mean.astype(np.float64)) * scale
    return out if beta is None else out + beta.astype(np.float64)


def fold_batch_norm(b: Builder, m: Match) -> Value:
    """The replacement of a ``find_batch_norm`` match: the conv / linear, scaled."""
    bn, p, g = m.root, m.anchor, m.graph
    assert p is not None and g is not None
    w = _float_const(p.inputs[1])
    assert w is not None
    bias = p.inputs[2] if len(p.inputs) > 2 else None
    gamma, beta, mean, var = (constant_value(v) for v in bn.inputs[1:5])
    axis = m.info["axis"]
    c = w.shape[axis]
    s = batch_norm_scale(gamma, var, bn.attrs["eps"])  # type: ignore[arg-type]
    view = [1] * w.ndim
    view[axis] = c
    w2 = (w.astype(np.float64) * s.reshape(view)).astype(w.dtype)
    b0 = None if bias is None else constant_value(bias)
    b2 = batch_norm_shift(b0, mean, s, beta).astype(w.dtype)  # type: ignore[arg-type]
    base = (p.inputs[1].name or "w").removesuffix(".weight")  # type: ignore[union-attr]
    nw = _weight_in_place(g, p.inputs[1], m, w2, f"{base}.weight")
    nb = _weight_in_place(g, bias, m, b2, f"{base}.bias")
    return b.op(p.op, m["x"], nw, nb, **p.attrs)


def _spatial(conv: Node, rank: int) -> list[int]:
    if conv.attrs.get("data_layout", "NCHW") == "NHWC":
        return list(range(1, rank - 1))
    return list(range(2, rank))


def _padded(n: Node, fill: float) -> Match | None:
    """``n(pad(x, q))`` where the pad is constant-mode by ``fill`` over ``n``'s spatial dims
    only, not negative (a crop): the match, with ``n``'s padding plus q in ``info``."""
    p = n.inputs[0].producer if n.inputs[0] is not None else None
    if p is None or p.op != "pad" or p.attrs["mode"] != "constant" or p.attrs["value"] != fill:
        return None
    x = p.inputs[0]
    pads = p.attrs["pads"]
    if x is None or pads is None or any(v is not None for v in p.inputs[1:]):
        return None  # pads or a fill value computed at run time
    r = len(pads) // 2
    spatial = _spatial(n, r)
    if any(pads[i] or pads[r + i] for i in range(r) if i not in spatial):
        return None  # a pad of the batch or the channels
    if any(v < 0 for v in pads):
        return None  # a crop
    k = len(spatial)
    own = list(n.attrs["padding"]) or [0] * (2 * k)
    padding = [own[j] + pads[i] for j, i in enumerate(spatial)]
    padding += [own[k + j] + pads[r + i] for j, i in enumerate(spatial)]
    return Match(n, [p, n], {"x": x}, info={"padding": padding})


def find_zero_pad(conv: Node) -> Match | None:
    """``conv(pad(x))`` that ``fold_pad`` folds, else None."""
    if conv.op != "conv" or conv.inputs[0] is None or _float_const(conv.inputs[1]) is None:
        return None
    return _padded(conv, 0.0)


def find_max_pool_pad(pool: Node) -> Match | None:
    """``max_pool(pad(x, -inf))`` that ``fold_pad`` folds (a max pool's padding is -inf),
    else None. Not with ceil_mode (where the padding also decides the last window) nor
    indices (they would count the pad)."""
    if pool.op != "max_pool" or pool.attrs["ceil_mode"] or pool.attrs["return_indices"]:
        return None
    return _padded(pool, float("-inf"))


def fold_pad(b: Builder, m: Match) -> Value:
    """The replacement of a ``find_zero_pad`` / ``find_max_pool_pad`` match: the node,
    padding its input itself."""
    n = m.root
    attrs = {**n.attrs, "padding": m.info["padding"]}
    return b.op(n.op, m["x"], *n.inputs[1:], **attrs)


fold_zero_pad = fold_pad


def find_global_pool(n: Node) -> Match | None:
    """``adaptive_avg_pool`` to 1 in every pooled dim, of a known rank, else None."""
    if n.op != "adaptive_avg_pool" or any(s != 1 for s in n.attrs["output_size"]):
        return None
    if n.inputs[0] is None or n.inputs[0].type.shape is None:
        return None
    return Match(n, [n], {"x": n.inputs[0]})


def pool_to_mean(b: Builder, m: Match) -> Value:
    """The replacement of a ``find_global_pool`` match: the mean over the pooled dims."""
    rank = len(m["x"].type.shape)  # type: ignore[arg-type]
    k = len(m.root.attrs["output_size"])
    return b.op("reduce_mean", m["x"], axes=list(range(rank - k, rank)), keepdims=True)


def find_whole_avg_pool(n: Node) -> Match | None:
    """``avg_pool`` of one window per pooled dim that covers its whole (static) input, no
    padding, no divisor_override: PyTorch divides by the input's size there (ceil_mode's
    window past the end included), so it is the mean. EfficientNet's pooler is a 1280-wide
    ceil_mode pool over 7 x 7, which codegen.tflite writes as a 7 x 7 one."""
    if n.op != "avg_pool" or n.attrs["divisor_override"] is not None or any(n.attrs["padding"]):
        return None
    x, y = n.inputs[0], n.outputs[0]
    if x is None or x.type.shape is None or y.type.shape is None:
        return None
    spatial = _spatial(n, len(x.type.shape))
    sizes = [x.type.shape[i] for i in spatial]
    if not all(isinstance(d, int) for d in sizes) or any(y.type.shape[i] != 1 for i in spatial):
        return None
    if any(k < d for k, d in zip(n.attrs["kernel"], sizes)):
        return None
    return Match(n, [n], {"x": x}, info={"axes": spatial})


def whole_pool_to_mean(b: Builder, m: Match) -> Value:
    """The replacement of a ``find_whole_avg_pool`` match."""
    return b.op("reduce_mean", m["x"], axes=m.info["axes"], keepdims=True)


BATCH_NORM = Pattern("batch_norm folded", matcher=find_batch_norm, replace=fold_batch_norm)
ZERO_PAD = Pattern("zero pad folded into conv", matcher=find_zero_pad, replace=fold_pad)
MAX_POOL_PAD = Pattern("-inf pad folded into max_pool", matcher=find_max_pool_pad, replace=fold_pad)
GLOBAL_POOL = Pattern("global pool as mean", matcher=find_global_pool, replace=pool_to_mean)
FOLDS = [BATCH_NORM, ZERO_PAD, MAX_POOL_PAD, GLOBAL_POOL]


def fold(graph: Graph, done: Counter[str] | None = None) -> Graph:
    """``graph`` (a copy) with every fold of ``FOLDS`` made; ``done`` counts them by the
    pattern's name."""
    patterns = FOLDS
    if done is not None:
        patterns = [_counting(p, done) for p in FOLDS]
    return rewrite(graph, patterns)


def _counting(p: Pattern, done: Counter[str]) -> Pattern:
    def replace(b: Builder, m: Match) -> Value:
        out = p.replace(b, m)  # type: ignore[operator]
        done[p.name] += 1
        return out

    return Pattern(p.name, replace=replace, matcher=p.matcher)
