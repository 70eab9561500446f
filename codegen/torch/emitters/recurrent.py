"""Emitters for the recurrent layers: rnn, gru, lstm as torch's modules where they are
exactly one, else through one run-time helper.

# NOTE: invariants
# - The nodes msc's torch frontend makes of one nn.LSTM / nn.GRU / nn.RNN call (gate reorder,
#   layers, batch_first transposes, state slices: msc.ops.recurrent.torch_layers) are
#   that module again (``torch_modules``), with the source's parameters under their own
#   state_dict keys: found by building what the frontend makes of the module the weights
#   name and matching it node for node, so a re-import of the code gives the same graph.
# - A node of another source (ONNX, Keras) whose equations are exactly torch's module's
#   (default activations, RNN tanh or relu, no clip, peepholes or sequence lengths, GRU
#   linear_before_reset, forward or bidirectional) is first rewritten into those nodes
#   (``onnx_form_as_modules``) with its weights in torch's gate order (i, f, g, o; r, z, n)
#   under the module's keys (``lstm.weight_ih_l0``), named after the source's layer.
# - Every other node calls ``_msc_recurrent`` (below), which computes ONNX's equations on the
#   weights as the graph holds them (other activations, clip, peepholes, sequence lengths,
#   ONNX's gate orders).
"""

from __future__ import annotations

import ast

import numpy as np
import torch
import torch.nn.functional as F

from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS, GroupModule, graph_rewrite, group_rule, unrolled
from msc.ir.attrs import attr_equal
from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Provenance, Value, Weight
from msc.ops.recurrent import TORCH_SPEC, torch_layers


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


