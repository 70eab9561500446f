"""The source's module hierarchy as classes: one ``nn.Module`` class per block type.

# NOTE: invariants
# - A block is a module path ``P`` of the source (a node's provenance: torch.export's
#   nn_module_stack, torch.onnx's scope names) whose nodes are contiguous at the top level of the
#   graph, whose state is a plain holder in the module plan (not a library module, not a list),
#   and whose nodes call only modules under ``P``. A weight it reads from elsewhere is bound to
#   a local by the root forward and handed in. Anything else stays inline in its parent:
#   falling back is always right, a wrong call never is.
# - A block's forward takes the values its statements read and defines nowhere else (in the
#   order first read) and returns the values it defines that any other statement reads (in the
#   order defined). Identifiers come from the one namespace of the emission, so a call binds the
#   same names the flat code had: splitting changes no statement.
# - Blocks whose classes are equal up to the names of their locals (same ``__init__``, same
#   ``forward``) share one class, and so do blocks that differ only in the sizes their
#   ``__init__`` passes to constructors (``Sizes``: those become the class's parameters; a
#   library constructor's default keyword counts as written, ``_DEFAULTS``) and in integers
#   of their forward that are those sizes (``ForwardInts``: the forward reads the instance's
#   copy, ``self.nf``; an integer that differs and is no such size keeps them apart); a
#   run of calls over a whole ``ModuleList``, each feeding the next at the same places (its
#   items may be of several classes, as a ResNet stage's first layer with its shortcut and the
#   rest), becomes a ``for`` loop, as the source iterates it: the loop variable's rebinding
#   frees each layer's output as the next one returns, where calls one after another would
#   hold all of them to the end of the forward. The calls of all the items of a source
#   ``nn.Sequential`` in a chain become one call of it.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field

from codegen.torch import code
from codegen.torch.modules import Alias, Holder, Leaf, ModulePlan, Param
from msc.ir.blocks import CONTAINERS, module_paths, module_types, nest, owners
from msc.ir.graph import Graph, Node, Weight

__all__ = [
    "Block",
    "find_blocks",
    "outside_weights",
    "split_body",
    "canonical",
    "loops",
    "carried_names",
    "height",
    "Sizes",
    "ForwardInts",
    "PARAMETER_SIZES",
    "explicit_defaults",
    "drop_defaults",
    "sequential_leaves",
]


@dataclass(eq=False)
class Block:
    path: str
    parts: list[str]
    type_name: str
    holder: Holder
    nodes: list[Node] = field(default_factory=list)
    parent: Block | None = None
    children: list[Block] = field(default_factory=list)
    body: list[ast.stmt] = field(default_factory=list)  # top-level statements (after split)
    flat: list[ast.stmt] = field(default_factory=list)  # its statements before splitting
    params: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    cls: str = ""

    def contains(self, other: Block | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False


def _weights_read(node: Node):
    for v in node.inputs:
        if isinstance(v, Weight):
            yield v
    for sub in node.subgraphs():
        for n in sub.nodes:
            yield from _weights_read(n)


def _holder(plan: ModulePlan, parts: list[str]) -> Holder | None:
    h = plan.root
    for p in parts:
        c = h.children.get(p) if isinstance(h, Holder) else None
        if not isinstance(c, Holder):
            return None
        h = c
    return h


def find_blocks(graph: Graph, plan: ModulePlan) -> tuple[list[Block], dict[Node, Block]]:
    """The blocks of ``graph`` (the top level ones, each with its children) and the innermost
    block of every top-level node in one."""
    owner = owners(graph)
    types = module_types(graph)
    index = {n: i for i, n in enumerate(graph.nodes)}
    paths = module_paths(owner)
    for path, t in types.items():
        h = _holder(plan, path.split(".")) if t == "Sequential" else None
        if h is not None and h.is_list:
            h.sequential = True
    found: dict[str, Block] = {}
    for path in sorted(paths, key=lambda p: (p.count("."), p)):
        parts = path.split(".")
        h = _holder(plan, parts)
        if h is None or h is plan.root or h.is_list or types.get(path) in CONTAINERS:
            continue
        if any(k.isdigit() for k in h.children):  # a Sequential with gaps: its items inline
            continue
        nodes = [n for n in graph.nodes if owner[n] == path or owner[n].startswith(path + ".")]
        if not nodes or index[nodes[-1]] - index[nodes[0]] + 1 != len(nodes):
            continue
        if sum(n.op != "constant" for n in nodes) < 2:  # one op: a class would only hide it
            continue
        if not _reads_inside(nodes, plan, parts):
            continue
        t = types.get(path) or _camel(parts)
        found[path] = Block(path, parts, t, h, nodes)
    top = nest(found)  # parents first (sorted by depth)
    node_block: dict[Node, Block] = {}
    for b in found.values():  # deeper blocks later: they win
        for n in b.nodes:
            node_block[n] = b
    return top, node_block


def _reads_inside(nodes: list[Node], plan: ModulePlan, parts: list[str]) -> bool:
    """Whether the nodes call only modules under ``parts``. Weights from elsewhere are handed
    in (``outside_weights``)."""
    k = len(parts)
    for n in nodes:
        leaf = plan.node_leaf.get(n)
        if leaf is not None and leaf.prefix.split(".")[:k] != parts:
            return False
    return True


def outside_weights(node_block: dict[Node, Block], plan: ModulePlan) -> list[Weight]:
    """The weights some block reads from outside its own path (an ONNX file's folded constants,
    such as the rotary tables every layer reads; a tied weight): the root forward binds each
    to a local, and the blocks take it as a parameter."""
    out: dict[str, Weight] = {}
    for n, b in node_block.items():
        k = len(b.parts)
        leaf = plan.node_leaf.get(n)
        own = [] if leaf is None else list(leaf.roles.values())  # read through the module
        for w in _weights_read(n):
            p = plan.paths.get(w.name)
            if p is not None and p[:k] != b.parts and not any(w is r for r in own):
                out.setdefault(w.name, w)
    return list(out.values())


def _camel(parts: list[str]) -> str:
    """A class name from a module path: ``encoder.layer.0`` -> ``EncoderLayer``."""
    words = [p for p in parts if not p.isdigit()][-2:] or ["block"]
    out = "".join(w[:1].upper() + w[1:] for x in words for w in re.split(r"[^0-9A-Za-z]+", x))
    return out if out[:1].isalpha() else "Block"


def _names(stmts: list[ast.stmt], ctx: type) -> list[str]:
    out: dict[str, None] = {}
    for st in stmts:
        for n in ast.walk(st):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx):
                out.setdefault(n.id)
    return list(out)


def split_body(
    body: list[ast.stmt], stmt_block: dict[int, Block], top: list[Block], values: set[str]
) -> tuple[list[ast.stmt], dict[int, Block]]:
    """Cut ``body`` (the flat forward) into the blocks' bodies. Returns the root's body, in
    which each block's statements are one placeholder statement, and placeholder id -> block.
    ``values``: the identifiers that name values (a block's parameters are among them)."""
    calls: dict[int, Block] = {}

    def child_of(b: Block | None, within: Block | None) -> Block | None:
        while b is not None and b.parent is not within:
            b = b.parent
        return b

    def split(stmts: list[ast.stmt], within: Block | None) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        i = 0
        while i < len(stmts):
            b = stmt_block.get(id(stmts[i]))
            child = child_of(b, within) if b is not None and b is not within else None
            if child is None or (within is not None and not within.contains(b)):
                out.append(stmts[i])
                i += 1
                continue
            j = i
            while j < len(stmts) and child.contains(stmt_block.get(id(stmts[j]))):
                j += 1
            child.flat = stmts[i:j]
            child.body = split(stmts[i:j], child)
            mark = ast.Pass()
            calls[id(mark)] = child
            out.append(mark)
            i = j
        return out

    root = split(body, None)
    everything = body
    for b in calls.values():
        inside = {id(s) for s in b.flat}
        stored = set(_names(b.flat, ast.Store))
        b.params = [n for n in _names(b.flat, ast.Load) if n in values and n not in stored]
        rest = [s for s in everything if id(s) not in inside]
        read_after = set(_names(rest, ast.Load))
        b.outputs = [n for n in _names(b.flat, ast.Store) if n in read_after]
    return root, calls


class _Canon(ast.NodeTransformer):
    def __init__(self, local: set[str]) -> None:
        self.local = local
        self.map: dict[str, str] = {}

    def _n(self, ident: str) -> str:
        if ident not in self.local:
            return ident
        return self.map.setdefault(ident, f"_v{len(self.map)}")

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self._n(node.id), node.ctx)

    def visit_arg(self, node: ast.arg) -> ast.arg:
        return ast.arg(self._n(node.arg))


