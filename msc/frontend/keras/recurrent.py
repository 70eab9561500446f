"""Keras recurrent layers: LSTM, GRU and SimpleRNN as the canonical (ONNX-form) ops, batch
first (``layout=1``).

Keras keeps a cell's kernels as [in, gates * units] with gates in its own order (LSTM: i, f,
c, o; GRU: z, r, h); the canonical ops take [1, gates * units, in] in ONNX's order (LSTM:
i, o, f, c). The kernels stay weights in Keras' layout; nodes reorder them.
"""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.keras.elementwise import activation_name
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ir import Value

_ACTS = {"tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu"}


def _act(fn) -> str:
    name = activation_name(fn) or "linear"
    if name not in _ACTS:
        raise Unsupported(f"activation {name!r} in a recurrent cell")
    return _ACTS[name]


def _check(layer) -> None:
    if getattr(layer, "stateful", False):
        raise Unsupported(
            "stateful=True: the layer carries its state from one call to the next in "
            "variables, a converted graph holds no state between runs (rebuild the layer "
            "with stateful=False and pass the state as initial_state)"
        )


def _gates(ctx: Ctx, kernel: Value, n: int, order: list[int]) -> Value:
    """[in, n * units] -> [1, n * units, in], the gate blocks in ``order``."""
    t = ctx.op("transpose", kernel, perm=[1, 0])
    units = t.type.shape[0] // n
    if order != list(range(n)):
        parts = ctx.multi("split", t, axis=0, sizes=[units] * n)
        t = ctx.op("concat", *(parts[i] for i in order), axis=0)
    return ctx.op("unsqueeze", t, axes=[0])


def _bias(ctx: Ctx, bias: Value, n: int, order: list[int], recurrent: Value | None) -> Value:
    """[n * units] (+ the recurrent bias, or zeros) -> [1, 2 * n * units]."""
    units = bias.type.shape[0] // n
    b = bias
    if order != list(range(n)):
        parts = ctx.multi("split", bias, axis=0, sizes=[units] * n)
        b = ctx.op("concat", *(parts[i] for i in order), axis=0)
    if recurrent is None:
        recurrent = ctx.const(np.zeros(n * units, bias.dtype.to_numpy()), bias.dtype)
    return ctx.op("unsqueeze", ctx.op("concat", b, recurrent, axis=0), axes=[0])


def _attrs(units: int, acts: list[str]) -> dict:
    return {
        "hidden_size": units,
        "direction": "forward",
        "activations": acts,
        "activation_alpha": [0.0] * len(acts),
        "activation_beta": [0.0] * len(acts),
        "layout": 1,
    }


def _lstm_cell(ctx: Ctx, cell, x, lens, states):
    order = [0, 3, 1, 2]  # Keras i, f, c, o -> ONNX i, o, f, c
    w = _gates(ctx, ctx.weight(cell.kernel), 4, order)
    r = _gates(ctx, ctx.weight(cell.recurrent_kernel), 4, order)
    b = _bias(ctx, ctx.weight(cell.bias), 4, order, None) if cell.use_bias else None
    acts = [_act(cell.recurrent_activation), _act(cell.activation), _act(cell.activation)]
    h0, c0 = states if states is not None else (None, None)
    y, h, c = ctx.multi(
        "lstm", x, w, r, b, lens, h0, c0, **_attrs(int(cell.units), acts), input_forget=False
    )
    return y, [h, c]


def _gru_cell(ctx: Ctx, cell, x, lens, states):
    order = [0, 1, 2]  # z, r, h in both
    w = _gates(ctx, ctx.weight(cell.kernel), 3, order)
    r = _gates(ctx, ctx.weight(cell.recurrent_kernel), 3, order)
    b = None
    if cell.use_bias:
        bias = ctx.weight(cell.bias)
        if cell.reset_after:  # [2, 3 * units]: input and recurrent biases
            b = ctx.op("reshape", bias, shape=[1, int(np.prod(bias.type.shape))])
        else:
            b = _bias(ctx, bias, 3, order, None)
    acts = [_act(cell.recurrent_activation), _act(cell.activation)]
    h0 = states[0] if states is not None else None
    y, h = ctx.multi(
        "gru", x, w, r, b, lens, h0, **_attrs(int(cell.units), acts),
        linear_before_reset=bool(cell.reset_after),
    )  # fmt: skip
    return y, [h]


