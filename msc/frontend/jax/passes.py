"""Graph clean-up after the walk: StableHLO spells every implicit broadcast out
(``broadcast_in_dim`` of a scalar or a bias before each elementwise op), which canonical ops
do themselves (numpy broadcasting). Dropping those makes the graph read like the model and lets
msc.ops.fusions recognize softmax, GELU, layer norm and linear.

# NOTE: invariants
# - A broadcast (``expand``, and the all-ones ``reshape`` before it) is bypassed only when every
#   user is a broadcasting elementwise op whose output already has the expanded shape (so
#   dropping it changes no type), and the bypassed value keeps the expanded rank or is 0-d;
#   an ``expand`` to the shape its input has (symbolic dims) is dropped whatever its users.
"""

from __future__ import annotations

import numpy as np

from msc.ir import Graph, TensorType
from msc.ir.graph import Weight, dead_nodes
from msc.ops.elementwise import BINARY, COMPARISONS

__all__ = ["drop_broadcasts", "drop_dead", "jax_spellings"]

# every binary op and comparison broadcasts as numpy does (prelu's slope broadcasts its own
# way), and so do where and clamp
BROADCASTING = (set(BINARY) - {"prelu"}) | set(COMPARISONS) | {"where", "clamp"}


def _shape(v) -> tuple | None:
    t = v.type
    return tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _full_other(user, index: int, want) -> bool:
    """``user`` broadcasts, its output is ``want``, and an input other than ``index`` already
    has that shape (so the one at ``index`` may be smaller)."""
    if user.op not in BROADCASTING or want is None or _shape(user.outputs[0]) != want:
        return False
    return any(
        j != index and x is not None and _shape(x) == want for j, x in enumerate(user.inputs)
    )


def drop_broadcasts(graph: Graph) -> Graph:
    """``graph`` (changed in place) with broadcasts its elementwise users do themselves
    bypassed."""
    changed = False
    for node in graph.nodes:  # loop bodies and branches (they broadcast alike)
        for sub in node.subgraphs():
            drop_broadcasts(sub)
    for node in list(graph.nodes):
        if node.op != "expand" or node.inputs[0] is None:
            continue
        out = node.outputs[0]
        want = _shape(out)
        uses = out.uses
        if want is not None and _shape(node.inputs[0]) == want and out not in graph.outputs:
            # a dynamic_broadcast_in_dim to the shape it already has (symbolic dims)
            out.replace_all_uses_with(node.inputs[0])
            changed = True
            continue
        if not uses or want is None or out in graph.outputs:
            continue
        if not all(_full_other(u, i, want) for u, i in uses):
            continue
        src = node.inputs[0]
        # a scalar made all-ones by a reshape: use the scalar itself
        p = src.producer
        if (
            p is not None
            and p.op == "reshape"
            and p.inputs[0] is not None
            and _shape(p.inputs[0]) == ()
        ):
            src = p.inputs[0]
        out.replace_all_uses_with(src)
        changed = True
    if changed:  # the bypassed expands would still count as users below
        graph.remove_nodes(dead_nodes(graph))
        changed = False
    # a reshape that only puts size-1 dims in front (a bias made [1, n]; with symbolic dims,
    # a scalar unsqueezed to [1, 1, 1]): broadcasting does it
    for node in list(graph.nodes):
        if node.op not in ("reshape", "unsqueeze") or node.inputs[0] is None:
            continue
        if node.op == "unsqueeze" and _shape(node.inputs[0]) != ():
            continue
        out, src = node.outputs[0], node.inputs[0]
        a, b = _shape(src), _shape(out)
        if a is None or b is None or len(b) < len(a) or out in graph.outputs:
            continue
        k = len(b) - len(a)
        if b[k:] != a or any(d != 1 for d in b[:k]) or not out.uses:
            continue
        # each user broadcasts it against another input of the user's full shape (a user
        # whose only full-shape input is this reshape, var + eps, would change type)
        if not all(
            u.op in BROADCASTING
            and _shape(u.outputs[0]) is not None
            and len(_shape(u.outputs[0])) >= len(b)
            and any(
                _shape(x) == _shape(u.outputs[0])
                for x in u.inputs
                if x is not None and x is not out
            )
            for u, _ in out.uses
        ):
            continue
        out.replace_all_uses_with(src)
        changed = True
    if changed:
        graph.remove_nodes(dead_nodes(graph))
    return graph


