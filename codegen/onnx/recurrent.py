"""ONNX emitters of the recurrent family: rnn, gru, lstm as RNN/GRU/LSTM."""

from __future__ import annotations

from codegen.onnx.registry import Emit, emitter
from msc.ops.recurrent import ACTIVATIONS

_ONNX_ACT = {
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "relu": "Relu",
    "leaky_relu": "LeakyRelu",
    "thresholded_relu": "ThresholdedRelu",
    "scaled_tanh": "ScaledTanh",
    "hard_sigmoid": "HardSigmoid",
    "elu": "Elu",
    "softsign": "Softsign",
    "softplus": "Softplus",
    "affine": "Affine",
}


def _recurrent(e: Emit, op: str, ins: list, outputs: int, a: dict, extra: dict):
    batch_first = a["layout"] == 1
    if batch_first:  # onnxruntime runs layout 0 only: transpose around it
        ins = list(ins)
        for i in (0, 5, 6):  # x, initial_h, initial_c
            if i < len(ins) and ins[i] is not None:
                ins[i] = e.op("Transpose", ins[i], perm=[1, 0, 2])
    acts = list(a["activations"])
    alphas = [v for v, k in zip(a["activation_alpha"], acts) if ACTIVATIONS[k][0] is not None]
    betas = [v for v, k in zip(a["activation_beta"], acts) if ACTIVATIONS[k][1] is not None]
    attrs = {
        "hidden_size": a["hidden_size"],
        "direction": a["direction"],
        "activations": [_ONNX_ACT[k] for k in acts],
        "activation_alpha": alphas,
        "activation_beta": betas,
        "clip": a["clip"],
        **extra,
    }
    outs = e.op(op, *ins, outputs=outputs, **attrs)
    if not batch_first:
        return outs
    y = e.op("Transpose", outs[0], perm=[2, 0, 1, 3])
    return (y, *(e.op("Transpose", s, perm=[1, 0, 2]) for s in outs[1:]))


@emitter("rnn", since=7)
def rnn(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, **a):
    return _recurrent(e, "RNN", [x, w, r, b, sequence_lens, initial_h], 2, a, {})


@emitter("gru", since=7)
def gru(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, *, linear_before_reset,
        **a):  # fmt: skip
    extra = {"linear_before_reset": int(linear_before_reset) or None}
    return _recurrent(e, "GRU", [x, w, r, b, sequence_lens, initial_h], 2, a, extra)


@emitter("lstm", since=7)
def lstm(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None,
         *, input_forget, **a):  # fmt: skip
    ins = [x, w, r, b, sequence_lens, initial_h, initial_c, p]
    return _recurrent(e, "LSTM", ins, 3, a, {"input_forget": int(input_forget) or None})
