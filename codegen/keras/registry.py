"""The Keras emitter registry: one function per canonical op (``@emitter("conv")``).

# NOTE: invariants
# - An emitter is ``fn(e, node)`` and returns the Python expression of the node's output
#   (``layers.Dense(8, name='fc1')(x)``), built from ``e``: the inputs' variable names
#   (``e.arg(i)``), folded weight values (``e.const(i)``), the layer name to use
#   (``e.layer_name``) and the arrays the layer's weights are set to (``e.weights(...)``).
# - Every string from the model reaches the source through ``repr()`` or a sanitized name.
# - An emitter raises ``Unsupported`` for a use it cannot write; every refusal is collected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from msc.ir.registry import Registry

__all__ = ["EmitterRegistry", "EMITTERS", "emitter"]


class EmitterRegistry:
    """Emitters by canonical op name."""

    def __init__(self) -> None:
        self._by_op: Registry[str, Callable[..., str]] = Registry("Keras emitter")

    def emitter(self, *ops: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
        def deco(fn: Callable[..., str]) -> Callable[..., str]:
            for op in ops:
                self._by_op.register(op, fn)
            return fn

        return deco

    def get(self, op: str) -> Callable[..., str] | None:
        return self._by_op.get(op)

    def __contains__(self, op: object) -> bool:
        return op in self._by_op

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_op)


EMITTERS = EmitterRegistry()
emitter = EMITTERS.emitter