def canonical(cls_body: list[ast.stmt], local: set[str]) -> str:
    """The class body up to the names of its locals (``local``), as a comparable string."""
    canon = _Canon(local)
    return ast.dump(ast.Module([canon.visit(copy.deepcopy(s)) for s in cls_body], []))


def loops(
    body: list[ast.stmt],
    calls: dict[int, tuple[Block, ast.expr]],
    plan: ModulePlan,
    base: list[str],
    new_name,
    looped: list[tuple[str, list[int]]] | None = None,
) -> list[ast.stmt]:
    """``body`` with each run of calls over a whole ModuleList, each call's outputs the next
    one's inputs at the same places, as ``for layer in self.layers: ...``; ``looped`` gets
    (class, the positions of the parameters the loop carries) of each."""
    out: list[ast.stmt] = []
    i = 0
    while i < len(body):
        chain = _sequential(body, i, calls, plan, base)
        if chain is not None:
            out.append(chain[0])
            i += chain[1]
            continue
        run = _run(body, i, calls, plan)
        if run is None:
            out.append(body[i])
            i += 1
            continue
        blocks = [calls[id(s)][0] for s in body[i : i + run]]
        loop = _loop(blocks, body, i, run, plan, base, new_name)
        if loop is None:
            out.append(body[i])
            i += 1
            continue
        out.extend(loop[0])
        if looped is not None:
            looped.extend((c, loop[1]) for c in dict.fromkeys(b.cls for b in blocks))
        i += run
    return out


