"""TFLite recurrent ops: UNIDIRECTIONAL_SEQUENCE_LSTM and UNIDIRECTIONAL_SEQUENCE_RNN as the
canonical lstm / rnn (ONNX's equations, one direction).

# NOTE: invariants
# - TFLite keeps one weight per gate ([units, input] and [units, units], gates i, f, c, o);
#   the canonical op takes them stacked in ONNX's order i, o, f, c. The gate weights stay
#   weights as the file holds them; nodes stack them.
# - The state inputs are variable tensors: LiteRT zeroes them when it allocates (or when
#   ``reset_all_variables`` runs) and its kernel writes the final state back into them, so a
#   second run starts where the first ended. The graph is the model's first run: an absent
#   initial state (zeros), as a stateless Keras layer means it.
# - time_major is the canonical ``layout`` 0 ([time, batch, ...]), else 1.
# - A coupled input-forget gate (CIFG: no input-gate weights, i = 1 - f) is the canonical
#   ``input_forget`` (f = 1 - i) with the forget gate's weights negated in the input gate's
#   place: sigmoid(-z) = 1 - sigmoid(z), so i and f come out as TFLite's.
# - LiteRT's ``cell_clip`` bounds the cell state; the canonical ``clip`` bounds the gates'
#   inputs, so a cell clip is refused, as are projection, layer normalization and quantized
#   tensors (no canonical form).
"""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.tflite.importer import Ctx
from msc.frontend.tflite.registry import converter, not_read
from msc.ir import DType, Value
from msc.ops.recurrent import ACTIVATIONS

# The schema's names of UNIDIRECTIONAL_SEQUENCE_LSTM's inputs 0 .. 15 (what errors name)
_LSTM_INPUTS = (
    "input",
    *(f"input_to_{g}_weights" for g in ("input", "forget", "cell", "output")),
    *(f"recurrent_to_{g}_weights" for g in ("input", "forget", "cell", "output")),
    *(f"cell_to_{g}_weights" for g in ("input", "forget", "output")),
    *(f"{g}_gate_bias" for g in ("input", "forget", "cell", "output")),
)

# ActivationFunctionType -> the canonical activation of a cell (LSTM: cell input and output)
_LSTM_ACTS = {1: "relu", 4: "tanh"}
_RNN_ACTS = {0: "affine", 1: "relu", 4: "tanh"}
_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def _activation(code: int, table: dict[int, str]) -> str:
    if code not in table:
        known = ", ".join(_ACT_NAMES[k] for k in table)
        raise Unsupported(
            f"fused activation {_ACT_NAMES.get(code, code)} in a recurrent cell (msc reads {known})"
        )
    return table[code]


def _attrs(hidden: int, acts: list[str], time_major: bool) -> dict:
    defaults = [ACTIVATIONS[a] for a in acts]
    return {
        "hidden_size": hidden,
        "direction": "forward",
        "activations": acts,
        "activation_alpha": [float(a if a is not None else 0.0) for a, _ in defaults],
        "activation_beta": [float(b if b is not None else 0.0) for _, b in defaults],
        "layout": 0 if time_major else 1,
    }


def _float_only(ctx: Ctx, tensors: dict) -> None:
    for what, t in tensors.items():
        if t is not None and (t.quant is not None or ctx.dtype(t) is not DType.FLOAT32):
            raise Unsupported(
                f"{what} is {ctx.dtype(t).short}{' quantized' if t.quant else ''} (msc reads "
                "float32 recurrent cells; hybrid and integer kernels have no canonical form)"
            )


def _state(ctx: Ctx, t, time_major: bool) -> Value | None:
    """An initial state [batch, units] -> [1, batch, units] (time major) or [batch, 1, units];
    None (zeros) for a variable tensor, whose first run starts at zeros."""
    if t is None or (t.is_variable and not ctx.is_const(t)):
        return None
    return ctx.op("unsqueeze", ctx.value(t), axes=[0 if time_major else 1])


def _stack(ctx: Ctx, parts: list[Value]) -> Value:
    """Per-gate [units, k] (or [units]) -> [1, gates * units, k] (or [1, gates * units])."""
    return ctx.op("unsqueeze", ctx.op("concat", *parts, axis=0), axes=[0])


