"""The Keras codegen: an msc Graph as the source of a Keras 3 functional model.

# NOTE: invariants
# - The source builds the model with library layers where one exists (``layers.Dense``,
#   ``layers.Conv2D``, ``layers.BatchNormalization``) and ``keras.ops`` otherwise; it imports
#   only keras and numpy, never msc. Weights are set by layer name from an .npz (no pickle).
# - Weight-only subgraphs (a kernel's transpose or reshape) are computed at generation: the
#   layers get their weights in Keras' layout. A weight used as a plain operand is written as
#   a literal when small, else refused.
# - Layer names are the nodes' source names, made Keras-legal (``/`` -> ``_``) and unique
#   after sanitizing; layers that hold weights claim their names first. Python names come
#   from the values' names through one namespace. Model strings reach the source only through
#   ``repr()`` or a sanitized identifier.
# - A value computed without the model's inputs (an ``ops.arange`` and what follows from it)
#   is a tensor Keras computes once, when build() runs: a layer holding weights called on
#   such values alone runs then, with its initial weights, and is not part of the model, so
#   set_weights never reaches it. ``Emit.symbolic`` says which inputs are the model's run-time
#   tensors; ``Emit.layer`` refuses a weighted layer without one, and an emitter that can write
#   the same use from ``SourceWeight`` operands does so (embedding).
# - Ops without an emitter are lowered through msc.ops' decompositions first; every node that
#   can still not be written is reported at once.
# - A repeated block of the source is written by codegen.keras.blocks in a scope of its own
#   (``self.block``: sublayers to its __init__, names the same in every instance); ``flat``
#   writes none.
"""

from __future__ import annotations

import builtins
import keyword
import re
from typing import Any

import numpy as np

from codegen.keras.registry import EMITTERS, EmitterRegistry
from msc.errors import Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.io.marker import SOURCES
from msc.ir import DType, Graph, Node, SymDim, SymExpr, TensorType, Value, Weight
from msc.ir.dtype import shortest

__all__ = ["KerasCodegen", "Emit", "WEIGHTS_FILE", "MODEL_FILE", "WEIGHTED"]

MODEL_FILE = "model.py"
WEIGHTS_FILE = "model.weights.npz"
LITERAL_LIMIT = 64  # elements: a folded operand up to this size is written as a literal
# Ops whose emitters make a layer holding weights: they claim their node's name first.
WEIGHTED = ("linear", "conv", "batch_norm", "layer_norm", "embedding")
# Ops written channels_last when a transpose into channels first feeds them and their one use
# is the transpose back (the pair a channels_last source has around them).
LAYOUT_OPS = (
    "conv",
    "conv_transpose",
    "max_pool",
    "avg_pool",
    "batch_norm",
    "adaptive_avg_pool",
    "resize",
)
# ops written with several outputs (a tuple assignment)
MULTI = ("split", "lstm", "gru", "rnn", "topk")
_FOLDABLE = (
    "transpose",
    "reshape",
    "constant",
    "cast",
    "identity",
    "flatten",
    "unsqueeze",
    "squeeze",
    "concat",
    "split",
)
_RESERVED = {
    "keras",
    "layers",
    "ops",
    "np",
    "os",
    "build",
    "load",
    "set_weights",
    "model",
    "HERE",
    "WEIGHTS",
}


def _identifier(name: str) -> str:
    s = re.sub(r"\W", "_", name or "v")
    if not s or s[0].isdigit():
        s = f"v_{s}"
    if keyword.iskeyword(s) or s in dir(builtins) or s in _RESERVED:
        s = f"{s}_"
    return s


class Namespace:
    """Unique names after sanitizing, with the mapping back to the source name."""

    def __init__(self, clean) -> None:
        self.clean = clean
        self.taken: set[str] = set()
        self.source: dict[str, str] = {}

    def fresh(self, name: str) -> str:
        base = self.clean(name)
        out, k = base, 1
        while out in self.taken:
            out = f"{base}_{k}"
            k += 1
        self.taken.add(out)
        self.source[out] = name
        return out


def _layer_name(name: str) -> str:
    return re.sub(r"\W", "_", name) or "layer"


