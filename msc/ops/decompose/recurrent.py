"""Decompositions of rnn, gru and lstm: ONNX's equations spelled out one time step at a time,
for targets without the op (TFLite has no GRU, and its LSTM kernel has no clip, no
per-sequence lengths and no run-time initial state).

# NOTE: invariants
# - The steps are unrolled, so the number of steps must be static (a symbolic one is
#   NotDecomposable); per-sequence lengths (``sequence_lens``) are not decomposed.
# - Each direction's input projection runs once over the whole sequence (one ``linear``);
#   each step adds the recurrent projection of the previous state. A direction without an
#   initial state starts from zeros, written as the terms that remain at h = 0 (no zeros tensor
#   of a batch size that may be symbolic).
# - ``clip`` bounds the inputs of the gate and cell activations, not the cell output's
#   (ONNX's rule, as codegen.torch's helper computes it).
"""

from __future__ import annotations

from msc.ir.graph import Value
from msc.ops.decompose import Builder, NotDecomposable, registry
from msc.ops.recurrent import GATES


def _act(b: Builder, kind: str, x: Value, alpha: float, beta: float) -> Value:
    """One ONNX recurrent activation as canonical ops."""
    if kind in ("sigmoid", "tanh", "relu", "softsign"):
        return b.op(kind, x)
    if kind == "softplus":
        return b.op("softplus", x, beta=1.0, threshold=20.0)
    if kind == "leaky_relu":
        return b.op("leaky_relu", x, negative_slope=alpha)
    if kind == "thresholded_relu":
        return b.op("thresholded_relu", x, alpha=alpha)
    if kind == "elu":
        return b.op("elu", x, alpha=alpha)
    if kind == "affine":
        return b.op("add", b.op("mul", x, b.scalar(alpha, x)), b.scalar(beta, x))
    if kind == "scaled_tanh":
        return b.op("mul", b.op("tanh", b.op("mul", x, b.scalar(beta, x))), b.scalar(alpha, x))
    if kind == "hard_sigmoid":
        affine = b.op("add", b.op("mul", x, b.scalar(alpha, x)), b.scalar(beta, x))
        return b.op("hardtanh", affine, min=0.0, max=1.0)
    raise NotDecomposable(f"activation {kind!r}")


class _Cell:
    """One direction's weights and activations, and the gate arithmetic they share."""

    def __init__(self, b: Builder, op: str, d: int, nd: int, w, r, bias, attrs) -> None:
        self.b, self.op = b, op
        self.gates, n_act = GATES[op]
        self.h = int(attrs["hidden_size"])
        self.clip = attrs.get("clip")
        k = slice(d * n_act, (d + 1) * n_act)
        self.acts = list(
            zip(attrs["activations"][k], attrs["activation_alpha"][k], attrs["activation_beta"][k])
        )
        self.w = self.part(w, d, nd)  # [gates * h, input]
        self.r = self.part(r, d, nd)  # [gates * h, h]
        self.wb = self.rb = None
        if bias is not None:
            both = self.part(bias, d, nd)  # [2 * gates * h]
            self.wb, self.rb = b.multi("split", both, axis=0, sizes=[self.gates * self.h] * 2)
        if op == "gru":  # the candidate's recurrence apart from the z and r gates'
            self.r, self.r_h = b.multi("split", self.r, axis=0, sizes=[2 * self.h, self.h])
            self.rb_h = None
            if self.rb is not None:
                self.rb, self.rb_h = b.multi("split", self.rb, axis=0, sizes=[2 * self.h, self.h])

    def part(self, v: Value, d: int, nd: int) -> Value:
        """Direction ``d`` of a [num_directions, ...] tensor, without its leading axis."""
        if nd > 1:
            v = self.b.multi("split", v, axis=0, sizes=[1] * nd)[d]
        return self.b.op("squeeze", v, axes=[0])

    def f(self, i: int, x: Value, clipped: bool = True) -> Value:
        if self.clip is not None and clipped:
            x = self.b.op("hardtanh", x, min=-float(self.clip), max=float(self.clip))
        kind, alpha, beta = self.acts[i]
        return _act(self.b, kind, x, float(alpha), float(beta))

    def split(self, v: Value, n: int) -> tuple[Value, ...]:
        return self.b.multi("split", v, axis=-1, sizes=[self.h] * n)

    def recur(self, h: Value | None, r: Value | None = None, rb: Value | None = None):
        """h R^T + Rb ([batch, gates * h]); Rb alone at h = 0 (None when there is none)."""
        r, rb = (self.r, self.rb) if r is None else (r, rb)
        if h is None:
            return rb
        return self.b.op("linear", h, r, rb)


def _add(b: Builder, x: Value, y: Value | None) -> Value:
    return x if y is None else b.op("add", x, y)


def _mul(b: Builder, x: Value, y: Value | None) -> Value | None:
    return None if y is None else b.op("mul", x, y)


