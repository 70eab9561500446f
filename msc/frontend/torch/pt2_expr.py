"""The symbolic size expressions of a .pt2 file, read without evaluating anything from it.

torch's serializer writes every symbolic size as sympy's ``srepr``
(``Mul(Integer(64), Symbol('s53', positive=True, integer=True))``; older files wrote ``str``:
``64*s53``), and its deserializer hands that string to ``sympy.sympify``, which runs it as
Python. msc parses the string itself instead (``parse``), checks how large any number it can
denote may get (``bits``), and only then builds the sympy object with constructors from a
fixed table (``ExprReader.read``); torch's deserializer takes the object as it is (sympify
returns a sympy object unchanged), so nothing from the file is evaluated by Python or given
to sympy before it is known to be small.

# NOTE: invariants
# - The grammar: calls ``Name(arg, ..., key=value)``, names, integer / decimal literals, quoted
#   names, parentheses, and Python's arithmetic, comparison and bitwise operators. A name is a
#   constructor from ``_SYMPY`` / torch's size functions, a constant (``oo``, ``int_oo``,
#   ``true`` ...) or a symbol; nothing else (no attributes, subscripts, lambdas, dunders).
# - Bounds: ``MAX_CHARS`` per expression, ``MAX_DEPTH`` of nesting, ``MAX_DIGITS`` per literal,
#   and ``MAX_BITS``: no value an expression can take, with each symbol anywhere in int64,
#   may need more bits (an exponent multiplies its base's bits by its value; a symbolic
#   exponent counts as up to 2**bits). ``9**9**9``, ``Pow(10, Pow(10, 10))``,
#   ``Float('1e999999999')`` and ``2**10**10`` are refused before sympy sees them.
# - What torch 2.13 writes (exported BERT / Llama / GPT-2 with dynamic batch and sequence,
#   CNNs with dynamic H/W, interpolation, unbacked ``.item()`` / ``nonzero`` sizes): Symbol,
#   Integer, Rational, Float, Add, Mul, Pow, FloorDiv, Mod, Max, Min, ToFloat, TruncToInt,
#   IntTrueDiv, FloatPow and the relations LessThan / GreaterThan; the table has every
#   function torch's deserializer knows, so a newer torch's files read too.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

from msc.errors import MscError

__all__ = ["ExprReader", "parse", "bits", "MAX_BITS"]

MAX_CHARS = 1 << 16  # the longest expressions torch writes for real models are ~2,000
MAX_DEPTH = 64
MAX_DIGITS = 64  # digits of one number literal (int64 needs 19)
MAX_BITS = 4096  # the largest value any expression may denote: 2**4096
_SYMBOL_BITS = 64  # a size symbol is an int64


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """One node of a parsed expression: ``kind`` is "int" (value: an int), "float" (value:
    the literal's text), "str" (value: a quoted name), "name" (value: an identifier) or
    "call" (value: the function's name, with ``args`` and ``kwargs``)."""

    kind: str
    value: Any
    args: tuple[Node, ...] = ()
    kwargs: tuple[tuple[str, Node], ...] = ()


_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<str>'[A-Za-z0-9_.+\-]*')"
    r"|(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<op>\*\*|//|<=|>=|==|!=|[-+*/%(),<>=&|~]))"
)
_BINARY = {  # operator -> (precedence, function); higher binds tighter
    "|": (1, "Or"),
    "&": (2, "And"),
    "<": (3, "StrictLessThan"),
    "<=": (3, "LessThan"),
    ">": (3, "StrictGreaterThan"),
    ">=": (3, "GreaterThan"),
    "==": (3, "Equality"),
    "!=": (3, "Unequality"),
    "+": (4, "Add"),
    "-": (4, "Add"),
    "*": (5, "Mul"),
    "/": (5, "Mul"),
    "//": (5, "FloorDiv"),
    "%": (5, "Mod"),
}


