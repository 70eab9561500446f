"""torch's higher-order control ops: with_effects (effect ordering), torch.cond and
torch.while_loop.

# NOTE: ``with_effects(token, op, *args)`` orders side effects with tokens, which carry no
# data in a dataflow graph: the wrapped op is converted as it is, and a pure check
# (``_linalg_check_errors``, asserts) translates to nothing. ``cond`` becomes an ``if`` node
# and ``while_loop`` a ``loop`` node (no trip count; the condition computed before the loop
# and again at the end of each iteration); their bodies are translated by the translator
# into subgraphs that read the operands by reference, as msc subgraphs do. torch's ``map``
# (map_impl) becomes a ``scan`` with no state.
"""

from __future__ import annotations

from typing import Any

import torch

from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import DType, Graph, TensorType, Value

# Effectful ops that only check their inputs (raise on bad data); they produce no value.
_CHECKS = {
    "aten._linalg_check_errors.default",
    "aten._assert_async.msg",
    "aten._assert_scalar.default",
    "aten._print.default",
}


@converter("with_effects")
def with_effects(ctx: Ctx, token: Any, op: Any, *args: Any, **kwargs: Any) -> tuple:
    if not isinstance(op, torch._ops.OpOverload):
        raise Unsupported(f"with_effects around {op!r}")
    key = str(op)
    if key in _CHECKS:
        return (None, None)
    out = ctx.call(key, *args, **kwargs)
    return (None, *out) if isinstance(out, tuple | list) else (None, out)


# --------------------------------------------------------------- torch.cond, torch.while_loop
def translate_control(tr: Any, node: torch.fx.Node, call: Any, meta: Any) -> None:
    """``cond`` -> an ``if`` node, ``while_loop`` -> a ``loop`` node, their bodies translated
    into subgraphs that read outer values by reference (msc.ops.control)."""
    from msc.frontend.torch.translate import POISON

    args = tr.resolve(call.args)
    if tr._poisoned(args):
        tr.env[node] = POISON
        return
    ctx = tr.ctx

    def here() -> None:
        """Point the context at this node again (translating a body moves it)."""
        ctx.nodes = []
        ctx.node_name = tr.prefix + node.name
        ctx.module = tr.source.module_path(node)
        ctx.stack = tr.source.module_stack(node)
        ctx.source_op = call.key
        ctx.meta = meta

    here()
    try:
        if call.key == "cond":
            result = _cond(tr, node, here, *args)
        elif call.key == "map_impl":
            result = _map(tr, node, here, *args)
        else:
            result = _while_loop(tr, node, here, *args)
        if result is POISON:
            tr.env[node] = POISON
            return
        result = tr._finish(node, result, meta)
    except Unsupported as e:
        tr._report(call.key, node, str(e), e)
        tr.env[node] = POISON
        return
    for n in ctx.nodes:
        tr.graph.add_node(n)
    ctx.nodes = []
    tr.env[node] = result


def _leaves(out: Any) -> list[Any]:
    if isinstance(out, list | tuple):
        return [x for o in out for x in _leaves(o)]
    return [out]


def _subgraph(tr: Any, gm: Any, operands: list[Any], name: str) -> Any:
    """The body ``gm`` as a Graph (outputs: its flattened results), or POISON."""
    from msc.frontend.torch.translate import POISON

    g = Graph(name)
    out = tr.body(gm, operands, g, f"{name}.")
    if out is POISON:
        return POISON
    outs = []
    local = {id(v) for n in g.nodes for v in n.outputs}
    for v in _leaves(out):
        if not isinstance(v, Value):
            raise Unsupported(f"{name} returns {type(v).__name__}, not a tensor")
        if id(v) not in local:  # an outer value passed through: a node of this graph
            v = g.op("identity", v)
        outs.append(v)
    g.set_outputs(outs)
    return g


def _cond(
    tr: Any, node: torch.fx.Node, here: Any, pred: Any, then_gm: Any, else_gm: Any,
    operands: Any,
):  # fmt: skip
    from msc.frontend.torch.translate import POISON

    ops = list(operands)
    if not isinstance(pred, Value):  # a Python bool: torch specialized it; take the branch
        out = tr.body(then_gm if pred else else_gm, ops, tr.graph, f"{node.name}.")
        here()
        return out
    then_g = _subgraph(tr, then_gm, ops, f"{node.name}.then")
    else_g = _subgraph(tr, else_gm, ops, f"{node.name}.else")
    here()
    if then_g is POISON or else_g is POISON:
        return POISON
    c = pred if pred.dtype is DType.BOOL else tr.ctx.cast(pred, DType.BOOL)
    return list(tr.ctx.multi("if", c, then_branch=then_g, else_branch=else_g))


def _while_loop(
    tr: Any, node: torch.fx.Node, here: Any, cond_gm: Any, body_gm: Any, carried: Any,
    additional: Any = (),
):  # fmt: skip
    # loop(no trip count, cond_fn(initial), *initial) whose body runs body_fn, then cond_fn on
    # the new values; additional inputs are read by reference.
    from msc.frontend.torch.translate import POISON

    init, extra = list(carried), list(additional)
    if not all(isinstance(v, Value) for v in init):
        raise Unsupported("while_loop carrying Python numbers")
    c0 = tr.body(cond_gm, init + extra, tr.graph, f"{node.name}.cond.")
    if c0 is POISON:
        return POISON
    (c0,) = _leaves(c0)
    body = Graph(f"{node.name}.body")
    body.add_input(f"{node.name}.iteration", TensorType(DType.INT64, ()))
    body.add_input(f"{node.name}.cond_in", TensorType(DType.BOOL, ()))
    args = [body.add_input(f"{node.name}.carried_{i}", v.type) for i, v in enumerate(init)]
    new = tr.body(body_gm, args + extra, body, f"{node.name}.body.")
    if new is POISON:
        return POISON
    new = _leaves(new)
    c = tr.body(cond_gm, new + extra, body, f"{node.name}.body.cond.")
    here()
    if c is POISON:
        return POISON
    (c,) = _leaves(c)
    local = {id(v) for n in body.nodes for v in n.outputs} | {id(v) for v in body.inputs}
    outs = [v if id(v) in local else body.op("identity", v) for v in [c, *new]]
    body.set_outputs(outs)
    c0 = c0 if c0.dtype is DType.BOOL else tr.ctx.cast(c0, DType.BOOL)
    return list(tr.ctx.multi("loop", None, c0, *init, body=body))


def _map(tr: Any, node: torch.fx.Node, here: Any, body_gm: Any, xs: Any, args: Any = ()):
    # torch's map (f over the leading dim of xs, extra args shared) -> a scan with no state
    # whose body reads the extra args by reference; results stacked along a new first dim.
    from msc.frontend.torch.translate import POISON

    xs, extra = list(xs), list(args)
    if not all(isinstance(v, Value) and v.type.shape for v in xs):
        raise Unsupported("map over values without a leading dim")
    body = Graph(f"{node.name}.body")
    slices = [
        body.add_input(f"{node.name}.slice_{i}", TensorType(v.dtype, v.type.shape[1:]))
        for i, v in enumerate(xs)
    ]
    out = tr.body(body_gm, slices + extra, body, f"{node.name}.body.")
    here()
    if out is POISON:
        return POISON
    local = {id(v) for n in body.nodes for v in n.outputs}
    outs = [v if id(v) in local else body.op("identity", v) for v in _leaves(out)]
    body.set_outputs(outs)
    return list(tr.ctx.multi("scan", *xs, body=body, num_scan_inputs=len(xs)))
