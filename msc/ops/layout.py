"""Layout rewrites: a graph's layout-sensitive nodes brought to one data layout
(``to_layout``), and the transposes that leaves sunk through the ops that do not care and
cancelled (``sink_transposes``).

    g2 = sink_transposes(to_layout(g, "NHWC"))   # what codegen.tflite writes
    g3 = sink_transposes(to_layout(g2, "NCHW"))  # what codegen.torch / onnx / relax emit

# NOTE: invariants
# - Both passes return a new graph and leave theirs unchanged; graph inputs and outputs keep
#   their names, types and layout (a layout change shows as a transpose at the boundary).
# - ``to_layout`` rewrites conv (data and, optionally, kernel layout), max_pool and avg_pool
#   nodes of rank 3-5, each between explicit transposes; a kernel that is a weight is stored
#   permuted (a new weight of the same name when nothing else reads it), never transposed at
#   run time.
# - ``sink_transposes`` keeps every value as (stored value, permutation): a transpose only
#   composes the permutation, ops that commute with a permutation (unary elementwise and
#   activations, binary ops with a constant or like-permuted operand, concat, a pad of
#   constant pads, reductions, a reshape that moves only size-1 dims) run on the stored value,
#   and a transpose is written only where some other op, or a graph output, needs the value
#   itself. Inverse pairs so vanish.
# - Graphs with subgraphs (loops, ifs) are left as they are by ``sink_transposes``.
# - Pure msc: no torch, no onnx.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import TensorType
from msc.ops.nn import DATA_LAYOUTS, KERNEL_LAYOUTS, kernel_perm, layout_perm
from msc.ops.rewrite import constant_value, copy_graph

__all__ = [
    "to_layout",
    "sink_transposes",
    "fold_batch_norm",
    "count_transposes",
    "has_layouts",
    "channels_first",
    "LAYOUT_OPS",
]

# op -> whether it has a kernel_layout
LAYOUT_OPS = {"conv": True, "max_pool": False, "avg_pool": False}


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _compose(p: Sequence[int], q: Sequence[int]) -> list[int]:
    """transpose(transpose(s, p), q) == transpose(s, _compose(p, q))."""
    return [p[i] for i in q]


def _identity(p: Sequence[int] | None) -> bool:
    return p is None or list(p) == list(range(len(p)))


def count_transposes(graph: Graph) -> int:
    """Transpose nodes in ``graph`` (subgraphs included)."""
    n = 0
    for node in graph.nodes:
        n += node.op == "transpose"
        n += sum(count_transposes(sg) for sg in node.subgraphs())
    return n


class _Names:
    """Fresh value names that no name of the source graph uses."""

    def __init__(self, graph: Graph) -> None:
        self.taken = {v.name for v in graph.values()} | set(graph.weights)

    def fresh(self, base: str | None, tag: str) -> str:
        stem = f"{base}_{tag}" if base else tag
        name, k = stem, 1
        while name in self.taken:
            k += 1
            name = f"{stem}{k}"
        self.taken.add(name)
        return name


# ---------------------------------------------------------------- to_layout
def to_layout(graph: Graph, layout: str = "NHWC", *, kernel_layout: str | None = None) -> Graph:
    """``graph`` with every conv / max_pool / avg_pool in ``layout`` (NCHW or NHWC), between
    explicit transposes; convs' kernels in ``kernel_layout`` (default: OHWI for NHWC, OIHW for
    NCHW). Run ``sink_transposes`` after it to leave only the boundary's transposes."""
    if layout not in DATA_LAYOUTS:
        raise ValueError(f"to_layout: {layout!r} is not one of {', '.join(DATA_LAYOUTS)}")
    kl = kernel_layout or ("OHWI" if layout == "NHWC" else "OIHW")
    if kl not in KERNEL_LAYOUTS:
        raise ValueError(f"to_layout: kernel layout {kl!r} is not one of {KERNEL_LAYOUTS}")
    g = copy_graph(graph)
    names = _Names(g)
    nodes, g.nodes = g.nodes, []
    for node in nodes:
        if not _wants(node, layout, kl):
            g.nodes.append(node)
            continue
        _relayout(g, node, layout, kl, names)
    _drop_orphans(g, graph)
    return g