class Emit:
    """What an emitter writes with (see codegen.keras.registry)."""

    def __init__(self, cg: KerasCodegen, node: Node) -> None:
        self.cg = cg
        self.node = node
        self._layer: str | None = None
        self.parts: tuple[str, list[str]] | None = None  # the last layer's head and arguments
        self.channels_last = id(node) in cg.nhwc

    @property
    def layer_name(self) -> str:
        """The Keras layer name of this node (claimed on first use)."""
        if self._layer is None:
            self._layer = self.cg.layer_name(self.node)
        return self._layer

    def type(self, i: int) -> TensorType:
        """Input ``i``'s type (channels first for a layout op, as the canonical op reads it)."""
        v = self.node.inputs[i]
        assert v is not None
        return v.type

    def x(self, i: int = 0) -> str:
        """Input ``i`` as the layer reads it: for a node written in its source layout
        (channels_last, or an attention's [batch, length, heads, dim]), the tensor before the
        transpose that made the canonical layout."""
        v = self.node.inputs[i]
        if self.channels_last and v is not None and v.producer is not None:
            src = v.producer.inputs[0]
            if src is not None and id(src) in self.cg.var:
                return self.cg.var[id(src)]
        return self.arg(i)

    @property
    def data_format(self) -> str:
        return "channels_last" if self.channels_last else "channels_first"

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and self.node.inputs[i] is not None

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i``'s values when it is computed from weights alone, else None."""
        v = self.node.inputs[i] if i < len(self.node.inputs) else None
        return None if v is None else self.cg.folded.get(id(v))

    def symbolic(self, i: int) -> bool:
        """Whether input ``i`` is a tensor of the functional graph (computed from the model's
        inputs or a ``SourceWeight``), not a value Keras computes once when build() runs.
        Inside a block's ``call`` every value is computed each time it runs."""
        v = self.node.inputs[i] if i < len(self.node.inputs) else None
        return v is not None and (id(v) in self.cg.symbolic or self.cg.block is not None)

    def weight(self, i: int, what: str) -> np.ndarray:
        a = self.const(i)
        if a is None:
            raise Unsupported(f"{what} computed at run time (Keras layers hold it as a weight)")
        return a

    def arg(self, i: int) -> str:
        """The expression of input ``i``: its variable, or a literal of a small constant."""
        v = self.node.inputs[i]
        assert v is not None
        name = self.cg.var.get(id(v))
        if name is not None:
            return name
        a = self.cg.folded.get(id(v))
        if a is None:
            raise Unsupported(f"input {i} ({v.name!r}) is not available")
        if a.size > LITERAL_LIMIT or v.name in self.cg.graph.weights:
            return self.cg.weight_operand(v, a)
        text = f"np.array({_as_list(a)!r}, dtype={str(a.dtype)!r})"
        if len(text) <= 48:
            return text
        # a longer literal gets its own lines (broken inside its brackets)
        import pprint

        body = pprint.pformat(_as_list(a), width=80).splitlines()
        name = self.cg.values.fresh(f"{v.name or 'const'}_value")
        self.cg.lines.append(f"    {name} = np.array(")
        self.cg.lines.extend(f"        {line}" for line in body)
        self.cg.lines[-1] += ","
        self.cg.lines.append(f"        dtype={str(a.dtype)!r},")
        self.cg.lines.append("    )")
        return name

    def layer(
        self, cls: str, *args: Any, weights: list[np.ndarray] | None = None, **kw: Any
    ) -> str:
        """``layers.Cls(args..., kw..., name=...)``: every value through ``repr()``."""
        parts = [repr(a) for a in args]
        parts += [f"{k}={v!r}" for k, v in kw.items()]
        parts.append(f"name={self.layer_name!r}")
        if weights and not any(self.symbolic(i) for i in range(len(self.node.inputs))):
            raise Unsupported(
                f"layers.{cls} holding weights on values computed without the model's inputs "
                "(Keras runs it once in build(), before its weights are set)"
            )
        arrays = [np.array(w, order="C") for w in weights or ()]  # 0-d stays 0-d
        text = f"layers.{cls}({', '.join(parts)})"
        self.parts = (text, [f"layers.{cls}(", *parts])
        if self.cg.block is not None:  # made in the block's __init__, called in its call
            self.parts = None
            return self.cg.block.sublayer(self.layer_name, text, [f"layers.{cls}(", *parts], arrays)
        if arrays:
            self.cg.weights[self.layer_name] = arrays
        return text

    def sized(
        self, op: str, dims: list, x: str | None = None, value_dtype: str = "", part: str = ""
    ) -> str:
        """``Sized(op, shape)(x, inputs...)``: ``ops.<op>`` with sizes known when the model
        runs (a functional model's tensors have None for them while it is built); ``part``
        names a layer besides the node's own (``<layer>_<part>``). ``dims``
        are graph dims; each symbolic one is written as the sum of terms over the sizes of the
        model's inputs it is made of (``batch*seq_len``: [[1, [[1, 0], [1, 1]]]])."""
        tensors = [x] if x is not None else []
        entries = [self.cg.size_entry(d, tensors) for d in dims]
        if not tensors:
            tensors = [self.cg.inputs[0]]
        self.cg.uses_sized_layer = True
        args = [repr(op), repr(entries)]
        if value_dtype:
            args.append(f"value_dtype={value_dtype!r}")
        name = self.cg.layers.fresh(f"{self.layer_name}_{part}") if part else self.layer_name
        args.append(f"name={name!r}")
        head = f"Sized({', '.join(args)})"
        self.parts = (head, ["Sized(", *args])
        if self.cg.block is not None:
            self.parts = None
            head = self.cg.block.sublayer(name, head, ["Sized(", *args], [])
        return f"{head}({', '.join(tensors)})"

    def stmt(self, expr: str, hint: str = "") -> str:
        """Write ``name = expr`` before the node's line; returns the name."""
        if self.cg.block is not None and self.node.name and hint.startswith(self.node.name):
            hint = self.cg.block.local(self.node, False) + hint[len(self.node.name) :]
        name = self.cg.values.fresh(hint or f"{self.node.name or 't'}_pre")
        self.cg.lines.extend(_wrap(f"    {name} = ", expr, self.parts))
        return name