def carried_names(cls: ast.ClassDef, pos: list[int]) -> None:
    """Name the parameters a loop carries through the class ``hidden_states`` (``x`` when it
    takes no other), unless the class already uses the name."""
    k = next(i for i, f in enumerate(cls.body) if getattr(f, "name", "") == "forward")
    if len(pos) != 1:
        return
    # A copy: the emitted expressions share their ast.Name objects (a value's one reference)
    # with the other classes that read the value, which must keep their names.
    forward = cls.body[k] = copy.deepcopy(cls.body[k])
    assert isinstance(forward, ast.FunctionDef)
    params = forward.args.args[1:]
    new = "x" if len(params) == 1 else "hidden_states"
    used = {n.id for n in ast.walk(forward) if isinstance(n, ast.Name)} | {a.arg for a in params}
    if new in used:
        return
    old = params[pos[0]].arg
    params[pos[0]].arg = new
    for n in ast.walk(forward):
        if isinstance(n, ast.Name) and n.id == old:
            n.id = new


def _sequential(body, i, calls, plan, base) -> tuple[ast.stmt, int] | None:
    """``y = self.layer1(x)`` for the calls of all the items of a source nn.Sequential in
    order, each taking the previous one's only output as its only input; and how many
    statements it replaces."""
    first = calls.get(id(body[i]))
    if first is None or first[0].parts[-1] != "0":
        return None
    parts = first[0].parts[:-1]
    holder = _holder(plan, parts)
    if holder is None or not holder.sequential or not holder.is_list:
        return None
    n = len(holder.children)
    blocks = []
    for k in range(n):
        c = calls.get(id(body[i + k])) if i + k < len(body) else None
        if c is None or c[0].parts != [*parts, str(k)]:
            return None
        blocks.append(c[0])
    if any(len(b.params) != 1 or len(b.outputs) != 1 for b in blocks):
        return None
    if any(b.params[0] != a.outputs[0] for a, b in zip(blocks, blocks[1:])):
        return None
    loads = _names(body[:i] + body[i + n :], ast.Load)
    if any(b.outputs[0] in loads for b in blocks[:-1]):
        return None
    saved, plan.base = plan.base, base
    try:
        fn = plan.access(parts)
    finally:
        plan.base = saved
    call = ast.Call(fn, [code.name(blocks[0].params[0])], [])
    return ast.Assign([ast.Name(blocks[-1].outputs[0], ast.Store())], call), n


