"""The source's module hierarchy in Relax: one private function per block type, called per layer.

# NOTE: invariants
# - The blocks are ``msc.ir.blocks.partition``'s. Blocks with one key (the same computation up
#   to their weights) share one function, written from the first of them; every block, weights
#   included, is called with its own values: a 12-layer model has one layer body, called 12
#   times from ``main`` (or from the function of the block that holds the layers).
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
# - The body is emitted by the builder's own node emission (emitters, decompositions, loops), so
#   a block's bindings are what the flat ``main`` had; the flat form is ``flat=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tvm import relax

from msc.errors import UnsupportedOp
from msc.ir.blocks import Block, partition
from msc.ir.graph import Graph, Node, Weight
from msc.ir.symexpr import symbols
from msc.ir.types import SymDim, TensorType

if TYPE_CHECKING:
    from codegen.relax.module import RelaxBuilder

__all__ = ["BlockFunctions"]

_CONTROL = {"if", "loop", "scan"}


def _closed(b: Block) -> bool:
    """Whether the block's symbols are all defined by its inputs' shapes (see the NOTE)."""
    bare: set[str] = set()
    for v in b.inputs:
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            continue
        for d in v.type.shape:
            if isinstance(d, SymDim):
                bare.add(d.name)
            elif d is not None and not isinstance(d, int):
                return False
    for n in b.nodes:
        for o in n.outputs:
            t = o.type
            if not isinstance(t, TensorType) or t.shape is None:
                continue
            for d in t.shape:
                if d is not None and not isinstance(d, int):
                    if any(s.name not in bare for s in symbols(d)):
                        return False
    return True


class BlockFunctions:
    """The functions of one translation's blocks (see the module NOTE)."""

    def __init__(self, builder: RelaxBuilder, graph: Graph) -> None:
        self.builder = builder
        self.part = partition(graph)
        self.done: dict[str, relax.GlobalVar | None] = {}
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
            if not _closed(b):  # inline, its children still called
                bad.extend(self.emit(b.nodes, b.children))
                continue
            gv = self.function(b, bad)
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

    def function(self, b: Block, bad: list[UnsupportedOp]) -> relax.GlobalVar | None:
        """The function of ``b``'s key, written on first use; None when nodes of it cannot be
        emitted (added to ``bad`` the first time)."""
        if b.key in self.done:
            return self.done[b.key]
        from codegen.relax.module import _fold_output, _ident

        bld = self.builder
        saved = (bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken)  # noqa: SLF001
        bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken = (  # noqa: SLF001
            relax.BlockBuilder(), {}, {}, {}, set()
        )
        bb = bld.bb
        name = _ident(b.name, self._names)
        try:
            params = [
                relax.Var(_ident(self._param_name(v, b), bld._taken), bld.struct_info(v.type))  # noqa: SLF001
                for v in b.inputs
            ]
            bld.env.update(zip(b.inputs, params))
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
            bld.bb, bld.env, bld.symbols, bld.ranges, bld._taken = saved  # noqa: SLF001
        if mine:
            bad.extend(mine)
            self.done[b.key] = None
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
        self.done[b.key] = gv
        return gv

    def _result(self, b: Block) -> relax.Expr:
        outs = [self.builder.env[v] for v in b.outputs]
        return outs[0] if len(outs) == 1 else relax.Tuple(outs)
