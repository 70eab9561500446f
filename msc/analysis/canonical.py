"""A canonical form for comparing graphs: the rewrites exporters are known to make, undone.

Two files of one model differ in ways that change nothing: torch.onnx folds BatchNorm into
the conv before it, writes ``linear`` as ``Gemm`` or as ``MatMul`` + ``Add``, ``embedding`` as
``Gather``, adaptive average pooling to 1 as ``ReduceMean``/``GlobalAveragePool`` and
``flatten`` as ``Reshape``. ``canonicalize`` applies each rewrite to a copy of a graph, in one
direction, and counts what it did, so ``diff`` can say "equivalent up to N known rewrites"
and compare what is left.

- ``constants_to_weights``: ``constant`` nodes -> weights; ``fold_constants``: nodes that
  read only weights are computed -> weights;

Passes (each a function of the graph and a counter; a pattern rewrite in ``msc.rewrite``'s
sense, written out here until that API lands):

- ``fold_batch_norm``: ``batch_norm(conv|linear(x, W, b))`` with constant statistics ->
  ``conv|linear(x, W * s, (b - mean) * s + beta)``, ``s = gamma / sqrt(var + eps)``;
- ``gemm_to_linear``: ``gemm(x, W, c)`` (alpha = beta = 1, no transposed A) -> ``linear``;
- ``matmul_add_to_linear``: ``matmul(x, W)`` (+ ``add`` of a 1-d bias) -> ``linear(x, W^T, b)``;
- ``gather_to_embedding``: ``gather(W, ids, axis=0)`` of a 2-d weight -> ``embedding``;
- ``adaptive_pool_to_mean``: ``adaptive_avg_pool(x, 1...)`` -> ``reduce_mean`` (keepdims);
- ``reshape_to_flatten``: ``reshape`` of [N, ...] to [N, prod] -> ``flatten(start_axis=1)``.

# NOTE: invariants. A rewritten pattern's result keeps the value (and so the name) of the
# pattern's last node, so every value of the canonical graph is a value of the original one:
# ``verify`` can read it from the model running natively. Weights a pass computes are new
# arrays on the copy; the original graph is never modified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from msc.ir.graph import Graph, Node, Value, Weight

__all__ = ["Canonical", "canonicalize", "PASSES", "copy_graph"]


@dataclass
class Canonical:
    """A graph in canonical form and the rewrites that made it (description -> count)."""

    graph: Graph
    rewrites: Counter[str] = field(default_factory=Counter)


def copy_graph(g: Graph) -> Graph:
    """A copy of ``g`` (text round trip) whose weights share ``g``'s data."""
    from msc.text import from_text, to_text

    g2 = from_text(to_text(g))
    for w in g2.weights.values():
        src = g.weights[w.name]
        if src.has_data:
            w.set_data(src.storage)
    return g2


# ------------------------------------------------------------------------------ helpers
def _const(v: Value | None) -> np.ndarray | None:
    return v.numpy() if isinstance(v, Weight) and v.has_data else None


def _only_use(v: Value, g: Graph) -> Node | None:
    """The one node reading ``v`` when it has exactly one use and is not a graph output."""
    if len(v.uses) != 1 or any(o is v for o in g.outputs):
        return None
    return v.uses[0][0]


def _new_weight(g: Graph, base: str, data: np.ndarray) -> Weight:
    name, k = base, 1
    while name in g.weights:
        name, k = f"{base}_{k}", k + 1
    return g.add_weight(name, data, role="parameter")


def _set_or_new(g: Graph, w: Value | None, user: Node, role: str, data: np.ndarray) -> Weight:
    """``w`` holding ``data`` when ``user`` is its only reader, else a new weight named after
    ``user``'s weight (``conv1.weight`` -> ``conv1.bias``)."""
    if isinstance(w, Weight) and len(w.uses) == 1 and w.uses[0][0] is user:
        w.set_data(data)
        return w
    wname = user.inputs[1].name or "w"  # type: ignore[union-attr]
    return _new_weight(g, f"{wname.removesuffix('.weight')}.{role}", data)