# ---------------------------------------------------------------- JAX's spellings
# jax.numpy writes keepdims as a reshape after the reduction, a mean as a sum over the count,
# and max(x, initial=-inf) as a maximum with -inf. These patterns put the canonical forms back
# (each computes the same function), so msc.ops.fusions finds softmax, layer norm and RMS norm.
_REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "reduce_prod")


def _keepdims(node):
    """reshape(reduce(x, axes)) that puts the reduced axes back as 1s -> reduce keepdims (with
    symbolic dims the reshape is a dynamic_broadcast_in_dim, read as an unsqueeze)."""
    from msc.ops.rewrite import Match

    if node.op not in ("reshape", "unsqueeze") or node.inputs[0] is None:
        return None
    red = node.inputs[0].producer
    if red is None or red.op not in _REDUCTIONS or red.attrs.get("keepdims"):
        return None
    if len(red.inputs) > 1 and red.inputs[1] is not None or not red.attrs.get("axes"):
        return None
    x = red.inputs[0]
    shape, out = _shape(x), _shape(node.outputs[0])
    if shape is None or out is None:
        return None
    axes = {a % len(shape) for a in red.attrs["axes"]}
    if out != tuple(1 if i in axes else d for i, d in enumerate(shape)):
        return None
    return Match(node, [node, red], {"x": x}, info={"op": red.op, "attrs": dict(red.attrs)})


def _keepdims_replace(b, m):
    return b.op(m.info["op"], m["x"], **{**m.info["attrs"], "keepdims": True})


def _mean(node):
    """reduce_sum(x, axes) / (the count of the reduced elements) -> reduce_mean."""
    from msc.ops.rewrite import Match, constant_value

    if node.op != "div":
        return None
    s, n = node.inputs
    red = s.producer if s is not None else None
    c = constant_value(n)
    if red is None or red.op != "reduce_sum" or c is None or c.size != 1:
        return None
    if len(red.inputs) > 1 and red.inputs[1] is not None or not red.attrs.get("axes"):
        return None
    shape = _shape(red.inputs[0])
    if shape is None or _shape(node.outputs[0]) != _shape(s):
        return None
    dims = [shape[a % len(shape)] for a in red.attrs["axes"]]
    if not all(isinstance(d, int) for d in dims) or float(c.reshape(-1)[0]) != float(np.prod(dims)):
        return None
    return Match(node, [node, red], {"x": red.inputs[0]}, info={"attrs": dict(red.attrs)})


def _by_float_scalar(node, op: str, value: float):
    """``op(x, c)`` (either order) of a one-element float constant ``c == value`` that does
    not broadcast ``x``: a Match binding ``x``, else None."""
    from msc.ops.rewrite import Match, constant_value

    if node.op != op:
        return None
    for x, c in (node.inputs, reversed(node.inputs)):
        v = constant_value(c)
        if (
            v is not None
            and v.size == 1
            and v.dtype.kind == "f"
            and float(v.reshape(-1)[0]) == value
            and _shape(x) == _shape(node.outputs[0])
        ):
            return Match(node, [node], {"x": x})
    return None


def _no_op_bound(node):
    """maximum(x, -inf) / minimum(x, inf) of a float x -> x."""
    return _by_float_scalar(node, "maximum", -np.inf) or _by_float_scalar(node, "minimum", np.inf)


def _relu(node):
    """maximum(x, 0) of a float x (how JAX lowers jax.nn.relu) -> relu(x)."""
    return _by_float_scalar(node, "maximum", 0.0)


