"""StableHLO control flow onto msc's ``loop`` and ``if``: ``while`` (lax.while_loop,
fori_loop, scan), ``if`` and ``case`` (lax.cond, lax.switch).

# NOTE: invariants
# - A region becomes an msc subgraph reading the enclosing values by reference (as StableHLO
#   regions do); constants it makes are weights of the top-level graph.
# - ``while``: a counted loop (a carried counter from a constant, ``< constant``, ``+ 1``: what
#   fori_loop writes) is a loop with that trip count; any other is a loop whose condition is
#   the cond region, computed before the first iteration and at the end of each.
# - ``case``: the index JAX converts from lax.cond's predicate gives an ``if`` on the
#   predicate itself; any other index a chain of ``if (index == k)``, the last branch taking
#   every other index (StableHLO runs the last branch for an index out of range).
# - An unsupported op inside a region is reported with the others; the control op then fails
#   pointing at it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx, Importer
from msc.frontend.jax.reader import ShloOp, tensor_type
from msc.frontend.jax.registry import converter
from msc.ir import DType, Graph, TensorType, Value
from msc.ir.builder import Builder


def _dispose(g: Graph) -> None:
    """Drop the uses a discarded subgraph's nodes hold on outer values."""
    for n in g.nodes:
        for sub in n.subgraphs():
            _dispose(sub)
        n.inputs = ()


def _subgraph(imp: Importer, name: str, block: Any, inputs: list[tuple[str, TensorType]], then):
    """A subgraph with ``inputs``, whose body ``then(graph, input values)`` converts; its
    returned values are the outputs."""
    before = len(imp.unsupported)
    with imp.scope(name) as g:
        vals = [g.add_input(imp._unique(n), t) for n, t in inputs]  # noqa: SLF001
        try:
            outs = then(g, vals)
            if len(imp.unsupported) > before:
                raise Unsupported("its region has ops msc cannot translate (reported with them)")
            imp.close(g, outs)
        except Unsupported:
            _dispose(g)
            raise
    return g


def _const_of(imp: Importer, v: Any, block: Any = None) -> int | None:
    """The integer an MLIR value holds when it is a constant (defined anywhere)."""
    owner = getattr(v, "owner", None)
    op = getattr(owner, "operation", None)
    if op is not None and op.name == "stablehlo.constant":
        a = ShloOp(op).attr("value")
        if isinstance(a, np.ndarray) and a.size == 1 and a.dtype.kind in "iu":
            return int(a.reshape(-1)[0])
    val = imp.env.get(v)
    if val is not None and val.producer is not None and val.producer.op == "constant":
        a = val.producer.attrs["value"]
        if a.size == 1 and a.dtype.kind in "iu":
            return int(a.reshape(-1)[0])
    return None


def _counted(imp: Importer, sop: ShloOp, inits: list[Value]) -> int | None:
    """The trip count of a fori_loop-shaped while, else None."""
    cond = sop.op.regions[0].blocks[0]
    body = sop.op.regions[1].blocks[0]
    cops = [o.operation for o in cond.operations]
    cmp_ops = [o for o in cops if o.name == "stablehlo.compare"]
    if len(cmp_ops) != 1 or any(
        o.name not in ("stablehlo.compare", "stablehlo.constant", "stablehlo.return") for o in cops
    ):
        return None
    cmp = cmp_ops[0]
    if list(cops[-1].operands) != list(cmp.results):
        return None
    if str(cmp.attributes["comparison_direction"]).split()[-1].rstrip(">") != "LT":
        return None
    counter, bound = cmp.operands
    args = list(cond.arguments)
    if counter not in args:
        return None
    k = args.index(counter)
    hi = _const_of(imp, bound)
    init = inits[k].producer
    if hi is None or init is None or init.op != "constant" or init.attrs["value"].size != 1:
        return None
    lo = int(init.attrs["value"].reshape(-1)[0])
    ret = list(body.operations)[-1].operation
    step = ret.operands[k].owner
    sop_step = getattr(step, "operation", None)
    if sop_step is None or sop_step.name != "stablehlo.add":
        return None
    a, b = sop_step.operands
    barg = list(body.arguments)[k]
    if not ((a == barg and _const_of(imp, b) == 1) or (b == barg and _const_of(imp, a) == 1)):
        return None
    return max(hi - lo, 0)


def _plus_one(imp: Importer, v: Any, arg: Any, depth: int = 0) -> bool:
    """The MLIR value ``v`` is ``arg + 1``, read into the ``func.call``s JAX wraps a loop's
    body in (fori_loop's ``i + 1`` is in the body function it calls)."""
    op = getattr(getattr(v, "owner", None), "operation", None)
    if op is None:
        return False
    if op.name == "stablehlo.add":
        a, b = op.operands
        return a == arg and _const_of(imp, b) == 1 or b == arg and _const_of(imp, a) == 1
    if op.name != "func.call" or depth > 8:
        return False
    fn = imp.funcs.get(ShloOp(op).attr("callee"))
    if fn is None or arg not in list(op.operands):
        return False
    block = fn.regions[0].blocks[0]
    ret = list(block.operations)[-1].operation
    at = list(op.results).index(v)
    inner = block.arguments[list(op.operands).index(arg)]
    return _plus_one(imp, ret.operands[at], inner, depth + 1)


