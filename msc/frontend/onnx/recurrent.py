"""ONNX RNN, GRU, LSTM -> the canonical ``rnn``, ``gru``, ``lstm`` (same layout and gates).

# NOTE: the canonical ops take ONNX's weight layout and gate order as they are (see
# msc/ops/recurrent.py); conversion fills in the defaults ONNX leaves implicit: the activation
# list (per direction) and one alpha and beta per activation, consumed from
# activation_alpha/_beta in order by the activations that take them (as onnxruntime does).
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.registry import converter
from msc.ir import DType
from msc.ops.recurrent import ACTIVATIONS, GATES

_NAMES = {
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "relu": "relu",
    "leakyrelu": "leaky_relu",
    "thresholdedrelu": "thresholded_relu",
    "scaledtanh": "scaled_tanh",
    "hardsigmoid": "hard_sigmoid",
    "elu": "elu",
    "softsign": "softsign",
    "softplus": "softplus",
    "affine": "affine",
}
_DEFAULTS = {"rnn": ["tanh"], "gru": ["sigmoid", "tanh"], "lstm": ["sigmoid", "tanh", "tanh"]}


def _attrs(op, direction, hidden_size, activations, alpha, beta, clip, layout) -> dict:
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction={direction!r}")
    nd = 2 if direction == "bidirectional" else 1
    n_act = GATES[op][1]
    if activations is None:
        acts = _DEFAULTS[op] * nd
    else:
        acts = []
        for a in activations:
            canon = _NAMES.get(a.lower())
            if canon is None:
                raise Unsupported(f"activation {a!r}")
            acts.append(canon)
        if len(acts) == n_act and nd == 2:
            acts = acts * 2
        if len(acts) != n_act * nd:
            raise Unsupported(f"{len(acts)} activations for {nd} direction(s), needs {n_act * nd}")
    alphas, betas = list(alpha or []), list(beta or [])
    out_a, out_b = [], []
    for a in acts:
        da, db = ACTIVATIONS[a]
        out_a.append(alphas.pop(0) if da is not None and alphas else (da or 0.0))
        out_b.append(betas.pop(0) if db is not None and betas else (db or 0.0))
    return {
        "hidden_size": hidden_size,
        "direction": direction,
        "activations": acts,
        "activation_alpha": out_a,
        "activation_beta": out_b,
        "clip": clip,
        "layout": layout,
    }


def _seq_lens(ctx: Ctx, x, sequence_lens, layout: int):
    """None when every sequence has the full length (known at import), else i32 lengths."""
    if sequence_lens is None:
        return None
    c = ctx.known(sequence_lens)
    seq = ctx.shape(x)[layout]
    if c is not None and isinstance(seq, int) and np.all(np.asarray(c) == seq):
        return None
    return ctx.cast(sequence_lens, DType.INT32)


def _hidden(ctx: Ctx, w, hidden_size, gates: int) -> int:
    if hidden_size is not None:
        return hidden_size
    rows = ctx.shape(w)[1]
    if not isinstance(rows, int):
        raise Unsupported("hidden_size is not given and W's shape is not static")
    return rows // gates


@converter("RNN", since=7)
def rnn(ctx: Ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *,  # noqa: N803
        activation_alpha=None, activation_beta=None, activations=None, clip=None,
        direction="forward", hidden_size=None, layout=0):  # fmt: skip
    h = _hidden(ctx, W, hidden_size, 1)
    attrs = _attrs("rnn", direction, h, activations, activation_alpha, activation_beta, clip,
                   layout)  # fmt: skip
    lens = _seq_lens(ctx, X, sequence_lens, layout)
    return ctx.ops("rnn", X, W, R, B, lens, initial_h, **attrs)


@converter("GRU", since=7)
def gru(ctx: Ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *,  # noqa: N803
        activation_alpha=None, activation_beta=None, activations=None, clip=None,
        direction="forward", hidden_size=None, layout=0, linear_before_reset=0):  # fmt: skip
    h = _hidden(ctx, W, hidden_size, 3)
    attrs = _attrs("gru", direction, h, activations, activation_alpha, activation_beta, clip,
                   layout)  # fmt: skip
    lens = _seq_lens(ctx, X, sequence_lens, layout)
    lbr = bool(linear_before_reset)
    return ctx.ops("gru", X, W, R, B, lens, initial_h, linear_before_reset=lbr, **attrs)


@converter("LSTM", since=7)
def lstm(ctx: Ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None,  # noqa: N803
         P=None, *, activation_alpha=None, activation_beta=None, activations=None, clip=None,  # noqa: N803
         direction="forward", hidden_size=None, input_forget=0, layout=0):  # fmt: skip
    h = _hidden(ctx, W, hidden_size, 4)
    attrs = _attrs("lstm", direction, h, activations, activation_alpha, activation_beta, clip,
                   layout)  # fmt: skip
    lens = _seq_lens(ctx, X, sequence_lens, layout)
    return ctx.ops("lstm", X, W, R, B, lens, initial_h, initial_c, P,
                   input_forget=bool(input_forget), **attrs)  # fmt: skip