def _neg(x: Node) -> Node:
    if x.kind == "int":
        return Node("int", -x.value)
    if x.kind == "float":
        return Node("float", x.value[1:] if x.value.startswith("-") else "-" + x.value)
    return Node("call", "Mul", (Node("int", -1), x))


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > MAX_CHARS:
            raise ValueError(f"{len(text)} characters (at most {MAX_CHARS})")
        self.tokens: list[tuple[str, str]] = []
        pos, text = 0, text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"unexpected {text[pos : pos + 20]!r}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self, op: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if op is not None and tok != ("op", op):
            raise ValueError(f"expected {op!r}, found {tok[1] or 'the end'!r}")
        if tok[0] == "end":
            raise ValueError("unexpected end")
        self.i += 1
        return tok

    def whole(self) -> Node:
        node = self.expr(0)
        if self.peek()[0] != "end":
            raise ValueError(f"unexpected {self.peek()[1]!r}")
        return node

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} deep")

    def expr(self, min_prec: int) -> Node:
        self.enter()
        left = self.unary()
        while True:
            kind, op = self.peek()
            if kind != "op" or op not in _BINARY or _BINARY[op][0] < min_prec:
                break
            prec, fn = _BINARY[op]
            self.take()
            right = self.expr(prec + 1)
            if op == "-":
                right = _neg(right)
            elif op == "/":
                right = Node("call", "Pow", (right, Node("int", -1)))
            left = Node("call", fn, (left, right))
        self.depth -= 1
        return left

    def unary(self) -> Node:
        self.enter()
        kind, op = self.peek()
        if kind == "op" and op in ("-", "+", "~"):
            self.take()
            x = self.unary()
            node = _neg(x) if op == "-" else Node("call", "Not", (x,)) if op == "~" else x
        else:
            node = self.power()
        self.depth -= 1
        return node

    def power(self) -> Node:
        base = self.atom()
        if self.peek() == ("op", "**"):
            self.take()
            return Node("call", "Pow", (base, self.unary()))  # right-associative
        return base

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            if len(text) > MAX_DIGITS:
                raise ValueError(f"a number of {len(text)} characters")
            if re.fullmatch(r"\d+", text):
                return Node("int", int(text))
            return Node("float", text)
        if kind == "str":
            return Node("str", text[1:-1])
        if kind == "op" and text == "(":
            node = self.expr(0)
            self.take(")")
            return node
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if "__" in text:
            raise ValueError(f"the name {text!r}")
        if self.peek() != ("op", "("):
            return Node("name", text)
        self.take("(")
        args: list[Node] = []
        kwargs: list[tuple[str, Node]] = []
        while self.peek() != ("op", ")"):
            if self.peek()[0] == "name" and self.tokens[self.i + 1 : self.i + 2] == [("op", "=")]:
                key = self.take()[1]
                self.take("=")
                kwargs.append((key, self.expr(0)))
            elif kwargs:
                raise ValueError("a positional argument after a keyword")
            else:
                args.append(self.expr(0))
            if self.peek() != ("op", ")"):
                self.take(",")
        self.take(")")
        return Node("call", text, tuple(args), tuple(kwargs))


def parse(text: str) -> Node:
    """The expression ``text`` as a tree (ValueError naming what is wrong)."""
    return _Parser(text).whole()


# ---------------------------------------------------------------------- size bounds
_POWERS = frozenset({"Pow", "PowByNatural", "FloatPow"})
_EXPONENTIALS = frozenset({"OpaqueUnaryFn_exp", "OpaqueUnaryFn_sinh", "OpaqueUnaryFn_cosh"})
# Results no larger than their largest argument (give or take a bit per argument).
_LATTICE = frozenset(
    {
        "Add", "Max", "Min", "Piecewise", "ExprCondPair", "Where", "And", "Or", "Not",
        "Equality", "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan",
        "GreaterThan", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
    }
)  # fmt: skip
_CAP = MAX_BITS + 1