def _conv_bias(node):
    """conv(x, w) + b.reshape(C, 1, ..., 1) (a channels-first conv's bias added after it, as
    JAX code writes it) -> conv(x, w, b)."""
    from msc.ops.rewrite import Match

    if node.op != "add":
        return None
    for c, r in (node.inputs, reversed(node.inputs)):
        conv, view = c.producer if c is not None else None, r.producer if r is not None else None
        if conv is None or view is None or conv.op != "conv" or view.op != "reshape":
            continue
        if len(conv.inputs) > 2 and conv.inputs[2] is not None or len(c.uses) != 1:
            continue
        if conv.attrs.get("data_layout", "NCHW") != "NCHW":
            continue
        b, out = view.inputs[0], _shape(c)
        if b is None or out is None or _shape(node.outputs[0]) != out:
            continue
        if _shape(b) != (out[1],) or _shape(r) != (out[1],) + (1,) * (len(out) - 2):
            continue
        return Match(
            node,
            [conv, view, node],
            {"x": conv.inputs[0], "w": conv.inputs[1], "b": b},
            anchor=conv,
            info={"attrs": dict(conv.attrs)},
        )
    return None


def _sigmoid(node):
    """1 / (1 + exp(-x)) (how JAX lowers logistic) -> sigmoid(x)."""
    from msc.ops.rewrite import Match, constant_value

    def one(v) -> bool:
        c = constant_value(v)
        return c is not None and c.size == 1 and float(c.reshape(-1)[0]) == 1.0

    if node.op != "div" or not one(node.inputs[0]):
        return None
    add = node.inputs[1].producer
    if add is None or add.op != "add" or _shape(add.outputs[0]) != _shape(node.outputs[0]):
        return None
    for c, e in (add.inputs, reversed(add.inputs)):
        ex = e.producer if one(c) else None
        neg = ex.inputs[0].producer if ex is not None and ex.op == "exp" else None
        if neg is not None and neg.op == "neg" and _shape(neg.inputs[0]) == _shape(e):
            return Match(node, [node, add, ex, neg], {"x": neg.inputs[0]})
    return None


def _unit_batch_matmul(node):
    """reshape(matmul(reshape(a), reshape(b))) that takes leading 1s off a and b and puts them
    back on the product (jnp.matmul squeezes a batch dim of size one on both sides) ->
    matmul(a, b)."""
    from msc.ops.rewrite import Match

    if node.op != "reshape" or node.inputs[0] is None or len(node.inputs) > 1:
        return None
    mm = node.inputs[0].producer
    out, inner = _shape(node.outputs[0]), _shape(node.inputs[0])
    if mm is None or mm.op != "matmul" or out is None or inner is None:
        return None
    k = len(out) - len(inner)
    if k <= 0 or out != (1,) * k + inner or len(node.inputs[0].uses) != 1:
        return None
    ops = []
    for v in mm.inputs:
        p = v.producer
        src = p.inputs[0] if p is not None and p.op == "reshape" and len(p.inputs) == 1 else None
        if src is None or _shape(src) != (1,) * k + _shape(v):
            return None
        ops.append(src)
    return Match(node, [node, mm], {"a": ops[0], "b": ops[1]})


def _through_broadcasts(v):
    """``v``'s constant value, read through the reshapes and expands JAX broadcasts it with."""
    from msc.ops.rewrite import constant_value

    while v is not None and v.producer is not None and v.producer.op in ("reshape", "expand"):
        v = v.producer.inputs[0]
    return constant_value(v)


def _zero_sub(node):
    """x - 0 (Flax's RMS norm subtracts a zero mean) -> x."""
    from msc.ops.rewrite import Match

    if node.op != "sub" or _shape(node.inputs[0]) != _shape(node.outputs[0]):
        return None
    v = node.inputs[1]
    while v is not None and v.producer is not None and v.producer.op in ("reshape", "expand"):
        v = v.producer.inputs[0]
    if isinstance(v, Weight):  # model state (BatchNorm's running mean is zero at init only)
        return None
    c = _through_broadcasts(node.inputs[1])
    if c is None or c.dtype.kind != "f" or c.size == 0 or np.any(c != 0):
        return None
    return Match(node, [node], {"x": node.inputs[0]})


