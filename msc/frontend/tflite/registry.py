"""The TFLite converter registry: one function per builtin op (or registered custom code).

# NOTE: invariants
# - A converter's signature mirrors the op: ``def conv_2d(ctx, x, filter, bias=None, *,
#   padding, stride_w, stride_h, dilation_w_factor=1, dilation_h_factor=1)``. Positional
#   parameters are the operator's inputs (an absent optional one, index -1, is None);
#   keyword-only parameters are fields of its options table by their schema names.
# - An options field the signature does not name must hold its schema default (or be one the
#   importer handles for every op: the fused activation, and the kernels' own implementation
#   choices listed in ``HANDLED``); any other value makes the node unsupported, naming it.
# - Registering an op twice is an error. ``CONVERTERS`` is the default registry; tests build
#   their own with ``ConverterRegistry()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from msc.ir.registry import Registry

__all__ = [
    "Converter",
    "ConverterRegistry",
    "CONVERTERS",
    "COMPLEX_READERS",
    "converter",
    "HANDLED",
    "REASONS",
]

# Options fields handled by the importer for every op, with why they need no converter.
HANDLED = {
    "fused_activation_function": "split into its own node after the op (a recurrent cell's "
    "converter reads it: its cell activation)",
    "asymmetric_quantize_inputs": "how a hybrid kernel quantizes its float input at run time",
    "pot_scale_int16": "how an int16 kernel rescales (power-of-two scales or not)",
    "quantized_bias_type": "the accumulator type of a quantized kernel",
}


@dataclass(frozen=True)
class Converter:
    op: str
    fn: Callable[..., object]
    options: frozenset[str] = field(default_factory=frozenset)
    n_inputs: int = 0
    required: int = 0  # inputs without a default
    variadic: bool = False

    @staticmethod
    def of(op: str, fn: Callable[..., object]) -> Converter:
        params = list(inspect.signature(fn).parameters.values())[1:]  # drop ctx
        pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return Converter(
            op=op,
            fn=fn,
            options=frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY),
            n_inputs=len(pos),
            required=sum(1 for p in pos if p.default is p.empty),
            variadic=any(p.kind is p.VAR_POSITIONAL for p in params),
        )


class ConverterRegistry:
    """Converters by TFLite op name (``CONV_2D``; a custom op by its custom code)."""

    def __init__(self) -> None:
        self._by_op: Registry[str, Converter] = Registry("TFLite converter")

    def register(self, conv: Converter) -> Converter:
        return self._by_op.register(conv.op, conv)

    def converter(self, *ops: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
        """Decorator: ``@converter("ADD")``; several names share one function."""

        def deco(fn: Callable[..., object]) -> Callable[..., object]:
            for op in ops:
                self.register(Converter.of(op, fn))
            return fn

        return deco

    def get(self, op: str) -> Converter | None:
        return self._by_op.get(op)

    def __contains__(self, op: object) -> bool:
        return op in self._by_op

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_op)


# Ops whose converters read a complex input in msc's real layout (a trailing dim of 2); any
# other op with a complex input is unsupported, since its axes and shapes would be off by it.
COMPLEX_READERS = frozenset({"CAST", "SQUEEZE", "REAL", "IMAG", "COMPLEX_ABS"})

CONVERTERS = ConverterRegistry()
converter = CONVERTERS.converter

# Builtin ops msc does not read, with the reason (docs/ops.md prints them); an op neither
# converted nor listed here is reported as "no converter".
REASONS: dict[str, str] = {}


def not_read(reason: str, *ops: str) -> None:
    """Record why ``ops`` have no converter (shown in docs/ops.md and in the error)."""
    for op in ops:
        if op in REASONS:
            raise ValueError(f"TFLite op {op!r} has a reason recorded twice")
        REASONS[op] = reason
