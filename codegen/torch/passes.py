"""Passes over the generated ``forward`` body (Python ``ast`` statements), run after emission.

# NOTE: invariants
# - Each pass keeps what the code computes: it drops statements nothing reads (``prune``),
#   substitutes a name by an expression of equal value (``Rename``, ``inline_sizes``), or adds
#   ``del`` after a last read (``release_after_last_use``).
# - Names in the body are assigned once (one statement per node), except a loop body's bound
#   names, which are rebound per iteration: nothing moves into or out of a loop or a function.
"""

from __future__ import annotations

import ast

__all__ = [
    "Rename",
    "walk_stmts",
    "prune",
    "RELEASE_BYTES",
    "release_after_last_use",
    "inline_sizes",
]


class Rename(ast.NodeTransformer):
    """Replace reads of names by expressions (fresh copies per use)."""

    def __init__(self, subs: dict[str, ast.expr]) -> None:
        self.subs = subs

    def visit_Name(self, node: ast.Name) -> ast.expr:
        sub = self.subs.get(node.id)
        if sub is None or not isinstance(node.ctx, ast.Load):
            return node
        return ast.parse(ast.unparse(sub), mode="eval").body


def walk_stmts(stmts: list[ast.stmt]):
    for st in stmts:
        yield st
        for field in ("body", "orelse"):
            yield from walk_stmts(getattr(st, field, None) or [])


def prune(stmts: list[ast.stmt], drop: set[int]) -> list[ast.stmt]:
    """``stmts`` without the statements in ``drop`` (constants only ever used as literals)."""
    out = []
    for st in stmts:
        if id(st) in drop:
            continue
        if isinstance(st, ast.If | ast.For | ast.While):  # branches and loop bodies
            st.body = prune(st.body, drop) or [ast.Pass()]
            st.orelse = prune(st.orelse, drop)
        elif isinstance(st, ast.FunctionDef):  # a branch or loop body as a function
            st.body = prune(st.body, drop) or [ast.Pass()]
        out.append(st)
    return out


# An intermediate smaller than this is not released early: freeing it a few statements
# before the function returns saves at most this much, and a ``del`` after every line makes
# the code hard to read. Larger ones (activations of a real batch) are freed after last use.
RELEASE_BYTES = 1 << 20


def release_after_last_use(body: list[ast.stmt], small: set[str] = frozenset()) -> list[ast.stmt]:
    """``body`` with ``del a, b`` after the statement that last reads each intermediate, so a
    forward pass holds only live tensors (torch.fx frees its values the same way). Arguments,
    anything the return statement reads and the ``small`` names are left alone."""
    assigned: set[str] = set()
    for st in body:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                assigned |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    last: dict[str, int] = {}
    for i, st in enumerate(body):
        reads = st if not isinstance(st, ast.Assign) else st.value
        for n in ast.walk(reads):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in assigned:
                last[n.id] = i
        if not isinstance(st, ast.Assign):  # branches and loops may also write names
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and n.id in assigned:
                    last[n.id] = max(last.get(n.id, i), i)
    keep = {
        n.id
        for st in body
        if isinstance(st, ast.Return)
        for n in ast.walk(st)
        if isinstance(n, ast.Name)
    }
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in keep and name not in small and not isinstance(body[i], ast.Return):
            frees.setdefault(i, []).append(name)
    out: list[ast.stmt] = []
    for i, st in enumerate(body):
        out.append(st)
        if i in frees:
            names = sorted(frees[i])
            out.append(ast.Delete([ast.Name(n, ast.Del()) for n in names]))
    return out


def inline_sizes(body: list[ast.stmt], names: set[str]) -> list[ast.stmt]:
    """``body`` with each size (a name in ``names``) that is read once, by a later simple
    statement of the same block, written where it is read: ``x.reshape([batch, seq, 32])``
    rather than three list variables. Only pure size expressions move (shapes, subscripts,
    lists, arithmetic), never into a loop or a function body, where a name can be rebound."""
    counts: dict[str, int] = {}
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    out = _inline_block(body, {k for k in names if counts.get(k) == 1})
    return [_Simplify().visit(st) for st in out]


_PURE = (
    ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Constant, ast.List, ast.Tuple,
    ast.Starred, ast.BinOp, ast.UnaryOp, ast.Load, ast.operator, ast.unaryop,
)  # fmt: skip


def _inline_block(stmts: list[ast.stmt], movable: set[str]) -> list[ast.stmt]:
    pending: dict[str, ast.Assign] = {}
    moved: set[int] = set()

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            st = pending.get(node.id) if isinstance(node.ctx, ast.Load) else None
            if st is None:
                return node
            moved.add(id(st))
            return st.value

    for st in stmts:
        if isinstance(st, ast.Assign | ast.Expr | ast.Return | ast.Delete):
            Sub().visit(st)
            t = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
            if isinstance(t, ast.Name) and t.id in movable:
                if all(isinstance(n, _PURE) for n in ast.walk(st.value)):
                    pending[t.id] = st
        else:
            for field in ("body", "orelse"):
                sub = getattr(st, field, None)
                if sub:
                    setattr(st, field, _inline_block(sub, movable))
    return [st for st in stmts if id(st) not in moved]


class _Simplify(ast.NodeTransformer):
    """``x.shape[1:2][0]`` -> ``x.shape[1]``; ``[*[a, b], c]`` -> ``[a, b, c]``."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        inner, k = node.value, node.slice
        if not (isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Slice)):
            return node
        sl = inner.slice
        lo = 0 if sl.lower is None else _int(sl.lower)
        hi = None if sl.upper is None else _int(sl.upper)
        k_ = _int(k)
        if sl.step is not None or lo is None or lo < 0 or k_ is None or k_ < 0:
            return node
        if sl.upper is not None and (hi is None or lo + k_ >= hi):
            return node
        return ast.Subscript(inner.value, ast.Constant(lo + k_), ast.Load())

    def visit_List(self, node: ast.List) -> ast.expr:
        self.generic_visit(node)
        elts: list[ast.expr] = []
        for x in node.elts:
            if isinstance(x, ast.Starred) and isinstance(x.value, ast.List | ast.Tuple):
                elts += x.value.elts
            else:
                elts.append(x)
        node.elts = elts
        return node


def _int(e: ast.expr) -> int | None:
    return e.value if isinstance(e, ast.Constant) and type(e.value) is int else None
