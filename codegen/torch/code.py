"""The small code-building layer: Python values and our own templates to ``ast`` nodes.

# NOTE: invariants
# - Model-supplied data reaches code only as ``ast.Constant`` (printed with ``repr``) or as an
#   identifier from ``names.Namespace``. Templates (``expr("F.relu(x)", x=...)``) are strings
#   written in this package, never built from model data: they are parsed, then their
#   placeholder names are replaced by ready-made ast nodes.
# - Non-finite floats print as ``float('inf')`` / ``float('nan')`` so the code reads (and
#   round-trips) exactly.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from msc.ir.dtype import DType, shortest

__all__ = [
    "const",
    "expr",
    "call",
    "name",
    "attr_path",
    "dtype_expr",
    "TORCH_DTYPES",
    "to_ast",
    "shortest",
]

TORCH_DTYPES: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.INT16: "int16",
    DType.INT32: "int32",
    DType.INT64: "int64",
    DType.UINT8: "uint8",
    DType.UINT16: "uint16",
    DType.UINT32: "uint32",
    DType.UINT64: "uint64",
    DType.FLOAT16: "float16",
    DType.BFLOAT16: "bfloat16",
    DType.FLOAT32: "float32",
    DType.FLOAT64: "float64",
    DType.COMPLEX64: "complex64",
    DType.COMPLEX128: "complex128",
    DType.FLOAT8_E4M3FN: "float8_e4m3fn",
    DType.FLOAT8_E4M3FNUZ: "float8_e4m3fnuz",
    DType.FLOAT8_E5M2: "float8_e5m2",
    DType.FLOAT8_E5M2FNUZ: "float8_e5m2fnuz",
    DType.FLOAT8_E8M0: "float8_e8m0fnu",
    # torch has no 4-/2-bit kernels: these live in carrier dtypes (see lowbit.py).
    DType.INT4: "int8",
    DType.INT2: "int8",
    DType.UINT4: "uint8",
    DType.UINT2: "uint8",
    DType.FLOAT4_E2M1: "float32",
}


def name(ident: str) -> ast.Name:
    """A name load. ``ident`` must come from a Namespace or be one of ours."""
    if not ident.isidentifier():
        raise ValueError(f"not an identifier: {ident!r}")
    return ast.Name(ident, ast.Load())


def dtype_expr(dt: DType) -> ast.expr:
    """``torch.float32`` for DType.FLOAT32."""
    return ast.Attribute(name("torch"), TORCH_DTYPES[dt], ast.Load())


def _float(v: float) -> ast.expr:
    if math.isnan(v):
        return call("float", "nan")
    if math.isinf(v):
        e = call("float", "inf")
        return ast.UnaryOp(ast.USub(), e) if v < 0 else e
    if v == 0.0 and math.copysign(1.0, v) < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(0.0))
    return ast.Constant(v)


def const(v: Any) -> ast.expr:
    """A Python value (None, bool, int, float, str, tuples/lists/dicts of them, DType) as ast."""
    if v is None or isinstance(v, bool | str):
        return ast.Constant(v)
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, int):
        return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, DType):
        return dtype_expr(v)
    if isinstance(v, tuple):
        return ast.Tuple([to_ast(x) for x in v], ast.Load())
    if isinstance(v, list):
        return ast.List([to_ast(x) for x in v], ast.Load())
    if isinstance(v, Mapping):
        return ast.Dict([to_ast(k) for k in v], [to_ast(x) for x in v.values()])
    raise TypeError(f"cannot put a {type(v).__name__} into generated code")


def to_ast(v: Any) -> ast.expr:
    """``v`` if it already is an expression (or has an ``.expr``), else ``const(v)``."""
    if isinstance(v, ast.expr):
        return v
    e = getattr(v, "expr", None)
    if isinstance(e, ast.expr):
        return e
    return const(v)


class _Fill(ast.NodeTransformer):
    def __init__(self, subs: Mapping[str, ast.expr]) -> None:
        self.subs = subs

    def visit_Name(self, node: ast.Name) -> ast.expr:
        sub = self.subs.get(node.id)
        return node if sub is None else _copy(sub)


def _copy(node: ast.expr) -> ast.expr:
    # Each use gets its own node so fix_missing_locations and later edits cannot alias.
    return ast.parse(ast.unparse(node), mode="eval").body if _is_small(node) else node


def _is_small(node: ast.AST) -> bool:
    return isinstance(node, ast.Name | ast.Attribute | ast.Constant)


_TEMPLATES: dict[str, ast.expr] = {}


def expr(template: str, **subs: Any) -> ast.expr:
    """Parse our own expression ``template`` and replace its placeholder names by ``subs``.

    ``expr("F.conv2d(x, w, stride=s)", x=arg, w=weight, s=(1, 1))``: values may be ast nodes,
    objects with an ``.expr`` (emitter arguments), or constants for ``const``.
    """
    tree = _TEMPLATES.get(template)
    if tree is None:
        tree = ast.parse(template, mode="eval").body
        _TEMPLATES[template] = tree
    fresh = ast.parse(ast.unparse(tree), mode="eval").body
    return _Fill({k: to_ast(v) for k, v in subs.items()}).visit(fresh)


def call(func: str, *args: Any, **kwargs: Any) -> ast.Call:
    """``func(*args, **kwargs)`` where ``func`` is one of our dotted names (``"F.conv2d"``)."""
    f = ast.parse(func, mode="eval").body
    if not isinstance(f, ast.Name | ast.Attribute):
        raise ValueError(f"not a function path: {func!r}")
    return ast.Call(
        f,
        [to_ast(a) for a in args],
        [ast.keyword(k, to_ast(v)) for k, v in kwargs.items()],
    )


def attr_path(root: ast.expr, parts: list[str | int]) -> ast.expr:
    """``root.a.b`` / ``root[0]`` / ``getattr(root, 'x-y')`` for each part.

    Strings that are plain, non-private identifiers become attributes; ints become subscripts
    (ModuleList); anything else goes through ``getattr`` with ``repr``-quoted name.
    """
    e = root
    for p in parts:
        if isinstance(p, int):
            e = ast.Subscript(e, ast.Constant(p), ast.Load())
        elif is_plain_attr(p):
            e = ast.Attribute(e, p, ast.Load())
        else:
            e = ast.Call(name("getattr"), [e, ast.Constant(p)], [])
    return e


def is_plain_attr(p: str) -> bool:
    import keyword

    return (
        p.isascii()
        and p.isidentifier()
        and not keyword.iskeyword(p)
        and not p.startswith("__")  # private names are mangled inside a class body
    )


def wrap_lines(source: str, width: int = 100) -> str:
    """``source`` (one statement per line, as ``ast.unparse`` writes it) with each line over
    ``width`` characters split at the commas of its last bracketed argument list, one item a
    line (``f(\\n    a,\\n    b,\\n)``), again inside an item still too long; one item gets
    no trailing comma (which would make a parenthesized item a tuple); never a subscript's.
    A long ``del`` is several. A line that does not tokenize alone (inside a docstring) stays
    as it is."""
    out: list[str] = []
    for line in source.split("\n"):
        out.extend(_wrap_line(line, width))
    return "\n".join(out)


def _wrap_line(line: str, width: int) -> list[str]:
    import io
    import tokenize

    if len(line) <= width or line.lstrip().startswith("#"):
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    if line.lstrip().startswith("del ") and "(" not in line and "[" not in line:
        import textwrap  # names only: several del lines

        names = line.lstrip()[4:]
        rows = textwrap.wrap(names, width - len(indent) - 5, break_long_words=False)
        return [f"{indent}del {r.rstrip(',')}" for r in rows]
    try:
        toks = [
            t
            for t in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline)
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line]
    text = line.strip()
    # The closing bracket: the last token, or the one before a final ":" or ",".
    end = len(toks) - 1
    while end >= 0 and toks[end].string in (":", ","):
        end -= 1
    if end < 0 or toks[end].string not in ")]}":
        return [line]
    depth, opener = 0, None
    for i, t in enumerate(toks[: end + 1]):
        if t.type != tokenize.OP:
            continue
        if t.string in "([{":
            if depth == 0 and opener is None:
                opener = i
            depth += 1
        elif t.string in ")]}":
            depth -= 1
            if depth == 0 and i != end:
                opener = None  # closed before the end: not the bracket that ends the line
    if opener is None:
        return [line]
    prev = toks[opener - 1] if opener else None
    if (
        toks[opener].string == "["
        and prev is not None
        and (prev.type == tokenize.NAME or prev.string in (")", "]"))
    ):
        return [line]  # a subscript
    cuts, depth = [], 0
    for i in range(opener + 1, end):
        s = toks[i].string if toks[i].type == tokenize.OP else ""
        if s and s in "([{":
            depth += 1
        elif s and s in ")]}":
            depth -= 1
        elif s == "," and depth == 0:
            cuts.append(i)
    one = not cuts  # one item: no trailing comma (it would make a parenthesized item a tuple)
    col = lambda i: toks[i].start[1]  # noqa: E731 (one line: start columns on one line)
    head = text[: col(opener) + 1]
    starts = [opener + 1] + [c + 1 for c in cuts]
    stops = cuts + [end]
    items = [text[toks[a].start[1] : col(b)].strip() for a, b in zip(starts, stops) if a < b]
    items = [x for x in items if x]
    inner = indent + "    "
    lines = [indent + head]
    if one and len(items) != 1:
        return [line]
    for x in items:
        lines.extend(_wrap_line(inner + x + ("" if one else ","), width))
    lines.append(indent + text[col(end) :])
    return lines