@converter("UNIDIRECTIONAL_SEQUENCE_LSTM")
def unidirectional_sequence_lstm(
    ctx: Ctx, x, w_i=None, w_f=None, w_c=None, w_o=None, r_i=None, r_f=None, r_c=None,
    r_o=None, p_i=None, p_f=None, p_o=None, b_i=None, b_f=None, b_c=None, b_o=None,
    projection=None, projection_bias=None, h0=None, c0=None, norm_i=None, norm_f=None,
    norm_c=None, norm_o=None, *, fused_activation_function=4, cell_clip=0.0, proj_clip=0.0,
    time_major=False,
):  # fmt: skip
    named = {"the input": x, "the input-to-forget weights": w_f, "the input-to-cell weights": w_c,
             "the input-to-output weights": w_o, "the recurrent-to-forget weights": r_f,
             "the recurrent-to-cell weights": r_c, "the recurrent-to-output weights": r_o,
             "the forget gate bias": b_f, "the cell gate bias": b_c,
             "the output gate bias": b_o}  # fmt: skip
    missing = [what for what, t in named.items() if t is None]
    if missing:
        raise Unsupported(f"{', '.join(missing)} absent (the kernel needs them)")
    if projection is not None or projection_bias is not None:
        raise Unsupported("a projection layer (projection weights; no canonical form)")
    if any(t is not None for t in (norm_i, norm_f, norm_c, norm_o)):
        raise Unsupported("layer-normalized gates (layer norm coefficients; no canonical form)")
    if cell_clip:
        raise Unsupported(
            f"cell_clip={cell_clip} (LiteRT clips the cell state; the canonical clip bounds "
            "the gates' inputs)"
        )
    cifg = w_i is None
    if cifg != (r_i is None) or cifg != (b_i is None):
        raise Unsupported("input gate weights, recurrent weights and bias not all given or absent")
    peep = [p_i, p_f, p_o]
    if any(t is not None for t in peep) and (p_f is None or p_o is None or (p_i is None) != cifg):
        raise Unsupported("peephole weights for some gates only")
    _float_only(ctx, dict(zip(_LSTM_INPUTS, (x, w_i, w_f, w_c, w_o, r_i, r_f, r_c, r_o, p_i,
                                             p_f, p_o, b_i, b_f, b_c, b_o))))  # fmt: skip
    act = _activation(int(fused_activation_function), _LSTM_ACTS)
    v = {k: None if t is None else ctx.value(t) for k, t in dict(
        w_i=w_i, w_f=w_f, w_c=w_c, w_o=w_o, r_i=r_i, r_f=r_f, r_c=r_c, r_o=r_o, p_i=p_i,
        p_f=p_f, p_o=p_o, b_i=b_i, b_f=b_f, b_c=b_c, b_o=b_o).items()}  # fmt: skip
    if cifg:  # see the NOTE: the input gate computes sigmoid(-z_f) = 1 - f
        for g in ("w", "r", "b", "p"):
            if v[f"{g}_f"] is not None:
                v[f"{g}_i"] = ctx.op("neg", v[f"{g}_f"])
    hidden = int(w_f.shape[0])
    w = _stack(ctx, [v["w_i"], v["w_o"], v["w_f"], v["w_c"]])
    r = _stack(ctx, [v["r_i"], v["r_o"], v["r_f"], v["r_c"]])
    zeros = ctx.const(np.zeros(4 * hidden, np.float32), DType.FLOAT32)
    b = _stack(ctx, [v["b_i"], v["b_o"], v["b_f"], v["b_c"], zeros])
    p = None if p_f is None else _stack(ctx, [v["p_i"], v["p_o"], v["p_f"]])
    y, _, _ = ctx.multi(
        "lstm", ctx.value(x), w, r, b, None, _state(ctx, h0, time_major),
        _state(ctx, c0, time_major), p, **_attrs(hidden, ["sigmoid", act, act], time_major),
        input_forget=cifg,
    )  # fmt: skip
    return ctx.op("squeeze", y, axes=[1 if time_major else 2])


@converter("UNIDIRECTIONAL_SEQUENCE_RNN")
def unidirectional_sequence_rnn(
    ctx: Ctx, x, w, r, b, h0, *, fused_activation_function=0, time_major=False
):
    _float_only(ctx, {"the input": x, "the weights": w, "the recurrent weights": r,
                      "the bias": b})  # fmt: skip
    act = _activation(int(fused_activation_function), _RNN_ACTS)
    hidden = int(w.shape[0])
    bv = ctx.value(b)
    zeros = ctx.const(np.zeros(hidden, np.float32), DType.FLOAT32)
    y, _ = ctx.multi(
        "rnn", ctx.value(x), _stack(ctx, [ctx.value(w)]), _stack(ctx, [ctx.value(r)]),
        _stack(ctx, [bv, zeros]), None, _state(ctx, h0, time_major),
        **_attrs(hidden, [act], time_major),
    )  # fmt: skip
    return ctx.op("squeeze", y, axes=[1 if time_major else 2])


not_read(
    "a single step of a recurrent cell with its own state tensors (variables) is not read yet",
    "LSTM",
    "RNN",
)
not_read(
    "two directions in one op (forward and backward weights, auxiliary inputs) are not read yet",
    "BIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_RNN",
)
not_read("a rank-factored stateful filter (SVDF) has no canonical op", "SVDF")
