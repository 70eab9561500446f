"""Emitters for the recurrent layers: rnn, gru, lstm as torch's modules where they are
exactly one, else through one run-time helper.

# NOTE: invariants
# - The nodes msc's torch frontend makes of one nn.LSTM / nn.GRU / nn.RNN call (gate reorder,
#   layers, batch_first transposes, state slices: msc.frontend.torch.recurrent.layers) are
#   that module again (``torch_modules``), with the source's parameters under their own
#   state_dict keys: found by building what the frontend makes of the module the weights
#   name and matching it node for node, so a re-import of the code gives the same graph.
# - Every other node calls ``_msc_recurrent`` (below), which computes ONNX's equations on the
#   weights as the graph holds them (other activations, clip, peepholes, sequence lengths,
#   ONNX's gate orders).
"""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS, GroupModule, group_rule, unrolled
from msc.ir.attrs import attr_equal
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight


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


EMITTERS("rnn", "gru", "lstm")(unrolled(recurrent))


# ---------------------------------------------------------------- torch's own modules
# the source op msc's torch frontend records -> (its kind there, module, constructor kwargs)
_TORCH = {
    "aten.lstm.input": ("lstm", "nn.LSTM", {}),
    "aten.gru.input": ("gru", "nn.GRU", {}),
    "aten.rnn_tanh.input": ("rnn_tanh", "nn.RNN", {}),
    "aten.rnn_relu.input": ("rnn_relu", "nn.RNN", {"nonlinearity": "relu"}),
}


@group_rule
def torch_modules(graph: Graph) -> list[GroupModule]:
    """The node groups that are exactly one call of nn.LSTM / nn.GRU / nn.RNN."""
    groups: dict[tuple[str, str], list[Node]] = {}
    for n in graph.nodes:
        p = n.provenance
        if p.framework == "torch" and p.op in _TORCH and p.name:
            groups.setdefault((p.op, p.name), []).append(n)
    found = [_module_call(graph, op, nodes) for (op, _), nodes in groups.items()]
    return [g for g in found if g is not None]


