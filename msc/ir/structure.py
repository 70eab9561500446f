"""The nesting of a model's outputs (tuple, list, dict, None, constants) around graph outputs.

# NOTE: a frontend that sees structured outputs sets ``graph.output_tree`` to a spec (plain
# data, checked on assignment, never code); the text format prints it, structural equality
# with names compares it, and a codegen rebuilds the same structure from it. None: one output
# is returned bare, several as a tuple. ``encode``/``decode`` give its JSON form, for formats
# that can only store strings (ONNX metadata).
#
# Spec:
#   {"leaf": i}                        graph.outputs[i]
#   {"tuple": [spec, ...]}             {"list": [spec, ...]}
#   {"dict": [[key, spec], ...]}       keys are str or int, order kept
#   {"const": value}                   a non-tensor constant (int, float, bool, str, None)
"""

from __future__ import annotations

import json
from typing import Any

from msc.ir.graph import GraphError

__all__ = ["encode", "decode", "check", "leaves", "rebuild"]


def encode(spec: Any) -> str:
    check(spec)
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> Any:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphError(f"bad output_tree: {e}") from None
    check(spec)
    return spec


def check(spec: Any) -> None:
    if not isinstance(spec, dict) or len(spec) != 1:
        raise GraphError(f"bad output_tree node {spec!r}")
    ((kind, body),) = spec.items()
    if kind == "leaf":
        if not isinstance(body, int) or isinstance(body, bool) or body < 0:
            raise GraphError(f"bad leaf index {body!r}")
    elif kind in ("tuple", "list"):
        if not isinstance(body, list):
            raise GraphError(f"bad {kind} body {body!r}")
        for s in body:
            check(s)
    elif kind == "dict":
        if not isinstance(body, list):
            raise GraphError(f"bad dict body {body!r}")
        for item in body:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str | int)):
                raise GraphError(f"bad dict item {item!r}")
            check(item[1])
    elif kind == "const":
        if not (body is None or isinstance(body, bool | int | float | str)):
            raise GraphError(f"bad const {body!r}")
    else:
        raise GraphError(f"unknown output_tree kind {kind!r}")


def leaves(spec: Any) -> list[int]:
    """Leaf indices in order of appearance."""
    ((kind, body),) = spec.items()
    if kind == "leaf":
        return [body]
    if kind in ("tuple", "list"):
        return [i for s in body for i in leaves(s)]
    if kind == "dict":
        return [i for _, s in body for i in leaves(s)]
    return []


def rebuild(spec: Any, values: list[Any]) -> Any:
    """Rebuild the structure at run time from the flat output values."""
    ((kind, body),) = spec.items()
    if kind == "leaf":
        return values[body]
    if kind == "tuple":
        return tuple(rebuild(s, values) for s in body)
    if kind == "list":
        return [rebuild(s, values) for s in body]
    if kind == "dict":
        return {k: rebuild(s, values) for k, s in body}
    return body
