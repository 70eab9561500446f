"""Recurrent layers: rnn, gru, lstm with ONNX's semantics and weight layout.

# NOTE: invariants
# - Weights keep ONNX's layout and gate order, so a model's tensors stay as the source had
#   them: ``w`` [num_directions, gates * hidden, input], ``r`` [num_directions, gates * hidden,
#   hidden], ``b`` [num_directions, 2 * gates * hidden] (input then recurrence biases). Gate
#   order: gru z, r, h; lstm i, o, f, c. Codegens that target another layout (torch's nn.LSTM
#   is i, f, g, o) reorder at emission.
# - ``activations`` always lists every activation (one per gate function and direction:
#   rnn f; gru f, g; lstm f, g, h), lower-case: sigmoid, tanh, relu, leaky_relu,
#   thresholded_relu, scaled_tanh, hard_sigmoid, elu, softsign, softplus, affine.
#   ``activation_alpha`` / ``activation_beta`` hold one value per activation (the ONNX
#   defaults filled in where the source gave none; ignored by activations without one).
# - ``layout`` 0: x [seq, batch, input], y [seq, num_directions, batch, hidden], states
#   [num_directions, batch, hidden]; 1: x [batch, seq, input], y [batch, seq,
#   num_directions, hidden], states [batch, num_directions, hidden].
# - ``sequence_lens`` [batch] (i32): steps past a sequence's length give zeros in y and leave
#   its state unchanged.
"""

from __future__ import annotations

from typing import Any

from msc.errors import Unsupported
from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Value
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError
from msc.ops.schema import Attr

__all__ = ["ACTIVATIONS", "GATES"]

# name -> (default alpha, default beta); None where the activation takes none.
ACTIVATIONS: dict[str, tuple[float | None, float | None]] = {
    "sigmoid": (None, None),
    "tanh": (None, None),
    "relu": (None, None),
    "softsign": (None, None),
    "softplus": (None, None),
    "leaky_relu": (0.01, None),
    "thresholded_relu": (1.0, None),
    "elu": (1.0, None),
    "scaled_tanh": (1.0, 1.0),
    "hard_sigmoid": (0.2, 0.5),
    "affine": (1.0, 0.0),
}
# op -> (gates, activation functions per direction)
GATES = {"rnn": (1, 1), "gru": (3, 2), "lstm": (4, 3)}

_COMMON = {
    "hidden_size": Attr.int(),
    "direction": Attr.str("forward", doc="forward, reverse or bidirectional"),
    "activations": Attr.strs(),
    "activation_alpha": Attr.floats(),
    "activation_beta": Attr.floats(),
    "clip": Attr.float(None, doc="cell input clip (None: no clip)"),
    "layout": Attr.int(0),
}


def _infer(op, x, w, r, b, sequence_lens, initial_h, *, hidden_size, direction, activations,
           activation_alpha, activation_beta, clip, layout, extra_states=()):  # fmt: skip
    gates, n_act = GATES[op]
    if direction not in ("forward", "reverse", "bidirectional"):
        raise InferError(f"{op}: direction {direction!r}")
    nd = 2 if direction == "bidirectional" else 1
    if len(activations) != n_act * nd:
        raise InferError(f"{op}: {len(activations)} activations, needs {n_act * nd}")
    bad = [a for a in activations if a not in ACTIVATIONS]
    if bad:
        raise InferError(f"{op}: unknown activation(s) {bad}")
    if not len(activation_alpha) == len(activation_beta) == len(activations):
        raise InferError(f"{op}: activation_alpha and _beta need one value per activation")
    if layout not in (0, 1):
        raise InferError(f"{op}: layout {layout}")
    if not x.dtype.is_floating:
        raise InferError(f"{op}: x is {x.dtype.short}, needs a float type")
    for name, t in (("w", w), ("r", r), ("b", b), ("initial_h", initial_h), *extra_states):
        if t is not None and t.dtype is not x.dtype:
            raise InferError(f"{op}: {name} is {t.dtype.short}, x is {x.dtype.short}")
    if sequence_lens is not None and sequence_lens.dtype is not DType.INT32:
        raise InferError(f"{op}: sequence_lens is {sequence_lens.dtype.short}, needs i32")
    for name, t, want in (("w", w, gates * hidden_size), ("r", r, gates * hidden_size),
                          ("b", b, 2 * gates * hidden_size)):  # fmt: skip
        if t is not None and t.shape is not None:
            if len(t.shape) != (2 if name == "b" else 3):
                raise InferError(f"{op}: {name} has rank {len(t.shape)}")
            if t.shape[0] not in (nd, None) or t.shape[1] not in (want, None):
                raise InferError(f"{op}: {name} is {list(t.shape)}, needs [{nd}, {want}, ...]")
    if x.shape is None:
        seq = batch = None
    else:
        if len(x.shape) != 3:
            raise InferError(f"{op}: x has rank {len(x.shape)}, needs 3")
        seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    h = hidden_size
    if layout == 0:
        y, state = [seq, nd, batch, h], [nd, batch, h]
    else:
        y, state = [batch, seq, nd, h], [batch, nd, h]
    return TensorType(x.dtype, y), TensorType(x.dtype, state)


