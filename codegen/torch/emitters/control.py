"""Emitters of the control family: ``if`` as a Python ``if``, ``loop`` and ``scan`` as Python
loops in forward.

# NOTE: invariants
# - A body is emitted inline, inside the loop statement; its inputs are locals the loop
#   assigns (``NodeEmit.bind``): carried values and states are rebound at the end of each
#   iteration (one tuple assignment, so every new value is computed from the old ones), scan
#   outputs are appended to lists and stacked after the loop (an empty tensor when no
#   iteration ran and the element's shape is static).
# - The iteration number and the loop condition are Python ints/bools (sizes, in the
#   codegen's terms); a body that uses one as a tensor gets ``torch.tensor(...)`` of it.
# - ``if`` becomes two local functions (the branches, taking the outer values they read as
#   parameters of the same names) called through ``torch.cond`` while torch.export traces the
#   module, and chosen by a Python ``if`` otherwise (eager torch.cond would compile): so
#   re-exporting generated code gives a cond again, not the branch the example took. A
#   branch reading Python sizes stays a plain ``if``.
# - A ``loop`` with no trip count and no scan outputs whose body ignores the iteration
#   number and incoming condition (what torch.while_loop gives) is likewise a
#   ``torch.while_loop`` under torch.export and a Python ``while`` otherwise.
"""

from __future__ import annotations

import ast

from codegen.torch.code import call, const, expr, name
from codegen.torch.core import Arg, NodeEmit, function
from codegen.torch.registry import EMITTERS
from msc.ir.graph import Graph, Value, Weight


def _assign(targets: list[str], values: list[ast.expr]) -> ast.stmt:
    if len(targets) == 1:
        return ast.Assign([ast.Name(targets[0], ast.Store())], values[0])
    return ast.Assign(
        [ast.Tuple([ast.Name(t, ast.Store()) for t in targets], ast.Store())],
        ast.Tuple(values, ast.Load()),
    )


def _append(lst: str, value: ast.expr) -> ast.stmt:
    return ast.Expr(ast.Call(ast.Attribute(name(lst), "append", ast.Load()), [value], []))


def _result(values: list[ast.expr]) -> ast.expr | None:
    if not values:
        return None
    return values[0] if len(values) == 1 else ast.Tuple(values, ast.Load())


def _stack(lst: str, axis: int, reverse: bool, elem=None) -> ast.expr:
    """The list's tensors stacked along ``axis``; with ``elem`` (the element's static type),
    an empty list (no iteration ran) gives an empty tensor of the right shape."""
    seq: ast.expr = name(lst)
    if reverse:
        seq = expr("l[::-1]", l=seq)
    out = call("torch.stack", seq, axis) if axis else call("torch.stack", seq)
    if elem is None or not elem.is_static:
        return out
    shape = list(elem.shape)
    shape.insert(axis % (len(shape) + 1), 0)
    empty = call("torch.zeros", tuple(shape), dtype=elem.dtype)
    return expr("s if l else z", s=out, l=name(lst), z=empty)


