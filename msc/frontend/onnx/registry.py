"""The ONNX converter registry: one function per (domain, op type, since-version).

# NOTE: invariants
# - A converter is chosen by the newest ``since`` <= the model's opset for its domain; an opset
#   older than every converter of an op is an error naming both.
# - Registering the same (domain, op, since) twice is an error. ``CONVERTERS`` is the default
#   registry; tests can build their own ``ConverterRegistry``.
# - A converter's signature mirrors the op: ``def gemm(ctx, a, b, c=None, *, alpha=1.0, ...)``.
#   Positional parameters are the ONNX inputs (absent optional ones are None), keyword-only
#   parameters are the ONNX attributes with their ONNX names and defaults. An attribute the
#   signature does not name makes the node unsupported (it would change the meaning).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["Converter", "ConverterRegistry", "CONVERTERS", "converter", "NoConverter"]


from msc.ir.registry import VersionedRegistry


class NoConverter(LookupError):
    """No converter fits the op and opset; the message says why."""


@dataclass(frozen=True)
class Converter:
    domain: str
    op_type: str
    since: int
    fn: Callable[..., object]
    attrs: frozenset[str] = field(default_factory=frozenset)
    required: frozenset[str] = field(default_factory=frozenset)  # attributes without a default
    takes_any_attr: bool = False
    n_inputs: int = 0
    variadic: bool = False

    @staticmethod
    def of(domain: str, op_type: str, since: int, fn: Callable[..., object]) -> Converter:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[1:]  # drop ctx
        pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return Converter(
            domain=domain,
            op_type=op_type,
            since=since,
            fn=fn,
            attrs=frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY),
            required=frozenset(
                p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty
            ),
            takes_any_attr=any(p.kind is p.VAR_KEYWORD for p in params),
            n_inputs=len(pos),
            variadic=any(p.kind is p.VAR_POSITIONAL for p in params),
        )


class ConverterRegistry:
    """Converters by (domain, op_type), each a list sorted by ``since``."""

    def __init__(self) -> None:
        self._by_op: VersionedRegistry[tuple[str, str], Converter] = VersionedRegistry(
            "ONNX converter (domain, op)"
        )

    def register(self, conv: Converter) -> Converter:
        return self._by_op.register((conv.domain, conv.op_type), conv.since, conv)

    def converter(
        self, op_type: str, since: int = 1, domain: str = ""
    ) -> Callable[[Callable[..., object]], Callable[..., object]]:
        """Decorator: ``@converter("Conv", since=11)``."""

        def deco(fn: Callable[..., object]) -> Callable[..., object]:
            self.register(Converter.of(domain, op_type, since, fn))
            return fn

        return deco

    def lookup(self, op_type: str, opset: int, domain: str = "") -> Converter:
        """The converter for ``op_type`` at ``opset``; raises NoConverter naming both."""
        versions = self._by_op.versions((domain, op_type))
        if not versions:
            raise NoConverter(f"no converter for {_label(domain, op_type)}")
        best = self._by_op.lookup((domain, op_type), opset)
        if best is None:
            raise NoConverter(
                f"model opset {opset} is older than every converter of "
                f"{_label(domain, op_type)} (the oldest is since {versions[0]})"
            )
        return best

    def ops(self) -> Iterator[tuple[str, str, list[int]]]:
        """(domain, op_type, since-versions) for every registered op, sorted."""
        for domain, op in self._by_op:
            yield domain, op, self._by_op.versions((domain, op))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            key = ("", key)
        return key in self._by_op


def _label(domain: str, op_type: str) -> str:
    return f"{domain}::{op_type}" if domain else op_type


CONVERTERS = ConverterRegistry()
converter = CONVERTERS.converter