def _variance(node):
    """max(0, mean(x * x) - mean(x) ** 2) (Flax's one-pass variance) -> mean((x - mean(x))
    ** 2), the two-pass spelling msc.ops.fusions reads as a layer norm (the same function; the
    guard against a negative rounding error is not needed there)."""
    from msc.ops.rewrite import Match

    if node.op != "maximum":
        return None
    for z, d in (node.inputs, reversed(node.inputs)):
        c = _through_broadcasts(z)
        sub = d.producer if d is not None else None
        if c is not None and c.size == 1 and float(c.reshape(-1)[0]) == 0.0 and sub is not None:
            break
    else:
        return None
    if sub.op != "sub":
        return None
    msq, mm = (v.producer for v in sub.inputs)
    if msq is None or mm is None or msq.op != "reduce_mean" or mm.op != "mul":
        return None
    m = mm.inputs[0]
    sq = msq.inputs[0].producer
    if mm.inputs[1] is not m or sq is None or sq.op != "mul" or sq.inputs[0] is not sq.inputs[1]:
        return None
    mean = m.producer
    x = sq.inputs[0]
    if mean is None or mean.op != "reduce_mean" or mean.inputs[0] is not x:
        return None
    if mean.attrs != msq.attrs or mean.attrs.get("keepdims") or any(mean.inputs[1:]):
        return None
    shape = _shape(x)
    if shape is None:
        return None
    axes = {a % len(shape) for a in mean.attrs["axes"]}
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    info = {"attrs": dict(mean.attrs), "kept": kept, "axes": sorted(axes)}
    return Match(node, [node, sub, msq, mm, sq], {"x": x, "m": m}, info=info)


def _variance_replace(b, m):
    kept = m.info["kept"]
    if all(isinstance(k, int) for k in kept):
        back = b.op("reshape", m["m"], shape=kept)
    else:  # symbolic dims: the reduced axes put back as 1s
        back = b.op("unsqueeze", m["m"], axes=m.info["axes"])
    d = b.op("sub", m["x"], back)
    return b.op("reduce_mean", b.op("mul", d, d), **m.info["attrs"])


def _scaled_rsqrt(node):
    """a * (rsqrt(v) * s) (Flax's norms scale the inverse deviation) -> (a * rsqrt(v)) * s, so
    the normalization is one product msc.ops.fusions reads."""
    from msc.ops.rewrite import Match

    if node.op != "mul":
        return None
    for a, inner in (node.inputs, reversed(node.inputs)):
        p = inner.producer if inner is not None else None
        if p is None or p.op != "mul" or _shape(a) != _shape(node.outputs[0]) or _spread(a):
            continue
        for r, s in (p.inputs, reversed(p.inputs)):
            if r is not None and r.producer is not None and r.producer.op == "rsqrt" and _spread(s):
                return Match(node, [node, p], {"a": a, "r": r, "s": s})
    return None


def _spread(v) -> bool:
    """``v`` is a weight, a constant, or one broadcast or reshaped (a scale, not the data)."""
    from msc.ir import Weight

    p = v.producer if v is not None else None
    return isinstance(v, Weight) or (p is not None and p.op in ("constant", "expand", "reshape"))


def _freeze(v):
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, Graph):
        raise TypeError("a subgraph")
    return v


_STATEFUL = ("random", "dropout", "bernoulli", "multinomial")