def _while_loop(e: NodeEmit, cond: Arg, initial: list[Arg], body: Graph) -> ast.expr | None:
    """A torch.while_loop-shaped loop (see the NOTE), or None when it is not one."""
    n = len(initial)
    if len(body.outputs) != 1 + n or body.inputs[0].uses or body.inputs[1].uses:
        return None
    free, py = _free(e, [body])
    if py or any(a.is_py for a in initial) or cond.is_py:
        return None
    c = e.tmp("cond")
    carried = [e.bind(v, "carried") for v in body.inputs[2:]]
    params = carried + free
    stmts, outs = e.block(body)
    fn = e.tmp("body")
    stmts.append(ast.Return(ast.Tuple(outs, ast.Load())))
    e.stmt(function(fn, params, stmts))
    # For torch.while_loop: the condition and the outer values ride along as carried values
    # (returned as copies: a loop body may not return its inputs).
    cond_fn, traced_fn = e.tmp("cond_fn"), e.tmp("traced_body")
    e.stmt(function(cond_fn, [c, *params], [ast.Return(expr("c.clone()", c=name(c)))]))
    res = e.tmp("res")
    passthrough = {o.id for o in outs if isinstance(o, ast.Name) and o.id in params}
    clone = [
        expr("r[i].clone()", r=name(res), i=i)
        if isinstance(o, ast.Name) and o.id in passthrough
        else expr("r[i]", r=name(res), i=i)
        for i, o in enumerate(outs)
    ]
    traced_body = [
        ast.Assign([ast.Name(res, ast.Store())], ast.Call(name(fn), [name(p) for p in params], [])),
        ast.Return(ast.Tuple(clone + [expr("f.clone()", f=name(f)) for f in free], ast.Load())),
    ]
    e.stmt(function(traced_fn, [c, *params], traced_body))
    state = [c, *carried]
    e.stmt(_assign(state, [cond.expr, *[a.expr for a in initial]]))
    everything = ast.Tuple([name(v) for v in [c, *params]], ast.Load())
    traced = call("torch.while_loop", name(cond_fn), name(traced_fn), everything)
    target = ast.Tuple([ast.Name(v, ast.Store()) for v in state] + [ast.Starred(
        ast.Name("_", ast.Store()), ast.Store())], ast.Store())  # fmt: skip
    step = ast.Assign(
        [ast.Tuple([ast.Name(v, ast.Store()) for v in state], ast.Store())],
        ast.Call(name(fn), [name(p) for p in params], []),
    )
    e.stmt(ast.If(
        expr("torch.compiler.is_exporting()"),
        [ast.Assign([target], traced)],
        [ast.While(expr("bool(c)", c=name(c)), [step], [])],
    ))  # fmt: skip
    return _result([name(v) for v in carried])


@EMITTERS("loop")
def loop(
    e: NodeEmit, max_trip_count: Arg | None, cond: Arg | None, initial: list[Arg], *, body
) -> ast.expr | None:
    n = len(initial)
    if max_trip_count is None and cond is not None:
        out = _while_loop(e, cond, initial, body)
        if out is not None:
            return out
    k = len(body.outputs) - 1 - n
    carried = [e.bind(v, "carried") for v in body.inputs[2:]]
    if carried:
        e.stmt(_assign(carried, [a.expr for a in initial]))
    lists = [e.tmp("scan") for _ in range(k)]
    for lst in lists:
        e.stmt(_assign([lst], [ast.List([], ast.Load())]))
    c = e.bind(body.inputs[1], "cond", py=True)
    e.stmt(_assign([c], [const(True) if cond is None else expr("bool(c)", c=cond.s)]))
    i = e.bind(body.inputs[0], "i", py=True)
    stmts, outs = e.block(body)
    update: list[ast.stmt] = []
    update.append(_assign([c], [expr("bool(x)", x=outs[0])]))
    if carried:
        update.append(_assign(carried, outs[1 : 1 + n]))
    update += [_append(lst, o) for lst, o in zip(lists, outs[1 + n :])]
    if max_trip_count is not None:
        check = [ast.If(expr("not c", c=name(c)), [ast.Break()], [])]
        e.stmt(
            ast.For(
                ast.Name(i, ast.Store()),
                expr("range(int(m))", m=max_trip_count.s),
                check + stmts + update,
                [],
            )
        )
    else:
        e.stmt(_assign([i], [const(0)]))
        step = ast.AugAssign(ast.Name(i, ast.Store()), ast.Add(), const(1))
        e.stmt(ast.While(name(c), stmts + update + [step], []))
    scans = [_stack(lst, 0, False, v.type) for lst, v in zip(lists, body.outputs[1 + n :])]
    return _result([name(v) for v in carried] + scans)


