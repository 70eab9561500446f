"""Symbolic dims that are expressions: ``2*s0``, ``seq + 1``, ``floordiv(h - 1, 2) + 1``.

A dim is an int, a ``SymDim`` (a named symbol with a range), or a ``SymExpr``: an integer
polynomial over atoms, where an atom is a symbol or an integer function the polynomial cannot
express (``floordiv``, ``mod``, ``min``, ``max``) of canonical dims. The arithmetic here
returns dims in canonical form, so equal expressions are equal values with equal hashes.

# NOTE: invariants
# - Canonical form: monomials (sorted tuples of atoms, repeated for powers) with non-zero
#   integer coefficients, sorted by their spelling; the constant monomial is ``()``.
# - A result that is a constant is an ``int``; one that is ``1*symbol`` is that ``SymDim``;
#   only anything else is a ``SymExpr``. Functions simplify what is exact for integers
#   (``floordiv(4*s + 3, 2)`` is ``2*s + floordiv(3, 2)`` = ``2*s + 1``; min/max of dims whose
#   difference is a constant pick one); nothing else is assumed.
# - Symbols are integers. The spelling (``str``) is the text format's, symbols with ranges.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from itertools import permutations

from msc.ir.types import Dim, Func, ShapeError, SymDim, SymExpr

__all__ = [
    "SymExpr",
    "Func",
    "add",
    "sub",
    "mul",
    "neg",
    "floordiv",
    "ceildiv",
    "mod",
    "minimum",
    "maximum",
    "subs",
    "symbols",
    "FUNCS",
    "spell",
    "bounds",
    "at_least",
    "apply",
    "MAX_TERMS",
    "MAX_DEGREE",
    "total",
    "product",
    "unranged",
    "Renaming",
    "exact_div",
]

FUNCS = ("floordiv", "mod", "min", "max")

# Products of sums multiply their terms; a real shape has a handful. A larger expression is a
# hostile or corrupt model, refused before it costs memory (and time: canonical form sorts
# the terms, and each monomial is spelt to sort it).
MAX_TERMS = 4096
# Atoms in one monomial (``s*s*...*s``): a real shape's products have a few.
MAX_DEGREE = 256

_Mono = tuple  # tuple of atoms


# ---------------------------------------------------------------------------- spelling
def _atom_str(a: object, ranges: bool = True) -> str:
    if isinstance(a, SymDim):
        from msc.ir.spelling import format_dim

        return format_dim(a) if ranges else a.name
    if isinstance(a, Func):
        return f"{a.op}(" + ", ".join(spell(x, ranges) for x in a.args) + ")"
    raise TypeError(f"not an atom: {a!r}")


def spell(d: Dim, ranges: bool = True) -> str:
    """The spelling of a dim: ``7``, ``batch{1..64}``, ``2*s0 + 1``."""
    if isinstance(d, int):
        return str(d)
    if isinstance(d, SymExpr):
        return _format_terms(d.terms, ranges)
    return _atom_str(d, ranges)


def _mono_str(m: _Mono, ranges: bool) -> str:
    out = []
    for a in m:
        s = _atom_str(a, ranges)
        out.append(s)
    return "*".join(out)


def _format_terms(terms: Iterable[tuple[_Mono, int]], ranges: bool = True) -> str:
    parts: list[str] = []
    const = 0
    for m, c in terms:
        if not m:
            const = c
            continue
        body = _mono_str(m, ranges)
        mag = abs(c)
        piece = body if mag == 1 else f"{mag}*{body}"
        if not parts:
            parts.append(piece if c > 0 else f"-{piece}")
        else:
            parts.append(("+ " if c > 0 else "- ") + piece)
    if const or not parts:
        if not parts:
            parts.append(str(const))
        else:
            parts.append(("+ " if const > 0 else "- ") + str(abs(const)))
    return " ".join(parts)


@functools.lru_cache(maxsize=1 << 16)
def _key(a: object) -> str:
    """An atom's sort key, its spelling (cached: sorting a monomial spells each atom)."""
    return _atom_str(a)


# ---------------------------------------------------------------------------- canonical form
def _terms(d: Dim) -> dict[_Mono, int]:
    if isinstance(d, bool):
        raise TypeError("a dim is not a bool")
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, SymDim):
        return {(d,): 1}
    if isinstance(d, SymExpr):
        return dict(d.terms)
    if isinstance(d, Func):
        return {(d,): 1}
    raise TypeError(f"not a dim: {d!r}")


def _make(terms: Mapping[_Mono, int]) -> Dim:
    if len(terms) > MAX_TERMS:
        raise ShapeError(f"a dim expression of more than {MAX_TERMS} terms is not plausible")
    items = sorted(((m, c) for m, c in terms.items() if c), key=lambda t: _mono_key(t[0]))
    if not items:
        return 0
    if len(items) == 1:
        m, c = items[0]
        if not m:
            return c
        if c == 1 and len(m) == 1 and isinstance(m[0], SymDim):
            return m[0]
    return SymExpr(tuple(items))


