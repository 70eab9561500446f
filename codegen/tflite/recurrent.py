"""TFLite emitters of the recurrent ops: lstm as UNIDIRECTIONAL_SEQUENCE_LSTM, rnn as
UNIDIRECTIONAL_SEQUENCE_RNN, one operator per direction (a reverse direction reads its input
through REVERSE_V2 and its output back through another; two directions are concatenated).
What the builtins cannot express falls to the ops' decompositions (msc.ops.decompose:
the steps unrolled), as gru always does: TFLite has no GRU builtin.

# NOTE: invariants
# - The builtins take one weight per gate (i, f, c, o) and one bias per gate; the canonical
#   stacked weights (ONNX's i, o, f, c) are split at write time, the input and recurrence
#   biases summed. A coupled input-forget gate (``input_forget``: f = 1 - i) is LiteRT's CIFG
#   (no input gate weights, i = 1 - f) with the input gate's weights, bias and peephole
#   negated as the forget gate's: sigmoid(-z) = 1 - sigmoid(z).
# - The state inputs are variable tensors, as the schema requires: zeros when LiteRT
#   allocates (or ``reset_all_variables`` runs), and the kernel leaves its final state in them,
#   so a second run of the written model starts where the first ended. The msc graph is the
#   first run; an initial state is written only when it is absent or constant zeros.
# - The builtins return only the output sequence: a final hidden state is its last step (the
#   first, for a reverse direction read before it is turned back), exact without sequence
#   lengths; a used final cell state is not available and the node is decomposed.
# - A variable's shape is fixed, so a symbolic batch is decomposed; a symbolic number of
#   steps is fine (the last step is a STRIDED_SLICE from -1).
"""

from __future__ import annotations

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.errors import Unsupported
from msc.ir.dtype import DType
from msc.ir.types import TensorType

_F32 = DType.FLOAT32
# cell activation -> ActivationFunctionType (LSTM: its cell input and output activation)
_LSTM_ACTS = {"tanh": 4, "relu": 1}
_RNN_ACTS = {"tanh": 4, "relu": 1, "affine": 0}  # affine only as the identity (alpha 1, beta 0)


def _used(e: Emit, k: int) -> bool:
    v = e.node.outputs[k]
    return bool(v.uses) or any(o is v for o in e.w.graph.outputs)


def _checks(e: Emit, x: Ref, sequence_lens, clip) -> int:
    """The batch size (static: the state variables' shape is fixed)."""
    e.require(x.dtype is _F32, f"a {x.dtype.short} input (the builtins are written for f32)")
    e.require(sequence_lens is None, "per-sequence lengths (the builtins have none)")
    e.require(
        clip is None, "clip (ONNX's bounds the gates' inputs; LiteRT's cell_clip the cell state)"
    )
    batch = x.shape[1 if int(e.node.attrs["layout"]) == 0 else 0]
    e.require(isinstance(batch, int), "a symbolic batch (the state variables' shape is fixed)")
    return int(batch)


def _weights(e: Emit, *indices: int) -> list[np.ndarray | None]:
    out = []
    for i in indices:
        if i >= len(e.node.inputs) or e.node.inputs[i] is None:
            out.append(None)
            continue
        a = e.folded(i)
        e.require(a is not None, f"input {i} computed at run time (the builtins take constants)")
        out.append(np.asarray(a, np.float32))
    return out


def _zero_state(e: Emit, *indices: int) -> None:
    for i in indices:
        if i < len(e.node.inputs) and e.node.inputs[i] is not None:
            a = e.folded(i)
            e.require(
                a is not None and not np.any(a),
                "an initial state other than zeros (the builtins' state inputs are variable "
                "tensors, zeros at the first run)",
            )


def _state(e: Emit, batch: int, units: int, what: str) -> Ref:
    ref = e.tensor(TensorType(_F32, [batch, units]), f"{e.node.name or 'rnn'}/{what}")
    e.w.tensors[ref.index].is_variable = True
    return ref


def _directions(e: Emit, x: Ref, run) -> tuple[Ref, Ref]:
    """``run(d, x_d)`` writes direction d's builtin on x_d (reversed in time for a reverse
    direction); returns the op's y and final h, each with its direction axis."""
    a = e.node.attrs
    layout = int(a["layout"])
    t_axis = 0 if layout == 0 else 1
    nd = 2 if a["direction"] == "bidirectional" else 1
    ys, hs = [], []
    for d in range(nd):
        reverse = a["direction"] == "reverse" or d == 1
        xd = _reverse(e, x, t_axis) if reverse else x
        y = run(d, xd)  # [time, batch, units] or [batch, time, units]
        hs.append(_last_step(e, y, t_axis))
        if reverse:
            y = _reverse(e, y, t_axis)
        ys.append(e.expand_dims(y, 1 if layout == 0 else 2))
    y_axis, h_axis = (1, 0) if layout == 0 else (2, 1)
    if nd == 1:
        return ys[0], hs[0]
    y = e.op("CONCATENATION", ys, e.out_type(0), axis=y_axis)
    return y, e.op("CONCATENATION", hs, e.out_type(1), axis=h_axis)


