"""Custom nodes in generated PyTorch: a call of the torch.library op they stand for.

A custom node ``ns::name@version`` (``name`` may end in ``.overload``) becomes
``torch.ops.ns.name.overload(arg=..., ...)`` when that op is registered in this process when
the code is generated; tensor inputs fill the op schema's tensor arguments in order, attributes
its other arguments by name. Anything else (an ONNX com.microsoft op, an op whose library is not
loaded) is refused with its name and domain.

# NOTE: invariants
# - Nothing from the model becomes code except as a checked identifier: namespace, op and
#   overload must be Python identifiers (not keywords) and resolve to a registered op;
#   attribute values are literals (msc.codegen.torch.code.const).
"""

from __future__ import annotations

import ast
import keyword
from typing import Any

import torch

from codegen.torch import code
from msc.ir.graph import Node
from msc.ops.custom import CustomOp, parse_custom

__all__ = ["resolve", "check", "call"]


def _ident(s: str) -> bool:
    return s.isidentifier() and not keyword.iskeyword(s)


def resolve(op: str) -> tuple[Any, str]:
    """(the OpOverload, its dotted call path) for custom op ``op``; ValueError with the reason
    when it is not a registered torch.library op."""
    c: CustomOp = parse_custom(op)  # type: ignore[assignment]
    opname, _, overload = c.name.partition(".")
    overload = overload or "default"
    where = f"custom op {op} (domain {c.domain!r})"
    # Dunder names reach Python's own attributes of torch.ops (``__class__``), never an op.
    if not all(_ident(p) and not p.startswith("__") for p in (c.domain, opname, overload)):
        raise ValueError(f"{where}: not a torch.library op name (ns::name[.overload])")
    try:
        packet = getattr(getattr(torch.ops, c.domain), opname)
        overload_fn = getattr(packet, overload)
    except (AttributeError, RuntimeError):
        overload_fn = None
    if not isinstance(overload_fn, torch._ops.OpOverload):
        raise ValueError(
            f"{where} is not a registered torch.library op; load the library that defines "
            "it before generating PyTorch code"
        )
    return overload_fn, f"torch.ops.{c.domain}.{opname}.{overload}"


def check(node: Node) -> None:
    """ValueError with the reason when ``node`` cannot become a call: its op is not a
    registered torch.library op, its inputs or attributes do not fit the op's schema, or an
    attribute holds binary data (bytes: no torch schema argument takes it, and it never
    becomes code)."""
    _arguments(node, list(node.inputs))


def _arguments(node: Node, args: list[Any]) -> tuple[str, dict[str, Any]]:
    """(the call path, its keyword arguments) of ``node`` with inputs ``args``."""
    fn, path = resolve(node.op)
    binary = sorted(k for k, v in node.attrs.items() if isinstance(v, bytes))
    if binary:
        raise ValueError(
            f"custom op {node.op}: attribute(s) {binary} hold binary data (bytes), which no "
            "torch.library argument takes"
        )
    schema = fn._schema
    tensors = [a for a in schema.arguments if str(a.type) in ("Tensor", "Optional[Tensor]")]
    others = {a.name for a in schema.arguments} - {a.name for a in tensors}
    extra = sorted(set(node.attrs) - others)
    if extra or any(v is not None for v in args[len(tensors) :]):
        raise ValueError(
            f"custom op {node.op}: its inputs or attributes {extra} do not fit the "
            f"registered schema {schema}"
        )
    kwargs: dict[str, Any] = {a.name: v for a, v in zip(tensors, args) if v is not None}
    kwargs.update((a.name, node.attrs[a.name]) for a in schema.arguments if a.name in node.attrs)
    if not all(_ident(k) for k in kwargs):
        raise ValueError(f"custom op {node.op}: argument names are not identifiers")
    return path, kwargs


def call(node: Node, args: list[Any]) -> ast.expr:
    """The call of ``node``'s op: ``args`` are its inputs as code (None for absent ones)."""
    path, kwargs = _arguments(node, args)
    return code.call(path, **kwargs)