def _wants(node: Node, layout: str, kl: str) -> bool:
    if node.op not in LAYOUT_OPS or node.inputs[0] is None:
        return False
    x = node.inputs[0]
    if x.type.shape is None or not 3 <= len(x.type.shape) <= 5:
        return False
    if LAYOUT_OPS[node.op]:
        w = node.inputs[1]
        if w is None or w.type.shape is None:
            return False
        kl = _kernel_for(node, kl)
        return node.attrs["data_layout"] != layout or node.attrs["kernel_layout"] != kl
    return node.attrs["data_layout"] != layout


def _transpose(g: Graph, x: Value, perm: list[int], name: str) -> Value:
    return g.add_node("transpose", [x], {"perm": perm}, output_names=[name]).output


def _kernel_for(node: Node, kl: str) -> str:
    """IHWO (TFLite's depthwise filter) is for convs of one input channel per group; other
    convs take OHWI then."""
    w = node.inputs[1]
    if kl == "IHWO" and (node.attrs["groups"] == 1 or w.type.shape is None):
        return "OHWI"
    if kl == "IHWO":
        i = w.type.shape[_inverse(kernel_perm(node.attrs["kernel_layout"], len(w.type.shape)))[1]]
        return kl if i == 1 else "OHWI"
    return kl


def _relayout(g: Graph, node: Node, layout: str, kl: str, names: _Names) -> None:
    x = node.inputs[0]
    r = len(x.type.shape)
    old = node.attrs["data_layout"]
    # old -> channels first -> new
    to_new = _compose(_inverse(layout_perm(old, r)), layout_perm(layout, r))
    ins = list(node.inputs)
    dropped: list[Node] = []
    if not _identity(to_new):
        ins[0] = _through_dequantize(g, x, to_new, names, layout.lower(), dropped)
        if ins[0] is None:
            ins[0] = _transpose(g, x, to_new, names.fresh(x.name, layout.lower()))
    attrs = dict(node.attrs)
    attrs["data_layout"] = layout
    if LAYOUT_OPS[node.op]:
        w = ins[1]
        wr = len(w.type.shape)
        kl = _kernel_for(node, kl)
        kp = _compose(_inverse(kernel_perm(node.attrs["kernel_layout"], wr)), kernel_perm(kl, wr))
        if not _identity(kp):
            ins[1] = _through_dequantize(g, w, kp, names, kl, dropped)
            if ins[1] is None:
                ins[1] = _permuted_weight(g, w, kp, names, kl)
        attrs["kernel_layout"] = kl
    back = _inverse(to_new)
    outs = node.outputs
    inner = [names.fresh(o.name, layout.lower()) for o in outs] if not _identity(back) else None
    new = g.add_node(node.op, ins, attrs, name=node.name, provenance=node.provenance,
                     output_names=inner or [None] * len(outs))  # fmt: skip
    node.inputs = ()
    for o, n in zip(outs, new.outputs):
        if inner is None:
            o.replace_all_uses_with(n)
            _rename_output(g, o, n)
            continue
        t = g.add_node("transpose", [n], {"perm": back}, output_names=[None])
        # the transposed value takes the original's place and name
        g._taken.discard(t.output.name)  # noqa: SLF001
        g._taken.discard(o.name)  # noqa: SLF001
        t.output.name = o.name
        g._taken.add(o.name)  # noqa: SLF001
        o.replace_all_uses_with(t.output)
        g.outputs = [t.output if v is o else v for v in g.outputs]
    for dq in dropped:
        if not dq.output.uses and dq.output not in g.outputs:
            g.remove_node(dq)