def _literal(node: Node) -> int | None:
    """The magnitude, rounded up, of a number literal (``3``, ``Integer(3)``,
    ``Rational(1, 2)``, ``Float('0.5')``), or None for anything else."""
    if node.kind == "int":
        return min(abs(node.value), 2**_CAP)
    if node.kind == "float":
        return math.ceil(abs(_float(node.value)))
    if node.kind == "call" and node.value in ("Integer", "Float", "Rational") and node.args:
        vals = [_literal(a) if a.kind != "str" else math.ceil(abs(_float(a.value)))
                for a in node.args]  # fmt: skip
        if any(v is None for v in vals):
            return None
        if node.value == "Rational" and len(vals) == 2 and vals[1]:
            return -(-vals[0] // vals[1])  # type: ignore[operator]
        return vals[0]
    return None


def _float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"the number {text!r} is not finite")
    return x


def _magnitude(node: Node) -> int:
    """An upper bound on |value| of ``node`` used as an exponent or a shift: a literal's own
    value, else 2**bits (so a symbolic exponent is refused: a symbol may be 2**63)."""
    lit = _literal(node)
    if lit is not None:
        return max(1, lit)
    b = bits(node)
    return 2**b if b < 64 else 2**_CAP


def bits(node: Node) -> int:
    """An upper bound on the bits any value of ``node`` needs (either way of 1: a tiny
    divisor counts like a large factor), capped at ``MAX_BITS + 1``."""
    if node.kind == "int":
        return max(1, node.value.bit_length())
    if node.kind == "float":
        return max(1, abs(math.frexp(_float(node.value))[1]))
    if node.kind in ("str", "name"):
        return _SYMBOL_BITS if node.kind == "name" else 1
    name, args = node.value, node.args
    if name == "Symbol":
        return _SYMBOL_BITS
    if name in _POWERS and len(args) == 2:
        return min(_CAP, bits(args[0]) * _magnitude(args[1]))
    if name == "LShift" and len(args) == 2:
        return min(_CAP, bits(args[0]) + _magnitude(args[1]))
    if name in _EXPONENTIALS and len(args) == 1:
        return min(_CAP, 2 * _magnitude(args[0]) + 1)
    parts = [bits(a) for a in args] or [1]
    if name in _LATTICE:
        return min(_CAP, max(parts) + math.ceil(math.log2(len(parts))))
    return min(_CAP, sum(parts))


# ---------------------------------------------------------------------- building sympy
_SYMPY = (
    "Add", "Mul", "Pow", "Equality", "Unequality", "StrictLessThan", "LessThan",
    "StrictGreaterThan", "GreaterThan", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or",
    "Not", "Piecewise", "Abs", "floor", "ceiling",
)  # fmt: skip
# The size functions torch's deserializer passes to sympify by name (and Max/Min, which torch
# defines for its shapes too), plus its generated OpaqueUnaryFn_* / BitwiseFn_* families.
_TORCH = (
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
    "RoundToInt", "RoundDecimal", "ToFloat", "Identity", "Max", "Min",
)  # fmt: skip
_TORCH_FAMILIES = ("OpaqueUnaryFn_", "BitwiseFn_")
_SYMBOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\Z")


def _functions() -> dict[str, Callable[..., Any]]:
    import sympy
    import torch.utils._sympy.functions as fns
    from sympy.functions.elementary.piecewise import ExprCondPair

    out: dict[str, Callable[..., Any]] = {n: getattr(sympy, n) for n in _SYMPY}
    out["ExprCondPair"] = ExprCondPair
    out |= {n: getattr(fns, n) for n in _TORCH if hasattr(fns, n)}
    out |= {n: getattr(fns, n) for n in dir(fns) if n.startswith(_TORCH_FAMILIES)}
    return out


def _constants() -> dict[str, Any]:
    import sympy
    from torch.utils._sympy.numbers import int_oo

    return {
        "oo": sympy.oo, "zoo": sympy.zoo, "nan": sympy.nan, "int_oo": int_oo,
        "true": sympy.true, "false": sympy.false, "True": sympy.true, "False": sympy.false,
    }  # fmt: skip


