"""Relax emitters of the control family: ``if`` as relax.If (outside a dataflow block)."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter, unsupported

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


unsupported(
    "loop",
    "no Relax emitter yet (a loop is a recursive function with a relax.If; not written yet)",
)
unsupported("scan", "no Relax emitter yet (a scan is a loop over slices; not written yet)")
