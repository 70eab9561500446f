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


class ConverterRegistry(Registry[str, Callable[..., object]]):
    """Converters by StableHLO / CHLO op name;
    ``@converter("op")`` registers one (``Registry.__call__``)."""

    def __init__(self, what: str = "StableHLO converter") -> None:
        super().__init__(what)


CONVERTERS = ConverterRegistry()
converter = CONVERTERS