class KerasCodegen:
    """Writes ``build()`` (the functional model) and ``load()`` for one graph."""

    def __init__(
        self, graph: Graph, emitters: EmitterRegistry = EMITTERS, *, flat: bool = False
    ) -> None:
        from msc.ops.decompose import decompose
        from msc.ops.decompose import registry as rules

        self.source = graph
        lower = [n for n in graph.nodes if n.op not in emitters and n.op in rules]
        self.graph = (
            decompose(graph, lambda n: n.op not in emitters and n.op in rules) if lower else graph
        )
        self.emitters = emitters
        self.values = Namespace(_identifier)
        self.layers = Namespace(_layer_name)
        self.var: dict[int, str] = {}
        self.symbolic: set[int] = set()  # ids of values that are tensors of the functional graph
        self.folded: dict[int, np.ndarray] = {}
        self.weights: dict[str, list[np.ndarray]] = {}
        self.lines: list[str] = []
        self.unsupported: list[UnsupportedOp] = []
        self._claimed: dict[int, str] = {}
        self.inputs: list[str] = []  # the graph inputs' variables
        self.uses_weight_layer = False
        self.uses_sized_layer = False
        self.symbols: dict[str, tuple[str, int]] = {}  # symbol -> (input variable, axis)
        self.sizes: set[int] = set()  # ids of values that are sizes (not written: see size_entry)
        self.poisoned: set[int] = set()  # ids of values downstream of an unsupported node
        self.nhwc: set[int] = set()  # ids of layout nodes written channels_last
        self.skip: set[int] = set()  # ids of transposes those nodes absorb
        self.flat = flat
        self.block: Any = None  # the BlockBody being written (codegen.keras.blocks), if any
        self.classes: list[str] = []  # the source of the blocks' Layer classes

    # ------------------------------------------------------------ names
    def layer_name(self, node: Node) -> str:
        got = self._claimed.get(id(node))
        if got is None and self.block is not None:  # named within the block, as in its source
            got = self.layers.fresh(self.block.layer(node, node.op in WEIGHTED))
            self._claimed[id(node)] = got
        if got is None:
            name = node.name or node.op
            if node.provenance.counted(name):
                # An exporter's counter (add_1) can be the very name Keras gives an op it
                # builds itself (ops.add), and Keras refuses two: under its module's path.
                name = f"{node.provenance.module or self.graph.name or 'model'}.{name}"
            got = self.layers.fresh(name)
            self._claimed[id(node)] = got
        return got

    # ------------------------------------------------------------ folding
    def _fold(self, node: Node) -> bool:
        if node.op not in _FOLDABLE or (len(node.outputs) != 1 and node.op != "split"):
            return False
        ins = [v for v in node.inputs if v is not None]
        if node.op != "constant" and not all(id(v) in self.folded for v in ins):
            return False
        a = node.attrs
        try:
            if node.op == "constant":
                out = np.asarray(a["value"])
            elif node.op == "transpose":
                out = np.transpose(self.folded[id(ins[0])], a["perm"])
            elif node.op in ("reshape", "flatten"):
                shape = node.outputs[0].type.shape
                if shape is None or not all(isinstance(d, int) for d in shape):
                    return False
                out = self.folded[id(ins[0])].reshape(shape)
            elif node.op == "cast":
                out = self.folded[id(ins[0])].astype(a["to"].to_numpy())
            elif node.op == "unsqueeze":
                if a.get("axes") is None or len(ins) > 1:
                    return False
                shape = node.outputs[0].type.shape
                out = self.folded[id(ins[0])].reshape(shape)
            elif node.op == "squeeze":
                if len(ins) > 1:
                    return False
                out = self.folded[id(ins[0])].reshape(node.outputs[0].type.shape)
            elif node.op == "concat":
                out = np.concatenate([self.folded[id(v)] for v in ins], axis=int(a["axis"]))
            elif node.op == "split":
                if a.get("sizes") is None or len(ins) > 1:
                    return False
                edges = np.cumsum([int(s) for s in a["sizes"]])[:-1]
                pieces = np.split(self.folded[id(ins[0])], edges, axis=int(a["axis"]))
                for o, p in zip(node.outputs, pieces):
                    self.folded[id(o)] = np.asarray(p)
                return True
            else:
                out = self.folded[id(ins[0])]
        except (KeyError, ValueError, TypeError):
            return False
        self.folded[id(node.outputs[0])] = np.asarray(out)
        return True

    def weight_operand(self, v: Value, a: np.ndarray) -> str:
        """A weight used as a plain operand: a ``SourceWeight`` layer holding it (written
        once per weight; Keras' functional API makes it from the first input, which it
        ignores)."""
        name = self.var.get(id(v))
        if name is not None:
            return name
        if self.block is not None:
            name = self.block.own_weight(v, a)
            self.var[id(v)] = name
            return name
        if not self.inputs:
            raise Unsupported("a weight operand in a graph without inputs")
        self.uses_weight_layer = True
        name = self.values.fresh(v.name or "weight")
        lname = self.layers.fresh(v.name or "weight")
        self.weights[lname] = [np.array(a, order="C")]  # 0-d stays 0-d
        shape = tuple(int(d) for d in a.shape)
        line = (
            f"    {name} = SourceWeight({shape!r}, {a.dtype.name!r}, name={lname!r})"
            f"({self.inputs[0]})"
        )
        if len(line) >= 100:  # its arguments on their own line
            args = f"{shape!r}, {a.dtype.name!r}, name={lname!r}"
            line = f"    {name} = SourceWeight(\n        {args}\n    )({self.inputs[0]})"
        self.lines.append(line)
        self.var[id(v)] = name
        self.symbolic.add(id(v))
        return name

    # ------------------------------------------------------------ sizes
    def size_entry(self, d: Any, tensors: list[str]) -> Any:
        """A dim as ``Sized`` takes it: an int, or a sum of terms [c, [[tensor, axis], ...]]
        (c times the sizes of those axes of the tensors the layer is called with, the model's
        inputs that hold each symbol appended to ``tensors``)."""
        if isinstance(d, int) and not isinstance(d, bool):
            return d
        terms = (
            d.terms if isinstance(d, SymExpr) else (((d,), 1),) if isinstance(d, SymDim) else None
        )
        if terms is None:
            raise Unsupported(f"a size {d} that is not a sum of products of the inputs' sizes")
        out = []
        for mono, c in terms:
            axes = []
            for atom in mono:
                where = self.symbols.get(atom.name) if isinstance(atom, SymDim) else None
                if where is None:
                    raise Unsupported(f"a size {d} not made of the inputs' sizes")
                if where[0] not in tensors:
                    tensors.append(where[0])
                axes.append([tensors.index(where[0]), where[1]])
            out.append([int(c), axes])
        return out

    def _is_size(self, node: Node) -> bool:
        """``node`` computes a size (``shape`` of a tensor, or integer arithmetic, reshape and
        concat of sizes and constants): not written; its uses read sizes from the types."""
        if node.op == "shape":
            return True
        if node.op == "constant" or len(node.outputs) != 1:
            return False
        t = node.outputs[0].type
        if not isinstance(t, TensorType) or not t.dtype.is_integer or t.shape is None:
            return False
        if len(t.shape) > 1 or not all(isinstance(d, int) for d in t.shape):
            return False  # sizes are a scalar or a vector of a known length (not a range)
        ins = [v for v in node.inputs if v is not None]
        return any(id(v) in self.sizes for v in ins) and all(
            id(v) in self.sizes or id(v) in self.folded for v in ins
        )

    # ------------------------------------------------------------ layout
    def _layout(self) -> None:
        """Find the layout nodes between a transpose to channels first and one back."""
        for n in self.graph.nodes:
            if n.op not in LAYOUT_OPS or len(n.outputs) != 1 or n.inputs[0] is None:
                continue
            x, y = n.inputs[0], n.outputs[0]
            r = y.type.rank if isinstance(y.type, TensorType) and y.type.shape is not None else 0
            if r < 3:
                continue
            to_first = [0, r - 1, *range(1, r - 1)]
            to_last = [0, *range(2, r), 1]
            pre = x.producer
            if pre is None or pre.op != "transpose" or list(pre.attrs["perm"]) != to_first:
                continue
            uses = y.uses
            if len(uses) != 1 or any(y is o for o in self.graph.outputs):
                continue
            post = uses[0][0]
            if post.op != "transpose" or list(post.attrs["perm"]) != to_last:
                continue
            self.nhwc.add(id(n))
            self.skip.add(id(post))
        # attention between transposes from and back to [batch, length, heads, dim]
        blhd = [0, 2, 1, 3]
        for n in self.graph.nodes:
            if n.op != "attention" or any(n.inputs[3:]) or len(n.outputs[0].uses) != 1:
                continue
            pres = [v.producer if v is not None else None for v in n.inputs[:3]]
            post = n.outputs[0].uses[0][0]
            if (
                all(p is not None and p.op == "transpose" and list(p.attrs["perm"]) == blhd
                    for p in pres)
                and post.op == "transpose" and list(post.attrs["perm"]) == blhd
                and not any(n.outputs[0] is o for o in self.graph.outputs)
            ):  # fmt: skip
                self.nhwc.add(id(n))
                self.skip.add(id(post))
        # a forward transpose every use of which is absorbed is not written at all
        for n in self.graph.nodes:
            if n.op == "transpose" and n.outputs[0].uses:
                out = n.outputs[0]
                if all(
                    id(u) in self.nhwc and (i == 0 or u.op == "attention") for u, i in out.uses
                ) and not any(out is o for o in self.graph.outputs):
                    self.skip.add(id(n))

    # ------------------------------------------------------------ the walk
    def generate(self) -> str:
        g = self.graph
        for w in g.weights.values():
            if isinstance(w, Weight) and w.has_data:
                self.folded[id(w)] = np.asarray(w.numpy())
        self._layout()
        # layers holding weights claim their source names first
        for n in g.nodes:
            if n.op in WEIGHTED and n.name:
                self.layer_name(n)
        ins = []
        for v in g.inputs:
            name = self.values.fresh(v.name or "input")
            self.var[id(v)] = name
            self.symbolic.add(id(v))
            ins.append(name)
            self.inputs.append(name)
            self.lines.append(f"    {name} = {self._input(v)}")
            for axis, d in enumerate(v.type.shape or ()):
                if isinstance(d, SymDim) and d.name not in self.symbols:
                    self.symbols[d.name] = (name, axis)
        if self.flat:
            self.walk(g.nodes)
        else:
            from codegen.keras.blocks import BlockClasses

            BlockClasses(self).walk(g.nodes)
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what="graph (for Keras)")
        outs = []
        for v in g.outputs:
            name = self.var.get(id(v))
            if name is None:
                raise UnsupportedOpsError(
                    [UnsupportedOp("output", v.name or "", "", "an output that is a weight")],
                    what="graph (for Keras)",
                )
            outs.append(name)
        return self._module(ins, outs)

    def walk(self, nodes: list[Node]) -> None:
        """Write ``nodes`` one by one (folded, sizes, absorbed transposes not written)."""
        for n in nodes:
            self.node(n)

    def node(self, n: Node) -> None:
        if self._fold(n):
            return
        if self._is_size(n):
            self.sizes.update(id(o) for o in n.outputs)
            return
        if any(v is not None and id(v) in self.poisoned for v in n.inputs):
            self.poisoned.update(id(o) for o in n.outputs)
            return
        if id(n) in self.skip:
            self._absorbed(n)
            return
        self._emit(n)

    def _input(self, v: Value) -> str:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None or not t.shape:
            raise UnsupportedOpsError(
                [UnsupportedOp("input", v.name or "", "", f"type {t} (Keras needs a batch axis)")],
                what="graph (for Keras)",
            )
        dims = tuple(d if isinstance(d, int) else None for d in t.shape)
        kw = f"shape={dims[1:]!r}"
        if dims[0] is not None:
            kw += f", batch_size={dims[0]!r}"
        name = _layer_name(v.name or "input")
        return f"keras.Input({kw}, dtype={t.dtype.to_numpy().name!r}, name={name!r})"

    def _absorbed(self, node: Node) -> None:
        """A transpose written as part of its neighbour: a back transpose's output is the
        channels_last node's (renamed after the back transpose's value); a forward one has
        no variable of its own."""
        x = node.inputs[0]
        if x is not None and x.producer is not None and id(x.producer) in self.nhwc:
            name = self.var.pop(id(x), None)
            if name is not None:
                self.var[id(node.outputs[0])] = name
        if x is not None and id(x) in self.symbolic:
            self.symbolic.add(id(node.outputs[0]))

    def _emit(self, node: Node) -> None:
        if any(v is not None and id(v) in self.poisoned for v in node.inputs):
            self.poisoned.update(id(o) for o in node.outputs)
            return
        fn = self.emitters.get(node.op)
        mark = len(self.lines)
        try:
            if fn is None:
                raise Unsupported("no emitter")
            if len(node.outputs) != 1 and node.op not in MULTI:
                raise Unsupported(f"{len(node.outputs)} outputs")
            e = Emit(self, node)
            expr = fn(e, node)
        except Unsupported as e:
            del self.lines[mark:]
            self.poisoned.update(id(o) for o in node.outputs)
            self.unsupported.append(UnsupportedOp(node.op, node.name or "", "", str(e)))
            return
        if any(v is not None and id(v) in self.symbolic for v in node.inputs):
            self.symbolic.update(id(o) for o in node.outputs)
        if len(node.outputs) > 1:
            names = []
            for out in node.outputs:
                vname = out.name if out.name and not out.name.isdigit() else node.name
                if self.block is not None:
                    vname = self.block.local(node, False)
                names.append(self.values.fresh(vname or "t"))
                self.var[id(out)] = names[-1]
            if isinstance(expr, list):  # one expression per output
                for name, one in zip(names, expr):
                    self.lines.extend(_wrap(f"    {name} = ", one, None))
            else:
                self.lines.extend(_wrap(f"    {', '.join(names)} = ", expr, e.parts))
            return
        out = node.outputs[0]
        post = out.uses[0][0] if id(node) in self.nhwc else None
        vname = out.name
        if post is not None:  # the value after the transpose back, when one layer made both
            vname = post.outputs[0].name if post.name == node.name else node.name
        if not vname or vname.isdigit():  # a positional name: the node's source name reads better
            vname = node.name or vname
        if self.block is not None:  # by its module and role in the block: the same in each
            vname = self.block.local(node, node.op in WEIGHTED)
        name = self.values.fresh(vname or "t")
        self.var[id(out)] = name
        self.lines.extend(_wrap(f"    {name} = ", expr, e.parts))

    def _module(self, ins: list[str], outs: list[str]) -> str:
        src_names = ", ".join(f"{k}={v!r}" for k, v in [("graph", self.source.name)])
        i = ins[0] if len(ins) == 1 else f"[{', '.join(ins)}]"
        o = outs[0] if len(outs) == 1 else f"[{', '.join(outs)}]"
        head = [
            f"{SOURCES['keras']}{src_names}).",
            "",
            "build() makes the model; load(path) also sets its weights from model.weights.npz",
            "(arrays named <layer name>/<index>, in the order of layer.weights). It runs on every",
            'Keras backend."""',
            "",
            "import os",
            "",
            "import keras",
            "import numpy as np",
            "from keras import layers, ops",
            "",
            "HERE = os.path.dirname(os.path.abspath(__file__))",
            'WEIGHTS = os.path.join(HERE, "model.weights.npz")',
            "",
            "",
            "def build():",
            '    """The model, its weights not set."""',
        ]
        if self.uses_weight_layer:
            head[-3:-3] = [
                "",
                '@keras.saving.register_keras_serializable(package="msc")',
                "class SourceWeight(keras.layers.Layer):",
                '    """A weight of the source model used as an operand, set by load() (the',
                "    tensor it is called on only places it in the functional graph). Registered",
                '    as "msc>SourceWeight": msc.from_keras reads a .keras file holding it."""',
                "",
                "    def __init__(self, shape, value_dtype, **kwargs):",
                "        super().__init__(**kwargs)",
                "        self.value = self.add_weight(",
                "            shape=shape,",
                "            dtype=value_dtype,",
                '            initializer="zeros",',
                "            trainable=False,",
                '            name="value",',
                "        )",
                "",
                "    def call(self, x):",
                "        return ops.convert_to_tensor(self.value)",
                "",
            ]
        if self.uses_sized_layer:
            head[-3:-3] = SIZED_LAYER
        for cls in self.classes:
            head[-3:-3] = ["", *cls.splitlines(), ""]
        ret = f"    return keras.Model({i}, {o}, name={_layer_name(self.source.name)!r})"
        if len(ret) >= 100:  # one argument a line
            name = _layer_name(self.source.name)
            ret = "\n".join(["    return keras.Model(", f"        {i},", f"        {o},",
                             f"        name={name!r},", "    )"])  # fmt: skip
        tail = [
            ret,
            "",
            "",
            "def set_weights(model, arrays):",
            '    """Set each layer\'s weights from ``arrays[f"{layer.name}/{i}"]``."""',
            "    for layer in model.layers:",
            "        n = len(layer.weights)",
            "        if n:",
            '            layer.set_weights([arrays[f"{layer.name}/{i}"] for i in range(n)])',
            "",
            "",
            "def load(path=WEIGHTS):",
            '    """The model with its weights (an .npz read without pickle)."""',
            "    model = build()",
            "    with np.load(path, allow_pickle=False) as arrays:",
            "        set_weights(model, arrays)",
            "    return model",
            "",
        ]
        return "\n".join(head + self.lines + tail)

    def arrays(self) -> dict[str, np.ndarray]:
        """The weights file's arrays: ``<layer name>/<index>``."""
        out = {}
        for layer, ws in self.weights.items():
            for k, w in enumerate(ws):
                out[f"{layer}/{k}"] = w
        return out


