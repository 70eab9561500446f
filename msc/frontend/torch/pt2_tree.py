"""The input and output structures (pytree specs) of a .pt2 file, read as plain containers.

torch writes each module call's ``in_spec`` / ``out_spec`` as JSON naming the container types
(``builtins.tuple``, ``transformers.modeling_outputs.MaskedLMOutput``, ...). Its loader
refuses a type nobody registered with its pytree in this process, and, for two registered
kinds, imports a module the file names (``collections.defaultdict``'s factory, an enum in a
dict's keys). msc rewrites the spec before torch reads it, so that neither happens:

- tuples, lists, dicts and OrderedDicts stay as they are, their keys checked to be strings
  or integers (an enum key would import its module); a deque becomes a list;
- a defaultdict becomes the dict of its keys, a namedtuple the tuple of its fields;
- any other container (a transformers ``ModelOutput``, a registered dataclass) becomes an
  OrderedDict of its fields in order when the spec names them, else a tuple: what it is, as
  named fields, without importing its package.

# NOTE: the rewritten spec is what ``ExportedProgram.call_spec`` holds, so running the program
# (``ep.module()``) returns an OrderedDict where the source returned a ModelOutput, and msc's
# graph keeps the field names as its output structure.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["rewrite_spec"]

_MAX_DEPTH = 64
_MAX_CHARS = 1 << 24


def rewrite_spec(text: str) -> str:
    """A serialized TreeSpec with only builtin containers (ValueError naming what is wrong)."""
    if len(text) > _MAX_CHARS:
        raise ValueError(f"a structure of {len(text)} characters")
    try:
        protocol, root = json.loads(text)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a serialized structure ({e})") from None
    if protocol != 1:
        raise ValueError(f"structure protocol {protocol!r} (msc reads protocol 1)")
    return json.dumps([protocol, _node(root, 0)])


def _node(node: Any, depth: int) -> dict[str, Any]:
    if depth > _MAX_DEPTH:
        raise ValueError(f"a structure nested more than {_MAX_DEPTH} deep")
    if not isinstance(node, dict) or set(node) != {"type", "context", "children_spec"}:
        raise ValueError("a structure node is not {type, context, children_spec}")
    kind, context, children = node["type"], node["context"], node["children_spec"]
    if not isinstance(children, list) or not (kind is None or isinstance(kind, str)):
        raise ValueError("a structure node of the wrong form")
    if kind is None:
        if context is not None or children:
            raise ValueError("a leaf with a context or children")
        return node
    kids = [_node(c, depth + 1) for c in children]
    ctx = _context(context)
    if kind in ("builtins.tuple", "builtins.list"):
        return _make(kind, None, kids)
    if kind in ("builtins.dict", "collections.OrderedDict"):
        return _make(kind, _keys(ctx, len(kids)), kids)
    if kind == "collections.deque":
        return _make("builtins.list", None, kids)
    if kind == "collections.defaultdict":
        inner = ctx.get("dict_context") if isinstance(ctx, dict) else None
        return _make("builtins.dict", _keys(inner, len(kids)), kids)
    names = _field_names(ctx, len(kids))
    if names is not None:
        return _make("collections.OrderedDict", names, kids)
    return _make("builtins.tuple", None, kids)


def _context(context: Any) -> Any:
    """A node's context: JSON text for most kinds, an object for a defaultdict, a type name
    for a namedtuple."""
    if context is None or isinstance(context, dict):
        return context
    if not isinstance(context, str):
        raise ValueError("a structure context that is neither text nor an object")
    try:
        return json.loads(context)
    except ValueError:
        return context


def _keys(ctx: Any, n: int) -> list[Any]:
    if not isinstance(ctx, list) or len(ctx) != n:
        raise ValueError(f"a dict structure whose keys are not a list of {n}")
    for k in ctx:
        if isinstance(k, bool) or not isinstance(k, str | int):
            raise ValueError(f"a dict key {k!r} (msc reads string and integer keys)")
    return ctx


def _field_names(ctx: Any, n: int) -> list[str] | None:
    """The field names a container's context gives: a list of ``n`` names (a ModelOutput's
    keys), or a registered dataclass's ``[names, none_names]``; None if neither."""
    candidates = [ctx]
    if isinstance(ctx, list) and len(ctx) == 2 and isinstance(ctx[0], list):
        candidates.insert(0, ctx[0])
    for names in candidates:
        if isinstance(names, list) and len(names) == n and len(set(map(str, names))) == n:
            if all(isinstance(k, str) for k in names):
                return names
    return None


def _make(kind: str, keys: list[Any] | None, kids: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": kind, "context": json.dumps(keys), "children_spec": kids}
