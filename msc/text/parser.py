"""Parse msc's text format back into a Graph.

# NOTE: errors carry line and column and say what was expected and what was found. Weights
# parse as type-only (``has_data`` False); ``msc.load`` attaches their data.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import numpy as np

from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Provenance, Value, Weight
from msc.ir.types import SymDim, TensorType

__all__ = ["from_text", "ParseError"]


class ParseError(ValueError):
    """Text that is not msc's format; the message gives line, column and what was expected."""

    def __init__(self, msg: str, line: int, col: int) -> None:
        super().__init__(f"line {line}, column {col}: {msg}")
        self.line, self.col = line, col


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<num>-inf\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.|!\{|[{}()\[\],:=?*%@])
    """,
    re.VERBOSE,
)
_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def _unescape(s: str, line: int, col: int) -> str:
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
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise ParseError(f"unknown escape \\{nxt}", line, col + i)
    return "".join(out)


class _Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int) -> None:
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self) -> str:
        return "end of input" if self.kind == "eof" else repr(self.text)


def _lex(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise ParseError(f"unexpected character {src[pos]!r}", line, pos - line_start + 1)
        kind = m.lastgroup
        text = m.group()
        if kind != "ws":
            toks.append(_Tok(kind, text, line, pos - line_start + 1))  # type: ignore[arg-type]
        nl = text.count("\n")
        if nl:
            line += nl
            line_start = pos + text.rfind("\n") + 1
        pos = m.end()
    toks.append(_Tok("eof", "", line, pos - line_start + 1))
    return toks


class _Scope:
    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.values: dict[str, Value] = {}
        self.weights: dict[str, Weight] = {}

    def lookup(self, table: str, name: str) -> Value | None:
        s: _Scope | None = self
        while s is not None:
            v = getattr(s, table).get(name)
            if v is not None:
                return v
            s = s.parent
        return None


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _lex(src)
        self.i = 0

    # ------------------------------------------------------------ token helpers
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def error(self, expected: str, tok: _Tok | None = None) -> ParseError:
        t = tok or self.tok
        return ParseError(f"expected {expected}, found {t!r}", t.line, t.col)

    def next(self) -> _Tok:
        t = self.tok
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        if self.tok.text == text and self.tok.kind in ("punct", "ident"):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> _Tok:
        if not (self.tok.text == text and self.tok.kind in ("punct", "ident")):
            raise self.error(repr(text))
        return self.next()

    def name(self, what: str = "a name") -> str:
        t = self.tok
        if t.kind == "ident":
            self.i += 1
            return t.text
        if t.kind == "str":
            self.i += 1
            return _unescape(t.text, t.line, t.col)
        raise self.error(what)

    def ref_name(self, what: str) -> str:
        """A name after % or @: an identifier, a quoted string, or a run of digits."""
        t = self.tok
        if t.kind == "num" and t.text.isdigit():
            self.i += 1
            return t.text
        return self.name(what)

    def string(self) -> str:
        t = self.tok
        if t.kind != "str":
            raise self.error("a string")
        self.i += 1
        return _unescape(t.text, t.line, t.col)

    def integer(self) -> int:
        t = self.tok
        if t.kind != "num" or not re.fullmatch(r"-?\d+", t.text):
            raise self.error("an integer")
        self.i += 1
        return int(t.text)

    # ------------------------------------------------------------ types
    def dtype(self) -> DType:
        t = self.tok
        if t.kind != "ident":
            raise self.error("a dtype (f32, i64, bool, ...)")
        try:
            dt = DType.from_short(t.text)
        except ValueError:
            raise self.error("a dtype (f32, i64, bool, ...)") from None
        self.i += 1
        return dt

    def type(self) -> TensorType:
        dt = self.dtype()
        self.expect("[")
        if self.accept("*"):
            self.expect("]")
            return TensorType(dt, None)
        dims: list[Any] = []
        if not self.accept("]"):
            while True:
                dims.append(self.dim())
                if self.accept("]"):
                    break
                self.expect(",")
        return TensorType(dt, dims)

    def dim(self):
        t = self.tok
        if t.kind == "num":
            v = self.integer()
            if v < 0:
                raise ParseError(f"a dim must be >= 0, found {v}", t.line, t.col)
            return v
        if self.accept("?"):
            return None
        name = self.name("a dim (an integer, ?, or a symbol)")
        lo = hi = None
        if self.accept("{"):
            if self.tok.kind == "num":
                lo = self.integer()
            self.expect("..")
            if self.tok.kind == "num":
                hi = self.integer()
            self.expect("}")
        return SymDim(name, lo, hi)

    # ------------------------------------------------------------ attribute values
    def value(self, scope: _Scope) -> Any:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            if t.text == "-inf":
                return float("-inf")
            if re.fullmatch(r"-?\d+", t.text):
                return int(t.text)
            return float(t.text)
        if t.kind == "str":
            return self.string()
        if self.accept("["):
            items: list[Any] = []
            if not self.accept("]"):
                while True:
                    items.append(self.value(scope))
                    if self.accept("]"):
                        break
                    self.expect(",")
            return tuple(items)
        if t.kind == "ident":
            simple = {
                "none": None,
                "true": True,
                "false": False,
                "inf": float("inf"),
                "nan": float("nan"),
            }
            if t.text in simple:
                self.i += 1
                return simple[t.text]
            if t.text == "graph":
                return self.graph(scope)
            if t.text == "type":
                self.i += 1
                self.expect("(")
                ty = self.type()
                self.expect(")")
                return ty
            if t.text == "tensor":
                return self.tensor()
            try:
                dt = DType.from_short(t.text)
            except ValueError:
                pass
            else:
                self.i += 1
                return dt
        raise self.error("a value (number, string, list, true/false/none, dtype, tensor, graph)")

    def tensor(self) -> np.ndarray:
        self.expect("tensor")
        self.expect("(")
        start = self.tok
        ty = self.type()
        if not ty.is_static:
            raise ParseError("a tensor needs a static shape", start.line, start.col)
        self.expect(",")
        npdt = ty.dtype.to_numpy()
        if self.accept("b64"):
            t = self.tok
            raw = base64.b64decode(self.string().encode("ascii"), validate=True)
            if len(raw) != ty.nbytes():
                raise ParseError(
                    f"tensor data has {len(raw)} bytes, type needs {ty.nbytes()}", t.line, t.col
                )
            arr = np.frombuffer(raw, dtype=npdt.newbyteorder("<")).astype(npdt)
        else:
            t = self.tok
            items = self.value(_Scope())
            if not isinstance(items, tuple):
                raise self.error("a list of tensor elements", t)
            if len(items) != ty.numel():
                raise ParseError(
                    f"tensor has {len(items)} elements, type needs {ty.numel()}", t.line, t.col
                )
            if ty.dtype.is_floating:
                arr = np.array(items, dtype=np.float64).astype(npdt)
            else:
                arr = np.array(items, dtype=npdt)
        self.expect(")")
        return arr.reshape(ty.shape)

    def attrs(self, scope: _Scope) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            t = self.tok
            key = self.name("an attribute name")
            if key in out:
                raise ParseError(f"attribute {key!r} given twice", t.line, t.col)
            self.expect("=")
            out[key] = self.value(scope)
            if self.accept("}"):
                return out
            self.expect(",")

    # ------------------------------------------------------------ graphs
    def ref(self, scope: _Scope) -> Value | None:
        t = self.tok
        if t.kind == "ident" and t.text == "_":
            self.i += 1
            return None
        if self.accept("%"):
            name = self.ref_name("a value name")
            v = scope.lookup("values", name)
            if v is None:
                raise ParseError(f"value %{name} is not defined", t.line, t.col)
            return v
        if self.accept("@"):
            name = self.ref_name("a weight name")
            w = scope.lookup("weights", name)
            if w is None:
                raise ParseError(f"weight @{name} is not declared", t.line, t.col)
            return w
        raise self.error("%value, @weight or _")

    def define(self, scope: _Scope, t: _Tok, name: str, type: TensorType) -> Value:
        if name in scope.values:
            raise ParseError(f"value %{name} is defined twice", t.line, t.col)
        v = Value(name, type)
        scope.values[name] = v
        return v

    def graph(self, parent: _Scope | None = None) -> Graph:
        self.expect("graph")
        g = Graph(self.name("a graph name"))
        scope = _Scope(parent)
        self.expect("{")
        while not self.accept("}"):
            t = self.tok
            if self.accept("meta"):
                g.meta.update(self.attrs(scope))
            elif self.accept("input"):
                self.expect("%")
                name = self.ref_name("an input name")
                self.expect(":")
                v = self.define(scope, t, name, self.type())
                g.inputs.append(v)
                g._taken.add(name)
            elif self.accept("weight"):
                self.expect("@")
                name = self.ref_name("a weight name")
                self.expect(":")
                if name in scope.weights:
                    raise ParseError(f"weight @{name} is declared twice", t.line, t.col)
                w = g.add_weight(name, None, self.type())
                scope.weights[name] = w
            elif self.accept("output"):
                outs = []
                if self.tok.text != "}":
                    outs.append(self.ref(scope))
                    while self.accept(","):
                        outs.append(self.ref(scope))
                if any(v is None for v in outs):
                    raise ParseError("a graph output cannot be _", t.line, t.col)
                g.outputs = outs  # type: ignore[assignment]
            elif t.text == "%":
                self.node(g, scope)
            else:
                raise self.error(
                    "meta, input, weight, output, a node (%name: type = op(...)) or '}'"
                )
        return g

    def node(self, g: Graph, scope: _Scope) -> None:
        start = self.tok
        outs: list[tuple[_Tok, str, TensorType]] = []
        while True:
            t = self.tok
            self.expect("%")
            name = self.ref_name("an output name")
            self.expect(":")
            outs.append((t, name, self.type()))
            if self.accept("="):
                break
            self.expect(",")
        op_tok = self.tok
        if op_tok.kind != "ident":
            raise self.error("an op name")
        self.i += 1
        self.expect("(")
        inputs: list[Value | None] = []
        if not self.accept(")"):
            while True:
                inputs.append(self.ref(scope))
                if self.accept(")"):
                    break
                self.expect(",")
        attrs = self.attrs(scope) if self.tok.text == "{" else {}
        meta: dict[str, str] = {}
        if self.accept("!{"):
            if not self.accept("}"):
                while True:
                    key = self.name("name, framework, op, source or module")
                    self.expect("=")
                    meta[key] = self.string()
                    if self.accept("}"):
                        break
                    self.expect(",")
        bad = set(meta) - {"name", "framework", "op", "source", "module"}
        if bad:
            raise ParseError(f"unknown node metadata {sorted(bad)}", start.line, start.col)
        values = [Value(n, ty) for _, n, ty in outs]
        try:
            node = Node(
                op_tok.text,
                inputs,
                attrs,
                outputs=values,
                name=meta.get("name", ""),
                provenance=Provenance(
                    meta.get("framework", ""),
                    meta.get("op", ""),
                    meta.get("source", ""),
                    meta.get("module", ""),
                ),
            )
        except (TypeError, ValueError) as e:
            raise ParseError(str(e), op_tok.line, op_tok.col) from None
        for (t, n, _ty), v in zip(outs, values):
            if n in scope.values:
                raise ParseError(f"value %{n} is defined twice", t.line, t.col)
            scope.values[n] = v
            g._taken.add(n)
        g.nodes.append(node)


def from_text(text: str) -> Graph:
    """Parse a graph printed by ``to_text``. Raises ParseError with line and column."""
    p = _Parser(text)
    g = p.graph()
    if p.tok.kind != "eof":
        raise p.error("end of input")
    return g