def _set_op(g: Graph, n: Node, op: str, attrs: dict) -> None:
    """Turn ``n`` into ``op`` with ``attrs`` (normalised by the op's schema, as a frontend's)."""
    n.op = op
    n.attrs = g.opset.get(op).normalize_attrs(attrs)


# Ops whose ``axis`` counts the dims of their first input.
_AXIS_OPS = {"layer_norm", "softmax", "log_softmax", "concat", "gather", "gather_elements"}


def normalize_axes(g: Graph, done: Counter[str]) -> None:
    """Axes as non-negative (and reduction axes sorted): ``[-1, -2]`` is ``[2, 3]`` of a 4-d
    input. An embedding's ``padding_idx`` (a training-only fact) is dropped. Spellings, not
    rewrites: not counted."""
    for n in g.nodes:
        x = n.inputs[0] if n.inputs else None
        rank = len(x.type.shape) if x is not None and x.type.shape is not None else None
        if n.op in _AXIS_OPS and rank and isinstance(n.attrs.get("axis"), int):
            if n.attrs["axis"] < 0:
                _set_op(g, n, n.op, {**n.attrs, "axis": n.attrs["axis"] % rank})
        if n.op == "embedding" and n.attrs.get("padding_idx") is not None:
            _set_op(g, n, n.op, {**n.attrs, "padding_idx": None})
        axes = n.attrs.get("axes") if n.op.startswith("reduce_") else None
        x = n.inputs[0] if n.inputs else None
        if axes is None or x is None or x.type.shape is None:
            continue
        rank = len(x.type.shape)
        new = sorted(a % rank for a in axes)
        if list(axes) != new:
            _set_op(g, n, n.op, {**n.attrs, "axes": new})


def _replace(g: Graph, old: Value, new: Value) -> None:
    """Route every use of ``old`` (and graph outputs) to ``new``, which takes ``old``'s name:
    the canonical graph keeps the names of the pattern's last node."""
    old.replace_all_uses_with(new)
    g.outputs = [new if o is old else o for o in g.outputs]
    name = old.name
    g.remove_node(old.producer)  # type: ignore[arg-type]
    g._taken.discard(new.name)  # noqa: SLF001 - renaming a value this module owns
    new.name = name
    g._taken.add(name)  # noqa: SLF001
    new.type = old.type


# ------------------------------------------------------------------------------ passes
def constants_to_weights(g: Graph, done: Counter[str]) -> None:
    """``constant`` nodes (a legacy export's ``Identity`` of an initializer, folded literals)
    become weights, as the other exporter stored them."""
    outs = {id(v) for v in g.outputs}
    for n in [n for n in g.nodes if n.op == "constant"]:
        v = n.outputs[0]
        data = n.attrs.get("value")
        if id(v) in outs or not isinstance(data, np.ndarray):
            continue
        w = _new_weight(g, v.name or "constant", data)
        v.replace_all_uses_with(w)
        g.remove_node(n)
        done["constants folded"] += 1


_FOLD_LIMIT = 1 << 20  # elements: a constant larger than this stays computed