def _through_dequantize(
    g: Graph, v: Value, perm: list[int], names: _Names, tag: str, dropped: list[Node]
) -> Value | None:
    """``v`` permuted as dequantize(permuted integers) when ``v`` is a dequantize only the
    layout op reads (a quantized filter is so stored permuted, and the QDQ pattern
    dequantize -> conv stays adjacent for the runtimes that fuse it), else None."""
    p = v.producer
    if p is None or p.op != "dequantize" or p.attrs["block_size"] or len(v.uses) != 1:
        return None
    if v in g.outputs:
        return None
    q = p.inputs[0]
    scale = p.inputs[1]
    if scale.type.shape is None or q.type.shape is None or len(q.type.shape) != len(perm):
        return None
    per_axis = any(d != 1 for d in scale.type.shape)
    axis = p.attrs["axis"] % len(perm)
    qt = _permuted_weight(g, q, perm, names, tag)
    new = g.add_node(
        "dequantize",
        [qt, *p.inputs[1:]],
        {**p.attrs, "axis": perm.index(axis) if per_axis else p.attrs["axis"]},
        name=p.name,
        provenance=p.provenance,
        output_names=[names.fresh(v.name, tag.lower())],
    )
    dropped.append(p)
    return new.output


def _rename_output(g: Graph, old: Value, new: Value) -> None:
    g._taken.discard(new.name)  # noqa: SLF001
    new.name = old.name
    g.outputs = [new if v is old else v for v in g.outputs]


def _permuted_weight(g: Graph, w: Value, perm: list[int], names: _Names, tag: str) -> Value:
    arr = constant_value(w)
    if isinstance(w, Weight) and arr is not None:
        data = np.ascontiguousarray(np.transpose(arr, perm))
        t = TensorType(w.type.dtype, data.shape)
        alone = len(w.uses) <= 1 and w not in g.outputs
        name = w.name if alone else names.fresh(w.name, tag.lower())
        if not alone:
            return g.add_weight(name, data, t, role=w.role)
        order = list(g.weights)
        del g.weights[w.name]
        nw = g.add_weight(name, data, t, role=w.role, aliases=w.aliases)
        g.weights = {k: g.weights[k] for k in order}  # the weight keeps its place
        return nw
    return _transpose(g, w, perm, names.fresh(w.name, tag.lower()))


def _drop_orphans(g: Graph, source: Graph) -> None:
    """Drop the weights this pass left unread (a kernel stored permuted, folded statistics);
    a weight the source already left unread is kept."""
    read = {n for n, w in source.weights.items() if w.uses or w in source.outputs}
    for name, w in list(g.weights.items()):
        if name in read and not w.uses and w not in g.outputs:
            del g.weights[name]


# ---------------------------------------------------------------- batch norm
def _constant(g: Graph, value: np.ndarray, name: str) -> Value:
    return g.add_node("constant", [], {"value": value}, output_names=[name]).output


def fold_batch_norm(graph: Graph) -> Graph:
    """Inference batch norms whose statistics are constants, as ``x * scale + shift`` with
    [C, 1, ...] constants (so the transpose sinking can permute them); others are kept."""
    g = copy_graph(graph)
    names = _Names(g)
    nodes, g.nodes = g.nodes, []
    for node in nodes:
        x = node.inputs[0] if node.inputs else None
        if node.op != "batch_norm" or x is None or x.type.shape is None or len(x.type.shape) < 2:
            g.nodes.append(node)
            continue
        arrs = [constant_value(v) if v is not None else None for v in node.inputs[1:]]
        w, b, mean, var = arrs
        if mean is None or var is None or (node.inputs[1] is not None and w is None):
            g.nodes.append(node)
            continue
        if node.inputs[2] is not None and b is None:
            g.nodes.append(node)
            continue
        dt = x.type.dtype.to_numpy()
        scale = 1.0 / np.sqrt(var.astype(np.float64) + node.attrs["eps"])
        if w is not None:
            scale = scale * w
        shift = -mean * scale + (b if b is not None else 0.0)
        view = (-1,) + (1,) * (len(x.type.shape) - 2)
        base = node.name or x.name
        sc = _constant(g, scale.astype(dt).reshape(view), names.fresh(base, "scale"))
        sh = _constant(g, shift.astype(dt).reshape(view), names.fresh(base, "shift"))
        y = g.add_node("mul", [x, sc], {}, output_names=[names.fresh(node.name, "scaled")])
        out = node.output
        node.inputs = ()
        z = g.add_node("add", [y.output, sh], {}, output_names=[None])
        g._taken.discard(z.output.name)  # noqa: SLF001
        z.output.name = out.name
        out.replace_all_uses_with(z.output)
        g.outputs = [z.output if v is out else v for v in g.outputs]
    _drop_orphans(g, graph)
    return g


