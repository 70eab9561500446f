"""The JAX emitter registry: one function per canonical op (``@emitter("conv")``).

# NOTE: invariants
# - An emitter is ``fn(e, node, *args)``: ``args`` are the Python expressions of the node's
#   inputs (None for an absent optional one); it returns the expression of the output (or a
#   tuple of expressions, one per output). Attributes enter code only as ``repr`` of numbers,
#   bools, lists of them, or ``repr`` of a string.
# - Registering an op twice is an error; ``EMITTERS`` is the default registry.
# - ``@spelled_out`` marks an emitter whose code JAX lowers to the op's decomposition
#   (msc.ops.decompose) and the frontend's fusions do not recover: a re-export of the code
#   reads back as that decomposition, which ``codegen.jax.as_generated`` compares with.
# - ``@computes(attr=value)`` marks an emitter whose code computes its op with those
#   attributes, one behaviour the op's own attributes allow (lax.top_k orders ties by index,
#   one order of a topk with ``stable=False``): ``as_generated`` sets them.
"""

from __future__ import annotations

from collections.abc import Callable

from msc.ir.registry import Registry

__all__ = ["EMITTERS", "EmitterRegistry", "emitter", "spelled_out", "computes"]


class EmitterRegistry(Registry[str, Callable[..., object]]):
    """JAX emitters by canonical op name;
    ``@emitter("op")`` registers one (``Registry.__call__``)."""

    def __init__(self, what: str = "JAX emitter") -> None:
        super().__init__(what)


EMITTERS = EmitterRegistry()
emitter = EMITTERS


def spelled_out(fn: Callable[..., object]) -> Callable[..., object]:
    """Mark an emitter whose code re-exports as its op's decomposition (see the NOTE)."""
    fn.spelled_out = True  # type: ignore[attr-defined]
    return fn


def computes(**attrs: object) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """Mark an emitter whose code computes its op with ``attrs`` (see the NOTE)."""

    def mark(fn: Callable[..., object]) -> Callable[..., object]:
        fn.computes = attrs  # type: ignore[attr-defined]
        return fn

    return mark
