"""Emitters for the recurrent layers: rnn, gru, lstm through one run-time helper.

# NOTE: torch's nn.RNN/GRU/LSTM cover only part of the canonical ops (one activation set, no
# peepholes, no clip, no per-sequence lengths, other gate orders), so every node calls
# ``_msc_recurrent`` (helpers_rnn.py), which computes ONNX's equations on the weights as the
# graph holds them.
"""

from __future__ import annotations

import ast

from codegen.torch import helpers_rnn  # noqa: F401 - registers the helpers used below
from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
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
