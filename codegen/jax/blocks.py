"""The source's module hierarchy in JAX: one pure function per block type, called per instance.

# NOTE: invariants
# - The blocks are ``msc.ir.blocks.partition``'s. Every block whose function can be written is
#   one: ``def bert_layer(params, hidden_states, attention_mask):``, named after the source
#   module type in snake_case (``BertLayer``), else its path without indices; blocks with one
#   key (the same computation up to their weights) share the function, written from the first
#   of them, and each is called with its own params. Anything else is written inline in its
#   parent: falling back is always right.
# - ``params`` is the weights as a tree: a weight's name split at its dots, numbered items as
#   lists (``params["encoder"]["layer"][0]``; ``nest``, written into the generated module, the
#   safetensors keys unchanged). A function takes its module's subtree as ``params`` and
#   reads its weights by their path under the module; a weight from outside its module (a
#   lifted constant, a tied weight) is an argument. Weight names that do not nest (a name that
#   is another's prefix, an empty segment) keep the flat form, ``params[name]``.
# - A function's other arguments are the values the block reads and defines nowhere else (in
#   the order first read); it returns the values it defines that others read, one bare,
#   several as a tuple. An argument the caller knows as a Python value (a size) is one inside
#   too, so the function is also written per which arguments are; its symbolic sizes are read
#   from its arguments' shapes (a block whose types use a symbol they do not give, or an
#   expression, is inline: ``msc.ir.blocks.closed``).
# - Names by role: a function's one argument is ``x``, several are named as its first caller
#   names them; what a call returns (one value) is named after the module
#   (``input_layernorm = llama_rms_norm(...)``, a block of blocks ``attention_output``); a
#   value a loop carries takes the name the layers' function gives it (``hidden_states``),
#   in the caller too, where the name is free there; a model output keeps its name.
# - A run of calls of one function over consecutive items of one params list, each call's
#   outputs the next one's arguments at the same places and read by nothing else, the other
#   arguments the same, is a Python ``for`` loop over the list (a slice of it when the run is
#   part of the list): jit traces it as the calls one after another, so the computation is the
#   flat form's. The one value a loop carries is the function's ``hidden_states`` (``x`` when
#   it takes no other), renamed token by token in its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msc.errors import UnsupportedOp
from msc.ir.blocks import Block, closed, partition
from msc.ir.graph import Node, Value, Weight

if TYPE_CHECKING:
    from codegen.jax.core import JaxCodegen

__all__ = ["BlockWriter", "NEST_SOURCE", "nest", "flat_params", "snake", "tree_of"]

# Written into the generated module as it is; ``nest`` below is this code.
NEST_SOURCE = '''
def nest(flat):
    """The params tree of a flat dict of weights: each name split at its dots, the numbered
    items of a module as a list (``params["encoder"]["layer"][0]["output"]["dense"]``)."""
    tree = {}
    for name, value in flat.items():
        *path, leaf = name.split(".")
        node = tree
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = value
    return _lists(tree)


def _lists(node):
    if not isinstance(node, dict):
        return node
    items = {k: _lists(v) for k, v in node.items()}
    if items and set(items) == {str(i) for i in range(len(items))}:
        return [items[str(i)] for i in range(len(items))]
    return items
'''
_ns: dict[str, Any] = {}
exec(compile(NEST_SOURCE, "<codegen.jax.blocks.nest>", "exec"), _ns)
nest = _ns["nest"]

Stmts = list[tuple[list[str], list[str]]]


def snake(name: str) -> str:
    """``BertLayer`` -> ``bert_layer``, ``GPT2Block`` -> ``gpt2_block``."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"[^0-9A-Za-z_]+", "_", s).strip("_").lower() or "block"


def flat_params(tree: Any) -> dict[str, Any]:
    """The weights of a params tree (``nest``'s, or a flat dict) by their names: ``nest``
    undone."""
    if not isinstance(tree, dict | list):
        raise TypeError("a params tree is a dict or a list")
    items = enumerate(tree) if isinstance(tree, list) else tree.items()
    out: dict[str, Any] = {}
    for k, v in items:
        if isinstance(v, dict | list):
            out.update({f"{k}.{n}": x for n, x in flat_params(v).items()})
        else:
            out[str(k)] = v
    return out


def tree_of(names: list[str]) -> Any:
    """The params tree of ``names`` (each leaf its name), or None when ``nest`` would not
    give each name back as its path."""
    try:
        tree = nest({n: n for n in names})
    except (AttributeError, TypeError):  # a name below another one's leaf
        return None
    if not isinstance(tree, dict) or sorted(flat_params(tree)) != sorted(names):
        return None
    return tree