def _mono_key(m: _Mono) -> tuple:
    # The constant term sorts last, so that it prints last; higher degrees first.
    return (not m, -len(m), tuple(_key(a) for a in m))


def _as_atom(d: Dim) -> object:
    """A dim that is a single atom with coefficient 1 (a SymDim or a lone Func), else None."""
    t = _terms(d)
    if len(t) == 1:
        ((m, c),) = t.items()
        if c == 1 and len(m) == 1:
            return m[0]
    return None


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    t = _terms(a)
    for m, c in _terms(b).items():
        t[m] = t.get(m, 0) + c
    return _make(t)


def neg(a: Dim) -> Dim:
    if isinstance(a, int):
        return -a
    return _make({m: -c for m, c in _terms(a).items()})


def sub(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return add(a, neg(b))


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    out: dict[_Mono, int] = {}
    ta, tb = _terms(a), _terms(b)
    if len(ta) * len(tb) > MAX_TERMS:
        raise ShapeError(f"a dim expression of more than {MAX_TERMS} terms is not plausible")
    for m1, c1 in ta.items():
        for m2, c2 in tb.items():
            m = _monomial(m1 + m2)
            out[m] = out.get(m, 0) + c1 * c2
    return _make(out)


def _monomial(atoms: tuple) -> _Mono:
    if len(atoms) > MAX_DEGREE:
        raise ShapeError(f"a dim expression of degree more than {MAX_DEGREE} is not plausible")
    return tuple(sorted(atoms, key=_key))


def total(dims: Iterable[Dim]) -> Dim:
    """The sum of ``dims``, put in canonical form once (adding one at a time re-sorts the
    whole sum at each step: quadratic in the number of terms)."""
    out: dict[_Mono, int] = {}
    for d in dims:
        for m, c in _terms(d).items():
            out[m] = out.get(m, 0) + c
        if len(out) > MAX_TERMS:
            raise ShapeError(f"a dim expression of more than {MAX_TERMS} terms is not plausible")
    return _make(out)


def product(dims: Iterable[Dim]) -> Dim:
    """The product of ``dims``: ints and lone atoms gathered into one monomial sorted once,
    sums multiplied in (linear in the number of factors, not quadratic)."""
    coef, atoms, sums = 1, [], []
    for d in dims:
        if isinstance(d, int):
            coef *= d
            continue
        t = _terms(d)
        if len(t) == 1:
            ((m, c),) = t.items()
            coef *= c
            atoms.extend(m)
            if len(atoms) > MAX_DEGREE:
                _monomial(tuple(atoms))  # refused: too many factors
        else:
            sums.append(d)
    out: Dim = _make({_monomial(tuple(atoms)): coef})
    for d in sums:
        out = mul(out, d)
    return out


def _func(op: str, *args: Dim) -> Dim:
    return _make({(Func(op, tuple(args)),): 1})


def floordiv(a: Dim, b: Dim) -> Dim:
    """floor(a / b) for integers (b != 0)."""
    if isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("floordiv of a dim by 0")
        if b == 1:
            return a
        if isinstance(a, int):
            return a // b
        if b < 0:
            return floordiv(neg(a), -b)
        # floor((b*q + r) / b) = q + floor(r / b) for integer q: pull out what b divides.
        whole: dict[_Mono, int] = {}
        rest: dict[_Mono, int] = {}
        for m, c in _terms(a).items():
            q, r = divmod(c, b)
            if not m:
                whole[m] = q
                if r:
                    rest[m] = r
                continue
            if r == 0:
                whole[m] = q
            else:
                rest[m] = c
        r = _make(rest)
        if isinstance(r, int):
            return add(_make(whole), r // b)
        if all(c < 0 for m, c in _terms(r).items() if m):
            # floor(-x / b) = -floor((x + b - 1) / b): the argument keeps positive terms.
            return sub(_make(whole), floordiv(add(neg(r), b - 1), b))
        return add(_make(whole), _func("floordiv", r, b))
    if isinstance(a, int) and a == 0:
        return 0
    if a == b:
        return 1
    return _func("floordiv", a, b)


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """``a / b`` when ``b`` is one term (``16*seq``) dividing every term of ``a`` exactly
    (``32*batch*seq / 16*seq = 2*batch``), else None: the quotient a reshape's -1 stands for."""
    tb = _terms(b)
    if len(tb) != 1:
        return None
    ((mb, cb),) = tb.items()
    out: dict[_Mono, int] = {}
    for m, c in _terms(a).items():
        rest = list(m)
        for atom in mb:
            if atom not in rest:
                return None
            rest.remove(atom)
        q, r = divmod(c, cb)
        if r:
            return None
        out[tuple(rest)] = q
    return _make(out)


def ceildiv(a: Dim, b: Dim) -> Dim:
    """ceil(a / b) = -floor(-a / b)."""
    return neg(floordiv(neg(a), b))


def mod(a: Dim, b: Dim) -> Dim:
    """a mod b with the sign of b (Python's %), for integers (b != 0)."""
    if isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("mod of a dim by 0")
        if isinstance(a, int):
            return a % b
        if b in (1, -1):
            return 0
        rest: dict[_Mono, int] = {}
        for m, c in _terms(a).items():
            r = c % b if not m else (0 if c % b == 0 else c)
            if r:
                rest[m] = r
        r = _make(rest)
        return r % b if isinstance(r, int) else _func("mod", r, b)
    if a == b:
        return 0
    return _func("mod", a, b)


def _extreme(op: str, args: Iterable[Dim]) -> Dim:
    flat: list[Dim] = []
    for a in args:
        atom = _as_atom(a)
        if isinstance(atom, Func) and atom.op == op:
            flat.extend(atom.args)
        else:
            flat.append(a)
    pick = min if op == "min" else max
    ints = [a for a in flat if isinstance(a, int)]
    others: list[Dim] = []
    for a in flat:
        if isinstance(a, int) or a in others:
            continue
        others.append(a)
    if ints:
        others.append(pick(ints))

    # Two dims whose difference is a constant, or whose ranges order them (min(16, t) where
    # t is at most 16): the smaller (larger) one is known.
    def first(x: Dim, y: Dim) -> bool:  # x is provably the min (max) of the two
        lo, hi = bounds(sub(x, y))
        return hi is not None and hi <= 0 if op == "min" else lo is not None and lo >= 0

    kept: list[Dim] = []
    for a in others:
        if any(first(k, a) for k in kept):
            continue
        kept = [k for k in kept if not first(a, k)] + [a]
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=spell)
    return _func(op, *kept)


def minimum(*args: Dim) -> Dim:
    return _extreme("min", args)


def maximum(*args: Dim) -> Dim:
    return _extreme("max", args)


_APPLY = {"floordiv": floordiv, "mod": mod, "min": minimum, "max": maximum}


def apply(op: str, args: Iterable[Dim]) -> Dim:
    """``op`` (one of FUNCS) of ``args``, simplified."""
    return _APPLY[op](*args)


# ---------------------------------------------------------------------------- queries
def _atoms(d: Dim) -> Iterable[object]:
    for m in _terms(d):
        for a in m:
            yield a
            if isinstance(a, Func):
                for x in a.args:
                    yield from _atoms(x)


def symbols(d: Dim) -> set[SymDim]:
    """The symbols ``d`` depends on."""
    if isinstance(d, int):
        return set()
    return {a for a in _atoms(d) if isinstance(a, SymDim)}


def subs(d: Dim, binding: Mapping[str, Dim]) -> Dim:
    """``d`` with symbols replaced by name (by ints or other dims), simplified."""
    if isinstance(d, int):
        return d
    if isinstance(d, SymDim):
        return binding.get(d.name, d)
    total: Dim = 0
    for m, c in _terms(d).items():
        term: Dim = c
        for a in m:
            if isinstance(a, SymDim):
                v: Dim = binding.get(a.name, a)
            else:
                v = apply(a.op, [subs(x, binding) for x in a.args])  # type: ignore[attr-defined]
            term = mul(term, v)
        total = add(total, term)
    return total


def bounds(d: Dim) -> tuple[int | None, int | None]:
    """(lowest, highest) value of ``d`` over its symbols' ranges (a symbol with no lower bound
    is a size: at least 0); None where unbounded or not known."""
    if isinstance(d, int):
        return d, d
    if isinstance(d, SymDim):
        return (d.min if d.min is not None else 0), d.max
    lo_total: int | None = 0
    hi_total: int | None = 0
    for m, c in _terms(d).items():
        lo, hi = 1, 1
        for a in m:
            alo, ahi = _atom_bounds(a)
            lo, hi = _imul(lo, hi, alo, ahi)
        if c >= 0:
            tlo, thi = _scale(lo, c), _scale(hi, c)
        else:
            tlo, thi = _scale(hi, c), _scale(lo, c)
        lo_total = None if lo_total is None or tlo is None else lo_total + tlo
        hi_total = None if hi_total is None or thi is None else hi_total + thi
    return lo_total, hi_total


def _scale(v: int | None, c: int) -> int | None:
    return None if v is None else v * c


def _imul(alo, ahi, blo, bhi):
    """Bounds of a product of two ranges, for non-negative lower bounds (sizes)."""
    if alo is None or blo is None or alo < 0 or blo < 0:
        return None, None
    hi = None if ahi is None or bhi is None else ahi * bhi
    return alo * blo, hi


def _atom_bounds(a: object) -> tuple[int | None, int | None]:
    if isinstance(a, SymDim):
        return bounds(a)
    assert isinstance(a, Func)
    bs = [bounds(x) for x in a.args]
    if a.op in ("min", "max"):
        los = [lo for lo, _ in bs]
        his = [hi for _, hi in bs]
        if a.op == "min":
            lo = None if None in los else min(los)  # type: ignore[type-var]
            hi = min((h for h in his if h is not None), default=None)
        else:
            lo = max((x for x in los if x is not None), default=None)
            hi = None if None in his else max(his)  # type: ignore[type-var]
        return lo, hi
    (nlo, nhi), (dlo, dhi) = bs
    if a.op == "mod" and dlo is not None and dlo > 0:
        return 0, None if dhi is None else dhi - 1
    if a.op == "floordiv" and dlo is not None and dlo > 0 and dlo == dhi:
        return (None if nlo is None else nlo // dlo), (None if nhi is None else nhi // dlo)
    return None, None


def at_least(d: Dim, k: int) -> bool:
    """Whether ``d >= k`` holds for every value of its symbols."""
    lo, _ = bounds(d)
    return lo is not None and lo >= k


def unranged(d: Dim) -> Dim:
    """``d`` with its symbols' ranges dropped."""
    if d is None or isinstance(d, int):
        return d
    return subs(d, {s.name: SymDim(s.name) for s in symbols(d)})


# ---------------------------------------------------------------------------- renaming
# Symbols new to a renaming that one pair of dims may introduce at once (their pairing is
# searched over every permutation: 4! = 24 trials at most).
_MAX_NEW = 4


class Renaming:
    """A one-to-one renaming of one graph's symbols to another's, grown as pairs of dims are
    compared: two exports of one model name the same dim ``s77`` and ``batch``.

    ``equal(a, b)`` says whether ``a`` with its symbols renamed is ``b`` (ranges count unless
    ``ranges=False``), extending the renaming with the pairs that make it so; a pair that
    contradicts the renaming so far (``batch`` already taken by ``s77``) is unequal, and a
    failed comparison leaves the renaming as it was. Symbols new to the renaming that appear
    together in one expression are paired by trying each assignment (at most ``_MAX_NEW``).
    """

    __slots__ = ("fwd", "bwd", "ranges")

    def __init__(self, ranges: bool = True) -> None:
        self.fwd: dict[str, str] = {}
        self.bwd: dict[str, str] = {}
        self.ranges = ranges

    def rename(self, d: Dim, mapping: Mapping[str, str] | None = None) -> Dim:
        """``d`` with its renamed symbols under their new names (ranges kept)."""
        if d is None or isinstance(d, int):
            return d
        m = self.fwd if mapping is None else mapping
        syms = symbols(d)
        if not any(s.name in m for s in syms):
            return d
        return subs(d, {s.name: SymDim(m[s.name], s.min, s.max) for s in syms if s.name in m})

    def _same(self, a: Dim, b: Dim) -> bool:
        return a == b if self.ranges else unranged(a) == unranged(b)

    def equal(self, a: Dim, b: Dim) -> bool:
        """Whether dim ``a`` renamed is dim ``b`` (see the class docstring)."""
        if a is None or b is None or isinstance(a, int) or isinstance(b, int):
            return a == b and type(a) is type(b)
        new_a = sorted({s.name for s in symbols(a)} - self.fwd.keys())
        new_b = sorted({s.name for s in symbols(b)} - self.bwd.keys())
        if not new_a and not new_b:
            return self._same(self.rename(a), b)
        if len(new_a) != len(new_b) or len(new_a) > _MAX_NEW:
            return False
        for perm in permutations(new_b):
            trial = {**self.fwd, **dict(zip(new_a, perm))}
            if self._same(self.rename(a, trial), b):
                for x, y in zip(new_a, perm):
                    self.fwd[x], self.bwd[y] = y, x
                return True
        return False

    def shapes_equal(self, a: Iterable[Dim] | None, b: Iterable[Dim] | None) -> bool:
        """Two shapes dim by dim (None: unknown rank, equal only to itself). The renaming
        grows only when every dim pairs."""
        if a is None or b is None:
            return a is None and b is None
        a, b = tuple(a), tuple(b)
        if len(a) != len(b):
            return False
        if a == b and all(isinstance(d, int) for d in a):
            return True
        fwd, bwd = dict(self.fwd), dict(self.bwd)
        if all(self.equal(x, y) for x, y in zip(a, b)):
            return True
        self.fwd, self.bwd = fwd, bwd
        return False
