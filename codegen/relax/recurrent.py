"""Relax emitters of the recurrent family: rnn, gru and lstm.

# NOTE: invariants
# - x W^T for every step is one matmul up front; h R^T is one matmul per step. Over a static
#   sequence length of at most ``UNROLL`` steps they are unrolled (each step its own
#   bindings); over a longer one, or one known only at run time, they are one Relax loop
#   (Emit.repeat) stepping every direction at once, the projections passed in and sliced.
# - ONNX semantics (msc.ops.recurrent): gate order gru z, r, h and lstm i, o, f, c; clip on the
#   gate pre-activations; ``sequence_lens`` masks a step past a sequence's end (zeros in y,
#   state unchanged), which also starts a reverse direction at each sequence's own end.
"""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter

R = relax.op

# Unrolled steps run faster, looped ones compile in about constant time: a bidirectional
# LSTM (hidden 64, batch 1, llvm, 2 cores) over 16 / 64 / 256 steps builds in 0.85 / 2.8 /
# 14.8 s unrolled, 0.49 / 0.54 / 0.65 s looped, and runs in 0.62 / 2.1 / 8.3 ms unrolled,
# 0.81 / 2.9 / 12.9 ms looped.
UNROLL = 64


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
    sequence masks, the stepping (unrolled or looped) and the assembly of y and the states."""

    def __init__(self, e: Emit, x, w, r, b, sequence_lens, attrs: dict, gates: int):
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
        self.seq, self.batch = e.shape(x)[0], e.shape(x)[1]
        self.w, self.r, self.b = w, r, b
        self.dt = e.dtype(x)
        self.lens = sequence_lens

    def state(self, s, d: int):
        """Direction d's initial state [B, H] (zeros when absent)."""
        e = self.e
        if s is None:
            return e.emit(R.zeros([self.batch, self.h], self.dt))
        # [nd, B, H] (layout 0) with x's batch: checked at run time where Relax cannot tell
        want = [self.nd, self.batch, self.h]
        s = e.agree(s, want if self.layout == 0 else [want[1], want[0], want[2]])
        if self.layout == 1:
            s = e.emit(R.permute_dims(s, [1, 0, 2]))
        return e.emit(R.squeeze(R.strided_slice(s, [0], [d], [d + 1]), [0]))

    def weights(self, d: int) -> dict:
        """Direction d's x W^T + Wb for every step ("xw", [S, B, G*H]), R^T ("rt", [H, G*H])
        and recurrence bias ("rb", [G*H], or None)."""
        e, gh = self.e, self.gates * self.h

        def one(t):
            return e.emit(R.squeeze(R.strided_slice(t, [0], [d], [d + 1]), [0]))

        wt = e.emit(R.permute_dims(one(self.w), [1, 0]))
        rt = e.emit(R.permute_dims(one(self.r), [1, 0]))
        xw = e.emit(R.matmul(self.x, wt))
        if self.b is None:
            return {"xw": xw, "rt": rt, "rb": None}
        bd = one(self.b)
        xw = e.emit(R.add(xw, R.strided_slice(bd, [0], [0], [gh])))
        return {"xw": xw, "rt": rt, "rb": e.emit(R.strided_slice(bd, [0], [gh], [2 * gh]))}

    def gate(self, v, k: int):
        """Slice k of a [B, G*H] row of gates."""
        return self.e.emit(R.strided_slice(v, [1], [k * self.h], [(k + 1) * self.h]))

    def clipped(self, v):
        if self.clip is None:
            return v
        return self.e.emit(R.clip(v, -float(self.clip), float(self.clip)))

    def act(self, d: int, k: int, v):
        return self.acts[d * self.n_act + k](self.clipped(v))

    def backward(self, d: int) -> bool:
        return self.reverse or d == 1

    def mask(self, t, lens):
        """[B, 1] bool: step t (an int, or a 0-d int64 tensor with ``lens`` int64) is inside
        each sequence (None without sequence_lens)."""
        if lens is None:
            return None
        e = self.e
        at = e.const(t, e.dtype(lens)) if isinstance(t, int) else t
        return e.emit(R.expand_dims(R.less(at, lens), [1]))

    def keep(self, m, new, old):
        return new if m is None else self.e.emit(R.where(m, new, old))

    def out_y(self, m, h):
        if m is None:
            return h
        return self.e.emit(R.where(m, h, R.zeros_like(h)))

    def run(self, ws: list[dict], inits: list[list], step):
        """y and the final states of every direction d stepped from ``inits[d]`` with
        ``step(d, x_t, states, w)`` (the next states, h first; ``w``: ``ws[d]``)."""
        if isinstance(self.seq, int) and self.seq <= UNROLL:
            return self.assemble(*self.unrolled(ws, inits, step))
        return self.assemble(*self.looped(ws, inits, step))

    def unrolled(self, ws, inits, step):
        e, ys, finals = self.e, [], []
        for d, w in enumerate(ws):
            states, y = inits[d], {}
            steps = range(self.seq)
            for t in reversed(steps) if self.backward(d) else steps:
                m = self.mask(t, self.lens)
                x_t = e.emit(R.squeeze(R.strided_slice(w["xw"], [0], [t], [t + 1]), [0]))
                new = step(d, x_t, states, w)
                y[t] = self.out_y(m, new[0])
                states = [self.keep(m, n, o) for n, o in zip(new, states)]
            ys.append(e.emit(R.stack([y[t] for t in steps], 0)))  # [S, B, H]
            finals.append(states)
        return ys, finals

    def looped(self, ws, inits, step):
        """One Relax loop over the run-time length, every direction a step of it; y of a
        backward direction is stacked in step order, then flipped into time order."""
        e, i64 = self.e, "int64"
        trip = e.emit(R.take(e.shape_tensor(self.x), e.const(0, i64), axis=0))
        last = e.emit(R.subtract(trip, e.const(1, i64)))
        lens = None if self.lens is None else e.emit(R.astype(self.lens, i64))
        names = [sorted(k for k, v in w.items() if v is not None) for w in ws]
        extra = [last, *([] if lens is None else [lens])]
        extra += [w[k] for w, ks in zip(ws, names) for k in ks]
        n_states = len(inits[0])
        carried = [s for ss in inits for s in ss]

        def body(i, carried, extra):
            it = iter(extra)
            at_end = next(it)
            lens_i = None if lens is None else next(it)
            new_all, ys = [], []
            for d, ks in enumerate(names):
                w = dict.fromkeys(ws[d]) | {k: next(it) for k in ks}
                t = e.emit(R.subtract(at_end, i)) if self.backward(d) else i
                m = self.mask(t, lens_i)
                states = carried[d * n_states : (d + 1) * n_states]
                new = step(d, e.emit(R.take(w["xw"], t, axis=0)), states, w)
                ys.append(self.out_y(m, new[0]))
                new_all += [self.keep(m, n, o) for n, o in zip(new, states)]
            return new_all, ys

        hty = relax.TensorType([self.batch, self.h], self.dt)  # a state, a step's y
        outs = e.repeat(trip, carried, [s.ty for s in carried], [hty] * self.nd, extra, body)
        states = [e.bb.match_cast(s, hty) for s in outs[: len(carried)]]
        yty = relax.TensorType([self.seq, self.batch, self.h], self.dt)
        ys = []
        for d, y in enumerate(outs[len(carried) :]):
            y = e.bb.match_cast(y, yty)
            ys.append(e.emit(R.flip(y, 0)) if self.backward(d) else y)
        finals = [states[d * n_states : (d + 1) * n_states] for d in range(self.nd)]
        return ys, finals

    def assemble(self, ys: list, finals: list[list]):
        """y from each direction's [S, B, H] and the final states."""
        e = self.e
        y = e.emit(R.stack(ys, 1))  # [S, nd, B, H]
        states = [e.emit(R.stack(list(s), 0)) for s in zip(*finals)]  # [nd, B, H] each
        if self.layout == 1:
            y = e.emit(R.permute_dims(y, [2, 0, 1, 3]))
            states = [e.emit(R.permute_dims(s, [1, 0, 2])) for s in states]
        return [y, *states]


