"""Parse msc's text format back into a Graph.

# NOTE: errors carry line and column and say what was expected and what was found. Weights
# parse as type-only (``has_data`` False); ``msc.load`` attaches their data.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import numpy as np

from msc.ir import symexpr
from msc.ir.bulk import paused
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Provenance, Value, Weight, default_opset
from msc.ir.types import VALUE_TYPES, OptionalType, SequenceType, SymDim, TensorType, ValueType
from msc.text.lexer import (
    LINE,
    OUT_RE,
    REF_RE,
    Tok,
    kind_of,
    lex,
    lex_fast,
    line_col,
    newlines,
    token_ends,
)
from msc.text.literals import ParseError, elements, parse_stack, unescape
from msc.text.printer import FORMAT_VERSION, OPS_VERSION

__all__ = ["from_text", "parse_dim", "ParseError"]


def _immutable(v: Any) -> bool:
    """An attribute value nodes may share (not an array, not a graph)."""
    if isinstance(v, tuple):
        return all(_immutable(x) for x in v)
    return v is None or isinstance(v, int | float | str | bytes | DType | VALUE_TYPES)


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
    """Recursive descent over the token texts.

    With ``fast``, a line holding a whole node in the printer's plain spelling (bare or
    unescaped names, a type with no quoted symbol, simple attributes and metadata) is matched
    by one anchored regex when the text is split into lines and becomes a single placeholder
    token; the rest is lexed as usual. Token positions are then not tracked: ``from_text``
    answers any error in fast mode by parsing again without it, so every error (message, line
    and column) is exactly what the token parser gives.
    """

    def __init__(self, src: str, fast: bool = False) -> None:
        self.src = src
        self.fast = fast
        self.lines: dict[int, re.Match[str]] = {}  # placeholder token index -> its line match
        # (op, attribute text) -> the op's schema and its normalized attributes
        self.attr_cache: dict[tuple[str, str], tuple[Any, dict[str, Any], str]] = {}
        # One tuple per distinct module stack (a model's nodes share a few dozen).
        self.stacks: dict[str, tuple[tuple[str, str], ...]] = {}
        self.texts = lex_fast(src, self.lines) if fast else lex(src)
        self.i = 0
        self.depth = 0  # nesting of lists, graphs and output structures
        self._ends: list[int] | None = None
        self._newlines: list[int] = []

    # ------------------------------------------------------------ token helpers
    @property
    def tok(self) -> Tok:
        i = self.i
        if self.fast:  # no positions: an error is answered by a parse without fast mode
            return Tok(kind_of(self.texts[i]), self.texts[i], 0, 0)
        if self._ends is None:
            self._ends = token_ends(self.src)
            self._newlines = newlines(self.src)
        text = self.texts[i]
        line, col = line_col(self._newlines, self._ends[i] - len(text))
        return Tok(kind_of(text), text, line, col)

    def error(self, expected: str, tok: Tok | None = None) -> ParseError:
        t = tok or self.tok
        if t.kind == "bad":
            if t.text.startswith('"'):
                return ParseError("unterminated string", t.line, t.col)
            return ParseError(f"unexpected character {t.text!r}", t.line, t.col)
        return ParseError(f"expected {expected}, found {t!r}", t.line, t.col)

    def nest(self) -> None:
        """Enter one level of nesting; a limit keeps hostile text from exhausting the stack."""
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            t = self.tok
            raise ParseError(f"nested more than {_MAX_DEPTH} levels deep", t.line, t.col)

    def at(self, text: str) -> bool:
        return self.texts[self.i] == text

    def accept(self, text: str) -> bool:
        if self.texts[self.i] == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if self.texts[self.i] != text:
            raise self.error(repr(text))
        self.i += 1

    def name(self, what: str = "a name") -> str:
        i = self.i
        kind = kind_of(self.texts[i])
        if kind == "ident":
            self.i = i + 1
            return self.texts[i]
        if kind == "str":
            return self.string()
        raise self.error(what)

    def sigil_name(self, sigil: str, what: str) -> str:
        """``%name`` / ``@name``: one compound token when bare, else the sigil and a string."""
        text = self.texts[self.i]
        if len(text) > 1 and text[0] == sigil:
            self.i += 1
            return text[1:]
        self.expect(sigil)
        return self.ref_name(what)

    def ref_name(self, what: str) -> str:
        """A name after % or @: an identifier, a quoted string, or a run of digits."""
        i = self.i
        if kind_of(self.texts[i]) == "num" and self.texts[i].isdigit():
            self.i = i + 1
            return self.texts[i]
        return self.name(what)

    def string(self) -> str:
        i = self.i
        if kind_of(self.texts[i]) != "str":
            raise self.error("a string")
        text = self.texts[i]
        if "\\" not in text:
            self.i = i + 1
            return text[1:-1]
        t = self.tok
        self.i = i + 1
        return unescape(text, t.line, t.col)

    def integer(self) -> int:
        i = self.i
        if kind_of(self.texts[i]) != "num" or not _INT.fullmatch(self.texts[i]):
            raise self.error("an integer")
        v = self.int_literal(i)
        self.i = i + 1
        return v

    def int_literal(self, i: int, sized: bool = True) -> int:
        """Token ``i`` (an integer's spelling) as an int. A size (``sized``: a dim, a range,
        a coefficient) is an int64 or uint64; any other value (an attribute, graph metadata)
        has at most _MAX_DIGITS digits. Longer spellings are refused before Python converts
        them (its own limit is an exception; quadratic time below it)."""
        text = self.texts[i]
        digits = len(text.lstrip("-"))
        if not sized and digits <= _MAX_DIGITS:
            return int(text)
        if sized and digits <= 20:
            v = int(text)
            if -_INT_LIMIT <= v < 2 * _INT_LIMIT:
                return v
        t = self.toks_at(i)
        what = "out of range (int64 / uint64)" if sized else f"longer than {_MAX_DIGITS} digits"
        raise ParseError(f"an integer of {digits} digits is {what}", t.line, t.col)

    # ------------------------------------------------------------ types
    def dtype(self) -> DType:
        i = self.i
        dt = _DTYPES.get(self.texts[i]) if kind_of(self.texts[i]) == "ident" else None
        if dt is None:
            raise self.error("a dtype (f32, i64, bool, ...)")
        self.i = i + 1
        return dt

    def type(self) -> ValueType:
        text = self.texts[self.i]
        if text[-1:] == "]" and text[:1].isalpha():
            t = _TYPE_CACHE.get(text)
            if t is None:
                cut = text.index("[")
                try:
                    sub = _Parser(text[:cut] + " [ " + text[cut + 1 :])
                    t = sub.type_tokens()
                    if sub.texts[sub.i] != "":
                        raise sub.error("end of type")
                except ParseError as e:
                    # Map the position inside the token back to the source (" [ " added 2).
                    at = self.tok
                    col = at.col + e.col - 1 - (2 if e.col > cut + 1 else 0)
                    raise ParseError(e.args[0].split(": ", 1)[1], at.line, col) from None
                _TYPE_CACHE[text] = t
            self.i += 1
            return t
        if text in _CONTAINERS:
            return self.container_type()
        return self.type_tokens()

    def container_type(self) -> ValueType:
        """``seq<TYPE>`` or ``opt<TYPE>``: a sequence's element is a tensor type, an
        optional's a tensor or sequence type."""
        at = self.tok
        kind = _CONTAINERS[self.texts[self.i]]
        self.i += 1
        self.expect("<")
        self.nest()
        element = self.type()
        self.depth -= 1
        self.expect(">")
        try:
            return kind(element)
        except TypeError as e:
            raise ParseError(str(e), at.line, at.col) from None

    def type_tokens(self) -> TensorType:
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
        """A dim: an integer, ``?``, a symbol (``batch{1..64}``), or an expression over
        symbols (``2*s0 + 1``, ``floordiv(h + 1, 2)``; see msc.ir.symexpr)."""
        if self.accept("?"):
            return None
        i = self.i
        d = self.dim_sum()
        if isinstance(d, int) and d < 0:
            t = self.toks_at(i)
            raise ParseError(f"a dim must be >= 0, found {d}", t.line, t.col)
        return d

    def dim_sum(self):
        # Terms are gathered and summed once: adding one at a time re-sorts the whole sum at
        # each step, which is quadratic in the number of terms.
        terms = [self.dim_term()]
        while True:
            t = self.texts[self.i]
            if t == "+":
                self.i += 1
                terms.append(self.dim_term())
            elif t == "-":
                self.i += 1
                terms.append(self._dim_op(symexpr.neg, self.dim_term()))
            elif t[:1] == "-" and _INT.fullmatch(t):  # "s0-1" lexes as s0, -1
                terms.append(self.dim_term())
            else:
                return terms[0] if len(terms) == 1 else self._dim_op(symexpr.total, terms)

    def dim_term(self):
        factors = [self.dim_factor()]
        while self.accept("*"):
            factors.append(self.dim_factor())
        return factors[0] if len(factors) == 1 else self._dim_op(symexpr.product, factors)

    def _dim_op(self, fn, *args):
        try:
            d = fn(*args)
        except (ValueError, ZeroDivisionError) as e:
            raise self.error(f"a valid dim expression ({e})") from None
        # Products of in-range literals can leave the range (and grow without bound).
        coefs = [d] if isinstance(d, int) else [c for _, c in getattr(d, "terms", ())]
        if any(not -_INT_LIMIT <= c < 2 * _INT_LIMIT for c in coefs):
            raise self.error("a dim expression whose numbers fit in 64 bits")
        return d

    def dim_factor(self):
        i = self.i
        t = self.texts[i]
        if t == "-":
            self.i += 1
            return self._dim_op(symexpr.neg, self.dim_factor())
        if kind_of(t) == "num":
            return self.integer()
        if t == "(" or (t in symexpr.FUNCS and self.texts[i + 1] == "("):
            self.nest()
            self.i += 1 if t == "(" else 2
            args = [self.dim_sum()]
            while t != "(" and self.accept(","):
                args.append(self.dim_sum())
            self.expect(")")
            self.depth -= 1
            if t == "(":
                return args[0]
            if len(args) != 2 and t in ("floordiv", "mod") or len(args) < 2:
                at = self.toks_at(i)
                want = "2" if t in ("floordiv", "mod") else "at least 2"
                raise ParseError(f"{t} takes {want} arguments, found {len(args)}", at.line, at.col)
            return self._dim_op(symexpr.apply, t, args)
        name = self.name("a dim (an integer, ?, a symbol or an expression)")
        lo = hi = None
        if self.accept("{"):
            if kind_of(self.texts[self.i]) == "num":
                lo = self.integer()
            self.expect("..")
            if kind_of(self.texts[self.i]) == "num":
                hi = self.integer()
            self.expect("}")
        try:
            return SymDim(name, lo, hi)
        except ValueError as e:
            at = self.toks_at(i)
            raise ParseError(str(e), at.line, at.col) from None

    # ------------------------------------------------------------ attribute values
    def value(self, scope: _Scope) -> Any:
        i = self.i
        kind, text = kind_of(self.texts[i]), self.texts[i]
        if kind == "num":
            self.i = i + 1
            if text == "-inf":
                return float("-inf")
            if text == "-nan":  # a NaN with its sign bit set (float8 casts keep it)
                return -float("nan")
            if _INT.fullmatch(text):
                return self.int_literal(i, sized=False)
            return float(text)
        if kind == "str":
            return self.string()
        if self.accept("["):
            self.nest()
            items: list[Any] = []
            if not self.accept("]"):
                while True:
                    items.append(self.value(scope))
                    if self.accept("]"):
                        break
                    self.expect(",")
            self.depth -= 1
            return tuple(items)
        if kind == "ident":
            if text in _SIMPLE:
                self.i = i + 1
                return _SIMPLE[text]
            if text == "graph":
                self.nest()
                g = self.graph(scope)
                self.depth -= 1
                return g
            if text == "type":
                self.i = i + 1
                self.expect("(")
                ty = self.type()
                self.expect(")")
                return ty
            if text == "tensor":
                return self.tensor()
            if text == "bytes":
                return self.bytes_value()
            if text in _DTYPES:
                self.i = i + 1
                return _DTYPES[text]
        raise self.error(
            "a value (number, string, bytes, list, true/false/none, dtype, tensor, graph)"
        )

    def b64(self) -> bytes:
        """``b64 "..."``: standard base64 with padding, spelt as the printer spells it."""
        self.expect("b64")
        t = self.tok
        text = self.string()
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error):
            raise ParseError("not base64 data", t.line, t.col) from None
        if base64.b64encode(raw).decode("ascii") != text:
            raise ParseError("base64 data not spelt as msc writes it", t.line, t.col)
        return raw

    def bytes_value(self) -> bytes:
        """``bytes(b64 "...")``: binary data (never text)."""
        self.expect("bytes")
        self.expect("(")
        raw = self.b64()
        self.expect(")")
        return raw

    def tensor(self) -> np.ndarray:
        self.expect("tensor")
        self.expect("(")
        start = self.tok
        ty = self.type()
        if not isinstance(ty, TensorType) or not ty.is_static:
            raise ParseError("a tensor needs a static shape", start.line, start.col)
        self.expect(",")
        npdt = ty.dtype.to_numpy()
        if not ty.dtype.is_string and self.at("b64"):
            t = self.toks_at(self.i + 1)
            raw = self.b64()
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
            arr = elements(items, ty.dtype, t.line, t.col)
        self.expect(")")
        return arr.reshape(ty.shape)

    def attrs(self, scope: _Scope) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            t = self.i
            key = self.name("an attribute name")
            if key in out:
                tok = self.toks_at(t)
                raise ParseError(f"attribute {key!r} given twice", tok.line, tok.col)
            self.expect("=")
            out[key] = self.value(scope)
            if self.accept("}"):
                return out
            self.expect(",")

    def stack(self, text: str) -> tuple[tuple[str, str], ...]:
        """A ``stack`` metadata value, parsed once per distinct spelling."""
        if not text:
            return ()
        got = self.stacks.get(text)
        if got is None:
            got = self.stacks[text] = parse_stack(text)
        return got

    def meta_items(self) -> dict[str, str]:
        """``key = "string", ... }`` after ``!{``."""
        meta: dict[str, str] = {}
        if not self.accept("}"):
            while True:
                key = self.name("name, framework, op, source, module or stack")
                self.expect("=")
                meta[key] = self.string()
                if self.accept("}"):
                    break
                self.expect(",")
        return meta

    def toks_at(self, i: int) -> Tok:
        saved, self.i = self.i, i
        try:
            return self.tok
        finally:
            self.i = saved

    # ------------------------------------------------------------ graphs
    def header(self) -> None:
        """``msc format F, ops O`` before the graph; absent in files from before versions."""
        if not self.at("msc"):
            return
        at = self.i
        self.i += 1
        self.expect("format")
        fmt = self.integer()
        self.expect(",")
        self.expect("ops")
        ops = self.integer()
        if fmt > FORMAT_VERSION or ops > OPS_VERSION:
            t = self.toks_at(at)
            raise ParseError(
                f"this graph was written by a newer msc (text format {fmt}, op set {ops}); "
                f"this msc reads text format {FORMAT_VERSION} and op set {OPS_VERSION} or "
                "older: upgrade msc to read it",
                t.line,
                t.col,
            )

    def ref(self, scope: _Scope) -> Value | None:
        i = self.i
        text = self.texts[i]
        if text == "_":
            self.i = i + 1
            return None
        if len(text) > 1 and (text[0] == "%" or text[0] == "@"):
            v = scope.lookup("values" if text[0] == "%" else "weights", text[1:])
            if v is None:
                t = self.toks_at(i)
                what = "value" if text[0] == "%" else "weight"
                raise ParseError(
                    f"{what} {text} is not {what == 'value' and 'defined' or 'declared'}",
                    t.line,
                    t.col,
                )
            self.i = i + 1
            return v
        for sigil, table, what, verb in (
            ("%", "values", "value", "defined"),
            ("@", "weights", "weight", "declared"),
        ):
            if self.accept(sigil):
                name = self.ref_name(f"a {what} name")
                v = scope.lookup(table, name)
                if v is None:
                    t = self.toks_at(i)
                    raise ParseError(f"{what} {sigil}{name} is not {verb}", t.line, t.col)
                return v
        raise self.error("%value, @weight or _")

    def define(self, scope: _Scope, at: int, name: str, type: TensorType) -> Value:
        if name in scope.values:
            t = self.toks_at(at)
            raise ParseError(f"value %{name} is defined twice", t.line, t.col)
        v = Value(name, type)
        scope.values[name] = v
        return v

    def graph(self, parent: _Scope | None = None) -> Graph:
        self.expect("graph")
        g = Graph(self.name("a graph name"))
        scope = _Scope(parent)
        self.expect("{")
        texts, lines = self.texts, self.lines
        while True:
            if texts[self.i] is LINE:  # most lines are nodes: checked first
                self.line_node(g, scope, lines.pop(self.i))  # freed as used: memory reused
                self.i += 1
                continue
            if self.accept("}"):
                g._taken.update(scope.values)  # node lines leave their names to this
                break
            at = self.i
            if self.accept("meta"):
                g.meta.update(self.attrs(scope))
            elif self.accept("input"):
                name = self.sigil_name("%", "an input name")
                self.expect(":")
                v = self.define(scope, at, name, self.type())
                g.inputs.append(v)
                g._taken.add(name)
            elif self.accept("weight"):
                name = self.sigil_name("@", "a weight name")
                self.expect(":")
                if name in scope.weights:
                    t = self.toks_at(at)
                    raise ParseError(f"weight @{name} is declared twice", t.line, t.col)
                ty_at = self.tok
                ty = self.type()
                if not isinstance(ty, TensorType):
                    raise ParseError(f"a weight is a tensor, not {ty}", ty_at.line, ty_at.col)
                w = g.add_weight(name, None, ty)
                if self.at("{"):
                    self.weight_fields(w, scope)
                scope.weights[name] = w
            elif self.accept("structure"):
                tree_at = self.i
                tree = self.tree()
                try:
                    g.output_tree = tree
                except ValueError as e:
                    t = self.toks_at(tree_at)
                    raise ParseError(str(e), t.line, t.col) from None
            elif self.accept("output"):
                outs = []
                if not self.at("}"):
                    outs.append(self.ref(scope))
                    while self.accept(","):
                        outs.append(self.ref(scope))
                if any(v is None for v in outs):
                    t = self.toks_at(at)
                    raise ParseError("a graph output cannot be _", t.line, t.col)
                g.outputs = outs  # type: ignore[assignment]
            elif texts[self.i][:1] == "%":
                self.node(g, scope)
            else:
                raise self.error(
                    "meta, input, weight, output, structure, a node (%name: type = op(...)) or '}'"
                )
        return g

    def weight_fields(self, w: Weight, scope: _Scope) -> None:
        """``{role = "buffer", aliases = ["head.weight"]}`` after a weight's type."""
        at = self.i
        fields = self.attrs(scope)
        t = self.toks_at(at)
        bad = set(fields) - {"role", "aliases"}
        if bad:
            raise ParseError(f"unknown weight field(s) {sorted(bad)}", t.line, t.col)
        role, aliases = fields.get("role", ""), fields.get("aliases", ())
        if not isinstance(role, str) or not isinstance(aliases, tuple):
            raise ParseError("a weight's role is a string, its aliases a list", t.line, t.col)
        try:
            w.role, w.aliases = role, aliases
        except ValueError as e:
            raise ParseError(str(e), t.line, t.col) from None

    def tree(self) -> Any:
        """An output structure: ``leaf N``, ``tuple(...)``, ``list(...)``, ``dict(key: tree,
        ...)`` or a constant (none, true, false, a number, a string)."""
        text = self.texts[self.i]
        if text == "leaf":
            self.i += 1
            return {"leaf": self.integer()}
        if text in ("tuple", "list", "dict"):
            self.i += 1
            self.nest()
            self.expect("(")
            items: list[Any] = []
            while not self.accept(")"):
                if items:
                    self.expect(",")
                if text == "dict":
                    key = self.value(_Scope())
                    if not isinstance(key, str | int) or isinstance(key, bool):
                        raise self.error("a dict key (a string or an integer)")
                    self.expect(":")
                    items.append([key, self.tree()])
                else:
                    items.append(self.tree())
            self.depth -= 1
            return {text: items}
        kind = kind_of(text)
        if kind in ("num", "str") or text in ("none", "true", "false"):
            return {"const": self.value(_Scope())}
        raise self.error("an output structure (leaf N, tuple(...), list(...), dict(...))")

    def line_node(self, g: Graph, scope: _Scope, m: re.Match[str]) -> None:
        """A node line matched whole by ``LINE_RE`` (fast mode; errors raise anything)."""
        outs_text, op, ins_text, attrs_text, meta_text = m.groups()
        values = []
        for out in (
            outs_text[1:].split(", %") if '"' not in outs_text else OUT_RE.findall(outs_text)
        ):
            if out[0] == "%":  # from findall: "%name: type" or '%"name": type'
                out = out[1:]
            if out[0] == '"':  # no escapes in a fast line: the name ends at the next quote
                cut = out.index('"', 1)
                name, ty = out[1:cut], out[cut + 3 :]
            else:
                name, _, ty = out.partition(": ")
            t = _TYPE_CACHE.get(ty)
            if t is None:
                t = _Parser(ty).type()
            values.append(Value(name, t))
        inputs: list[Value | None] = []
        if ins_text:
            table = scope.values
            wtable = scope.weights
            for ref in ins_text.split(", ") if '"' not in ins_text else REF_RE.findall(ins_text):
                if ref == "_":
                    inputs.append(None)
                    continue
                name = ref[2:-1] if ref[1] == '"' else ref[1:]
                v = (table if ref[0] == "%" else wtable).get(name)
                if v is None:
                    v = scope.lookup("values" if ref[0] == "%" else "weights", name)
                    if v is None:
                        raise ParseError(f"undefined {ref}", 0, 0)
                inputs.append(v)
        key = (op, attrs_text or "")
        cached = self.attr_cache.get(key)
        if cached is not None:
            # The op's first spelling, shared by every node of that op (not one string each).
            schema, attrs, op = cached[0], dict(cached[1]), cached[2]
        else:
            schema = default_opset().get(op)
            raw: dict[str, Any] = {}
            if attrs_text:
                sub = _Parser(attrs_text)
                sub.depth = self.depth
                raw = sub.attrs(_Scope())
                if sub.texts[sub.i] != "":
                    raise sub.error("end of attributes")
            attrs = schema.normalize_attrs(raw)
            if all(_immutable(v) for v in attrs.values()):
                self.attr_cache[key] = (schema, attrs, op)
                attrs = dict(attrs)
        name = ""
        provenance = None
        if not meta_text:
            pass
        elif meta_text[:8] == 'name = "' and meta_text.find('"', 8) == len(meta_text) - 1:
            name = meta_text[8:-1]  # the common case: a name and no provenance
        else:
            meta = dict(_META_ITEM.findall(meta_text))
            if not meta.keys() <= _META_KEYS:
                raise ParseError("unknown node metadata", 0, 0)
            name = meta.get("name", "")
            if len(meta) > ("name" in meta):
                provenance = Provenance(
                    meta.get("framework", ""),
                    meta.get("op", ""),
                    meta.get("source", ""),
                    meta.get("module", ""),
                    self.stack(meta.get("stack", "")),
                )
        node = Node._assemble(op, schema, inputs, attrs, values, name, provenance)
        table = scope.values
        for v in values:
            if v.name in table:
                raise ParseError(f"value %{v.name} is defined twice", 0, 0)
            table[v.name] = v  # type: ignore[index]
        g.nodes.append(node)  # the names go into g._taken when the graph ends (graph())

    def node(self, g: Graph, scope: _Scope) -> None:
        start = self.i
        outs: list[tuple[int, str, TensorType]] = []
        while True:
            at = self.i
            name = self.sigil_name("%", "an output name")
            self.expect(":")
            outs.append((at, name, self.type()))
            if self.accept("="):
                break
            self.expect(",")
        op_at = self.i
        op = self.name("an op name")  # quoted: a custom op, "domain::name@version"
        self.expect("(")
        inputs: list[Value | None] = []
        if not self.accept(")"):
            while True:
                inputs.append(self.ref(scope))
                if self.accept(")"):
                    break
                self.expect(",")
        attrs = self.attrs(scope) if self.at("{") else {}
        meta: dict[str, str] = {}
        text = self.texts[self.i]
        if len(text) > 2 and text[0] == "!" and _META_FULL.match(text):
            meta = dict(_META_ITEM.findall(text))
            self.i += 1
        elif len(text) > 2 and text[0] == "!":
            try:
                meta = _Parser(text[2:-1] + "}").meta_items()
            except ParseError as e:
                at = self.tok
                raise ParseError(e.args[0].split(": ", 1)[1], at.line, at.col + e.col + 1) from None
            self.i += 1
        elif self.accept("!{"):
            meta = self.meta_items()
        bad = set(meta) - _META_KEYS
        if bad:
            t = self.toks_at(start)
            raise ParseError(f"unknown node metadata {sorted(bad)}", t.line, t.col)
        values = [Value(n, ty) for _, n, ty in outs]
        try:
            stack = self.stack(meta.get("stack", ""))
        except ParseError as e:
            t = self.toks_at(start)
            raise ParseError(e.args[0].split(": ", 1)[1], t.line, t.col) from None
        try:
            node = Node(
                op,
                inputs,
                attrs,
                outputs=values,
                name=meta.get("name", ""),
                provenance=Provenance(
                    meta.get("framework", ""),
                    meta.get("op", ""),
                    meta.get("source", ""),
                    meta.get("module", ""),
                    stack,
                )
                if meta
                else None,
            )
        except (TypeError, ValueError) as e:
            t = self.toks_at(op_at)
            raise ParseError(str(e), t.line, t.col) from None
        for (at, n, _), v in zip(outs, values):
            if n in scope.values:
                t = self.toks_at(at)
                raise ParseError(f"value %{n} is defined twice", t.line, t.col)
            scope.values[n] = v
            g._taken.add(n)
        g.nodes.append(node)