# ---------------------------------------------------------------- sink_transposes
_ELEMENTWISE_FAMILIES = ("elementwise", "binary", "compare", "activation")
_NOT_ELEMENTWISE = frozenset({"prelu", "swiglu"})  # per-channel slope, split halves


def _elementwise(graph: Graph, op: str) -> bool:
    if op in _NOT_ELEMENTWISE:
        return False
    return getattr(graph.opset.get(op), "category", "") in _ELEMENTWISE_FAMILIES


class _Sinker:
    """One rebuild of a graph with every value held as (stored value, permutation)."""

    def __init__(self, graph: Graph) -> None:
        self.src = graph
        self.g = Graph(graph.name, graph._opset)  # noqa: SLF001
        self.g.meta = dict(graph.meta)
        self.names = _Names(graph)
        self.env: dict[int, tuple[Value, list[int] | None]] = {}
        self.plain: dict[int, Value] = {}
        for w in graph.weights.values():
            nw = self.g.add_weight(w.name, w.storage, w.type, role=w.role, aliases=w.aliases)
            self.env[id(w)] = (nw, None)
        for v in graph.inputs:
            self.env[id(v)] = (self.g.add_input(v.name, v.type), None)

    # the value itself, a transpose written when it is held permuted
    def value(self, v: Value | None) -> Value | None:
        if v is None:
            return None
        s, p = self.env[id(v)]
        if _identity(p):
            return s
        if id(v) not in self.plain:
            shape = s.type.shape
            moves = [q for q in p if shape is None or shape[q] != 1]
            if (
                shape is not None
                and moves == sorted(moves)
                and all(isinstance(d, int) for d in shape)
            ):  # only size-1 dims move: no data does, a reshape says so
                out = [shape[q] for q in p]
                node = self.g.add_node("reshape", [s], {"shape": out}, output_names=[v.name])
                self.plain[id(v)] = node.output
            else:
                self.plain[id(v)] = _transpose(self.g, s, list(p), v.name)
        return self.plain[id(v)]

    def copy(self, node: Node) -> None:
        ins = [self.value(v) for v in node.inputs]
        new = Node(node.op, ins, node.attrs, name=node.name, provenance=node.provenance,
                   output_types=[o.type for o in node.outputs],
                   output_names=[o.name for o in node.outputs],
                   opset=self.src._opset)  # fmt: skip  # noqa: SLF001
        self.g.add_node(new)
        for o, n in zip(node.outputs, new.outputs):
            self.env[id(o)] = (n, None)

    def emit(self, node: Node, ins, attrs, perm: list[int]) -> None:
        """``node`` on stored inputs, its output held with ``perm``."""
        o = node.output
        name = o.name if _identity(perm) else self.names.fresh(o.name, "t")
        new = self.g.add_node(node.op, ins, attrs, name=node.name, provenance=node.provenance,
                              output_names=[name])  # fmt: skip
        self.env[id(o)] = (new.output, None if _identity(perm) else perm)

    def run(self) -> Graph:
        for node in self.src.nodes:
            if not self.step(node):
                self.copy(node)
        self.g.set_outputs([self.value(v) for v in self.src.outputs])
        self.g.output_tree = self.src.output_tree
        dead = [n for n in _dead(self.g) if n.op in ("transpose", "constant")]
        self.g.remove_nodes(dead)
        return self.g

    def step(self, node: Node) -> bool:
        if len(node.outputs) != 1 or node.output.type.shape is None:
            return False
        if node.op == "transpose":
            s, p = self.env[id(node.inputs[0])]
            perm = list(node.attrs["perm"])
            q = _compose(p, perm) if p is not None else perm
            if _identity(q):
                self.env[id(node.output)] = (s, None)
            else:
                self.env[id(node.output)] = (s, q)
            return True
        held = [self.env[id(v)][1] if v is not None else None for v in node.inputs]
        p = next((h for h in held if not _identity(h)), None)
        if p is None:
            return False
        if _elementwise(self.src, node.op) or _per_tensor_quant(node):
            return self.elementwise(node, p)
        if node.op == "concat":
            return self.concat(node, p)
        if node.op == "pad":
            return self.pad(node, p)
        if node.op.startswith("reduce_") and "axes" in node.attrs:
            return self.reduce(node, p)
        if node.op in ("reshape", "squeeze", "unsqueeze"):
            return self.reshape(node, p)
        return False

    def elementwise(self, node: Node, p: list[int]) -> bool:
        r = len(node.output.type.shape)
        if len(p) != r:
            return False
        ins: list[Value | None] = []
        for v in node.inputs:
            if v is None:
                ins.append(None)
                continue
            s, h = self.env[id(v)]
            shape = v.type.shape
            if h is not None and list(h) == list(p):
                ins.append(s)
            elif shape is not None and all(d == 1 for d in shape) and len(shape) <= r:
                ins.append(self.value(v))  # a scalar broadcasts the same in any order
            else:
                c = constant_value(s) if h is None else None
                if c is None or c.ndim > r:
                    return False
                c = np.ascontiguousarray(np.transpose(c.reshape((1,) * (r - c.ndim) + c.shape),
                                                      _inverse(p)))  # fmt: skip
                ins.append(self.permuted_constant(v, s, c))
        self.emit(node, ins, dict(node.attrs), p)
        return True

    def permuted_constant(self, v: Value, s: Value, c: np.ndarray) -> Value:
        """``c`` (``v`` permuted) as a constant node, or as a weight when ``v`` is one: in
        ``v``'s place, under its name, when nothing else reads it."""
        if not isinstance(s, Weight):
            return _constant(self.g, c, self.names.fresh(v.name, "t"))
        t = TensorType(s.type.dtype, c.shape)
        if len(v.uses) == 1 and not s.uses and v not in self.src.outputs:
            order = list(self.g.weights)
            del self.g.weights[s.name]
            w = self.g.add_weight(s.name, c, t, role=s.role, aliases=s.aliases)
            self.g.weights = {k: self.g.weights[k] for k in order}
            return w
        return self.g.add_weight(self.names.fresh(v.name, "t"), c, t, role=s.role)

    def concat(self, node: Node, p: list[int]) -> bool:
        held = [self.env[id(v)] for v in node.inputs]
        if any(h is None or list(h) != list(p) for _, h in held):
            return False
        axis = node.attrs["axis"] % len(p)
        self.emit(node, [s for s, _ in held], {**node.attrs, "axis": p[axis]}, p)
        return True

    def pad(self, node: Node, p: list[int]) -> bool:
        """A pad of constant pads on the stored value, each dim's pads moved with it (the
        explicit "same" padding before a conv that TF-style models write)."""
        pads = node.attrs["pads"]
        s, h = self.env[id(node.inputs[0])]
        if pads is None or h is None or list(h) != list(p) or len(pads) != 2 * len(p):
            return False
        r = len(p)
        stored = [0] * (2 * r)
        for i in range(r):
            stored[p[i]], stored[r + p[i]] = pads[i], pads[r + i]
        value = [self.value(v) for v in node.inputs[1:]]
        self.emit(node, [s, *value], {**node.attrs, "pads": stored}, p)
        return True

    def reduce(self, node: Node, p: list[int]) -> bool:
        axes = node.attrs["axes"]
        if len(node.inputs) > 1 and node.inputs[1] is not None or not axes:
            return False
        s, _ = self.env[id(node.inputs[0])]
        r = len(p)
        logical = sorted(a % r for a in axes)
        stored = sorted(p[a] for a in logical)
        attrs = {**node.attrs, "axes": stored}
        if node.attrs.get("keepdims", True):
            self.emit(node, [s], attrs, p)
            return True
        kept = [d for d in range(r) if d not in stored]
        q = [kept.index(p[i]) for i in range(r) if i not in logical]
        self.emit(node, [s], attrs, q)
        return True

    def reshape(self, node: Node, p: list[int]) -> bool:
        x = node.inputs[0]
        shape = x.type.shape
        if len(node.inputs) > 1 and node.inputs[1] is not None or shape is None:
            return False
        out = node.output.type.shape
        if out is None or not all(isinstance(d, int) for d in out):
            return False
        s, _ = self.env[id(x)]
        order = [p[i] for i in range(len(p)) if shape[i] != 1]
        if order == sorted(order):  # the permutation moves size-1 dims only: no data moves
            node = _as_reshape(node)
            self.emit(node, [s], {"shape": list(out)}, list(range(len(out))))
            return True
        if out is None or not all(isinstance(d, int) for d in (*shape, *out)):
            return False
        if [d for d in shape if d != 1] != [d for d in out if d != 1]:
            return False
        # unit dims only inserted or removed: the stored output is the stored input's non-1
        # dims in their stored order after the unit dims, held permuted back to ``out``
        rank_of = sorted(range(len(order)), key=lambda k: order[k])  # logical -> stored rank
        units = [i for i, d in enumerate(out) if d != 1]
        ones = [i for i, d in enumerate(out) if d == 1]
        q = [0] * len(out)
        for k, i in enumerate(ones):
            q[i] = k
        for j, i in enumerate(units):
            q[i] = len(ones) + rank_of.index(j)
        stored = [0] * len(out)
        for i, qi in enumerate(q):
            stored[qi] = out[i]
        self.emit(_as_reshape(node), [s], {"shape": stored}, q)
        return True