def _cse(graph: Graph) -> None:
    """One node for each computation JAX wrote twice (``x - mean`` in a layer norm), so the
    fusions see one value where the formula has one (in place)."""
    seen: dict = {}
    changed = False
    for node in graph.nodes:
        if not isinstance(node.op, str) or any(s in node.op for s in _STATEFUL):
            continue
        try:
            key = (
                node.op,
                tuple(id(v) for v in node.inputs),
                tuple(sorted((k, _freeze(v)) for k, v in node.attrs.items())),
            )
            hash(key)
        except TypeError:
            continue
        first = seen.setdefault(key, node)
        if first is node:
            continue
        if any(b in graph.outputs for b in node.outputs):
            continue
        for a, b in zip(first.outputs, node.outputs):
            b.replace_all_uses_with(a)
        changed = True
    if changed:
        graph.remove_nodes(dead_nodes(graph))


def _bypass_identities(graph: Graph) -> None:
    """Identities (a convert to the dtype a value has) bypassed, in bodies and branches too."""
    changed = False
    for node in graph.nodes:
        for sub in node.subgraphs():
            _bypass_identities(sub)
    for node in graph.nodes:
        if node.op == "identity" and node.outputs[0] not in graph.outputs:
            node.outputs[0].replace_all_uses_with(node.inputs[0])
            changed = True
    if changed:
        graph.remove_nodes(dead_nodes(graph))


def drop_dead(graph: Graph) -> Graph:
    """``graph`` (in place) without the nodes nothing reads, in branch and loop bodies too
    (lax.cond's bool-to-index convert, which an ``if`` on the bool does not read); a body
    first, so what only it read goes with it."""
    for node in graph.nodes:
        for sub in node.subgraphs():
            drop_dead(sub)
    graph.remove_nodes(dead_nodes(graph))
    return graph


def jax_spellings(graph: Graph) -> Graph:
    """``graph`` with JAX's spellings of keepdims, mean, logistic, relu and ``initial=-inf`` put
    back into canonical ops, Flax's norms (a one-pass variance, a zero mean, the scale on the
    inverse deviation) into the spellings msc.ops.fusions reads, and repeated computations
    made one (a new graph)."""
    from msc.ops.rewrite import Pattern, rewrite

    _cse(graph)
    _bypass_identities(graph)  # a scalar's broadcast to a scalar: its bound is a constant
    identity = Pattern(
        "no_op_bound", matcher=_no_op_bound, replace=lambda b, m: b.op("identity", m["x"])
    )
    sigmoid = Pattern("sigmoid", matcher=_sigmoid, replace=lambda b, m: b.op("sigmoid", m["x"]))
    zero_sub = Pattern("zero_sub", matcher=_zero_sub, replace=lambda b, m: b.op("identity", m["x"]))
    relu = Pattern("relu", matcher=_relu, replace=lambda b, m: b.op("relu", m["x"]))
    graph = rewrite(graph, [identity, sigmoid, zero_sub])
    _bypass_identities(graph)
    patterns = [
        Pattern("keepdims", matcher=_keepdims, replace=_keepdims_replace),
        Pattern(
            "mean",
            matcher=_mean,
            replace=lambda b, m: b.op("reduce_mean", m["x"], **m.info["attrs"]),
        ),
        Pattern(
            "unit_batch_matmul",
            matcher=_unit_batch_matmul,
            replace=lambda b, m: b.op("matmul", m["a"], m["b"]),
        ),
        Pattern(
            "conv_bias",
            matcher=_conv_bias,
            replace=lambda b, m: b.op("conv", m["x"], m["w"], m["b"], **m.info["attrs"]),
        ),
    ]
    graph = rewrite(graph, patterns)
    norms = [
        Pattern("variance", matcher=_variance, replace=_variance_replace),
        Pattern(
            "scaled_rsqrt",
            matcher=_scaled_rsqrt,
            replace=lambda b, m: b.op("mul", b.op("mul", m["a"], m["r"]), m["s"]),
        ),
    ]
    changed = rewrite(graph, norms)
    _cse(changed)  # the variance's x - mean is the one the normalization already computes
    # keepdims again (the mean the variance no longer squares), and a scale broadcast for
    # the scaled inverse deviation that the product now does itself
    # and relu last: Flax's one-pass variance is guarded by the same maximum(0, v)
    return drop_broadcasts(rewrite(changed, [patterns[0], relu]))