def _simple_cell(ctx: Ctx, cell, x, lens, states):
    w = _gates(ctx, ctx.weight(cell.kernel), 1, [0])
    r = _gates(ctx, ctx.weight(cell.recurrent_kernel), 1, [0])
    b = _bias(ctx, ctx.weight(cell.bias), 1, [0], None) if cell.use_bias else None
    h0 = states[0] if states is not None else None
    y, h = ctx.multi(
        "rnn", x, w, r, b, lens, h0, **_attrs(int(cell.units), [_act(cell.activation)])
    )
    return y, [h]


CELLS = {"LSTMCell": _lstm_cell, "GRUCell": _gru_cell, "SimpleRNNCell": _simple_cell}


def _cell_fn(cell):
    fn = CELLS.get(type(cell).__name__)
    if fn is None:
        raise Unsupported(f"a {type(cell).__name__} cell (msc reads {', '.join(sorted(CELLS))})")
    return fn


def _initial(ctx: Ctx, initial_state) -> list[Value] | None:
    """Keras' initial states [batch, units] -> the ops' [batch, 1, units] (layout 1)."""
    if initial_state is None:
        return None
    states = initial_state if isinstance(initial_state, list | tuple) else [initial_state]
    if any(s is None for s in states):
        raise Unsupported("an initial state that is not a tensor of the graph")
    return [ctx.op("unsqueeze", s, axes=[1]) for s in states]


def run(ctx: Ctx, layer, x: Value, mask: Value | None = None, initial_state=None):
    """A Keras recurrent layer (LSTM, GRU, SimpleRNN, RNN of one of their cells) as its
    canonical op, with Keras' semantics of ``go_backwards``, masks and the outputs it
    returns.

    A mask (any pattern of steps, as Keras allows) is applied exactly: the unmasked steps are
    moved to the front in their order (a stable sort by ``where(mask, t, t + T)``) and run
    with their count as the op's ``sequence_lens``; each output step then takes the output
    of the last unmasked step at or before it (zeros before the first), as Keras' loop
    carries the previous output and state over a masked step.
    """
    _check(layer)
    cells = [layer.cell]
    if type(layer.cell).__name__ == "StackedRNNCells":  # each cell's sequence feeds the next
        cells = list(layer.cell.cells)
        if layer.return_state or initial_state is not None:
            raise Unsupported("states (initial or returned) of StackedRNNCells")
    init = _initial(ctx, initial_state)
    if layer.go_backwards:
        x = ctx.op("flip", x, axes=[1])
        mask = None if mask is None else ctx.op("flip", mask, axes=[1])
    for cell in cells:
        fn = _cell_fn(cell)
        if mask is None:
            y, states = fn(ctx, cell, x, None, init)
            seq = ctx.op("squeeze", y, axes=[2])
            states = [ctx.op("squeeze", s, axes=[1]) for s in states]
            last = states[0]
        else:
            seq, last, states = _masked(ctx, layer, cell, fn, x, mask, init)
        x = seq
    out = seq if layer.return_sequences else last
    if not layer.return_state:
        return out
    return (out, *states)


