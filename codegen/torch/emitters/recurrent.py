"""Emitters for the recurrent layers: rnn, gru, lstm through one run-time helper.

# NOTE: torch's nn.RNN/GRU/LSTM cover only part of the canonical ops (one activation set, no
# peepholes, no clip, no per-sequence lengths, other gate orders), so every node calls
# ``_msc_recurrent`` (below), which computes ONNX's equations on the weights as the
# graph holds them.
"""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS


def recurrent(e: NodeEmit, x: Arg, w: Arg, r: Arg, b: Arg | None = None,
              sequence_lens: Arg | None = None, initial_h: Arg | None = None,
              initial_c: Arg | None = None, p: Arg | None = None, *, hidden_size, direction,
              activations, activation_alpha, activation_beta, clip, layout,
              linear_before_reset=False, input_forget=False) -> ast.expr:  # fmt: skip
    return call(
        e.helper("_msc_recurrent").id,
        e.node.op, x, w, r, b, sequence_lens, initial_h, initial_c, p, hidden_size, direction,
        list(activations), list(activation_alpha), list(activation_beta), clip, layout,
        linear_before_reset, input_forget,
    )  # fmt: skip


EMITTERS("rnn", "gru", "lstm")(recurrent)


def _msc_rnn_act(kind, x, alpha, beta):
    """One ONNX RNN activation function."""
    if kind == "sigmoid":
        return torch.sigmoid(x)
    if kind == "tanh":
        return torch.tanh(x)
    if kind == "relu":
        return torch.relu(x)
    if kind == "leaky_relu":
        return F.leaky_relu(x, alpha)
    if kind == "thresholded_relu":
        return torch.where(x > alpha, x, torch.zeros_like(x))
    if kind == "scaled_tanh":
        return alpha * torch.tanh(beta * x)
    if kind == "hard_sigmoid":
        return torch.clamp(alpha * x + beta, 0, 1)
    if kind == "elu":
        return F.elu(x, alpha)
    if kind == "softsign":
        return x / (1 + x.abs())
    if kind == "softplus":
        return F.softplus(x)
    if kind == "affine":
        return alpha * x + beta
    raise ValueError(f"activation {kind!r}")


def _msc_recurrent(kind, x, w, r, b, seq_lens, h0, c0, p, hidden, direction, acts, alphas,
                   betas, clip, layout, linear_before_reset, input_forget):  # fmt: skip
    """ONNX RNN / GRU / LSTM: returns (y, y_h) or (y, y_h, y_c).

    Steps past a sequence's length (``seq_lens``) give zeros in y and keep its state; a
    reverse direction walks each sequence from its own last step.
    """
    if layout == 1:
        x = x.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    seq, batch = x.shape[0], x.shape[1]
    n_act = {"rnn": 1, "gru": 2, "lstm": 3}[kind]
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    H = hidden
    dev = x.device
    steps = torch.arange(seq, device=dev)
    if seq_lens is None:
        lens = torch.full((batch,), seq, dtype=torch.long, device=dev)
    else:
        lens = seq_lens.to(torch.long)
    ys, hs, cs = [], [], []
    for d in range(2 if direction == "bidirectional" else 1):
        reverse = direction == "reverse" or d == 1
        fs = [(acts[d * n_act + i], alphas[d * n_act + i], betas[d * n_act + i])
              for i in range(n_act)]  # fmt: skip

        def f(i, v, clipped=True, fs=fs):
            if clip is not None and clipped:  # ONNX clips activation inputs (not h's)
                v = v.clamp(-clip, clip)
            return _msc_rnn_act(fs[i][0], v, fs[i][1], fs[i][2])

        wd, rd = w[d], r[d]
        if b is None:
            wb = rb = torch.zeros(gates * H, dtype=x.dtype, device=dev)
        else:
            wb, rb = b[d][: gates * H], b[d][gates * H :]
        h = torch.zeros(batch, H, dtype=x.dtype, device=dev) if h0 is None else h0[d]
        c = torch.zeros(batch, H, dtype=x.dtype, device=dev) if c0 is None else c0[d]
        if reverse:  # step t reads position len - 1 - t of each sequence
            order = lens[None, :] - 1 - steps[:, None]
            order = torch.where(order >= 0, order, steps[:, None])
        else:
            order = steps[:, None].expand(seq, batch)
        xd = x.gather(0, order[:, :, None].expand(seq, batch, x.shape[2]))
        xw = xd @ wd.T + wb
        outs = []
        for t in range(seq):
            valid = (t < lens)[:, None]
            gx = xw[t]
            if kind == "rnn":
                hn = f(0, gx + h @ rd.T + rb)
            elif kind == "gru":
                gh = h @ rd.T
                z = f(0, gx[:, :H] + gh[:, :H] + rb[:H])
                rr = f(0, gx[:, H : 2 * H] + gh[:, H : 2 * H] + rb[H : 2 * H])
                if linear_before_reset:
                    hh = f(1, gx[:, 2 * H :] + rr * (gh[:, 2 * H :] + rb[2 * H :]))
                else:
                    hh = f(1, gx[:, 2 * H :] + (rr * h) @ rd[2 * H :].T + rb[2 * H :])
                hn = (1 - z) * hh + z * h
            else:
                g = gx + h @ rd.T + rb
                gi, go, gf, gc = g[:, :H], g[:, H : 2 * H], g[:, 2 * H : 3 * H], g[:, 3 * H :]
                if p is not None:
                    gi = gi + p[d][:H] * c
                    gf = gf + p[d][2 * H :] * c
                i = f(0, gi)
                fg = 1 - i if input_forget else f(0, gf)
                cn = fg * c + i * f(1, gc)
                if p is not None:
                    go = go + p[d][H : 2 * H] * cn
                hn = f(0, go) * f(2, cn, False)
                c = torch.where(valid, cn, c)
            h = torch.where(valid, hn, h)
            outs.append(torch.where(valid, hn, torch.zeros_like(hn)))
        y = torch.stack(outs) if outs else x.new_zeros(0, batch, H)
        if reverse:  # put each step back at the position it read
            y = torch.zeros_like(y).scatter(0, order[:, :, None].expand(seq, batch, H), y)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y, yh, yc = torch.stack(ys, 1), torch.stack(hs), torch.stack(cs)
    if layout == 1:
        y, yh, yc = y.permute(2, 0, 1, 3), yh.transpose(0, 1), yc.transpose(0, 1)
    return (y, yh, yc) if kind == "lstm" else (y, yh)


runtime_helpers(_msc_rnn_act, _msc_recurrent)