# The layer written for ops whose sizes are known only when the model runs (a symbolic batch or
# sequence): a functional model's tensors have None for such sizes while it is built, so
# ops.shape is read inside a layer's call. Registered as "msc>Sized".
SIZED_LAYER = [
    "",
    '@keras.saving.register_keras_serializable(package="msc")',
    "class Sized(keras.layers.Layer):",
    '    """ops.reshape, broadcast_to, slice, arange or a size, read when the model runs. Each',
    "    entry of ``shape`` is an int, or a sum of terms [c, [[i, axis], ...]]: c times the sizes",
    "    of those axes of the tensors the layer is called with (``x`` is tensor 0; for arange,",
    "    shape is [start, stop, step] and the tensors only give sizes; size is shape's one",
    "    entry as a 0-d tensor). Registered as",
    '    "msc>Sized": msc.from_keras reads a .keras file holding it."""',
    "",
    "    def __init__(self, op, shape, value_dtype=None, **kwargs):",
    "        super().__init__(**kwargs)",
    "        self.op = op",
    "        self.shape = shape",
    "        self.value_dtype = value_dtype",
    "",
    "    def call(self, x, *others):",
    "        tensors = (x, *others)",
    "        shape = []",
    "        for size in self.shape:",
    "            if isinstance(size, list):  # a sum of products of sizes",
    "                total = 0",
    "                for c, axes in size:",
    "                    term = c",
    "                    for i, axis in axes:",
    "                        term = term * ops.shape(tensors[i])[axis]",
    "                    total = total + term",
    "                size = total",
    "            shape.append(size)",
    '        if self.op == "arange":',
    "            return ops.arange(*shape, dtype=self.value_dtype)",
    '        if self.op == "size":',
    "            return ops.convert_to_tensor(shape[0], dtype=self.value_dtype)",
    '        if self.op == "slice":  # shape: the starts, then the sizes',
    "            return ops.slice(x, shape[: len(shape) // 2], shape[len(shape) // 2 :])",
    '        if self.op == "broadcast_to":',
    "            return ops.broadcast_to(x, shape)",
    "        return ops.reshape(x, shape)",
    "",
    "    def compute_output_spec(self, x, *others):",
    "        # while the model is built: the sizes read at run time are None",
    "        shape = [size if isinstance(size, int) else None for size in self.shape]",
    '        if self.op == "slice":',
    "            shape = shape[len(shape) // 2 :]",
    '        if self.op == "arange":',
    "            shape = [None]",
    '        if self.op == "size":',
    "            shape = []",
    '        dtype = self.value_dtype if self.op in ("arange", "size") else x.dtype',
    "        return keras.KerasTensor(shape, dtype=dtype)",
    "",
    "    def get_config(self):",
    "        config = super().get_config()",
    "        config.update(op=self.op, shape=self.shape, value_dtype=self.value_dtype)",
    "        return config",
    "",
]