def _per_tensor_quant(node: Node) -> bool:
    """A quantize with one scale: elementwise, so a transpose passes it and a quantized
    kernel's dequantize -> op -> quantize stays together. A dequantize keeps the transpose
    in front of it (``to_layout`` put it there, on the integers, for the same reason)."""
    if node.op != "quantize" or node.attrs.get("block_size"):
        return False
    shape = node.inputs[1].type.shape
    return shape is not None and all(d == 1 for d in shape)


class _Renamed:
    """A node read as another op (a squeeze or unsqueeze written as the reshape it is)."""

    def __init__(self, node: Node, op: str) -> None:
        self.op, self.name, self.provenance, self.output = (
            op,
            node.name,
            node.provenance,
            node.output,
        )


def _as_reshape(node: Node):
    return node if node.op == "reshape" else _Renamed(node, "reshape")


def _dead(g: Graph) -> list[Node]:
    from msc.ir.graph import dead_nodes

    return dead_nodes(g)


def sink_transposes(graph: Graph) -> Graph:
    """``graph`` with its transposes moved down through the ops that commute with them and
    cancelled where they meet their inverse (see the module's NOTE); a new graph."""
    if any(True for n in graph.nodes for _ in n.subgraphs()):
        return copy_graph(graph)
    return _Sinker(graph).run()


def has_layouts(graph: Graph) -> bool:
    """Whether some node (subgraphs included) has a data or kernel layout other than the
    channels-first default."""
    for node in graph.nodes:
        if node.op in LAYOUT_OPS and (
            node.attrs["data_layout"] != "NCHW" or node.attrs.get("kernel_layout", "OIHW") != "OIHW"
        ):
            return True
        if any(has_layouts(sg) for sg in node.subgraphs()):
            return True
    return False


def channels_first(graph: Graph) -> Graph:
    """``graph`` itself when every layout-sensitive node is channels first, else with them
    brought there and the transposes sunk: what the channels-first codegens (torch, ONNX,
    Relax) emit."""
    if not has_layouts(graph):
        return graph
    return sink_transposes(to_layout(graph, "NCHW"))