def _lstm_step(c: _Cell, gx: Value, h, cs, p, input_forget: bool):
    b = c.b
    gi, go, gf, gc = c.split(_add(b, gx, c.recur(h)), 4)
    pi, po, pf = p
    if cs is not None and pi is not None:
        gi, gf = b.op("add", gi, b.op("mul", pi, cs)), b.op("add", gf, b.op("mul", pf, cs))
    i = c.f(0, gi)
    f = b.op("sub", b.scalar(1.0, i), i) if input_forget else c.f(0, gf)
    cell = b.op("mul", i, c.f(1, gc))
    cell = cell if cs is None else b.op("add", b.op("mul", f, cs), cell)
    if po is not None:
        go = b.op("add", go, b.op("mul", po, cell))
    return b.op("mul", c.f(0, go), c.f(2, cell, clipped=False)), cell


def _gru_step(c: _Cell, gx: Value, h, linear_before_reset: bool):
    b = c.b
    xz, xr, xh = c.split(gx, 3)
    hz, hr = (None, None)
    rec = c.recur(h)
    if rec is not None:
        hz, hr = c.split(rec, 2)
    z = c.f(0, _add(b, xz, hz))
    reset = c.f(0, _add(b, xr, hr))
    if linear_before_reset:  # r * (h Rh^T + Rbh)
        cand = _add(b, xh, _mul(b, reset, c.recur(h, c.r_h, c.rb_h)))
    else:  # (r * h) Rh^T + Rbh
        cand = _add(b, xh, c.recur(None if h is None else b.op("mul", reset, h), c.r_h, c.rb_h))
    hh = c.f(1, cand)
    new = b.op("mul", b.op("sub", b.scalar(1.0, z), z), hh)
    return new if h is None else b.op("add", new, b.op("mul", z, h))


def _run(b: Builder, op: str, x, w, r, bias, lens, states: list, p, attrs, step_attrs):
    if lens is not None:
        raise NotDecomposable("per-sequence lengths (sequence_lens) are not decomposed")
    if x.shape is None or len(x.shape) != 3:
        raise NotDecomposable("needs x of rank 3")
    layout = int(attrs["layout"])
    direction = attrs["direction"]
    nd = 2 if direction == "bidirectional" else 1
    if layout == 1:  # to time first; back at the end
        x = b.op("transpose", x, perm=[1, 0, 2])
        states = [None if s is None else b.op("transpose", s, perm=[1, 0, 2]) for s in states]
    steps = x.shape[0]
    if not isinstance(steps, int):
        raise NotDecomposable(f"a symbolic number of steps ({steps}): the steps are unrolled")
    if steps == 0:
        raise NotDecomposable("an empty sequence")
    ys, finals = [], [[] for _ in states]
    for d in range(nd):
        c = _Cell(b, op, d, nd, w, r, bias, attrs)
        gx = b.op("linear", x, c.w, c.wb)  # [steps, batch, gates * h]
        per_step = b.multi("split", gx, axis=0, sizes=[1] * steps) if steps > 1 else [gx]
        st = [None if s is None else c.part(s, d, nd) for s in states]
        pd = (None, None, None) if p is None else c.split(c.part(p, d, nd), 3)  # i, o, f
        out: list[Value | None] = [None] * steps
        reverse = direction == "reverse" or d == 1
        for t in reversed(range(steps)) if reverse else range(steps):
            g_t = b.op("squeeze", per_step[t], axes=[0])
            if op == "lstm":
                st = list(_lstm_step(c, g_t, st[0], st[1], pd, **step_attrs))
            elif op == "gru":
                st = [_gru_step(c, g_t, st[0], **step_attrs)]
            else:
                st = [c.f(0, _add(b, g_t, c.recur(st[0])))]
            out[t] = b.op("unsqueeze", st[0], axes=[0])
        y = b.op("concat", *out, axis=0) if steps > 1 else out[0]
        ys.append(b.op("unsqueeze", y, axes=[1]))  # [steps, 1, batch, h]
        for k, s in enumerate(st):
            finals[k].append(b.op("unsqueeze", s, axes=[0]))
    y = b.op("concat", *ys, axis=1) if nd > 1 else ys[0]
    outs = [b.op("concat", *f, axis=0) if nd > 1 else f[0] for f in finals]
    if layout == 1:
        y = b.op("transpose", y, perm=[2, 0, 1, 3])
        outs = [b.op("transpose", s, perm=[1, 0, 2]) for s in outs]
    return [y, *outs]


@registry("rnn")
def rnn(b: Builder, x, w, r, bias=None, sequence_lens=None, initial_h=None, **attrs):
    """ONNX's RNN, its steps unrolled (a static number of steps)."""
    return _run(b, "rnn", x, w, r, bias, sequence_lens, [initial_h], None, attrs, {})


@registry("gru")
def gru(b: Builder, x, w, r, bias=None, sequence_lens=None, initial_h=None, *,
        linear_before_reset=False, **attrs):  # fmt: skip
    """ONNX's GRU, its steps unrolled (a static number of steps)."""
    return _run(b, "gru", x, w, r, bias, sequence_lens, [initial_h], None, attrs,
                {"linear_before_reset": bool(linear_before_reset)})  # fmt: skip


@registry("lstm")
def lstm(b: Builder, x, w, r, bias=None, sequence_lens=None, initial_h=None, initial_c=None,
         p=None, *, input_forget=False, **attrs):  # fmt: skip
    """ONNX's LSTM, its steps unrolled (a static number of steps)."""
    return _run(b, "lstm", x, w, r, bias, sequence_lens, [initial_h, initial_c], p, attrs,
                {"input_forget": bool(input_forget)})  # fmt: skip
