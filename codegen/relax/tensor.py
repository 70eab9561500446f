"""Relax emitters of the tensor family."""

from __future__ import annotations

import tvm
from tvm import relax

from codegen.relax.registry import Emit, emitter, relax_dtype, unsupported

R = relax.op


@emitter("range")
def range_(e: Emit, start, limit, delta):
    dt = relax_dtype(e.out.dtype)
    (n,) = e.out.shape
    consts = all(isinstance(v, tvm.ir.GenericConst) for v in (start, delta))
    if consts and n is not None:
        # start and delta are constants and the graph knows the length (possibly symbolic):
        # the end is start + n * delta whatever the limit's form.
        s, d = start.value.numpy().item(), delta.value.numpy().item()
        (length,) = e.dims(e.out.shape)
        if dt.startswith(("int", "uint")):
            s, d = int(s), int(d)
            return e.emit(R.arange(s, length * d + s, d, dt))
        return e.emit(R.arange(s, s + float(d) * n, d, dt))
    # Computed at run time: the length max(ceil((limit - start) / delta), 0) read as a dim,
    # then start + i * delta.
    f64 = [e.emit(R.astype(v, "float64")) for v in (start, limit, delta)]
    count = e.emit(R.ceil(R.divide(R.subtract(f64[1], f64[0]), f64[2])))
    # A zero delta (or an infinite bound) has no length, nor has one past int64.
    finite = R.logical_and(R.isfinite(count), R.less_equal(count, e.const(2.0**62, "float64")))
    none = e.const(0.0, "float64")
    count = e.emit(R.where(finite, R.maximum(count, none), none))
    (length,) = e.ints(e.emit(R.astype(count, "int64")), finite)
    steps = e.emit(R.arange(0, length, 1, dt))
    return e.emit(R.add(R.multiply(steps, delta), start))


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