def _run(body, i, calls, plan) -> int | None:
    first = calls.get(id(body[i]))
    if first is None:
        return None
    b0 = first[0]
    if b0.parts[-1] != "0":
        return None
    holder = _holder(plan, b0.parts[:-1])
    if holder is None or not holder.is_list:
        return None
    n = len(holder.children)
    if n < 2 or i + n > len(body):
        return None
    for k in range(n):
        c = calls.get(id(body[i + k]))
        if c is None or c[0].parts != [*b0.parts[:-1], str(k)]:
            return None
    return n


def _loop(blocks, body, i, n, plan, base, new_name) -> tuple[list[ast.stmt], list[int]] | None:
    k = len(blocks[0].outputs)
    if k == 0 or any(len(b.outputs) != k or len(b.params) != len(blocks[0].params) for b in blocks):
        return None
    pos = None
    for prev, b in zip(blocks, blocks[1:]):
        p = []
        for o in prev.outputs:
            if b.params.count(o) != 1:
                return None
            p.append(b.params.index(o))
        if pos is None:
            pos = p
        elif p != pos:
            return None
    assert pos is not None
    fixed = [j for j in range(len(blocks[0].params)) if j not in pos]
    for b in blocks:
        if [b.params[j] for j in fixed] != [blocks[0].params[j] for j in fixed]:
            return None
    # The outputs of all but the last call are read only by the next call.
    rest = body[:i] + body[i + n :]
    loads = _names(rest, ast.Load)
    for b in blocks[:-1]:
        if any(o in loads for o in b.outputs):
            return None
    carried = blocks[-1].outputs
    if any(c in blocks[0].params for c in carried):
        return None
    pre: list[ast.stmt] = []
    for t, j in enumerate(pos):
        src = blocks[0].params[j]
        if src != carried[t]:
            pre.append(ast.Assign([ast.Name(carried[t], ast.Store())], code.name(src)))
    args = list(blocks[0].params)
    for t, j in enumerate(pos):
        args[j] = carried[t]
    holder_parts = blocks[0].parts[:-1]
    var = new_name(holder_parts[-1])
    call = ast.Call(code.name(var), [code.name(a) for a in args], [])
    if k == 1:
        target: ast.expr = ast.Name(carried[0], ast.Store())
    else:
        target = ast.Tuple([ast.Name(c, ast.Store()) for c in carried], ast.Store())
    saved, plan.base = plan.base, base
    try:
        it = plan.access(holder_parts)
    finally:
        plan.base = saved
    loop = ast.For(ast.Name(var, ast.Store()), it, [ast.Assign([target], call)], [])
    return [*pre, loop], pos


def height(b: Block) -> int:
    """0 for a block without child blocks, else one more than its highest child."""
    return 1 + max(map(height, b.children)) if b.children else 0