def fold_constants(g: Graph, done: Counter[str]) -> None:
    """Nodes that read only weights (and other such nodes) are computed, in one run of one
    graph through ``codegen.torch`` as verify runs an msc graph, and their results used by
    the rest become weights: the constant subgraphs one exporter folds (a position-id slice,
    an attention mask) and another keeps."""
    from msc.analysis.model import run_graph
    from msc.ops.custom import parse_custom

    outs = {id(v) for v in g.outputs}
    known: set[int] = set()  # ids of values computable from weights alone
    fold: list[Node] = []
    for n in g.nodes:
        if (
            "rand" in n.op  # random_normal, rand_like...: not a constant
            or n.op == "constant"
            or parse_custom(n.op) is not None
            or any(True for _ in n.subgraphs())
            or not all(
                v is None or (isinstance(v, Weight) and v.has_data) or id(v) in known
                for v in n.inputs
            )
            or not all(v.type.is_static and _size(v.type.shape) <= _FOLD_LIMIT for v in n.outputs)
            or any(id(v) in outs for v in n.outputs)
        ):
            continue
        fold.append(n)
        known.update(id(v) for v in n.outputs)
    if not fold:
        return
    one = Graph("fold")
    image: dict[int, Value] = {}
    for n in fold:
        ins: list[Value | None] = []
        for v in n.inputs:
            if v is None:
                ins.append(None)
            elif id(v) in image:
                ins.append(image[id(v)])
            else:
                w = one.weights.get(v.name) or one.add_weight(v.name, v.storage, v.type)  # type: ignore[union-attr, arg-type]
                ins.append(w)
        node = one.add_node(n.op, ins, dict(n.attrs), output_types=[v.type for v in n.outputs])
        image.update(zip((id(v) for v in n.outputs), node.outputs))
    folded = {id(n) for n in fold}
    needed = [v for n in fold for v in n.outputs if any(id(u) not in folded for u, _ in v.uses)]
    if not needed:
        return
    one.set_outputs([image[id(v)] for v in needed])
    try:
        values, _ = run_graph(one, [])
    except Exception:  # an op the runner cannot compute here: leave them computed
        return
    for v, data in zip(needed, values):
        w = _new_weight(g, v.name or "constant", np.asarray(data))
        v.replace_all_uses_with(w)
    g.remove_nodes(fold)  # what read them now reads weights
    done["constants folded"] += len(fold)


def _size(shape) -> int:
    return int(np.prod([int(d) for d in shape])) if shape else 1


