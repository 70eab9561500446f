"""The one registry type every table in msc is built on: op schemas, converters, emitters,
decompositions, rewrite patterns.

# NOTE: invariants
# - Entries by key; registering a key twice is an error naming the registry and the key.
# - A registry is an object, never a bare global dict: a test or a subclassed codegen takes a
#   ``copy()`` and registers into that without touching the shared one.
# - Iteration is in key order, so everything generated from a registry (docs/ops.md, coverage
#   tables) is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Registry", "VersionedRegistry"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Registry(Generic[K, T]):
    """Entries of one kind by key; ``what`` names the kind in error messages."""

    __slots__ = ("what", "_items")

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[K, T] = {}

    def register(self, key: K, entry: T) -> T:
        if key in self._items:
            raise ValueError(f"{self.what} {key!r} is registered twice")
        self._items[key] = entry
        return entry

    def __call__(self, *keys: K) -> Callable[[T], T]:
        """Decorator: ``@registry("relu", "gelu")`` registers one entry under several keys."""

        def deco(entry: T) -> T:
            for key in keys:
                self.register(key, entry)
            return entry

        return deco

    def get(self, key: K, default: T | None = None) -> T | None:
        return self._items.get(key, default)

    def __getitem__(self, key: K) -> T:
        try:
            return self._items[key]
        except KeyError:
            raise KeyError(f"no {self.what} {key!r}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        return iter(sorted(self._items))  # keys are strings or tuples of them: sortable

    def items(self) -> list[tuple[K, T]]:
        return [(k, self._items[k]) for k in self]

    def copy(self) -> Registry[K, T]:
        new: Registry[K, T] = Registry(self.what)
        new._items = dict(self._items)
        return new

    def without(self, *keys: K) -> Registry[K, T]:
        """A copy without ``keys`` (a test's registry that lacks some entries)."""
        new = self.copy()
        for key in keys:
            new._items.pop(key, None)
        return new

    def __repr__(self) -> str:
        return f"<Registry of {len(self)} {self.what}(s)>"


class VersionedRegistry(Generic[K, T]):
    """Entries by key and the first version they apply to (an ONNX op's converters by opset):
    ``lookup(key, version)`` is the entry with the newest ``since`` <= version. Registering
    the same (key, since) twice is an error."""

    __slots__ = ("what", "_items")

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[K, list[tuple[int, T]]] = {}

    def register(self, key: K, since: int, entry: T) -> T:
        entries = self._items.setdefault(key, [])
        if any(s == since for s, _ in entries):
            raise ValueError(f"{self.what} {key!r} since {since} is registered twice")
        entries.append((since, entry))
        entries.sort(key=lambda e: e[0])
        return entry

    def lookup(self, key: K, version: int) -> T | None:
        best = None
        for since, entry in self._items.get(key, ()):
            if since <= version:
                best = entry
        return best

    def versions(self, key: K) -> list[int]:
        return [s for s, _ in self._items.get(key, ())]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(sorted(self._items))