@dataclass(eq=False)
class Function:
    name: str
    takes_params: bool
    held_outputs: list[bool] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # its source (``BlockWriter.functions``)
    params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Call:
    """One call statement: its block and function, its arguments (the values, None for the
    params subtree) and their code, and the names it binds."""

    block: Block
    fn: Function
    values: list[Value | None]
    args: list[str]
    outs: list[str]


class BlockWriter:
    """The block functions of one emission (see the module NOTE)."""

    def __init__(self, cg: JaxCodegen) -> None:
        self.cg = cg
        self.part = partition(cg.graph)
        self.tree = tree_of(list(cg.graph.weights))
        self.functions: list[list[str]] = []  # each function's lines
        self.done: dict[tuple, Function | None] = {}

    def _under(self, v: Value, b: Block) -> bool:
        return isinstance(v, Weight) and v.name.startswith(b.path + ".")

    # ------------------------------------------------------------ bodies
    def body(self, nodes: list[Node], blocks: list[Block], stmts: Stmts, bad: list) -> None:
        """Append the statements of ``nodes`` to ``stmts``, each of ``blocks`` (blocks whose
        nodes are among them) one call where its function can be written, then the runs of
        calls as loops."""
        calls: dict[int, Call] = {}
        self._emit(nodes, blocks, stmts, bad, calls)
        self._loops(stmts, calls)

    def _emit(self, nodes, blocks, stmts: Stmts, bad: list, calls: dict[int, Call]) -> None:
        starts = {b.nodes[0]: b for b in blocks}
        skip: set[Node] = set()
        for n in nodes:
            if n in skip:
                continue
            b = starts.get(n)
            if b is None:
                self.cg.statement(n, stmts, bad)
                continue
            skip.update(b.nodes)
            if not b.outputs or not closed(b):
                self._emit(b.nodes, b.children, stmts, bad, calls)
                continue
            fn = self.function(b, bad)
            if fn is None:  # its unsupported nodes were reported
                for o in b.outputs:
                    self.cg.names[o] = "None"
                continue
            at = len(stmts)
            calls[at] = self.call(fn, b, stmts)

    def call(self, fn: Function, b: Block, stmts: Stmts) -> Call:
        cg = self.cg
        values: list[Value | None] = [None] if fn.takes_params else []
        args = [cg.access(b.path)] if fn.takes_params else []
        for v in b.inputs:
            if self._under(v, b):
                continue
            values.append(v)
            args.append(cg.py(v) if cg.size(v) is not None else cg.ref(v))  # type: ignore[arg-type]
        given = set(cg.graph.outputs)  # a model output keeps its name (``pooler_output``)
        role = _role(b) if len(b.outputs) == 1 and b.outputs[0] not in given else None
        outs = [cg.fresh(role or o.name) for o in b.outputs]
        for o, name, held in zip(b.outputs, outs, fn.held_outputs):
            cg.names[o] = name
            if held:
                cg.held[o] = name
        stmts.append(([f"{', '.join(outs)} = {fn.name}({', '.join(args)})"], outs))
        return Call(b, fn, values, args, outs)

    # ------------------------------------------------------------ functions
    def function(self, b: Block, bad: list[UnsupportedOp]) -> Function | None:
        """The function of ``b`` (written on first use), or None when nodes of it cannot be
        emitted (added to ``bad`` the first time)."""
        cg = self.cg
        rel = tuple(
            v.name[len(b.path) + 1 :] if self._under(v, b) else None
            for v in b.inputs
            if isinstance(v, Weight)
        )
        known = tuple(cg.size(v) is not None for v in b.inputs)
        key = (b.key, rel, known)
        if key in self.done:
            return self.done[key]
        saved = (cg.names, cg.held, cg.symbols, cg._taken, cg.base, cg.wargs, cg.returned)  # noqa: SLF001
        from codegen.jax.core import RESERVED, _fresh_namespace

        cg.names, cg.held, cg.symbols, cg.wargs = {}, {}, {}, {}
        cg._taken = _fresh_namespace(RESERVED)  # noqa: SLF001
        cg.returned = set(b.outputs)
        takes_params = any(self._under(v, b) for v in b.inputs)
        cg.base = b.path
        try:
            params = ["params"] if takes_params else []
            # one argument: ``x``; several: each as the caller names it (the first call's)
            alone = sum(not self._under(v, b) for v in b.inputs) == 1
            tensors = []
            for v, held in zip(b.inputs, known):
                if self._under(v, b):
                    continue
                name = cg.fresh("x" if alone else _plain(saved[0].get(v)) or v.name, "x")
                params.append(name)
                if isinstance(v, Weight):
                    cg.wargs[v] = name
                else:
                    cg.names[v] = name
                    if held:
                        cg.held[v] = name
                    else:
                        tensors.append(v)
            stmts: Stmts = cg._bind_symbols(tensors)  # noqa: SLF001
            mine: list[UnsupportedOp] = []
            self.body(b.nodes, b.children, stmts, mine)
            outs = [] if mine else [cg.ref(v) for v in b.outputs]
            held_outputs = [v in cg.held for v in b.outputs]
            from codegen.jax.core import drop_unread

            lines = drop_unread(stmts, outs) if not mine else []  # type: ignore[arg-type]
        finally:
            cg.names, cg.held, cg.symbols, cg._taken, cg.base, cg.wargs, cg.returned = saved  # noqa: SLF001
        if mine:
            bad.extend(mine)
            self.done[key] = None
            return None
        name = self._name(b)
        ret = outs[0] if len(outs) == 1 else ", ".join(outs)  # type: ignore[arg-type]
        source = [
            f"def {name}({', '.join(params)}):",
            *["    " + line for line in lines],
            f"    return {ret}",
        ]
        self.functions.append(source)
        fn = Function(name, takes_params, held_outputs, source, params)
        self.done[key] = fn
        return fn

    def _name(self, b: Block) -> str:
        """A module-level name for ``b``'s function: no function's, no local's of any
        function written so far (later locals avoid it: ``JaxCodegen.fresh``)."""
        cg = self.cg
        from codegen.jax.core import RESERVED

        base = snake(b.name)
        if base[0].isdigit():
            base = "block_" + base
        name, k = base, 0
        while name in cg.globals or name in cg.seen or name in RESERVED or _taken_globally(name):
            k += 1
            name = f"{base}_{k}"
        cg.globals.add(name)
        return name

    # ------------------------------------------------------------ loops
    def _loops(self, stmts: Stmts, calls: dict[int, Call]) -> None:
        """Each run of calls that loops (see the NOTE) rewritten in ``stmts`` as one loop."""
        out: Stmts = []
        renames: dict[str, str] = {}
        i = 0
        while i < len(stmts):
            n = self._run(stmts, calls, i)
            if n < 2:
                out.append(stmts[i])
                i += 1
                continue
            run = [calls[i + k] for k in range(n)]
            out.append(self._loop(run))
            renames.update(self._carried_names(run))
            i += n
        if renames:
            out = [(_renamed(lines, renames), [renames.get(x, x) for x in names])
                   for lines, names in out]  # fmt: skip
            for v, name in list(self.cg.names.items()):
                if name in renames:
                    self.cg.names[v] = renames[name]
        stmts[:] = out

    def _carried_names(self, run: list[Call]) -> dict[str, str]:
        """What a loop carries named as the layers' function takes it (``hidden_states``),
        where the name is free here: old name -> new name."""
        cg, last = self.cg, run[-1]
        pos = self._carried(run)
        new = {}
        for t, j in enumerate(pos or []):
            old, want = last.outs[t], last.fn.params[j]
            if last.block.outputs[t] in cg.graph.outputs:
                continue  # a model output keeps its name
            if want != old and want not in cg._taken and not _taken_globally(want):  # noqa: SLF001
                cg._taken.add(want)  # noqa: SLF001
                cg.seen.add(want)
                new[old] = want
        return new

    def _run(self, stmts: Stmts, calls: dict[int, Call], i: int) -> int:
        first = calls.get(i)
        if first is None:
            return 0
        index = _item(first.block.path)
        if index is None:
            return 0
        owner, k0 = index
        if first.fn.takes_params and not isinstance(self._node_at(owner), list):
            return 0
        n = 1
        while i + n < len(stmts):
            c = calls.get(i + n)
            if c is None or c.fn is not first.fn or _item(c.block.path) != (owner, k0 + n):
                break
            n += 1
        if n < 2:
            return n
        blocks = [calls[i + k] for k in range(n)]
        return n if self._carried(blocks) is not None else 0

    def _node_at(self, path: str) -> Any:
        node = self.tree
        for k in path.split(".") if path else []:
            try:
                node = node[int(k)] if isinstance(node, list) else node[k]
            except (KeyError, IndexError, ValueError):
                return None
        return node

    def _carried(self, calls: list[Call]) -> list[int] | None:
        """The argument positions the run's calls carry (each call's outputs, in order, the
        next one's arguments there), or None when the run does not loop."""
        pos: list[int] | None = None
        for prev, nxt in zip(calls, calls[1:]):
            p = []
            for o in prev.block.outputs:
                if nxt.values.count(o) != 1 or o in self.cg.held or o in self.cg.returned:
                    return None
                if any(u not in set(nxt.block.nodes) for u, _ in o.uses):
                    return None
                p.append(nxt.values.index(o))
            if pos is None:
                pos = p
            elif p != pos:
                return None
        assert pos is not None
        for c in calls[1:]:  # the other arguments: the same values
            if any(
                c.values[j] is not calls[0].values[j] for j in range(len(c.values)) if j not in pos
            ):
                return None
        if any(o in self.cg.held for o in calls[-1].block.outputs):
            return None
        return pos

    def _loop(self, calls: list[Call]) -> tuple[list[str], list[str]]:
        cg = self.cg
        pos = self._carried(calls)
        assert pos is not None
        last, first = calls[-1], calls[0]
        owner, k0 = _item(first.block.path)  # type: ignore[misc]
        lines = []
        for t, j in enumerate(pos):
            if first.args[j] != last.outs[t]:
                lines.append(f"{last.outs[t]} = {first.args[j]}")
        args = list(first.args)
        for t, j in enumerate(pos):
            args[j] = last.outs[t]
        leaf = owner.rpartition(".")[2].rstrip("0123456789")  # layers, layer1: layer
        var = cg.fresh(leaf[:-1] if leaf.endswith("s") and len(leaf) > 3 else leaf, "item")
        if first.fn.takes_params:
            args[0] = var
            total = len(self._node_at(owner))
            it = cg.access(owner)
            if (k0, k0 + len(calls)) != (0, total):
                end = "" if k0 + len(calls) == total else str(k0 + len(calls))
                it += f"[{k0 or ''}:{end}]"
            head = f"for {var} in {it}:"
        else:
            head = f"for {var} in range({len(calls)}):"
        if len(pos) == 1:
            _carried_name(first.fn, pos[0])
        call = f"{', '.join(last.outs)} = {first.fn.name}({', '.join(args)})"
        return [*lines, head, "    " + call], list(last.outs)


