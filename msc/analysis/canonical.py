"""A canonical form for comparing graphs: the rewrites exporters are known to make, undone.

Two files of one model differ in ways that change nothing: torch.onnx folds BatchNorm into
the conv before it, writes ``linear`` as ``Gemm`` or as ``MatMul`` + ``Add``, ``embedding`` as
``Gather``, adaptive average pooling to 1 as ``ReduceMean``/``GlobalAveragePool``, ``flatten``
as ``Reshape``, attention, GELU and LayerNorm spelled out or fused, an all-ones mask or weight
kept or left out. ``canonicalize`` applies each rewrite to a copy of a graph, in one direction,
and counts what it did, so ``diff`` can say "equivalent up to N known rewrites" and compare
what is left.

Graph passes (spellings and constants, not patterns):

- ``channels_first`` (``msc.ops.layout``): convs and pools of a channels-last graph (a TFLite
  or Keras file) brought to NCHW / OIHW with the transposes sunk, as the channels-first
  codegens emit them;
- ``constants_to_weights``: ``constant`` nodes -> weights; ``fold_constants``: nodes that
  read only weights are computed -> weights;
- ``normalize_spellings`` (``msc.analysis.spellings``): axes non-negative and sorted,
  trailing absent inputs dropped, a slice's default and constant-input axes and steps as
  attributes, a per-tensor quantize's or dequantize's axis as the default, an expand's
  target entry that is the input's own static dim as -1, a shape's end at or past the rank
  as none, a slice's start before a static dim's first element as 0 and its end at or past
  it (stepping forward) as "to the end", a sort whose indices
  nothing reads as stable (ties are equal values: their order does not show).

Pattern rewrites (``msc.rewrite`` patterns, ``RULES``; each counted under its label):

- ``batch_norm(conv|linear(x, W, b))`` with constant statistics ->
  ``conv|linear(x, W * s, (b - mean) * s + beta)``, ``s = gamma / sqrt(var + eps)``, and
  ``conv(pad(x, zeros))`` / ``max_pool(pad(x, -inf))`` -> the node padding x itself
  (``msc.ops.folds``: what torch.onnx and codegen.tflite write);
- ``gemm(x, W, c)`` (alpha = beta = 1, no transposed A) -> ``linear``;
- ``matmul(x, W)`` (+ ``add`` of a 1-d bias) -> ``linear(x, W^T, b)``; ``matmul(x,
  transpose(W))`` -> ``linear(x, W)`` (the transpose absorbed, before constants fold);
- ``gather(W, ids, axis=0)`` of a 2-d weight -> ``embedding``;
- ``adaptive_avg_pool(x, 1...)`` -> ``reduce_mean`` (keepdims), and so is an ``avg_pool`` of one
  window that covers its whole input;
- ``reshape`` of [N, ...] to [N, prod] -> ``flatten(start_axis=1)``;
- a reshape or flatten that only takes out or puts in size-1 dims -> ``squeeze`` /
  ``unsqueeze`` (a run of 1s losing or gaining one named by its first choice of axes);
- reshape / expand to the same shape, transpose by the identity, cast to the same dtype -> x;
- ``where(c, a, b)`` of a constant all-true / all-false condition -> ``a`` / ``b``;
- ``attention(q, k, v, mask)`` with a mask that masks nothing (all true, all zero) -> no mask;
- a norm's all-ones weight and all-zeros bias, a recurrent op's all-zeros initial state ->
  absent (the op's default); a recurrent op's input and recurrence biases as their sum
  (where the op only adds them: TFLite keeps one bias per gate);
- the spelled-out forms of GELU, LayerNorm, RMSNorm, SiLU and attention -> the fused op
  (``msc.ops.fusions``; attention's K^T through any transpose).

# NOTE: invariants. Every rewrite is exact: the canonical graph computes what the graph did.
# A rewritten pattern's result keeps the value (and so the name) of the pattern's last node,
# and a node that absorbed another keeps its own name and provenance (the conv, not its
# BatchNorm), so every value of the canonical graph is a value of the original one or has a
# name the original does not use: ``verify`` reads values by name from the model running
# natively. Weights a rule computes are new arrays on the copy; the original graph is never
# modified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from msc.analysis.equivalences import RULES as EQUIVALENCES
from msc.analysis.equivalences import drop_dead, merge_duplicates
from msc.analysis.shape_values import refines, resolve_shape_values
from msc.analysis.spellings import _INT64_MAX, _size, normalize_spellings
from msc.ir.builder import Builder
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ops.folds import (
    find_batch_norm,
    find_global_pool,
    find_max_pool_pad,
    find_whole_avg_pool,
    find_zero_pad,
    fold_batch_norm,
    fold_pad,
    pool_to_mean,
    whole_pool_to_mean,
)
from msc.ops.fusions import FUSIONS
from msc.ops.infer import dim_mul
from msc.ops.layout import LAYOUT_OPS, channels_first, has_layouts
from msc.ops.rewrite import Match, Pattern, constant_value, rewrite
from msc.ops.simplify import FOLD_LIMIT

__all__ = ["Canonical", "canonicalize", "RULES", "copy_graph"]


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


def _new_weight(g: Graph, base: str, data: np.ndarray) -> Weight:
    name, k = base, 1
    while name in g.weights:
        name, k = f"{base}_{k}", k + 1
    return g.add_weight(name, data, role="parameter")


def _static(v: Value | None) -> tuple[int, ...] | None:
    if v is None or v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape):
        return None
    return tuple(v.type.shape)


# ------------------------------------------------------------------------------ graph passes
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


_FOLD_LIMIT = FOLD_LIMIT  # elements: a constant larger than this stays computed


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


def _drop_output_identities(g: Graph) -> None:
    """An ``identity`` giving a graph output the name of a value it replaced (``msc.rewrite``
    keeps output names so) is dropped: its input takes the name. A spelling: not counted."""
    for n in [n for n in g.nodes if n.op == "identity"]:
        o, v = n.outputs[0], n.inputs[0]
        if v is None or v.producer is None or len(v.uses) != 1:
            continue
        if not any(x is o for x in g.outputs) or any(x is v for x in g.outputs):
            continue
        g.outputs = [v if x is o else x for x in g.outputs]
        name = o.name
        g.remove_node(n)
        g._taken.discard(v.name)  # noqa: SLF001 - renaming a value this module owns
        v.name = name
        g._taken.add(name)  # noqa: SLF001


def _drop_unused_weights(g: Graph) -> None:
    for k in [k for k, w in g.weights.items() if not w.uses and w not in g.outputs]:
        del g.weights[k]


# ------------------------------------------------------------------------------ rules
@dataclass(frozen=True)
class Rule:
    """A pattern and the label its rewrites are counted under (a function of the match when
    it depends on it: "batch_norm folded into conv")."""

    label: str | Callable[[Match], str]
    pattern: Pattern


def _rule(
    label: str | Callable[[Match], str],
    find: Callable[[Node], Match | None],
    replace: Callable[[Builder, Match], Value | None],
) -> Rule:
    """A rule whose pattern is found by ``find`` from its root node."""
    name = label if isinstance(label, str) else find.__name__
    return Rule(label, Pattern(name, matcher=find, replace=replace))


def _counted(rules: list[Rule], done: Counter[str]) -> list[Pattern]:
    """The rules' patterns, counting each rewrite made under its rule's label."""
    out = []
    for r in rules:
        p = r.pattern

        def replace(b: Builder, m: Match, p: Pattern = p, r: Rule = r) -> Value | None:
            try:
                new = p.replace(b, m)  # type: ignore[operator]
            except Exception:  # noqa: BLE001 - a rule that cannot build its form declines
                return None  # (msc.rewrite discards what it built)
            if new is not None:
                done[r.label(m) if callable(r.label) else r.label] += 1
            return new

        out.append(
            Pattern(
                p.name,
                p.inputs,
                p.outputs,
                replace=replace,
                matcher=_declining(p.matcher),
                check=p.check,
                any_dtype=p.any_dtype,
            )
        )
    return out


def _declining(
    find: Callable[[Node], Match | None] | None,
) -> Callable[[Node], Match | None] | None:
    """``find``, declining a node it cannot read (a sequence where it expects a tensor, a
    shape it did not foresee) instead of failing the comparison: the canonical form is
    best effort, and a node no rule took is compared as it is."""
    if find is None:
        return None

    def safe(n: Node) -> Match | None:
        try:
            return find(n)
        except Exception:  # noqa: BLE001
            return None

    return safe


def _find_gemm(n: Node) -> Match | None:
    if n.op != "gemm":
        return None
    a, w = n.attrs, _const(n.inputs[1])
    c = n.inputs[2] if len(n.inputs) > 2 else None
    if w is None or a["alpha"] != 1.0 or a["trans_a"] or w.ndim != 2:
        return None
    out = w.shape[0] if a["trans_b"] else w.shape[1]
    if c is not None and (a["beta"] != 1.0 or tuple(c.type.shape or ()) != (out,)):
        return None
    return Match(n, [n], {"x": n.inputs[0]} | ({"c": c} if c is not None else {}))  # type: ignore[dict-item]


def _gemm_to_linear(b: Builder, m: Match) -> Value:
    from msc.ops.fusions import transposed_weight

    n, g = m.root, m.graph
    w = n.inputs[1]
    if not n.attrs["trans_b"]:
        w = transposed_weight(g, w, m.nodes)  # type: ignore[arg-type]
    return b.op("linear", m["x"], w, m.values.get("c"))


def _matmul_weight(mm: Node | None) -> np.ndarray | None:
    """The constant 2-d right operand of a matmul of a computed value, else None."""
    if mm is None or mm.op != "matmul" or isinstance(mm.inputs[0], Weight):
        return None
    w = _const(mm.inputs[1])
    return w if w is not None and w.ndim == 2 else None


def _find_matmul_add(n: Node) -> Match | None:
    """add(matmul(x, W), b) or add(linear(x, W), b) with b 1-d of the output features."""
    if n.op != "add" or len(n.inputs) != 2:
        return None
    for y, other in (n.inputs, n.inputs[::-1]):
        p = y.producer if y is not None else None
        bv = _const(other)
        if p is None or bv is None or bv.ndim != 1 or y.type != n.outputs[0].type:
            continue
        if p.op == "matmul" and (w := _matmul_weight(p)) is not None and bv.shape == w.shape[1:]:
            return Match(n, [p, n], {"x": p.inputs[0], "bias": other}, info={"mm": p})  # type: ignore[dict-item]
        if p.op == "linear" and (len(p.inputs) < 3 or p.inputs[2] is None):
            w = _const(p.inputs[1])
            if w is not None and w.ndim == 2 and bv.shape == w.shape[:1]:
                return Match(n, [p, n], {"x": p.inputs[0], "bias": other}, info={"lin": p})  # type: ignore[dict-item]
    return None


def _linear_weight(g: Graph, mm: Node, m: Match) -> Weight:
    """A matmul's [in, out] weight as linear's [out, in]: ``x.weight_t`` and ``x.weight~T``
    (msc.ops.fusions.PRETRANSPOSED) -> ``x.weight``."""
    from msc.ops.fusions import PRETRANSPOSED

    w = mm.inputs[1]
    name = w.name or "w"  # type: ignore[union-attr]
    if name.endswith(".weight_t"):
        base = name.removesuffix(".weight_t") + ".weight"
    elif name.endswith(PRETRANSPOSED):
        base = name.removesuffix(PRETRANSPOSED)
    else:
        base = name + ".T"
    return _new_weight(g, base, np.ascontiguousarray(_const(w).T))  # type: ignore[union-attr]


def _matmul_add_to_linear(b: Builder, m: Match) -> Value:
    if "lin" in m.info:
        lin = m.info["lin"]
        return b.op("linear", m["x"], lin.inputs[1], m["bias"])
    return b.op("linear", m["x"], _linear_weight(m.graph, m.info["mm"], m), m["bias"])  # type: ignore[arg-type]


def _find_matmul(n: Node) -> Match | None:
    return Match(n, [n], {"x": n.inputs[0]}) if _matmul_weight(n) is not None else None  # type: ignore[dict-item]


def _matmul_to_linear(b: Builder, m: Match) -> Value:
    return b.op("linear", m["x"], _linear_weight(m.graph, m.root, m))  # type: ignore[arg-type]


def _find_transposed_weight(n: Node) -> Match | None:
    """matmul(x, transpose(W)) of a 2-d weight: linear(x, W), the transpose absorbed."""
    if n.op != "matmul" or isinstance(n.inputs[0], Weight) or n.inputs[1] is None:
        return None
    t = n.inputs[1].producer
    if t is None or t.op != "transpose" or list(t.attrs["perm"]) != [1, 0]:
        return None
    if _const(t.inputs[0]) is None:
        return None
    return Match(n, [t, n], {"x": n.inputs[0], "w": t.inputs[0]})  # type: ignore[dict-item]


def _find_gather(n: Node) -> Match | None:
    if n.op != "gather" or n.attrs["axis"] % 2 != 0:
        return None
    w = _const(n.inputs[0])
    if w is None or w.ndim != 2:
        return None
    return Match(n, [n], {"w": n.inputs[0], "ids": n.inputs[1]})  # type: ignore[dict-item]


def _flatten_span(xs, ys) -> tuple[int, int] | None:
    """The first run of dims ``start..end`` of ``xs`` that, merged into one, makes ``ys``
    (symbolic dims compare as expressions: ``[b, s] -> [b*s]``)."""
    if xs is None or ys is None or None in xs or None in ys:
        return None
    k = len(xs) - len(ys)
    if k < 1:
        return None
    for start in range(len(ys)):
        end = start + k
        if (
            tuple(xs[:start]) == tuple(ys[:start])
            and tuple(xs[end + 1 :]) == tuple(ys[start + 1 :])
            and ys[start] == dim_mul(*xs[start : end + 1])
        ):
            return start, end
    return None


def _find_flatten(n: Node) -> Match | None:
    """A reshape that merges one run of dims is that flatten; a flatten is spelled by the
    first run that gives its result (merging a size-1 dim left or right is one op)."""
    if n.op not in ("reshape", "flatten") or n.inputs[0] is None:
        return None
    x, y = n.inputs[0], n.outputs[0]
    span = _flatten_span(x.type.shape, y.type.shape)
    if span is None:
        return None
    if n.op == "flatten":
        r = len(x.type.shape)  # type: ignore[arg-type]
        if (n.attrs["start_axis"] % r, n.attrs["end_axis"] % r) == span:
            return None
    return Match(n, [n], {"x": x}, info={"span": span})  # type: ignore[dict-item]


def _unit_dims(longer: Sequence[object], shorter: Sequence[object]) -> list[int] | None:
    """The positions of ``longer`` that are size-1 dims which, taken out, leave ``shorter``:
    the first such choice (a run of 1s loses its last ones), None when there is none."""
    axes, j = [], 0
    for i, d in enumerate(longer):
        if j < len(shorter) and d == shorter[j]:
            j += 1
        elif d == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(shorter) and axes else None


def _find_unit_dims(n: Node) -> Match | None:
    """A view that only takes out or puts in size-1 dims is a squeeze / unsqueeze (TFLite
    writes them as RESHAPE, a reshape merging a 1 is a flatten), of the axes ``_unit_dims``
    chooses: a run of 1s where one goes is one op whichever of them it names."""
    if n.op not in ("reshape", "flatten", "squeeze", "unsqueeze") or n.inputs[0] is None:
        return None
    if n.op != "reshape" and any(v is not None for v in n.inputs[1:]):
        return None  # run-time axes
    xs, ys = n.inputs[0].type.shape, n.outputs[0].type.shape
    if xs is None or ys is None or None in xs or None in ys or len(xs) == len(ys):
        return None
    op = "squeeze" if len(xs) > len(ys) else "unsqueeze"
    axes = _unit_dims(xs, ys) if op == "squeeze" else _unit_dims(ys, xs)
    if axes is None:
        return None
    if n.op == op and n.attrs["axes"] is not None:
        rank = len(xs) if op == "squeeze" else len(ys)
        if sorted(int(a) % rank for a in n.attrs["axes"]) == axes:
            return None
    return Match(n, [n], {"x": n.inputs[0]}, info={"op": op, "axes": axes})


def _find_no_op(n: Node) -> Match | None:
    """A reshape / expand to the shape it had, a transpose by the identity, a cast to the
    dtype it had, a slice keeping every dim whole (as ``spellings._slice_whole_axes`` spells it)."""
    x = n.inputs[0] if n.inputs else None
    if x is None or n.op not in ("reshape", "expand", "transpose", "cast", "slice"):
        return None
    y = n.outputs[0]
    if n.op == "transpose":
        same = list(n.attrs["perm"]) == list(range(len(n.attrs["perm"])))
    elif n.op == "slice":
        a = n.attrs
        whole = {"axes": [0], "starts": [0], "ends": [_INT64_MAX], "steps": [1]}
        same = len(n.inputs) == 1 and all(list(a.get(k) or ()) == v for k, v in whole.items())
    elif n.op == "cast":
        same = x.type.dtype is y.type.dtype
    else:  # the same shape, symbolic dims too (an unknown dim proves nothing)
        same = x.type.shape is not None and None not in x.type.shape
    return Match(n, [n], {"x": x}) if same and x.type == y.type else None


def _find_constant_where(n: Node) -> Match | None:
    """where(c, a, b) with a constant condition that is all true (-> a) or all false (-> b),
    the branch taken already of the output's type."""
    if n.op != "where":
        return None
    c = constant_value(n.inputs[0])
    if c is None or c.size == 0:
        return None
    pick = n.inputs[1] if c.all() else n.inputs[2] if not c.any() else None
    if pick is None or pick.type != n.outputs[0].type:
        return None
    return Match(n, [n], {"x": pick})


