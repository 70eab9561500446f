"""Literals of the text format: string escapes and tensor elements, checked as they are read.

# NOTE: a file is untrusted input: every value that does not fit what it claims to be (an
# escape past Unicode, an element out of its dtype's range, a number where a string goes) is a
# ParseError with its line and column, never another exception.
"""

from __future__ import annotations

import re

import numpy as np

from msc.errors import MscError
from msc.ir.dtype import DType

__all__ = ["ParseError", "unescape", "elements", "parse_stack"]


class ParseError(MscError, ValueError):
    """Text that is not msc's format; the message gives line, column and what was expected."""

    def __init__(self, msg: str, line: int, col: int) -> None:
        super().__init__(f"line {line}, column {col}: {msg}")
        self.line, self.col = line, col


_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def unescape(s: str, line: int, col: int) -> str:
    """The text of string token ``s`` (quotes included), its escapes resolved."""
    out, i = [], 1
    while i < len(s) - 1:
        ch = s[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt in _ESC:
            out.append(_ESC[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = s[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ParseError(f"bad escape \\{nxt}{digits}", line, col + i)
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise ParseError(
                    f"escape \\{nxt}{digits} is not a Unicode character", line, col + i
                )
            out.append(chr(code))
            i += 2 + width
        else:
            raise ParseError(f"unknown escape \\{nxt}", line, col + i)
    return "".join(out)


def elements(items: tuple, dt: DType, line: int, col: int) -> np.ndarray:
    """A tensor literal's elements as a flat array of ``dt``: each of the kind the printer
    writes for it (str; true/false; ints in the dtype's range; numbers for floats, finite
    ones staying finite), else a ParseError naming the first that is not."""
    if dt.is_string:
        ok = [type(x) is str for x in items]
        want = "strings"
    elif dt.is_bool:
        ok = [type(x) is bool for x in items]
        want = "true or false"
    elif dt.is_integer:
        lo, hi = (-(1 << (dt.bits - 1)), 1 << (dt.bits - 1)) if dt.is_signed else (0, 1 << dt.bits)
        ok = [type(x) is int and lo <= x < hi for x in items]
        want = f"integers in [{lo}, {hi - 1}]"
    else:
        ok = [type(x) in (int, float) for x in items]
        want = "numbers"
    if not all(ok):
        bad = items[ok.index(False)]
        shown = "a list" if isinstance(bad, tuple) else repr(bad)
        raise ParseError(f"a {dt.short} tensor's elements are {want}, found {shown}", line, col)
    if dt.is_string:
        arr = np.empty(len(items), object)
        arr[:] = items
        return arr
    if dt.is_bool or dt.is_integer:
        return np.array(items, dtype=dt.to_numpy())
    try:
        wide = np.array([float(x) for x in items], dtype=np.float64)
    except OverflowError:
        raise ParseError(f"a {dt.short} tensor element is out of range", line, col) from None
    with np.errstate(over="ignore", invalid="ignore"):
        arr = wide.astype(dt.to_numpy())
        lost = np.isfinite(wide) & ~np.isfinite(arr.astype(np.complex128))
    if lost.any():
        bad = items[int(np.argmax(lost))]
        raise ParseError(f"{bad!r} is out of range for {dt.short}", line, col)
    return arr


_STACK_ENTRY = re.compile(r"([^ ;]+) ([^ ;]+)")
_PERCENT = re.compile(r"%([0-9A-F]{2})?")


def _unesc(s: str) -> str:
    """A field of a ``stack`` (printer.format_stack): ``%`` alone is empty, ``%XX`` a char."""
    if s == "%":
        return ""
    if "%" not in s:
        return s

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:
            raise ParseError("a bare '%' in a module stack", 0, 0)
        return chr(int(m.group(1), 16))

    return _PERCENT.sub(one, s)


def parse_stack(text: str) -> tuple[tuple[str, str], ...]:
    """A node's module stack from its ``stack`` metadata (the inverse of format_stack)."""
    out: list[tuple[str, str]] = []
    prev = None
    for item in text.split("; ") if text else ():
        m = _STACK_ENTRY.fullmatch(item)
        if m is None:
            raise ParseError(f"a module stack entry is 'path Type', got {item!r}", 0, 0)
        path, t = m.groups()
        if path[0] == ".":
            if prev is None:
                raise ParseError("a module stack starts with a relative path", 0, 0)
            path = prev + "." + _unesc(path[1:])
        else:
            path = _unesc(path)
        out.append((path, _unesc(t)))
        prev = path
    return tuple(out)
