"""Relax emitters of the tensor family."""

from __future__ import annotations

import tvm
from tvm import relax

from codegen.relax.registry import Emit, emitter, relax_dtype, unsupported

R = relax.op


def _scalar(e: Emit, x, what: str):
    e.require(isinstance(x, tvm.ir.GenericConst), f"range with a run-time {what}")
    return x.value.numpy().item()


@emitter("range")
def range_(e: Emit, start, limit, delta):
    # start and delta are constants; the length is the output's (possibly symbolic) dim, so
    # the end is start + n * delta whatever the limit's form.
    s, d = _scalar(e, start, "start"), _scalar(e, delta, "delta")
    (n,) = e.dims(e.out.shape)
    dt = relax_dtype(e.out.dtype)
    if dt.startswith(("int", "uint")):
        s, d = int(s), int(d)
        return e.emit(R.arange(s, n * d + s, d, dt))
    return e.emit(R.arange(s, s + float(d) * e.out.shape[0], d, dt))


unsupported("bitcast", "Relax has no bit reinterpretation (astype converts values)")
unsupported("det", "Relax has no determinant and msc has no decomposition for it")
unsupported(
    "tensor_scatter",
    "not written yet (a write at per-batch run-time offsets; Relax has no dynamic update slice)",
)
unsupported(
    "unique",
    "not mapped yet (relax.op.unique exists; msc's four outputs, first-occurrence order and "
    "data-dependent length are not mapped)",
)


@emitter("reverse_sequence")
def reverse_sequence(e: Emit, x, sequence_lens, *, batch_axis=1, time_axis=0):
    return e.emit(R.reverse_sequence(x, sequence_lens, time_axis, batch_axis))
