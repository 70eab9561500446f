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
    for flag in ("go_backwards", "stateful"):
        if getattr(layer, flag, False):
            raise Unsupported(f"{flag}=True")


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


def _outputs(ctx: Ctx, layer, y: Value, *states: Value):
    # y [batch, time, 1, units]; states [batch, 1, units]
    h = ctx.op("squeeze", states[0], axes=[1])
    out = ctx.op("squeeze", y, axes=[2]) if layer.return_sequences else h
    if not layer.return_state:
        return out
    return (out, h, *(ctx.op("squeeze", s, axes=[1]) for s in states[1:]))


def _attrs(units: int, acts: list[str]) -> dict:
    return {
        "hidden_size": units,
        "direction": "forward",
        "activations": acts,
        "activation_alpha": [0.0] * len(acts),
        "activation_beta": [0.0] * len(acts),
        "layout": 1,
    }


@converter("LSTM")
def lstm(ctx: Ctx, layer, x, *rest):
    _check(layer)
    if rest:
        raise Unsupported("initial states or a mask")
    cell = layer.cell
    order = [0, 3, 1, 2]  # Keras i, f, c, o -> ONNX i, o, f, c
    w = _gates(ctx, ctx.weight(cell.kernel), 4, order)
    r = _gates(ctx, ctx.weight(cell.recurrent_kernel), 4, order)
    b = _bias(ctx, ctx.weight(cell.bias), 4, order, None) if cell.use_bias else None
    acts = [_act(cell.recurrent_activation), _act(cell.activation), _act(cell.activation)]
    y, h, c = ctx.multi("lstm", x, w, r, b, **_attrs(int(cell.units), acts), input_forget=False)
    return _outputs(ctx, layer, y, h, c)


@converter("GRU")
def gru(ctx: Ctx, layer, x, *rest):
    _check(layer)
    if rest:
        raise Unsupported("initial states or a mask")
    cell = layer.cell
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
    y, h = ctx.multi(
        "gru", x, w, r, b, **_attrs(int(cell.units), acts),
        linear_before_reset=bool(cell.reset_after),
    )  # fmt: skip
    return _outputs(ctx, layer, y, h)


@converter("SimpleRNN")
def simple_rnn(ctx: Ctx, layer, x, *rest):
    _check(layer)
    if rest:
        raise Unsupported("initial states or a mask")
    cell = layer.cell
    w = _gates(ctx, ctx.weight(cell.kernel), 1, [0])
    r = _gates(ctx, ctx.weight(cell.recurrent_kernel), 1, [0])
    b = _bias(ctx, ctx.weight(cell.bias), 1, [0], None) if cell.use_bias else None
    y, h = ctx.multi("rnn", x, w, r, b, **_attrs(int(cell.units), [_act(cell.activation)]))
    return _outputs(ctx, layer, y, h)