# Names of constructor arguments by position, for the parameters of a generated __init__.
_POSITIONAL = {
    "Linear": ("in_features", "out_features"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "LayerNorm": ("normalized_shape",),
    "RMSNorm": ("normalized_shape",),
    "GroupNorm": ("num_groups", "num_channels"),
}
for _c in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"):
    _POSITIONAL[_c] = ("in_channels", "out_channels", "kernel_size")
for _c in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d"):
    _POSITIONAL[_c] = ("num_features",)

# The sizes of a source's own parameters, by (module type, attribute), as the source names
# them: transformers' Conv1D (GPT-2) holds weight [nx, nf]. Other parameters' sizes are named
# after the tensor (``weight_dim0``, ``bias_size``).
PARAMETER_SIZES: dict[tuple[str, str], tuple[str, ...]] = {
    ("Conv1D", "weight"): ("nx", "nf"),
    ("Conv1D", "bias"): ("nf",),
}

# Keyword arguments of library constructors and their defaults, which the module rules leave
# out: written out while blocks are compared (a ResNet's stride-2 conv layer and its stride-1
# one are one class taking ``stride``), left out again where every instance has the default.
# An int default of an argument that takes a tuple per spatial dim (stride) is written as a
# tuple as long as the kernel_size.
_DEFAULTS: dict[str, dict[str, int]] = {}
for _n in (1, 2, 3):
    _DEFAULTS[f"Conv{_n}d"] = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}
    _DEFAULTS[f"ConvTranspose{_n}d"] = {
        "stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1
    }  # fmt: skip
_PER_DIM = frozenset({"stride", "padding", "dilation", "output_padding"})


def _is_size(e: ast.expr) -> bool:
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, float)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _is_size(e.operand)
    if isinstance(e, ast.Tuple):
        return 0 < len(e.elts) <= 4 and all(
            isinstance(x, ast.Constant) and type(x.value) is int for x in e.elts
        )
    return False


def _fname(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _default(call: ast.Call, key: str) -> ast.expr:
    value = _DEFAULTS[_fname(call)][key]
    kernel = call.args[2] if len(call.args) > 2 else None
    if key in _PER_DIM and isinstance(kernel, ast.Tuple):
        return ast.Tuple([ast.Constant(value) for _ in kernel.elts], ast.Load())
    return ast.Constant(value)


def explicit_defaults(init: ast.FunctionDef) -> None:
    """Write out the default keyword arguments of the library constructors in ``init`` (in
    place), in one order, so that __init__s that differ only in a default compare as
    differing in a size."""
    for call in ast.walk(init):
        if not isinstance(call, ast.Call) or _fname(call) not in _DEFAULTS:
            continue
        given = {kw.arg: kw for kw in call.keywords}
        table = _DEFAULTS[_fname(call)]
        call.keywords = [given.get(k) or ast.keyword(k, _default(call, k)) for k in table] + [
            kw for kw in call.keywords if kw.arg not in table
        ]


def drop_defaults(init: ast.FunctionDef) -> None:
    """Leave out again (in place) the keyword arguments ``explicit_defaults`` wrote that still
    have their default value."""
    for call in ast.walk(init):
        if not isinstance(call, ast.Call) or _fname(call) not in _DEFAULTS:
            continue
        table = _DEFAULTS[_fname(call)]
        call.keywords = [
            kw for kw in call.keywords
            if kw.arg not in table or not _is_default(kw.value, table[kw.arg])
        ]  # fmt: skip


def _is_default(e: ast.expr, value: int) -> bool:
    if isinstance(e, ast.Tuple):
        return all(_is_default(x, value) for x in e.elts)
    return isinstance(e, ast.Constant) and type(e.value) is int and e.value == value


class Sizes:
    """The size arguments (numbers, tuples of ints) of the constructor calls in a block
    class's ``__init__``: blocks whose classes differ only in them (a ResNet's Bottlenecks in
    different stages) share one class that takes the sizes that differ as parameters.
    ``type_name``: the source type of the block (``PARAMETER_SIZES``)."""

    def __init__(
        self, init: ast.FunctionDef, params: dict[str, list[str]], type_name: str = ""
    ) -> None:
        # (the list or keyword holding it, index or None, name hint)
        self.slots: list[tuple[object, int | None, str]] = []
        tensors: dict[int, str] = {}  # id(torch.empty call) -> the attribute it makes
        for st in init.body:
            attr = _made_attr(st)
            if attr is not None:
                for n in ast.walk(st):
                    if isinstance(n, ast.Call) and _fname(n) == "empty":
                        tensors[id(n)] = attr
        for call in ast.walk(init):
            if not isinstance(call, ast.Call):
                continue
            fname = _fname(call)
            if fname in ("tensor", "register_buffer"):
                continue
            names = params.get(fname) or _POSITIONAL.get(fname, ())
            if fname == "empty":
                names = _tensor_sizes(type_name, tensors.get(id(call), ""), len(call.args))
            elif fname == "range":
                names = ("start", "depth") if len(call.args) == 2 else ("depth",)
            for i, a in enumerate(call.args):
                if _is_size(a):
                    self.slots.append((call.args, i, names[i] if i < len(names) else "size"))
            for kw in call.keywords:
                if kw.arg and _is_size(kw.value):
                    self.slots.append((kw, None, kw.arg))

    def get(self, k: int) -> ast.expr:
        holder, i, _ = self.slots[k]
        return holder[i] if i is not None else holder.value  # type: ignore[index,attr-defined]

    def set(self, k: int, e: ast.expr) -> None:
        holder, i, _ = self.slots[k]
        if i is not None:
            holder[i] = e  # type: ignore[index]
        else:
            holder.value = e  # type: ignore[attr-defined]

    def values(self) -> list[str]:
        return [ast.dump(self.get(k)) for k in range(len(self.slots))]

    def hint(self, k: int) -> str:
        return self.slots[k][2]


def _made_attr(st: ast.stmt) -> str | None:
    """The attribute ``self.X = ...`` or ``self.register_buffer('X', ...)`` makes."""
    if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute):
        return st.targets[0].attr
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and st.value.args:
        key = st.value.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _tensor_sizes(type_name: str, attr: str, n: int) -> tuple[str, ...]:
    known = PARAMETER_SIZES.get((type_name, attr))
    if known is not None and len(known) == n:
        return known
    base = attr if _PLAIN.fullmatch(attr or "") else "tensor"
    return (f"{base}_size",) if n == 1 else tuple(f"{base}_dim{i}" for i in range(n))