@registry.op(
    "rnn",
    ["x", "w", "r", "b?", "sequence_lens?", "initial_h?"],
    _COMMON,
    outputs=2,
    category="recurrent",
)
def rnn(x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
    """Elman RNN (ONNX RNN): h = f(x W^T + h R^T + b). Outputs y, y_h."""
    return list(_infer("rnn", x, w, r, b, sequence_lens, initial_h, **attrs))


@registry.op(
    "gru",
    ["x", "w", "r", "b?", "sequence_lens?", "initial_h?"],
    {**_COMMON, "linear_before_reset": Attr.bool(False)},
    outputs=2,
    category="recurrent",
)
def gru(x, w, r, b=None, sequence_lens=None, initial_h=None, *, linear_before_reset, **attrs):
    """GRU (ONNX GRU, gates z, r, h). Outputs y, y_h."""
    return list(_infer("gru", x, w, r, b, sequence_lens, initial_h, **attrs))


@registry.op(
    "lstm",
    ["x", "w", "r", "b?", "sequence_lens?", "initial_h?", "initial_c?", "p?"],
    {**_COMMON, "input_forget": Attr.bool(False)},
    outputs=3,
    category="recurrent",
)
def lstm(
    x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *,
    input_forget, **attrs,
):  # fmt: skip
    """LSTM (ONNX LSTM, gates i, o, f, c; peepholes p [num_directions, 3 * hidden] for i, o,
    f). Outputs y, y_h, y_c."""
    y, h = _infer("lstm", x, w, r, b, sequence_lens, initial_h, **attrs,
                  extra_states=(("initial_c", initial_c), ("p", p)))  # fmt: skip
    return [y, h, h]


# ------------------------------------------------------------ torch's modules
# op -> (gates, torch gate order -> canonical order, activations per direction)
TORCH_SPEC = {
    "lstm": (4, [0, 3, 1, 2], ["sigmoid", "tanh", "tanh"]),
    "gru": (3, [1, 0, 2], ["sigmoid", "tanh"]),
    "rnn_tanh": (1, [0], ["tanh"]),
    "rnn_relu": (1, [0], ["relu"]),
}


def _reorder(ctx: Builder, w: Value, gates: int, order: list[int]) -> Value:
    """w [gates * hidden, ...] with its gate blocks in canonical order."""
    if order == list(range(gates)):
        return w
    n = w.type.shape[0] if w.type.shape else None
    if not isinstance(n, int):
        raise Unsupported("recurrent weights of unknown size")
    parts = ctx.multi("split", w, axis=0, sizes=[n // gates] * gates)
    return ctx.op("concat", *[parts[i] for i in order], axis=0)


def _stack(ctx: Builder, xs: list[Value]) -> Value:
    xs = [ctx.op("unsqueeze", x, axes=[0]) for x in xs]
    return xs[0] if len(xs) == 1 else ctx.op("concat", *xs, axis=0)


def torch_layers(
    ctx: Builder, kind: str, input: Value, states: list[Value], params: list[Value],
    has_biases: bool, num_layers: int, train: bool, bidirectional: bool, batch_first: bool,
) -> tuple:  # fmt: skip
    """The canonical nodes of one call of nn.LSTM / nn.GRU / nn.RNN (``kind``: lstm, gru,
    rnn_tanh, rnn_relu), as aten's op gives it: (output, h_n) or (output, h_n, c_n). The torch
    frontend builds them; codegen.torch matches a graph against what this builds to write the
    module again (here, in the op set, so neither imports the other)."""
    if train:
        raise Unsupported(f"{kind} in training mode (dropout between layers); export in eval")
    gates, order, acts = TORCH_SPEC[kind]
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
