"""Ops with no converter, through PyTorch's own decompositions.

An ExportedProgram op that msc cannot translate (no converter, or a converter that refused
this use) is rewritten with PyTorch's decomposition for it (``ExportedProgram.
run_decompositions`` with a table of only those ops), repeatedly, until the program
translates or what is left has no decomposition. Everything with a converter keeps its
high-level form (linear stays linear, layer_norm stays layer_norm).

# NOTE: the decomposition of an op is, in order: the one torch.export's default table has
# (core ATen, and the ops with a CompositeImplicitAutograd kernel registered so far, torch.library
# ops written in Python included), the one in torch._decomp's table, or for an op with a
# CompositeImplicitAutograd kernel that kernel itself. (Building torch.export's default table
# makes later exports in the process keep such composite ops, so they do reach us.) Nodes a
# decomposition produced carry ``original_aten``; the translator names it as their source op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.export import ExportedProgram

from msc.errors import UnsupportedOp, UnsupportedOpsError
from msc.frontend.torch.registry import CONVERTERS
from msc.frontend.torch.translate import _IGNORED, target_key

__all__ = ["overload", "decomposition", "unconverted_ops", "decompose", "explain"]


def overload(key: str) -> torch._ops.OpOverload | None:
    """The OpOverload named ``namespace.name.overload``, or None."""
    parts = key.split(".")
    if len(parts) != 3:
        return None
    ns, name, ov = parts
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        op = getattr(packet, ov)
    except (AttributeError, RuntimeError):
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def decomposition(op: torch._ops.OpOverload, core: Any = None) -> Callable | None:
    """PyTorch's decomposition of ``op`` (see the NOTE), or None. ``core``: torch.export's
    default table, when the caller has one (it is built anew each time: it lists the
    CompositeImplicitAutograd ops registered so far, torch.library ops included)."""
    if core is None:
        core = torch.export.default_decompositions()
    if op in core:
        return core[op]
    from torch._decomp import decomposition_table

    if op in decomposition_table:
        return decomposition_table[op]
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    return None


def _nodes(gm: torch.fx.GraphModule) -> Iterable[torch.fx.Node]:
    for node in gm.graph.nodes:
        yield node
        if node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _nodes(sub)


def unconverted_ops(ep: ExportedProgram) -> list[torch._ops.OpOverload]:
    """The ops of ``ep`` (its subgraphs too) that have no converter, in first-use order."""
    out: dict[str, torch._ops.OpOverload] = {}
    for node in _nodes(ep.graph_module):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        key = target_key(node.target)
        if key in _IGNORED or key in out:
            continue
        if CONVERTERS.lookup(key)[0] is None:
            out[key] = node.target
    return list(out.values())


def decompose(
    ep: ExportedProgram, ops: Iterable[torch._ops.OpOverload], tried: dict[str, str]
) -> tuple[ExportedProgram, bool]:
    """``ep`` with the ops that have a decomposition (and were not tried before) decomposed;
    True when anything was. ``tried`` (op key -> what happened) records each op looked at."""
    table = {}
    core = torch.export.default_decompositions()
    for op in ops:
        key = target_key(op)
        if key in tried:
            continue
        fn = decomposition(op, core)
        if fn is None:
            tried[key] = "PyTorch has no decomposition for it"
            continue
        table[op] = fn
        tried[key] = "decomposed"
    if not table:
        return ep, False
    try:
        return ep.run_decompositions(table), True
    except Exception as e:  # noqa: BLE001 - named in the report
        for op in table:
            tried[target_key(op)] = f"PyTorch's decomposition failed ({type(e).__name__}: {e})"
        return ep, False


def explain(err: UnsupportedOpsError, tried: dict[str, str]) -> UnsupportedOpsError:
    """``err`` with each op's reason saying whether a decomposition was tried and how it
    went."""
    ops = []
    for o in err.ops:
        how = tried.get(o.op)
        if how == "decomposed":
            how = "PyTorch's decomposition left it in place"
        elif how is None and overload(o.op) is not None:
            how = "no decomposition tried"
        reason = f"{o.reason or 'no converter'}; {how}" if how else o.reason
        ops.append(UnsupportedOp(o.op, o.node, o.module, reason))
    out = UnsupportedOpsError(ops)
    out.__cause__ = err.__cause__
    return out