class ForwardInts:
    """The integer literals of a block class's ``forward`` (the sizes of a reshape, an
    index), with ``Sizes``'s interface: blocks whose forwards differ only in integers that
    are sizes their ``__init__``s take share one class, whose forward reads those from the
    instance (``x.reshape((-1, self.nx))``)."""

    def __init__(self, forward: ast.FunctionDef) -> None:
        self.slots: list[tuple[ast.AST, str, int | None]] = []
        for node in ast.walk(forward):
            for name, value in ast.iter_fields(node):
                if isinstance(value, list):
                    for i, x in enumerate(value):
                        if _is_int(x):
                            self.slots.append((node, name, i))
                elif _is_int(value):
                    self.slots.append((node, name, None))

    def get(self, k: int) -> ast.expr:
        node, name, i = self.slots[k]
        value = getattr(node, name)
        return value if i is None else value[i]

    def set(self, k: int, e: ast.expr) -> None:
        node, name, i = self.slots[k]
        if i is None:
            setattr(node, name, e)
        else:
            getattr(node, name)[i] = e

    def values(self) -> list[str]:
        return [ast.dump(self.get(k)) for k in range(len(self.slots))]


def _is_int(x: object) -> bool:
    return isinstance(x, ast.Constant) and type(x.value) is int