def _counters(imp: Importer, sop: ShloOp, inits: list[Value], counted: bool) -> dict[int, int]:
    """The carries that count the iterations, by position -> their first value: an integer
    scalar from a constant, ``+ 1`` each iteration (fori_loop's ``i``, scan's and fori_loop's
    own trip counters). Each is its first value plus the loop's iteration number, which the
    body reads as such; in a loop that is not counted, only a counter its condition and the
    code after it do not read."""
    cond = sop.op.regions[0].blocks[0]
    body = sop.op.regions[1].blocks[0]
    ret = list(body.operations)[-1].operation
    out: dict[int, int] = {}
    for k, (v, arg) in enumerate(zip(inits, body.arguments)):
        p = v.producer
        if p is None or p.op != "constant" or p.attrs["value"].size != 1 or v.type.rank != 0:
            continue
        if v.dtype not in (DType.INT32, DType.INT64):
            continue
        if not _plus_one(imp, ret.operands[k], arg):
            continue
        if not counted and (list(cond.arguments[k].uses) or list(sop.op.results[k].uses)):
            continue
        out[k] = int(p.attrs["value"].reshape(-1)[0])
    return out


@converter("stablehlo.while")
def while_(ctx: Ctx, sop: ShloOp, *inits):
    imp = ctx.imp
    cond = sop.op.regions[0].blocks[0]
    body = sop.op.regions[1].blocks[0]
    fixed = [("i", TensorType(DType.INT64, [])), ("cond", TensorType(DType.BOOL, []))]
    trips = _counted(imp, sop, list(inits))
    # the iteration counters are the loop's iteration number, not state it carries
    counters = _counters(imp, sop, list(inits), trips is not None)
    kept = [k for k in range(len(inits)) if k not in counters]
    carried = [(f"carried_{j}", inits[k].type) for j, k in enumerate(kept)]

    def run(g: Graph, vals: list[Value]) -> list:
        b = Builder()
        args: list = [None] * len(inits)
        for k, v in zip(kept, vals[2:]):
            args[k] = v
        for k, first in counters.items():
            at = b.cast(vals[0], inits[k].dtype)
            args[k] = at if first == 0 else b.op("add", at, b.const(first, inits[k].dtype))
        imp.add(b)
        outs = imp.region(body, args)
        if any(v is None for v in outs):
            return outs
        if trips is not None:
            b = Builder()
            go = b.const(True, DType.BOOL)
            imp.add(b)
        else:  # (it reads no counter)
            (go,) = imp.region(cond, outs)  # type: ignore[arg-type]
        return [go, *[outs[k] for k in kept]]

    g = _subgraph(imp, "body", body, fixed + carried, run)
    try:
        if trips is not None:
            n = ctx.const(trips, DType.INT64)
            ys = ctx.multi("loop", n, None, *[inits[k] for k in kept], body=g)
        else:
            first = imp.region(cond, list(inits))
            if first[0] is None:
                raise Unsupported("its cond region has ops msc cannot translate (reported)")
            ys = ctx.multi("loop", None, first[0], *[inits[k] for k in kept], body=g)
    except Exception:
        _dispose(g)
        raise
    outs: list = [None] * len(inits)
    for k, y in zip(kept, ys):
        outs[k] = y
    for k, first in counters.items():  # after the last iteration (unread where not counted)
        outs[k] = ctx.const(first + (trips or 0), inits[k].dtype)
    return tuple(outs)


def _branch(imp: Importer, sop: ShloOp, k: int) -> Graph:
    block = sop.op.regions[k].blocks[0]
    return _subgraph(imp, f"branch_{k}", block, [], lambda g, _: imp.region(block, []))


def _if(ctx: Ctx, pred: Value, then_g: Graph, else_g: Graph) -> tuple:
    try:
        return ctx.multi("if", pred, then_branch=then_g, else_branch=else_g)
    except Exception:
        _dispose(then_g)
        _dispose(else_g)
        raise


@converter("stablehlo.if")
def if_(ctx: Ctx, sop: ShloOp, pred):
    return _if(ctx, pred, _branch(ctx.imp, sop, 0), _branch(ctx.imp, sop, 1))


@converter("stablehlo.case")
def case(ctx: Ctx, sop: ShloOp, index):
    imp = ctx.imp
    n = len(sop.op.regions)
    if n == 1:
        outs = imp.region(sop.op.regions[0].blocks[0], [])
        if any(v is None for v in outs):
            raise Unsupported("its branch has ops msc cannot translate (reported)")
        return tuple(ctx.op("identity", v) for v in outs)  # type: ignore[arg-type]
    p = index.producer
    if n == 2 and p is not None and p.op == "cast" and p.inputs[0].dtype is DType.BOOL:
        return _if(ctx, p.inputs[0], _branch(imp, sop, 1), _branch(imp, sop, 0))
    types = [tensor_type(r.type) for r in sop.op.results]

    def chain(k: int) -> Graph:
        """A graph giving branch k's outputs when index == k, else those of k + 1, ..."""
        if k == n - 1:
            return _branch(imp, sop, k)

        def run(g: Graph, _: list) -> list:
            b = Builder()
            c = b.op("eq", index, b.const(np.asarray(k, index.dtype.to_numpy()), index.dtype))
            imp.add(b)
            then_g, else_g = _branch(imp, sop, k), chain(k + 1)
            b = Builder()
            outs = b.multi("if", c, then_branch=then_g, else_branch=else_g)
            imp.add(b)
            return list(outs)

        return _subgraph(imp, f"case_{k}", None, [], run)

    c0 = ctx.op("eq", index, ctx.const(np.asarray(0, index.dtype.to_numpy()), index.dtype))
    out = _if(ctx, c0, _branch(imp, sop, 0), chain(1))
    assert len(out) == len(types)
    return out
