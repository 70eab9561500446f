"""Registries of the PyTorch codegen: per-op emitters and per-op ``nn.Module`` rules.

# NOTE: invariants
# - Keyed by canonical op name; registering a key twice is an error. A registry is an object,
#   so a test or a subclassed codegen can use its own (``EmitterRegistry.copy()``).
# - An emitter mirrors its op's schema: ``def conv(e, x, weight, bias=None, *, stride, ...)``,
#   receiving ``Arg``s (an ast expression plus the graph Value) for inputs, ``None`` for an absent
#   optional input, a list for a variadic one, and the node's normalized attributes. It returns
#   the ast expression of the node's result (a tuple-valued expression for a multi-output node),
#   or ``None`` after assigning the outputs itself (``e.assign``).
# - A module rule says when a node and its weights are exactly one torch module (nn.Conv2d,
#   nn.LayerNorm...): it returns ``(constructor expression, call arguments)`` or ``None``.
# - A group rule finds groups of nodes that are together one call of a torch module (the nodes
#   msc's torch frontend makes of one nn.LSTM call): ``GroupModule``s, emitted as that call.
# - An op that cannot be emitted is declared with ``unsupported(op, reason)``; coverage tests
#   and ``coverage_markdown()`` read both.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.registry import Registry

__all__ = [
    "EmitterRegistry",
    "ModuleRule",
    "ModuleRuleRegistry",
    "EMITTERS",
    "MODULE_RULES",
    "emitter",
    "module_rule",
    "unsupported",
    "spelled_out",
    "unrolled",
    "GroupModule",
    "GROUP_RULES",
    "group_rule",
    "GRAPH_REWRITES",
    "graph_rewrite",
]

Emit = Callable[..., Any]


class EmitterRegistry:
    """Emitters by canonical op name, plus ops declared unsupported with a reason; an op is
    one or the other, declared once."""

    def __init__(self) -> None:
        self._fns: Registry[str, Emit] = Registry("torch emitter")
        self._gaps: Registry[str, str] = Registry("unsupported torch op")

    def __call__(self, *ops: str) -> Callable[[Emit], Emit]:
        """Decorator: ``@emitter("relu")`` (several ops may share one function)."""

        def deco(fn: Emit) -> Emit:
            for op in ops:
                self.register(op, fn)
            return fn

        return deco

    def register(self, op: str, fn: Emit) -> None:
        if op in self._gaps:
            raise ValueError(f"torch op {op!r} is declared unsupported and given an emitter")
        self._fns.register(op, fn)

    def unsupported(self, op: str, reason: str) -> None:
        """Declare that ``op`` has no emitter, and why."""
        if op in self._fns:
            raise ValueError(f"torch op {op!r} has an emitter and is declared unsupported")
        if not reason:
            raise ValueError(f"unsupported op {op!r} needs a reason")
        self._gaps.register(op, reason)

    def get(self, op: str) -> Emit | None:
        return self._fns.get(op)

    def reason(self, op: str) -> str:
        return self._gaps.get(op) or "no emitter"

    def __contains__(self, op: object) -> bool:
        return op in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(self._fns)

    def gaps(self) -> dict[str, str]:
        return dict(self._gaps.items())

    def copy(self, without: tuple[str, ...] = ()) -> EmitterRegistry:
        """A copy (that lacks the emitters of ``without``, for tests)."""
        new = EmitterRegistry()
        new._fns, new._gaps = self._fns.without(*without), self._gaps.copy()
        return new


@dataclass(frozen=True, slots=True)
class ModuleRule:
    """How one op maps onto a torch module whose parameters are the node's ``roles`` inputs.

    ``extras`` are state_dict entries the module has beyond its roles (``num_batches_tracked``);
    the graph may hold them as unused weights or not at all.

    A rule with no roles is for a module without parameters (``nn.GELU``): a node becomes it
    only where the source ran it in such a module, i.e. its innermost module (provenance
    stack) has one of the type names ``types``, at that module's path; ``fn`` is then called
    with that type name as ``module_type``.
    """

    op: str
    roles: tuple[str, ...]
    fn: Emit
    extras: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


class ModuleRuleRegistry:
    """Module rules by canonical op name."""

    def __init__(self) -> None:
        self._rules: Registry[str, ModuleRule] = Registry("torch module rule")

    def __call__(
        self,
        op: str,
        roles: tuple[str, ...] = ("weight", "bias"),
        extras: tuple[str, ...] = (),
        types: tuple[str, ...] = (),
    ) -> Callable[[Emit], Emit]:
        if bool(roles) == bool(types):
            raise ValueError(f"module rule {op!r}: weight roles or source module types, not both")

        def deco(fn: Emit) -> Emit:
            self._rules.register(op, ModuleRule(op, tuple(roles), fn, tuple(extras), tuple(types)))
            return fn

        return deco

    def get(self, op: str) -> ModuleRule | None:
        return self._rules.get(op)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def copy(self) -> ModuleRuleRegistry:
        new = ModuleRuleRegistry()
        new._rules = self._rules.copy()
        return new


@dataclass(eq=False)
class GroupModule:
    """Nodes that together are one call of a torch module at ``prefix`` built by ``ctor``,
    whose parameters (name -> weight) are ``roles``.

    The call ``self.<prefix>(*args)`` (each arg a Value, or a list of Values passed as a
    tuple) stands where the last of ``nodes`` (graph order) stood; it assigns ``target``
    (a Value, None for a result nothing reads, or a list: a tuple, nested as the module
    returns it). No node outside the group reads a value of it other than ``target``'s, and
    none reads those before the call.
    """

    prefix: str
    ctor: ast.expr
    roles: dict[str, Weight]
    nodes: list[Node]
    args: list[Value | list[Value]]
    target: list[Any]

    @property
    def anchor(self) -> Node:
        return self.nodes[-1]

    def results(self) -> list[Value]:
        out: list[Value] = []

        def walk(t: Any) -> None:
            if isinstance(t, list):
                for x in t:
                    walk(x)
            elif t is not None:
                out.append(t)

        walk(self.target)
        return out


GroupRule = Callable[[Graph], list[GroupModule]]
GROUP_RULES: list[GroupRule] = []


def group_rule(fn: GroupRule) -> GroupRule:
    """Register a finder of ``GroupModule``s (run on the graph as the codegen emits it)."""
    GROUP_RULES.append(fn)
    return fn


GraphRewrite = Callable[[Graph], Graph]
GRAPH_REWRITES: list[GraphRewrite] = []


def graph_rewrite(fn: GraphRewrite) -> GraphRewrite:
    """Register an exact rewrite of the graph into the form the codegen writes as torch
    modules (an ONNX-form LSTM node into the nodes of an nn.LSTM call): it returns the graph
    itself when it changes nothing, else a changed copy. ``as_generated`` compares with its
    result, as the code computes it."""
    GRAPH_REWRITES.append(fn)
    return fn


EMITTERS = EmitterRegistry()
MODULE_RULES = ModuleRuleRegistry()
emitter = EMITTERS
module_rule = MODULE_RULES
unsupported = EMITTERS.unsupported


def spelled_out(fn: Emit) -> Emit:
    """Mark an emitter whose run-time helper runs its op's decomposition (msc.ops.decompose)
    op for op: torch.export captures the helper as those ops, so a re-import of the code
    reads back as the decomposition, which ``codegen.torch.as_generated`` compares with."""
    fn.spelled_out = True  # type: ignore[attr-defined]
    return fn


def unrolled(fn: Emit) -> Emit:
    """Mark an emitter whose run-time helper loops in Python over a size known when the
    module is exported (a recurrent layer's time steps): torch.export unrolls the loop, so a
    re-import reads back as the steps, which no graph of the op is equal to. The check
    compares like with like by saying so (``codegen.torch.unrolled_nodes``) and letting the
    outputs decide."""
    fn.unrolled = True  # type: ignore[attr-defined]
    return fn
