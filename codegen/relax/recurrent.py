"""Relax emitters of the recurrent family: rnn, gru and lstm, unrolled over the sequence.

# NOTE: invariants
# - The sequence length must be static: each step is its own bindings (x W^T for every step
#   is one matmul up front; h R^T is one matmul per step). A symbolic length is refused.
# - ONNX semantics (msc.ops.recurrent): gate order gru z, r, h and lstm i, o, f, c; clip on the
#   gate pre-activations; ``sequence_lens`` masks a step past a sequence's end (zeros in y,
#   state unchanged), which also starts a reverse direction at each sequence's own end.
"""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op


def _act(e: Emit, name: str, alpha, beta):
    """The activation ``name`` as a function of one Relax expression."""

    def fn(x):
        def c(v):
            return e.const(v, e.dtype(x))

        if name == "sigmoid":
            return e.emit(R.sigmoid(x))
        if name == "tanh":
            return e.emit(R.tanh(x))
        if name == "relu":
            return e.emit(R.nn.relu(x))
        if name == "softsign":
            return e.emit(R.divide(x, R.add(c(1.0), R.abs(x))))
        if name == "softplus":
            return e.emit(R.log(R.add(c(1.0), R.exp(x))))
        if name == "leaky_relu":
            return e.emit(R.where(R.greater_equal(x, c(0.0)), x, R.multiply(x, c(alpha))))
        if name == "thresholded_relu":
            return e.emit(R.where(R.greater(x, c(alpha)), x, c(0.0)))
        if name == "elu":
            neg = R.multiply(c(alpha), R.subtract(R.exp(x), c(1.0)))
            return e.emit(R.where(R.greater(x, c(0.0)), x, neg))
        if name == "scaled_tanh":
            return e.emit(R.multiply(c(alpha), R.tanh(R.multiply(c(beta), x))))
        if name == "hard_sigmoid":
            return e.emit(R.clip(R.add(R.multiply(c(alpha), x), c(beta)), 0.0, 1.0))
        if name == "affine":
            return e.emit(R.add(R.multiply(c(alpha), x), c(beta)))
        e.require(False, f"activation {name!r}")

    return fn