@emitter("rnn")
def rnn(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
    cell = _Cell(e, x, w, r, b, sequence_lens, attrs, 1)

    def step(d, x_t, s, w):
        hr = e.emit(R.matmul(s[0], w["rt"]))
        pre = e.emit(R.add(x_t, hr if w["rb"] is None else R.add(hr, w["rb"])))
        return [cell.act(d, 0, pre)]

    ws = [cell.weights(d) for d in range(cell.nd)]
    return cell.run(ws, [[cell.state(initial_h, d)] for d in range(cell.nd)], step)


@emitter("gru")
def gru(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, *,
        linear_before_reset=False, **attrs):  # fmt: skip
    cell = _Cell(e, x, w, r, b, sequence_lens, attrs, 3)
    h = cell.h
    one = e.const(1.0, cell.dt)

    def split(w):
        rt, rb = w.pop("rt"), w.pop("rb")
        w["rt_zr"] = e.emit(R.strided_slice(rt, [1], [0], [2 * h]))
        w["rt_h"] = e.emit(R.strided_slice(rt, [1], [2 * h], [3 * h]))
        w["rb_zr"] = None if rb is None else e.emit(R.strided_slice(rb, [0], [0], [2 * h]))
        w["rb_h"] = None if rb is None else e.emit(R.strided_slice(rb, [0], [2 * h], [3 * h]))
        return w

    def step(d, x_t, s, w):
        hp = s[0]
        hzr = e.emit(R.matmul(hp, w["rt_zr"]))
        if w["rb_zr"] is not None:
            hzr = e.emit(R.add(hzr, w["rb_zr"]))
        z = cell.act(d, 0, e.emit(R.add(cell.gate(x_t, 0), cell.gate(hzr, 0))))
        rg = cell.act(d, 0, e.emit(R.add(cell.gate(x_t, 1), cell.gate(hzr, 1))))
        if linear_before_reset:
            hh = e.emit(R.matmul(hp, w["rt_h"]))
            if w["rb_h"] is not None:
                hh = e.emit(R.add(hh, w["rb_h"]))
            hh = e.emit(R.multiply(rg, hh))
        else:
            hh = e.emit(R.matmul(R.multiply(rg, hp), w["rt_h"]))
            if w["rb_h"] is not None:
                hh = e.emit(R.add(hh, w["rb_h"]))
        cand = cell.act(d, 1, e.emit(R.add(cell.gate(x_t, 2), hh)))
        return [e.emit(R.add(R.multiply(R.subtract(one, z), cand), R.multiply(z, hp)))]

    ws = [split(cell.weights(d)) for d in range(cell.nd)]
    return cell.run(ws, [[cell.state(initial_h, d)] for d in range(cell.nd)], step)


@emitter("lstm")
def lstm(e: Emit, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
         p=None, *, input_forget=False, **attrs):  # fmt: skip
    cell = _Cell(e, x, w, r, b, sequence_lens, attrs, 4)
    h = cell.h
    one = e.const(1.0, cell.dt)

    def peepholes(d, w):
        for k in range(3):  # i, o, f
            w[f"p{k}"] = None
        if p is not None:
            pd = e.emit(R.squeeze(R.strided_slice(p, [0], [d], [d + 1]), [0]))
            for k in range(3):
                w[f"p{k}"] = e.emit(R.strided_slice(pd, [0], [k * h], [(k + 1) * h]))
        return w

    def step(d, x_t, s, w):
        hp, cp = s
        hr = e.emit(R.matmul(hp, w["rt"]))
        if w["rb"] is not None:
            hr = e.emit(R.add(hr, w["rb"]))
        g = e.emit(R.add(x_t, hr))  # gates i, o, f, c

        def with_peep(which, c_state, v):
            pw = w[f"p{which}"]
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

    ws = [peepholes(d, cell.weights(d)) for d in range(cell.nd)]
    inits = [[cell.state(initial_h, d), cell.state(initial_c, d)] for d in range(cell.nd)]
    return cell.run(ws, inits, step)