def _carried_name(fn: Function, k: int) -> None:
    """Name the one parameter a loop carries through ``fn`` ``hidden_states`` (``x`` when it
    takes no other value), unless the function already uses that name: the identifier's
    tokens renamed in place (the same name inside a string stays)."""
    import io
    import tokenize

    others = len(fn.params) - (2 if fn.takes_params else 1)
    new, old = ("hidden_states" if others else "x"), fn.params[k]
    src = "\n".join(fn.lines) + "\n"
    tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    if new == old or any(t.type == tokenize.NAME and t.string == new for t in tokens):
        return
    fn.lines[:] = _renamed(fn.lines, {old: new})
    fn.params[k] = new


def _renamed(lines: list[str], names: dict[str, str]) -> list[str]:
    """``lines`` (whole statements) with each identifier token in ``names`` renamed (the same
    text inside a string stays)."""
    import io
    import tokenize

    src = "\n".join(lines) + "\n"
    rows = [list(line) for line in lines]
    for t in reversed(list(tokenize.generate_tokens(io.StringIO(src).readline))):
        if t.type == tokenize.NAME and t.string in names:  # right to left: columns stay put
            (r, c), (_, e) = t.start, t.end
            rows[r - 1][c:e] = list(names[t.string])
    return ["".join(r) for r in rows]


def _plain(name: str | None) -> str | None:
    """A caller's name for a value, when it is one identifier (not ``None``, not an
    expression): the name a function's parameter takes."""
    return name if name and name.isidentifier() and name != "None" else None


def _role(b: Block) -> str | None:
    """The name of what a call of ``b`` returns, after its module (``input_layernorm``; a
    block of blocks: ``attention_output``), None for a numbered item (``layers.3``)."""
    seg = b.path.rpartition(".")[2]
    if not seg.isidentifier() or seg.startswith("_"):
        return None
    if (b.children or seg == "self") and not seg.endswith(("output", "outputs")):
        seg += "_output"
    return None if _taken_globally(seg) else seg


def _item(path: str) -> tuple[str, int] | None:
    """``encoder.layer.3`` -> (``encoder.layer``, 3): a numbered item of a module."""
    owner, _, k = path.rpartition(".")
    return (owner, int(k)) if re.fullmatch(r"0|[1-9][0-9]*", k) else None


def _taken_globally(name: str) -> bool:
    import builtins
    import keyword

    return name in keyword.kwlist or name in dir(builtins)
