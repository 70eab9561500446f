"""Keras emitters of tensor-creating ops: range (start, limit and delta as tensors)."""

from __future__ import annotations

from codegen.keras.model import Emit, dtype_name
from codegen.keras.registry import emitter
from msc.errors import Unsupported
from msc.ir.symexpr import add


@emitter("range")
def range_(e: Emit, node):
    """``ops.arange``: start and delta constants, its length from the output's type (a
    symbolic length is read when the model runs)."""
    start, delta = e.const(0), e.const(2)
    (n,) = node.outputs[0].type.shape or (None,)
    if start is None or delta is None or n is None:
        raise Unsupported("a range whose start or step is computed at run time")
    start, delta = start.item(), delta.item()
    dt = dtype_name(node.outputs[0].type.dtype)
    if isinstance(n, int):
        return f"ops.arange({start!r}, {start + n * delta!r}, {delta!r}, dtype={dt!r})"
    if delta != 1:
        raise Unsupported("a range of symbolic length with a step other than 1")
    return e.sized("arange", [start, add(n, start), 1], value_dtype=dt)
