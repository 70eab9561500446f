"""The source's module hierarchy in Relax: one private function per block type, called per layer.

# NOTE: invariants
# - The blocks are ``msc.ir.blocks.partition``'s. Blocks with one key (the same computation up
#   to their weights) share one function, written from the first of them; every block, weights
#   included, is called with its own values: a 12-layer model has one layer body, called 12
#   times from ``main``. Only a block type that one body holds twice or more is a function
#   (``_repeated``): a block no other block in its body equals (a GPT2Model, a ResNet stage, a
#   layer's attention) is written inline where it is, its repeated children called; a function
#   of its own would only pass every weight once more.
# - A function takes the block's inputs (values, then weights, in the order first read; a
#   weight's parameter is named by its path under the block) and returns its outputs, one bare,
#   several as a tuple. It is private (no ``global_symbol``), named after the source module type
#   (``GPT2Block``), else the path without indices; a second function of one name (a block type
#   at other shapes: a later ResNet stage) gets ``_1``, ``_2``.
# - Its symbolic dims are its own ``tirx.Var``s, named as msc's symbols, defined by its
#   parameters' shapes (with the symbols' ranges as its bound attributes): a block whose
#   inputs have a dim that is an expression, or whose values use a symbol its inputs do not
#   define, is written inline. So is a block whose function cannot be written: falling back
#   is always right.
# - A small integer input the caller computed from shapes (a size torch.export passes around)
#   is known inside as the same expression of the function's shape variables
#   (codegen.relax.symbolic), so its reshapes keep static ranks as ``main``'s would; what the
#   caller knows is part of the function's identity (another call knowing otherwise gets its
#   own function).
# - The body is emitted by the builder's own node emission (emitters, decompositions, loops), so
#   a block's bindings are what the flat ``main`` had; the flat form is ``flat=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tvm
from tvm import relax, tirx

from codegen.relax.symbolic import MAX_ELEMENTS, Values
from msc.errors import UnsupportedOp
from msc.ir.blocks import Block, closed, partition
from msc.ir.graph import Graph, Node, Weight
from msc.ir.types import TensorType

if TYPE_CHECKING:
    from codegen.relax.module import RelaxBuilder

__all__ = ["BlockFunctions"]

_CONTROL = {"if", "loop", "scan"}


def _substitute(e: Any, vmap: dict) -> Any:
    """``e`` with the shape variables of ``vmap`` replaced (simplified on the way)."""
    a = tvm.sym.Analyzer()
    for var, new in vmap.items():
        a.bind(var, new)
    return a.simplify(e)


def _repeated(blocks: list[Block]) -> set[str]:
    """The keys of the blocks written as functions: those of which one body (``main``'s, or
    the body of the function a block is written inside: its type's first block's) holds two
    or more blocks. Decided parents first; the blocks inside a function's other instances
    are never written."""
    first: dict[str, Block] = {}
    for b in blocks:
        f = first.get(b.key)
        if f is None or b.start < f.start:
            first[b.key] = b
    chosen: set[str] = set()
    for depth in sorted({b.path.count(".") for b in blocks}):
        count: dict[tuple[int, str], int] = {}
        for b in blocks:
            if b.path.count(".") != depth:
                continue
            ctx = b.parent
            while ctx is not None and ctx.key not in chosen:
                ctx = ctx.parent
            if ctx is not None and first[ctx.key] is not ctx:
                continue  # inside another instance of a function: not written
            k = (id(ctx), b.key)
            count[k] = count.get(k, 0) + 1
        chosen |= {key for (_, key), n in count.items() if n > 1}
    return chosen


class BlockFunctions:
    """The functions of one translation's blocks (see the module NOTE)."""

    def __init__(self, builder: RelaxBuilder, graph: Graph) -> None:
        self.builder = builder
        self.part = partition(graph)
        self.repeated = _repeated(self.part.blocks)
        self.done: dict[tuple, relax.GlobalVar | None] = {}
        self.functions: list[tuple[relax.GlobalVar, relax.Function]] = []
        self._names: set[str] = {"main"}

    @property
    def top(self) -> list[Block]:
        return self.part.top

    def emit(self, nodes: list[Node], blocks: list[Block]) -> list[UnsupportedOp]:
        """Emit ``nodes`` into the builder's current block, each of ``blocks`` as one call."""
        starts = {b.nodes[0]: b for b in blocks}
        bad: list[UnsupportedOp] = []
        skip: set[Node] = set()
        for n in nodes:
            if n in skip:
                continue
            b = starts.get(n)
            if b is None:
                bad.extend(self.builder.nodes([n]))
                continue
            skip.update(b.nodes)
            if b.key not in self.repeated or not closed(b):  # inline, its children called
                bad.extend(self.emit(b.nodes, b.children))
                continue
            gv = self.function(b, bad, self._knowledge(b))
            if gv is not None:  # else its unsupported nodes were reported
                self.call(gv, b)
        return bad

    def call(self, gv: relax.GlobalVar, b: Block) -> None:
        bld = self.builder
        args = [bld.env.get(v) for v in b.inputs]
        if any(a is None for a in args):
            return  # an input came from a node already reported
        result = bld.bb.emit(relax.Call(gv, args))
        if len(b.outputs) == 1:
            outs = [result]
        else:
            outs = [bld.bb.emit(relax.TupleGetItem(result, i)) for i in range(len(b.outputs))]
        bld.env.update(zip(b.outputs, [bld._sized(x) for x in outs]))  # noqa: SLF001

    def _param_name(self, v: Any, b: Block) -> str:
        if isinstance(v, Weight) and v.name.startswith(b.path + "."):
            return v.name[len(b.path) + 1 :]
        return v.name or "x"

    def _knowledge(self, b: Block) -> dict[int, list]:
        """The values of ``b``'s small integer inputs (sizes computed from shapes) as
        expressions of msc's symbols, where the caller knows them (codegen.relax.symbolic):
        input position -> one PrimExpr per element, in the caller's shape variables."""
        bld = self.builder
        names = {var: name for name, var in bld.symbols.items()}
        out: dict[int, list] = {}
        for i, v in enumerate(b.inputs):
            t = v.type
            if isinstance(v, Weight) or not isinstance(t, TensorType) or t.shape is None:
                continue
            if (
                not t.dtype.is_integer
                or len(t.shape) > 1
                or not all(isinstance(d, int) and d <= MAX_ELEMENTS for d in t.shape)
            ):
                continue
            x = bld.env.get(v)
            vals = None if x is None else Values(bld.bb, bld.known).values(x)
            if vals is None or str(vals[0].ty) != "int64":
                continue
            if all(u in names for e in vals for u in tirx.analysis.undefined_vars(e)):
                out[i] = vals
        return out

    def function(
        self, b: Block, bad: list[UnsupportedOp], known: dict[int, list]
    ) -> relax.GlobalVar | None:
        """The function of ``b``'s key and what the caller knows of its integer inputs
        (``_knowledge``), written on first use; None when nodes of it cannot be emitted
        (added to ``bad`` the first time)."""
        bld = self.builder
        # The caller's shape variables are named after msc's symbols, one per name.
        sig = tuple((i, tuple(str(e) for e in vals)) for i, vals in sorted(known.items()))
        key = (b.key, sig)
        if key in self.done:
            return self.done[key]
        from codegen.relax.module import _fold_output, _ident

        saved = (bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken, bld.known)  # noqa: SLF001
        outer = dict(bld.symbols)
        bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken, bld.known = (  # noqa: SLF001
            relax.BlockBuilder(),
            {},
            {},
            {},
            set(),
            [],
        )
        bb = bld.bb
        name = _ident(b.name, self._names)
        try:
            params = [
                relax.Var(_ident(self._param_name(v, b), bld._taken), bld.struct_info(v.type))  # noqa: SLF001
                for v in b.inputs
            ]
            bld.env.update(zip(b.inputs, params))
            # The caller's shape variables are the function's of the same msc symbol.
            vmap = {outer[n]: var for n, var in bld.symbols.items() if n in outer}
            for i, vals in known.items():
                if all(u in vmap for e in vals for u in tirx.analysis.undefined_vars(e)):
                    bld.known.append((params[i], [_substitute(e, vmap) for e in vals]))
            dataflow = not any(n.op in _CONTROL for n in b.nodes)
            with bb.function(name, params, private=True):
                if dataflow:
                    with bb.dataflow():
                        mine = self.emit(b.nodes, b.children)
                        out = bb.emit_output(relax.Tuple([]) if mine else self._result(b))
                else:
                    mine = self.emit(b.nodes, b.children)
                    out = relax.Tuple([]) if mine else self._result(b)
                bb.emit_func_output(out)
            func = bb.get()[name]
            ranges = dict(bld.ranges)
        finally:
            bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken, bld.known = saved  # noqa: SLF001
        if mine:
            bad.extend(mine)
            self.done[key] = None
            self._names.discard(name)
            return None
        if dataflow:
            func = _fold_output(func)
        lower = {k: lo for k, (lo, _) in ranges.items() if lo is not None}
        upper = {k: hi for k, (_, hi) in ranges.items() if hi is not None}
        if lower:
            func = func.with_attr("tir_var_lower_bound", lower)
        if upper:
            func = func.with_attr("tir_var_upper_bound", upper)
        gv = relax.GlobalVar(name)
        relax.expr._update_type(gv, func.ty)  # noqa: SLF001
        self.functions.append((gv, func))
        self.done[key] = gv
        return gv

    def _result(self, b: Block) -> relax.Expr:
        outs = [self.builder.env[v] for v in b.outputs]
        return outs[0] if len(outs) == 1 else relax.Tuple(outs)
