"""Symbolic counts: polynomials over named dims, for FLOPs, bytes and element counts.

# NOTE: invariants
# - A ``Poly`` is a sum of integer-coefficient monomials over symbol names (``2*batch*seq``);
#   coefficients are never negative here (counts only), so a Poly is monotone in every symbol.
# - An unknown dim (``None`` in a shape, an unknown rank) makes the whole count unknown:
#   functions return ``None`` rather than guess.
# - ``Poly`` is immutable and hashable; ``str()`` is deterministic (monomials sorted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from msc.ir.symexpr import spell
from msc.ir.types import Dim, SymDim, SymExpr, TensorType, ValueType

__all__ = ["Poly", "numel", "nbytes", "human"]

_Mono = tuple[str, ...]  # sorted symbol names, repeated for powers


@dataclass(frozen=True, slots=True)
class Poly:
    """An integer polynomial over dim symbols: ``{("batch",): 2, (): 8}`` is ``2*batch + 8``."""

    terms: tuple[tuple[_Mono, int], ...] = ()

    @staticmethod
    def of(x: int | str | Poly) -> Poly:
        if isinstance(x, Poly):
            return x
        if isinstance(x, str):
            return Poly((((x,), 1),))
        return Poly((((), int(x)),) if x else ())

    @staticmethod
    def _make(d: Mapping[_Mono, int]) -> Poly:
        return Poly(tuple(sorted((m, c) for m, c in d.items() if c)))

    def __add__(self, other: int | Poly) -> Poly:
        d = dict(self.terms)
        for m, c in Poly.of(other).terms:
            d[m] = d.get(m, 0) + c
        return Poly._make(d)

    __radd__ = __add__

    def __mul__(self, other: int | Poly) -> Poly:
        o = Poly.of(other)
        d: dict[_Mono, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in o.terms:
                m = tuple(sorted(m1 + m2))
                d[m] = d.get(m, 0) + c1 * c2
        return Poly._make(d)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return bool(self.terms)

    @property
    def symbols(self) -> set[str]:
        return {s for m, _ in self.terms for s in m}

    @property
    def is_constant(self) -> bool:
        return all(not m for m, _ in self.terms)

    def constant(self) -> int:
        """The value of a constant polynomial (raises if it has symbols)."""
        if not self.is_constant:
            raise ValueError(f"{self} is not a constant")
        return sum(c for _, c in self.terms)

    def subs(self, binding: Mapping[str, int]) -> Poly:
        """Substitute the bound symbols; unbound ones stay symbolic."""
        d: dict[_Mono, int] = {}
        for m, c in self.terms:
            rest: list[str] = []
            for s in m:
                if s in binding:
                    c *= binding[s]
                else:
                    rest.append(s)
            key = tuple(rest)
            d[key] = d.get(key, 0) + c
        return Poly._make(d)

    def evaluate(self, binding: Mapping[str, int], default: int = 1) -> int:
        """A number: bound symbols from ``binding``, any other symbol taken as ``default``."""
        total = 0
        for m, c in self.terms:
            for s in m:
                c *= binding.get(s, default)
            total += c
        return total

    def json(self) -> int | str:
        """An int when constant, else the formula string."""
        return self.constant() if self.is_constant else str(self)

    def format(self, human_units: bool = False, unit: str = "") -> str:
        """``2*batch*seq + 8``; with ``human_units`` coefficients read ``1.77M*batch`` (with
        ``unit="B"``: ``16.00 KiB*batch``)."""
        if not self.terms:
            return "0"
        parts = []
        # Highest degree first reads like a formula.
        for m, c in sorted(self.terms, key=lambda t: (-len(t[0]), t[0])):
            syms = "*".join(_power(m))
            coef = human(c, unit) if human_units else str(c)
            if not syms:
                parts.append(coef)
            elif c == 1:
                parts.append(syms)
            else:
                parts.append(f"{coef}*{syms}")
        return " + ".join(parts)

    def __str__(self) -> str:
        return self.format()


def _power(m: _Mono) -> list[str]:
    out: list[str] = []
    for s in sorted(set(m)):
        k = m.count(s)
        out.append(s if k == 1 else f"{s}^{k}")
    return out


def dim_poly(d: Dim) -> Poly | None:
    """A dim as a Poly: an expression's terms with its symbols by name (a floordiv, mod, min
    or max stands as one symbol spelled as itself); None for an unknown dim."""
    if isinstance(d, SymDim):
        return Poly.of(d.name)
    if isinstance(d, int):
        return Poly.of(d)
    if isinstance(d, SymExpr):
        total = Poly()
        for mono, c in d.terms:
            term = Poly.of(c)
            for atom in mono:
                term = term * Poly.of(atom.name if isinstance(atom, SymDim) else spell(atom, False))
            total = total + term
        return total
    return None


def product(dims: Iterable[Dim]) -> Poly | None:
    """The product of dims as a Poly, None if any is unknown."""
    p = Poly.of(1)
    for d in dims:
        q = dim_poly(d)
        if q is None:
            return None
        p = p * q
    return p


def numel(t: ValueType) -> Poly | None:
    """Element count of a tensor type, symbolic where dims are symbols; None when unknown (an
    unknown rank, a sequence or an optional, whose length is known only at run time)."""
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    return product(t.shape)


def nbytes(t: ValueType) -> Poly | None:
    """Bytes of a value type, symbolic where dims are symbols; None for unknown rank, a
    dtype with no fixed size (str), or a sequence / optional."""
    n = numel(t)
    return None if n is None or t.dtype.is_string else n * t.dtype.itemsize


def human(n: float, unit: str = "") -> str:
    """3_540_000 -> "3.54M"; bytes with unit="B" use binary prefixes (KiB, MiB)."""
    if unit == "B":
        for p, s in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(n) >= p:
                return f"{n / p:.2f} {s}"
        return f"{int(n)} B"
    for p, s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= p:
            return f"{n / p:.3g}{s}{unit}"
    return f"{int(n) if float(n).is_integer() else n}{unit}"
