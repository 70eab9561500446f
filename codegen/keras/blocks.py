"""The source's module hierarchy in Keras: one ``keras.layers.Layer`` subclass per repeated
block type, instantiated per block, called from the functional ``build()``.

# NOTE: invariants
# - The blocks are ``msc.ir.blocks.partition``'s. A block type is a class when the top level
#   holds two or more blocks of its key (the same computation up to their weights, and no
#   enclosing block already a class); other blocks are written inline, their repeated
#   children as classes. A class body is flat: blocks inside it are written inline.
# - A class is written from its first block, every block's body emitted by the same emitters
#   as the flat model, in a scope of its own (``BlockBody``): sublayers made in ``__init__``
#   (``self.attention_self_query = layers.Dense(...)``) named by their module path under the
#   block, values in ``call`` by their module and role, weights the block reads as operands as
#   its own ``add_weight`` variables. A block whose body reads differently (a value only one
#   instance has as a literal) is written inline: sharing a class is never a guess.
# - Weights: an instance's arrays are ``<instance name>/<i>`` in the order of its
#   ``layer.weights`` (Keras: its own variables, then each sublayer's, in the order __init__
#   makes them), so ``set_weights`` is the flat model's.
# - Each block is called with the values it reads that the functional graph holds; a block
#   none of whose inputs is a tensor of that graph (Keras would run it once in build()), one
#   whose body cannot be written, or whose layout pair (a channels_last node and its
#   transposes) crosses its boundary is written inline: falling back is always right.
# - A run of instances where each feeds the next (and nothing else reads it) is a list and a
#   loop, as the source's ModuleList loop: ``for layer in encoder_layer: x = layer(x, mask)``.
# - The flat model (``flat=True``) writes no class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from msc.errors import Unsupported
from msc.ir.blocks import Block, partition
from msc.ir.graph import Node, Value, Weight
from msc.ir.types import SymDim, TensorType

if TYPE_CHECKING:
    from codegen.keras.model import KerasCodegen

__all__ = ["BlockClasses", "BlockBody"]

# Attributes a Keras layer has on some backend (torch's nn.Module's too): never a sublayer's.
_LAYER_ATTRS = frozenset(
    """T_destination add_loss add_metric add_module add_variable add_weight apply bfloat16
    buffers build build_from_config built call call_super_init children compile compute_dtype
    compute_mask compute_output_shape compute_output_spec count_params cpu cuda double dtype
    dtype_policy dump_patches eval extra_repr float forward from_config get_buffer
    get_build_config get_config get_extra_state get_parameter get_submodule get_weights half
    input input_dtype input_spec ipu load_own_variables load_state_dict losses metrics
    metrics_variables modules mtia name named_buffers named_children named_modules
    named_parameters non_trainable_variables non_trainable_weights output parameters path
    quantization_mode quantize quantized_build quantized_call register_backward_hook
    register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
    register_parameter register_state_dict_post_hook register_state_dict_pre_hook
    rematerialized_call requires_grad_ save_own_variables set_extra_state set_submodule
    set_weights share_memory state_dict stateless_call supports_masking symbolic_call to
    to_empty torch_params train trainable trainable_variables trainable_weights training type
    variable_dtype variables weights xpu zero_grad layers self""".split()
)


def _attr(name: str) -> str:
    from codegen.keras.model import _identifier

    s = _identifier(name)
    return f"{s}_" if s in _LAYER_ATTRS else s


def _counter_free(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


class BlockBody:
    """The scope one block's class is written in (see the module NOTE)."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.init: list[str] = []  # __init__'s lines after super().__init__, 8 spaces in
        self.own: list[np.ndarray] = []  # add_weight variables, in order
        self.sub: list[np.ndarray] = []  # the sublayers' weights, in order

    def local(self, node: Node, weighted: bool) -> str:
        """A name for ``node`` the same in every instance: a weighted layer's module path
        under the block (``attention.self.query``), else the op the source counted
        (``layer_norm``) or msc's op."""
        module, path = node.provenance.module, self.block.path
        rel = module[len(path) + 1 :] if module.startswith(path + ".") else ""
        if weighted and rel:
            return rel
        name = node.name or ""
        if name and node.provenance.counted(name):
            return _counter_free(name)
        return node.op

    def layer(self, node: Node, weighted: bool) -> str:
        """The name of ``node``'s sublayer: a weighted one's module path under the block; any
        other's under its module's path, or ``<op>_layer`` (never the name Keras gives an op
        it builds itself, ``add``: a functional model of the block's call refuses two)."""
        module, path = node.provenance.module, self.block.path
        rel = module[len(path) + 1 :] if module.startswith(path + ".") else ""
        base = self.local(node, False)
        if weighted and rel:
            return rel
        return f"{rel}.{base}" if rel else f"{base}_layer"

    def sublayer(self, name: str, text: str, parts: list[str], arrays: list[np.ndarray]) -> str:
        """``self.<name> = text`` in __init__ (a long one an argument a line); its call's
        expression."""
        lead = f"        self.{name} = "
        if len(lead + text) < 100:
            self.init.append(lead + text)
        else:  # one argument a line
            args = [f"            {a}," for a in parts[1:]]
            self.init.extend([lead + parts[0], *args, "        )"])
        self.sub.extend(arrays)
        return f"self.{name}"

    def own_weight(self, v: Value, a: np.ndarray) -> str:
        raise Unsupported("set by own_weight_in")  # replaced per codegen (see BlockClasses)


