"""Relax emitters of the control family: ``if`` as relax.If (outside a dataflow block);
``loop`` and ``scan`` as a recursive function with a relax.If (RelaxBuilder.loop)."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter, relax_dtype

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
    return [_cast(e, x, t) for x, t in zip(outs, e.out_types)]


def _type(e: Emit, t):
    return relax.TensorType(e.dims(t.shape), relax_dtype(t.dtype))


def _cast(e: Emit, x, t):
    """``x`` (a loop's result) with dims: the node's type ``t`` where Relax knows x's rank
    only; fresh dims where msc does not know t's rank either; as it is without a rank (the
    emitters reading it refuse an input of unknown shape)."""
    if x.ty.shape is not None:
        return x
    if t.shape is not None:
        return e.bb.match_cast(x, _type(e, t))
    return e.sized(x) if int(x.ty.ndim) >= 0 else x


@emitter("scan")
def scan(
    e: Emit, *xs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
    scan_output_axes=None, scan_output_directions=None,
):  # fmt: skip
    # The loop's recursive function run for the scan length, the sequences passed along and
    # sliced (take at i, or length - 1 - i backwards) into the body's inputs.
    m = num_scan_inputs
    n = len(xs) - m
    states, seqs = list(xs[:n]), list(xs[n:])
    axes = [a % e.rank(x) for a, x in zip(scan_input_axes or [0] * m, seqs)]
    backward = list(scan_input_directions or [0] * m)
    length = e.shape(seqs[0])[axes[0]]
    if isinstance(length, int):
        trip, last = e.const(length, "int64"), e.const(length - 1, "int64")
    else:  # known at run time: read from the sequence's shape
        trip = e.emit(R.take(e.shape_tensor(seqs[0]), e.const(axes[0], "int64"), axis=0))
        last = e.emit(R.subtract(trip, e.const(1, "int64")))

    def inputs(i, cond, carried, extra):
        sliced = []
        *extra, at_end = extra
        for x, a, d in zip(extra, axes, backward):
            at = e.emit(R.subtract(at_end, i)) if d else i
            sliced.append(e.emit(R.take(x, at, axis=a)))
        return [*carried, *sliced]

    outs = e.loop(
        body, trip, e.const(True, "bool"), states, list(e.out_types[:n]),
        extra=[*seqs, last], inputs=inputs, has_cond=False,
    )  # fmt: skip
    finals = [_cast(e, x, t) for x, t in zip(outs[:n], e.out_types)]
    k = len(outs) - n
    out_axes = list(scan_output_axes or [0] * k)
    out_back = list(scan_output_directions or [0] * k)
    ys = []
    for y, v, a, d in zip(outs[n:], body.outputs[n:], out_axes, out_back):
        e.require(v.type.shape is not None, "a scan output of unknown rank")
        dims = [e.dims([length])[0] if isinstance(length, int) else length,
                *e.dims(v.type.shape)]  # fmt: skip
        y = e.bb.match_cast(y, relax.TensorType(dims, relax_dtype(v.type.dtype)))
        if d:
            y = e.emit(R.flip(y, 0))
        r = e.rank(y)
        a = a % r
        if a:
            y = e.emit(R.permute_dims(y, [*range(1, a + 1), 0, *range(a + 1, r)]))
        ys.append(y)
    return [*finals, *ys]