def _item_call(st: ast.stmt) -> tuple[list[str], int, str, str] | None:
    """``y = self.a.b[k](x)`` -> (["a", "b"], k, "x", "y"), else None."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
        return None
    t, v = st.targets[0], st.value
    if not (isinstance(t, ast.Name) and isinstance(v, ast.Call) and len(v.args) == 1):
        return None
    f, arg = v.func, v.args[0]
    if v.keywords or not isinstance(arg, ast.Name) or not isinstance(f, ast.Subscript):
        return None
    if not (isinstance(f.slice, ast.Constant) and type(f.slice.value) is int):
        return None
    parts = _self_path(f.value)
    if not parts:
        return None
    return parts, f.slice.value, arg.id, t.id


def sequential_leaves(body: list[ast.stmt], plan: ModulePlan, base: list[str]) -> list[ast.stmt]:
    """``body`` with the calls of all the items of a source nn.Sequential of torch modules in
    a chain (``d0 = self.downsample[0](x); d1 = self.downsample[1](d0)``) as one call of it
    (``d1 = self.downsample(x)``), where nothing else reads the intermediates; nested ones
    inside out (``self.block[0][0](x)`` ... ``self.block[3][1](y)``: ``self.block(x)`` when
    every item of ``block`` is then one call in the chain)."""
    while True:
        out = _sequential_leaves_once(body, plan, base)
        if len(out) == len(body):
            return out
        body = out


def _sequential_leaves_once(
    body: list[ast.stmt], plan: ModulePlan, base: list[str]
) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    i = 0
    while i < len(body):
        first = _item_call(body[i])
        holder = _holder(plan, [*base, *first[0]]) if first is not None and first[1] == 0 else None
        if first is None or holder is None or not holder.sequential:
            out.append(body[i])
            i += 1
            continue
        n = len(holder.children)
        chain = [_item_call(st) for st in body[i : i + n]]
        ok = len(chain) == n and all(
            c is not None and c[0] == first[0] and c[1] == k for k, c in enumerate(chain)
        )
        ok = ok and all(b[2] == a[3] for a, b in zip(chain, chain[1:]))  # type: ignore[index]
        loads = _names(body[:i] + body[i + n :], ast.Load)
        if not ok or any(c[3] in loads for c in chain[:-1]):  # type: ignore[index]
            out.append(body[i])
            i += 1
            continue
        fn = body[i].value.func.value  # type: ignore[attr-defined]
        call = ast.Call(fn, [code.name(first[2])], [])
        out.append(ast.Assign([ast.Name(chain[-1][3], ast.Store())], call))  # type: ignore[index]
        i += n
    return out


# ---------------------------------------------------------------- names from roles
def _self_path(e: ast.expr) -> list[str] | None:
    """``self.a[0].b`` -> ["a", "0", "b"], else None."""
    parts: list[str] = []
    while True:
        if isinstance(e, ast.Attribute):
            parts.insert(0, e.attr)
            e = e.value
        elif isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
            parts.insert(0, str(e.slice.value))
            e = e.value
        else:
            break
    return parts if isinstance(e, ast.Name) and e.id == "self" else None


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _free(used: set[str], base: str) -> str:
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    return name


def role_names(
    fn: ast.FunctionDef,
    holder: Holder,
    plan: ModulePlan,
    forwards: dict[str, ast.FunctionDef],
    outputs: dict[str, str] | None = None,
    merge_params: bool = False,
    taken: frozenset[str] = frozenset(),
) -> ast.FunctionDef:
    """``fn`` (the forward of the class whose state is ``holder``; a copy when anything is
    renamed) with its values named by their role, as a person names them, where the name is
    free in the function (``taken``: names it must not take, such as builtins):

    - a value the loop over a ModuleList carries, after the parameter of the layers' class it
      is passed as (``hidden_states = layer(hidden_states, mask)``); with ``merge_params``, a
      parameter that only starts the loop is that name too (no ``hidden_states = x`` copy);
    - the output of a call of a direct child module, after the child (``query =
      self.query(x)``, ``attention_output = self.attention(x)``: ``_call_name``), where the
      flat code has the name of the last value inside or a counter (``dense_6``);
    - a value returned under a key (``outputs``: identifier -> key), after the key.

    The identifiers are local to the function: the caller binds its own."""
    params = [a.arg for a in fn.args.args[1:]]
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | set(params)
    used = set(names) | set(taken) | {"self"}
    rename: dict[str, str] = {}
    drop: set[int] = set()

    def give(old: str, base: str) -> None:
        if old in rename or old in params or not _PLAIN.fullmatch(base) or base in taken:
            return  # ASCII only, never private: a model's key or name is only ever data
        if base == old or re.fullmatch(rf"{re.escape(base)}_\d+", old) is None:
            if base in used:
                return
        else:  # a counter of that very name: the first free one
            used.discard(old)
        new = _free(used, base)
        used.add(new)
        if new != old:
            rename[old] = new

    for k, st in enumerate(fn.body):
        if isinstance(st, ast.For) and len(st.body) == 1 and isinstance(st.body[0], ast.Assign):
            ctx = (fn.body, k, params, used, give, rename, drop, merge_params)
            _carry(st, holder, plan, forwards, ctx)
            if isinstance(st.target, ast.Name):  # the loop's own counter (layer_1): layer
                give(st.target.id, re.sub(r"_\d+$", "", st.target.id))
    for st in fn.body:
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
            continue
        t, v = st.targets[0], st.value
        if isinstance(t, ast.Name) and isinstance(v, ast.Call) and not v.keywords:
            path = _self_path(v.func)
            if path is not None and len(path) == 1 and t.id not in (outputs or {}):
                give(t.id, _call_name(path[0], holder.children.get(path[0])))
    for ident, key in (outputs or {}).items():
        give(ident, key)
    if not rename:
        return fn
    fn = copy.deepcopy(fn)  # the emitted ast.Name objects are shared with other classes
    fn.body = [st for k, st in enumerate(fn.body) if k not in drop]
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id in rename:
            n.id = rename[n.id]
        elif isinstance(n, ast.arg) and n.arg in rename:
            n.arg = rename[n.arg]
    return fn


def _call_name(attr: str, child: object) -> str:
    """What a call of child module ``attr`` returns: a library layer's result is named after
    it (``query = self.query(x)``), a block's is its output (``attention_output``)."""
    name = attr.lower()
    if isinstance(child, Holder) and not name.endswith(("output", "outputs")):
        name += "_output"
    return name


