"""Keras emitters of the recurrent ops (one direction): ``layers.LSTM``, ``layers.GRU`` and
``layers.SimpleRNN`` with ``return_sequences`` and ``return_state``, the weights reordered into
Keras' gate order (LSTM: i, f, c, o; ONNX's is i, o, f, c). Keras' layers are batch first: a
time-first op (layout 0, ONNX's default and what torch's nn.LSTM exports to) is written with a
transpose of the sequence on each side of the layer and its states squeezed on axis 0."""

from __future__ import annotations

import numpy as np

from codegen.keras.model import Emit
from codegen.keras.registry import emitter
from msc.errors import Unsupported

_ACTS = {"tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu"}


def _check(e: Emit, node, n_inputs: int) -> list[str]:
    a = node.attrs
    if any(e.has(i) for i in range(7, len(node.inputs))):
        raise Unsupported("peepholes")
    if a.get("direction", "forward") != "forward":
        raise Unsupported(f"direction={a['direction']!r}")
    if a.get("clip") is not None:
        raise Unsupported("clip")
    acts = [str(x).lower() for x in a.get("activations") or ()]
    if any(x not in _ACTS for x in acts):
        raise Unsupported(f"activations {acts}")
    return acts


def _blocks(w: np.ndarray, n: int, order: list[int]) -> np.ndarray:
    """[n * units, k] in ONNX gate order -> [k, n * units] in Keras'."""
    parts = np.split(w, n, axis=0)
    return np.concatenate([parts[i] for i in order], axis=0).T


def _emit(e: Emit, node, cls: str, n: int, order: list[int], bias_fn, **kw) -> list[str]:
    acts = _check(e, node, n)
    w = e.weight(1, "the input weights")[0]  # [n * units, in]
    r = e.weight(2, "the recurrent weights")[0]
    units = int(node.attrs["hidden_size"])
    ws = [_blocks(w, n, order), _blocks(r, n, order)]
    b = e.weight(3, "the biases")[0] if e.has(3) else None
    if b is not None:
        ws.append(bias_fn(b, units))
    if cls == "LSTM":
        kw.update(recurrent_activation=acts[0], activation=acts[1])
        if acts[1] != acts[2]:
            raise Unsupported("different cell and output activations")
    elif cls == "GRU":
        kw.update(recurrent_activation=acts[0], activation=acts[1])
    else:
        kw.update(activation=acts[0])
    hint = node.name or cls.lower()
    time_first = int(node.attrs.get("layout", 0)) == 0
    # the op's direction axis: y [seq, 1, batch, units] / states [1, batch, units] time first,
    # y [batch, seq, 1, units] / states [batch, 1, units] batch first
    state_axis = 0 if time_first else 1
    x = e.arg(0)
    if time_first:
        x = e.stmt(f"ops.transpose({x}, [1, 0, 2])", f"{hint}_batch_first")
    call = [x]
    states = [e.arg(i) for i in range(5, len(node.inputs)) if e.has(i)]
    if states:  # Keras' states are [batch, units]
        squeezed = ", ".join(f"ops.squeeze({s}, {state_axis})" for s in states)
        call.append(f"initial_state={e.stmt(f'[{squeezed}]', f'{hint}_initial')}")
    if e.has(4):
        # sequence lengths as Keras' mask of the steps before each length; the op's outputs
        # past a length are zeros (zero_output_for_mask) and its states those at the length
        steps = e.type(0).shape[0 if time_first else 1]
        if not isinstance(steps, int):
            raise Unsupported("sequence lengths over a symbolic number of steps")
        lens = f"ops.expand_dims({e.arg(4)}, 1)"
        mask = f"ops.less(ops.expand_dims(ops.arange({steps}), 0), {lens})"
        call.append(f"mask={e.stmt(mask, f'{hint}_mask')}")
        kw["zero_output_for_mask"] = True
    layer = e.layer(
        cls, units, use_bias=b is not None, return_sequences=True, return_state=True,
        weights=ws, **kw,
    )  # fmt: skip
    outs = e.stmt(f"{layer}({', '.join(call)})", f"{hint}_outputs")
    # Keras gives [batch, time, units] and [batch, units] states; the op has a direction axis
    if time_first:
        y = f"ops.expand_dims(ops.transpose({outs}[0], [1, 0, 2]), 1)"
    else:
        y = f"ops.expand_dims({outs}[0], 2)"
    n_out = len(node.outputs)
    states = [f"ops.expand_dims({outs}[{k}], {state_axis})" for k in range(1, n_out)]
    return [y, *states]


def _reorder(b: np.ndarray, n: int, order: list[int]) -> np.ndarray:
    parts = np.split(b, n)
    return np.concatenate([parts[i] for i in order])


@emitter("lstm")
def lstm(e: Emit, node):
    if node.attrs.get("input_forget"):
        raise Unsupported("input_forget=True")
    order = [0, 2, 3, 1]  # ONNX i, o, f, c -> Keras i, f, c, o
    return _emit(
        e, node, "LSTM", 4, order, lambda b, u: _reorder(b[: 4 * u] + b[4 * u :], 4, order)
    )


@emitter("gru")
def gru(e: Emit, node):
    before = bool(node.attrs.get("linear_before_reset", False))
    if before:
        bias = lambda b, u: np.stack([b[: 3 * u], b[3 * u :]])  # noqa: E731
    else:
        bias = lambda b, u: b[: 3 * u] + b[3 * u :]  # noqa: E731
    return _emit(e, node, "GRU", 3, [0, 1, 2], bias, reset_after=before)


@emitter("rnn")
def rnn(e: Emit, node):
    return _emit(e, node, "SimpleRNN", 1, [0], lambda b, u: b[:u] + b[u:])
