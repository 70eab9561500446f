"""Relax emitters of the control family: ``if`` as relax.If (outside a dataflow block)."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter, relax_dtype, unsupported

R = relax.op


@emitter("if")
def if_(e: Emit, condition, *, then_branch, else_branch):
    # relax.If takes a 0-d bool; msc's condition is any one-element bool tensor.
    cond = condition
    if e.rank(cond) != 0:
        cond = e.emit(R.reshape(cond, []))
    if e.dtype(cond) != "bool":
        cond = e.emit(R.astype(cond, "bool"))
    then_seq = e.branch(then_branch, [])
    else_seq = e.branch(else_branch, [])
    out = e.emit(relax.If(cond, then_seq, else_seq))
    n = len(e.out_types)
    if n == 1:
        return out
    return [e.emit(relax.TupleGetItem(out, i)) for i in range(n)]


@emitter("loop")
def loop(e: Emit, max_trip_count, cond, *initial, body):
    # A recursive function with a relax.If (RelaxBuilder.loop); an absent cond is true.
    n = len(initial)
    start = cond if cond is not None else e.const(True, "bool")
    outs = e.loop(body, max_trip_count, start, list(initial), list(e.out_types[:n]))
    # Values of a shape not static come back with their rank only: cast them to the node's
    # types (binding fresh variables for unknown dims) so later emitters see shapes.
    return [
        x if x.ty.shape is not None else e.bb.match_cast(x, _type(e, t))
        for x, t in zip(outs, e.out_types)
    ]


def _type(e: Emit, t):
    return relax.TensorType(e.dims(t.shape), relax_dtype(t.dtype))


unsupported("scan", "no Relax emitter yet (a scan is a loop over slices; not written yet)")
