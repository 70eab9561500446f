"""The JAX emitter registry: one function per canonical op (``@emitter("conv")``).

# NOTE: invariants
# - An emitter is ``fn(e, node, *args)``: ``args`` are the Python expressions of the node's
#   inputs (None for an absent optional one); it returns the expression of the output (or a
#   tuple of expressions, one per output). Attributes enter code only as ``repr`` of numbers,
#   bools, lists of them, or ``repr`` of a string.
# - Registering an op twice is an error; ``EMITTERS`` is the default registry.
"""

from __future__ import annotations

from collections.abc import Callable

from msc.ir.registry import Registry

__all__ = ["EMITTERS", "EmitterRegistry", "emitter"]


class EmitterRegistry:
    def __init__(self) -> None:
        self._by_op: Registry[str, Callable[..., object]] = Registry("JAX emitter")

    def emitter(self, *ops: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
        def deco(fn: Callable[..., object]) -> Callable[..., object]:
            for op in ops:
                self._by_op.register(op, fn)
            return fn

        return deco

    def get(self, op: str) -> Callable[..., object] | None:
        return self._by_op.get(op)

    def __contains__(self, op: object) -> bool:
        return op in self._by_op

    def ops(self) -> list[str]:
        return sorted(self._by_op)


EMITTERS = EmitterRegistry()
emitter = EMITTERS.emitter