def _reverse(e: Emit, x: Ref, axis: int) -> Ref:
    return e.op("REVERSE_V2", [x, e.ints([axis])], x.type)


def _last_step(e: Emit, y: Ref, t_axis: int) -> Ref:
    """The last step of y, keeping its time axis as the canonical state's direction axis."""
    begin = [0, 0, 0]
    begin[t_axis] = -1
    shape = list(y.shape)
    shape[t_axis] = 1
    return e.op(
        "STRIDED_SLICE",
        [y, e.ints(begin), e.ints([0, 0, 0]), e.ints([1, 1, 1])],
        TensorType(y.dtype, shape),
        begin_mask=0b111 & ~(1 << t_axis),
        end_mask=0b111,
    )


def _outputs(e: Emit, y: Ref, h: Ref, n: int) -> list[Ref]:
    """y, then the final h where it is used (the last output a builtin can give)."""
    if n > 2 and _used(e, 2):
        raise Unsupported("the final cell state (UNIDIRECTIONAL_SEQUENCE_LSTM returns only y)")
    return [y, h] if _used(e, 1) else [y]


@emitter("lstm")
def lstm(e: Emit, x: Ref, w: Ref, r: Ref, b=None, sequence_lens=None, initial_h=None,
         initial_c=None, p=None, *, hidden_size, direction, activations, activation_alpha,
         activation_beta, clip, layout, input_forget) -> list[Ref]:  # fmt: skip
    batch = _checks(e, x, sequence_lens, clip)
    units = int(hidden_size)
    nd = 2 if direction == "bidirectional" else 1
    codes = []
    for d in range(nd):
        f, g, h = activations[3 * d : 3 * d + 3]
        e.require(
            f == "sigmoid" and g == h and g in _LSTM_ACTS,
            f"activations {list(activations[3 * d : 3 * d + 3])} (LiteRT's LSTM: sigmoid gates, "
            "one tanh or relu cell activation)",
        )
        codes.append(_LSTM_ACTS[g])
    _zero_state(e, 5, 6)
    ws, rs, bs, ps = _weights(e, 1, 2, 3, 7)
    zeros = np.zeros((nd, 8 * units), np.float32)
    bs = zeros if bs is None else bs

    def run(d: int, xd: Ref) -> Ref:
        wi, wo, wf, wc = np.split(ws[d], 4)
        ri, ro, rf, rc = np.split(rs[d], 4)
        bi, bo, bf, bc = np.split(bs[d][: 4 * units] + bs[d][4 * units :], 4)
        pi, po, pf = (None, None, None) if ps is None else np.split(ps[d], 3)
        if input_forget:  # LiteRT's CIFG, see the NOTE
            wf, rf, bf, pf = -wi, -ri, -bi, None if pi is None else -pi
            wi = ri = bi = pi = None

        def c(a):
            return None if a is None else e.const(np.ascontiguousarray(a))

        ins = [xd, *map(c, (wi, wf, wc, wo, ri, rf, rc, ro, pi, pf, po, bi, bf, bc, bo)),
               None, None, _state(e, batch, units, "output_state"),
               _state(e, batch, units, "cell_state"), None, None, None, None]  # fmt: skip
        shape = list(xd.shape[:2]) + [units]
        return e.op(
            "UNIDIRECTIONAL_SEQUENCE_LSTM", ins, TensorType(_F32, shape),
            fused_activation_function=codes[d], cell_clip=0.0, proj_clip=0.0,
            time_major=int(layout) == 0,
        )  # fmt: skip

    y, h = _directions(e, x, run)
    return _outputs(e, y, h, 3)


@emitter("rnn")
def rnn(e: Emit, x: Ref, w: Ref, r: Ref, b=None, sequence_lens=None, initial_h=None, *,
        hidden_size, direction, activations, activation_alpha, activation_beta, clip,
        layout) -> list[Ref]:  # fmt: skip
    batch = _checks(e, x, sequence_lens, clip)
    units = int(hidden_size)
    nd = 2 if direction == "bidirectional" else 1
    codes = []
    for d in range(nd):
        act = activations[d]
        identity = act == "affine" and (activation_alpha[d], activation_beta[d]) == (1.0, 0.0)
        e.require(
            act in _RNN_ACTS and (act != "affine" or identity),
            f"activation {act!r} (LiteRT's RNN: tanh, relu or none)",
        )
        codes.append(_RNN_ACTS[act])
    _zero_state(e, 5)
    ws, rs, bs = _weights(e, 1, 2, 3)
    bs = np.zeros((nd, 2 * units), np.float32) if bs is None else bs

    def run(d: int, xd: Ref) -> Ref:
        ins = [xd, e.const(ws[d]), e.const(rs[d]), e.const(bs[d][:units] + bs[d][units:]),
               _state(e, batch, units, "hidden_state")]  # fmt: skip
        shape = list(xd.shape[:2]) + [units]
        return e.op(
            "UNIDIRECTIONAL_SEQUENCE_RNN", ins, TensorType(_F32, shape),
            fused_activation_function=codes[d], time_major=int(layout) == 0,
        )  # fmt: skip

    y, h = _directions(e, x, run)
    return _outputs(e, y, h, 2)