def _wrap(lead: str, expr: str, parts: tuple[str, list[str]] | None) -> list[str]:
    """``lead + expr`` as lines under 100 characters: a long layer constructor gets one
    argument a line."""
    line = lead + expr
    if len(line) < 100:
        return [line]
    close = lead[: len(lead) - len(lead.lstrip())]  # the statement's indent
    inner = close + "    "
    if parts is not None and expr.startswith(parts[0]):
        head, args = parts[1][0], parts[1][1:]
        rest = expr[len(parts[0]) :]
        return [lead + head, *(f"{inner}{a}," for a in args), f"{close}){rest}"]
    import ast

    try:
        call = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return [line]
    if isinstance(call, ast.BinOp) and isinstance(call.op, ast.Add):  # a sum: a term a line
        terms: list[ast.expr] = []
        while isinstance(call, ast.BinOp) and isinstance(call.op, ast.Add):
            terms.insert(0, call.right)
            call = call.left
        terms.insert(0, call)
        body = [
            f"{inner}{ast.unparse(terms[0])}",
            *(f"{inner}+ {ast.unparse(t)}" for t in terms[1:]),
        ]
        return [f"{lead}(", *body, f"{close})"]
    if not isinstance(call, ast.Call):
        return [line]
    args = [ast.unparse(a) for a in call.args]
    args += [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords if k.arg is not None]
    return [f"{lead}{ast.unparse(call.func)}(", *(f"{inner}{a}," for a in args), f"{close})"]


def dtype_name(dt: DType) -> str:
    return dt.to_numpy().name


def _as_list(a: np.ndarray) -> Any:
    """``a.tolist()``, a float32 / float16 element as the shortest decimal that rounds back
    to it (``1e-06``, not ``9.999999974752427e-07``)."""

    def short(x: Any) -> Any:
        return [short(y) for y in x] if isinstance(x, list) else shortest(x, a.dtype)

    return short(a.tolist()) if a.dtype in (np.float32, np.float16) else a.tolist()