def _find_no_op_mask(n: Node) -> Match | None:
    """attention with a constant mask that masks nothing: all true, or all zero added."""
    if n.op != "attention" or len(n.inputs) < 4 or n.inputs[3] is None:
        return None
    mask = constant_value(n.inputs[3])
    if mask is None or not (mask.all() if mask.dtype == np.bool_ else not np.any(mask)):
        return None
    q, k, v = n.inputs[:3]
    return Match(n, [n], {"q": q, "k": k, "v": v})  # type: ignore[dict-item]


def _drop_mask(b: Builder, m: Match) -> Value:
    return b.op("attention", m["q"], m["k"], m["v"], **m.root.attrs)


_NORMS = ("layer_norm", "rms_norm", "group_norm", "instance_norm")


# op -> (what its defaults are called, the (input, value) pairs that equal an absent input)
_DEFAULT_INPUTS = {
    **{op: ("weight/bias", ((1, 1.0), (2, 0.0))) for op in _NORMS},
    # a zero initial state (torch.export's zeros) is the recurrent ops' default
    "rnn": ("initial state (zeros)", ((5, 0.0),)),
    "gru": ("initial state (zeros)", ((5, 0.0),)),
    "lstm": ("initial states (zeros)", ((5, 0.0), (6, 0.0))),
}


