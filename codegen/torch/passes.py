"""Passes over the generated ``forward`` body (Python ``ast`` statements), run after emission.

# NOTE: invariants
# - Each pass keeps what the code computes: it drops statements nothing reads (``prune``),
#   substitutes a name by an expression of equal value (``Rename``, ``inline_sizes``,
#   ``inline_arithmetic``), or adds
#   ``del`` after a last read (``release_after_last_use``).
# - Names in the body are assigned once (one statement per node), except a loop body's bound
#   names, which are rebound per iteration: nothing moves into or out of a loop or a function.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping

__all__ = [
    "Rename",
    "walk_stmts",
    "prune",
    "RELEASE_BYTES",
    "SCOPE_STATEMENTS",
    "release_after_last_use",
    "inline_sizes",
    "INLINE_CHARS",
    "inline_arithmetic",
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


# An intermediate of this size or more is released right after its last read; smaller ones
# wait and are released together once they add up to it (or with the next large one), so the
# code is not a ``del`` after every line while dead memory stays under this bound. Releasing
# is not only about peak memory: a forward pass that keeps each layer's activations until it
# returns grows the heap by all of them, glibc gives that memory back to the OS on return,
# and the next call page-faults it in again. Measured on bench/'s Llama (~100M, 1 x 128
# tokens, 393 KB activations), generated / eager time in fresh processes: 1.09-1.13x when
# activations under 1 MB were never released, 0.94-1.03x (median 0.99) with this bound; the
# rest of the spread is glibc's heap trimming, which hits the eager model as well.
RELEASE_BYTES = 1 << 18

# A forward of at most this many statements (a block's class, the top level of a model whose
# blocks are classes) releases nothing itself: its locals die when it returns, as in the code a
# person writes. Longer forwards (flat code, a block spelled out at length) get the ``del``s.
# What a person frees by rebinding (``h = self.act(h)``) a short forward frees by writing a
# chain as one expression (``inline_arithmetic``) and a layer list as a loop (blocks.loops).
SCOPE_STATEMENTS = 60


def release_after_last_use(
    body: list[ast.stmt], small: Mapping[str, int] | None = None
) -> list[ast.stmt]:
    """``body`` with ``del a, b`` after the statement that last reads each intermediate, so a
    forward pass holds only live tensors (torch.fx frees its values the same way). Arguments
    and anything the return statement reads are left alone. ``small`` maps intermediates of
    known size under ``RELEASE_BYTES`` to their bytes: those wait after their last read and
    are released together, with the next large one or once the waiting bytes reach
    ``RELEASE_BYTES``, so dead memory stays under that bound with few ``del`` lines. A body of
    at most ``SCOPE_STATEMENTS`` statements is returned as it is."""
    if len(body) <= SCOPE_STATEMENTS:
        return body
    small = small or {}
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
        if name not in keep and not isinstance(body[i], ast.Return):
            frees.setdefault(i, []).append(name)
    out: list[ast.stmt] = []
    waiting: list[str] = []
    waiting_bytes = 0
    for i, st in enumerate(body):
        out.append(st)
        now = []
        for name in frees.get(i, ()):
            if name in small:
                waiting.append(name)
                waiting_bytes += small[name]
            else:
                now.append(name)
        if now or waiting_bytes >= RELEASE_BYTES:
            now += waiting
            waiting, waiting_bytes = [], 0
        if now:
            out.append(ast.Delete([ast.Name(n, ast.Del()) for n in sorted(now)]))
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


# An arithmetic expression moves into the next one up to this many characters, each name
# counted as four (names are renamed later, and blocks that differ only in their locals' names
# must come out equal: they share a class).
INLINE_CHARS = 72


def inline_arithmetic(body: list[ast.stmt], functions: set[str]) -> list[ast.stmt]:
    """``body`` with each arithmetic value read once, by the next statement, itself
    arithmetic, written where it is read: ``y = x * 0.5 * (torch.tanh(x * 0.79) + 1)`` rather
    than a variable per operator, ``a = self.act(self.norm(self.conv(x)))`` as torchvision
    writes it. Arithmetic is operators on names and constants and calls (no keywords) of
    ``functions``: elementwise torch functions (``"torch.tanh"``) and library modules
    (``"self.norm"``), pure, so moving one into the next statement changes no value, no order
    of side effects, and no other value's lifetime.

    Not only for reading: a block's forward keeps its locals to the return (no ``del`` in a
    short forward: passes.SCOPE_STATEMENTS), and a chain of N elementwise statements holds N
    activations where Python frees an expression's temporaries as soon as they are read. On
    GPT-2 (768 wide, 1 x 128 tokens) the tanh GELU held nine 1.5 MB tensors per layer; glibc
    returned the heap's top to the OS after each call and page-faulted it in on the next
    (2x the eager model's faults per call, generated / eager 1.11x in bench/run.py)."""
    counts: dict[str, int] = {}
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    out: list[ast.stmt] = []
    for st in body:
        prev = out[-1] if out else None
        name = _arith_target(prev, functions) if prev is not None else None
        if (
            name is not None
            and counts.get(name) == 1
            and _arith_target(st, functions) is not None
            and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(st.value))  # type: ignore[attr-defined]
        ):
            merged = Rename({name: prev.value}).visit(copy.deepcopy(st.value))  # type: ignore[union-attr, attr-defined]
            if _chars(merged) <= INLINE_CHARS:
                out[-1] = ast.Assign(copy.deepcopy(st.targets), merged)  # type: ignore[attr-defined]
                continue
        out.append(st)
    return out


_ARITH = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Constant, ast.Load, ast.operator,
          ast.unaryop, ast.cmpop)  # fmt: skip


def _arith_target(st: ast.stmt, functions: set[str]) -> str | None:
    """The name ``st`` assigns when it is ``name = <arithmetic>``, else None."""
    if not isinstance(st, ast.Assign) or len(st.targets) != 1:
        return None
    t = st.targets[0]
    if not isinstance(t, ast.Name) or isinstance(st.value, ast.Name | ast.Constant):
        return None
    for n in ast.walk(st.value):
        if isinstance(n, ast.Call):
            if n.keywords or ast.unparse(n.func) not in functions:
                return None
        elif not isinstance(n, _ARITH) and not _in_call_func(n, st.value):
            return None
    return t.id


def _chars(e: ast.expr) -> int:
    e = copy.deepcopy(e)
    for n in ast.walk(e):
        if isinstance(n, ast.Name):
            n.id = "name"
    return len(ast.unparse(e))


def _in_call_func(n: ast.AST, root: ast.expr) -> bool:
    """``n`` is part of the function of a call in ``root`` (``torch`` or ``.tanh`` of
    ``torch.tanh(x)``)."""
    return any(
        isinstance(c, ast.Call) and any(n is m for m in ast.walk(c.func)) for c in ast.walk(root)
    )


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
    """``x.shape[1:2][0]`` -> ``x.shape[1]``; ``[a, b][1]`` -> ``b``; ``[*[a, b], c]`` ->
    ``[a, b, c]``."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        inner, k = node.value, node.slice
        if isinstance(inner, ast.List) and not any(isinstance(x, ast.Starred) for x in inner.elts):
            i = _int(k)
            if i is not None and 0 <= i < len(inner.elts):
                return inner.elts[i]
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