@dataclass
class _Written:
    """One instance's body as written: the class text (without its name) and its arrays."""

    params: list[Value]
    names: list[str]  # the parameters' names in ``call``
    outputs: list[Value]
    text: list[str]
    arrays: list[np.ndarray]
    sized: bool


@dataclass
class _Class:
    name: str
    text: list[str]
    names: list[str]
    instances: list[Block] = field(default_factory=list)


class BlockClasses:
    """Writes a codegen's top level with its repeated blocks as Layer classes."""

    def __init__(self, cg: KerasCodegen) -> None:
        self.cg = cg
        self.part = partition(cg.graph)
        self.classes: dict[str, list[_Class]] = {}
        chosen = self._repeated()
        self.starts: dict[Node, Block] = {}
        for b in self.part.blocks:
            if b.key in chosen and not self._has_chosen_parent(b, chosen):
                self.starts[b.nodes[0]] = b
        self.order = sorted(self.starts.values(), key=lambda b: b.start)

    def _has_chosen_parent(self, b: Block, chosen: set[str]) -> bool:
        p = b.parent
        while p is not None:
            if p.key in chosen:
                return True
            p = p.parent
        return False

    def _repeated(self) -> set[str]:
        """Keys of which the top level (outside every class) holds two or more blocks,
        decided parents first."""
        chosen: set[str] = set()
        for depth in sorted({b.path.count(".") for b in self.part.blocks}):
            count: dict[str, int] = {}
            for b in self.part.blocks:
                if b.path.count(".") == depth and not self._has_chosen_parent(b, chosen):
                    if not b.key.startswith("control:"):
                        count[b.key] = count.get(b.key, 0) + 1
            chosen |= {k for k, n in count.items() if n > 1}
        return chosen

    # ------------------------------------------------------------ the walk
    def walk(self, nodes: list[Node]) -> None:
        done: set[Node] = set()
        for i, n in enumerate(nodes):
            if n in done:
                continue
            b = self.starts.get(n)
            if b is not None:
                run = self._run(b, nodes, i)
                if run:
                    for blk in run:
                        done.update(blk.nodes)
                    continue
            self.cg.node(n)

    def _run(self, first: Block, nodes: list[Node], i: int) -> list[Block]:
        """Write ``first`` and the instances that follow it in a chain (a loop) as calls;
        the blocks written (none: write ``first`` inline)."""
        cg = self.cg
        w = self._written(first)
        cls = None if w is None else self._class_of(first, w)
        if cls is None:
            return []
        run, ws = [first], [w]
        pos = {n: k for k, n in enumerate(nodes)}
        while True:
            last = run[-1]
            end = pos[last.nodes[-1]]
            nxt = self._next(last, nodes, end)
            if nxt is None or self._carried(last, nxt, ws[-1]) is None:
                break
            for n in nodes[end + 1 : pos[nxt.nodes[0]]]:  # constants between them
                cg.node(n)
            out = last.outputs[0]  # named by the loop; its call's own name until then
            cg.var[id(out)], _ = f"{cls.name}_output", cg.symbolic.add(id(out))
            w2 = self._written(nxt)
            if w2 is None or self._class_of(nxt, w2) is not cls:
                break
            run.append(nxt)
            ws.append(w2)
        self._call(cls, run, ws)
        return run

    def _next(self, last: Block, nodes: list[Node], end: int) -> Block | None:
        k = end + 1
        while k < len(nodes) and nodes[k].op == "constant" and nodes[k] not in self.starts:
            k += 1
        return self.starts.get(nodes[k]) if k < len(nodes) else None

    def _carried(self, last: Block, nxt: Block, w: _Written) -> int | None:
        """The parameter of ``nxt`` that is ``last``'s one output, when ``last`` feeds only
        it and its other parameters are ``last``'s own."""
        if len(last.outputs) != 1 or nxt.key != last.key:
            return None
        out = last.outputs[0]
        mine = set(nxt.nodes)
        if any(out is o for o in self.cg.graph.outputs) or any(u not in mine for u, _ in out.uses):
            return None
        ins = [v for v in nxt.inputs if not isinstance(v, Weight)]
        prev = [v for v in last.inputs if not isinstance(v, Weight)]
        if out not in ins or len(ins) != len(prev):
            return None
        p = ins.index(out)
        if any(a is not b for k, (a, b) in enumerate(zip(ins, prev)) if k != p):
            return None
        return p

    # ------------------------------------------------------------ one instance
    def _ok_layout(self, b: Block) -> bool:
        cg, mine = self.cg, set(b.nodes)
        for n in b.nodes:
            if id(n) in cg.nhwc:
                pre = n.inputs[0].producer if n.inputs[0] is not None else None
                post = n.outputs[0].uses[0][0]
                if (pre is not None and id(pre) in cg.skip and pre not in mine) or (
                    id(post) in cg.skip and post not in mine
                ):
                    return False
            if id(n) in cg.skip:
                users = [u for u, _ in n.outputs[0].uses]
                pre = n.inputs[0].producer if n.inputs[0] is not None else None
                if not (all(u in mine for u in users) or pre in mine):
                    return False
        return all(v.producer is None or id(v.producer) not in cg.skip for v in b.inputs)

    def _written(self, b: Block) -> _Written | None:
        """``b``'s body written in a scope of its own; None when it cannot be (see the NOTE).
        Its parameters are named as its class's, when the class is written."""
        cg = self.cg
        if not self._ok_layout(b):
            return None
        params: list[Value] = []
        for v in b.inputs:
            if isinstance(v, Weight) or id(v) in cg.folded or id(v) in cg.sizes:
                continue
            if id(v) not in cg.var or id(v) in cg.poisoned:
                return None
            params.append(v)
        if not params or not any(id(v) in cg.symbolic for v in params):
            return None
        known = self.classes.get(b.key)
        if known and len(known[0].names) != len(params):
            return None
        from codegen.keras.model import Namespace, _identifier

        saved = {k: getattr(cg, k) for k in _SCOPE}
        body = BlockBody(b)
        body.own_weight = lambda v, a: self._own_weight(body, v, a)  # type: ignore[method-assign]
        cg.block = body
        cg.values = Namespace(lambda s: _attr(_identifier(s)))
        cg.layers = Namespace(_attr)
        cg.var, cg.symbolic, cg.lines, cg.weights, cg._claimed = {}, set(), [], {}, {}  # noqa: SLF001
        cg.unsupported, cg.poisoned, cg.symbols = [], set(saved["poisoned"]), {}
        cg.uses_sized_layer = False
        try:
            names = []
            for k, v in enumerate(params):
                base = _counter_free(saved["var"][id(v)])
                if known:
                    base = known[0].names[k]
                names.append(cg.values.fresh(base))
                cg.var[id(v)] = names[-1]
                cg.symbolic.add(id(v))
            cg.inputs = names
            for name, v in zip(names, params):
                for axis, d in enumerate(v.type.shape or () if isinstance(v.type, TensorType)
                                         else ()):  # fmt: skip
                    if isinstance(d, SymDim) and d.name not in cg.symbols:
                        cg.symbols[d.name] = (name, axis)
            cg.walk(b.nodes)
            outs = [cg.var.get(id(v)) for v in b.outputs]
            if cg.unsupported or not b.outputs or any(o is None for o in outs):
                return None
            sized = cg.uses_sized_layer
            head = [f"    def call(self, {', '.join(names)}):"]
            if len(head[0]) >= 100:  # one argument a line, as a formatter breaks it
                head = [
                    "    def call(",
                    "        self,",
                    *(f"        {n}," for n in names),
                    "    ):",
                ]
            call = [*head, *_indented(cg.lines)]
            call.append(f"        return {', '.join(outs)}")  # type: ignore[arg-type]
            init = ["    def __init__(self, **kwargs):", "        super().__init__(**kwargs)",
                    *body.init]  # fmt: skip
            text = [*init, "", *call]
            return _Written(params, names, list(b.outputs), text, body.own + body.sub, sized)
        finally:
            for k, v in saved.items():
                setattr(cg, k, v)
            cg.block = None

    def _own_weight(self, body: BlockBody, v: Value, a: np.ndarray) -> str:
        """A weight the block reads as an operand: a variable of its own, set with its
        weights (``add_weight`` in __init__)."""
        cg = self.cg
        path = body.block.path
        rel = v.name[len(path) + 1 :] if v.name and v.name.startswith(path + ".") else "weight"
        attr = cg.layers.fresh(rel)
        shape = tuple(int(d) for d in a.shape)
        body.init.extend([
            f"        self.{attr} = self.add_weight(",
            f"            shape={shape!r},",
            f"            dtype={a.dtype.name!r},",
            '            initializer="zeros",',
            "            trainable=False,",
            f"            name={attr!r},",
            "        )",
        ])  # fmt: skip
        body.own.append(np.array(a, order="C"))
        name = cg.values.fresh(rel)
        cg.lines.append(f"    {name} = ops.convert_to_tensor(self.{attr})")
        return name

    def _class_of(self, b: Block, w: _Written) -> _Class | None:
        """The class ``b`` is an instance of (made for the first of its key); None when its
        body reads otherwise than the class's."""
        from codegen.keras.model import _identifier

        got = self.classes.get(b.key)
        if got is None:
            name = self.cg.values.fresh(_identifier(b.name))
            cls = _Class(name, w.text, w.names)
            self.classes[b.key] = [cls]
            return cls
        return next((c for c in got if c.text == w.text), None)

    # ------------------------------------------------------------ the calls
    def _call(self, cls: _Class, run: list[Block], ws: list[_Written]) -> None:
        cg = self.cg
        if not cls.instances:
            self._write_class(cls, run[0])
        cls.instances.extend(run)
        if any(w.sized for w in ws):
            cg.uses_sized_layer = True
        names = [cg.layers.fresh(b.path) for b in run]
        for name, w in zip(names, ws):
            cg.weights[name] = w.arrays
        w0 = ws[0]
        args = [cg.var[id(v)] for v in w0.params]
        if len(run) == 1:
            outs = [cg.values.fresh(_out_name(run[0], v)) for v in w0.outputs]
            for v, o in zip(w0.outputs, outs):
                cg.var[id(v)] = o
                cg.symbolic.add(id(v))
            lead = f"    {', '.join(outs)} = "
            cg.lines.extend(_call_lines(lead, f"{cls.name}(name={names[0]!r})", args))
            return
        p = ws[1].params.index(run[0].outputs[0])
        start = w0.params[p]
        others = sum(u not in set(run[0].nodes) for u, _ in start.uses)
        carried = args[p]
        if others or any(start is o for o in cg.graph.outputs):  # still read after the loop
            carried = cg.values.fresh(_counter_free(args[p]))
            cg.lines.append(f"    {carried} = {args[p]}")
        args[p] = carried
        lst = cg.values.fresh(_identifier_path(run[0].path.rpartition(".")[0] or cls.name))
        item = cg.values.fresh("layer")
        cg.lines.extend(_instances(lst, cls.name, names))
        cg.lines.append(f"    for {item} in {lst}:")
        cg.lines.extend("    " + line for line in _call_lines(f"    {carried} = ", item, args))
        last = run[-1].outputs[0]
        cg.var[id(last)] = carried
        cg.symbolic.add(id(last))

    def _write_class(self, cls: _Class, b: Block) -> None:
        import textwrap

        what, path = (re.sub(r"[^\w.]", "_", t) for t in (b.type_name or b.name, b.path))
        # model strings sanitized: never code, nor the end of the docstring
        doc = textwrap.fill(
            f'"""{what} of the source ({path} and the blocks like it). Registered as '
            f'"msc>{cls.name}": msc.from_keras reads its call as Keras layers and ops."""',
            width=95, initial_indent="    ", subsequent_indent="    ", break_long_words=False,
        )  # fmt: skip
        text = [
            '@keras.saving.register_keras_serializable(package="msc")',
            f"class {cls.name}(keras.layers.Layer):",
            doc,
            "",
            *cls.text,
            "",
        ]
        self.cg.classes.append("\n".join(text))


