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


@converter("stablehlo.while")
def while_(ctx: Ctx, sop: ShloOp, *inits):
    imp = ctx.imp
    cond = sop.op.regions[0].blocks[0]
    body = sop.op.regions[1].blocks[0]
    carried = [(f"carried_{i}", v.type) for i, v in enumerate(inits)]
    fixed = [("i", TensorType(DType.INT64, [])), ("cond", TensorType(DType.BOOL, []))]
    trips = _counted(imp, sop, list(inits))

    def run(g: Graph, vals: list[Value]) -> list:
        outs = imp.region(body, vals[2:])
        if any(v is None for v in outs):
            return outs
        if trips is not None:
            b = Builder()
            go = b.const(True, DType.BOOL)
            imp.add(b)
        else:
            (go,) = imp.region(cond, outs)  # type: ignore[arg-type]
        return [go, *outs]

    g = _subgraph(imp, "body", body, fixed + carried, run)
    try:
        if trips is not None:
            n = ctx.const(trips, DType.INT64)
            return ctx.multi("loop", n, None, *inits, body=g)
        first = imp.region(cond, list(inits))
        if first[0] is None:
            raise Unsupported("its cond region has ops msc cannot translate (reported)")
        return ctx.multi("loop", None, first[0], *inits, body=g)
    except Exception:
        _dispose(g)
        raise


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