def _find_default_affine(n: Node) -> Match | None:
    """A constant input equal to the op's default when absent: a norm's all-ones weight or
    all-zeros bias, a recurrent op's all-zeros initial state."""
    if n.op not in _DEFAULT_INPUTS:
        return None
    ins = list(n.inputs)
    drop = []
    for i, fill in _DEFAULT_INPUTS[n.op][1]:
        c = constant_value(ins[i]) if i < len(ins) else None
        if c is not None and c.size and np.all(c == fill):
            drop.append(i)
    if not drop:
        return None
    keep = {f"in{i}": v for i, v in enumerate(ins) if v is not None and i not in drop}
    return Match(n, [n], keep, info={"n": len(ins)})  # type: ignore[arg-type]


def _default_affine(b: Builder, m: Match) -> Value | tuple[Value, ...]:
    ins = [m.values.get(f"in{i}") for i in range(m.info["n"])]
    while ins and ins[-1] is None:
        ins.pop()
    outs = b.multi(m.root.op, *ins, **m.root.attrs)
    return outs[0] if len(outs) == 1 else outs


def _find_recurrent_bias(n: Node) -> Match | None:
    """A recurrent op's constant bias [input half, recurrence half] whose halves are only
    ever added (all but a GRU candidate's with linear_before_reset) as their sum and zeros:
    TFLite's cells keep one bias per gate."""
    if n.op not in ("rnn", "gru", "lstm") or len(n.inputs) < 4:
        return None
    if n.op == "gru" and n.attrs.get("linear_before_reset"):
        return None
    b = constant_value(n.inputs[3])
    if b is None or b.ndim != 2 or not np.any(b[:, b.shape[1] // 2 :]):
        return None
    half = b.shape[1] // 2
    summed = b[:, :half] + b[:, half:]
    ins = {f"in{i}": v for i, v in enumerate(n.inputs) if v is not None and i != 3}
    info = {"n": len(n.inputs), "bias": np.concatenate([summed, np.zeros_like(summed)], 1)}
    return Match(n, [n], ins, info=info)  # type: ignore[arg-type]


def _summed_bias(b: Builder, m: Match) -> Value | tuple[Value, ...]:
    name = m.root.inputs[3].name or "bias"
    m.values["in3"] = _new_weight(m.graph, f"{name}_summed", m.info["bias"])
    return _default_affine(b, m)


def _keep(b: Builder, m: Match) -> Value:
    return m["x"]


def _bn_label(m: Match) -> str:
    return f"batch_norm folded into {m.info['op']}"


def _no_op_label(m: Match) -> str:
    return f"no-op {m.root.op} dropped"


def _fused(p: Pattern) -> Rule:
    return Rule(f"spelled-out {p.name} fused", p)


# Before constants fold: a transpose of a weight read by a matmul is absorbed into a linear
# that keeps the weight's name (folding would compute a new, anonymous weight).
EARLY: list[Rule] = [
    _rule(
        "transpose absorbed into linear",
        _find_transposed_weight,
        lambda b, m: b.op("linear", m["x"], m["w"]),
    ),
]

# In priority order (``msc.rewrite`` tries each over the whole graph, in rounds).
RULES: list[Rule] = [
    _rule(_no_op_label, _find_no_op, _keep),
    _rule("where of a constant condition dropped", _find_constant_where, _keep),
    _rule(_bn_label, find_batch_norm, fold_batch_norm),
    _rule("zero pad folded into conv", find_zero_pad, fold_pad),
    _rule("-inf pad folded into max_pool", find_max_pool_pad, fold_pad),
    _rule("gemm -> linear", _find_gemm, _gemm_to_linear),
    _rule("matmul + add -> linear", _find_matmul_add, _matmul_add_to_linear),
    _rule("matmul -> linear", _find_matmul, _matmul_to_linear),
    _rule("gather -> embedding", _find_gather, lambda b, m: b.op("embedding", m["w"], m["ids"])),
    _rule("adaptive_avg_pool -> reduce_mean", find_global_pool, pool_to_mean),
    _rule("avg_pool over its whole input -> reduce_mean", find_whole_avg_pool, whole_pool_to_mean),
    _rule(
        lambda m: f"{m.root.op} -> flatten" if m.root.op == "reshape" else "flatten respelled",
        _find_flatten,
        lambda b, m: b.op(
            "flatten", m["x"], start_axis=m.info["span"][0], end_axis=m.info["span"][1]
        ),
    ),
    _rule(
        lambda m: f"{m.root.op} of size-1 dims -> {m.info['op']}",
        _find_unit_dims,
        lambda b, m: b.op(m.info["op"], m["x"], axes=m.info["axes"]),
    ),
    # linear, gemm and embedding have the broader rules above (a transposed copy is fine here).
    *[_fused(p) for p in FUSIONS if p.name not in ("linear", "gemm", "embedding")],
    _rule("attention's no-op mask dropped", _find_no_op_mask, _drop_mask),
    *[_rule(label, find, replace) for label, find, replace in EQUIVALENCES],
    _rule(lambda m: f"{m.root.op}'s biases summed", _find_recurrent_bias, _summed_bias),
    _rule(
        lambda m: f"{m.root.op}'s default {_DEFAULT_INPUTS[m.root.op][0]} dropped",
        _find_default_affine,
        _default_affine,
    ),
]


def canonicalize(g: Graph) -> Canonical:
    """``g``'s canonical form (a copy) and the rewrites applied (see the module docstring)."""
    out = copy_graph(g)
    done: Counter[str] = Counter()
    if has_layouts(out):
        # channels last (a TFLite or Keras file): as the channels-first codegens emit it
        done["convs and pools brought to channels first"] += sum(
            n.op in LAYOUT_OPS and n.attrs["data_layout"] != "NCHW" for n in out.nodes
        )
        out = channels_first(out)
    constants_to_weights(out, done)
    out = rewrite(out, _counted(EARLY, done))
    fold_constants(out, done)
    rules = _counted(RULES, done)
    # Shape computations resolved, spellings normalized, rules, duplicates merged: each may
    # uncover work for another (a fused attention's guard of a constant mask leaves
    # constants; merged aranges make two unsqueeze chains one), so they run to a fixed point.
    for _ in range(4):
        before = sum(done.values())
        resolve_shape_values(out, done)
        normalize_spellings(out, done)
        out = rewrite(out, rules)
        _drop_output_identities(out)
        constants_to_weights(out, done)
        fold_constants(out, done)
        merge_duplicates(out, done)
        drop_dead(out)
        if sum(done.values()) == before:
            break
    normalize_spellings(out, done)
    _drop_unused_weights(out)
    _rename_new_values(out, g)
    return Canonical(out, done)


def _rename_new_values(canon: Graph, orig: Graph) -> None:
    """A value a rule made (a transpose it put before attention) whose generated name is the
    name of some other value of ``orig`` is renamed, so reading it by name from the model
    cannot read that other value."""
    types = {v.name: v.type for v in orig.values()}
    for v in list(canon.values()):
        if v.name in types and not refines(types[v.name], v.type):
            base, k = f"{v.name}~canonical", 1
            name = base
            while name in canon._taken:  # noqa: SLF001 - renaming a value this module owns
                name, k = f"{base}{k}", k + 1
            canon._taken.discard(v.name)  # noqa: SLF001
            v.name = name
            canon._taken.add(name)  # noqa: SLF001