class _Cell:
    """What every recurrent op shares: layout, directions, the per-step input projections,
    sequence masks and the assembly of y and the final states."""

    def __init__(self, e: Emit, op: str, x, w, r, b, sequence_lens, attrs: dict, gates: int):
        self.e, self.gates = e, gates
        self.h = attrs["hidden_size"]
        self.layout = attrs["layout"]
        self.nd = 2 if attrs["direction"] == "bidirectional" else 1
        self.reverse = attrs["direction"] == "reverse"
        self.clip = attrs["clip"]
        acts = attrs["activations"]
        self.n_act = len(acts) // self.nd
        self.acts = [
            _act(e, a, al, be)
            for a, al, be in zip(acts, attrs["activation_alpha"], attrs["activation_beta"])
        ]
        if self.layout == 1:
            x = e.emit(R.permute_dims(x, [1, 0, 2]))
        self.x = x
        seq, self.batch = e.shape(x)[0], e.shape(x)[1]
        e.require(isinstance(seq, int), f"{op} over a symbolic sequence length (it is unrolled)")
        self.seq = seq
        self.w, self.r, self.b = w, r, b
        self.dt = e.dtype(x)
        self.lens = sequence_lens

    def state(self, s, d: int):
        """Direction d's initial state [B, H] (zeros when absent)."""
        e = self.e
        if s is None:
            return e.emit(R.zeros([self.batch, self.h], self.dt))
        if self.layout == 1:
            s = e.emit(R.permute_dims(s, [1, 0, 2]))
        return e.emit(R.squeeze(R.strided_slice(s, [0], [d], [d + 1]), [0]))

    def weights(self, d: int):
        """Direction d's W^T [I, G*H], R^T [H, G*H] and biases (or None) [G*H] each."""
        e, gh = self.e, self.gates * self.h

        def one(t):
            return e.emit(R.squeeze(R.strided_slice(t, [0], [d], [d + 1]), [0]))

        wt = e.emit(R.permute_dims(one(self.w), [1, 0]))
        rt = e.emit(R.permute_dims(one(self.r), [1, 0]))
        if self.b is None:
            return wt, rt, None, None
        bd = one(self.b)
        wb = e.emit(R.strided_slice(bd, [0], [0], [gh]))
        rb = e.emit(R.strided_slice(bd, [0], [gh], [2 * gh]))
        return wt, rt, wb, rb

    def projected(self, wt, wb):
        """x W^T + Wb for every step at once, then one [B, G*H] slice per step."""
        e = self.e
        xw = e.emit(R.matmul(self.x, wt))
        if wb is not None:
            xw = e.emit(R.add(xw, wb))
        return [e.emit(R.squeeze(R.strided_slice(xw, [0], [t], [t + 1]), [0]))
                for t in range(self.seq)]  # fmt: skip

    def gate(self, v, k: int):
        """Slice k of a [B, G*H] row of gates."""
        return self.e.emit(R.strided_slice(v, [1], [k * self.h], [(k + 1) * self.h]))

    def clipped(self, v):
        if self.clip is None:
            return v
        return self.e.emit(R.clip(v, -float(self.clip), float(self.clip)))

    def act(self, d: int, k: int, v):
        return self.acts[d * self.n_act + k](self.clipped(v))

    def steps(self, d: int):
        backward = self.reverse or d == 1
        return range(self.seq - 1, -1, -1) if backward else range(self.seq)

    def mask(self, t: int):
        """[B, 1] bool: step t is inside each sequence (None without sequence_lens)."""
        if self.lens is None:
            return None
        e = self.e
        m = R.less(e.const(t, "int32"), self.lens)
        return e.emit(R.expand_dims(m, [1]))

    def keep(self, m, new, old):
        return new if m is None else self.e.emit(R.where(m, new, old))

    def out_y(self, m, h):
        if m is None:
            return h
        return self.e.emit(R.where(m, h, R.zeros_like(h)))

    def assemble(self, ys: list[list], finals: list[list]):
        """y from per-direction per-step [B, H] (in time order) and the final states."""
        e = self.e
        per_dir = [e.emit(R.stack(y, 0)) for y in ys]  # [S, B, H] each
        y = e.emit(R.stack(per_dir, 1))  # [S, nd, B, H]
        states = [e.emit(R.stack(list(s), 0)) for s in zip(*finals)]  # [nd, B, H] each
        if self.layout == 1:
            y = e.emit(R.permute_dims(y, [2, 0, 1, 3]))
            states = [e.emit(R.permute_dims(s, [1, 0, 2])) for s in states]
        return [y, *states]


def _run(cell: _Cell, d: int, step, init: list):
    """Step direction d through the sequence; (y per step in time order, final states)."""
    states = init
    ys: dict[int, object] = {}
    for t in cell.steps(d):
        m = cell.mask(t)
        new = step(t, states)
        ys[t] = cell.out_y(m, new[0])
        states = [cell.keep(m, n, o) for n, o in zip(new, states)]
    return [ys[t] for t in range(cell.seq)], states