class _TorchBuilder(Builder):
    """Builds nodes as the torch frontend's converters do (their provenance: torch's op,
    the module's path and type), so what it makes of a module matches what the frontend made."""

    def __init__(self) -> None:
        super().__init__()
        self.source_op = self.node_name = self.module = ""
        self.stack: tuple[tuple[str, str], ...] = ()

    def _current_name(self) -> str:
        return self.node_name

    def _current_provenance(self) -> Provenance:
        return Provenance("torch", self.source_op, self.node_name, self.module, self.stack)


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
    kind, module, kw = _TORCH[source_op]
    recs = [n for n in nodes if n.op in ("lstm", "gru", "rnn")]
    if not recs:
        return None
    first, inside = recs[0], {id(n) for n in nodes}
    nd = 2 if first.attrs["direction"] == "bidirectional" else 1
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
    read = {v.name: v for n in nodes for v in n.inputs
            if isinstance(v, Weight) and not any(v is s for s in states)}  # fmt: skip
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
    ctx = _TorchBuilder()
    try:
        made = torch_layers(ctx, kind, sx, ss, sp, bias, len(recs), False, nd == 2,
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


# op -> (torch kind, default activations per direction) of the nodes torch's modules compute
_EXACT = {
    "lstm": [("lstm", ["sigmoid", "tanh", "tanh"])],
    "gru": [("gru", ["sigmoid", "tanh"])],
    "rnn": [("rnn_tanh", ["tanh"]), ("rnn_relu", ["relu"])],
}
_SOURCE_OP = {kind: op for op, (kind, _, _) in _TORCH.items()}


@graph_rewrite
def onnx_form_as_modules(graph: Graph) -> Graph:
    """``graph`` with each exact recurrent node that is not already the nodes of a torch
    module call (an ONNX or Keras LSTM) rewritten into them; the graph itself when none."""
    todo = [i for i, n in enumerate(graph.nodes) if _torch_kind(n) is not None]
    if todo:  # not the ones that already are a module's call (msc's torch frontend)
        done = {id(n) for g in torch_modules(graph) for n in g.nodes}
        todo = [i for i in todo if id(graph.nodes[i]) not in done]
    if not todo:
        return graph
    from msc.ops.rewrite import copy_graph

    out = copy_graph(graph)
    changed = False
    for n in [out.nodes[i] for i in todo]:
        changed |= _as_module(out, n)
    if not changed:
        return graph
    out.sort()
    return out


def _torch_kind(n: Node) -> str | None:
    """The torch module kind computing ``n`` exactly (lstm, gru, rnn_tanh, rnn_relu)."""
    if n.op not in _EXACT:  # (the torch frontend's nodes read w through a gate reorder)
        return None
    a = n.attrs
    nd = {"forward": 1, "bidirectional": 2}.get(a["direction"])
    if nd is None or a["clip"] is not None or a.get("input_forget"):
        return None
    if n.op == "gru" and not a["linear_before_reset"]:
        return None
    ins = list(n.inputs) + [None] * (8 - len(n.inputs))
    if ins[4] is not None or (n.op == "lstm" and ins[7] is not None):  # lengths, peepholes
        return None
    if any(_weight_only(v) is None for v in ins[1:3]):  # w, r: weights (or computed from them)
        return None
    if ins[3] is not None and _weight_only(ins[3]) is None:
        return None
    x = ins[0]
    if x.type.shape is None or len(x.type.shape) != 3 or not isinstance(x.type.shape[2], int):
        return None
    return next((k for k, acts in _EXACT[n.op] if list(a["activations"]) == acts * nd), None)


def _as_module(g: Graph, n: Node) -> bool:
    """Rewrite ``n`` into the nodes of its torch module's call (False: it stays)."""

    kind = _torch_kind(n)
    gates, order, _ = TORCH_SPEC[kind]
    a = n.attrs
    nd, hidden, layout = (
        2 if a["direction"] == "bidirectional" else 1,
        a["hidden_size"],
        a["layout"],
    )
    ins = list(n.inputs) + [None] * (8 - len(n.inputs))
    x, w, r, b = ins[:4]
    states = [None if _zero_weight(v) else v for v in ins[5 : 7 if n.op == "lstm" else 6]]
    batch = x.type.shape[1 - layout]
    seq = x.type.shape[layout]
    if not isinstance(batch, int) and not isinstance(seq, int):
        return False
    if any(v is None for v in states) and any(v is not None for v in states):
        return False  # partly given states
    prefix = _free_prefix(g, n)
    back = np.argsort(order)  # canonical gate blocks -> torch's

    def torch_order(t: np.ndarray) -> np.ndarray:
        return t.reshape(gates, -1, *t.shape[1:])[back].reshape(t.shape)

    params = []
    wd, rd = _value(w), _value(r)
    bd = None if b is None else _value(b)
    for d in range(nd):
        sfx = "_reverse" if d else ""
        data = [("weight_ih", wd[d]), ("weight_hh", rd[d])]
        if bd is not None:
            data += [("bias_ih", bd[d][: gates * hidden]), ("bias_hh", bd[d][gates * hidden :])]
        for k, t in data:
            t = np.ascontiguousarray(torch_order(t))
            params.append(g.add_weight(f"{prefix}.{k}_l0{sfx}", t, role="parameter"))
    glue = Builder(n.name, n.provenance)
    ctx = _TorchBuilder()
    ctx.source_op, ctx.node_name, ctx.module = "aten.zeros.default", prefix, prefix
    ctx.stack = ((prefix, {"lstm": "LSTM", "gru": "GRU"}.get(kind, "RNN")),)
    if states[0] is None:  # what the module makes when called without states
        hx = _zeros(ctx, x, 1 - layout, nd, hidden, len(states))
    elif layout == 1:  # [batch, nd, hidden] -> torch's [nd, batch, hidden]
        hx = [glue.op("transpose", v, perm=[1, 0, 2]) for v in states]
    else:
        hx = list(states)
    ctx.source_op = _SOURCE_OP[kind]
    made = torch_layers(ctx, kind, x, hx, params, bd is not None, 1, False, nd == 2, layout == 1)
    y = made[0]  # [seq, batch, nd * hidden] (layout 1: [batch, seq, ...])
    dims = [seq, batch] if layout == 0 else [batch, seq]
    y = glue.op("reshape", y, shape=[d if isinstance(d, int) else -1 for d in dims] + [nd, hidden])
    if layout == 0:
        y = glue.op("transpose", y, perm=[0, 2, 1, 3])
    finals = list(made[1:])
    if layout == 1:
        finals = [glue.op("transpose", v, perm=[1, 0, 2]) for v in finals]
    for node in [*ctx.nodes, *glue.nodes]:
        g.add_node(node)
    for old, new in zip(n.outputs, [y, *finals]):
        old.replace_all_uses_with(new)
        g.outputs = [new if v is old else v for v in g.outputs]
    g.remove_node(n)
    read = [v for v in ins[1:] if v is not None]
    for node in reversed([m for v in read for m in _weight_only(v) or ()]):  # now unread
        if node.outputs and all(not o.uses and o not in g.outputs for o in node.outputs):
            read += [v for v in node.inputs if v is not None]
            g.remove_node(node)
    for v in {id(v): v for v in read if isinstance(v, Weight)}.values():
        if not v.uses and v not in g.outputs and v.name in g.weights:
            del g.weights[v.name]
    return True


_FOLDABLE = 1 << 22  # elements: a recurrent weight computed from larger ones stays a node


def _weight_only(v: Value) -> list[Node] | None:
    """The nodes (in order) computing ``v`` from weights alone (Keras' kernel transposed to
    ONNX's layout), [] for a weight itself; None when ``v`` reads anything else."""
    if isinstance(v, Weight):
        return [] if v.has_data else None
    seen: dict[int, Node] = {}

    def visit(u: Value) -> bool:
        if isinstance(u, Weight):
            return u.has_data
        p = u.producer
        if p is None or any(True for _ in p.subgraphs()) or not u.type.is_static:
            return False
        if id(p) in seen:
            return True
        if not all(i is None or visit(i) for i in p.inputs):
            return False
        seen[id(p)] = p
        return True

    if not visit(v) or sum(int(np.prod(o.type.shape)) for n in seen.values()
                           for o in n.outputs) > _FOLDABLE:  # fmt: skip
        return None
    return list(seen.values())


def _value(v: Value) -> np.ndarray:
    """The value of ``v``, a weight or computed from weights alone (``_weight_only``)."""
    if isinstance(v, Weight):
        return v.numpy()
    from codegen.torch import to_module

    nodes = _weight_only(v) or []
    one = Graph("fold")
    image: dict[int, Value] = {}
    for n in nodes:
        ins = []
        for u in n.inputs:
            if u is not None and id(u) not in image:  # a weight
                image[id(u)] = one.weights.get(u.name) or one.add_weight(u.name, u.storage, u.type)
            ins.append(None if u is None else image[id(u)])
        m = one.add_node(n.op, ins, dict(n.attrs), output_types=[o.type for o in n.outputs])
        image.update(zip((id(o) for o in n.outputs), m.outputs))
    one.set_outputs([image[id(v)]])
    with torch.no_grad():
        out = to_module(one)()
    return np.asarray((out[0] if isinstance(out, tuple | list) else out).detach().numpy())


def _zeros(ctx, x: Value, axis: int, nd: int, hidden: int, count: int) -> list[Value]:
    """``count`` zero states [nd, batch, hidden] as torch.export gives nn.LSTM's own (batch:
    ``x``'s dim ``axis``): a ``full`` of a static shape, or of one read from x's shape."""
    batch, dtype = x.type.shape[axis], x.type.dtype
    if isinstance(batch, int):
        return [ctx.op("full", shape=[nd, batch, hidden], value=0.0, dtype=dtype)
                for _ in range(count)]  # fmt: skip
    source = ctx.source_op
    ctx.source_op = "aten.sym_size.int"
    size = ctx.op("squeeze", ctx.op("shape", x, start=axis, end=axis + 1), axes=[0])
    ctx.source_op = source
    out = []
    for _ in range(count):
        shape = ctx.op("concat", ctx.const([nd], DType.INT64),
                       ctx.op("reshape", size, shape=[1]), ctx.const([hidden], DType.INT64),
                       axis=0)  # fmt: skip
        out.append(ctx.op("full", shape, value=0.0, dtype=dtype))
    return out


def _zero_weight(v: Value | None) -> bool:
    """``v`` is a weight of zeros (an exporter's initial state: what the module makes)."""
    if not isinstance(v, Weight) or not v.has_data or not v.type.is_static:
        return False
    return not v.numpy().any()


def _free_prefix(g: Graph, n: Node) -> str:
    """A module path for ``n``'s module: the source layer's (``lstm``), else the op's."""
    from codegen.torch.names import sanitize

    base = sanitize(n.provenance.module.strip("/").replace("/", "_"), "") or n.op
    taken = {p for name in g.weights for p in _prefixes(name)}
    prefix, k = base, 0
    while prefix in taken:
        k += 1
        prefix = f"{base}_{k}"
    return prefix


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


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
