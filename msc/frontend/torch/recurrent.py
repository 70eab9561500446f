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

from msc.frontend.torch.registry import Ctx, converter
from msc.ir import Value
from msc.ops.recurrent import torch_layers as layers


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
