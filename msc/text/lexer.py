"""The tokens of msc's text format: a careful lexer that knows every token's line and column
(for errors), and a fast one that takes a whole node line in one regular-expression match.

# NOTE: the fast lexer only speeds up well-formed files: on any error the parser starts again
# with the careful one, whose messages give line and column. No pattern backtracks
# exponentially (a file is untrusted input).
"""

from __future__ import annotations

import bisect
import re

__all__ = ["LINE", "LINE_RE", "OUT_RE", "REF_RE", "Tok", "kind_of", "lex", "lex_fast",
           "line_col", "newlines", "token_ends"]  # fmt: skip


# Blanks, then comments each followed by blanks: every repetition starts with "#", so there is one
# way to match and no backtracking (a nested "(?:[ \t]+|#...)*" was exponential on a long run of
# trailing blanks).
_SKIP = r"[ \t\r\n]*(?:\#[^\n]*[ \t\r\n]*)*"
_TOKEN_BODY = (
    # Compound tokens for the common shapes, so a node line is ~9 tokens, not ~22:
    r"[%@](?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?![A-Za-z0-9_])"  # a bare %value / @weight
    r"|[a-z0-9]+\[[^\[\]\"\n]*\]"  # a type with no quoted symbol: f32[1, batch{1..8}, ?]
    r'|!\{(?:[A-Za-z0-9_ \t=,]|"[^"\\\n]*")*\}'  # node metadata with no escapes
    r'|"(?:[^"\\\n]|\\.)*"?'  # a string; unterminated: the rest of the line, one bad token
    r"|-inf\b|-nan\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"  # number
    r"|[A-Za-z_][A-Za-z0-9_]*"  # identifier
    r"|\.\.|!\{|[{}()\[\],:=?*%@<>]"  # punctuation
    r"|[^ \t\r\n]"  # anything else: reported as an unexpected character
    r"|\Z"  # end of input after blanks: matched here rather than by backtracking over them
)
# Each token swallows the blanks and comments before it; findall returns just the token texts.
_TOKEN = re.compile(_SKIP + "(" + _TOKEN_BODY + ")")
_KINDS = {c: "num" for c in "-0123456789"}


_PUNCT = frozenset("{}()[],:=?*%@<>") | {"..", "!{"}


def kind_of(text: str) -> str:
    """A token's kind from its text (the grammar keeps these disjoint)."""
    if not text:
        return "eof"
    c = text[0]
    if c == '"':
        # Closed when it ends in a quote that an odd run of backslashes does not escape.
        body = text[1:-1] if len(text) > 1 and text[-1] == '"' else None
        if body is None or (len(body) - len(body.rstrip("\\"))) % 2:
            return "bad"
        return "str"
    if c in _KINDS:
        return _KINDS[c]
    if text[-1] == "]" and len(text) > 1:
        return "type"
    if c == "_" or c.isalpha():
        return "ident"
    if (c == "%" or c == "@") and len(text) > 1:
        return "ref"
    if c == "!" and len(text) > 2:
        return "meta"
    return "punct" if text in _PUNCT else "bad"


class Tok:
    """One token, built only when an error message needs its line and column."""

    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int) -> None:
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self) -> str:
        return "end of input" if self.kind == "eof" else repr(self.text)


def lex(src: str) -> list[str]:
    """Token texts, ending with "" for end of input (stray characters are "bad" tokens)."""
    texts = _TOKEN.findall(src)
    if not texts or texts[-1] != "":
        texts.append("")
    return texts


# A whole node line in the printer's plain spelling (see _Parser). Every repetition starts with
# a character its neighbours cannot, so a match is one left-to-right pass (linear time).
_NAME = r'(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|"[^"\\\n]*")'
_REF = r"(?:[%@]" + _NAME + r"|_)"
_OUT = r"%" + _NAME + r': [a-z][a-z0-9]*\[[^\[\]"\n]*\]'
_STR = r'"[^"\\\n]*"'
LINE_RE = re.compile(
    r"[ \t]*(" + _OUT + r"(?:, " + _OUT + r")*)"  # outputs
    r" = ([A-Za-z_][A-Za-z0-9_]*)"  # op
    r"\((" + _REF + r"(?:, " + _REF + r")*)?\)"  # inputs
    r"(?: (\{(?:[^{}\"\n!#]|" + _STR + r")*\}))?"  # attributes: no braces, no escapes
    r"(?: !\{((?:[A-Za-z_][A-Za-z0-9_]* = " + _STR + r", )*"
    r"[A-Za-z_][A-Za-z0-9_]* = " + _STR + r")\})?"  # metadata
    r"[ \t\r]*\Z"
)
OUT_RE = re.compile(_OUT)
REF_RE = re.compile(_REF)
# The placeholder token of a matched line (never a token text: the lexer cannot produce it).
LINE = "\x00line"


def lex_fast(src: str, lines: dict[int, re.Match[str]]) -> list[str]:
    """As ``lex``, but each line ``LINE_RE`` matches is one ``LINE`` token (its match in
    ``lines`` by token index). A line is taken only when the next line cannot continue its
    node (attributes or metadata on a line of their own)."""
    texts: list[str] = []
    start = pos = 0  # start of the pending run of ordinary lines; start of this line
    size = len(src)
    match, find, starts = LINE_RE.match, src.find, src.startswith
    while pos <= size:  # line by line, matched in place (no copy of each line)
        nl = find("\n", pos)
        if nl < 0:
            nl = size
        end = nl + 1
        if starts((" ", "%"), pos) and (m := match(src, pos, nl)) is not None:
            if nl == size or starts("  %", end):  # last line, or the next is a node
                take = True
            else:
                after = find("\n", end)
                nxt = src[end : after if after >= 0 else size].lstrip()[:1]
                take = bool(nxt) and nxt not in "{!#"
            if take:
                if start < pos:
                    texts += _TOKEN.findall(src, start, pos)
                    while texts and texts[-1] == "":  # end-of-run matches, not end of input
                        texts.pop()
                lines[len(texts)] = m
                texts.append(LINE)
                start = end
        pos = end
    texts += _TOKEN.findall(src, min(start, len(src)))
    if not texts or texts[-1] != "":
        texts.append("")
    return texts


def newlines(src: str) -> list[int]:
    return [m.start() for m in re.finditer("\n", src)]


def token_ends(src: str) -> list[int]:
    """End offsets of the tokens (only computed when an error message needs a position)."""
    matches = list(_TOKEN.finditer(src))
    ends = [m.end() for m in matches]
    if not matches or matches[-1].group(1) != "":  # as lex: one "" token for end of input
        ends.append(len(src))
    return ends


def line_col(newlines: list[int], pos: int) -> tuple[int, int]:
    line = bisect.bisect_left(newlines, pos)
    start = newlines[line - 1] + 1 if line else 0
    return line + 1, pos - start + 1