def _module_call(graph: Graph, source_op: str, nodes: list[Node]) -> GroupModule | None:
    from msc.frontend.torch.recurrent import layers
    from msc.frontend.torch.registry import Ctx

    kind, module, kw = _TORCH[source_op]
    recs = [n for n in nodes if n.op in ("lstm", "gru", "rnn")]
    if not recs:
        return None
    first, inside = recs[0], {id(n) for n in nodes}
    nd = 2 if first.attrs["direction"] == "bidirectional" else 1
    read = {v.name: v for n in nodes for v in n.inputs if isinstance(v, Weight)}
    heads = [k for k in read if k.endswith(".weight_ih_l0")]
    if len(heads) != 1:
        return None
    prefix = heads[0][: -len(".weight_ih_l0")]
    bias = f"{prefix}.bias_ih_l0" in read
    kinds = ["weight_ih", "weight_hh", *(["bias_ih", "bias_hh"] if bias else [])]
    names = [f"{prefix}.{k}_l{i}{sfx}" for i in range(len(recs))
             for sfx in ("", "_reverse")[:nd] for k in kinds]  # fmt: skip
    if set(names) != set(read) or any(
        id(u) not in inside for k in names for u, _ in read[k].uses
    ) or any(read[k] in graph.outputs for k in names):  # fmt: skip
        return None
    # x (through the frontend's transpose when batch_first) and the states it slices
    x = first.inputs[0]
    batch_first = x.producer is not None and id(x.producer) in inside
    if batch_first:
        x = x.producer.inputs[0]
    states = []
    for v in first.inputs[5 : 7 if kind == "lstm" else 6]:
        p = None if v is None else v.producer
        if p is None or id(p) not in inside or p.op != "slice":
            return None
        states.append(p.inputs[0])
    size = x.type.shape[-1] if x.type.shape else None
    if not isinstance(size, int) or x in states:
        return None
    # what the frontend makes of that module, matched node for node
    scratch = Graph("scratch")
    image: dict[int, Value] = {}
    sx = scratch.add_input("x", x.type)
    ss = [scratch.add_input(f"h{i}", s.type) for i, s in enumerate(states)]
    sp = [scratch.add_weight(k, None, read[k].type) for k in names]
    for a, b in zip([sx, *ss, *sp], [x, *states, *(read[k] for k in names)]):
        image[id(a)] = b
    ctx = Ctx(scratch)
    try:
        made = layers(ctx, kind, sx, ss, sp, bias, len(recs), False, nd == 2,
                      batch_first)  # fmt: skip
    except Exception:  # noqa: BLE001  (not what the frontend makes: the helper computes it)
        return None
    left = list(nodes)
    for n2 in ctx.nodes:
        twin = next((n for n in left if _same(n, n2, image)), None)
        if twin is None:
            return None
        left.remove(twin)
        image.update((id(a), b) for a, b in zip(n2.outputs, twin.outputs))
    if left:
        return None
    results = [image[id(v)] for v in made]
    ours = {id(v) for v in results}
    for n in nodes:  # nothing outside reads a value of the group but its results
        for v in n.outputs:
            if id(v) not in ours and (v in graph.outputs or any(
                    id(u) not in inside for u, _ in v.uses)):  # fmt: skip
                return None
    group = list(nodes)
    zeros = [_zeros_of(s, x.type.dtype, inside) for s in states]
    if states and all(z is not None for z in zeros):  # the module's own zero states
        group += list({id(z): z for z in zeros}.values())  # type: ignore[union-attr]
        states = []
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    group.sort(key=lambda n: order[id(n)])
    last = order[id(group[-1])]
    if any(order.get(id(u), -1) <= last and id(u) not in {id(n) for n in group}
           for v in results for u, _ in v.uses):  # fmt: skip
        return None
    hidden = first.attrs["hidden_size"]
    kwargs = dict(kw)
    if len(recs) > 1:
        kwargs["num_layers"] = len(recs)
    if not bias:
        kwargs["bias"] = False
    if batch_first:
        kwargs["batch_first"] = True
    if nd == 2:
        kwargs["bidirectional"] = True
    if x.type.dtype is not DType.FLOAT32:
        kwargs["dtype"] = x.type.dtype
    used = [v if (v.uses or v in graph.outputs) else None for v in results]
    target = [used[0], used[1] if kind != "lstm" else (
        None if used[1] is None and used[2] is None else [used[1], used[2]])]  # fmt: skip
    args: list = [x] if not states else [x, states if kind == "lstm" else states[0]]
    return GroupModule(
        prefix, call(module, size, hidden, **kwargs),
        {k[len(prefix) + 1 :]: read[k] for k in names}, group, args, target,
    )  # fmt: skip


def _same(n: Node, n2: Node, image: dict[int, Value]) -> bool:
    """``n`` is the scratch node ``n2`` (same op, attributes, and inputs under ``image``)."""
    if n.op != n2.op or len(n.inputs) != len(n2.inputs) or n.attrs.keys() != n2.attrs.keys():
        return False
    if not all(attr_equal(n.attrs[k], n2.attrs[k]) for k in n.attrs):
        return False
    return all(
        (a is None and b is None) or (b is not None and image.get(id(b)) is a)
        for a, b in zip(n.inputs, n2.inputs)
    )


def _zeros_of(v: Value, dtype: DType, inside: set[int]) -> Node | None:
    """The ``full`` of zeros (static shape) that makes state ``v``, read only by the group:
    the states nn.LSTM makes when it is called without."""
    p = v.producer
    if p is None or p.op != "full" or p.inputs or v.type.dtype is not dtype:
        return None
    if not v.type.is_static or p.attrs.get("value") != 0:
        return None
    return p if all(id(u) in inside for u, _ in v.uses) else None


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