@emitter("rnn")
def rnn(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
    cell = _Cell(e, "rnn", x, w, r, b, sequence_lens, attrs, 1)
    ys, finals = [], []
    for d in range(cell.nd):
        wt, rt, wb, rb = cell.weights(d)
        xs = cell.projected(wt, wb)

        def step(t, s, d=d, rt=rt, rb=rb, xs=xs):
            hr = e.emit(R.matmul(s[0], rt))
            pre = e.emit(R.add(xs[t], hr if rb is None else R.add(hr, rb)))
            return [cell.act(d, 0, pre)]

        y, f = _run(cell, d, step, [cell.state(initial_h, d)])
        ys.append(y)
        finals.append(f)
    return cell.assemble(ys, finals)


@emitter("gru")
def gru(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, *,
        linear_before_reset=False, **attrs):  # fmt: skip
    cell = _Cell(e, "gru", x, w, r, b, sequence_lens, attrs, 3)
    h = cell.h
    one = e.const(1.0, cell.dt)
    ys, finals = [], []
    for d in range(cell.nd):
        wt, rt, wb, rb = cell.weights(d)
        xs = cell.projected(wt, wb)
        rt_zr = e.emit(R.strided_slice(rt, [1], [0], [2 * h]))
        rt_h = e.emit(R.strided_slice(rt, [1], [2 * h], [3 * h]))
        rb_zr = None if rb is None else e.emit(R.strided_slice(rb, [0], [0], [2 * h]))
        rb_h = None if rb is None else e.emit(R.strided_slice(rb, [0], [2 * h], [3 * h]))

        def step(t, s, d=d, xs=xs, rt_zr=rt_zr, rt_h=rt_h, rb_zr=rb_zr, rb_h=rb_h):
            hp = s[0]
            hzr = e.emit(R.matmul(hp, rt_zr))
            if rb_zr is not None:
                hzr = e.emit(R.add(hzr, rb_zr))
            z = cell.act(d, 0, e.emit(R.add(cell.gate(xs[t], 0), cell.gate(hzr, 0))))
            rg = cell.act(d, 0, e.emit(R.add(cell.gate(xs[t], 1), cell.gate(hzr, 1))))
            if linear_before_reset:
                hh = e.emit(R.matmul(hp, rt_h))
                if rb_h is not None:
                    hh = e.emit(R.add(hh, rb_h))
                hh = e.emit(R.multiply(rg, hh))
            else:
                hh = e.emit(R.matmul(R.multiply(rg, hp), rt_h))
                if rb_h is not None:
                    hh = e.emit(R.add(hh, rb_h))
            cand = cell.act(d, 1, e.emit(R.add(cell.gate(xs[t], 2), hh)))
            new = e.emit(R.add(R.multiply(R.subtract(one, z), cand), R.multiply(z, hp)))
            return [new]

        y, f = _run(cell, d, step, [cell.state(initial_h, d)])
        ys.append(y)
        finals.append(f)
    return cell.assemble(ys, finals)


@emitter("lstm")
def lstm(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
         p=None, *, input_forget=False, **attrs):  # fmt: skip
    cell = _Cell(e, "lstm", x, w, r, b, sequence_lens, attrs, 4)
    h = cell.h
    one = e.const(1.0, cell.dt)
    ys, finals = [], []
    for d in range(cell.nd):
        wt, rt, wb, rb = cell.weights(d)
        xs = cell.projected(wt, wb)
        peep = [None, None, None]
        if p is not None:
            pd = e.emit(R.squeeze(R.strided_slice(p, [0], [d], [d + 1]), [0]))
            peep = [e.emit(R.strided_slice(pd, [0], [k * h], [(k + 1) * h])) for k in range(3)]

        def step(t, s, d=d, xs=xs, rt=rt, rb=rb, peep=peep):
            hp, cp = s
            hr = e.emit(R.matmul(hp, rt))
            if rb is not None:
                hr = e.emit(R.add(hr, rb))
            g = e.emit(R.add(xs[t], hr))  # gates i, o, f, c

            def with_peep(which, c_state, v):
                pw = peep[which]
                return v if pw is None else e.emit(R.add(v, R.multiply(pw, c_state)))

            i = cell.act(d, 0, with_peep(0, cp, cell.gate(g, 0)))
            if input_forget:
                f = e.emit(R.subtract(one, i))
            else:
                f = cell.act(d, 0, with_peep(2, cp, cell.gate(g, 2)))
            c_in = cell.act(d, 1, cell.gate(g, 3))
            c = e.emit(R.add(R.multiply(f, cp), R.multiply(i, c_in)))
            o = cell.act(d, 0, with_peep(1, c, cell.gate(g, 1)))
            return [e.emit(R.multiply(o, cell.acts[d * cell.n_act + 2](c))), c]

        init = [cell.state(initial_h, d), cell.state(initial_c, d)]
        y, f = _run(cell, d, step, init)
        ys.append(y)
        finals.append(f)
    return cell.assemble(ys, finals)
