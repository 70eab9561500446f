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
# - ``if`` becomes a Python ``if`` over the two inlined branches.
"""

from __future__ import annotations

import ast

from codegen.torch.code import call, const, expr, name
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.registry import EMITTERS


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


@EMITTERS("loop")
def loop(
    e: NodeEmit, max_trip_count: Arg | None, cond: Arg | None, initial: list[Arg], *, body
) -> ast.expr | None:
    n = len(initial)
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


@EMITTERS("if")
def if_(e: NodeEmit, condition: Arg, *, then_branch, else_branch) -> None:
    def branch(g) -> list[ast.stmt]:
        stmts, outs = e.block(g)
        stmts.append(e.cg.assign_outputs(e.outputs, _tuple(outs)))
        return stmts

    e.stmt(ast.If(expr("bool(c)", c=condition), branch(then_branch), branch(else_branch)))
    return None


def _tuple(outs: list[ast.expr]) -> ast.expr:
    return outs[0] if len(outs) == 1 else ast.Tuple(outs, ast.Load())
