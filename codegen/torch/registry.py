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
# - An op that cannot be emitted is declared with ``unsupported(op, reason)``; coverage tests
#   and ``coverage_markdown()`` read both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EmitterRegistry",
    "ModuleRule",
    "ModuleRuleRegistry",
    "EMITTERS",
    "MODULE_RULES",
    "emitter",
    "module_rule",
    "unsupported",
]

Emit = Callable[..., Any]


class EmitterRegistry:
    """Emitters by canonical op name, plus ops declared unsupported with a reason."""

    def __init__(self) -> None:
        self._fns: dict[str, Emit] = {}
        self._gaps: dict[str, str] = {}

    def __call__(self, *ops: str) -> Callable[[Emit], Emit]:
        """Decorator: ``@emitter("relu")`` (several ops may share one function)."""

        def deco(fn: Emit) -> Emit:
            for op in ops:
                self.register(op, fn)
            return fn

        return deco

    def register(self, op: str, fn: Emit) -> None:
        if op in self._fns or op in self._gaps:
            raise ValueError(f"torch emitter for op {op!r} is registered twice")
        self._fns[op] = fn

    def unsupported(self, op: str, reason: str) -> None:
        """Declare that ``op`` has no emitter, and why."""
        if op in self._fns or op in self._gaps:
            raise ValueError(f"torch emitter for op {op!r} is registered twice")
        if not reason:
            raise ValueError(f"unsupported op {op!r} needs a reason")
        self._gaps[op] = reason

    def fill(self, op: str, fn: Emit) -> None:
        """Register ``fn`` for an op declared unsupported, closing that gap (an emitter
        family added later; registering over an existing emitter is still an error)."""
        if op in self._fns:
            raise ValueError(f"torch emitter for op {op!r} is registered twice")
        self._gaps.pop(op, None)
        self._fns[op] = fn

    def get(self, op: str) -> Emit | None:
        return self._fns.get(op)

    def reason(self, op: str) -> str:
        return self._gaps.get(op, "no emitter")

    def __contains__(self, op: object) -> bool:
        return op in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._fns))

    def gaps(self) -> dict[str, str]:
        return dict(self._gaps)

    def copy(self) -> EmitterRegistry:
        new = EmitterRegistry()
        new._fns = dict(self._fns)
        new._gaps = dict(self._gaps)
        return new


@dataclass(frozen=True, slots=True)
class ModuleRule:
    """How one op maps onto a torch module whose parameters are the node's ``roles`` inputs.

    ``extras`` are state_dict entries the module has beyond its roles (``num_batches_tracked``);
    the graph may hold them as unused weights or not at all.
    """

    op: str
    roles: tuple[str, ...]
    fn: Emit
    extras: tuple[str, ...] = ()


class ModuleRuleRegistry:
    """Module rules by canonical op name."""

    def __init__(self) -> None:
        self._rules: dict[str, ModuleRule] = {}

    def __call__(
        self, op: str, roles: tuple[str, ...] = ("weight", "bias"), extras: tuple[str, ...] = ()
    ) -> Callable[[Emit], Emit]:
        def deco(fn: Emit) -> Emit:
            if op in self._rules:
                raise ValueError(f"torch module rule for op {op!r} is registered twice")
            self._rules[op] = ModuleRule(op, tuple(roles), fn, tuple(extras))
            return fn

        return deco

    def get(self, op: str) -> ModuleRule | None:
        return self._rules.get(op)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._rules))

    def copy(self) -> ModuleRuleRegistry:
        new = ModuleRuleRegistry()
        new._rules = dict(self._rules)
        return new


EMITTERS = EmitterRegistry()
MODULE_RULES = ModuleRuleRegistry()
emitter = EMITTERS
module_rule = MODULE_RULES
unsupported = EMITTERS.unsupported