def fold_batch_norm(g: Graph, done: Counter[str]) -> None:
    for bn in [n for n in g.nodes if n.op == "batch_norm"]:
        x = bn.inputs[0]
        p = x.producer if x is not None else None
        if p is None or p.op not in ("conv", "linear") or _only_use(x, g) is not bn:
            continue
        gamma, beta, mean, var = (_const(v) for v in bn.inputs[1:5])
        w = _const(p.inputs[1])
        if w is None or mean is None or var is None:
            continue
        b = _const(p.inputs[2]) if len(p.inputs) > 2 and p.inputs[2] is not None else None
        if len(p.inputs) > 2 and p.inputs[2] is not None and b is None:
            continue
        c = w.shape[0]
        gamma = np.ones(c) if gamma is None else gamma.astype(np.float64)
        beta = np.zeros(c) if beta is None else beta.astype(np.float64)
        s = gamma / np.sqrt(var.astype(np.float64) + bn.attrs["eps"])
        w2 = (w.astype(np.float64) * s.reshape((c,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = np.zeros(c) if b is None else b.astype(np.float64)
        b2 = ((b0 - mean.astype(np.float64)) * s + beta).astype(w.dtype)
        nw = _set_or_new(g, p.inputs[1], p, "weight", w2)
        nb = _set_or_new(g, p.inputs[2] if len(p.inputs) > 2 else None, p, "bias", b2)
        p.inputs = [p.inputs[0], nw, nb]
        _replace(g, bn.outputs[0], p.outputs[0])
        done[f"batch_norm folded into {p.op}"] += 1


def gemm_to_linear(g: Graph, done: Counter[str]) -> None:
    for n in [n for n in g.nodes if n.op == "gemm"]:
        a = n.attrs
        w = _const(n.inputs[1])
        c = n.inputs[2] if len(n.inputs) > 2 else None
        if w is None or a["alpha"] != 1.0 or a["trans_a"] or w.ndim != 2:
            continue
        if c is not None and (a["beta"] != 1.0 or len(c.type.shape or ()) != 1):
            continue
        wt = n.inputs[1]
        if not a["trans_b"]:
            wt = _new_weight(g, f"{n.inputs[1].name}.T", np.ascontiguousarray(w.T))
        _set_op(g, n, "linear", {})
        n.inputs = [n.inputs[0], wt, c]
        done["gemm -> linear"] += 1


def matmul_add_to_linear(g: Graph, done: Counter[str]) -> None:
    for n in [n for n in g.nodes if n.op == "matmul"]:
        w = _const(n.inputs[1])
        x = n.inputs[0]
        if w is None or w.ndim != 2 or x is None or isinstance(x, Weight):
            continue
        name = n.inputs[1].name  # type: ignore[union-attr]
        base = name.removesuffix(".weight_t") if name.endswith(".weight_t") else name + ".T"
        wt = _new_weight(g, base + (".weight" if name.endswith(".weight_t") else ""), w.T.copy())
        add = _only_use(n.outputs[0], g)
        bias = None
        if add is not None and add.op == "add":
            other = add.inputs[1] if add.inputs[0] is n.outputs[0] else add.inputs[0]
            bv = _const(other)
            if bv is not None and bv.ndim == 1 and bv.shape[0] == w.shape[1]:
                bias = other
        _set_op(g, n, "linear", {})
        n.inputs = [x, wt, bias]
        if bias is not None:
            _replace(g, add.outputs[0], n.outputs[0])  # type: ignore[union-attr]
            done["matmul + add -> linear"] += 1
        else:
            done["matmul -> linear"] += 1


def gather_to_embedding(g: Graph, done: Counter[str]) -> None:
    for n in [n for n in g.nodes if n.op == "gather"]:
        w = _const(n.inputs[0])
        if w is None or w.ndim != 2 or n.attrs["axis"] != 0:
            continue
        _set_op(g, n, "embedding", {"padding_idx": None})
        done["gather -> embedding"] += 1


def adaptive_pool_to_mean(g: Graph, done: Counter[str]) -> None:
    for n in [n for n in g.nodes if n.op == "adaptive_avg_pool"]:
        if any(s != 1 for s in n.attrs["output_size"]):
            continue
        rank = len(n.inputs[0].type.shape or ())  # type: ignore[union-attr]
        k = len(n.attrs["output_size"])
        _set_op(g, n, "reduce_mean", {"axes": list(range(rank - k, rank)), "keepdims": True})
        done["adaptive_avg_pool -> reduce_mean"] += 1


def reshape_to_flatten(g: Graph, done: Counter[str]) -> None:
    for n in [n for n in g.nodes if n.op == "reshape"]:
        x, y = n.inputs[0], n.outputs[0]
        xs, ys = (x.type.shape if x is not None else None), y.type.shape
        if xs is None or ys is None or len(xs) < 3 or len(ys) != 2 or xs[0] != ys[0]:
            continue
        rest = xs[1:]
        if not all(isinstance(d, int) for d in rest) or ys[1] != int(np.prod(rest)):
            continue
        _set_op(g, n, "flatten", {"start_axis": 1, "end_axis": -1})
        n.inputs = [x]
        done["reshape -> flatten"] += 1


PASSES: tuple[Callable[[Graph, Counter[str]], None], ...] = (
    constants_to_weights,
    fold_constants,
    fold_batch_norm,
    gemm_to_linear,
    matmul_add_to_linear,
    gather_to_embedding,
    adaptive_pool_to_mean,
    reshape_to_flatten,
    normalize_axes,
)


def canonicalize(g: Graph) -> Canonical:
    """``g``'s canonical form (a copy) and the rewrites applied (see the module docstring)."""
    out = copy_graph(g)
    done: Counter[str] = Counter()
    for p in PASSES:
        p(out, done)
    _drop_unused_weights(out)
    return Canonical(out, done)


def _drop_unused_weights(g: Graph) -> None:
    for k in [k for k, w in g.weights.items() if not w.uses]:
        del g.weights[k]
