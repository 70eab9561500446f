"""Converters for PyTorch's recurrent ops (nn.LSTM, nn.GRU, nn.RNN as torch.export keeps
them: ``aten.lstm.input``, ``gru.input``, ``rnn_tanh.input``, ``rnn_relu.input``) onto the
canonical lstm / gru / rnn ops, one node per layer.

# NOTE: the canonical ops keep ONNX's gate order and weight layout (msc.ops.recurrent): the
# converter reorders torch's gates (LSTM i, f, g, o -> i, o, f, c; GRU r, z, n -> z, r, h)
# with slices and a concat of the source weights, stacks the directions, and joins the two
# biases. torch's GRU applies the reset gate after the recurrent matmul: linear_before_reset.
# Layers run in sequence-first layout; batch_first inputs and outputs are transposed.
"""

from __future__ import annotations

from typing import Any

from msc.frontend.torch.registry import Ctx, Unsupported, converter
from msc.ir import Value

# op -> (gates, torch gate order -> canonical order, activations per direction)
_SPEC = {
    "lstm": (4, [0, 3, 1, 2], ["sigmoid", "tanh", "tanh"]),
    "gru": (3, [1, 0, 2], ["sigmoid", "tanh"]),
    "rnn_tanh": (1, [0], ["tanh"]),
    "rnn_relu": (1, [0], ["relu"]),
}


def _reorder(ctx: Ctx, w: Value, gates: int, order: list[int]) -> Value:
    """w [gates * hidden, ...] with its gate blocks in canonical order."""
    if order == list(range(gates)):
        return w
    n = w.type.shape[0] if w.type.shape else None
    if not isinstance(n, int):
        raise Unsupported("recurrent weights of unknown size")
    parts = ctx.multi("split", w, axis=0, sizes=[n // gates] * gates)
    return ctx.op("concat", *[parts[i] for i in order], axis=0)


def _stack(ctx: Ctx, xs: list[Value]) -> Value:
    xs = [ctx.op("unsqueeze", x, axes=[0]) for x in xs]
    return xs[0] if len(xs) == 1 else ctx.op("concat", *xs, axis=0)


def layers(
    ctx: Ctx, kind: str, input: Value, states: list[Value], params: list[Value],
    has_biases: bool, num_layers: int, train: bool, bidirectional: bool, batch_first: bool,
) -> tuple:  # fmt: skip
    """The canonical nodes of one call of nn.LSTM / nn.GRU / nn.RNN (``kind``: lstm, gru,
    rnn_tanh, rnn_relu), as aten's op gives it: (output, h_n) or (output, h_n, c_n).
    codegen.torch matches a graph against what this builds to write the module again."""
    if train:
        raise Unsupported(f"{kind} in training mode (dropout between layers); export in eval")
    gates, order, acts = _SPEC[kind]
    nd = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != per * nd * num_layers:
        raise Unsupported(f"{kind}: {len(params)} weights for {num_layers} layer(s)")
    op = "lstm" if kind == "lstm" else "gru" if kind == "gru" else "rnn"
    x = ctx.op("transpose", input, perm=[1, 0, 2]) if batch_first else input  # [S, B, I]
    hs, cs = [], []
    for layer in range(num_layers):
        ws, rs, bs = [], [], []
        for d in range(nd):
            p = params[(layer * nd + d) * per : (layer * nd + d + 1) * per]
            ws.append(_reorder(ctx, p[0], gates, order))
            rs.append(_reorder(ctx, p[1], gates, order))
            if has_biases:
                bs.append(ctx.op("concat", _reorder(ctx, p[2], gates, order),
                                 _reorder(ctx, p[3], gates, order), axis=0))  # fmt: skip
        hidden = rs[0].type.shape[-1] if rs[0].type.shape else None
        if not isinstance(hidden, int):
            raise Unsupported(f"{kind} with a hidden size unknown at conversion")
        sl = slice(layer * nd, (layer + 1) * nd)
        init = [ctx.op("slice", s, starts=[sl.start], ends=[sl.stop], axes=[0]) for s in states]
        attrs: dict[str, Any] = {
            "hidden_size": hidden,
            "direction": "bidirectional" if bidirectional else "forward",
            "activations": acts * nd,
            "activation_alpha": [0.0] * len(acts) * nd,
            "activation_beta": [0.0] * len(acts) * nd,
            "layout": 0,
        }
        if op == "gru":
            attrs["linear_before_reset"] = True
        b = _stack(ctx, bs) if has_biases else None
        outs = ctx.multi(op, x, _stack(ctx, ws), _stack(ctx, rs), b, None, *init, **attrs)
        y = outs[0]  # [S, nd, B, H]
        hs.append(outs[1])
        if op == "lstm":
            cs.append(outs[2])
        y = ctx.op("transpose", y, perm=[0, 2, 1, 3])
        x = ctx.op("reshape", y, shape=_flat_shape(y))  # [S, B, nd * H]
    out = ctx.op("transpose", x, perm=[1, 0, 2]) if batch_first else x
    h_n = hs[0] if len(hs) == 1 else ctx.op("concat", *hs, axis=0)
    if op != "lstm":
        return out, h_n
    c_n = cs[0] if len(cs) == 1 else ctx.op("concat", *cs, axis=0)
    return out, h_n, c_n


def _flat_shape(y: Value) -> list[int]:
    """[S, B, nd * H] for y [S, B, nd, H] (-1 where S or B is not static)."""
    s = list(y.type.shape or [None] * 4)
    nh = s[2] * s[3] if isinstance(s[2], int) and isinstance(s[3], int) else None
    if nh is None:
        raise Unsupported("recurrent output with unknown directions or hidden size")
    if isinstance(s[1], int):
        return [-1, s[1], nh]
    if isinstance(s[0], int):
        return [s[0], -1, nh]
    raise Unsupported("recurrent layer with both sequence length and batch dynamic")


@converter("aten.lstm.input")
def lstm(
    ctx: Ctx, input: Value, hx: list[Value], params: list[Value], has_biases: bool,
    num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool,
) -> tuple:  # fmt: skip
    return layers(ctx, "lstm", input, list(hx), list(params), has_biases, num_layers, train,
                   bidirectional, batch_first)  # fmt: skip


def _single_state(kind: str):
    def convert(
        ctx: Ctx, input: Value, hx: Value, params: list[Value], has_biases: bool,
        num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool,
    ) -> tuple:  # fmt: skip
        return layers(ctx, kind, input, [hx], list(params), has_biases, num_layers, train,
                       bidirectional, batch_first)  # fmt: skip

    return convert


converter("aten.gru.input")(_single_state("gru"))
converter("aten.rnn_tanh.input")(_single_state("rnn_tanh"))
converter("aten.rnn_relu.input")(_single_state("rnn_relu"))