def _masked(ctx: Ctx, layer, cell, fn, x: Value, mask: Value, init):
    from msc.ir import DType

    steps = x.type.shape[1]
    if not isinstance(steps, int):
        raise Unsupported("a mask over a symbolic number of steps")
    if mask.type.rank != 2:
        raise Unsupported(f"a mask of rank {mask.type.rank} (Keras' is [batch, steps])")
    m = mask if mask.dtype is DType.BOOL else ctx.op("cast", mask, to=DType.BOOL)
    # int32 index arithmetic, Keras' default int (what codegen.keras' source computes in)
    t = ctx.const(np.arange(steps, dtype=np.int32), DType.INT32)
    key = ctx.op("where", m, t, ctx.const(np.arange(steps, 2 * steps, dtype=np.int32), DType.INT32))
    order = ctx.op("argsort", key, axis=1)
    feat = int(x.type.shape[2])
    idx = ctx.op("expand", ctx.op("unsqueeze", order, axes=[2]), shape=[-1, -1, feat])
    packed = ctx.op("gather_elements", x, idx, axis=1)
    count = ctx.op("reduce_sum", ctx.op("cast", m, to=DType.INT32), axes=[1], keepdims=False)
    one = ctx.const(np.int32(1), DType.INT32)
    y, states = fn(ctx, cell, packed, ctx.op("maximum", count, one), init)
    y = ctx.op("squeeze", y, axes=[2])  # [batch, steps, units], zeros past each count
    units = int(y.type.shape[2])
    seen = ctx.op("cumsum", ctx.op("cast", m, to=DType.INT32), axis=1)
    zero_i = ctx.const(np.int32(0), DType.INT32)
    back = ctx.op("maximum", ctx.op("sub", seen, ctx.const(np.int32(1), DType.INT32)), zero_i)
    back = ctx.op("expand", ctx.op("unsqueeze", back, axes=[2]), shape=[-1, -1, units])
    carried = ctx.op("gather_elements", y, back, axis=1)
    zero_out = bool(getattr(layer, "zero_output_for_mask", False))
    keep = m if zero_out else ctx.op("gt", seen, zero_i)
    zeros = ctx.f32(0.0, y)
    seq = ctx.op("where", ctx.op("unsqueeze", keep, axes=[2]), carried, zeros)
    any_step = ctx.op(
        "unsqueeze", ctx.op("gt", count, ctx.const(np.int32(0), DType.INT32)), axes=[1]
    )
    states = [ctx.op("squeeze", s, axes=[1]) for s in states]
    if init is None:
        held = [ctx.op("where", any_step, s, zeros) for s in states]
    else:
        held = [
            ctx.op("where", any_step, s, ctx.op("squeeze", s0, axes=[1]))
            for s, s0 in zip(states, init)
        ]
    last = ctx.op("where", any_step, states[0], zeros)
    if zero_out:
        at_end = ctx.op("slice", m, starts=[steps - 1], ends=[steps], axes=[1])
        last = ctx.op("where", at_end, last, zeros)
    return seq, last, held


@converter("LSTM", "GRU", "SimpleRNN", "RNN")
def recurrent(ctx: Ctx, layer, x, mask=None, initial_state=None):
    return run(ctx, layer, x, mask, initial_state)


@converter("Bidirectional")
def bidirectional(ctx: Ctx, layer, x, mask=None):
    """The forward layer and the backward one (``go_backwards``, its sequence flipped back to
    forward order), merged as ``merge_mode`` says."""
    fwd = run(ctx, layer.forward_layer, x, mask)
    bwd = run(ctx, layer.backward_layer, x, mask)
    fwd = list(fwd) if isinstance(fwd, tuple) else [fwd]
    bwd = list(bwd) if isinstance(bwd, tuple) else [bwd]
    y, y_rev = fwd[0], bwd[0]
    if layer.return_sequences:
        y_rev = ctx.op("flip", y_rev, axes=[1])
    mode = layer.merge_mode
    if mode == "concat":
        out = [ctx.op("concat", y, y_rev, axis=-1)]
    elif mode == "sum":
        out = [ctx.op("add", y, y_rev)]
    elif mode == "mul":
        out = [ctx.op("mul", y, y_rev)]
    elif mode == "ave":
        out = [ctx.op("div", ctx.op("add", y, y_rev), ctx.f32(2.0, y))]
    elif mode is None:
        out = [y, y_rev]
    else:
        raise Unsupported(f"merge_mode={mode!r}")
    out = out + (fwd[1:] + bwd[1:] if layer.return_state else [])
    return tuple(out) if len(out) > 1 else out[0]


@converter("LSTMCell", "GRUCell", "SimpleRNNCell")
def cell_step(ctx: Ctx, cell, x, *states):
    """A cell called on its own: one step, ``cell(x, states)`` -> (output, new states), as
    a one-step sequence through the cell's op."""
    fn = _cell_fn(cell)
    if x.type.rank != 2:
        raise Unsupported(f"an input of rank {x.type.rank} (a cell takes [batch, features])")
    init = [ctx.op("unsqueeze", s, axes=[1]) for s in states] or None
    y, new = fn(ctx, cell, ctx.op("unsqueeze", x, axes=[1]), None, init)
    new = [ctx.op("squeeze", s, axes=[1]) for s in new]
    return (new[0], *new)
