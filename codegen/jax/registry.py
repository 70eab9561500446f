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


class EmitterRegistry(Registry[str, Callable[..., object]]):
    """JAX emitters by canonical op name;
    ``@emitter("op")`` registers one (``Registry.__call__``)."""

    def __init__(self, what: str = "JAX emitter") -> None:
        super().__init__(what)


EMITTERS = EmitterRegistry()
emitter = EMITTERS
