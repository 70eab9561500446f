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

from collections.abc import Callable

from msc.ir.registry import Registry

__all__ = ["EmitterRegistry", "EMITTERS", "emitter"]


class EmitterRegistry(Registry[str, Callable[..., object]]):
    """Keras emitters by canonical op name;
    ``@emitter("op")`` registers one (``Registry.__call__``)."""

    def __init__(self, what: str = "Keras emitter") -> None:
        super().__init__(what)


EMITTERS = EmitterRegistry()
emitter = EMITTERS