class ExprReader:
    """Reads the expressions of one program (each distinct text once); a bare name in str form
    is the symbol of that name an srepr expression declared, with its assumptions."""

    def __init__(self) -> None:
        self.functions = _functions()
        self.constants = _constants()
        self.symbols: dict[str, Any] = {}
        self.cache: dict[str, Any] = {}

    def read(self, text: str) -> Any:
        """The sympy expression ``text`` denotes (ValueError naming what is refused)."""
        if text not in self.cache:
            tree = parse(text)
            if bits(tree) > MAX_BITS:
                raise ValueError(f"it may denote a number of more than {MAX_BITS} bits")
            self.cache[text] = self.build(tree)
        return self.cache[text]

    def build(self, node: Node) -> Any:
        import sympy

        if node.kind == "int":
            return sympy.Integer(node.value)
        if node.kind == "float":
            return sympy.Float(_float(node.value))
        if node.kind == "str":
            raise ValueError(f"a quoted name {node.value!r} outside Symbol(...)")
        if node.kind == "name":
            if node.value in self.constants:
                return self.constants[node.value]
            return self.symbol(node.value, None)
        name, args, kwargs = node.value, node.args, dict(node.kwargs)
        if name == "Symbol":
            return self.symbol_call(args, kwargs)
        if name in ("Integer", "Rational", "Float"):
            return self.number(name, args, kwargs)
        fn = self.functions.get(name)
        if fn is None:
            raise ValueError(f"the function {name!r}")
        if kwargs:
            raise ValueError(f"{name}() with keyword arguments")
        built = [self.build(a) for a in args]
        try:
            return fn(*built)
        except Exception as e:  # noqa: BLE001 - a fixed constructor on bounded arguments
            raise ValueError(f"{name}() of these arguments: {type(e).__name__}: {e}") from None

    def symbol(self, name: str, assumptions: dict[str, bool] | None) -> Any:
        """The symbol ``name``: with ``assumptions`` as srepr writes them, or (a bare name in
        str form) the symbol of that name seen before, else an integer one."""
        import sympy

        if not _SYMBOL_NAME.match(name):
            raise ValueError(f"the symbol name {name!r}")
        if assumptions is None:
            if name not in self.symbols:
                self.symbols[name] = sympy.Symbol(name, integer=True)
            return self.symbols[name]
        sym = sympy.Symbol(name, **assumptions)
        self.symbols.setdefault(name, sym)
        return sym

    def symbol_call(self, args: tuple[Node, ...], kwargs: dict[str, Node]) -> Any:
        from sympy.core.assumptions import _assume_defined

        if len(args) != 1 or args[0].kind != "str":
            raise ValueError("Symbol() without a quoted name")
        assumptions: dict[str, bool] = {}
        for key, value in kwargs.items():
            if (
                key not in _assume_defined
                or value.kind != "name"
                or value.value not in ("True", "False")
            ):
                raise ValueError(f"the symbol assumption {key}={value.value!r}")
            assumptions[key] = value.value == "True"
        return self.symbol(args[0].value, assumptions)

    def number(self, name: str, args: tuple[Node, ...], kwargs: dict[str, Node]) -> Any:
        import sympy

        if name == "Integer" and len(args) == 1 and args[0].kind == "int" and not kwargs:
            return sympy.Integer(args[0].value)
        if name == "Rational" and len(args) == 2 and not kwargs:
            p, q = args
            if p.kind == "int" and q.kind == "int" and q.value != 0:
                return sympy.Rational(p.value, q.value)
        if name == "Float" and len(args) == 1 and args[0].kind in ("str", "int", "float"):
            precision = kwargs.pop("precision", Node("int", 53))
            if kwargs or precision.kind != "int" or not 1 <= precision.value <= 256:
                raise ValueError("Float() with other arguments than a precision up to 256")
            text = str(args[0].value)
            value = _float(text)
            if bits(Node("float", text)) > MAX_BITS:
                raise ValueError(f"the number {text!r}")
            return sympy.Float(value, precision=precision.value)
        raise ValueError(f"{name}() of other arguments than number literals")


def refuse(path: Any, text: str, why: str) -> MscError:
    """The error for an expression msc will not read."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    return MscError(f"{path}: the symbolic size expression {shown!r} is refused: {why}")
