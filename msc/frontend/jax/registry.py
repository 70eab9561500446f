"""The StableHLO converter registry: one function per op (``@converter("stablehlo.add")``).

# NOTE: invariants
# - A converter is ``fn(ctx, op, *inputs)``: ``op`` is the ``ShloOp`` (its attributes read
#   through ``op.attr``), the inputs are msc values in operand order.
# - Registering an op twice is an error; ``CONVERTERS`` is the default registry.
"""

from __future__ import annotations

from collections.abc import Callable

from msc.ir.registry import Registry

__all__ = ["CONVERTERS", "ConverterRegistry", "converter", "REASONS"]

# Ops msc refuses by name, with why.
REASONS = {
    "stablehlo.rng_bit_generator": "random bits are state, not a function of the inputs",
    "stablehlo.rng": "random numbers are state, not a function of the inputs",
}


class ConverterRegistry:
    """Converters by StableHLO / CHLO op name."""

    def __init__(self) -> None:
        self._by_op: Registry[str, Callable[..., object]] = Registry("StableHLO converter")

    def converter(self, *ops: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
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


CONVERTERS = ConverterRegistry()
converter = CONVERTERS.converter