_INT = re.compile(r"-?\d+")
_INT_LIMIT = 1 << 63
_MAX_DIGITS = 1000
_MAX_DEPTH = 200
_TYPE_CACHE: dict[str, TensorType] = {}
_CONTAINERS = {"seq": SequenceType, "opt": OptionalType}
_META_ITEM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\\n]*)"')
_META_FULL = re.compile(
    r'!\{\s*(?:[A-Za-z_]\w*\s*=\s*"[^"\\\n]*"\s*,\s*)*(?:[A-Za-z_]\w*\s*=\s*"[^"\\\n]*"\s*)?\}\Z',
    re.ASCII,
)
_DTYPES = {d.short: d for d in DType}
_SIMPLE = {"none": None, "true": True, "false": False, "inf": float("inf"), "nan": float("nan")}
_META_KEYS = frozenset({"name", "framework", "op", "source", "module", "stack"})


def from_text(text: str) -> Graph:
    """Parse a graph printed by ``to_text``. Raises ParseError with line and column, and for a
    file from a newer msc, an error naming its versions and the ones this msc reads."""
    with paused():
        try:
            return _parse(_Parser(text, fast=True))
        except Exception:  # noqa: BLE001 - any error: parse again for the exact message
            pass
        return _parse(_Parser(text))


def _parse(p: _Parser) -> Graph:
    p.header()
    g = p.graph()
    if p.texts[p.i] != "":
        raise p.error("end of input")
    return g


def parse_dim(text: str) -> Any:
    """A dim from its spelling (``7``, ``batch{1..8}``, ``2*s0 + 1``); ParseError if it is not
    one. Length-limited: a dim's spelling is short."""
    if len(text) > 4096:
        raise ParseError("a dim spelling longer than 4096 characters", 1, 1)
    p = _Parser(text)
    d = p.dim()
    if p.texts[p.i] != "":
        raise p.error("the end of the dim")
    return d