def _carry(loop, holder, plan, forwards, ctx) -> None:
    """Names for what ``loop`` (``for layer in self.layers: h = layer(h, m)``) carries."""
    body, at, params, used, give, rename, drop, merge = ctx
    st = loop.body[0]
    call = st.value
    path = _self_path(loop.iter)
    if path is None or not isinstance(call, ast.Call) or not isinstance(loop.target, ast.Name):
        return
    if not (isinstance(call.func, ast.Name) and call.func.id == loop.target.id):
        return
    h: Holder | Leaf | Param | Alias | None = holder
    for p in path:
        h = h.children.get(p) if isinstance(h, Holder) else None
    first = h.children.get("0") if isinstance(h, Holder) else None
    forward = forwards.get(plan.classes.get(id(first), ""))
    if forward is None:
        return
    layer_params = [a.arg for a in forward.args.args[1:]]
    t = st.targets[0]
    carried = [t] if isinstance(t, ast.Name) else list(getattr(t, "elts", []))
    args = [a.id if isinstance(a, ast.Name) else None for a in call.args]
    if len(layer_params) != len(args):
        return
    for c in carried:
        if not isinstance(c, ast.Name) or args.count(c.id) != 1:
            continue
        want = layer_params[args.index(c.id)]
        # ``h = x`` before the loop, ``x`` a parameter read nowhere else: one name for both.
        k = next(
            (k for k in range(at) if isinstance(body[k], ast.Assign)
             and [getattr(x, "id", None) for x in body[k].targets] == [c.id]),
            None,
        )  # fmt: skip
        src = getattr(body[k].value, "id", None) if k is not None else None
        reads = sum(isinstance(n, ast.Name) and n.id == src for s in body for n in ast.walk(s))
        if merge and src in params and reads == 1 and want not in used:
            drop.add(k)
            rename[src] = rename[c.id] = want
            used.add(want)
            continue
        give(c.id, want)
        if c.id not in rename:  # taken here (the function's own x): the usual name
            give(c.id, "hidden_states")