@EMITTERS("scan")
def scan(
    e: NodeEmit,
    xs: list[Arg],
    *,
    body,
    num_scan_inputs,
    scan_input_axes,
    scan_input_directions,
    scan_output_axes,
    scan_output_directions,
) -> ast.expr | None:
    m = num_scan_inputs
    n = len(xs) - m
    k = len(body.outputs) - n
    in_axes = list(scan_input_axes or [0] * m)
    in_dirs = list(scan_input_directions or [0] * m)
    out_axes = list(scan_output_axes or [0] * k)
    out_dirs = list(scan_output_directions or [0] * k)
    states = [e.bind(v, "state") for v in body.inputs[:n]]
    if states:
        e.stmt(_assign(states, [a.expr for a in xs[:n]]))
    slices = [e.bind(v, "slice") for v in body.inputs[n:]]
    lists = [e.tmp("scan") for _ in range(k)]
    for lst in lists:
        e.stmt(_assign([lst], [ast.List([], ast.Load())]))
    steps = e.let("steps", expr("x.shape[a]", x=xs[n], a=in_axes[0]))
    t = e.tmp("t")
    pre = []
    for sl, x, a, d in zip(slices, xs[n:], in_axes, in_dirs):
        at = name(t) if d == 0 else expr("s - 1 - t", s=steps, t=name(t))
        pre.append(_assign([sl], [expr("x.select(a, i)", x=x, a=a, i=at)]))
    stmts, outs = e.block(body)
    update: list[ast.stmt] = []
    if states:
        update.append(_assign(states, outs[:n]))
    update += [_append(lst, o) for lst, o in zip(lists, outs[n:])]
    e.stmt(ast.For(ast.Name(t, ast.Store()), call("range", steps), pre + stmts + update, []))
    results = [name(s) for s in states]
    results += [
        _stack(lst, a, d == 1, v.type)
        for lst, a, d, v in zip(lists, out_axes, out_dirs, body.outputs[n:])
    ]
    return _result(results)


def _free(e: NodeEmit, graphs: list[Graph]) -> tuple[list[str], bool]:
    """The outer locals ``graphs`` read (by first use), and whether one holds a Python size."""
    defined: set[int] = set()
    names: list[str] = []
    py = False

    def walk(g: Graph) -> None:
        nonlocal py
        defined.update(id(v) for v in g.inputs)
        for n in g.nodes:
            reads = [v for v in n.inputs if v is not None]
            for sub in n.subgraphs():
                walk(sub)
            for v in reads:
                see(v)
            defined.update(id(v) for v in n.outputs)
        for v in g.outputs:
            see(v)

    def see(v: Value) -> None:
        nonlocal py
        if isinstance(v, Weight) or id(v) in defined:
            return
        ref = e.cg._refs.get(id(v))  # noqa: SLF001 - the codegen's own table
        if isinstance(ref, ast.Name) and ref.id not in names:
            names.append(ref.id)
            py |= id(v) in e.cg.py_values

    for g in graphs:
        walk(g)
    return names, py


def _as_function(e: NodeEmit, hint: str, params: list[str], g: Graph, lead=()) -> str:
    """Emit ``def f(*params): <g's nodes>; return (*lead, *g's outputs)``; its name."""
    fn = e.tmp(hint)
    stmts, outs = e.block(g)
    stmts.append(ast.Return(ast.Tuple([*lead, *outs], ast.Load())))
    e.stmt(function(fn, params, stmts))
    return fn


@EMITTERS("if")
def if_(e: NodeEmit, condition: Arg, *, then_branch, else_branch) -> None:
    free, py = _free(e, [then_branch, else_branch])
    if py:
        return _plain_if(e, condition, then_branch, else_branch)
    t = _as_function(e, "then", free, then_branch)
    f = _as_function(e, "else", free, else_branch)
    ops = [name(n) for n in free]

    def assign(value: ast.expr) -> ast.stmt:
        target = ast.Tuple([ast.Name(n, ast.Store()) for n in e.outputs], ast.Store())
        return ast.Assign([target], value)

    traced = call("torch.cond", condition, name(t), name(f), ast.Tuple(ops, ast.Load()))
    eager = ast.If(
        expr("bool(c)", c=condition),
        [assign(ast.Call(name(t), ops, []))],
        [assign(ast.Call(name(f), ops, []))],
    )
    e.stmt(ast.If(expr("torch.compiler.is_exporting()"), [assign(traced)], [eager]))
    return None


def _plain_if(e: NodeEmit, condition: Arg, then_branch: Graph, else_branch: Graph) -> None:
    def branch(g) -> list[ast.stmt]:
        stmts, outs = e.block(g)
        stmts.append(e.cg.assign_outputs(e.outputs, _tuple(outs)))
        return stmts

    e.stmt(ast.If(expr("bool(c)", c=condition), branch(then_branch), branch(else_branch)))
    return None


def _tuple(outs: list[ast.expr]) -> ast.expr:
    return outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Load())
