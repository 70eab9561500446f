"""The Keras converter registry: one function per layer class (``@converter("Dense")``).

# NOTE: invariants
# - A converter is ``fn(ctx, layer, *inputs)``: the layer object (its configuration is read
#   from its attributes) and the msc values of the tensors its call received, in call order.
#   It returns one value or a tuple of them, one per output tensor of the call.
# - A converter raises ``Unsupported`` for a configuration it does not translate (a
#   ``channels_first`` layer where it only reads ``channels_last``, an option it ignores that
#   is not at its default); the importer collects every refusal into one error.
# - Registering a layer class twice is an error. ``CONVERTERS`` is the default registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from msc.ir.registry import Registry

__all__ = ["ConverterRegistry", "CONVERTERS", "converter"]


class ConverterRegistry:
    """Converters by Keras layer class name (``Conv2D``)."""

    def __init__(self) -> None:
        self._by_class: Registry[str, Callable[..., object]] = Registry("Keras converter")

    def converter(self, *classes: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
        """Decorator: ``@converter("Add")``; several classes share one function."""

        def deco(fn: Callable[..., object]) -> Callable[..., object]:
            for c in classes:
                self._by_class.register(c, fn)
            return fn

        return deco

    def get(self, cls: str) -> Callable[..., object] | None:
        return self._by_class.get(cls)

    def __contains__(self, cls: object) -> bool:
        return cls in self._by_class

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_class)


CONVERTERS = ConverterRegistry()
converter = CONVERTERS.converter