_SCOPE = (
    "values",
    "layers",
    "var",
    "symbolic",
    "lines",
    "weights",
    "_claimed",
    "unsupported",
    "poisoned",
    "symbols",
    "inputs",
    "uses_sized_layer",
)


def _indented(lines: list[str]) -> list[str]:
    """The top level's statement lines 4 spaces deeper (``call``'s body), a line now 100
    characters or longer rewrapped."""
    from codegen.keras.model import _wrap

    out = []
    for line in lines:
        m = re.fullmatch(r"    (\w+(?:, \w+)*) = (.*)", line)
        if len(line) + 4 >= 100 and m:
            out.extend(_wrap(f"        {m.group(1)} = ", m.group(2), None))
        else:
            out.append("    " + line)
    return out


def _identifier_path(path: str) -> str:
    from codegen.keras.model import _identifier

    return _identifier(path.replace(".", "_"))


def _out_name(b: Block, v: Value) -> str:
    """A block's output variable: the instance's path (``blocks_0``), its value's name when
    it has several."""
    return _identifier_path(b.path) if len(b.outputs) == 1 else (v.name or b.path)


def _call_lines(lead: str, fn: str, args: list[str]) -> list[str]:
    line = f"{lead}{fn}({', '.join(args)})"
    if len(line) < 100:
        return [line]
    return [f"{lead}{fn}(", *(f"        {a}," for a in args), "    )"]


def _instances(lst: str, cls: str, names: list[str]) -> list[str]:
    """``lst = [Cls(name=...) ...]``: a comprehension when the names count up."""
    m = re.fullmatch(r"(.*_)(\d+)", names[0])
    if m:
        head, k0 = m.group(1), int(m.group(2))
        if all(n == f"{head}{k0 + k}" for k, n in enumerate(names)) and "{" not in head:
            rng = f"range({len(names)})" if k0 == 0 else f"range({k0}, {k0 + len(names)})"
            line = f'    {lst} = [{cls}(name=f"{head}{{i}}") for i in {rng}]'
            if len(line) < 100:
                return [line]
    return [f"    {lst} = [", *(f"        {cls}(name={n!r})," for n in names), "    ]"]
